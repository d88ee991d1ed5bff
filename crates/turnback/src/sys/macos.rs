//! macOS: `readdir` (rustix has no `getdents` wrapper here), `mkfifoat` and
//! `fcntl(F_FULLFSYNC | F_BARRIERFSYNC)`; `st_mode` is 16 bits and
//! `st_dev` a signed 32-bit number, widened here.
//!
//! Flushes: `fsync` on macOS writes the file to the drive but returns before
//! the drive has emptied its volatile cache, which it may also reorder.
//! - A durable flush is `F_FULLFSYNC`: the drive's cache is emptied first.
//! - A queued flush is a plain `fsync`: cheap, its writes reach the drive,
//!   and the one `F_FULLFSYNC` that ends the batch ([`flush_device`], on
//!   any file of the same volume: it flushes the whole drive cache) makes
//!   them durable together. That is the group commit `syncfs` gives on
//!   Linux.
//! - `fdatasync` is `F_FULLFSYNC` too: every call site of it is a point
//!   where the store answers or orders a later record after it.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use rustix::fs::{FileType, Mode, Stat};
use rustix::io::Errno;

use super::Names;
pub(crate) use super::unix::{
    HANDLES_KEEP_NAMES, WINDOWS_NAMES, canonicalize, os_str, read_at, write_at,
};

/// Gives the memory the allocator holds free back to the system: the
/// system allocator does so on its own.
pub(crate) fn give_back_free_memory() {}

/// Huge pages for a large buffer (see `linux.rs`): the system decides on
/// its own here.
pub(crate) fn huge_pages<T>(_v: &mut Vec<T>) {}

/// Whether the file system of `dir` sets a directory's mtime and ctime
/// whenever an entry is created, removed or renamed in it (see
/// `snapshot/walk.rs`): APFS and HFS+. Not a network, FUSE, FAT or exFAT
/// volume.
pub(crate) fn dir_times_follow_entries(dir: &impl AsFd) -> bool {
    rustix::fs::fstatfs(dir).is_ok_and(|st| {
        let name: Vec<u8> = st
            .f_fstypename
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        matches!(name.as_slice(), b"apfs" | b"hfs")
    })
}

/// The permission and type bits of `st`.
pub(crate) fn mode(st: &Stat) -> u32 {
    u32::from(st.st_mode)
}

/// The device of `st` (`dev_t` is an `i32` here; its bits are kept).
pub(crate) fn dev(st: &Stat) -> u64 {
    u64::from(st.st_dev as u32)
}

/// The number of names of `st`'s inode.
pub(crate) fn nlink(st: &Stat) -> u64 {
    u64::from(st.st_nlink)
}

/// The modification time of `st` in nanoseconds since the epoch.
pub(crate) fn mtime_ns(st: &Stat) -> i64 {
    super::epoch_ns(st.st_mtime, st.st_mtime_nsec)
}

/// The status change time of `st` in nanoseconds since the epoch.
pub(crate) fn ctime_ns(st: &Stat) -> i64 {
    super::epoch_ns(st.st_ctime, st.st_ctime_nsec)
}

/// The file type in a full `st_mode` (its upper bits are zero here).
pub(crate) fn file_type(mode: u32) -> FileType {
    FileType::from_raw_mode((mode & 0o177_777) as u16)
}

/// The permission bits (`mode & 0o7777`) as a rustix `Mode`.
pub(crate) fn perm(mode: u32) -> Mode {
    Mode::from_raw_mode((mode & 0o7777) as u16)
}

/// Whether a `F_FULLFSYNC` was refused and a plain `fsync` stood in for it
/// (see [`fsync_durable`]).
static FULLFSYNC_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `F_FULLFSYNC`: the file, then the drive's cache. A file system that
/// refuses it (SMB and NFS shares, macFUSE, a VM's or container's shared
/// folder, some external drives: `ENOTSUP`, `EINVAL`, `ENOTTY`) gets a
/// plain `fsync`, as SQLite does there: the writes reach the drive, whose
/// cache the system cannot empty. [`durability_note`] says so.
pub(crate) fn fsync_durable(fd: &impl AsFd) -> io::Result<()> {
    match rustix::fs::fcntl_fullfsync(fd) {
        Ok(()) => Ok(()),
        Err(Errno::NOTSUP | Errno::INVAL | Errno::NOTTY) => {
            FULLFSYNC_REFUSED.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(rustix::fs::fsync(fd)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// What durability this process had, when it was less than asked for: a
/// `F_FULLFSYNC` refused by the file system (see [`fsync_durable`]).
pub(crate) fn durability_note() -> Option<&'static str> {
    FULLFSYNC_REFUSED
        .load(std::sync::atomic::Ordering::Relaxed)
        .then_some(
            "this file system refused F_FULLFSYNC, so writes were flushed with fsync: they reached the drive, but its own cache may still lose them in a power cut",
        )
}

/// A plain `fsync`: made durable by the next [`flush_device`].
pub(crate) fn fsync_queued(fd: &impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::fsync(fd)?)
}

/// `F_FULLFSYNC` on any file of the volume: everything queued before it
/// is durable.
pub(crate) fn commit_queued(fd: &impl AsFd) -> io::Result<()> {
    fsync_durable(fd)
}

/// No `syncfs`: a `F_FULLFSYNC` flushes the drive's cache but not the
/// pages the kernel has not yet written to it, so a batch is always
/// queued file by file and committed once.
pub(crate) const WHOLE_FS_FLUSH: bool = false;

/// `F_FULLFSYNC` (see the module doc).
pub(crate) fn fdatasync(fd: &impl AsFd) -> io::Result<()> {
    fsync_durable(fd)
}

/// `F_FULLFSYNC` on `fd`: the drive's whole cache is flushed, so every
/// file `fsync`ed before on that volume is durable.
pub(crate) fn flush_device(fd: &impl AsFd) -> io::Result<()> {
    fsync_durable(fd)
}

/// `mkfifoat`, looked up when first needed: it exists from macOS 13 only,
/// and the deployment target is older (Rust's default: 11.0 on Apple
/// silicon, 10.12 on Intel), so it is never linked by name (a binary naming
/// it would not start on Big Sur or Monterey).
type MkfifoatFn =
    unsafe extern "C" fn(libc::c_int, *const libc::c_char, libc::mode_t) -> libc::c_int;

fn mkfifoat_fn() -> Option<MkfifoatFn> {
    static FOUND: std::sync::OnceLock<Option<MkfifoatFn>> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: `dlsym` with RTLD_DEFAULT and a NUL-terminated name only
        // looks the symbol up; a non-null result is the address of libc's
        // `mkfifoat`, whose C signature is the one `MkfifoatFn` names.
        unsafe {
            let p = libc::dlsym(libc::RTLD_DEFAULT, c"mkfifoat".as_ptr());
            (!p.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, MkfifoatFn>(p))
        }
    })
}

/// Creates the FIFO `name` in `dir`, mode 0600 (the caller sets the mode):
/// `mkfifoat` where the system has it; before macOS 13, `mkfifo` on the
/// directory's path (`F_GETPATH`), then a check through `dir` that the FIFO
/// is there (a directory moved in between: the FIFO made at the old path
/// is removed and the call fails, so nothing is left outside).
pub(crate) fn mkfifo_exact(dir: &impl AsFd, name: &str) -> io::Result<()> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a name"))?;
    if let Some(mkfifoat) = mkfifoat_fn() {
        // SAFETY: `cname` is a NUL-terminated string that outlives the
        // call, and the descriptor is borrowed open for its duration.
        let rc = unsafe { mkfifoat(dir.as_fd().as_raw_fd(), cname.as_ptr(), 0o600) };
        return if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        };
    }
    let dir_path = rustix::fs::getpath(dir)?;
    let mut full = dir_path.into_bytes();
    full.push(b'/');
    full.extend_from_slice(name.as_bytes());
    let full = std::ffi::CString::new(full)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    // SAFETY: `full` is a NUL-terminated path that outlives the call.
    if unsafe { libc::mkfifo(full.as_ptr(), 0o600) } != 0 {
        return Err(io::Error::last_os_error());
    }
    match rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Fifo => Ok(()),
        _ => {
            let _ = rustix::fs::unlink(full.as_c_str());
            Err(io::Error::other(
                "the directory moved while its FIFO was made; nothing was left",
            ))
        }
    }
}

/// Lists `dir` with `readdir` into one buffer; the error, if the listing
/// stopped before its end. The descriptor is duplicated (`readdir` owns
/// the one it reads), so `dir` stays usable.
pub(crate) fn list_names(dir: &impl AsFd) -> (Names, Option<Errno>) {
    let mut names = Names::default();
    let mut listing = match rustix::fs::Dir::read_from(dir) {
        Ok(d) => d,
        Err(e) => return (names, Some(e)),
    };
    for entry in listing.by_ref() {
        match entry {
            Ok(e) => names.push(e.file_name()),
            Err(e) => return (names, Some(e)),
        }
    }
    (names, None)
}

/// APFS, by default, does not tell case or Unicode normalization apart.
pub(crate) const CASE_INSENSITIVE_DEFAULT: bool = true;

/// APFS and HFS+ do not tell Unicode normalization apart (HFS+ stores NFD).
pub(crate) const NORMALIZATION_INSENSITIVE: bool = true;

/// Not measured on APFS: a rename frees the replaced file as it goes.
pub(crate) const DEFER_FREES: bool = false;

/// Whether an entry has extended attributes, without opening it: not
/// known here (the caller opens the file to see).
pub(crate) fn has_xattrs(_dir: &impl AsFd, _name: &std::ffi::CStr) -> Option<bool> {
    None
}
