//! Writing a checkpoint: the head's varints and maps, then the tables
//! (see the format in [`super`]).

use std::collections::HashMap;

use super::MAGIC;
use super::blobs::BLOB_ROW;
use super::table::{Kind, fences};
use super::turns::{Head, TURN_ROW, id_hash, id_in};
use crate::id::BlobId;
use crate::index::{Blobs, Index, Turn, Turns};
use crate::log::{FileEntry, Post, Pre};
use crate::pack::{self, BlobLoc};

pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    pub(super) fn num(&mut self, mut n: u64) {
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
            Pre::Aside {
                seq,
                n,
                size,
                mode,
                blob,
            } => {
                self.0.push(if blob.is_some() { 8 } else { 7 });
                self.num(*seq);
                self.num(*n);
                self.num(*size);
                self.num(u64::from(*mode));
                if let Some(b) = blob {
                    self.blob(b);
                }
            }
        }
    }

    fn post(&mut self, p: &Post) {
        match p {
            Post::File { sha256, stat: None } => {
                self.0.push(0);
                self.blob(sha256);
            }
            Post::File {
                sha256,
                stat: Some(k),
            } => {
                self.0.push(5);
                self.blob(sha256);
                self.num(k.dev);
                self.num(k.ino);
                self.num(k.size);
                // Two's complement: a time before 1970 comes back whole.
                self.num(k.mtime as u64);
                self.num(k.ctime as u64);
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
        self.num(t.by_path.len() as u64);
        for &i in &t.by_path {
            self.num(u64::from(i));
        }
    }

    pub(super) fn u64(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    pub(super) fn u32(&mut self, n: u32) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    /// The index after the log prefix it covers: the head (counters, the
    /// small maps, the tables' sizes; its length set in the preamble),
    /// then the tables. Returns the turns' bytes, which go after the check.
    pub(super) fn index(&mut self, x: &Index) -> Option<Vec<u8>> {
        self.num(x.last_seq);
        self.num(x.captures);
        self.num(x.lines as u64);
        self.num(x.consumed);
        self.num(x.live_count as u64);
        self.num(x.stored_bytes);
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
        self.sorted(&x.path_blob.all(), |w, path, id| {
            w.bytes(path.as_bytes());
            w.blob(id);
        });
        let (rows, ids, bodies) = turn_tables(&x.turns)?;
        let mut records = Writer(Vec::new());
        for (k, v) in x.record_turn.sorted() {
            records.u64(k);
            records.u64(v);
        }
        let blobs = blob_table(&x.blobs)?;
        self.num(x.turns.len() as u64);
        self.num(bodies.len() as u64);
        self.num((records.0.len() / 16) as u64);
        self.num((blobs.len() / BLOB_ROW) as u64);
        let tables = [
            (&rows, TURN_ROW, Kind::Turns { bodies_len: 0 }),
            (&ids, 16, Kind::Ids { turns: 0 }),
            (&records.0, 16, Kind::Records),
            (&blobs, BLOB_ROW, Kind::Blobs { rows: 0 }),
        ];
        for (table, width, kind) in tables {
            for (check, fence) in fences(table, width, kind.key()) {
                self.u32(check);
                self.0.extend_from_slice(fence);
            }
        }
        let head_len = self.0.len() as u64 + 4;
        self.0[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&head_len.to_le_bytes());
        let check = crc32fast::hash(&self.0);
        self.u32(check);
        for (table, ..) in tables {
            self.0.extend_from_slice(table);
        }
        Some(bodies)
    }
}

/// The turn table, the id table and the turns' bytes: those of the
/// checkpoint the index came from copied as they are unless decoded since.
fn turn_tables(turns: &Turns) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let frozen = turns.frozen();
    let old = frozen
        .filter(|f| (0..f.len()).any(|i| !f.decoded(i)))
        .and_then(|f| f.all_raw());
    let mut bodies = Writer(Vec::new());
    let mut rows = Writer(Vec::with_capacity(turns.len() * TURN_ROW));
    let mut ids = Vec::with_capacity(turns.len());
    for i in 0..turns.len() {
        let start = bodies.0.len();
        let copied = match (frozen, &old) {
            (Some(f), Some(old)) if i < f.len() && !f.decoded(i) => {
                f.raw_in(i, old).map(|raw| (raw, f.first_seq(i), f.head(i)))
            }
            _ => None,
        };
        let (first, head) = match copied {
            Some((raw, first, head)) => {
                bodies.0.extend_from_slice(raw);
                (first, head)
            }
            None => {
                let t: &Turn = turns.get(i)?;
                bodies.turn(t);
                (t.first_seq, Head::of(t))
            }
        };
        let body = &bodies.0[start..];
        rows.u64(first);
        rows.u64(bodies.0.len() as u64);
        rows.u32(crc32fast::hash(body));
        rows.u64(head.started_at);
        rows.u64(head.ended_by.unwrap_or(0));
        rows.0.push(u8::from(head.sealed));
        ids.push((id_hash(id_in(body)?), i as u64));
    }
    ids.sort_unstable();
    let mut id_rows = Writer(Vec::with_capacity(ids.len() * 16));
    for (hash, i) in ids {
        id_rows.u64(hash);
        id_rows.u64(i);
    }
    Some((rows.0, id_rows.0, bodies.0))
}

/// The blob table ([`BLOB_ROW`] bytes a row, sorted by id): the rows of the
/// checkpoint the index came from merged with the blobs added since. A
/// base is a row (1 + its number; 0 for none): one that is not a known
/// blob makes no table, nor does a pack name of another form.
fn blob_table(blobs: &Blobs) -> Option<Vec<u8>> {
    let old: Vec<(BlobId, BlobLoc)> = blobs.table().map(|t| t.all()).unwrap_or_default();
    let mut all: Vec<(&BlobId, &BlobLoc)> = old.iter().map(|(i, l)| (i, l)).collect();
    all.extend(blobs.added());
    all.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let at = |id: &BlobId| -> Option<u32> {
        let k = all.binary_search_by(|(r, _)| (*r).cmp(id)).ok()?;
        u32::try_from(k + 1).ok()
    };
    let mut w = Writer(Vec::with_capacity(all.len() * BLOB_ROW));
    for (id, loc) in &all {
        if !pack::is_pack_name(&loc.pack) {
            return None;
        }
        w.blob(id);
        w.0.extend_from_slice(loc.pack.as_bytes());
        w.u64(loc.offset);
        w.u64(loc.len);
        w.u64(loc.size);
        w.u32(match &loc.base {
            Some(b) => at(b)?,
            None => 0,
        });
    }
    Some(w.0)
}
