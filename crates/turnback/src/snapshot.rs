//! Tree snapshots: covering what shell commands change.
//!
//! A snapshot walks the project in parallel, keeps what it saw in the tree
//! state (see [`crate::tree`]) and makes sure the current bytes of every
//! covered file are in the store. The first snapshot stores every covered
//! file (compressed, deduplicated); later ones hash only the files whose
//! stat (size, mtime, ctime, inode, mode) differs from the tree state or
//! that were racily clean, and store only what is new.
//!
//! Two halves make one command's turn:
//! - the *before* half ([`Store::snapshot`] with `after = false`) stores the
//!   files and writes the tree marked *pending* for turn T;
//! - the *after* half (`after = true`) scans again, compares with the tree
//!   and appends to turn T one `capture` record holding the pre-image of
//!   every path that changed: a created file, directory or special file is
//!   recorded as absent, a modified or deleted one with its bytes and mode
//!   from the tree, a renamed one as both (the old path gets its bytes
//!   back, the new one is absent). A directory removed (empty or not),
//!   replaced or given another mode is recorded with its mode, a FIFO with
//!   its mode; a socket or device is not restorable (see
//!   [`crate::entry_pre`]). The first capture of a path in a turn wins, so a path
//!   the turn already captured through a file tool keeps its earlier
//!   pre-image. `Store::rewind` then undoes the command like any turn.
//!
//! Several commands may run at once: each before half opens a window
//! ([`crate::exec_window`]) and each after half closes its own; which turns
//! a change is recorded in, when windows overlap or a command was killed,
//! is decided by [`crate::snapshot_attribution`]. The tree's pending mark
//! says whether any window is open.
//!
//! Record order, each step durable before the next: the pack of new blobs,
//! the `snapshot` record naming them, the turn's `capture` record, the tree
//! state.
//!
//! Coverage: the whole root except the root's own `.git/` and `.turnback/`
//! (a nested repository's `.git/` is covered), git-ignored files included,
//! names that are not UTF-8 included. Left out: files over the size cap;
//! directories named in [`DEFAULT_EXCLUDES`] only when they are generated
//! (see [`crate::generated`]: a tool's name, a cache marker, or the
//! project's `.gitignore`); and what `.turnbackignore` files (gitignore
//! syntax, see [`crate::exclude`]) say, which always wins. What is left
//! out is kept in the tree as *excluded*: [`Store::status`] lists it, and a
//! change to it (an excluded directory's stat is folded over its whole
//! subtree, see [`crate::subtree_stat`], so an edit deep inside counts; an
//! oversized file) is recorded in the turn as not captured, which a rewind
//! reports as not restored (exit 3), never as "nothing changed".

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustix::fs::{Mode, OFlags};
use serde::Serialize;

use crate::entry_pre;
use crate::error::{Error, IoResultExt, Result};
pub use crate::exclude::{DEFAULT_EXCLUDES, IGNORE_FILE};
use crate::exclude::{Ignores, build_matcher, nested_matcher};
use crate::exec_window::{self, TreeMark, Window};
use crate::id::{BlobId, TurnId, cut_label};
use crate::log::{FileEntry, Op, Post, PostEntry, Pre, StoredBlob};
use crate::pack::{self, BlobLoc, PackWriter};
use crate::path::{RelPath, STORE_DIR};
use crate::snapshot_attribution::{self as attribution, Half};
use crate::store::Store;
use crate::tree::{self, Entry, Excluded, Kind, Loaded, Stat, Tree, TreeWriter};

/// Files up to this size are read whole and compressed in parallel; larger
/// ones are streamed.
const WHOLE_READ_LIMIT: u64 = 4 << 20;

/// Receives the progress of a scan (for a progress bar). Every method does
/// nothing by default; they may be called from several threads.
pub trait Progress: Sync {
    /// The walk has found `entries` paths so far.
    fn walking(&self, entries: u64) {
        let _ = entries;
    }
    /// The walk is done; `files` files of `bytes` bytes must be read.
    fn hashing(&self, files: u64, bytes: u64) {
        let _ = (files, bytes);
    }
    /// `files` more files, `bytes` more bytes were read.
    fn hashed(&self, files: u64, bytes: u64) {
        let _ = (files, bytes);
    }
    /// The scan is over.
    fn done(&self) {}
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// Counts of one scan.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ScanStats {
    /// Covered regular files.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Covered directories.
    pub dirs: u64,
    /// Covered symlinks.
    pub symlinks: u64,
    /// Paths left out (see [`Store::status`]).
    pub excluded: u64,
    /// Files read and hashed (the rest were known by their stat).
    pub hashed_files: u64,
    /// Bytes read and hashed.
    pub hashed_bytes: u64,
    /// Blobs stored by this scan.
    pub new_blobs: u64,
    /// Compressed bytes stored by this scan.
    pub stored_bytes: u64,
    /// Bytes of tree state written (only the small head when no entry
    /// changed; see [`crate::tree`]).
    pub tree_bytes: u64,
}

/// What kind of change a path saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// It did not exist.
    Created,
    /// Its bytes, mode, type or (for an excluded path) stat changed.
    Modified,
    /// It is gone.
    Deleted,
}

impl ChangeKind {
    /// `created`, `modified` or `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
    }
}

/// A path moved (same inode, same bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Renamed {
    /// The old path.
    pub from: String,
    /// The new path.
    pub to: String,
}

/// A change whose pre-image could not be saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotCaptured {
    /// The path (lossy if its name is not UTF-8).
    pub path: String,
    /// What happened to it.
    pub change: ChangeKind,
    /// Why its pre-image is not saved.
    pub reason: String,
}

/// What changed between two scans, grouped for people. Directories end
/// with `/`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Changed bytes, mode or type.
    pub modified: Vec<String>,
    /// New paths.
    pub created: Vec<String>,
    /// Removed paths.
    pub deleted: Vec<String>,
    /// Moved files (each also recorded as a deletion and a creation).
    pub renamed: Vec<Renamed>,
    /// Changes that cannot be undone: excluded paths, unsaved pre-images.
    pub not_captured: Vec<NotCaptured>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.modified.is_empty()
            && self.created.is_empty()
            && self.deleted.is_empty()
            && self.renamed.is_empty()
            && self.not_captured.is_empty()
    }
}

/// Changes recorded into a turn.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    /// The turn they were recorded in.
    pub turn: TurnId,
    /// What changed.
    pub changes: Changes,
    /// The entries appended to the turn (pre-images).
    pub captured: Vec<FileEntry>,
    /// Paths the turn had captured already (its earlier pre-image wins).
    pub already_captured: Vec<RelPath>,
    /// Other turns the same changes were recorded in: their commands ran
    /// at the same time, and any of them may have made them.
    pub shared_with: Vec<TurnId>,
    /// Changed paths left to the turn whose file tool captured them since
    /// the last snapshot.
    pub captured_elsewhere: Vec<CapturedSince>,
}

/// What one snapshot did.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotReport {
    /// The turn named by the caller.
    pub turn: TurnId,
    /// Whether this was the after half.
    pub after: bool,
    /// Counts of the scan.
    pub scan: ScanStats,
    /// For the after half (or a pending snapshot completed by a before
    /// half): the changes recorded.
    pub recorded: Option<Recorded>,
    /// Things the caller should know.
    pub warnings: Vec<String>,
}

/// The last snapshot, as `status` compares against it.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// The turn it was taken for.
    pub turn: TurnId,
    /// Whether it is a before half still waiting for its after half.
    pub pending: bool,
    /// Its scan stamp (ns since the epoch).
    pub at_ns: i64,
}

/// A changed path already captured by a live turn after the last snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct CapturedSince {
    /// The path.
    pub path: String,
    /// The turn that captured it.
    pub turn: TurnId,
}

/// A path no snapshot covers.
#[derive(Debug, Clone, Serialize)]
pub struct NotCovered {
    /// The path (directories end with `/`).
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What changed on disk since the last snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The project root.
    pub root: PathBuf,
    /// The last snapshot; `None` when none was taken (everything is new).
    pub snapshot: Option<Baseline>,
    /// The changes since then.
    pub changes: Changes,
    /// Changed paths whose pre-image a turn captured after the snapshot.
    pub captured: Vec<CapturedSince>,
    /// Everything the scan leaves out, changed or not.
    pub not_covered: Vec<NotCovered>,
    /// Covered files now.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Things the caller should know.
    pub warnings: Vec<String>,
}

/// Applies a `snapshot` record to the blob map (for `Index::apply`).
pub(crate) fn apply_snapshot(
    known: &mut HashMap<BlobId, BlobLoc>,
    pack: &str,
    blobs: &[StoredBlob],
) -> std::result::Result<(), String> {
    if !pack::is_pack_name(pack) {
        return Err(format!("bad pack name {pack:?}"));
    }
    for b in blobs {
        known.entry(b.id).or_insert(BlobLoc {
            pack: b.pack.clone().unwrap_or_else(|| pack.to_owned()),
            offset: b.offset,
            len: b.len,
            size: b.size,
            base: b.base,
        });
    }
    Ok(())
}

// ------------------------------------------------------------------ walk

/// What the walk found at a path, before any file is read.
struct Found {
    path: Vec<u8>,
    stat: Stat,
    kind: FoundKind,
}

enum FoundKind {
    File,
    Symlink(String),
    Dir,
    Excluded(Excluded),
}

/// The walk: each directory is listed by one task on the rayon pool, from
/// a descriptor opened relative to its parent's (`openat` with
/// `O_NOFOLLOW`), and each entry is `fstatat`ed relative to it, so no path
/// is resolved from the root again and a directory swapped for a symlink
/// during the walk is not followed.
struct WalkCtx<'a> {
    root: &'a Path,
    cap: u64,
    warnings: Mutex<Vec<String>>,
    seen: AtomicU64,
    progress: &'a dyn Progress,
    /// Per listed directory (by path): its entries and subtrees, in order.
    out: Mutex<Vec<(Vec<u8>, Vec<Item>)>>,
    /// Directories that could not be listed (entirely or to the end).
    unlisted: Mutex<Vec<Found>>,
    /// The store's directory, when it lies inside the project (a data
    /// directory under the root): never walked.
    store_inside: Option<Vec<u8>>,
}

/// One item of a directory's listing, in the order of full paths.
enum Item {
    /// An entry of the directory.
    Found(Found),
    /// The entries below the subdirectory at this path, listed by its own
    /// task: they sort after every sibling whose name sorts before the
    /// subdirectory's name followed by `/`.
    Subtree(Vec<u8>),
}

impl Item {
    fn path(&self) -> &[u8] {
        match self {
            Item::Found(f) => &f.path,
            Item::Subtree(p) => p,
        }
    }
}

/// Orders two items of one directory (whose paths share their first `skip`
/// bytes) by their last component, with a `/` after a subtree's, so that a
/// depth-first emission in this order gives full paths in byte order
/// (`a` < `a-b` < `a.c` < `a/x` < `a0`).
fn item_order(a: &Item, b: &Item, skip: usize) -> std::cmp::Ordering {
    let (an, bn) = (&a.path()[skip..], &b.path()[skip..]);
    let common = an.len().min(bn.len());
    an[..common].cmp(&bn[..common]).then_with(|| {
        // One name is a prefix of the other: compare what follows it.
        let next = |name: &[u8], item: &Item| match name.get(common) {
            Some(&c) => Some(c),
            None if matches!(item, Item::Subtree(_)) && name.len() == common => Some(b'/'),
            None => None,
        };
        next(an, a)
            .cmp(&next(bn, b))
            .then_with(|| an.len().cmp(&bn.len()))
            .then_with(|| matches!(a, Item::Subtree(_)).cmp(&matches!(b, Item::Subtree(_))))
    })
}

/// Puts the walk's listings together depth first, which gives the found
/// paths in byte order without sorting them all; a directory that could
/// not be listed replaces its entry in its parent.
fn assemble(listings: Vec<(Vec<u8>, Vec<Item>)>, unlisted: Vec<Found>) -> Vec<Found> {
    let total = listings.iter().map(|(_, items)| items.len()).sum();
    let mut by_dir = listings;
    by_dir.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut take = |dir: &[u8]| -> Vec<Item> {
        by_dir
            .binary_search_by(|(p, _)| p.as_slice().cmp(dir))
            .map(|i| std::mem::take(&mut by_dir[i].1))
            .unwrap_or_default()
    };
    let mut unlisted: HashMap<Vec<u8>, Found> =
        unlisted.into_iter().map(|f| (f.path.clone(), f)).collect();
    let mut out = Vec::with_capacity(total);
    let mut stack = vec![take(&[]).into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            None => {
                stack.pop();
            }
            Some(Item::Found(f)) if unlisted.is_empty() => out.push(f),
            Some(Item::Found(f)) => out.push(unlisted.remove(&f.path).unwrap_or(f)),
            Some(Item::Subtree(p)) => stack.push(take(&p).into_iter()),
        }
    }
    // Every unlisted directory was listed by its parent, so none is left;
    // were one left, it is kept, in order, rather than lost.
    if !unlisted.is_empty() {
        out.extend(unlisted.into_values());
        out.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    }
    out
}

/// Whether a name (and the path it completes) can be held by a `RelPath`.
fn name_problem(name: &[u8], rel_len: usize) -> Option<&'static str> {
    if name.len() > 255 || rel_len > 4096 {
        Some("it is too long")
    } else {
        None
    }
}

fn unreadable(e: impl Into<io::Error>) -> FoundKind {
    FoundKind::Excluded(Excluded::Unreadable(e.into().to_string()))
}

impl WalkCtx<'_> {
    fn counted(&self, n: u64) {
        let before = self.seen.fetch_add(n, Ordering::Relaxed);
        if (before + n) / 1024 != before / 1024 {
            self.progress.walking(before + n);
        }
    }

    /// Lists the directory `dir` (at `rel`, empty for the root), and spawns
    /// a task for each covered subdirectory. Returns an error only for
    /// the root; a subdirectory that cannot be listed is recorded as
    /// unreadable.
    fn walk_dir<'s>(
        &'s self,
        dir: OwnedFd,
        rel: Vec<u8>,
        ignores: Arc<Ignores>,
        scope: &rayon::Scope<'s>,
    ) -> io::Result<()> {
        let mut local: Vec<Found> = Vec::new();
        let mut subtrees: Vec<Vec<u8>> = Vec::new();
        let mut failed = None;
        // The names first (an ignore file among them applies to them all),
        // into one buffer: each NUL-terminated, no allocation per name.
        let mut names: Vec<u8> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        {
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
            let mut listing = rustix::fs::RawDir::new(&dir, &mut buf);
            while let Some(entry) = listing.next() {
                match entry {
                    Ok(e) => {
                        names.extend_from_slice(e.file_name().to_bytes_with_nul());
                        ends.push(names.len());
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
        }
        let names: Vec<&std::ffi::CStr> = ends
            .iter()
            .scan(0, |start, &end| {
                let name = &names[*start..end];
                *start = end;
                Some(name)
            })
            .filter_map(|n| std::ffi::CStr::from_bytes_with_nul(n).ok())
            .collect();
        let dir = std::os::fd::AsFd::as_fd(&dir);
        let mut ignores = ignores;
        if !rel.is_empty() && names.iter().any(|n| n.to_bytes() == IGNORE_FILE.as_bytes()) {
            let mut dir_rel = rel.clone();
            dir_rel.push(b'/');
            let mut warnings = Vec::new();
            if let Some((matcher, files_too)) =
                nested_matcher(dir, &dir_rel, self.root, &mut warnings)
            {
                ignores = Arc::new(Ignores {
                    dir: dir_rel,
                    matcher,
                    files_too,
                    parent: Some(ignores),
                });
            }
            if let Ok(mut w) = self.warnings.lock() {
                w.extend(warnings);
            }
        }
        for name in names {
            let bytes = name.to_bytes();
            let root_git = rel.is_empty() && bytes == b".git";
            // Only the root's `.turnback` is turnback's.
            let root_marker = rel.is_empty() && bytes == STORE_DIR.as_bytes();
            if bytes == b"." || bytes == b".." || root_git || root_marker {
                continue;
            }
            let mut path = Vec::with_capacity(rel.len() + 1 + bytes.len());
            if !rel.is_empty() {
                path.extend_from_slice(&rel);
                path.push(b'/');
            }
            path.extend_from_slice(bytes);
            if self.store_inside.as_deref() == Some(path.as_slice()) {
                continue;
            }
            if let Some((fd, path)) = self.visit(dir, name, path, &ignores, &mut local) {
                subtrees.push(path.clone());
                let ignores = Arc::clone(&ignores);
                scope.spawn(move |s| {
                    if let Err(e) = self.walk_dir(fd, path.clone(), ignores, s) {
                        self.push_unlisted(Found {
                            path,
                            stat: Stat::default(),
                            kind: unreadable(e),
                        });
                    }
                });
            }
        }
        if let Some(e) = failed {
            if rel.is_empty() {
                return Err(e.into());
            }
            self.push_unlisted(Found {
                path: rel.clone(),
                stat: Stat::default(),
                kind: unreadable(e),
            });
        }
        self.counted(local.len() as u64);
        let mut items: Vec<Item> = local
            .into_iter()
            .map(Item::Found)
            .chain(subtrees.into_iter().map(Item::Subtree))
            .collect();
        let skip = if rel.is_empty() { 0 } else { rel.len() + 1 };
        items.sort_unstable_by(|a, b| item_order(a, b, skip));
        // A name the listing returned twice (changed while listed) once.
        items.dedup_by(|a, b| item_order(a, b, skip).is_eq());
        self.out
            .lock()
            .map_err(|_| io::Error::other("a walker thread panicked"))?
            .push((rel, items));
        Ok(())
    }

    fn push_unlisted(&self, found: Found) {
        if let Ok(mut out) = self.unlisted.lock() {
            out.push(found);
        }
    }

    /// Classifies one entry of `dir`; for a covered directory, returns it
    /// opened, to be walked.
    fn visit(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        name: &std::ffi::CStr,
        path: Vec<u8>,
        ignores: &Ignores,
        local: &mut Vec<Found>,
    ) -> Option<(OwnedFd, Vec<u8>)> {
        use rustix::fs::{AtFlags, FileType};
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => return None, // gone since it was listed
            Err(e) => {
                local.push(Found {
                    path,
                    stat: Stat::default(),
                    kind: unreadable(e),
                });
                return None;
            }
        };
        let ft = FileType::from_raw_mode(st.st_mode);
        let is_dir = ft == FileType::Directory;
        let excluded = match name_problem(name.to_bytes(), path.len()) {
            Some(why) => Some(Excluded::BadName(why.into())),
            None => (ignores.excluded(&path, is_dir))
                .and_then(|why| crate::generated::confirm(why, self.root, dir, name, &path)),
        };
        let stat = match &excluded {
            Some(_) if is_dir => crate::subtree_stat::fold(dir, name, Stat::of_raw(&st)),
            _ => Stat::of_raw(&st),
        };
        let mut push = |path, kind| local.push(Found { path, stat, kind });
        if let Some(why) = excluded {
            push(path, FoundKind::Excluded(why));
            return None;
        }
        let kind = match ft {
            FileType::RegularFile if stat.size > self.cap => {
                FoundKind::Excluded(Excluded::TooLarge(self.cap))
            }
            FileType::RegularFile => FoundKind::File,
            FileType::Symlink => match rustix::fs::readlinkat(dir, name, Vec::new()) {
                Ok(t) => match t.into_string() {
                    Ok(t) => FoundKind::Symlink(t),
                    Err(_) => FoundKind::Excluded(Excluded::BadName(
                        "its symlink target is not valid UTF-8".into(),
                    )),
                },
                Err(rustix::io::Errno::NOENT) => return None,
                Err(e) => unreadable(e),
            },
            FileType::Directory => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                match rustix::fs::openat(dir, name, flags, Mode::empty()) {
                    Ok(fd) => {
                        push(path.clone(), FoundKind::Dir);
                        return Some((fd, path));
                    }
                    Err(rustix::io::Errno::NOENT) => return None,
                    Err(e) => unreadable(e),
                }
            }
            _ => FoundKind::Excluded(Excluded::Special),
        };
        push(path, kind);
        None
    }
}

// ------------------------------------------------------------------ scan

/// The outcome of a scan.
struct Scan {
    entries: Vec<Entry>,
    stats: ScanStats,
    pack: Option<(PackWriter, Vec<StoredBlob>)>,
    warnings: Vec<String>,
}

/// What [`Store::record`] gives back: the scan's entries and counts, what
/// was recorded, and the windows left open.
type Outcome = (Vec<Entry>, ScanStats, Option<Recorded>, Vec<Window>);

/// How a scan treats file contents.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Hash every file not known by its stat and store what is new.
    Store,
    /// Hash only files the old tree has with another stat (for `status`).
    Compare,
}

/// A file read in parallel.
enum ReadOne {
    Hashed {
        id: BlobId,
        len: u64,
        stat: Stat,
        frame: Option<Vec<u8>>,
    },
    Large {
        file: File,
        stat: Stat,
    },
    Gone,
    Now(Excluded, Stat),
}

fn read_one(
    root: &Path,
    rel: &[u8],
    cap: u64,
    compress: Option<(&HashMap<BlobId, BlobLoc>, i32)>,
) -> ReadOne {
    let full = root.join(std::ffi::OsStr::from_bytes(rel));
    let fd = match rustix::fs::open(
        &full,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return ReadOne::Gone,
        Err(rustix::io::Errno::LOOP) => {
            return ReadOne::Now(
                Excluded::Unreadable(
                    "it became a symlink while being scanned; snapshot again".into(),
                ),
                Stat::default(),
            );
        }
        Err(e) => {
            return ReadOne::Now(
                Excluded::Unreadable(io::Error::from(e).to_string()),
                Stat::default(),
            );
        }
    };
    let file = File::from(fd);
    let stat = match file.metadata() {
        Ok(m) => Stat::of(&m),
        Err(e) => return ReadOne::Now(Excluded::Unreadable(e.to_string()), Stat::default()),
    };
    if rustix::fs::FileType::from_raw_mode(stat.mode) != rustix::fs::FileType::RegularFile {
        return ReadOne::Now(
            Excluded::Unreadable("it changed type while being scanned; snapshot again".into()),
            stat,
        );
    }
    if stat.size > cap {
        return ReadOne::Now(Excluded::TooLarge(cap), stat);
    }
    if stat.size > WHOLE_READ_LIMIT {
        return ReadOne::Large { file, stat };
    }
    let mut data = Vec::with_capacity(stat.size as usize);
    if let Err(e) = (&file).take(WHOLE_READ_LIMIT + 1).read_to_end(&mut data) {
        return ReadOne::Now(Excluded::Unreadable(e.to_string()), stat);
    }
    let id = pack::hash_bytes(&data);
    let frame = match compress {
        Some((known, level)) if !known.contains_key(&id) => {
            match zstd::bulk::compress(&data, level) {
                Ok(f) => Some(f),
                Err(e) => {
                    return ReadOne::Now(Excluded::Unreadable(format!("compress: {e}")), stat);
                }
            }
        }
        _ => None,
    };
    ReadOne::Hashed {
        id,
        len: data.len() as u64,
        stat,
        frame,
    }
}

impl Store {
    /// Walks the project and reads what the stat cache cannot vouch for.
    fn scan(&self, old: Option<&Tree>, mode: Reading, progress: &dyn Progress) -> Result<Scan> {
        let mut warnings = Vec::new();
        let (matcher, files_too) = build_matcher(&self.root, &mut warnings)?;
        let cap = self.options.max_file_size;
        let ctx = WalkCtx {
            root: &self.root,
            cap,
            warnings: Mutex::new(Vec::new()),
            seen: AtomicU64::new(0),
            progress,
            out: Mutex::new(Vec::new()),
            unlisted: Mutex::new(Vec::new()),
            store_inside: self.store_inside(),
        };
        // A descriptor of its own: a dup would share the listing offset.
        let root_fd = rustix::fs::openat(
            &self.root_fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ctx("open", &self.root)?;
        let ignores = Arc::new(Ignores {
            dir: Vec::new(),
            matcher,
            files_too,
            parent: None,
        });
        match rayon::scope(|s| ctx.walk_dir(root_fd, Vec::new(), ignores, s)) {
            Ok(()) => {}
            // The project folder itself was deleted (`cd .. && rm -rf
            // proj`): it holds nothing now, and every file it held is a
            // deletion the tree's blobs can undo.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).ctx("list", &self.root),
        }
        if let Ok(w) = ctx.warnings.lock() {
            warnings.extend(w.iter().cloned());
        }
        let poisoned = || io::Error::other("a walker thread panicked");
        let listings = ctx
            .out
            .into_inner()
            .map_err(|_| poisoned())
            .ctx("walk", &self.root)?;
        let unlisted = ctx
            .unlisted
            .into_inner()
            .map_err(|_| poisoned())
            .ctx("walk", &self.root)?;
        let found = assemble(listings, unlisted);
        debug_assert!(
            found.windows(2).all(|w| w[0].path < w[1].path),
            "the walk's paths are sorted and unique"
        );

        // Merge with the old tree: a file whose stat is unchanged and was
        // not racily clean keeps its blob.
        let known = &self.index.blobs;
        let empty: Vec<Entry> = Vec::new();
        let (old_entries, stamp) = match old {
            Some(t) => (&t.entries, t.stamp_ns),
            None => (&empty, i64::MIN),
        };
        let mut oi = 0;
        let mut entries: Vec<Entry> = Vec::with_capacity(found.len());
        let mut to_read: Vec<usize> = Vec::new();
        let mut read_bytes = 0u64;
        for f in found {
            while oi < old_entries.len() && old_entries[oi].path < f.path {
                oi += 1;
            }
            let prev = old_entries.get(oi).filter(|o| o.path == f.path);
            let kind = match f.kind {
                FoundKind::Symlink(target) => Kind::Symlink { target },
                FoundKind::Dir => Kind::Dir,
                FoundKind::Excluded(x) => Kind::Excluded(x),
                FoundKind::File => {
                    let cached = match prev {
                        Some(Entry {
                            stat,
                            kind: Kind::File { blob },
                            ..
                        }) if *stat == f.stat
                            && !stat.racy(stamp)
                            && (mode == Reading::Compare || known.contains_key(blob)) =>
                        {
                            Some(*blob)
                        }
                        _ => None,
                    };
                    // Comparing, a file is read only if there is something
                    // to compare it with: an old file, or (to pair renames)
                    // no old entry at all in an existing tree.
                    let need = cached.is_none()
                        && match mode {
                            Reading::Store => true,
                            Reading::Compare => match prev {
                                Some(p) => matches!(p.kind, Kind::File { .. }),
                                None => old.is_some(),
                            },
                        };
                    if need {
                        to_read.push(entries.len());
                        read_bytes += f.stat.size;
                    }
                    Kind::File {
                        blob: cached.unwrap_or(BlobId([0; 32])),
                    }
                }
            };
            entries.push(Entry {
                path: f.path,
                stat: f.stat,
                kind,
            });
        }

        progress.hashing(to_read.len() as u64, read_bytes);
        let mut stats = ScanStats::default();
        let level = self.options.compression_level;
        let mut writer: Option<PackWriter> = None;
        let mut blobs: Vec<StoredBlob> = Vec::new();
        let mut fresh: HashSet<BlobId> = HashSet::new();
        let mut gone: HashSet<usize> = HashSet::new();
        let mut large: Vec<(usize, File, Stat)> = Vec::new();
        let result = (|| -> Result<()> {
            let mut start = 0;
            while start < to_read.len() {
                let mut end = start;
                let mut bytes = 0u64;
                while end < to_read.len() && end - start < 256 && bytes < (64 << 20) {
                    bytes += entries[to_read[end]].stat.size;
                    end += 1;
                }
                let chunk = &to_read[start..end];
                let compress = (mode == Reading::Store).then_some((known, level));
                let done: Vec<ReadOne> = chunk
                    .par_iter()
                    .map(|&i| read_one(&self.root, &entries[i].path, cap, compress))
                    .collect();
                for (&i, r) in chunk.iter().zip(done) {
                    match r {
                        ReadOne::Hashed {
                            id,
                            len,
                            stat,
                            frame,
                        } => {
                            stats.hashed_files += 1;
                            stats.hashed_bytes += len;
                            entries[i].stat = stat;
                            entries[i].kind = Kind::File { blob: id };
                            if let Some(frame) = frame
                                && fresh.insert(id)
                            {
                                let w = match &mut writer {
                                    Some(w) => w,
                                    None => writer.insert(PackWriter::create(
                                        &self.dirs().store,
                                        &self.store_path,
                                    )?),
                                };
                                let offset = w.append(&frame)?;
                                stats.stored_bytes += frame.len() as u64;
                                blobs.push(StoredBlob {
                                    pack: None,
                                    base: None,
                                    id,
                                    offset,
                                    len: frame.len() as u64,
                                    size: len,
                                });
                            }
                        }
                        ReadOne::Large { file, stat } => large.push((i, file, stat)),
                        ReadOne::Gone => {
                            gone.insert(i);
                        }
                        ReadOne::Now(x, stat) => {
                            entries[i].stat = stat;
                            entries[i].kind = Kind::Excluded(x);
                        }
                    }
                }
                progress.hashed((end - start) as u64, bytes);
                start = end;
            }
            for (i, file, stat) in std::mem::take(&mut large) {
                let shown = self
                    .root
                    .join(std::ffi::OsStr::from_bytes(&entries[i].path));
                let (id, len) = if mode == Reading::Store {
                    let w = match &mut writer {
                        Some(w) => w,
                        None => {
                            writer.insert(PackWriter::create(&self.dirs().store, &self.store_path)?)
                        }
                    };
                    let s = w.append_stream(&file, level, |id| {
                        !known.contains_key(id) && !fresh.contains(id)
                    })?;
                    if let Some((offset, clen)) = s.kept {
                        fresh.insert(s.id);
                        stats.stored_bytes += clen;
                        blobs.push(StoredBlob {
                            pack: None,
                            base: None,
                            id: s.id,
                            offset,
                            len: clen,
                            size: s.size,
                        });
                    }
                    (s.id, s.size)
                } else {
                    let mut h = pack::HashingReader::new(&file);
                    io::copy(&mut h, &mut io::sink()).ctx("read", &shown)?;
                    h.finish()
                };
                stats.hashed_files += 1;
                stats.hashed_bytes += len;
                entries[i].stat = stat;
                entries[i].kind = Kind::File { blob: id };
            }
            Ok(())
        })();
        if let Err(e) = result {
            if let Some(w) = writer {
                w.abandon();
            }
            return Err(e);
        }
        progress.done();
        if !gone.is_empty() {
            let mut k = 0;
            entries.retain(|_| {
                k += 1;
                !gone.contains(&(k - 1))
            });
        }
        stats.new_blobs = blobs.len() as u64;
        for e in &entries {
            match &e.kind {
                Kind::File { .. } => {
                    stats.files += 1;
                    stats.bytes += e.stat.size;
                }
                Kind::Symlink { .. } => stats.symlinks += 1,
                Kind::Dir => stats.dirs += 1,
                Kind::Excluded(_) => stats.excluded += 1,
            }
        }
        let pack = match writer {
            Some(w) if !blobs.is_empty() => Some((w, blobs)),
            Some(w) => {
                w.abandon();
                None
            }
            None => None,
        };
        Ok(Scan {
            entries,
            stats,
            pack,
            warnings,
        })
    }

    /// Takes one half of a command's snapshot in `turn`: the before half
    /// (`after = false`) or the after half, which records the changes since
    /// the before half in the turn (see the module doc). Holds the store
    /// lock throughout.
    pub fn snapshot(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        after: bool,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        self.snapshot_by(turn, label, after, None, progress)
    }

    /// [`Store::snapshot`] for a process that takes both halves around a
    /// command it runs (`turnback exec`): its window names this process,
    /// so a concurrent before half tells a running command from a killed
    /// one (see [`crate::snapshot_attribution`]).
    pub fn snapshot_for_command(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        after: bool,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        self.snapshot_by(turn, label, after, Some(std::process::id()), progress)
    }

    fn snapshot_by(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        after: bool,
        pid: Option<u32>,
        progress: &dyn Progress,
    ) -> Result<SnapshotReport> {
        let _guard = self.begin_mutation()?;
        let store_fd = rustix::io::dup(&self.dirs().store).ctx("open", &self.store_path)?;
        let packs_fd = rustix::io::dup(&self.dirs().packs).ctx("open", &self.store_path)?;
        tree::sweep_temps(&store_fd, &self.store_path)?;
        let mut warnings = Vec::new();
        let old = match tree::load(&store_fd, &self.store_path)? {
            Loaded::Missing => None,
            Loaded::Damaged(why) => {
                warnings.push(format!(
                    "{why}; the tree state is rebuilt and every file hashed again"
                ));
                None
            }
            Loaded::Tree(t) => Some(t),
        };
        if after && old.is_none() {
            return Err(Error::NoSnapshot {
                root: self.root.clone(),
            });
        }
        let windows = exec_window::load(&store_fd, &self.store_path, old.as_ref(), &mut warnings)?;
        let writer = TreeWriter::begin(&store_fd, &self.store_path)?;
        let stamp_ns = writer.stamp_ns;
        let scan = self.scan(old.as_ref(), Reading::Store, progress)?;
        let half = Half {
            turn,
            label,
            after,
            pid,
            last_seq: self.index.last_seq,
            stamp_ns,
        };
        let (entries, mut stats, recorded, windows) =
            self.record(&half, old.as_ref(), scan, windows, &packs_fd, &mut warnings)?;
        let pending = !windows.is_empty();
        // Nothing hashed and every entry as the tree has it: only the
        // header changes, so the (large) tree is not rewritten.
        let unchanged =
            stats.hashed_files == 0 && old.as_ref().is_some_and(|o| o.entries == entries);
        let mark = TreeMark {
            stamp_ns: old
                .as_ref()
                .filter(|_| unchanged)
                .map_or(stamp_ns, |o| o.stamp_ns),
            log_seq: self.index.last_seq,
            pending,
            turn: turn.clone(),
        };
        exec_window::save(&store_fd, &self.store_path, &mark, &windows)?;
        if unchanged {
            stats.tree_bytes = tree::write_head(
                &store_fd,
                &self.store_path,
                self.index.last_seq,
                pending,
                turn,
            )?;
        } else {
            let new_tree = Tree {
                stamp_ns,
                log_seq: self.index.last_seq,
                turn: turn.clone(),
                pending,
                entries,
            };
            stats.tree_bytes = writer.commit(&store_fd, &self.store_path, &new_tree)?;
        }
        Ok(SnapshotReport {
            turn: turn.clone(),
            after,
            scan: stats,
            recorded,
            warnings,
        })
    }

    /// Makes the scan's blobs durable and records the diff into the turns
    /// that may own it (see [`crate::snapshot_attribution`]); returns the
    /// windows open after this half.
    fn record(
        &mut self,
        half: &Half<'_>,
        old: Option<&Tree>,
        scan: Scan,
        windows: Option<Vec<Window>>,
        packs_fd: &std::os::fd::OwnedFd,
        warnings: &mut Vec<String>,
    ) -> Result<Outcome> {
        let Scan {
            entries,
            stats,
            pack,
            warnings: scan_warnings,
        } = scan;
        warnings.extend(scan_warnings);
        if let Some((w, blobs)) = pack {
            let name = pack::pack_name(self.index.last_seq + 1);
            w.commit(packs_fd, &name)?;
            self.append(Op::Snapshot {
                turn: half.turn.clone(),
                after: half.after,
                pack: name,
                blobs,
            })?;
        }
        let rewound = old.is_some_and(|t| self.index.ops.keys().any(|&s| s > t.log_seq));
        let plan = attribution::plan(half, old, windows, rewound, warnings);
        let Some(base) = old.filter(|_| !plan.owners.is_empty()) else {
            return Ok((entries, stats, None, plan.windows));
        };
        let blob_size = |id: &BlobId| self.index.blobs.get(id).map(|l| l.size);
        let (changes, mut files) = diff(&base.entries, &entries, blob_size);
        crate::links::add_unchanged_names(&base.entries, &mut files, blob_size);
        let (assigned, elsewhere) =
            attribution::assign(plan.owners, files, &self.index, base.log_seq);
        let mut recorded: Option<Recorded> = None;
        for a in assigned {
            // What the command left at every path it changed (the turn's
            // post-images): a later rewind compares against these, so a
            // change a later turn made is never taken for someone else's.
            let posts: Vec<PostEntry> = a
                .fresh
                .iter()
                .map(|f| &f.path)
                .chain(&a.already)
                .map(|path| PostEntry {
                    path: path.clone(),
                    post: post_in(&entries, path),
                })
                .collect();
            // A command that changed nothing in a turn that exists already
            // appends nothing.
            if !posts.is_empty() || self.index.turn(&a.turn).is_none() {
                let shared = if a.fresh.is_empty() {
                    Vec::new()
                } else {
                    a.shared_with.clone()
                };
                let label = a.label.as_deref();
                self.append_capture(&a.turn, label, a.fresh.clone(), posts, shared)?;
            }
            // The report describes the caller's turn when it is one of them.
            if recorded.is_some() && &a.turn != half.turn {
                continue;
            }
            recorded = Some(Recorded {
                turn: a.turn,
                changes: changes.clone(),
                captured: a.fresh,
                already_captured: a.already,
                shared_with: a.shared_with,
                captured_elsewhere: elsewhere.clone(),
            });
        }
        Ok((entries, stats, recorded, plan.windows))
    }

    fn append_capture(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        files: Vec<FileEntry>,
        posts: Vec<PostEntry>,
        shared_with: Vec<TurnId>,
    ) -> Result<()> {
        self.append(Op::Capture {
            turn: turn.clone(),
            label: label.map(cut_label).filter(|l| !l.is_empty()),
            pack: None,
            blobs: Vec::new(),
            files,
            posts,
            shared_with,
        })?;
        Ok(())
    }

    /// What changed on disk since the last snapshot, without storing or
    /// recording anything. Files whose stat changed are hashed to tell a
    /// real change from a touch.
    pub fn status(&self, progress: &dyn Progress) -> Result<Status> {
        let mut warnings = Vec::new();
        let old = match &self.dirs {
            None => None,
            Some(d) => match tree::load(&d.store, &self.store_path)? {
                Loaded::Missing => None,
                Loaded::Damaged(why) => {
                    warnings.push(format!(
                        "{why}; the next snapshot rebuilds it and hashes every file again"
                    ));
                    None
                }
                Loaded::Tree(t) => Some(t),
            },
        };
        let scan = self.scan(old.as_ref(), Reading::Compare, progress)?;
        warnings.extend(scan.warnings);
        let empty = Vec::new();
        let base = old.as_ref().map_or(&empty, |t| &t.entries);
        let (mut changes, _) = diff(base, &scan.entries, |_| Some(0));
        if old.is_none() {
            // With nothing to compare with, every covered path is new and
            // the excluded ones are listed under not_covered.
            changes.not_captured.clear();
        }
        let mut captured = Vec::new();
        if let Some(t) = &old {
            let mut by_path: HashMap<String, &TurnId> = HashMap::new();
            for turn in &self.index.turns {
                for c in &turn.files {
                    if c.seq > t.log_seq {
                        by_path.entry(c.entry.path.to_string()).or_insert(&turn.id);
                    }
                }
            }
            let changed = changes
                .modified
                .iter()
                .chain(&changes.created)
                .chain(&changes.deleted)
                .chain(changes.renamed.iter().flat_map(|r| [&r.from, &r.to]));
            for p in changed {
                if let Some(turn) = by_path.get(p.trim_end_matches('/')) {
                    captured.push(CapturedSince {
                        path: p.clone(),
                        turn: (*turn).clone(),
                    });
                }
            }
        }
        let not_covered = scan
            .entries
            .iter()
            .filter_map(|e| match &e.kind {
                Kind::Excluded(x) => Some(NotCovered {
                    path: shown_path(e),
                    reason: x.describe(),
                }),
                _ => None,
            })
            .collect();
        Ok(Status {
            root: self.root.clone(),
            snapshot: old.map(|t| Baseline {
                turn: t.turn,
                pending: t.pending,
                at_ns: t.stamp_ns,
            }),
            changes,
            captured,
            not_covered,
            files: scan.stats.files,
            bytes: scan.stats.bytes,
            warnings,
        })
    }
}

// ------------------------------------------------------------------ diff

/// A path for people: lossy UTF-8, directories with a trailing `/`.
fn shown_path(e: &Entry) -> String {
    let mut s = e.path_lossy();
    let is_dir = matches!(e.kind, Kind::Dir)
        || rustix::fs::FileType::from_raw_mode(e.stat.mode) == rustix::fs::FileType::Directory;
    if is_dir {
        s.push('/');
    }
    s
}

fn rel(e: &Entry) -> Option<RelPath> {
    RelPath::from_bytes(&e.path).ok()
}

/// Compares two sorted entry lists. Returns the changes grouped for people
/// and the pre-image of every changed path (what a rewind needs).
/// `blob_size` says whether the store holds a blob, and its size.
/// The state at `path` in a scan's sorted `entries`, as a post-image.
fn post_in(entries: &[Entry], path: &RelPath) -> Post {
    let key = path.as_str().as_bytes();
    match entries.binary_search_by(|e| e.path.as_slice().cmp(key)) {
        Err(_) => Post::Absent,
        Ok(i) => match &entries[i].kind {
            Kind::File { blob } => Post::File { sha256: *blob },
            Kind::Symlink { target } => Post::Symlink {
                target: target.clone(),
            },
            Kind::Dir => Post::Dir,
            Kind::Excluded(_) => Post::Other,
        },
    }
}

fn diff(
    old: &[Entry],
    new: &[Entry],
    blob_size: impl Fn(&BlobId) -> Option<u64>,
) -> (Changes, Vec<FileEntry>) {
    let mut ch = Changes::default();
    let mut files: Vec<FileEntry> = Vec::new();
    // For rename pairing: (inode, blob) of deleted and created files.
    let mut gone_files: HashMap<(u64, BlobId), usize> = HashMap::new();
    let mut new_files: Vec<((u64, BlobId), usize)> = Vec::new();
    let old_excluded: HashSet<&[u8]> = old
        .iter()
        .filter(|e| matches!(e.kind, Kind::Excluded(_)))
        .map(|e| e.path.as_slice())
        .collect();
    let inside_excluded = |p: &[u8]| -> Option<String> {
        if old_excluded.is_empty() {
            return None;
        }
        p.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(|(k, _)| &p[..k])
            .find(|anc| old_excluded.contains(anc))
            .map(|anc| String::from_utf8_lossy(anc).into_owned())
    };
    let not_captured = |ch: &mut Changes,
                        files: &mut Vec<FileEntry>,
                        e: &Entry,
                        change: ChangeKind,
                        reason: String| {
        if let Some((path, own)) = crate::path::nearest_storable(&e.path) {
            let whose = if own {
                String::new()
            } else {
                format!("{}: ", shown_path(e))
            };
            files.push(FileEntry {
                path,
                pre: Pre::Skipped {
                    reason: format!("not captured by the snapshot: {whose}{reason}"),
                    size: e.stat.size,
                },
            });
        }
        ch.not_captured.push(NotCaptured {
            path: shown_path(e),
            change,
            reason,
        });
    };
    // Inodes two or more old file entries share: hard links.
    let linked = crate::links::shared_inodes(
        old.iter()
            .filter(|e| matches!(e.kind, Kind::File { .. }))
            .map(|e| e.stat.ino),
    );
    // The pre-image of an old covered entry (with its hard-link key), or
    // why there is none.
    let pre_of = |o: &Entry| {
        entry_pre::pre_of(o, &blob_size).map(|pre| match pre {
            Pre::File {
                blob, size, mode, ..
            } => Pre::File {
                blob,
                size,
                mode,
                link: linked.contains(&o.stat.ino).then_some(o.stat.ino),
            },
            other => other,
        })
    };
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let ord = match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) => o.path.cmp(&n.path),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                let o = &old[i];
                i += 1;
                match (pre_of(o), rel(o)) {
                    (Ok(pre), Some(path)) => {
                        if let Kind::File { blob } = &o.kind {
                            gone_files.insert((o.stat.ino, *blob), ch.deleted.len());
                        }
                        ch.deleted.push(shown_path(o));
                        files.push(FileEntry { path, pre });
                    }
                    (Err(why), _) => not_captured(&mut ch, &mut files, o, ChangeKind::Deleted, why),
                    (Ok(_), None) => {}
                }
            }
            std::cmp::Ordering::Greater => {
                let n = &new[j];
                j += 1;
                if let Some(anc) = inside_excluded(&n.path) {
                    let why = format!("inside {anc}/, which was not covered before");
                    not_captured(&mut ch, &mut files, n, ChangeKind::Created, why);
                    continue;
                }
                match &n.kind {
                    Kind::Excluded(x) if !entry_pre::created_special(n) => {
                        not_captured(&mut ch, &mut files, n, ChangeKind::Created, x.describe())
                    }
                    _ => {
                        if let Some(path) = rel(n) {
                            if let Kind::File { blob } = &n.kind {
                                new_files.push(((n.stat.ino, *blob), ch.created.len()));
                            }
                            ch.created.push(shown_path(n));
                            files.push(FileEntry {
                                path,
                                pre: Pre::Absent,
                            });
                        }
                    }
                }
            }
            std::cmp::Ordering::Equal => {
                let (o, n) = (&old[i], &new[j]);
                i += 1;
                j += 1;
                let changed = match entry_pre::kept_changed(o, n) {
                    Some(changed) => changed,
                    None => match (&o.kind, &n.kind) {
                        (Kind::File { blob: a }, Kind::File { blob: b }) => {
                            a != b || o.stat.perm() != n.stat.perm()
                        }
                        (Kind::Symlink { target: a }, Kind::Symlink { target: b }) => a != b,
                        (Kind::Dir, Kind::Dir) => false,
                        (Kind::Excluded(_), Kind::Excluded(x)) => {
                            if o.stat != n.stat {
                                not_captured(
                                    &mut ch,
                                    &mut files,
                                    n,
                                    ChangeKind::Modified,
                                    x.describe(),
                                );
                            }
                            false
                        }
                        (Kind::Excluded(x), _) => {
                            if !matches!(n.kind, Kind::Dir) {
                                let why = format!("it was not covered before: {}", x.describe());
                                not_captured(&mut ch, &mut files, n, ChangeKind::Modified, why);
                            }
                            false
                        }
                        // The directory became excluded: its old files show as deleted.
                        (Kind::Dir, Kind::Excluded(_)) => false,
                        _ => true,
                    },
                };
                if changed {
                    match (pre_of(o), rel(o)) {
                        (Ok(pre), Some(path)) => {
                            ch.modified.push(shown_path(n));
                            files.push(FileEntry { path, pre });
                        }
                        (Err(why), _) => {
                            not_captured(&mut ch, &mut files, n, ChangeKind::Modified, why)
                        }
                        (Ok(_), None) => {}
                    }
                }
            }
        }
    }
    // Pair deletions and creations of the same inode and bytes: renames.
    let mut moved_from: HashSet<usize> = HashSet::new();
    let mut moved_to: HashSet<usize> = HashSet::new();
    for (key, k) in new_files {
        if let Some(&d) = gone_files.get(&key)
            && moved_from.insert(d)
        {
            moved_to.insert(k);
            ch.renamed.push(Renamed {
                from: ch.deleted[d].clone(),
                to: ch.created[k].clone(),
            });
        }
    }
    if !moved_from.is_empty() {
        let keep = |list: Vec<String>, drop: &HashSet<usize>| -> Vec<String> {
            list.into_iter()
                .enumerate()
                .filter(|(k, _)| !drop.contains(k))
                .map(|(_, p)| p)
                .collect()
        };
        ch.deleted = keep(std::mem::take(&mut ch.deleted), &moved_from);
        ch.created = keep(std::mem::take(&mut ch.created), &moved_to);
    }
    (ch, files)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::exclude::dir_only;
    use crate::{Options, RewindOptions};

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn t(id: &str) -> TurnId {
        TurnId::new(id).expect("valid turn id")
    }

    fn put(root: &Path, rel: &str, bytes: &[u8]) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, bytes).expect("write");
    }

    /// Every path under `root` but `.turnback/`: kind, bytes or target, mode.
    fn state(root: &Path) -> BTreeMap<String, (char, Vec<u8>, u32)> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (char, Vec<u8>, u32)>) {
            for e in fs::read_dir(dir).expect("list") {
                let e = e.expect("entry");
                let p = e.path();
                let rel = p
                    .strip_prefix(root)
                    .expect("inside")
                    .to_string_lossy()
                    .into_owned();
                if rel == ".turnback" {
                    continue;
                }
                let m = fs::symlink_metadata(&p).expect("stat");
                let mode = m.permissions().mode() & 0o7777;
                if m.file_type().is_symlink() {
                    let target = fs::read_link(&p).expect("link");
                    out.insert(rel, ('l', target.as_os_str().as_bytes().to_vec(), 0));
                } else if m.is_dir() {
                    out.insert(rel, ('d', Vec::new(), mode));
                    walk(root, &p, out);
                } else {
                    out.insert(rel, ('f', fs::read(&p).expect("read"), mode));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(root, root, &mut out);
        out
    }

    fn project() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        put(dir.path(), "src/main.rs", b"fn main() {}\n");
        put(dir.path(), "src/lib.rs", b"pub fn f() {}\n");
        put(dir.path(), ".env", b"API_URL=https://prod\n");
        put(dir.path(), "README.md", b"# readme\n");
        put(dir.path(), "docs/empty-dir-holder", b"");
        fs::create_dir_all(dir.path().join("docs/empty")).expect("mkdir");
        std::os::unix::fs::symlink("src/main.rs", dir.path().join("main-link")).expect("link");
        let store = Store::open(dir.path()).expect("open");
        (dir, store)
    }

    #[test]
    fn first_scan_stores_every_covered_file_and_an_unchanged_rescan_reads_none() -> TestResult {
        let (dir, mut store) = project();
        let r = store.snapshot(&t("t1"), None, false, &NoProgress)?;
        assert_eq!(r.scan.files, 5);
        assert_eq!(r.scan.hashed_files, 5);
        assert_eq!(r.scan.new_blobs, 5, "five distinct contents");
        assert_eq!(r.scan.symlinks, 1);
        assert!(r.recorded.is_none(), "a first before half records nothing");
        // Let the clock pass the scan stamp so nothing is racily clean.
        std::thread::sleep(Duration::from_millis(20));
        let r2 = store.snapshot(&t("t1"), None, true, &NoProgress)?;
        assert_eq!(
            r2.scan.hashed_files, 0,
            "the stat cache vouches for every file"
        );
        assert_eq!(r2.scan.new_blobs, 0);
        let rec = r2.recorded.expect("the after half records");
        assert!(rec.changes.is_empty(), "{:?}", rec.changes);
        assert!(rec.captured.is_empty());
        assert_eq!(
            store.turn(&t("t1"))?.files.len(),
            0,
            "the turn exists, empty"
        );
        // A fresh process sees the same store (the blobs are in the log).
        let again = Store::open(dir.path())?;
        assert_eq!(again.index.blobs.len(), 5);
        Ok(())
    }

    #[test]
    fn racily_clean_files_are_hashed_not_trusted() -> TestResult {
        let (dir, mut store) = project();
        // A file stamped in the future is at or after any scan's stamp: the
        // scan cannot tell a later same-tick write from its own read.
        let future = SystemTime::now() + Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(dir.path().join("README.md"))?
            .set_modified(future)?;
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        std::thread::sleep(Duration::from_millis(20));
        let r = store.snapshot(&t("t1"), None, true, &NoProgress)?;
        assert_eq!(
            r.scan.hashed_files, 1,
            "only the racily clean file is read again"
        );
        Ok(())
    }

    #[test]
    fn after_half_records_every_change_and_rewind_restores_byte_for_byte() -> TestResult {
        let (dir, mut store) = project();
        let root = dir.path();
        let before = state(root);
        store.snapshot(&t("t1"), Some("shell"), false, &NoProgress)?;
        // What a command does: modify, delete, rename, create a nested tree,
        // chmod, retarget a symlink.
        put(root, "src/main.rs", b"fn main() { broken }\n");
        fs::remove_file(root.join("README.md"))?;
        fs::rename(root.join("src/lib.rs"), root.join("src/moved.rs"))?;
        put(root, "gen/a/b/c.txt", b"generated\n");
        fs::set_permissions(root.join(".env"), fs::Permissions::from_mode(0o755))?;
        fs::remove_file(root.join("main-link"))?;
        std::os::unix::fs::symlink("elsewhere", root.join("main-link"))?;
        let r = store.snapshot(&t("t1"), Some("shell"), true, &NoProgress)?;
        let rec = r.recorded.expect("recorded");
        let c = &rec.changes;
        assert_eq!(c.modified, [".env", "main-link", "src/main.rs"]);
        assert_eq!(c.created, ["gen/", "gen/a/", "gen/a/b/", "gen/a/b/c.txt"]);
        assert_eq!(c.deleted, ["README.md"]);
        assert_eq!(
            c.renamed,
            [Renamed {
                from: "src/lib.rs".into(),
                to: "src/moved.rs".into()
            }]
        );
        assert!(c.not_captured.is_empty(), "{:?}", c.not_captured);
        let report = store.rewind(&t("t1"), &RewindOptions::default())?;
        assert!(report.complete(), "{:?}", report.failed);
        assert_eq!(state(root), before);
        Ok(())
    }

    #[test]
    fn excluded_paths_are_listed_and_their_changes_reported_not_captured() -> TestResult {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        put(root, "app.js", b"v1\n");
        put(root, "node_modules/dep/index.js", b"dep\n");
        put(root, "build/out.txt", b"built\n");
        put(root, "dist/bundle.js", b"bundle\n");
        put(root, "run.log", b"log\n");
        put(root, "big.bin", &[7u8; 2048]);
        put(root, IGNORE_FILE, b"*.log\n!build/\n");
        // A default exclusion holds only for generated output: git ignores it.
        put(root, ".gitignore", b"dist/\nbuild/\n");
        let opts = Options {
            max_file_size: 1024,
            ..Options::default()
        };
        let mut store = Store::open_with(root, opts)?;
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        let st = store.status(&NoProgress)?;
        let listed: Vec<&str> = st.not_covered.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(listed, ["big.bin", "dist/", "node_modules/", "run.log"]);
        assert!(st.not_covered[2].reason.contains("by default"));
        assert!(st.not_covered[3].reason.contains(".turnbackignore"));
        assert!(st.not_covered[0].reason.contains("cap"));
        std::thread::sleep(Duration::from_millis(20));
        put(root, "build/out.txt", b"rebuilt\n");
        put(root, "run.log", b"log\nmore\n");
        put(root, "node_modules/new-dep/index.js", b"new\n");
        let r = store.snapshot(&t("t1"), None, true, &NoProgress)?;
        let rec = r.recorded.expect("recorded");
        assert_eq!(
            rec.changes.modified,
            ["build/out.txt"],
            "!build/ covers it again"
        );
        let nc: Vec<(&str, ChangeKind)> = rec
            .changes
            .not_captured
            .iter()
            .map(|n| (n.path.as_str(), n.change))
            .collect();
        assert_eq!(
            nc,
            [
                ("node_modules/", ChangeKind::Modified),
                ("run.log", ChangeKind::Modified)
            ]
        );
        // The turn says so, and a rewind reports them as not restored.
        let report = store.rewind(&t("t1"), &RewindOptions::default())?;
        let failed: Vec<&str> = report.failed.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(failed, ["node_modules", "run.log"]);
        assert_eq!(fs::read(root.join("build/out.txt"))?, b"built\n");
        Ok(())
    }

    #[test]
    fn a_path_the_turn_captured_through_a_file_tool_keeps_its_earlier_pre_image() -> TestResult {
        let (dir, mut store) = project();
        let root = dir.path();
        store.write(&t("t1"), None, "src/main.rs", b"edited by a file tool\n")?;
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        put(root, "src/main.rs", b"then by sed\n");
        let r = store.snapshot(&t("t1"), None, true, &NoProgress)?;
        let rec = r.recorded.expect("recorded");
        assert_eq!(rec.already_captured, [RelPath::parse("src/main.rs")?]);
        assert!(rec.captured.is_empty());
        store.rewind(&t("t1"), &RewindOptions::default())?;
        assert_eq!(fs::read(root.join("src/main.rs"))?, b"fn main() {}\n");
        Ok(())
    }

    #[test]
    fn an_unchanged_scan_writes_only_the_head_and_a_change_the_whole_tree() -> TestResult {
        let (dir, mut store) = project();
        let root = dir.path();
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        let tree_file = store.store_dir().join(tree::TREE_FILE);
        let head_file = store.store_dir().join(tree::HEAD_FILE);
        store.snapshot(&t("t1"), None, true, &NoProgress)?;
        std::thread::sleep(Duration::from_millis(20));
        // Settle racily clean entries, then nothing changes.
        store.snapshot(&t("t2"), None, false, &NoProgress)?;
        let inode = |p: &Path| fs::metadata(p).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        let before = inode(&tree_file)?;
        let r = store.snapshot(&t("t3"), None, false, &NoProgress)?;
        assert_eq!(r.scan.hashed_files, 0);
        assert_eq!(inode(&tree_file)?, before, "the tree is not rewritten");
        assert!(head_file.exists());
        assert!(r.scan.tree_bytes < 100, "{}", r.scan.tree_bytes);
        let Loaded::Tree(now) = tree::load(&store.dirs().store, &store.store_path)? else {
            return Err("tree".into());
        };
        assert!(
            now.pending && now.turn == t("t3"),
            "the head says t3 is pending"
        );
        // The after half finds its before half pending (no warning).
        put(root, "README.md", b"changed by t3's command\n");
        let r = store.snapshot(&t("t3"), None, true, &NoProgress)?;
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(
            r.recorded.expect("recorded").changes.modified,
            ["README.md"]
        );
        assert_ne!(inode(&tree_file)?, before, "a change rewrites the tree");
        assert!(!head_file.exists(), "and removes the head");
        store.rewind(&t("t3"), &RewindOptions::default())?;
        assert_eq!(fs::read(root.join("README.md"))?, b"# readme\n");
        Ok(())
    }

    #[test]
    fn a_before_half_left_pending_is_completed_into_its_own_turn() -> TestResult {
        let (dir, mut store) = project();
        let root = dir.path();
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        put(root, "README.md", b"changed by a command that was killed\n");
        let r = store.snapshot(&t("t2"), None, false, &NoProgress)?;
        let rec = r.recorded.expect("the pending half is completed");
        assert_eq!(rec.turn, t("t1"));
        assert_eq!(rec.changes.modified, ["README.md"]);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("never got its after half"))
        );
        store.rewind(&t("t1"), &RewindOptions::default())?;
        assert_eq!(fs::read(root.join("README.md"))?, b"# readme\n");
        Ok(())
    }

    #[test]
    fn an_after_half_with_no_snapshot_is_a_clear_error_and_stores_nothing() {
        let (dir, mut store) = project();
        let err = store.snapshot(&t("t1"), None, true, &NoProgress);
        assert!(matches!(err, Err(Error::NoSnapshot { .. })), "{err:?}");
        assert!(
            !crate::location::store_dir_of(dir.path())
                .join(tree::TREE_FILE)
                .exists()
        );
        assert!(store.turns().is_empty());
    }

    #[test]
    fn the_walk_lists_what_it_cannot_cover_and_never_enters_it() -> TestResult {
        use std::ffi::OsStr;
        let (dir, mut store) = project();
        let root = dir.path();
        put(root, "odd\\name.txt", b"backslash\n");
        fs::write(
            root.join(OsStr::from_bytes(b"latin1-\xe9.txt")),
            b"not utf-8\n",
        )?;
        put(root, "bad\\dir/inside.txt", b"never walked\n");
        put(root, "node_modules/pkg/index.js", b"module.exports = 1;\n");
        put(root, "sub/.git/HEAD", b"ref: refs/heads/main\n");
        put(root, "sub/.turnback/log.jsonl", b"{}\n");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )?;
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        let Loaded::Tree(tree) = tree::load(&store.dirs().store, &store.store_path)? else {
            return Err("no tree state".into());
        };
        let kinds: BTreeMap<String, String> = tree
            .entries
            .iter()
            .map(|e| {
                let k = match &e.kind {
                    Kind::File { .. } => "file".to_owned(),
                    Kind::Symlink { .. } => "symlink".to_owned(),
                    Kind::Dir => "dir".to_owned(),
                    Kind::Excluded(x) => format!("{x:?}"),
                };
                (String::from_utf8_lossy(&e.path).into_owned(), k)
            })
            .collect();
        let want: BTreeMap<String, String> = [
            (".env", "file"),
            ("README.md", "file"),
            // A backslash and bytes that are not UTF-8 are ordinary
            // bytes of a name: covered; a nested repository too.
            ("bad\\dir", "dir"),
            ("bad\\dir/inside.txt", "file"),
            ("docs", "dir"),
            ("docs/empty", "dir"),
            ("docs/empty-dir-holder", "file"),
            ("fifo", "Special"),
            ("latin1-\u{fffd}.txt", "file"),
            ("main-link", "symlink"),
            ("node_modules", "Default(\"node_modules/\")"),
            ("odd\\name.txt", "file"),
            ("src", "dir"),
            ("src/lib.rs", "file"),
            ("src/main.rs", "file"),
            ("sub", "dir"),
            // A nested `.turnback` is the user's, not a store.
            ("sub/.turnback", "dir"),
            ("sub/.turnback/log.jsonl", "file"),
            ("sub/.git", "dir"),
            ("sub/.git/HEAD", "file"),
        ]
        .into_iter()
        .map(|(p, k)| (p.to_owned(), k.to_owned()))
        .collect();
        assert_eq!(kinds, want);
        Ok(())
    }

    #[test]
    fn a_nested_ignore_file_applies_to_its_subtree_and_overrides_the_root() -> TestResult {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        put(root, IGNORE_FILE, b"*.log\n");
        put(root, "top.log", b"root pattern\n");
        put(root, "top.tmp", b"no pattern here\n");
        put(
            root,
            "svc/.turnbackignore",
            b"*.tmp\n!keep.log\ncache/\n{a,b\n",
        );
        put(root, "svc/a.tmp", b"nested pattern\n");
        put(root, "svc/keep.log", b"re-included below the root\n");
        put(root, "svc/other.log", b"root pattern still applies\n");
        put(root, "svc/cache/x.bin", b"never walked\n");
        put(root, "svc/deep/b.tmp", b"nested pattern, deeper\n");
        put(root, "svc/deep/c.txt", b"covered\n");
        let mut store = Store::open(root)?;
        let r = store.snapshot(&t("t1"), None, false, &NoProgress)?;
        assert!(
            r.warnings.iter().any(|w| w.contains("svc/.turnbackignore")),
            "the bad line is named: {:?}",
            r.warnings
        );
        let st = store.status(&NoProgress)?;
        let not_covered: BTreeMap<&str, &str> = st
            .not_covered
            .iter()
            .map(|n| (n.path.as_str(), n.reason.as_str()))
            .collect();
        let paths: Vec<&str> = not_covered.keys().copied().collect();
        assert_eq!(
            paths,
            [
                "svc/a.tmp",
                "svc/cache/",
                "svc/deep/b.tmp",
                "svc/other.log",
                "top.log"
            ]
        );
        assert!(
            not_covered["svc/a.tmp"].contains("*.tmp"),
            "{not_covered:?}"
        );
        // What is covered comes back after a command deletes it.
        std::thread::sleep(Duration::from_millis(20));
        fs::remove_file(root.join("svc/keep.log"))?;
        fs::remove_file(root.join("svc/deep/c.txt"))?;
        fs::remove_file(root.join("top.tmp"))?;
        let after = store.snapshot(&t("t1"), None, true, &NoProgress)?;
        let mut captured: Vec<String> = after
            .recorded
            .expect("recorded")
            .captured
            .iter()
            .map(|e| e.path.as_str().to_owned())
            .collect();
        captured.sort();
        assert_eq!(captured, ["svc/deep/c.txt", "svc/keep.log", "top.tmp"]);
        store.rewind(&t("t1"), &RewindOptions::default())?;
        assert_eq!(
            fs::read(root.join("svc/keep.log"))?,
            b"re-included below the root\n"
        );
        Ok(())
    }

    #[test]
    fn a_damaged_tree_is_reported_and_rebuilt_without_storing_twice() -> TestResult {
        let (dir, mut store) = project();
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        let tree_path = crate::location::store_dir_of(dir.path()).join(tree::TREE_FILE);
        let mut bytes = fs::read(&tree_path)?;
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x10;
        fs::write(&tree_path, bytes)?;
        let r = store.snapshot(&t("t2"), None, false, &NoProgress)?;
        assert!(
            r.warnings.iter().any(|w| w.contains("checksum")),
            "{:?}",
            r.warnings
        );
        assert_eq!(r.scan.hashed_files, 5, "every file is hashed again");
        assert_eq!(r.scan.new_blobs, 0, "and nothing is stored twice");
        assert!(matches!(
            tree::load(&store.dirs().store, &store.store_path)?,
            Loaded::Tree(_)
        ));
        Ok(())
    }

    #[test]
    fn a_deleted_empty_directory_is_captured_with_its_mode_and_rewound() -> TestResult {
        let (dir, mut store) = project();
        let empty = dir.path().join("docs/empty");
        fs::set_permissions(&empty, fs::Permissions::from_mode(0o2750))?;
        let before = state(dir.path());
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        fs::remove_dir(&empty)?;
        let r = store.snapshot(&t("t1"), None, true, &NoProgress)?;
        let rec = r.recorded.expect("recorded");
        assert!(rec.changes.not_captured.is_empty(), "{:?}", rec.changes);
        assert_eq!(rec.changes.deleted, ["docs/empty/"]);
        assert_eq!(rec.captured[0].pre, Pre::Dir { mode: 0o2750 });
        let report = store.rewind(&t("t1"), &RewindOptions::default())?;
        assert!(report.complete(), "{:?}", report.failed);
        assert_eq!(state(dir.path()), before);
        Ok(())
    }

    #[test]
    fn a_directory_replaced_by_a_file_is_rewound() -> TestResult {
        let (dir, mut store) = project();
        let root = dir.path();
        let before = state(root);
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        fs::remove_dir_all(root.join("docs"))?;
        put(root, "docs", b"now a file\n");
        store.snapshot(&t("t1"), None, true, &NoProgress)?;
        let report = store.rewind(&t("t1"), &RewindOptions::default())?;
        assert!(report.complete(), "{:?}", report.failed);
        assert_eq!(state(root), before);
        Ok(())
    }

    #[test]
    fn status_groups_changes_and_names_turns_that_captured_them() -> TestResult {
        let (dir, mut store) = project();
        let root = dir.path();
        let st = store.status(&NoProgress)?;
        assert!(st.snapshot.is_none());
        assert_eq!(st.changes.created.len(), 9, "{:?}", st.changes.created);
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        std::thread::sleep(Duration::from_millis(20));
        // A touch without a change is not a modification.
        fs::File::options()
            .write(true)
            .open(root.join("src/lib.rs"))?
            .set_modified(SystemTime::now())?;
        put(root, ".env", b"API_URL=http://localhost\n");
        store.write(&t("t2"), None, "README.md", b"by a file tool\n")?;
        put(root, "notes.md", b"new\n");
        fs::remove_file(root.join("docs/empty-dir-holder"))?;
        let st = store.status(&NoProgress)?;
        assert_eq!(st.changes.modified, [".env", "README.md"]);
        assert_eq!(st.changes.created, ["notes.md"]);
        assert_eq!(st.changes.deleted, ["docs/empty-dir-holder"]);
        assert_eq!(st.captured.len(), 1);
        assert_eq!(st.captured[0].path, "README.md");
        assert_eq!(st.captured[0].turn, t("t2"));
        assert_eq!(st.snapshot.map(|b| b.pending), Some(true));
        Ok(())
    }

    #[test]
    fn directory_patterns_never_exclude_a_file_and_file_patterns_do() -> TestResult {
        assert!(dir_only("build/") && dir_only("  ") && dir_only("# c") && dir_only("x/  "));
        assert!(!dir_only("*.log") && !dir_only("!keep") && !dir_only("x/\t"));
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        put(root, IGNORE_FILE, b"data/\n");
        put(root, "data", b"a file named like the directory pattern\n");
        put(root, "sub/data/x", b"x\n");
        put(root, "sub/.turnbackignore", b"*.tmp\n");
        put(root, "sub/a.tmp", b"tmp\n");
        put(root, "a.tmp", b"not under sub\n");
        let mut store = Store::open(root)?;
        let r = store.snapshot(&t("t1"), None, false, &NoProgress)?;
        let st = store.status(&NoProgress)?;
        let left_out: Vec<&str> = st.not_covered.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(left_out, ["sub/a.tmp", "sub/data/"], "{:?}", st.not_covered);
        // Covered: the file `data`, `a.tmp` at the root, both ignore files.
        assert_eq!(r.scan.files, 4);
        Ok(())
    }

    #[test]
    fn a_command_that_changes_nothing_appends_nothing_to_an_existing_turn() -> TestResult {
        let (dir, mut store) = project();
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        let log = crate::location::store_dir_of(dir.path()).join(crate::log::LOG_FILE);
        let first = fs::read(&log)?.len();
        store.snapshot(&t("t1"), None, true, &NoProgress)?;
        assert!(
            fs::read(&log)?.len() > first,
            "the first after half creates t1"
        );
        assert!(store.turn(&t("t1")).is_ok());
        let created = fs::read(&log)?.len();
        for _ in 0..3 {
            store.snapshot(&t("t1"), None, false, &NoProgress)?;
            let r = store.snapshot(&t("t1"), None, true, &NoProgress)?;
            assert!(r.recorded.is_some_and(|rec| rec.changes.is_empty()));
        }
        assert_eq!(
            fs::read(&log)?.len(),
            created,
            "no record for read-only commands"
        );
        Ok(())
    }

    #[test]
    fn the_walk_gives_paths_in_byte_order_without_a_global_sort() -> TestResult {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        // Names that sort around a directory's `/`: '-' and '.' sort before
        // it, '0' and 'b' after.
        for rel in [
            "a/x", "a/b/c", "a/b.d", "a/b-e/f", "a-b", "a.c", "a0", "b", "a/b0",
        ] {
            put(root, rel, rel.as_bytes());
        }
        let mut store = Store::open(root)?;
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        let Loaded::Tree(tree) = tree::load(&store.dirs().store, &store.store_path)? else {
            return Err("a tree".into());
        };
        let got: Vec<String> = tree.entries.iter().map(|e| e.path_lossy()).collect();
        let mut want = got.clone();
        want.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        want.dedup();
        assert_eq!(got, want);
        assert_eq!(got.len(), 12, "9 files and 3 directories: {got:?}");
        Ok(())
    }

    #[test]
    fn gc_keeps_the_scan_blobs_the_tree_names_and_drops_the_others() -> TestResult {
        let (dir, mut store) = project();
        let root = dir.path();
        let packs = |root: &Path| -> std::io::Result<usize> {
            Ok(fs::read_dir(crate::location::store_dir_of(root).join("packs"))?.count())
        };
        // t1: a command changes README.md (v1 -> v2).
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        put(root, "README.md", b"v2 by t1's command\n");
        store.snapshot(&t("t1"), None, true, &NoProgress)?;
        // The user edits it (v3); t2's command changes it again (v4).
        put(root, "README.md", b"v3 by the user\n");
        store.snapshot(&t("t2"), None, false, &NoProgress)?;
        put(root, "README.md", b"v4 by t2's command\n");
        // Past the clock tick of that write, so nothing is racily clean.
        std::thread::sleep(Duration::from_millis(20));
        store.snapshot(&t("t2"), None, true, &NoProgress)?;
        let packs_before = packs(root)?;
        // Keep t2 only: v1 was t1's pre-image, v2 is named by nothing.
        let report = store.gc(&crate::GcOptions {
            keep_turns: Some(1),
            ..crate::GcOptions::default()
        })?;
        assert_eq!(report.dropped_turns, ["t1"]);
        assert!(
            packs(root)? < packs_before,
            "the pack holding only v2 is deleted"
        );
        let verify = store.verify()?;
        assert!(verify.whole, "{:#?}", verify.damage);
        // The current files' blobs are still known: the next scan reads
        // and stores nothing.
        let mut store = Store::open(root)?;
        let r = store.snapshot(&t("t3"), None, false, &NoProgress)?;
        assert_eq!((r.scan.hashed_files, r.scan.new_blobs), (0, 0));
        // And t2 rewinds to the user's v3.
        store.rewind(&t("t2"), &RewindOptions::default())?;
        assert_eq!(fs::read(root.join("README.md"))?, b"v3 by the user\n");
        // Without a readable tree state, gc keeps every scan blob.
        fs::write(crate::location::store_dir_of(root).join("tree"), b"damaged")?;
        let before = packs(root)?;
        store.gc(&crate::GcOptions::default())?;
        assert_eq!(packs(root)?, before);
        Ok(())
    }
}
