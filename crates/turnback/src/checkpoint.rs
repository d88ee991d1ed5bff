//! The index checkpoint `<store>/index`: the in-memory index
//! ([`crate::index`]) as it stood after a prefix of the log, so that opening
//! a store reads only the log lines appended since, not the whole log.
//!
//! It is a cache. The log stays the only record: a checkpoint that is
//! missing, damaged, of another version, or that does not name the log as
//! it is now is ignored and the whole log is read, as without it.
//!
//! Format, all integers LEB128 varints unless stated (`u32`, `u64`: little
//! endian, fixed width), strings and byte runs a varint length then the
//! bytes:
//!
//! ```text
//! magic     "turnback-index-5\n"       (17 bytes; the 5 is the version:
//!                                      version 2 added each capture's
//!                                      `shared_with` turns, version 3
//!                                      names the log by identity instead
//!                                      of hashing the prefix it covers,
//!                                      version 4 keeps turns, capture
//!                                      records and blobs in tables read
//!                                      in place, version 5 each turn's
//!                                      start, seal and end in its row)
//! head_len  u64: bytes from the start of the file to the end of the head
//! -- head --
//! log_dev   st_dev of the log file it was built from
//! log_ino   st_ino of that file
//! log_len   bytes of the log covered   (whole lines only; > 0)
//! log_head  SHA-256 of the first min(log_len, 4096) bytes (32 bytes)
//! log_tail  SHA-256 of the last min(log_len, 4096) bytes of the covered
//!           prefix, which end with its last line (32 bytes)
//! counters  last_seq, captures, lines, consumed, live turns, stored bytes
//! small     saved records, operations, the done and undone stacks, the
//!           newest blob of each path; every map written sorted by key, so
//!           equal indexes give equal bytes; a pre-image is a tag (0 file,
//!           1 symlink, 2 absent, 3 dir, 4 skipped, 5 fifo, 6 file with its
//!           hard-link key after the mode) then its fields
//! sizes     turns, bytes of the turns, records, blobs
//! -- tables --
//! turns     a row of 37 bytes per turn, oldest first: first_seq u64, end
//!           u64 (where its bytes end among the turns' bytes), CRC-32 of
//!           its bytes u32, started_at u64, ended_by u64 (0: live),
//!           sealed (one byte, 0 or 1)
//! ids       a row (FNV-1a hash of the turn's id u64, turn u64) per turn,
//!           sorted
//! records   a row (seq u64, first_seq u64) per capture and seal record,
//!           sorted: the turn each applied to
//! blobs     a row of 94 bytes per blob, sorted by id: id (32 bytes), pack
//!           name (34 bytes), offset, compressed length, size (u64 each),
//!           base (u32: 1 + the row of the blob it is a delta against, 0
//!           for none)
//! check     CRC-32 (IEEE) of everything before it (4 bytes, little endian)
//! -- turns' bytes --
//! each turn, oldest first: its id, label, first_seq, start time, sealed,
//!           ended_by, captures, post-images, paths (each checked by the
//!           CRC-32 in its row)
//! ```
//!
//! Read lazily: opening reads the head and decodes it, then the tables in
//! chunks of 64 KiB, computing the check and checking every row as it
//! passes (rows sorted, turn ends increasing to the length of the turns'
//! bytes, each turn named once by the id table, pack names of turnback's
//! form, bases naming another row), and the file's length against the
//! sizes; any failure ignores the checkpoint. The turn, id and record
//! tables are kept (a few hundred KiB for 10,000 turns); the blob table and
//! the turns' bytes stay in the file, which stays open: a blob is found by
//! reading the one block of 64 rows its kept first id points to, a turn by
//! the hash of its id or by binary search on first_seq, and a turn's bytes
//! are read, compared with their row's CRC and decoded the first time the
//! turn is used. Whether a turn is live or sealed and when it began are in
//! its row, so listing the live turns, the automatic gc's check of the
//! oldest one and the seal of the turn before a new one read no turn's
//! bytes (a one-file rewind in a store whose oldest turn captured 4,686
//! files read that turn's 866 KB for its start alone before version 5).
//! The newest blob of each path stays in the head's bytes, found by binary
//! search. So a write into a store of 10,000 turns decodes the one or
//! two newest turns, copies no table into maps and does not read the
//! turns' bytes it does not use.
//!
//! A turn whose bytes cannot be read back whole (their CRC differs, an
//! I/O error) is taken instead from the index the covered log prefix gives
//! (the prefix read and applied once, as an open without a checkpoint
//! does): a damaged turn costs a read of the log, never a wrong turn. The
//! file is never changed in place (a new checkpoint replaces it by rename),
//! so the blob rows read later are those checked; a blob block that cannot
//! be read makes its blobs unknown (reading one then fails with that
//! error, a capture stores it again), and listing every blob (gc, verify)
//! stops the process if the table cannot be read again rather than go on
//! without it. Writing a new checkpoint copies the bytes of every turn
//! that was not decoded and still matches its CRC.
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
use std::sync::{Arc, OnceLock};

use crate::sys::fs::OFlags;
use std::io::Write as _;

use crate::fsx;
use crate::id::{BlobId, TurnId};
use crate::index::{Applied, Blobs, Captured, Index, OpInfo, PathBlobs, RecordTurns, Turn, Turns};
use crate::log::{FileEntry, Post, Pre};
use crate::pack::{self, BlobLoc};
use crate::path::RelPath;

/// The file name in the store directory.
pub const INDEX_FILE: &str = "index";

const MAGIC: &[u8] = b"turnback-index-5\n";

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
    let file = fsx::open_store_file(store, INDEX_FILE, OFlags::RDONLY, None).ok()??;
    let (covered, mut index) = open(file)?;
    if (covered.dev, covered.ino) != ident || covered.len > size {
        return None;
    }
    if Covered::of(log, ident, covered.len)? != covered {
        return None;
    }
    if let (Some(turns), Ok(log)) = (index.turns.frozen_mut(), log.try_clone()) {
        turns.log = Some((log, covered.len));
    }
    Some(index)
}

/// Writes a checkpoint of `index`, which was built from the first
/// `index.consumed` bytes (whole lines) of `log`, the file `ident`. Best
/// effort: the checkpoint is a cache, so an error only means the next open
/// reads more of the log.
pub(crate) fn write(store: &OwnedFd, index: &Index, log: &File, ident: (u64, u64)) {
    let Some(covered) = Covered::of(log, ident, index.consumed) else {
        return;
    };
    let Some(bytes) = encode(index, &covered) else {
        return;
    };
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

/// The checkpoint's bytes for `index`, built from the log prefix `covered`
/// (none when a delta's base is not a known blob or a pack name is not one
/// turnback makes, which the tables cannot hold, or when the checkpoint the
/// index came from cannot be read again).
fn encode(index: &Index, covered: &Covered) -> Option<Vec<u8>> {
    let mut w = Writer(Vec::with_capacity(128 + index.blobs.len() * BLOB_ROW));
    w.0.extend_from_slice(MAGIC);
    w.u64(0); // head_len, set below
    w.num(covered.dev);
    w.num(covered.ino);
    w.num(covered.len);
    w.0.extend_from_slice(&covered.head);
    w.0.extend_from_slice(&covered.tail);
    let bodies = w.index(index)?;
    let check = crc32fast::hash(&w.0);
    w.0.extend_from_slice(&check.to_le_bytes());
    w.0.extend_from_slice(&bodies);
    Some(w.0)
}

/// The index in the checkpoint `bytes` and the log prefix it covers, if
/// they are a whole checkpoint (tests: the bytes are put in a file).
#[cfg(test)]
fn decode(bytes: &[u8]) -> Option<(Covered, Index)> {
    let mut f = tempfile::tempfile().ok()?;
    f.write_all(bytes).ok()?;
    open(f)
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
    match (encode(a, &none(a)), encode(b, &none(b))) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

/// `len` bytes of `file` at `at`.
fn read_at(file: &File, at: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0; len];
    crate::sys::read_exact_at(file, &mut buf, at).ok()?;
    Some(buf)
}

/// `len` bytes of the checkpoint `file` at `at`, read again after its
/// check matched when it was opened. The file is never changed in place
/// (a new checkpoint replaces it by rename, and this process holds the one
/// it opened), so this fails only on an I/O error or when something other
/// than turnback rewrote it meanwhile: then the process stops rather than
/// go on with part of an index.
fn reread(file: &File, at: u64, len: usize) -> Vec<u8> {
    read_at(file, at, len).expect(
        "the index checkpoint read when the store was opened can be read again; \
         if it cannot, delete <store>/index",
    )
}

/// Bytes read at once while the check of a checkpoint is computed.
const CHUNK: usize = 64 << 10;

/// Opens the checkpoint `file`: reads its head, then the rest in chunks to
/// compute its check and check its tables' rows; keeps the turn, id and
/// record tables, and leaves the blob table and the turns' bytes in the
/// file, read when used.
fn open(file: File) -> Option<(Covered, Index)> {
    let size = usize::try_from(file.metadata().ok()?.len()).ok()?;
    let start = read_at(&file, 0, MAGIC.len() + 8)?;
    if !start.starts_with(MAGIC) {
        return None;
    }
    let head_len = usize::try_from(u64_at(&start, MAGIC.len())).ok()?;
    if head_len < start.len() || head_len > size {
        return None;
    }
    let head = read_at(&file, 0, head_len)?;
    let mut r = Reader {
        rest: &head[start.len()..],
        at: start.len(),
    };
    let covered = Covered {
        dev: r.num()?,
        ino: r.num()?,
        len: r.num()?,
        head: r.take(32)?.try_into().ok()?,
        tail: r.take(32)?.try_into().ok()?,
    };
    let mut index = r.index()?;
    let turns = r.len_any()?;
    let bodies_len = r.len_any()?;
    let records = r.len_any()?;
    let blobs = r.len_any()?;
    if !r.rest.is_empty() || covered.len == 0 || index.consumed != covered.len {
        return None;
    }
    let sizes = [
        turns.checked_mul(TURN_ROW)?,
        turns.checked_mul(16)?,
        records.checked_mul(16)?,
        blobs.checked_mul(BLOB_ROW)?,
        bodies_len,
    ];
    let total = sizes
        .iter()
        .try_fold(head_len, |acc, &n| acc.checked_add(n))?;
    if total.checked_add(4)? != size {
        return None;
    }
    let bodies_at = (total - bodies_len) as u64 + 4;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head);
    let mut at = head_len as u64;
    // The tables follow the head in order: read on from there, each chunk
    // appended where it goes (not into zeroed room first).
    std::io::Seek::seek(&mut &file, std::io::SeekFrom::Start(at)).ok()?;
    let mut buf = Vec::with_capacity(CHUNK);
    let mut stream =
        |width: usize, n: usize, keep: bool, row_ok: &mut dyn FnMut(usize, &[u8]) -> bool| {
            // A kept table is read straight into place; the others through
            // one buffer for every chunk (no allocation or copy per read).
            let mut kept = Vec::new();
            if keep {
                kept.reserve_exact(n.checked_mul(width)?);
            }
            let per = (CHUNK / width).max(1);
            let mut done = 0;
            while done < n {
                let k = per.min(n - done);
                let into = if keep { &mut kept } else { &mut buf };
                let from = if keep { done * width } else { 0 };
                into.truncate(from);
                let want = k * width;
                std::io::Read::read_to_end(&mut std::io::Read::take(&file, want as u64), into)
                    .ok()?;
                if into.len() != from + want {
                    return None;
                }
                let chunk = &into[from..];
                crc.update(chunk);
                if width > 1
                    && !chunk
                        .chunks_exact(width)
                        .enumerate()
                        .all(|(j, row)| row_ok(done + j, row))
                {
                    return None;
                }
                at += (k * width) as u64;
                done += k;
            }
            Some(kept)
        };
    let rows = stream(TURN_ROW, turns, true, &mut turn_row_check(bodies_len))?;
    let ids = stream(16, turns, true, &mut id_row_check(turns))?;
    let recs = stream(16, records, true, &mut increasing())?;
    let mut fences = Vec::new();
    let mut blob_ok = blob_row_check(blobs);
    stream(BLOB_ROW, blobs, false, &mut |k, row| {
        if k % BLOB_BLOCK == 0 {
            let mut id = [0; 32];
            id.copy_from_slice(&row[..32]);
            fences.push(id);
        }
        blob_ok(k, row)
    })?;
    let check = read_at(&file, at, 4)?;
    if crc.finalize().to_le_bytes()[..] != check[..] {
        return None;
    }
    let file = Arc::new(file);
    let blobs_at = (head_len + sizes[0] + sizes[1] + sizes[2]) as u64;
    index.turns = Turns::from_frozen(FrozenTurns {
        file: Arc::clone(&file),
        rows,
        ids,
        bodies: bodies_at,
        cells: (0..turns).map(|_| OnceLock::new()).collect(),
        log: None,
        rebuilt: OnceLock::new(),
    });
    index.record_turn = RecordTurns::from_frozen(SeqTable { rows: recs });
    index.blobs = Blobs::from_frozen(BlobTable {
        file,
        at: blobs_at,
        n: blobs,
        blocks: (0..fences.len()).map(|_| OnceLock::new()).collect(),
        fences,
    });
    Some((covered, index))
}

/// Rows whose first 8 bytes, a little-endian u64, increase.
fn increasing() -> impl FnMut(usize, &[u8]) -> bool {
    let mut last: Option<u64> = None;
    move |_, row| {
        let k = u64_at(row, 0);
        let ok = last.is_none_or(|l| l < k);
        last = Some(k);
        ok
    }
}

/// A 32-byte id as four big-endian words: ordered as its bytes are.
fn id_words(row: &[u8]) -> [u64; 4] {
    let mut w = [0; 4];
    for (i, word) in w.iter_mut().enumerate() {
        let mut b = [0; 8];
        b.copy_from_slice(&row[i * 8..i * 8 + 8]);
        *word = u64::from_be_bytes(b);
    }
    w
}

/// Turn rows: `first_seq` increasing, each turn's bytes ending after the
/// one before's, the last at the end of the turns' bytes, the seal a 0 or
/// a 1.
fn turn_row_check(bodies_len: usize) -> impl FnMut(usize, &[u8]) -> bool {
    let mut first = increasing();
    let mut end = 0u64;
    move |_, row| {
        let e = u64_at(row, 8);
        let ok = first(0, row) && e > end && e <= bodies_len as u64 && row[36] <= 1;
        end = e;
        ok
    }
}

/// Id rows: sorted, each turn named once.
fn id_row_check(n: usize) -> impl FnMut(usize, &[u8]) -> bool {
    let mut named = vec![false; n];
    let mut last: Option<(u64, u64)> = None;
    move |_, row| {
        let key = (u64_at(row, 0), u64_at(row, 8));
        let fresh = usize::try_from(key.1)
            .ok()
            .and_then(|i| named.get_mut(i))
            .is_some_and(|seen| !std::mem::replace(seen, true));
        let ok = fresh && last.is_none_or(|l| l < key);
        last = Some(key);
        ok
    }
}

/// Blob rows: ids increasing, pack names of turnback's form, bases naming
/// another row.
fn blob_row_check(n: usize) -> impl FnMut(usize, &[u8]) -> bool {
    let mut last: Option<[u64; 4]> = None;
    move |k, row| {
        let base = u32_at(row, 90) as usize;
        let id = id_words(row);
        let sorted = last.is_none_or(|l| l < id);
        last = Some(id);
        sorted && pack::is_pack_name_bytes(&row[32..66]) && base <= n && base != k + 1
    }
}

/// Bytes of one row of the turn table.
const TURN_ROW: usize = 37;

/// Bytes of one row of the blob table.
const BLOB_ROW: usize = 94;

/// Rows of the blob table read at once to find one blob.
const BLOB_BLOCK: usize = 64;

/// The checkpoint's blobs: rows of [`BLOB_ROW`] bytes sorted by id, left in
/// the file. The id of the first row of every block of [`BLOB_BLOCK`] rows
/// is kept, so finding a blob reads one block, once: a block read is kept
/// (a scan looks up every blob of the tree, so the blocks it touches are
/// read one `pread` each, not one per blob). Checked when the checkpoint is
/// opened.
#[derive(Debug)]
pub(crate) struct BlobTable {
    file: Arc<File>,
    at: u64,
    n: usize,
    fences: Vec<[u8; 32]>,
    /// Each block's rows once read (`None`: it could not be read).
    blocks: Vec<OnceLock<Option<Box<[u8]>>>>,
}

/// One row of the blob table, and its number.
pub(crate) struct BlobRow {
    row: Vec<u8>,
}

impl BlobRow {
    pub(crate) fn size(&self) -> u64 {
        u64_at(&self.row, 82)
    }

    fn base_row(&self) -> Option<usize> {
        (u32_at(&self.row, 90) as usize).checked_sub(1)
    }
}

impl BlobTable {
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The row of blob `id`: the block its fence says, read and searched.
    /// `None` when it is not there (or the block cannot be read: then the
    /// blob is as good as unknown, and reading it fails with that).
    pub(crate) fn find(&self, id: &BlobId) -> Option<BlobRow> {
        let block = self.fences.partition_point(|f| f[..] <= id.0[..]);
        let bytes = self.block(block.checked_sub(1)?)?;
        let id_at = |j: usize| &bytes[j * BLOB_ROW..j * BLOB_ROW + 32];
        let rows = bytes.len() / BLOB_ROW;
        let (mut lo, mut hi) = (0, rows);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if id_at(mid) < &id.0[..] {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let j = lo;
        if j == rows || id_at(j) != &id.0[..] {
            return None;
        }
        Some(BlobRow {
            row: bytes[j * BLOB_ROW..(j + 1) * BLOB_ROW].to_vec(),
        })
    }

    /// The rows of block `block`, read the first time they are needed.
    fn block(&self, block: usize) -> Option<&[u8]> {
        self.blocks
            .get(block)?
            .get_or_init(|| {
                let first = block * BLOB_BLOCK;
                let rows = BLOB_BLOCK.min(self.n - first);
                read_at(
                    &self.file,
                    self.at + (first * BLOB_ROW) as u64,
                    rows * BLOB_ROW,
                )
                .map(Vec::into_boxed_slice)
            })
            .as_deref()
    }

    fn id_of_row(&self, k: usize) -> Option<BlobId> {
        let at = (k % BLOB_BLOCK) * BLOB_ROW;
        let b = self.block(k / BLOB_BLOCK)?.get(at..at + 32)?;
        Some(BlobId(b.try_into().ok()?))
    }

    /// The blob `row` is a delta against.
    pub(crate) fn base(&self, row: &BlobRow) -> Option<BlobId> {
        self.id_of_row(row.base_row()?)
    }

    pub(crate) fn loc(&self, row: &BlobRow) -> BlobLoc {
        BlobLoc {
            pack: String::from_utf8_lossy(&row.row[32..66]).into(),
            offset: u64_at(&row.row, 66),
            len: u64_at(&row.row, 74),
            size: row.size(),
            base: self.base(row),
        }
    }

    /// Every row, read at once (gc and verify list every blob).
    pub(crate) fn all(&self) -> Vec<u8> {
        reread(&self.file, self.at, self.n * BLOB_ROW)
    }

    /// The id and place of each row of `all`.
    pub(crate) fn rows(all: &[u8]) -> impl Iterator<Item = (BlobId, BlobLoc)> + '_ {
        all.chunks_exact(BLOB_ROW).map(move |r| {
            let mut id = [0; 32];
            id.copy_from_slice(&r[..32]);
            let base = (u32_at(r, 90) as usize).checked_sub(1).map(|b| {
                let mut id = [0; 32];
                id.copy_from_slice(&all[b * BLOB_ROW..b * BLOB_ROW + 32]);
                BlobId(id)
            });
            let loc = BlobLoc {
                pack: String::from_utf8_lossy(&r[32..66]).into(),
                offset: u64_at(r, 66),
                len: u64_at(r, 74),
                size: u64_at(r, 82),
                base,
            };
            (BlobId(id), loc)
        })
    }
}

/// The head's newest blob of each path, left as written (each path and
/// blob id, sorted by path) with where each path's bytes are: a path is
/// found by binary search, and nothing is decoded into a map unless a new
/// checkpoint is written. The head passed its check when the checkpoint
/// was opened; a path in it that is not a valid path (a checkpoint written
/// wrong) is left out, and a capture then stores its file whole instead
/// of as a delta.
pub(crate) struct FrozenPathBlobs {
    bytes: Box<[u8]>,
    /// (offset, length) of each path's bytes in `bytes`, its blob id right
    /// after them.
    paths: Vec<(u32, u32)>,
}

impl std::fmt::Debug for FrozenPathBlobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FrozenPathBlobs({} paths)", self.paths.len())
    }
}

impl FrozenPathBlobs {
    /// The bytes of the path at `(offset, length)`.
    fn path(&self, (at, len): (u32, u32)) -> &[u8] {
        &self.bytes[at as usize..(at + len) as usize]
    }

    fn path_at(&self, k: usize) -> &[u8] {
        self.path(self.paths[k])
    }

    fn blob_at(&self, k: usize) -> BlobId {
        let end = (self.paths[k].0 + self.paths[k].1) as usize;
        let mut id = [0; 32];
        id.copy_from_slice(&self.bytes[end..end + 32]);
        BlobId(id)
    }

    /// The newest blob recorded for `path`.
    pub(crate) fn get(&self, path: &RelPath) -> Option<BlobId> {
        let k = self
            .paths
            .binary_search_by(|&p| self.path(p).cmp(path.as_bytes()))
            .ok()?;
        Some(self.blob_at(k))
    }

    /// Every path and its blob, decoded.
    pub(crate) fn all(&self) -> impl Iterator<Item = (RelPath, BlobId)> + '_ {
        (0..self.paths.len())
            .filter_map(|k| Some((RelPath::from_bytes(self.path_at(k)).ok()?, self.blob_at(k))))
    }
}

/// The checkpoint's capture and seal records, each with the `first_seq`
/// of its turn: rows of two little-endian u64, sorted by record.
#[derive(Debug)]
pub(crate) struct SeqTable {
    rows: Vec<u8>,
}

impl SeqTable {
    fn pair(&self, i: usize) -> (u64, u64) {
        (u64_at(&self.rows, i * 16), u64_at(&self.rows, i * 16 + 8))
    }

    fn n(&self) -> usize {
        self.rows.len() / 16
    }

    pub(crate) fn get(&self, seq: u64) -> Option<u64> {
        let (mut lo, mut hi) = (0, self.n());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (k, v) = self.pair(mid);
            match k.cmp(&seq) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(v),
            }
        }
        None
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.n()).map(|i| self.pair(i))
    }
}

/// The checkpoint's turns: the table of `(first_seq, end of its bytes,
/// CRC-32 of its bytes)` rows and the id table are kept; a turn's bytes are
/// read from the file and decoded the first time it is used, and kept.
pub(crate) struct FrozenTurns {
    file: Arc<File>,
    rows: Vec<u8>,
    /// A row `(id_hash u64, turn u64)` per turn, sorted.
    ids: Vec<u8>,
    /// Where the turns' bytes start in the file.
    bodies: u64,
    cells: Vec<OnceLock<Box<Turn>>>,
    /// The log and the length of it the checkpoint covers: a turn whose
    /// bytes cannot be read back whole is taken from the index that prefix
    /// gives.
    pub(crate) log: Option<(File, u64)>,
    /// That index's turns, once built.
    rebuilt: OnceLock<Option<Vec<Turn>>>,
}

/// When a turn began, whether it is sealed and what ended it: in its
/// row, so they are known without reading the turn's bytes.
#[derive(Debug, Clone, Copy)]
struct Head {
    started_at: u64,
    sealed: bool,
    ended_by: Option<u64>,
}

impl Head {
    fn of(t: &Turn) -> Head {
        Head {
            started_at: t.started_at,
            sealed: t.sealed,
            ended_by: t.ended_by,
        }
    }
}

/// FNV-1a (64 bits) of a turn id: fixed here, so a checkpoint's id table
/// means the same to every build that reads it.
fn id_hash(id: &[u8]) -> u64 {
    id.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The id at the start of a turn's bytes.
fn id_in(turn: &[u8]) -> Option<&[u8]> {
    let mut r = Reader { rest: turn, at: 0 };
    let n = r.len()?;
    r.take(n)
}

impl std::fmt::Debug for FrozenTurns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrozenTurns")
            .field("len", &self.cells.len())
            .finish_non_exhaustive()
    }
}

impl FrozenTurns {
    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }

    pub(crate) fn first_seq(&self, i: usize) -> u64 {
        u64_at(&self.rows, i * TURN_ROW)
    }

    /// Where turn `i`'s bytes start and end among the turns' bytes.
    fn span(&self, i: usize) -> (u64, u64) {
        let start = if i == 0 {
            0
        } else {
            u64_at(&self.rows, (i - 1) * TURN_ROW + 8)
        };
        (start, u64_at(&self.rows, i * TURN_ROW + 8))
    }

    /// The encoded turn `i`, read from the file, if it matches its row's
    /// CRC.
    fn raw(&self, i: usize) -> Option<Vec<u8>> {
        let (start, end) = self.span(i);
        let bytes = read_at(
            &self.file,
            self.bodies + start,
            usize::try_from(end - start).ok()?,
        )?;
        self.whole(i, &bytes).then_some(bytes)
    }

    /// Whether `bytes` are turn `i`'s, by its row's CRC.
    fn whole(&self, i: usize, bytes: &[u8]) -> bool {
        crc32fast::hash(bytes) == u32_at(&self.rows, i * TURN_ROW + 16)
    }

    /// Turn `i` as the log prefix the checkpoint covers gives it (its
    /// bytes in the checkpoint being damaged): that prefix read and applied
    /// once, as an open without a checkpoint does.
    fn turn_in_log(&self, i: usize) -> Option<Turn> {
        let turns = self.rebuilt.get_or_init(|| {
            let (log, len) = self.log.as_ref()?;
            let bytes = read_at(log, 0, usize::try_from(*len).ok()?)?;
            let parsed = crate::log::parse(&bytes, 1);
            let mut index = Index::default();
            for (_, rec) in &parsed.lines {
                index.apply(rec.as_ref().ok()?).ok()?;
            }
            Some(index.turns.iter().cloned().collect())
        });
        let first = self.first_seq(i);
        turns
            .as_ref()?
            .iter()
            .find(|t| t.first_seq == first)
            .cloned()
    }

    /// When turn `i` began, whether it is sealed and the operation that
    /// ended it: from the decoded turn if it was decoded (it may have
    /// changed since), else from its row.
    fn head(&self, i: usize) -> Head {
        if let Some(t) = self.cells[i].get() {
            return Head::of(t);
        }
        let row = i * TURN_ROW;
        Head {
            started_at: u64_at(&self.rows, row + 20),
            sealed: self.rows[row + 36] == 1,
            ended_by: Some(u64_at(&self.rows, row + 28)).filter(|&e| e != 0),
        }
    }

    /// Whether turn `i` is live, without decoding it.
    pub(crate) fn is_live(&self, i: usize) -> bool {
        self.head(i).ended_by.is_none()
    }

    /// Whether turn `i` is sealed, without decoding it.
    pub(crate) fn is_sealed(&self, i: usize) -> bool {
        self.head(i).sealed
    }

    /// When turn `i` began, without decoding it.
    pub(crate) fn started_at(&self, i: usize) -> u64 {
        self.head(i).started_at
    }

    /// Whether turn `i` was decoded (and so may have changed since).
    pub(crate) fn decoded(&self, i: usize) -> bool {
        self.cells[i].get().is_some()
    }

    /// Whether turn `i`'s id is `id`.
    pub(crate) fn id_is(&self, i: usize, id: &TurnId) -> bool {
        &self.get(i).id == id
    }

    fn id_row(&self, k: usize) -> (u64, u64) {
        (u64_at(&self.ids, k * 16), u64_at(&self.ids, k * 16 + 8))
    }

    /// The turns that may have id `id` (those whose id hashes the same),
    /// newest first, found by binary search in the id table.
    pub(crate) fn candidates(&self, id: &TurnId) -> impl Iterator<Item = usize> + '_ {
        let hash = id_hash(id.as_str().as_bytes());
        let n = self.len();
        let lo = {
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if self.id_row(mid).0 < hash {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        let end = (lo..n).find(|&k| self.id_row(k).0 != hash).unwrap_or(n);
        (lo..end).rev().map(|k| self.id_row(k).1 as usize)
    }

    pub(crate) fn get(&self, i: usize) -> &Turn {
        self.cells[i].get_or_init(|| Box::new(self.decode(i)))
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> &mut Turn {
        self.get(i);
        self.cells[i]
            .get_mut()
            .expect("the turn was decoded just above")
    }

    fn decode(&self, i: usize) -> Turn {
        let decoded = self.raw(i).and_then(|bytes| {
            let mut r = Reader {
                rest: &bytes,
                at: 0,
            };
            r.turn().filter(|_| r.rest.is_empty())
        });
        decoded.or_else(|| self.turn_in_log(i)).expect(
            "a turn of the index checkpoint is damaged and the log it covers no longer \
             gives it; `turnback verify` checks the store",
        )
    }

    /// Every turn's bytes, read at once (writing a new checkpoint).
    fn all_raw(&self) -> Option<Vec<u8>> {
        let end = self.span(self.len().checked_sub(1)?).1;
        read_at(&self.file, self.bodies, usize::try_from(end).ok()?)
    }
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

    fn u64(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    fn u32(&mut self, n: u32) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    /// The index after the log prefix it covers: the head (counters, the
    /// small maps, the tables' sizes; its length set in the preamble),
    /// then the tables. Returns the turns' bytes, which go after the check.
    fn index(&mut self, x: &Index) -> Option<Vec<u8>> {
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
        let records = x.record_turn.sorted();
        let blobs = blob_table(&x.blobs)?;
        self.num(x.turns.len() as u64);
        self.num(bodies.len() as u64);
        self.num(records.len() as u64);
        self.num((blobs.len() / BLOB_ROW) as u64);
        let head_len = self.0.len() as u64;
        self.0[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&head_len.to_le_bytes());
        self.0.extend_from_slice(&rows);
        self.0.extend_from_slice(&ids);
        for (k, v) in records {
            self.u64(k);
            self.u64(v);
        }
        self.0.extend_from_slice(&blobs);
        Some(bodies)
    }
}

/// The turn table, the id table and the turns' bytes: those of the
/// checkpoint the index came from copied as they are unless decoded since.
fn turn_tables(turns: &Turns) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let frozen = turns.frozen();
    let old = match frozen {
        Some(f) if (0..f.len()).any(|i| !f.decoded(i)) => Some(f.all_raw()?),
        _ => None,
    };
    let mut bodies = Writer(Vec::new());
    let mut rows = Writer(Vec::with_capacity(turns.len() * TURN_ROW));
    let mut ids = Vec::with_capacity(turns.len());
    for i in 0..turns.len() {
        let start = bodies.0.len();
        let (first, head) = match (frozen, &old) {
            (Some(f), Some(old)) if i < f.len() && !f.decoded(i) => {
                let (a, b) = f.span(i);
                bodies.0.extend_from_slice(
                    old.get(usize::try_from(a).ok()?..usize::try_from(b).ok()?)?,
                );
                (f.first_seq(i), f.head(i))
            }
            _ => {
                let t = turns.get(i)?;
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
    let old: Vec<(BlobId, BlobLoc)> = match blobs.table() {
        Some(t) => BlobTable::rows(&t.all()).collect(),
        None => Vec::new(),
    };
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

/// Reads a checkpoint's bytes; `at` is where `rest` starts in them.
struct Reader<'a> {
    rest: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        self.at += n;
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
        (n <= self.rest.len()).then_some(n)
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

    /// A count or length, with no bound but the platform's.
    fn len_any(&mut self) -> Option<usize> {
        usize::try_from(self.num()?).ok()
    }

    /// The head's part of the index: counters and small maps; the tables
    /// are added by [`open`].
    fn index(&mut self) -> Option<Index> {
        let last_seq = self.num()?;
        let captures = self.num()?;
        let lines = self.len_any()?;
        let consumed = self.num()?;
        let live_count = self.len_any()?;
        let stored_bytes = self.num()?;
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
        // Kept as written, with where each path is (see FrozenPathBlobs).
        let from = self.rest;
        let start = self.at;
        let n = self.len()?;
        let mut paths = Vec::with_capacity(n);
        for _ in 0..n {
            let len = self.len()?;
            let at = u32::try_from(self.at - start).ok()?;
            paths.push((at, u32::try_from(len).ok()?));
            self.take(len)?;
            self.take(32)?;
        }
        let bytes = &from[..from.len() - self.rest.len()];
        let path_blob = PathBlobs::from_frozen(FrozenPathBlobs {
            bytes: bytes.into(),
            paths,
        });
        Some(Index {
            saved,
            ops,
            done,
            undone,
            last_seq,
            path_blob,
            captures,
            lines,
            consumed,
            live_count,
            stored_bytes,
            ..Index::default()
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
        encode(index, &none).expect("every base is a known blob")
    }

    /// The checkpoint of `index` covering `covered`.
    fn bytes_of_at(index: &Index, covered: &Covered) -> Vec<u8> {
        encode(index, covered).expect("every base is a known blob")
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
        let bytes = encode(&full.index, &covered).ok_or("encodes")?;
        let (back_covered, back) = decode(&bytes).ok_or("a fresh checkpoint decodes")?;
        assert_eq!(back_covered, covered);
        assert_eq!(
            encode(&back, &covered),
            Some(bytes),
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
            back.blobs.iter().any(|(_, l)| l.base.is_some()),
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

    /// `bytes` with its check recomputed (a checkpoint changed on purpose,
    /// still whole by its CRC).
    fn rechecked(mut bytes: Vec<u8>) -> Vec<u8> {
        let n = bytes.len() - 4;
        let check = crc32fast::hash(&bytes[..n]);
        bytes[n..].copy_from_slice(&check.to_le_bytes());
        bytes
    }

    /// How many of the checkpoint's turns `index` has decoded.
    fn decoded(index: &Index) -> usize {
        index
            .turns
            .frozen()
            .map_or(0, |f| (0..f.len()).filter(|&i| f.decoded(i)).count())
    }

    #[test]
    fn a_checkpoint_read_in_place_answers_as_the_whole_index() -> TestResult {
        let (dir, mut store) = rich_store()?;
        checkpoint_now(&store)?;
        // Records after the checkpoint: the tables and what was added since
        // are searched together.
        store.write(&t("t6"), None, "e.txt", b"e\n")?;
        store.write(&t("t1"), None, "a.txt", b"a3\n")?;
        // The index from the log alone first, the checkpoint put back
        // after: on Windows an open store holds its checkpoint open, and
        // Wine cannot delete a file another handle holds.
        let saved = std::fs::read(index_path(&store))?;
        let full = from_log_alone(dir.path(), &store)?;
        assert!(full.turns.frozen().is_none());
        std::fs::write(index_path(&store), saved)?;
        let lazy = Store::open(dir.path())?.index;
        assert!(lazy.turns.frozen().is_some(), "opened from the checkpoint");
        assert!(full.blobs.len() > 5 && lazy.blobs.len() == full.blobs.len());
        for (id, loc) in full.blobs.iter() {
            assert_eq!(lazy.blobs.get(&id), Some(loc.clone()), "{id}");
            assert_eq!(lazy.blobs.size_of(&id), Some(loc.size));
            assert_eq!(lazy.blobs.base_of(&id), loc.base);
            assert_eq!(lazy.delta_depth(&id), full.delta_depth(&id));
        }
        let absent = BlobId([0xab; 32]);
        assert!(!lazy.blobs.contains_key(&absent) && lazy.blobs.get(&absent).is_none());
        for seq in 0..=full.last_seq + 1 {
            assert_eq!(lazy.record_turn.get(&seq), full.record_turn.get(&seq));
        }
        assert_eq!(
            decoded(&lazy),
            1,
            "only t1, which a record after it changed"
        );
        for name in ["s0", "t1", "t2", "t2b", "t3", "t4", "t5", "t6", "nope"] {
            let id = t(name);
            let first = |x: &Index| x.turn(&id).map(|t| t.first_seq);
            assert_eq!(first(&lazy), first(&full), "{name}");
            assert_eq!(lazy.ended(&id), full.ended(&id), "{name}");
        }
        for turn in &full.turns {
            let at = lazy
                .turn_at(turn.first_seq)
                .ok_or("a turn by its first_seq")?;
            assert_eq!(at.id, turn.id);
            assert_eq!(at.files, turn.files);
        }
        assert!(lazy.turn_at(full.last_seq + 1).is_none());
        assert_eq!(lazy.live().count(), full.live().count());
        assert_eq!(lazy.live_count, full.live_count);
        assert_eq!(lazy.stored_bytes, full.stored_bytes);
        assert_eq!(bytes_of(&lazy), bytes_of(&full));
        Ok(())
    }

    #[test]
    fn a_checkpoint_is_written_again_from_its_own_tables() -> TestResult {
        let (dir, store) = rich_store()?;
        checkpoint_now(&store)?;
        let bytes = std::fs::read(index_path(&store))?;
        let (covered, lazy) = decode(&bytes).ok_or("decodes")?;
        // Nothing decoded: the turns' bytes and the rows are copied.
        assert_eq!(bytes_of_at(&lazy, &covered), bytes);
        assert_eq!(decoded(&lazy), 0);
        // Every turn decoded, one changed: written from the decoded turns.
        let (_, mut changed) = decode(&bytes).ok_or("decodes")?;
        changed.turns.last_mut().ok_or("a turn")?.label = Some("changed".into());
        assert_ne!(bytes_of_at(&changed, &covered), bytes);
        let whole = from_log_alone(dir.path(), &store)?;
        for x in [&lazy, &whole] {
            let (_, back) = decode(&bytes_of_at(x, &covered)).ok_or("decodes")?;
            assert_eq!(bytes_of(&back), bytes_of(&whole));
        }
        Ok(())
    }

    #[test]
    fn a_write_into_a_checkpointed_store_decodes_only_the_newest_turns() -> TestResult {
        let (dir, _store) = large_store()?;
        let mut store = Store::open(dir.path())?;
        assert_eq!(store.index.turns.frozen().map(FrozenTurns::len), Some(400));
        store.write(&t("new"), None, "f1.txt", b"new\n")?;
        store.write(&t("new"), None, "f2.txt", b"new\n")?;
        assert!(
            decoded(&store.index) <= 2,
            "{} decoded",
            decoded(&store.index)
        );
        assert_eq!(store.turns().len(), 401);
        let whole = from_log_alone(dir.path(), &store)?;
        assert_eq!(bytes_of(&store.index), bytes_of(&whole));
        Ok(())
    }

    #[test]
    fn a_rewind_of_the_newest_turn_decodes_no_older_turn() -> TestResult {
        let (dir, store) = large_store()?;
        // The automatic gc check after the rewind runs (no limit reached).
        std::fs::write(
            store.store_dir().join(crate::config::CONFIG_FILE),
            "[retention]\nkeep_turns = 1000000\n",
        )?;
        let mut store = Store::open(dir.path())?;
        store.write(&t("new"), None, "f1.txt", b"new\n")?;
        let report = store.rewind(&t("new"), &crate::RewindOptions::default())?;
        assert_eq!(report.turns, vec![t("new")]);
        // f1.txt as t393 (the last of i % 7 == 1) left it.
        assert_eq!(std::fs::read(dir.path().join("f1.txt"))?, b"393\n");
        // The write sealed the turn before it (decoded); the plan, the
        // record and the gc check decoded none of the 399 older ones.
        assert!(
            decoded(&store.index) <= 1,
            "{} decoded",
            decoded(&store.index)
        );
        // Reopened: applying the rewind record decodes none either.
        let again = Store::open(dir.path())?;
        assert!(decoded(&again.index) <= 1, "{}", decoded(&again.index));
        assert_eq!(again.index.live_count, 400);
        // The oldest live turn's start is read without decoding it.
        assert!(again.gc_due(&again.config()?, u64::MAX), "t0 is too old");
        assert!(decoded(&again.index) <= 1, "{}", decoded(&again.index));
        assert_eq!(again.turns().len(), 400);
        let whole = from_log_alone(dir.path(), &again)?;
        assert_eq!(bytes_of(&again.index), bytes_of(&whole));
        Ok(())
    }

    #[test]
    fn a_write_after_a_sealed_turn_decodes_no_turn_and_finds_bases_in_place() -> TestResult {
        let (dir, mut store) = large_store()?;
        // A capture turn the agent then wrote itself (no post-images), sealed
        // by the next turn, which is rewound: the newest live turn is sealed.
        store.capture_many(&t("big"), None, &["f1.txt", "f2.txt"])?;
        std::fs::write(dir.path().join("f1.txt"), "by the agent\n")?;
        store.write(&t("next"), None, "f3.txt", b"next\n")?;
        store.rewind(&t("next"), &crate::RewindOptions::default())?;
        // The checkpoint again, now holding "big" sealed.
        drop(from_log_alone(dir.path(), &store)?);
        let first = Store::open(dir.path())?;
        assert!(index_path(&first).exists());
        let mut store = Store::open(dir.path())?;
        store.write(&t("new"), None, "f5.txt", b"new\n")?;
        assert_eq!(decoded(&store.index), 0, "\"big\" is sealed: not decoded");
        let whole = from_log_alone(dir.path(), &store)?;
        let bases = whole.path_blob.all();
        assert_eq!(bases.len(), 7);
        for (path, blob) in &bases {
            assert_eq!(store.index.path_blob.get(path), Some(*blob), "{path}");
        }
        let absent = RelPath::parse("f7.txt")?;
        assert_eq!(store.index.path_blob.get(&absent), None);
        assert_eq!(bytes_of(&store.index), bytes_of(&whole));
        Ok(())
    }

    /// A rewind's saved states are stored but are no path's delta base: the
    /// path holds the pre-image it put back, the base it already had.
    #[test]
    fn a_rewind_leaves_each_delta_base_at_what_it_put_back() -> TestResult {
        use sha2::Digest;
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("a.txt"), "before\n")?;
        let mut store = Store::open(dir.path())?;
        store.write(&t("t1"), None, "a.txt", b"by the agent\n")?;
        let a = RelPath::parse("a.txt")?;
        let pre = BlobId(sha2::Sha256::digest(b"before\n").into());
        assert_eq!(store.index.path_blob.get(&a), Some(pre));
        store.rewind(&t("t1"), &RewindOptions::default())?;
        let saved = BlobId(sha2::Sha256::digest(b"by the agent\n").into());
        assert!(
            store.index.blobs.get(&saved).is_some(),
            "the saved state is stored"
        );
        assert_eq!(store.index.path_blob.get(&a), Some(pre));
        // A replay of the log agrees.
        let whole = from_log_alone(dir.path(), &store)?;
        assert_eq!(whole.path_blob.get(&a), Some(pre));
        Ok(())
    }

    #[test]
    fn a_checkpoint_whose_tables_are_out_of_order_or_range_is_ignored() -> TestResult {
        let (dir, store) = large_store()?;
        let bytes = std::fs::read(index_path(&store))?;
        let (_, index) = decode(&bytes).ok_or("decodes")?;
        let blobs = index.blobs.table().ok_or("a blob table")?;
        let turns = index.turns.frozen().ok_or("a turn table")?;
        let n = turns.len();
        assert!(blobs.len() > 2 && n > 2);
        // Where the tables are: the turn rows right after the head, the id
        // rows after them; the blob rows before the turns' bytes.
        let tt = u64_at(&bytes, MAGIC.len()) as usize;
        let ids = tt + n * TURN_ROW;
        let bodies_len = u64_at(&bytes, tt + (n - 1) * TURN_ROW + 8) as usize;
        let b = bytes.len() - 4 - bodies_len - blobs.len() * BLOB_ROW;
        let mut bad: Vec<(&str, Vec<u8>)> = Vec::new();
        let mut swap = bytes.clone();
        swap[b..b + 2 * BLOB_ROW].rotate_left(BLOB_ROW);
        bad.push(("blob rows swapped", swap));
        let mut pack = bytes.clone();
        pack[b + 32] = b'/';
        bad.push(("a pack name of another form", pack));
        let mut base = bytes.clone();
        base[b + 90..b + 94].copy_from_slice(&1u32.to_le_bytes());
        bad.push(("a blob its own base", base));
        let mut end = bytes.clone();
        end[tt + 8..tt + 16].copy_from_slice(&0u64.to_le_bytes());
        bad.push(("a turn of no bytes", end));
        let mut order = bytes.clone();
        order[tt..tt + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        bad.push(("turns out of order", order));
        let mut ids_swapped = bytes.clone();
        ids_swapped[ids..ids + 32].rotate_left(16);
        bad.push(("id rows swapped", ids_swapped));
        let mut twice = bytes.clone();
        let first = u64_at(&bytes, ids + 8);
        twice[ids + 24..ids + 32].copy_from_slice(&first.to_le_bytes());
        bad.push(("a turn named twice by the id table", twice));
        let mut long = bytes.clone();
        long[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        bad.push(("a head as long as the file", long));
        let whole = from_log_alone(dir.path(), &store)?;
        for (what, b) in bad {
            let b = rechecked(b);
            assert!(decode(&b).is_none(), "{what}");
            std::fs::write(index_path(&store), &b)?;
            assert!(load_now(&store)?.is_none(), "{what}");
            let opened = Store::open(dir.path())?;
            assert_eq!(bytes_of(&opened.index), bytes_of(&whole), "{what}");
        }
        // Cut short: ignored, and the store opens from its log.
        std::fs::write(index_path(&store), &bytes[..bytes.len() / 3])?;
        assert!(load_now(&store)?.is_none());
        let opened = Store::open(dir.path())?;
        assert_eq!(bytes_of(&opened.index), bytes_of(&whole));
        Ok(())
    }

    #[test]
    fn a_damaged_checkpoint_is_ignored() -> TestResult {
        let (dir, store) = rich_store()?;
        checkpoint_now(&store)?;
        let bytes = std::fs::read(index_path(&store))?;
        let (_, index) = decode(&bytes).ok_or("decodes")?;
        let turns = index.turns.frozen().ok_or("turns")?;
        let bodies_len = turns.span(turns.len() - 1).1 as usize;
        let bodies_at = bytes.len() - bodies_len;
        // Everything before the turns' bytes is under the check.
        for i in 0..bodies_at {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(decode(&bad).is_none(), "byte {i} flipped");
        }
        // A turn's bytes are checked when it is read: a damaged one is
        // taken from the log the checkpoint covers.
        let whole = from_log_alone(dir.path(), &store)?;
        for at in [bodies_at, bodies_at + bodies_len / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            std::fs::write(index_path(&store), &bad)?;
            let opened = Store::open(dir.path())?;
            assert!(
                opened.index.turns.frozen().is_some(),
                "the checkpoint is used"
            );
            assert_eq!(
                opened
                    .index
                    .turns
                    .iter()
                    .map(|t| t.files.clone())
                    .collect::<Vec<_>>(),
                whole
                    .turns
                    .iter()
                    .map(|t| t.files.clone())
                    .collect::<Vec<_>>(),
                "byte {at} flipped"
            );
            assert_eq!(
                bytes_of(&opened.index),
                bytes_of(&whole),
                "byte {at} flipped"
            );
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
        std::fs::write(index_path(&store), bytes_of_at(&stale.1, &reused))?;
        assert!(load_now(&store)?.is_none(), "an inode reused");
        // A change in the middle of the prefix, same file, same length:
        // the checkpoint still stands.
        std::fs::write(&path, &log)?;
        let ident = ident_of(&path)?;
        std::fs::write(
            index_path(&store),
            bytes_of_at(
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
            std::fs::write(index_path(&store), bytes_of_at(&old, &c))?;
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
            opened.index.turns.iter().next_back().map(|t| t.started_at),
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
        // Built from the log alone: an index read from the checkpoint
        // holds it open, and Wine cannot rename over an open file.
        let mut index = from_log_alone(dir.path(), &store)?;
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
