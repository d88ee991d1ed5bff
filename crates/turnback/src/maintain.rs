//! Maintenance after the answer: the work a mutation leaves for once its
//! caller has been answered, so that no agent's tool call and no user's
//! rewind waits for it.
//!
//! Four kinds of work are left:
//! - the names a rewind, revert, undo or redo put in the trash (see
//!   [`crate::trash`]);
//! - the files such an operation kept aside in the store instead of
//!   reading them (see [`crate::aside`]), read and stored as blobs;
//! - an automatic gc that came due (see [`crate::gc`]), when the store was
//!   opened with [`Options::defer_gc`](crate::Options::defer_gc). Without
//!   it, the call that makes gc due runs it before it returns, as a caller
//!   that cannot run work later needs;
//! - the index checkpoint of the log this process read or appended, once
//!   it is [`crate::checkpoint::WRITE_AFTER_DEFERRED`] past the one on
//!   disk, when the store was opened with
//!   [`Options::defer_checkpoint`](crate::Options::defer_checkpoint).
//!   Without it, the checkpoint is written when the store is dropped, at
//!   [`crate::checkpoint::WRITE_AFTER`] (before the process ends, so its
//!   caller waits for it: some 6 ms at 100,000 files, in every other after
//!   half of a command that changed 100 of them).
//!
//! [`Store::maintenance_due`] says whether there is any; [`Store::maintain`]
//! does it. The command line starts `turnback maintain` in the background
//! once a command has answered (its standard streams not the caller's), and
//! the MCP server does so after each tool call.
//!
//! Invariants:
//! - Whether gc is due is decided again under the lock, from the index the
//!   maintaining process reads (the same counters as [`crate::gc`]'s
//!   automatic check, so not the flag of the process that deferred it):
//!   two maintainers started one after the other run gc at most once, and
//!   one started after a `turnback gc` finds nothing to do. It is decided
//!   once more when the plan, made without the lock, is committed under it.
//! - Maintenance is crash-safe at any point: the trash's entries are only
//!   second names, kept files are removed only once their `packed` record
//!   is durable, and gc is (see [`crate::gc`]). A maintainer killed
//!   half-way leaves work the next one (or the next mutation, for the
//!   trash) finds again.

use crate::error::Result;
use crate::gc::GcReport;
use crate::store::Store;

/// Plans of an automatic gc made before one is left to the next run,
/// when records keep being appended that a plan cannot take in.
const GC_TRIES: usize = 3;

/// What one [`Store::maintain`] call did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MaintainReport {
    /// Names removed from the trash.
    pub trash_removed: usize,
    /// Files kept aside that were stored as blobs.
    pub kept_stored: usize,
    /// The automatic gc run, when one was due.
    pub gc: Option<GcReport>,
}

impl Store {
    /// Whether this store has work left for after the answer: names in the
    /// trash, files kept aside to store, an automatic gc it deferred, or a
    /// checkpoint it left behind (see the module doc).
    pub fn maintenance_due(&self) -> bool {
        self.gc_deferred
            || self.trash_pending()
            || self.kept_pending()
            || (self.options().defer_checkpoint
                && self.checkpoint_behind(crate::checkpoint::WRITE_AFTER_DEFERRED))
    }

    /// Does the work left for after the answer: empties the trash, stores
    /// the files kept aside, then runs the automatic gc if a limit is
    /// exceeded by its margin (decided again under the lock; see the module
    /// doc), and writes the index checkpoint if it is behind. Waits for the
    /// lock as any mutation does.
    pub fn maintain(&mut self) -> Result<MaintainReport> {
        let trash_removed = self.empty_trash();
        // Takes the lock only to append each record (see `aside.rs`).
        let kept_stored = if self.kept_pending() {
            self.pack_kept()?
        } else {
            0
        };
        let gc = self.gc_if_due()?;
        self.gc_deferred = false;
        self.checkpoint_if_behind(crate::checkpoint::WRITE_AFTER_DEFERRED);
        Ok(MaintainReport {
            trash_removed,
            kept_stored,
            gc,
        })
    }

    /// Runs the automatic gc when the store's config has it on and a limit
    /// is exceeded by its margin, decided under the lock; the work itself is
    /// done without it (see [`Store::gc_plan`]).
    fn gc_if_due(&mut self) -> Result<Option<GcReport>> {
        // No store yet: nothing to collect, and none is made for it.
        if !self.has_store() {
            return Ok(None);
        }
        let config = self.config()?;
        if config.gc.auto_every_captures == 0 {
            return Ok(None);
        }
        // Decided under the lock, from the log as it is now.
        {
            let _guard = self.begin_mutation()?;
            if !self.gc_due(&config, crate::id::now_ns())? {
                return Ok(None);
            }
        }
        // Planned and written without the lock, which is taken again only
        // to put the new log in place: a capture that comes meanwhile
        // waits for that, not for the whole gc. A plan that the records
        // appended meanwhile make stale is made again; one still stale
        // after that is left to the next maintenance.
        let options = crate::gc::GcOptions::default();
        for _ in 0..GC_TRIES {
            let plan = self.gc_plan(&options, &config)?;
            let _guard = self.begin_mutation()?;
            if !self.gc_due(&config, crate::id::now_ns())? {
                plan.discard(&self.place.dirs().store);
                return Ok(None);
            }
            if let Some(report) = self.gc_commit(plan)? {
                return Ok(Some(report));
            }
        }
        // The next capture that finds gc due starts it again.
        Ok(None)
    }
}
