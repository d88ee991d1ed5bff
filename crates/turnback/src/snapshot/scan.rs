//! One scan of the project: the walk ([`super::walk`]) merged with the old
//! tree state, then the reads ([`super::read`]) of what the merge could not
//! vouch for.
//!
//! A file whose stat (size, mtime, ctime, inode, mode) equals the old
//! tree's and was not racily clean (changed in the same clock tick as the
//! old scan's stamp) keeps its blob without being read; in the storing
//! mode only if the store still holds that blob. Every other file is read.

use crate::sys::fs::{Mode, OFlags};

use super::walk::{self, Found, FoundKind};
use super::{Progress, ScanStats};
use crate::error::{IoResultExt, Result};
use crate::exclude::{Ignores, build_matcher};
use crate::id::BlobId;
use crate::log::StoredBlob;
use crate::pack::PackWriter;
use crate::store::Store;
use crate::tree::{Entry, Kind, Tree};

/// The outcome of a scan.
pub(super) struct Scan {
    pub(super) entries: Vec<Entry>,
    pub(super) stats: ScanStats,
    pub(super) pack: Option<(PackWriter, Vec<StoredBlob>)>,
    pub(super) warnings: Vec<String>,
    /// The device of the project root (see [`super::diff::post_in`]).
    pub(super) dev: Option<u64>,
    /// Why the whole tree was walked; `None` when only the paths Watchman
    /// named were looked at (see [`walk::walk_changed`]).
    pub(super) full_walk: Option<String>,
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
    /// taken), only those are looked at on top of `old`, unless the walk
    /// finds it must look at everything; `Err(why)`: the whole tree is
    /// walked, for that reason.
    pub(super) fn scan(
        &self,
        old: Option<&Tree>,
        mode: Reading,
        changed: std::result::Result<Vec<Vec<u8>>, String>,
        progress: &dyn Progress,
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
        let partial = match (changed, old) {
            (Ok(paths), Some(t)) => walk::walk_changed(
                &self.place.root,
                &root_fd,
                ignores.clone(),
                cap,
                self.store_inside(),
                progress,
                &t.entries,
                paths,
            )
            .ctx("list", &self.place.root)?,
            (Ok(_), None) => Err("there is no tree state to start from".to_owned()),
            (Err(why), _) => Err(why),
        };
        let (full_walk, (found, walk_warnings)) = match partial {
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
                )
                .ctx("list", &self.place.root)?,
            ),
        };
        warnings.extend(walk_warnings);

        let (mut entries, to_read, read_bytes) = merge(found, old, &self.index.blobs, mode);
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
        let mut stats = reads.stats;
        for e in &entries {
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
        Ok(Scan {
            entries,
            stats,
            pack: reads.pack,
            warnings,
            dev,
            full_walk,
        })
    }
}

/// Merges the walk with the old tree (both in byte order of paths).
/// Returns the new entries (a file still to be read has a zero blob), the
/// indexes of the files to read, and their bytes.
fn merge(
    found: Vec<Found>,
    old: Option<&Tree>,
    known: &crate::index::Blobs,
    mode: Reading,
) -> (Vec<Entry>, Vec<usize>, u64) {
    let (old_entries, stamp) = match old {
        Some(t) => (t.entries.as_slice(), t.stamp_ns),
        None => (&[][..], i64::MIN),
    };
    let mut oi = 0;
    let mut entries: Vec<Entry> = Vec::with_capacity(found.len());
    let mut to_read: Vec<usize> = Vec::new();
    let mut read_bytes = 0u64;
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
                    }) if *stat == f.stat
                        && !stat.racy(stamp)
                        && (mode == Reading::Compare || known.contains_key(blob)) =>
                    {
                        Some(*blob)
                    }
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
                if need {
                    to_read.push(entries.len());
                    read_bytes += f.stat.size;
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
    (entries, to_read, read_bytes)
}
