//! The plan of a rewind: for each path the turns from T on captured, its
//! oldest pre-image among them, as one step (see the module doc of
//! [`super`]).

use std::collections::HashMap;

use super::{Action, RewindPlan, Step};
use crate::error::Result;
use crate::id::{BlobId, TurnId};
use crate::log::Pre;
use crate::names::Folding;
use crate::path::RelPath;
use crate::store::Store;

/// `oldest` (each path's oldest capture, sorted by path) with the
/// spellings of one file taken as one path where the file system folds
/// them: `Readme.md` captured by a file tool and `README.md` found by a
/// later command's snapshot, or `café` in NFC and in NFD, are one file
/// there, and restoring both would write it twice (the later write
/// winning, whichever it is) or delete as "created" what the other
/// restores. The oldest capture among the spellings stands, under its own
/// spelling. Spellings captured by one record all stand: a case-only
/// rename is recorded as one spelling gone and the other made, and a
/// rewind needs both.
fn fold_spellings<'a, T>(
    oldest: Vec<(&'a RelPath, u64, T)>,
    folding: Folding,
) -> Vec<(&'a RelPath, u64, T)> {
    if !folding.any() {
        return oldest;
    }
    let keys: Vec<std::borrow::Cow<'a, [u8]>> = oldest
        .iter()
        .map(|(path, ..)| folding.key(path.as_bytes()))
        .collect();
    let mut first: HashMap<&[u8], u64> = HashMap::with_capacity(oldest.len());
    for (key, (_, seq, _)) in keys.iter().zip(&oldest) {
        first
            .entry(key.as_ref())
            .and_modify(|s| *s = (*s).min(*seq))
            .or_insert(*seq);
    }
    let keep: Vec<bool> = keys
        .iter()
        .zip(&oldest)
        .map(|(key, (_, seq, _))| first.get(key.as_ref()) == Some(seq))
        .collect();
    drop(first);
    oldest
        .into_iter()
        .zip(keep)
        .filter_map(|(e, k)| k.then_some(e))
        .collect()
}

pub(crate) fn steps_from<'a>(
    states: impl Iterator<Item = (&'a RelPath, &'a Pre)>,
    store: &Store,
) -> Vec<Step> {
    let mut steps: Vec<Step> = states
        .map(|(path, pre)| Step {
            path: path.clone(),
            action: match (path.reason_not_here(), pre) {
                // A store made elsewhere may hold a name this file system
                // cannot (`CON`, `a:b` on Windows): reported, never reached.
                (Some(reason), _) => Action::CannotRestore { reason },
                (
                    None,
                    Pre::File {
                        blob,
                        size,
                        mode,
                        link,
                    },
                ) => {
                    if store.has_blob(blob) {
                        Action::Restore {
                            blob: *blob,
                            size: *size,
                            mode: *mode,
                            link: *link,
                        }
                    } else {
                        Action::CannotRestore {
                            reason: format!("its blob {blob} is not in the store"),
                        }
                    }
                }
                (None, Pre::Symlink { target }) => Action::RestoreSymlink {
                    target: target.clone(),
                },
                (None, Pre::Dir { mode }) => Action::MakeDir { mode: *mode },
                (None, Pre::Fifo { mode }) => Action::MakeFifo { mode: *mode },
                (None, Pre::Absent) => Action::Delete,
                (None, Pre::Skipped { reason, .. }) => Action::CannotRestore {
                    reason: format!("it was not saved at capture: {reason}"),
                },
                (
                    None,
                    Pre::Aside {
                        seq, n, size, mode, ..
                    },
                ) => Action::RestoreKept {
                    seq: *seq,
                    n: *n,
                    size: *size,
                    mode: *mode,
                },
            },
        })
        .collect();
    steps.sort_by(|a, b| a.path.cmp(&b.path));
    steps
}

impl Store {
    pub(crate) fn has_blob(&self, id: &BlobId) -> bool {
        self.index.blobs.contains_key(id)
    }

    /// Builds the plan for rewinding `turn` and every later turn.
    pub fn plan_rewind(&self, turn: &TurnId) -> Result<RewindPlan> {
        let first = self.turn(turn)?.first_seq;
        let turns = self.turns_from(turn)?;
        // The oldest capture of each path, found by sorting references (a
        // map of 100,000 paths took 8 MB).
        let mut oldest: Vec<(&RelPath, u64, &Pre)> = turns
            .iter()
            .flat_map(|t| &t.files)
            .map(|c| (&c.entry.path, c.seq, &c.entry.pre))
            .collect();
        // A reverted turn's paths its revert left as they were: their
        // pre-images are still what the folder held before that turn.
        let kept = self.index.kept_reverted()?;
        for (seq, paths) in kept.iter().filter(|(seq, _)| *seq >= first) {
            let Some(t) = self.index.turn_at(*seq)? else {
                continue;
            };
            oldest.extend(
                paths
                    .iter()
                    .filter_map(|p| t.captured(p))
                    .map(|c| (&c.entry.path, c.seq, &c.entry.pre)),
            );
        }
        oldest.sort_unstable_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
        oldest.dedup_by(|later, first| later.0 == first.0);
        // A capture made while an operation that an undo reversed stood.
        // A file it kept aside whose store name is gone: it left the path.
        let mut buckets = crate::aside::Buckets::default();
        self.index.before_reversed(first, &mut oldest, |pre| {
            let (Pre::Aside { seq, n, .. }, Some(dirs)) = (pre, &self.place.dirs) else {
                return false;
            };
            let kept = |b: &crate::sys::OwnedFd| {
                matches!(crate::fsx::lstat_at(b, n.to_string().as_str()), Ok(Some(_)))
            };
            !matches!(buckets.reach(&dirs.store, *seq, *n), Ok(Some(b)) if kept(b))
        });
        let oldest = fold_spellings(oldest, self.folding());
        let steps = steps_from(oldest.into_iter().map(|(p, _, pre)| (p, pre)), self);
        Ok(RewindPlan {
            from_seq: first,
            turns: turns.iter().map(|t| t.id.clone()).collect(),
            steps,
        })
    }

    /// What the project's file system does not tell apart in names:
    /// Unicode normalization on macOS (APFS, HFS+), and case where the
    /// platform's default file systems fold it (macOS, Windows) and the
    /// project's does too: its marker directory answers to `.TURNBACK` as
    /// well (a case-sensitive APFS volume, or a Windows directory made
    /// case-sensitive, does not).
    pub(crate) fn folding(&self) -> Folding {
        let case = crate::sys::CASE_INSENSITIVE_DEFAULT && {
            let ident = |name: &str| {
                crate::sys::fs::statat(
                    &self.place.root_fd,
                    name,
                    crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .ok()
                .map(|st| (crate::sys::dev(&st), st.st_ino))
            };
            match ident(crate::path::STORE_DIR) {
                Some(marker) => ident(&crate::path::STORE_DIR.to_ascii_uppercase()) == Some(marker),
                // No marker to ask: the platform's default.
                None => true,
            }
        };
        Folding {
            case,
            normalization: crate::sys::NORMALIZATION_INSENSITIVE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_file_are_one_path_where_the_file_system_folds_them() {
        let path = |s: &str| RelPath::parse(s).expect("a relative path");
        let (nfc, nfd) = (path("caf\u{e9}.txt"), path("cafe\u{301}.txt"));
        let (upper, lower) = (path("README.md"), path("readme.md"));
        let other = path("other.txt");
        // A file tool captured `café` (NFC) and `readme.md` at 3 and 4; a
        // snapshot found them as the directory spells them at 7.
        let mut oldest = vec![
            (&upper, 7, 'u'),
            (&nfd, 7, 'd'),
            (&nfc, 3, 'c'),
            (&other, 7, 'o'),
            (&lower, 4, 'l'),
        ];
        oldest.sort_by(|a, b| a.0.cmp(b.0));
        let kept = |f: Folding| -> Vec<char> {
            let mut v: Vec<char> = fold_spellings(oldest.clone(), f)
                .into_iter()
                .map(|e| e.2)
                .collect();
            v.sort();
            v
        };
        let macos = Folding {
            case: true,
            normalization: true,
        };
        let windows = Folding {
            case: true,
            normalization: false,
        };
        assert_eq!(kept(macos), ['c', 'l', 'o']);
        assert_eq!(kept(windows), ['c', 'd', 'l', 'o'], "NTFS: two names");
        assert_eq!(kept(Folding::default()), ['c', 'd', 'l', 'o', 'u']);
        // A case-only rename, recorded by one snapshot: both stand.
        let renamed = vec![(&upper, 5, 'u'), (&lower, 5, 'l')];
        assert_eq!(fold_spellings(renamed, macos).len(), 2);
    }
}
