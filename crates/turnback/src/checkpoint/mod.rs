//! The index checkpoint `<store>/index`: the in-memory index
//! ([`crate::index`]) as it stood after a prefix of the log, so that opening
//! a store reads only the log lines appended since, not the whole log.
//!
//! It is a cache. The log stays the only record: a checkpoint that is
//! missing, whose head is damaged, of another version, or that does not
//! name the log as it is now is ignored and the whole log is read, as
//! without it; a part of its tables or turns that is damaged is answered
//! by the log when that part is used.
//!
//! Format, all integers LEB128 varints unless stated (`u32`, `u64`: little
//! endian, fixed width), strings and byte runs a varint length then the
//! bytes:
//!
//! ```text
//! magic     "turnback-index-10\n"      (18 bytes; the 10 is the version:
//!                                      version 2 added each capture's
//!                                      `shared_with` turns, version 3
//!                                      names the log by identity instead
//!                                      of hashing the prefix it covers,
//!                                      version 4 keeps turns, capture
//!                                      records and blobs in tables read
//!                                      in place, version 5 each turn's
//!                                      start, seal and end in its row,
//!                                      version 6 checks each block of
//!                                      each table on its own, version 7
//!                                      each operation's paths of
//!                                      reverted turns that still stand,
//!                                      version 8 a seal's post-images
//!                                      with seq 0: a seal touches no
//!                                      path, version 9 the applications
//!                                      undos reversed, version 10 the
//!                                      saved records without the paths
//!                                      their operation kept)
//! head_len  u64: bytes from the start of the file to the end of the head
//! -- head --
//! log_dev   st_dev of the log file it was built from
//! log_ino   st_ino of that file
//! log_len   bytes of the log covered   (whole lines only; > 0)
//! log_head  SHA-256 of the first min(log_len, 4096) bytes (32 bytes)
//! log_tail  SHA-256 of the last min(log_len, 4096) bytes of the covered
//!           prefix, which end with its last line (32 bytes)
//! counters  last_seq, captures, lines, consumed, live turns, stored bytes
//! small     saved records, operations (the turns each ended, its turn,
//!           time, and its reverted turns' paths that still stand: a
//!           count, then per turn its first_seq and its paths), the done
//!           and undone stacks (op, saved), the applications undos
//!           reversed (op, saved, undo's seq), the newest blob of each
//!           path; every map written sorted by key, so equal indexes
//!           give equal bytes; a pre-image is a tag (0 file, 1 symlink,
//!           2 absent, 3 dir, 4 skipped, 5 fifo, 6 file with its hard-link
//!           key after the mode) then its fields
//! sizes     turns, bytes of the turns, records, blobs
//! fences    for each block of 64 rows of each table, in the tables'
//!           order: CRC-32 of the block's bytes (u32), then the key its
//!           first row starts with (8 bytes; 32 for the blob table)
//! check     CRC-32 (IEEE) of everything before it (u32)
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
//! -- turns' bytes --
//! each turn, oldest first: its id, label, first_seq, start time, sealed,
//!           ended_by, captures, post-images, the captures' order by path
//!           (a position per capture); each checked by the CRC-32 in its
//!           row
//! ```
//!
//! Read lazily: opening reads the head (one `pread` when it is under 64
//! KiB), checks its CRC, decodes it, and compares the file's length with
//! the sizes; any failure ignores the checkpoint. Nothing else is read:
//! the tables and the turns' bytes stay in the file, which stays open.
//! A row is found by a binary search over its table's fences, in the head,
//! then within the one block they name ([`table`]); that block is read
//! with one `pread`, compared with its CRC and its fence, its rows checked
//! (in order within it, turn ends within the turns' bytes, id rows naming
//! a turn, bases naming another row), and kept. A blob is found by its id,
//! a turn by the hash of its id or by binary search on first_seq, a
//! record's turn by its seq; a turn's bytes are read, compared with their
//! row's CRC and decoded the first time the turn is used. Whether a turn
//! is live or sealed and when it began are in its row, so listing the live
//! turns, the automatic gc's check of the oldest one and the seal of the
//! turn before a new one read no turn's bytes. The newest blob of each
//! path stays in the head's bytes, found by binary search. So a write into
//! a store of 10,000 turns reads the head and a few blocks, decodes the
//! one or two newest turns and copies no table into maps: before version
//! 6 every open read and checked every table, some 1.8 MB for 10,000
//! turns, which made such a write 1.32x the same write into a one-turn
//! store.
//!
//! What a block holds is checked within the block; across blocks (order
//! from one block to the next, each turn named once by the id table, pack
//! names) only by [`tables_whole`], which `turnback verify` runs: a
//! checkpoint is written by turnback from an index in order, so a block
//! whose CRC matches holds what was written, and one written wrong is
//! named by verify.
//!
//! A table block or a turn's bytes that cannot be read back whole (a CRC
//! or a check differs, an I/O error) is answered instead by the index the
//! covered log prefix gives (that prefix read and applied once, as an open
//! without a checkpoint does; [`covered::Fallback`]): a damaged part costs
//! a read of the log, never a wrong answer. The file is never changed in
//! place (a new checkpoint replaces it by rename), so the blocks read
//! later are those written. If the log cannot give that part either (two
//! faults at once), a turn or a capture record's turn is
//! [`crate::Error::TurnUnreadable`], which names the turn and says to run
//! `turnback verify`, then `turnback repair` (a blob row still stops the
//! process rather than answer from part of an index). Writing a new
//! checkpoint copies the bytes of every turn that was not decoded and still
//! matches its CRC.
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
//! least [`WRITE_AFTER`] bytes of log beyond the checkpoint it found, by a
//! store that appended as much when it is dropped (if the shared lock is
//! free then), and by [`crate::Store::maintain`] once a store that left its
//! checkpoint to it is [`WRITE_AFTER_DEFERRED`] behind, under the shared
//! or the exclusive lock (never while gc or repair replaces the log, which
//! hold the exclusive lock); two writers at once each rename a complete
//! file of their own. Written as a stream:
//! the tables and the turns' bytes after room left for the head, the head
//! last (see `encode.rs`).

mod blobs;
mod covered;
mod decode;
mod encode;
mod paths;
mod table;
#[cfg(test)]
mod tests;
mod turns;

pub(crate) use blobs::BlobTable;
pub(crate) use paths::FrozenPathBlobs;
pub(crate) use turns::{FrozenTurns, SeqTable};

use std::fs::File;
#[cfg(test)]
use std::io::Write as _;
use std::sync::{Arc, OnceLock};

use crate::fsx;
use crate::index::{Blobs, Index, RecordTurns, Turns};
use crate::sys::OwnedFd;
use crate::sys::fs::OFlags;

use blobs::BLOB_ROW;
use covered::{Covered, Fallback};
use decode::Reader;
use table::{Kind, Table, blocks};
use turns::TURN_ROW;

/// The file name in the store directory.
pub const INDEX_FILE: &str = "index";

const MAGIC: &[u8] = b"turnback-index-10\n";

/// A process that parsed, or appended, at least this many bytes of log
/// past the checkpoint writes a new one.
pub(crate) const WRITE_AFTER: u64 = 64 << 10;

/// The same, for a checkpoint left to the background (see
/// [`crate::Options::defer_checkpoint`]): written by then off every
/// caller's wait, it is written sooner, so that the processes opening the
/// store after a large record (a command that changed 100 files appends
/// some 37 KB) do not each parse it again.
pub(crate) const WRITE_AFTER_DEFERRED: u64 = 16 << 10;

/// The index the checkpoint holds, if its head is whole and it covers a
/// prefix of `log`, the file `ident` (`(st_dev, st_ino)`) of `size` bytes:
/// with it, the log from `index.consumed` on remains to be read. Reads the
/// checkpoint's head and at most two small windows of the log, never the
/// whole log nor the checkpoint's tables.
pub(crate) fn load(store: &OwnedFd, log: &File, ident: (u64, u64), size: u64) -> Option<Index> {
    // A cache: one that is not a regular file is ignored (the next write
    // replaces it by rename).
    let file = fsx::open_store_file(store, INDEX_FILE, OFlags::RDONLY, None).ok()??;
    let (covered, index) = open(file, log.try_clone().ok())?;
    if (covered.dev, covered.ino) != ident || covered.len > size {
        return None;
    }
    if Covered::of(log, ident, covered.len)? != covered {
        return None;
    }
    Some(index)
}

/// Writes a checkpoint of `index`, which was built from the first
/// `index.consumed` bytes (whole lines) of `log`, the file `ident`. Best
/// effort: the checkpoint is a cache, so an error only means the next open
/// reads more of the log.
pub(crate) fn write(store: &OwnedFd, index: &Index, log: &File, ident: (u64, u64)) {
    if let Some(prepared) = prepare(store, index, log, ident) {
        prepared.install(store);
    }
}

/// A checkpoint written under a temporary name, to be put in place later
/// ([`Prepared::install`]): gc writes the checkpoint of the log it
/// compacts before it holds the lock that replaces the log.
#[derive(Debug)]
pub(crate) struct Prepared {
    temp: String,
}

/// [`write`], but left under a temporary name. `None` when it could not be
/// written (a cache: the next open reads more of the log).
pub(crate) fn prepare(
    store: &OwnedFd,
    index: &Index,
    log: &File,
    ident: (u64, u64),
) -> Option<Prepared> {
    let covered = Covered::of(log, ident, index.consumed)?;
    let (f, temp) = fsx::create_temp(store, INDEX_FILE, 0o644).ok()?;
    if !matches!(encode::write(index, &covered, &f), Ok(true)) {
        let _ = fsx::unlink(store, &temp);
        return None;
    }
    Some(Prepared { temp })
}

impl Prepared {
    /// Puts it in place of the checkpoint (best effort, as [`write`]).
    pub(crate) fn install(self, store: &OwnedFd) {
        if fsx::rename(store, &self.temp, INDEX_FILE).is_err() {
            self.discard(store);
        }
    }

    /// Removes it.
    pub(crate) fn discard(self, store: &OwnedFd) {
        let _ = fsx::unlink(store, &self.temp);
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

/// Checks the checkpoint of the log `log` (its identity `ident`, its
/// bytes `log_bytes`), when an open would trust it (it names this log file
/// and the ends of its prefix): it must read back whole and hold the index
/// the lines it covers give. An open checks only its identity and its
/// head, so this reads and compares the whole of it: a checkpoint that
/// names the log but differs (a line of that prefix changed in place,
/// damaged or rewritten) would make every open see another store than the
/// log records. `Some`: why it must be deleted (`turnback verify` reports
/// it as damage).
pub(crate) fn verify(
    store: &OwnedFd,
    log: &File,
    ident: (u64, u64),
    log_bytes: &[u8],
) -> Option<String> {
    let trusted = load(store, log, ident, log_bytes.len() as u64)?;
    if !tables_whole(&trusted) {
        return Some("the index checkpoint names this log but part of its tables or turns fails its check; opens answer that part from the log, reading all of it each time, so delete the checkpoint (it is a cache: the next open reads the whole log and writes a new one)".into());
    }
    let covered = log_bytes.get(..trusted.consumed as usize)?;
    let parsed = crate::log::parse(covered, 1);
    let mut from_log = Index::default();
    let whole = parsed.torn.is_none()
        && parsed
            .lines
            .iter()
            .all(|(_, r)| r.as_ref().is_ok_and(|rec| from_log.apply(rec).is_ok()));
    from_log.lines = parsed.lines.len();
    from_log.consumed = parsed.consumed as u64;
    if whole && same(&trusted, &from_log) {
        return None;
    }
    Some(format!(
        "the index checkpoint names this log but does not hold what its first {} bytes record{}; every open would trust it, so delete it (it is a cache: the next open reads the whole log and writes a new one)",
        trusted.consumed,
        if whole {
            ""
        } else {
            " (they hold a damaged line)"
        },
    ))
}

/// Whether every part of the checkpoint `index` was opened from reads back
/// whole: each block of each table by its CRC and its rows, in order
/// across blocks too, each turn named once, each turn's bytes by its CRC.
/// An open checks only the head; a damaged part is then answered by the
/// covered log when it is used, so `turnback verify` reads it all. An
/// index not opened from a checkpoint is whole.
fn tables_whole(index: &Index) -> bool {
    index.turns.frozen().is_none_or(FrozenTurns::whole)
        && index.record_turn.table().is_none_or(|t| t.rows.whole())
        && index.blobs.table().is_none_or(BlobTable::whole)
}

/// The checkpoint's bytes for `index`, built from the log prefix `covered`
/// (none when a delta's base is not a known blob or a pack name is not one
/// turnback makes, which the tables cannot hold).
fn encode(index: &Index, covered: &Covered) -> Option<Vec<u8>> {
    let mut bytes = std::io::Cursor::new(Vec::new());
    match encode::write(index, covered, &mut bytes) {
        Ok(true) => Some(bytes.into_inner()),
        _ => None,
    }
}

/// The index in the checkpoint `bytes` and the log prefix it covers, if
/// their head is whole (tests: the bytes are put in a file).
#[cfg(test)]
fn decode(bytes: &[u8]) -> Option<(Covered, Index)> {
    let mut f = tempfile::tempfile().ok()?;
    f.write_all(bytes).ok()?;
    open(f, None)
}

/// Whether two indexes are equal (they encode to the same bytes).
fn same(a: &Index, b: &Index) -> bool {
    match (
        encode(a, &Covered::none(a.consumed)),
        encode(b, &Covered::none(b.consumed)),
    ) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("a slice of 8 bytes"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("a slice of 4 bytes"))
}

/// `len` bytes of `file` at `at`.
fn read_at(file: &File, at: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0; len];
    crate::sys::read_exact_at(file, &mut buf, at).ok()?;
    Some(buf)
}

/// Bytes read with the magic, in the hope that they hold the whole head.
const FIRST_READ: usize = 64 << 10;

/// Opens the checkpoint `file`, the log it covers being `log`: reads its
/// head (one `pread` when it is under [`FIRST_READ`] bytes) and checks it;
/// the tables and the turns' bytes stay in the file, read when used.
fn open(file: File, log: Option<File>) -> Option<(Covered, Index)> {
    let size = usize::try_from(file.metadata().ok()?.len()).ok()?;
    let mut head = read_at(&file, 0, size.min(FIRST_READ))?;
    if !head.starts_with(MAGIC) || head.len() < MAGIC.len() + 8 {
        return None;
    }
    let head_len = usize::try_from(u64_at(&head, MAGIC.len())).ok()?;
    if head_len < MAGIC.len() + 8 + 4 || head_len > size {
        return None;
    }
    if head_len > head.len() {
        head = read_at(&file, 0, head_len)?;
    }
    let head = &head[..head_len];
    let (head, check) = head.split_at(head_len - 4);
    if crc32fast::hash(head).to_le_bytes()[..] != check[..] {
        return None;
    }
    let mut r = Reader {
        rest: &head[MAGIC.len() + 8..],
        at: MAGIC.len() + 8,
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
    if covered.len == 0 || index.consumed != covered.len {
        return None;
    }
    // The sizes must add up to the file's length before anything is sized
    // by them (a head claiming 2^60 rows makes no room for their checks).
    let tables = [
        turns.checked_mul(TURN_ROW)?,
        turns.checked_mul(16)?,
        records.checked_mul(16)?,
        blobs.checked_mul(BLOB_ROW)?,
        bodies_len,
    ];
    if tables.iter().try_fold(head_len, |a, &n| a.checked_add(n))? != size {
        return None;
    }
    let file = Arc::new(file);
    let fallback = Arc::new(Fallback::new(log.map(|l| (l, covered.len))));
    let mut at = head_len as u64;
    let mut table = |width: usize, n: usize, kind: Kind| -> Option<Table> {
        let mut checks = Vec::with_capacity(blocks(n));
        let mut fences = Vec::with_capacity(blocks(n) * kind.key());
        for _ in 0..blocks(n) {
            checks.push(r.le_u32()?);
            fences.extend_from_slice(r.take(kind.key())?);
        }
        let heads = (checks.into(), fences.into());
        let t = Table::new(Arc::clone(&file), at, (width, n), kind, heads);
        at = at.checked_add(u64::try_from(n.checked_mul(width)?).ok()?)?;
        Some(t)
    };
    let rows = table(
        TURN_ROW,
        turns,
        Kind::Turns {
            bodies_len: bodies_len as u64,
        },
    )?;
    let ids = table(16, turns, Kind::Ids { turns })?;
    let recs = table(16, records, Kind::Records)?;
    let blob_rows = table(BLOB_ROW, blobs, Kind::Blobs { rows: blobs })?;
    if !r.rest.is_empty() {
        return None;
    }
    index.turns = Turns::from_frozen(FrozenTurns {
        file: Arc::clone(&file),
        rows,
        ids,
        bodies: at,
        cells: (0..turns).map(|_| OnceLock::new()).collect(),
        fallback: Arc::clone(&fallback),
    });
    index.record_turn = RecordTurns::from_frozen(SeqTable {
        rows: recs,
        fallback: Arc::clone(&fallback),
    });
    index.blobs = Blobs::from_frozen(BlobTable {
        rows: blob_rows,
        fallback,
    });
    Some((covered, index))
}
