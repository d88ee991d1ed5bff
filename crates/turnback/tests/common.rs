//! Helpers shared by the integration tests: a temporary project with a
//! sibling folder "outside" it, snapshots of folders, and access to the log.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use tempfile::TempDir;
use turnback::log::{self, Record};
use turnback::{Error, Options, Store, TurnId};

/// What every test returns.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// A project folder `<tmp>/project` with a sibling `<tmp>/outside`, which
/// nothing the store does may ever change.
pub struct Project {
    dir: TempDir,
    pub root: PathBuf,
}

impl Project {
    pub fn new() -> TestResult<Project> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("project");
        std::fs::create_dir(&root)?;
        std::fs::create_dir(dir.path().join("outside"))?;
        Ok(Project { dir, root })
    }

    /// The folder beside the project.
    pub fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    /// The temporary folder holding both.
    pub fn parent(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file as the user or an agent would, without turnback.
    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> TestResult {
        write_under(&self.root, rel, bytes.as_ref())
    }

    pub fn read(&self, rel: &str) -> TestResult<Vec<u8>> {
        Ok(std::fs::read(self.path(rel))?)
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).symlink_metadata().is_ok()
    }

    pub fn mode(&self, rel: &str) -> TestResult<u32> {
        Ok(mode_of(&std::fs::symlink_metadata(self.path(rel))?))
    }

    pub fn chmod(&self, rel: &str, mode: u32) -> TestResult {
        set_mode(&self.path(rel), mode)?;
        Ok(())
    }

    pub fn open(&self) -> turnback::Result<Store> {
        Store::open(&self.root)
    }

    pub fn open_with(&self, options: Options) -> turnback::Result<Store> {
        Store::open_with(&self.root, options)
    }

    /// The store in a data directory of its own beside the project, so on
    /// its file system (where rewinds keep files aside and use the trash),
    /// and shared with no other test (whose mutations would empty its
    /// trash).
    pub fn open_own(&self) -> turnback::Result<Store> {
        self.open_with(Options {
            data_dir: Some(self.parent().join("data")),
            ..Options::default()
        })
    }

    /// The log's path (one that does not exist while there is no store).
    pub fn log_path(&self) -> PathBuf {
        store_dir_if_any(&self.root)
            .unwrap_or_else(|| self.root.join(".turnback"))
            .join(log::LOG_FILE)
    }

    /// The project's store directory (it must have a store).
    pub fn store_dir(&self) -> PathBuf {
        store_dir(&self.root)
    }

    /// Every record of the log; fails on any damaged or torn line.
    pub fn records(&self) -> TestResult<Vec<Record>> {
        parse_clean(&std::fs::read(self.log_path())?)
    }

    /// The capture records only (a new turn's first capture also appends a
    /// seal record for the turn before it).
    pub fn captures(&self) -> TestResult<Vec<Record>> {
        Ok(self
            .records()?
            .into_iter()
            .filter(|r| matches!(r.op, turnback::log::Op::Capture { .. }))
            .collect())
    }

    /// The folder's contents, without the store.
    pub fn snapshot(&self) -> TestResult<Tree> {
        snapshot(&self.root, &[".turnback"])
    }

    /// The folder's contents without the root's `.turnback/` (the marker,
    /// or the store kept in the project), with its link groups: what a
    /// rewind must give back exactly.
    pub fn state(&self) -> TestResult<State> {
        let skip = [".turnback"];
        Ok(State {
            tree: snapshot(&self.root, &skip)?,
            links: link_groups(&self.root, &skip)?,
        })
    }

    /// The folder's contents, store included.
    pub fn snapshot_all(&self) -> TestResult<Tree> {
        snapshot(&self.root, &[])
    }
}

/// The store directory of the project at `root`, which has a store.
pub fn store_dir(root: &Path) -> PathBuf {
    store_dir_if_any(root).expect("the project has a store")
}

/// The store directory of the project at `root`, if it has one yet.
pub fn store_dir_if_any(root: &Path) -> Option<PathBuf> {
    turnback::location::locate(root, None)
        .expect("locate the store")
        .map(|l| l.store_dir)
}

/// Writes `bytes` to `root/rel`, creating its directories.
pub fn write_under(root: &Path, rel: &str, bytes: &[u8]) -> TestResult {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes)?;
    Ok(())
}

/// Parses a whole log, insisting that every line is sound and none is torn.
pub fn parse_clean(bytes: &[u8]) -> TestResult<Vec<Record>> {
    let parsed = log::parse(bytes, 1);
    if let Some((line, len)) = parsed.torn {
        return Err(format!("line {line} is torn ({len} bytes)").into());
    }
    let mut out = Vec::new();
    for (line, rec) in parsed.lines {
        out.push(rec.map_err(|e| format!("line {line}: {e}"))?);
    }
    let seqs: Vec<u64> = out.iter().map(|r| r.seq).collect();
    let want: Vec<u64> = (1..=out.len() as u64).collect();
    if seqs != want {
        return Err(format!("sequence numbers are {seqs:?}, not 1..={}", out.len()).into());
    }
    Ok(out)
}

/// A log line with a valid checksum around any JSON object, as a hand edit
/// by someone who knows the format would produce.
pub fn forged_line(json: &str) -> TestResult<Vec<u8>> {
    let body = json.strip_suffix('}').ok_or("a record is a JSON object")?;
    let crc = crc32fast::hash(json.as_bytes());
    Ok(format!("{body},\"crc\":\"{crc:08x}\"}}\n").into_bytes())
}

pub fn turn(id: &str) -> TestResult<TurnId> {
    Ok(TurnId::new(id)?)
}

/// The error of a call that must fail.
pub fn expect_err<T: Debug>(r: Result<T, Error>, what: &str) -> TestResult<Error> {
    match r {
        Ok(v) => Err(format!("{what} succeeded with {v:?}; it must fail").into()),
        Err(e) => Ok(e),
    }
}

/// One entry of a folder, as compared between states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Symlink(PathBuf),
    Dir,
}

/// Relative path (`/`-separated) to entry.
pub type Tree = BTreeMap<String, Node>;

/// Reads a folder recursively without following symlinks, skipping the
/// top-level entries named in `skip`.
pub fn snapshot(root: &Path, skip: &[&str]) -> TestResult<Tree> {
    let mut out = Tree::new();
    walk(root, "", skip, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, prefix: &str, skip: &[&str], out: &mut Tree) -> TestResult {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry
            .file_name()
            .into_string()
            .map_err(|n| format!("non-UTF-8 name {n:?}"))?;
        if prefix.is_empty() && skip.contains(&name.as_str()) {
            continue;
        }
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            out.insert(rel, Node::Symlink(std::fs::read_link(&path)?));
        } else if ft.is_dir() {
            out.insert(rel.clone(), Node::Dir);
            walk(&path, &rel, skip, out)?;
        } else {
            out.insert(
                rel,
                Node::File {
                    bytes: std::fs::read(&path)?,
                    mode: mode_of(&meta),
                },
            );
        }
    }
    Ok(())
}

/// A folder's contents and which of its paths share an inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub tree: Tree,
    /// Sets of two or more paths that name one file.
    pub links: std::collections::BTreeSet<std::collections::BTreeSet<String>>,
}

/// Asserts that two states are equal, listing the differences if not.
pub fn assert_same_state(want: &State, got: &State, context: &str) {
    assert_same(&want.tree, &got.tree, context);
    assert_eq!(want.links, got.links, "{context}: link groups differ");
}

/// The sets of two or more regular files under `root` (top-level entries
/// named in `skip` left out) that are one inode.
pub fn link_groups(
    root: &Path,
    skip: &[&str],
) -> TestResult<std::collections::BTreeSet<std::collections::BTreeSet<String>>> {
    let mut by_inode: BTreeMap<(u64, u64), std::collections::BTreeSet<String>> = BTreeMap::new();
    for (rel, node) in snapshot(root, skip)? {
        if let Node::File { .. } = node {
            by_inode
                .entry(file_id(&root.join(&rel))?)
                .or_default()
                .insert(rel);
        }
    }
    Ok(by_inode.into_values().filter(|g| g.len() > 1).collect())
}

/// Describes how two trees differ, for assertion messages.
pub fn diff(want: &Tree, got: &Tree) -> String {
    let mut lines = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => lines.push(format!("missing {k}")),
            Some(g) if g != v => {
                lines.push(format!("differs {k}: want {}, got {}", show(v), show(g)))
            }
            Some(_) => {}
        }
    }
    for (k, v) in got {
        if !want.contains_key(k) {
            lines.push(format!("unexpected {k}: {}", show(v)));
        }
    }
    lines.join("\n")
}

fn show(n: &Node) -> String {
    match n {
        Node::File { bytes, mode } => format!(
            "file {:o} {:?}",
            mode,
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        ),
        Node::Symlink(t) => format!("symlink -> {}", t.display()),
        Node::Dir => "dir".into(),
    }
}

/// Asserts that `got` equals `want`, listing the differences if not.
pub fn assert_same(want: &Tree, got: &Tree, context: &str) {
    assert!(want == got, "{context}:\n{}", diff(want, got));
}

// ------------------------------------------------------------ per platform

/// The permission bits of `m` (on Windows: 0o444 read-only, else 0o644;
/// 0o755 for a directory, as turnback shows them there).
#[cfg(unix)]
pub fn mode_of(m: &std::fs::Metadata) -> u32 {
    std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
}

/// The permission bits of `m` as turnback shows them on Windows.
#[cfg(windows)]
pub fn mode_of(m: &std::fs::Metadata) -> u32 {
    match (m.is_dir(), m.permissions().readonly()) {
        (true, _) => 0o755,
        (false, true) => 0o444,
        (false, false) => 0o644,
    }
}

/// Sets the permission bits of `path`.
#[cfg(unix)]
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
}

/// Sets or clears the read-only attribute of `path` from the owner's write
/// bit (Windows has no other permission bits).
#[cfg(windows)]
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    let mut p = std::fs::metadata(path)?.permissions();
    p.set_readonly(mode & 0o200 == 0);
    std::fs::set_permissions(path, p)
}

/// The device and inode of `path` (not following a symlink).
#[cfg(unix)]
pub fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// The volume serial number and file index of `path`.
#[cfg(windows)]
#[allow(unsafe_code)] // the platform call of a test
pub fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::windows::fs::OpenOptionsExt;
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
        GetFileInformationByHandle,
    };
    let f = std::fs::OpenOptions::new()
        .access_mode(0x80)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    // SAFETY: all-zero is a valid value of this plain C record.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: an open handle and a record of the size the call fills.
    if unsafe { GetFileInformationByHandle(f.as_raw_handle() as _, &mut info) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((
        u64::from(info.dwVolumeSerialNumber),
        (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
    ))
}

/// Copies the folder `from` to the new folder `to` as `cp -a` would: files
/// with their modes, directories, symlinks as symlinks.
pub fn copy_dir(from: &Path, to: &Path) -> TestResult {
    std::fs::create_dir(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let meta = std::fs::symlink_metadata(&src)?;
        if meta.file_type().is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
            #[cfg(not(unix))]
            return Err(format!("{}: a symlink, not copied here", src.display()).into());
        } else if meta.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Fails unless the last turn of `store` recorded each of its files with
/// one name (no hard-link group): what a capture must see once a second
/// name turnback gave a project file is gone.
pub fn assert_last_turn_unlinked(store: &Store) -> TestResult {
    let turns = store.turns()?;
    let last = turns.last().ok_or("no turn")?;
    assert!(
        last.files
            .iter()
            .all(|f| matches!(f.entry.pre, turnback::Pre::File { link: None, .. })),
        "{:?}",
        last.files
    );
    Ok(())
}
