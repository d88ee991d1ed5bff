//! The comparison of two scans: what changed between the old tree state
//! and the new walk, grouped for people ([`Changes`]), and the pre-image of
//! every changed path taken from the old tree (what a rewind needs).
//!
//! Both lists are in byte order of paths and are merged in one pass. An old
//! path missing from the new scan is deleted, a new one created; a path in
//! both changed when its type, bytes, permission bits, symlink target or
//! (for a directory, FIFO or special file, see [`crate::entry_pre`]) mode
//! changed. A deletion and a creation of the same inode with the same
//! bytes and mtime are shown as a rename (a rename keeps the mtime; a file
//! deleted and another made with the same bytes, which the file system
//! gave the freed inode number, has a new one). A change that cannot be
//! undone (to an excluded path, inside a directory that was not covered,
//! or whose pre-image the store lacks) is listed as not captured and recorded as a
//! skipped pre-image at the nearest storable path, so a rewind reports it.

use std::collections::{HashMap, HashSet};

use super::{ChangeKind, Changes, NotCaptured, Renamed};
use crate::entry_pre;
use crate::id::BlobId;
use crate::log::{FileEntry, Post, Pre, StatKey};
use crate::path::RelPath;
use crate::tree::{Entry, Kind, Stat};

/// A path for people: lossy UTF-8, directories with a trailing `/`.
pub(super) fn shown_path(e: &Entry) -> String {
    let mut s = e.path_lossy();
    let is_dir = matches!(e.kind, Kind::Dir)
        || crate::sys::file_type(e.stat.mode) == crate::sys::fs::FileType::Directory;
    if is_dir {
        s.push('/');
    }
    s
}

fn rel(e: &Entry) -> Option<RelPath> {
    RelPath::from_bytes(&e.path).ok()
}

/// The entry at `path` in sorted `entries`.
pub(super) fn entry_at<'a>(entries: &'a [Entry], path: &[u8]) -> Option<&'a Entry> {
    entries
        .binary_search_by(|e| e.path.as_slice().cmp(path))
        .ok()
        .map(|i| &entries[i])
}

/// The state of the entry at a path of a scan (`None`: absent), as a
/// post-image; a file's with its [`StatKey`] when `look` vouches for it,
/// so that a rewind knows the file by its `lstat` instead of reading it
/// again.
pub(super) fn post_of(entry: Option<&Entry>, look: Option<Look>) -> Post {
    match entry {
        None => Post::Absent,
        Some(e) => match &e.kind {
            Kind::File { blob } => Post::File {
                sha256: *blob,
                stat: look.and_then(|l| l.key(&e.stat)),
            },
            Kind::Symlink { target } => Post::Symlink {
                target: target.clone(),
            },
            Kind::Dir => Post::Dir,
            Kind::Excluded(_) => Post::Other,
        },
    }
}

/// What makes a scan's look at a file a [`StatKey`]: the device of the
/// project root and the scan's stamp, the file system's clock read before
/// the walk began.
#[derive(Debug, Clone, Copy)]
pub(super) struct Look {
    pub(super) dev: u64,
    pub(super) stamp_ns: i64,
}

impl Look {
    /// The key of a file entry of the scan, when it can be trusted later:
    /// as for the tree's own entries (see [`crate::tree`]), a file whose
    /// `mtime` and `ctime` are both before the stamp holds the bytes
    /// hashed for as long as its stat stays the same, since any change
    /// after the stamp sets its `ctime` to the stamp or later. A file on
    /// another device than the root gets the root's device in its key,
    /// which its own stat never matches: it is read again, never trusted
    /// wrongly.
    fn key(self, st: &Stat) -> Option<StatKey> {
        (!st.racy(self.stamp_ns)).then_some(StatKey {
            dev: self.dev,
            ino: st.ino,
            size: st.size,
            mtime: st.mtime_ns,
            ctime: st.ctime_ns,
        })
    }
}

/// Compares two sorted entry lists. Returns the changes grouped for people
/// and the pre-image of every changed path (what a rewind needs).
/// `blob_size` says whether the store holds a blob, and its size.
pub(super) fn diff(
    old: &[Entry],
    new: &[Entry],
    blob_size: impl Fn(&BlobId) -> Option<u64>,
) -> (Changes, Vec<FileEntry>) {
    diff_within(old, old, new, None, blob_size)
}

/// [`diff`] of the entries `old` of the old tree `whole` (its entries at
/// some paths) and `new`, the entries at those paths now; the rest of
/// `whole` is taken as unchanged (a scan of the paths Watchman named, see
/// `walk::Patch`). `whole` says which old paths were excluded and which
/// old files were hard links.
pub(super) fn diff_within(
    whole: &[Entry],
    old: &[Entry],
    new: &[Entry],
    all_files: Option<&crate::tree::Partial>,
    blob_size: impl Fn(&BlobId) -> Option<u64>,
) -> (Changes, Vec<FileEntry>) {
    let mut d = Differ {
        ch: Changes::default(),
        files: Vec::new(),
        gone_files: HashMap::new(),
        new_files: Vec::new(),
        old_excluded: std::cell::OnceCell::new(),
        whole,
        all_files,
        old,
        linked: std::cell::OnceCell::new(),
        blob_size,
    };
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let ord = match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) => o.path.cmp(&n.path),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                d.deleted(&old[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                d.created(&new[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                d.in_both(&old[i], &new[j]);
                i += 1;
                j += 1;
            }
        }
    }
    d.pair_renames();
    (d.ch, d.files)
}

/// The state of one comparison.
struct Differ<'a, F> {
    ch: Changes,
    files: Vec<FileEntry>,
    /// For rename pairing: (inode, blob, mtime) of deleted files, with
    /// their index in `ch.deleted`.
    gone_files: HashMap<(u64, BlobId, i64), usize>,
    /// (inode, blob, mtime) of created files, with their index in
    /// `ch.created`.
    new_files: Vec<((u64, BlobId, i64), usize)>,
    /// Paths the old scan left out: found when the first created entry
    /// asks.
    old_excluded: std::cell::OnceCell<HashSet<&'a [u8]>>,
    /// The whole old tree, or the part of it read (see
    /// `crate::tree::partial`), which holds every entry whose path is an
    /// ancestor of one compared.
    whole: &'a [Entry],
    /// With a part, what it knows of the whole tree: how many of its files
    /// have each inode.
    all_files: Option<&'a crate::tree::Partial>,
    /// Its entries compared (all of them, or those at the paths looked at).
    old: &'a [Entry],
    /// Inodes two or more old file entries share (hard links): found when
    /// the first pre-image is taken, so a diff with nothing changed pays
    /// nothing for them (a set of 100,000 inodes).
    linked: std::cell::OnceCell<crate::links::SharedInodes>,
    blob_size: F,
}

impl<F: Fn(&BlobId) -> Option<u64>> Differ<'_, F> {
    fn linked(&self) -> &crate::links::SharedInodes {
        self.linked.get_or_init(|| {
            fn files(list: &[Entry]) -> impl Iterator<Item = u64> + '_ {
                list.iter()
                    .filter(|e| matches!(e.kind, Kind::File { .. }))
                    .map(|e| e.stat.ino)
            }
            // Read in part: their inodes are looked up in the tree file's
            // index. A few paths of a large tree: their inodes are looked
            // for in one pass instead of sorting every inode.
            if let Some(all) = self.all_files {
                all.shared_files(files(self.old))
            } else if self.old.len() < self.whole.len() / 8 {
                crate::links::shared_inodes_of(files(self.old), files(self.whole))
            } else {
                crate::links::shared_inodes(files(self.whole))
            }
        })
    }

    /// The pre-image of an old covered entry (with its hard-link key), or
    /// why there is none.
    fn pre_of(&self, o: &Entry) -> Result<Pre, String> {
        entry_pre::pre_of(o, &self.blob_size).map(|pre| match pre {
            Pre::File {
                blob, size, mode, ..
            } => Pre::File {
                blob,
                size,
                mode,
                link: self.linked().contains(&o.stat.ino).then_some(o.stat.ino),
            },
            other => other,
        })
    }

    /// The old excluded directory `p` lies in, if any.
    fn inside_excluded(&self, p: &[u8]) -> Option<String> {
        let old_excluded = self.old_excluded.get_or_init(|| {
            self.whole
                .iter()
                .filter(|e| matches!(e.kind, Kind::Excluded(_)))
                .map(|e| e.path.as_slice())
                .collect()
        });
        if old_excluded.is_empty() {
            return None;
        }
        p.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(|(k, _)| &p[..k])
            .find(|anc| old_excluded.contains(anc))
            .map(|anc| String::from_utf8_lossy(anc).into_owned())
    }

    /// Records a change that cannot be undone: listed for people, and a
    /// skipped pre-image at the nearest storable path for the rewind.
    fn not_captured(&mut self, e: &Entry, change: ChangeKind, reason: String) {
        if let Some((path, own)) = crate::path::nearest_storable(&e.path) {
            let whose = if own {
                String::new()
            } else {
                format!("{}: ", shown_path(e))
            };
            self.files.push(FileEntry {
                path,
                pre: Pre::Skipped {
                    reason: format!("not captured by the snapshot: {whose}{reason}"),
                    size: e.stat.size,
                },
            });
        }
        self.ch.not_captured.push(NotCaptured {
            path: shown_path(e),
            change,
            reason,
        });
    }

    fn deleted(&mut self, o: &Entry) {
        match (self.pre_of(o), rel(o)) {
            (Ok(pre), Some(path)) => {
                if let Kind::File { blob } = &o.kind {
                    self.gone_files
                        .insert((o.stat.ino, *blob, o.stat.mtime_ns), self.ch.deleted.len());
                }
                self.ch.deleted.push(shown_path(o));
                self.files.push(FileEntry { path, pre });
            }
            (Err(why), _) => self.not_captured(o, ChangeKind::Deleted, why),
            (Ok(_), None) => {}
        }
    }

    fn created(&mut self, n: &Entry) {
        if let Some(anc) = self.inside_excluded(&n.path) {
            let why = format!("inside {anc}/, which was not covered before");
            self.not_captured(n, ChangeKind::Created, why);
            return;
        }
        match &n.kind {
            Kind::Excluded(x) if !entry_pre::created_special(n) => {
                self.not_captured(n, ChangeKind::Created, x.describe())
            }
            _ => {
                if let Some(path) = rel(n) {
                    if let Kind::File { blob } = &n.kind {
                        self.new_files
                            .push(((n.stat.ino, *blob, n.stat.mtime_ns), self.ch.created.len()));
                    }
                    self.ch.created.push(shown_path(n));
                    self.files.push(FileEntry {
                        path,
                        pre: Pre::Absent,
                    });
                }
            }
        }
    }

    fn in_both(&mut self, o: &Entry, n: &Entry) {
        let changed = match entry_pre::kept_changed(o, n) {
            Some(changed) => changed,
            None => match (&o.kind, &n.kind) {
                (Kind::File { blob: a }, Kind::File { blob: b }) => {
                    a != b || o.stat.perm() != n.stat.perm()
                }
                (Kind::Symlink { target: a }, Kind::Symlink { target: b }) => a != b,
                (Kind::Dir, Kind::Dir) => false,
                (Kind::Excluded(_), Kind::Excluded(x)) => {
                    if o.stat != n.stat {
                        self.not_captured(n, ChangeKind::Modified, x.describe());
                    }
                    false
                }
                (Kind::Excluded(x), _) => {
                    if !matches!(n.kind, Kind::Dir) {
                        let why = format!("it was not covered before: {}", x.describe());
                        self.not_captured(n, ChangeKind::Modified, why);
                    }
                    false
                }
                // The directory became excluded: its old files show as deleted.
                (Kind::Dir, Kind::Excluded(_)) => false,
                _ => true,
            },
        };
        if changed {
            match (self.pre_of(o), rel(o)) {
                (Ok(pre), Some(path)) => {
                    self.ch.modified.push(shown_path(n));
                    self.files.push(FileEntry { path, pre });
                }
                (Err(why), _) => self.not_captured(n, ChangeKind::Modified, why),
                (Ok(_), None) => {}
            }
        }
    }

    /// Pairs deletions and creations of the same inode, bytes and mtime:
    /// renames.
    fn pair_renames(&mut self) {
        let mut moved_from: HashSet<usize> = HashSet::new();
        let mut moved_to: HashSet<usize> = HashSet::new();
        for (key, k) in std::mem::take(&mut self.new_files) {
            if let Some(&d) = self.gone_files.get(&key)
                && moved_from.insert(d)
            {
                moved_to.insert(k);
                self.ch.renamed.push(Renamed {
                    from: self.ch.deleted[d].clone(),
                    to: self.ch.created[k].clone(),
                });
            }
        }
        if !moved_from.is_empty() {
            let keep = |list: Vec<String>, drop: &HashSet<usize>| -> Vec<String> {
                list.into_iter()
                    .enumerate()
                    .filter(|(k, _)| !drop.contains(k))
                    .map(|(_, p)| p)
                    .collect()
            };
            self.ch.deleted = keep(std::mem::take(&mut self.ch.deleted), &moved_from);
            self.ch.created = keep(std::mem::take(&mut self.ch.created), &moved_to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, ino: u64, mtime_ns: i64, bytes: &[u8]) -> Entry {
        let mut blob = [0; 32];
        blob[..bytes.len()].copy_from_slice(bytes);
        Entry {
            path: path.as_bytes().to_vec(),
            stat: Stat {
                size: bytes.len() as u64,
                mtime_ns,
                ctime_ns: mtime_ns,
                ino,
                mode: 0o100644,
            },
            kind: Kind::File { blob: BlobId(blob) },
        }
    }

    /// A rename keeps the inode, the bytes and the mtime. A file deleted
    /// and another made with its bytes, which the file system gave the
    /// freed inode number, has a new mtime: a deletion and a creation.
    #[test]
    fn a_rename_is_the_same_inode_bytes_and_mtime() {
        let old = [file("a/c", 7, 1_000, b"x\n")];
        let moved = [file("b/c", 7, 1_000, b"x\n")];
        let (ch, _) = diff(&old, &moved, |_| Some(2));
        assert_eq!(
            ch.renamed,
            [Renamed {
                from: "a/c".into(),
                to: "b/c".into()
            }]
        );
        assert!(ch.deleted.is_empty() && ch.created.is_empty(), "{ch:?}");
        let made_again = [file("b/c", 7, 2_000, b"x\n")];
        let (ch, _) = diff(&old, &made_again, |_| Some(2));
        assert!(ch.renamed.is_empty(), "{ch:?}");
        assert_eq!(
            (ch.deleted, ch.created),
            (vec!["a/c".to_owned()], vec!["b/c".to_owned()])
        );
        let other_bytes = [file("b/c", 7, 1_000, b"y\n")];
        assert!(diff(&old, &other_bytes, |_| Some(2)).0.renamed.is_empty());
    }
}
