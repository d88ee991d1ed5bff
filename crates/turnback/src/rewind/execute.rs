//! Executing a plan: the entries of the project put back as its steps say
//! (see the module doc of [`super`]).

use std::collections::{HashMap, HashSet};

use super::{Action, Note, Report, Step};
use crate::dirstack::{DirStack, Reach};
use crate::durable::{DirsToSync, Durability};
use crate::error::{Error, IoResultExt, Result};
use crate::fsx::{self, Node};
use crate::lift::Lifts;
use crate::links;
use crate::log::{FailedPath, Pre};
use crate::path::RelPath;
use crate::restore;
use crate::store::Store;
use crate::sys::OwnedFd;

impl Store {
    /// Applies the report's plan but its steps on the paths in `skip`
    /// (after the current states were saved). The plan is lent, not copied:
    /// it holds a step per path, and a rewind may name 100,000.
    pub(crate) fn execute_plan(&self, report: &mut Report, skip: &HashSet<RelPath>) -> Result<()> {
        let plan = std::mem::take(&mut report.plan);
        let steps = plan.iter().filter(|s| !skip.contains(&s.path));
        let result = self.execute(steps, report);
        report.plan = plan;
        result
    }

    /// Applies `steps`, sorted by path: [`Execution`], phase by phase.
    fn execute<'s>(
        &'s self,
        steps: impl Iterator<Item = &'s Step>,
        report: &mut Report,
    ) -> Result<()> {
        let mut x = Execution::new(self, steps, report)?;
        x.clear_blocking();
        x.make_dirs();
        let staged = x.stage()?;
        x.delete();
        x.rename(&staged);
        drop(staged);
        x.relink();
        x.put_specials();
        x.finish_modes();
        x.make_durable()
    }

    /// Once every entry is in place: lifted directories get their modes
    /// back, then each directory of the plan its recorded mode, deepest
    /// first.
    fn finish_modes(
        &self,
        dirs: &mut DirCache,
        lifts: &mut Lifts,
        mkdirs: &[(&Step, u32)],
        report: &mut Report,
    ) {
        let deleted: HashSet<&str> = report.deleted.iter().map(|p| p.as_str()).collect();
        let put_back: Vec<(String, Result<String, String>)> = lifts
            .put_back()
            .into_iter()
            // A lifted directory the operation then removed needs no note.
            .filter(|(shown, _)| !deleted.contains(shown.as_str()))
            .collect();
        for (shown, res) in put_back {
            match res {
                Ok(note) => report.notes.push(Note { path: shown, note }),
                Err(reason) => match RelPath::parse(&shown) {
                    Ok(path) => report.failed.push(FailedPath { path, reason }),
                    Err(_) => report.notes.push(Note {
                        path: shown,
                        note: reason,
                    }),
                },
            }
        }
        let failed: HashSet<RelPath> = report.failed.iter().map(|f| f.path.clone()).collect();
        for (step, mode) in mkdirs.iter().rev() {
            if failed.contains(&step.path) {
                continue;
            }
            match set_dir_mode(dirs, &step.path, *mode) {
                Ok(true) => report.restored.push(step.path.clone()),
                Ok(false) => {}
                Err(reason) => report.failed.push(FailedPath {
                    path: step.path.clone(),
                    reason,
                }),
            }
        }
    }

    /// Removes `path` (a file, symlink, or empty directory). `Ok(false)` when
    /// it was already absent.
    /// With `flush`, a directory is `fsync`ed before it is removed (see
    /// [`fsx::rmdir_flushed`]).
    fn remove(&self, dirs: &mut DirCache, path: &RelPath, flush: bool) -> Result<bool, String> {
        // A handle held to a directory keeps it listed in its parent on
        // Windows until closed; removals go deepest first, so this is the
        // last use of its own handle.
        dirs.close(path);
        let Some(dir) = dirs.parent(path, false).map_err(|e| e.to_string())? else {
            return Ok(false);
        };
        let name = path.file_name();
        match fsx::node_at(dir, name).map_err(|e| e.to_string())? {
            Node::Missing => Ok(false),
            Node::Dir => {
                let not_empty = |e: &std::io::Error| {
                    e.raw_os_error() == Some(crate::sys::Errno::NOTEMPTY.raw_os_error())
                };
                let mut removed = fsx::rmdir_flushed(dir, name, flush);
                // A temporary file a killed process left in it (a `write`
                // killed before its rename) is no one's file: swept, and
                // the directory goes as planned.
                if removed.as_ref().is_err_and(not_empty)
                    && let Ok(Some(inner)) = fsx::open_subdir(dir, name)
                {
                    fsx::sweep_stale_temps(&inner);
                    drop(inner);
                    removed = fsx::rmdir_flushed(dir, name, flush);
                }
                match removed {
                    Ok(()) => Ok(true),
                    Err(e) if not_empty(&e) => Err(
                        "this directory did not exist before, but it now holds files no rewound turn captured; left in place"
                            .into(),
                    ),
                    Err(e) => Err(e.to_string()),
                }
            }
            _ => fsx::unlink(dir, name)
                .map(|()| true)
                .map_err(|e| e.to_string()),
        }
    }

    /// Makes the directory `path` unless one is there (its owner may write
    /// it until [`set_dir_mode`] gives it `mode`). `Ok(true)` if made.
    fn make_dir(&self, dirs: &mut DirCache, path: &RelPath, mode: u32) -> Result<bool, String> {
        let dir = dirs
            .parent(path, true)
            .map_err(|e| e.to_string())?
            .ok_or("its parent directory cannot be created")?;
        let name = path.file_name();
        match fsx::node_at(dir, name).map_err(|e| e.to_string())? {
            Node::Dir => return Ok(false),
            Node::Missing => {}
            // Its current bytes are in the operation's saved record.
            _ => fsx::unlink(dir, name).map_err(|e| e.to_string())?,
        }
        fsx::mkdir_owner_writable(dir, name, mode).map_err(|e| e.to_string())?;
        Ok(true)
    }

    /// Puts a symlink or a FIFO at `path`: made under a temporary name,
    /// then renamed over what is there.
    fn put_special(
        &self,
        dirs: &mut DirCache,
        path: &RelPath,
        what: &Special,
    ) -> Result<(), String> {
        self.put(dirs, path, |d, name| {
            let tmp = fsx::temp_name(name);
            match what {
                Special::Link(target) => fsx::symlink(d, target, &tmp),
                Special::Fifo(mode) => fsx::mkfifo(d, &tmp, *mode),
            }
            .map_err(|e| {
                let _ = fsx::unlink(d, &tmp);
                e.to_string()
            })?;
            fsx::rename(d, &tmp, name).map_err(|e| {
                let _ = fsx::unlink(d, &tmp);
                e.to_string()
            })
        })
    }

    /// Puts a new entry at `path` with `make`, first removing an empty
    /// directory that stands there.
    fn put(
        &self,
        dirs: &mut DirCache,
        path: &RelPath,
        make: impl FnOnce(&OwnedFd, &std::ffi::OsStr) -> Result<(), String>,
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

/// The application of a plan's steps (step 4 of the module doc of
/// [`super`]), one method per phase, called in the order they are written
/// here by [`Store::execute`]. It holds what one phase leaves the next:
/// the directory handles, the directories lifted writable, the steps by
/// kind. A path that fails in a phase goes to the report's `failed` and
/// no later phase touches it; an error stops the whole execution.
struct Execution<'s, 'r> {
    store: &'s Store,
    report: &'r mut Report,
    dirs: DirCache,
    lifts: Lifts,
    /// Every step whose directory could be made writable.
    steps: Vec<&'s Step>,
    restores: Vec<&'s Step>,
    links: Vec<(&'s Step, &'s str)>,
    mkdirs: Vec<(&'s Step, u32)>,
    fifos: Vec<(&'s Step, u32)>,
    deletes: Vec<&'s Step>,
    durability: Durability,
}

impl<'s, 'r> Execution<'s, 'r> {
    /// Lifts the directories the steps change (a path whose directory
    /// cannot be made writable fails) and sorts the steps by kind.
    fn new(
        store: &'s Store,
        steps: impl Iterator<Item = &'s Step>,
        report: &'r mut Report,
    ) -> Result<Self> {
        let dirs = DirCache::new(store)?;
        let mut lifts = Lifts::default();
        let failed_before = report.failed.len();
        let steps = writable_steps(store, &mut lifts, steps, report)?;
        // Every step of the plan: those whose directory cannot be written
        // are done (failed) already.
        let not_writable = report.failed.len() - failed_before;
        if let Some(p) = &store.progress {
            p.changing((steps.len() + not_writable) as u64);
            p.changed(not_writable as u64);
        }
        let mut x = Execution {
            store,
            report,
            dirs,
            lifts,
            steps: Vec::new(),
            restores: Vec::new(),
            links: Vec::new(),
            mkdirs: Vec::new(),
            fifos: Vec::new(),
            deletes: Vec::new(),
            durability: Durability::PerFile,
        };
        for step in steps.iter().copied() {
            match &step.action {
                Action::Restore { .. } | Action::RestoreKept { .. } => x.restores.push(step),
                Action::RestoreSymlink { target } => x.links.push((step, target)),
                Action::MakeDir { mode } => x.mkdirs.push((step, *mode)),
                Action::MakeFifo { mode } => x.fifos.push((step, *mode)),
                Action::Delete => x.deletes.push(step),
                Action::CannotRestore { reason } => {
                    x.fail(&step.path, reason.clone());
                    x.done(1);
                }
            }
        }
        x.durability = Durability::for_files(x.restores.len() + x.links.len() + x.fifos.len());
        x.steps = steps;
        Ok(x)
    }

    fn fail(&mut self, path: &RelPath, reason: String) {
        self.report.failed.push(FailedPath {
            path: path.clone(),
            reason,
        });
    }

    /// `paths` more steps are done (see [`crate::Progress::changed`]).
    fn done(&self, paths: usize) {
        if let Some(p) = &self.store.progress {
            p.changed(paths as u64);
        }
    }

    fn per_file(&self) -> bool {
        self.durability == Durability::PerFile
    }

    /// A path recorded as absent that must now hold restored paths (a
    /// file that replaced a directory): a file or symlink standing there
    /// goes first, so the directory can be made; a directory stays.
    fn clear_blocking(&mut self) {
        let needed: HashSet<RelPath> = self
            .steps
            .iter()
            .filter(|s| !matches!(s.action, Action::Delete | Action::CannotRestore { .. }))
            .flat_map(|s| s.path.ancestors())
            .collect();
        let (blocking, deletes): (Vec<&Step>, Vec<&Step>) = std::mem::take(&mut self.deletes)
            .into_iter()
            .partition(|s| needed.contains(&s.path));
        self.deletes = deletes;
        for step in blocking {
            self.done(1);
            let Ok(Some(d)) = self.dirs.parent(&step.path, false) else {
                continue;
            };
            let name = step.path.file_name();
            let done = match fsx::node_at(d, name) {
                Ok(Node::Dir) | Ok(Node::Missing) => Ok(false),
                Ok(_) => fsx::unlink(d, name).map(|()| true),
                Err(e) => Err(e),
            };
            match done {
                Ok(true) => self.report.deleted.push(step.path.clone()),
                Ok(false) => {}
                Err(e) => self.fail(&step.path, e.to_string()),
            }
        }
    }

    /// Directories, shallowest first, before anything goes in them; their
    /// exact modes are set once they are filled ([`Self::finish_modes`]).
    fn make_dirs(&mut self) {
        self.mkdirs.sort_by_key(|(s, _)| s.path.depth());
        for k in 0..self.mkdirs.len() {
            let (step, mode) = self.mkdirs[k];
            self.done(1);
            match self.store.make_dir(&mut self.dirs, &step.path, mode) {
                Ok(true) => self.report.restored.push(step.path.clone()),
                Ok(false) => {}
                Err(reason) => self.fail(&step.path, reason),
            }
        }
    }

    /// Temporary files, verified: packs are opened first, then the blobs
    /// (and kept files) are decompressed on every core, directory by
    /// directory in path order (see `restore.rs`); then they are made
    /// durable, before any of them replaces a file.
    fn stage(&mut self) -> Result<Vec<restore::Staged<'s>>> {
        let store = self.store;
        let mut packs: HashMap<String, std::fs::File> = HashMap::new();
        let mut buckets = restore::Buckets::default();
        let mut jobs: Vec<restore::Job<'s>> = Vec::with_capacity(self.restores.len());
        for k in 0..self.restores.len() {
            let step = self.restores[k];
            let (blob, mode) = match &step.action {
                Action::Restore { blob, mode, .. } => (blob, *mode),
                Action::RestoreKept { seq, n, mode, .. } => {
                    // Gone (its bucket or itself): the operation that kept
                    // it left the path as it was, and so does this one (no
                    // directory made for it).
                    let there = match buckets.reach(&store.place.dirs().store, *seq, *n) {
                        Ok(b) => b.is_some_and(|b| {
                            matches!(fsx::lstat_at(b, n.to_string().as_str()), Ok(Some(_)))
                        }),
                        Err(err) => {
                            let reason =
                                format!("cannot open the files kept for it in the store: {err}");
                            self.fail(&step.path, reason);
                            self.done(1);
                            continue;
                        }
                    };
                    if there {
                        let source = restore::Source::Kept { seq: *seq, n: *n };
                        jobs.push((&step.path, source, *mode));
                    } else {
                        self.done(1);
                    }
                    continue;
                }
                _ => continue,
            };
            let ready = store
                .index
                .blobs
                .get(blob)
                .ok_or_else(|| "its blob is not in the store".to_string())
                .and_then(|loc| {
                    if !packs.contains_key(&*loc.pack) {
                        let f = store.open_pack(&loc.pack).map_err(|e| e.to_string())?;
                        packs.insert(loc.pack.to_string(), f);
                    }
                    Ok(())
                });
            match ready {
                Ok(()) => jobs.push((&step.path, restore::Source::Blob(blob), mode)),
                Err(reason) => {
                    self.fail(&step.path, reason);
                    self.done(1);
                }
            }
        }
        let per_file = self.per_file();
        let report = &mut *self.report;
        let staged = store.stage_all(
            &packs,
            &buckets,
            &jobs,
            per_file,
            &mut report.failed,
            &mut report.warnings,
        )?;
        drop(packs);
        drop(buckets);
        let flushed = if per_file {
            fsx::commit_queued(&store.place.root_fd)
                .ctx("flush the staged files of", &store.place.root)
        } else {
            fsx::syncfs(&store.place.root_fd).ctx("sync the file system of", &store.place.root)
        };
        if let Err(e) = flushed {
            store.unlink_staged(&staged);
            return Err(e);
        }
        Ok(staged)
    }

    /// Removals, deepest first.
    fn delete(&mut self) {
        let mut deletes = std::mem::take(&mut self.deletes);
        deletes.sort_by_key(|s| std::cmp::Reverse(s.path.depth()));
        let per_file = self.per_file();
        for step in deletes {
            self.done(1);
            match self.store.remove(&mut self.dirs, &step.path, per_file) {
                Ok(true) => self.report.deleted.push(step.path.clone()),
                Ok(false) => self.report.already_absent.push(step.path.clone()),
                Err(reason) => self.fail(&step.path, reason),
            }
        }
    }

    /// The staged files renamed over their paths, in parallel (each waits
    /// on the disk on its own).
    fn rename(&mut self, staged: &[restore::Staged<'s>]) {
        // A handle held to a directory keeps its name taken on Windows even
        // once it is removed: none is held into the renames, which may
        // remove a directory standing where a file goes.
        if crate::sys::HANDLES_KEEP_NAMES {
            self.dirs.close_all();
        }
        // Room for every path at once: grown by doubling, the list of a
        // rewind of 100,000 files took 6 MB for its 2.4.
        self.report.restored.reserve_exact(staged.len());
        // A file kept aside frees nothing when it is replaced: it needs no
        // name in the trash.
        let store = self.store;
        let kept: HashSet<&RelPath> = self
            .report
            .saved
            .and_then(|seq| store.index.saved.get(&seq))
            .into_iter()
            .flatten()
            .filter(|e| matches!(e.pre, Pre::Aside { .. }))
            .map(|e| &e.path)
            .collect();
        for (path, res) in store.rename_all(staged, self.per_file(), &kept) {
            match res {
                Ok(()) => self.report.restored.push(path.clone()),
                Err(reason) => self.fail(path, reason),
            }
        }
    }

    /// Paths that were one file are one file again (see `links.rs`).
    fn relink(&mut self) {
        let (groups, mut splits) = links::plan(self.steps.iter().copied());
        for g in &groups {
            for p in g.paths() {
                let _ = self.dirs.parent(p, false);
            }
        }
        let restored: HashSet<&RelPath> = self.report.restored.iter().collect();
        let dirs = &self.dirs;
        links::relink_groups(&groups, |p| dirs.get(p), &restored, &mut splits);
        self.report.links_split = splits;
    }

    /// Symlinks and FIFOs, last, each made under a temporary name and
    /// renamed into place.
    fn put_specials(&mut self) {
        let specials: Vec<(&Step, Special)> = std::mem::take(&mut self.links)
            .into_iter()
            .map(|(s, target)| (s, Special::Link(target)))
            .chain(
                std::mem::take(&mut self.fifos)
                    .into_iter()
                    .map(|(s, mode)| (s, Special::Fifo(mode))),
            )
            .collect();
        for (step, what) in specials {
            self.done(1);
            match self.store.put_special(&mut self.dirs, &step.path, &what) {
                Ok(()) => self.report.restored.push(step.path.clone()),
                Err(reason) => self.fail(&step.path, reason),
            }
        }
    }

    /// Lifted directories get their modes back, then each directory of the
    /// plan its recorded mode (see [`Store::finish_modes`]).
    fn finish_modes(&mut self) {
        self.store
            .finish_modes(&mut self.dirs, &mut self.lifts, &self.mkdirs, self.report);
    }

    /// The new directory entries and modes are made durable before the
    /// operation's record; the report's lists are put in order.
    fn make_durable(self) -> Result<()> {
        let Execution {
            store,
            report,
            dirs,
            steps,
            durability,
            ..
        } = self;
        drop(dirs);
        match durability {
            Durability::WholeFs => fsx::syncfs(&store.place.root_fd)
                .ctx("sync the file system of", &store.place.root)?,
            Durability::PerFile => {
                let mut to_sync = DirsToSync::default();
                // A step that cannot restore changes no directory (and may
                // name one this platform cannot hold).
                for step in steps
                    .iter()
                    .filter(|s| !matches!(s.action, Action::CannotRestore { .. }))
                {
                    to_sync.entry_of(&step.path);
                    if matches!(step.action, Action::MakeDir { .. }) {
                        to_sync.dir(&step.path);
                    }
                }
                to_sync
                    .sync(&store.place.root_fd)
                    .ctx("flush the directories of", &store.place.root)?;
            }
        }
        // In place: a stable sort would borrow room for half the paths.
        report.restored.sort_unstable();
        report.restored.dedup();
        report.failed.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(())
    }
}

/// An entry made under a temporary name and renamed into place.
enum Special<'a> {
    /// A symlink to this target.
    Link(&'a str),
    /// A FIFO with these mode bits.
    Fifo(u32),
}

/// Gives the directory `path` the mode bits `mode` if it has others.
/// `Ok(true)` if they changed.
fn set_dir_mode(dirs: &mut DirCache, path: &RelPath, mode: u32) -> Result<bool, String> {
    let dir = dirs
        .parent(path, false)
        .map_err(|e| e.to_string())?
        .ok_or("its parent directory is gone")?;
    let name = path.file_name();
    let (st_mode, _) = fsx::mode_owner_at(dir, name).map_err(|e| e.to_string())?;
    if crate::sys::file_type(st_mode) != crate::sys::fs::FileType::Directory {
        return Err("it is no longer a directory".into());
    }
    if st_mode & 0o7777 == mode & 0o7777 {
        return Ok(false);
    }
    fsx::set_mode(dir, name, mode)
        .map(|()| true)
        .map_err(|e| format!("cannot set its mode to {mode:o}: {e}"))
}

/// The steps whose directory this process may write to, each read-only
/// directory it owns made writable for the operation (see
/// [`crate::lift`]); every other step fails with the reason. The steps
/// come sorted by path, so each directory is opened once.
fn writable_steps<'s>(
    store: &Store,
    lifts: &mut Lifts,
    steps: impl Iterator<Item = &'s Step>,
    report: &mut Report,
) -> Result<Vec<&'s Step>> {
    let mut walk = store.place.walk();
    // The upper bound: a filtered plan's length, grown once.
    let (least, most) = steps.size_hint();
    let mut out = Vec::with_capacity(most.unwrap_or(least));
    for step in steps {
        if matches!(step.action, Action::CannotRestore { .. }) {
            out.push(step);
            continue;
        }
        match writable_dir_of(&mut walk, lifts, &step.path) {
            Ok(()) => out.push(step),
            Err(reason) => report.failed.push(FailedPath {
                path: step.path.clone(),
                reason,
            }),
        }
    }
    Ok(out)
}

/// Makes the deepest existing directory on the way to `path` (the one
/// whose entries a step changes; directories made below it are writable)
/// writable, if it is not and this process owns it. A file or symlink on
/// the way (which the plan replaces) counts as missing: what changes is an
/// entry of the directory below it.
fn writable_dir_of(walk: &mut DirStack, lifts: &mut Lifts, path: &RelPath) -> Result<(), String> {
    let parent = crate::dirstack::parent_bytes(path);
    let at = match walk.reach(parent, false).map_err(|e| e.to_string())? {
        Reach::Open(d) => {
            let shown = path
                .parent()
                .map_or(".".to_string(), |p| p.as_str().to_string());
            return lifts.ensure(&shown, d);
        }
        Reach::Missing { at } | Reach::NotDir { at } => at,
    };
    let existing: Vec<&[u8]> = parent.split(|&c| c == b'/').take(at).collect();
    let existing = existing.join(&b'/');
    match walk.reach(&existing, false).map_err(|e| e.to_string())? {
        Reach::Open(d) => {
            let shown = if existing.is_empty() {
                ".".to_string()
            } else {
                RelPath::from_bytes(&existing)
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_else(|_| String::from_utf8_lossy(&existing).into_owned())
            };
            lifts.ensure(&shown, d)
        }
        // Changed while being looked at: the write itself reports it.
        _ => Ok(()),
    }
}

/// Directory handles reached from the root without following symlinks,
/// cached by path for the length of one operation.
struct DirCache {
    root: OwnedFd,
    open: HashMap<Vec<u8>, OwnedFd>,
}

impl DirCache {
    fn new(store: &Store) -> Result<Self> {
        let root = crate::sys::dup(&store.place.root_fd).ctx("open", &store.place.root)?;
        // Temporary files of an operation that was interrupted here.
        fsx::sweep_stale_temps(&root);
        Ok(DirCache {
            root,
            open: HashMap::new(),
        })
    }

    /// Closes every handle held but the root's.
    fn close_all(&mut self) {
        self.open.clear();
    }

    /// Closes the handle held to the directory `dir`, if any.
    fn close(&mut self, dir: &RelPath) {
        self.open.remove(dir.as_bytes());
    }

    /// The directory holding `path`, if [`DirCache::parent`] opened it.
    fn get(&self, path: &RelPath) -> Option<&OwnedFd> {
        match path.parent() {
            None => Some(&self.root),
            Some(p) => self.open.get(p.as_bytes()),
        }
    }

    /// The directory holding `path`; with `create`, missing directories are
    /// made. `Ok(None)` when it does not exist and `create` is false.
    fn parent(&mut self, path: &RelPath, create: bool) -> Result<Option<&OwnedFd>, Error> {
        self.open_dir(path.parent().as_ref(), create)
    }

    /// The directory `dir` (`None`: the root); with `create`, missing
    /// directories are made. `Ok(None)` when it does not exist and `create`
    /// is false.
    fn open_dir(&mut self, dir: Option<&RelPath>, create: bool) -> Result<Option<&OwnedFd>, Error> {
        let Some(parent) = dir else {
            return Ok(Some(&self.root));
        };
        let key = parent.as_bytes().to_owned();
        if !self.open.contains_key(&key) {
            // From the deepest directory already open, one component at a
            // time.
            let ancestors = parent.ancestors();
            let held = ancestors
                .iter()
                .rposition(|a| self.open.contains_key(a.as_bytes()));
            let (mut cur, skip) = match held {
                Some(k) => (
                    crate::sys::dup(&self.open[ancestors[k].as_bytes()])
                        .ctx("open", parent.as_path())?,
                    k + 1,
                ),
                None => (
                    crate::sys::dup(&self.root).ctx("open", parent.as_path())?,
                    0,
                ),
            };
            for (i, comp) in parent.components().enumerate().skip(skip) {
                let shown = || {
                    parent
                        .components()
                        .take(i + 1)
                        .collect::<std::path::PathBuf>()
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
                    None => return Ok(None),
                }
            }
            fsx::sweep_stale_temps(&cur);
            self.open.insert(key.clone(), cur);
        }
        Ok(self.open.get(&key))
    }
}
