//! Retention and garbage collection.
//!
//! gc is planned without the store lock and committed under it
//! ([`Store::gc_plan`], [`Store::gc_commit`]): the plan reads only what the
//! index covers (the log only grows while the store is not locked), decides
//! what to drop and writes the compacted log and its index checkpoint
//! under temporary names; the commit, under the lock, takes in what was
//! appended meanwhile and puts the new log in place. So a capture that
//! arrives during a background gc waits for the commit (a rename and the
//! packs' removal), not for the reading, encoding and writing of the whole
//! log. `turnback gc` holds the lock from plan to commit.
//!
//! 1. Choose what to drop: the oldest live turns beyond `keep_turns`, those
//!    older than `keep_days` (never the newest), then the oldest until the
//!    packs fit in `max_size`; rewinds and reverts older than the oldest
//!    kept turn (they can no longer be undone), with the turns they ended
//!    and the `saved` records only they used. A `saved` record of an
//!    interrupted operation stays as long as the turns around it, and its
//!    `rolled_back` record with it.
//! 2. Compact the log: every kept record is rewritten with its original
//!    sequence number; a kept record that names a blob introduced by a
//!    dropped one now introduces it itself, with that blob's own pack (so no
//!    blob data is copied). The new log is written to a temporary file and
//!    fsynced, with the index checkpoint of it beside it (plan). Under the
//!    lock, the records appended since the plan are carried over, made to
//!    introduce what they name as above, when they are captures and seals
//!    of turns the plan keeps; any other (a rewind, a snapshot, a turn the
//!    plan drops), a new tree state or a replaced log makes the plan stale,
//!    and nothing is changed (the background run plans again, at most
//!    three times, then leaves it to the next). Then the index checkpoint
//!    is removed (it names the old log, see [`crate::checkpoint`]), the new
//!    log renamed over `log.jsonl`, the store directory fsynced, and the
//!    new checkpoint put in place.
//!    A snapshot record (see [`crate::snapshot`]) keeps only the blobs the
//!    tree state names (the current bytes of the covered files, which the
//!    next scan needs as pre-images) and is dropped when it keeps none; a
//!    kept capture that names one of its other blobs introduces it itself,
//!    as above. When the tree state cannot be read, snapshot records are
//!    kept whole.
//! 3. Only then, still under the lock, are packs no kept record refers to
//!    deleted (also packs left by a capture that crashed before its
//!    record), and `packs/` fsynced.
//!
//! 4. Last, the files kept aside (see [`crate::aside`]) for `saved` records
//!    no longer kept are removed, directory by directory.
//!
//! A crash before the rename leaves the old log (and temporary files of a
//! process that is gone, which the next mutation sweeps); after it, at
//! worst unreferenced packs and kept files, which the next gc deletes.
//!
//! Automatic gc (`[gc] auto_every_captures` in `config.toml`), and why it
//! stays off the latency of the call that triggers it:
//! - The decision costs constant time. After every N-th capture record and
//!   after each rewind, revert, undo or redo, the limits are compared with
//!   counters the index keeps as it applies records (live turns, the bytes
//!   of every blob stored, the number of operations) and with the oldest
//!   live turn and the oldest operation in effect (the first entries of
//!   their lists). No file is read and nothing is listed: a capture in a
//!   store within its limits pays nothing for gc.
//! - gc runs only when a limit is exceeded by a margin of a tenth
//!   ([`AUTO_MARGIN`]): more than `keep_turns` + 10% live turns (or
//!   operations), a live turn older than `keep_days` + 10%, or more than
//!   `max_size` + 10% of blobs. That run drops everything beyond the limit
//!   itself, so the next one is due only after another tenth: the log is
//!   rewritten once per `keep_turns / 10` turns, not after every capture.
//!   gc with work to do reads and rewrites the whole log and lists `packs/`
//!   (about a second for a store of 10,000 turns on the benchmark machine,
//!   `docs/BENCHMARKS.md`, safety row 2), so it is amortised this way
//!   instead of being paid a little on every call.
//! - Nor is that one run on the latency path where the caller can run work
//!   later: a store opened with [`Options::defer_gc`](crate::Options::defer_gc)
//!   (as the command line, its hooks and its MCP server open theirs) only
//!   notes that gc came due, and [`Store::maintain`] runs it, deciding
//!   again under the lock (see [`crate::maintain`]); the command line starts
//!   that in a background process once it has answered. Without
//!   `defer_gc`, the call that makes gc due runs it before it returns.
//! - A store between its limit and the margin keeps a tenth more than the
//!   limit until then; `turnback gc` applies the limits exactly at any time.
//!   Unreferenced packs (left by a crash) and snapshot blobs no longer
//!   named are cleaned by any gc run, automatic or not.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Duration;

use serde::Serialize;

use crate::checkpoint;
use crate::config::Config;
use crate::error::{Error, IoResultExt, Result};
use crate::fsx;
use crate::id::BlobId;
use crate::id::now_ns;
use crate::index::{Index, Misfit};
use crate::log::{self, FileEntry, LOG_FILE, Op, Pre, Record, StoredBlob};
use crate::pack;
use crate::store::{PACKS_DIR, Store};
use crate::sys::fs::OFlags;
use crate::tree::{self, Loaded};

/// Automatic gc waits until a limit is exceeded by 1/`AUTO_MARGIN` of it
/// (10%): then one run drops that many turns at once, so the rewrite of
/// the log happens once per that many captures, not on each.
pub(crate) const AUTO_MARGIN: u64 = 10;

/// Limits for one gc run; `None` takes the config file's value.
#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    /// Newest live turns kept (0 counts as 1: the newest is always kept).
    pub keep_turns: Option<usize>,
    /// Live turns older than this many days are dropped (never the newest).
    pub keep_days: Option<u64>,
    /// Oldest turns are dropped until the packs fit in this many bytes.
    pub max_size: Option<u64>,
}

/// What a gc run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GcReport {
    /// Live turns dropped (they can no longer be rewound).
    pub dropped_turns: Vec<String>,
    /// Rewinds and reverts dropped (they can no longer be undone).
    #[serde(rename = "dropped_operation_count")]
    pub dropped_operations: usize,
    /// Live turns kept.
    #[serde(rename = "kept_turn_count")]
    pub kept_turns: usize,
    /// Log records before and after.
    #[serde(rename = "record_count_before")]
    pub records_before: usize,
    /// Log records after.
    #[serde(rename = "record_count_after")]
    pub records_after: usize,
    /// Pack files deleted.
    #[serde(rename = "removed_pack_count")]
    pub packs_removed: usize,
    /// Bytes of packs and log before.
    pub bytes_before: u64,
    /// Bytes of packs and log after.
    pub bytes_after: u64,
    /// Whether this is what a gc would do ([`Store::gc_dry_run`]): nothing
    /// was changed.
    pub dry_run: bool,
}

/// What gc needs to know of a kept record to decide which saved records
/// and rolled_back records stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    Saved,
    /// A rolled_back or packed record: it stays with its saved record.
    OfSaved(u64),
    Other,
}

impl Kept {
    fn of(op: &Op) -> Kept {
        match op {
            Op::Saved { .. } => Kept::Saved,
            Op::RolledBack { saved, .. } | Op::Packed { saved, .. } => Kept::OfSaved(*saved),
            _ => Kept::Other,
        }
    }
}

/// A gc decided and its compacted log written under a temporary name, not
/// yet in place (see [`Store::gc_plan`] and [`Store::gc_commit`]).
pub(crate) struct GcPlan {
    report: GcReport,
    /// The log the plan read, and how much of it.
    log_ident: (u64, u64),
    covered: u64,
    /// The tree state's files as the plan read them.
    tree_look: [Option<(u64, u64, i64)>; 2],
    /// The first records of the turns the plan drops.
    dropped_turns: HashSet<u64>,
    /// `None`: nothing dropped, the log stays as it is.
    rewrite: Option<Rewrite>,
}

impl GcPlan {
    /// Drops a plan that is not committed, with its files.
    pub(crate) fn discard(self, store: &crate::sys::OwnedFd) {
        if let Some(r) = self.rewrite {
            r.discard(store);
        }
    }
}

/// The compacted log under its temporary name, and the index it gives.
struct Rewrite {
    file: std::fs::File,
    temp: String,
    ident: (u64, u64),
    len: u64,
    lines: usize,
    check: Index,
    /// The blobs its records introduce.
    introduced: HashSet<BlobId>,
    checkpoint: Option<checkpoint::Prepared>,
    /// What the checkpoint covers (0: none).
    checkpointed: u64,
}

impl Rewrite {
    /// Appends the records taken in at commit, durably.
    fn append(&mut self, bytes: &[u8], log_path: &std::path::Path) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        self.file
            .seek(SeekFrom::End(0))
            .and_then(|_| self.file.write_all(bytes))
            .and_then(|()| fsx::fdatasync(&self.file))
            .ctx("write", log_path)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn discard(self, store: &crate::sys::OwnedFd) {
        if let Some(c) = self.checkpoint {
            c.discard(store);
        }
        drop(self.file);
        let _ = fsx::unlink(store, &self.temp);
    }
}

impl Store {
    /// Drops turns beyond the limits and deletes what nothing refers to.
    pub fn gc(&mut self, options: &GcOptions) -> Result<GcReport> {
        // No store yet: nothing to collect, and none is made for it.
        if !self.has_store() {
            return Ok(GcReport::default());
        }
        let _guard = self.begin_mutation()?;
        self.gc_locked(options)
    }

    /// What [`Store::gc`] with these options would drop and free, changing
    /// nothing: the plan is made as gc makes it (its compacted log written
    /// under a temporary name, then removed), under the shared lock so
    /// that no mutation changes the store meanwhile, and the packs it would
    /// delete are listed with their sizes. The store's files are left as
    /// they were (nothing is swept, settled or rolled back either).
    pub fn gc_dry_run(&mut self, options: &GcOptions) -> Result<GcReport> {
        if !self.has_store() {
            return Ok(GcReport {
                dry_run: true,
                ..GcReport::default()
            });
        }
        let config = self.config()?;
        let _shared = crate::lock::acquire(
            &self.place.dirs().store,
            &self.place.store_path,
            false,
            self.options().lock_timeout,
        )?;
        let plan = self.gc_plan(options, &config)?;
        let referenced: HashSet<String> = plan
            .rewrite
            .as_ref()
            .map_or(&self.index.blobs, |r| &r.check.blobs)
            .iter()
            .map(|(_, l)| l.pack.to_string())
            .collect();
        let packs = self.pack_sizes();
        let log_before = self.index.consumed;
        let log_after = plan.rewrite.as_ref().map_or(log_before, |r| r.len);
        let mut report = plan.report.clone();
        plan.discard(&self.place.dirs().store);
        let packs = packs?;
        report.bytes_before = packs.values().sum::<u64>() + log_before;
        let mut removed_bytes = 0;
        for (name, size) in &packs {
            if !referenced.contains(name) {
                report.packs_removed += 1;
                removed_bytes += size;
            }
        }
        report.bytes_after = report.bytes_before - log_before - removed_bytes + log_after;
        report.dry_run = true;
        Ok(report)
    }

    /// Runs gc when `config` says it is due (see the module doc: checked
    /// after every N captures and after each rewind, from counters the
    /// index keeps, and run only when a limit is exceeded by its margin).
    /// The caller read `config` before changing anything, so a config file
    /// in error fails the operation before it starts, never after it is
    /// done.
    pub(crate) fn maybe_auto_gc(&mut self, after_rewind: bool, config: &Config) -> Result<()> {
        let n = config.gc.auto_every_captures;
        if n == 0 || (!after_rewind && !self.index.captures.is_multiple_of(n)) {
            return Ok(());
        }
        if !self.gc_due(config, now_ns())? {
            return Ok(());
        }
        if self.options().defer_gc {
            self.gc_deferred = true;
            return Ok(());
        }
        self.gc_with(&GcOptions::default(), config).map(|_| ())
    }

    /// Whether a limit of `config` is exceeded by its margin
    /// ([`AUTO_MARGIN`]), from what the index keeps in memory: the number
    /// of live turns and of operations, the oldest of each, and the bytes
    /// of the blobs. No list walked, no turn decoded or read: the oldest
    /// live turn's start is in its row of the checkpoint.
    pub(crate) fn gc_due(&self, config: &Config, now: u64) -> Result<bool> {
        let r = &config.retention;
        let over = |n: u64, limit: u64| n > limit.saturating_add((limit / AUTO_MARGIN).max(1));
        let keep_ns = u64::try_from(
            Duration::from_secs(r.keep_days.saturating_mul(86_400)).as_nanos()
                * u128::from(AUTO_MARGIN + 1)
                / u128::from(AUTO_MARGIN),
        )
        .unwrap_or(u64::MAX);
        let too_old = |at: u64| now.saturating_sub(at) > keep_ns;
        // The oldest live turn is the first one that is live: turns are
        // kept in the order they began, and the ended ones are few (a
        // rewind's, until gc drops its operation). Its start is read only
        // when it matters, from its row of the checkpoint (not decoded).
        let live = self.index.live_count as u64;
        let oldest_too_old = || -> Result<bool> {
            Ok(live > 1 && self.index.oldest_live_start()?.is_some_and(too_old))
        };
        Ok(over(live, r.keep_turns as u64)
            || oldest_too_old()?
            || over(self.index.ops.len() as u64, r.keep_turns as u64)
            || self.index.done.first().is_some_and(|a| {
                self.index
                    .ops
                    .get(&a.op)
                    .is_some_and(|o| too_old(o.at) && self.index.ops.len() > 1)
            })
            || over(self.index.stored_bytes, r.max_size))
    }

    fn pack_sizes(&self) -> Result<HashMap<String, u64>> {
        let dir = self.place.store_path.join(PACKS_DIR);
        let mut out = HashMap::new();
        for e in std::fs::read_dir(&dir).ctx("list", &dir)? {
            let e = e.ctx("list", &dir)?;
            if let Some(name) = e.file_name().to_str()
                && pack::is_pack_name(name)
            {
                let meta = e.metadata().ctx("look at", e.path())?;
                out.insert(name.to_owned(), meta.len());
            }
        }
        Ok(out)
    }

    fn gc_locked(&mut self, options: &GcOptions) -> Result<GcReport> {
        let config = self.config()?;
        self.gc_with(options, &config)
    }

    /// gc, planned and committed under the lock the caller holds.
    pub(crate) fn gc_with(&mut self, options: &GcOptions, config: &Config) -> Result<GcReport> {
        let plan = self.gc_plan(options, config)?;
        let report = self.gc_commit(plan)?;
        Ok(report.expect("under the lock held throughout, nothing was appended since the plan"))
    }

    /// Decides what gc drops and writes the compacted log under a
    /// temporary name, with the index checkpoint of it, from the index as
    /// it is and the log it covers. Needs no lock: the log only grows
    /// while the store is not locked, and [`Store::gc_commit`] takes in
    /// what was appended meanwhile, or finds the plan stale.
    pub(crate) fn gc_plan(&self, options: &GcOptions, config: &Config) -> Result<GcPlan> {
        // The newest turn (the one just captured) is never dropped, whatever
        // the limit says.
        let keep_turns = options
            .keep_turns
            .unwrap_or(config.retention.keep_turns)
            .max(1);
        let keep_days = options.keep_days.unwrap_or(config.retention.keep_days);
        let max_size = options.max_size.unwrap_or(config.retention.max_size);
        let log_path = self.place.store_path.join(LOG_FILE);
        let log_before = self.index.consumed;
        // Its byte counts are taken at commit, from the one listing of
        // `packs/` made there.
        let mut report = GcReport::default();
        let tree_look = self.tree_look();

        // 1. Which live turns stay.
        let live: Vec<(u64, u64, String)> = self
            .index
            .live()?
            .iter()
            .map(|t| (t.first_seq, t.started_at, t.id.to_string()))
            .collect();
        let mut kept: Vec<u64> = live.iter().map(|t| t.0).collect();
        if kept.len() > keep_turns {
            kept.drain(..kept.len() - keep_turns);
        }
        // Saturating: a keep_days past 584 years ("forever") must not wrap
        // around to minutes.
        let keep_ns = Duration::from_secs(keep_days.saturating_mul(86_400)).as_nanos();
        let cutoff_ns = now_ns().saturating_sub(u64::try_from(keep_ns).unwrap_or(u64::MAX));
        let newest = kept.last().copied();
        kept.retain(|s| Some(*s) == newest || live.iter().any(|t| t.0 == *s && t.1 >= cutoff_ns));
        // Size: referenced compressed bytes per turn, oldest dropped first.
        let turn_bytes = |first: u64| -> Result<u64> {
            Ok(self.index.turn_at(first)?.map_or(0, |t| {
                t.files
                    .iter()
                    .filter_map(|c| match &c.entry.pre {
                        Pre::File { blob, .. } => self.index.blobs.get(blob).map(|l| l.len),
                        _ => None,
                    })
                    .sum()
            }))
        };
        let mut total: u64 = 0;
        for &first in &kept {
            total += turn_bytes(first)?;
        }
        while total > max_size && kept.len() > 1 {
            let first = kept.remove(0);
            total -= turn_bytes(first)?;
        }
        let kept_live: HashSet<u64> = kept.iter().copied().collect();
        report.dropped_turns = live
            .iter()
            .filter(|t| !kept_live.contains(&t.0))
            .map(|t| t.2.clone())
            .collect();
        report.kept_turns = kept_live.len();

        // Operations (rewinds and reverts, which undo can reverse) are kept
        // by the same limits as turns; undone ones always stay (redo pops
        // them newest-undone first), and so does one an undo reversed after
        // a kept live turn began: a rewind of that turn takes the states it
        // saved for what turns captured while it stood (see
        // `Index::before_reversed`).
        let oldest_live = kept.first().copied().unwrap_or(u64::MAX);
        let undone: HashSet<u64> = self
            .index
            .undone
            .iter()
            .map(|a| a.op)
            .chain(
                self.index
                    .reversed
                    .iter()
                    .filter(|r| r.saved >= oldest_live)
                    .map(|r| r.op),
            )
            .collect();
        let mut ops: Vec<(u64, u64)> = self.index.ops.iter().map(|(seq, o)| (*seq, o.at)).collect();
        ops.sort_unstable();
        let newest_op = ops.last().map(|o| o.0);
        let first_kept_op = ops.len().saturating_sub(keep_turns);
        let kept_ops: HashSet<u64> = ops
            .iter()
            .enumerate()
            .filter(|(i, (seq, at))| {
                undone.contains(seq)
                    || (*i >= first_kept_op && (*at >= cutoff_ns || Some(*seq) == newest_op))
            })
            .map(|(_, (seq, _))| *seq)
            .collect();
        let oldest_kept = kept
            .first()
            .copied()
            .into_iter()
            .chain(kept_ops.iter().copied())
            .min()
            .unwrap_or(u64::MAX);
        report.dropped_operations = self.index.ops.len() - kept_ops.len();
        let mut kept_turns: HashSet<u64> = HashSet::new();
        let mut dropped_turns: HashSet<u64> = HashSet::new();
        for t in &self.index.turns {
            let t = t?;
            let kept = match t.ended_by {
                None => kept_live.contains(&t.first_seq),
                Some(op) => kept_ops.contains(&op),
            };
            if kept {
                kept_turns.insert(t.first_seq);
            } else {
                dropped_turns.insert(t.first_seq);
            }
        }

        // 2. The kept records, rewritten. The blobs the tree state names,
        // its file's too where its delta replaced them (None: it cannot be
        // read, so every scan blob stays).
        let tree_blobs: Option<HashSet<BlobId>> =
            match tree::load_layers(&self.place.dirs().store, &self.place.store_path)? {
                (Loaded::Tree(t), layers) => Some(
                    t.entries
                        .iter()
                        .filter_map(|e| match e.kind {
                            tree::Kind::File { blob } => Some(blob),
                            _ => None,
                        })
                        .chain(layers.into_iter().flat_map(|l| l.shadowed))
                        .collect(),
                ),
                (Loaded::Missing, _) => Some(HashSet::new()),
                (Loaded::Damaged(_), _) => None,
            };
        let mut kept_saved: HashSet<u64> = HashSet::new();
        let keep_record = |r: &Record, kept_saved: &mut HashSet<u64>| -> Result<bool> {
            Ok(match &r.op {
                Op::Capture { .. } | Op::Seal { .. } => self
                    .index
                    .record_turn
                    .get(&r.seq)?
                    .is_some_and(|t| kept_turns.contains(&t)),
                Op::Rewind { saved, .. } | Op::Revert { saved, .. } => {
                    let keep = kept_ops.contains(&r.seq);
                    if keep {
                        kept_saved.insert(*saved);
                    }
                    keep
                }
                Op::Undo { op, saved, .. } | Op::Redo { op, saved, .. } => {
                    let keep = kept_ops.contains(op);
                    if keep {
                        kept_saved.insert(*saved);
                    }
                    keep
                }
                Op::Snapshot { blobs, .. } => tree_blobs
                    .as_ref()
                    .is_none_or(|named| blobs.iter().any(|b| named.contains(&b.id))),
                Op::Saved { .. } | Op::RolledBack { .. } | Op::Packed { .. } => true,
            })
        };
        // One record at a time: the log's records are never all in memory
        // at once (at 100,000 paths they took 260 MB).
        let (log_bytes, log_ident) = self.read_log_covered()?;
        let mut total = 0;
        // (seq, what kind of record) of the records kept.
        let mut kept_seqs: Vec<(u64, Kept)> = Vec::new();
        // The blobs kept records other than snapshots name (with the bases
        // of their deltas), and, per snapshot record, the blobs the tree
        // state does not name (`loose`) and whether it names any of them.
        let mut needed: HashSet<BlobId> = HashSet::new();
        let mut snapshots: Vec<(u64, Vec<BlobId>, bool)> = Vec::new();
        for_each_record(&log_bytes, &log_path, |r| {
            total += 1;
            if let (Op::Snapshot { blobs, .. }, Some(named)) = (&r.op, &tree_blobs) {
                let loose: Vec<BlobId> = blobs
                    .iter()
                    .map(|b| b.id)
                    .filter(|id| !named.contains(id))
                    .collect();
                let names_some = loose.len() < blobs.len();
                if !loose.is_empty() {
                    snapshots.push((r.seq, loose, names_some));
                }
                if names_some {
                    kept_seqs.push((r.seq, Kept::Other));
                }
                return Ok(());
            }
            if keep_record(&r, &mut kept_saved)? {
                self.add_needed(&r, &mut needed);
                kept_seqs.push((r.seq, Kept::of(&r.op)));
            }
            Ok(())
        })?;
        // A snapshot blob the tree state no longer names stays when a kept
        // record names it: dropping it from the snapshot record frees
        // nothing (its pack stays for that record), and the record naming
        // it would have to introduce it itself, making the log longer. So
        // a gc that drops no turn leaves such a log as it is. A snapshot
        // record with a blob nobody needs is trimmed (or dropped, when it
        // keeps none), which may free its pack.
        let mut trims = false;
        let mut revived = Vec::new();
        for (seq, loose, names_some) in &snapshots {
            let needs_some = loose.iter().any(|b| needed.contains(b));
            if !names_some && needs_some {
                revived.push(*seq);
            }
            if (*names_some || needs_some) && !loose.iter().all(|b| needed.contains(b)) {
                trims = true;
            }
        }
        if !revived.is_empty() {
            kept_seqs.extend(revived.into_iter().map(|seq| (seq, Kept::Other)));
            kept_seqs.sort_unstable_by_key(|k| k.0);
        }
        let snapshot_keeps: Option<HashSet<BlobId>> = tree_blobs
            .as_ref()
            .map(|named| named.union(&needed).copied().collect());
        drop(needed);
        report.records_before = total;
        // A saved record no kept operation names is one whose operation was
        // interrupted: the bytes it holds may exist nowhere else, so it
        // stays as long as the turns around it.
        kept_seqs.retain(|&(seq, kind)| {
            kind != Kept::Saved || kept_saved.contains(&seq) || seq >= oldest_kept
        });
        // A rolled_back or packed record stays with the saved record it
        // names.
        let saved_left: HashSet<u64> = kept_seqs
            .iter()
            .filter(|k| k.1 == Kept::Saved)
            .map(|k| k.0)
            .collect();
        kept_seqs.retain(|&(_, kind)| match kind {
            Kept::OfSaved(saved) => saved_left.contains(&saved),
            _ => true,
        });
        let unchanged = kept_seqs.len() == total && !trims;

        // Nothing dropped (the usual case after a rewind): the log stays as
        // it is and the index already says which packs it refers to, so the
        // whole log is neither encoded again nor parsed again (at 100,000
        // paths that was most of a rewind's memory).
        let rewrite = if unchanged {
            report.records_after = report.records_before;
            None
        } else {
            let keep: HashSet<u64> = kept_seqs.iter().map(|k| k.0).collect();
            let mut chosen = Vec::with_capacity(keep.len());
            for_each_record(&log_bytes, &log_path, |r| {
                if keep.contains(&r.seq) {
                    chosen.push(r);
                }
                Ok(())
            })?;
            drop(log_bytes);
            Some(self.compact(chosen, snapshot_keeps.as_ref(), &log_path, &mut report)?)
        };
        Ok(GcPlan {
            report,
            log_ident,
            covered: log_before,
            tree_look,
            dropped_turns,
            rewrite,
        })
    }

    /// Puts a [`GcPlan`] in place, under the lock the caller holds, with
    /// the index read up to the end of the log: the records appended since
    /// the plan (captures and seals of turns it keeps) are carried over
    /// into the compacted log, its blobs made to stay. `Ok(None)`, and
    /// nothing changed, when the store changed in a way the plan cannot
    /// take in (another record, the log replaced, a new tree state): the
    /// caller plans again or leaves it to the next run.
    pub(crate) fn gc_commit(&mut self, plan: GcPlan) -> Result<Option<GcReport>> {
        let GcPlan {
            mut report,
            log_ident,
            covered,
            tree_look,
            dropped_turns,
            rewrite,
        } = plan;
        let dirs_store =
            crate::sys::dup(&self.place.dirs().store).ctx("open", &self.place.store_path)?;
        let stale = self.index.ident != Some(log_ident)
            || self.index.consumed < covered
            || self.tree_look() != tree_look;
        if stale {
            if let Some(r) = rewrite {
                r.discard(&dirs_store);
            }
            return Ok(None);
        }
        let log_path = self.place.store_path.join(LOG_FILE);
        let mut adopted = None;
        if let Some(mut r) = rewrite {
            if self.index.consumed > covered {
                let tail = self.read_log_range(covered, self.index.consumed)?;
                let mut appended = Vec::new();
                let mut fits = true;
                for_each_record(&tail, &log_path, |mut rec| {
                    let keeps = matches!(rec.op, Op::Capture { .. } | Op::Seal { .. })
                        && self
                            .index
                            .record_turn
                            .get(&rec.seq)?
                            .is_some_and(|t| !dropped_turns.contains(&t));
                    if !fits || !keeps {
                        fits = false;
                        return Ok(());
                    }
                    self.relink_blobs(&mut rec, &mut r.introduced)?;
                    r.check.apply(&rec).map_err(|reason| Error::LogDamaged {
                        path: log_path.join("(compacted)"),
                        line: r.lines + 1,
                        reason: reason.to_string(),
                    })?;
                    r.lines += 1;
                    appended.extend_from_slice(&log::encode(&rec));
                    Ok(())
                })?;
                if !fits {
                    r.discard(&dirs_store);
                    return Ok(None);
                }
                r.append(&appended, &log_path)?;
            }
            report.records_after = r.lines;
            // The index checkpoint names the old log; once the new one is
            // in place its inode number may be reused by a later log, so
            // the checkpoint goes first (see [`crate::checkpoint`]), and
            // the new log's comes last.
            checkpoint::remove(&dirs_store)
                .ctx("remove", self.place.store_path.join(checkpoint::INDEX_FILE))?;
            fsx::rename(&dirs_store, &r.temp, LOG_FILE).ctx("replace", &log_path)?;
            fsx::fsync(&dirs_store).ctx("fsync", &self.place.store_path)?;
            if let Some(c) = r.checkpoint.take() {
                c.install(&dirs_store);
            }
            adopted = Some(r);
        }

        // 3. Packs nothing refers to, listed now: a pack is written and
        // named by its record under the lock.
        let referenced: HashSet<String> = adopted
            .as_ref()
            .map_or(&self.index.blobs, |r| &r.check.blobs)
            .iter()
            .map(|(_, l)| l.pack.to_string())
            .collect();
        let packs_before = self.pack_sizes()?;
        let log_before = self.index.consumed;
        report.bytes_before = packs_before.values().sum::<u64>() + log_before;
        let dirs = self.place.dirs();
        let packs_path = self.place.store_path.join(PACKS_DIR);
        let mut removed_bytes = 0;
        for (name, size) in &packs_before {
            if !referenced.contains(name) {
                fsx::unlink(&dirs.packs, name).ctx("remove", packs_path.join(name))?;
                report.packs_removed += 1;
                removed_bytes += size;
            }
        }
        if report.packs_removed > 0 {
            fsx::fsync(&dirs.packs).ctx("fsync", &packs_path)?;
        }
        if let Some(r) = adopted {
            // The index of the compacted log: built as it was checked.
            let mut index = r.check;
            index.turns.fit();
            index.ident = Some(r.ident);
            index.consumed = r.len;
            index.lines = r.lines;
            index.checkpointed = r.checkpointed;
            self.index = index;
        }
        // 4. Files kept aside for `saved` records no longer kept (see
        // `aside.rs`).
        let saved = &self.index.saved;
        crate::aside::remove_unwanted(&self.place.dirs().store, |seq| {
            saved
                .get(&seq)
                .is_some_and(|files| files.iter().any(|f| matches!(f.pre, Pre::Aside { .. })))
        });
        let log_after = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        report.bytes_after = report.bytes_before - log_before - removed_bytes + log_after;
        Ok(Some(report))
    }

    /// The look of the tree state's file and its delta (see
    /// [`crate::tree`]): a scan that wrote a new one names other blobs
    /// than a plan read.
    fn tree_look(&self) -> [Option<(u64, u64, i64)>; 2] {
        [tree::TREE_FILE, tree::DELTA_FILE].map(|name| {
            let st = fsx::lstat_at(&self.place.dirs().store, name).ok()??;
            Some((st.st_ino, st.st_size as u64, crate::sys::mtime_ns(&st)))
        })
    }

    /// Writes the log of the `chosen` records (blobs the tree state no
    /// longer names dropped from snapshot records, every blob introduced
    /// by the first record that needs it) under a temporary name, after
    /// checking that it parses into an index, with that index's
    /// checkpoint beside it.
    fn compact(
        &self,
        chosen: Vec<Record>,
        tree_blobs: Option<&HashSet<BlobId>>,
        log_path: &std::path::Path,
        report: &mut GcReport,
    ) -> Result<Rewrite> {
        let mut introduced: HashSet<BlobId> = HashSet::new();
        let mut out = Vec::new();
        for mut rec in chosen {
            if let (Op::Snapshot { blobs, .. }, Some(named)) = (&mut rec.op, tree_blobs) {
                blobs.retain(|b| named.contains(&b.id));
                introduced.extend(blobs.iter().map(|b| b.id));
            }
            self.relink_blobs(&mut rec, &mut introduced)?;
            out.extend_from_slice(&log::encode(&rec));
        }
        // Check the new log before it replaces the old one.
        let mut check = Index::default();
        let parsed = log::parse(&out, 1);
        for (line, r) in &parsed.lines {
            let r = r
                .as_ref()
                .map_err(|reason| Misfit::Record(reason.clone()))
                .and_then(|r| check.apply(r));
            if let Err(reason) = r {
                return Err(Error::LogDamaged {
                    path: log_path.join("(compacted)"),
                    line: *line,
                    reason: reason.to_string(),
                });
            }
        }
        report.records_after = parsed.lines.len();
        let lines = parsed.lines.len();
        drop(parsed);
        let store = &self.place.dirs().store;
        let (mut file, temp) = fsx::create_temp(store, LOG_FILE, 0o644)
            .ctx("create a temporary file beside", log_path)?;
        let written = file
            .write_all(&out)
            .and_then(|()| fsx::fdatasync(&file))
            .and_then(|()| crate::sys::fs::fstat(&file).map_err(std::io::Error::from));
        let st = match written {
            Ok(st) => st,
            Err(e) => {
                let _ = fsx::unlink(store, &temp);
                return Err(e).ctx("write", log_path);
            }
        };
        let ident = (crate::sys::dev(&st), st.st_ino);
        let len = out.len() as u64;
        check.ident = Some(ident);
        check.consumed = len;
        check.lines = lines;
        // As an open that read this much would (see `Store::refresh`).
        let checkpoint = (len >= checkpoint::WRITE_AFTER)
            .then(|| checkpoint::prepare(store, &check, &file, ident))
            .flatten();
        Ok(Rewrite {
            checkpointed: if checkpoint.is_some() { len } else { 0 },
            file,
            temp,
            ident,
            len,
            lines,
            check,
            introduced,
            checkpoint,
        })
    }

    /// The log's bytes the index covers, with the log's identity.
    fn read_log_covered(&self) -> Result<(Vec<u8>, (u64, u64))> {
        let path = self.place.store_path.join(LOG_FILE);
        let f = self.open_log(OFlags::RDONLY)?;
        let st = crate::sys::fs::fstat(&f).ctx("stat", &path)?;
        let ident = (crate::sys::dev(&st), st.st_ino);
        if self.index.ident.is_some_and(|i| i != ident) {
            return Err(Error::Io {
                op: "read",
                path,
                source: std::io::Error::other("the log was replaced while gc read it"),
            });
        }
        let bytes = self.read_log_range_of(&f, 0, self.index.consumed)?;
        Ok((bytes, ident))
    }

    /// Bytes `from..to` of the log.
    fn read_log_range(&self, from: u64, to: u64) -> Result<Vec<u8>> {
        let f = self.open_log(OFlags::RDONLY)?;
        self.read_log_range_of(&f, from, to)
    }

    fn read_log_range_of(&self, f: &std::fs::File, from: u64, to: u64) -> Result<Vec<u8>> {
        let path = self.place.store_path.join(LOG_FILE);
        let n = usize::try_from(to.saturating_sub(from)).map_err(|_| Error::Io {
            op: "read",
            path: path.clone(),
            source: std::io::Error::from(std::io::ErrorKind::OutOfMemory),
        })?;
        let mut bytes = vec![0; n];
        crate::sys::read_exact_at(f, &mut bytes, from).ctx("read", &path)?;
        Ok(bytes)
    }

    /// Adds to `needed` the blobs `rec` names as pre-images, with the
    /// bases of their deltas (as [`Store::relink_blobs`] would introduce
    /// them).
    fn add_needed(&self, rec: &Record, needed: &mut HashSet<BlobId>) {
        let files = match &rec.op {
            Op::Capture { files, .. } | Op::Saved { files, .. } | Op::Packed { files, .. } => files,
            _ => return,
        };
        for f in files {
            let Pre::File { blob, .. } = &f.pre else {
                continue;
            };
            let mut cur = Some(*blob);
            let mut depth = 0;
            while let Some(id) = cur {
                if !needed.insert(id) || depth > pack::MAX_DELTA_DEPTH {
                    break;
                }
                depth += 1;
                cur = self.index.blobs.get(&id).and_then(|l| l.base);
            }
        }
    }

    /// Makes `rec` introduce every blob it names that no earlier kept
    /// record introduced, each at its current location.
    fn relink_blobs(&self, rec: &mut Record, introduced: &mut HashSet<BlobId>) -> Result<()> {
        let (pack, blobs, files): (&mut Option<String>, &mut Vec<StoredBlob>, &[FileEntry]) =
            match &mut rec.op {
                Op::Capture {
                    pack, blobs, files, ..
                }
                | Op::Saved { pack, blobs, files }
                | Op::Packed {
                    pack, blobs, files, ..
                } => (pack, blobs, files),
                _ => return Ok(()),
            };
        let mut new_blobs = Vec::new();
        for f in files {
            let Pre::File { blob, .. } = &f.pre else {
                continue;
            };
            // A delta's bases are introduced before it, oldest first.
            let mut chain = Vec::new();
            let mut cur = Some(*blob);
            while let Some(id) = cur {
                if introduced.contains(&id) || chain.len() > pack::MAX_DELTA_DEPTH {
                    break;
                }
                let loc = self
                    .index
                    .blobs
                    .get(&id)
                    .ok_or_else(|| Error::BlobDamaged {
                        id: id.to_hex(),
                        reason: "no record stores it".into(),
                    })?;
                chain.push((id, loc.clone()));
                cur = loc.base;
            }
            for (id, loc) in chain.into_iter().rev() {
                introduced.insert(id);
                new_blobs.push(StoredBlob {
                    id,
                    pack: Some(loc.pack.to_string()),
                    offset: loc.offset,
                    len: loc.len,
                    size: loc.size,
                    base: loc.base,
                });
            }
        }
        *pack = None;
        *blobs = new_blobs;
        Ok(())
    }
}

/// Decodes each complete line of the log `bytes` (already validated by the
/// index) and hands its record to `each`, one at a time; a torn final line
/// is left out, as [`log::parse`] does.
fn for_each_record(
    bytes: &[u8],
    path: &std::path::Path,
    mut each: impl FnMut(Record) -> Result<()>,
) -> Result<()> {
    let mut start = 0;
    let mut line = 0;
    while let Some(n) = bytes[start..].iter().position(|&b| b == b'\n') {
        line += 1;
        let rec = log::decode(&bytes[start..start + n]).map_err(|reason| Error::LogDamaged {
            path: path.to_path_buf(),
            line,
            reason,
        })?;
        each(rec)?;
        start += n + 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::TurnId;
    use crate::rewind::RewindOptions;
    use crate::test_project::Beside;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn t(id: &str) -> TurnId {
        TurnId::new(id).expect("a valid turn id")
    }

    fn keep(n: usize) -> GcOptions {
        GcOptions {
            keep_turns: Some(n),
            ..GcOptions::default()
        }
    }

    /// Names in the store directory made by `fsx::temp_name`.
    fn temps(store: &Store) -> Vec<String> {
        std::fs::read_dir(&store.place.store_path)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.contains(fsx::TEMP_MARK))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Three turns, the first of which a gc keeping two drops; its
    /// pre-image of `a.txt` ("a0") is a blob only its record introduces.
    fn three_turns(p: &Beside) -> Result<Store> {
        let mut store = p.open()?;
        store.write(&t("t1"), None, "a.txt", b"a1\n")?;
        store.write(&t("t2"), None, "b.txt", b"b1\n")?;
        store.write(&t("t3"), None, "a.txt", b"a2\n")?;
        Ok(store)
    }

    #[test]
    fn captures_made_while_a_gc_was_planned_are_carried_into_its_log() -> TestResult {
        let p = Beside::new(&[("a.txt", "a0\n"), ("b.txt", "b0\n"), ("d.txt", "a0\n")])?;
        let mut store = three_turns(&p)?;
        let plan = store.gc_plan(&keep(2), &store.config()?)?;
        // Another process captures meanwhile: into a turn the plan keeps,
        // and a new turn whose pre-image is the blob only the dropped
        // turn's record introduced.
        let mut other = p.open()?;
        other.write(&t("t3"), None, "b.txt", b"b3\n")?;
        other.write(&t("t4"), None, "d.txt", b"d4\n")?;
        drop(other);
        let report = {
            let _guard = store.begin_mutation()?;
            store.gc_commit(plan)?.ok_or("the plan takes captures in")?
        };
        assert_eq!(report.dropped_turns, ["t1"]);
        assert!(temps(&store).is_empty(), "{:?}", temps(&store));
        for mut s in [p.open()?, store] {
            let live: Vec<String> = s.turns()?.iter().map(|t| t.id.to_string()).collect();
            assert_eq!(live, ["t2", "t3", "t4"]);
            let v = s.verify()?;
            assert!(v.whole, "{v:?}");
            let r = s.rewind(&t("t4"), &RewindOptions::default())?;
            assert!(r.complete(), "{:?}", r.failed);
            assert_eq!(std::fs::read(p.root.join("d.txt"))?, b"a0\n");
            let r = s.rewind(&t("t2"), &RewindOptions::default())?;
            assert!(r.complete(), "{:?}", r.failed);
            assert_eq!(std::fs::read(p.root.join("b.txt"))?, b"b0\n");
            assert_eq!(std::fs::read(p.root.join("a.txt"))?, b"a1\n");
            // Once with the store that committed, once reopened.
            s.undo()?;
            s.undo()?;
        }
        Ok(())
    }

    #[test]
    fn a_plan_that_a_rewind_made_stale_changes_nothing() -> TestResult {
        let p = Beside::new(&[("a.txt", "a0\n"), ("b.txt", "b0\n")])?;
        let mut store = three_turns(&p)?;
        let plan = store.gc_plan(&keep(2), &store.config()?)?;
        let mut other = p.open()?;
        other.rewind(&t("t3"), &RewindOptions::default())?;
        drop(other);
        let log = store.place.store_path.join(LOG_FILE);
        let before = std::fs::read(&log)?;
        {
            let _guard = store.begin_mutation()?;
            assert!(store.gc_commit(plan)?.is_none());
        }
        assert_eq!(std::fs::read(&log)?, before);
        assert!(temps(&store).is_empty(), "{:?}", temps(&store));
        let live: Vec<String> = store.turns()?.iter().map(|t| t.id.to_string()).collect();
        assert_eq!(live, ["t1", "t2"]);
        // Planned again, it goes through.
        let report = store.gc(&keep(1))?;
        assert_eq!(report.dropped_turns, ["t1"]);
        assert!(p.open()?.verify()?.whole);
        Ok(())
    }
}
