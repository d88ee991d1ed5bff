//! Where a project's store lives, and how it is found again.
//!
//! The pre-images must survive the commands they protect against:
//! `git clean -fdx`, `git stash --all`, `rm -rf .turnback`, `rm -rf` of the
//! project itself, re-cloning it. So by default the store lives outside the
//! project, in the user's data directory, and the project holds only a small
//! marker naming it:
//!
//! ```text
//! <data>/                     $TURNBACK_DATA_DIR, else the platform's per-user
//!                             data directory + "/turnback": $XDG_DATA_HOME or
//!                             ~/.local/share (Linux), ~/Library/Application
//!                             Support (macOS), %LOCALAPPDATA% (Windows)
//!   stores/<id>/              one project's store (log.jsonl, packs/, lock, ...)
//!     project                 the root it belongs to: its path, raw bytes
//!     project-identity        and the root directory's identity: "<dev> <ino>"
//!                             (volume serial and file index on Windows)
//!   projects/<sha256(root)>   the registry: "<id>\n" then the root's path
//!   lock                      flock held while a store is created, migrated,
//!                             moved or forked (rare; never on a capture's path)
//! <root>/.turnback/           the marker
//!   .gitignore                "*", so git never picks it up
//!   store.toml                `id = "<id>"`, or `in_project = true`
//! ```
//!
//! `<id>` is 32 hex digits, fresh for every store.
//!
//! Finding the store of a root (the canonical project path):
//! 1. The marker's `store.toml` names it. If that store's `project` is
//!    another path, the folder is told apart by its identity, not by its
//!    path: a move keeps the directory's device and inode, so a root with
//!    the recorded identity is the project moved (the store follows, and the
//!    registry is updated); any other root is a copy (`cp -a`, a clone that
//!    shipped the marker), which gets a store of its own forked from the
//!    original's, whether or not the original still exists: a copy never
//!    takes over or writes into the original's store, so several checkouts
//!    never share one log. A move across file systems is a copy and a
//!    delete, and is treated as a copy (nothing is lost: the fork holds
//!    every turn). When the path matches and the identity does not (the
//!    folder deleted and made again, restored from a backup), the path wins
//!    and the new identity is recorded. A store of an earlier version has
//!    no identity recorded: there, a root whose old path still exists or
//!    still holds a marker naming the store is a copy, and the identity is
//!    recorded from then on.
//! 2. No marker (deleted by `git clean -fdx` or `rm -rf .turnback`, or never
//!    written): the registry entry of the root names it, and the marker is
//!    written again. A project deleted and re-created at the same path finds
//!    its store the same way.
//! 3. A `.turnback/` that holds a store of its own (`log.jsonl`, `packs/`)
//!    and no `store.toml` is a store of the earlier in-project layout: it is
//!    copied to the data directory, then the marker is written, then the old
//!    files are removed. A crash in between leaves either the old store whole
//!    (the marker was not written yet; the next command migrates again) or
//!    the new one named by the marker (the next command removes what is left
//!    of the old files).
//! 4. `store.toml` with `in_project = true`: the store is `.turnback/`
//!    itself, as chosen by `turnback store --in-project` (or, for every new
//!    store, by `TURNBACK_STORE=project` in the environment) for machines
//!    whose home directory is thrown away (dev containers). A command run in the
//!    project can then delete it; that is the price of the choice.
//!
//! A marker or registry entry that names a store which no longer exists is
//! reported as [`crate::Error::StoreGone`]: nothing is created in its place
//! silently, since that would make every earlier turn disappear without a
//! word.
//!
//! Write order: a new store's directory is created and fsynced into
//! `stores/` before the registry entry names it, and the registry entry
//! before the marker does.

use crate::sys::OwnedFd;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sys::fs::{Mode, OFlags};
use sha2::{Digest, Sha256};

use crate::error::{Error, IoResultExt, Result};
use crate::fsx;
use crate::lock::{self, LockGuard};
use crate::path::STORE_DIR;

/// The environment variable that sets the data directory.
pub const DATA_DIR_ENV: &str = "TURNBACK_DATA_DIR";
/// The environment variable that, set to `project`, makes a project that
/// has no store yet keep its new store in `.turnback/` (for a dev container
/// whose home is thrown away: set it once in the container's environment).
pub const STORE_ENV: &str = "TURNBACK_STORE";
/// The marker's file inside `<root>/.turnback/`.
pub const MARKER_FILE: &str = "store.toml";
/// The file in a store directory that names its project root.
pub const PROJECT_FILE: &str = "project";
/// The file in a store directory that holds its root directory's identity.
const IDENTITY_FILE: &str = "project-identity";

const STORES: &str = "stores";
const PROJECTS: &str = "projects";
const GITIGNORE: &[u8] = b"# turnback's marker: never committed\n*\n";
/// Files a store of the in-project layout has; any of them marks one.
const LEGACY_SIGNS: &[&str] = &["log.jsonl", "packs"];
/// What the marker directory keeps when the store lives elsewhere.
const MARKER_KEEPS: &[&str] = &[".gitignore", MARKER_FILE];

/// How long settling a location waits for another process doing the same.
const SETTLE_WAIT: Duration = Duration::from_secs(60);

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// In the data directory, under this id.
    DataDir(String),
    /// In `<root>/.turnback/` itself.
    InProject,
}

/// A located store.
#[derive(Debug, Clone)]
pub struct Location {
    /// The store's directory.
    pub store_dir: PathBuf,
    /// Where it is.
    pub kind: Kind,
    /// What finding it did or noticed (a marker rewritten, a move followed,
    /// a copy forked, an old layout migrated), for the user to read.
    pub notes: Vec<String>,
}

/// The data directory: `$TURNBACK_DATA_DIR`, else the platform's.
pub fn data_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        if d.is_absolute() {
            return Ok(d);
        }
        // Relative to what? Each hook starts in another directory.
        return Err(Error::RelativeDataDir { given: d });
    }
    dirs::data_local_dir()
        .map(|d| d.join("turnback"))
        .ok_or(Error::NoDataDir)
}

/// What `store.toml` says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Marker {
    Id(String),
    InProject,
}

/// The layout under a data directory.
#[derive(Debug, Clone)]
pub(crate) struct Data {
    dir: PathBuf,
}

impl Data {
    pub(crate) fn new(dir: PathBuf) -> Data {
        Data { dir }
    }

    /// The data directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn store_dir(&self, id: &str) -> PathBuf {
        self.dir.join(STORES).join(id)
    }

    fn registry_entry(&self, root: &Path) -> PathBuf {
        let key = hex::encode(Sha256::digest(root.as_os_str().as_encoded_bytes()));
        self.dir.join(PROJECTS).join(key)
    }

    /// The id the registry names for `root`.
    fn registered(&self, root: &Path) -> Result<Option<String>> {
        let path = self.registry_entry(root);
        let Some(text) = read_small(&path)? else {
            return Ok(None);
        };
        let cut = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
        let (id, named) = (&text[..cut], text.get(cut + 1..).unwrap_or(b""));
        let id = String::from_utf8_lossy(id).into_owned();
        if !valid_id(&id) || named != root.as_os_str().as_encoded_bytes() {
            return Err(Error::BadMarker {
                path,
                reason: "it is not a registry entry of this project".into(),
            });
        }
        Ok(Some(id))
    }

    /// Whether the registry has an entry for `root`.
    pub(crate) fn knows(&self, root: &Path) -> bool {
        self.registry_entry(root).is_file()
    }

    fn register(&self, root: &Path, id: &str) -> Result<()> {
        let dir = self.dir.join(PROJECTS);
        let fd = ensure_dir_path(&dir)?;
        let mut bytes = format!("{id}\n").into_bytes();
        bytes.extend_from_slice(root.as_os_str().as_encoded_bytes());
        let name = file_name(&self.registry_entry(root));
        fsx::replace_file(&fd, &name, &bytes).ctx("write", dir.join(&name))?;
        fsx::fsync(&fd).ctx("fsync", &dir)
    }

    fn unregister_if(&self, root: &Path, id: &str) -> Result<()> {
        if self.registered(root).ok().flatten().as_deref() == Some(id) {
            let path = self.registry_entry(root);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx("remove", path),
            }
        }
        Ok(())
    }

    fn lock(&self) -> Result<LockGuard> {
        let fd = ensure_dir_path(&self.dir)?;
        lock::acquire(&fd, &self.dir, true, SETTLE_WAIT)
    }
}

/// The data directory's lock, taken once when a step first needs it and
/// held to the end of the whole operation (a `flock` is not re-entrant).
struct Held<'a> {
    data: &'a Data,
    guard: Option<LockGuard>,
}

impl Held<'_> {
    fn take(&mut self) -> Result<()> {
        if self.guard.is_none() {
            self.guard = Some(self.data.lock()?);
        }
        Ok(())
    }
}

/// Finds the store of `root` (canonical) and puts its location in order
/// (see the module docs). `Ok(None)`: the project has no store yet.
pub(crate) fn find(root: &Path, data: &Data) -> Result<Option<Location>> {
    find_in(root, &mut Held { data, guard: None })
}

fn find_in(root: &Path, held: &mut Held<'_>) -> Result<Option<Location>> {
    let data = held.data;
    refuse_linked_marker_dir(root)?;
    let marker_path = root.join(STORE_DIR).join(MARKER_FILE);
    match read_marker(&marker_path)? {
        Some(Marker::InProject) => Ok(Some(Location {
            store_dir: root.join(STORE_DIR),
            kind: Kind::InProject,
            notes: Vec::new(),
        })),
        Some(Marker::Id(id)) => {
            let store_dir = data.store_dir(&id);
            if !store_dir.is_dir() {
                return Err(Error::StoreGone {
                    root: root.to_path_buf(),
                    store_dir,
                    named_by: marker_path,
                });
            }
            if held.guard.is_none() && !settled(root, data, &id)? {
                // Settle under the lock, from a fresh look: another process
                // may have moved, forked or migrated it meanwhile.
                held.take()?;
                return find_in(root, held);
            }
            let mut notes = Vec::new();
            let id = settle_named(root, held, id, &mut notes)?;
            Ok(Some(Location {
                store_dir: data.store_dir(&id),
                kind: Kind::DataDir(id),
                notes,
            }))
        }
        None if has_legacy_store(root) => migrate(root, held).map(Some),
        None => match data.registered(root)? {
            None => Ok(None),
            // A stale entry: the store followed its project elsewhere, and
            // this folder (a new clone at the old path, say) is another one.
            Some(id) if !owned_by(data, &id, root)? && data.store_dir(&id).is_dir() => Ok(None),
            Some(id) => {
                let store_dir = data.store_dir(&id);
                if !store_dir.is_dir() {
                    return Err(Error::StoreGone {
                        root: root.to_path_buf(),
                        store_dir,
                        named_by: data.registry_entry(root),
                    });
                }
                let mut notes = Vec::new();
                match write_marker(root, &Marker::Id(id.clone())) {
                    Ok(()) => notes.push(format!(
                        "{} was missing (deleted by a command?); the store was found through the registry and the marker written again",
                        marker_path.display()
                    )),
                    Err(e) => notes.push(format!(
                        "{} is missing and could not be written again ({e}); the store was found through the registry",
                        marker_path.display()
                    )),
                }
                // A folder made again at the path (`rm -rf` and a new
                // clone) is the store's folder from now on: its identity is
                // recorded, so the folder that was moved away is a copy.
                let id = if settled(root, data, &id)? {
                    id
                } else {
                    held.take()?;
                    settle_named(root, held, id, &mut notes)?
                };
                Ok(Some(Location {
                    store_dir: data.store_dir(&id),
                    kind: Kind::DataDir(id),
                    notes,
                }))
            }
        },
    }
}

/// [`find`] where no data directory is known: only a store kept in the
/// project can be found; any other is [`Error::NoDataDir`].
pub(crate) fn find_in_project(root: &Path) -> Result<Option<Location>> {
    match read_marker(&root.join(STORE_DIR).join(MARKER_FILE))? {
        Some(Marker::InProject) => Ok(Some(Location {
            store_dir: root.join(STORE_DIR),
            kind: Kind::InProject,
            notes: Vec::new(),
        })),
        Some(Marker::Id(_)) => Err(Error::NoDataDir),
        None if has_legacy_store(root) => Err(Error::NoDataDir),
        None => Ok(None),
    }
}

/// With `TURNBACK_STORE=project`, marks `root` (which has no store yet) as
/// keeping its store in the project, and returns that location.
pub(crate) fn in_project_by_env(root: &Path) -> Result<Option<Location>> {
    if std::env::var_os(STORE_ENV).is_none_or(|v| v != "project") {
        return Ok(None);
    }
    write_marker(root, &Marker::InProject)?;
    Ok(Some(Location {
        store_dir: root.join(STORE_DIR),
        kind: Kind::InProject,
        notes: Vec::new(),
    }))
}

/// Creates the store of `root`, which has none (`find` said so), in the
/// data directory.
pub(crate) fn create(root: &Path, data: &Data) -> Result<Location> {
    create_in(root, &mut Held { data, guard: None })
}

fn create_in(root: &Path, held: &mut Held<'_>) -> Result<Location> {
    held.take()?;
    let data = held.data;
    // Another process may have created it while we waited.
    if let Some(found) = find_in(root, held)? {
        return Ok(found);
    }
    if let Some(chosen) = in_project_by_env(root)? {
        return Ok(chosen);
    }
    let id = new_id(root);
    let store_dir = data.store_dir(&id);
    let stores = data.dir.join(STORES);
    let stores_fd = ensure_dir_path(&stores)?;
    let (fd, _) = fsx::ensure_subdir(&stores_fd, &id).ctx("create", &store_dir)?;
    write_project(&fd, &store_dir, root)?;
    fsx::fsync(&stores_fd).ctx("fsync", &stores)?;
    data.register(root, &id)?;
    write_marker(root, &Marker::Id(id.clone()))?;
    Ok(Location {
        store_dir,
        kind: Kind::DataDir(id),
        notes: Vec::new(),
    })
}

/// The marker names `id`, which exists: follow a move, fork a copy, keep
/// the registry current, and remove what a migration left behind.
fn settle_named(
    root: &Path,
    held: &mut Held<'_>,
    id: String,
    notes: &mut Vec<String>,
) -> Result<String> {
    let data = held.data;
    if settled(root, data, &id)? {
        return Ok(id);
    }
    let store_dir = data.store_dir(&id);
    let owner = read_small(&store_dir.join(PROJECT_FILE))?;
    let same_root = owner.as_deref() == Some(root.as_os_str().as_encoded_bytes());
    let owner_path = owner
        .as_deref()
        .map(|b| PathBuf::from(crate::sys::os_str(b)));
    let id = match owner_path {
        Some(other) if !same_root && is_copy(root, data, &id, &other)? => {
            // No mutation of the original (a capture, a gc) while it is copied.
            let from = data.store_dir(&id);
            let from_fd = fsx::open_dir_path(&from).ctx("open", &from)?;
            let source_lock = lock::acquire(&from_fd, &from, false, SETTLE_WAIT)?;
            let fork = adopt_copy(root, data, &from)?;
            drop(source_lock);
            notes.push(format!(
                "this folder is a copy of {}: it gets a store of its own, {}, starting with the original's turns",
                other.display(),
                data.store_dir(&fork).display()
            ));
            fork
        }
        other => {
            // The store's own folder (its path, or its identity after a
            // move): record both as they are now.
            let fd = fsx::open_dir_path(&store_dir).ctx("open", &store_dir)?;
            write_project(&fd, &store_dir, root)?;
            if let Some(old) = other.filter(|_| !same_root) {
                data.unregister_if(&old, &id)?;
                notes.push(format!(
                    "the project moved from {}; its store follows it",
                    old.display()
                ));
            }
            id
        }
    };
    if data.registered(root).ok().flatten().as_deref() != Some(id.as_str()) {
        data.register(root, &id)?;
    }
    remove_leftovers(root)?;
    Ok(id)
}

/// Whether store `id`, named by the marker of `root`, needs nothing done:
/// it belongs to `root`, the registry says so, and no file of the
/// in-project layout is left beside the marker.
fn settled(root: &Path, data: &Data, id: &str) -> Result<bool> {
    Ok(owned_by(data, id, root)?
        && recorded_identity(data, id)? == Some(Identity::of(root)?)
        && data.registered(root).ok().flatten().as_deref() == Some(id)
        && !has_leftovers(root))
}

/// Whether `root`, whose marker names store `id` while the store's
/// `project` names `other`, is a copy of `other` rather than `other` moved:
/// by the recorded identity of the store's folder, or, for a store of an
/// earlier version that has none, by whether `other` is still there.
fn is_copy(root: &Path, data: &Data, id: &str, other: &Path) -> Result<bool> {
    Ok(match recorded_identity(data, id)? {
        Some(recorded) => recorded != Identity::of(root)?,
        None => names_store(other, id) || other.is_dir(),
    })
}

/// A directory's identity: what a rename keeps and a copy does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
}

impl Identity {
    /// The identity of the directory `root` (canonical).
    fn of(root: &Path) -> Result<Identity> {
        let fd = fsx::open_dir_path(root).ctx("open", root)?;
        let st = crate::sys::fs::fstat(&fd).ctx("stat", root)?;
        Ok(Identity {
            dev: crate::sys::dev(&st),
            ino: st.st_ino,
        })
    }

    fn encode(self) -> Vec<u8> {
        format!("{} {}\n", self.dev, self.ino).into_bytes()
    }

    /// `None` for anything but what [`Identity::encode`] writes.
    fn decode(bytes: &[u8]) -> Option<Identity> {
        let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
        let (dev, ino) = text.split_once(' ')?;
        Some(Identity {
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
        })
    }
}

/// The identity recorded for store `id`'s folder. `None` when none is (a
/// store of an earlier version) or the file is not one turnback wrote:
/// the next settle under the lock writes it again.
fn recorded_identity(data: &Data, id: &str) -> Result<Option<Identity>> {
    Ok(read_small(&data.store_dir(id).join(IDENTITY_FILE))?
        .as_deref()
        .and_then(Identity::decode))
}

/// Whether store `id`'s `project` file names `root`.
fn owned_by(data: &Data, id: &str, root: &Path) -> Result<bool> {
    let owner = read_small(&data.store_dir(id).join(PROJECT_FILE))?;
    Ok(owner.as_deref() == Some(root.as_os_str().as_encoded_bytes()))
}

/// The root's `.turnback` must be a real directory: one that is a symlink
/// could name another project's marker or store.
fn refuse_linked_marker_dir(root: &Path) -> Result<()> {
    let dir = root.join(STORE_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::BadMarker {
            path: dir,
            reason: "it is a symlink, which turnback never follows here (it could name another project's store); replace it by a directory".into(),
        }),
        _ => Ok(()),
    }
}

/// Whether `other`'s marker names store `id`.
fn names_store(other: &Path, id: &str) -> bool {
    matches!(
        read_marker(&other.join(STORE_DIR).join(MARKER_FILE)),
        Ok(Some(Marker::Id(named))) if named == id
    )
}

/// A new store for `root` in the data directory, holding a copy of the
/// store directory `from`; the marker names it once it is durable.
/// Returns its id.
fn adopt_copy(root: &Path, data: &Data, from: &Path) -> Result<String> {
    let id = new_id(root);
    let to = data.store_dir(&id);
    copy_store(from, &to)?;
    let fd = fsx::open_dir_path(&to).ctx("open", &to)?;
    write_project(&fd, &to, root)?;
    data.register(root, &id)?;
    write_marker(root, &Marker::Id(id.clone()))?;
    Ok(id)
}

/// Whether the directory holds nothing but the marker's files (an
/// in-project store chosen but never written): no store yet.
pub(crate) fn holds_only_marker(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(|e| e.ok()).all(|e| {
            let name = e.file_name();
            MARKER_KEEPS.contains(&name.to_string_lossy().as_ref())
        })
    })
}

fn has_legacy_store(root: &Path) -> bool {
    let dir = root.join(STORE_DIR);
    LEGACY_SIGNS.iter().any(|n| dir.join(n).exists())
}

fn has_leftovers(root: &Path) -> bool {
    has_legacy_store(root)
}

/// Moves a store of the in-project layout to the data directory.
fn migrate(root: &Path, held: &mut Held<'_>) -> Result<Location> {
    held.take()?;
    let data = held.data;
    let old = root.join(STORE_DIR);
    let old_fd = fsx::open_dir_path(&old).ctx("open", &old)?;
    // No capture may run in the old store while it is copied.
    let _old_lock = lock::acquire(&old_fd, &old, true, SETTLE_WAIT)?;
    if let Some(Marker::Id(id)) = read_marker(&old.join(MARKER_FILE))? {
        // Another process migrated it while we waited.
        remove_leftovers(root)?;
        return Ok(Location {
            store_dir: data.store_dir(&id),
            kind: Kind::DataDir(id),
            notes: Vec::new(),
        });
    }
    let id = adopt_copy(root, data, &old)?;
    let store_dir = data.store_dir(&id);
    remove_leftovers(root)?;
    Ok(Location {
        notes: vec![format!(
            "the store in {} was moved to {}, out of reach of commands run in the project (`turnback store --in-project` moves it back)",
            old.display(),
            store_dir.display()
        )],
        store_dir,
        kind: Kind::DataDir(id),
    })
}

/// Copies the store directory `from` into a new directory `to`: every
/// file fsynced, then the directory renamed into place and fsynced.
/// Temporary files and the lock are not copied.
pub(crate) fn copy_store(from: &Path, to: &Path) -> Result<()> {
    let parent = to.parent().unwrap_or(to);
    let parent_fd = ensure_dir_path(parent)?;
    let staging = to.with_file_name(format!("{}{}", file_name(to), fsx::temp_name("")));
    copy_dir(from, &staging, true)?;
    std::fs::rename(&staging, to).ctx("rename", to)?;
    fsx::fsync(&parent_fd).ctx("fsync", parent)
}

fn copy_dir(from: &Path, to: &Path, top: bool) -> Result<()> {
    copy_dir_linking(from, to, top, false)
}

/// `link`: the files are packs, which are never changed after their rename
/// into place, so a hard link is a copy that costs nothing. Every other
/// file (the log is appended to in place) is copied.
fn copy_dir_linking(from: &Path, to: &Path, top: bool, link: bool) -> Result<()> {
    std::fs::create_dir(to).ctx("create", to)?;
    for e in std::fs::read_dir(from).ctx("list", from)? {
        let e = e.ctx("list", from)?;
        let name = e.file_name();
        let text = name.to_string_lossy();
        if text.contains(fsx::TEMP_MARK)
            || (top && (name == lock::LOCK_FILE || MARKER_KEEPS.contains(&text.as_ref())))
        {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        let ty = e.file_type().ctx("stat", &src)?;
        if ty.is_dir() {
            copy_dir_linking(&src, &dst, false, top && name == "packs")?;
        } else if ty.is_file() && (!link || std::fs::hard_link(&src, &dst).is_err()) {
            std::fs::copy(&src, &dst).ctx("copy", &dst)?;
            // Opened for writing: Windows flushes only through such a handle.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&dst)
                .and_then(|f| f.sync_all())
                .ctx("fsync", &dst)?;
        }
    }
    let fd = fsx::open_dir_path(to).ctx("open", to)?;
    fsx::fsync(&fd).ctx("fsync", to)
}

/// Removes what the in-project layout left in `.turnback/` once the marker
/// names a store elsewhere.
fn remove_leftovers(root: &Path) -> Result<()> {
    let dir = root.join(STORE_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for e in entries {
        let e = e.ctx("list", &dir)?;
        let name = e.file_name();
        if MARKER_KEEPS.contains(&name.to_string_lossy().as_ref()) || name == lock::LOCK_FILE {
            continue;
        }
        let path = e.path();
        let done = if e.file_type().ctx("stat", &path)?.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match done {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).ctx("remove", path),
        }
    }
    Ok(())
}

fn data_for(given: Option<&Path>) -> Result<Data> {
    match given {
        Some(d) => Ok(Data::new(d.to_path_buf())),
        None => data_dir().map(Data::new),
    }
}

fn canonical_root(root: &Path) -> Result<PathBuf> {
    crate::sys::canonicalize(root).ctx("open project root", root)
}

/// Where the store of the project at `root` is, putting its location in
/// order as opening it would (`None`: no store yet). `data_dir`: as
/// [`crate::Options::data_dir`].
pub fn locate(root: &Path, data_dir: Option<&Path>) -> Result<Option<Location>> {
    let root = canonical_root(root)?;
    match data_for(data_dir) {
        Ok(data) => find(&root, &data),
        Err(e) => find_in_project(&root).and_then(|l| l.map(Some).ok_or(e)),
    }
}

/// Moves the store of the project at `root` into `<root>/.turnback/`
/// (`in_project`) or into the data directory, creating it if there is none.
/// Nothing is lost: the copy is durable before the marker names it, and the
/// old store is removed only after.
pub fn move_store(root: &Path, data_dir: Option<&Path>, in_project: bool) -> Result<Location> {
    relocate(&canonical_root(root)?, &data_for(data_dir)?, in_project)
}

/// Forgets the store that the marker or registry entry of the project at
/// `root` names but which no longer exists, so that the next capture starts
/// a new one. Returns the files removed (none when nothing was gone).
pub fn forget(root: &Path, data_dir: Option<&Path>) -> Result<Vec<PathBuf>> {
    forget_gone(&canonical_root(root)?, &data_for(data_dir)?)
}

/// Forgets the project at `root` whether or not its store still exists:
/// removes its marker's `store.toml` and its registry entry, so nothing
/// finds the store from that folder again and the next capture there
/// starts a new one. The store's directory is left as it is (nothing a
/// user might still want is deleted): its path is returned with the files
/// removed. `root` need not exist (a folder deleted long ago). For a
/// registration made by mistake (an older turnback adopted the home
/// folder), or a project no longer wanted.
pub fn forget_project(
    root: &Path,
    data_dir: Option<&Path>,
) -> Result<(Vec<PathBuf>, Option<PathBuf>)> {
    let root = crate::sys::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let data = data_for(data_dir)?;
    let _guard = data.lock()?;
    let mut removed = Vec::new();
    let mut store = None;
    let marker = root.join(STORE_DIR).join(MARKER_FILE);
    if let Ok(Some(Marker::Id(id))) = read_marker(&marker) {
        std::fs::remove_file(&marker).ctx("remove", &marker)?;
        store = Some(data.store_dir(&id));
        removed.push(marker);
    }
    if let Some(id) = data.registered(&root).ok().flatten() {
        let entry = data.registry_entry(&root);
        std::fs::remove_file(&entry).ctx("remove", &entry)?;
        store = Some(data.store_dir(&id));
        removed.push(entry);
    }
    Ok((removed, store.filter(|s| s.is_dir())))
}

/// A project the registry of the data directory knows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Registered {
    /// The project's root, as registered.
    pub root: PathBuf,
    /// Its store's directory.
    pub store_dir: PathBuf,
    /// Whether the store's directory exists.
    pub store_exists: bool,
    /// Whether the root folder exists.
    pub root_exists: bool,
    /// The bytes of the files in the store's directory.
    pub bytes: u64,
}

/// Every project the registry of the data directory (`data_dir`: as
/// [`crate::Options::data_dir`]) knows, sorted by root. A registry entry
/// that cannot be read is left out.
pub fn registered_projects(data_dir: Option<&Path>) -> Result<Vec<Registered>> {
    let data = data_for(data_dir)?;
    let dir = data.dir.join(PROJECTS);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx("list", &dir),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.ctx("list", &dir)?;
        let Some(text) = read_small(&e.path())? else {
            continue;
        };
        let cut = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
        let id = String::from_utf8_lossy(&text[..cut]).into_owned();
        let Some(named) = text.get(cut + 1..) else {
            continue;
        };
        if !valid_id(&id) || named.is_empty() {
            continue;
        }
        // Written from `as_encoded_bytes` of a path by `register`.
        let root = PathBuf::from(crate::sys::os_str(named));
        let store_dir = data.store_dir(&id);
        out.push(Registered {
            root_exists: root.is_dir(),
            store_exists: store_dir.is_dir(),
            bytes: bytes_under(&store_dir),
            root,
            store_dir,
        });
    }
    out.sort_by(|a, b| a.root.cmp(&b.root));
    Ok(out)
}

/// The bytes of the regular files under `dir` (0 when it is not there).
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Chooses where the store of `root` lives: `in_project` true moves it into
/// `<root>/.turnback/`, false into the data directory. Returns the new
/// location; a store that is already there is left as it is.
fn relocate(root: &Path, data: &Data, in_project: bool) -> Result<Location> {
    let held = &mut Held { data, guard: None };
    held.take()?;
    let current = find_in(root, held)?;
    let marker_dir = root.join(STORE_DIR);
    match (current, in_project) {
        (
            Some(
                loc @ Location {
                    kind: Kind::InProject,
                    ..
                },
            ),
            true,
        ) => Ok(loc),
        (
            Some(
                loc @ Location {
                    kind: Kind::DataDir(_),
                    ..
                },
            ),
            false,
        ) => Ok(loc),
        (None, true) => {
            write_marker(root, &Marker::InProject)?;
            Ok(Location {
                store_dir: marker_dir,
                kind: Kind::InProject,
                notes: Vec::new(),
            })
        }
        (None, false) => create_in(root, held),
        (
            Some(Location {
                kind: Kind::DataDir(id),
                store_dir,
                ..
            }),
            true,
        ) => {
            let fd = fsx::open_dir_path(&store_dir).ctx("open", &store_dir)?;
            let _lock = lock::acquire(&fd, &store_dir, true, SETTLE_WAIT)?;
            // The copy goes into `.turnback/` beside the marker (a crash
            // leaves it where the next command removes it), then the marker
            // switches to it, then the old store goes.
            let staging = marker_dir.join(fsx::temp_name("incoming"));
            copy_dir(&store_dir, &staging, true)?;
            move_entries(&staging, &marker_dir)?;
            write_marker(root, &Marker::InProject)?;
            data.unregister_if(root, &id)?;
            std::fs::remove_dir_all(&store_dir).ctx("remove", &store_dir)?;
            Ok(Location {
                notes: vec![format!(
                    "the store moved from {} into {}",
                    store_dir.display(),
                    marker_dir.display()
                )],
                store_dir: marker_dir,
                kind: Kind::InProject,
            })
        }
        (
            Some(Location {
                kind: Kind::InProject,
                ..
            }),
            false,
        ) => {
            let fd = fsx::open_dir_path(&marker_dir).ctx("open", &marker_dir)?;
            let _lock = lock::acquire(&fd, &marker_dir, true, SETTLE_WAIT)?;
            let id = adopt_copy(root, data, &marker_dir)?;
            let store_dir = data.store_dir(&id);
            remove_leftovers(root)?;
            Ok(Location {
                notes: vec![format!(
                    "the store moved from {} to {}",
                    marker_dir.display(),
                    store_dir.display()
                )],
                store_dir,
                kind: Kind::DataDir(id),
            })
        }
    }
}

fn move_entries(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).ctx("create", to)?;
    for e in std::fs::read_dir(from).ctx("list", from)? {
        let e = e.ctx("list", from)?;
        let dst = to.join(e.file_name());
        std::fs::rename(e.path(), &dst).ctx("rename", &dst)?;
    }
    std::fs::remove_dir(from).ctx("remove", from)?;
    let fd = fsx::open_dir_path(to).ctx("open", to)?;
    fsx::fsync(&fd).ctx("fsync", to)
}

/// Forgets the store a marker or registry entry names but which is gone,
/// so the next capture starts a new one. Returns what it removed.
fn forget_gone(root: &Path, data: &Data) -> Result<Vec<PathBuf>> {
    let _guard = data.lock()?;
    let mut removed = Vec::new();
    let marker = root.join(STORE_DIR).join(MARKER_FILE);
    if let Some(Marker::Id(id)) = read_marker(&marker)?
        && !data.store_dir(&id).is_dir()
    {
        std::fs::remove_file(&marker).ctx("remove", &marker)?;
        removed.push(marker);
    }
    if let Some(id) = data.registered(root)?
        && !data.store_dir(&id).is_dir()
    {
        let entry = data.registry_entry(root);
        std::fs::remove_file(&entry).ctx("remove", &entry)?;
        removed.push(entry);
    }
    Ok(removed)
}

fn write_marker(root: &Path, marker: &Marker) -> Result<()> {
    let root_fd = fsx::open_dir_path(root).ctx("open", root)?;
    let dir = root.join(STORE_DIR);
    let (fd, created) = fsx::ensure_subdir(&root_fd, STORE_DIR).ctx("create", &dir)?;
    let text = match marker {
        Marker::Id(id) => format!(
            "# turnback: this project's store lives in the user's data directory, under this id.\n# `turnback store` says where; removing this file does not remove the store.\nid = \"{id}\"\n"
        ),
        Marker::InProject => "# turnback: this project's store is this directory (`turnback store --in-project`).\n# A command run in the project can delete it.\nin_project = true\n".to_string(),
    };
    fsx::replace_file(&fd, ".gitignore", GITIGNORE).ctx("write", dir.join(".gitignore"))?;
    fsx::replace_file(&fd, MARKER_FILE, text.as_bytes()).ctx("write", dir.join(MARKER_FILE))?;
    fsx::fsync(&fd).ctx("fsync", &dir)?;
    if created {
        fsx::fsync(&root_fd).ctx("fsync", root)?;
    }
    Ok(())
}

fn read_marker(path: &Path) -> Result<Option<Marker>> {
    let Some(bytes) = read_small(path)? else {
        return Ok(None);
    };
    let bad = |reason: String| Error::BadMarker {
        path: path.to_path_buf(),
        reason,
    };
    let text = String::from_utf8(bytes).map_err(|_| bad("it is not UTF-8".into()))?;
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        id: Option<String>,
        #[serde(default)]
        in_project: bool,
    }
    let file: File = toml::from_str(&text).map_err(|e| bad(e.message().to_string()))?;
    match (file.id, file.in_project) {
        (None, true) => Ok(Some(Marker::InProject)),
        (Some(id), false) if valid_id(&id) => Ok(Some(Marker::Id(id))),
        (Some(_), false) => Err(bad("its id is not 32 hex digits".into())),
        _ => Err(bad(
            "it must hold either `id = \"...\"` or `in_project = true`".into(),
        )),
    }
}

/// Reads a small regular file; `None` when it does not exist. Never opens
/// a FIFO or device, never follows a final symlink.
fn read_small(path: &Path) -> Result<Option<Vec<u8>>> {
    let fd = match crate::sys::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(crate::sys::Errno::NOENT) | Err(crate::sys::Errno::NOTDIR) => return Ok(None),
        Err(e) => return Err(e).ctx("open", path),
    };
    let st = crate::sys::fs::fstat(&fd).ctx("stat", path)?;
    if crate::sys::file_type(crate::sys::mode(&st)) != crate::sys::fs::FileType::RegularFile {
        return Err(Error::BadMarker {
            path: path.to_path_buf(),
            reason: "it is not a regular file".into(),
        });
    }
    let mut bytes = Vec::new();
    File::from(fd)
        .take(1 << 16)
        .read_to_end(&mut bytes)
        .ctx("read", path)?;
    Ok(Some(bytes))
}

/// Records `root` as the store's folder: its path and its identity.
fn write_project(store_fd: &OwnedFd, store_dir: &Path, root: &Path) -> Result<()> {
    fsx::replace_file(store_fd, PROJECT_FILE, root.as_os_str().as_encoded_bytes())
        .ctx("write", store_dir.join(PROJECT_FILE))?;
    fsx::replace_file(store_fd, IDENTITY_FILE, &Identity::of(root)?.encode())
        .ctx("write", store_dir.join(IDENTITY_FILE))?;
    fsx::fsync(store_fd).ctx("fsync", store_dir)
}

/// Opens a store directory: its parent by path (the data directory may be
/// reached through the user's own symlinks), the store itself never
/// through a symlink. `Ok(None)` when it does not exist.
pub(crate) fn open_store_dir(path: &Path) -> io::Result<Option<OwnedFd>> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a store directory needs a parent",
        ));
    };
    let parent = match fsx::open_dir_path(parent) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    fsx::open_subdir(&parent, name)
}

fn ensure_dir_path(dir: &Path) -> Result<OwnedFd> {
    std::fs::create_dir_all(dir).ctx("create", dir)?;
    fsx::open_dir_path(dir).ctx("open", dir)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn valid_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// A fresh id: unique per root, time and process.
fn new_id(root: &Path) -> String {
    let mut h = Sha256::new();
    h.update(root.as_os_str().as_encoded_bytes());
    h.update(crate::id::now_ns().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    hex::encode(&h.finalize()[..16])
}

/// The store directory of the project at `root`, which has one (tests).
#[cfg(test)]
pub(crate) fn store_dir_of(root: impl AsRef<Path>) -> PathBuf {
    locate(root.as_ref(), None)
        .expect("locate the store")
        .expect("the project has a store")
        .store_dir
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn setup() -> std::result::Result<(tempfile::TempDir, PathBuf, Data), Box<dyn std::error::Error>>
    {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("proj");
        std::fs::create_dir(&root)?;
        let root = std::fs::canonicalize(&root)?;
        let data = Data::new(tmp.path().join("data"));
        Ok((tmp, root, data))
    }

    #[test]
    fn a_new_store_is_registered_and_marked_and_found_again_without_its_marker() -> TestResult {
        let (_tmp, root, data) = setup()?;
        assert!(find(&root, &data)?.is_none());
        let loc = create(&root, &data)?;
        assert!(loc.store_dir.starts_with(&data.dir));
        assert!(!loc.store_dir.starts_with(&root));
        let again = find(&root, &data)?.ok_or("found")?;
        assert_eq!(again.store_dir, loc.store_dir);
        assert!(again.notes.is_empty(), "{:?}", again.notes);
        std::fs::remove_dir_all(root.join(STORE_DIR))?;
        let found = find(&root, &data)?.ok_or("found through the registry")?;
        assert_eq!(found.store_dir, loc.store_dir);
        assert!(found.notes[0].contains("registry"), "{:?}", found.notes);
        assert!(root.join(STORE_DIR).join(MARKER_FILE).is_file());
        Ok(())
    }

    #[test]
    fn a_store_of_an_earlier_version_gets_its_identity_and_moves_by_it_from_then_on() -> TestResult
    {
        let (tmp, root, data) = setup()?;
        let loc = create(&root, &data)?;
        let identity = loc.store_dir.join(IDENTITY_FILE);
        assert_eq!(
            recorded_identity(&data, &id_of(&loc)?)?,
            Some(Identity::of(&root)?)
        );
        // An earlier version wrote no identity: the next look records it.
        std::fs::remove_file(&identity)?;
        assert!(find(&root, &data)?.is_some());
        assert!(identity.is_file());
        // A damaged one is written again, never trusted.
        std::fs::write(&identity, "12 not-a-number\n")?;
        assert!(find(&root, &data)?.is_some());
        assert_eq!(
            recorded_identity(&data, &id_of(&loc)?)?,
            Some(Identity::of(&root)?)
        );
        // Renamed: the same directory, so the same store.
        let moved = tmp.path().join("moved");
        std::fs::rename(&root, &moved)?;
        std::fs::create_dir(&root)?;
        let found = find(&moved, &data)?.ok_or("found")?;
        assert_eq!(found.store_dir, loc.store_dir, "{:?}", found.notes);
        assert!(found.notes[0].contains("moved from"), "{:?}", found.notes);
        Ok(())
    }

    fn id_of(loc: &Location) -> std::result::Result<String, Box<dyn std::error::Error>> {
        match &loc.kind {
            Kind::DataDir(id) => Ok(id.clone()),
            Kind::InProject => Err("a store in the data directory".into()),
        }
    }

    #[test]
    fn a_marker_naming_a_deleted_store_is_reported_and_can_be_forgotten() -> TestResult {
        let (_tmp, root, data) = setup()?;
        let loc = create(&root, &data)?;
        std::fs::remove_dir_all(&loc.store_dir)?;
        let err = find(&root, &data).err().ok_or("an error")?;
        assert!(matches!(err, Error::StoreGone { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&loc.store_dir.display().to_string()), "{msg}");
        assert!(msg.contains("turnback store --forget"), "{msg}");
        assert_eq!(forget_gone(&root, &data)?.len(), 2);
        assert!(find(&root, &data)?.is_none());
        Ok(())
    }

    #[test]
    fn a_bad_or_hostile_marker_is_an_error_naming_it() -> TestResult {
        let (_tmp, root, data) = setup()?;
        let dir = root.join(STORE_DIR);
        std::fs::create_dir(&dir)?;
        for text in [
            "id = \"../../etc\"\n",
            "id = 3\n",
            "in_project = true\nid = \"00\"\n",
        ] {
            std::fs::write(dir.join(MARKER_FILE), text)?;
            let msg = find(&root, &data).err().ok_or("an error")?.to_string();
            assert!(msg.contains("store.toml"), "{text}: {msg}");
        }
        // A FIFO in its place (Unix: Windows has none).
        #[cfg(unix)]
        {
            std::fs::remove_file(dir.join(MARKER_FILE))?;
            crate::sys::mkfifo_at(&dir.join(MARKER_FILE))?;
            let msg = find(&root, &data).err().ok_or("an error")?.to_string();
            assert!(msg.contains("not a regular file"), "{msg}");
        }
        Ok(())
    }

    #[test]
    fn ids_are_32_lowercase_hex_digits_and_differ() -> TestResult {
        let a = new_id(Path::new("/p"));
        std::thread::sleep(Duration::from_millis(1));
        let b = new_id(Path::new("/p"));
        assert!(valid_id(&a) && valid_id(&b), "{a} {b}");
        assert_ne!(a, b);
        assert!(!valid_id("ABCDEF0123456789abcdef0123456789"));
        Ok(())
    }
}
