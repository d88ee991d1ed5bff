//! One scan of the project: the walk ([`super::walk`]) merged with the old
//! tree state, then the reads ([`super::read`]) of what the merge could not
//! vouch for.
//!
//! A file whose stat (size, mtime, ctime, inode, mode) equals the old
//! tree's and was not racily clean (changed in the same clock tick as the
//! old scan's stamp) keeps its blob without being read; in the storing
//! mode only if the store still holds that blob. Every other file is read.

use crate::sys::fs::{Mode, OFlags};

use super::walk::{self, Found, FoundKind, Listing};
use super::{Progress, ScanStats};
use crate::error::{IoResultExt, Result};
use crate::exclude::{Ignores, build_matcher};
use crate::fsmonitor::Unheld;
use crate::id::BlobId;
use crate::log::StoredBlob;
use crate::pack::PackWriter;
use crate::store::Store;
use crate::tree::{self, Entry, Kind, Tree};

/// The outcome of a scan.
pub(super) struct Scan {
    pub(super) entries: Vec<Entry>,
    pub(super) stats: ScanStats,
    pub(super) pack: Option<(PackWriter, Vec<StoredBlob>)>,
    pub(super) warnings: Vec<String>,
    /// The device of the project root (see [`super::diff::post_of`]).
    pub(super) dev: Option<u64>,
    /// Why the whole tree was walked; `None` when only the paths Watchman
    /// named were looked at (see [`walk::walk_changed`]).
    pub(super) full_walk: Option<String>,
    /// Whether every blob the stat cache vouched for was looked up in the
    /// index (see [`crate::tree`]'s `tree-recheck`).
    pub(super) rechecked: bool,
    /// The walk found exactly the old tree's entries, each with its old
    /// stat, and nothing was read: `entries` is empty and the old tree's
    /// are the scan's (storing only; see [`walk::Listing::AsOld`]).
    pub(super) as_old: bool,
    /// The walk listed every directory of a tree a Watchman half wrote
    /// (see `Store::listed_whole`).
    pub(super) relisted: bool,
    /// Only the paths Watchman named were looked at (storing, without a
    /// recheck): `entries` are the entries at those paths now, and the old
    /// tree's entries at these indexes (ascending) are gone or replaced by
    /// them; every other old entry is the scan's as it is (see
    /// [`walk::Patch`]).
    pub(super) patch: Option<Vec<usize>>,
    /// The old tree was read in part and this scan needs it whole: nothing
    /// was read or stored, and the scan must run again with the whole tree
    /// (see [`crate::tree::partial`]).
    pub(super) needs_whole: bool,
    /// The new tree's entries with a name it does not hold (see
    /// [`crate::fsmonitor::Unheld`]).
    pub(super) unheld: Unheld,
}

/// How a scan treats file contents.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// Hash every file not known by its stat and store what is new.
    Store,
    /// Hash only files the old tree has with another stat (for `status`).
    Compare,
}

impl Store {
    /// Walks the project and reads what the stat cache cannot vouch for.
    /// With `changed` (the paths Watchman says changed since `old` was
    /// taken, and `old`'s entries with names it does not hold), only those
    /// are looked at on top of `old`, unless the walk finds it must look at
    /// everything; `Err(why)`: the whole tree is walked, for that reason.
    pub(super) fn scan(
        &self,
        old: Option<&Tree>,
        mode: Reading,
        changed: std::result::Result<(Vec<Vec<u8>>, &Unheld), String>,
        progress: &dyn Progress,
        partial: Option<&tree::Partial>,
    ) -> Result<Scan> {
        let mut warnings = Vec::new();
        let (matcher, files_too) = build_matcher(&self.place.root, &mut warnings)?;
        // A descriptor of its own: a dup would share the listing offset.
        let root_fd = crate::sys::fs::openat(
            &self.place.root_fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ctx("open", &self.place.root)?;
        let dev = crate::sys::fs::fstat(&root_fd)
            .ok()
            .map(|st| crate::sys::dev(&st));
        let ignores = Ignores {
            dir: Vec::new(),
            matcher,
            files_too,
            parent: None,
        };
        let cap = self.options().max_file_size;
        // The stat cache's blobs are looked up only when the log may no
        // longer introduce them all (see `crate::tree`).
        let recheck = match (old, &self.place.dirs) {
            (Some(t), Some(dirs)) => tree::must_recheck(&dirs.store, t, self.index.last_seq),
            _ => true,
        };
        let walked = match (changed, old) {
            (Ok((paths, unheld)), Some(t)) => walk::walk_changed(
                &self.place.root,
                &root_fd,
                ignores.clone(),
                cap,
                self.store_inside(),
                progress,
                &t.entries,
                paths,
                partial,
                unheld,
            )
            .ctx("list", &self.place.root)?
            .map(|(patch, warnings, unheld)| (Listing::Patch(patch), warnings, unheld)),
            (Ok(_), None) => Err("there is no tree state to start from".to_owned()),
            (Err(why), _) => Err(why),
        };
        let mut relisted = false;
        // Read in part, the old tree serves only a walk of the paths named,
        // storing without a recheck.
        let known = (mode == Reading::Store && recheck).then_some(&self.index.blobs);
        if partial.is_some() && (walked.is_err() || known.is_some() || mode != Reading::Store) {
            return Ok(Scan::needs_whole());
        }
        let (full_walk, (found, walk_warnings, unheld)) = match walked {
            Ok(found) => (None, found),
            Err(why) => (
                Some(why),
                walk::walk(
                    &self.place.root,
                    root_fd,
                    ignores,
                    cap,
                    self.store_inside(),
                    progress,
                    old.map(|tree| {
                        let listed_whole = self.listed_whole(tree);
                        relisted = !listed_whole;
                        walk::Old {
                            tree,
                            listed_whole,
                            files_as_old: !recheck,
                        }
                    }),
                )
                .ctx("list", &self.place.root)?,
            ),
        };
        warnings.extend(walk_warnings);
        let (found, as_old, patch) = match (found, old) {
            (Listing::Found(found), _) => (found, false, None),
            // Storing, with the stat cache trusted: what stays of the old
            // tree is not looked at again.
            (Listing::Patch(patch), Some(_)) if mode == Reading::Store && known.is_none() => {
                (patch.fresh, false, Some(patch.dropped))
            }
            (Listing::Patch(patch), _) => (
                patch.whole(old.map_or(&[][..], |t| t.entries.as_slice())),
                false,
                None,
            ),
            // Exactly the old tree: storing, its entries are taken as they
            // are by the caller, which owns them (see `Scan::as_old`).
            (Listing::AsOld(tot), Some(_)) if mode == Reading::Store => {
                return Ok(Scan {
                    entries: Vec::new(),
                    stats: ScanStats {
                        files: tot.files,
                        bytes: tot.bytes,
                        dirs: tot.dirs,
                        symlinks: tot.symlinks,
                        excluded: tot.excluded,
                        ..ScanStats::default()
                    },
                    pack: None,
                    warnings,
                    dev,
                    full_walk,
                    rechecked: false,
                    as_old: true,
                    relisted,
                    patch: None,
                    needs_whole: false,
                    unheld,
                });
            }
            (Listing::AsOld(_), _) => (
                old.map_or_else(Vec::new, |t| t.entries.iter().map(walk::found_of).collect()),
                false,
                None,
            ),
        };
        let (mut entries, to_read, read_bytes) = merge(found, old, known, mode);
        progress.hashing(to_read.len() as u64, read_bytes);
        let reads = self.read_changed(&mut entries, &to_read, mode, progress)?;
        progress.done();
        if !reads.gone.is_empty() {
            let mut k = 0;
            entries.retain(|_| {
                k += 1;
                !reads.gone.contains(&(k - 1))
            });
        }
        // With a patch: the whole old tree's counts (those a part kept),
        // less the old entries dropped, plus the fresh ones.
        let stats = match (&patch, old) {
            (Some(dropped), Some(t)) => {
                let tot = tree::Totals::patched(
                    partial.map_or_else(|| tree::Totals::of(&t.entries), |p| p.totals),
                    dropped.iter().map(|&i| &t.entries[i]),
                    &entries,
                );
                ScanStats {
                    files: tot.files,
                    bytes: tot.bytes,
                    dirs: tot.dirs,
                    symlinks: tot.symlinks,
                    excluded: tot.excluded,
                    ..reads.stats
                }
            }
            _ => Self::counted(&entries, reads.stats),
        };
        Ok(Scan {
            stats,
            entries,
            patch,
            pack: reads.pack,
            warnings,
            dev,
            full_walk,
            rechecked: known.is_some(),
            as_old,
            relisted,
            needs_whole: false,
            unheld,
        })
    }

    /// `stats` with the files, bytes, directories, symlinks and excluded
    /// paths of `entries` added.
    fn counted(entries: &[Entry], mut stats: ScanStats) -> ScanStats {
        for e in entries {
            match &e.kind {
                Kind::File { .. } => {
                    stats.files += 1;
                    stats.bytes += e.stat.size;
                }
                Kind::Symlink { .. } => stats.symlinks += 1,
                Kind::Dir => stats.dirs += 1,
                Kind::Excluded(_) => stats.excluded += 1,
            }
        }
        stats
    }
}

impl Scan {
    /// A scan that did nothing, since the old tree must be read whole.
    fn needs_whole() -> Scan {
        Scan {
            entries: Vec::new(),
            stats: ScanStats::default(),
            pack: None,
            warnings: Vec::new(),
            dev: None,
            full_walk: None,
            rechecked: false,
            as_old: false,
            relisted: false,
            patch: None,
            needs_whole: true,
            unheld: Unheld::Many,
        }
    }
}

impl Store {
    /// Whether every directory stat in the tree `t` was taken by a walk
    /// that listed the directory (or found it unchanged): not so for a
    /// tree a half that looked only at the paths Watchman named wrote, as
    /// the fsmonitor state going with it says. Such a half takes a changed
    /// directory's new stat without listing it, so a full walk after it
    /// (Watchman could not vouch for an answer) lists every directory, and
    /// a name Watchman did not report cannot hide behind a stat.
    fn listed_whole(&self, t: &Tree) -> bool {
        let Some(dirs) = &self.place.dirs else {
            return true;
        };
        !crate::fsmonitor::state::load(&dirs.store).is_some_and(|st| {
            st.used == crate::fsmonitor::Used::Watchman && st.tree.0 == t.stamp_ns
        })
    }
}

/// Merges the walk with the old tree (both in byte order of paths).
/// Returns the new entries (a file still to be read has a zero blob), the
/// indexes of the files to read, in order, and their bytes. With `known`
/// (the index's blobs), a file the stat cache vouches for keeps its blob
/// only if the store still holds it, checked for all of them at once.
fn merge(
    found: Vec<Found>,
    old: Option<&Tree>,
    known: Option<&crate::index::Blobs>,
    mode: Reading,
) -> (Vec<Entry>, Vec<usize>, u64) {
    let (old_entries, stamp) = match old {
        Some(t) => (t.entries.as_slice(), t.stamp_ns),
        None => (&[][..], i64::MIN),
    };
    let mut oi = 0;
    let mut entries: Vec<Entry> = Vec::with_capacity(found.len());
    crate::sys::huge_pages(&mut entries);
    let mut to_read: Vec<usize> = Vec::new();
    // Files the stat cache vouches for: their blobs must still be stored.
    let mut vouched: Vec<(usize, BlobId)> = Vec::new();
    for f in found {
        while oi < old_entries.len() && old_entries[oi].path < f.path {
            oi += 1;
        }
        let prev = old_entries.get(oi).filter(|o| o.path == f.path);
        let kind = match f.kind {
            FoundKind::Symlink(target) => Kind::Symlink { target },
            FoundKind::Dir => Kind::Dir,
            FoundKind::Excluded(x) => Kind::Excluded(x),
            FoundKind::File => {
                let cached = match prev {
                    Some(Entry {
                        stat,
                        kind: Kind::File { blob },
                        ..
                    }) if *stat == f.stat && !stat.racy(stamp) => Some(*blob),
                    _ => None,
                };
                // Comparing, a file is read only if there is something to
                // compare it with: an old file, or (to pair renames) no old
                // entry at all in an existing tree.
                let need = cached.is_none()
                    && match mode {
                        Reading::Store => true,
                        Reading::Compare => match prev {
                            Some(p) => matches!(p.kind, Kind::File { .. }),
                            None => old.is_some(),
                        },
                    };
                match cached {
                    _ if need => to_read.push(entries.len()),
                    Some(blob) if known.is_some() => vouched.push((entries.len(), blob)),
                    _ => {}
                }
                Kind::File {
                    blob: cached.unwrap_or(BlobId([0; 32])),
                }
            }
        };
        entries.push(Entry {
            path: f.path,
            stat: f.stat,
            kind,
        });
    }
    if let Some(known) = known.filter(|_| !vouched.is_empty()) {
        let mut missing: Vec<BlobId> = vouched.iter().map(|(_, blob)| *blob).collect();
        missing.sort_unstable();
        missing.dedup();
        known.retain_missing(&mut missing);
        if !missing.is_empty() {
            for (k, blob) in vouched {
                if missing.binary_search(&blob).is_ok() {
                    entries[k].kind = Kind::File {
                        blob: BlobId([0; 32]),
                    };
                    to_read.push(k);
                }
            }
            to_read.sort_unstable();
        }
    }
    let read_bytes = to_read.iter().map(|&k| entries[k].stat.size).sum();
    (entries, to_read, read_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::TurnId;
    use crate::pack::BlobLoc;
    use crate::tree::Stat;

    fn file(path: &str, ino: u64) -> Found {
        Found {
            path: path.as_bytes().to_vec(),
            stat: Stat {
                size: 3,
                mtime_ns: 10,
                ctime_ns: 10,
                ino,
                mode: 0o100644,
            },
            kind: FoundKind::File,
        }
    }

    /// A file the stat cache vouches for keeps its blob when the store has
    /// it, and is read again when the store lost it; a changed file is
    /// read; comparing, nothing vouched for is read.
    #[test]
    fn a_vouched_file_is_read_again_only_when_its_blob_is_gone() {
        let (kept, lost, other) = (BlobId([1; 32]), BlobId([2; 32]), BlobId([3; 32]));
        let mut known = crate::index::Blobs::default();
        let loc = BlobLoc {
            pack: std::sync::Arc::from("p"),
            offset: 0,
            len: 3,
            size: 3,
            base: None,
        };
        known.insert_sorted(vec![(kept, loc)]);
        let found = || vec![file("a", 1), file("b", 2), file("c", 3), file("d", 9)];
        let old = Tree {
            stamp_ns: 100,
            log_seq: 1,
            turn: TurnId::new("t").expect("valid"),
            pending: false,
            entries: found()
                .into_iter()
                .zip([kept, lost, kept, other])
                .map(|(f, blob)| Entry {
                    path: f.path,
                    // `d` had another inode: changed since.
                    stat: Stat {
                        ino: if f.stat.ino == 9 { 4 } else { f.stat.ino },
                        ..f.stat
                    },
                    kind: Kind::File { blob },
                })
                .collect(),
        };
        let (entries, to_read, bytes) = merge(found(), Some(&old), Some(&known), Reading::Store);
        assert_eq!(to_read, [1, 3], "b's blob is gone, d changed");
        assert_eq!(bytes, 6);
        let blob = |k: usize| match entries[k].kind {
            Kind::File { blob } => blob,
            _ => BlobId([9; 32]),
        };
        assert_eq!([blob(0), blob(1), blob(2)], [kept, BlobId([0; 32]), kept]);
        let (_, to_read, _) = merge(found(), Some(&old), None, Reading::Compare);
        assert_eq!(to_read, [3], "comparing, only the changed file is read");
        // Not looked up (the log is the one the tree was written with):
        // the stat cache alone vouches for b.
        let (entries, to_read, _) = merge(found(), Some(&old), None, Reading::Store);
        assert_eq!(to_read, [3], "only the changed file is read");
        assert!(matches!(entries[1].kind, Kind::File { blob } if blob == lost));
    }
}
