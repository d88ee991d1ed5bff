//! The stat of an excluded directory, folded over its whole subtree.
//!
//! An excluded directory is not walked for its contents, so an edit deep
//! inside it would go unseen. Its entry in the tree state therefore carries
//! the latest `mtime` and `ctime` over the directory and everything beneath
//! it, found by a stat-only walk (no file is read, no symlink followed):
//! writing a file, changing its mode, creating, deleting or renaming an
//! entry all set a ctime there to "now", so the folded stat changes and the
//! change is reported as not captured instead of "nothing changed".

use crate::sys::{BorrowedFd, OwnedFd};
use std::ffi::CStr;

use crate::sys::fs::{AtFlags, FileType, Mode, OFlags};

use crate::tree::Stat;

/// Deeper than this, a subtree is not folded further.
const MAX_DEPTH: usize = 512;

/// `stat` (the directory `name` of `dir`'s own) with its times raised to the
/// latest over its subtree. A part that cannot be read is skipped.
pub(crate) fn fold(dir: BorrowedFd<'_>, name: &CStr, stat: Stat) -> Stat {
    let mut acc = stat;
    if let Some(fd) = open_dir(dir, name) {
        fold_dir(&fd, &mut acc, 0);
    }
    acc
}

fn open_dir(dir: BorrowedFd<'_>, name: &CStr) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    crate::sys::fs::openat(dir, name, flags, Mode::empty()).ok()
}

fn fold_dir(fd: &OwnedFd, acc: &mut Stat, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    // A listing cut short by an error folds what it read.
    let (names, _) = crate::sys::list_names(fd);
    for name in names.names() {
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let Ok(st) = crate::sys::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let s = Stat::of_raw(&st);
        acc.mtime_ns = acc.mtime_ns.max(s.mtime_ns);
        acc.ctime_ns = acc.ctime_ns.max(s.ctime_ns);
        if crate::sys::file_type(crate::sys::mode(&st)) == FileType::Directory
            && let Some(sub) = open_dir(crate::sys::AsFd::as_fd(fd), name)
        {
            fold_dir(&sub, acc, depth + 1);
        }
    }
}
