//! The trash: `<store>/trash/`, extra names of files a rewind replaced, so
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
//! - A link is made only where it can stay on one file system (the store
//!   and the project root on the same device); any link that fails is
//!   passed over, and that file is freed by its rename as before.
//! - A rename that fails removes the link it was given; a crash between a
//!   link and its rename leaves a project file with a second name in the
//!   trash, which the next mutation removes before it reads the project
//!   (so no capture records that name as a hard link).
//! - Entries are only removed, never read or renamed: two processes
//!   emptying the trash at once only race to remove the same names.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::fsx;
use crate::sys::OwnedFd;
use crate::sys::fs::AtFlags;

/// The trash's directory name inside the store.
pub const TRASH_DIR: &str = "trash";

/// Names given by this process, so two processes never pick the same.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The trash of one operation.
pub(crate) struct Trash {
    dir: OwnedFd,
}

impl Trash {
    /// The trash of the store `store` for restoring into `root`, when this
    /// platform defers frees and both are on one device; made if missing.
    /// `None` when it cannot be used (the renames then free as they go).
    pub(crate) fn open(store: &OwnedFd, root: &OwnedFd) -> Option<Trash> {
        if !crate::sys::DEFER_FREES {
            return None;
        }
        let dev = |fd: &OwnedFd| {
            crate::sys::fs::fstat(fd)
                .ok()
                .map(|st| crate::sys::dev(&st))
        };
        if dev(store)? != dev(root)? {
            return None;
        }
        match crate::sys::fs::mkdirat(store, TRASH_DIR, crate::sys::fs::Mode::from_raw_mode(0o700))
        {
            Ok(()) => {}
            Err(e) if e == crate::sys::Errno::EXIST => {}
            Err(_) => return None,
        }
        let dir = fsx::open_subdir(store, TRASH_DIR).ok().flatten()?;
        Some(Trash { dir })
    }

    /// Gives the file `name` in `dir` a second name in the trash; returns
    /// that name, or `None` when it could not be made (nothing there, a
    /// directory, another device, no permission).
    pub(crate) fn keep(&self, dir: &OwnedFd, name: impl fsx::Name) -> Option<String> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let entry = format!("{}-{n}", std::process::id());
        crate::sys::fs::linkat(dir, name, &self.dir, entry.as_str(), AtFlags::empty())
            .ok()
            .map(|()| entry)
    }

    /// Removes the entry `entry` (its file's rename failed).
    pub(crate) fn forget(&self, entry: &str) {
        let _ = fsx::unlink(&self.dir, entry);
    }
}

/// Whether the store `store` has a trash.
pub(crate) fn pending(store: &OwnedFd) -> bool {
    matches!(fsx::node_at(store, TRASH_DIR), Ok(fsx::Node::Dir))
}

/// Removes every entry of the trash of `store`, then the trash itself when
/// it is empty. Best effort: an entry that cannot be removed stays for the
/// next try, and nothing depends on it. Returns the entries removed.
pub(crate) fn empty(store: &OwnedFd) -> usize {
    let Ok(Some(dir)) = fsx::open_subdir(store, TRASH_DIR) else {
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
    let _ = fsx::rmdir(store, TRASH_DIR);
    removed
}

impl crate::store::Store {
    /// Whether a rewind, revert, undo or redo left names in the trash to
    /// remove (see the module doc): a caller that can run work after
    /// answering (the command line starts `turnback empty-trash` in the
    /// background) calls [`Store::empty_trash`] then; otherwise the next
    /// mutation does, before anything else.
    ///
    /// [`Store::empty_trash`]: crate::Store::empty_trash
    pub fn trash_pending(&self) -> bool {
        self.dirs.as_ref().is_some_and(|d| pending(&d.store))
    }

    /// Removes the names in the trash; needs no lock (entries are only
    /// removed, and removing any loses nothing). Returns how many.
    pub fn empty_trash(&mut self) -> crate::Result<usize> {
        if self.location().is_none() {
            return Ok(0);
        }
        self.open_dirs(false)?;
        Ok(self.dirs.as_ref().map_or(0, |d| empty(&d.store)))
    }
}
