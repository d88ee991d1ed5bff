//! The store lock: `<store>/lock`, an empty file held with `flock`.
//!
//! Every mutation (capture, write, rewind) holds it exclusively from before
//! it re-reads the log until after its record is durable; readers hold it
//! shared while they read the log, so they never see a half-appended line.
//! The kernel releases a `flock` when its holder dies, so a crashed process
//! never leaves a lock that a user must delete by hand.

use crate::sys::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::sys::Errno;
use crate::sys::fs::{FlockOperation, Mode, OFlags};

use crate::error::{Error, IoResultExt, Result};
use crate::fsx;

/// The lock file's name inside the store.
pub const LOCK_FILE: &str = "lock";

/// A held lock; released on drop.
#[derive(Debug)]
pub struct LockGuard {
    _fd: OwnedFd,
}

/// Takes the lock in `store_dir`, waiting up to `timeout`.
pub(crate) fn acquire(
    store_dir: &OwnedFd,
    shown: &Path,
    exclusive: bool,
    timeout: Duration,
) -> Result<LockGuard> {
    let path = shown.join(LOCK_FILE);
    let fd: OwnedFd = fsx::open_store_file(store_dir, LOCK_FILE, OFlags::RDWR, Some(0o644))
        .ctx("open lock file", &path)?
        .ok_or_else(|| Error::Io {
            op: "open lock file",
            path: path.clone(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?
        .into();
    let op = if exclusive {
        FlockOperation::NonBlockingLockExclusive
    } else {
        FlockOperation::NonBlockingLockShared
    };
    take(fd, op, path, timeout)
}

/// Takes the lock shared, but only if its file exists: a read-only check
/// (`verify`) must not create anything. `Ok(None)` when there is no lock
/// file. The file is opened read-only, without following a symlink and
/// without blocking on a FIFO.
pub(crate) fn acquire_shared_if_present(
    store_dir: &OwnedFd,
    shown: &Path,
    timeout: Duration,
) -> Result<Existing> {
    let path = shown.join(LOCK_FILE);
    let fd = match crate::sys::fs::openat(
        store_dir,
        LOCK_FILE,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(Existing::Absent),
        Err(Errno::LOOP) => {
            return Ok(Existing::Unusable(
                "it is a symlink, which turnback does not follow".into(),
            ));
        }
        Err(e) => return Err(e).ctx("open lock file", &path),
    };
    let st = crate::sys::fs::fstat(&fd).ctx("stat", &path)?;
    if crate::sys::file_type(crate::sys::mode(&st)) != crate::sys::fs::FileType::RegularFile {
        return Ok(Existing::Unusable("it is not a regular file".into()));
    }
    take(fd, FlockOperation::NonBlockingLockShared, path, timeout).map(Existing::Held)
}

/// What [`acquire_shared_if_present`] found.
#[derive(Debug)]
pub(crate) enum Existing {
    /// The lock, held shared.
    Held(LockGuard),
    /// There is no lock file (no mutation ever ran).
    Absent,
    /// The lock file is not a regular file; mutations could not take it.
    Unusable(String),
}

/// Waits up to `timeout` for `op` on `fd`.
fn take(
    fd: OwnedFd,
    op: FlockOperation,
    path: std::path::PathBuf,
    timeout: Duration,
) -> Result<LockGuard> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match crate::sys::fs::flock(&fd, op) {
            Ok(()) => return Ok(LockGuard { _fd: fd }),
            Err(Errno::WOULDBLOCK) | Err(Errno::INTR) => {
                if start.elapsed() >= timeout {
                    return Err(Error::Locked { path });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(e).ctx("lock", &path),
        }
    }
}
