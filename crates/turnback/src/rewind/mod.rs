//! Rewinds, reverts, undo and redo: planning and applying changes that put
//! paths back to recorded states.
//!
//! `rewind T` undoes turn T and every later turn (undoing T alone would
//! leave a combination of files that never existed); for a path captured in
//! several of those turns the oldest pre-image wins (a capture made while
//! an operation an undo has since reversed stood counts as the state that
//! operation saved: see [`crate::index::Index::before_reversed`]).
//! `revert T` undoes T alone and keeps later turns; a path a later turn
//! also touched is left as it is unless forced. `undo` reverses the last
//! rewind or revert still in effect, `redo` the last undo.
//!
//! Every one of them goes the same way:
//!
//! 1. the plan is built, every path and blob id checked, before anything
//!    is written;
//! 2. the current state of every path the plan touches (and of the
//!    directories it may create) is saved in a durable `saved` record, so
//!    the operation can be undone and nothing it replaces is lost. A
//!    regular file with one name is not read when its hash is not needed
//!    (no post-image recorded for it; every file, for undo and redo) or is
//!    known without reading (it still has the look, `StatKey`, recorded
//!    with its post-image): it is kept aside, by a second name in the
//!    store, where the store's file system allows and the operation
//!    changes at least `aside::AT_LEAST` paths (see `aside.rs`); the
//!    background maintenance stores it as a blob once the operation has
//!    answered;
//! 3. a path whose current bytes differ from the post-image the agent left
//!    is a conflict: someone changed it since. By default the rewind goes on
//!    (its bytes are in the `saved` record: `turnback undo` brings them
//!    back); with `keep_conflicts` it is left as it is;
//! 4. a read-only directory whose entries the plan changes is given owner
//!    write permission if this process owns it (see [`crate::lift`]; the
//!    paths in one it does not own fail with the reason); directories are
//!    made, shallowest first, writable by their owner; each file to restore
//!    is decompressed into a temporary file beside its target while being
//!    re-hashed (a blob that does not match its id never reaches the
//!    project; see `restore.rs`), the temporary files are made durable
//!    (step 5), paths that must not exist are removed deepest first (a
//!    directory only when empty), the temporary files are renamed over
//!    their targets, then symlinks and FIFOs are made (paths that were one
//!    file are hard-linked together again first, see `links.rs`; zero
//!    blocks are written as holes, see `sparse.rs`); last, lifted
//!    directories get their modes back and every directory of the plan its
//!    recorded mode (setgid and sticky bits included), deepest first;
//! 5. durability (see `durable.rs`): for at most
//!    [`crate::durable::PER_FILE_AT_MOST`] files, each temporary file is
//!    `fsync`ed before its rename, a directory is `fsync`ed before it is
//!    removed, and after the renames every directory the operation changed
//!    and its ancestors are; for more files, one `syncfs` before the renames
//!    and one after. Then the operation's record is appended.
//!
//! Every directory is reached from the root one component at a time without
//! following symlinks (`openat(O_DIRECTORY | O_NOFOLLOW)`, see
//! [`crate::fsx`]), through a walk that holds one handle per level of the
//! current path (see `dirstack.rs`): the plan is sorted by path, and the
//! walks of one operation (collecting and saving the current states,
//! checking write permission, staging, renaming) share the handles they
//! open, so the operation opens every directory once between them (within
//! a share of the descriptor limit). A rewind opens one file per restored
//! file (the temporary file; the current one is kept aside unread) and
//! one handle per directory: 1.11 `openat` per file on a 4,686-file tree
//! in 396 directories. A file whose post-image a conflict check compares
//! and whose look changed since it was recorded (or was recorded without
//! one) is read as well: its hash decides whether someone changed it
//! since the agent. A path must go from its old bytes to its new ones
//! in one rename (invariant I5), which takes a new inode. A
//! crash (or an error) after step 2 and before the operation's record
//! leaves its `saved` record last in the log: the next mutation, whatever
//! it is, first rolls the operation back from that record (its changed
//! paths, the temporary files it staged and the directories it made; see
//! `journal/rollback.rs`), so the turns stay live and the folder is as it was before
//! it; running the operation again starts from there.
//!
//! Choices measured on the development machine (ext4 without a journal,
//! mounted with `discard`; see the report of the branch `rewind`):
//!
//! - Replacing a file by a temporary file and a rename costs more there
//!   than a truncating write (the rename frees the old inode, which issues a
//!   synchronous discard, and each new inode's allocation skips recently
//!   freed ones). A truncating write is still not used: a crash between
//!   the truncation and the end of the write would leave a path holding
//!   neither its old bytes nor the restored ones, and a truncated file may
//!   be a hard link to a file outside the project.
//! - A rewrite in place (the restored bytes, verified in memory, written
//!   over the file's own blocks, then the file cut to their length; no
//!   inode freed, only for files with one link) was built and measured:
//!   a rewind of 4,686 files took 0.47 s against 0.67 s for the same
//!   files' truncating writes, where this code takes 1.07–2.09 s on the
//!   same run. It was not kept: the crash sweep and the power-loss tests
//!   (`crates/turnback-cli/tests/reliability/`, invariant I5) found paths
//!   holding neither state, `"alpha\nby t1\n"` (killed between the write
//!   and the cut) and `"alpha\n\0\0\0\0\0\0"` (a power loss: the new
//!   length durable, its bytes not), and a torn file cannot be told from
//!   someone's edit afterwards, so the rollback could not put it back.
//!   A rename shows each path's old bytes or its new ones, never a mix.
//! - Keeping the replaced file aside in the store (no read, no
//!   compression, no inode freed) measured cheapest of all, about 2.5 times
//!   cheaper per file than the truncating write in a micro-benchmark, and
//!   is done (see `aside.rs`): a hard link made while the states are saved,
//!   so the path keeps its file until the rename, and the `saved` record
//!   names it. It needs the store on the project's file system (the
//!   default store is in the user's data directory, which usually is);
//!   elsewhere, and on Windows, files are read as before.
//! - The free deferred, without changing what a saved state is (built:
//!   see `trash.rs`, Linux only): each replaced file hard-linked into the
//!   trash just before its rename, so the rename frees nothing, the
//!   names removed once the operation has answered. Measured by hand on the
//!   4,686 files: the renames take 0.22–0.26 s with the links against
//!   0.55 s without (a Python loop, links included). The frees are moved
//!   off the wait, not saved: removing the 4,686 names afterwards takes
//!   about 0.4 s. A file kept aside has its second name already and gets
//!   none in the trash; the trash serves the files that are read.
//! - Memory is bounded by the plan and the log's records, never by file
//!   contents: blobs and kept files are streamed into the file, current
//!   files that are read are saved in chunks of at most 32 files or 64
//!   MiB, and the walk and the staging hold the directories of one chunk.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::conflicts::LastPosts;
use crate::error::{Error, Result};
use crate::id::{BlobId, TurnId};
use crate::index::Turn;
use crate::links::LinkSplit;
use crate::log::{FailedPath, FileEntry, Op, Post, PostEntry, Pre};
use crate::path::RelPath;
use crate::store::{Expect, Store, post_of};

mod execute;
mod plan;

pub(crate) use plan::steps_from;

/// Options of a rewind.
#[derive(Debug, Clone, Default)]
pub struct RewindOptions {
    /// Only build and return the plan.
    pub dry_run: bool,
    /// Leave files changed since the agent's turn as they are.
    pub keep_conflicts: bool,
    /// Take back only these paths (each a file, or a folder and all below
    /// it) of the turns; the turns stay live, as the rest of them is still
    /// in the folder. Empty: everything.
    pub paths: Vec<RelPath>,
}

/// Options of a revert.
#[derive(Debug, Clone, Default)]
pub struct RevertOptions {
    /// Only build and return the plan.
    pub dry_run: bool,
    /// Revert paths a later turn also touched, too.
    pub force: bool,
    /// Leave files changed since the agent's turn as they are.
    pub keep_conflicts: bool,
    /// Take back only these paths of the turn (as for a rewind); the turn
    /// stays live. Empty: the whole turn.
    pub paths: Vec<RelPath>,
}

/// What an operation does (or would do) to one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Write back a file's bytes and mode.
    Restore {
        /// The blob holding them.
        blob: BlobId,
        /// Their size.
        size: u64,
        /// The permission bits.
        mode: u32,
        /// The inode number it shared with other restored paths, which are
        /// hard-linked to it again.
        #[serde(skip_serializing_if = "Option::is_none")]
        link: Option<u64>,
    },
    /// Write back a file an earlier operation replaced and kept aside (see
    /// `aside.rs`); nothing, if that operation left the path as it was.
    RestoreKept {
        /// The `saved` record keeping it.
        seq: u64,
        /// Its number there.
        n: u64,
        /// Its size when it was kept.
        size: u64,
        /// The permission bits.
        mode: u32,
    },
    /// Re-create a symlink.
    RestoreSymlink {
        /// Where it points.
        target: String,
    },
    /// Make a directory, or give the one there this mode.
    MakeDir {
        /// Its mode bits.
        mode: u32,
    },
    /// Make a FIFO.
    MakeFifo {
        /// Its mode bits.
        mode: u32,
    },
    /// Remove what is there (it did not exist before).
    Delete,
    /// The state was not saved.
    CannotRestore {
        /// Why.
        reason: String,
    },
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The path.
    pub path: RelPath,
    /// What happens to it.
    #[serde(flatten)]
    pub action: Action,
}

/// A path changed by someone else since the turn, or touched by a later
/// turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The path.
    pub path: RelPath,
    /// What happened to it.
    pub reason: String,
    /// For a revert: what the turn changed and what came after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The outcome of a rewind, revert, undo or redo.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// "rewind", "revert", "undo" or "redo".
    pub operation: &'static str,
    /// The turn named (for undo/redo: the turn of the operation reversed).
    pub turn: TurnId,
    /// Every turn undone (or, for undo, brought back), oldest first.
    pub turns: Vec<TurnId>,
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// The plan, one step per path.
    pub plan: Vec<Step>,
    /// Files, symlinks and directories written back.
    pub restored: Vec<RelPath>,
    /// Paths removed because they did not exist before.
    pub deleted: Vec<RelPath>,
    /// Paths that were to be removed but were already gone.
    pub already_absent: Vec<RelPath>,
    /// Paths changed since the agent left them: their bytes were saved in
    /// the store first, then replaced (`turnback undo` brings them back).
    pub conflicts: Vec<Conflict>,
    /// Paths left as they were.
    pub kept: Vec<Conflict>,
    /// Paths that could not be restored, with the reason.
    pub failed: Vec<FailedPath>,
    /// What the operation did beyond its plan, per path (a read-only
    /// directory made writable for it and then put back).
    pub notes: Vec<Note>,
    /// Paths restored, but no longer hard-linked to the other names of
    /// their file, with the reason.
    pub links_split: Vec<LinkSplit>,
    /// The paths the operation was limited to (each a file, or a folder
    /// and all below it); empty: all of the turns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<RelPath>,
    /// With `paths`: the other paths of the turns, left as they are.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<RelPath>,
    /// Sequence number of the record holding what this overwrote.
    #[serde(rename = "saved_seq")]
    pub saved: Option<u64>,
    /// What the operation settled before it began: an interrupted
    /// operation rolled back, a command's window closed into its turn.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Something an operation did beyond its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// The path, relative to the root (`.` for the root itself).
    pub path: String,
    /// What was done.
    pub note: String,
}

impl Report {
    /// Whether every planned path was restored.
    pub fn complete(&self) -> bool {
        self.failed.is_empty()
    }

    /// The plan's step for `path` (the plan is sorted by path).
    pub(crate) fn step(&self, path: &RelPath) -> Option<&Step> {
        self.plan
            .binary_search_by(|s| s.path.cmp(path))
            .ok()
            .map(|i| &self.plan[i])
    }

    /// Limits the plan to `paths` (each a file, or a folder and all below
    /// it): a folder a named path lies in stays in the plan when the turns
    /// removed it (it is made again), the other steps go to `left`. A named
    /// path the plan does not touch is an error: it would otherwise be
    /// reported as done.
    fn limit_to(&mut self, paths: &[RelPath], by: impl Fn() -> String) -> Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        if let Some(p) = paths
            .iter()
            .find(|n| !self.plan.iter().any(|s| s.path.starts_with(n)))
        {
            return Err(Error::PathNotChanged {
                path: p.to_string(),
                turn: self.turn.clone(),
                by: by(),
            });
        }
        let wanted = |s: &Step| {
            paths.iter().any(|n| s.path.starts_with(n))
                || (matches!(s.action, Action::MakeDir { .. })
                    && paths.iter().any(|n| n.starts_with(&s.path)))
        };
        let (plan, left): (Vec<Step>, Vec<Step>) =
            std::mem::take(&mut self.plan).into_iter().partition(wanted);
        self.plan = plan;
        self.left = left.into_iter().map(|s| s.path).collect();
        self.paths = paths.to_vec();
        Ok(())
    }

    pub(crate) fn new(
        operation: &'static str,
        turn: TurnId,
        turns: Vec<TurnId>,
        dry_run: bool,
        plan: Vec<Step>,
    ) -> Self {
        Report {
            operation,
            turn,
            turns,
            dry_run,
            plan,
            restored: Vec::new(),
            deleted: Vec::new(),
            already_absent: Vec::new(),
            conflicts: Vec::new(),
            kept: Vec::new(),
            failed: Vec::new(),
            notes: Vec::new(),
            links_split: Vec::new(),
            paths: Vec::new(),
            left: Vec::new(),
            saved: None,
            warnings: Vec::new(),
        }
    }
}

/// A rewind's plan.
#[derive(Debug, Clone)]
pub struct RewindPlan {
    /// Turns with `first_seq >= from_seq` are undone.
    pub from_seq: u64,
    /// Those turns, oldest first.
    pub turns: Vec<TurnId>,
    /// The steps, by path.
    pub steps: Vec<Step>,
}

/// Turns recorded states into steps. (A path that must not exist but is
/// the directory of a restored path is handled in [`Store::execute`]: only
/// a file or symlink standing there is removed.)
/// The current states an operation found: saved in the record `seq`
/// (their hashes read from the index), or, on a dry run, only hashed.
enum States {
    Saved(u64),
    Hashed(Vec<PostEntry>),
}

/// Whether a path whose state is `now` already holds what `step` writes
/// there (a path an earlier rewind of those paths put back): replacing it
/// loses nothing, so it is no conflict, whoever made it so.
fn holds_already(step: &Step, now: &Post) -> bool {
    match (&step.action, now) {
        (Action::Restore { blob, .. }, Post::File { sha256, .. }) => blob == sha256,
        (Action::RestoreSymlink { target }, Post::Symlink { target: t }) => target == t,
        (Action::MakeDir { .. }, Post::Dir) | (Action::Delete, Post::Absent) => true,
        _ => false,
    }
}

/// Paths of `steps` plus their ancestors: what an operation may change.
/// Each step's path is new (a plan holds one step per path); only the
/// ancestors, far fewer, are kept in a set to be listed once. A path this
/// platform cannot hold is no such path: its step only reports it.
fn touched_paths(steps: &[Step]) -> Vec<RelPath> {
    let planned = |p: &RelPath| steps.binary_search_by(|s| s.path.cmp(p)).is_ok();
    let mut dirs: HashSet<RelPath> = HashSet::new();
    let mut out = Vec::with_capacity(steps.len());
    for s in steps.iter().filter(|s| s.path.problem_here().is_none()) {
        for a in s.path.ancestors() {
            if !planned(&a) && dirs.insert(a.clone()) {
                out.push(a);
            }
        }
        out.push(s.path.clone());
    }
    // Its room grew past the plan's length by the directories: given back
    // before the states are saved, while it is held.
    out.shrink_to_fit();
    out
}

impl Store {
    /// Rewinds the project to its state before `turn`, undoing it and every
    /// later turn.
    pub fn rewind(&mut self, turn: &TurnId, options: &RewindOptions) -> Result<Report> {
        self.reporting(|s| s.holding_dirs(|s| s.rewind_holding(turn, options)))
    }

    /// Takes the store lock for a rewind, revert, undo or redo and closes
    /// the command windows left open (see [`Store::close_windows`]); none
    /// for a dry run, or where there is no store yet (none is made for an
    /// operation that changes nothing).
    fn begin_restoring(&mut self, dry_run: bool) -> Result<Option<crate::lock::LockGuard>> {
        if dry_run || !self.has_store() {
            return Ok(None);
        }
        let guard = self.begin_mutation()?;
        self.close_windows()?;
        Ok(Some(guard))
    }

    /// Runs `op`, and gives its report the warnings the store gathered
    /// meanwhile (what was settled before it began).
    fn reporting(&mut self, op: impl FnOnce(&mut Self) -> Result<Report>) -> Result<Report> {
        let before = self.warnings().len();
        let mut report = op(self)?;
        let mut warnings = self.warnings().get(before..).unwrap_or_default().to_vec();
        warnings.append(&mut report.warnings);
        report.warnings = warnings;
        Ok(report)
    }

    fn rewind_holding(&mut self, turn: &TurnId, options: &RewindOptions) -> Result<Report> {
        // No store yet: the turn is unknown, and none is made to say so.
        if !self.has_store() {
            self.turn(turn)?;
        }
        let _guard = self.begin_restoring(options.dry_run)?;
        let plan = self.plan_rewind(turn)?;
        let mut report = Report::new(
            "rewind",
            turn.clone(),
            plan.turns.clone(),
            options.dry_run,
            plan.steps,
        );
        report.limit_to(&options.paths, || {
            format!("turn {turn} and the turns after it")
        })?;
        let posts = LastPosts::of(&self.turns_from(turn)?, self.folding());
        // Read before anything is saved or changed: a config file in error
        // fails the rewind before it starts.
        let config = self.config()?;
        // Only a path with a post-image to compare needs its hash, and a
        // file that still has the look it had when that was recorded has
        // that post-image's.
        let expect = |path: &RelPath| match posts.get(path) {
            None | Some(Post::Other) => Expect::Nothing,
            Some(Post::File {
                sha256,
                stat: Some(key),
            }) => Expect::Post(*sha256, *key),
            Some(_) => Expect::Hash,
        };
        let current = self.current_states(&mut report, Some(&expect))?;
        let changed = self.changed_since(&current, &report, |path| posts.get(path));
        if options.keep_conflicts {
            report.kept.extend(changed);
        } else {
            report.conflicts.extend(changed);
        }
        // Freed before the plan runs: it holds a state per path.
        drop(posts);
        report.kept.sort_by(|a, b| a.path.cmp(&b.path));
        report.conflicts.sort_by(|a, b| a.path.cmp(&b.path));
        if options.dry_run {
            return Ok(report);
        }
        let kept: HashSet<RelPath> = report.kept.iter().map(|c| c.path.clone()).collect();
        self.execute_plan(&mut report, &kept)?;
        self.release_unreplaced(&report);
        self.append(Op::Rewind {
            turn: turn.clone(),
            from_seq: plan.from_seq,
            paths: report.paths.clone(),
            saved: report.saved.expect("saved before executing"),
            conflicts: report.conflicts.iter().map(|c| c.path.clone()).collect(),
            kept: report.kept.iter().map(|c| c.path.clone()).collect(),
            failed: report.failed.clone(),
        })?;
        self.maybe_auto_gc(true, &config)?;
        Ok(report)
    }

    /// Undoes `turn` alone, keeping later turns. A path a later turn also
    /// touched is a conflict, explained three ways and left as it is unless
    /// `force`.
    pub fn revert(&mut self, turn: &TurnId, options: &RevertOptions) -> Result<Report> {
        self.reporting(|s| s.holding_dirs(|s| s.revert_holding(turn, options)))
    }

    fn revert_holding(&mut self, turn: &TurnId, options: &RevertOptions) -> Result<Report> {
        if !self.has_store() {
            self.turn(turn)?;
        }
        let _guard = self.begin_restoring(options.dry_run)?;
        let t = self.turn(turn)?;
        let turn_seq = t.first_seq;
        let steps = steps_from(t.files.iter().map(|c| (&c.entry.path, &c.entry.pre)), self);
        let mut later: HashMap<RelPath, Vec<(&Turn, u64)>> = HashMap::new();
        let live = self.index.live()?;
        for other in live.into_iter().filter(|o| o.first_seq != turn_seq) {
            for c in &t.files {
                if let Some(seq) = other.captured(&c.entry.path).map(|o| o.seq)
                    && seq > c.seq
                {
                    later
                        .entry(c.entry.path.clone())
                        .or_default()
                        .push((other, seq));
                }
            }
        }
        let mut report = Report::new(
            "revert",
            turn.clone(),
            vec![turn.clone()],
            options.dry_run,
            steps,
        );
        report.limit_to(&options.paths, || format!("turn {turn}"))?;
        later.retain(|path, _| report.step(path).is_some());
        for (path, others) in &later {
            let c = Conflict {
                path: path.clone(),
                reason: format!(
                    "a later turn also changed it: {}",
                    others
                        .iter()
                        .map(|(o, _)| o.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                detail: Some(self.explain(t, path, others)),
            };
            if options.force {
                report.conflicts.push(c);
            } else {
                report.kept.push(c);
            }
        }
        let kept: HashSet<RelPath> = report.kept.iter().map(|c| c.path.clone()).collect();
        report.plan.retain(|s| !kept.contains(&s.path));
        let later: HashSet<RelPath> = later.into_keys().collect();
        let current = self.current_states(&mut report, None)?;
        let t = self.turn(turn)?;
        // A path a later turn changed too is a conflict already (above).
        let edited = self.changed_since(&current, &report, |path| {
            t.post(path)
                .filter(|_| !later.contains(path))
                .map(|(_, post)| post)
        });
        if options.keep_conflicts {
            let e: HashSet<RelPath> = edited.iter().map(|c| c.path.clone()).collect();
            report.plan.retain(|s| !e.contains(&s.path));
            report.kept.extend(edited);
        } else {
            report.conflicts.extend(edited);
        }
        report.kept.sort_by(|a, b| a.path.cmp(&b.path));
        report.conflicts.sort_by(|a, b| a.path.cmp(&b.path));
        if options.dry_run {
            return Ok(report);
        }
        self.execute_plan(&mut report, &HashSet::new())?;
        self.append(Op::Revert {
            turn: turn.clone(),
            turn_seq,
            paths: report.paths.clone(),
            saved: report.saved.expect("saved before executing"),
            kept: report.kept.iter().map(|c| c.path.clone()).collect(),
            failed: report.failed.clone(),
        })?;
        Ok(report)
    }

    /// Reverses the last rewind or revert still in effect: files it deleted
    /// come back, files it restored return to the bytes it replaced.
    pub fn undo(&mut self) -> Result<Report> {
        self.reverse(true)
    }

    /// Reverses the last undo.
    pub fn redo(&mut self) -> Result<Report> {
        self.reverse(false)
    }

    fn reverse(&mut self, undo: bool) -> Result<Report> {
        self.reporting(|s| s.holding_dirs(|s| s.reverse_holding(undo)))
    }

    fn reverse_holding(&mut self, undo: bool) -> Result<Report> {
        // No store yet: nothing to reverse (the stacks are empty).
        let _guard = self.begin_restoring(false)?;
        let (stack, nothing) = if undo {
            (
                &self.index.done,
                Error::NothingTo {
                    what: "undo",
                    why: "no rewind or revert is in effect",
                },
            )
        } else {
            (
                &self.index.undone,
                Error::NothingTo {
                    what: "redo",
                    why: "nothing has been undone since the last rewind or revert, or a turn the undone one would end again has changed since (rewind that turn instead)",
                },
            )
        };
        let top = *stack.last().ok_or(nothing)?;
        let report = self.reapply(if undo { "undo" } else { "redo" }, top.op, top.saved)?;
        let saved = report.saved.expect("saved before executing");
        let failed = report.failed.clone();
        self.append(if undo {
            Op::Undo {
                op: top.op,
                saved,
                failed,
            }
        } else {
            Op::Redo {
                op: top.op,
                saved,
                failed,
            }
        })?;
        Ok(report)
    }

    /// Puts back the states held by the `saved` record `saved_seq`.
    fn reapply(&mut self, operation: &'static str, op: u64, saved_seq: u64) -> Result<Report> {
        let states: Vec<FileEntry> = self
            .index
            .saved
            .get(&saved_seq)
            .cloned()
            .unwrap_or_default();
        let info = self.index.ops.get(&op).cloned();
        let steps = steps_from(states.iter().map(|e| (&e.path, &e.pre)), self);
        let turn = info
            .as_ref()
            .map(|i| i.turn.clone())
            .unwrap_or_else(|| TurnId::new("?").expect("valid id"));
        let mut firsts = info.map(|i| i.turns).unwrap_or_default();
        firsts.sort_unstable();
        let mut turns = Vec::with_capacity(firsts.len());
        for first in firsts {
            turns.extend(self.index.turn_at(first)?.map(|t| t.id.clone()));
        }
        let mut report = Report::new(operation, turn, turns, false, steps);
        // Nothing is compared: every file may be kept aside.
        self.current_states(&mut report, Some(&|_| Expect::Nothing))?;
        self.execute_plan(&mut report, &HashSet::new())?;
        self.release_unreplaced(&report);
        Ok(report)
    }

    /// The current state of every path the plan may change (and of the
    /// other names of its hard-linked files): saved durably (not on a dry
    /// run), and returned as hashes, in no particular order.
    /// A file is read and hashed unless `expect` says what of it the
    /// operation needs can be had without (every file is, when `expect` is
    /// `None`); the others may be kept aside unread (see `aside.rs`).
    fn current_states(
        &mut self,
        report: &mut Report,
        expect: Option<&dyn Fn(&RelPath) -> Expect>,
    ) -> Result<States> {
        let paths = touched_paths(&report.plan);
        if report.dry_run {
            return Ok(States::Hashed(self.hash_states(&paths, false)?));
        }
        // An operation interrupted before its record was rolled back when
        // the lock was taken (see `journal/rollback.rs`): the states saved here are
        // the folder as it was before that operation began. A small one
        // reads its few files (see `aside::AT_LEAST`).
        let expect = expect.filter(|_| report.plan.len() >= crate::aside::AT_LEAST);
        let seq = self.save_states(&paths, expect)?;
        report.saved = Some(seq);
        Ok(States::Saved(seq))
    }

    /// The paths among `states` that the plan of `report` changes and that
    /// hold other bytes than the agent left (`post_of` gives what it left,
    /// as recorded; a post-image not hashed compares with nothing): each a
    /// conflict, changed since the agent's turn.
    fn changed_since<'p>(
        &self,
        states: &States,
        report: &Report,
        post_of: impl Fn(&RelPath) -> Option<&'p Post>,
    ) -> Vec<Conflict> {
        self.states(states)
            .filter(|(path, now)| {
                post_of(path).is_some_and(|post| post != now && !matches!(post, Post::Other))
                    && report.step(path).is_some_and(|s| !holds_already(s, now))
            })
            .map(|(path, _)| Conflict {
                path: path.clone(),
                reason: "changed since the agent's turn (by you, an editor or another tool)".into(),
                detail: None,
            })
            .collect()
    }

    /// The states of `states`, as hashes: read in place from the index's
    /// saved record (not copied: a rewind may save 100,000).
    fn states<'a>(
        &'a self,
        states: &'a States,
    ) -> Box<dyn Iterator<Item = (&'a RelPath, Post)> + 'a> {
        match states {
            States::Hashed(v) => Box::new(v.iter().map(|e| (&e.path, e.post.clone()))),
            States::Saved(seq) => Box::new(
                self.index
                    .saved
                    .get(seq)
                    .into_iter()
                    .flatten()
                    .map(|e| (&e.path, post_of(&e.pre))),
            ),
        }
    }

    /// A three-way explanation of a revert conflict.
    fn explain(&self, t: &Turn, path: &RelPath, later: &[(&Turn, u64)]) -> String {
        let pre = t
            .files
            .iter()
            .find(|c| &c.entry.path == path)
            .map(|c| &c.entry.pre);
        let after_t = later
            .iter()
            .min_by_key(|(_, seq)| *seq)
            .and_then(|(o, _)| o.files.iter().find(|c| &c.entry.path == path))
            .map(|c| &c.entry.pre);
        let mut out = format!(
            "turn {} changed {path}; then {} changed it again.\n",
            t.id,
            later
                .iter()
                .map(|(o, _)| format!("turn {}", o.id))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let bytes = |pre: Option<&Pre>| -> Option<Vec<u8>> {
            match pre? {
                Pre::File { blob, size, .. } if *size <= 256 * 1024 => self.read_blob(blob).ok(),
                Pre::Absent => Some(Vec::new()),
                _ => None,
            }
        };
        let now = std::fs::read(self.place.root.join(path.as_path())).ok();
        let diff = |a: &[u8], b: &[u8], from: &str, to: &str| -> String {
            match (std::str::from_utf8(a), std::str::from_utf8(b)) {
                (Ok(a), Ok(b)) => similar::TextDiff::from_lines(a, b)
                    .unified_diff()
                    .context_radius(2)
                    .header(from, to)
                    .to_string(),
                _ => format!("(binary: {} bytes -> {} bytes)\n", a.len(), b.len()),
            }
        };
        match (bytes(pre), bytes(after_t)) {
            (Some(a), Some(b)) => {
                out.push_str(&format!("What turn {} changed:\n", t.id));
                out.push_str(&diff(&a, &b, "before", &format!("after turn {}", t.id)));
                if let Some(n) = &now {
                    out.push_str("What came after:\n");
                    out.push_str(&diff(&b, n, &format!("after turn {}", t.id), "now"));
                }
            }
            _ => out.push_str("(contents too large or not text to show)\n"),
        }
        out
    }

    /// Removes the store's name of every file the operation kept aside but
    /// neither replaced nor removed (a path that failed, say): no project
    /// file keeps a second name, and a kept file that is gone tells undo
    /// and rollback that the path was left as it was (see `aside.rs`).
    fn release_unreplaced(&self, report: &Report) {
        let Some(seq) = report.saved else {
            return;
        };
        let done: HashSet<&RelPath> = report.restored.iter().chain(&report.deleted).collect();
        let states = self.index.saved.get(&seq).into_iter().flatten();
        let mut buckets = crate::aside::Buckets::default();
        for e in states {
            if let Pre::Aside { n, .. } = e.pre
                && !done.contains(&e.path)
            {
                // Best effort: a name left is removed with its record.
                let _ = buckets.remove(&self.place.dirs().store, seq, n);
            }
        }
        let _ = buckets.sync();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(path: &str, action: Action) -> Step {
        Step {
            path: RelPath::parse(path).expect("valid"),
            action,
        }
    }

    /// A file kept aside whose step did not run (a conflict left as it is,
    /// a path that failed) loses its store name once the operation is
    /// done: no project file keeps a second one.
    #[cfg(unix)]
    #[test]
    fn a_kept_file_whose_path_was_not_replaced_loses_its_store_name()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        use std::fs;
        use std::os::unix::fs::MetadataExt;
        // Enough paths for the operation to keep files aside.
        let names = ["a.txt", "b.txt", "c.txt", "d.txt"];
        assert!(names.len() >= crate::aside::AT_LEAST);
        let files: Vec<(&str, &str)> = names.iter().map(|n| (*n, *n)).collect();
        let project = crate::test_project::Beside::new(&files)?;
        let root = &project.root;
        let mut store = project.open()?;
        let t = TurnId::new("t1")?;
        store.capture_many(&t, None, &names)?;
        for name in names {
            fs::write(root.join(name), format!("agent {name}"))?;
        }
        let _guard = store.begin_mutation()?;
        let plan = store.plan_rewind(&t)?;
        let mut report = Report::new("rewind", t.clone(), plan.turns, false, plan.steps);
        store.current_states(&mut report, Some(&|_| Expect::Nothing))?;
        assert_eq!(fs::metadata(root.join("a.txt"))?.nlink(), 2, "not kept");
        let skip: HashSet<RelPath> = [RelPath::parse("a.txt")?].into();
        store.execute_plan(&mut report, &skip)?;
        store.release_unreplaced(&report);
        assert_eq!(fs::read(root.join("a.txt"))?, b"agent a.txt");
        assert_eq!(fs::metadata(root.join("a.txt"))?.nlink(), 1);
        assert_eq!(fs::read(root.join("b.txt"))?, b"b.txt");
        // The others' replaced files stay kept, and only they.
        let seq = report.saved.ok_or("nothing saved")?;
        let bucket = store.store_dir().join(format!("aside/{seq}/0"));
        let mut kept: Vec<Vec<u8>> = fs::read_dir(&bucket)?
            .map(|e| fs::read(e?.path()))
            .collect::<std::io::Result<_>>()?;
        kept.sort();
        assert_eq!(
            kept,
            [
                b"agent b.txt".to_vec(),
                b"agent c.txt".to_vec(),
                b"agent d.txt".to_vec()
            ]
        );
        Ok(())
    }

    /// A file's look is recorded with its hash only when its `ctime` is
    /// before the file system's clock read first.
    #[test]
    fn a_files_look_is_kept_only_when_its_ctime_is_before_the_clock()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let project = crate::test_project::Beside::new(&[("a.txt", "a\n")])?;
        let root = &project.root;
        let store = project.open()?;
        let rels = [RelPath::parse("a.txt")?];
        let (_, keys) = store.hash_entries(&rels, Some(i64::MIN))?;
        assert!(keys.is_empty(), "{keys:?}");
        let (_, keys) = store.hash_entries(&rels, None)?;
        assert!(keys.is_empty(), "{keys:?}");
        let (entries, keys) = store.hash_entries(&rels, Some(i64::MAX))?;
        let key = keys.get(&0).ok_or("no key")?;
        let meta = std::fs::symlink_metadata(root.join("a.txt"))?;
        assert_eq!(key.size, meta.len());
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            assert_eq!(key.ino, meta.ino());
        }
        assert!(matches!(entries[0].pre, Pre::File { .. }));
        Ok(())
    }

    #[test]
    fn touched_paths_lists_each_path_and_ancestor_once() {
        let mut plan = vec![
            step("a", Action::MakeDir { mode: 0o755 }),
            step("a/b/c.txt", Action::Delete),
            step("a/b/c/x", Action::Delete),
            step("a/b/d", Action::Delete),
            step("e/f", Action::Delete),
        ];
        plan.sort_by(|x, y| x.path.cmp(&y.path));
        let got: Vec<String> = touched_paths(&plan).iter().map(|p| p.to_string()).collect();
        let mut sorted = got.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(got.len(), sorted.len(), "a path listed twice: {got:?}");
        assert_eq!(
            sorted,
            [
                "a",
                "a/b",
                "a/b/c",
                "a/b/c.txt",
                "a/b/c/x",
                "a/b/d",
                "e",
                "e/f"
            ]
        );
    }
}
