//! Writing a checkpoint (see the format in [`super`]): the head's varints
//! and maps, then the tables, then the turns' bytes.
//!
//! Streamed, never whole in memory: room is left for the head, whose
//! length is known once the sizes are; the tables and the turns' bytes are
//! written after it as they are made, each block's CRC-32 and first key
//! noted on the way; the head, with those fences, is written last. The
//! blob table is a merge of the old checkpoint's rows, read a block at a
//! time, with the blobs the log added since; a turn's bytes are measured
//! (length, CRC-32) in a first pass and written in a second, copied from
//! the old checkpoint when the turn was not decoded. A store of 100,000
//! paths made a blob table of 19 MB and turns' bytes of 12 MB, held
//! together with two copies of the old rows.

use std::collections::HashMap;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};

use super::MAGIC;
use super::blobs::{BLOB_ROW, BlobTable};
use super::covered::Covered;
use super::table::{BLOCK, Kind, blocks};
use super::turns::{Head, TURN_ROW, id_hash};
use crate::id::BlobId;
use crate::index::{Blobs, Index, Turn, Turns};
use crate::log::{FileEntry, Post, Pre};
use crate::pack::{self, BlobLoc};

/// Where a [`Writer`]'s bytes go.
pub(super) trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Keeps nothing: the length and CRC-32 of what was put (a turn's bytes
/// measured before they are written).
struct Measure {
    crc: crc32fast::Hasher,
    len: u64,
}

impl Sink for Measure {
    fn put(&mut self, bytes: &[u8]) {
        self.crc.update(bytes);
        self.len += bytes.len() as u64;
    }
}

/// A buffered output that keeps its first error; what is put after it is
/// dropped.
struct Out<W: Write> {
    w: BufWriter<W>,
    failed: Option<io::Error>,
}

impl<W: Write> Sink for Out<W> {
    fn put(&mut self, bytes: &[u8]) {
        if self.failed.is_none()
            && let Err(e) = self.w.write_all(bytes)
        {
            self.failed = Some(e);
        }
    }
}

impl<W: Write + Seek> Out<W> {
    fn seek(&mut self, to: u64) {
        if self.failed.is_none()
            && let Err(e) = self.w.seek(SeekFrom::Start(to))
        {
            self.failed = Some(e);
        }
    }

    fn finish(mut self) -> io::Result<()> {
        match self.failed.take() {
            Some(e) => Err(e),
            None => self.w.flush(),
        }
    }
}

pub(super) struct Writer<S = Vec<u8>>(pub(super) S);

impl<S: Sink> Writer<S> {
    pub(super) fn num(&mut self, mut n: u64) {
        let mut buf = [0u8; 10];
        let mut k = 0;
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                buf[k] = b;
                self.0.put(&buf[..=k]);
                return;
            }
            buf[k] = b | 0x80;
            k += 1;
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        self.num(b.len() as u64);
        self.0.put(b);
    }

    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    fn opt<T>(&mut self, v: Option<T>, f: impl FnOnce(&mut Self, T)) {
        match v {
            None => self.0.put(&[0]),
            Some(v) => {
                self.0.put(&[1]);
                f(self, v);
            }
        }
    }

    fn blob(&mut self, id: &BlobId) {
        self.0.put(&id.0);
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
                self.0.put(&[if link.is_some() { 6 } else { 0 }]);
                self.blob(blob);
                self.num(*size);
                self.num(u64::from(*mode));
                if let Some(l) = link {
                    self.num(*l);
                }
            }
            Pre::Symlink { target } => {
                self.0.put(&[1]);
                self.str(target);
            }
            Pre::Absent => self.0.put(&[2]),
            Pre::Dir { mode } => {
                self.0.put(&[3]);
                self.num(u64::from(*mode));
            }
            Pre::Skipped { reason, size } => {
                self.0.put(&[4]);
                self.str(reason);
                self.num(*size);
            }
            Pre::Fifo { mode } => {
                self.0.put(&[5]);
                self.num(u64::from(*mode));
            }
            Pre::Aside {
                seq,
                n,
                size,
                mode,
                blob,
            } => {
                self.0.put(&[if blob.is_some() { 8 } else { 7 }]);
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
                self.0.put(&[0]);
                self.blob(sha256);
            }
            Post::File {
                sha256,
                stat: Some(k),
            } => {
                self.0.put(&[5]);
                self.blob(sha256);
                self.num(k.dev);
                self.num(k.ino);
                self.num(k.size);
                // Two's complement: a time before 1970 comes back whole.
                self.num(k.mtime as u64);
                self.num(k.ctime as u64);
            }
            Post::Symlink { target } => {
                self.0.put(&[1]);
                self.str(target);
            }
            Post::Absent => self.0.put(&[2]),
            Post::Dir => self.0.put(&[3]),
            Post::Other => self.0.put(&[4]),
        }
    }

    fn turn(&mut self, t: &Turn) {
        self.str(t.id.as_str());
        self.opt(t.label.as_deref(), Self::str);
        self.num(t.first_seq);
        self.num(t.started_at);
        self.0.put(&[u8::from(t.sealed)]);
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
        // Sorted by path already.
        self.num(t.posts.len() as u64);
        for (path, seq, post) in t.posts.iter() {
            self.bytes(path.as_bytes());
            self.num(seq);
            self.post(post);
        }
        self.num(t.by_path.len() as u64);
        for &i in &t.by_path {
            self.num(u64::from(i));
        }
    }

    pub(super) fn u64(&mut self, n: u64) {
        self.0.put(&n.to_le_bytes());
    }

    pub(super) fn u32(&mut self, n: u32) {
        self.0.put(&n.to_le_bytes());
    }

    /// The head's counters and small maps (every map sorted by key, so
    /// equal indexes give equal bytes).
    fn small(&mut self, x: &Index) {
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
            w.num(op.kept.len() as u64);
            for (seq, paths) in &op.kept {
                w.num(*seq);
                w.num(paths.len() as u64);
                for p in paths {
                    w.bytes(p.as_bytes());
                }
            }
        });
        for stack in [&x.done, &x.undone] {
            self.num(stack.len() as u64);
            for a in stack {
                self.num(a.op);
                self.num(a.saved);
            }
        }
        self.num(x.reversed.len() as u64);
        for r in &x.reversed {
            self.num(r.op);
            self.num(r.saved);
            self.num(r.until);
        }
        let paths = x.path_blob.each_sorted(|_, _| {});
        self.num(paths as u64);
        x.path_blob.each_sorted(|path, id| {
            self.bytes(path);
            self.blob(id);
        });
    }
}

/// Writes the checkpoint of `x`, built from the log prefix `covered`, to
/// `to`, seeking in it (see the module doc). `Ok(false)`: the index cannot
/// be held by a checkpoint (a delta's base is not a known blob, or a pack
/// name is not one turnback makes) and what was written is to be dropped.
pub(super) fn write<W: Write + Seek>(x: &Index, covered: &Covered, to: W) -> io::Result<bool> {
    let mut prefix = Writer(Vec::new());
    prefix.0.put(MAGIC);
    prefix.u64(0); // head_len, set below
    prefix.num(covered.dev);
    prefix.num(covered.ino);
    prefix.num(covered.len);
    prefix.0.put(&covered.head);
    prefix.0.put(&covered.tail);
    // The counters and maps are measured here and written with the rest of
    // the head at the end, never held (a rewind's saved states and the
    // newest blob of each path: some 10 MB for 100,000 paths).
    let mut small = Writer(Measure {
        crc: crc32fast::Hasher::new(),
        len: 0,
    });
    small.small(x);
    let Some(turns) = TurnRows::measure(&x.turns) else {
        return Ok(false);
    };
    // A part of the old checkpoint that neither it nor its log gives: no
    // checkpoint is written (the log stays the record).
    let Ok(sorted) = x.record_turn.sorted() else {
        return Ok(false);
    };
    let mut records = Writer(Vec::new());
    for (k, v) in sorted {
        records.u64(k);
        records.u64(v);
    }
    let blobs = BlobRows::of(&x.blobs);
    let counts = [
        (x.turns.len(), Kind::Turns { bodies_len: 0 }),
        (x.turns.len(), Kind::Ids { turns: 0 }),
        (records.0.len() / 16, Kind::Records),
        (blobs.len(), Kind::Blobs { rows: 0 }),
    ];
    let mut sizes = Writer(Vec::new());
    sizes.num(x.turns.len() as u64);
    sizes.num(turns.bodies_len);
    sizes.num(counts[2].0 as u64);
    sizes.num(counts[3].0 as u64);
    let fences_len: usize = counts
        .iter()
        .map(|(n, kind)| blocks(*n) * (4 + kind.key()))
        .sum();
    let head_len = prefix.0.len() as u64 + small.0.len + (sizes.0.len() + fences_len + 4) as u64;
    prefix.0[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&head_len.to_le_bytes());
    let mut out = Writer(Out {
        w: BufWriter::with_capacity(256 << 10, to),
        failed: None,
    });
    out.0.seek(head_len);
    let mut fences = Vec::with_capacity(fences_len);
    for (rows, width, (_, kind)) in [
        (&turns.rows, TURN_ROW, counts[0]),
        (&turns.ids, 16, counts[1]),
        (&records.0, 16, counts[2]),
    ] {
        let mut t = Blocked::new(kind.key());
        for row in rows.chunks_exact(width) {
            t.row(&mut out, row);
        }
        t.finish(&mut fences);
    }
    let mut t = Blocked::new(counts[3].1.key());
    if blobs.write(&mut out, &mut t).is_none() {
        return Ok(false);
    }
    t.finish(&mut fences);
    if !turns.write_bodies(&x.turns, &mut out) {
        return Err(io::Error::other(
            "a turn of the old checkpoint changed while it was copied",
        ));
    }
    debug_assert_eq!(fences.len(), fences_len);
    // The head, under its check.
    out.0.seek(0);
    let mut head = Writer(Tee {
        crc: crc32fast::Hasher::new(),
        len: 0,
        to: &mut out.0,
    });
    head.0.put(&prefix.0);
    head.small(x);
    head.0.put(&sizes.0);
    head.0.put(&fences);
    let Tee { crc, len, .. } = head.0;
    debug_assert_eq!(len + 4, head_len);
    out.u32(crc.finalize());
    out.0.finish()?;
    Ok(true)
}

/// Passes what is put on to another sink, counting it and its CRC-32.
struct Tee<'a, S: Sink> {
    crc: crc32fast::Hasher,
    len: u64,
    to: &'a mut S,
}

impl<S: Sink> Sink for Tee<'_, S> {
    fn put(&mut self, bytes: &[u8]) {
        self.crc.update(bytes);
        self.len += bytes.len() as u64;
        self.to.put(bytes);
    }
}

/// A table being written: each block's CRC-32 and first key (`key` bytes)
/// noted as its rows go by.
struct Blocked {
    key: usize,
    crc: crc32fast::Hasher,
    rows: usize,
    first: Vec<u8>,
    fences: Vec<u8>,
}

impl Blocked {
    fn new(key: usize) -> Blocked {
        Blocked {
            key,
            crc: crc32fast::Hasher::new(),
            rows: 0,
            first: Vec::new(),
            fences: Vec::new(),
        }
    }

    fn row<S: Sink>(&mut self, out: &mut Writer<S>, row: &[u8]) {
        if self.rows == 0 {
            self.first.clear();
            self.first.extend_from_slice(&row[..self.key]);
        }
        self.crc.update(row);
        out.0.put(row);
        self.rows += 1;
        if self.rows == BLOCK {
            self.close();
        }
    }

    fn close(&mut self) {
        let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new());
        self.fences.extend_from_slice(&crc.finalize().to_le_bytes());
        self.fences.extend_from_slice(&self.first);
        self.rows = 0;
    }

    /// Appends the fences of every block to `to`.
    fn finish(mut self, to: &mut Vec<u8>) {
        if self.rows > 0 {
            self.close();
        }
        to.extend_from_slice(&self.fences);
    }
}

/// The turn table and the id table, made by measuring each turn's bytes:
/// those of a turn of the old checkpoint that was not decoded are copied
/// as they are, the others encoded.
struct TurnRows {
    rows: Vec<u8>,
    ids: Vec<u8>,
    bodies_len: u64,
    /// Which turns are copied.
    copied: Vec<bool>,
}

impl TurnRows {
    fn measure(turns: &Turns) -> Option<TurnRows> {
        let frozen = turns.frozen();
        let mut rows = Writer(Vec::with_capacity(turns.len() * TURN_ROW));
        let mut ids = Vec::with_capacity(turns.len());
        let mut copied = vec![false; turns.len()];
        let mut end = 0u64;
        for (i, copy) in copied.iter_mut().enumerate() {
            let old = frozen
                .filter(|f| i < f.len() && !f.decoded(i))
                .and_then(|f| Some((f.first_seq(i).ok()?, f.head(i).ok()?, f.measure_raw(i)?)));
            let (first, head, (len, crc, id)) = match old {
                Some(found) => {
                    *copy = true;
                    found
                }
                None => {
                    let t: &Turn = turns.get(i).ok()??;
                    let mut m = Writer(Measure {
                        crc: crc32fast::Hasher::new(),
                        len: 0,
                    });
                    m.turn(t);
                    let id = id_hash(t.id.as_str().as_bytes());
                    (t.first_seq, Head::of(t), (m.0.len, m.0.crc.finalize(), id))
                }
            };
            end += len;
            rows.u64(first);
            rows.u64(end);
            rows.u32(crc);
            rows.u64(head.started_at);
            rows.u64(head.ended_by.unwrap_or(0));
            rows.0.push(u8::from(head.sealed));
            ids.push((id, i as u64));
        }
        ids.sort_unstable();
        let mut id_rows = Writer(Vec::with_capacity(ids.len() * 16));
        for (hash, i) in ids {
            id_rows.u64(hash);
            id_rows.u64(i);
        }
        Some(TurnRows {
            rows: rows.0,
            ids: id_rows.0,
            bodies_len: end,
            copied,
        })
    }

    /// Writes every turn's bytes, as measured; `false` if a copied turn no
    /// longer matches its measure.
    fn write_bodies<S: Sink>(&self, turns: &Turns, out: &mut Writer<S>) -> bool {
        for (i, &copied) in self.copied.iter().enumerate() {
            if copied {
                let Some(f) = turns.frozen() else {
                    return false;
                };
                if !f.copy_raw(i, |bytes| out.0.put(bytes)) {
                    return false;
                }
            } else {
                match turns.get(i) {
                    Ok(Some(t)) => out.turn(t),
                    _ => return false,
                }
            }
        }
        true
    }
}

/// The blob table's rows: the old checkpoint's, read a block at a time
/// (or, when one of its blocks cannot be read back whole, as the covered
/// log gives them), merged with the blobs the log added since, by id.
struct BlobRows<'a> {
    old: Old<'a>,
    added: Vec<(&'a BlobId, &'a BlobLoc)>,
}

enum Old<'a> {
    None,
    Table(&'a BlobTable),
    Listed(Vec<(BlobId, BlobLoc)>),
}

impl<'a> BlobRows<'a> {
    fn of(blobs: &'a Blobs) -> BlobRows<'a> {
        let old = match blobs.table() {
            None => Old::None,
            Some(t) if t.readable() => Old::Table(t),
            Some(t) => Old::Listed(t.all()),
        };
        let mut added: Vec<(&BlobId, &BlobLoc)> = blobs.added().collect();
        added.sort_unstable_by(|a, b| a.0.cmp(b.0));
        BlobRows { old, added }
    }

    fn len(&self) -> usize {
        self.added.len()
            + match &self.old {
                Old::None => 0,
                Old::Table(t) => t.len(),
                Old::Listed(v) => v.len(),
            }
    }

    /// 1 + the row of blob `id` in the new table, if it is there.
    fn row_of(&self, id: &BlobId) -> Option<u32> {
        let in_added = self.added.binary_search_by(|(a, _)| (*a).cmp(id));
        let (old_before, in_old) = match &self.old {
            Old::None => (0, false),
            Old::Table(t) => t.rank(id)?,
            Old::Listed(v) => match v.binary_search_by(|(a, _)| a.cmp(id)) {
                Ok(k) => (k, true),
                Err(k) => (k, false),
            },
        };
        if !in_old && in_added.is_err() {
            return None;
        }
        let (Ok(added_before) | Err(added_before)) = in_added;
        u32::try_from(old_before + added_before + 1).ok()
    }

    /// The row of blob `id` at `loc`.
    fn row(&self, id: &BlobId, loc: &BlobLoc) -> Option<[u8; BLOB_ROW]> {
        if !pack::is_pack_name(&loc.pack) {
            return None;
        }
        let base = match &loc.base {
            Some(b) => self.row_of(b)?,
            None => 0,
        };
        let mut row = [0u8; BLOB_ROW];
        row[..32].copy_from_slice(&id.0);
        row[32..66].copy_from_slice(loc.pack.as_bytes());
        row[66..74].copy_from_slice(&loc.offset.to_le_bytes());
        row[74..82].copy_from_slice(&loc.len.to_le_bytes());
        row[82..90].copy_from_slice(&loc.size.to_le_bytes());
        row[90..].copy_from_slice(&base.to_le_bytes());
        Some(row)
    }

    /// Writes every row in id order; `None` when one cannot be made.
    fn write<S: Sink>(&self, out: &mut Writer<S>, t: &mut Blocked) -> Option<()> {
        let mut added = self.added.iter().peekable();
        // The added blobs before `id` (all that remain without one).
        let mut added_before = |id: Option<&[u8]>, out: &mut Writer<S>, t: &mut Blocked| {
            let mut ok = true;
            while let Some((a, loc)) = added.next_if(|(a, _)| id.is_none_or(|id| &a.0[..] < id)) {
                match self.row(a, loc) {
                    Some(row) => t.row(out, &row),
                    None => ok = false,
                }
            }
            ok
        };
        let mut ok = true;
        match &self.old {
            Old::None => {}
            Old::Table(table) => {
                let whole = table.each_row(|old| {
                    ok &= added_before(Some(&old[..32]), out, t);
                    let mut row = [0u8; BLOB_ROW];
                    row.copy_from_slice(old);
                    // The base's row number in the new table.
                    let base = match table.base_id(old) {
                        Some(None) => Some(0),
                        Some(Some(b)) => self.row_of(&b),
                        None => None,
                    };
                    match base {
                        Some(b) => row[90..].copy_from_slice(&b.to_le_bytes()),
                        None => ok = false,
                    }
                    t.row(out, &row);
                });
                ok &= whole;
            }
            Old::Listed(list) => {
                for (id, loc) in list {
                    ok &= added_before(Some(&id.0[..]), out, t);
                    match self.row(id, loc) {
                        Some(row) => t.row(out, &row),
                        None => ok = false,
                    }
                }
            }
        }
        ok &= added_before(None, out, t);
        ok.then_some(())
    }
}
