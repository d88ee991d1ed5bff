//! File-system operations confined beneath a directory handle.
//!
//! Every write into the project goes through a directory file descriptor that
//! was reached from the root one component at a time with
//! `openat(O_DIRECTORY | O_NOFOLLOW)`, so no symlink is ever followed and no
//! `..` is ever taken: a directory swapped for a symlink between a check and a
//! write makes the write fail instead of sending it outside the root. Files
//! are replaced by creating a temporary file in the same directory
//! (`O_CREAT | O_EXCL`) and renaming it over the target, never by truncating
//! an existing entry, which may be a hard link to a file elsewhere.

use crate::sys::OwnedFd;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::Errno;
use crate::sys::fs::{AtFlags, FileType, Mode, OFlags};

use crate::sys;

/// A name inside a directory: `&str`, `&OsStr` (any bytes) or `&Path`.
pub(crate) trait Name: crate::sys::fs::Arg + Copy {}

impl<T: crate::sys::fs::Arg + Copy> Name for T {}

/// What a directory entry is, looked at without following symlinks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// Nothing is there.
    Missing,
    /// A regular file with its size and permission bits.
    File { size: u64, mode: u32 },
    /// A symlink.
    Symlink,
    /// A directory.
    Dir,
    /// A FIFO, socket or device.
    Other,
}

/// Opens a directory by absolute path (used once, for the root).
pub(crate) fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    Ok(crate::sys::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens the subdirectory `name` of `dir` without following a symlink.
/// `Ok(None)` when it does not exist; `ENOTDIR`/`ELOOP` when it is not a
/// real directory.
pub(crate) fn open_subdir(dir: &OwnedFd, name: impl Name) -> io::Result<Option<OwnedFd>> {
    match crate::sys::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::LOOP) => Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "it is a symlink, which turnback does not follow",
        )),
        Err(e) => Err(e.into()),
    }
}

/// Creates (if missing) and opens the subdirectory `name` of `dir`.
/// Returns whether it was created.
pub(crate) fn ensure_subdir(dir: &OwnedFd, name: impl Name) -> io::Result<(OwnedFd, bool)> {
    if let Some(fd) = open_subdir(dir, name)? {
        return Ok((fd, false));
    }
    let created = match crate::sys::fs::mkdirat(dir, name, Mode::from_raw_mode(0o777)) {
        Ok(()) => true,
        Err(Errno::EXIST) => false,
        Err(e) => return Err(e.into()),
    };
    let fd = open_subdir(dir, name)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "directory vanished"))?;
    Ok((fd, created))
}

/// Looks at `name` in `dir` without following a symlink.
pub(crate) fn node_at(dir: &OwnedFd, name: impl Name) -> io::Result<Node> {
    Ok(lstat_at(dir, name)?.as_ref().map_or(Node::Missing, node_of))
}

/// The `lstat` of `name` in `dir`; `None` when nothing is there.
pub(crate) fn lstat_at(dir: &OwnedFd, name: impl Name) -> io::Result<Option<crate::sys::fs::Stat>> {
    match crate::sys::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn node_of(st: &crate::sys::fs::Stat) -> Node {
    let mode = sys::mode(st);
    match sys::file_type(mode) {
        FileType::RegularFile => Node::File {
            size: st.st_size as u64,
            mode: mode & 0o7777,
        },
        FileType::Symlink => Node::Symlink,
        FileType::Directory => Node::Dir,
        _ => Node::Other,
    }
}

/// Opens the regular file `name` in `dir` for reading, never through a
/// symlink. Returns the file with its size and mode as seen by `fstat`.
pub(crate) fn open_file(dir: &OwnedFd, name: impl Name) -> io::Result<(File, Node)> {
    let (file, st) = open_file_stat(dir, name)?;
    Ok((file, node_of(&st)))
}

/// [`open_file`], with the whole `fstat`.
pub(crate) fn open_file_stat(
    dir: &OwnedFd,
    name: impl Name,
) -> io::Result<(File, crate::sys::fs::Stat)> {
    let fd = crate::sys::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let st = crate::sys::fs::fstat(&fd)?;
    Ok((File::from(fd), st))
}

/// Opens the store file `name` in `dir` with `flags` (plus `O_CREAT` with
/// permission bits `create` when given), only if it is a regular file:
/// never through a symlink, and without blocking on a FIFO (`O_NONBLOCK`,
/// which changes nothing for the regular file `fstat` then confirms). A FIFO, socket, device, directory or symlink standing in the
/// place of a store file is an error saying what to do, never a hang.
/// `Ok(None)` when it does not exist (and `create` is `None`).
pub(crate) fn open_store_file(
    dir: &OwnedFd,
    name: &str,
    flags: OFlags,
    create: Option<u32>,
) -> io::Result<Option<File>> {
    let mut all = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    if create.is_some() {
        all |= OFlags::CREATE;
    }
    let mode = sys::perm(create.unwrap_or(0));
    let not_regular = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{what}, not a regular file, so turnback does not open it; put back the regular file it should be, or remove it (turnback recreates the lock, config.toml, the tree state and the caches, but a store without log.jsonl forgets every turn)"
            ),
        )
    };
    let fd = match crate::sys::fs::openat(dir, name, all, mode) {
        Ok(fd) => fd,
        Err(Errno::NOENT) if create.is_none() => return Ok(None),
        Err(Errno::LOOP) => return Err(not_regular("it is a symlink")),
        // A FIFO with no reader, opened for writing without blocking.
        Err(Errno::NXIO) => return Err(not_regular("it is a FIFO or socket")),
        Err(Errno::ISDIR) => return Err(not_regular("it is a directory")),
        Err(e) => return Err(e.into()),
    };
    let st = crate::sys::fs::fstat(&fd)?;
    match sys::file_type(sys::mode(&st)) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(not_regular("it is a directory")),
        _ => return Err(not_regular("it is a FIFO, socket or device")),
    }
    Ok(Some(File::from(fd)))
}

/// Reads the whole store file `name` in `dir` (see [`open_store_file`]);
/// `Ok(None)` when it does not exist.
pub(crate) fn read_store_file(dir: &OwnedFd, name: &str) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let Some(mut f) = open_store_file(dir, name, OFlags::RDONLY, None)? else {
        return Ok(None);
    };
    // A buffer of the file's size, backed by huge pages where the system
    // has them (see `crate::sys::huge_pages`; a small file is read as
    // before).
    let len = f.metadata()?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
    crate::sys::huge_pages(&mut bytes);
    f.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// [`read_store_file`] for a large file turnback never writes in place
/// (the tree state): its bytes mapped, not copied (see
/// [`crate::sys::FileBytes`]).
pub(crate) fn map_store_file(dir: &OwnedFd, name: &str) -> io::Result<Option<sys::FileBytes>> {
    let Some(f) = open_store_file(dir, name, OFlags::RDONLY, None)? else {
        return Ok(None);
    };
    sys::FileBytes::map(&f).map(Some)
}

/// Reads the target of the symlink `name` in `dir`.
pub(crate) fn read_link(dir: &OwnedFd, name: impl Name) -> io::Result<OsString> {
    let target = crate::sys::fs::readlinkat(dir, name, Vec::new())?;
    Ok(crate::sys::os_str(target.as_bytes()).to_owned())
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// This process's id, asked of the kernel once.
pub(crate) fn own_pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Marker in the names of temporary files turnback creates.
pub(crate) const TEMP_MARK: &str = ".turnback-tmp-";

/// A fresh temporary name for a file beside `name`.
pub(crate) fn temp_name(name: impl Name) -> String {
    Temp::fresh().beside(name)
}

/// A temporary file's name kept as its number: the name,
/// `.{name}.turnback-tmp-{pid}-{n}` (the file's name cut to 40
/// characters), is spelled again where it is used, so a rewind staging
/// 100,000 files holds no 100,000 names (4.6 MB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Temp(u64);

impl Temp {
    fn fresh() -> Temp {
        Temp(TEMP_COUNTER.fetch_add(1, Ordering::Relaxed))
    }

    /// The name of this temporary file beside `name`.
    pub(crate) fn beside(self, name: impl Name) -> String {
        let short: String = name.to_string_lossy().chars().take(40).collect();
        format!(".{short}{TEMP_MARK}{}-{}", own_pid(), self.0)
    }
}

/// Creates a new temporary file beside `name` in `dir` (`O_EXCL`), with
/// permission bits `mode` set exactly (not reduced by the umask).
pub(crate) fn create_temp(dir: &OwnedFd, name: impl Name, mode: u32) -> io::Result<(File, String)> {
    create_temp_beside(dir, name, mode).map(|(f, t)| (f, t.beside(name)))
}

/// [`create_temp`], the name kept as its number.
pub(crate) fn create_temp_beside(
    dir: &OwnedFd,
    name: impl Name,
    mode: u32,
) -> io::Result<(File, Temp)> {
    create_temp_with(dir, name, mode, |_| ())
}

/// [`create_temp_beside`] for a file about to be renamed over `name`:
/// when `name` is a regular file now, the new one takes its extended
/// attributes (see `sys::copy_xattrs`), before its mode is set (a
/// read-only mode would refuse them). Also returns what could not be
/// kept, one line per attribute, for the caller's report.
pub(crate) fn create_temp_replacing(
    dir: &OwnedFd,
    name: impl Name,
    mode: u32,
) -> io::Result<(File, Temp, Vec<String>)> {
    let mut lost = Vec::new();
    let (file, temp) = create_temp_with(dir, name, mode, |new| {
        lost = copy_xattrs_from(dir, name, new);
    })?;
    Ok((file, temp, lost))
}

fn create_temp_with(
    dir: &OwnedFd,
    name: impl Name,
    mode: u32,
    prepare: impl FnOnce(&OwnedFd),
) -> io::Result<(File, Temp)> {
    loop {
        let temp = Temp::fresh();
        let tmp = temp.beside(name);
        match crate::sys::fs::openat(
            dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => {
                prepare(&fd);
                crate::sys::fs::fchmod(&fd, sys::perm(mode))?;
                return Ok((File::from(fd), temp));
            }
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Copies the extended attributes of `name` in `dir`, if it is a regular
/// file, onto `to`; returns what could not be copied, as
/// "extended attribute NAME not kept: WHY".
fn copy_xattrs_from(dir: &OwnedFd, name: impl Name, to: &OwnedFd) -> Vec<String> {
    if cfg!(windows) {
        return Vec::new();
    }
    // Most files have none: told without opening them where the platform
    // can.
    #[cfg(unix)]
    if let Ok(cname) = name.into_c_str()
        && crate::sys::has_xattrs(dir, &cname) == Some(false)
    {
        return Vec::new();
    }
    let old = match crate::sys::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        // Nothing there, or not a file: nothing to keep.
        Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::ISDIR) => return Vec::new(),
        Err(e) => {
            return vec![format!(
                "its extended attributes were not kept (it cannot be opened to read them: {})",
                io::Error::from(e)
            )];
        }
    };
    match crate::sys::fs::fstat(&old) {
        Ok(st) if matches!(node_of(&st), Node::File { .. }) => {}
        _ => return Vec::new(),
    }
    use crate::sys::AsFd;
    crate::sys::copy_xattrs(old.as_fd(), to.as_fd())
        .into_iter()
        .map(|(attr, e)| format!("extended attribute {attr} not kept: {}", io::Error::from(e)))
        .collect()
}

/// Replaces (or creates) `name` in `dir` with `bytes`, mode 0644, durably
/// but for the directory: a temporary file is written, `fdatasync`ed and
/// renamed over `name`; the caller fsyncs `dir`. On error the temporary
/// file is removed and `name` is untouched.
pub(crate) fn replace_file(dir: &OwnedFd, name: impl Name, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let (mut f, tmp) = create_temp(dir, name, 0o644)?;
    let res = f
        .write_all(bytes)
        .and_then(|()| fdatasync(&f))
        .and_then(|()| rename(dir, &tmp, name));
    if res.is_err() {
        let _ = unlink(dir, &tmp);
    }
    res
}

/// Removes the temporary files an interrupted turnback process left in
/// `dir` (names made by [`temp_name`] whose process is gone), so a crash
/// during a write or a rewind leaves no stray file in the project once the
/// next operation touches that directory. Files of live processes (another
/// store's operation in a shared directory) and directories are left alone.
/// Best effort: a directory that cannot be listed is skipped.
pub(crate) fn sweep_stale_temps(dir: &OwnedFd) {
    let Ok(mut entries) = crate::sys::fs::Dir::read_from(dir) else {
        return;
    };
    let own = own_pid();
    while let Some(Ok(entry)) = entries.read() {
        if let Ok(name) = entry.file_name().to_str() {
            sweep_if_stale(dir, name, own);
        }
    }
}

/// [`sweep_stale_temps`] of a directory handle never listed before: its
/// listing is read from the handle itself, with no second open of the
/// directory where the platform allows (a listing moves the handle's
/// position, so this is for a handle's one listing).
pub(crate) fn sweep_stale_temps_unlisted(dir: &OwnedFd) {
    let (names, _) = crate::sys::list_names(dir);
    let own = own_pid();
    for name in names.names() {
        if let Ok(name) = name.to_str() {
            sweep_if_stale(dir, name, own);
        }
    }
}

/// Removes `name` from `dir` if it is a file or symlink named by
/// [`temp_name`] for a process that is gone (`own` is this one).
fn sweep_if_stale(dir: &OwnedFd, name: &str, own: u32) {
    let Some(pid) = temp_owner(name) else {
        return;
    };
    if pid == own || process_alive(pid) {
        return;
    }
    if matches!(node_at(dir, name), Ok(Node::File { .. } | Node::Symlink)) {
        let _ = unlink(dir, name);
    }
}

/// The process id in a name made by [`temp_name`].
pub(crate) fn temp_owner(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let (_, tail) = name.rsplit_once(TEMP_MARK)?;
    let (pid, n) = tail.split_once('-')?;
    if pid.is_empty() || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether the process `pid` is running.
pub(crate) fn process_alive(pid: u32) -> bool {
    sys::process_alive(pid)
}

/// Renames `from` to `to`, both in `dir`.
pub(crate) fn rename(dir: &OwnedFd, from: impl Name, to: impl Name) -> io::Result<()> {
    Ok(crate::sys::fs::renameat(dir, from, dir, to)?)
}

/// Removes the file or symlink `name` in `dir`.
pub(crate) fn unlink(dir: &OwnedFd, name: impl Name) -> io::Result<()> {
    Ok(crate::sys::fs::unlinkat(dir, name, AtFlags::empty())?)
}

/// Removes the empty directory `name` in `dir`.
pub(crate) fn rmdir(dir: &OwnedFd, name: impl Name) -> io::Result<()> {
    Ok(crate::sys::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// Removes the empty directory `name` in `dir`; with `flush`, it is
/// `fsync`ed first, so the removals of its entries are durable before it
/// goes (for an operation that flushes only what it changed).
pub(crate) fn rmdir_flushed(dir: &OwnedFd, name: impl Name, flush: bool) -> io::Result<()> {
    if flush && let Some(d) = open_subdir(dir, name)? {
        fsync_queued(&d)?;
    }
    rmdir(dir, name)
}

/// Creates a symlink `name` in `dir` pointing to `target`.
pub(crate) fn symlink(dir: &OwnedFd, target: &str, name: impl Name) -> io::Result<()> {
    Ok(crate::sys::fs::symlinkat(target, dir, name)?)
}

/// Creates a FIFO `name` in `dir` with mode bits `mode` set exactly (not
/// reduced by the umask).
pub(crate) fn mkfifo(dir: &OwnedFd, name: &str, mode: u32) -> io::Result<()> {
    sys::mkfifo_exact(dir, name)?;
    set_mode(dir, name, mode)
}

/// Creates the directory `name` in `dir` with mode bits `mode | 0o700`: its
/// owner can fill it; [`set_mode`] gives it its exact mode afterwards.
pub(crate) fn mkdir_owner_writable(dir: &OwnedFd, name: impl Name, mode: u32) -> io::Result<()> {
    Ok(crate::sys::fs::mkdirat(dir, name, sys::perm(mode | 0o700))?)
}

/// Sets the mode bits of `name` in `dir` (never through a symlink: the
/// caller checked what `name` is).
pub(crate) fn set_mode(dir: &OwnedFd, name: impl Name, mode: u32) -> io::Result<()> {
    Ok(crate::sys::fs::chmodat(
        dir,
        name,
        sys::perm(mode),
        AtFlags::empty(),
    )?)
}

/// The full mode (`st_mode`) and owner of `name` in `dir`, not following a
/// symlink.
pub(crate) fn mode_owner_at(dir: &OwnedFd, name: impl Name) -> io::Result<(u32, u32)> {
    let st = crate::sys::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok((sys::mode(&st), st.st_uid))
}

/// Whether this process may add and remove entries in the directory `dir`.
pub(crate) fn dir_writable(dir: &OwnedFd) -> io::Result<bool> {
    use crate::sys::fs::Access;
    match crate::sys::fs::accessat(
        dir,
        ".",
        Access::WRITE_OK | Access::EXEC_OK,
        AtFlags::EACCESS,
    ) {
        Ok(()) => Ok(true),
        Err(Errno::ACCESS) => Ok(false),
        // A read-only file system: no mode change helps; the write itself
        // reports it.
        Err(Errno::ROFS) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// The mode bits and owner of the open directory `dir`.
pub(crate) fn dir_mode_owner(dir: &OwnedFd) -> io::Result<(u32, u32)> {
    let st = crate::sys::fs::fstat(dir)?;
    Ok((sys::mode(&st) & 0o7777, st.st_uid))
}

/// Sets the mode bits of the open directory `dir`.
pub(crate) fn set_dir_mode(dir: &OwnedFd, mode: u32) -> io::Result<()> {
    Ok(crate::sys::fs::fchmod(dir, sys::perm(mode))?)
}

/// The effective user id of this process.
pub(crate) fn euid() -> u32 {
    sys::euid()
}

/// Makes a file or directory durable (see [`sys`] for what each platform
/// calls). An error here is fatal to the operation: after a failed fsync,
/// Linux may report later ones as successful with the data gone, so it is
/// never retried.
pub(crate) fn fsync(fd: &impl crate::sys::AsFd) -> io::Result<()> {
    sys::fsync_durable(fd)
}

/// Makes the data (and the size) of a file durable.
pub(crate) fn fdatasync(fd: &impl crate::sys::AsFd) -> io::Result<()> {
    sys::fdatasync(fd)
}

/// Hands a file or directory of a batch to the device; the batch is
/// durable after [`commit_queued`].
pub(crate) fn fsync_queued(fd: &impl crate::sys::AsFd) -> io::Result<()> {
    sys::fsync_queued(fd)
}

/// Makes every [`fsync_queued`] before it on the volume of `fd` durable.
pub(crate) fn commit_queued(fd: &impl crate::sys::AsFd) -> io::Result<()> {
    sys::commit_queued(fd)
}

/// Flushes the whole file system holding `fd`: one call that makes a batch of
/// writes durable instead of one fsync per file (only where
/// [`sys::WHOLE_FS_FLUSH`]).
pub(crate) fn syncfs(fd: &impl crate::sys::AsFd) -> io::Result<()> {
    sys::flush_device(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_owner_reads_only_names_made_by_temp_name() {
        let own = temp_name("a.txt");
        assert_eq!(temp_owner(&own), Some(std::process::id()));
        assert_eq!(temp_owner(".a.txt.turnback-tmp-123-4"), Some(123));
        for other in [
            "a.txt",
            "a.txt.turnback-tmp-123-4",
            ".a.txt.turnback-tmp-",
            ".a.txt.turnback-tmp-123",
            ".a.txt.turnback-tmp-123-",
            ".a.txt.turnback-tmp-x-4",
            ".a.txt.turnback-tmp-123-4x",
        ] {
            assert_eq!(temp_owner(other), None, "{other}");
        }
    }

    #[test]
    #[cfg(unix)] // spawns `true`; pid 1 is always alive
    fn sweep_removes_temps_of_dead_processes_only() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        // A process that has exited: its pid is free (reuse is possible but
        // would only keep the file).
        let mut child = std::process::Command::new("true").spawn()?;
        let dead = child.id();
        child.wait()?;
        let stale = format!(".a.txt{TEMP_MARK}{dead}-0");
        let live = format!(".b.txt{TEMP_MARK}1-0"); // pid 1 is always alive
        let own = temp_name("c.txt");
        let stale_dir = format!(".d{TEMP_MARK}{dead}-1");
        for f in [&stale, &live, &own, &"user.txt".to_string()] {
            std::fs::write(dir.path().join(f), b"x")?;
        }
        std::fs::create_dir(dir.path().join(&stale_dir))?;
        let fd = open_dir_path(dir.path())?;
        sweep_stale_temps(&fd);
        let left: std::collections::BTreeSet<String> = std::fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<io::Result<_>>()?;
        let want: std::collections::BTreeSet<String> =
            [live, own, stale_dir, "user.txt".to_string()].into();
        assert_eq!(left, want);
        Ok(())
    }
}
