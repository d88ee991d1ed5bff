//! The platform layer: the system calls whose names, types or meaning
//! differ between the platforms turnback runs on, behind one set of
//! functions with the same signature everywhere. Everything above it
//! (`fsx`, the walk, the store) is written once.
//!
//! One module per platform, chosen at compile time:
//! - `unix` (Linux and macOS): the POSIX `*at` calls of rustix, used
//!   as they are: `fs`, `Errno`, `OwnedFd` are rustix's and std's.
//! - `windows`: the same names over Win32 (see that module): a directory
//!   handle that carries its path and pins the directory, `*at` calls that
//!   open the last component without following a reparse point.
//! - `unix` (Linux and macOS): the POSIX `*at` calls of rustix, used
//!   as they are: `fs`, `Errno`, `OwnedFd` are rustix's and std's.
//! - `windows`: the same names over Win32 (see that module): a directory
//!   handle that carries its path and pins the directory, `*at` calls that
//!   open the last component without following a reparse point.
//! - `linux`: `getdents` through one buffer per directory, `fdatasync`,
//!   `syncfs`; `st_mode` 32 bits and `st_dev` 64.
//! - `macos`: `readdir`, `mkfifoat` and `fcntl` through `libc` where rustix
//!   has no wrapper; `st_mode` 16 bits, `st_dev` a signed 32-bit number.
//!   `fsync` there only hands the data to the drive, which may keep it in
//!   its volatile cache and reorder it; `F_FULLFSYNC` also flushes that
//!   cache (see that module for how each flush maps onto them).
//!
//! What the flush functions promise, on every platform:
//! - `fsync_durable(fd)`: when it returns, the file's bytes and metadata
//!   survive a power cut. Used where the store answers (the log line that
//!   acknowledges a capture or a rewind) and where a later write must not
//!   survive without an earlier one.
//! - `fsync_queued(fd)`: the file is handed to the device, durable once
//!   `commit_queued` returns for the same volume: the many files of one
//!   batch (group commit), with one expensive flush at its end.
//! - `flush_device(fd)`: every dirty page of the file system is durable;
//!   only where `WHOLE_FS_FLUSH` says the platform has it (`syncfs`).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as imp;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as imp;

#[cfg(unix)]
pub(crate) use imp::has_xattrs;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{
    AsFd, BorrowedFd, Errno, FileBytes, KEEP_ASIDE, OwnedFd, copy_xattrs, dup, euid, fs,
    held_dir_handles, process_alive,
};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;
#[cfg(windows)]
pub(crate) use windows::{
    AsFd, BorrowedFd, Errno, FileBytes, KEEP_ASIDE, OwnedFd, copy_xattrs, dup, euid, fs,
    held_dir_handles, process_alive,
};

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
compile_error!("turnback runs on Linux, macOS and Windows");

pub(crate) use imp::{
    CASE_INSENSITIVE_DEFAULT, DEFER_FREES, HANDLES_KEEP_NAMES, NORMALIZATION_INSENSITIVE,
    WHOLE_FS_FLUSH, WINDOWS_NAMES, commit_queued, ctime_ns, dev, dir_times_follow_entries,
    fdatasync, file_type, flush_device, fsync_durable, fsync_queued, give_back_free_memory,
    huge_pages, list_names, mkfifo_exact, mode, mtime_ns, nlink, perm,
};

/// What durability this process had when it was less than the flush
/// functions promise: on macOS, a file system that refused `F_FULLFSYNC`
/// (see `macos.rs`). `None` elsewhere.
pub(crate) fn durability_note() -> Option<&'static str> {
    #[cfg(target_os = "macos")]
    {
        imp::durability_note()
    }
    #[cfg(not(target_os = "macos"))]
    {
        None
    }
}

/// A time of `sec` seconds and `nsec` nanoseconds since the epoch, in
/// nanoseconds (saturating: a time past the year 2262 stays the largest).
fn epoch_ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// The names of one directory listing in one buffer, each NUL-terminated:
/// no allocation per name. `.` and `..` are among them.
#[derive(Debug, Default)]
pub(crate) struct Names {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Names {
    /// Room for `count` names of `bytes` bytes in all, NULs included.
    pub(crate) fn with_capacity(count: usize, bytes: usize) -> Names {
        Names {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(count),
        }
    }

    /// Adds `name`.
    pub(crate) fn push(&mut self, name: &std::ffi::CStr) {
        self.bytes.extend_from_slice(name.to_bytes_with_nul());
        self.ends.push(self.bytes.len());
    }

    /// Adds the name whose bytes are `name` (no NUL among them: a file
    /// name holds none).
    pub(crate) fn push_bytes(&mut self, name: &[u8]) {
        self.bytes.extend_from_slice(name);
        self.bytes.push(0);
        self.ends.push(self.bytes.len());
    }

    /// The names, in listing order.
    pub(crate) fn names(&self) -> Vec<&std::ffi::CStr> {
        let mut out = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for &end in &self.ends {
            out.extend(std::ffi::CStr::from_bytes_with_nul(&self.bytes[start..end]).ok());
            start = end;
        }
        out
    }
}

/// Makes a FIFO at `path` (tests make them to stand in for store files and
/// project entries).
#[cfg(all(test, unix))]
pub(crate) fn mkfifo_at(path: &std::path::Path) -> std::io::Result<()> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "no UTF-8 file name");
    let parent = path.parent().ok_or_else(bad)?;
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(bad)?;
    let dir = rustix::fs::open(
        parent,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )?;
    mkfifo_exact(&dir, name)
}

/// A name or path of the store (bytes) as the platform's `OsStr`. On
/// Windows names are UTF-8 (a `RelPath` made there is refused otherwise),
/// so bytes that are not cannot name a file: they map to U+FFFD, which no
/// stored name holds.
pub(crate) fn os_str(bytes: &[u8]) -> &std::ffi::OsStr {
    imp::os_str(bytes)
}

/// Reads from `file` at `offset` without moving a shared cursor (`pread`;
/// on Windows an overlapped read at that offset).
pub(crate) fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    imp::read_at(file, buf, offset)
}

/// Fills `buf` from `file` at `offset`; an end of file first is an error.
pub(crate) fn read_exact_at(
    file: &std::fs::File,
    mut buf: &mut [u8],
    mut offset: u64,
) -> std::io::Result<()> {
    while !buf.is_empty() {
        match read_at(file, buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `bytes` to `file` at `offset`.
pub(crate) fn write_all_at(
    file: &std::fs::File,
    mut bytes: &[u8],
    mut offset: u64,
) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match imp::write_at(file, bytes, offset) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The absolute path of `path` with every symlink resolved, as the
/// platform spells it to users (on Windows without the `\\?\` prefix
/// `std::fs::canonicalize` adds: std adds it again where a path needs it).
pub(crate) fn canonicalize(path: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    imp::canonicalize(path)
}
