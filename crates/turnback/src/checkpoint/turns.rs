//! The checkpoint's turns and capture records, read in place.
//!
//! - The turn table: a row of [`TURN_ROW`] bytes per turn, oldest first
//!   (`first_seq` u64, where its bytes end among the turns' bytes u64,
//!   CRC-32 of those bytes u32, `started_at` u64, `ended_by` u64 or 0,
//!   sealed byte).
//! - The id table: a row `(FNV-1a hash of the id u64, turn u64)` per turn,
//!   sorted.
//! - The records table: a row `(seq u64, first_seq u64)` per capture and
//!   seal record, sorted.
//!
//! All three are [`Table`]s: a row is read with its block the first time
//! it is wanted. A turn's bytes are read, compared with its row's CRC and
//! decoded the first time the turn is used. Whatever of these cannot be
//! read back whole is taken from the covered log ([`Fallback`]), whose
//! index holds the same turns in the same order; if the log cannot give
//! it either, the answer is [`Error::TurnUnreadable`].

use std::fs::File;
use std::sync::{Arc, OnceLock};

use super::covered::Fallback;
use super::decode::Reader;
use super::table::Table;
use super::{read_at, u32_at, u64_at};
use crate::error::{Error, Result};
use crate::id::TurnId;
use crate::index::{Index, Turn};

/// Bytes read from the start of a turn for its id alone: a length (two
/// bytes) and at most 200 characters of up to four bytes.
const ID_READ: u64 = 1024;

/// Bytes of one row of the turn table.
pub(super) const TURN_ROW: usize = 37;

/// The checkpoint's capture and seal records, each with the `first_seq`
/// of its turn.
#[derive(Debug)]
pub(crate) struct SeqTable {
    pub(super) rows: Table,
    pub(super) fallback: Arc<Fallback>,
}

impl SeqTable {
    /// The `first_seq` of the turn record `seq` applied to.
    pub(crate) fn get(&self, seq: u64) -> Result<Option<u64>> {
        match self.rows.find(|key| u64_at(key, 0).cmp(&seq)) {
            Some(row) => Ok(row.map(|row| u64_at(row, 8))),
            None => self
                .in_log(|| format!("the turn of log record {seq}"))?
                .record_turn
                .get(&seq),
        }
    }

    /// Every pair, sorted by record.
    pub(crate) fn all(&self) -> Result<Vec<(u64, u64)>> {
        match self.rows.all() {
            Some(all) => Ok(all
                .chunks_exact(16)
                .map(|r| (u64_at(r, 0), u64_at(r, 8)))
                .collect()),
            None => self
                .in_log(|| "the turn of each capture".to_owned())?
                .record_turn
                .sorted(),
        }
    }

    /// The index the covered log gives, for a block of the table that
    /// cannot be read back whole; `what` names what was looked for.
    fn in_log(&self, what: impl FnOnce() -> String) -> Result<&Index> {
        self.fallback.index().map_err(|why| Error::TurnUnreadable {
            turn: what(),
            reason: why.to_owned(),
        })
    }
}

/// The checkpoint's turns: the turn and id tables in place, each turn
/// decoded the first time it is used, and kept.
pub(crate) struct FrozenTurns {
    pub(super) file: Arc<File>,
    pub(super) rows: Table,
    pub(super) ids: Table,
    /// Where the turns' bytes start in the file.
    pub(super) bodies: u64,
    pub(super) cells: Vec<OnceLock<Box<Turn>>>,
    pub(super) fallback: Arc<Fallback>,
}

/// When a turn began, whether it is sealed and what ended it: in its
/// row, so they are known without reading the turn's bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Head {
    pub(super) started_at: u64,
    pub(super) sealed: bool,
    pub(super) ended_by: Option<u64>,
}

impl Head {
    pub(super) fn of(t: &Turn) -> Head {
        Head {
            started_at: t.started_at,
            sealed: t.sealed,
            ended_by: t.ended_by,
        }
    }
}

/// FNV-1a (64 bits) of a turn id: fixed here, so a checkpoint's id table
/// means the same to every build that reads it.
pub(super) fn id_hash(id: &[u8]) -> u64 {
    id.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The id at the start of a turn's bytes.
pub(super) fn id_in(turn: &[u8]) -> Option<&[u8]> {
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

    /// Turn `i` as the covered log gives it (its row or bytes in the
    /// checkpoint cannot be read back whole); an error naming the turn if
    /// the log cannot give it either.
    fn in_log(&self, i: usize) -> Result<&Turn> {
        let unreadable = |reason: String| Error::TurnUnreadable {
            turn: self.describe(i),
            reason,
        };
        let index = self
            .fallback
            .index()
            .map_err(|why| unreadable(why.to_owned()))?;
        index.turns.get(i)?.ok_or_else(|| {
            unreadable(format!(
                "the log gives {} turns where the checkpoint holds {}",
                index.turns.len(),
                self.len()
            ))
        })
    }

    /// Names turn `i` for an error: its place, and its first record if its
    /// row reads back.
    fn describe(&self, i: usize) -> String {
        let first = match self.rows.row(i) {
            Some(row) => format!(", whose first log record is {}", u64_at(row, 0)),
            None => String::new(),
        };
        format!(
            "turn {} of the {} the index checkpoint holds{first}",
            i + 1,
            self.len()
        )
    }

    pub(crate) fn first_seq(&self, i: usize) -> Result<u64> {
        match self.rows.row(i) {
            Some(row) => Ok(u64_at(row, 0)),
            None => Ok(self.in_log(i)?.first_seq),
        }
    }

    /// Where turn `i`'s bytes start and end among the turns' bytes, and
    /// their CRC-32, from its row (and the row before it).
    fn span(&self, i: usize) -> Option<(u64, u64, u32)> {
        let start = match i.checked_sub(1) {
            Some(before) => u64_at(self.rows.row(before)?, 8),
            None => 0,
        };
        let row = self.rows.row(i)?;
        let end = u64_at(row, 8);
        (start < end).then(|| (start, end, u32_at(row, 16)))
    }

    /// The encoded turn `i`, read from the file, if it matches its row's
    /// CRC.
    pub(super) fn raw(&self, i: usize) -> Option<Vec<u8>> {
        let (start, end, crc) = self.span(i)?;
        let bytes = read_at(
            &self.file,
            self.bodies + start,
            usize::try_from(end - start).ok()?,
        )?;
        (crc32fast::hash(&bytes) == crc).then_some(bytes)
    }

    /// When turn `i` began, whether it is sealed and the operation that
    /// ended it: from the decoded turn if it was decoded (it may have
    /// changed since), else from its row.
    pub(super) fn head(&self, i: usize) -> Result<Head> {
        if let Some(t) = self.cells[i].get() {
            return Ok(Head::of(t));
        }
        match self.rows.row(i) {
            Some(row) => Ok(Head {
                started_at: u64_at(row, 20),
                sealed: row[36] == 1,
                ended_by: Some(u64_at(row, 28)).filter(|&e| e != 0),
            }),
            None => self.in_log(i).map(Head::of),
        }
    }

    /// Whether turn `i` is live, without decoding it.
    pub(crate) fn is_live(&self, i: usize) -> Result<bool> {
        Ok(self.head(i)?.ended_by.is_none())
    }

    /// Whether turn `i` is sealed, without decoding it.
    pub(crate) fn is_sealed(&self, i: usize) -> Result<bool> {
        Ok(self.head(i)?.sealed)
    }

    /// When turn `i` began, without decoding it.
    pub(crate) fn started_at(&self, i: usize) -> Result<u64> {
        Ok(self.head(i)?.started_at)
    }

    /// The turns decoded so far.
    pub(crate) fn decoded_mut(&mut self) -> impl Iterator<Item = &mut Turn> {
        self.cells
            .iter_mut()
            .filter_map(|c| c.get_mut().map(|t| &mut **t))
    }

    /// Whether turn `i` was decoded (and so may have changed since).
    pub(crate) fn decoded(&self, i: usize) -> bool {
        self.cells[i].get().is_some()
    }

    /// Whether turn `i`'s id is `id`.
    pub(crate) fn id_is(&self, i: usize, id: &TurnId) -> Result<bool> {
        Ok(&self.get(i)?.id == id)
    }

    /// Turn `i`'s id, read from the start of its bytes (at most
    /// [`ID_READ`] of them) when it is not decoded yet: listing the ids of
    /// 10,000 turns reads 10,000 short runs, not every turn whole. The
    /// rest of the turn is not read, so its CRC is not checked here; a
    /// damaged id is found when the turn itself is used (decoded and
    /// checked, or named by an id it does not have). Bytes that do not
    /// give an id are answered by decoding the turn.
    pub(crate) fn id_of(&self, i: usize) -> Result<TurnId> {
        if let Some(t) = self.cells[i].get() {
            return Ok(t.id.clone());
        }
        let quick = self.span(i).and_then(|(start, end, _)| {
            let n = usize::try_from((end - start).min(ID_READ)).ok()?;
            let bytes = read_at(&self.file, self.bodies + start, n)?;
            let id = std::str::from_utf8(id_in(&bytes)?).ok()?;
            TurnId::new(id).ok()
        });
        match quick {
            Some(id) => Ok(id),
            None => Ok(self.get(i)?.id.clone()),
        }
    }

    /// The turns that may have id `id` (those whose id hashes the same),
    /// newest first, found by binary search in the id table (or, if its
    /// blocks cannot be read back whole, those of the covered log that
    /// have that id).
    pub(crate) fn candidates(&self, id: &TurnId) -> Result<Vec<usize>> {
        let hash = id_hash(id.as_str().as_bytes());
        let from_table = || -> Option<Vec<usize>> {
            let lo = self.ids.partition_point(|row| u64_at(row, 0) < hash)?;
            let mut found = Vec::new();
            for k in lo..self.ids.len() {
                let row = self.ids.row(k)?;
                if u64_at(row, 0) != hash {
                    break;
                }
                found.push(usize::try_from(u64_at(row, 8)).ok()?);
            }
            found.reverse();
            Some(found)
        };
        if let Some(found) = from_table() {
            return Ok(found);
        }
        let turns = &self
            .fallback
            .index()
            .map_err(|why| Error::TurnUnreadable {
                turn: format!("turn {:?}", id.as_str()),
                reason: why.to_owned(),
            })?
            .turns;
        let mut found = Vec::new();
        for i in (0..self.len()).rev() {
            if turns.get(i)?.is_some_and(|t| &t.id == id) {
                found.push(i);
            }
        }
        Ok(found)
    }

    /// Turn `i`, decoded the first time it is asked for.
    pub(crate) fn get(&self, i: usize) -> Result<&Turn> {
        if let Some(t) = self.cells[i].get() {
            return Ok(t);
        }
        let t = self.decode(i)?;
        Ok(self.cells[i].get_or_init(|| Box::new(t)))
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Result<&mut Turn> {
        self.get(i)?;
        Ok(self.cells[i]
            .get_mut()
            .expect("the turn was decoded just above"))
    }

    fn decode(&self, i: usize) -> Result<Turn> {
        let decoded = self.raw(i).and_then(|bytes| {
            let mut r = Reader {
                rest: &bytes,
                at: 0,
            };
            r.turn().filter(|_| r.rest.is_empty())
        });
        match decoded {
            Some(t) => Ok(t),
            None => self.in_log(i).cloned(),
        }
    }

    /// Calls `each` with turn `i`'s bytes, a piece of at most 1 MiB at a
    /// time (a turn of 100,000 paths is some 12 MB); `false` if they cannot
    /// be read or do not match its row's CRC (`each` may have had a part).
    pub(super) fn copy_raw(&self, i: usize, mut each: impl FnMut(&[u8])) -> bool {
        const PIECE: u64 = 1 << 20;
        let Some((start, end, crc)) = self.span(i) else {
            return false;
        };
        let mut h = crc32fast::Hasher::new();
        let mut at = start;
        while at < end {
            let n = (end - at).min(PIECE) as usize;
            let Some(bytes) = read_at(&self.file, self.bodies + at, n) else {
                return false;
            };
            h.update(&bytes);
            each(&bytes);
            at += n as u64;
        }
        h.finalize() == crc
    }

    /// Turn `i`'s bytes as a new checkpoint copies them: their length, CRC
    /// and the hash of the id they start with, read a piece at a time;
    /// `None` if they cannot be read or do not match its row's CRC.
    pub(super) fn measure_raw(&self, i: usize) -> Option<(u64, u32, u64)> {
        let (start, end, crc) = self.span(i)?;
        let mut id = None;
        let mut first = true;
        let whole = self.copy_raw(i, |bytes| {
            if std::mem::take(&mut first) {
                id = id_in(bytes).map(id_hash);
            }
        });
        whole.then_some((end - start, crc, id?))
    }

    /// Whether every row of both tables and every turn's bytes read back
    /// whole (`turnback verify`).
    pub(super) fn whole(&self) -> bool {
        self.rows.whole() && self.ids.whole() && (0..self.len()).all(|i| self.raw(i).is_some())
    }
}
