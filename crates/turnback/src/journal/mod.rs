//! The journal: how every operation that changes the store or the project
//! marks what it is about to do, and how the next operation settles one
//! that was interrupted (killed, out of power, failed) before it does
//! anything itself.
//!
//! The log (`log.jsonl`, see [`crate::log`]) is the journal: an operation
//! is done when its record is durable in it, and not before. What an
//! operation leaves before its record is found and settled under the
//! exclusive store lock by [`Store::settle_unfinished`], which
//! [`Store::begin_mutation`] runs before every mutation of any kind. So
//! after any kill the folder is as the log tells it: before the operation
//! or after it, never a mix, and no temporary file or directory stays.
//!
//! | operation | what it leaves before its record | settled by |
//! |---|---|---|
//! | `capture`, `write` | a temporary pack (`.pack-*`), or a pack no record names; a torn final log line | the pack swept here; the line cut here; a pack no record names is gc's |
//! | `write` (the file itself) | its capture record durable, the file not yet replaced: the turn holds the file's current bytes, which a rewind writes back unchanged | nothing to settle |
//! | `rewind`, `revert`, `undo`, `redo` | a `saved` record as the log's last, with part of the changes made, staged temporary files and directories | rolled back ([`rollback`](self::rollback)) |
//! | the same, before its `saved` record | files kept aside for it in `aside/` (see [`crate::aside`]) | removed here |
//! | the same, after its record | names in the trash (see [`crate::trash`]) | emptied here, or by the background after the answer |
//! | `exec`, `snapshot`, a hook's before half | an open command window (`<store>/windows`, see [`crate::exec_window`]) | closed into its turn by the next snapshot half, the next event of its session, or the next rewind, revert, undo or redo ([`Store::close_windows`]) |
//! | gc, maintenance, config | a temporary log, checkpoint or config file in the store | swept here (stale under the exclusive lock) |
//! | the background storing of kept files | a pack being filled, with a lock of its own | left while its lock is held, swept once it is not |
//!
//! Each of these is a test: the crash sweeps of `tests/reliability.rs`
//! (a kill at each sampled system call of each operation) and the model
//! tests `model_cli.rs` and `hook_model.rs` (random sequences of verbs,
//! with kills, against a reference model; see docs/RELIABILITY.md).

use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::log::LOG_FILE;
use crate::store::Store;
use crate::sys::fs::OFlags;

mod rollback;

impl Store {
    /// Settles, under the exclusive lock and in this order, what earlier
    /// operations left unfinished (see the module doc): temporary packs,
    /// the trash, temporary store files, a torn final log line, files kept
    /// aside for an operation that never recorded, and an operation
    /// interrupted after its `saved` record (rolled back).
    pub(crate) fn settle_unfinished(&mut self) -> Result<()> {
        self.sweep_temp_packs()?;
        // Names a rewind left in the trash (its background removal not
        // done, or a crash between a link and its rename) go before the
        // project is read: no capture sees them as hard links.
        if self.trash_pending() {
            self.empty_trash();
        }
        // A temporary file in the store (a config or compacted log being
        // written when a process died) is stale under the exclusive lock.
        fsx::sweep_stale_temps(&self.place.dirs().store);
        if let Some(torn_at) = self.refresh()? {
            let path = self.place.store_path.join(LOG_FILE);
            let f = self.open_log(OFlags::WRONLY)?;
            f.set_len(torn_at)
                .ctx("cut the torn final line of", &path)?;
            fsx::fdatasync(&f).ctx("fsync", &path)?;
        }
        // Files kept aside by an operation that crashed before its `saved`
        // record: no record names them, and their project files would look
        // like hard links (see `aside.rs`).
        crate::aside::remove_unrecorded(&self.place.dirs().store, self.index.last_seq + 1);
        // An operation interrupted before its record is rolled back before
        // anything else changes the project (see `rollback.rs`). It walks
        // with handles of its own: a rollback removes the directories the
        // interrupted operation made, and a handle it held would outlive
        // its directory into the operation that follows, which may make
        // that directory again (and would then stage into the one removed);
        // the operation's own walks start afresh after it.
        let outer = self.place.take_held_dirs();
        let settled = self.holding_dirs(Store::roll_back_interrupted);
        self.place
            .set_held_dirs(outer.map(|_| crate::dirstack::Held::new()));
        settled
    }

    /// Removes the temporary packs a crashed process left in the store
    /// directory (called under the exclusive lock). A pack being filled
    /// without the store lock (the background storing of kept files) holds
    /// a lock of its own and is left ([`PackWriter::hold`]); any other is
    /// stale: every other pack is filled under the store lock.
    fn sweep_temp_packs(&self) -> Result<()> {
        let entries =
            std::fs::read_dir(&self.place.store_path).ctx("list", &self.place.store_path)?;
        for e in entries {
            let e = e.ctx("list", &self.place.store_path)?;
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !name.starts_with(".pack") || !name.contains(fsx::TEMP_MARK) {
                continue;
            }
            let in_use =
                match fsx::open_store_file(&self.place.dirs().store, &name, OFlags::RDONLY, None) {
                    Ok(Some(f)) => matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
                    _ => false,
                };
            if !in_use {
                fsx::unlink(&self.place.dirs().store, &name)
                    .ctx("remove stale temporary", self.place.store_path.join(&name))?;
            }
        }
        Ok(())
    }
}
