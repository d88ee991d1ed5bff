//! What the tests do differently per platform: file modes, symlinks and
//! file identity. On Unix a mode is `st_mode`'s permission bits; on Windows
//! it is what turnback records there: 0o755 for a directory, 0o444 for a
//! read-only file, else 0o644 (the read-only attribute is the only bit).
#![allow(dead_code)]

use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};

/// `path` made absolute and free of links, as turnback prints it: on
/// Windows without the `\\?\` prefix `std::fs::canonicalize` adds to a
/// drive path.
pub fn canonical(path: &Path) -> io::Result<PathBuf> {
    let p = std::fs::canonicalize(path)?;
    #[cfg(windows)]
    if let Some(s) = p.to_str().and_then(|s| s.strip_prefix(r"\\?\"))
        && s.as_bytes().get(1) == Some(&b':')
    {
        return Ok(PathBuf::from(s));
    }
    Ok(p)
}

/// The permission bits of `meta`, as turnback records them.
#[cfg(unix)]
pub fn mode_of(meta: &Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

/// The permission bits of `meta`, as turnback records them.
#[cfg(windows)]
pub fn mode_of(meta: &Metadata) -> u32 {
    match (meta.is_dir(), meta.permissions().readonly()) {
        (true, _) => 0o755,
        (false, true) => 0o444,
        (false, false) => 0o644,
    }
}

/// Sets the mode of `path` (on Windows: the read-only attribute, from the
/// owner's write bit).
#[cfg(unix)]
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Sets the mode of `path` (on Windows: the read-only attribute, from the
/// owner's write bit).
#[cfg(windows)]
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    let mut p = std::fs::metadata(path)?.permissions();
    p.set_readonly(mode & 0o200 == 0);
    std::fs::set_permissions(path, p)
}

/// The mode a file set to `mode` (with [`set_mode`]) reads back as.
pub fn file_mode(mode: u32) -> u32 {
    if cfg!(unix) {
        mode
    } else if mode & 0o200 == 0 {
        0o444
    } else {
        0o644
    }
}

/// Creates the symlink `link` pointing to `target` (Unix only: on Windows
/// a symlink needs a privilege that tests cannot count on).
#[cfg(unix)]
pub fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// The file `meta` (of `path`) is, as (device, inode): two names with the
/// same identity are hard links to one file.
#[cfg(unix)]
pub fn file_id(_path: &Path, meta: &Metadata) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Ok((meta.dev(), meta.ino()))
}

/// The file `path` is, as (volume serial number, file index): two names
/// with the same identity are hard links to one file. (windows-sys is the
/// command's dependency; its file-system functions are those the library
/// enables.)
#[cfg(windows)]
#[allow(unsafe_code)] // the platform call of a test
pub fn file_id(path: &Path, _meta: &Metadata) -> io::Result<(u64, u64)> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
    };
    let f = std::fs::File::open(path)?;
    // SAFETY: all-zero is a valid value of this plain C record.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call and `info` is writable.
    if unsafe { GetFileInformationByHandle(f.as_raw_handle(), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok((u64::from(info.dwVolumeSerialNumber), index))
}
