//! The store lock: `.turnback/lock`, an empty file held with `flock`.
//!
//! Every mutation (capture, write, rewind) holds it exclusively from before
//! it re-reads the log until after its record is durable; readers hold it
//! shared while they read the log, so they never see a half-appended line.
//! The kernel releases a `flock` when its holder dies, so a crashed process
//! never leaves a lock that a user must delete by hand.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, IoResultExt, Result};

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
    let fd = rustix::fs::openat(
        store_dir,
        LOCK_FILE,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .ctx("open lock file", &path)?;
    let op = if exclusive {
        FlockOperation::NonBlockingLockExclusive
    } else {
        FlockOperation::NonBlockingLockShared
    };
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match rustix::fs::flock(&fd, op) {
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
