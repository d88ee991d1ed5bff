//! Linux: `getdents64`, `fdatasync`, `syncfs`, `mknodat`; `st_mode` is
//! 32 bits and `st_dev` 64, so the conversions are the identity
//! (`st_nlink` is 64 bits on x86_64 and 32 on aarch64).

use std::io;
use std::os::fd::AsFd;

use rustix::fs::{FileType, Mode, Stat};
use rustix::io::Errno;

use super::Names;
pub(crate) use super::unix::{
    HANDLES_KEEP_NAMES, WINDOWS_NAMES, canonicalize, os_str, read_at, write_at,
};

/// Gives the memory the allocator holds free back to the system. glibc
/// keeps what a thread freed in that thread's arena, where the main thread
/// never reuses it: the walk's threads list 100,000 paths in buffers that
/// are freed once merged, some 10 MB left resident for the rest of the
/// command. `malloc_trim` returns the free pages of every arena.
pub(crate) fn give_back_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free pages to the system; it reads
    // and writes no memory of the program's.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Asks the kernel to back the whole 2 MiB pieces of `v`'s capacity with
/// huge pages, before they are first written: a buffer of many megabytes
/// (the tree state and its decoded entries, 10 MB each at 100,000 paths)
/// then costs a few page faults instead of one per 4 KiB page, which on
/// the machines measured cost as much as a tenth of an unchanged snapshot
/// half. Only where transparent huge pages are on for such requests
/// (`madvise`, the common default); otherwise, and for a small buffer,
/// nothing changes.
pub(crate) fn huge_pages<T>(v: &mut Vec<T>) {
    const HUGE: usize = 2 << 20;
    let start = v.as_mut_ptr() as usize;
    let end = start.saturating_add(v.capacity().saturating_mul(std::mem::size_of::<T>()));
    let from = start.next_multiple_of(HUGE);
    let to = end - end % HUGE;
    if from < to {
        // SAFETY: [from, to) lies inside the allocation `v` owns, and
        // MADV_HUGEPAGE changes no byte of it, only how the kernel backs
        // the pages not yet touched; failing, it changes nothing.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

/// Whether the file system of `dir` sets a directory's mtime and ctime
/// whenever an entry is created, removed or renamed in it, so that a
/// directory with its old stat holds its old names (see
/// `snapshot/walk.rs`): the local file systems that do (ext2/3/4, XFS,
/// Btrfs, F2FS, tmpfs, ZFS). Not a network, FUSE or FAT file system, nor
/// an overlay, whose merged directories take their times from one layer.
pub(crate) fn dir_times_follow_entries(dir: &impl AsFd) -> bool {
    const KNOWN: [u32; 6] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0xF2F5_2010, // F2FS
        0x0102_1994, // tmpfs
        0x2FC1_2FC1, // ZFS
    ];
    rustix::fs::fstatfs(dir).is_ok_and(|st| KNOWN.contains(&(st.f_type as u32)))
}

/// The permission and type bits of `st`.
pub(crate) fn mode(st: &Stat) -> u32 {
    st.st_mode
}

/// The device of `st`.
pub(crate) fn dev(st: &Stat) -> u64 {
    st.st_dev
}

/// The number of names of `st`'s inode: 64 bits on x86_64, 32 on aarch64
/// (the generic `struct stat` of arm64 and riscv64).
#[allow(clippy::useless_conversion)]
pub(crate) fn nlink(st: &Stat) -> u64 {
    u64::from(st.st_nlink)
}

/// The modification time of `st` in nanoseconds since the epoch.
pub(crate) fn mtime_ns(st: &Stat) -> i64 {
    super::epoch_ns(st.st_mtime, st.st_mtime_nsec as i64)
}

/// The status change time of `st` in nanoseconds since the epoch.
pub(crate) fn ctime_ns(st: &Stat) -> i64 {
    super::epoch_ns(st.st_ctime, st.st_ctime_nsec as i64)
}

/// The file type in a full `st_mode`.
pub(crate) fn file_type(mode: u32) -> FileType {
    FileType::from_raw_mode(mode)
}

/// The permission bits (`mode & 0o7777`) as a rustix `Mode`.
pub(crate) fn perm(mode: u32) -> Mode {
    Mode::from_raw_mode(mode & 0o7777)
}

/// `fsync`: on Linux durable when it returns.
pub(crate) fn fsync_durable(fd: &impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::fsync(fd)?)
}

/// `fsync` (Linux has no weaker flush worth a name).
pub(crate) fn fsync_queued(fd: &impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::fsync(fd)?)
}

/// Nothing: on Linux every queued `fsync` was durable when it returned.
pub(crate) fn commit_queued(_fd: &impl AsFd) -> io::Result<()> {
    Ok(())
}

/// Linux has `syncfs`: one call makes a large batch durable.
pub(crate) const WHOLE_FS_FLUSH: bool = true;

/// `fdatasync`: the data and the size, not the times.
pub(crate) fn fdatasync(fd: &impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::fdatasync(fd)?)
}

/// `syncfs`: every dirty page of the file system holding `fd`.
pub(crate) fn flush_device(fd: &impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::syncfs(fd)?)
}

/// Creates the FIFO `name` in `dir`, mode 0600 (the caller sets the mode).
pub(crate) fn mkfifo_exact(dir: &impl AsFd, name: &str) -> io::Result<()> {
    Ok(rustix::fs::mknodat(
        dir,
        name,
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )?)
}

/// Lists `dir` with `getdents64` into one buffer; the error, if the listing
/// stopped before its end.
pub(crate) fn list_names(dir: &impl AsFd) -> (Names, Option<Errno>) {
    let mut names = Names::default();
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut listing = rustix::fs::RawDir::new(dir, &mut buf);
    while let Some(entry) = listing.next() {
        match entry {
            Ok(e) => names.push(e.file_name()),
            Err(e) => return (names, Some(e)),
        }
    }
    (names, None)
}

/// ext4 and most Linux file systems tell case apart.
pub(crate) const CASE_INSENSITIVE_DEFAULT: bool = false;

/// ext4 tells Unicode normalization apart (casefold directories aside).
pub(crate) const NORMALIZATION_INSENSITIVE: bool = false;

/// A rename over a file frees the replaced inode, and ext4 mounted with
/// `discard` pays for the free synchronously (measured: 0.55 s of renames
/// for 4,686 files against 0.22-0.26 s with the old files linked aside):
/// a rewind links each replaced file into the trash first and
/// frees it later (see `trash.rs`).
pub(crate) const DEFER_FREES: bool = true;

/// Whether the entry `name` of the directory `dir` has extended
/// attributes, asked without opening it: a rewind replaces thousands of
/// files that have none, and an open each would double its `openat` calls.
/// Asked with `listxattrat` (Linux 6.13) where the kernel has it, else with
/// `llistxattr` of its path through `/proc/self/fd` (measured on tmpfs: 3.3
/// µs more per file, the lookup of the path in `/proc`). `None` when it
/// cannot be told either way (no `/proc`): the caller opens the file to see.
pub(crate) fn has_xattrs(dir: &impl AsFd, name: &std::ffi::CStr) -> Option<bool> {
    // Room for the names most files have (an SELinux label, say); a longer
    // list is taken as holding one to copy.
    let mut names = [0u8; 256];
    let listed = match listxattrat(dir, name, &mut names) {
        Some(listed) => listed,
        None => list_through_proc(dir, name, &mut names)?,
    };
    match listed {
        Ok(n) => Some(
            names[..n]
                .split(|&b| b == 0)
                .any(|a| !a.is_empty() && !system_xattr(a)),
        ),
        Err(Errno::RANGE) => Some(true),
        // Nothing there to keep attributes of, or a file system without
        // them.
        Err(Errno::NOENT | Errno::NOTSUP) => Some(false),
        Err(_) => None,
    }
}

/// `llistxattr` of the entry `name` of `dir` by its path through
/// `/proc/self/fd`; `None` without `/proc`.
fn list_through_proc(
    dir: &impl AsFd,
    name: &std::ffi::CStr,
    names: &mut [u8],
) -> Option<Result<usize, Errno>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    static PROC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*PROC.get_or_init(|| std::path::Path::new("/proc/self/fd").is_dir()) {
        return None;
    }
    let mut path = format!("/proc/self/fd/{}/", dir.as_fd().as_raw_fd()).into_bytes();
    path.extend_from_slice(name.to_bytes());
    Some(rustix::fs::llistxattr(
        std::ffi::OsStr::from_bytes(&path),
        names,
    ))
}

/// `listxattrat(dir, name, AT_SYMLINK_NOFOLLOW, names)` (Linux 6.13, the
/// same number on every architecture; rustix does not wrap it yet); `None`
/// when the kernel has no such call, or a sandbox refuses it (asked once).
fn listxattrat(
    dir: &impl AsFd,
    name: &std::ffi::CStr,
    names: &mut [u8],
) -> Option<Result<usize, Errno>> {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    const SYS_LISTXATTRAT: libc::c_long = 465;
    static MISSING: AtomicBool = AtomicBool::new(false);
    if MISSING.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: the directory handle is open for the duration of the call,
    // `name` is NUL-terminated, and `names` is valid for writing
    // `names.len()` bytes; the kernel writes at most that many.
    let n = unsafe {
        libc::syscall(
            SYS_LISTXATTRAT,
            dir.as_fd().as_raw_fd(),
            name.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
            names.as_mut_ptr(),
            names.len(),
        )
    };
    if let Ok(n) = usize::try_from(n) {
        return Some(Ok(n));
    }
    let e = Errno::from_io_error(&io::Error::last_os_error()).unwrap_or(Errno::IO);
    if e == Errno::NOSYS || e == Errno::PERM {
        MISSING.store(true, Ordering::Relaxed);
        return None;
    }
    Some(Err(e))
}

/// An extended attribute that belongs to the system, not to the file's
/// user: a new file gets its own (see `unix::copy_xattrs`).
pub(crate) fn system_xattr(name: &[u8]) -> bool {
    name.starts_with(b"security.") || name.starts_with(b"trusted.")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `listxattrat` and the path through `/proc` list the same names (or
    /// fail the same way) for a plain file, one with an attribute of the
    /// user's, a symlink (not followed) and a missing name, where the
    /// kernel has the call; either way `has_xattrs` tells them apart.
    #[test]
    fn listxattrat_agrees_with_the_path_through_proc() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        std::fs::write(tmp.path().join("plain"), "x")?;
        std::fs::write(tmp.path().join("tagged"), "x")?;
        rustix::fs::setxattr(
            tmp.path().join("tagged"),
            "user.turnback-test",
            b"1",
            rustix::fs::XattrFlags::empty(),
        )?;
        std::os::unix::fs::symlink("tagged", tmp.path().join("link"))?;
        let dir = rustix::fs::open(
            tmp.path(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            Mode::empty(),
        )?;
        for name in [c"plain", c"tagged", c"link", c"missing"] {
            let (mut a, mut b) = ([0u8; 256], [0u8; 256]);
            let proc = list_through_proc(&dir, name, &mut b).ok_or("/proc is mounted")?;
            match (listxattrat(&dir, name, &mut a), proc) {
                (None, _) => {
                    eprintln!("this kernel has no listxattrat: the path through /proc is used")
                }
                (Some(Ok(n)), Ok(m)) => assert_eq!(a[..n], b[..m], "{name:?}"),
                (Some(at), proc) => assert_eq!(at.err(), proc.err(), "{name:?}"),
            }
        }
        assert_eq!(has_xattrs(&dir, c"tagged"), Some(true));
        assert_eq!(has_xattrs(&dir, c"plain"), Some(false));
        assert_eq!(has_xattrs(&dir, c"missing"), Some(false));
        Ok(())
    }
}
