//! Rewinds: planning and applying the return of a folder to its state
//! before a turn.
//!
//! `rewind T` undoes turn T and every later turn (undoing T alone would
//! leave a combination of files that never existed). For a path captured in
//! several of those turns the oldest pre-image wins. The plan is built and
//! every path and blob id checked before anything is written; the
//! application then goes, per path:
//!
//! 1. each file to restore is decompressed into a temporary file beside its
//!    target while being re-hashed; a blob that does not match its id is
//!    never renamed into place;
//! 2. one `syncfs` makes all of those temporary files durable;
//! 3. paths that were absent are removed, deepest first (a directory only
//!    when empty: nothing turnback did not capture is ever deleted);
//! 4. the temporary files are renamed over their targets, shallowest first,
//!    then symlinks are created, last;
//! 5. a second `syncfs`, then the `rewind` record is appended, which ends the
//!    rewound turns: rewinding to the same point again reports that there is
//!    nothing to rewind.
//!
//! Every directory is reached from the root one component at a time without
//! following symlinks (see [`crate::fsx`]). A crash before step 5 leaves the
//! turns live; running the rewind again finishes it.

use std::collections::{HashMap, HashSet};
use std::io::{BufWriter, Write};
use std::os::fd::OwnedFd;

use serde::Serialize;

use crate::error::{Error, IoResultExt, Result};
use crate::fsx::{self, Node};
use crate::id::{BlobId, TurnId};
use crate::log::{FailedPath, Op, Pre};
use crate::path::RelPath;
use crate::store::Store;

/// Options of a rewind.
#[derive(Debug, Clone, Default)]
pub struct RewindOptions {
    /// Only build and return the plan.
    pub dry_run: bool,
}

/// What a rewind does (or would do) to one path.
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
    },
    /// Re-create a symlink.
    RestoreSymlink {
        /// Where it points.
        target: String,
    },
    /// Remove what is there (it did not exist before the turn).
    Delete,
    /// The pre-image was not saved.
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

/// The outcome of a rewind.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The turn named.
    pub turn: TurnId,
    /// Every turn undone, oldest first.
    pub turns: Vec<TurnId>,
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// The plan, one step per path.
    pub plan: Vec<Step>,
    /// Files and symlinks written back.
    pub restored: Vec<RelPath>,
    /// Paths removed because they did not exist before.
    pub deleted: Vec<RelPath>,
    /// Paths that were to be removed but were already gone.
    pub already_absent: Vec<RelPath>,
    /// Paths that could not be restored, with the reason.
    pub failed: Vec<FailedPath>,
}

impl Report {
    /// Whether every path was restored.
    pub fn complete(&self) -> bool {
        self.failed.is_empty()
    }
}

impl Store {
    /// Builds the plan for rewinding `turn` and every later turn.
    pub fn plan_rewind(&self, turn: &TurnId) -> Result<(u64, Vec<TurnId>, Vec<Step>)> {
        let first = self.turn(turn)?.first_seq;
        let turns: Vec<_> = self
            .index
            .turns
            .iter()
            .filter(|t| t.first_seq >= first)
            .collect();
        let mut oldest: HashMap<&RelPath, (u64, &Pre)> = HashMap::new();
        for t in &turns {
            for c in &t.files {
                let e = oldest.entry(&c.entry.path).or_insert((c.seq, &c.entry.pre));
                if c.seq < e.0 {
                    *e = (c.seq, &c.entry.pre);
                }
            }
        }
        let mut steps: Vec<Step> = oldest
            .into_iter()
            .map(|(path, (_, pre))| Step {
                path: path.clone(),
                action: match pre {
                    Pre::File { blob, size, mode } => {
                        if self.index.blobs.contains_key(blob) {
                            Action::Restore {
                                blob: *blob,
                                size: *size,
                                mode: *mode,
                            }
                        } else {
                            Action::CannotRestore {
                                reason: format!("its blob {blob} is not in the store"),
                            }
                        }
                    }
                    Pre::Symlink { target } => Action::RestoreSymlink {
                        target: target.clone(),
                    },
                    Pre::Absent => Action::Delete,
                    Pre::Skipped { reason, .. } => Action::CannotRestore {
                        reason: format!("it was not saved at capture: {reason}"),
                    },
                },
            })
            .collect();
        // A directory recorded as absent that must hold a restored path is kept.
        let needed: Vec<RelPath> = steps
            .iter()
            .filter(|s| !matches!(s.action, Action::Delete))
            .map(|s| s.path.clone())
            .collect();
        steps.retain(|s| {
            !matches!(s.action, Action::Delete)
                || !needed
                    .iter()
                    .any(|n| n != &s.path && n.starts_with(&s.path))
        });
        steps.sort_by(|a, b| a.path.cmp(&b.path));
        Ok((first, turns.iter().map(|t| t.id.clone()).collect(), steps))
    }

    /// Rewinds the project to its state before `turn`, undoing it and every
    /// later turn.
    pub fn rewind(&mut self, turn: &TurnId, options: &RewindOptions) -> Result<Report> {
        let guard = if options.dry_run {
            None
        } else {
            Some(self.begin_mutation()?)
        };
        let (from_seq, turns, plan) = self.plan_rewind(turn)?;
        let mut report = Report {
            turn: turn.clone(),
            turns,
            dry_run: options.dry_run,
            plan,
            restored: Vec::new(),
            deleted: Vec::new(),
            already_absent: Vec::new(),
            failed: Vec::new(),
        };
        if options.dry_run {
            return Ok(report);
        }
        self.apply(&mut report)?;
        self.append(Op::Rewind {
            turn: turn.clone(),
            from_seq,
            failed: report.failed.clone(),
        })?;
        drop(guard);
        Ok(report)
    }

    fn apply(&self, report: &mut Report) -> Result<()> {
        let mut dirs = DirCache::new(self)?;
        let fail = |failed: &mut Vec<FailedPath>, path: &RelPath, reason: String| {
            failed.push(FailedPath {
                path: path.clone(),
                reason,
            });
        };
        let mut restores: Vec<(&Step, u64)> = Vec::new();
        let mut links: Vec<(&Step, &str)> = Vec::new();
        let mut deletes: Vec<&Step> = Vec::new();
        for step in &report.plan {
            match &step.action {
                Action::Restore { size, .. } => restores.push((step, *size)),
                Action::RestoreSymlink { target } => links.push((step, target)),
                Action::Delete => deletes.push(step),
                Action::CannotRestore { reason } => {
                    fail(&mut report.failed, &step.path, reason.clone())
                }
            }
        }
        // 1. Temporary files, verified.
        let mut staged: Vec<(&RelPath, String)> = Vec::new();
        let mut packs: HashMap<String, std::fs::File> = HashMap::new();
        for (step, _) in &restores {
            let Action::Restore { blob, mode, .. } = &step.action else {
                continue;
            };
            match self.stage(&mut dirs, &mut packs, &step.path, blob, *mode) {
                Ok(tmp) => staged.push((&step.path, tmp)),
                Err(reason) => fail(&mut report.failed, &step.path, reason),
            }
        }
        // 2. Their bytes are durable before any of them replaces a file.
        if let Err(e) = fsx::syncfs(&self.root_fd).ctx("sync the file system of", &self.root) {
            for (path, tmp) in &staged {
                if let Ok(Some(d)) = dirs.parent(path, false) {
                    let _ = fsx::unlink(d, tmp);
                }
            }
            return Err(e);
        }
        // 3. Removals, deepest first.
        deletes.sort_by_key(|s| std::cmp::Reverse(s.path.depth()));
        for step in deletes {
            match self.remove(&mut dirs, &step.path) {
                Ok(true) => report.deleted.push(step.path.clone()),
                Ok(false) => report.already_absent.push(step.path.clone()),
                Err(reason) => fail(&mut report.failed, &step.path, reason),
            }
        }
        // 4. Renames, shallowest first; symlinks last.
        staged.sort_by_key(|(p, _)| p.depth());
        for (path, tmp) in staged {
            match self.put(&mut dirs, path, |d, name| {
                fsx::rename(d, &tmp, name).map_err(|e| e.to_string())
            }) {
                Ok(()) => report.restored.push(path.clone()),
                Err(reason) => {
                    if let Ok(Some(d)) = dirs.parent(path, false) {
                        let _ = fsx::unlink(d, &tmp);
                    }
                    fail(&mut report.failed, path, reason);
                }
            }
        }
        for (step, target) in links {
            let path = &step.path;
            let made = self.put(&mut dirs, path, |d, name| {
                let tmp = fsx::temp_name(name);
                fsx::symlink(d, target, &tmp).map_err(|e| e.to_string())?;
                fsx::rename(d, &tmp, name).map_err(|e| {
                    let _ = fsx::unlink(d, &tmp);
                    e.to_string()
                })
            });
            match made {
                Ok(()) => report.restored.push(path.clone()),
                Err(reason) => fail(&mut report.failed, path, reason),
            }
        }
        // 5. The new directory entries are durable before the record.
        fsx::syncfs(&self.root_fd).ctx("sync the file system of", &self.root)?;
        report.restored.sort();
        report.failed.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(())
    }

    /// Decompresses and verifies a blob into a temporary file beside `path`.
    fn stage(
        &self,
        dirs: &mut DirCache,
        packs: &mut HashMap<String, std::fs::File>,
        path: &RelPath,
        blob: &BlobId,
        mode: u32,
    ) -> Result<String, String> {
        let loc = self
            .index
            .blobs
            .get(blob)
            .ok_or("its blob is not in the store")?;
        if !packs.contains_key(&loc.pack) {
            let f = self.open_pack(&loc.pack).map_err(|e| e.to_string())?;
            packs.insert(loc.pack.clone(), f);
        }
        let pack = &packs[&loc.pack];
        let dir = dirs
            .parent(path, true)
            .map_err(|e| e.to_string())?
            .ok_or("its directory cannot be created")?;
        let (file, tmp) = fsx::create_temp(dir, path.file_name(), mode)
            .map_err(|e| format!("cannot create a temporary file: {e}"))?;
        let mut w = BufWriter::with_capacity(256 * 1024, file);
        let res = crate::pack::read_blob(pack, blob, loc, &mut w)
            .map_err(|e| e.to_string())
            .and_then(|()| w.flush().map_err(|e| format!("cannot write: {e}")));
        match res {
            Ok(()) => Ok(tmp),
            Err(reason) => {
                let _ = fsx::unlink(dir, &tmp);
                Err(reason)
            }
        }
    }

    /// Removes `path` (a file, symlink, or empty directory). `Ok(false)` when
    /// it was already absent.
    fn remove(&self, dirs: &mut DirCache, path: &RelPath) -> Result<bool, String> {
        let Some(dir) = dirs.parent(path, false).map_err(|e| e.to_string())? else {
            return Ok(false);
        };
        let name = path.file_name();
        match fsx::node_at(dir, name).map_err(|e| e.to_string())? {
            Node::Missing => Ok(false),
            Node::Dir => match fsx::rmdir(dir, name) {
                Ok(()) => Ok(true),
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTEMPTY.raw_os_error()) => Err(
                    "the turn created this directory, but it now holds files no rewound turn captured; left in place"
                        .into(),
                ),
                Err(e) => Err(e.to_string()),
            },
            _ => fsx::unlink(dir, name).map(|()| true).map_err(|e| e.to_string()),
        }
    }

    /// Puts a new entry at `path` with `make`, first removing an empty
    /// directory that stands there.
    fn put(
        &self,
        dirs: &mut DirCache,
        path: &RelPath,
        make: impl FnOnce(&OwnedFd, &str) -> Result<(), String>,
    ) -> Result<(), String> {
        let dir = dirs
            .parent(path, true)
            .map_err(|e| e.to_string())?
            .ok_or("its directory cannot be created")?;
        let name = path.file_name();
        if fsx::node_at(dir, name).map_err(|e| e.to_string())? == Node::Dir {
            fsx::rmdir(dir, name).map_err(|e| {
                format!("a directory stands in its place and cannot be removed: {e}")
            })?;
        }
        make(dir, name)
    }
}

/// Directory handles reached from the root without following symlinks,
/// cached by path for the length of one rewind.
struct DirCache {
    root: OwnedFd,
    open: HashMap<String, OwnedFd>,
    missing: HashSet<String>,
}

impl DirCache {
    fn new(store: &Store) -> Result<Self> {
        Ok(DirCache {
            root: rustix::io::dup(&store.root_fd).ctx("open", &store.root)?,
            open: HashMap::new(),
            missing: HashSet::new(),
        })
    }

    /// The directory holding `path`; with `create`, missing directories are
    /// made. `Ok(None)` when it does not exist and `create` is false.
    fn parent(&mut self, path: &RelPath, create: bool) -> Result<Option<&OwnedFd>, Error> {
        let Some(parent) = path.parent() else {
            return Ok(Some(&self.root));
        };
        let key = parent.as_str().to_owned();
        if !self.open.contains_key(&key) {
            if !create && self.missing.contains(&key) {
                return Ok(None);
            }
            let mut cur = rustix::io::dup(&self.root).ctx("open", parent.as_str())?;
            for (i, comp) in parent.components().enumerate() {
                let shown = || {
                    parent
                        .components()
                        .take(i + 1)
                        .collect::<Vec<_>>()
                        .join("/")
                };
                let next = if create {
                    Some(
                        fsx::ensure_subdir(&cur, comp)
                            .ctx("open directory", shown())?
                            .0,
                    )
                } else {
                    fsx::open_subdir(&cur, comp).ctx("open directory", shown())?
                };
                match next {
                    Some(n) => cur = n,
                    None => {
                        self.missing.insert(key);
                        return Ok(None);
                    }
                }
            }
            self.missing.remove(&key);
            self.open.insert(key.clone(), cur);
        }
        Ok(self.open.get(&key))
    }
}
