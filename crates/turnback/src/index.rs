//! The in-memory view of the log: which turns are live, where each blob is,
//! what every operation saved, and the undo/redo stacks. Built by applying
//! records in order; nothing here is stored on disk apart from the log.
//!
//! Invariants checked while applying (a record that breaks one is reported
//! as damage, with its line number):
//! - sequence numbers strictly increase;
//! - a file entry names a blob that this record or an earlier one stored,
//!   with the same size;
//! - an undo names the operation on top of the stack of operations in
//!   effect, a redo the one on top of the stack of undone operations.

use std::collections::HashMap;

use serde::Serialize;

use crate::id::{BlobId, TurnId};
use crate::log::{FileEntry, Op, Post, Pre, Record, StoredBlob};
use crate::pack::{self, BlobLoc};
use crate::path::RelPath;

/// One path captured in a turn, with the sequence number of its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Captured {
    /// Sequence number of the capture record.
    pub seq: u64,
    /// The path and its pre-image.
    #[serde(flatten)]
    pub entry: FileEntry,
    /// Other turns the same change was recorded in (commands that ran at
    /// the same time; any of them may have made it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<TurnId>,
}

/// A turn: the pre-images an agent's turn captured.
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    /// The caller's id.
    pub id: TurnId,
    /// The first label given for it.
    pub label: Option<String>,
    /// Sequence number of its first record: turns are ordered by it.
    pub first_seq: u64,
    /// Unix time (ns) of its first record.
    pub started_at: u64,
    /// The paths captured, first capture of each path only, in order.
    pub files: Vec<Captured>,
    /// The latest post-image recorded per path, with its record's seq.
    #[serde(skip)]
    pub(crate) posts: HashMap<RelPath, (u64, Post)>,
    /// Whether the turn was sealed (its post-images hashed).
    pub sealed: bool,
    /// The rewind or revert that ended it, if it is no longer live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<u64>,
    #[serde(skip)]
    pub(crate) paths: HashMap<RelPath, u64>,
}

impl Turn {
    /// Whether it can still be rewound.
    pub fn is_live(&self) -> bool {
        self.ended_by.is_none()
    }

    /// The latest post-image recorded for `path`, if any.
    pub fn post(&self, path: &RelPath) -> Option<&(u64, Post)> {
        self.posts.get(path)
    }
}

/// What an operation (rewind or revert) did to turns.
#[derive(Debug, Clone)]
pub(crate) struct OpInfo {
    /// `first_seq` of each turn it ended.
    pub(crate) turns: Vec<u64>,
    /// The turn it named.
    pub(crate) turn: TurnId,
    /// Unix time (ns) of its record.
    pub(crate) at: u64,
}

/// An operation in effect (or undone), with the `saved` record that
/// reverses its latest application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) op: u64,
    pub(crate) saved: u64,
}

/// What the store knows after reading the log.
#[derive(Debug, Default)]
pub(crate) struct Index {
    /// Every turn seen, live or ended, by `first_seq`.
    pub(crate) turns: Vec<Turn>,
    pub(crate) blobs: HashMap<BlobId, BlobLoc>,
    /// `saved` records: seq -> the states they hold.
    pub(crate) saved: HashMap<u64, Vec<FileEntry>>,
    pub(crate) ops: HashMap<u64, OpInfo>,
    /// Operations in effect, oldest first.
    pub(crate) done: Vec<Applied>,
    /// Undone operations, last undone on top.
    pub(crate) undone: Vec<Applied>,
    pub(crate) last_seq: u64,
    /// The newest blob recorded for each path (the base for a delta).
    pub(crate) path_blob: HashMap<RelPath, BlobId>,
    /// Capture records seen (for automatic gc).
    pub(crate) captures: u64,
    /// For capture and seal records: the `first_seq` of the turn each
    /// applied to (gc keeps or drops records with their turn).
    pub(crate) record_turn: HashMap<u64, u64>,
    pub(crate) lines: usize,
    pub(crate) consumed: u64,
    pub(crate) ident: Option<(u64, u64)>,
    /// Live turns (kept as records are applied, so automatic gc decides
    /// without a scan).
    pub(crate) live_count: usize,
    /// Compressed bytes of every blob known (the packs' size, headers
    /// aside), kept the same way.
    pub(crate) stored_bytes: u64,
}

impl Index {
    /// The live turn with this id (the newest, should ids repeat).
    pub(crate) fn turn(&self, id: &TurnId) -> Option<&Turn> {
        self.turns.iter().rev().find(|t| t.is_live() && &t.id == id)
    }

    fn turn_mut(&mut self, id: &TurnId) -> Option<&mut Turn> {
        self.turns
            .iter_mut()
            .rev()
            .find(|t| t.is_live() && &t.id == id)
    }

    /// Live turns, oldest first.
    pub(crate) fn live(&self) -> impl DoubleEndedIterator<Item = &Turn> {
        self.turns.iter().filter(|t| t.is_live())
    }

    /// The seq of the operation that ended the newest ended turn with `id`.
    pub(crate) fn ended(&self, id: &TurnId) -> Option<u64> {
        self.turns
            .iter()
            .rev()
            .find(|t| &t.id == id)
            .and_then(|t| t.ended_by)
    }

    /// How many deltas deep a blob is (0: stored whole).
    pub(crate) fn delta_depth(&self, id: &BlobId) -> usize {
        let mut depth = 0;
        let mut cur = self.blobs.get(id).and_then(|l| l.base);
        while let Some(b) = cur {
            depth += 1;
            if depth > pack::MAX_DELTA_DEPTH {
                break;
            }
            cur = self.blobs.get(&b).and_then(|l| l.base);
        }
        depth
    }

    fn register_blobs(
        &mut self,
        pack: &Option<String>,
        blobs: &[StoredBlob],
        files: &[FileEntry],
    ) -> Result<(), String> {
        if let Some(p) = pack
            && !pack::is_pack_name(p)
        {
            return Err(format!("bad pack name {p:?}"));
        }
        let mut fresh: HashMap<BlobId, BlobLoc> = HashMap::new();
        for b in blobs {
            let name = match (&b.pack, pack) {
                (Some(p), _) if pack::is_pack_name(p) => p.clone(),
                (Some(p), _) => return Err(format!("bad pack name {p:?}")),
                (None, Some(p)) => p.clone(),
                (None, None) => return Err(format!("blob {} is listed without a pack", b.id)),
            };
            if let Some(base) = &b.base
                && !fresh.contains_key(base)
                && !self.blobs.contains_key(base)
            {
                return Err(format!(
                    "blob {} is a delta against {base}, which no record stored",
                    b.id
                ));
            }
            let loc = BlobLoc {
                pack: name,
                offset: b.offset,
                len: b.len,
                size: b.size,
                base: b.base,
            };
            fresh.insert(b.id, loc);
        }
        for f in files {
            if let Pre::File { blob, size, .. } = &f.pre {
                match fresh.get(blob).or_else(|| self.blobs.get(blob)) {
                    None => {
                        return Err(format!(
                            "{} names blob {blob} that no record stored",
                            f.path
                        ));
                    }
                    Some(loc) if loc.size != *size => {
                        return Err(format!(
                            "{} gives size {size} for blob {blob} of {}",
                            f.path, loc.size
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        for (id, loc) in fresh {
            if let std::collections::hash_map::Entry::Vacant(v) = self.blobs.entry(id) {
                self.stored_bytes += loc.len;
                v.insert(loc);
            }
        }
        for f in files {
            if let Pre::File { blob, .. } = &f.pre {
                self.path_blob.insert(f.path.clone(), *blob);
            }
        }
        Ok(())
    }

    fn end_turns(&mut self, first_seqs: &[u64], by: Option<u64>) {
        for t in &mut self.turns {
            if first_seqs.contains(&t.first_seq) {
                match (t.ended_by.is_some(), by.is_some()) {
                    (false, true) => self.live_count -= 1,
                    (true, false) => self.live_count += 1,
                    _ => {}
                }
                t.ended_by = by;
            }
        }
    }

    /// Recomputes the counters kept while applying records (after a
    /// checkpoint is decoded).
    pub(crate) fn recount(&mut self) {
        self.live_count = self.live().count();
        self.stored_bytes = self.blobs.values().map(|l| l.len).sum();
    }

    /// Moves operation `op` from the top of one stack to the other: an undo
    /// (from the operations in effect to the undone ones, bringing its turns
    /// back) or a redo (the other way, ending them again).
    fn flip(&mut self, undo: bool, op: u64, saved: u64) -> Result<(), String> {
        let (from, verb, which) = if undo {
            (&self.done, "undoes", "in effect")
        } else {
            (&self.undone, "redoes", "undone")
        };
        if from.last().map(|a| a.op) != Some(op) {
            return Err(format!(
                "{verb} operation {op}, which is not the last one {which}"
            ));
        }
        if !self.saved.contains_key(&saved) {
            return Err(format!(
                "names saved record {saved}, which does not precede it"
            ));
        }
        let turns = self
            .ops
            .get(&op)
            .map(|o| o.turns.clone())
            .unwrap_or_default();
        let applied = Applied { op, saved };
        if undo {
            self.done.pop();
            self.end_turns(&turns, None);
            self.undone.push(applied);
        } else {
            self.undone.pop();
            self.end_turns(&turns, Some(op));
            self.done.push(applied);
        }
        Ok(())
    }

    /// Applies one record; `Err` says why it does not fit.
    pub(crate) fn apply(&mut self, rec: &Record) -> Result<(), String> {
        if rec.seq <= self.last_seq {
            return Err(format!(
                "sequence number {} does not follow {}",
                rec.seq, self.last_seq
            ));
        }
        match &rec.op {
            Op::Capture {
                turn,
                label,
                pack,
                blobs,
                files,
                posts,
                shared_with,
            } => {
                self.register_blobs(pack, blobs, files)?;
                self.captures += 1;
                if self.turn(turn).is_none() {
                    self.turns.push(Turn {
                        id: turn.clone(),
                        label: None,
                        first_seq: rec.seq,
                        started_at: rec.at,
                        files: Vec::new(),
                        posts: HashMap::new(),
                        sealed: false,
                        ended_by: None,
                        paths: HashMap::new(),
                    });
                    self.live_count += 1;
                }
                let t = self.turn_mut(turn).expect("just ensured");
                let first = t.first_seq;
                if t.label.is_none() {
                    t.label = label.clone().filter(|l| !l.is_empty());
                }
                for f in files {
                    if !t.paths.contains_key(&f.path) {
                        t.paths.insert(f.path.clone(), rec.seq);
                        t.files.push(Captured {
                            seq: rec.seq,
                            entry: f.clone(),
                            shared_with: shared_with.clone(),
                        });
                    }
                }
                for p in posts {
                    t.posts.insert(p.path.clone(), (rec.seq, p.post.clone()));
                }
                self.record_turn.insert(rec.seq, first);
            }
            Op::Seal { turn, posts } => {
                let t = self
                    .turn_mut(turn)
                    .ok_or_else(|| format!("seals turn {turn:?}, which is not live"))?;
                t.sealed = true;
                for p in posts {
                    t.posts.insert(p.path.clone(), (rec.seq, p.post.clone()));
                }
                let first = t.first_seq;
                self.record_turn.insert(rec.seq, first);
            }
            Op::Snapshot { pack, blobs, .. } => {
                let before = self.blobs.len();
                let fresh: u64 = blobs
                    .iter()
                    .filter(|b| !self.blobs.contains_key(&b.id))
                    .map(|b| b.len)
                    .sum();
                apply_snapshot(&mut self.blobs, pack, blobs)?;
                if self.blobs.len() > before {
                    self.stored_bytes += fresh;
                }
            }
            Op::Saved { pack, blobs, files } => {
                self.register_blobs(pack, blobs, files)?;
                self.saved.insert(rec.seq, files.clone());
            }
            Op::Rewind {
                turn,
                from_seq,
                saved,
                ..
            } => {
                if !self.saved.contains_key(saved) {
                    return Err(format!(
                        "names saved record {saved}, which does not precede it"
                    ));
                }
                let ended: Vec<u64> = self
                    .live()
                    .filter(|t| t.first_seq >= *from_seq)
                    .map(|t| t.first_seq)
                    .collect();
                self.end_turns(&ended, Some(rec.seq));
                self.ops.insert(
                    rec.seq,
                    OpInfo {
                        turns: ended,
                        turn: turn.clone(),
                        at: rec.at,
                    },
                );
                self.done.push(Applied {
                    op: rec.seq,
                    saved: *saved,
                });
                self.undone.clear();
            }
            Op::Revert {
                turn,
                turn_seq,
                saved,
                ..
            } => {
                if !self.saved.contains_key(saved) {
                    return Err(format!(
                        "names saved record {saved}, which does not precede it"
                    ));
                }
                if !self.live().any(|t| t.first_seq == *turn_seq) {
                    return Err(format!(
                        "reverts turn {turn:?} at {turn_seq}, which is not live"
                    ));
                }
                self.end_turns(&[*turn_seq], Some(rec.seq));
                self.ops.insert(
                    rec.seq,
                    OpInfo {
                        turns: vec![*turn_seq],
                        turn: turn.clone(),
                        at: rec.at,
                    },
                );
                self.done.push(Applied {
                    op: rec.seq,
                    saved: *saved,
                });
                self.undone.clear();
            }
            Op::Undo { op, saved, .. } => self.flip(true, *op, *saved)?,
            Op::Redo { op, saved, .. } => self.flip(false, *op, *saved)?,
            Op::RolledBack { saved, .. } => {
                if *saved != self.last_seq || !self.saved.contains_key(saved) {
                    return Err(format!(
                        "rolls back saved record {saved}, which is not the record just before it"
                    ));
                }
            }
        }
        self.last_seq = rec.seq;
        Ok(())
    }
}

/// Applies a `snapshot` record to the blob map (for `Index::apply`).
pub(crate) fn apply_snapshot(
    known: &mut HashMap<BlobId, BlobLoc>,
    pack: &str,
    blobs: &[StoredBlob],
) -> std::result::Result<(), String> {
    if !pack::is_pack_name(pack) {
        return Err(format!("bad pack name {pack:?}"));
    }
    for b in blobs {
        known.entry(b.id).or_insert(BlobLoc {
            pack: b.pack.clone().unwrap_or_else(|| pack.to_owned()),
            offset: b.offset,
            len: b.len,
            size: b.size,
            base: b.base,
        });
    }
    Ok(())
}
