//! Linux and macOS: the POSIX `*at` system calls through rustix, with the
//! descriptor types of std. The modules above use these names, which
//! `windows` implements again over Win32. The calls that are the same on
//! both (`pread`, `pwrite`, names as bytes, `realpath`) are here too, and
//! `linux` and `macos` re-export them beside what differs.

pub(crate) use rustix::io::{Errno, dup};
pub(crate) use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The `*at` file-system calls, their flags and the `stat` record.
pub(crate) mod fs {
    pub(crate) use rustix::fs::*;
    pub(crate) use rustix::path::Arg;
}

/// Whether the process `pid` is running (a signal 0 that finds no process).
pub(crate) fn process_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}

/// Directory handles one operation may hold across its walks (see
/// `dirstack::Held`): a quarter of the soft descriptor limit (1,024 when it
/// cannot be read), at most 16,384.
pub(crate) fn held_dir_handles() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(1024);
    (limit / 4).min(16_384)
}

/// Copies the extended attributes of the regular file `from` onto `to`:
/// a file replaced by a new one (a `write`, a rewind) keeps what the user
/// had on it: `user.*` attributes and POSIX ACLs (`system.posix_acl_*`) on
/// Linux; the quarantine and provenance marks, Finder tags and ACLs on
/// macOS. Linux's `security.*` and `trusted.*` belong to the system (a new
/// file gets its label from the policy) and are left alone. Returns each
/// attribute it could not copy, with why.
pub(crate) fn copy_xattrs(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> Vec<(String, Errno)> {
    let mut failed = Vec::new();
    let names = match list_xattrs(from) {
        Ok(names) => names,
        // The file system has none to give.
        Err(Errno::NOTSUP) => return failed,
        Err(e) => {
            failed.push(("(the list of them)".to_owned(), e));
            return failed;
        }
    };
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let shown = String::from_utf8_lossy(name).into_owned();
        #[cfg(target_os = "linux")]
        if super::linux::system_xattr(name) {
            continue;
        }
        let copied = read_xattr(from, name).and_then(|value| {
            rustix::fs::fsetxattr(to, name, &value, rustix::fs::XattrFlags::empty())
        });
        if let Err(e) = copied {
            failed.push((shown, e));
        }
    }
    failed
}

/// The names of `fd`'s extended attributes, each ended by a NUL.
fn list_xattrs(fd: BorrowedFd<'_>) -> Result<Vec<u8>, Errno> {
    read_sized(
        || rustix::fs::flistxattr_query(fd),
        |buf| rustix::fs::flistxattr(fd, buf),
    )
}

/// The value of `fd`'s extended attribute `name`.
fn read_xattr(fd: BorrowedFd<'_>, name: &[u8]) -> Result<Vec<u8>, Errno> {
    read_sized(
        || rustix::fs::fgetxattr_query(fd, name),
        |buf| rustix::fs::fgetxattr(fd, name, buf),
    )
}

/// A value whose size is asked first, then read: asked again when it grew
/// in between (`ERANGE`), a few times.
fn read_sized(
    size: impl Fn() -> Result<usize, Errno>,
    read: impl Fn(&mut [u8]) -> Result<usize, Errno>,
) -> Result<Vec<u8>, Errno> {
    for _ in 0..4 {
        let mut buf = vec![0u8; size()?];
        if buf.is_empty() {
            return Ok(buf);
        }
        match read(&mut buf[..]) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(Errno::RANGE) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::RANGE)
}

/// The effective user id of this process.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The bytes as they are: a Unix name is any bytes but NUL and `/`.
pub(crate) fn os_str(bytes: &[u8]) -> &std::ffi::OsStr {
    std::os::unix::ffi::OsStrExt::from_bytes(bytes)
}

/// `pread`.
pub(crate) fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

/// `pwrite`.
pub(crate) fn write_at(file: &std::fs::File, bytes: &[u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(file, bytes, offset)
}

/// `realpath`.
pub(crate) fn canonicalize(path: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    std::fs::canonicalize(path)
}

/// Whether a stored name must pass Windows' name rules here
/// (`crate::names::windows_problem`).
pub(crate) const WINDOWS_NAMES: bool = false;

/// A removed directory's name is free at once, whoever holds it open.
pub(crate) const HANDLES_KEEP_NAMES: bool = false;

/// A file an operation replaces is kept by a second name in the store
/// instead of being read (see `aside.rs`).
pub(crate) const KEEP_ASIDE: bool = true;

/// The bytes of a whole file, mapped read-only into memory: no copy of a
/// large file that is read once (the tree state, some 8 MB at 100,000
/// paths). Unmapped when dropped.
///
/// Only for a store file that turnback never writes in place (the tree
/// state and its delta are written to a temporary file and renamed over
/// the old one, whose inode and bytes the mapping keeps): another process
/// that truncated the file in place would make a read past its new end
/// fail with `SIGBUS`, as for git's mapped index.
pub(crate) struct FileBytes {
    ptr: *mut std::ffi::c_void,
    len: usize,
}

impl FileBytes {
    /// Maps the whole of `file`, a regular file opened for reading; on
    /// Linux every page is read in by the same call.
    pub(crate) fn map(file: &std::fs::File) -> std::io::Result<FileBytes> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| std::io::Error::other("the file is larger than memory"))?;
        if len == 0 {
            return Ok(FileBytes {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        #[cfg(target_os = "linux")]
        let flags = rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::POPULATE;
        #[cfg(not(target_os = "linux"))]
        let flags = rustix::mm::MapFlags::PRIVATE;
        // SAFETY: a new mapping at an address the kernel chooses (null
        // hint) overlaps no memory Rust knows; it is read-only and private,
        // and lives until `drop` unmaps it. The file's bytes are not
        // changed in place while it is mapped (see the type's doc).
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ,
                flags,
                file,
                0,
            )
        }?;
        Ok(FileBytes { ptr, len })
    }
}

// SAFETY: the mapping is read-only and owned by the value alone (no
// other pointer to it is kept), so moving it to another thread, or
// reading it from several, is as safe as for a `Vec<u8>`.
unsafe impl Send for FileBytes {}
// SAFETY: as for `Send`: shared references only read the mapping.
unsafe impl Sync for FileBytes {}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is a readable mapping of `len` bytes (see `map`),
        // valid for as long as `self` is, which the slice borrows.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for FileBytes {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: the mapping `map` made, unmapped once; no slice of it
            // outlives `self`.
            let _ = unsafe { rustix::mm::munmap(self.ptr, self.len) };
        }
    }
}
