//! Where an operation works: the project root (its path and an open
//! handle), the store's directory and, once opened, its handles; and the
//! directory handles the walks of the operation under way share.
//!
//! The low rooms (hard links, the restore of single paths) take a
//! [`Place`], not the whole [`Store`](super::Store): they read and write
//! the project through it, and nothing of the log or the index.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use crate::dirstack::{DirStack, Held};
use crate::sys::OwnedFd;

/// The store directory's open handles.
pub(crate) struct Dirs {
    pub(crate) store: OwnedFd,
    pub(crate) packs: OwnedFd,
}

/// The project and its store, as the file system names them.
pub(crate) struct Place {
    /// The project root (canonical).
    pub(crate) root: PathBuf,
    pub(crate) root_fd: OwnedFd,
    /// The store's directory; until the first capture creates a store, the
    /// root's marker directory (nothing is opened there then).
    pub(crate) store_path: PathBuf,
    /// The store directory's handles, once it exists and was opened.
    pub(crate) dirs: Option<Dirs>,
    /// The directory handles the walks of the operation under way share
    /// (see [`Place::walk`]); `None` between operations.
    held_dirs: Mutex<Option<Held>>,
}

impl Place {
    pub(crate) fn new(root: PathBuf, root_fd: OwnedFd, store_path: PathBuf) -> Place {
        Place {
            root,
            root_fd,
            store_path,
            dirs: None,
            held_dirs: Mutex::new(None),
        }
    }

    /// The store directory's handles; only called once a mutation or a
    /// read of an existing store opened them.
    pub(crate) fn dirs(&self) -> &Dirs {
        self.dirs
            .as_ref()
            .expect("store directories are opened before use")
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

    pub(crate) fn take_held_dirs(&mut self) -> Option<Held> {
        self.held_dirs
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(crate) fn set_held_dirs(&mut self, held: Option<Held>) {
        // A walk that panicked poisons the lock; the handles it guards are
        // replaced whole, so nothing half-done is read.
        *self
            .held_dirs
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = held;
    }
}
