//! The trash: `<data directory>/trash/`, extra names of files a rewind replaced, so
//! that the replacing rename frees no inode while the user waits.
//!
//! A rename over a file frees the inode it replaces; where the file system
//! pays for frees synchronously (ext4 mounted with `discard`, see
//! [`crate::sys::DEFER_FREES`]) that is most of a full-tree rewind's
//! renames. Just before a restored file is renamed over its path, the file
//! there is hard-linked into the trash (unless the operation kept it aside
//! in the store, which gave it a second name already: see `aside.rs`); the
//! rename then only drops one of its two names. The names are removed later, off the operation's latency
//! path: by a process the command line starts in the background once the
//! operation is done, else by the next mutation, before anything else (see
//! [`crate::store::Store::begin_mutation`]), or by `gc`.
//!
//! Layout: `trash/<pid>-<k>/<n>`. Each thread of an operation links into a
//! bucket of its own, a directory `<pid>-<k>` (`k` counts the buckets this
//! process made), until it holds [`BUCKET_ENTRIES`] names (`0`, `1`, ...),
//! then into a new one. One directory for every name cost the links of a
//! 100,000-file rewind about a third of its system time: each link
//! searched and grew a directory of up to 100,000 entries while the other
//! thread waited for that directory's lock. (Plain files directly in
//! `trash/` are names an earlier version left; they are removed the same
//! way.)
//!
//! Invariants:
//! - An entry is only ever a second name of a file whose bytes are already
//!   durable elsewhere (the operation's `saved` record precedes every
//!   link), so removing any entry at any time loses nothing.
//! - It lives in the data directory, outside every project (a snapshot of
//!   a project never sees it), shared by the projects on that device;
//!   buckets are unique per process. It is used only by a store kept in
//!   the data directory (the default): a store kept in its project
//!   (`turnback store --in-project`) was chosen so that nothing of the
//!   project lives elsewhere, and its rewinds free as they go. A link is
//!   made only where it can stay on one file system (the data directory
//!   and the project root on one device); any link that fails is
//!   passed over, and that file is freed by its rename as before.
//! - A rename that fails removes the link it was given; a crash between a
//!   link and its rename leaves a project file with a second name in the
//!   trash, which the next mutation removes before it reads the project
//!   (so no capture records that name as a hard link).
//! - Entries are only removed, never read or renamed: two processes
//!   emptying the trash at once only race to remove the same names. A
//!   bucket emptied and removed while an operation still links into it
//!   (the background removal of an earlier rewind's names, say) makes that
//!   link fail; the operation then starts a new bucket, once per link.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use crate::fsx;
use crate::sys::OwnedFd;
use crate::sys::fs::{AtFlags, Mode};

/// The trash's directory name inside the data directory.
pub const TRASH_DIR: &str = "trash";

/// Names a bucket holds before its thread starts a new one.
pub(crate) const BUCKET_ENTRIES: u32 = 1024;

/// Buckets made by this process, so two operations of one process never
/// share one.
static NEXT_BUCKET: AtomicU64 = AtomicU64::new(0);

/// The bucket a thread links into, and how many names it was given.
struct Bucket {
    dir: Arc<OwnedFd>,
    used: u32,
}

/// The trash of one operation.
pub(crate) struct Trash {
    dir: OwnedFd,
    buckets: Mutex<HashMap<ThreadId, Bucket>>,
}

/// A second name given by [`Trash::keep`].
pub(crate) struct Kept {
    dir: Arc<OwnedFd>,
    name: String,
}

impl Trash {
    /// The trash in the data directory `data` for restoring into `root`,
    /// when this platform defers frees, the data directory exists and both
    /// are on one device; made if missing. `None` when it cannot be used
    /// (the renames then free as they go).
    pub(crate) fn open(data: &Path, root: &OwnedFd) -> Option<Trash> {
        if !crate::sys::DEFER_FREES {
            return None;
        }
        let data_fd = fsx::open_dir_path(data).ok()?;
        let dev = |fd: &OwnedFd| {
            crate::sys::fs::fstat(fd)
                .ok()
                .map(|st| crate::sys::dev(&st))
        };
        if dev(&data_fd)? != dev(root)? {
            return None;
        }
        match crate::sys::fs::mkdirat(&data_fd, TRASH_DIR, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(crate::sys::Errno::EXIST) => {}
            Err(_) => return None,
        }
        let dir = fsx::open_subdir(&data_fd, TRASH_DIR).ok().flatten()?;
        Some(Trash {
            dir,
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// Gives the file `name` in `dir` a second name in the trash; returns
    /// that name, or `None` when it could not be made (nothing there, a
    /// directory, another device, no permission).
    pub(crate) fn keep(&self, dir: &OwnedFd, name: impl fsx::Name) -> Option<Kept> {
        let link = |kept: &Kept| {
            crate::sys::fs::linkat(dir, name, &*kept.dir, kept.name.as_str(), AtFlags::empty())
        };
        let mut kept = self.next_name(false)?;
        let mut res = link(&kept);
        if res == Err(crate::sys::Errno::NOENT) && removed(&kept.dir) {
            // Its bucket was emptied and removed under it (see the module
            // doc): one more try, in a new bucket.
            kept = self.next_name(true)?;
            res = link(&kept);
        }
        res.ok().map(|()| kept)
    }

    /// The next name in the calling thread's bucket; a new bucket when it
    /// has none, its bucket is full or `fresh`.
    fn next_name(&self, fresh: bool) -> Option<Kept> {
        let mut buckets = self.buckets.lock().ok()?;
        let me = std::thread::current().id();
        if fresh || buckets.get(&me).is_none_or(|b| b.used >= BUCKET_ENTRIES) {
            let dir = self.new_bucket()?;
            buckets.insert(me, Bucket { dir, used: 0 });
        }
        let b = buckets.get_mut(&me)?;
        b.used += 1;
        Some(Kept {
            dir: Arc::clone(&b.dir),
            name: (b.used - 1).to_string(),
        })
    }

    /// A fresh bucket `<pid>-<k>` (a name left by a crashed process of the
    /// same id is passed over); `None` when none can be made (the trash was
    /// removed under this operation, say).
    fn new_bucket(&self) -> Option<Arc<OwnedFd>> {
        for _ in 0..16 {
            let k = NEXT_BUCKET.fetch_add(1, Ordering::Relaxed);
            let name = format!("{}-{k}", fsx::own_pid());
            match crate::sys::fs::mkdirat(&self.dir, name.as_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) => {
                    let fd = fsx::open_subdir(&self.dir, name.as_str()).ok().flatten()?;
                    return Some(Arc::new(fd));
                }
                Err(crate::sys::Errno::EXIST) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// Removes the name `kept` (its file's rename failed).
    pub(crate) fn forget(&self, kept: &Kept) {
        let _ = fsx::unlink(&kept.dir, kept.name.as_str());
    }
}

/// Whether the directory `dir` was removed (it has no name left).
fn removed(dir: &OwnedFd) -> bool {
    crate::sys::fs::fstat(dir).is_ok_and(|st| crate::sys::nlink(&st) == 0)
}

/// The trash of the data directory `data`.
pub(crate) fn path(data: &Path) -> PathBuf {
    data.join(TRASH_DIR)
}

/// Whether the data directory `data` has a trash.
pub(crate) fn pending(data: &Path) -> bool {
    std::fs::symlink_metadata(path(data)).is_ok_and(|m| m.is_dir())
}

/// Removes every name in the trash of the data directory `data` and the
/// buckets emptied, then the trash itself when it is empty. Best effort: a
/// name that cannot be removed stays for the next try, and nothing depends
/// on it. Returns the names removed.
pub(crate) fn empty(data: &Path) -> usize {
    let Ok(dir) = fsx::open_dir_path(&path(data)) else {
        return 0;
    };
    let (names, _) = crate::sys::list_names(&dir);
    let mut removed = 0;
    for name in names.names() {
        if fsx::unlink(&dir, name).is_ok() {
            removed += 1;
            continue;
        }
        // Not a file: a bucket (`.` and `..` are not named like one).
        if !name.to_str().is_ok_and(is_bucket) {
            continue;
        }
        let Ok(Some(bucket)) = fsx::open_subdir(&dir, name) else {
            continue;
        };
        let (entries, _) = crate::sys::list_names(&bucket);
        for entry in entries.names() {
            if fsx::unlink(&bucket, entry).is_ok() {
                removed += 1;
            }
        }
        drop(bucket);
        let _ = fsx::rmdir(&dir, name);
    }
    drop(dir);
    let _ = std::fs::remove_dir(path(data));
    removed
}

/// Whether `name` is named like a bucket: `<pid>-<k>`, both decimal.
fn is_bucket(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.split_once('-')
        .is_some_and(|(pid, k)| digits(pid) && digits(k))
}

impl crate::store::Store {
    /// The trash's directory (see the module doc), when there is a data
    /// directory.
    pub fn trash_dir(&self) -> Option<PathBuf> {
        self.data_dir().map(path)
    }

    /// The data directory whose trash this store's rewinds use: the one
    /// that holds the store (see the module doc).
    pub(crate) fn trash_data_dir(&self) -> Option<&Path> {
        self.data_dir()
            .filter(|data| self.place.store_path.starts_with(data))
    }

    /// Whether a rewind, revert, undo or redo left names in the trash to
    /// remove (see the module doc): a caller that can run work after
    /// answering calls [`Store::maintain`] (or [`Store::empty_trash`])
    /// then, as the command line does in a background `turnback maintain`;
    /// otherwise the next mutation does, before anything else.
    ///
    /// [`Store::maintain`]: crate::Store::maintain
    /// [`Store::empty_trash`]: crate::Store::empty_trash
    pub fn trash_pending(&self) -> bool {
        crate::sys::DEFER_FREES && self.data_dir().is_some_and(pending)
    }

    /// Removes the names in the trash; needs no lock (entries are only
    /// removed, and removing any loses nothing). Returns how many.
    pub fn empty_trash(&self) -> usize {
        self.data_dir().map_or(0, empty)
    }
}

// Buckets are hard links and process ids: the Linux trash (the only
// platform that defers frees).
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    /// A data directory and a project root on one device, with `files`
    /// files in the root.
    fn setup(files: usize) -> std::io::Result<(tempfile::TempDir, OwnedFd)> {
        let tmp = tempfile::tempdir()?;
        std::fs::create_dir(tmp.path().join("data"))?;
        std::fs::create_dir(tmp.path().join("root"))?;
        for i in 0..files {
            std::fs::write(tmp.path().join(format!("root/f{i}")), format!("{i}\n"))?;
        }
        let root = fsx::open_dir_path(&tmp.path().join("root"))?;
        Ok((tmp, root))
    }

    fn bucket_sizes(trash: &Path) -> std::io::Result<Vec<usize>> {
        let mut sizes = Vec::new();
        for b in std::fs::read_dir(trash)? {
            sizes.push(std::fs::read_dir(b?.path())?.count());
        }
        sizes.sort_unstable();
        Ok(sizes)
    }

    #[test]
    fn each_thread_fills_buckets_of_a_bounded_size() -> TestResult {
        let n = BUCKET_ENTRIES as usize + 5;
        let (tmp, root) = setup(n)?;
        let data = tmp.path().join("data");
        let trash = Trash::open(&data, &root).ok_or("no trash on one device")?;
        for i in 0..n {
            trash
                .keep(&root, format!("f{i}").as_str())
                .ok_or("not kept")?;
        }
        // A second thread starts a bucket of its own.
        std::thread::scope(|s| s.spawn(|| trash.keep(&root, "f0").map(|_| ())).join())
            .map_err(|_| "thread panicked")?
            .ok_or("not kept by the second thread")?;
        // A name that is not there is passed over, in the same bucket.
        assert!(trash.keep(&root, "missing").is_none());
        drop(trash);
        assert_eq!(
            bucket_sizes(&path(&data))?,
            vec![1, 5, BUCKET_ENTRIES as usize]
        );
        assert_eq!(
            std::fs::metadata(tmp.path().join("root/f0"))?.len(),
            2,
            "the file itself is untouched"
        );
        assert_eq!(empty(&data), n + 1);
        assert!(!path(&data).exists(), "the emptied trash is removed");
        for i in 0..n {
            let meta = std::fs::metadata(tmp.path().join(format!("root/f{i}")))?;
            assert_eq!(std::os::unix::fs::MetadataExt::nlink(&meta), 1);
        }
        Ok(())
    }

    #[test]
    fn emptying_removes_buckets_and_names_and_nothing_else() -> TestResult {
        let (tmp, _root) = setup(0)?;
        let data = tmp.path().join("data");
        let trash = path(&data);
        for bucket in ["1-0", "4194305-3"] {
            std::fs::create_dir_all(trash.join(bucket))?;
            std::fs::write(trash.join(bucket).join("0"), "x")?;
        }
        std::fs::write(trash.join("1-7"), "an earlier version's name")?;
        std::fs::create_dir(trash.join("not-a-bucket"))?;
        std::fs::write(trash.join("not-a-bucket/kept"), "x")?;
        std::fs::write(data.join("beside"), "the data directory's own file")?;
        assert_eq!(empty(&data), 3);
        assert!(!trash.join("1-0").exists());
        assert!(!trash.join("4194305-3").exists());
        assert!(!trash.join("1-7").exists());
        assert!(trash.join("not-a-bucket/kept").exists());
        assert!(data.join("beside").exists());
        Ok(())
    }

    #[test]
    fn a_bucket_removed_under_an_operation_is_replaced() -> TestResult {
        let (tmp, root) = setup(2)?;
        let data = tmp.path().join("data");
        let trash = Trash::open(&data, &root).ok_or("no trash on one device")?;
        trash.keep(&root, "f0").ok_or("not kept")?;
        // The background removal of an earlier rewind's names empties the
        // trash, this operation's bucket with it.
        assert_eq!(empty(&data), 1);
        std::fs::create_dir(path(&data))?;
        let trash = Trash {
            dir: fsx::open_dir_path(&path(&data))?,
            buckets: trash.buckets,
        };
        trash
            .keep(&root, "f1")
            .ok_or("not kept after its bucket went")?;
        assert_eq!(bucket_sizes(&path(&data))?, vec![1]);
        Ok(())
    }
}
