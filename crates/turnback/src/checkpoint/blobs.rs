//! The checkpoint's blob table: where every blob the covered log stored
//! is, a row of [`BLOB_ROW`] bytes per blob sorted by id (id, pack name,
//! offset, compressed length, size, base as 1 + its row or 0), left in the
//! file ([`Table`]): finding a blob is a binary search that reads the few
//! blocks it passes through.

use std::sync::Arc;

use super::covered::Fallback;
use super::table::Table;
use super::{u32_at, u64_at};
use crate::id::BlobId;
use crate::pack::{self, BlobLoc};

/// Bytes of one row of the blob table.
pub(super) const BLOB_ROW: usize = 94;

#[derive(Debug)]
pub(crate) struct BlobTable {
    pub(super) rows: Table,
    pub(super) fallback: Arc<Fallback>,
}

fn id_of(row: &[u8]) -> BlobId {
    BlobId(
        row[..32]
            .try_into()
            .expect("a row starts with a 32-byte id"),
    )
}

/// Where the blob of `row` is, its base (a row number) named by `base_id`
/// (none when its pack name is not one turnback makes: the row was written
/// wrong).
fn loc_of(row: &[u8], base_id: impl FnOnce(usize) -> Option<BlobId>) -> Option<BlobLoc> {
    if !pack::is_pack_name_bytes(&row[32..66]) {
        return None;
    }
    let base = match (u32_at(row, 90) as usize).checked_sub(1) {
        Some(b) => Some(base_id(b)?),
        None => None,
    };
    Some(BlobLoc {
        pack: String::from_utf8_lossy(&row[32..66]).into(),
        offset: u64_at(row, 66),
        len: u64_at(row, 74),
        size: u64_at(row, 82),
        base,
    })
}

impl BlobTable {
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Where blob `id` is, if the table has it. A block that cannot be
    /// read back whole on the way is answered by the covered log.
    pub(crate) fn find(&self, id: &BlobId) -> Option<BlobLoc> {
        let found = self.rows.find_with(
            |key| key.cmp(&id.0[..]),
            |row| loc_of(row, |b| self.rows.row_with(b, id_of)),
        );
        match found {
            Some(Some(Some(loc))) => Some(loc),
            Some(None) => None,
            // A row or its base's that cannot be read back whole, or a pack
            // name of another form.
            _ => self.fallback.needed().blobs.get(id),
        }
    }

    /// Lets go of the rows read so far ([`Table::forget_read`]).
    pub(crate) fn forget_read(&mut self) {
        self.rows.forget_read();
    }

    /// Removes from `ids` (sorted, each once) the blobs the table has,
    /// reading each block the ids fall among once ([`Table::scan`]): the
    /// presence of 100,000 blobs is checked without a search (and a
    /// decoded location) per blob.
    pub(crate) fn retain_missing(&self, ids: &mut Vec<BlobId>) {
        let mut run: Vec<(BlobId, ())> = ids.drain(..).map(|id| (id, ())).collect();
        self.retain_unknown_of(&mut run);
        ids.extend(run.into_iter().map(|(id, _)| id));
    }

    /// Removes from `run` (sorted by id) the blobs the table has, reading
    /// each block the ids fall among once ([`Table::scan`]).
    pub(crate) fn retain_unknown(&self, run: &mut Vec<(BlobId, BlobLoc)>) {
        self.retain_unknown_of(run);
    }

    fn retain_unknown_of<T>(&self, run: &mut Vec<(BlobId, T)>) {
        let mut known: Vec<BlobId> = Vec::new();
        let mut damaged = false;
        self.rows
            .scan(run.iter().map(|(id, _)| &id.0[..]), |rows, ids| {
                let Some(rows) = rows else {
                    damaged = true;
                    return;
                };
                let mut at = rows.chunks_exact(BLOB_ROW).map(|r| &r[..32]).peekable();
                for &id in ids {
                    while at.next_if(|r| *r < id).is_some() {}
                    if at.peek() == Some(&id) {
                        known.push(BlobId(id.try_into().expect("a 32-byte id")));
                    }
                }
            });
        if damaged {
            let fallback = &self.fallback.needed().blobs;
            run.retain(|(id, _)| known.binary_search(id).is_err() && !fallback.contains_key(id));
        } else if !known.is_empty() {
            run.retain(|(id, _)| known.binary_search(id).is_err());
        }
    }

    /// Every blob and where it is, in id order (gc, verify and a new
    /// checkpoint list them all).
    pub(crate) fn all(&self) -> Vec<(BlobId, BlobLoc)> {
        let listed = self.rows.all().and_then(|all| {
            let row = |k: usize| all.get(k * BLOB_ROW..(k + 1) * BLOB_ROW);
            all.chunks_exact(BLOB_ROW)
                .map(|r| Some((id_of(r), loc_of(r, |b| row(b).map(id_of))?)))
                .collect::<Option<Vec<_>>>()
        });
        listed.unwrap_or_else(|| {
            let mut all: Vec<_> = self.fallback.needed().blobs.iter().collect();
            all.sort_unstable_by_key(|(id, _)| *id);
            all
        })
    }

    /// Whether every row reads back whole, with a pack name of turnback's
    /// form (a new checkpoint then copies the rows as they are).
    pub(super) fn readable(&self) -> bool {
        let mut names = true;
        let whole = self
            .rows
            .each_row(|row| names &= pack::is_pack_name_bytes(&row[32..66]));
        whole && names
    }

    /// Calls `each` with every row, in id order (see [`Table::each_row`]).
    pub(super) fn each_row(&self, each: impl FnMut(&[u8])) -> bool {
        self.rows.each_row(each)
    }

    /// How many rows come before blob `id`, and whether a row has it;
    /// `None` if a block on the way cannot be read back whole.
    pub(super) fn rank(&self, id: &BlobId) -> Option<(usize, bool)> {
        let k = self.rows.partition_point(|key| key < &id.0[..])?;
        let here = k < self.len() && self.rows.row_with(k, |r| r[..32] == id.0[..])?;
        Some((k, here))
    }

    /// The id of the base of the blob in `row` (`Some(None)`: it has
    /// none); `None` if the base's row cannot be read back whole.
    pub(super) fn base_id(&self, row: &[u8]) -> Option<Option<BlobId>> {
        match (u32_at(row, 90) as usize).checked_sub(1) {
            None => Some(None),
            Some(b) => self.rows.row_with(b, |r| Some(id_of(r))),
        }
    }

    /// Whether every row reads back whole and in order, with pack names of
    /// turnback's form (`turnback verify`).
    pub(super) fn whole(&self) -> bool {
        self.rows.whole()
            && self.rows.all().is_some_and(|all| {
                all.chunks_exact(BLOB_ROW)
                    .all(|row| pack::is_pack_name_bytes(&row[32..66]))
            })
    }
}
