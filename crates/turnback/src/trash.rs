//! The trash: `<data directory>/trash/`, extra names of files a rewind replaced, so
//! that the replacing rename frees no inode while the user waits.
//!
//! A rename over a file frees the inode it replaces; where the file system
//! pays for frees synchronously (ext4 mounted with `discard`, see
//! [`crate::sys::DEFER_FREES`]) that is most of a full-tree rewind's
//! renames. Just before a restored file is renamed over its path, the file
//! there is hard-linked into the trash under a fresh name
//! (`<pid>-<counter>`); the rename then only drops one of its two names.
//! The names are removed later, off the operation's latency path: by a
//! process the command line starts in the background once the operation
//! is done, else by the next mutation, before anything else (see
//! [`crate::store::Store::begin_mutation`]), or by `gc`.
//!
//! Invariants:
//! - An entry is only ever a second name of a file whose bytes are already
//!   durable elsewhere (the operation's `saved` record precedes every
//!   link), so removing any entry at any time loses nothing.
//! - It lives in the data directory, outside every project (a snapshot of
//!   a project never sees it), shared by the projects on that device;
//!   entries are unique per process. It is used only by a store kept in
//!   the data directory (the default): a store kept in its project
//!   (`turnback store --in-project`) was chosen so that nothing of the
//!   project lives elsewhere, and its rewinds free as they go. A link is
//!   made only where it can stay on one file system (the data directory
//!   and the project root on one device); any link that fails is
//!   passed over, and that file is freed by its rename as before.
//! - A rename that fails removes the link it was given; a crash between a
//!   link and its rename leaves a project file with a second name in the
//!   trash, which the next mutation removes before it reads the project
//!   (so no capture records that name as a hard link).
//! - Entries are only removed, never read or renamed: two processes
//!   emptying the trash at once only race to remove the same names.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fsx;
use crate::sys::OwnedFd;
use crate::sys::fs::AtFlags;

/// The trash's directory name inside the data directory.
pub const TRASH_DIR: &str = "trash";

/// Names given by this process, so two processes never pick the same.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The trash of one operation.
pub(crate) struct Trash {
    dir: OwnedFd,
}

impl Trash {
    /// The trash in the data directory `data` for restoring into `root`,
    /// when this platform defers frees, the data directory exists and both
    /// are on one device; made if missing. `None` when it cannot be used
    /// (the renames then free as they go).
    pub(crate) fn open(data: &Path, root: &OwnedFd) -> Option<Trash> {
        if !crate::sys::DEFER_FREES {
            return None;
        }
        let data_fd = fsx::open_dir_path(data).ok()?;
        let dev = |fd: &OwnedFd| {
            crate::sys::fs::fstat(fd)
                .ok()
                .map(|st| crate::sys::dev(&st))
        };
        if dev(&data_fd)? != dev(root)? {
            return None;
        }
        match crate::sys::fs::mkdirat(
            &data_fd,
            TRASH_DIR,
            crate::sys::fs::Mode::from_raw_mode(0o700),
        ) {
            Ok(()) => {}
            Err(e) if e == crate::sys::Errno::EXIST => {}
            Err(_) => return None,
        }
        let dir = fsx::open_subdir(&data_fd, TRASH_DIR).ok().flatten()?;
        Some(Trash { dir })
    }

    /// Gives the file `name` in `dir` a second name in the trash; returns
    /// that name, or `None` when it could not be made (nothing there, a
    /// directory, another device, no permission).
    pub(crate) fn keep(&self, dir: &OwnedFd, name: impl fsx::Name) -> Option<String> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let entry = format!("{}-{n}", fsx::own_pid());
        crate::sys::fs::linkat(dir, name, &self.dir, entry.as_str(), AtFlags::empty())
            .ok()
            .map(|()| entry)
    }

    /// Removes the entry `entry` (its file's rename failed).
    pub(crate) fn forget(&self, entry: &str) {
        let _ = fsx::unlink(&self.dir, entry);
    }
}

/// The trash of the data directory `data`.
pub(crate) fn path(data: &Path) -> PathBuf {
    data.join(TRASH_DIR)
}

/// Whether the data directory `data` has a trash.
pub(crate) fn pending(data: &Path) -> bool {
    std::fs::symlink_metadata(path(data)).is_ok_and(|m| m.is_dir())
}

/// Removes every entry of the trash of the data directory `data`, then the
/// trash itself when it is empty. Best effort: an entry that cannot be
/// removed stays for the next try, and nothing depends on it. Returns the
/// entries removed.
pub(crate) fn empty(data: &Path) -> usize {
    let Ok(dir) = fsx::open_dir_path(&path(data)) else {
        return 0;
    };
    let (names, _) = crate::sys::list_names(&dir);
    let mut removed = 0;
    for name in names.names() {
        if fsx::unlink(&dir, name).is_ok() {
            removed += 1;
        }
    }
    drop(dir);
    let _ = std::fs::remove_dir(path(data));
    removed
}

impl crate::store::Store {
    /// The trash's directory (see the module doc), when there is a data
    /// directory.
    pub fn trash_dir(&self) -> Option<PathBuf> {
        self.data_dir().map(path)
    }

    /// The data directory whose trash this store's rewinds use: the one
    /// that holds the store (see the module doc).
    pub(crate) fn trash_data_dir(&self) -> Option<&Path> {
        self.data_dir()
            .filter(|data| self.store_path.starts_with(data))
    }

    /// Whether a rewind, revert, undo or redo left names in the trash to
    /// remove (see the module doc): a caller that can run work after
    /// answering calls [`Store::maintain`] (or [`Store::empty_trash`])
    /// then, as the command line does in a background `turnback maintain`;
    /// otherwise the next mutation does, before anything else.
    ///
    /// [`Store::maintain`]: crate::Store::maintain
    /// [`Store::empty_trash`]: crate::Store::empty_trash
    pub fn trash_pending(&self) -> bool {
        crate::sys::DEFER_FREES && self.data_dir().is_some_and(pending)
    }

    /// Removes the names in the trash; needs no lock (entries are only
    /// removed, and removing any loses nothing). Returns how many.
    pub fn empty_trash(&self) -> usize {
        self.data_dir().map_or(0, empty)
    }
}
