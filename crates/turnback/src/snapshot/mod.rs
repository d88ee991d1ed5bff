//! Tree snapshots: covering what shell commands change.
//!
//! A snapshot walks the project in parallel, keeps what it saw in the tree
//! state (see [`crate::tree`]) and makes sure the current bytes of every
//! covered file are in the store. The first snapshot stores every covered
//! file (compressed, deduplicated); later ones hash only the files whose
//! stat (size, mtime, ctime, inode, mode) differs from the tree state or
//! that were racily clean, and store only what is new.
//!
//! Two halves make one command's turn:
//! - the *before* half ([`Store::snapshot`] with `after = false`) stores the
//!   files and writes the tree marked *pending* for turn T;
//! - the *after* half (`after = true`) scans again, compares with the tree
//!   and appends to turn T one `capture` record holding the pre-image of
//!   every path that changed: a created file, directory or special file is
//!   recorded as absent, a modified or deleted one with its bytes and mode
//!   from the tree, a renamed one as both (the old path gets its bytes
//!   back, the new one is absent). A directory removed (empty or not),
//!   replaced or given another mode is recorded with its mode, a FIFO with
//!   its mode; a socket or device is not restorable (see
//!   [`crate::entry_pre`]). The first capture of a path in a turn wins, so a path
//!   the turn already captured through a file tool keeps its earlier
//!   pre-image. `Store::rewind` then undoes the command like any turn.
//!
//! Several commands may run at once: each before half opens a window
//! ([`crate::exec_window`]) and each after half closes its own; which turns
//! a change is recorded in, when windows overlap or a command was killed,
//! is decided by [`attribution`]. The tree's pending mark
//! says whether any window is open.
//!
//! Record order, each step durable before the next: the pack of new blobs,
//! the `snapshot` record naming them, the turn's `capture` record, the tree
//! state.
//!
//! Coverage: the whole root except the root's own `.git/` and `.turnback/`
//! (a nested repository's `.git/` is covered), git-ignored files included,
//! names that are not UTF-8 included. Left out: files over the size cap;
//! directories named in [`DEFAULT_EXCLUDES`] only when they are generated
//! (see [`crate::generated`]: a tool's name, a cache marker, or the
//! project's `.gitignore`); and what `.turnbackignore` files (gitignore
//! syntax, see [`crate::exclude`]) say, which always wins. What is left
//! out is kept in the tree as *excluded*: [`Store::status`] lists it, and a
//! change to it (an excluded directory's stat is folded over its whole
//! subtree, see [`crate::subtree_stat`], so an edit deep inside counts; an
//! oversized file) is recorded in the turn as not captured, which a rewind
//! reports as not restored (exit 3), never as "nothing changed".
//!
//! With Watchman (see [`crate::fsmonitor`]) the walk looks only at the
//! paths Watchman says changed since the clock stored with the tree
//! (`walk::walk_changed`), and the rest of the tree is taken as it is; a
//! half that Watchman says changed nothing does not even read the tree's
//! entries (only its header), since nothing is diffed; one that looks at
//! a few paths reads the tree's entries at and around them only (see
//! [`crate::tree`]'s partial reads) and writes the tree as a delta of
//! those. Anything Watchman
//! cannot vouch for is a full walk, and every rule above (exclusions,
//! not captured, the folded stat of excluded directories) applies the same
//! way to both.
//!
//! The rooms: [`walk`] finds every path with its stat, [`scan`] merges it
//! with the tree state and [`read`] reads and stores what the stat cannot
//! vouch for, [`diff`] compares two scans, [`attribution`] decides the
//! turns, this module records them and [`status`] only compares.

use serde::Serialize;
use std::path::PathBuf;

use crate::config::FsMonitor;
use crate::error::{Error, IoResultExt, Result};
pub use crate::exclude::{DEFAULT_EXCLUDES, IGNORE_FILE};
use crate::exec_window::{self, TreeMark, Window};
pub use crate::fsmonitor::ChangeSource;
use crate::fsmonitor::{self, Unheld, Used};
use crate::id::{BlobId, TurnId, cut_label};
use crate::log::{FileEntry, Op, PostEntry};
use crate::pack;
use crate::path::RelPath;
use crate::store::Store;
use crate::tree::{self, Entry, Loaded, Tree, TreeWriter};
use attribution::{Closing, Half};
use diff::{Look, diff, diff_within, post_of};
use new_tree::{New, NewTree, Patched};
use scan::{Reading, Scan};

pub(crate) mod attribution;
mod diff;
mod new_tree;
mod read;
mod scan;
mod status;
mod walk;

/// Who takes a half and how (see [`attribution::Half`]).
struct HalfOf<'a> {
    after: bool,
    closing: Option<Closing>,
    keep_open: bool,
    pid: Option<u32>,
    session: Option<&'a str>,
}

impl HalfOf<'_> {
    /// A half of `turnback snapshot`: no process, no session.
    fn plain(after: bool) -> Self {
        HalfOf {
            after,
            closing: None,
            keep_open: false,
            pid: None,
            session: None,
        }
    }
}

/// What [`Store::record`] gives back: the tree the half leaves, the
/// scan's counts, the changes recorded (their pre-images not filled in
/// yet) with the seq of the record that captured them, and the windows
/// left open.
type Outcome = (
    NewTree,
    ScanStats,
    Option<(Recorded, Option<u64>)>,
    Vec<Window>,
);

/// A scan of at least this many entries lets go of the checkpoint blocks
/// its lookups read (up to 6 MB) and of the memory its threads freed before
/// the changes are recorded. A smaller one keeps them: the diff looks up
/// the same blobs, and giving memory back costs more than it frees.
const LARGE_SCAN: usize = 10_000;

/// Receives the progress of a scan, and of the execution of a rewind,
/// revert, undo or redo (for a progress bar; see [`Store::set_progress`]).
/// Every method does nothing by default; they may be called from several
/// threads.
pub trait Progress: Sync {
    /// The walk has found `entries` paths so far.
    fn walking(&self, entries: u64) {
        let _ = entries;
    }
    /// The walk is done; `files` files of `bytes` bytes must be read.
    fn hashing(&self, files: u64, bytes: u64) {
        let _ = (files, bytes);
    }
    /// `files` more files, `bytes` more bytes were read.
    fn hashed(&self, files: u64, bytes: u64) {
        let _ = (files, bytes);
    }
    /// The scan is over.
    fn done(&self) {}
    /// A rewind, revert, undo or redo has saved the current states and
    /// starts changing the project: `paths` paths, its plan's steps.
    fn changing(&self, paths: u64) {
        let _ = paths;
    }
    /// `paths` more of them are done: put in place (for a file: its bytes
    /// written and verified under a temporary name, the slow part), removed,
    /// or failed. Each path of the plan is counted once at most.
    fn changed(&self, paths: u64) {
        let _ = paths;
    }
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// Counts of one scan.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ScanStats {
    /// Covered regular files.
    #[serde(rename = "file_count")]
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Covered directories.
    #[serde(rename = "dir_count")]
    pub dirs: u64,
    /// Covered symlinks.
    #[serde(rename = "symlink_count")]
    pub symlinks: u64,
    /// Paths left out (see [`Store::status`]).
    #[serde(rename = "excluded_count")]
    pub excluded: u64,
    /// Files read and hashed (the rest were known by their stat).
    #[serde(rename = "hashed_file_count")]
    pub hashed_files: u64,
    /// Bytes read and hashed.
    pub hashed_bytes: u64,
    /// Blobs stored by this scan.
    #[serde(rename = "new_blob_count")]
    pub new_blobs: u64,
    /// Compressed bytes stored by this scan.
    pub stored_bytes: u64,
    /// Bytes of tree state written (only the small head when no entry
    /// changed; see [`crate::tree`]).
    pub tree_bytes: u64,
}

/// What kind of change a path saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// It did not exist.
    Created,
    /// Its bytes, mode, type or (for an excluded path) stat changed.
    Modified,
    /// It is gone.
    Deleted,
}

impl ChangeKind {
    /// `created`, `modified` or `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
    }
}

/// A path moved (same inode, same bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Renamed {
    /// The old path.
    pub from: String,
    /// The new path.
    pub to: String,
}

/// A change whose pre-image could not be saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotCaptured {
    /// The path (lossy if its name is not UTF-8).
    pub path: String,
    /// What happened to it.
    pub change: ChangeKind,
    /// Why its pre-image is not saved.
    pub reason: String,
}

/// What changed between two scans, grouped for people. Directories end
/// with `/`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Changed bytes, mode or type.
    pub modified: Vec<String>,
    /// New paths.
    pub created: Vec<String>,
    /// Removed paths.
    pub deleted: Vec<String>,
    /// Moved files (each also recorded as a deletion and a creation).
    pub renamed: Vec<Renamed>,
    /// Changes that cannot be undone: excluded paths, unsaved pre-images.
    pub not_captured: Vec<NotCaptured>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.modified.is_empty()
            && self.created.is_empty()
            && self.deleted.is_empty()
            && self.renamed.is_empty()
            && self.not_captured.is_empty()
    }
}

/// Changes recorded into a turn.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    /// The turn they were recorded in.
    pub turn: TurnId,
    /// What changed.
    pub changes: Changes,
    /// The entries appended to the turn (pre-images).
    pub captured: Vec<FileEntry>,
    /// Paths the turn had captured already (its earlier pre-image wins).
    pub already_captured: Vec<RelPath>,
    /// Other turns the same changes were recorded in: their commands ran
    /// at the same time, and any of them may have made them.
    pub shared_with: Vec<TurnId>,
    /// Changed paths left to the turn whose file tool captured them since
    /// the last snapshot.
    pub captured_elsewhere: Vec<CapturedSince>,
}

/// What one snapshot did.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotReport {
    /// The turn named by the caller.
    pub turn: TurnId,
    /// Whether this was the after half.
    pub after: bool,
    /// Counts of the scan.
    pub scan: ScanStats,
    /// Whether Watchman said what changed, or the whole tree was scanned
    /// and why.
    pub change_source: ChangeSource,
    /// For the after half (or a pending snapshot completed by a before
    /// half): the changes recorded.
    pub recorded: Option<Recorded>,
    /// Things the caller should know.
    pub warnings: Vec<String>,
}

/// The last snapshot, as `status` compares against it.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// The turn it was taken for.
    pub turn: TurnId,
    /// Whether it is a before half still waiting for its after half.
    pub pending: bool,
    /// Its scan stamp (ns since the epoch; `at`, RFC 3339, in JSON).
    #[serde(rename = "at", serialize_with = "crate::time::ser_ns_signed")]
    pub at_ns: i64,
}

/// A changed path already captured by a live turn after the last snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct CapturedSince {
    /// The path.
    pub path: String,
    /// The turn that captured it.
    pub turn: TurnId,
}

/// A path no snapshot covers.
#[derive(Debug, Clone, Serialize)]
pub struct NotCovered {
    /// The path (directories end with `/`).
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What changed on disk since the last snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The project root.
    pub root: PathBuf,
    /// The last snapshot; `None` when none was taken (everything is new).
    pub snapshot: Option<Baseline>,
    /// The changes since then.
    pub changes: Changes,
    /// Changed paths whose pre-image a turn captured after the snapshot.
    pub captured: Vec<CapturedSince>,
    /// Everything the scan leaves out, changed or not.
    pub not_covered: Vec<NotCovered>,
    /// Covered files now.
    #[serde(rename = "file_count")]
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How the last snapshot found its changes: through Watchman, or by
    /// scanning the whole tree and why (`None` when none was taken).
    pub change_source: Option<ChangeSource>,
    /// Things the caller should know.
    pub warnings: Vec<String>,
}

impl Store {
    /// Takes one half of a command's snapshot in `turn`: the before half
    /// (`after = false`) or the after half, which records the changes since
    /// the before half in the turn (see the module doc). Holds the store
    /// lock throughout.
    pub fn snapshot(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        after: bool,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        self.snapshot_by(turn, label, &HalfOf::plain(after), progress)
    }

    /// [`Store::snapshot`] for an agent's hook: its window belongs to
    /// `session`, so another session's before half does not close it (see
    /// [`attribution`]). With `keep_open`, an after half records what
    /// changed so far and leaves the window open (a command the agent runs
    /// in the background goes on after its post-tool event).
    pub fn snapshot_in_session(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        after: bool,
        session: &str,
        keep_open: bool,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        let how = HalfOf {
            session: Some(session),
            keep_open: keep_open && after,
            ..HalfOf::plain(after)
        };
        self.snapshot_by(turn, label, &how, progress)
    }

    /// Closes the windows `session`'s hooks left open (a tool call the user
    /// interrupted gets no post-tool event; a background command's window
    /// stays open), recording what changed since the last scan in their
    /// turns. Called by the session's next prompt. `None` when none was
    /// open.
    pub fn close_session_windows(&mut self, session: &str) -> Result<Option<SnapshotReport>> {
        if !self.has_store() {
            return Ok(None);
        }
        // Every prompt asks, and a window is rarely open: the tree's header
        // is read first without the lock (a window opened meanwhile is
        // another event's, closed by the next one).
        let store = self.place.store_path.clone();
        if let Some(fd) = crate::location::open_store_dir(&store).ctx("open store", &store)?
            && tree::pending_turn(&fd, &store)?.is_none()
        {
            return Ok(None);
        }
        let _guard = self.begin_mutation()?;
        self.close_open(Closing::Session, Some(session))
    }

    /// [`Store::snapshot`] for a process that takes both halves around a
    /// command it runs (`turnback exec`): its window names this process,
    /// so a concurrent before half tells a running command from a killed
    /// one (see [`attribution`]).
    pub fn snapshot_for_command(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        after: bool,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        let how = HalfOf {
            pid: Some(std::process::id()),
            ..HalfOf::plain(after)
        };
        self.snapshot_by(turn, label, &how, progress)
    }

    fn snapshot_by(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        how: &HalfOf<'_>,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        // An after half with no store has no before half: an error, and no
        // store is made for it.
        if how.after && !self.has_store() {
            return Err(Error::NoSnapshot {
                root: self.place.root.clone(),
            });
        }
        let _guard = self.begin_mutation()?;
        self.snapshot_locked(turn, label, how, progress)
    }

    /// Closes the command windows left open (a command killed between its
    /// halves, a hook's before half whose after half never came) by
    /// recording the changes since the last scan into their turns, as the
    /// next before half would, and opening none (see [`attribution`]).
    /// Called under the store lock by a rewind, revert, undo or redo before
    /// it plans, so the turn of an interrupted command is never left out
    /// of it. Cheap when no window is open: the tree's header is read, not
    /// the tree.
    pub(crate) fn close_windows(&mut self) -> Result<()> {
        if let Some(report) = self.close_open(Closing::All, None)? {
            for w in report.warnings {
                self.warn(w);
            }
        }
        Ok(())
    }

    /// A closing half (see [`Closing`]) when the tree says a window is
    /// open; `None` when none is (or there is no store). Under the lock.
    fn close_open(
        &mut self,
        closing: Closing,
        session: Option<&str>,
    ) -> Result<Option<SnapshotReport>> {
        let Some(dirs) = self.place.dirs.as_ref() else {
            return Ok(None);
        };
        let Some(turn) = tree::pending_turn(&dirs.store, &self.place.store_path)? else {
            return Ok(None);
        };
        let how = HalfOf {
            closing: Some(closing),
            session,
            ..HalfOf::plain(false)
        };
        self.snapshot_locked(&turn, None, &how, &NoProgress)
            .map(Some)
    }

    fn snapshot_locked(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        how: &HalfOf<'_>,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        let after = how.after;
        let store_fd =
            crate::sys::dup(&self.place.dirs().store).ctx("open", &self.place.store_path)?;
        let packs_fd =
            crate::sys::dup(&self.place.dirs().packs).ctx("open", &self.place.store_path)?;
        tree::sweep_temps(&store_fd, &self.place.store_path)?;
        let mut warnings = Vec::new();
        // What changed, per Watchman, since the clock stored with the tree
        // (see `crate::fsmonitor`); asked before any path is looked at.
        let mode = fsmonitor::mode(self.config()?.fsmonitor)?;
        let watching = mode != FsMonitor::Off;
        let stored = watching
            .then(|| fsmonitor::state::load(&store_fd))
            .flatten();
        let mut header = match watching {
            true => tree::load_header(&store_fd, &self.place.store_path)?,
            false => None,
        };
        let fsmonitor::Answer {
            changed,
            next,
            sock,
            off,
            gone_links,
        } = fsmonitor::ask(
            &self.place.root,
            mode,
            stored.as_ref(),
            header.as_ref().map(|(t, n)| (t.stamp_ns, *n)),
        );
        // A rewind, revert, undo or redo since the tree was written changed
        // the folder in a way Watchman does not report: it gives files it
        // keeps a second name in the trash or aside for a while, and a link
        // count (so a ctime) changes with no event for the file's own name.
        // The half after one scans the whole tree.
        let changed = match (changed, &header) {
            (Ok(_), Some((t, _)))
                if self
                    .index
                    .saved
                    .keys()
                    .chain(self.index.ops.keys())
                    .any(|&seq| seq > t.log_seq) =>
            {
                Err("a rewind, revert, undo or redo changed the folder since the last snapshot (files it keeps get a second name for a while, which Watchman does not report)".to_owned())
            }
            (changed, _) => changed,
        };
        // A name made and removed since the clock that may have been
        // another name of a file: a write through it changed that file,
        // which Watchman does not name (see `fsmonitor::gone_link`).
        let inside = self.store_inside();
        let changed = changed.and_then(|paths| {
            match gone_links
                .iter()
                .find(|(p, _)| !walk::skipped(p, inside.as_deref()))
            {
                Some((p, why)) => Err(format!("{} {why}", crate::path::escaped(p))),
                None => Ok(paths),
            }
        });
        // Nothing changed but what no snapshot looks at: the tree's
        // entries are not even read, and its counts are the stored ones.
        let quick = match (&changed, &header, &stored) {
            (Ok(paths), Some(_), Some(st)) => {
                st.counts.unreadable == 0
                    && paths.iter().all(|p| walk::skipped(p, inside.as_deref()))
            }
            _ => false,
        }
        .then(|| header.take())
        .flatten()
        .zip(stored.as_ref().map(|s| s.counts));
        let (mut layers, mut partial) = (None, None);
        let (mut old, quick) = match quick {
            Some(((t, n), counts)) => (Some(t), Some((n, counts))),
            None => {
                // Watchman named the paths and the stat cache needs no
                // recheck: only the entries they can touch are read (see
                // `crate::tree::partial`).
                let wanted = match (&changed, &header) {
                    (Ok(paths), Some((h, _)))
                        if !tree::must_recheck(&store_fd, h, self.index.last_seq) =>
                    {
                        Some(tree::Wanted::new(paths))
                    }
                    _ => None,
                };
                let (t, l, p) = self.load_old(&store_fd, wanted, &mut warnings)?;
                (layers, partial) = (l, p);
                (t, None)
            }
        };
        if after && old.is_none() {
            return Err(Error::NoSnapshot {
                root: self.place.root.clone(),
            });
        }
        let windows = exec_window::load(
            &store_fd,
            &self.place.store_path,
            old.as_ref(),
            &mut warnings,
        )?;
        let writer = TreeWriter::begin(&store_fd, &self.place.store_path)?;
        let stamp_ns = writer.stamp_ns;
        let scan = match quick {
            Some((_, counts)) => Scan {
                entries: Vec::new(),
                stats: ScanStats {
                    files: counts.files,
                    bytes: counts.bytes,
                    dirs: counts.dirs,
                    symlinks: counts.symlinks,
                    excluded: counts.excluded,
                    ..ScanStats::default()
                },
                pack: None,
                warnings: Vec::new(),
                dev: None,
                full_walk: None,
                rechecked: false,
                as_old: false,
                relisted: false,
                patch: None,
                needs_whole: false,
                unheld: stored.as_ref().map_or(Unheld::Many, |s| s.unheld.clone()),
            },
            None => {
                // Watchman's paths go with the stored state's entries
                // with names the tree does not hold; a clock comes only
                // with a state.
                let unheld = stored.as_ref().map_or(&Unheld::Many, |s| &s.unheld);
                let again = partial.as_ref().and(changed.as_ref().ok().cloned());
                let scan = self.scan(
                    old.as_ref(),
                    Reading::Store,
                    changed.map(|paths| (paths, unheld)),
                    progress,
                    partial.as_ref(),
                )?;
                if scan.needs_whole {
                    (old, layers, partial) = self.load_old(&store_fd, None, &mut warnings)?;
                    let changed = again
                        .map(|paths| (paths, unheld))
                        .ok_or_else(|| "the tree was read in part".to_owned());
                    self.scan(old.as_ref(), Reading::Store, changed, progress, None)?
                } else {
                    scan
                }
            }
        };
        let full_walk = scan.full_walk.clone();
        let unheld = scan.unheld.clone();
        let rechecked = scan.rechecked;
        let relisted = scan.relisted;
        let used = match &full_walk {
            None => Used::Watchman,
            Some(_) if off => Used::Off,
            Some(_) => Used::Fallback,
        };
        if let (FsMonitor::Watchman, Some(why)) = (mode, &full_walk) {
            warnings.push(format!(
                "Watchman was not used ({why}); the whole tree was scanned"
            ));
        }
        if scan.entries.len() >= LARGE_SCAN {
            // What the scan's lookups and threads held is let go before
            // the changes are recorded.
            self.index.blobs.forget_read();
            crate::sys::give_back_free_memory();
        }
        let half = Half {
            turn,
            label,
            after,
            closing: how.closing,
            keep_open: how.keep_open,
            pid: how.pid,
            session: how.session,
            last_seq: self.index.last_seq,
            stamp_ns,
        };
        // Nothing hashed and every entry as the tree has it: only the
        // header changes, so the (large) tree is not rewritten.
        let unchanged = scan.as_old
            || (scan.stats.hashed_files == 0
                && old.as_ref().is_some_and(|o| match &scan.patch {
                    None => o.entries == scan.entries,
                    Some(dropped) => {
                        dropped.len() == scan.entries.len()
                            && dropped
                                .iter()
                                .zip(&scan.entries)
                                .all(|(&i, e)| o.entries[i] == *e)
                    }
                }));
        let old_stamp = old.as_ref().map(|o| o.stamp_ns);
        // The old tree is handed over and freed once diffed, before the
        // changes are recorded and the new tree written.
        let (new_tree, mut stats, recorded, windows) = self.record(
            &half,
            old,
            (layers, partial),
            scan,
            windows,
            &packs_fd,
            &mut warnings,
        )?;
        // The tree written next names the scan's blobs: the record that
        // introduces them is durable first.
        self.sync_log()?;
        // The tree's counts go with Watchman's clock only: not counted
        // again without it.
        let keeps_state = next.is_some() || stored.is_some();
        let tree_counts = keeps_state.then(|| match quick {
            Some((n, counts)) => (n, counts.unreadable),
            None => new_tree.counts(),
        });
        let pending = !windows.is_empty();
        let mark = TreeMark {
            stamp_ns: old_stamp.filter(|_| unchanged).unwrap_or(stamp_ns),
            log_seq: self.index.last_seq,
            pending,
            turn: turn.clone(),
        };
        if unchanged {
            // The windows go in the head: one file replaced, not two.
            let note = exec_window::encode(&self.place.store_path, &mark, &windows)?;
            stats.tree_bytes = tree::write_head(
                &store_fd,
                &self.place.store_path,
                self.index.last_seq,
                pending,
                turn,
                &note,
            )?;
            // Freeing 100,000 paths takes about 2 ms, which a hook's
            // answer need not wait for: a large tree is let go on the
            // pool (which the walk started), and a process that exits
            // first does not free it at all.
            if new_tree.held() >= LARGE_SCAN {
                crate::par::drop_later(new_tree);
            }
        } else {
            exec_window::save(&store_fd, &self.place.store_path, &mark, &windows)?;
            let header = Tree {
                stamp_ns,
                log_seq: self.index.last_seq,
                turn: turn.clone(),
                pending,
                entries: Vec::new(),
            };
            stats.tree_bytes = new_tree.write(writer, &store_fd, &self.place.store_path, header)?;
        }
        // Every blob the tree in place names was looked up (see
        // `crate::tree`): the recheck, if one was asked for, is done.
        if rechecked {
            tree::clear_recheck(&store_fd, &self.place.store_path)?;
        }
        // The clock goes with the tree just written (see
        // `crate::fsmonitor::state`); nothing is written without Watchman.
        let reason = full_walk.clone().unwrap_or_default();
        if let Some((tree_count, unreadable)) = tree_counts {
            let state = fsmonitor::State {
                tree: (mark.stamp_ns, tree_count),
                counts: fsmonitor::state::Counts {
                    files: stats.files,
                    bytes: stats.bytes,
                    dirs: stats.dirs,
                    symlinks: stats.symlinks,
                    excluded: stats.excluded,
                    unreadable,
                },
                used,
                reason: reason.clone(),
                sock,
                token: next,
                unheld,
            };
            // Nothing changed: the stored state, with its older clock,
            // stands for this one, and is not written again.
            let stands = quick.is_some() && stored.as_ref().is_some_and(|s| s.stands_for(&state));
            if !stands
                && let Err(e) = fsmonitor::state::save(&store_fd, &self.place.store_path, &state)
            {
                warnings.push(format!("{e}; the next snapshot scans the whole tree"));
            }
        } else if unchanged
            && relisted
            && let Some(mut state) = fsmonitor::state::load(&store_fd)
            && state.used == Used::Watchman
            && state.tree.0 == mark.stamp_ns
        {
            // Watchman off: no clock is asked for or stored, but the state
            // a Watchman half left with this tree would keep every later
            // scan listing every directory again (see `listed_whole`).
            // This one listed them all and found the tree as it is, so the
            // tree's directory stats are a listing's now; the clock stays
            // (nothing changed since it).
            state.used = used;
            state.reason = reason.clone();
            if let Err(e) = fsmonitor::state::save(&store_fd, &self.place.store_path, &state) {
                warnings.push(format!(
                    "{e}; the next snapshot lists every directory again"
                ));
            }
        }
        // The report's pre-images are copied from the turn only now, the
        // scan's entries freed: three copies of 100,000 of them were held
        // at once before.
        let recorded = match recorded {
            Some((mut rec, seq)) => {
                if let (Some(seq), Some(t)) = (seq, self.index.turn(&rec.turn)?) {
                    rec.captured = t
                        .files
                        .iter()
                        .filter(|c| c.seq == seq)
                        .map(|c| c.entry.clone())
                        .collect();
                }
                Some(rec)
            }
            None => None,
        };
        Ok(SnapshotReport {
            turn: turn.clone(),
            after,
            scan: stats,
            change_source: ChangeSource::of(used, &reason),
            recorded,
            warnings,
        })
    }

    /// The tree state in place, with how it is stored: read in part when
    /// `wanted` says which entries (see [`tree::Wanted`]), unless a file
    /// among them has another name (a hard link) the part may leave out.
    #[allow(clippy::type_complexity)]
    fn load_old(
        &self,
        store_fd: &crate::sys::OwnedFd,
        wanted: Option<tree::Wanted>,
        warnings: &mut Vec<String>,
    ) -> Result<(Option<Tree>, Option<tree::Layers>, Option<tree::Partial>)> {
        let path = &self.place.store_path;
        let (loaded, layers, partial) = match wanted {
            Some(w) => tree::load_partial(store_fd, path, w)?,
            None => {
                let (loaded, l) = tree::load_layers(store_fd, path)?;
                (loaded, l, None)
            }
        };
        let old = match loaded {
            Loaded::Missing => None,
            Loaded::Damaged(why) => {
                warnings.push(format!(
                    "{why}; the tree state is rebuilt and every file hashed again"
                ));
                None
            }
            Loaded::Tree(t) => Some(t),
        };
        if let (Some(t), Some(p)) = (&old, &partial)
            && p.links_kept(&t.entries)
        {
            return self.load_old(store_fd, None, warnings);
        }
        Ok((old, layers, partial))
    }

    /// Makes the scan's blobs durable and records the diff into the turns
    /// that may own it (see [`attribution`]); returns the tree to write
    /// and the windows open after this half.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        half: &Half<'_>,
        old: Option<Tree>,
        (layers, partial): (Option<tree::Layers>, Option<tree::Partial>),
        scan: Scan,
        windows: Option<Vec<Window>>,
        packs_fd: &crate::sys::OwnedFd,
        warnings: &mut Vec<String>,
    ) -> Result<Outcome> {
        let Scan {
            mut entries,
            stats,
            pack,
            warnings: scan_warnings,
            dev,
            full_walk: _,
            rechecked: _,
            as_old,
            relisted: _,
            patch,
            needs_whole: _,
            unheld: _,
        } = scan;
        // Found exactly as the old tree: its entries are the scan's, and
        // nothing changed (the diff is empty).
        let mut old = old;
        if let (true, Some(t)) = (as_old, old.as_mut()) {
            entries = std::mem::take(&mut t.entries);
        }
        let look = dev.map(|dev| Look {
            dev,
            stamp_ns: half.stamp_ns,
        });
        warnings.extend(scan_warnings);
        if let Some((w, blobs)) = pack {
            let name = pack::pack_name(self.index.last_seq + 1);
            w.commit(packs_fd, &name)?;
            // Made durable with the turn's record below, by one flush for
            // both, or on its own after `record` when no turn gets one.
            self.append_unsynced(Op::Snapshot {
                turn: half.turn.clone(),
                after: half.after,
                pack: name,
                blobs,
            })?;
        }
        let rewound = old
            .as_ref()
            .is_some_and(|t| self.index.ops.keys().any(|&s| s > t.log_seq));
        let plan = attribution::plan(half, old.as_ref(), windows, rewound, warnings);
        // The new tree: the scan's entries, or the old tree with the
        // scan's patch.
        let new = match (patch, old) {
            (Some(dropped), Some(old)) => New::Patched(Patched {
                old,
                dropped,
                fresh: entries,
                partial,
            }),
            (_, old) => New::Whole { old, entries },
        };
        let base = match &new {
            New::Patched(p) => Some(&p.old),
            New::Whole { old, .. } => old.as_ref(),
        };
        let Some(base) = base.filter(|_| !plan.owners.is_empty()) else {
            return Ok((new.into_new_tree(layers), stats, None, plan.windows));
        };
        let blob_size = |id: &BlobId| self.index.blobs.get(id).map(|l| l.size);
        let (changes, files) = match (&new, as_old) {
            (_, true) => Default::default(),
            (New::Whole { entries, .. }, false) => {
                let (changes, mut files) = diff(&base.entries, entries, blob_size);
                crate::links::add_unchanged_names(&base.entries, &mut files, blob_size);
                (changes, files)
            }
            (New::Patched(p), false) => {
                let was: Vec<Entry> = p.dropped.iter().map(|&i| base.entries[i].clone()).collect();
                let all_files = p.partial.as_ref();
                let (changes, mut files) =
                    diff_within(&base.entries, &was, &p.fresh, all_files, blob_size);
                crate::links::add_unchanged_names(&base.entries, &mut files, blob_size);
                (changes, files)
            }
        };
        let base_seq = base.log_seq;
        let (assigned, elsewhere) = attribution::assign(plan.owners, files, &self.index, base_seq)?;
        // The old tree is freed before the changes are recorded, unless the
        // new one is made of it.
        let new = match new {
            New::Whole { entries, .. } => New::Whole { old: None, entries },
            patched => patched,
        };
        // The report describes the caller's turn when it is one of them.
        let reported = assigned
            .iter()
            .position(|a| &a.turn == half.turn)
            .unwrap_or(0);
        let (mut changes, mut elsewhere) = (Some(changes), Some(elsewhere));
        let mut recorded = None;
        for (k, a) in assigned.into_iter().enumerate() {
            // What the command left at every path it changed (the turn's
            // post-images): a later rewind compares against these, so a
            // change a later turn made is never taken for someone else's.
            let posts: Vec<PostEntry> = a
                .fresh
                .iter()
                .map(|f| &f.path)
                .chain(&a.already)
                .map(|path| PostEntry {
                    path: path.clone(),
                    post: post_of(new.entry(path.as_str().as_bytes()), look),
                })
                .collect();
            // A command that changed nothing in a turn that exists already
            // appends nothing.
            let mut appended = None;
            if !posts.is_empty() || self.index.turn(&a.turn)?.is_none() {
                let shared = if a.fresh.is_empty() {
                    Vec::new()
                } else {
                    a.shared_with.clone()
                };
                let label = a.label.as_deref();
                // The pre-images are moved into the record, and from it
                // into the index: never two copies of 100,000 entries.
                appended = Some(self.append_capture(&a.turn, label, a.fresh, posts, shared)?);
            }
            if k != reported {
                continue;
            }
            recorded = Some((
                Recorded {
                    turn: a.turn,
                    changes: changes.take().unwrap_or_default(),
                    captured: Vec::new(),
                    already_captured: a.already,
                    shared_with: a.shared_with,
                    captured_elsewhere: elsewhere.take().unwrap_or_default(),
                },
                appended,
            ));
        }
        Ok((new.into_new_tree(layers), stats, recorded, plan.windows))
    }

    fn append_capture(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        files: Vec<FileEntry>,
        posts: Vec<PostEntry>,
        shared_with: Vec<TurnId>,
    ) -> Result<u64> {
        self.append(Op::Capture {
            turn: turn.clone(),
            label: label.map(cut_label).filter(|l| !l.is_empty()),
            pack: None,
            blobs: Vec::new(),
            files,
            posts,
            shared_with,
        })
    }
}

#[cfg(all(test, unix))]
mod tests;
