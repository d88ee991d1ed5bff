//! The index checkpoint `<store>/index`: the in-memory index
//! ([`crate::index`]) as it stood after a prefix of the log, so that opening
//! a store reads only the log lines appended since, not the whole log.
//!
//! It is a cache. The log stays the only record: a checkpoint that is
//! missing, damaged, of another version, or that does not name the log as
//! it is now is ignored and the whole log is read, as without it.
//!
//! Format, all integers LEB128 varints unless stated, strings and byte runs
//! a varint length then the bytes:
//!
//! ```text
//! magic     "turnback-index-3\n"       (17 bytes; the 3 is the version:
//!                                      version 2 added each capture's
//!                                      `shared_with` turns, version 3
//!                                      names the log by identity instead
//!                                      of hashing the prefix it covers)
//! log_dev   st_dev of the log file it was built from
//! log_ino   st_ino of that file
//! log_len   bytes of the log covered   (whole lines only; > 0)
//! log_head  SHA-256 of the first min(log_len, 4096) bytes (32 bytes)
//! log_tail  SHA-256 of the last min(log_len, 4096) bytes of the covered
//!           prefix, which end with its last line (32 bytes)
//! index     the index's fields in a fixed order; every map written sorted
//!           by key, so equal indexes give equal bytes; a pre-image is a
//!           tag (0 file, 1 symlink, 2 absent, 3 dir, 4 skipped, 5 fifo,
//!           6 file with its hard-link key after the mode) then its fields;
//!           a reader that does not know a tag ignores the checkpoint
//! check     CRC-32 (IEEE) of everything before it (4 bytes, little endian)
//! ```
//!
//! When it is trusted: opening reads the checkpoint and `fstat`s the log;
//! the checkpoint stands for the first `log_len` bytes of the log only if
//! the log is the same file (`st_dev`, `st_ino`), at least `log_len` long,
//! and its first and last 4 KiB of that prefix hash as recorded (two small
//! reads). The log's length is otherwise never read in full, so an open
//! costs the same for ten records as for ten thousand. Why that is sound:
//! - the log is append-only: every writer appends whole lines under the
//!   exclusive lock, and only gc and repair replace it, by rename. Both
//!   remove the checkpoint before the rename (under the exclusive lock,
//!   made durable by the directory fsync that makes the rename durable), so
//!   a checkpoint never outlives the log it was built from, even when a
//!   later log is given the same inode number;
//! - a log cut shorter than `log_len` is refused by its length; one cut
//!   and grown again, or replaced in place by other bytes, is refused
//!   unless its last 4 KiB before `log_len` are the same bytes: those end
//!   with the last covered line, its sequence number, its time in
//!   nanoseconds and its CRC, which no other record of a log shares;
//! - a torn append (no final newline) is never covered: a checkpoint covers
//!   whole lines read under the lock, and an unsynced line lost in a power
//!   cut changes the log's length or its last 4 KiB;
//! - what it does not catch: bytes changed in place in the middle of the
//!   covered prefix, the file, its length and both ends kept (a disk
//!   error, an edit by hand). Opening such a log trusts the checkpoint
//!   instead of refusing the store; `turnback verify` reads and checks every
//!   line (it does not use the checkpoint to build its index) and, when a
//!   checkpoint names the log, compares it with the index those lines give,
//!   so it reports both the damaged line and the checkpoint to delete.
//!   Damage at either end is still refused by the open.
//!
//! Write order: a temporary file in the store directory, then a rename over
//! `index`. It is not fsynced: after a power loss a lost or torn checkpoint
//! fails its check and is ignored. Written by any process that read at
//! least [`WRITE_AFTER`] bytes of log beyond the checkpoint it found, under
//! the shared or the exclusive lock (never while gc or repair replaces the
//! log, which hold the exclusive lock); two writers at once each rename a
//! complete file of their own.

use crate::sys::OwnedFd;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write as _;

use crate::fsx;
use crate::id::{BlobId, TurnId};
use crate::index::{Applied, Captured, Index, OpInfo, Turn};
use crate::log::{FileEntry, Post, Pre};
use crate::pack::{self, BlobLoc};
use crate::path::RelPath;

/// The file name in the store directory.
pub const INDEX_FILE: &str = "index";

const MAGIC: &[u8] = b"turnback-index-3\n";

/// A process that parsed at least this many bytes of log past the
/// checkpoint writes a new one.
pub(crate) const WRITE_AFTER: u64 = 64 << 10;

/// Bytes at each end of the covered log prefix whose hash the checkpoint
/// keeps.
const WINDOW: u64 = 4096;

/// The log a checkpoint covers: which file, how much of it, and what its
/// first and last [`WINDOW`] bytes of that prefix hash to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Covered {
    dev: u64,
    ino: u64,
    len: u64,
    head: [u8; 32],
    tail: [u8; 32],
}

impl Covered {
    /// What the first `len` bytes of `log` (the file `(dev, ino)`) are.
    fn of(log: &File, (dev, ino): (u64, u64), len: u64) -> Option<Covered> {
        let window = |at: u64| -> Option<[u8; 32]> {
            let n = usize::try_from(len.min(WINDOW)).ok()?;
            let mut buf = vec![0; n];
            crate::sys::read_exact_at(log, &mut buf, at).ok()?;
            Some(pack::hash_bytes(&buf).0)
        };
        Some(Covered {
            dev,
            ino,
            len,
            head: window(0)?,
            tail: window(len - len.min(WINDOW))?,
        })
    }
}

/// The index the checkpoint holds, if it is whole and covers a prefix of
/// `log`, the file `ident` (`(st_dev, st_ino)`) of `size` bytes: with it,
/// the log from `index.consumed` on remains to be read. Reads the
/// checkpoint and at most two small windows of the log, never the whole
/// log.
pub(crate) fn load(store: &OwnedFd, log: &File, ident: (u64, u64), size: u64) -> Option<Index> {
    // A cache: one that is not a regular file is ignored (the next write
    // replaces it by rename).
    let bytes = fsx::read_store_file(store, INDEX_FILE).ok()??;
    let (covered, index) = decode(&bytes)?;
    if (covered.dev, covered.ino) != ident || covered.len > size {
        return None;
    }
    (Covered::of(log, ident, covered.len)? == covered).then_some(index)
}

/// Writes a checkpoint of `index`, which was built from the first
/// `index.consumed` bytes (whole lines) of `log`, the file `ident`. Best
/// effort: the checkpoint is a cache, so an error only means the next open
/// reads more of the log.
pub(crate) fn write(store: &OwnedFd, index: &Index, log: &File, ident: (u64, u64)) {
    let Some(covered) = Covered::of(log, ident, index.consumed) else {
        return;
    };
    let bytes = encode(index, &covered);
    let Ok((mut f, tmp)) = fsx::create_temp(store, INDEX_FILE, 0o644) else {
        return;
    };
    if f.write_all(&bytes).is_err() || fsx::rename(store, &tmp, INDEX_FILE).is_err() {
        let _ = fsx::unlink(store, &tmp);
    }
}

/// Removes the checkpoint, before the log it may cover is replaced (gc,
/// repair). A checkpoint that is not there is no error.
pub(crate) fn remove(store: &OwnedFd) -> std::io::Result<()> {
    match fsx::unlink(store, INDEX_FILE) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// The checkpoint's bytes for `index`, built from the log prefix `covered`.
fn encode(index: &Index, covered: &Covered) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(128 + index.blobs.len() * 64));
    w.0.extend_from_slice(MAGIC);
    w.num(covered.dev);
    w.num(covered.ino);
    w.num(covered.len);
    w.0.extend_from_slice(&covered.head);
    w.0.extend_from_slice(&covered.tail);
    w.index(index);
    let check = crc32fast::hash(&w.0);
    w.0.extend_from_slice(&check.to_le_bytes());
    w.0
}

/// The index in `bytes` and the log prefix it covers, if they are a whole
/// checkpoint.
fn decode(bytes: &[u8]) -> Option<(Covered, Index)> {
    let body = bytes.strip_prefix(MAGIC)?;
    let (body, check) = body.split_at_checked(body.len().checked_sub(4)?)?;
    if crc32fast::hash(&bytes[..bytes.len() - 4]).to_le_bytes() != check {
        return None;
    }
    let mut r = Reader(body);
    let covered = Covered {
        dev: r.num()?,
        ino: r.num()?,
        len: r.num()?,
        head: r.take(32)?.try_into().ok()?,
        tail: r.take(32)?.try_into().ok()?,
    };
    let index = r.index()?;
    (r.0.is_empty() && covered.len > 0 && index.consumed == covered.len).then_some((covered, index))
}

/// Whether two indexes are equal (they encode to the same bytes).
pub(crate) fn same(a: &Index, b: &Index) -> bool {
    let none = |x: &Index| Covered {
        dev: 0,
        ino: 0,
        len: x.consumed,
        head: [0; 32],
        tail: [0; 32],
    };
    encode(a, &none(a)) == encode(b, &none(b))
}

struct Writer(Vec<u8>);

impl Writer {
    fn num(&mut self, mut n: u64) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        self.num(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    fn opt<T>(&mut self, v: Option<T>, f: impl FnOnce(&mut Self, T)) {
        match v {
            None => self.0.push(0),
            Some(v) => {
                self.0.push(1);
                f(self, v);
            }
        }
    }

    fn blob(&mut self, id: &BlobId) {
        self.0.extend_from_slice(&id.0);
    }

    /// A map's entries sorted by key.
    fn sorted<K: Ord, V>(&mut self, map: &HashMap<K, V>, mut f: impl FnMut(&mut Self, &K, &V)) {
        let mut entries: Vec<(&K, &V)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.num(entries.len() as u64);
        for (k, v) in entries {
            f(self, k, v);
        }
    }

    fn entry(&mut self, e: &FileEntry) {
        self.bytes(e.path.as_bytes());
        match &e.pre {
            Pre::File {
                blob,
                size,
                mode,
                link,
            } => {
                self.0.push(if link.is_some() { 6 } else { 0 });
                self.blob(blob);
                self.num(*size);
                self.num(u64::from(*mode));
                if let Some(l) = link {
                    self.num(*l);
                }
            }
            Pre::Symlink { target } => {
                self.0.push(1);
                self.str(target);
            }
            Pre::Absent => self.0.push(2),
            Pre::Dir { mode } => {
                self.0.push(3);
                self.num(u64::from(*mode));
            }
            Pre::Skipped { reason, size } => {
                self.0.push(4);
                self.str(reason);
                self.num(*size);
            }
            Pre::Fifo { mode } => {
                self.0.push(5);
                self.num(u64::from(*mode));
            }
        }
    }

    fn post(&mut self, p: &Post) {
        match p {
            Post::File { sha256 } => {
                self.0.push(0);
                self.blob(sha256);
            }
            Post::Symlink { target } => {
                self.0.push(1);
                self.str(target);
            }
            Post::Absent => self.0.push(2),
            Post::Dir => self.0.push(3),
            Post::Other => self.0.push(4),
        }
    }

    fn turn(&mut self, t: &Turn) {
        self.str(t.id.as_str());
        self.opt(t.label.as_deref(), Self::str);
        self.num(t.first_seq);
        self.num(t.started_at);
        self.0.push(u8::from(t.sealed));
        self.opt(t.ended_by, Self::num);
        self.num(t.files.len() as u64);
        for c in &t.files {
            self.num(c.seq);
            self.entry(&c.entry);
            self.num(c.shared_with.len() as u64);
            for s in &c.shared_with {
                self.str(s.as_str());
            }
        }
        self.sorted(&t.posts, |w, path, (seq, post)| {
            w.bytes(path.as_bytes());
            w.num(*seq);
            w.post(post);
        });
        self.sorted(&t.paths, |w, path, seq| {
            w.bytes(path.as_bytes());
            w.num(*seq);
        });
    }

    fn index(&mut self, x: &Index) {
        self.num(x.last_seq);
        self.num(x.captures);
        self.num(x.lines as u64);
        self.num(x.consumed);
        self.num(x.turns.len() as u64);
        for t in &x.turns {
            self.turn(t);
        }
        // Pack names repeat across blobs: each is written once.
        let mut packs: Vec<&str> = x.blobs.values().map(|l| l.pack.as_str()).collect();
        packs.sort_unstable();
        packs.dedup();
        self.num(packs.len() as u64);
        for p in &packs {
            self.str(p);
        }
        self.sorted(&x.blobs, |w, id, loc| {
            w.blob(id);
            let at = packs
                .binary_search(&loc.pack.as_str())
                .expect("every pack name is in the table");
            w.num(at as u64);
            w.num(loc.offset);
            w.num(loc.len);
            w.num(loc.size);
            w.opt(loc.base.as_ref(), Self::blob);
        });
        self.sorted(&x.saved, |w, seq, entries| {
            w.num(*seq);
            w.num(entries.len() as u64);
            for e in entries {
                w.entry(e);
            }
        });
        self.sorted(&x.ops, |w, seq, op| {
            w.num(*seq);
            w.num(op.turns.len() as u64);
            for t in &op.turns {
                w.num(*t);
            }
            w.str(op.turn.as_str());
            w.num(op.at);
        });
        for stack in [&x.done, &x.undone] {
            self.num(stack.len() as u64);
            for a in stack {
                self.num(a.op);
                self.num(a.saved);
            }
        }
        self.sorted(&x.path_blob, |w, path, id| {
            w.bytes(path.as_bytes());
            w.blob(id);
        });
        self.sorted(&x.record_turn, |w, k, v| {
            w.num(*k);
            w.num(*v);
        });
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn num(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.num()?).ok()?;
        // Every element takes at least one byte: a bound on allocations.
        (n <= self.0.len()).then_some(n)
    }

    fn str(&mut self) -> Option<String> {
        self.str_ref().map(str::to_owned)
    }

    /// A string borrowed from the checkpoint's bytes (no allocation).
    fn str_ref(&mut self) -> Option<&'a str> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.num()?).ok()
    }

    fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.byte()? {
            0 => Some(None),
            1 => f(self).map(Some),
            _ => None,
        }
    }

    fn blob(&mut self) -> Option<BlobId> {
        Some(BlobId(self.take(32)?.try_into().ok()?))
    }

    fn path(&mut self) -> Option<RelPath> {
        let n = self.len()?;
        RelPath::from_bytes(self.take(n)?).ok()
    }

    fn turn_id(&mut self) -> Option<TurnId> {
        TurnId::new(self.str()?).ok()
    }

    fn map<K: Eq + std::hash::Hash, V>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Option<(K, V)>,
    ) -> Option<HashMap<K, V>> {
        let n = self.len()?;
        let mut map = HashMap::with_capacity(n);
        for _ in 0..n {
            let (k, v) = f(self)?;
            map.insert(k, v);
        }
        Some(map)
    }

    fn vec<T>(&mut self, mut f: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let n = self.len()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(f(self)?);
        }
        Some(v)
    }

    fn entry(&mut self) -> Option<FileEntry> {
        let path = self.path()?;
        let pre = match self.byte()? {
            tag @ (0 | 6) => Pre::File {
                blob: self.blob()?,
                size: self.num()?,
                mode: self.u32()?,
                link: if tag == 6 { Some(self.num()?) } else { None },
            },
            1 => Pre::Symlink {
                target: self.str()?,
            },
            2 => Pre::Absent,
            3 => Pre::Dir { mode: self.u32()? },
            4 => Pre::Skipped {
                reason: self.str()?,
                size: self.num()?,
            },
            5 => Pre::Fifo { mode: self.u32()? },
            _ => return None,
        };
        Some(FileEntry { path, pre })
    }

    fn post(&mut self) -> Option<Post> {
        Some(match self.byte()? {
            0 => Post::File {
                sha256: self.blob()?,
            },
            1 => Post::Symlink {
                target: self.str()?,
            },
            2 => Post::Absent,
            3 => Post::Dir,
            4 => Post::Other,
            _ => return None,
        })
    }

    fn turn(&mut self) -> Option<Turn> {
        Some(Turn {
            id: self.turn_id()?,
            label: self.opt(Self::str)?,
            first_seq: self.num()?,
            started_at: self.num()?,
            sealed: match self.byte()? {
                0 => false,
                1 => true,
                _ => return None,
            },
            ended_by: self.opt(Self::num)?,
            files: self.vec(|r| {
                Some(Captured {
                    seq: r.num()?,
                    entry: r.entry()?,
                    shared_with: r.vec(Self::turn_id)?,
                })
            })?,
            posts: self.map(|r| Some((r.path()?, (r.num()?, r.post()?))))?,
            paths: self.map(|r| Some((r.path()?, r.num()?)))?,
        })
    }

    fn index(&mut self) -> Option<Index> {
        let last_seq = self.num()?;
        let captures = self.num()?;
        let lines = usize::try_from(self.num()?).ok()?;
        let consumed = self.num()?;
        let turns = self.vec(Self::turn)?;
        // Borrowed: each blob's location owns a copy of its pack's name.
        let packs = self.vec(Self::str_ref)?;
        let blobs = self.map(|r| {
            let id = r.blob()?;
            let pack = (*packs.get(usize::try_from(r.num()?).ok()?)?).to_owned();
            let loc = BlobLoc {
                pack,
                offset: r.num()?,
                len: r.num()?,
                size: r.num()?,
                base: r.opt(Self::blob)?,
            };
            Some((id, loc))
        })?;
        let saved = self.map(|r| Some((r.num()?, r.vec(Self::entry)?)))?;
        let ops = self.map(|r| {
            let seq = r.num()?;
            let info = OpInfo {
                turns: r.vec(Self::num)?,
                turn: r.turn_id()?,
                at: r.num()?,
            };
            Some((seq, info))
        })?;
        let applied = |r: &mut Self| {
            Some(Applied {
                op: r.num()?,
                saved: r.num()?,
            })
        };
        let done = self.vec(applied)?;
        let undone = self.vec(applied)?;
        let path_blob = self.map(|r| Some((r.path()?, r.blob()?)))?;
        let record_turn = self.map(|r| Some((r.num()?, r.num()?)))?;
        Some(Index {
            turns,
            blobs,
            saved,
            ops,
            done,
            undone,
            last_seq,
            path_blob,
            captures,
            record_turn,
            lines,
            consumed,
            ident: None,
            live_count: 0,
            stored_bytes: 0,
        })
        .map(|mut index| {
            index.recount();
            index
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LOG_FILE;
    use crate::{NoProgress, RevertOptions, RewindOptions, Store};
    use std::path::{Path, PathBuf};

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn t(id: &str) -> TurnId {
        TurnId::new(id).expect("valid turn id")
    }

    /// A store whose log has every kind of record: captures of files,
    /// symlinks and absent paths, seals, post-images, saved records, a
    /// rewind, an undo, a redo, a revert, snapshots and a delta.
    fn rich_store() -> std::result::Result<(tempfile::TempDir, Store), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "a1\n")?;
        std::fs::write(root.join("big.txt"), "line\n".repeat(2000))?;
        #[cfg(unix)]
        std::os::unix::fs::symlink("a.txt", root.join("link"))?;
        std::fs::write(root.join("h1"), "one file, two names\n")?;
        std::fs::hard_link(root.join("h1"), root.join("h2"))?;
        let mut store = Store::open(root)?;
        store.snapshot(&t("s0"), Some("before"), false, &NoProgress)?;
        store.write(&t("t1"), Some("first"), "a.txt", b"a2\n")?;
        store.write(&t("t1"), None, "new/deep.txt", b"created\n")?;
        store.capture(&t("t1"), None, "link")?;
        store.write(&t("t1"), None, "h1", b"both names\n")?;
        store.write(
            &t("t2"),
            Some("second"),
            "big.txt",
            "line\n".repeat(2001).as_bytes(),
        )?;
        store.seal(&t("t2"))?;
        // Its pre-image now is the bytes t2 wrote: stored as a delta.
        store.write(&t("t2b"), None, "big.txt", b"short\n")?;
        store.create_dir(&t("t3"), None, "made/here")?;
        store.remove_file(&t("t3"), None, "a.txt")?;
        store.rewind(&t("t3"), &RewindOptions::default())?;
        store.undo()?;
        store.redo()?;
        store.write(&t("t4"), None, "b.txt", b"b\n")?;
        store.revert(&t("t1"), &RevertOptions::default())?;
        store.undo()?;
        std::fs::write(root.join("c.txt"), "by a command\n")?;
        store.snapshot(&t("s0"), None, true, &NoProgress)?;
        Ok((dir, store))
    }

    fn log_path(store: &Store) -> PathBuf {
        store.store_path.join(LOG_FILE)
    }

    fn index_path(store: &Store) -> PathBuf {
        store.store_path.join(INDEX_FILE)
    }

    fn ident_of(path: &Path) -> std::io::Result<(u64, u64)> {
        let st = crate::sys::fs::fstat(&std::fs::File::open(path)?)?;
        Ok((crate::sys::dev(&st), st.st_ino))
    }

    /// The index's bytes, to compare two indexes (equal indexes give equal
    /// bytes).
    fn bytes_of(index: &Index) -> Vec<u8> {
        let none = Covered {
            dev: 0,
            ino: 0,
            len: index.consumed,
            head: [0; 32],
            tail: [0; 32],
        };
        encode(index, &none)
    }

    /// The index the whole log gives, with no checkpoint.
    fn from_log_alone(root: &Path, store: &Store) -> std::result::Result<Index, crate::Error> {
        let _ = std::fs::remove_file(index_path(store));
        let fresh = Store::open(root)?;
        let _ = std::fs::remove_file(index_path(store));
        Ok(fresh.index)
    }

    /// Writes a checkpoint of `store`'s whole log as it is now.
    fn checkpoint_now(store: &Store) -> std::result::Result<Covered, Box<dyn std::error::Error>> {
        let path = log_path(store);
        let log = File::open(&path)?;
        let ident = ident_of(&path)?;
        let full = Store::open(store.root())?;
        write(&store.dirs().store, &full.index, &log, ident);
        Ok(Covered::of(&log, ident, full.index.consumed).ok_or("read the log")?)
    }

    /// The checkpoint `load` finds for the store's log as it is now.
    fn load_now(store: &Store) -> std::io::Result<Option<Index>> {
        let path = log_path(store);
        let log = File::open(&path)?;
        let size = log.metadata()?.len();
        Ok(load(&store.dirs().store, &log, ident_of(&path)?, size))
    }

    #[test]
    fn a_checkpoint_gives_back_the_index_the_whole_log_gives() -> TestResult {
        let (_dir, store) = rich_store()?;
        let full = Store::open(store.root())?;
        let covered = Covered {
            dev: 1,
            ino: 2,
            len: full.index.consumed,
            head: [3; 32],
            tail: [4; 32],
        };
        let bytes = encode(&full.index, &covered);
        let (back_covered, back) = decode(&bytes).ok_or("a fresh checkpoint decodes")?;
        assert_eq!(back_covered, covered);
        assert_eq!(
            encode(&back, &covered),
            bytes,
            "decode is the inverse of encode"
        );
        assert_eq!(back.turns.len(), full.index.turns.len());
        assert!(
            back.turns
                .iter()
                .flat_map(|t| &t.files)
                .any(|c| matches!(c.entry.pre, Pre::File { link: Some(_), .. })),
            "a hard link's key is kept"
        );
        assert!(!back.saved.is_empty() && !back.ops.is_empty() && !back.undone.is_empty());
        assert!(
            back.blobs.values().any(|l| l.base.is_some()),
            "a delta is kept"
        );
        Ok(())
    }

    #[test]
    fn opening_from_a_checkpoint_then_the_rest_of_the_log_equals_reading_it_all() -> TestResult {
        let (dir, mut store) = rich_store()?;
        // Compacted first, so the gc after the rewind below has nothing to
        // drop and only appends.
        store.gc(&crate::GcOptions::default())?;
        // A checkpoint of the log as it is now, then more records after it.
        let covered = checkpoint_now(&store)?;
        store.write(&t("t5"), None, "d.txt", b"d\n")?;
        store.rewind(&t("t4"), &RewindOptions::default())?;
        let loaded = load_now(&store)?.ok_or("the checkpoint matches")?;
        assert_eq!(loaded.consumed, covered.len);
        let from_checkpoint = Store::open(dir.path())?;
        assert!(index_path(&store).exists());
        let from_log = from_log_alone(dir.path(), &store)?;
        assert_eq!(bytes_of(&from_checkpoint.index), bytes_of(&from_log));
        // The counters automatic gc reads, recounted after the decode.
        let counters = |x: &Index| (x.live_count, x.stored_bytes);
        assert_eq!(counters(&from_checkpoint.index), counters(&from_log));
        assert_eq!(from_log.live_count, from_log.live().count());
        Ok(())
    }

    #[test]
    fn a_damaged_checkpoint_is_ignored() -> TestResult {
        let (_dir, store) = rich_store()?;
        checkpoint_now(&store)?;
        let bytes = std::fs::read(index_path(&store))?;
        assert!(decode(&bytes).is_some());
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(decode(&bad).is_none(), "byte {i} flipped");
        }
        for cut in [0, 1, MAGIC.len(), bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        // The version 2 checkpoint, whatever it holds, is ignored.
        let mut old = bytes.clone();
        old[MAGIC.len() - 2] = b'2';
        std::fs::write(index_path(&store), &old)?;
        assert!(load_now(&store)?.is_none());
        Ok(())
    }

    /// A changed log is caught by its identity, its length or the bytes at
    /// either end of the covered prefix; only a change in the middle that
    /// keeps the file, its length and both ends is not (`verify` reads
    /// every line).
    #[test]
    // Replaces the log this store holds open by rename, which Windows allows
    // (std renames with POSIX semantics) but Wine 8 refuses.
    #[cfg(unix)]
    fn a_checkpoint_of_another_log_or_prefix_is_ignored() -> TestResult {
        let (_dir, store) = large_store()?;
        let path = log_path(&store);
        let log = std::fs::read(&path)?;
        assert!(log.len() as u64 > 2 * WINDOW, "both windows apart");
        let covered = checkpoint_now(&store)?;
        assert!(load_now(&store)?.is_some());
        let checkpoint = std::fs::read(index_path(&store))?;
        let restore = || -> std::io::Result<()> {
            std::fs::write(&path, &log)?;
            std::fs::write(index_path(&store), &checkpoint)
        };
        // Written in place (same inode), a byte changed at either end.
        for i in [
            0,
            WINDOW as usize - 1,
            log.len() - WINDOW as usize,
            log.len() - 2,
        ] {
            let mut other = log.clone();
            other[i] ^= 0x20;
            std::fs::write(&path, &other)?;
            assert!(load_now(&store)?.is_none(), "log byte {i} changed");
        }
        restore()?;
        // Cut shorter by one byte, or by a line.
        let f = std::fs::OpenOptions::new().write(true).open(&path)?;
        f.set_len(log.len() as u64 - 1)?;
        assert!(load_now(&store)?.is_none(), "a shorter log");
        restore()?;
        // The same bytes in another file (a copy, or a log replaced by
        // rename): another identity.
        let copy = path.with_extension("copy");
        std::fs::write(&copy, &log)?;
        std::fs::rename(&copy, &path)?;
        assert!(load_now(&store)?.is_none(), "another inode");
        // A checkpoint that names this inode but another log's prefix of
        // the same length (an inode number reused): its ends differ.
        let ident = ident_of(&path)?;
        let mut other = log.clone();
        let at = log.len() - 3;
        other[at] ^= 0x20;
        std::fs::write(&path, &other)?;
        let mut stale = decode(&checkpoint).ok_or("decodes")?;
        stale.1.ident = None;
        let reused = Covered {
            dev: ident.0,
            ino: ident.1,
            ..covered
        };
        std::fs::write(index_path(&store), encode(&stale.1, &reused))?;
        assert!(load_now(&store)?.is_none(), "an inode reused");
        // A change in the middle of the prefix, same file, same length:
        // the checkpoint still stands.
        std::fs::write(&path, &log)?;
        let ident = ident_of(&path)?;
        std::fs::write(
            index_path(&store),
            encode(
                &stale.1,
                &Covered {
                    dev: ident.0,
                    ino: ident.1,
                    ..covered
                },
            ),
        )?;
        let mut middle = log.clone();
        middle[log.len() / 2] ^= 0x20;
        std::fs::write(&path, &middle)?;
        assert!(load_now(&store)?.is_some(), "only the ends are compared");
        Ok(())
    }

    /// A store big enough that opening it writes a checkpoint, with gc and
    /// automatic gc off.
    fn large_store() -> std::result::Result<(tempfile::TempDir, Store), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let mut store = Store::open(dir.path())?;
        store.write(&t("t0"), None, "f0.txt", b"0\n")?;
        std::fs::write(
            store.store_dir().join(crate::config::CONFIG_FILE),
            "[retention]\nkeep_turns = 1000000\n[gc]\nauto_every_captures = 0\n",
        )?;
        for i in 1..400 {
            let name = format!("f{}.txt", i % 7);
            store.write(
                &t(&format!("t{i}")),
                Some("a turn"),
                &name,
                format!("{i}\n").as_bytes(),
            )?;
        }
        assert!(std::fs::metadata(log_path(&store))?.len() > WRITE_AFTER);
        assert!(
            !index_path(&store).exists(),
            "written by a reader, not by appends"
        );
        let first = Store::open(dir.path())?;
        assert!(
            index_path(&store).exists(),
            "{} bytes of log read",
            first.index.consumed
        );
        assert!(load_now(&store)?.is_some());
        Ok((dir, store))
    }

    #[test]
    fn a_checkpoint_over_a_log_gc_replaced_is_ignored() -> TestResult {
        let (dir, mut store) = large_store()?;
        let checkpoint = std::fs::read(index_path(&store))?;
        let (covered, _) = decode(&checkpoint).ok_or("decodes")?;
        let report = store.gc(&crate::GcOptions {
            keep_turns: Some(300),
            ..Default::default()
        })?;
        assert_eq!(report.dropped_turns.len(), 100);
        // gc removed the checkpoint before the new log took its place; its
        // reload may have written one of the new log.
        if let Ok(now) = std::fs::read(index_path(&store)) {
            let (c, _) = decode(&now).ok_or("decodes")?;
            assert_ne!((c.dev, c.ino), (covered.dev, covered.ino));
        }
        // The old checkpoint put back, as if gc had not removed it, even
        // naming the new log's inode (a reused inode number).
        let (_, old) = decode(&checkpoint).ok_or("decodes")?;
        let ident = ident_of(&log_path(&store))?;
        for c in [
            covered,
            Covered {
                dev: ident.0,
                ino: ident.1,
                ..covered
            },
        ] {
            std::fs::write(index_path(&store), encode(&old, &c))?;
            let opened = Store::open(dir.path())?;
            assert_eq!(opened.turns().len(), 300);
            let whole = from_log_alone(dir.path(), &store)?;
            assert_eq!(bytes_of(&opened.index), bytes_of(&whole));
        }
        Ok(())
    }

    #[test]
    fn a_checkpoint_over_a_log_cut_or_rewritten_at_the_same_length_is_ignored() -> TestResult {
        let (dir, store) = large_store()?;
        let path = log_path(&store);
        let log = std::fs::read(&path)?;
        let checkpoint = std::fs::read(index_path(&store))?;
        let lines: Vec<&[u8]> = log.split_inclusive(|&b| b == b'\n').collect();
        // Cut: the last 50 records gone (the file cut in place).
        let keep: usize = lines[..lines.len() - 50].iter().map(|l| l.len()).sum();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)?
            .set_len(keep as u64)?;
        let opened = Store::open(dir.path())?;
        assert_eq!(opened.index.lines, lines.len() - 50);
        assert_eq!(
            bytes_of(&opened.index),
            bytes_of(&from_log_alone(dir.path(), &store)?)
        );
        // Rewritten in place at the same length: the last record's time
        // changed by one nanosecond (a valid log of other records).
        std::fs::write(&path, &log)?;
        std::fs::write(index_path(&store), &checkpoint)?;
        assert!(load_now(&store)?.is_some());
        let last = lines[lines.len() - 1];
        let mut rec = crate::log::decode(&last[..last.len() - 1])?;
        rec.at ^= 1;
        let new_last = crate::log::encode(&rec);
        assert_eq!(new_last.len(), last.len());
        let mut other = log[..log.len() - last.len()].to_vec();
        other.extend_from_slice(&new_last);
        std::fs::write(&path, &other)?;
        let opened = Store::open(dir.path())?;
        let whole = from_log_alone(dir.path(), &store)?;
        assert_eq!(bytes_of(&opened.index), bytes_of(&whole));
        assert_eq!(
            opened.index.turns.last().map(|t| t.started_at),
            Some(rec.at),
            "the new record's time, not the checkpoint's"
        );
        Ok(())
    }

    #[test]
    fn verify_names_a_checkpoint_that_names_the_log_but_holds_another_index() -> TestResult {
        let (dir, store) = large_store()?;
        assert!(crate::verify_root(dir.path())?.whole);
        let path = log_path(&store);
        let log = File::open(&path)?;
        let mut index = Store::open(dir.path())?.index;
        // Another index for the same prefix: the newest turn's label.
        index.turns.last_mut().ok_or("a turn")?.label = Some("not what the log says".into());
        write(&store.dirs().store, &index, &log, ident_of(&path)?);
        assert!(load_now(&store)?.is_some(), "an open trusts it");
        let report = crate::verify_root(dir.path())?;
        assert!(!report.whole);
        assert!(
            report.damage.iter().any(|d| matches!(
                d,
                crate::verify::Damage::Store { path, .. } if path.ends_with(INDEX_FILE)
            )),
            "{:?}",
            report.damage
        );
        // Deleted, as the message says: whole again.
        std::fs::remove_file(index_path(&store))?;
        assert!(crate::verify_root(dir.path())?.whole);
        Ok(())
    }

    #[test]
    fn damage_at_the_start_of_the_log_is_still_refused_and_verify_finds_any() -> TestResult {
        let (dir, store) = large_store()?;
        let path = log_path(&store);
        let log = std::fs::read(&path)?;
        let checkpoint = std::fs::read(index_path(&store))?;
        // A byte changed in the first line: the checkpoint no longer
        // matches, the whole log is read and the damage reported.
        let mut damaged = log.clone();
        damaged[10] ^= 0x01;
        std::fs::write(&path, &damaged)?;
        match Store::open(dir.path()) {
            Err(crate::Error::LogDamaged { line, .. }) => assert_eq!(line, 1),
            other => return Err(format!("expected LogDamaged, got {:?}", other.err()).into()),
        }
        // In the middle, the file and its ends unchanged: the open trusts
        // the checkpoint; verify reads every line and names it.
        let mut damaged = log.clone();
        let mid = log.len() / 2;
        damaged[mid] ^= 0x01;
        std::fs::write(&path, &damaged)?;
        std::fs::write(index_path(&store), &checkpoint)?;
        Store::open(dir.path())?;
        let line = 1 + log[..mid].iter().filter(|&&b| b == b'\n').count();
        let report = crate::verify_root(dir.path())?;
        assert!(!report.whole);
        assert!(
            report
                .damage
                .iter()
                .any(|d| matches!(d, crate::verify::Damage::LogLine { line: l, .. } if *l == line)),
            "{:?}",
            report.damage
        );
        Ok(())
    }
}
