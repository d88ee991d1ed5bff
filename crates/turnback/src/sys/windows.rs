//! Windows: the POSIX `*at` calls the store is written against, over
//! Win32, with the same names and meaning as on Unix.
//!
//! A directory handle ([`OwnedFd`]) is an open handle to the directory plus
//! the path it was opened by, and `*at(dir, name)` works on `path\name`.
//! The directory is opened with `FILE_SHARE_DELETE`, as turnback removes
//! directories it has walked through; so unlike `openat`, a directory
//! renamed away and replaced by a junction between the moment turnback
//! opened it and a later call through it would be followed
//! (docs/PLATFORMS.md says so; relative opens with `NtCreateFile`'s root
//! directory would close that window). Every
//! `*at` call opens its last component with `FILE_FLAG_OPEN_REPARSE_POINT`
//! where the Unix call does not follow symlinks (`O_NOFOLLOW`,
//! `AT_SYMLINK_NOFOLLOW`, opening a subdirectory), and refuses a reparse
//! point found there with the error `O_NOFOLLOW` gives (`ELOOP`), so no
//! symlink, junction or mount point is followed into another place.
//! Paths longer than 260 characters work: std prefixes them with `\\?\`.
//!
//! What Windows has no equivalent for, and what is done instead:
//! - modes: a file's mode is 0o444 with the read-only attribute, else
//!   0o644; a directory's 0o755; a reparse point that is a symlink or
//!   junction 0o777 with the symlink type. Setting a mode sets or clears
//!   the read-only attribute from the owner's write bit. There is no
//!   executable bit and no owner (`st_uid` and [`euid`] are 0).
//! - `st_ino`, `st_dev`, `st_nlink`: the file index, the volume serial
//!   number and the link count of `GetFileInformationByHandle`; `st_ctime`
//!   the change time of `FILE_BASIC_INFO`.
//! - FIFOs, sockets and devices cannot be made: [`mkfifo_exact`] fails.
//! - `flock` is `LockFileEx` (std's `File::try_lock`), released by the
//!   kernel when the holder dies.
//! - durability: `FlushFileBuffers` on each file; directory entries are
//!   made durable by flushing a write handle to the directory where the
//!   file system allows it (NTFS journals them). There is no `syncfs`
//!   without administrator rights, so a batch flushes file by file
//!   (`WHOLE_FS_FLUSH` is false).
//! - names: the store keeps names as UTF-8 bytes; a Windows name is UTF-16.
//!   A name that is not valid Unicode (an unpaired surrogate) cannot be
//!   stored and is reported, never renamed (`crate::path`).

use std::borrow::Cow;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStrExt as _;
use std::os::windows::fs::{FileExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, STILL_ACTIVE};
use windows_sys::Win32::Storage::FileSystem::{
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_READONLY,
    FILE_ATTRIBUTE_REPARSE_POINT, FILE_ATTRIBUTE_TAG_INFO, FILE_BASIC_INFO,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_INFO_BY_HANDLE_CLASS,
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, FileAttributeTagInfo, FileBasicInfo,
    GetFileInformationByHandle, GetFileInformationByHandleEx, GetVolumeInformationByHandleW,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

use super::Names;

const IO_REPARSE_TAG_SYMLINK: u32 = 0xA000_000C;
const IO_REPARSE_TAG_MOUNT_POINT: u32 = 0xA000_0003;

// ------------------------------------------------------------ errors

/// A Windows error code, named by the POSIX error the code above tests for.
/// Codes that have several Win32 spellings are folded into one on the way
/// in (`ERROR_PATH_NOT_FOUND` is `NOENT`, `ERROR_ALREADY_EXISTS` `EXIST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(i32);

#[allow(dead_code)] // the names the Unix code matches; not all are made here
impl Errno {
    /// `ERROR_FILE_NOT_FOUND` (and `ERROR_PATH_NOT_FOUND`).
    pub(crate) const NOENT: Errno = Errno(2);
    /// `ERROR_ACCESS_DENIED`.
    pub(crate) const ACCESS: Errno = Errno(5);
    /// `ERROR_WRITE_PROTECT`.
    pub(crate) const ROFS: Errno = Errno(19);
    /// `ERROR_NOT_SAME_DEVICE`.
    pub(crate) const XDEV: Errno = Errno(17);
    /// `ERROR_SHARING_VIOLATION`: another process holds the file open.
    pub(crate) const BUSY: Errno = Errno(32);
    /// `ERROR_LOCK_VIOLATION`: a lock is held by another.
    pub(crate) const WOULDBLOCK: Errno = Errno(33);
    /// `ERROR_FILE_EXISTS` (and `ERROR_ALREADY_EXISTS`).
    pub(crate) const EXIST: Errno = Errno(80);
    /// `ERROR_INVALID_PARAMETER`.
    pub(crate) const INVAL: Errno = Errno(87);
    /// `ERROR_INVALID_NAME`: a name Windows cannot hold (see
    /// [`BorrowedFd::child`]).
    pub(crate) const BADNAME: Errno = Errno(123);
    /// `ERROR_DIR_NOT_EMPTY`.
    pub(crate) const NOTEMPTY: Errno = Errno(145);
    /// `ERROR_DIRECTORY`: the directory name is invalid (not a directory).
    pub(crate) const NOTDIR: Errno = Errno(267);
    /// `ERROR_DIRECTORY_NOT_SUPPORTED`: an operation on a directory.
    pub(crate) const ISDIR: Errno = Errno(336);
    /// `ERROR_OPERATION_ABORTED` (Windows calls are not interrupted).
    pub(crate) const INTR: Errno = Errno(995);
    /// `ERROR_NOT_SUPPORTED`: FIFOs, sockets (what `ENXIO` reports).
    pub(crate) const NXIO: Errno = Errno(50);
    /// `ERROR_INVALID_HANDLE` (what a missing process gives).
    pub(crate) const SRCH: Errno = Errno(6);
    /// `ERROR_PRIVILEGE_NOT_HELD`: symbolic links cannot be made here.
    pub(crate) const NOSYMLINK: Errno = Errno(1314);
    /// `ERROR_REPARSE_POINT_ENCOUNTERED`: a symlink, junction or mount
    /// point where none is followed.
    pub(crate) const LOOP: Errno = Errno(4395);

    /// The Win32 error code.
    pub(crate) fn raw_os_error(self) -> i32 {
        self.0
    }

    /// From a Win32 error code (folded as [`Errno`] says).
    pub(crate) fn from_raw_os_error(code: i32) -> Errno {
        Errno::of(&io::Error::from_raw_os_error(code))
    }

    fn of(e: &io::Error) -> Errno {
        match e.raw_os_error() {
            Some(3) => Errno::NOENT,
            Some(183) => Errno::EXIST,
            Some(c) => Errno(c),
            None => match e.kind() {
                io::ErrorKind::NotFound => Errno::NOENT,
                io::ErrorKind::AlreadyExists => Errno::EXIST,
                io::ErrorKind::PermissionDenied => Errno::ACCESS,
                _ => Errno::INVAL,
            },
        }
    }
}

impl From<io::Error> for Errno {
    fn from(e: io::Error) -> Errno {
        Errno::of(&e)
    }
}

impl From<Errno> for io::Error {
    fn from(e: Errno) -> io::Error {
        match e {
            Errno::LOOP => io::Error::new(
                io::ErrorKind::InvalidInput,
                "it is a symlink, junction or mount point, which turnback does not follow",
            ),
            Errno::ISDIR => io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"),
            Errno::BUSY => io::Error::new(
                io::ErrorKind::ResourceBusy,
                "another process has it open and does not let it be replaced or removed (a sharing violation); close it, then run the rewind again (or `turnback undo`)",
            ),
            Errno::NOSYMLINK => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "this Windows does not let turnback make a symbolic link here (it needs Developer Mode or the privilege to create symbolic links); the link is not restored",
            ),
            Errno::NXIO => io::Error::new(
                io::ErrorKind::Unsupported,
                "Windows has no FIFOs, sockets or device nodes",
            ),
            Errno(c) => io::Error::from_raw_os_error(c),
        }
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        io::Error::from(*self).fmt(f)
    }
}

impl std::error::Error for Errno {}

type Res<T> = Result<T, Errno>;

// ------------------------------------------------------------ handles

/// An open file or directory; a directory opened by path remembers it.
#[derive(Debug)]
pub(crate) struct OwnedFd {
    file: File,
    path: Option<PathBuf>,
    dir: bool,
}

/// A borrowed [`OwnedFd`] (or a `File`, which has no path).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BorrowedFd<'a> {
    file: &'a File,
    path: Option<&'a Path>,
    dir: bool,
}

/// What the `*at` calls take: anything that lends a handle.
pub(crate) trait AsFd {
    /// The handle, and the directory path when it has one.
    fn as_fd(&self) -> BorrowedFd<'_>;
}

impl AsFd for OwnedFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        BorrowedFd {
            file: &self.file,
            path: self.path.as_deref(),
            dir: self.dir,
        }
    }
}

impl AsFd for BorrowedFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        *self
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        BorrowedFd {
            file: self,
            path: None,
            dir: false,
        }
    }
}

impl<T: AsFd + ?Sized> AsFd for &T {
    fn as_fd(&self) -> BorrowedFd<'_> {
        (**self).as_fd()
    }
}

impl<T: AsFd + ?Sized> AsFd for &mut T {
    fn as_fd(&self) -> BorrowedFd<'_> {
        (**self).as_fd()
    }
}

impl From<File> for OwnedFd {
    fn from(file: File) -> OwnedFd {
        OwnedFd {
            file,
            path: None,
            dir: false,
        }
    }
}

impl From<OwnedFd> for File {
    fn from(fd: OwnedFd) -> File {
        fd.file
    }
}

impl BorrowedFd<'_> {
    /// `name` inside this directory. Every `*at` call reaches its file
    /// through here, so a name that would not stay a name is refused with
    /// `ERROR_INVALID_NAME` whoever passes it: one breaking Windows' name
    /// rules (`crate::names::windows_problem`: `a:b` opens a stream,
    /// `C:\x` or `..\x` another place, `CON` a device, `a.` the file `a`)
    /// or starting at a root (`/x`). The store may hold such names (a
    /// store made on Linux); the code above never passes one knowingly
    /// (`RelPath::problem_here`): this is the last line.
    fn child(&self, name: &OsStr) -> Res<PathBuf> {
        let dir = self.path.filter(|_| self.dir).ok_or(Errno::NOTDIR)?;
        if name.is_empty() || name == "." {
            return Ok(dir.to_path_buf());
        }
        // Names that are not Unicode (an unpaired surrogate) are exact
        // UTF-16 here and can hold no separator, stream or device.
        if let Some(text) = name.to_str() {
            let bad = text.starts_with('/')
                || text.split('/').any(|c| {
                    !matches!(c, "" | "." | "..")
                        && crate::names::windows_problem(c.as_bytes()).is_some()
                });
            if bad {
                return Err(Errno::BADNAME);
            }
        }
        Ok(dir.join(name))
    }
}

/// A second handle to the same file (`DuplicateHandle`).
pub(crate) fn dup(fd: impl AsFd) -> Res<OwnedFd> {
    let b = fd.as_fd();
    Ok(OwnedFd {
        file: b.file.try_clone()?,
        path: b.path.map(Path::to_path_buf),
        dir: b.dir,
    })
}

// ------------------------------------------------------------ the `fs` calls

/// The `*at` calls, their flags and the `stat` record, as on Unix.
pub(crate) mod fs {
    pub(crate) use super::{
        Access, Arg, AtFlags, Dir, FileType, FlockOperation, Mode, OFlags, RenameFlags, Stat,
        Timespec, Timestamps, UTIME_NOW, accessat, chmodat, fchmod, flock, fstat, futimens, linkat,
        mkdirat, open, openat, readlinkat, renameat, renameat_with, statat, symlinkat, unlinkat,
    };
}

/// A name or path the `*at` calls take.
pub(crate) trait Arg {
    /// As an `OsStr` (a C string must be UTF-8).
    fn as_os(&self) -> Cow<'_, OsStr>;
    /// As text, lossily.
    fn to_string_lossy(&self) -> Cow<'_, str> {
        match self.as_os() {
            Cow::Borrowed(o) => o.to_string_lossy(),
            Cow::Owned(o) => Cow::Owned(o.to_string_lossy().into_owned()),
        }
    }
}

impl Arg for &str {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(OsStr::new(*self))
    }
}
impl Arg for &String {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(OsStr::new(self.as_str()))
    }
}
impl Arg for &OsStr {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(self)
    }
}
impl Arg for &OsString {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(self.as_os_str())
    }
}
impl Arg for &Path {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(self.as_os_str())
    }
}
impl Arg for &PathBuf {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(self.as_os_str())
    }
}
impl Arg for &CStr {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(os_str(self.to_bytes()))
    }
}
impl Arg for &CString {
    fn as_os(&self) -> Cow<'_, OsStr> {
        Cow::Borrowed(os_str(self.to_bytes()))
    }
}

macro_rules! flags {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $flag:ident = $v:expr),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub(crate) struct $name(u32);
        #[allow(dead_code)]
        impl $name {
            $($(#[$fdoc])* pub(crate) const $flag: $name = $name($v);)*
            /// No flag.
            pub(crate) const fn empty() -> $name {
                $name(0)
            }
            /// Whether every flag of `other` is set.
            pub(crate) const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }
            /// Every flag of both (`|`, in a `const`).
            pub(crate) const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }
        }
        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, o: $name) -> $name {
                $name(self.0 | o.0)
            }
        }
        impl std::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, o: $name) {
                self.0 |= o.0;
            }
        }
    };
}

flags!(
    /// `open` flags (`O_*`).
    OFlags {
        /// Read only (zero, as on Unix).
        RDONLY = 0,
        /// Write only.
        WRONLY = 1,
        /// Read and write.
        RDWR = 2,
        /// Create when missing.
        CREATE = 1 << 3,
        /// With `CREATE`: fail when it exists.
        EXCL = 1 << 4,
        /// Appends.
        APPEND = 1 << 5,
        /// Must be a directory.
        DIRECTORY = 1 << 6,
        /// Do not follow a reparse point in the last component.
        NOFOLLOW = 1 << 7,
        /// Truncate.
        TRUNC = 1 << 8,
        /// Handles are never inherited by child processes here.
        CLOEXEC = 0,
        /// No terminals on Windows.
        NOCTTY = 0,
        /// No FIFOs on Windows.
        NONBLOCK = 0,
    }
);
flags!(
    /// `*at` flags (`AT_*`).
    AtFlags {
        /// Do not follow a reparse point in the last component.
        SYMLINK_NOFOLLOW = 1,
        /// `unlinkat` removes a directory.
        REMOVEDIR = 2,
        /// `accessat` checks for this process (always so here).
        EACCESS = 4,
    }
);
flags!(
    /// `accessat` modes.
    Access {
        /// May write.
        WRITE_OK = 2,
        /// May search (a directory).
        EXEC_OK = 1,
    }
);
flags!(
    /// `renameat_with` flags.
    RenameFlags {
        /// Fail when the target exists.
        NOREPLACE = 1,
    }
);

/// Permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mode(u32);

impl Mode {
    /// From `st_mode`-style bits.
    pub(crate) const fn from_raw_mode(m: u32) -> Mode {
        Mode(m)
    }
    /// None.
    pub(crate) const fn empty() -> Mode {
        Mode(0)
    }
}

/// The file types of `st_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileType {
    /// A file.
    RegularFile,
    /// A directory.
    Directory,
    /// A symlink or junction.
    Symlink,
    /// Never made on Windows.
    Fifo,
    /// Never made on Windows.
    Socket,
    /// Never made on Windows.
    CharacterDevice,
    /// Never made on Windows.
    BlockDevice,
    /// Anything else.
    Unknown,
}

const S_IFMT: u32 = 0o170_000;

impl FileType {
    /// The type bits of a full `st_mode`.
    pub(crate) fn from_raw_mode(m: u32) -> FileType {
        match m & S_IFMT {
            0o100_000 => FileType::RegularFile,
            0o040_000 => FileType::Directory,
            0o120_000 => FileType::Symlink,
            0o010_000 => FileType::Fifo,
            0o140_000 => FileType::Socket,
            0o020_000 => FileType::CharacterDevice,
            0o060_000 => FileType::BlockDevice,
            _ => FileType::Unknown,
        }
    }
}

/// What `fstat` gives, in the Unix field names the store reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stat {
    /// Type and permission bits (see the module doc).
    pub st_mode: u32,
    /// Size in bytes.
    pub st_size: i64,
    /// The file index.
    pub st_ino: u64,
    /// The volume serial number.
    pub st_dev: u64,
    /// Hard links.
    pub st_nlink: u64,
    /// Always 0.
    pub st_uid: u32,
    /// Last write, seconds since the Unix epoch.
    pub st_mtime: i64,
    /// Its nanoseconds.
    pub st_mtime_nsec: i64,
    /// Last change (data or metadata), seconds since the Unix epoch.
    pub st_ctime: i64,
    /// Its nanoseconds.
    pub st_ctime_nsec: i64,
}

/// A time for [`futimens`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timespec {
    /// Seconds since the Unix epoch.
    pub tv_sec: i64,
    /// Nanoseconds, or [`UTIME_NOW`].
    pub tv_nsec: i64,
}

/// Access and modification times for [`futimens`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timestamps {
    /// Last access.
    pub last_access: Timespec,
    /// Last modification.
    pub last_modification: Timespec,
}

/// "Now", as `tv_nsec`.
pub(crate) const UTIME_NOW: i64 = (1 << 30) - 1;

/// `flock` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names, dead_code)]
pub(crate) enum FlockOperation {
    /// Shared, waiting.
    LockShared,
    /// Exclusive, waiting.
    LockExclusive,
    /// Shared, or `WOULDBLOCK`.
    NonBlockingLockShared,
    /// Exclusive, or `WOULDBLOCK`.
    NonBlockingLockExclusive,
    /// Release.
    Unlock,
}

/// FILETIME (100 ns since 1601) to nanoseconds since 1970.
fn filetime_ns(t: i64) -> i64 {
    const EPOCH_DIFF: i64 = 116_444_736_000_000_000;
    t.saturating_sub(EPOCH_DIFF).saturating_mul(100)
}

fn handle(f: &File) -> HANDLE {
    f.as_raw_handle() as HANDLE
}

/// `fstat`: `GetFileInformationByHandle` and the change time.
pub(crate) fn fstat(fd: impl AsFd) -> Res<Stat> {
    let f = fd.as_fd().file;
    // SAFETY: all-zero is a valid value of this plain C record.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call and `info` is a writable
    // record of the size the call fills.
    if unsafe { GetFileInformationByHandle(handle(f), &mut info) } == 0 {
        return Err(io::Error::last_os_error().into());
    }
    let attrs = info.dwFileAttributes;
    let write = (i64::from(info.ftLastWriteTime.dwHighDateTime) << 32)
        | i64::from(info.ftLastWriteTime.dwLowDateTime);
    let change = info_ex::<FILE_BASIC_INFO>(f, FileBasicInfo).map_or(write, |b| b.ChangeTime);
    let mode = if attrs & FILE_ATTRIBUTE_REPARSE_POINT != 0 && is_link(f) {
        0o120_777
    } else if attrs & FILE_ATTRIBUTE_DIRECTORY != 0 {
        0o040_755
    } else if attrs & FILE_ATTRIBUTE_READONLY != 0 {
        0o100_444
    } else {
        0o100_644
    };
    let (m, c) = (filetime_ns(write), filetime_ns(change));
    Ok(Stat {
        st_mode: mode,
        st_size: ((i64::from(info.nFileSizeHigh)) << 32) | i64::from(info.nFileSizeLow),
        st_ino: (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
        st_dev: u64::from(info.dwVolumeSerialNumber),
        st_nlink: u64::from(info.nNumberOfLinks),
        st_uid: 0,
        st_mtime: m.div_euclid(1_000_000_000),
        st_mtime_nsec: m.rem_euclid(1_000_000_000),
        st_ctime: c.div_euclid(1_000_000_000),
        st_ctime_nsec: c.rem_euclid(1_000_000_000),
    })
}

/// Whether the reparse point open as `f` is a symlink or junction (others,
/// such as cloud placeholders, stand for a file or directory).
fn is_link(f: &File) -> bool {
    info_ex::<FILE_ATTRIBUTE_TAG_INFO>(f, FileAttributeTagInfo).is_none_or(|tag| {
        matches!(
            tag.ReparseTag,
            IO_REPARSE_TAG_SYMLINK | IO_REPARSE_TAG_MOUNT_POINT
        )
    })
}

/// The record of class `class` about the file open as `f`
/// (`GetFileInformationByHandleEx`); `None` when the call fails. `T` must
/// be the plain-data record that class fills.
fn info_ex<T>(f: &File, class: FILE_INFO_BY_HANDLE_CLASS) -> Option<T> {
    let mut record = std::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: the handle is open for the call, and the record is writable
    // and of the size passed; every record of these classes is plain data,
    // valid once the call has filled it.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            handle(f),
            class,
            record.as_mut_ptr().cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    // SAFETY: filled by the call that succeeded (and zeroed before it).
    (ok != 0).then(|| unsafe { record.assume_init() })
}

/// Opens `path` as `flags` say; a directory (and `DIRECTORY`) keeps its
/// path and is opened without `FILE_SHARE_DELETE` (see the module doc).
fn open_path(path: &Path, flags: OFlags) -> Res<OwnedFd> {
    let mut o = OpenOptions::new();
    let acc = flags.0 & 3;
    o.read(acc == 0 || acc == 2);
    o.write(acc == 1 || acc == 2);
    if flags.contains(OFlags::APPEND) {
        o.append(true);
    }
    if flags.contains(OFlags::CREATE) && acc == 0 {
        // Unix creates a file opened for reading; Windows wants write
        // access to create one, so it is created first, then opened.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
            .open(path)
        {
            Ok(_) => {}
            Err(e) if Errno::of(&e) == Errno::EXIST && !flags.contains(OFlags::EXCL) => {}
            Err(e) => return Err(e.into()),
        }
    } else if flags.contains(OFlags::CREATE) {
        if flags.contains(OFlags::EXCL) {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    if flags.contains(OFlags::TRUNC) {
        o.truncate(true);
    }
    let mut custom = FILE_FLAG_BACKUP_SEMANTICS;
    if flags.contains(OFlags::NOFOLLOW) || flags.contains(OFlags::DIRECTORY) {
        custom |= FILE_FLAG_OPEN_REPARSE_POINT;
    }
    o.custom_flags(custom);
    let dir = flags.contains(OFlags::DIRECTORY);
    o.share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE);
    let file = o.open(path)?;
    let st = fstat(&file)?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft == FileType::Symlink && custom & FILE_FLAG_OPEN_REPARSE_POINT != 0 {
        return Err(Errno::LOOP);
    }
    if dir && ft != FileType::Directory {
        return Err(Errno::NOTDIR);
    }
    if !dir && ft == FileType::Directory && acc != 0 {
        return Err(Errno::ISDIR);
    }
    Ok(OwnedFd {
        path: Some(path.to_path_buf()),
        dir: ft == FileType::Directory,
        file,
    })
}

/// `open` by path (the root of a project or store).
pub(crate) fn open(path: impl Arg, flags: OFlags, _mode: Mode) -> Res<OwnedFd> {
    let p = PathBuf::from(path.as_os().into_owned());
    let p = if p.is_absolute() {
        p
    } else {
        std::env::current_dir()?.join(p)
    };
    open_path(&p, flags)
}

/// `openat`.
pub(crate) fn openat(dir: impl AsFd, name: impl Arg, flags: OFlags, mode: Mode) -> Res<OwnedFd> {
    let path = dir.as_fd().child(&name.as_os())?;
    let fd = open_path(&path, flags)?;
    if flags.contains(OFlags::CREATE) && mode.0 & 0o200 == 0 {
        set_readonly(&fd.file, true)?;
    }
    Ok(fd)
}

/// `fstatat`: opens the entry for its attributes only.
pub(crate) fn statat(dir: impl AsFd, name: impl Arg, flags: AtFlags) -> Res<Stat> {
    let path = dir.as_fd().child(&name.as_os())?;
    let mut o = OpenOptions::new();
    o.access_mode(0x80); // FILE_READ_ATTRIBUTES
    o.share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE);
    let mut custom = FILE_FLAG_BACKUP_SEMANTICS;
    if flags.contains(AtFlags::SYMLINK_NOFOLLOW) {
        custom |= FILE_FLAG_OPEN_REPARSE_POINT;
    }
    o.custom_flags(custom);
    let f = o.open(&path)?;
    fstat(&f)
}

/// `mkdirat` (the mode's owner-write bit aside, Windows has no modes).
pub(crate) fn mkdirat(dir: impl AsFd, name: impl Arg, _mode: Mode) -> Res<()> {
    let path = dir.as_fd().child(&name.as_os())?;
    Ok(std::fs::create_dir(path)?)
}

/// `unlinkat`: a file or link, or with `REMOVEDIR` an empty directory. A
/// read-only file loses the attribute first (Unix removes it regardless).
pub(crate) fn unlinkat(dir: impl AsFd, name: impl Arg, flags: AtFlags) -> Res<()> {
    let path = dir.as_fd().child(&name.as_os())?;
    if flags.contains(AtFlags::REMOVEDIR) {
        let st = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(Errno::NOTDIR);
        }
        return retrying(|| std::fs::remove_dir(&path));
    }
    let st = statat(&dir, &*name.as_os(), AtFlags::SYMLINK_NOFOLLOW)?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Err(Errno::ISDIR),
        // A directory symlink or junction is removed as a directory.
        FileType::Symlink => {
            retrying(|| std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir(&path)))
        }
        _ => match retrying(|| std::fs::remove_file(&path)) {
            Err(Errno::ACCESS) if st.st_mode & 0o200 == 0 => {
                let f = OpenOptions::new().write(true).open(&path)?;
                set_readonly(&f, false)?;
                drop(f);
                retrying(|| std::fs::remove_file(&path))
            }
            r => r,
        },
    }
}

/// `renameat`: `MoveFileExW` with `MOVEFILE_REPLACE_EXISTING` (std's
/// rename), which replaces the target entry itself, never what a link in
/// its place points to.
pub(crate) fn renameat(
    from_dir: impl AsFd,
    from: impl Arg,
    to_dir: impl AsFd,
    to: impl Arg,
) -> Res<()> {
    let a = from_dir.as_fd().child(&from.as_os())?;
    let b = to_dir.as_fd().child(&to.as_os())?;
    match retrying(|| std::fs::rename(&a, &b)) {
        Err(Errno::ACCESS) => match std::fs::symlink_metadata(&b) {
            // A file renamed over a directory: POSIX says EISDIR, which the
            // callers handle; Windows says access denied.
            Ok(m) if m.is_dir() => Err(Errno::ISDIR),
            // Unix replaces a read-only file; Windows wants it writable.
            Ok(m) if m.permissions().readonly() => {
                let f = OpenOptions::new().write(true).open(&b)?;
                set_readonly(&f, false)?;
                drop(f);
                retrying(|| std::fs::rename(&a, &b))
            }
            // Replacing a file another process has open is refused as
            // access denied too: in use, as far as can be told.
            Ok(_) => retrying(|| match std::fs::rename(&a, &b) {
                Err(e) if e.raw_os_error() == Some(5) => Err(io::Error::from_raw_os_error(32)),
                r => r,
            }),
            Err(_) => Err(Errno::ACCESS),
        },
        r => r,
    }
}

/// Runs `op` again while another process holds its file open against it
/// (a sharing or lock violation), for about 0.6 s in all, then gives up
/// with [`Errno::BUSY`]: an editor or antivirus scanner usually lets go
/// within that; a program that keeps the file open makes the path a
/// reported "not restored", never a hang.
fn retrying<T>(mut op: impl FnMut() -> io::Result<T>) -> Res<T> {
    let mut pause = std::time::Duration::from_millis(10);
    for _ in 0..6 {
        match op() {
            Err(e) if matches!(e.raw_os_error(), Some(32 | 33)) => {
                std::thread::sleep(pause);
                pause *= 2;
            }
            other => return other.map_err(Errno::from),
        }
    }
    match op() {
        Err(e) if matches!(e.raw_os_error(), Some(32 | 33)) => Err(Errno::BUSY),
        other => other.map_err(Errno::from),
    }
}

/// `renameat2(RENAME_NOREPLACE)`: `MoveFileExW` without replacing.
pub(crate) fn renameat_with(
    from_dir: impl AsFd,
    from: impl Arg,
    to_dir: impl AsFd,
    to: impl Arg,
    _flags: RenameFlags,
) -> Res<()> {
    use windows_sys::Win32::Storage::FileSystem::MoveFileExW;
    let a = wide(&from_dir.as_fd().child(&from.as_os())?);
    let b = wide(&to_dir.as_fd().child(&to.as_os())?);
    // SAFETY: both are NUL-terminated wide strings that outlive the call.
    if unsafe { MoveFileExW(a.as_ptr(), b.as_ptr(), 0) } == 0 {
        return Err(io::Error::last_os_error().into());
    }
    Ok(())
}

/// A NUL-terminated wide path, with std's long-path prefix where needed.
fn wide(p: &Path) -> Vec<u16> {
    let s = p.as_os_str();
    let long = s.len() >= 248 && !s.to_string_lossy().starts_with(r"\\?\");
    let mut v: Vec<u16> = if long {
        OsStr::new(r"\\?\")
            .encode_wide()
            .chain(s.encode_wide())
            .collect()
    } else {
        s.encode_wide().collect()
    };
    v.push(0);
    v
}

/// `readlinkat`: the target of a symlink or junction.
pub(crate) fn readlinkat(dir: impl AsFd, name: impl Arg, _reuse: Vec<u8>) -> Res<CString> {
    let path = dir.as_fd().child(&name.as_os())?;
    let target = std::fs::read_link(path)?;
    let text = target.to_str().ok_or(Errno::INVAL)?.replace('\\', "/");
    CString::new(text).map_err(|_| Errno::INVAL)
}

/// `symlinkat`: `CreateSymbolicLinkW` (needs Developer Mode or the
/// privilege to create symbolic links; without it the error says so). The
/// target's `/` become `\`; a target that is a directory gets a directory
/// link.
pub(crate) fn symlinkat(target: impl Arg, dir: impl AsFd, name: impl Arg) -> Res<()> {
    let link = dir.as_fd().child(&name.as_os())?;
    let t = PathBuf::from(target.as_os().to_string_lossy().replace('/', "\\"));
    let resolved = link
        .parent()
        .map(|p| p.join(&t))
        .unwrap_or_else(|| t.clone());
    if resolved.is_dir() {
        std::os::windows::fs::symlink_dir(&t, &link)?;
    } else {
        std::os::windows::fs::symlink_file(&t, &link)?;
    }
    // Some implementations (Wine) report success and make nothing.
    match std::fs::symlink_metadata(&link) {
        Ok(m) if m.file_type().is_symlink() => Ok(()),
        _ => Err(Errno::NOSYMLINK),
    }
}

/// `linkat`: `CreateHardLinkW`.
pub(crate) fn linkat(
    from_dir: impl AsFd,
    from: impl Arg,
    to_dir: impl AsFd,
    to: impl Arg,
    _flags: AtFlags,
) -> Res<()> {
    let a = from_dir.as_fd().child(&from.as_os())?;
    let b = to_dir.as_fd().child(&to.as_os())?;
    Ok(std::fs::hard_link(a, b)?)
}

fn set_readonly(f: &File, readonly: bool) -> Res<()> {
    let mut p = f.metadata()?.permissions();
    if p.readonly() != readonly {
        p.set_readonly(readonly);
        f.set_permissions(p)?;
    }
    Ok(())
}

/// `fchmod`: the read-only attribute from the owner's write bit.
pub(crate) fn fchmod(fd: impl AsFd, mode: Mode) -> Res<()> {
    let b = fd.as_fd();
    if b.dir {
        return Ok(()); // Windows ignores a directory's read-only bit
    }
    set_readonly(b.file, mode.0 & 0o200 == 0)
}

/// `fchmodat` (never through a link: the caller checked what `name` is).
pub(crate) fn chmodat(dir: impl AsFd, name: impl Arg, mode: Mode, _flags: AtFlags) -> Res<()> {
    let path = dir.as_fd().child(&name.as_os())?;
    let f = OpenOptions::new()
        .access_mode(0x100 | 0x80) // FILE_WRITE_ATTRIBUTES | FILE_READ_ATTRIBUTES
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    if f.metadata()?.is_dir() {
        return Ok(());
    }
    set_readonly(&f, mode.0 & 0o200 == 0)
}

/// `faccessat`: a directory can always be written here unless the file
/// system is read-only, which the write itself reports.
pub(crate) fn accessat(_dir: impl AsFd, _name: impl Arg, _a: Access, _f: AtFlags) -> Res<()> {
    Ok(())
}

/// `futimens`: the last-write (and access) time; `UTIME_NOW` is now.
pub(crate) fn futimens(fd: impl AsFd, times: &Timestamps) -> Res<()> {
    let at = |t: &Timespec| {
        if t.tv_nsec == UTIME_NOW {
            std::time::SystemTime::now()
        } else {
            std::time::UNIX_EPOCH
                + std::time::Duration::new(
                    t.tv_sec.max(0) as u64,
                    t.tv_nsec.clamp(0, 999_999_999) as u32,
                )
        }
    };
    let t = std::fs::FileTimes::new()
        .set_accessed(at(&times.last_access))
        .set_modified(at(&times.last_modification));
    Ok(fd.as_fd().file.set_times(t)?)
}

/// `flock`: `LockFileEx` through std.
pub(crate) fn flock(fd: impl AsFd, op: FlockOperation) -> Res<()> {
    let f = fd.as_fd().file;
    match op {
        FlockOperation::LockShared => f.lock_shared().map_err(Errno::from),
        FlockOperation::LockExclusive => f.lock().map_err(Errno::from),
        FlockOperation::NonBlockingLockShared => f.try_lock_shared().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => Errno::WOULDBLOCK,
            std::fs::TryLockError::Error(e) => Errno::from(e),
        }),
        FlockOperation::NonBlockingLockExclusive => f.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => Errno::WOULDBLOCK,
            std::fs::TryLockError::Error(e) => Errno::from(e),
        }),
        FlockOperation::Unlock => f.unlock().map_err(Errno::from),
    }
}

/// A directory listing (`readdir`), read whole when opened.
pub(crate) struct Dir {
    names: std::vec::IntoIter<CString>,
}

/// One name of a [`Dir`].
pub(crate) struct DirEntry {
    name: CString,
}

impl DirEntry {
    /// The name, as UTF-8 (see [`os_str`]).
    pub(crate) fn file_name(&self) -> &CStr {
        &self.name
    }
}

impl Dir {
    /// Lists the directory `fd`.
    pub(crate) fn read_from(fd: impl AsFd) -> Res<Dir> {
        let (names, failed) = list_names(&fd);
        if let Some(e) = failed {
            return Err(e);
        }
        let list: Vec<CString> = names.names().into_iter().map(CStr::to_owned).collect();
        Ok(Dir {
            names: list.into_iter(),
        })
    }

    /// The next entry.
    pub(crate) fn read(&mut self) -> Option<Res<DirEntry>> {
        self.names.next().map(|name| Ok(DirEntry { name }))
    }
}

impl Iterator for Dir {
    type Item = Res<DirEntry>;
    fn next(&mut self) -> Option<Res<DirEntry>> {
        self.read()
    }
}

// ------------------------------------------------------------ sys functions

/// Gives the memory the allocator holds free back to the system: the
/// process heap does so on its own.
pub(crate) fn give_back_free_memory() {}

/// Huge pages for a large buffer (see `linux.rs`): the system decides on
/// its own here.
pub(crate) fn huge_pages<T>(_v: &mut Vec<T>) {}

/// Whether the file system of `dir` sets a directory's last write time
/// whenever an entry is created, removed or renamed in it (see
/// `snapshot/walk.rs`): NTFS and ReFS. Not FAT, exFAT or a network share.
pub(crate) fn dir_times_follow_entries(dir: &impl AsFd) -> bool {
    let f = dir.as_fd().file;
    let mut name = [0u16; 32];
    // SAFETY: the handle is open for the call; `name` is a writable buffer
    // of the length passed; every other out-pointer is null, which the
    // call allows.
    let ok = unsafe {
        GetVolumeInformationByHandleW(
            handle(f),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            name.as_mut_ptr(),
            name.len() as u32,
        )
    };
    if ok == 0 {
        return false;
    }
    let len = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    matches!(
        String::from_utf16_lossy(&name[..len]).as_str(),
        "NTFS" | "ReFS"
    )
}

/// The permission and type bits of `st`.
pub(crate) fn mode(st: &Stat) -> u32 {
    st.st_mode
}

/// The volume of `st`.
pub(crate) fn dev(st: &Stat) -> u64 {
    st.st_dev
}

/// The number of names of `st`'s file.
pub(crate) fn nlink(st: &Stat) -> u64 {
    st.st_nlink
}

/// The last-write time of `st` in nanoseconds since the epoch.
pub(crate) fn mtime_ns(st: &Stat) -> i64 {
    super::epoch_ns(st.st_mtime, st.st_mtime_nsec)
}

/// The change time of `st` in nanoseconds since the epoch.
pub(crate) fn ctime_ns(st: &Stat) -> i64 {
    super::epoch_ns(st.st_ctime, st.st_ctime_nsec)
}

/// The file type in a full `st_mode`.
pub(crate) fn file_type(mode: u32) -> FileType {
    FileType::from_raw_mode(mode)
}

/// The permission bits (`mode & 0o7777`).
pub(crate) fn perm(mode: u32) -> Mode {
    Mode(mode & 0o7777)
}

/// `FlushFileBuffers`, which needs a handle with write access: a file or
/// directory opened for reading is flushed through a second handle opened
/// for writing where the file system gives one (NTFS journals directory
/// entries, see the module doc).
pub(crate) fn fsync_durable(fd: &impl AsFd) -> io::Result<()> {
    let b = fd.as_fd();
    let denied = match b.file.sync_all() {
        Err(e) if Errno::of(&e) == Errno::ACCESS => e,
        other => return other,
    };
    match b.path {
        None => Err(denied),
        Some(dir) => {
            let w = OpenOptions::new()
                .write(true)
                .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
                .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
                .open(dir);
            match w {
                Ok(w) => match w.sync_all() {
                    Err(e) if Errno::of(&e) == Errno::ACCESS || Errno::of(&e) == Errno::INVAL => {
                        Ok(())
                    }
                    r => r,
                },
                // No write handle to a directory on this file system: its
                // entries are in the journal the file flushes commit.
                Err(e) if Errno::of(&e) == Errno::ACCESS => Ok(()),
                Err(e) => Err(e),
            }
        }
    }
}

/// The same as [`fsync_durable`]: Windows has no cheaper flush that a later
/// one completes.
pub(crate) fn fsync_queued(fd: &impl AsFd) -> io::Result<()> {
    fsync_durable(fd)
}

/// Nothing: every queued flush was durable.
pub(crate) fn commit_queued(_fd: &impl AsFd) -> io::Result<()> {
    Ok(())
}

/// No `syncfs` without administrator rights.
pub(crate) const WHOLE_FS_FLUSH: bool = false;

/// `FlushFileBuffers`.
pub(crate) fn fdatasync(fd: &impl AsFd) -> io::Result<()> {
    fsync_durable(fd)
}

/// Not reached (`WHOLE_FS_FLUSH` is false); flushes `fd` alone.
pub(crate) fn flush_device(fd: &impl AsFd) -> io::Result<()> {
    fsync_durable(fd)
}

/// Windows has no FIFOs.
pub(crate) fn mkfifo_exact(_dir: &impl AsFd, _name: &str) -> io::Result<()> {
    Err(Errno::NXIO.into())
}

/// Lists the directory `dir` (`FindFirstFileW`/`FindNextFileW` through
/// std); names that are not valid Unicode are kept as their WTF-8 bytes,
/// which [`os_str`] and `crate::path` refuse.
pub(crate) fn list_names(dir: &impl AsFd) -> (Names, Option<Errno>) {
    let mut names = Names::default();
    let b = dir.as_fd();
    let Some(path) = b.path.filter(|_| b.dir) else {
        return (names, Some(Errno::NOTDIR));
    };
    let listing = match std::fs::read_dir(path) {
        Ok(l) => l,
        Err(e) => return (names, Some(e.into())),
    };
    for entry in listing {
        match entry {
            Ok(e) => {
                let name = e.file_name();
                if let Ok(c) = CString::new(name.as_encoded_bytes()) {
                    names.push(&c);
                }
            }
            Err(e) => return (names, Some(e.into())),
        }
    }
    (names, None)
}

/// UTF-8 bytes as an `OsStr`; other bytes cannot name a file here and map
/// to U+FFFD.
pub(crate) fn os_str(bytes: &[u8]) -> &OsStr {
    match std::str::from_utf8(bytes) {
        Ok(s) => OsStr::new(s),
        Err(_) => OsStr::new("\u{FFFD}"),
    }
}

/// An overlapped read at `offset` (the shared cursor moves, which nothing
/// here relies on).
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    file.seek_read(buf, offset)
}

/// An overlapped write at `offset`.
pub(crate) fn write_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<usize> {
    file.seek_write(bytes, offset)
}

/// Directory handles one operation may hold across its walks (see
/// `dirstack::Held`): none, as a held handle keeps its directory's name
/// taken (`HANDLES_KEEP_NAMES`) and an operation may remove a directory it
/// walked.
pub(crate) fn held_dir_handles() -> usize {
    0
}

/// Whether the process `pid` is running: it can be opened and has not
/// exited.
pub(crate) fn process_alive(pid: u32) -> bool {
    // SAFETY: plain calls on a handle this function owns and closes.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            // Access denied means it exists.
            return io::Error::last_os_error().raw_os_error() == Some(5);
        }
        let mut code = 0u32;
        let ok = GetExitCodeProcess(h, &mut code);
        CloseHandle(h);
        ok != 0 && code == STILL_ACTIVE as u32
    }
}

/// Extended attributes: NTFS's are not reachable through the calls
/// turnback uses, and nothing is copied (docs/PLATFORMS.md).
pub(crate) fn copy_xattrs(_from: BorrowedFd<'_>, _to: BorrowedFd<'_>) -> Vec<(String, Errno)> {
    Vec::new()
}

/// Windows has no user ids here: 0, as [`Stat::st_uid`].
pub(crate) fn euid() -> u32 {
    0
}

/// `std::fs::canonicalize` without its verbatim prefix
/// ([`crate::path::strip_verbatim`]).
pub(crate) fn canonicalize(path: &Path) -> io::Result<PathBuf> {
    std::fs::canonicalize(path).map(|full| crate::path::strip_verbatim(&full))
}

/// Whether a stored name must pass Windows' name rules here
/// (`crate::names::windows_problem`).
pub(crate) const WINDOWS_NAMES: bool = true;

/// A directory removed while a handle to it is open stays in its parent (delete pending) until the handle closes.
pub(crate) const HANDLES_KEEP_NAMES: bool = true;

/// NTFS, by default, does not tell case apart.
pub(crate) const CASE_INSENSITIVE_DEFAULT: bool = true;

/// NTFS tells Unicode normalization apart.
pub(crate) const NORMALIZATION_INSENSITIVE: bool = false;

/// Not measured on NTFS: a rename frees the replaced file as it goes.
pub(crate) const DEFER_FREES: bool = false;

/// Not measured on NTFS: the files an operation replaces are read and
/// stored in a pack (see `aside.rs`).
pub(crate) const KEEP_ASIDE: bool = false;

/// The bytes of a whole file, read into memory (Linux and macOS map it).
pub(crate) struct FileBytes(Vec<u8>);

impl FileBytes {
    /// Reads the whole of `file`, a regular file opened for reading.
    pub(crate) fn map(file: &File) -> io::Result<FileBytes> {
        use std::io::Read;
        let mut bytes = Vec::new();
        let mut file = file;
        file.read_to_end(&mut bytes)?;
        Ok(FileBytes(bytes))
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that would not stay a name in its directory never reaches a
    /// Win32 call, whichever `*at` call is given it; names Windows holds,
    /// one component or several, do.
    #[test]
    fn names_that_leave_their_directory_are_refused_by_every_at_call() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        std::fs::create_dir(tmp.path().join("sub"))?;
        std::fs::write(tmp.path().join("sub").join("ok.txt"), "ok")?;
        std::fs::write(tmp.path().join("a"), "the file a:b would be a stream of")?;
        let dir = open(
            tmp.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .map_err(io::Error::from)?;
        for bad in [
            "a:b",
            r"..\x",
            r"C:\Windows",
            "/x",
            "CON",
            "sub/nul.txt",
            "trail.",
            "sub/a ",
        ] {
            let st = statat(&dir, bad, AtFlags::SYMLINK_NOFOLLOW);
            assert_eq!(st.err(), Some(Errno::BADNAME), "statat {bad:?}");
            let fd = openat(&dir, bad, OFlags::WRONLY | OFlags::CREATE, Mode(0o644));
            assert_eq!(fd.err(), Some(Errno::BADNAME), "openat {bad:?}");
            assert_eq!(
                unlinkat(&dir, bad, AtFlags::empty()).err(),
                Some(Errno::BADNAME),
                "unlinkat {bad:?}"
            );
        }
        assert_eq!(
            std::fs::read(tmp.path().join("a"))?,
            b"the file a:b would be a stream of"
        );
        for good in ["sub", "sub/ok.txt", "sub/../a", "."] {
            statat(&dir, good, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io::Error::other(format!("statat {good:?}: {e:?}")))?;
        }
        Ok(())
    }
}
