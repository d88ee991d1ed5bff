//! The store: a directory outside the project (see [`crate::location`] for
//! where, and how the project finds it), holding `log.jsonl` (the index,
//! see [`crate::log`]), `packs/` (the blobs, see [`crate::pack`]), `lock`
//! (see [`crate::lock`]) and `config.toml` (see [`crate::config`]). The
//! user's `.git` is never touched.
//!
//! [`Store`] keeps an in-memory index built from the log and, after taking
//! the lock, reads only the lines appended since, so one capture costs the
//! same in a store of ten records as in one of ten thousand.

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

/// Name of the pack directory inside the store.
pub const PACKS_DIR: &str = "packs";

/// Default cap on the size of a file whose bytes are saved: 1 GiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 30;

/// Files up to this size are read whole and compressed in parallel; larger
/// ones are streamed (memory stays bounded).
const WHOLE_READ_LIMIT: u64 = 4 << 20;

/// At most this many files are open at once while a batch is read, so a
/// capture of any size fits a descriptor limit of 1,024 (or far less).
const OPEN_CHUNK: usize = 32;

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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            compression_level: 3,
            lock_timeout: Duration::from_secs(30),
            data_dir: None,
            defer_gc: false,
        }
    }
}

/// What one capture call did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CaptureReport {
    /// The turn.
    pub turn: Option<TurnId>,
    /// Paths recorded now, with their pre-images.
    pub captured: Vec<FileEntry>,
    /// Paths this turn had captured already (the first capture wins).
    pub already_captured: Vec<RelPath>,
    /// Symlinks that point outside the root: recorded as links, but a write
    /// through them cannot be rewound.
    pub links_outside: Vec<RelPath>,
    /// Files with hard links (other names) outside the project: those names
    /// cannot be captured, and a write or rewind gives the names inside the
    /// project a new file, so they keep the old bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hard_links_outside: Vec<RelPath>,
    /// Blobs written by this call.
    pub new_blobs: usize,
    /// Compressed bytes written by this call.
    pub stored_bytes: u64,
    /// What a write could not keep of the file it replaced (an extended
    /// attribute), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// How [`Store::collect`] treats what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collect {
    /// Before an agent's write: record missing directories, follow an
    /// in-root symlink's target, refuse directories, apply the size cap.
    Capture,
    /// Before a rewind/undo changes a path: its exact state, any size.
    State,
}

/// What an operation needs of a path's current file when it saves it
/// (see [`crate::aside`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    /// Nothing: it may be kept aside, unread.
    Nothing,
    /// Its hash, which a conflict check compares: it is read.
    Hash,
    /// Its hash, known to be this post-image's if the file still has this
    /// look: then it is kept aside, unread, with that hash; else read.
    Post(BlobId, StatKey),
}

/// Files kept aside instead of read while the states are collected (see
/// [`crate::aside`]).
pub(crate) struct Keeping<'a> {
    keeper: aside::Keeper,
    /// What the operation needs of each path.
    expect: &'a dyn Fn(&RelPath) -> Expect,
    /// No file can be kept (another file system).
    off: bool,
}

/// Files [`Store::collect`] keeps aside a run at a time: at most this
/// many, in at most [`KEEP_RUN_DIRS`] directories (their handles are held
/// until the run is kept).
const KEEP_RUN: usize = 4096;
const KEEP_RUN_DIRS: usize = 256;

/// A file [`Store::collect`] is to keep aside: its entry, the directory
/// holding it (`None`: the root), the hash and look it is kept with (see
/// [`Expect::Post`]) and its size.
struct Pending {
    at: usize,
    dir: Option<Arc<OwnedFd>>,
    blob: Option<BlobId>,
    look: Option<StatKey>,
    size: u64,
}

/// Whether two directories of [`Pending`] files are one handle.
fn same_dir(a: Option<&OwnedFd>, b: Option<&OwnedFd>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// What [`Store::collect`] found.
#[derive(Default)]
struct Collected {
    entries: Vec<FileEntry>,
    /// Regular files to read: (entry index, size). They are opened in
    /// chunks when read, so a batch of any size holds few descriptors.
    files: Vec<(usize, u64)>,
    already: Vec<RelPath>,
    links_outside: Vec<RelPath>,
    /// The regular files among them with more than one name.
    linked: crate::links::Linked,
}

/// The hash-only form of a state.
pub(crate) fn post_of(pre: &Pre) -> Post {
    match pre {
        Pre::File { blob, .. } => Post::File {
            sha256: *blob,
            stat: None,
        },
        Pre::Symlink { target } => Post::Symlink {
            target: target.clone(),
        },
        Pre::Absent => Post::Absent,
        Pre::Dir { .. } => Post::Dir,
        Pre::Aside {
            blob: Some(blob), ..
        } => Post::File {
            sha256: *blob,
            stat: None,
        },
        Pre::Fifo { .. } | Pre::Skipped { .. } | Pre::Aside { blob: None, .. } => Post::Other,
    }
}

/// Appends the compressed `frame` of blob `id` (`size` bytes, a delta
/// against `base` when given) to `writer`, unless this pack holds it
/// already (`fresh`, the blobs written to it so far); returns where it went.
pub(crate) fn append_once(
    writer: &mut PackWriter,
    fresh: &mut HashSet<BlobId>,
    id: BlobId,
    size: u64,
    frame: &[u8],
    base: Option<BlobId>,
) -> Result<Option<StoredBlob>> {
    if !fresh.insert(id) {
        return Ok(None);
    }
    let offset = writer.append(frame)?;
    Ok(Some(StoredBlob {
        pack: None,
        id,
        offset,
        len: frame.len() as u64,
        size,
        base,
    }))
}

/// Streams `file` into `writer` (a file too large to read whole), keeping
/// its frame only when neither the store (`known`) nor this pack
/// (`fresh`) holds its blob; returns its id, its size and where it went.
pub(crate) fn append_streamed(
    writer: &mut PackWriter,
    fresh: &mut HashSet<BlobId>,
    known: &crate::index::Blobs,
    file: &File,
    level: i32,
) -> Result<(BlobId, u64, Option<StoredBlob>)> {
    let pack::Streamed { id, size, kept } = writer.append_stream(file, level, |id| {
        !known.contains_key(id) && !fresh.contains(id)
    })?;
    let stored = kept.map(|(offset, len)| {
        fresh.insert(id);
        StoredBlob {
            pack: None,
            id,
            offset,
            len,
            size,
            base: None,
        }
    });
    Ok((id, size, stored))
}

/// A file hashed, with its stat key when it can be trusted later.
struct Looked {
    i: usize,
    id: BlobId,
    key: Option<StatKey>,
}

/// A small file read, hashed and (if new) compressed.
struct Hashed {
    i: usize,
    id: BlobId,
    len: u64,
    frame: Option<Vec<u8>>,
    base: Option<BlobId>,
}

pub(crate) struct Dirs {
    pub(crate) store: OwnedFd,
    pub(crate) packs: OwnedFd,
}

/// A checkpoint store for one project root.
///
/// Mutating methods take the store lock for their duration; several
/// processes may use one store at once.
pub struct Store {
    pub(crate) root: PathBuf,
    pub(crate) root_fd: OwnedFd,
    /// The store's directory; until the first capture creates a store, the
    /// root's marker directory (nothing is opened there then).
    pub(crate) store_path: PathBuf,
    /// Where the store is, once there is one.
    pub(crate) location: Option<Location>,
    /// An automatic gc came due and was left for [`Store::maintain`]
    /// ([`Options::defer_gc`]).
    pub(crate) gc_deferred: bool,
    /// The data directory, or why there is none.
    data: std::result::Result<Data, String>,
    /// The data directory relative to the root, when it lies inside the
    /// project (a home directory that is the project, say): snapshots never
    /// walk it and captures refuse it, whatever store of it is in use.
    data_inside: Option<Vec<u8>>,
    pub(crate) dirs: Option<Dirs>,
    pub(crate) index: Index,
    pub(crate) options: Options,
    pub(crate) warnings: Vec<String>,
    /// The directory handles the walks of the operation under way share
    /// (see [`Store::holding_dirs`]); `None` between operations.
    held_dirs: std::sync::Mutex<Option<crate::dirstack::Held>>,
}

impl Drop for Store {
    /// A process that appended much leaves a checkpoint of it (see
    /// [`Store::checkpoint_if_behind`]).
    fn drop(&mut self) {
        self.checkpoint_if_behind();
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("root", &self.root)
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
            root,
            root_fd,
            store_path,
            location,
            gc_deferred: false,
            data,
            data_inside,
            dirs: None,
            index: Index::default(),
            options,
            warnings,
            held_dirs: std::sync::Mutex::new(None),
        };
        store.open_dirs(false)?;
        if store.dirs.is_some() {
            let _guard = store.lock_shared()?;
            store.refresh()?;
        }
        Ok(store)
    }

    /// The project root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding this project's store (its log, packs, lock
    /// and caches). Tests and tools that inspect the store use this instead
    /// of assuming where it lives.
    /// Until the first capture creates the store, this is the root's
    /// marker directory.
    pub fn store_dir(&self) -> &Path {
        &self.store_path
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
        if self.dirs.is_some() {
            return Ok(());
        }
        if self.location.is_none() {
            if !create {
                return Ok(());
            }
            let loc = match &self.data {
                Ok(data) => location::create(&self.root, data)?,
                Err(_) => location::in_project_by_env(&self.root)?.ok_or(Error::NoDataDir)?,
            };
            self.store_path = loc.store_dir.clone();
            self.location = Some(loc);
        }
        let store = if create {
            let parent = self.store_path.parent().unwrap_or(&self.store_path);
            std::fs::create_dir_all(&self.store_path).ctx("create store", &self.store_path)?;
            let store = location::open_store_dir(&self.store_path)
                .ctx("open store", &self.store_path)?
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
                .ctx("open store", &self.store_path)?;
            if fsx::node_at(&store, CONFIG_FILE)
                .ctx("look at", self.store_path.join(CONFIG_FILE))?
                == Node::Missing
            {
                self.write_store_file(&store, CONFIG_FILE, DEFAULT_CONFIG.as_bytes())?;
                fsx::fsync(&store).ctx("fsync", &self.store_path)?;
                let parent_fd = fsx::open_dir_path(parent).ctx("open", parent)?;
                fsx::fsync(&parent_fd).ctx("fsync", parent)?;
            }
            Some(store)
        } else {
            location::open_store_dir(&self.store_path).ctx("open store", &self.store_path)?
        };
        let Some(store) = store else { return Ok(()) };
        let packs_path = self.store_path.join(PACKS_DIR);
        let packs = if create {
            let (fd, created) = fsx::ensure_subdir(&store, PACKS_DIR).ctx("create", &packs_path)?;
            if created {
                fsx::fsync(&store).ctx("fsync", &self.store_path)?;
            }
            Some(fd)
        } else {
            fsx::open_subdir(&store, PACKS_DIR).ctx("open", &packs_path)?
        };
        match packs {
            Some(packs) => self.dirs = Some(Dirs { store, packs }),
            None => {
                // A store directory without packs/ (just created by another
                // process, or emptied): make it whole, unless it holds only
                // the marker (an in-project store chosen, never written):
                // then there is no store yet, and a read creates none.
                if !create && !location::holds_only_marker(&self.store_path) {
                    return self.open_dirs(true);
                }
            }
        }
        Ok(())
    }

    /// Writes a small file in the store directory atomically (temporary
    /// file, fsync, rename); the caller fsyncs the directory.
    pub(crate) fn write_store_file(&self, store: &OwnedFd, name: &str, bytes: &[u8]) -> Result<()> {
        fsx::replace_file(store, name, bytes).ctx("replace", self.store_path.join(name))
    }

    /// The store's settings (defaults when the file is missing).
    pub fn config(&self) -> Result<Config> {
        let path = self.store_path.join(CONFIG_FILE);
        let Some(dirs) = &self.dirs else {
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

    pub(crate) fn dirs(&self) -> &Dirs {
        self.dirs
            .as_ref()
            .expect("store directories are opened before use")
    }

    fn lock_shared(&self) -> Result<LockGuard> {
        lock::acquire(
            &self.dirs().store,
            &self.store_path,
            false,
            self.options.lock_timeout,
        )
    }

    /// Takes the exclusive lock, catches up with the log, sweeps temporary
    /// packs left by a crash, cuts a torn final line and rolls back an
    /// operation interrupted before its record (see `settle.rs`).
    pub(crate) fn begin_mutation(&mut self) -> Result<LockGuard> {
        self.open_dirs(true)?;
        let guard = lock::acquire(
            &self.dirs().store,
            &self.store_path,
            true,
            self.options.lock_timeout,
        )?;
        self.sweep_temp_packs()?;
        // Names a rewind left in the trash (its background removal not
        // done, or a crash between a link and its rename) go before the
        // project is read: no capture sees them as hard links.
        if self.trash_pending() {
            self.empty_trash();
        }
        // A temporary file in the store (a config or compacted log being
        // written when a process died) is stale under the exclusive lock.
        fsx::sweep_stale_temps(&self.dirs().store);
        if let Some(torn_at) = self.refresh()? {
            let path = self.store_path.join(LOG_FILE);
            let f = self.open_log(OFlags::WRONLY)?;
            f.set_len(torn_at)
                .ctx("cut the torn final line of", &path)?;
            fsx::fdatasync(&f).ctx("fsync", &path)?;
        }
        // Files kept aside by an operation that crashed before its `saved`
        // record: no record names them, and their project files would look
        // like hard links (see `aside.rs`).
        aside::remove_unrecorded(&self.dirs().store, self.index.last_seq + 1);
        // An operation interrupted before its record is rolled back before
        // anything else changes the project (see `settle.rs`). It walks
        // with handles of its own: a rollback removes the directories the
        // interrupted operation made, and a handle it held would outlive
        // its directory into the operation that follows, which may make
        // that directory again (and would then stage into the one removed);
        // the operation's own walks start afresh after it.
        let outer = self.take_held_dirs();
        let settled = self.holding_dirs(Store::settle_interrupted);
        self.set_held_dirs(outer.map(|_| crate::dirstack::Held::new()));
        settled?;
        Ok(guard)
    }

    /// Runs `op` with its walks sharing directory handles: each directory
    /// its phases reach is opened once between them (see `dirstack.rs`).
    /// The handles are closed when `op` returns, so none outlives the
    /// operation that opened it.
    pub(crate) fn holding_dirs<T>(&mut self, op: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.set_held_dirs(Some(crate::dirstack::Held::new()));
        let result = op(self);
        self.set_held_dirs(None);
        result
    }

    fn take_held_dirs(&mut self) -> Option<crate::dirstack::Held> {
        self.held_dirs
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    fn set_held_dirs(&mut self, held: Option<crate::dirstack::Held>) {
        // A walk that panicked poisons the lock; the handles it guards are
        // replaced whole, so nothing half-done is read.
        *self
            .held_dirs
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = held;
    }

    /// A walk of the project's directories from the root (see
    /// `dirstack.rs`), taking and leaving handles in those the operation
    /// under way holds, if any; a walk made while another is under way
    /// holds none of its own.
    pub(crate) fn walk(&self) -> DirStack<'_> {
        match self.held_dirs.try_lock() {
            Ok(held) => DirStack::holding(&self.root_fd, held),
            Err(_) => DirStack::new(&self.root_fd),
        }
    }

    /// Removes the temporary packs a crashed process left in the store
    /// directory (called under the exclusive lock). A pack being filled
    /// without the store lock (the background storing of kept files) holds
    /// a lock of its own and is left ([`PackWriter::hold`]); any other is
    /// stale: every other pack is filled under the store lock.
    fn sweep_temp_packs(&self) -> Result<()> {
        let entries = std::fs::read_dir(&self.store_path).ctx("list", &self.store_path)?;
        for e in entries {
            let e = e.ctx("list", &self.store_path)?;
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !name.starts_with(".pack") || !name.contains(fsx::TEMP_MARK) {
                continue;
            }
            let in_use = match fsx::open_store_file(&self.dirs().store, &name, OFlags::RDONLY, None)
            {
                Ok(Some(f)) => matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
                _ => false,
            };
            if !in_use {
                fsx::unlink(&self.dirs().store, &name)
                    .ctx("remove stale temporary", self.store_path.join(&name))?;
            }
        }
        Ok(())
    }

    pub(crate) fn open_log(&self, mode: OFlags) -> Result<File> {
        let path = self.store_path.join(LOG_FILE);
        fsx::open_store_file(&self.dirs().store, LOG_FILE, mode, Some(0o644))
            .ctx("open", &path)?
            .ok_or_else(|| Error::Io {
                op: "open",
                path,
                source: io::Error::from(io::ErrorKind::NotFound),
            })
    }

    /// Writes an index checkpoint when the log has grown by
    /// [`checkpoint::WRITE_AFTER`] past the one on disk since this process
    /// read or wrote it, so the next process to open the store does not
    /// read again what this one appended (the after half of a command that
    /// changed 100,000 files appends some 50 MB). Called when the store is
    /// dropped, never in the middle of a mutation: a long-lived store (the
    /// MCP server's) leaves its appends to the next process that opens the
    /// store, as before. Best effort, like the checkpoint itself; only for
    /// the log file the index was read from.
    pub(crate) fn checkpoint_if_behind(&mut self) {
        let x = &self.index;
        let (Some(dirs), Some(ident)) = (self.dirs.as_ref(), x.ident) else {
            return;
        };
        if x.consumed < x.checkpointed.saturating_add(checkpoint::WRITE_AFTER) {
            return;
        }
        let Ok(log) = self.open_log(OFlags::RDONLY) else {
            return;
        };
        // Under the shared lock, as every checkpoint is written (never while
        // gc or repair replaces the log), and only if it is free now: a
        // store being dropped does not wait for another process's rewind.
        let Ok(_shared) = lock::acquire(&dirs.store, &self.store_path, false, Duration::ZERO)
        else {
            return;
        };
        let same = crate::sys::fs::fstat(&log).is_ok_and(|st| {
            (crate::sys::dev(&st), st.st_ino) == ident && st.st_size as u64 >= x.consumed
        });
        if same {
            checkpoint::write(&dirs.store, x, &log, ident);
            self.index.checkpointed = self.index.consumed;
        }
    }

    /// Forgets an index a record did not fit, applied in part: no
    /// checkpoint is ever written of it, and the next use reads the log
    /// again.
    fn forget_index(&mut self) {
        self.index = Index::default();
    }

    /// Reads lines appended since the last read (or the whole log if it was
    /// replaced). Returns the offset of a torn final line, if any.
    ///
    /// Reading from the start, an index checkpoint that names this very log
    /// file and prefix (see [`crate::checkpoint`]) stands for that prefix:
    /// only the lines past it are read, so an open costs the same however
    /// long the log is.
    fn refresh(&mut self) -> Result<Option<u64>> {
        let path = self.store_path.join(LOG_FILE);
        let f = self.open_log(OFlags::RDONLY)?;
        let st = crate::sys::fs::fstat(&f).ctx("stat", &path)?;
        let ident = (crate::sys::dev(&st), st.st_ino);
        let size = st.st_size as u64;
        if self.index.ident != Some(ident) || size < self.index.consumed {
            self.index = Index {
                ident: Some(ident),
                ..Index::default()
            };
        }
        let from_start = self.index.consumed == 0;
        if from_start && let Some(mut index) = checkpoint::load(&self.dirs().store, &f, ident, size)
        {
            index.ident = Some(ident);
            index.checkpointed = index.consumed;
            self.index = index;
        }
        let start = self.index.consumed;
        let mut f = f;
        io::Seek::seek(&mut f, io::SeekFrom::Start(start)).ctx("read", &path)?;
        // A line at a time, each record applied as it is read: a log of one
        // capture of 100,000 paths is some 40 MB of JSON, and the index and
        // the checkpoint written from it come on top.
        let mut reader = io::BufReader::with_capacity(64 << 10, &f);
        let mut line = Vec::new();
        let (mut lines, mut consumed, mut torn) = (0usize, 0u64, None);
        loop {
            line.clear();
            let n = io::BufRead::read_until(&mut reader, b'\n', &mut line).ctx("read", &path)?;
            if n == 0 {
                break;
            }
            let line_no = self.index.lines + lines + 1;
            if line.last() != Some(&b'\n') {
                torn = Some((line_no, n));
                break;
            }
            let rec = log::decode(&line[..n - 1]);
            if line.capacity() > (1 << 20) {
                // A large record's line is not kept for the next one.
                line = Vec::new();
            }
            let applied = rec
                .map_err(Misfit::Record)
                .and_then(|r| self.index.apply_owned(r));
            if let Err(misfit) = applied {
                self.forget_index();
                return Err(misfit.at(path, line_no));
            }
            lines += 1;
            consumed += n as u64;
        }
        drop(reader);
        self.index.lines += lines;
        self.index.consumed += consumed;
        if lines > 0 {
            self.index.turns.fit();
        }
        if from_start && consumed >= checkpoint::WRITE_AFTER {
            checkpoint::write(&self.dirs().store, &self.index, &f, ident);
            self.index.checkpointed = self.index.consumed;
        }
        Ok(torn.map(|(line, len)| {
            self.warnings.push(format!(
                "{}: line {line} is a torn append ({len} bytes, from an interrupted process); it is ignored",
                path.display()
            ));
            self.index.consumed
        }))
    }

    /// Appends one record durably and applies it to the index; returns its
    /// seq.
    pub(crate) fn append(&mut self, op: Op) -> Result<u64> {
        let rec = Record {
            seq: self.index.last_seq + 1,
            at: crate::id::now_ns(),
            op,
        };
        let path = self.store_path.join(LOG_FILE);
        let f = self.open_log(OFlags::WRONLY | OFlags::APPEND)?;
        // Streamed, never whole in memory: a saved record of 100,000 paths
        // is some 25 MB of JSON.
        let written = log::write_line(&rec, &f).ctx("append to", &path);
        let synced = written.and_then(|len| {
            fsx::fdatasync(&f).ctx("fsync", &path)?;
            Ok(len)
        });
        let line_len = match synced {
            Ok(len) => len,
            Err(e) => {
                // Not acknowledged: take the line back so no reader trusts it.
                let _ = f.set_len(self.index.consumed);
                return Err(e);
            }
        };
        if self.index.consumed == 0 {
            // A new log: its directory entry must be durable too.
            fsx::fsync(&self.dirs().store).ctx("fsync", &self.store_path)?;
        }
        let seq = rec.seq;
        if let Err(misfit) = self.index.apply_owned(rec) {
            let line = self.index.lines + 1;
            self.forget_index();
            return Err(misfit.at(path, line));
        }
        self.index.lines += 1;
        self.index.consumed += line_len;
        if self.index.ident.is_none() {
            let st = crate::sys::fs::fstat(&f).ctx("stat", &path)?;
            self.index.ident = Some((crate::sys::dev(&st), st.st_ino));
        }
        Ok(seq)
    }

    /// Turns a caller's path (absolute, or relative to the root) into a
    /// stored path, resolving symlinks in its directories (never outside the
    /// root). With `follow_final`, a symlink in the last component is
    /// resolved too.
    pub fn resolve(&self, input: impl AsRef<Path>, follow_final: bool) -> Result<RelPath> {
        self.resolve_with(input, follow_final, &mut HashSet::new())
    }

    /// [`Store::resolve`] for many paths: `real_dirs` remembers directories
    /// already seen to be real (not symlinks), so a batch stats each once.
    fn resolve_with(
        &self,
        input: impl AsRef<Path>,
        follow_final: bool,
        real_dirs: &mut HashSet<Vec<u8>>,
    ) -> Result<RelPath> {
        let input = input.as_ref();
        let shown = input.to_string_lossy().into_owned();
        let bad = |reason| Error::BadPath {
            path: shown.clone(),
            reason,
        };
        let mut comps = lexical_components(&self.root, input)?;
        let mut hops = 0;
        'restart: loop {
            for i in 0..comps.len() {
                if i + 1 == comps.len() && !follow_final {
                    break;
                }
                if i == 0 && (comps[i] == STORE_DIR.as_bytes() || comps[i] == b".git") {
                    break;
                }
                let prefix = comps[..=i].join(&b'/');
                if i + 1 < comps.len() && real_dirs.contains(&prefix) {
                    continue;
                }
                let p = self.root.join(crate::sys::os_str(&prefix));
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.file_type().is_symlink() => {
                        hops += 1;
                        if hops > 40 {
                            return Err(bad(PathProblem::SymlinkLoop));
                        }
                        let target = std::fs::read_link(&p).ctx("read symlink", &p)?;
                        let parent = comps[..i].join(&b'/');
                        let joined = self.root.join(crate::sys::os_str(&parent)).join(target);
                        let mut next = lexical_components(&self.root, &joined)
                            .map_err(|_| bad(PathProblem::OutsideRoot))?;
                        next.extend(comps[i + 1..].iter().cloned());
                        comps = next;
                        continue 'restart;
                    }
                    Ok(m) => {
                        if m.is_dir() {
                            real_dirs.insert(prefix);
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                        ) =>
                    {
                        break;
                    }
                    Err(e) => return Err(e).ctx("look at", &p),
                }
            }
            break;
        }
        let rel = RelPath::from_components(&comps).map_err(bad)?;
        if let Some(inside) = self.store_inside() {
            let inside = String::from_utf8_lossy(&inside).into_owned();
            if rel.as_str() == inside || rel.as_str().starts_with(&format!("{inside}/")) {
                return Err(bad(PathProblem::InsideStore));
            }
        }
        Ok(rel)
    }

    /// Captures one path in `turn` (see [`Store::capture_many`]).
    pub fn capture(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        path: impl AsRef<Path>,
    ) -> Result<CaptureReport> {
        self.capture_many(turn, label, &[path])
    }

    /// Saves the pre-images of `paths` in `turn`, as one durable record: one
    /// lock, one pack, three fsyncs however many paths. Returns only after the
    /// blobs and the record are on disk. The first capture of a path in a
    /// turn wins; later ones are no-ops. Any invalid path fails the whole call
    /// before anything is written. The first capture of a new turn seals the
    /// turn before it (see [`Store::seal`]).
    pub fn capture_many<P: AsRef<Path>>(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        paths: &[P],
    ) -> Result<CaptureReport> {
        let mut real_dirs = HashSet::new();
        let rels = paths
            .iter()
            .map(|p| self.resolve_with(p, false, &mut real_dirs))
            .collect::<Result<Vec<_>>>()?;
        let _guard = self.begin_mutation()?;
        if rels.len() > 1 {
            // Collecting and reading walk the same directories.
            self.holding_dirs(|s| s.capture_locked(turn, label, &rels, Vec::new()))
        } else {
            self.capture_locked(turn, label, &rels, Vec::new())
        }
    }

    /// Captures `rels` (and records `posts`) under the held lock.
    pub(crate) fn capture_locked(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        rels: &[RelPath],
        posts: Vec<PostEntry>,
    ) -> Result<CaptureReport> {
        // Read first: a config file in error fails the capture before it
        // records anything.
        let config = self.config()?;
        // A new turn ends the one before: seal it once this capture is
        // durable (a capture that fails appends nothing). Also when this
        // turn's first record is the last record of the log and the turn
        // before it is still unsealed: the process that wrote that record
        // was killed before the seal, and this is its rerun; nothing has
        // happened since that the seal would wrongly take in.
        let seal = {
            let mut live = self.index.live_places().rev();
            let before = match self.index.turn(turn)? {
                None => live.next(),
                Some(t) if t.first_seq == self.index.last_seq => {
                    live.next().transpose()?;
                    live.next()
                }
                Some(_) => None,
            };
            match before {
                Some(i) => self.index.to_seal(i?)?,
                None => None,
            }
        };
        let already: HashSet<RelPath> = self
            .index
            .turn(turn)?
            .map(|t| t.files.iter().map(|c| c.entry.path.clone()).collect())
            .unwrap_or_default();
        // `foo.txt` after `Foo.txt` on a case-insensitive file system is
        // the file the turn captured already: the first spelling stands.
        let spelled = self.first_spellings(&already, rels);
        let rels = spelled.as_slice();
        // Every name of a hard-linked file, so a rewind has the whole group.
        let names = crate::links::other_names(self, rels)?;
        let all: Vec<RelPath> = rels.iter().chain(&names.found).cloned().collect();
        let collected = self.collect(&all, &already, Collect::Capture, None)?;
        let mut report = CaptureReport {
            turn: Some(turn.clone()),
            already_captured: collected.already,
            links_outside: collected.links_outside,
            hard_links_outside: names.outside,
            ..CaptureReport::default()
        };
        let mut entries = collected.entries;
        // A write of a path the turn captured already, while a command's
        // window is open (another session's Bash call): nothing in its
        // record would name the path, so that command's scan would take
        // the write for its own. A post-image of the path as it is now,
        // before the write, marks it the tool's (see
        // `snapshot::attribution::assign`); a path the caller gives a
        // post-image of keeps that one.
        let posts = if !report.already_captured.is_empty()
            && crate::tree::pending_turn(&self.dirs().store, &self.store_path)?.is_some()
        {
            let own: HashSet<&RelPath> = posts.iter().map(|p| &p.path).collect();
            let rest: Vec<RelPath> = report
                .already_captured
                .iter()
                .filter(|p| !own.contains(p))
                .cloned()
                .collect();
            let mut touched = self.hash_states(&rest, true)?;
            touched.extend(posts);
            touched
        } else {
            posts
        };
        if entries.is_empty() && posts.is_empty() {
            if let Some(first) = seal {
                self.seal_turn(first)?;
            }
            return Ok(report);
        }
        let seq = self.index.last_seq + 1;
        let pack_name = pack::pack_name(seq);
        let (blobs, stored) = self.store_blobs(&mut entries, collected.files, &pack_name)?;
        report.new_blobs = blobs.len();
        report.stored_bytes = stored;
        let op = Op::Capture {
            turn: turn.clone(),
            label: label.map(cut_label).filter(|l| !l.is_empty()),
            pack: (!blobs.is_empty()).then_some(pack_name),
            blobs,
            files: entries.clone(),
            posts,
            shared_with: Vec::new(),
        };
        self.append(op)?;
        if let Some(first) = seal {
            self.seal_turn(first)?;
        }
        self.maybe_auto_gc(false, &config)?;
        report.captured = entries;
        Ok(report)
    }

    /// Records the post-images of `paths` in `turn` (hashes of what is on
    /// disk now): what an agent's own write tool left, reported after the
    /// write (a hook's post-tool event), so a later rewind can tell its bytes
    /// from someone else's. Returns how many were recorded.
    pub fn record_post_images<P: AsRef<Path>>(
        &mut self,
        turn: &TurnId,
        paths: &[P],
    ) -> Result<usize> {
        let rels = paths
            .iter()
            .map(|p| self.resolve(p, true))
            .collect::<Result<Vec<_>>>()?;
        let _guard = self.begin_mutation()?;
        if self.index.turn(turn)?.is_none() {
            return Err(self.unknown_turn(turn));
        }
        let posts = self.hash_states(&rels, true)?;
        let n = posts.len();
        self.capture_locked(turn, None, &[], posts)?;
        Ok(n)
    }

    /// Records the post-images of every path `turn` touched (hashes of what
    /// is on disk now), so a later rewind can tell the agent's bytes from
    /// someone else's. Paths whose post-image a write through turnback
    /// already recorded keep it. Sealing twice is harmless.
    pub fn seal(&mut self, turn: &TurnId) -> Result<usize> {
        if !self.has_store() {
            self.turn(turn)?;
        }
        let _guard = self.begin_mutation()?;
        let first = self.turn(turn)?.first_seq;
        self.seal_turn(first)
    }

    fn seal_turn(&mut self, first_seq: u64) -> Result<usize> {
        let Some(t) = self.index.turn_at(first_seq)? else {
            return Ok(0);
        };
        let id = t.id.clone();
        let paths: Vec<RelPath> = t
            .files
            .iter()
            .map(|c| c.entry.path.clone())
            .filter(|p| !t.posts.contains_key(p))
            .collect();
        if paths.is_empty() {
            // Every path already has its post-image (writes through
            // turnback record them): nothing to hash, no record.
            return Ok(0);
        }
        let posts = self.hash_states(&paths, true)?;
        let n = posts.len();
        self.append(Op::Seal { turn: id, posts })?;
        Ok(n)
    }

    /// The current state of `rels` as hashes (nothing is stored). With
    /// `keyed` (post-images recorded under the store lock), each regular
    /// file's comes with its [`StatKey`] when that can be trusted later:
    /// its `ctime` before the file system's clock, read first (which sets
    /// the times of `tree-stamp`, so only under the lock), and its `fstat`
    /// the same before and after it was hashed.
    pub(crate) fn hash_states(&self, rels: &[RelPath], keyed: bool) -> Result<Vec<PostEntry>> {
        // No clock, no keys: the files are read again when compared.
        let clock = self
            .dirs
            .as_ref()
            .filter(|_| keyed)
            .and_then(|d| crate::tree::fs_clock(&d.store, &self.store_path).ok());
        let (entries, mut keys) = self.hash_entries(rels, clock)?;
        Ok(entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| PostEntry {
                post: match (post_of(&e.pre), keys.remove(&i)) {
                    (Post::File { sha256, .. }, Some(key)) => Post::File {
                        sha256,
                        stat: Some(key),
                    },
                    (post, _) => post,
                },
                path: e.path,
            })
            .collect())
    }

    /// The current state of `rels`, modes included, each file's blob id
    /// its bytes' hash (nothing is stored).
    pub(crate) fn current_entries(&self, rels: &[RelPath]) -> Result<Vec<FileEntry>> {
        Ok(self.hash_entries(rels, None)?.0)
    }

    /// [`Store::current_entries`], with the [`StatKey`] of each file (by
    /// its index) whose `ctime` is before `clock`.
    pub(crate) fn hash_entries(
        &self,
        rels: &[RelPath],
        clock: Option<i64>,
    ) -> Result<(Vec<FileEntry>, HashMap<usize, StatKey>)> {
        let collected = self.collect(rels, &HashSet::new(), Collect::State, None)?;
        let mut entries = collected.entries;
        let mut keys = HashMap::new();
        let mut walk = self.walk();
        for chunk in collected.files.chunks(OPEN_CHUNK) {
            let opened = self.open_files(&mut walk, &mut entries, chunk)?;
            let hashed: Vec<Result<Looked>> = crate::par::map(&opened, |(i, file)| {
                let look = || crate::sys::fs::fstat(file).ok().map(|st| StatKey::of(&st));
                let before = clock.and_then(|_| look());
                let mut h = pack::HashingReader::new(file);
                io::copy(&mut h, &mut io::sink())
                    .ctx("read", self.root.join(entries[*i].path.as_path()))?;
                let key = before
                    .filter(|k| clock.is_some_and(|c| k.ctime < c) && look().as_ref() == Some(k));
                Ok(Looked {
                    i: *i,
                    id: h.finish().0,
                    key,
                })
            });
            for r in hashed {
                let Looked { i, id, key } = r?;
                if let Pre::File { blob, .. } = &mut entries[i].pre {
                    *blob = id;
                }
                if let Some(k) = key {
                    keys.insert(i, k);
                }
            }
        }
        Ok((entries, keys))
    }

    /// Saves the current state of `rels` (bytes included, whatever their
    /// size) in a durable `saved` record before an operation changes them.
    /// A regular file with no other name is kept aside rather than read
    /// where the store's file system allows and `expect` says its bytes
    /// need no read (see [`crate::aside`]); `expect: None` reads every
    /// file. Returns the record's seq; the states are in the index
    /// (`index.saved`).
    pub(crate) fn save_states(
        &mut self,
        rels: &[RelPath],
        expect: Option<&dyn Fn(&RelPath) -> Expect>,
    ) -> Result<u64> {
        let seq = self.index.last_seq + 1;
        let store = match expect.filter(|_| crate::sys::KEEP_ASIDE) {
            Some(_) => {
                Some(crate::sys::dup(&self.dirs().store).ctx("open", self.store_path.clone())?)
            }
            None => None,
        };
        let mut keeping = expect.zip(store).map(|(expect, store)| Keeping {
            keeper: aside::Keeper::new(store, seq),
            expect,
            off: false,
        });
        let saved = self.save_keeping(rels, seq, keeping.as_mut());
        match (saved, keeping) {
            (Ok(s), _) => Ok(s),
            (Err(e), Some(k)) => {
                k.keeper.abandon();
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    fn save_keeping(
        &mut self,
        rels: &[RelPath],
        seq: u64,
        mut keeping: Option<&mut Keeping>,
    ) -> Result<u64> {
        let mut collected = self.collect(
            rels,
            &HashSet::new(),
            Collect::State,
            keeping.as_deref_mut(),
        )?;
        // The other names of a hard-linked file are saved too, so reversing
        // the operation makes them one file again (the files with more than
        // one name were noted as they were looked at).
        let linked = std::mem::take(&mut collected.linked);
        let names = crate::links::names_of(self, linked, rels)?;
        if !names.found.is_empty() {
            let more = self.collect(&names.found, &HashSet::new(), Collect::State, None)?;
            let at = collected.entries.len();
            collected.entries.extend(more.entries);
            collected
                .files
                .extend(more.files.into_iter().map(|(i, size)| (at + i, size)));
        }
        if let Some(k) = keeping.filter(|k| k.keeper.any()) {
            k.keeper.sync().ctx(
                "flush the files kept in",
                self.store_path.join(aside::ASIDE_DIR),
            )?;
        }
        let mut entries = collected.entries;
        let pack_name = pack::pack_name(seq);
        let (blobs, _) = self.store_blobs(&mut entries, collected.files, &pack_name)?;
        // Moved into the record, then into the index: one copy of every
        // path's state (memory grows with the paths).
        let appended = self.append(Op::Saved {
            pack: (!blobs.is_empty()).then_some(pack_name),
            blobs,
            files: entries,
        })?;
        debug_assert_eq!(appended, seq);
        Ok(appended)
    }

    /// `rels`, each spelled as the turn first captured it when it names the
    /// same file under another spelling (another case or Unicode
    /// normalization, on a file system that does not tell them apart): the
    /// identity is the file (`st_dev`, `st_ino`), the key only finds the
    /// candidates (`crate::names::identity_key`).
    /// Only where such file systems are the default (macOS, Windows): on
    /// Linux (ext4's casefold directories aside) it costs nothing. It keys
    /// every path the turn captured, so a capture into a turn of n paths
    /// costs O(n) there.
    fn first_spellings(&self, already: &HashSet<RelPath>, rels: &[RelPath]) -> Vec<RelPath> {
        if !crate::sys::CASE_INSENSITIVE_DEFAULT || rels.iter().all(|r| already.contains(r)) {
            return rels.to_vec();
        }
        let keyed: HashMap<String, &RelPath> = already
            .iter()
            .map(|p| (crate::names::identity_key(&p.to_string()), p))
            .collect();
        let ident = |p: &RelPath| {
            crate::sys::fs::statat(
                &self.root_fd,
                p.as_path(),
                crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .ok()
            .map(|st| (crate::sys::dev(&st), st.st_ino))
        };
        rels.iter()
            .map(
                |r| match keyed.get(&crate::names::identity_key(&r.to_string())) {
                    Some(&first)
                        if first != r && ident(first).is_some() && ident(first) == ident(r) =>
                    {
                        first.clone()
                    }
                    _ => r.clone(),
                },
            )
            .collect()
    }

    /// Looks at each path without following symlinks and says what it is.
    /// Regular files are opened (their bytes are read by the caller).
    fn collect(
        &self,
        rels: &[RelPath],
        already: &HashSet<RelPath>,
        mode: Collect,
        mut keeping: Option<&mut Keeping>,
    ) -> Result<Collected> {
        let mut out = Collected::default();
        out.entries.reserve(rels.len());
        let mut seen: HashSet<RelPath> = HashSet::new();
        // Files to keep aside, with how many directories they are in: kept
        // a run at a time, which holds the runs' directories open.
        let mut to_keep: Vec<Pending> = Vec::new();
        let mut to_keep_dirs = 0;
        // Directory handles on the way to the current path, reached
        // without following symlinks.
        let mut walk = self.walk();
        // `rels`, then the paths links captured earlier lead to.
        let mut queue: Vec<RelPath> = Vec::new();
        let mut qi = 0;
        while qi < rels.len() + queue.len() {
            let rel = match rels.get(qi) {
                Some(r) => r.clone(),
                None => queue[qi - rels.len()].clone(),
            };
            qi += 1;
            if already.contains(&rel) {
                // A link captured earlier in the turn (as absent, or pointing
                // elsewhere) may now lead to a file the turn has not
                // captured: a write through it lands there.
                match self.resolve(rel.as_path(), true) {
                    Ok(t) if t != rel => queue.push(t),
                    Ok(_) | Err(Error::BadPath { .. }) => {}
                    Err(e) => return Err(e),
                }
                if !out.already.contains(&rel) {
                    out.already.push(rel);
                }
                continue;
            }
            if !seen.insert(rel.clone()) {
                continue;
            }
            // A name this file system cannot hold (a store made on Linux,
            // read on Windows) is never looked up: it would reach a device,
            // a stream or another file. Its state is unknown here.
            if let Some(reason) = rel.reason_not_here() {
                out.entries.push(FileEntry {
                    path: rel,
                    pre: Pre::Skipped { reason, size: 0 },
                });
                continue;
            }
            // Walk to the parent, from the directories held for the path
            // before (paths in order open each directory once). On capture,
            // directories the write would have to create are recorded as
            // absent, so a rewind removes them.
            let ancestors = rel.ancestors();
            let reach = walk.parent_of(&rel, false).ctx(
                "open directory",
                self.root.join(
                    rel.parent()
                        .map(|p| p.as_path().to_owned())
                        .unwrap_or_default(),
                ),
            )?;
            let dir = match reach {
                Reach::Open(d) => Some(d),
                Reach::Missing { at } => {
                    if mode == Collect::Capture {
                        for a in &ancestors[at..] {
                            if !already.contains(a) && seen.insert(a.clone()) {
                                out.entries.push(FileEntry {
                                    path: a.clone(),
                                    pre: Pre::Absent,
                                });
                            }
                        }
                    }
                    None
                }
                // A file or symlink where a directory would go: nothing can
                // be at the path.
                Reach::NotDir { .. } => None,
            };
            let Some(dir) = dir else {
                out.entries.push(FileEntry {
                    path: rel,
                    pre: Pre::Absent,
                });
                continue;
            };
            let shown = self.root.join(rel.as_path());
            let name = rel.file_name();
            let st = fsx::lstat_at(dir, name).ctx("look at", &shown)?;
            if let Some(st) = &st {
                out.linked.note(&rel, st);
            }
            let pre = match st.as_ref().map_or(Node::Missing, fsx::node_of) {
                Node::Missing => Pre::Absent,
                Node::Dir if mode == Collect::Capture => {
                    return Err(Error::IsDirectory {
                        path: rel.to_string(),
                    });
                }
                Node::Dir => {
                    let st = crate::sys::fs::statat(
                        dir,
                        name,
                        crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
                    )
                    .ctx("look at", &shown)?;
                    Pre::Dir {
                        mode: crate::sys::mode(&st) & 0o7777,
                    }
                }
                Node::Other => {
                    let (st_mode, _) = fsx::mode_owner_at(dir, name).ctx("look at", &shown)?;
                    crate::special::pre_of_special(st_mode)
                }
                Node::Symlink => {
                    let target = fsx::read_link(dir, name).ctx("read symlink", &shown)?;
                    match target.into_string() {
                        Ok(target) => {
                            if mode == Collect::Capture {
                                // A write through the link changes its target:
                                // capture that too, when it is inside the root.
                                match self.resolve(rel.as_path(), true) {
                                    Ok(t) if t != rel => queue.push(t),
                                    Ok(_) => {}
                                    Err(Error::BadPath { .. }) => {
                                        out.links_outside.push(rel.clone())
                                    }
                                    Err(e) => return Err(e),
                                }
                            }
                            Pre::Symlink { target }
                        }
                        Err(_) => Pre::Skipped {
                            reason: "symlink target is not valid UTF-8".into(),
                            size: 0,
                        },
                    }
                }
                Node::File { size, .. }
                    if mode == Collect::Capture && size > self.options.max_file_size =>
                {
                    Pre::Skipped {
                        reason: format!(
                            "larger than the {}-byte cap (--max-file-size)",
                            self.options.max_file_size
                        ),
                        size,
                    }
                }
                Node::File { size, mode: bits } => {
                    let st = st.as_ref().filter(|st| crate::sys::nlink(st) == 1);
                    // The hash it would be kept with, if any: kept aside
                    // below, once a run of files is collected.
                    let keep = match (keeping.as_deref(), st) {
                        (Some(k), Some(st)) if mode == Collect::State && !k.off => {
                            match (k.expect)(&rel) {
                                Expect::Nothing => Some((None, None)),
                                Expect::Hash => None,
                                Expect::Post(blob, key) => {
                                    (StatKey::of(st) == key).then_some((Some(blob), Some(key)))
                                }
                            }
                        }
                        _ => None,
                    };
                    if let Some((blob, look)) = keep {
                        let dir = walk.shared();
                        if !to_keep
                            .last()
                            .is_some_and(|t: &Pending| same_dir(t.dir.as_deref(), dir.as_deref()))
                        {
                            to_keep_dirs += 1;
                        }
                        to_keep.push(Pending {
                            at: out.entries.len(),
                            dir,
                            blob,
                            look,
                            size,
                        });
                    } else {
                        out.files.push((out.entries.len(), size));
                    }
                    // Filled in once the blob is hashed.
                    Pre::File {
                        blob: BlobId([0; 32]),
                        size,
                        mode: bits,
                        link: None,
                    }
                }
            };
            out.entries.push(FileEntry { path: rel, pre });
            if let Some(k) = keeping.as_deref_mut()
                && (to_keep.len() >= KEEP_RUN || to_keep_dirs >= KEEP_RUN_DIRS)
            {
                self.keep_pending(k, &mut to_keep, &mut out);
                to_keep_dirs = 0;
            }
        }
        if let Some(k) = keeping {
            self.keep_pending(k, &mut to_keep, &mut out);
            out.files.sort_unstable_by_key(|&(at, _)| at);
        }
        Ok(out)
    }

    /// Keeps the files of `pending` aside, on every core (see
    /// [`aside::Keeper::keep_all`]): a file kept gets its entry's `aside`
    /// state, a file not kept is read.
    fn keep_pending(&self, k: &mut Keeping, pending: &mut Vec<Pending>, out: &mut Collected) {
        let seq = self.index.last_seq + 1;
        let files: Vec<aside::ToKeep> = pending
            .iter()
            .map(|p| aside::ToKeep {
                dir: p.dir.as_deref().unwrap_or(&self.root_fd),
                name: out.entries[p.at].path.file_name(),
                look: p.look,
            })
            .collect();
        let results = k.keeper.keep_all(&files);
        drop(files);
        for (p, kept) in pending.drain(..).zip(results) {
            match kept {
                Ok(kept) => {
                    out.entries[p.at].pre = Pre::Aside {
                        seq,
                        n: kept.n,
                        size: kept.size,
                        mode: kept.mode,
                        blob: p.blob,
                    }
                }
                Err(why) => {
                    k.off |= matches!(why, aside::NotKept::None);
                    out.files.push((p.at, p.size));
                }
            }
        }
    }

    /// Hashes and compresses `files` into one new pack (small files in
    /// parallel, large ones streamed), fills in their blob ids, and makes the
    /// pack durable. Blobs already stored are not written again.
    fn store_blobs(
        &self,
        entries: &mut [FileEntry],
        files: Vec<(usize, u64)>,
        pack_name: &str,
    ) -> Result<(Vec<StoredBlob>, u64)> {
        if files.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let packs = &self.dirs().packs;
        let mut writer = PackWriter::create(&self.dirs().store, &self.store_path)?;
        let result = self.fill_pack(&mut writer, entries, files);
        match result {
            Ok((blobs, stored)) if !blobs.is_empty() => {
                writer.commit(packs, pack_name)?;
                Ok((blobs, stored))
            }
            Ok(done) => {
                writer.abandon();
                Ok(done)
            }
            Err(e) => {
                writer.abandon();
                Err(e)
            }
        }
    }

    /// Opens the regular files of `chunk` for reading, never through a
    /// symlink, and updates their entries' size and mode from `fstat`.
    fn open_files(
        &self,
        walk: &mut DirStack,
        entries: &mut [FileEntry],
        chunk: &[(usize, u64)],
    ) -> Result<Vec<(usize, File)>> {
        let mut out = Vec::with_capacity(chunk.len());
        let changed = |shown: PathBuf| Error::Io {
            op: "capture",
            path: shown,
            source: io::Error::other("it changed while being captured; try again"),
        };
        for &(i, _) in chunk {
            let rel = &entries[i].path;
            let shown = self.root.join(rel.as_path());
            let dir = match walk.parent_of(rel, false).ctx("open directory", &shown)? {
                Reach::Open(d) => d,
                _ => return Err(changed(shown)),
            };
            let (file, st) = fsx::open_file_stat(dir, rel.file_name()).ctx("open", &shown)?;
            match (fsx::node_of(&st), &mut entries[i].pre) {
                (
                    Node::File { size, mode },
                    Pre::File {
                        size: s,
                        mode: m,
                        link,
                        ..
                    },
                ) => {
                    (*s, *m) = (size, mode);
                    *link = crate::links::link_of(&st);
                    out.push((i, file));
                }
                _ => return Err(changed(shown)),
            }
        }
        Ok(out)
    }

    fn fill_pack(
        &self,
        writer: &mut PackWriter,
        entries: &mut [FileEntry],
        files: Vec<(usize, u64)>,
    ) -> Result<(Vec<StoredBlob>, u64)> {
        let level = self.options.compression_level;
        let mut blobs: Vec<StoredBlob> = Vec::with_capacity(files.len());
        let mut fresh: HashSet<BlobId> = HashSet::new();
        let mut stored = 0u64;
        let (small, large): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|(_, size)| *size <= WHOLE_READ_LIMIT);
        let shown = |i: usize, entries: &[FileEntry]| self.root.join(entries[i].path.as_path());
        let set_blob = |entries: &mut [FileEntry], i: usize, id: BlobId, len: u64| {
            if let Pre::File { blob, size, .. } = &mut entries[i].pre {
                *blob = id;
                *size = len;
            }
        };
        // Bounded memory and descriptors: chunks of at most OPEN_CHUNK files
        // or 64 MiB.
        let mut chunks: Vec<&[(usize, u64)]> = Vec::new();
        let (mut start, mut bytes) = (0, 0u64);
        for (k, (_, size)) in small.iter().enumerate() {
            if k > start && (k - start >= OPEN_CHUNK || bytes + size > 64 << 20) {
                chunks.push(&small[start..k]);
                (start, bytes) = (k, 0);
            }
            bytes += size;
        }
        if start < small.len() {
            chunks.push(&small[start..]);
        }
        // Directories on the way to the files, each opened once.
        let mut walk = self.walk();
        // Packs holding the previous versions deltas are made against, each
        // opened once (a handful: the turns' packs).
        let mut base_packs: HashMap<String, File> = HashMap::new();
        for chunk in chunks {
            let opened = self.open_files(&mut walk, entries, chunk)?;
            for (i, _) in &opened {
                let size = match &entries[*i].pre {
                    Pre::File { size, .. } => *size,
                    _ => continue,
                };
                let Some((_, loc)) = self.delta_base_loc(&entries[*i].path, size) else {
                    continue;
                };
                if !base_packs.contains_key(&*loc.pack) {
                    if base_packs.len() >= 16 {
                        base_packs.clear();
                    }
                    // A pack that is missing or not a regular file only
                    // means no delta (as a damaged base does); any other
                    // error (out of descriptors, I/O) fails the command.
                    match self.open_pack(&loc.pack) {
                        Ok(f) => {
                            base_packs.insert(loc.pack.to_string(), f);
                        }
                        Err(Error::Io { source, .. })
                            if matches!(
                                source.kind(),
                                io::ErrorKind::NotFound | io::ErrorKind::Other
                            ) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            let base_packs = &base_packs;
            let known = &self.index.blobs;
            let entries_ro: &[FileEntry] = entries;
            let done: Vec<Result<Hashed, (usize, io::Error)>> =
                crate::par::map(&opened, |(i, file)| {
                    let size = match &entries_ro[*i].pre {
                        Pre::File { size, .. } => *size,
                        _ => 0,
                    };
                    let mut data = Vec::with_capacity(size.min(WHOLE_READ_LIMIT) as usize);
                    file.take(WHOLE_READ_LIMIT + 1)
                        .read_to_end(&mut data)
                        .map_err(|e| (*i, e))?;
                    let id = pack::hash_bytes(&data);
                    if known.contains_key(&id) {
                        return Ok(Hashed {
                            i: *i,
                            id,
                            len: data.len() as u64,
                            frame: None,
                            base: None,
                        });
                    }
                    let (frame, base) = match self.delta_base(
                        &entries_ro[*i].path,
                        data.len() as u64,
                        base_packs,
                    ) {
                        Some((base, base_bytes)) => (
                            pack::compress_delta(&data, &base_bytes, level).map_err(|e| (*i, e))?,
                            Some(base),
                        ),
                        None => (
                            pack::compress_whole(&data, level).map_err(|e| (*i, e))?,
                            None,
                        ),
                    };
                    Ok(Hashed {
                        i: *i,
                        id,
                        len: data.len() as u64,
                        frame: Some(frame),
                        base,
                    })
                });
            for r in done {
                let Hashed {
                    i,
                    id,
                    len,
                    frame,
                    base,
                } = r.map_err(|(i, e)| Error::Io {
                    op: "read",
                    path: shown(i, entries),
                    source: e,
                })?;
                set_blob(entries, i, id, len);
                if let Some(frame) = frame
                    && let Some(blob) = append_once(writer, &mut fresh, id, len, &frame, base)?
                {
                    stored += blob.len;
                    blobs.push(blob);
                }
            }
        }
        for one in large.chunks(1) {
            let Some((i, file)) = self.open_files(&mut walk, entries, one)?.pop() else {
                continue;
            };
            let (id, len, blob) =
                append_streamed(writer, &mut fresh, &self.index.blobs, &file, level)?;
            set_blob(entries, i, id, len);
            if let Some(blob) = blob {
                stored += blob.len;
                blobs.push(blob);
            }
        }
        Ok((blobs, stored))
    }

    /// Captures `path` in `turn`, then replaces its contents with `bytes`
    /// (temporary file and rename: the file is never seen half-written). A
    /// symlink inside the root is written through, like an editor does; one
    /// pointing outside is refused. A file with other names (hard links)
    /// keeps plain-write semantics inside the project: every name is
    /// captured, then re-linked to the new file, so all of them see the new
    /// bytes; names outside the project keep the old ones and are listed in
    /// [`CaptureReport::hard_links_outside`].
    pub fn write(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        path: impl AsRef<Path>,
        bytes: &[u8],
    ) -> Result<CaptureReport> {
        let rel = self.resolve(path.as_ref(), false)?;
        let target = self.resolve(rel.as_path(), true)?;
        let _guard = self.begin_mutation()?;
        // The other names of a hard-linked file see the new bytes too: they
        // are captured with it and re-linked to the new file.
        let names = crate::links::other_names(self, std::slice::from_ref(&target))?;
        // The post-image goes in the same record as the pre-image; should
        // the write below fail, the file keeps its pre-image, which a rewind
        // treats as a change since the turn and saves before replacing.
        // Directories the write will create are what the turn leaves there.
        let mut posts: Vec<PostEntry> = self
            .dirs_to_create(&target)?
            .into_iter()
            .map(|path| PostEntry {
                path,
                post: Post::Dir,
            })
            .collect();
        let sha256 = pack::hash_bytes(bytes);
        for path in std::iter::once(&target).chain(&names.found) {
            posts.push(PostEntry {
                path: path.clone(),
                // Written just now: its look could not be trusted later.
                post: Post::File { sha256, stat: None },
            });
        }
        let rels: Vec<RelPath> = std::iter::once(rel).chain(names.found.clone()).collect();
        let mut report = self.capture_locked(turn, label, &rels, posts)?;
        let lost = self.write_file(&target, bytes)?;
        report
            .warnings
            .extend(lost.into_iter().map(|w| format!("{target}: {w}")));
        crate::links::relink(self, &target, &names.found)?;
        Ok(report)
    }

    /// The ancestors of `rel` that are not directories now (a write to
    /// `rel` creates them), shallowest first. Symlinks are not followed.
    pub(crate) fn dirs_to_create(&self, rel: &RelPath) -> Result<Vec<RelPath>> {
        let mut dir = crate::sys::dup(&self.root_fd).ctx("open", &self.root)?;
        let ancestors = rel.ancestors();
        for (k, anc) in ancestors.iter().enumerate() {
            match fsx::open_subdir(&dir, anc.file_name()) {
                Ok(Some(d)) => dir = d,
                Ok(None) => return Ok(ancestors[k..].to_vec()),
                // A file or symlink in the way: the write fails there.
                Err(e)
                    if e.kind() == io::ErrorKind::NotADirectory
                        || e.raw_os_error() == Some(crate::sys::Errno::NOTDIR.raw_os_error()) =>
                {
                    return Ok(Vec::new());
                }
                Err(e) => return Err(e).ctx("open directory", self.root.join(anc.as_str())),
            }
        }
        Ok(Vec::new())
    }

    /// Replaces `rel` by `bytes`, keeping the mode and extended attributes
    /// of the file there; returns what of those could not be kept.
    fn write_file(&self, rel: &RelPath, bytes: &[u8]) -> Result<Vec<String>> {
        let shown = self.root.join(rel.as_path());
        let mut dir = crate::sys::dup(&self.root_fd).ctx("open", &self.root)?;
        for anc in rel.ancestors() {
            let (d, created) = fsx::ensure_subdir(&dir, anc.file_name())
                .ctx("create directory", self.root.join(anc.as_path()))?;
            if created {
                // The new directory's entry in its parent must be durable
                // before anything in it is.
                let parent = self.root.join(anc.as_path());
                let parent = parent.parent().unwrap_or(&self.root);
                fsx::fsync(&dir).ctx("fsync", parent)?;
            }
            dir = d;
        }
        fsx::sweep_stale_temps(&dir);
        let name = rel.file_name();
        let mode = match fsx::node_at(&dir, name).ctx("look at", &shown)? {
            Node::File { mode, .. } => mode,
            Node::Dir => {
                return Err(Error::IsDirectory {
                    path: rel.to_string(),
                });
            }
            _ => 0o644,
        };
        let (file, temp, lost) = fsx::create_temp_replacing(&dir, name, mode)
            .ctx("create a temporary file beside", &shown)?;
        let tmp = temp.beside(name);
        let mut w = BufWriter::new(file);
        let res = w
            .write_all(bytes)
            .and_then(|()| w.flush())
            .ctx("write", &shown)
            .and_then(|()| {
                // fsync, not fdatasync: the mode set on the temporary file
                // is metadata, which fdatasync need not make durable.
                let f = w.get_ref();
                fsx::fsync(f).ctx("fsync", &shown)
            })
            .and_then(|()| fsx::rename(&dir, &tmp, name).ctx("replace", &shown));
        if let Err(e) = res {
            let _ = fsx::unlink(&dir, &tmp);
            return Err(e);
        }
        // The rename is durable only once its directory is: without this, a
        // power loss after the command answered could bring back the old
        // bytes.
        let parent = shown.parent().unwrap_or(&self.root);
        fsx::fsync(&dir).ctx("fsync", parent)?;
        Ok(lost)
    }

    /// Reads a blob's verified bytes into memory (for diffs).
    pub fn read_blob(&self, id: &BlobId) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.copy_blob(id, &mut out)?;
        Ok(out)
    }

    pub(crate) fn copy_blob(&self, id: &BlobId, out: &mut impl Write) -> Result<()> {
        let loc = self.index.blobs.get(id).ok_or_else(|| Error::BlobDamaged {
            id: id.to_hex(),
            reason: "no record stores it".into(),
        })?;
        let pack = self.open_pack(&loc.pack)?;
        self.copy_blob_from(&pack, id, &loc, out)
    }

    /// Decompresses blob `id` at `loc` in the open `pack` into `out`,
    /// verifying its hash (and, for a delta, its base's).
    pub(crate) fn copy_blob_from(
        &self,
        pack: &File,
        id: &BlobId,
        loc: &BlobLoc,
        out: &mut impl Write,
    ) -> Result<()> {
        let base = match &loc.base {
            Some(b) if self.index.delta_depth(id) > pack::MAX_DELTA_DEPTH => {
                return Err(Error::BlobDamaged {
                    id: id.to_hex(),
                    reason: format!("its chain of deltas (through {b}) is too long or loops"),
                });
            }
            Some(b) => Some(self.read_blob(b)?),
            None => None,
        };
        pack::read_blob(pack, id, loc, base.as_deref(), out)
    }

    /// The previous version of `path` to compress a new version against,
    /// with its bytes, when a delta is worth making.
    fn delta_base(
        &self,
        path: &RelPath,
        size: u64,
        packs: &HashMap<String, File>,
    ) -> Option<(BlobId, Vec<u8>)> {
        let (base, loc) = self.delta_base_loc(path, size)?;
        // A damaged base only means no delta; the new blob is stored whole.
        let bytes = match packs.get(&*loc.pack) {
            Some(pack) => {
                let mut out = Vec::with_capacity(loc.size as usize);
                self.copy_blob_from(pack, &base, &loc, &mut out)
                    .ok()
                    .map(|()| out)
            }
            None => self.read_blob(&base).ok(),
        };
        bytes.map(|b| (base, b))
    }

    /// The previous version of `path` a new version of `size` bytes is
    /// compressed against, and where it is stored, when a delta is worth
    /// making.
    fn delta_base_loc(&self, path: &RelPath, size: u64) -> Option<(BlobId, BlobLoc)> {
        let base = self.index.path_blob.get(path)?;
        let loc = self.index.blobs.get(&base)?;
        if loc.size < 1024
            || loc.size + size > pack::DELTA_LIMIT
            || self.index.delta_depth(&base) + 1 >= pack::MAX_DELTA_DEPTH
        {
            return None;
        }
        Some((base, loc))
    }

    pub(crate) fn open_pack(&self, name: &str) -> Result<File> {
        let path = self.store_path.join(PACKS_DIR).join(name);
        let (file, node) = fsx::open_file(&self.dirs().packs, name).ctx("open pack", &path)?;
        if !matches!(node, Node::File { .. }) {
            return Err(Error::Io {
                op: "open pack",
                path,
                source: io::Error::other("it is not a regular file"),
            });
        }
        Ok(file)
    }
}
