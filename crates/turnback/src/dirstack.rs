//! A walk of directories beneath the root that holds one open handle per
//! level: the directory handles a rewind (or a save of current states)
//! needs, each opened once when the paths come sorted.
//!
//! [`DirStack`] keeps the root and, above it, the chain of directories
//! leading to the last directory asked for, each opened from the one below
//! it with `openat(O_DIRECTORY | O_NOFOLLOW)` (see [`crate::fsx`]): no
//! symlink is ever followed and no `..` taken, so a directory swapped for a
//! symlink makes the walk stop there instead of leaving the root. Asking
//! for another directory closes the levels it does not share with the last
//! one and opens the rest. Paths sorted by their bytes list every directory's
//! paths in one run (a prefix's paths are contiguous in byte order), so a
//! sorted walk opens each directory exactly once and holds at most as many
//! handles as the deepest path has components: descriptors and memory are
//! bounded by one path, not by the tree.
//!
//! Invariant: `stack[i]` is the directory named by the first `i + 1`
//! components of the last path asked for, opened from `stack[i - 1]` (the
//! root for `i = 0`).

use crate::sys::OwnedFd;
use std::io;

use crate::sys::Errno;
use crate::sys::fs::{Mode, OFlags};

use crate::fsx;
use crate::path::RelPath;

/// The bytes of the directory holding `path` (empty for the root).
pub(crate) fn parent_bytes(path: &RelPath) -> &[u8] {
    let b = path.as_bytes();
    match b.iter().rposition(|&c| c == b'/') {
        Some(i) => &b[..i],
        None => b"",
    }
}

/// Where a walk to a directory ended.
pub(crate) enum Reach<'a> {
    /// The directory, open.
    Open(&'a OwnedFd),
    /// Component `at` (0-based) does not exist; the ones before it are
    /// directories.
    Missing {
        /// The index of the missing component.
        at: usize,
    },
    /// Component `at` is a file, a symlink (never followed) or anything
    /// else but a directory.
    NotDir {
        /// The index of the component.
        at: usize,
    },
}

/// The root and the open chain of directories above it (see the module
/// doc).
pub(crate) struct DirStack<'r> {
    root: &'r OwnedFd,
    /// (component name, handle), shallowest first.
    stack: Vec<(Vec<u8>, OwnedFd)>,
    /// Directories opened so far (for tests and measurements).
    opened: u64,
    /// Whether each directory opened is swept of stale temporary files
    /// (see [`fsx::sweep_stale_temps`]).
    sweep: bool,
}

impl<'r> DirStack<'r> {
    /// A walk from `root`.
    pub(crate) fn new(root: &'r OwnedFd) -> DirStack<'r> {
        DirStack {
            root,
            stack: Vec::new(),
            opened: 0,
            sweep: false,
        }
    }

    /// A walk that sweeps every directory it opens of the temporary files
    /// an interrupted turnback process left there (the root included).
    pub(crate) fn sweeping(root: &'r OwnedFd) -> DirStack<'r> {
        let mut s = DirStack::new(root);
        s.sweep = true;
        fsx::sweep_stale_temps(root);
        s
    }

    /// How many directories were opened (the root not counted).
    #[cfg(all(test, unix))]
    pub(crate) fn opened(&self) -> u64 {
        self.opened
    }

    /// The directory holding `path`.
    pub(crate) fn parent_of(&mut self, path: &RelPath, make: bool) -> io::Result<Reach<'_>> {
        self.reach(parent_bytes(path), make)
    }

    /// The directory `dir` (`/`-separated components, empty for the root);
    /// with `make`, missing directories are made (mode 0777 less the
    /// umask, as `mkdir -p`). Errors other than "missing" and "not a
    /// directory" (out of descriptors, permission denied, an I/O error) are
    /// returned.
    pub(crate) fn reach(&mut self, dir: &[u8], make: bool) -> io::Result<Reach<'_>> {
        let comps: Vec<&[u8]> = if dir.is_empty() {
            Vec::new()
        } else {
            dir.split(|&c| c == b'/').collect()
        };
        let common = self
            .stack
            .iter()
            .zip(&comps)
            .take_while(|((held, _), want)| held.as_slice() == **want)
            .count();
        self.stack.truncate(common);
        for (at, comp) in comps.iter().enumerate().skip(common) {
            let below = self.stack.last().map_or(self.root, |(_, fd)| fd);
            let name: &std::ffi::OsStr = crate::sys::os_str(comp);
            let open = || {
                crate::sys::fs::openat(
                    below,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            let opened = match open() {
                Err(Errno::NOENT) if make => {
                    match crate::sys::fs::mkdirat(below, name, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => open(),
                        Err(e) => Err(e),
                    }
                }
                other => other,
            };
            match opened {
                Ok(fd) => {
                    self.opened += 1;
                    if self.sweep {
                        fsx::sweep_stale_temps(&fd);
                    }
                    self.stack.push((comp.to_vec(), fd));
                }
                Err(Errno::NOENT) => return Ok(Reach::Missing { at }),
                Err(Errno::NOTDIR) | Err(Errno::LOOP) => return Ok(Reach::NotDir { at }),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Reach::Open(
            self.stack.last().map_or(self.root, |(_, fd)| fd),
        ))
    }
}

// Built on Unix modes, symlinks and inode numbers; the Windows run has
// the integration tests and the identity rules.
#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_sorted_walk_opens_each_directory_once_and_follows_no_symlink() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        for d in ["a/b/c", "a/d", "e"] {
            std::fs::create_dir_all(root.join(d))?;
        }
        std::fs::write(root.join("f"), b"x")?;
        std::os::unix::fs::symlink("a", root.join("link"))?;
        let fd = fsx::open_dir_path(root)?;
        let mut s = DirStack::new(&fd);
        let mut paths: Vec<RelPath> = [
            "a/b/c/1", "a/b/c/2", "a/b/3", "a/d/4", "a/5", "e/6", "top", "a/b/c/7",
        ]
        .iter()
        .map(|p| RelPath::parse(p).map_err(|e| io::Error::other(format!("{e:?}"))))
        .collect::<io::Result<_>>()?;
        paths.sort();
        for p in &paths {
            assert!(
                matches!(s.parent_of(p, false)?, Reach::Open(_)),
                "{}",
                p.as_str()
            );
        }
        // a, a/b, a/b/c, a/d, e: each once.
        assert_eq!(s.opened(), 5);
        assert!(matches!(
            s.reach(b"link/b", false)?,
            Reach::NotDir { at: 0 }
        ));
        assert!(matches!(s.reach(b"f/x", false)?, Reach::NotDir { at: 0 }));
        assert!(matches!(
            s.reach(b"a/zz/y", false)?,
            Reach::Missing { at: 1 }
        ));
        assert!(matches!(s.reach(b"", false)?, Reach::Open(_)));
        Ok(())
    }
}
