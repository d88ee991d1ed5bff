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
//! The phases of one operation (a rewind collects the current states,
//! reads them, checks write permission, stages and renames) each walk the
//! same directories. A walk made by [`crate::store::Store::walk`] while the
//! store holds directories for an operation (see [`Held`]) takes a
//! directory an earlier phase opened from there, and leaves each one it
//! opens there, so the operation opens each directory once in all. The
//! handles held are bounded by a share of the process's descriptor limit;
//! past it, walks open and close as above.
//!
//! A handle opened here is listed at most once, by the sweep of stale
//! temporary files (see [`fsx::sweep_stale_temps_unlisted`]).
//!
//! Invariant: `stack[i]` is the directory named by the first `i + 1`
//! components of the last path asked for, opened from `stack[i - 1]` (the
//! root for `i = 0`), or held from an earlier walk of the same operation,
//! which reached it the same way.

use crate::sys::OwnedFd;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, MutexGuard};

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

/// Directory handles held for the length of one operation, by path (see
/// the module doc).
#[derive(Debug)]
pub(crate) struct Held {
    dirs: HashMap<Vec<u8>, HeldDir>,
    /// Whether the root was swept of stale temporary files.
    root_swept: bool,
    /// At most this many handles are held.
    cap: usize,
}

#[derive(Debug)]
struct HeldDir {
    fd: Arc<OwnedFd>,
    swept: bool,
}

impl Held {
    /// None held yet; at most as many as the platform allows (see
    /// `sys::held_dir_handles`).
    pub(crate) fn new() -> Held {
        Held {
            dirs: HashMap::new(),
            root_swept: false,
            cap: crate::sys::held_dir_handles(),
        }
    }
}

/// The root and the open chain of directories above it (see the module
/// doc).
pub(crate) struct DirStack<'r> {
    root: &'r OwnedFd,
    /// (component name, handle), shallowest first.
    stack: Vec<(Vec<u8>, Arc<OwnedFd>)>,
    /// Directories opened so far (for tests and measurements).
    opened: u64,
    /// Whether each directory reached is swept of stale temporary files
    /// (see [`fsx::sweep_stale_temps`]) the first time.
    sweep: bool,
    /// The operation's held handles, when it holds them.
    held: Option<MutexGuard<'r, Option<Held>>>,
}

impl<'r> DirStack<'r> {
    /// A walk from `root`.
    pub(crate) fn new(root: &'r OwnedFd) -> DirStack<'r> {
        DirStack {
            root,
            stack: Vec::new(),
            opened: 0,
            sweep: false,
            held: None,
        }
    }

    /// A walk from `root` that takes and leaves handles in `held` (when it
    /// holds some: `Some`).
    pub(crate) fn holding(root: &'r OwnedFd, held: MutexGuard<'r, Option<Held>>) -> DirStack<'r> {
        DirStack {
            held: Some(held).filter(|h| h.is_some()),
            ..DirStack::new(root)
        }
    }

    /// This walk sweeps every directory it reaches of the temporary files
    /// an interrupted turnback process left there (the root included,
    /// now), once per operation.
    pub(crate) fn sweeping(mut self) -> DirStack<'r> {
        self.sweep = true;
        match self.held.as_deref_mut().and_then(Option::as_mut) {
            Some(h) if h.root_swept => {}
            Some(h) => {
                h.root_swept = true;
                fsx::sweep_stale_temps(self.root);
            }
            None => fsx::sweep_stale_temps(self.root),
        }
        self
    }

    /// The directory the last [`DirStack::reach`] ended at, when it was
    /// reached: its handle, shared with this walk (no second handle is
    /// made); `None` for the root.
    pub(crate) fn shared(&self) -> Option<Arc<OwnedFd>> {
        self.stack.last().map(|(_, fd)| Arc::clone(fd))
    }

    /// The root this walk starts from.
    pub(crate) fn root(&self) -> &'r OwnedFd {
        self.root
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
        // Where the next component starts in `dir`.
        let mut start: usize = comps[..common].iter().map(|c| c.len() + 1).sum();
        for (at, comp) in comps.iter().enumerate().skip(common) {
            // The directory's path: `dir` up to the end of this component.
            let key = &dir[..start + comp.len()];
            start += comp.len() + 1;
            let held = self.held.as_deref_mut().and_then(Option::as_mut);
            if let Some(h) = held.and_then(|h| h.dirs.get_mut(key)) {
                if self.sweep && !h.swept {
                    h.swept = true;
                    fsx::sweep_stale_temps_unlisted(&h.fd);
                }
                self.stack.push((comp.to_vec(), Arc::clone(&h.fd)));
                continue;
            }
            let below = self.stack.last().map_or(self.root, |(_, fd)| &**fd);
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
                        fsx::sweep_stale_temps_unlisted(&fd);
                    }
                    let fd = Arc::new(fd);
                    if let Some(h) = self.held.as_deref_mut().and_then(Option::as_mut)
                        && h.dirs.len() < h.cap
                    {
                        let held = HeldDir {
                            fd: Arc::clone(&fd),
                            swept: self.sweep,
                        };
                        h.dirs.insert(key.to_vec(), held);
                    }
                    self.stack.push((comp.to_vec(), fd));
                }
                Err(Errno::NOENT) => return Ok(Reach::Missing { at }),
                Err(Errno::NOTDIR) | Err(Errno::LOOP) => return Ok(Reach::NotDir { at }),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Reach::Open(
            self.stack.last().map_or(self.root, |(_, fd)| &**fd),
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

    #[test]
    fn walks_of_one_operation_open_each_directory_once_between_them() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        for d in ["a/b", "c"] {
            std::fs::create_dir_all(root.join(d))?;
        }
        // A stale temporary file of a process that is gone.
        let stale = root.join("a/.x.turnback-tmp-4194305-0");
        std::fs::write(&stale, b"left")?;
        let fd = fsx::open_dir_path(root)?;
        let held = std::sync::Mutex::new(Some(Held::new()));
        let dirs: [&[u8]; 3] = [b"a", b"a/b", b"c"];
        let mut first =
            DirStack::holding(&fd, held.lock().map_err(|_| io::Error::other("poisoned"))?);
        for d in dirs {
            assert!(matches!(first.reach(d, false)?, Reach::Open(_)));
        }
        assert_eq!(first.opened(), 3);
        drop(first);
        assert!(stale.exists(), "a walk that does not sweep left it");
        let lock = held.lock().map_err(|_| io::Error::other("poisoned"))?;
        let mut second = DirStack::holding(&fd, lock).sweeping();
        for d in dirs {
            assert!(matches!(second.reach(d, false)?, Reach::Open(_)));
        }
        assert_eq!(
            second.opened(),
            0,
            "every directory came from the first walk"
        );
        assert!(
            !stale.exists(),
            "a held directory is swept when first reached sweeping"
        );
        // A directory made after the first walk is opened and then held.
        std::fs::create_dir(root.join("d"))?;
        assert!(matches!(second.reach(b"d", false)?, Reach::Open(_)));
        assert_eq!(second.opened(), 1);
        drop(second);
        // Without held handles every walk opens its own.
        let mut plain = DirStack::new(&fd);
        for d in dirs {
            assert!(matches!(plain.reach(d, false)?, Reach::Open(_)));
        }
        assert_eq!(plain.opened(), 3);
        Ok(())
    }
}
