//! One table of the checkpoint, read in place: rows of a fixed width,
//! sorted by a key at their start, in blocks of [`BLOCK`] rows. Each
//! block's CRC-32 and the key of its first row (its fence) are in the
//! checkpoint's head (itself under the head's check), so opening reads no
//! row, and a search reads one block: the fences say which. A block is
//! read with one `pread` the first time one of its rows is wanted,
//! compared with its CRC and its fence, its rows checked ([`Kind`]), and
//! kept, up to [`KEEP_BLOCKS`] blocks for the lookups that take a row by
//! value ([`Table::find_with`], [`Table::row_with`], which the blob table
//! uses): a rewind of 100,000 files looks up 100,000 blobs, which kept a
//! table of 200,000 of them whole (19 MB).
//! A block that cannot be read, or fails either check, answers `None` for
//! each of its rows; the caller then asks the log prefix the checkpoint
//! covers ([`super::covered::Fallback`]).
//!
//! What a block's rows must be is checked within the block; across blocks
//! (the order from one block to the next, each turn named once by the id
//! table) only by [`Table::whole`], which `turnback verify` runs: a
//! checkpoint is written by turnback from an index in order, so a block
//! whose CRC matches holds what was written.

use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use super::{read_at, u32_at, u64_at};

/// Blocks a table keeps at most for the lookups that take a row by value
/// (6 MB of the blob table); past them, a block such a lookup reads is let
/// go after it.
const KEEP_BLOCKS: usize = 1024;

/// Rows in a block.
pub(super) const BLOCK: usize = 64;

/// Which table, and what its rows must be.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// `first_seq` increasing; each turn's bytes ending after the one
    /// before's and within the turns' bytes (`bodies_len`); a seal of 0
    /// or 1.
    Turns { bodies_len: u64 },
    /// `(hash, turn)` increasing, each naming one of `turns` turns.
    Ids { turns: usize },
    /// The record's seq increasing.
    Records,
    /// Ids increasing, each base another of the `rows` rows (pack names
    /// are checked when a row is used).
    Blobs { rows: usize },
}

impl Kind {
    /// Bytes of the key a row starts with (what searches compare).
    pub(super) fn key(self) -> usize {
        match self {
            Kind::Blobs { .. } => 32,
            _ => 8,
        }
    }

    /// A check of consecutive rows, given as (row number, row).
    fn check(self) -> impl FnMut(usize, &[u8]) -> bool {
        let mut last: Option<[u64; 4]> = None;
        let mut end = 0u64;
        move |k, row| {
            let key = match self {
                Kind::Turns { .. } | Kind::Records => [u64_at(row, 0), 0, 0, 0],
                Kind::Ids { .. } => [u64_at(row, 0), u64_at(row, 8), 0, 0],
                Kind::Blobs { .. } => id_words(row),
            };
            let sorted = last.is_none_or(|l| l < key);
            last = Some(key);
            sorted
                && match self {
                    Kind::Turns { bodies_len } => {
                        let e = u64_at(row, 8);
                        let ok = e > end && e <= bodies_len && row[36] <= 1;
                        end = e;
                        ok
                    }
                    Kind::Ids { turns } => u64_at(row, 8) < turns as u64,
                    Kind::Records => true,
                    Kind::Blobs { rows } => {
                        let base = u32_at(row, 90) as usize;
                        base <= rows && base != k + 1
                    }
                }
        }
    }
}

/// A 32-byte id as four big-endian words: ordered as its bytes are.
fn id_words(row: &[u8]) -> [u64; 4] {
    let mut w = [0; 4];
    for (i, word) in w.iter_mut().enumerate() {
        *word = u64::from_be_bytes(
            row[i * 8..i * 8 + 8]
                .try_into()
                .expect("a slice of 8 bytes"),
        );
    }
    w
}

/// The first of `0..n` for which `before` is false, it being true of a
/// prefix (a binary search).
fn first_not(n: usize, mut before: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Blocks of `n` rows.
pub(super) fn blocks(n: usize) -> usize {
    n.div_ceil(BLOCK)
}

/// A block's rows once read (`None`: unreadable or damaged).
type Block = OnceLock<Option<Box<[u8]>>>;

/// A table left in the checkpoint file (see the module doc).
pub(super) struct Table {
    file: Arc<File>,
    /// Where its first row is in the file.
    at: u64,
    width: usize,
    n: usize,
    kind: Kind,
    /// Each block's CRC-32, from the head.
    checks: Box<[u32]>,
    /// Each block's first key, from the head, one after the other.
    fences: Box<[u8]>,
    /// Each block's rows once read.
    read: Box<[Block]>,
    /// How many of them were kept by [`Table::with_block`].
    kept_by_value: AtomicUsize,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({:?}, {} rows)", self.kind, self.n)
    }
}

impl Table {
    /// The table of `n` rows of `width` bytes at `at` in `file`, its
    /// blocks' CRCs `checks` and first keys `fences` (one per block).
    pub(super) fn new(
        file: Arc<File>,
        at: u64,
        (width, n): (usize, usize),
        kind: Kind,
        (checks, fences): (Box<[u32]>, Box<[u8]>),
    ) -> Table {
        debug_assert_eq!(checks.len(), blocks(n));
        debug_assert_eq!(fences.len(), blocks(n) * kind.key());
        Table {
            file,
            at,
            width,
            n,
            kind,
            read: (0..checks.len()).map(|_| OnceLock::new()).collect(),
            kept_by_value: AtomicUsize::new(0),
            checks,
            fences,
        }
    }

    fn fence(&self, b: usize) -> &[u8] {
        let key = self.kind.key();
        &self.fences[b * key..(b + 1) * key]
    }

    pub(super) fn len(&self) -> usize {
        self.n
    }

    /// Block `b`'s rows, read and checked the first time.
    fn block(&self, b: usize) -> Option<&[u8]> {
        self.read.get(b)?.get_or_init(|| self.load(b)).as_deref()
    }

    /// `f` of block `b`'s rows: kept ones, or read and kept while fewer
    /// than [`KEEP_BLOCKS`] were kept so, or read and let go. `None` if the
    /// block cannot be read back whole.
    fn with_block<T>(&self, b: usize, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let cell = self.read.get(b)?;
        if let Some(kept) = cell.get() {
            return kept.as_deref().map(f);
        }
        if self.kept_by_value.load(Ordering::Relaxed) < KEEP_BLOCKS {
            let kept = cell.get_or_init(|| {
                self.kept_by_value.fetch_add(1, Ordering::Relaxed);
                self.load(b)
            });
            return kept.as_deref().map(f);
        }
        self.load(b).as_deref().map(f)
    }

    /// `f` of row `i` (see [`Table::with_block`]), if its block reads back
    /// whole.
    pub(super) fn row_with<T>(&self, i: usize, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        if i >= self.n {
            return None;
        }
        let at = (i % BLOCK) * self.width;
        self.with_block(i / BLOCK, |rows| rows.get(at..at + self.width).map(f))?
    }

    /// [`Table::find`], giving `f` of the row found (see
    /// [`Table::with_block`]).
    pub(super) fn find_with<T>(
        &self,
        cmp: impl Fn(&[u8]) -> std::cmp::Ordering,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Option<Option<T>> {
        let k = self.partition_point(|key| cmp(key).is_lt())?;
        if k == self.n {
            return Some(None);
        }
        let key = self.kind.key();
        self.row_with(k, |row| cmp(&row[..key]).is_eq().then(|| f(row)))
    }

    /// Block `b`'s rows read from the file, if they pass their checks.
    fn load(&self, b: usize) -> Option<Box<[u8]>> {
        let first = b * BLOCK;
        let rows = BLOCK.min(self.n.checked_sub(first)?);
        let bytes = read_at(
            &self.file,
            self.at + (first * self.width) as u64,
            rows * self.width,
        )?;
        let mut ok = self.kind.check();
        let whole = crc32fast::hash(&bytes) == self.checks[b]
            && bytes[..self.kind.key()] == *self.fence(b)
            && bytes
                .chunks_exact(self.width)
                .enumerate()
                .all(|(j, row)| ok(first + j, row));
        whole.then(|| bytes.into_boxed_slice())
    }

    /// The block whose rows a key falls among (by the fences): the last
    /// whose first key is not after it. `None` before the first block.
    fn block_of(&self, key: &[u8]) -> Option<usize> {
        first_not(self.read.len(), |b| self.fence(b) <= key).checked_sub(1)
    }

    /// Calls `each` with the rows of every block that one of `keys`
    /// (increasing) falls among and with those keys, each block read once
    /// and not kept unless it was already (a record of 100,000 blobs looks
    /// up 100,000 ids, which would keep the whole table in memory). `each`
    /// gets `None` for a block that cannot be read back whole.
    pub(super) fn scan<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        mut each: impl FnMut(Option<&[u8]>, &[&'k [u8]]),
    ) {
        let mut group: Vec<&[u8]> = Vec::new();
        let mut current = None;
        let mut flush = |b: Option<usize>, group: &mut Vec<&'k [u8]>| {
            if group.is_empty() {
                return;
            }
            match b {
                Some(b) => match self.read.get(b).and_then(OnceLock::get) {
                    Some(kept) => each(kept.as_deref(), group),
                    None => each(self.load(b).as_deref(), group),
                },
                // Before the first block: no row has these keys.
                None => each(Some(&[]), group),
            }
            group.clear();
        };
        for key in keys {
            let b = self.block_of(key);
            if b != current {
                flush(current, &mut group);
                current = b;
            }
            group.push(key);
        }
        flush(current, &mut group);
    }

    /// Row `i`, if its block reads back whole.
    pub(super) fn row(&self, i: usize) -> Option<&[u8]> {
        if i >= self.n {
            return None;
        }
        let at = (i % BLOCK) * self.width;
        self.block(i / BLOCK)?.get(at..at + self.width)
    }

    /// The first row for which `before` is false, the rows being ordered
    /// so that it is true of a prefix; `before` is given a row's key. A
    /// binary search over the fences, then within the one block they
    /// name, the only one read. `None` if it cannot be.
    pub(super) fn partition_point(&self, mut before: impl FnMut(&[u8]) -> bool) -> Option<usize> {
        // Every block before the first whose fence is not before the point
        // starts before it: the point is in the block before that one, or
        // at the start of that one.
        let Some(b) = first_not(self.read.len(), |b| before(self.fence(b))).checked_sub(1) else {
            return Some(0);
        };
        self.with_block(b, |rows| {
            let key = |j: usize| &rows[j * self.width..j * self.width + self.kind.key()];
            b * BLOCK + first_not(rows.len() / self.width, |j| before(key(j)))
        })
    }

    /// The row whose key `cmp` says is the one sought (`Equal`; `Less`
    /// for the keys before it), `Some(None)` when no row has it; `None`
    /// when a block on the way cannot be read back whole.
    pub(super) fn find(&self, cmp: impl Fn(&[u8]) -> std::cmp::Ordering) -> Option<Option<&[u8]>> {
        let k = self.partition_point(|key| cmp(key).is_lt())?;
        if k == self.n {
            return Some(None);
        }
        let row = self.row(k)?;
        Some(cmp(&row[..self.kind.key()]).is_eq().then_some(row))
    }

    /// Lets go of every block read so far (after a scan looked up
    /// thousands of ids one by one, keeping up to [`KEEP_BLOCKS`] blocks).
    pub(super) fn forget_read(&mut self) {
        for cell in &mut self.read {
            cell.take();
        }
        *self.kept_by_value.get_mut() = 0;
    }

    /// How many blocks are kept in memory.
    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.read.iter().filter(|c| c.get().is_some()).count()
    }

    /// Calls `each` with every row in order, a block read at a time and
    /// not kept unless it was already (a new checkpoint copies them all);
    /// `false`, having stopped, at a block that cannot be read back whole.
    pub(super) fn each_row(&self, mut each: impl FnMut(&[u8])) -> bool {
        for (b, cell) in self.read.iter().enumerate() {
            let loaded;
            let rows = match cell.get() {
                Some(kept) => kept.as_deref(),
                None => {
                    loaded = self.load(b);
                    loaded.as_deref()
                }
            };
            let Some(rows) = rows else {
                return false;
            };
            rows.chunks_exact(self.width).for_each(&mut each);
        }
        true
    }

    /// Every row, if every block reads back whole (gc, verify and a new
    /// checkpoint list them all). The blocks not read yet are not kept:
    /// the caller has them all.
    pub(super) fn all(&self) -> Option<Vec<u8>> {
        let mut all = Vec::with_capacity(self.n * self.width);
        for (b, cell) in self.read.iter().enumerate() {
            match cell.get() {
                Some(kept) => all.extend_from_slice(kept.as_deref()?),
                None => all.extend_from_slice(&self.load(b)?),
            }
        }
        Some(all)
    }

    /// Whether every block reads back whole and the rows are in order
    /// across blocks too (`turnback verify`).
    pub(super) fn whole(&self) -> bool {
        let Some(all) = self.all() else {
            return false;
        };
        let mut ok = self.kind.check();
        let rows_ok = all
            .chunks_exact(self.width)
            .enumerate()
            .all(|(k, row)| ok(k, row));
        rows_ok
            && match self.kind {
                Kind::Ids { turns } => {
                    // Each turn named once.
                    let mut named = vec![false; turns];
                    all.chunks_exact(self.width).all(|row| {
                        let i = u64_at(row, 8) as usize;
                        !std::mem::replace(&mut named[i], true)
                    }) && named.iter().all(|&n| n)
                }
                Kind::Turns { bodies_len } => {
                    all.len() < self.width || u64_at(&all, all.len() - self.width + 8) == bodies_len
                }
                _ => true,
            }
    }
}
