//! What happened in a store, read for people (`turnback log` and `show`):
//! the turns, live or ended, newest first; the operations that ended turns
//! or brought them back (rewind, revert, undo, redo, an interrupted one
//! rolled back), read from the log; and what a turn left of each path it
//! captured. Nothing here writes.
//!
//! Turns come from the index (its checkpoint's rows say whether a turn is
//! live without decoding it), so the newest N of 10,000 turns decode N.
//! Operations are read from the log itself, once per call: the index keeps
//! the rewinds and reverts in effect, not when each undo or redo happened.
//! Only lines whose `type` (the third field every record is written with)
//! names an operation are parsed; a damaged or torn line is passed over
//! (`turnback verify` reports it).

use std::collections::HashMap;
use std::fs::File;

use crate::error::{Error, IoResultExt, Result};
use crate::fsx;
use crate::id::{BlobId, TurnId};
use crate::index::Turn;
use crate::log::{self, LOG_FILE, Op, Post, Pre, Record};
use crate::path::RelPath;
use crate::store::Store;

/// What a turn left of one path it captured, as far as the store knows
/// (see [`Store::left_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left<'a> {
    /// Its post-image: recorded by the write itself, the turn's seal or a
    /// command's after half. A file's is its hash only: its bytes are in
    /// the store when a later capture or snapshot stored them
    /// ([`Store::blob_size`]), or in the file when it still hashes so.
    Post(&'a Post),
    /// No post-image was recorded, and a later turn captured the path:
    /// its pre-image there is what this turn left (unless something else
    /// changed the path in between).
    NextPre {
        /// The later turn.
        turn: &'a TurnId,
        /// Its pre-image of the path.
        pre: &'a Pre,
    },
    /// No post-image was recorded and no later turn captured the path:
    /// what it holds now is what the turn left, as far as the store
    /// knows.
    Now,
}

/// The operation kinds `type` names in a log line (see [`log`]).
const OPERATIONS: [&[u8]; 5] = [
    br#""type":"rewind""#,
    br#""type":"revert""#,
    br#""type":"undo""#,
    br#""type":"redo""#,
    br#""type":"rolled_back""#,
];

/// Whether a log line is an operation's record, from its first bytes
/// (`{"seq":N,"at":N,"type":"…"`), without parsing it.
fn is_operation(line: &[u8]) -> bool {
    let head = &line[..line.len().min(80)];
    OPERATIONS
        .iter()
        .any(|t| head.windows(t.len()).any(|w| w == *t))
}

impl Store {
    /// Every turn the store knows, live or ended, oldest first (each
    /// decoded).
    pub fn all_turns(&self) -> Result<Vec<&Turn>> {
        self.index.turns.iter().collect()
    }

    /// The newest `n` turns, newest first: live ones only, or with
    /// `ended` the rewound and reverted ones too. Only those are decoded.
    pub fn newest_turns(&self, n: usize, ended: bool) -> Result<Vec<&Turn>> {
        let mut out = Vec::new();
        if ended {
            for t in self.index.turns.iter().rev().take(n) {
                out.push(t?);
            }
        } else {
            for i in self.index.live_places().rev().take(n) {
                out.extend(self.index.turns.get(i?)?);
            }
        }
        Ok(out)
    }

    /// The log's records of operations (rewind, revert, undo, redo,
    /// rolled back), oldest first, as far as the index has read the log.
    /// Damaged lines are passed over; a store not made yet has none.
    pub fn operations(&self) -> Result<Vec<Record>> {
        let Some(dirs) = &self.place.dirs else {
            return Ok(Vec::new());
        };
        let path = self.place.store_path.join(LOG_FILE);
        let Some(bytes) = fsx::read_store_file(&dirs.store, LOG_FILE).ctx("read", &path)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for line in bytes.split(|&b| b == b'\n') {
            if !is_operation(line) {
                continue;
            }
            if let Ok(rec) = log::decode(line)
                && rec.seq <= self.index.last_seq
                && matches!(
                    rec.op,
                    Op::Rewind { .. }
                        | Op::Revert { .. }
                        | Op::Undo { .. }
                        | Op::Redo { .. }
                        | Op::RolledBack { .. }
                )
            {
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// What `turn` left of `path` (one of its captured paths), as far as
    /// the store knows: its post-image; without one, the pre-image of the
    /// next turn (live or ended) that captured the path; without that, the
    /// path as it is now ([`Left::Now`]).
    pub fn left_by<'a>(&'a self, turn: &'a Turn, path: &RelPath) -> Result<Left<'a>> {
        if let Some((_, post)) = turn.post(path) {
            return Ok(Left::Post(post));
        }
        let after = self.index.turns.first_at_or_after(turn.first_seq + 1)?;
        for later in self.index.turns.iter_from(after) {
            let later = later?;
            if let Some(c) = later.captured(path) {
                return Ok(Left::NextPre {
                    turn: &later.id,
                    pre: &c.entry.pre,
                });
            }
        }
        Ok(Left::Now)
    }

    /// The size of blob `id` when the store holds its bytes (for
    /// [`Store::read_blob`]).
    pub fn blob_size(&self, id: &BlobId) -> Option<u64> {
        self.index.blobs.size_of(id)
    }
}

/// Reads blobs for people to see (a turn's pre-images, say), keeping the
/// packs it opened: a turn of 1,000 files reads 1,000 blobs, most of them
/// from one pack, which [`Store::read_blob`] opens once per blob. At most
/// [`BlobReader::PACKS_KEPT`] stay open (a turn's blobs may lie in as many
/// packs as it had records). Each blob is verified as `read_blob` does.
pub struct BlobReader<'a> {
    store: &'a Store,
    packs: HashMap<String, File>,
}

impl BlobReader<'_> {
    /// Packs kept open at most.
    pub const PACKS_KEPT: usize = 64;

    /// The verified bytes of blob `id`.
    pub fn read(&mut self, id: &BlobId) -> Result<Vec<u8>> {
        let loc = self
            .store
            .index
            .blobs
            .get(id)
            .ok_or_else(|| Error::BlobDamaged {
                id: id.to_hex(),
                reason: "no record stores it".into(),
            })?;
        if !self.packs.contains_key(&*loc.pack) {
            if self.packs.len() >= Self::PACKS_KEPT {
                self.packs.clear();
            }
            let file = self.store.open_pack(&loc.pack)?;
            self.packs.insert(loc.pack.to_string(), file);
        }
        let pack = &self.packs[&*loc.pack];
        let mut out = Vec::with_capacity(usize::try_from(loc.size).unwrap_or(0));
        self.store.copy_blob_from(pack, id, &loc, &mut out)?;
        Ok(out)
    }
}

impl Store {
    /// A reader of many blobs (see [`BlobReader`]).
    pub fn blob_reader(&self) -> BlobReader<'_> {
        BlobReader {
            store: self,
            packs: HashMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RewindOptions;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn operation_lines_are_told_by_their_type() {
        assert!(is_operation(
            br#"{"seq":3,"at":1,"type":"rewind","turn":"t1","from_seq":1,"saved":2,"crc":"x"}"#
        ));
        assert!(is_operation(
            br#"{"seq":5,"at":1,"type":"rolled_back","saved":4}"#
        ));
        assert!(!is_operation(
            br#"{"seq":1,"at":1,"type":"capture","turn":"rewind","files":[]}"#
        ));
        assert!(!is_operation(b""));
    }

    #[test]
    fn history_gives_ended_turns_and_operations() -> TestResult {
        let project = crate::test_project::Beside::new(&[])?;
        let mut store = project.open()?;
        assert!(store.operations()?.is_empty());
        let (t1, t2) = (TurnId::new("t1")?, TurnId::new("t2")?);
        store.write(&t1, None, "a.txt", b"one\n")?;
        store.write(&t2, None, "a.txt", b"two\n")?;
        let rel = RelPath::parse("a.txt")?;
        let mut reader = store.blob_reader();
        let pre = match &store.turn(&t2)?.files[0].entry.pre {
            Pre::File { blob, .. } => *blob,
            other => return Err(format!("{other:?}").into()),
        };
        assert_eq!(reader.read(&pre)?, b"one\n");
        assert_eq!(reader.read(&pre)?, store.read_blob(&pre)?);
        drop(reader);
        // t1 left what t2 captured: both record a post-image.
        let first = store.turn(&t1)?;
        assert!(matches!(
            store.left_by(first, &rel)?,
            Left::Post(Post::File { .. })
        ));
        store.rewind(&t2, &RewindOptions::default())?;
        store.undo()?;
        store.redo()?;
        let ops: Vec<&str> = store
            .operations()?
            .iter()
            .map(|r| match r.op {
                Op::Rewind { .. } => "rewind",
                Op::Undo { .. } => "undo",
                Op::Redo { .. } => "redo",
                _ => "other",
            })
            .collect();
        assert_eq!(ops, ["rewind", "undo", "redo"]);
        let ids = |ts: Vec<&Turn>| ts.iter().map(|t| t.id.to_string()).collect::<Vec<_>>();
        assert_eq!(ids(store.newest_turns(5, false)?), ["t1"]);
        assert_eq!(ids(store.newest_turns(5, true)?), ["t2", "t1"]);
        assert_eq!(ids(store.all_turns()?), ["t1", "t2"]);
        Ok(())
    }
}
