//! The platform layer: the system calls whose names, types or meaning
//! differ between the platforms turnback runs on, behind one set of
//! functions with the same signature everywhere. Everything above it
//! (`fsx`, the walk, the store) is written once.
//!
//! One module per platform, chosen at compile time:
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

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!(
    "turnback runs on Linux and macOS; its Windows port is in progress (docs/PLATFORMS.md)"
);

pub(crate) use imp::{
    WHOLE_FS_FLUSH, commit_queued, ctime_ns, dev, fdatasync, file_type, flush_device,
    fsync_durable, fsync_queued, list_names, mkfifo_exact, mode, mtime_ns, nlink, perm,
};

/// The names of one directory listing in one buffer, each NUL-terminated:
/// no allocation per name. `.` and `..` are among them.
#[derive(Debug, Default)]
pub(crate) struct Names {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Names {
    /// Adds `name`.
    pub(crate) fn push(&mut self, name: &std::ffi::CStr) {
        self.bytes.extend_from_slice(name.to_bytes_with_nul());
        self.ends.push(self.bytes.len());
    }

    /// The names, in listing order.
    pub(crate) fn names(&self) -> Vec<&std::ffi::CStr> {
        self.ends
            .iter()
            .scan(0, |start, &end| {
                let name = &self.bytes[*start..end];
                *start = end;
                Some(name)
            })
            .filter_map(|n| std::ffi::CStr::from_bytes_with_nul(n).ok())
            .collect()
    }
}

/// Makes a FIFO at `path` (tests make them to stand in for store files and
/// project entries).
#[cfg(test)]
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
