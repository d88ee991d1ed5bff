//! The index checkpoint `<store>/index`: the in-memory index
//! ([`crate::index`]) as it stood after a prefix of the log, so that opening
//! a store parses only the log lines appended since, not the whole log.
//!
//! It is a cache. The log stays the only record: a checkpoint that is
//! missing, damaged, of another version, or whose log prefix no longer
//! matches the log byte for byte (the log was compacted by gc, cut, edited
//! or replaced) is ignored and the whole log is read, as without it.
//!
//! Format, all integers LEB128 varints unless stated, strings and byte runs
//! a varint length then the bytes:
//!
//! ```text
//! magic     "turnback-index-2\n"       (17 bytes; the 2 is the version:
//!                                      version 2 added each capture's
//!                                      `shared_with` turns)
//! log_len   bytes of the log covered   (whole lines only)
//! log_hash  SHA-256 of those bytes     (32 bytes)
//! index     the index's fields in a fixed order; every map written sorted
//!           by key, so equal indexes give equal bytes; a pre-image is a
//!           tag (0 file, 1 symlink, 2 absent, 3 dir, 4 skipped, 5 fifo,
//!           6 file with its hard-link key after the mode) then its fields;
//!           a reader that does not know a tag ignores the checkpoint
//! check     SHA-256 of everything before it (32 bytes)
//! ```
//!
//! Write order: a temporary file in the store directory, then a rename over
//! `index`. It is not fsynced: after a power loss a lost or torn checkpoint
//! fails its check and is ignored. Written by any process that read at
//! least [`WRITE_AFTER`] bytes of log beyond the checkpoint it found, under
//! the shared or the exclusive lock (never while gc rewrites the log, which
//! holds the exclusive lock); two writers at once each rename a complete
//! file of their own.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::fd::OwnedFd;

use crate::fsx;
use crate::id::{BlobId, TurnId};
use crate::index::{Applied, Captured, Index, OpInfo, Turn};
use crate::log::{FileEntry, Post, Pre};
use crate::pack::{self, BlobLoc};
use crate::path::RelPath;

/// The file name in the store directory.
pub const INDEX_FILE: &str = "index";

const MAGIC: &[u8] = b"turnback-index-2\n";

/// A process that parsed at least this many bytes of log past the
/// checkpoint writes a new one.
pub(crate) const WRITE_AFTER: u64 = 256 << 10;

/// The index the checkpoint holds, if it is whole and covers a prefix of
/// `log`: with it, the log from `index.consumed` on remains to be read.
pub(crate) fn load(store: &OwnedFd, log: &[u8]) -> Option<Index> {
    // A cache: one that is not a regular file is ignored (the next write
    // replaces it by rename).
    let bytes = fsx::read_store_file(store, INDEX_FILE).ok()??;
    decode(&bytes, log)
}

/// Writes a checkpoint of `index`, which was built from `log` (whole
/// lines: `index.consumed == log.len()`). Best effort: the checkpoint is a
/// cache, so an error only means the next open reads more of the log.
pub(crate) fn write(store: &OwnedFd, index: &Index, log: &[u8]) {
    debug_assert_eq!(index.consumed, log.len() as u64);
    let bytes = encode(index, log);
    let Ok((mut f, tmp)) = fsx::create_temp(store, INDEX_FILE, 0o644) else {
        return;
    };
    if f.write_all(&bytes).is_err() || fsx::rename(store, &tmp, INDEX_FILE).is_err() {
        let _ = fsx::unlink(store, &tmp);
    }
}

/// The checkpoint's bytes for `index` built from `log`.
pub(crate) fn encode(index: &Index, log: &[u8]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + index.blobs.len() * 64));
    w.0.extend_from_slice(MAGIC);
    w.num(log.len() as u64);
    w.0.extend_from_slice(&pack::hash_bytes(log).0);
    w.index(index);
    let check = pack::hash_bytes(&w.0);
    w.0.extend_from_slice(&check.0);
    w.0
}

/// The index in `bytes`, if they are a whole checkpoint of a prefix of
/// `log`.
pub(crate) fn decode(bytes: &[u8], log: &[u8]) -> Option<Index> {
    let body = bytes.strip_prefix(MAGIC)?;
    let (body, check) = body.split_at_checked(body.len().checked_sub(32)?)?;
    if pack::hash_bytes(&bytes[..bytes.len() - 32]).0 != check {
        return None;
    }
    let mut r = Reader(body);
    let len = usize::try_from(r.num()?).ok()?;
    let prefix = log.get(..len)?;
    if r.take(32)? != pack::hash_bytes(prefix).0 {
        return None;
    }
    let index = r.index()?;
    (r.0.is_empty() && index.consumed == len as u64).then_some(index)
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
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
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
        let packs = self.vec(Self::str)?;
        let blobs = self.map(|r| {
            let id = r.blob()?;
            let pack = packs.get(usize::try_from(r.num()?).ok()?)?.clone();
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LOG_FILE;
    use crate::{NoProgress, RevertOptions, RewindOptions, Store};

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

    fn log_bytes(store: &Store) -> Vec<u8> {
        std::fs::read(store.store_path.join(LOG_FILE)).expect("read the log")
    }

    #[test]
    fn a_checkpoint_gives_back_the_index_the_whole_log_gives() -> TestResult {
        let (_dir, store) = rich_store()?;
        let log = log_bytes(&store);
        let full = Store::open(store.root())?;
        let bytes = encode(&full.index, &log);
        let back = decode(&bytes, &log).ok_or("a fresh checkpoint decodes")?;
        assert_eq!(
            encode(&back, &log),
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
        let full = Store::open(dir.path())?;
        let prefix = log_bytes(&store);
        write(&store.dirs().store, &full.index, &prefix);
        store.write(&t("t5"), None, "d.txt", b"d\n")?;
        store.rewind(&t("t4"), &RewindOptions::default())?;
        let log = log_bytes(&store);
        let loaded = load(&store.dirs().store, &log).ok_or("the checkpoint matches")?;
        assert_eq!(loaded.consumed, prefix.len() as u64);
        let from_checkpoint = Store::open(dir.path())?;
        std::fs::remove_file(crate::location::store_dir_of(dir.path()).join(INDEX_FILE))?;
        let from_log = Store::open(dir.path())?;
        assert_eq!(
            encode(&from_checkpoint.index, &log),
            encode(&from_log.index, &log)
        );
        Ok(())
    }

    #[test]
    fn a_damaged_checkpoint_or_a_changed_log_is_ignored() -> TestResult {
        let (_dir, store) = rich_store()?;
        let log = log_bytes(&store);
        let bytes = encode(&store.index, &log);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(decode(&bad, &log).is_none(), "byte {i} flipped");
        }
        for cut in [0, 1, MAGIC.len(), bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut], &log).is_none(), "cut at {cut}");
        }
        // Any change to the log prefix it covers, even one byte.
        for i in [0, log.len() / 3, log.len() - 2] {
            let mut other = log.clone();
            other[i] ^= 0x20;
            assert!(decode(&bytes, &other).is_none(), "log byte {i} changed");
        }
        assert!(
            decode(&bytes, &log[..log.len() - 1]).is_none(),
            "a shorter log"
        );
        Ok(())
    }

    #[test]
    fn a_large_log_leaves_a_checkpoint_and_damage_before_it_is_still_refused() -> TestResult {
        let dir = tempfile::tempdir()?;
        let names: Vec<String> = (0..3000).map(|i| format!("f{i:04}.txt")).collect();
        for n in &names {
            std::fs::write(dir.path().join(n), n)?;
        }
        let mut store = Store::open(dir.path())?;
        store.capture_many(&t("t1"), None, &names)?;
        let index_file = crate::location::store_dir_of(dir.path()).join(INDEX_FILE);
        assert!(
            !index_file.exists(),
            "written by a reader of a long log, not by appends"
        );
        let first = Store::open(dir.path())?;
        assert!(
            index_file.exists(),
            "{} bytes of log read",
            first.index.consumed
        );
        let second = Store::open(dir.path())?;
        let log = log_bytes(&second);
        assert_eq!(encode(&second.index, &log), encode(&first.index, &log));
        // A byte changed in the first line: the checkpoint no longer
        // matches, the whole log is read and the damage reported.
        let mut damaged = log.clone();
        damaged[10] ^= 0x01;
        std::fs::write(
            crate::location::store_dir_of(dir.path()).join(LOG_FILE),
            &damaged,
        )?;
        match Store::open(dir.path()) {
            Err(crate::Error::LogDamaged { line, .. }) => assert_eq!(line, 1),
            other => return Err(format!("expected LogDamaged, got {:?}", other.err()).into()),
        }
        Ok(())
    }
}
