//! The store: a directory outside the project (see [`crate::location`] for
//! where, and how the project finds it), holding `log.jsonl` (the index,
//! see [`crate::log`]), `packs/` (the blobs, see [`crate::pack`]), `lock`
//! (see [`crate::lock`]) and `config.toml` (see [`crate::config`]). The
//! user's `.git` is never touched.
//!
//! [`Store`] keeps an in-memory index built from the log and, after taking
//! the lock, reads only the lines appended since, so one capture costs the
//! same in a store of ten records as in one of ten thousand.
//!
//! Its rooms: this one opens the store and holds the lock and the project's
//! directory handles; `log_io` reads the log into the index and appends to
//! it; `capture` looks at paths and stores their pre-images (and the
//! states an operation saves first); `blobs` reads them back. A rewind's
//! plan and its execution are in [`crate::rewind`], the settling of an
//! interrupted one in [`crate::journal`], gc in [`crate::gc`].

use crate::sys::OwnedFd;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::sys::fs::OFlags;
use serde::Serialize;

use crate::aside;
use crate::checkpoint;
use crate::config::{CONFIG_FILE, Config, DEFAULT_CONFIG};
use crate::dirstack::{DirStack, Reach};
use crate::error::{Error, IoResultExt, PathProblem, Result};
use crate::fsx::{self, Node};
use crate::id::{BlobId, TurnId, cut_label};
use crate::index::{Index, Misfit, Turn};
use crate::location::{self, Data, Location};
use crate::lock::{self, LockGuard};
use crate::log::{
    self, FileEntry, LOG_FILE, Op, Post, PostEntry, Pre, Record, StatKey, StoredBlob,
};
use crate::pack::{self, BlobLoc, PackWriter};
use crate::path::{RelPath, STORE_DIR, lexical_components};

mod blobs;
mod capture;
mod log_io;
mod place;

pub use capture::CaptureReport;
pub(crate) use capture::{Expect, post_of};
pub(crate) use log_io::{append_once, append_streamed};
pub(crate) use place::{Dirs, Place};

/// Name of the pack directory inside the store.
pub const PACKS_DIR: &str = "packs";

/// Default cap on the size of a file whose bytes are saved: 1 GiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 30;

/// Settings of a [`Store`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Files larger than this are recorded as skipped, not saved.
    pub max_file_size: u64,
    /// zstd level for new blobs.
    pub compression_level: i32,
    /// How long a mutation waits for another process's lock.
    pub lock_timeout: Duration,
    /// The data directory holding the stores; `None`: `$TURNBACK_DATA_DIR`,
    /// else the platform's (see [`crate::location::data_dir`]).
    pub data_dir: Option<PathBuf>,
    /// An automatic gc that comes due is left for [`Store::maintain`], to
    /// be run once the caller has answered (see [`Store::maintenance_due`]),
    /// instead of by the call that made it due. Off by default: a caller
    /// that never calls `maintain` still has its limits kept.
    pub defer_gc: bool,
    /// The index checkpoint of what this store appended is left for
    /// [`Store::maintain`] (see [`Store::maintenance_due`]) instead of
    /// being written when the store is dropped (see
    /// [`Store::checkpoint_if_behind`]): for a caller that runs
    /// `maintain` once it has answered, off its caller's wait. Off by
    /// default: otherwise the next process to open the store would read
    /// again what this one appended.
    pub defer_checkpoint: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            compression_level: 3,
            lock_timeout: Duration::from_secs(30),
            data_dir: None,
            defer_gc: false,
            defer_checkpoint: false,
        }
    }
}

/// A checkpoint store for one project root.
///
/// Mutating methods take the store lock for their duration; several
/// processes may use one store at once.
pub struct Store {
    /// The project root and the store's directories.
    pub(crate) place: Place,
    /// Where the store is, once there is one.
    location: Option<Location>,
    /// An automatic gc came due and was left for [`Store::maintain`]
    /// ([`Options::defer_gc`]).
    pub(crate) gc_deferred: bool,
    /// The data directory, or why there is none.
    data: std::result::Result<Data, String>,
    /// The data directory relative to the root, when it lies inside the
    /// project (a home directory that is the project, say): snapshots never
    /// walk it and captures refuse it, whatever store of it is in use.
    data_inside: Option<Vec<u8>>,
    pub(crate) index: Index,
    /// A record was appended to the log without its `fdatasync`, which
    /// the next synced append or [`Store::sync_log`] makes (see
    /// [`Store::append_unsynced`]).
    log_unsynced: bool,
    options: Options,
    warnings: Vec<String>,
    /// Where the execution of a rewind, revert, undo or redo reports its
    /// progress ([`Store::set_progress`]).
    pub(crate) progress: Option<Arc<dyn crate::Progress + Send + Sync>>,
}

impl Drop for Store {
    /// A process that appended much leaves a checkpoint of it (see
    /// [`Store::checkpoint_if_behind`]), unless that is left for
    /// [`Store::maintain`] ([`Options::defer_checkpoint`]).
    fn drop(&mut self) {
        if !self.options.defer_checkpoint {
            self.checkpoint_if_behind(crate::checkpoint::WRITE_AFTER);
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("root", &self.place.root)
            .finish_non_exhaustive()
    }
}

/// `dir` relative to `root` (both as the file system resolves them), when
/// it lies strictly inside it.
fn inside(root: &Path, dir: &Path) -> Option<Vec<u8>> {
    let dir = crate::sys::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let rel = dir.strip_prefix(root).ok()?;
    (!rel.as_os_str().is_empty()).then(|| rel.as_os_str().as_encoded_bytes().to_vec())
}

/// Why `dir` (canonical) is never found as a project root, only named
/// with `--root`: the home folder (a store there would take in every
/// project below it, and `init` would write the agents' user-wide
/// settings), a file-system root, or a folder that holds turnback's data
/// directory (its own store would be in its project). git's
/// `safe.directory` and `GIT_CEILING_DIRECTORIES` draw the same lines.
pub fn never_a_root(dir: &Path) -> Option<&'static str> {
    if dir.parent().is_none() {
        return Some("a file-system root");
    }
    if dirs::home_dir()
        .map(canonical_once)
        .is_some_and(|h| h == dir)
    {
        return Some("your home folder");
    }
    if location::data_dir()
        .ok()
        .map(canonical_once)
        .is_some_and(|d| d.starts_with(dir))
    {
        return Some("a folder that holds turnback's data directory");
    }
    None
}

/// `path` made canonical, remembered for the process (the home folder and
/// the data directory, looked at for every folder a search passes; a hook
/// searches once or twice). A path that cannot be made canonical stays as
/// it is.
fn canonical_once(path: PathBuf) -> PathBuf {
    static SEEN: std::sync::Mutex<Vec<(PathBuf, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, c)) = seen.iter().find(|(raw, _)| *raw == path) {
        return c.clone();
    }
    let c = crate::sys::canonicalize(&path).unwrap_or_else(|_| path.clone());
    if seen.len() < 8 {
        seen.push((path, c.clone()));
    }
    c
}

/// Finds the root for `start`, as git finds `.git`: the nearest ancestor
/// holding a `.turnback/` marker or known to the registry of the data
/// directory (its marker deleted, or the folder deleted and made again),
/// else `start` itself. A folder [`never_a_root`] names is skipped, and is
/// an error when it is what would be taken ([`Error::NotARoot`]): the
/// caller names it with `--root` if it means it.
pub fn discover_root(start: &Path) -> Result<PathBuf> {
    let data = location::data_dir().ok().map(Data::new);
    let canonical = crate::sys::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    // The nearest ancestor that has either wins: an outer project's marker
    // must not capture a nested project whose marker a command deleted.
    let found = canonical.ancestors().find(|a| {
        (a.join(STORE_DIR).is_dir() || data.as_ref().is_some_and(|d| d.knows(a)))
            && never_a_root(a).is_none()
    });
    if let Some(found) = found {
        return Ok(found.to_path_buf());
    }
    match never_a_root(&canonical) {
        Some(reason) => Err(Error::NotARoot {
            path: canonical,
            reason,
        }),
        None => Ok(start.to_path_buf()),
    }
}

impl Store {
    /// Opens the store of the project at `root` with default options. The
    /// store directory is created by the first capture.
    pub fn open(root: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(root, Options::default())
    }

    /// Opens the store with explicit options.
    pub fn open_with(root: impl AsRef<Path>, options: Options) -> Result<Store> {
        let given = root.as_ref();
        let root = crate::sys::canonicalize(given).ctx("open project root", given)?;
        let root_fd = fsx::open_dir_path(&root).ctx("open project root", &root)?;
        let data = match &options.data_dir {
            Some(d) => Ok(Data::new(d.clone())),
            None => location::data_dir().map(Data::new),
        };
        // A data directory set wrongly is an error whatever the project
        // holds; only a missing one leaves in-project stores usable.
        if let Err(e @ Error::RelativeDataDir { .. }) = data {
            return Err(e);
        }
        let location = match &data {
            Ok(data) => location::find(&root, data)?,
            Err(_) => location::find_in_project(&root)?,
        };
        let data_inside = data.as_ref().ok().and_then(|d| inside(&root, d.dir()));
        let data = data.map_err(|e| e.to_string());
        let store_path = match &location {
            Some(loc) => loc.store_dir.clone(),
            None => root.join(STORE_DIR),
        };
        let warnings = location.iter().flat_map(|l| l.notes.clone()).collect();
        let mut store = Store {
            place: Place::new(root, root_fd, store_path),
            location,
            gc_deferred: false,
            data,
            data_inside,
            index: Index::default(),
            log_unsynced: false,
            options,
            warnings,
            progress: None,
        };
        store.open_dirs(false)?;
        if store.place.dirs.is_some() {
            let _guard = store.lock_shared()?;
            store.refresh()?;
        }
        Ok(store)
    }

    /// Reports the progress of this store's rewinds, reverts, undos and
    /// redos to `progress` from now on ([`crate::Progress::changing`] and
    /// [`crate::Progress::changed`], while they change the project); `None`:
    /// to nothing, the default.
    pub fn set_progress(&mut self, progress: Option<Arc<dyn crate::Progress + Send + Sync>>) {
        self.progress = progress;
    }

    /// The project root (canonical).
    pub fn root(&self) -> &Path {
        &self.place.root
    }

    /// The directory holding this project's store (its log, packs, lock
    /// and caches). Tests and tools that inspect the store use this instead
    /// of assuming where it lives.
    /// Until the first capture creates the store, this is the root's
    /// marker directory.
    pub fn store_dir(&self) -> &Path {
        &self.place.store_path
    }

    /// The data directory relative to the root, when it lies inside the
    /// project (a data directory under the root): snapshots never walk it.
    pub(crate) fn store_inside(&self) -> Option<Vec<u8>> {
        self.data_inside.clone()
    }

    /// Where the store is kept (`None` until the first capture creates it).
    pub fn location(&self) -> Option<&Location> {
        self.location.as_ref()
    }

    /// Whether the project has a store yet (its first capture makes one).
    /// A command that captures nothing makes none: a rewind, revert, undo,
    /// redo, seal or gc in a folder without a store fails or does nothing
    /// and leaves no marker, registry entry or store behind.
    pub fn has_store(&self) -> bool {
        self.location.is_some()
    }

    /// The options in use.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Warnings gathered while reading the log (a torn final line) and by
    /// mutations (an interrupted operation rolled back).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Adds a note to [`Store::warnings`].
    pub(crate) fn warn(&mut self, note: String) {
        self.warnings.push(note);
    }

    /// The turns that can still be rewound, oldest first.
    pub fn turns(&self) -> Result<Vec<&Turn>> {
        self.index.live()
    }

    /// The live turn `id` and every live turn after it, oldest first: the
    /// turns `rewind(id)` undoes. Older turns are not read.
    pub fn turns_from(&self, id: &TurnId) -> Result<Vec<&Turn>> {
        let first = self.turn(id)?.first_seq;
        self.index.live_from(first)
    }

    /// One live turn.
    pub fn turn(&self, id: &TurnId) -> Result<&Turn> {
        self.index.turn(id)?.ok_or_else(|| self.unknown_turn(id))
    }

    pub(crate) fn unknown_turn(&self, id: &TurnId) -> Error {
        match self.index.ended(id) {
            Ok(Some(seq)) => Error::AlreadyRewound {
                turn: id.to_string(),
                seq,
            },
            Ok(None) => Error::UnknownTurn {
                turn: id.to_string(),
            },
            Err(e) => e,
        }
    }

    /// The data directory, when there is one.
    pub(crate) fn data_dir(&self) -> Option<&Path> {
        self.data.as_ref().ok().map(|d| d.dir())
    }

    fn open_dirs(&mut self, create: bool) -> Result<()> {
        if self.place.dirs.is_some() {
            return Ok(());
        }
        if self.location.is_none() {
            if !create {
                return Ok(());
            }
            let loc = match &self.data {
                Ok(data) => location::create(&self.place.root, data)?,
                Err(_) => location::in_project_by_env(&self.place.root)?.ok_or(Error::NoDataDir)?,
            };
            self.place.store_path = loc.store_dir.clone();
            self.location = Some(loc);
        }
        let store = if create {
            let parent = self
                .place
                .store_path
                .parent()
                .unwrap_or(&self.place.store_path);
            std::fs::create_dir_all(&self.place.store_path)
                .ctx("create store", &self.place.store_path)?;
            let store = location::open_store_dir(&self.place.store_path)
                .ctx("open store", &self.place.store_path)?
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
                .ctx("open store", &self.place.store_path)?;
            if fsx::node_at(&store, CONFIG_FILE)
                .ctx("look at", self.place.store_path.join(CONFIG_FILE))?
                == Node::Missing
            {
                self.write_store_file(&store, CONFIG_FILE, DEFAULT_CONFIG.as_bytes())?;
                fsx::fsync(&store).ctx("fsync", &self.place.store_path)?;
                let parent_fd = fsx::open_dir_path(parent).ctx("open", parent)?;
                fsx::fsync(&parent_fd).ctx("fsync", parent)?;
            }
            Some(store)
        } else {
            location::open_store_dir(&self.place.store_path)
                .ctx("open store", &self.place.store_path)?
        };
        let Some(store) = store else { return Ok(()) };
        let packs_path = self.place.store_path.join(PACKS_DIR);
        let packs = if create {
            let (fd, created) = fsx::ensure_subdir(&store, PACKS_DIR).ctx("create", &packs_path)?;
            if created {
                fsx::fsync(&store).ctx("fsync", &self.place.store_path)?;
            }
            Some(fd)
        } else {
            fsx::open_subdir(&store, PACKS_DIR).ctx("open", &packs_path)?
        };
        match packs {
            Some(packs) => self.place.dirs = Some(Dirs { store, packs }),
            None => {
                // A store directory without packs/ (just created by another
                // process, or emptied): make it whole, unless it holds only
                // the marker (an in-project store chosen, never written):
                // then there is no store yet, and a read creates none.
                if !create && !location::holds_only_marker(&self.place.store_path) {
                    return self.open_dirs(true);
                }
            }
        }
        Ok(())
    }

    /// Writes a small file in the store directory atomically (temporary
    /// file, fsync, rename); the caller fsyncs the directory.
    pub(crate) fn write_store_file(&self, store: &OwnedFd, name: &str, bytes: &[u8]) -> Result<()> {
        fsx::replace_file(store, name, bytes).ctx("replace", self.place.store_path.join(name))
    }

    /// The store's settings (defaults when the file is missing).
    pub fn config(&self) -> Result<Config> {
        let path = self.place.store_path.join(CONFIG_FILE);
        let Some(dirs) = &self.place.dirs else {
            return Ok(Config::default());
        };
        match fsx::read_store_file(&dirs.store, CONFIG_FILE).ctx("read", &path)? {
            None => Ok(Config::default()),
            Some(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| Error::Config {
                    path: path.clone(),
                    reason: "it is not UTF-8 text".into(),
                })?;
                Config::parse(&text, &path)
            }
        }
    }

    fn lock_shared(&self) -> Result<LockGuard> {
        lock::acquire(
            &self.place.dirs().store,
            &self.place.store_path,
            false,
            self.options.lock_timeout,
        )
    }

    /// Takes the exclusive lock and settles what earlier operations left
    /// unfinished before this one changes anything (see
    /// [`crate::journal`]).
    pub(crate) fn begin_mutation(&mut self) -> Result<LockGuard> {
        self.open_dirs(true)?;
        let guard = lock::acquire(
            &self.place.dirs().store,
            &self.place.store_path,
            true,
            self.options.lock_timeout,
        )?;
        self.settle_unfinished()?;
        Ok(guard)
    }

    /// Runs `op` with its walks sharing directory handles: each directory
    /// its phases reach is opened once between them (see `dirstack.rs`).
    /// The handles are closed when `op` returns, so none outlives the
    /// operation that opened it.
    pub(crate) fn holding_dirs<T>(&mut self, op: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.place.set_held_dirs(Some(crate::dirstack::Held::new()));
        let result = op(self);
        self.place.set_held_dirs(None);
        result
    }
}
