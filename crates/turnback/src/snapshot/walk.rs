//! The walk of a snapshot: every path under the project root, in byte
//! order, with its stat, before any file is read.
//!
//! Each directory is opened and listed by one task on the rayon pool, from
//! its parent's descriptor (`openat` with `O_NOFOLLOW`), and each entry is
//! `fstatat`ed relative to it: no path is resolved from the root again, and
//! a directory swapped for a symlink during the walk is not followed. A
//! task opens its own directory, so the descriptors open at once are
//! bounded by the directories being listed and their parents, not by how
//! many subdirectories one directory has (a folder of 600 packages walks
//! under a limit of 64 descriptors, `tests/limits.rs`; macOS's default is
//! 256). A process whose descriptor table stays small also never waits for
//! the kernel to grow it (an RCU grace period per doubling, which the
//! other walking thread spent idle).
//!
//! Each task sorts its own listing; the listings are put together depth
//! first ([`assemble`]), which gives the paths in byte order without a
//! sort of every path. A directory whose stat is the one the old
//! tree holds for it (not racily clean) is not listed again: its names are
//! the old tree's, and each is still looked at (as git's untracked cache
//! does; see [`WalkCtx::same_names`]). Each task is handed its directory's
//! old entry and the old entries below it by its parent, so no task
//! searches the whole old tree. An entry found exactly as the old
//! tree has it is not copied (see [`WalkCtx::as_old`]), and a walk that
//! finds every old entry so and nothing else says so ([`Listing::AsOld`]):
//! the common snapshot half, before or after a command that changed
//! nothing, then neither builds nor merges a second tree of every path.
//! turnback's own temporary files (`.NAME.turnback-tmp-PID-N`) are never
//! listed. The root's `.git/` and `.turnback/` and a store directory
//! inside the project are never entered; what ignore rules
//! or the size cap leave out is found as excluded (a directory with the
//! stat of its whole subtree folded in, see [`crate::subtree_stat`]), and
//! what cannot be listed or named as unreadable.

use crate::sys::OwnedFd;
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::sys::fs::{Mode, OFlags};

use super::Progress;
use crate::exclude::{IGNORE_FILE, Ignores, nested_matcher};
use crate::fsmonitor::Unheld;
use crate::path::STORE_DIR;
use crate::tree::{Entry, Excluded, Kind, Stat, Totals, Tree};

/// What a walk with the old tree found.
pub(super) enum Listing {
    /// Every path, in byte order.
    Found(Vec<Found>),
    /// Exactly the old tree's entries, each with the stat it has there
    /// (a file not racily clean), and nothing else; with their counts,
    /// taken by the walking threads as they found them.
    AsOld(Totals),
    /// The old tree with a patch (only the paths Watchman named were
    /// looked at; see [`walk_changed`]).
    Patch(Patch),
}

/// How a walk uses the old tree (see [`walk`]).
#[derive(Clone, Copy)]
pub(super) struct Old<'a> {
    pub(super) tree: &'a Tree,
    /// Whether every directory stat it holds was taken by a walk that
    /// listed the directory (see `Store::listed_whole`): only then may a
    /// directory with its old stat keep its old names.
    pub(super) listed_whole: bool,
    /// Whether a file with its old stat may be found as the old tree's
    /// entry: not when its blob must be looked up (see [`crate::tree`]'s
    /// `tree-recheck`).
    pub(super) files_as_old: bool,
}

/// Walks the tree below `root_fd` (the project root `root`, opened with a
/// descriptor of its own: a dup would share the listing offset). Returns
/// what was found, in byte order of paths, or that it is exactly the old
/// tree's entries; warnings about ignore files; and the inodes of the
/// entries with names the walk did not find (see
/// [`crate::fsmonitor::Unheld`]). An error only when the root itself
/// cannot be listed.
pub(super) fn walk(
    root: &Path,
    root_fd: OwnedFd,
    ignores: Ignores,
    cap: u64,
    store_inside: Option<Vec<u8>>,
    progress: &dyn Progress,
    old: Option<Old<'_>>,
) -> io::Result<(Listing, Vec<String>, Unheld)> {
    let mut ctx = WalkCtx::new(root, cap, progress, store_inside);
    if let Some(o) = old {
        ctx.old = &o.tree.entries;
        ctx.stamp_ns = o.tree.stamp_ns;
        ctx.files_as_old = o.files_as_old;
        // A directory keeps its old names only where the root's file
        // system keeps a directory's times in step with its entries, and
        // only on it.
        if o.listed_whole
            && crate::sys::dir_times_follow_entries(&root_fd)
            && let Ok(st) = crate::sys::fs::fstat(&root_fd)
        {
            ctx.old_dev = Some(crate::sys::dev(&st));
        }
    }
    let all = ctx.old;
    let walked =
        rayon::scope(|s| ctx.walk_dir(root_fd, Vec::new(), false, all, Arc::new(ignores), s));
    match walked {
        Ok(()) => {}
        // The project folder itself was deleted (`cd .. && rm -rf
        // proj`): it holds nothing now, and every file it held is a
        // deletion the tree's blobs can undo.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let poisoned = || io::Error::other("a walker thread panicked");
    let warnings = ctx.warnings.into_inner().map_err(|_| poisoned())?;
    let listings = ctx.out.into_inner().map_err(|_| poisoned())?;
    let unlisted: Unlisted = ctx.unlisted.into_inner().map_err(|_| poisoned())?;
    let linked = ctx.linked.into_inner().map_err(|_| poisoned())?;
    let unheld = Unheld::of(unheld_of(linked).into_iter().map(|(ino, _)| ino).collect());
    // Every item found as an old entry, each old entry once (a listing
    // holds each path once), and nothing else: the old tree's entries.
    let tally = ctx.tally.into_inner().map_err(|_| poisoned())?;
    if old.is_some() && unlisted.is_empty() && tally.found == 0 && tally.same == ctx.old.len() {
        return Ok((Listing::AsOld(tally.totals), warnings, unheld));
    }
    let found = assemble(listings, unlisted);
    debug_assert!(
        found.windows(2).all(|w| w[0].path < w[1].path),
        "the walk's paths are sorted and unique"
    );
    Ok((Listing::Found(found), warnings, unheld))
}

/// What the walk found at a path, before any file is read.
#[derive(Debug, PartialEq)]
pub(super) struct Found {
    pub(super) path: Vec<u8>,
    pub(super) stat: Stat,
    pub(super) kind: FoundKind,
}

#[derive(Debug, PartialEq)]
pub(super) enum FoundKind {
    File,
    Symlink(String),
    Dir,
    Excluded(Excluded),
}

/// A covered directory a listing (or a look) found, to be opened and
/// listed by a task of its own: its path, device and stat as found.
pub(super) struct Subdir {
    path: Vec<u8>,
    dev: u64,
    stat: Stat,
}

/// A directory's entry in the old tree, if it has one, and the old entries
/// below it (all of them for the root), which its parent found for it.
#[derive(Clone, Copy, Default)]
struct OldDir<'a> {
    entry: Option<&'a Entry>,
    below: &'a [Entry],
}

/// What [`WalkCtx::old_names`] steps over in the old entries below a
/// directory: a name's entry, or the run of entries below the name at a
/// path.
enum Step<'a, 'p> {
    Name(&'a Entry),
    Below(&'p [u8], &'a [Entry]),
}

/// How a directory to list is opened: never through a symlink.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

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
    out: Mutex<Vec<(Vec<u8>, Vec<Item<'a>>)>>,
    /// What the listings hold, counted.
    tally: Mutex<Tally>,
    /// Directories that could not be opened or listed (entirely or to the
    /// end), or were gone when their task opened them.
    unlisted: Mutex<Unlisted>,
    /// The store's directory, when it lies inside the project (a data
    /// directory under the root): never walked.
    store_inside: Option<Vec<u8>>,
    /// The old tree's entries and stamp: an entry found as one of them
    /// has is not copied (see [`WalkCtx::as_old`]); a directory whose stat
    /// is the one they hold, not racily clean, is not listed again (see
    /// [`WalkCtx::same_names`]).
    old: &'a [Entry],
    stamp_ns: i64,
    /// Whether a file with its old stat is found as its old entry.
    files_as_old: bool,
    /// The device of the root, whose file system keeps a directory's
    /// times in step with its entries (see
    /// [`crate::sys::dir_times_follow_entries`]): a directory on another
    /// (a mount inside the project) is always listed.
    old_dev: Option<u64>,
    /// Every non-directory found with more than one name: its path, inode
    /// and number of names (few; see [`unheld_of`]).
    linked: Mutex<Vec<Linked>>,
}

/// A non-directory found with more than one name.
struct Linked {
    path: Vec<u8>,
    ino: u64,
    nlink: u64,
}

/// Of the names `linked` that a walk found (every name it found of each
/// inode), the inodes with more names than it found: hard links whose
/// other names lie inside an excluded directory or outside the project
/// (see [`crate::fsmonitor::Unheld`]), each with one path of it.
fn unheld_of(mut linked: Vec<Linked>) -> Vec<(u64, Vec<u8>)> {
    linked.sort_unstable_by(|a, b| (a.ino, &a.path).cmp(&(b.ino, &b.path)));
    // A path looked at, then walked again with its directory, is one name.
    linked.dedup_by(|a, b| a.ino == b.ino && a.path == b.path);
    linked
        .chunk_by(|a, b| a.ino == b.ino)
        .filter(|names| names.iter().any(|n| n.nlink > names.len() as u64))
        .map(|names| (names[0].ino, names[0].path.clone()))
        .collect()
}

/// The items of the listings: how many were found as their old entries
/// (and those entries' counts), how many otherwise.
#[derive(Default)]
struct Tally {
    same: usize,
    found: usize,
    totals: Totals,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.same += other.same;
        self.found += other.found;
        self.totals.add(&other.totals);
    }
}

/// One item of a directory's listing, in the order of full paths.
enum Item<'a> {
    /// An entry of the directory (boxed: most entries are found as old,
    /// and an item is then the size of a pointer or two, not of a
    /// `Found`).
    Found(Box<Found>),
    /// An entry of the directory found exactly as the old tree has it.
    Same(&'a Entry),
    /// The entries below the subdirectory at this path, listed by its own
    /// task: they sort after every sibling whose name sorts before the
    /// subdirectory's name followed by `/`.
    Subtree(Vec<u8>),
}

impl Item<'_> {
    /// What was found at an entry (not at a subtree).
    fn into_found(self) -> Option<Found> {
        match self {
            Item::Found(f) => Some(*f),
            Item::Same(e) => Some(found_of(e)),
            Item::Subtree(_) => None,
        }
    }

    fn path(&self) -> &[u8] {
        match self {
            Item::Found(f) => &f.path,
            Item::Same(e) => &e.path,
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

/// The directories a walk found but could not list, by path: what
/// replaces each one's entry in its parent's listing, an unreadable entry,
/// or nothing when it was gone by the time its task opened it.
type Unlisted = HashMap<Vec<u8>, Option<Found>>;

/// Puts the walk's listings together depth first, which gives the found
/// paths in byte order without sorting them all; a directory that could
/// not be listed replaces its entry in its parent.
fn assemble(listings: Vec<(Vec<u8>, Vec<Item<'_>>)>, mut unlisted: Unlisted) -> Vec<Found> {
    let total = listings.iter().map(|(_, items)| items.len()).sum();
    let mut by_dir = listings;
    by_dir.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::with_capacity(total);
    crate::sys::huge_pages(&mut out);
    assemble_below(&mut by_dir, &mut unlisted, &[], &mut out);
    // Every unlisted directory was listed by its parent, so none is left;
    // were one left, it is kept, in order, rather than lost.
    if !unlisted.is_empty() {
        out.extend(unlisted.into_values().flatten());
        out.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    }
    out
}

/// Appends to `out`, in byte order, every path the listings hold below the
/// directory `start` (the listings sorted by directory path).
fn assemble_below(
    by_dir: &mut [(Vec<u8>, Vec<Item<'_>>)],
    unlisted: &mut Unlisted,
    start: &[u8],
    out: &mut Vec<Found>,
) {
    let mut take = |dir: &[u8]| -> Vec<Item<'_>> {
        by_dir
            .binary_search_by(|(p, _)| p.as_slice().cmp(dir))
            .map(|i| std::mem::take(&mut by_dir[i].1))
            .unwrap_or_default()
    };
    let mut stack = vec![take(start).into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            None => {
                stack.pop();
            }
            Some(Item::Found(f)) if unlisted.is_empty() => out.push(*f),
            Some(Item::Found(f)) => match unlisted.remove(&f.path) {
                None => out.push(*f),
                Some(instead) => out.extend(instead),
            },
            Some(Item::Same(e)) => match unlisted.remove(&e.path) {
                None => out.push(found_of(e)),
                Some(instead) => out.extend(instead),
            },
            Some(Item::Subtree(p)) => stack.push(take(&p).into_iter()),
        }
    }
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

impl<'a> WalkCtx<'a> {
    /// A walk of `root` with nothing found yet.
    fn new(
        root: &'a Path,
        cap: u64,
        progress: &'a dyn Progress,
        store_inside: Option<Vec<u8>>,
    ) -> Self {
        WalkCtx {
            root,
            cap,
            warnings: Mutex::new(Vec::new()),
            seen: AtomicU64::new(0),
            progress,
            out: Mutex::new(Vec::new()),
            tally: Mutex::new(Tally::default()),
            unlisted: Mutex::new(HashMap::new()),
            store_inside,
            old: &[],
            stamp_ns: i64::MIN,
            files_as_old: false,
            old_dev: None,
            linked: Mutex::new(Vec::new()),
        }
    }

    /// Whether the directory whose old entry is `e` and whose stat is now
    /// `stat` holds the names the old tree lists in it: `e` is a directory
    /// with the same stat, not racily clean. Creating, removing or renaming an
    /// entry sets a directory's mtime and ctime to the file system's clock,
    /// which the old tree's stamp was read from before that directory was
    /// looked at, so such a change since gives it another stat. This is
    /// git's untracked cache: the listing (`getdents`, on ext4 a hash tree
    /// read) is skipped, every entry is still looked at.
    fn same_names(&self, e: &Entry, stat: &Stat) -> bool {
        matches!(e.kind, Kind::Dir) && e.stat == *stat && !e.stat.racy(self.stamp_ns)
    }

    /// Whether what was found at the old entry `e`'s path (its `stat` and
    /// `kind`) is exactly that entry: the same stat and kind, a file not
    /// racily clean (so its blob stands) and only when files may be found
    /// as old, a symlink with the same target, the same reason to exclude.
    fn as_old(&self, e: &Entry, stat: &Stat, kind: &FoundKind) -> bool {
        e.stat == *stat
            && match (kind, &e.kind) {
                (FoundKind::File, Kind::File { .. }) => {
                    self.files_as_old && !stat.racy(self.stamp_ns)
                }
                (FoundKind::Dir, Kind::Dir) => true,
                (FoundKind::Symlink(t), Kind::Symlink { target }) => t == target,
                (FoundKind::Excluded(x), Kind::Excluded(y)) => x == y,
                _ => false,
            }
    }

    /// The names the old tree lists directly in the directory at `rel`
    /// (empty for the root), whose old entries below it are `below`, in byte
    /// order; each with its entry and the entries below that. What lies
    /// below a subdirectory follows the names that sort between it and its
    /// `/` (`a` < `a-b` < `a.c` < `a/x`), and is stepped over by a binary
    /// search.
    fn old_names(rel: &[u8], below: &'a [Entry]) -> (crate::sys::Names, Vec<OldDir<'a>>) {
        // Every path below `rel` starts with `rel/`.
        let skip = if rel.is_empty() { 0 } else { rel.len() + 1 };
        let each = |f: &mut dyn FnMut(Step<'a, '_>)| {
            let mut i = 0;
            while let Some(e) = below.get(i) {
                match e.path[skip..].iter().position(|&b| b == b'/') {
                    None => {
                        f(Step::Name(e));
                        i += 1;
                    }
                    Some(slash) => {
                        // Below the entry `name[..slash]`, which came before.
                        let prefix = &e.path[..skip + slash + 1];
                        let n = below[i..].partition_point(|e| e.path.starts_with(prefix));
                        f(Step::Below(&prefix[..prefix.len() - 1], &below[i..i + n]));
                        i += n;
                    }
                }
            }
        };
        // Counted first, to size both once (see `walk_dir`).
        let (mut count, mut bytes) = (0, 0);
        each(&mut |x| {
            if let Step::Name(e) = x {
                count += 1;
                bytes += e.path.len() - skip + 1;
            }
        });
        let mut names = crate::sys::Names::with_capacity(count, bytes);
        let mut entries: Vec<OldDir<'a>> = Vec::with_capacity(count);
        each(&mut |x| match x {
            Step::Name(e) => {
                names.push_bytes(&e.path[skip..]);
                entries.push(OldDir {
                    entry: Some(e),
                    below: &[],
                });
            }
            // Its directory is among the last names: only names that sort
            // between it and its `/` follow it.
            Step::Below(dir, run) => {
                let owner = entries
                    .iter_mut()
                    .rev()
                    .find(|o| o.entry.is_some_and(|e| e.path == dir));
                if let Some(o) = owner {
                    o.below = run;
                }
            }
        });
        (names, entries)
    }

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
        same_names: bool,
        below: &'a [Entry],
        ignores: Arc<Ignores>,
        scope: &rayon::Scope<'s>,
    ) -> io::Result<()> {
        // Shared with the tasks of its subdirectories, which open them
        // from it: it is closed when the last of them has.
        let dir = Arc::new(dir);
        // The names first: an ignore file among them applies to them all.
        // Listed, each name's old entry is looked up (when there is an old
        // tree); not listed, the old names come with theirs.
        let (buf, failed, olds) = if same_names {
            let (names, olds) = Self::old_names(&rel, below);
            (names, None, Some(olds))
        } else {
            let (names, failed) = crate::sys::list_names(&*dir);
            (names, failed, None)
        };
        let names = buf.names();
        // Sized once: a vector that grows takes `realloc`, which contends
        // for the allocator's lock with the other walking threads.
        let mut items: Vec<Item<'a>> = Vec::with_capacity(names.len());
        let parent = &dir;
        let dir = crate::sys::AsFd::as_fd(&**parent);
        let ignores =
            if !rel.is_empty() && names.iter().any(|n| n.to_bytes() == IGNORE_FILE.as_bytes()) {
                self.nested_ignores(dir, &rel, ignores)
            } else {
                ignores
            };
        // Each entry's path, built in one buffer: only what is found
        // otherwise than the old tree has it is copied out.
        let mut path: Vec<u8> = Vec::with_capacity(rel.len() + 64);
        if !rel.is_empty() {
            path.extend_from_slice(&rel);
            path.push(b'/');
        }
        let prefix = path.len();
        for (k, name) in names.into_iter().enumerate() {
            let bytes = name.to_bytes();
            let root_git = rel.is_empty() && bytes == b".git";
            // Only the root's `.turnback` is turnback's.
            let root_marker = rel.is_empty() && bytes == STORE_DIR.as_bytes();
            // A temporary file of turnback's own (`.NAME.turnback-tmp-PID-N`:
            // a write or a rewind staging, or one killed before its rename)
            // is never the project's: a command that deletes its directory
            // must not record it, and a rewind must not write it back.
            let ours = bytes.first() == Some(&b'.')
                && std::str::from_utf8(bytes).is_ok_and(|n| crate::fsx::temp_owner(n).is_some());
            if bytes == b"." || bytes == b".." || root_git || root_marker || ours {
                continue;
            }
            path.truncate(prefix);
            path.extend_from_slice(bytes);
            if self.store_inside.as_deref() == Some(path.as_slice()) {
                continue;
            }
            // Listed, a name's old entry is searched for among the old
            // entries below this directory.
            let (old, at) = match &olds {
                Some(olds) => (olds.get(k).copied().unwrap_or_default(), None),
                None => match below.binary_search_by(|e| e.path.as_slice().cmp(&path)) {
                    Ok(i) => (
                        OldDir {
                            entry: Some(&below[i]),
                            below: &[],
                        },
                        Some(i),
                    ),
                    Err(_) => (OldDir::default(), None),
                },
            };
            if let Some(sub) = self.visit(dir, name, &path, &ignores, old.entry, &mut items) {
                items.push(Item::Subtree(sub.path.clone()));
                let old = match at {
                    Some(i) => OldDir {
                        below: below_entry(below, i),
                        ..old
                    },
                    None => old,
                };
                let (parent, name) = (Arc::clone(parent), name.to_owned());
                let ignores = Arc::clone(&ignores);
                scope.spawn(move |s| {
                    let opened = crate::sys::fs::openat(&*parent, &name, DIR_FLAGS, Mode::empty());
                    drop(parent);
                    self.walk_subdir(opened, sub, old, ignores, s);
                });
            }
        }
        if let Some(e) = failed {
            if rel.is_empty() {
                return Err(e.into());
            }
            self.push_unlisted(
                rel.clone(),
                Some(Found {
                    path: rel.clone(),
                    stat: Stat::default(),
                    kind: unreadable(e),
                }),
            );
        }
        let skip = if rel.is_empty() { 0 } else { rel.len() + 1 };
        // The old names come in order, a listing seldom does.
        if !items
            .windows(2)
            .all(|w| item_order(&w[0], &w[1], skip).is_lt())
        {
            items.sort_unstable_by(|a, b| item_order(a, b, skip));
            // A name the listing returned twice (changed while listed) once.
            items.dedup_by(|a, b| item_order(a, b, skip).is_eq());
        }
        // Counted here, while the entries are at hand, on every core.
        let mut tally = Tally::default();
        for item in &items {
            match item {
                Item::Same(e) => {
                    tally.same += 1;
                    tally.totals.count(e, 1);
                }
                Item::Found(_) => tally.found += 1,
                Item::Subtree(_) => {}
            }
        }
        self.counted((tally.same + tally.found) as u64);
        self.tally
            .lock()
            .map_err(|_| io::Error::other("a walker thread panicked"))?
            .add(&tally);
        self.out
            .lock()
            .map_err(|_| io::Error::other("a walker thread panicked"))?
            .push((rel, items));
        Ok(())
    }

    /// `ignores` with the `.turnbackignore` of the directory `dir` (at
    /// `rel`) applied on top, when it holds patterns.
    fn nested_ignores(
        &self,
        dir: crate::sys::BorrowedFd<'_>,
        rel: &[u8],
        ignores: Arc<Ignores>,
    ) -> Arc<Ignores> {
        let mut dir_rel = rel.to_vec();
        dir_rel.push(b'/');
        let mut warnings = Vec::new();
        let nested = nested_matcher(dir, &dir_rel, self.root, &mut warnings);
        if let Ok(mut w) = self.warnings.lock() {
            w.extend(warnings);
        }
        match nested {
            Some((matcher, files_too)) => Arc::new(Ignores {
                dir: dir_rel,
                matcher,
                files_too,
                parent: Some(ignores),
            }),
            None => ignores,
        }
    }

    fn push_unlisted(&self, path: Vec<u8>, instead: Option<Found>) {
        if let Ok(mut out) = self.unlisted.lock() {
            out.insert(path, instead);
        }
    }

    /// Lists the covered directory `sub`, `opened` by its own task (from
    /// its parent's descriptor, or from the root for one Watchman named):
    /// one gone by then is left out, one that cannot be opened or listed
    /// is unreadable, in place of its entry in its parent's listing.
    fn walk_subdir<'s>(
        &'s self,
        opened: Result<OwnedFd, crate::sys::Errno>,
        sub: Subdir,
        old: OldDir<'a>,
        ignores: Arc<Ignores>,
        scope: &rayon::Scope<'s>,
    ) {
        let Subdir { path, dev, stat } = sub;
        let fd = match opened {
            Ok(fd) => fd,
            Err(crate::sys::Errno::NOENT) => return self.push_unlisted(path, None),
            Err(e) => {
                let kind = unreadable(e);
                return self.push_unlisted(path.clone(), Some(Found { path, stat, kind }));
            }
        };
        // The directory opened is the one looked at (not one put in its
        // place in between), and has the old tree's stat.
        let same = self.old_dev == Some(dev)
            && old.entry.is_some_and(|e| self.same_names(e, &stat))
            && crate::sys::fs::fstat(&fd).is_ok_and(|st| Stat::of_raw(&st) == stat);
        if let Err(e) = self.walk_dir(fd, path.clone(), same, old.below, ignores, scope) {
            let found = Found {
                path: path.clone(),
                stat: Stat::default(),
                kind: unreadable(e),
            };
            self.push_unlisted(path, Some(found));
        }
    }

    /// Classifies one entry of `dir`, whose old entry is `was`: what is
    /// found is pushed to `seen`, as the old entry when it is found as that
    /// entry (see [`WalkCtx::as_old`]).
    /// For a covered directory, returns it, to be opened and walked (see
    /// [`WalkCtx::walk_subdir`]).
    fn visit(
        &self,
        dir: crate::sys::BorrowedFd<'_>,
        name: &std::ffi::CStr,
        path: &[u8],
        ignores: &Ignores,
        was: Option<&'a Entry>,
        seen: &mut Vec<Item<'a>>,
    ) -> Option<Subdir> {
        use crate::sys::fs::{AtFlags, FileType};
        let st = match crate::sys::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(crate::sys::Errno::NOENT) => return None, // gone since it was listed
            Err(e) => {
                seen.push(Item::Found(Box::new(Found {
                    path: path.to_vec(),
                    stat: Stat::default(),
                    kind: unreadable(e),
                })));
                return None;
            }
        };
        let ft = crate::sys::file_type(crate::sys::mode(&st));
        let is_dir = ft == FileType::Directory;
        if !is_dir && crate::sys::nlink(&st) > 1 {
            let linked = Linked {
                path: path.to_vec(),
                ino: st.st_ino,
                nlink: crate::sys::nlink(&st),
            };
            // A walker thread that panicked took its walk down with it.
            if let Ok(mut l) = self.linked.lock() {
                l.push(linked);
            }
        }
        let excluded = match name_problem(name.to_bytes(), path.len()) {
            Some(why) => Some(Excluded::BadName(why.into())),
            None => (ignores.excluded(path, is_dir))
                .and_then(|why| crate::generated::confirm(why, self.root, dir, name, path)),
        };
        let stat = match &excluded {
            Some(_) if is_dir => crate::subtree_stat::fold(dir, name, Stat::of_raw(&st)),
            _ => Stat::of_raw(&st),
        };
        let mut push = |kind| match was {
            Some(e) if self.as_old(e, &stat, &kind) => seen.push(Item::Same(e)),
            _ => seen.push(Item::Found(Box::new(Found {
                path: path.to_vec(),
                stat,
                kind,
            }))),
        };
        if let Some(why) = excluded {
            push(FoundKind::Excluded(why));
            return None;
        }
        let kind = match ft {
            FileType::RegularFile if stat.size > self.cap => {
                FoundKind::Excluded(Excluded::TooLarge(self.cap))
            }
            FileType::RegularFile => FoundKind::File,
            FileType::Symlink => match crate::sys::fs::readlinkat(dir, name, Vec::new()) {
                Ok(t) => match t.into_string() {
                    Ok(t) => FoundKind::Symlink(t),
                    Err(_) => FoundKind::Excluded(Excluded::BadName(
                        "its symlink target is not valid UTF-8".into(),
                    )),
                },
                Err(crate::sys::Errno::NOENT) => return None,
                Err(e) => unreadable(e),
            },
            FileType::Directory => {
                push(FoundKind::Dir);
                return Some(Subdir {
                    path: path.to_vec(),
                    dev: crate::sys::dev(&st),
                    stat,
                });
            }
            _ => FoundKind::Excluded(Excluded::Special),
        };
        push(kind);
        None
    }
}

/// What a walk of the paths Watchman named found, its warnings, and the
/// new tree's entries with a name it does not hold (see
/// [`crate::fsmonitor::Unheld`]).
pub(super) type Walked = (Patch, Vec<String>, Unheld);

/// A change to the old tree: its entries at `dropped` are gone or
/// replaced, and `fresh` are put in; every other old entry is found as
/// the old tree has it.
#[derive(Debug)]
pub(super) struct Patch {
    /// Indexes into the old tree's entries, ascending.
    pub(super) dropped: Vec<usize>,
    /// In byte order of paths.
    pub(super) fresh: Vec<Found>,
}

impl Patch {
    /// Every path: the old entries that stay and the fresh ones, in byte
    /// order (what [`walk`] would have found).
    pub(super) fn whole(self, old: &[Entry]) -> Vec<Found> {
        let mut out = Vec::with_capacity(old.len() + self.fresh.len());
        crate::sys::huge_pages(&mut out);
        let mut dropped = self.dropped.into_iter().peekable();
        let mut fresh = self.fresh.into_iter().peekable();
        for (i, e) in old.iter().enumerate() {
            if dropped.next_if_eq(&i).is_some() {
                continue;
            }
            while let Some(f) = fresh.next_if(|f| f.path < e.path) {
                out.push(f);
            }
            out.push(found_of(e));
        }
        out.extend(fresh);
        debug_assert!(
            out.windows(2).all(|w| w[0].path < w[1].path),
            "a patch's paths are sorted and unique"
        );
        out
    }
}

/// Names whose change can change what is excluded anywhere below their
/// directory (ignore rules, see [`crate::exclude`]) or whether a directory
/// counts as generated (see [`crate::generated`]): a change to one in a
/// covered directory makes the snapshot scan the whole tree.
const RULE_NAMES: &[&[u8]] = &[b".turnbackignore", b".gitignore"];
const MARKER_NAMES: &[&[u8]] = &[b"CACHEDIR.TAG", b"pyvenv.cfg"];

/// The walk of a snapshot that Watchman told which paths changed since the
/// tree state `old` was taken: the same list [`walk`] would give, built
/// from `old` with only those paths looked at again. `Ok(Err(why))` when
/// the whole tree must be walked instead.
///
/// Each changed path is looked at as the walk would look at it (relative
/// to its parent's descriptor, with the ignore rules in force there):
/// - a path inside the root's `.git/` or `.turnback/`, the store, or one of
///   turnback's temporary files is left out, as the walk leaves it out;
/// - a path below an excluded directory makes that directory looked at
///   again (its stat folded over its subtree, as the walk does);
/// - a path below a directory the tree does not have (a new directory, one
///   that replaced a file) makes the topmost such directory walked whole;
/// - a directory that is new, or another directory than the one the tree
///   has (another inode, or a file before), is walked whole; one that is
///   gone or no longer a directory takes its whole subtree out of the tree;
/// - a changed `.turnbackignore`, `.gitignore`, `CACHEDIR.TAG` or
///   `pyvenv.cfg` in a covered directory can change what is excluded
///   anywhere: the whole tree is walked.
///
/// Paths the tree holds as unreadable are always looked at again, as the
/// walk would, and so are the other names (hard links) of a changed file.
/// A changed file with a name the tree does not hold (`unheld`, the old
/// tree's, or found now with more names than the tree holds) may have it
/// inside an excluded directory, whose folded stat then changed unnamed:
/// when the tree has an excluded entry, the whole tree is walked.
/// What Watchman cannot see: a file also linked from outside the project
/// and written through that outside name (the scan sees its `ctime`).
#[allow(clippy::too_many_arguments)]
pub(super) fn walk_changed(
    root: &Path,
    root_fd: &OwnedFd,
    ignores: Ignores,
    cap: u64,
    store_inside: Option<Vec<u8>>,
    progress: &dyn Progress,
    old: &[Entry],
    changed: Vec<Vec<u8>>,
    outside: Option<&crate::tree::Partial>,
    unheld: &Unheld,
) -> io::Result<Result<Walked, String>> {
    let in_excluded: Vec<Vec<u8>> = changed
        .iter()
        .filter(|p| inside_excluded(old, p))
        .cloned()
        .collect();
    let dirty = match dirty_paths(old, changed, store_inside.as_deref()) {
        Ok(d) => d,
        Err(why) => return Ok(Err(why)),
    };
    if let Some(p) = linked_from_excluded(root_fd, old, outside, &in_excluded) {
        return Ok(Err(format!(
            "{} is another name of a file the tree covers (a hard link), inside an excluded directory",
            crate::path::escaped(&p)
        )));
    }
    let ctx = WalkCtx::new(root, cap, progress, store_inside);
    let root_dir = Some((Arc::new(crate::sys::dup(root_fd)?), Arc::new(ignores)));
    let mut looker = Looker {
        ctx: &ctx,
        old,
        dirs: HashMap::from([(Vec::new(), root_dir)]),
        founds: std::collections::BTreeMap::new(),
        looked: std::collections::BTreeSet::new(),
        cut: std::collections::BTreeSet::new(),
        to_walk: Vec::new(),
    };
    let mut queue: Vec<Vec<u8>> = dirty.into_iter().collect();
    // A path whose parent is no longer a directory makes that ancestor
    // looked at too; ancestors are shallower, so this ends.
    for _round in 0..64 {
        let mut more = Vec::new();
        for p in queue {
            if let Some(anc) = looker.look(&p)? {
                more.push(anc);
            }
        }
        if more.is_empty() {
            break;
        }
        more.sort();
        more.dedup();
        queue = more;
    }
    let Looker {
        founds,
        looked,
        cut,
        to_walk,
        ..
    } = looker;
    let starts: Vec<Vec<u8>> = to_walk.iter().map(|(sub, _)| sub.path.clone()).collect();
    // No thread pool for nothing to walk.
    if !to_walk.is_empty() {
        rayon::scope(|s| {
            for (sub, ig) in to_walk {
                let ctx = &ctx;
                s.spawn(move |s| {
                    let opened = open_below(root_fd, &sub.path);
                    ctx.walk_subdir(opened, sub, OldDir::default(), ig, s);
                });
            }
        });
    }
    let poisoned = || io::Error::other("a walker thread panicked");
    let warnings = ctx.warnings.into_inner().map_err(|_| poisoned())?;
    let mut by_dir = ctx.out.into_inner().map_err(|_| poisoned())?;
    by_dir.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut unlisted = ctx.unlisted.into_inner().map_err(|_| poisoned())?;
    let linked = ctx.linked.into_inner().map_err(|_| poisoned())?;
    let mut fresh: Vec<Found> = Vec::new();
    // What was found below a directory walked whole (or gone) afterwards
    // is the walk's to say.
    let below_cut = |p: &[u8]| {
        p.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .any(|(k, _)| cut.contains(&p[..k]))
    };
    let mut founds = founds;
    founds.retain(|p, _| !below_cut(p));
    for start in &starts {
        assemble_below(&mut by_dir, &mut unlisted, start, &mut fresh);
    }
    // A directory to walk whole that could not be listed replaces its own
    // entry, as in its parent's listing; one gone by then is left out.
    for (path, instead) in unlisted {
        match instead {
            Some(f) => founds.insert(path, f),
            None => founds.remove(&path),
        };
    }
    fresh.extend(founds.into_values());
    fresh.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    fresh.dedup_by(|a, b| a.path == b.path);

    // The old entries that stay: not looked at, not below a cut, not
    // found again.
    let mut drop = vec![false; old.len()];
    for p in looked.iter().chain(fresh.iter().map(|f| &f.path)) {
        if let Ok(i) = old.binary_search_by(|e| e.path.as_slice().cmp(p)) {
            drop[i] = true;
        }
    }
    for c in &cut {
        let mut lo_key = c.clone();
        lo_key.push(b'/');
        let mut hi_key = c.clone();
        hi_key.push(b'/' + 1);
        let lo = old.partition_point(|e| e.path < lo_key);
        let hi = old.partition_point(|e| e.path < hi_key);
        drop[lo..hi].iter_mut().for_each(|d| *d = true);
    }
    // Another name of a file found now (a hard link the command made,
    // or wrote through), or of a file the tree had at a path that changed
    // (removed, replaced), which Watchman did not name and nothing looked
    // at: its ctime changed too, which the scan sees. Rare, and not worth
    // a guess: the whole tree is scanned for this snapshot.
    // A pass over many inodes turns most away by their low bits.
    let inodes: Vec<u64> = fresh
        .iter()
        .filter(|f| matches!(f.kind, FoundKind::File | FoundKind::Excluded(_)) && f.stat.ino != 0)
        .map(|f| f.stat.ino)
        .chain(
            old.iter()
                .zip(&drop)
                .filter(|(e, d)| **d && may_be_linked(e))
                .map(|(e, _)| e.stat.ino),
        )
        .collect();
    let inodes = crate::links::FewInodes::new(inodes);
    // Read in part (see `crate::tree::partial`): the entries left out
    // that share an inode with a file found now, and the old subtrees of
    // directories dropped that were not read, are not here; the tree is
    // then read whole.
    if let Some(o) = outside {
        if inodes.iter().any(|ino| o.left_out_has(ino)) {
            return Ok(Err(
                "a changed file has another name the tree read in part left out".into(),
            ));
        }
        let unread = |c: &Vec<u8>| {
            !crate::tree::Wanted::covers(&o.roots, c)
                && old
                    .binary_search_by(|e| e.path.as_slice().cmp(c))
                    .is_ok_and(|i| matches!(old[i].kind, Kind::Dir))
        };
        if cut.iter().any(unread) {
            return Ok(Err(
                "a directory whose old subtree was not read changed".into()
            ));
        }
    }
    if !inodes.is_empty()
        && let Some(e) = old.iter().zip(&drop).find_map(|(e, d)| {
            (!*d && !matches!(e.kind, Kind::Dir) && inodes.contains(e.stat.ino)).then_some(e)
        })
    {
        return Ok(Err(format!(
            "{} is another name of a changed file (a hard link), which Watchman did not name",
            crate::path::escaped(&e.path)
        )));
    }
    let dropped: Vec<usize> = drop
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.then_some(i))
        .collect();
    // Names the tree does not hold: of a file changed now, or of one the
    // tree had at a path looked at (written, removed, replaced). No other
    // name of these is among the entries kept (checked above), so the
    // names found now are all the tree holds.
    let found_now = unheld_of(linked);
    let was_unheld = dropped
        .iter()
        .map(|&i| &old[i])
        .find(|e| may_be_linked(e) && unheld.may_hold(e.stat.ino))
        .map(|e| e.path.clone());
    if let Some(p) = was_unheld.or_else(|| found_now.first().map(|(_, p)| p.clone()))
        && has_excluded(old, outside, &fresh)
    {
        return Ok(Err(format!(
            "{} has a name the tree does not hold (a hard link), which may lie in an excluded directory",
            crate::path::escaped(&p)
        )));
    }
    // The old tree's, less those of entries dropped (no name of them is
    // kept), with those found now.
    let unheld = match unheld {
        Unheld::Many => Unheld::Many,
        Unheld::Some(v) => {
            let gone: HashSet<u64> = dropped
                .iter()
                .map(|&i| old[i].stat.ino)
                .filter(|ino| v.binary_search(ino).is_ok())
                .collect();
            Unheld::of(
                v.iter()
                    .copied()
                    .filter(|ino| !gone.contains(ino))
                    .chain(found_now.iter().map(|(ino, _)| *ino))
                    .collect(),
            )
        }
    };
    debug_assert!(
        fresh.windows(2).all(|w| w[0].path < w[1].path),
        "the changed walk's paths are sorted and unique"
    );
    Ok(Ok((Patch { dropped, fresh }, warnings, unheld)))
}

/// The entries of `old` (sorted) below its entry at `i`: from its path
/// and `/` to just before its path and `0` (`0` follows `/`), after the
/// entries that sort between (`a` < `a-b` < `a/x` < `a0`).
fn below_entry(old: &[Entry], i: usize) -> &[Entry] {
    let rest = &old[i + 1..];
    let mut key = old[i].path.clone();
    key.push(b'/');
    let lo = rest.partition_point(|e| e.path.as_slice() < key.as_slice());
    key.pop();
    key.push(b'0');
    let hi = lo + rest[lo..].partition_point(|e| e.path.as_slice() < key.as_slice());
    &rest[lo..hi]
}

/// Whether the tree has an excluded entry, old (whole, or the counts of
/// a tree read in part) or found now: a directory among them may hold
/// names the tree does not.
fn has_excluded(old: &[Entry], outside: Option<&crate::tree::Partial>, fresh: &[Found]) -> bool {
    fresh
        .iter()
        .any(|f| matches!(f.kind, FoundKind::Excluded(_)))
        || match outside {
            Some(o) => o.totals.excluded > 0,
            None => old.iter().any(|e| matches!(e.kind, Kind::Excluded(_))),
        }
}

/// Whether the plain path `p` lies below a directory the tree holds as
/// excluded (whose own entries it does not hold).
fn inside_excluded(old: &[Entry], p: &[u8]) -> bool {
    p.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .any(|(k, _)| {
            old.binary_search_by(|e| e.path.as_slice().cmp(&p[..k]))
                .is_ok_and(|i| matches!(old[i].kind, Kind::Excluded(_)))
        })
}

/// Of `paths` (Watchman's, inside excluded directories), the first that is
/// now a file with another name the tree holds (a covered file, or one
/// excluded by a rule, whose stat the tree holds): written through the
/// excluded name, the held one changed too (its bytes and its ctime), and
/// the tree, which holds no entry inside an excluded directory, does not
/// know that inode. Only files with more than one name are asked
/// about (a `node_modules` of pnpm's links into its store outside the
/// project has many, none of them covered).
fn linked_from_excluded(
    root_fd: &OwnedFd,
    old: &[Entry],
    outside: Option<&crate::tree::Partial>,
    paths: &[Vec<u8>],
) -> Option<Vec<u8>> {
    use crate::sys::fs::{AtFlags, FileType};
    let linked: Vec<(&Vec<u8>, u64)> = paths
        .iter()
        .filter_map(|p| {
            let st =
                crate::sys::fs::statat(root_fd, crate::sys::os_str(p), AtFlags::SYMLINK_NOFOLLOW)
                    .ok()?;
            (crate::sys::file_type(crate::sys::mode(&st)) == FileType::RegularFile
                && crate::sys::nlink(&st) > 1)
                .then(|| (p, Stat::of_raw(&st).ino))
        })
        .collect();
    if linked.is_empty() {
        return None;
    }
    // Their inodes among the covered files' (one pass, most turned away by
    // their low bits).
    let few = crate::links::FewInodes::new(linked.iter().map(|(_, ino)| *ino).collect());
    // Files, and excluded entries that are not directories (a `*.log`
    // excluded by a rule: the tree holds its stat, which changed too).
    let held = |e: &&Entry| match e.kind {
        Kind::File { .. } => true,
        Kind::Excluded(_) => may_be_linked(e),
        _ => false,
    };
    let of_entries = old
        .iter()
        .filter(held)
        .map(|e| e.stat.ino)
        .filter(|&ino| few.contains(ino));
    let covered: HashSet<u64> = match outside {
        // Read in part: the files of the whole tree, the entries left out
        // that are not directories, and those read.
        Some(o) => linked
            .iter()
            .map(|(_, ino)| *ino)
            .filter(|&ino| o.file_or_left_out_has(ino))
            .chain(of_entries)
            .collect(),
        None => of_entries.collect(),
    };
    linked
        .into_iter()
        .find(|(_, ino)| covered.contains(ino))
        .map(|(p, _)| p.clone())
}

/// Whether the tree's entry `e` may be one of several names of its inode
/// (a hard link): anything but a directory, when its inode is known.
fn may_be_linked(e: &Entry) -> bool {
    e.stat.ino != 0
        && !matches!(e.kind, Kind::Dir)
        && crate::sys::file_type(e.stat.mode) != crate::sys::fs::FileType::Directory
}

/// Whether the plain path `p` is the directory `d` or lies below it.
fn within(p: &[u8], d: &[u8]) -> bool {
    p.starts_with(d) && matches!(p.get(d.len()), None | Some(b'/'))
}

/// Opens the directory at the plain path `rel` below `root`, a component
/// at a time, following no symlink.
fn open_below(root: &OwnedFd, rel: &[u8]) -> Result<OwnedFd, crate::sys::Errno> {
    let mut comps = rel.split(|&b| b == b'/');
    let first = comps.next().unwrap_or_default();
    let open = |dir: crate::sys::BorrowedFd<'_>, name: &[u8]| {
        crate::sys::fs::openat(dir, crate::sys::os_str(name), DIR_FLAGS, Mode::empty())
    };
    let mut fd = open(crate::sys::AsFd::as_fd(root), first)?;
    for name in comps {
        fd = open(crate::sys::AsFd::as_fd(&fd), name)?;
    }
    Ok(fd)
}

/// What the walk found at an old tree entry that nothing changed.
pub(super) fn found_of(e: &Entry) -> Found {
    Found {
        path: e.path.clone(),
        stat: e.stat,
        kind: match &e.kind {
            Kind::File { .. } => FoundKind::File,
            Kind::Symlink { target } => FoundKind::Symlink(target.clone()),
            Kind::Dir => FoundKind::Dir,
            Kind::Excluded(x) => FoundKind::Excluded(x.clone()),
        },
    }
}

/// Whether the walk never looks at `p` (a plain relative path): inside
/// the root's `.git/` or `.turnback/`, inside the store, or one of
/// turnback's own temporary files or below one.
pub(super) fn skipped(p: &[u8], store_inside: Option<&[u8]>) -> bool {
    let mut comps = p.split(|&b| b == b'/');
    if comps
        .next()
        .is_some_and(|c| c == b".git" || c == STORE_DIR.as_bytes())
    {
        return true;
    }
    let ours = |c: &[u8]| std::str::from_utf8(c).is_ok_and(|n| crate::fsx::temp_owner(n).is_some());
    if p.split(|&b| b == b'/').any(ours) {
        return true;
    }
    store_inside.is_some_and(|s| p.starts_with(s) && matches!(p.get(s.len()), None | Some(b'/')))
}

/// The paths to look at again for Watchman's `changed` (see
/// [`walk_changed`]), or why the whole tree must be walked.
pub(super) fn dirty_paths(
    old: &[Entry],
    changed: Vec<Vec<u8>>,
    store_inside: Option<&[u8]>,
) -> Result<std::collections::BTreeSet<Vec<u8>>, String> {
    let find = |p: &[u8]| {
        old.binary_search_by(|e| e.path.as_slice().cmp(p))
            .ok()
            .map(|i| &old[i].kind)
    };
    let mut dirty = std::collections::BTreeSet::new();
    'paths: for p in changed {
        if p.is_empty() {
            continue;
        }
        let comps: Vec<&[u8]> = p.split(|&b| b == b'/').collect();
        if comps
            .iter()
            .any(|c| c.is_empty() || *c == b"." || *c == b".." || c.contains(&0))
        {
            return Err(format!(
                "Watchman named a path that is not plain ({})",
                crate::path::escaped(&p)
            ));
        }
        if skipped(&p, store_inside) {
            continue;
        }
        let mut end = 0;
        for (k, c) in comps.iter().enumerate() {
            end += c.len();
            let prefix = &p[..end];
            if k + 1 == comps.len() {
                if RULE_NAMES.contains(c) || MARKER_NAMES.contains(c) {
                    return Err(format!(
                        "{} changed, which can change what is excluded",
                        crate::path::escaped(&p)
                    ));
                }
                dirty.insert(p.clone());
                continue 'paths;
            }
            match find(prefix) {
                Some(Kind::Dir) => {}
                Some(Kind::Excluded(_)) => {
                    // A marker right inside an excluded directory may make
                    // it covered again.
                    if k + 2 == comps.len() && MARKER_NAMES.contains(&comps[k + 1]) {
                        return Err(format!(
                            "{} changed, which can change what is excluded",
                            crate::path::escaped(&p)
                        ));
                    }
                    dirty.insert(prefix.to_vec());
                    continue 'paths;
                }
                // A new directory, or one that was a file or symlink.
                _ => {
                    dirty.insert(prefix.to_vec());
                    continue 'paths;
                }
            }
            end += 1;
        }
    }
    // A file written through one of its names, or one of whose names is
    // removed or replaced, changes every name of it (hard links: the
    // bytes, or the link count and so the ctime), and Watchman names only
    // the one changed: the other names the tree holds with that inode are
    // looked at too, covered or excluded.
    let inodes: HashSet<u64> = dirty
        .iter()
        .filter_map(|p| {
            old.binary_search_by(|e| e.path.as_slice().cmp(p))
                .ok()
                .map(|i| &old[i])
        })
        .filter(|e| may_be_linked(e))
        .map(|e| e.stat.ino)
        .collect();
    for e in old {
        let linked = !inodes.is_empty() && may_be_linked(e) && inodes.contains(&e.stat.ino);
        if linked || matches!(e.kind, Kind::Excluded(Excluded::Unreadable(_))) {
            dirty.insert(e.path.clone());
        }
    }
    Ok(dirty)
}

/// A directory opened by [`Looker`], with the ignore rules of its entries.
type OpenDir = (Arc<OwnedFd>, Arc<Ignores>);

/// Looks at changed paths one by one (see [`walk_changed`]).
struct Looker<'c, 'a> {
    ctx: &'c WalkCtx<'a>,
    old: &'c [Entry],
    /// Directories opened so far (the root under the empty path), with
    /// the ignore rules of their entries; `None`: not a directory now.
    dirs: HashMap<Vec<u8>, Option<OpenDir>>,
    /// What was found at each path looked at.
    founds: std::collections::BTreeMap<Vec<u8>, Found>,
    /// Every path looked at (its old entry is replaced or dropped).
    looked: std::collections::BTreeSet<Vec<u8>>,
    /// Paths whose old subtree is dropped.
    cut: std::collections::BTreeSet<Vec<u8>>,
    /// Directories to walk whole, each opened from the root by its task.
    to_walk: Vec<(Subdir, Arc<Ignores>)>,
}

impl Looker<'_, '_> {
    fn old_entry(&self, p: &[u8]) -> Option<&Entry> {
        self.old
            .binary_search_by(|e| e.path.as_slice().cmp(p))
            .ok()
            .map(|i| &self.old[i])
    }

    /// Whether `p` lies below a path whose old subtree is dropped (then
    /// what is below it is found by walking it, or is gone).
    fn below_cut(&self, p: &[u8]) -> bool {
        p.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .any(|(k, _)| self.cut.contains(&p[..k]))
    }

    /// Opens the directory at `rel` (empty: the root) with the ignore rules
    /// of its entries; `Err(q)`: the ancestor-or-self `q` is not a
    /// directory now.
    fn open_dir(&mut self, rel: &[u8]) -> Result<OpenDir, Vec<u8>> {
        if !self.dirs.contains_key(rel) {
            let (parent, name) = match rel.iter().rposition(|&b| b == b'/') {
                Some(k) => (&rel[..k], &rel[k + 1..]),
                None => (&rel[..0], rel),
            };
            let (pfd, pig) = self.open_dir(parent)?;
            let opened = crate::sys::fs::openat(
                crate::sys::AsFd::as_fd(&*pfd),
                crate::sys::os_str(name),
                DIR_FLAGS,
                Mode::empty(),
            );
            let entry = match opened {
                Ok(fd) => {
                    let mut ign = rel.to_vec();
                    ign.extend_from_slice(b"/.turnbackignore");
                    let ig = if self.old_entry(&ign).is_some() {
                        self.ctx
                            .nested_ignores(crate::sys::AsFd::as_fd(&fd), rel, pig)
                    } else {
                        pig
                    };
                    Some((Arc::new(fd), ig))
                }
                Err(_) => None,
            };
            self.dirs.insert(rel.to_vec(), entry);
        }
        match self.dirs.get(rel) {
            Some(Some((fd, ig))) => Ok((Arc::clone(fd), Arc::clone(ig))),
            _ => Err(rel.to_vec()),
        }
    }

    /// Looks at `p` again. Returns an ancestor to look at too, when `p`'s
    /// parent is no longer a directory.
    fn look(&mut self, p: &[u8]) -> io::Result<Option<Vec<u8>>> {
        if self.below_cut(p) {
            return Ok(None);
        }
        let (parent, name) = match p.iter().rposition(|&b| b == b'/') {
            Some(k) => (&p[..k], &p[k + 1..]),
            None => (&p[..0], p),
        };
        let Ok(cname) = std::ffi::CString::new(name) else {
            return Ok(None);
        };
        // Only the directories leading to `parent` stay open. The paths come
        // sorted, so one left behind is seldom asked for again (and is
        // opened again then), and changes in many directories hold as many
        // descriptors as one path has components.
        self.dirs
            .retain(|d, open| open.is_none() || d.is_empty() || within(parent, d));
        let (pfd, ig) = match self.open_dir(parent) {
            Ok(opened) => opened,
            Err(q) => {
                // Gone with its parent: the parent is looked at in turn.
                self.looked.insert(p.to_vec());
                self.cut.insert(p.to_vec());
                self.founds.remove(p);
                return Ok((!self.looked.contains(&q)).then_some(q));
            }
        };
        let mut seen = Vec::new();
        // Its ctx has no old tree: what is found is always an `Item::Found`.
        let dir = self.ctx.visit(
            crate::sys::AsFd::as_fd(&*pfd),
            &cname,
            p,
            &ig,
            None,
            &mut seen,
        );
        self.looked.insert(p.to_vec());
        let same_dir = |old: Option<&Entry>, f: &Found| {
            old.is_some_and(|o| matches!(o.kind, Kind::Dir) && o.stat.ino == f.stat.ino)
        };
        match seen.pop().and_then(Item::into_found) {
            None => {
                // Gone: its old subtree goes with it.
                self.founds.remove(p);
                self.cut.insert(p.to_vec());
            }
            Some(f) => {
                let keep_children = dir.is_some() && same_dir(self.old_entry(p), &f);
                if !keep_children {
                    self.cut.insert(p.to_vec());
                    if let Some(sub) = dir {
                        self.to_walk.push((sub, ig));
                    }
                }
                self.founds.insert(p.to_vec(), f);
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::BlobId;

    fn entry(path: &str, kind: Kind, mtime_ns: i64) -> Entry {
        Entry {
            path: path.as_bytes().to_vec(),
            stat: Stat {
                mtime_ns,
                ctime_ns: mtime_ns,
                ino: path.len() as u64,
                mode: 0o40755,
                size: 4096,
            },
            kind,
        }
    }

    /// The names of a directory from the old tree: its own entries only,
    /// in byte order, whatever lies below its subdirectories (`a-b` and
    /// `a.c` sort between `a` and what lies below it, `a/`), each with what
    /// lies below it, as its parent hands it to its task; and the same
    /// runs from a listed parent (`below_entry`).
    #[test]
    fn old_names_are_a_directorys_own_entries_in_order() {
        let file = || Kind::File {
            blob: BlobId([0; 32]),
        };
        let old = vec![
            entry("d", Kind::Dir, 1),
            entry("d/a", Kind::Dir, 1),
            entry("d/a-b", file(), 1),
            entry("d/a.c", file(), 1),
            entry("d/a/x", Kind::Dir, 1),
            entry("d/a/x/y", file(), 1),
            entry("d/a/z", file(), 1),
            entry("d/a0", Kind::Excluded(Excluded::Special), 1),
            entry("d/b", Kind::Dir, 1),
            entry("d/b/c", file(), 1),
            entry("d0", file(), 1),
            entry("e", Kind::Dir, 500),
        ];
        let root = Path::new("/");
        let mut ctx = WalkCtx::new(root, u64::MAX, &super::super::NoProgress, None);
        ctx.old = &old;
        ctx.stamp_ns = 100;
        // What lies below `rel`, found as the walk finds it: from the
        // root down, each directory's run handed over by its parent.
        let below = |rel: &str| -> &[Entry] {
            let mut run = &old[..];
            let mut at = String::new();
            for comp in rel.split('/').filter(|c| !c.is_empty()) {
                let (_, olds) = WalkCtx::old_names(at.as_bytes(), run);
                at = if at.is_empty() {
                    comp.to_owned()
                } else {
                    format!("{at}/{comp}")
                };
                let o = olds
                    .iter()
                    .find(|o| o.entry.is_some_and(|e| e.path == at.as_bytes()))
                    .expect("a name of its parent");
                // Listed, the parent finds the same run by searching.
                let i = run
                    .binary_search_by(|e| e.path.as_slice().cmp(at.as_bytes()))
                    .expect("in the run");
                assert_eq!(below_entry(run, i), o.below, "{at}");
                run = o.below;
            }
            // Exactly the entries below `rel`.
            let all: Vec<&Entry> = old
                .iter()
                .filter(|e| rel.is_empty() || e.path.starts_with(format!("{rel}/").as_bytes()))
                .collect();
            assert!(all.iter().copied().eq(run.iter()), "{rel}");
            run
        };
        let names = |rel: &str| -> Vec<String> {
            let (names, entries) = WalkCtx::old_names(rel.as_bytes(), below(rel));
            let names: Vec<String> = names
                .names()
                .iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
            // Each name comes with its own entry.
            let full = |n: &String| match rel {
                "" => n.clone().into_bytes(),
                _ => format!("{rel}/{n}").into_bytes(),
            };
            assert!(
                names
                    .iter()
                    .zip(&entries)
                    .all(|(n, o)| o.entry.is_some_and(|e| e.path == full(n)))
            );
            assert_eq!(names.len(), entries.len());
            names
        };
        assert_eq!(names(""), ["d", "d0", "e"]);
        assert_eq!(names("d"), ["a", "a-b", "a.c", "a0", "b"]);
        assert_eq!(names("d/a"), ["x", "z"]);
        assert_eq!(names("d/a/x"), ["y"]);
        assert_eq!(names("d/b"), ["c"]);
        assert!(names("d/b/c").is_empty());
        // The same stat, not racy: the same names. Another stat, a racily
        // clean one, an entry that is not a directory: listed.
        assert!(ctx.same_names(&old[1], &old[1].stat));
        let touched = Stat {
            mtime_ns: 2,
            ..old[1].stat
        };
        assert!(!ctx.same_names(&old[1], &touched));
        assert!(!ctx.same_names(&old[11], &old[11].stat), "racily clean");
        assert!(!ctx.same_names(&old[10], &old[10].stat), "not a directory");
    }
}
