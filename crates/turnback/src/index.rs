//! The in-memory view of the log: which turns are live, where each blob is,
//! what every operation saved, and the undo/redo stacks. Built by applying
//! records in order; nothing here is stored on disk apart from the log.
//!
//! An index opened from a checkpoint ([`crate::checkpoint`]) keeps the
//! checkpoint's turns, blobs and capture records in its tables, read in
//! place: a turn is decoded the first time it is used, a blob or record is
//! found by binary search. What the log adds after it is kept beside them.
//!
//! Invariants checked while applying (a record that breaks one is reported
//! as damage, with its line number):
//! - sequence numbers strictly increase;
//! - a file entry names a blob that this record or an earlier one stored,
//!   with the same size;
//! - an undo names the operation on top of the stack of operations in
//!   effect, a redo the one on top of the stack of undone operations.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use crate::checkpoint::{BlobTable, FrozenPathBlobs, FrozenTurns, SeqTable};
use crate::error::{Error, Result};
use crate::id::{BlobId, TurnId};
use crate::log::{FileEntry, Op, Post, PostEntry, Pre, Record, StoredBlob};
use crate::pack::{self, BlobLoc};
use crate::path::RelPath;

mod posts;
pub(crate) use posts::Posts;

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
    #[serde(rename = "turn")]
    pub id: TurnId,
    /// The first label given for it.
    pub label: Option<String>,
    /// Sequence number of its first record: turns are ordered by it.
    pub first_seq: u64,
    /// Unix time (ns) of its first record (RFC 3339 in JSON).
    #[serde(serialize_with = "crate::time::ser_ns")]
    pub started_at: u64,
    /// The paths captured, first capture of each path only, in order.
    pub files: Vec<Captured>,
    /// The latest post-image recorded per path, with its record's seq (0
    /// for a seal's).
    #[serde(skip)]
    pub(crate) posts: Posts,
    /// Whether the turn was sealed (its post-images hashed).
    pub sealed: bool,
    /// The rewind or revert that ended it, if it is no longer live.
    #[serde(rename = "ended_by_seq", skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<u64>,
    /// The position in `files` of each path, ordered by path: a path's
    /// first capture is found by binary search, with no second copy of
    /// every path (a map of 100,000 paths to their seq took 7.5 MB).
    #[serde(skip)]
    pub(crate) by_path: Vec<u32>,
}

impl Turn {
    /// See [`Turns::fit`].
    fn fit(&mut self) {
        let loose = |len: usize, cap: usize| len >= 1024 && cap > len + len / 4;
        if loose(self.files.len(), self.files.capacity()) {
            self.files.shrink_to_fit();
        }
        if loose(self.by_path.len(), self.by_path.capacity()) {
            self.by_path.shrink_to_fit();
        }
    }

    /// The first capture of `path` in the turn.
    pub(crate) fn captured(&self, path: &RelPath) -> Option<&Captured> {
        let path_at = |i: u32| &self.files[i as usize].entry.path;
        let k = self
            .by_path
            .binary_search_by(|&i| path_at(i).cmp(path))
            .ok()?;
        Some(&self.files[self.by_path[k] as usize])
    }

    /// Appends the captures in `files` (record `seq`) of the paths the turn
    /// has not captured yet: the first capture of a path stands. The
    /// entries are moved, not copied (a capture of 100,000 paths).
    fn add_captures(&mut self, seq: u64, files: Vec<FileEntry>, shared_with: &[TurnId]) {
        let keep: Vec<bool> = {
            let mut in_record: HashSet<&RelPath> = HashSet::new();
            let one = files.len() == 1;
            files
                .iter()
                .map(|f| self.captured(&f.path).is_none() && (one || in_record.insert(&f.path)))
                .collect()
        };
        let kept = keep.iter().filter(|&&k| k).count();
        if kept == 0 {
            return;
        }
        self.files.reserve_exact(kept);
        let start = self.files.len();
        self.files.extend(
            files
                .into_iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(entry, _)| Captured {
                    seq,
                    entry,
                    shared_with: shared_with.to_vec(),
                }),
        );
        let files = &self.files;
        let path_at = |i: &u32| &files[*i as usize].entry.path;
        let mut added: Vec<u32> = (start..files.len())
            .map(|i| u32::try_from(i).expect("a turn holds fewer than 2^32 paths"))
            .collect();
        added.sort_unstable_by(|a, b| path_at(a).cmp(path_at(b)));
        // Merged with the paths captured before (no path in both).
        let mut merged = Vec::with_capacity(self.by_path.len() + added.len());
        let (mut old, mut add) = (self.by_path.iter().peekable(), added.iter().peekable());
        while let (Some(a), Some(b)) = (old.peek(), add.peek()) {
            if path_at(a) < path_at(b) {
                merged.extend(old.next());
            } else {
                merged.extend(add.next());
            }
        }
        merged.extend(old);
        merged.extend(add);
        self.by_path = merged;
    }

    /// Whether it can still be rewound.
    pub fn is_live(&self) -> bool {
        self.ended_by.is_none()
    }

    /// The latest post-image recorded for `path`, if any.
    pub fn post(&self, path: &RelPath) -> Option<(u64, &Post)> {
        self.posts.get(path)
    }
}

/// Why a record cannot be applied to an index.
#[derive(Debug)]
pub(crate) enum Misfit {
    /// It does not fit the records before it (damage in the log): why.
    Record(String),
    /// What it changes cannot be read: a turn of the index checkpoint that
    /// neither the checkpoint nor the log it covers gives
    /// ([`Error::TurnUnreadable`]).
    Index(Error),
}

impl From<String> for Misfit {
    fn from(reason: String) -> Misfit {
        Misfit::Record(reason)
    }
}

impl From<Error> for Misfit {
    fn from(e: Error) -> Misfit {
        Misfit::Index(e)
    }
}

impl Misfit {
    /// The error of the record at `line` of the log `path`: the line is
    /// damaged, or the index cannot take it.
    pub(crate) fn at(self, path: std::path::PathBuf, line: usize) -> Error {
        match self {
            Misfit::Record(reason) => Error::LogDamaged { path, line, reason },
            Misfit::Index(e) => e,
        }
    }
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::Record(reason) => f.write_str(reason),
            Misfit::Index(e) => e.fmt(f),
        }
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
    /// Paths of reverted turns whose pre-images still stand, by turn
    /// (`first_seq`): for a revert, the paths it left as they were (kept or
    /// failed) in the turn it reverted; for a rewind, those of reverted
    /// turns it covered, which it put back. See [`Index::kept_reverted`].
    pub(crate) kept: Vec<(u64, Vec<RelPath>)>,
}

/// An operation in effect (or undone), with the `saved` record that
/// reverses its latest application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) op: u64,
    pub(crate) saved: u64,
}

/// One application of an operation (its record, or a redo) that an undo
/// reversed: while it stood, a turn that captured a path it had changed
/// took what the operation left there as the path's pre-image, and the
/// undo then put back what the `saved` record holds. See
/// [`Index::before_reversed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reversed {
    pub(crate) op: u64,
    /// The `saved` record of the application: the states before it (its
    /// seq is also where the application began).
    pub(crate) saved: u64,
    /// The seq of the undo record that reversed it.
    pub(crate) until: u64,
}

/// What the store knows after reading the log.
#[derive(Debug, Default)]
pub(crate) struct Index {
    /// Every turn seen, live or ended, by `first_seq`.
    pub(crate) turns: Turns,
    pub(crate) blobs: Blobs,
    /// `saved` records: seq -> the states they hold.
    pub(crate) saved: HashMap<u64, Vec<FileEntry>>,
    pub(crate) ops: HashMap<u64, OpInfo>,
    /// Operations in effect, oldest first.
    pub(crate) done: Vec<Applied>,
    /// Undone operations, last undone on top.
    pub(crate) undone: Vec<Applied>,
    /// Every application an undo reversed, in the order of the undos
    /// (kept after a redo or a new operation too).
    pub(crate) reversed: Vec<Reversed>,
    pub(crate) last_seq: u64,
    /// The newest blob recorded for each path (the base for a delta).
    pub(crate) path_blob: PathBlobs,
    /// Capture records seen (for automatic gc).
    pub(crate) captures: u64,
    /// For capture and seal records: the `first_seq` of the turn each
    /// applied to (gc keeps or drops records with their turn).
    pub(crate) record_turn: RecordTurns,
    pub(crate) lines: usize,
    pub(crate) consumed: u64,
    pub(crate) ident: Option<(u64, u64)>,
    /// Bytes of the log the index checkpoint covers, as this process last
    /// read or wrote it (0: none).
    pub(crate) checkpointed: u64,
    /// Live turns (kept as records are applied, so automatic gc decides
    /// without a scan).
    pub(crate) live_count: usize,
    /// Compressed bytes of every blob known (the packs' size, headers
    /// aside), kept the same way.
    pub(crate) stored_bytes: u64,
}

impl Index {
    /// The turns with a capture record after `seq`, oldest first, found
    /// through those records (`record_turn`), not by a look at every turn:
    /// the records since a snapshot are few, the turns of a store may be
    /// many thousands, and each turn of the index checkpoint is decoded
    /// when first looked at (a loop over every turn made the after-command
    /// snapshot in a store of 10,000 turns take 3.6 times as long as in a
    /// new project).
    pub(crate) fn turns_captured_after(&self, seq: u64) -> Result<Vec<&Turn>> {
        let mut firsts = Vec::new();
        for s in seq.saturating_add(1)..=self.last_seq {
            firsts.extend(self.record_turn.get(&s)?);
        }
        firsts.sort_unstable();
        firsts.dedup();
        let mut turns = Vec::with_capacity(firsts.len());
        for first in firsts {
            turns.extend(self.turn_at(first)?);
        }
        Ok(turns)
    }

    /// The live turn with this id (the newest, should ids repeat).
    pub(crate) fn turn(&self, id: &TurnId) -> Result<Option<&Turn>> {
        match self.turns.find(id, true)? {
            Some(i) => self.turns.get(i),
            None => Ok(None),
        }
    }

    fn turn_mut(&mut self, id: &TurnId) -> Result<Option<&mut Turn>> {
        match self.turns.find(id, true)? {
            Some(i) => self.turns.get_mut(i),
            None => Ok(None),
        }
    }

    /// Live turns, oldest first (a checkpoint's turn that ended is not
    /// decoded to find that out).
    pub(crate) fn live(&self) -> Result<Vec<&Turn>> {
        let mut live = Vec::new();
        for i in self.live_places() {
            live.extend(self.turns.get(i?)?);
        }
        Ok(live)
    }

    /// The ids of the live turns, oldest first; a checkpoint's turn is not
    /// decoded for its id (see [`Turns::id_of`]).
    pub(crate) fn live_ids(&self) -> Result<Vec<TurnId>> {
        let mut ids = Vec::with_capacity(self.live_count);
        for i in self.live_places() {
            ids.push(self.turns.id_of(i?)?);
        }
        Ok(ids)
    }

    /// The places of the live turns in [`Index::turns`], oldest first (no
    /// turn of the checkpoint is decoded).
    pub(crate) fn live_places(&self) -> impl DoubleEndedIterator<Item = Result<usize>> + '_ {
        (0..self.turns.len()).filter_map(|i| match self.turns.is_live(i) {
            Ok(live) => live.then_some(Ok(i)),
            Err(e) => Some(Err(e)),
        })
    }

    /// The `first_seq` of the turn at place `i` if a seal would record
    /// something: it is not sealed and a path it captured has no
    /// post-image yet. A sealed turn of the checkpoint is not decoded.
    pub(crate) fn to_seal(&self, i: usize) -> Result<Option<u64>> {
        if self.turns.is_sealed(i)? {
            return Ok(None);
        }
        let Some(t) = self.turns.get(i)? else {
            return Ok(None);
        };
        Ok(t.files
            .iter()
            .any(|c| !t.posts.contains_key(&c.entry.path))
            .then_some(t.first_seq))
    }

    /// When the oldest live turn began, decoding no turn of the checkpoint.
    pub(crate) fn oldest_live_start(&self) -> Result<Option<u64>> {
        match self.live_places().next() {
            Some(i) => self.turns.started_at(i?),
            None => Ok(None),
        }
    }

    /// Live turns whose first record is `first_seq` or later, oldest first
    /// (those a rewind from there ends). The turns before are neither
    /// looked at nor decoded: a rewind of the newest turn costs the same
    /// whatever the older turns hold.
    pub(crate) fn live_from(&self, first_seq: u64) -> Result<Vec<&Turn>> {
        let mut live = Vec::new();
        for t in self
            .turns
            .iter_from(self.turns.first_at_or_after(first_seq)?)
        {
            live.extend(Some(t?).filter(|t| t.is_live()));
        }
        Ok(live)
    }

    /// The seq of the operation that ended the newest ended turn with `id`.
    pub(crate) fn ended(&self, id: &TurnId) -> Result<Option<u64>> {
        match self.turns.find(id, false)? {
            Some(i) => Ok(self.turns.get(i)?.and_then(|t| t.ended_by)),
            None => Ok(None),
        }
    }

    /// The turn whose first record is `first_seq`.
    pub(crate) fn turn_at(&self, first_seq: u64) -> Result<Option<&Turn>> {
        match self.turns.by_first_seq(first_seq)? {
            Some(i) => self.turns.get(i),
            None => Ok(None),
        }
    }

    /// How many deltas deep a blob is (0: stored whole).
    pub(crate) fn delta_depth(&self, id: &BlobId) -> usize {
        let mut depth = 0;
        let mut cur = self.blobs.base_of(id);
        while let Some(b) = cur {
            depth += 1;
            if depth > pack::MAX_DELTA_DEPTH {
                break;
            }
            cur = self.blobs.base_of(&b);
        }
        depth
    }

    /// Registers a record's new blobs and checks its files' blobs against
    /// them; with `bases`, each file's blob becomes its path's delta base
    /// (`path_blob`). A saved record's are not: its states are what an
    /// operation replaced, while the path then holds what it put back (a
    /// capture's pre-image, already the base), and a rewind of 100,000
    /// paths would otherwise grow the map by 100,000 entries.
    fn register_blobs(
        &mut self,
        pack: &Option<String>,
        blobs: Listed<'_>,
        files: &[FileEntry],
        bases: bool,
    ) -> Result<(), String> {
        if let Some(p) = pack
            && !pack::is_pack_name(p)
        {
            return Err(format!("bad pack name {p:?}"));
        }
        // The record's blobs in a vector sorted by id (one entry per id, see
        // `sort_run`), not a map: a record of 100,000 blobs is checked and
        // kept without a hash table's room.
        let shared: Option<Arc<str>> = pack.as_deref().map(Arc::from);
        let loc = |b: &StoredBlob| -> Result<(BlobId, BlobLoc), String> {
            let name = match (&b.pack, &shared) {
                (Some(p), _) if pack::is_pack_name(p) => Arc::from(p.as_str()),
                (Some(p), _) => return Err(format!("bad pack name {p:?}")),
                (None, Some(p)) => p.clone(),
                (None, None) => return Err(format!("blob {} is listed without a pack", b.id)),
            };
            Ok((b.id, stored_at(b, name)))
        };
        let no_base = |b: &StoredBlob, base: &BlobId| {
            format!(
                "blob {} is a delta against {base}, which no record stored",
                b.id
            )
        };
        // A delta's base is a blob known before or one listed earlier in the
        // record.
        let mut fresh: Vec<(BlobId, BlobLoc)>;
        match blobs {
            Listed::Read(blobs) => {
                fresh = Vec::with_capacity(blobs.len());
                // The second is rare: the ids listed before are put in a
                // set only once a base is not known (a set of 100,000 ids
                // is 4.7 MB).
                let mut earlier: Option<HashSet<BlobId>> = None;
                for (i, b) in blobs.iter().enumerate() {
                    if let Some(base) = &b.base
                        && !self.blobs.contains_key(base)
                        && !earlier
                            .get_or_insert_with(|| blobs[..i].iter().map(|b| b.id).collect())
                            .contains(base)
                    {
                        return Err(no_base(b, base));
                    }
                    if let Some(set) = &mut earlier {
                        set.insert(b.id);
                    }
                    fresh.push(loc(b)?);
                }
            }
            Listed::Owned(mut blobs) => {
                // Taken from the end, the list giving back its room as the
                // run grows: the two are never both whole in memory (the
                // 100,000 blobs a rewind of 100,000 paths saves are a list
                // of 12 MB and a run of 11 MB). The ids still in the list
                // are those listed earlier, counted only once a base is not
                // known.
                fresh = Vec::new();
                let mut earlier: Option<HashMap<BlobId, usize>> = None;
                while let Some(b) = blobs.pop() {
                    if let Some(n) = earlier.as_mut().and_then(|e| e.get_mut(&b.id)) {
                        *n -= 1;
                    }
                    if let Some(base) = &b.base
                        && !self.blobs.contains_key(base)
                        && earlier
                            .get_or_insert_with(|| {
                                let mut counts = HashMap::new();
                                for e in &blobs {
                                    *counts.entry(e.id).or_insert(0) += 1;
                                }
                                counts
                            })
                            .get(base)
                            .is_none_or(|&n| n == 0)
                    {
                        return Err(no_base(&b, base));
                    }
                    fresh.push(loc(&b)?);
                    if blobs.len() < blobs.capacity() / 2 {
                        blobs.shrink_to_fit();
                    }
                }
                fresh.shrink_to_fit();
            }
        }
        sort_run(&mut fresh);
        let in_record = |id: &BlobId| {
            fresh
                .binary_search_by(|(k, _)| k.cmp(id))
                .ok()
                .map(|k| fresh[k].1.size)
        };
        for f in files {
            if let Pre::File { blob, size, .. } = &f.pre {
                match in_record(blob).or_else(|| self.blobs.size_of(blob)) {
                    None => {
                        return Err(format!(
                            "{} names blob {blob} that no record stored",
                            f.path
                        ));
                    }
                    Some(known) if known != *size => {
                        return Err(format!(
                            "{} gives size {size} for blob {blob} of {known}",
                            f.path
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        self.stored_bytes += self.blobs.insert_sorted(fresh);
        if !bases {
            return Ok(());
        }
        for f in files {
            if let Pre::File { blob, .. } = &f.pre {
                self.path_blob.insert(f.path.clone(), *blob);
            }
        }
        Ok(())
    }

    fn end_turns(&mut self, first_seqs: &[u64], by: Option<u64>) -> Result<()> {
        for &first in first_seqs {
            let Some(i) = self.turns.by_first_seq(first)? else {
                continue;
            };
            let Some(t) = self.turns.get_mut(i)? else {
                continue;
            };
            match (t.ended_by.is_some(), by.is_some()) {
                (false, true) => self.live_count -= 1,
                (true, false) => self.live_count += 1,
                _ => {}
            }
            t.ended_by = by;
        }
        Ok(())
    }

    /// The paths of reverted turns whose pre-images still stand, by turn
    /// (`first_seq`, ascending): a revert leaves a path a later turn also
    /// changed as it is (or fails to restore it), so the folder before that
    /// reverted turn still has it as the turn's pre-image says, and a
    /// rewind of an earlier turn must give that back, not the later turn's
    /// pre-image (which holds the reverted turn's bytes). Each revert in
    /// effect adds its paths; each rewind in effect put back those of the
    /// reverted turns it covered. Undo and redo move operations between
    /// the stacks, so this follows them.
    pub(crate) fn kept_reverted(&self) -> Result<Vec<(u64, Vec<RelPath>)>> {
        let mut by_turn: std::collections::BTreeMap<u64, Vec<RelPath>> =
            std::collections::BTreeMap::new();
        for a in &self.done {
            let Some(info) = self.ops.get(&a.op) else {
                continue;
            };
            // A revert names the turn it ended; a rewind names reverted
            // turns, which a revert ended, and takes their paths.
            for (seq, paths) in &info.kept {
                let ended_here = self.turn_at(*seq)?.and_then(|t| t.ended_by) == Some(a.op);
                if ended_here {
                    by_turn.insert(*seq, paths.clone());
                } else if let Some(have) = by_turn.get_mut(seq) {
                    have.retain(|p| paths.binary_search(p).is_err());
                }
            }
        }
        by_turn.retain(|_, paths| !paths.is_empty());
        Ok(by_turn.into_iter().collect())
    }

    /// Corrects the pre-images a rewind from `first` takes (`oldest`: each
    /// path's oldest capture, with its record's seq) for the applications
    /// an undo reversed since `first`. A turn that captured a path while
    /// such an application stood took what the operation left there; the
    /// undo then put back the state before it, which is what the folder
    /// held before `first`, unless the turn's own capture is older. So a
    /// capture made inside one or more reversed applications that changed
    /// its path is replaced by the state saved by the outermost of them
    /// (the one begun first), under that `saved` record's seq.
    ///
    /// Only applications begun at `first` or later count: an undo of an
    /// operation made before the rewound turn began is the user's word on
    /// the turns that operation ended, which a rewind of a later turn does
    /// not take back. A state an application saved counts only if it
    /// changed the path: `left(pre)` says it did not (a file kept aside
    /// whose store name is gone: see `aside.rs`), and then the capture,
    /// which saw the path as it was before, stands.
    pub(crate) fn before_reversed<'a>(
        &'a self,
        first: u64,
        oldest: &mut [(&'a RelPath, u64, &'a Pre)],
        mut left: impl FnMut(&Pre) -> bool,
    ) {
        let spans: Vec<(&Reversed, &Vec<FileEntry>)> = self
            .reversed
            .iter()
            .filter(|r| r.saved >= first)
            .filter_map(|r| Some((r, self.saved.get(&r.saved)?)))
            .collect();
        if spans.is_empty() {
            return;
        }
        // Each span's states sorted by path, made when a capture first
        // falls inside it.
        let mut sorted: Vec<Option<Vec<(&RelPath, &Pre)>>> = vec![None; spans.len()];
        for (path, seq, pre) in oldest.iter_mut() {
            let mut best: Option<(u64, &Pre)> = None;
            for (k, (r, states)) in spans.iter().enumerate() {
                let inside = r.saved < *seq && *seq < r.until;
                if !inside || best.is_some_and(|(s, _)| s <= r.saved) {
                    continue;
                }
                let table = sorted[k].get_or_insert_with(|| {
                    let mut t: Vec<(&RelPath, &Pre)> =
                        states.iter().map(|e| (&e.path, &e.pre)).collect();
                    t.sort_by(|a, b| a.0.cmp(b.0));
                    t
                });
                if let Ok(i) = table.binary_search_by(|e| e.0.cmp(path))
                    && !left(table[i].1)
                {
                    best = Some((r.saved, table[i].1));
                }
            }
            if let Some((s, p)) = best {
                *seq = s;
                *pre = p;
            }
        }
    }

    /// Moves operation `op` from the top of one stack to the other: an undo
    /// (from the operations in effect to the undone ones, bringing its turns
    /// back) or a redo (the other way, ending them again), by the record
    /// `seq`.
    fn flip(&mut self, undo: bool, op: u64, saved: u64, seq: u64) -> Result<(), Misfit> {
        let (from, verb, which) = if undo {
            (&self.done, "undoes", "in effect")
        } else {
            (&self.undone, "redoes", "undone")
        };
        if from.last().map(|a| a.op) != Some(op) {
            return Err(Misfit::Record(format!(
                "{verb} operation {op}, which is not the last one {which}"
            )));
        }
        if !self.saved.contains_key(&saved) {
            return Err(Misfit::Record(format!(
                "names saved record {saved}, which does not precede it"
            )));
        }
        let turns = self
            .ops
            .get(&op)
            .map(|o| o.turns.clone())
            .unwrap_or_default();
        let applied = Applied { op, saved };
        if undo {
            self.end_turns(&turns, None)?;
            let top = self.done.pop().expect("checked above");
            self.reversed.push(Reversed {
                op,
                saved: top.saved,
                until: seq,
            });
            self.undone.push(applied);
        } else {
            self.end_turns(&turns, Some(op))?;
            self.undone.pop();
            self.done.push(applied);
        }
        Ok(())
    }

    /// Drops from the `saved` record `saved` the states of the paths its
    /// operation left as they were (`kept`): it did not change them, so
    /// an undo does not put them back, and a capture made while it stood
    /// is no state it left behind (see [`Index::before_reversed`]).
    /// A kept path that was no directory and lies above a path the
    /// operation put back was changed all the same: the directory was
    /// made so the path below it could be written, and an undo removes it
    /// again (its state stays).
    fn leave_out(&mut self, saved: u64, kept: &[RelPath]) {
        if kept.is_empty() {
            return;
        }
        let kept: HashSet<&RelPath> = kept.iter().collect();
        let Some(states) = self.saved.get_mut(&saved) else {
            return;
        };
        let above_changed: HashSet<RelPath> = states
            .iter()
            .filter(|e| !kept.contains(&e.path))
            .flat_map(|e| e.path.ancestors())
            .filter(|a| kept.contains(a))
            .collect();
        states.retain(|e| {
            !kept.contains(&e.path)
                || (!matches!(e.pre, Pre::Dir { .. }) && above_changed.contains(&e.path))
        });
    }

    /// Applies one record it may keep parts of: its lists of paths (a
    /// capture's pre-images and post-images, a seal's post-images, a saved
    /// record's states and blobs) are moved into the index, not copied (a
    /// capture or a rewind of 100,000 paths). `Err` says why it does not
    /// fit.
    pub(crate) fn apply_owned(&mut self, mut rec: Record) -> Result<(), Misfit> {
        let mut taken = Taken::default();
        match &mut rec.op {
            Op::Saved { files, blobs, .. } => {
                taken.files = Some(std::mem::take(files));
                taken.blobs = Some(std::mem::take(blobs));
            }
            Op::Capture { files, posts, .. } => {
                taken.files = Some(std::mem::take(files));
                taken.posts = Some(std::mem::take(posts));
            }
            Op::Seal { posts, .. } => taken.posts = Some(std::mem::take(posts)),
            _ => {}
        }
        self.apply_with(&rec, taken)
    }

    /// Applies one record; `Err` says why it does not fit.
    pub(crate) fn apply(&mut self, rec: &Record) -> Result<(), Misfit> {
        self.apply_with(rec, Taken::default())
    }

    /// [`Index::apply`], the lists in `taken` used instead of the record's
    /// own (which are then empty).
    fn apply_with(&mut self, rec: &Record, taken: Taken) -> Result<(), Misfit> {
        if rec.seq <= self.last_seq {
            return Err(Misfit::Record(format!(
                "sequence number {} does not follow {}",
                rec.seq, self.last_seq
            )));
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
                let files = taken.files.unwrap_or_else(|| files.clone());
                let posts = taken.posts.unwrap_or_else(|| posts.clone());
                self.register_blobs(pack, Listed::Read(blobs), &files, true)?;
                self.captures += 1;
                if self.turn(turn)?.is_none() {
                    self.turns.push(Turn {
                        id: turn.clone(),
                        label: None,
                        first_seq: rec.seq,
                        started_at: rec.at,
                        files: Vec::new(),
                        posts: Posts::default(),
                        sealed: false,
                        ended_by: None,
                        by_path: Vec::new(),
                    });
                    self.live_count += 1;
                }
                // A turn an undone operation would end again took in new
                // paths since the undo: redoing it would end the turn and
                // leave those paths with the turn's bytes (a later rewind of
                // an earlier turn would skip them), so nothing can be redone
                // any more, as in an editor after a new edit.
                let first_now = self.turn(turn)?.map(|t| t.first_seq);
                if !files.is_empty()
                    && let (Some(first), Some(top)) = (first_now, self.undone.last())
                    && self
                        .ops
                        .get(&top.op)
                        .is_some_and(|o| o.turns.contains(&first))
                {
                    self.undone.clear();
                }
                let t = self.turn_mut(turn)?.expect("just ensured");
                let first = t.first_seq;
                if t.label.is_none() {
                    t.label = label.clone().filter(|l| !l.is_empty());
                }
                t.add_captures(rec.seq, files, shared_with);
                t.posts.insert_all(rec.seq, posts);
                self.record_turn.insert(rec.seq, first);
            }
            Op::Seal { turn, posts } => {
                let t = self
                    .turn_mut(turn)?
                    .ok_or_else(|| format!("seals turn {turn:?}, which is not live"))?;
                t.sealed = true;
                // A seal hashes what the turn's paths hold when the next
                // turn begins; it touches none of them, so its post-images
                // carry no record of their own (seq 0): a command's scan
                // never takes them for a file tool's write (see
                // `snapshot::attribution::assign`).
                t.posts
                    .insert_all(0, taken.posts.unwrap_or_else(|| posts.clone()));
                let first = t.first_seq;
                self.record_turn.insert(rec.seq, first);
            }
            Op::Snapshot { pack, blobs, .. } => {
                self.stored_bytes += apply_snapshot(&mut self.blobs, pack, blobs)?;
            }
            Op::Saved { pack, blobs, files } => {
                let (files, blobs) = match (taken.files, taken.blobs) {
                    (Some(files), Some(blobs)) => (files, Listed::Owned(blobs)),
                    _ => (files.clone(), Listed::Read(blobs)),
                };
                self.register_blobs(pack, blobs, &files, false)?;
                self.saved.insert(rec.seq, files);
            }
            Op::Packed {
                saved,
                pack,
                blobs,
                files,
            } => {
                if !self.saved.contains_key(saved) {
                    return Err(Misfit::Record(format!(
                        "stores the kept files of saved record {saved}, which does not precede it"
                    )));
                }
                self.register_blobs(pack, Listed::Read(blobs), files, false)?;
                let stored: HashMap<&RelPath, &Pre> =
                    files.iter().map(|f| (&f.path, &f.pre)).collect();
                // A kept file not stored was gone: its operation left the
                // path as it was, and reversing it leaves it too.
                let states = self.saved.get_mut(saved).expect("checked above");
                states.retain_mut(|e| {
                    if !matches!(e.pre, Pre::Aside { .. }) {
                        return true;
                    }
                    match stored.get(&e.path) {
                        Some(pre) => {
                            e.pre = (*pre).clone();
                            true
                        }
                        None => false,
                    }
                });
            }
            Op::Rewind {
                turn,
                from_seq,
                paths,
                saved,
                kept: left,
                ..
            } => {
                if !self.saved.contains_key(saved) {
                    return Err(Misfit::Record(format!(
                        "names saved record {saved}, which does not precede it"
                    )));
                }
                self.leave_out(*saved, left);
                // A rewind limited to some paths ends no turn: the rest of
                // each turn is still in the folder.
                let (ended, kept) = if paths.is_empty() {
                    let ended: Vec<u64> = self
                        .live_from(*from_seq)?
                        .iter()
                        .map(|t| t.first_seq)
                        .collect();
                    let kept = self
                        .kept_reverted()?
                        .into_iter()
                        .filter(|(seq, _)| *seq >= *from_seq)
                        .collect();
                    (ended, kept)
                } else {
                    (Vec::new(), Vec::new())
                };
                self.end_turns(&ended, Some(rec.seq))?;
                self.ops.insert(
                    rec.seq,
                    OpInfo {
                        turns: ended,
                        turn: turn.clone(),
                        at: rec.at,
                        kept,
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
                paths,
                saved,
                kept,
                failed,
            } => {
                if !self.saved.contains_key(saved) {
                    return Err(Misfit::Record(format!(
                        "names saved record {saved}, which does not precede it"
                    )));
                }
                if !self.turn_at(*turn_seq)?.is_some_and(Turn::is_live) {
                    return Err(Misfit::Record(format!(
                        "reverts turn {turn:?} at {turn_seq}, which is not live"
                    )));
                }
                self.leave_out(*saved, kept);
                // A revert limited to some paths leaves the turn live (the
                // rest of it is still in the folder), so no path of it is
                // left behind by an ended turn.
                let ended = if paths.is_empty() {
                    vec![*turn_seq]
                } else {
                    Vec::new()
                };
                self.end_turns(&ended, Some(rec.seq))?;
                let mut left: Vec<RelPath> = kept
                    .iter()
                    .cloned()
                    .chain(failed.iter().map(|f| f.path.clone()))
                    .collect();
                left.sort();
                left.dedup();
                self.ops.insert(
                    rec.seq,
                    OpInfo {
                        kept: if left.is_empty() || ended.is_empty() {
                            Vec::new()
                        } else {
                            vec![(*turn_seq, left)]
                        },
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
            Op::Undo { op, saved, .. } => self.flip(true, *op, *saved, rec.seq)?,
            Op::Redo { op, saved, .. } => self.flip(false, *op, *saved, rec.seq)?,
            Op::RolledBack { saved, .. } => {
                if *saved != self.last_seq || !self.saved.contains_key(saved) {
                    return Err(Misfit::Record(format!(
                        "rolls back saved record {saved}, which is not the record just before it"
                    )));
                }
            }
        }
        self.last_seq = rec.seq;
        Ok(())
    }
}

/// Sorts a record's blobs by id, one entry per id. An id listed twice is
/// the same bytes stored twice; the entry stored last (the greatest pack
/// name, then offset) stands, whatever the order of the list, so every
/// reading of a record keeps the same one. An unstable sort: a stable one
/// takes scratch room of up to 8 MB for a record of 100,000 blobs.
fn sort_run(run: &mut Vec<(BlobId, BlobLoc)>) {
    run.sort_unstable_by(|(a, x), (b, y)| {
        a.cmp(b)
            .then_with(|| (&y.pack, y.offset).cmp(&(&x.pack, x.offset)))
    });
    run.dedup_by(|later, kept| later.0 == kept.0);
}

/// Applies a `snapshot` record to the blob map (for `Index::apply`).
/// Returns the compressed bytes of the blobs it added.
pub(crate) fn apply_snapshot(
    known: &mut Blobs,
    pack: &str,
    blobs: &[StoredBlob],
) -> std::result::Result<u64, String> {
    if !pack::is_pack_name(pack) {
        return Err(format!("bad pack name {pack:?}"));
    }
    // Each blob once (see `sort_run`).
    let shared: Arc<str> = Arc::from(pack);
    let mut run: Vec<(BlobId, BlobLoc)> = blobs
        .iter()
        .map(|b| {
            let name = b.pack.as_deref().map_or_else(|| shared.clone(), Arc::from);
            (b.id, stored_at(b, name))
        })
        .collect();
    sort_run(&mut run);
    Ok(known.insert_sorted(run))
}

/// The lists of a record moved out of it (see [`Index::apply_owned`]).
#[derive(Default)]
struct Taken {
    files: Option<Vec<FileEntry>>,
    blobs: Option<Vec<StoredBlob>>,
    posts: Option<Vec<PostEntry>>,
}

/// A record's list of blobs: borrowed from a record read from the log, or
/// owned (a saved record just appended, whose list is not needed after).
enum Listed<'a> {
    Read(&'a [StoredBlob]),
    Owned(Vec<StoredBlob>),
}

/// Where the stored blob `b` is, in the pack `pack`.
fn stored_at(b: &StoredBlob, pack: Arc<str>) -> BlobLoc {
    BlobLoc {
        pack,
        offset: b.offset,
        len: b.len,
        size: b.size,
        base: b.base,
    }
}

/// Every turn seen, live or ended, in the order they began: those of the
/// checkpoint the index was opened from, each decoded the first time it is
/// used, then those the log added (all of them without a checkpoint).
#[derive(Debug, Default)]
pub(crate) struct Turns {
    frozen: Option<FrozenTurns>,
    list: Vec<Turn>,
}

impl Turns {
    /// The checkpoint's turns, with none after them yet.
    pub(crate) fn from_frozen(frozen: FrozenTurns) -> Turns {
        Turns {
            frozen: Some(frozen),
            list: Vec::new(),
        }
    }

    fn frozen_len(&self) -> usize {
        self.frozen.as_ref().map_or(0, FrozenTurns::len)
    }

    pub(crate) fn len(&self) -> usize {
        self.frozen_len() + self.list.len()
    }

    /// The `i`th turn (decoded now if it is the checkpoint's). A turn of
    /// the checkpoint that neither it nor the log it covers gives is
    /// [`Error::TurnUnreadable`], as are the answers below that need it.
    pub(crate) fn get(&self, i: usize) -> Result<Option<&Turn>> {
        match &self.frozen {
            Some(f) if i < f.len() => f.get(i).map(Some),
            _ => Ok(self.list.get(i - self.frozen_len())),
        }
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Result<Option<&mut Turn>> {
        let n = self.frozen_len();
        match &mut self.frozen {
            Some(f) if i < n => f.get_mut(i).map(Some),
            _ => Ok(self.list.get_mut(i - n)),
        }
    }

    /// Whether the `i`th turn is live (a checkpoint's turn is not decoded
    /// for it).
    pub(crate) fn is_live(&self, i: usize) -> Result<bool> {
        match &self.frozen {
            Some(f) if i < f.len() => f.is_live(i),
            _ => Ok(self.get(i)?.is_some_and(Turn::is_live)),
        }
    }

    /// The `i`th turn's id: a checkpoint's turn not decoded yet gives it
    /// from the start of its bytes (see [`FrozenTurns::id_of`]).
    pub(crate) fn id_of(&self, i: usize) -> Result<TurnId> {
        match &self.frozen {
            Some(f) if i < f.len() => f.id_of(i),
            _ => Ok(self
                .get(i)?
                .map(|t| t.id.clone())
                .ok_or_else(|| Error::UnknownTurn {
                    turn: format!("turn {} of {}", i + 1, self.len()),
                })?),
        }
    }

    /// Whether the `i`th turn is sealed (a checkpoint's turn is not
    /// decoded for it).
    pub(crate) fn is_sealed(&self, i: usize) -> Result<bool> {
        match &self.frozen {
            Some(f) if i < f.len() => f.is_sealed(i),
            _ => Ok(self.get(i)?.is_some_and(|t| t.sealed)),
        }
    }

    /// When the `i`th turn began (a checkpoint's turn is not decoded for
    /// it).
    pub(crate) fn started_at(&self, i: usize) -> Result<Option<u64>> {
        match &self.frozen {
            Some(f) if i < f.len() => f.started_at(i).map(Some),
            _ => Ok(self.get(i)?.map(|t| t.started_at)),
        }
    }

    /// The `first_seq` of the `i`th turn, without decoding it.
    fn first_seq(&self, i: usize) -> Result<Option<u64>> {
        match &self.frozen {
            Some(f) if i < f.len() => f.first_seq(i).map(Some),
            _ => Ok(self.list.get(i - self.frozen_len()).map(|t| t.first_seq)),
        }
    }

    /// Where the newest turn with this id is (live ones only if `live`):
    /// the turns after the checkpoint's are scanned, the checkpoint's looked
    /// up by the hash of the id; only turns whose id matches are decoded.
    fn find(&self, id: &TurnId, live: bool) -> Result<Option<usize>> {
        let n = self.frozen_len();
        let fits = |t: &Turn| !live || t.is_live();
        if let Some(k) = self.list.iter().rposition(|t| &t.id == id && fits(t)) {
            return Ok(Some(n + k));
        }
        let Some(f) = self.frozen.as_ref() else {
            return Ok(None);
        };
        // A candidate's id hashes as `id` does: the turn sought is named.
        let named = |e: Error| match e {
            Error::TurnUnreadable { reason, .. } => Error::TurnUnreadable {
                turn: format!("turn {:?}", id.as_str()),
                reason,
            },
            e => e,
        };
        for i in f.candidates(id)? {
            if f.id_is(i, id).map_err(named)? && fits(f.get(i)?) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Where the turn whose first record is `first_seq` is (turns are
    /// ordered by it).
    pub(crate) fn by_first_seq(&self, first_seq: u64) -> Result<Option<usize>> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(seq) = self.first_seq(mid)? else {
                return Ok(None);
            };
            match seq.cmp(&first_seq) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Some(mid)),
            }
        }
        Ok(None)
    }

    /// Where the first turn whose first record is `first_seq` or later is
    /// (`len()` if none): a binary search on `first_seq`, decoding nothing.
    pub(crate) fn first_at_or_after(&self, first_seq: u64) -> Result<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.first_seq(mid)?.is_some_and(|s| s < first_seq) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    pub(crate) fn push(&mut self, t: Turn) {
        self.list.push(t);
    }

    /// Gives back the room a turn's lists grew into beyond what they hold:
    /// a record appended to a turn of 94,000 paths doubles its room (some
    /// 14 MB unused), which the rest of a rewind would carry along. Called
    /// once the log's new records are applied; small turns are left alone.
    pub(crate) fn fit(&mut self) {
        let decoded = self.frozen.iter_mut().flat_map(FrozenTurns::decoded_mut);
        for t in decoded.chain(self.list.iter_mut()) {
            t.fit();
        }
    }

    #[cfg(test)]
    pub(crate) fn last_mut(&mut self) -> Result<Option<&mut Turn>> {
        match self.len().checked_sub(1) {
            Some(last) => self.get_mut(last),
            None => Ok(None),
        }
    }

    /// Every turn, oldest first (each decoded as it is reached; see
    /// [`Turns::get`]).
    pub(crate) fn iter(&self) -> TurnsIter<'_> {
        self.iter_from(0)
    }

    /// The turns from the `start`th on, oldest first (each decoded as it is
    /// reached).
    pub(crate) fn iter_from(&self, start: usize) -> TurnsIter<'_> {
        TurnsIter {
            turns: self,
            range: start.min(self.len())..self.len(),
        }
    }

    /// Every turn of an index built from the log alone, which holds no
    /// checkpoint's turns to decode (`None` for one opened from a
    /// checkpoint).
    pub(crate) fn read_from_log(&self) -> Option<&[Turn]> {
        self.frozen.is_none().then_some(&self.list[..])
    }

    /// The checkpoint's turns, if the index was opened from one.
    pub(crate) fn frozen(&self) -> Option<&FrozenTurns> {
        self.frozen.as_ref()
    }
}

impl<'a> IntoIterator for &'a Turns {
    type Item = Result<&'a Turn>;
    type IntoIter = TurnsIter<'a>;

    fn into_iter(self) -> TurnsIter<'a> {
        self.iter()
    }
}

/// The turns of an index, oldest first.
pub(crate) struct TurnsIter<'a> {
    turns: &'a Turns,
    range: std::ops::Range<usize>,
}

impl<'a> Iterator for TurnsIter<'a> {
    type Item = Result<&'a Turn>;

    fn next(&mut self) -> Option<Result<&'a Turn>> {
        self.range
            .next()
            .and_then(|i| self.turns.get(i).transpose())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
}

impl DoubleEndedIterator for TurnsIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.range
            .next_back()
            .and_then(|i| self.turns.get(i).transpose())
    }
}

impl ExactSizeIterator for TurnsIter<'_> {}

/// Where every blob is: those of the checkpoint the index was opened from
/// in its sorted table, searched in place, then those the log added since:
/// a record's blobs each in a map when it stores a few, as one run sorted
/// by id when it stores many (see [`RUN_FROM`]).
#[derive(Debug, Default)]
pub(crate) struct Blobs {
    frozen: Option<BlobTable>,
    /// Blobs not in the table, from records that stored a few.
    added: HashMap<BlobId, BlobLoc>,
    /// Blobs not in the table nor in `added`, from records that stored
    /// many: each run sorted by id, no id in two places.
    runs: Vec<Vec<(BlobId, BlobLoc)>>,
}

/// A record storing at least this many new blobs keeps them as a run
/// sorted by id instead of in the map: growing the map by a rewind's
/// 100,000 saved blobs doubles its table, the old and the new one alive
/// during the move (about 600 bytes a blob at that moment, against the
/// run's 120).
const RUN_FROM: usize = 256;

/// Runs kept apart at most; beyond, they are merged into one.
const MAX_RUNS: usize = 8;

impl Blobs {
    pub(crate) fn from_frozen(table: BlobTable) -> Blobs {
        Blobs {
            frozen: Some(table),
            ..Blobs::default()
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.frozen.as_ref().map_or(0, BlobTable::len)
            + self.added.len()
            + self.runs.iter().map(Vec::len).sum::<usize>()
    }

    fn frozen_loc(&self, id: &BlobId) -> Option<BlobLoc> {
        self.frozen.as_ref()?.find(id)
    }

    /// Where blob `id` is, if the log added it.
    fn added_loc(&self, id: &BlobId) -> Option<&BlobLoc> {
        self.added.get(id).or_else(|| {
            self.runs.iter().find_map(|run| {
                run.binary_search_by(|(k, _)| k.cmp(id))
                    .ok()
                    .map(|i| &run[i].1)
            })
        })
    }

    pub(crate) fn contains_key(&self, id: &BlobId) -> bool {
        self.added_loc(id).is_some() || self.frozen_loc(id).is_some()
    }

    /// Removes from `ids` (sorted, each once) the blobs the store has.
    pub(crate) fn retain_missing(&self, ids: &mut Vec<BlobId>) {
        ids.retain(|id| self.added_loc(id).is_none());
        if let Some(t) = &self.frozen {
            t.retain_missing(ids);
        }
    }

    /// Where blob `id` is stored.
    pub(crate) fn get(&self, id: &BlobId) -> Option<BlobLoc> {
        match self.added_loc(id) {
            Some(loc) => Some(loc.clone()),
            None => self.frozen_loc(id),
        }
    }

    /// The uncompressed size of blob `id`.
    pub(crate) fn size_of(&self, id: &BlobId) -> Option<u64> {
        match self.added_loc(id) {
            Some(loc) => Some(loc.size),
            None => self.frozen_loc(id).map(|loc| loc.size),
        }
    }

    /// The blob `id` is a delta against, if it is known and one.
    pub(crate) fn base_of(&self, id: &BlobId) -> Option<BlobId> {
        match self.added_loc(id) {
            Some(loc) => loc.base,
            None => self.frozen_loc(id).and_then(|loc| loc.base),
        }
    }

    /// Records the blobs of one record, sorted by id with no id twice,
    /// but those known already (the first record of a blob wins). Returns
    /// the compressed bytes of the new ones.
    pub(crate) fn insert_sorted(&mut self, mut run: Vec<(BlobId, BlobLoc)>) -> u64 {
        run.retain(|(id, _)| self.added_loc(id).is_none());
        if let Some(t) = &self.frozen {
            t.retain_unknown(&mut run);
        }
        let bytes = run.iter().map(|(_, loc)| loc.len).sum();
        if run.len() < RUN_FROM {
            self.added.extend(run);
            return bytes;
        }
        self.runs.push(run);
        if self.runs.len() > MAX_RUNS {
            let mut all: Vec<(BlobId, BlobLoc)> =
                Vec::with_capacity(self.runs.iter().map(Vec::len).sum());
            for run in self.runs.drain(..) {
                all.extend(run);
            }
            all.sort_unstable_by_key(|a| a.0);
            self.runs.push(all);
        }
        bytes
    }

    /// Every blob and where it is, the table's in id order first (its rows
    /// read at once).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (BlobId, BlobLoc)> + '_ {
        let frozen = self.frozen.as_ref().map(BlobTable::all).unwrap_or_default();
        frozen
            .into_iter()
            .chain(self.added().map(|(id, loc)| (*id, loc.clone())))
    }

    /// The blobs the log added since the checkpoint.
    pub(crate) fn added(&self) -> impl Iterator<Item = (&BlobId, &BlobLoc)> {
        self.added
            .iter()
            .chain(self.runs.iter().flatten().map(|(id, loc)| (id, loc)))
    }

    /// Lets go of the checkpoint table's rows read so far (a scan looks
    /// up every file it hashed, one by one, and the table's blocks are kept
    /// as they are read: 9 MB for 100,000 blobs).
    pub(crate) fn forget_read(&mut self) {
        if let Some(t) = &mut self.frozen {
            t.forget_read();
        }
    }

    /// The checkpoint's table.
    pub(crate) fn table(&self) -> Option<&BlobTable> {
        self.frozen.as_ref()
    }
}

/// For capture and seal records: the `first_seq` of the turn each applied
/// to. Those of the checkpoint in its sorted table, then those added.
#[derive(Debug, Default)]
pub(crate) struct RecordTurns {
    frozen: Option<SeqTable>,
    added: HashMap<u64, u64>,
}

impl RecordTurns {
    pub(crate) fn from_frozen(table: SeqTable) -> RecordTurns {
        RecordTurns {
            frozen: Some(table),
            added: HashMap::new(),
        }
    }

    pub(crate) fn get(&self, seq: &u64) -> Result<Option<u64>> {
        match (self.added.get(seq), &self.frozen) {
            (Some(t), _) => Ok(Some(*t)),
            (None, Some(table)) => table.get(*seq),
            (None, None) => Ok(None),
        }
    }

    pub(crate) fn insert(&mut self, seq: u64, first_seq: u64) {
        self.added.insert(seq, first_seq);
    }

    /// The checkpoint's table.
    pub(crate) fn table(&self) -> Option<&SeqTable> {
        self.frozen.as_ref()
    }

    /// Every pair, sorted by record.
    pub(crate) fn sorted(&self) -> Result<Vec<(u64, u64)>> {
        let mut all: Vec<(u64, u64)> = self.added.iter().map(|(k, v)| (*k, *v)).collect();
        if let Some(t) = &self.frozen {
            all.extend(t.all()?);
        }
        all.sort_unstable();
        all.dedup_by_key(|p| p.0);
        Ok(all)
    }
}

/// The newest blob recorded for each path, the base for a delta (see
/// `Store::delta_base_loc`): those of the index checkpoint, found in its
/// bytes by binary search (decoding them into a map was half the
/// instructions of a one-file rewind in a 4,686-file project), and those
/// recorded since.
#[derive(Debug, Default)]
pub(crate) struct PathBlobs {
    frozen: Option<FrozenPathBlobs>,
    added: HashMap<RelPath, BlobId>,
}

impl PathBlobs {
    pub(crate) fn from_frozen(frozen: FrozenPathBlobs) -> Self {
        PathBlobs {
            frozen: Some(frozen),
            added: HashMap::new(),
        }
    }

    /// The newest blob recorded for `path`.
    pub(crate) fn get(&self, path: &RelPath) -> Option<BlobId> {
        match self.added.get(path) {
            Some(b) => Some(*b),
            None => self.frozen.as_ref()?.get(path),
        }
    }

    pub(crate) fn insert(&mut self, path: RelPath, blob: BlobId) {
        self.added.insert(path, blob);
    }

    /// Calls `each` with every path (its bytes) and its newest blob, in
    /// path order, and returns how many (writing a checkpoint: no map of
    /// every path is made, 6 MB for 100,000 of them).
    pub(crate) fn each_sorted(&self, mut each: impl FnMut(&[u8], &BlobId)) -> usize {
        let mut added: Vec<(&RelPath, &BlobId)> = self.added.iter().collect();
        added.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut added = added.into_iter().peekable();
        let mut n = 0;
        for (path, blob) in self.frozen.iter().flat_map(FrozenPathBlobs::iter) {
            while let Some((p, b)) = added.next_if(|(p, _)| p.as_bytes() < path) {
                each(p.as_bytes(), b);
                n += 1;
            }
            // A path recorded since: its newer blob comes next.
            if added.peek().is_some_and(|(p, _)| p.as_bytes() == path) {
                continue;
            }
            each(path, &blob);
            n += 1;
        }
        for (p, b) in added {
            each(p.as_bytes(), b);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture inside an application an undo reversed (begun after the
    /// rewound turn) takes the state the outermost such application saved
    /// for its path; not a capture before it, not one of a path it did not
    /// save or left as it was, not inside one begun before the turn.
    #[test]
    fn captures_inside_reversed_applications_take_the_saved_states() {
        let path = |p: &str| RelPath::parse(p).expect("a valid path");
        let state = |p: &str, mode: u32| FileEntry {
            path: path(p),
            pre: Pre::Dir { mode },
        };
        let mut index = Index::default();
        // Applications: [20, 50) saving a, b and c; [30, 40) inside it
        // saving a and d; [5, 15) begun before the turn (first = 10).
        index.saved.insert(
            20,
            vec![state("c", 0o720), state("a", 0o700), state("b", 0o702)],
        );
        index
            .saved
            .insert(30, vec![state("d", 0o730), state("a", 0o731)]);
        index.saved.insert(5, vec![state("e", 0o705)]);
        index.reversed = vec![
            Reversed {
                op: 31,
                saved: 30,
                until: 40,
            },
            Reversed {
                op: 21,
                saved: 20,
                until: 50,
            },
            Reversed {
                op: 6,
                saved: 5,
                until: 15,
            },
        ];
        let (a, b, c, d, e, f) = (
            path("a"),
            path("b"),
            path("c"),
            path("d"),
            path("e"),
            path("f"),
        );
        let absent = Pre::Absent;
        let mut oldest = vec![
            (&a, 35, &absent), // inside both: the outer one's state
            (&b, 12, &absent), // before the applications
            (&c, 25, &absent), // inside the outer one, kept aside (below)
            (&d, 33, &absent), // inside the inner one only
            (&e, 11, &absent), // inside one begun before the turn
            (&f, 45, &absent), // a path no application saved
        ];
        let left_c = |pre: &Pre| matches!(pre, Pre::Dir { mode: 0o720 });
        index.before_reversed(10, &mut oldest, left_c);
        let got: Vec<(u64, String)> = oldest
            .iter()
            .map(|(_, seq, pre)| (*seq, format!("{pre:?}")))
            .collect();
        let dir = |mode: u32| format!("{:?}", Pre::Dir { mode });
        let none = format!("{absent:?}");
        assert_eq!(
            got,
            [
                (20, dir(0o700)),
                (12, none.clone()),
                (25, none.clone()),
                (30, dir(0o730)),
                (11, none.clone()),
                (45, none),
            ]
        );
    }

    #[test]
    fn a_turn_keeps_the_first_capture_of_each_path_found_in_path_order() {
        let entry = |p: &str, size: u64| FileEntry {
            path: RelPath::parse(p).expect("a valid path"),
            pre: Pre::Skipped {
                size,
                reason: String::new(),
            },
        };
        let mut t = Turn {
            id: TurnId::new("t").expect("a valid id"),
            label: None,
            first_seq: 1,
            started_at: 0,
            files: Vec::new(),
            posts: Posts::default(),
            sealed: false,
            ended_by: None,
            by_path: Vec::new(),
        };
        t.add_captures(1, vec![entry("m", 1), entry("c", 1), entry("m", 2)], &[]);
        t.add_captures(2, vec![entry("c", 3)], &[]);
        t.add_captures(3, vec![entry("z", 4), entry("a", 4), entry("m", 4)], &[]);
        let order: Vec<&str> = t.files.iter().map(|c| c.entry.path.as_str()).collect();
        assert_eq!(order, ["m", "c", "z", "a"], "in the order first captured");
        let sizes: Vec<(&str, u64, u64)> = ["a", "c", "m", "z"]
            .iter()
            .map(|p| {
                let c = t
                    .captured(&RelPath::parse(p).expect("valid"))
                    .expect("captured");
                let Pre::Skipped { size, .. } = c.entry.pre else {
                    panic!("as captured")
                };
                (c.entry.path.as_str(), c.seq, size)
            })
            .collect();
        assert_eq!(
            sizes,
            [("a", 3, 4), ("c", 1, 1), ("m", 1, 1), ("z", 3, 4)],
            "the first capture of each path stands"
        );
        assert!(t.captured(&RelPath::parse("b").expect("valid")).is_none());
    }

    fn id(n: u32) -> BlobId {
        let mut b = [0; 32];
        b[..4].copy_from_slice(&n.to_be_bytes());
        BlobId(b)
    }

    fn loc(pack: u64, len: u64) -> BlobLoc {
        BlobLoc {
            pack: crate::pack::pack_name(pack).into(),
            offset: 0,
            len,
            size: len,
            base: None,
        }
    }

    #[test]
    fn records_of_many_blobs_are_runs_and_the_first_record_of_a_blob_wins() {
        let mut blobs = Blobs::default();
        // A small record goes into the map.
        assert_eq!(blobs.insert_sorted(vec![(id(1), loc(1, 10))]), 10);
        // A large one is a run; the blob already known is left out.
        let big: Vec<_> = (0..1000).map(|n| (id(n), loc(2, 1))).collect();
        assert_eq!(blobs.insert_sorted(big), 999);
        assert_eq!(blobs.len(), 1000);
        assert_eq!(blobs.get(&id(1)).map(|l| l.len), Some(10), "first wins");
        assert_eq!(blobs.size_of(&id(999)), Some(1));
        assert!(!blobs.contains_key(&id(1000)));
        // More runs than MAX_RUNS are merged into one, every blob kept.
        for r in 0..MAX_RUNS as u32 {
            let run: Vec<_> = (0..300)
                .map(|n| (id(10_000 + r * 300 + n), loc(3, 2)))
                .collect();
            assert_eq!(blobs.insert_sorted(run), 600);
        }
        assert_eq!(blobs.runs.len(), 1);
        assert_eq!(blobs.len(), 1000 + 300 * MAX_RUNS);
        assert!((0..1000).all(|n| blobs.contains_key(&id(n))));
        assert_eq!(
            blobs.size_of(&id(10_000 + 300 * MAX_RUNS as u32 - 1)),
            Some(2)
        );
        assert_eq!(blobs.added().count(), blobs.len());
    }
}
