//! The tree read in part: for a snapshot half that Watchman told which
//! paths changed, only the runs of the tree file that may hold an entry
//! that half can look at are read (see [`load_partial`]); of the rest,
//! the file's index and the delta's header give the counts and the
//! inodes. A tree file of a format before its index, or a delta before its
//! counts, is read whole.

use std::path::Path;

use super::{
    Decoded, Entry, KIND_DIR, KIND_FILE, KIND_SYMLINK, Keep, Layers, Loaded, Stat, decode_entries,
    decode_with, load_using, tree_reader,
};
use crate::error::Result;
use crate::sys::OwnedFd;

/// What a partial read knows of the whole tree beyond the entries it
/// kept.
#[derive(Debug)]
pub(crate) struct Partial {
    /// The paths whose subtrees were read whole (sorted, none below
    /// another); see [`Wanted`].
    pub(crate) roots: Vec<Vec<u8>>,
    /// Counts of the whole tree.
    pub(crate) totals: Totals,
    /// How many entries of the whole tree have each inode.
    inodes: Box<Inodes>,
}

/// How many entries of the whole tree (the tree file's, less those of
/// them a change replaced, plus the changes') have an inode, for the
/// files and for the others that are not directories: a count that may be
/// too high (an entry a change replaced in a run not read is still
/// counted), never too low. All sorted.
#[derive(Debug)]
struct Inodes {
    /// The tree file's (from its index).
    files: Table,
    others: Table,
    /// The delta's entries.
    plus_files: Vec<u64>,
    plus_others: Vec<u64>,
    /// The tree file's entries a change replaced or removed, in the runs
    /// read.
    minus_files: Vec<u64>,
    minus_others: Vec<u64>,
    /// The entries kept that are not directories.
    kept: Vec<u64>,
}

/// How many times `sorted` holds `ino`.
fn count_in(sorted: &[u64], ino: u64) -> usize {
    let lo = sorted.partition_point(|&x| x < ino);
    sorted[lo..].partition_point(|&x| x == ino)
}

/// A large sorted list of inodes (a tree file's, u64 little-endian each)
/// read in place, with every [`Table::STEP`]th of them apart: a search
/// goes through the small list first (in the cache after a few), then
/// one stretch of the large one, instead of some 17 reads of memory far
/// apart per search.
struct Table {
    bytes: Bytes,
    at: std::ops::Range<usize>,
    fences: Vec<u64>,
}

/// Bytes a [`Table`] reads: a tree file's, or a test's.
type Bytes = std::sync::Arc<dyn std::ops::Deref<Target = [u8]> + Send + Sync>;

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({} inodes)", self.len())
    }
}

impl Table {
    const STEP: usize = 64;

    /// The inodes at `at` of `bytes` (whole u64s: the caller checked
    /// the range lies in them, see [`super::Index`]).
    fn new(bytes: Bytes, at: std::ops::Range<usize>) -> Table {
        let mut t = Table {
            bytes,
            at,
            fences: Vec::new(),
        };
        t.fences = (0..t.len())
            .step_by(Table::STEP)
            .map(|i| t.get(i))
            .collect();
        t
    }

    fn len(&self) -> usize {
        self.at.len() / 8
    }

    fn get(&self, i: usize) -> u64 {
        let at = self.at.start + 8 * i;
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[at..at + 8]);
        u64::from_le_bytes(b)
    }

    /// The first of the entries `from..to` for which `before` is false
    /// (it is true of a first stretch of them), or `to`.
    fn first_not(&self, mut from: usize, mut to: usize, before: impl Fn(u64) -> bool) -> usize {
        while from < to {
            let mid = from + (to - from) / 2;
            if before(self.get(mid)) {
                from = mid + 1;
            } else {
                to = mid;
            }
        }
        from
    }

    /// How many times it holds `ino`.
    fn count(&self, ino: u64) -> usize {
        // `fences[k - 1] < ino <= fences[k]`: the first `ino` is after
        // entry `(k - 1) * STEP` and at or before entry `k * STEP`.
        let k = self.fences.partition_point(|&f| f < ino);
        let from = k.saturating_sub(1) * Table::STEP;
        let lo = self.first_not(from, self.len().min(from + Table::STEP + 1), |x| x < ino);
        let near = self.len().min(lo + Table::STEP);
        let hi = self.first_not(lo, near, |x| x == ino);
        if hi == near && near < self.len() && self.get(near) == ino {
            // Many entries of one inode: a plain search past them.
            return self.first_not(lo, self.len(), |x| x == ino) - lo;
        }
        hi - lo
    }
}

impl Inodes {
    /// File entries of the whole tree with inode `ino` (may be too many).
    fn files(&self, ino: u64) -> usize {
        (self.files.count(ino) + count_in(&self.plus_files, ino))
            .saturating_sub(count_in(&self.minus_files, ino))
    }

    /// Entries of the whole tree not kept, and not directories, with
    /// inode `ino` (may be too many).
    fn left_out(&self, ino: u64) -> usize {
        let others = (self.others.count(ino) + count_in(&self.plus_others, ino))
            .saturating_sub(count_in(&self.minus_others, ino));
        (self.files(ino) + others).saturating_sub(count_in(&self.kept, ino))
    }
}

impl Partial {
    /// Whether a file among `kept` (the entries read) may share its inode
    /// with another file entry of the tree, which may be one left out.
    pub(crate) fn links_kept(&self, kept: &[Entry]) -> bool {
        kept.iter()
            .filter(|e| matches!(e.kind, super::Kind::File { .. }))
            .any(|e| self.inodes.files(e.stat.ino) >= 2)
    }

    /// The inodes of `files` (of entries kept) that two or more file
    /// entries of the whole tree may have.
    pub(crate) fn shared_files(
        &self,
        files: impl Iterator<Item = u64>,
    ) -> crate::links::SharedInodes {
        crate::links::SharedInodes::of(files.filter(|&ino| self.inodes.files(ino) >= 2).collect())
    }

    /// Whether an entry left out that is not a directory may have inode
    /// `ino`.
    pub(crate) fn left_out_has(&self, ino: u64) -> bool {
        self.inodes.left_out(ino) > 0
    }

    /// Whether a file entry of the whole tree, or an entry left out that
    /// is not a directory, may have inode `ino`.
    pub(crate) fn file_or_left_out_has(&self, ino: u64) -> bool {
        self.inodes.files(ino) > 0 || self.left_out_has(ino)
    }
}

/// Counts of a tree's entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) entries: u64,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    pub(crate) dirs: u64,
    pub(crate) symlinks: u64,
    pub(crate) excluded: u64,
    pub(crate) unreadable: u64,
}

impl Totals {
    /// Writes the counts after the number of entries, as the tree file's
    /// header and the delta's hold them: files, bytes, directories,
    /// symlinks, excluded, unreadable (u64 each).
    pub(crate) fn put_counts(&self, out: &mut Vec<u8>) {
        for n in [
            self.files,
            self.bytes,
            self.dirs,
            self.symlinks,
            self.excluded,
            self.unreadable,
        ] {
            out.extend_from_slice(&n.to_le_bytes());
        }
    }

    /// Reads what [`Totals::put_counts`] wrote, of `entries` entries;
    /// counts that do not add up to them are damage.
    pub(crate) fn read_counts(
        r: &mut super::Reader<'_>,
        entries: u64,
    ) -> std::result::Result<Totals, String> {
        let t = Totals {
            entries,
            files: r.u64()?,
            bytes: r.u64()?,
            dirs: r.u64()?,
            symlinks: r.u64()?,
            excluded: r.u64()?,
            unreadable: r.u64()?,
        };
        let kinds = [t.files, t.dirs, t.symlinks, t.excluded]
            .into_iter()
            .try_fold(0u64, u64::checked_add);
        if kinds != Some(entries) || t.unreadable > t.excluded {
            return Err(format!(
                "counts that do not add up to its {entries} entries"
            ));
        }
        Ok(t)
    }

    /// The counts of `entries`.
    pub(crate) fn of(entries: &[Entry]) -> Totals {
        let mut t = Totals::default();
        entries.iter().for_each(|e| t.count(e, 1));
        t
    }

    /// `self` with the entries `out` counted out and `fresh` in.
    pub(crate) fn patched<'a>(
        mut self,
        out: impl Iterator<Item = &'a Entry>,
        fresh: &[Entry],
    ) -> Totals {
        out.for_each(|e| self.count(e, -1));
        fresh.iter().for_each(|e| self.count(e, 1));
        self
    }

    /// `other`'s counts added to these.
    pub(crate) fn add(&mut self, other: &Totals) {
        self.entries = self.entries.saturating_add(other.entries);
        self.files = self.files.saturating_add(other.files);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.dirs = self.dirs.saturating_add(other.dirs);
        self.symlinks = self.symlinks.saturating_add(other.symlinks);
        self.excluded = self.excluded.saturating_add(other.excluded);
        self.unreadable = self.unreadable.saturating_add(other.unreadable);
    }

    /// Counts `e` in (`sign` 1) or out (`-1`).
    pub(crate) fn count(&mut self, e: &Entry, sign: i8) {
        self.add_entry(e.kind_code(), e.stat.size, e.is_unreadable(), sign);
    }

    fn add_entry(&mut self, kind: u8, size: u64, unreadable: bool, sign: i8) {
        let step = |n: &mut u64, by: u64| {
            *n = if sign < 0 {
                n.saturating_sub(by)
            } else {
                n.saturating_add(by)
            }
        };
        step(&mut self.entries, 1);
        match kind {
            KIND_FILE => {
                step(&mut self.files, 1);
                step(&mut self.bytes, size);
            }
            KIND_SYMLINK => step(&mut self.symlinks, 1),
            KIND_DIR => step(&mut self.dirs, 1),
            _ => {
                step(&mut self.excluded, 1);
                if unreadable {
                    step(&mut self.unreadable, 1);
                }
            }
        }
    }
}

/// The entries a half that looks at the paths Watchman named can look at:
/// each named path, everything below it, each of its ancestors and the
/// `.turnbackignore` in each of them. Asked in byte order of paths.
pub(crate) struct Wanted {
    exact: Vec<Vec<u8>>,
    /// The subtrees: for each root, the paths from `root/` (inclusive) to
    /// `root0` (exclusive), `0` being the byte after `/`.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    roots: Vec<Vec<u8>>,
}

/// Where a run of paths asked in ascending order is in a [`Wanted`].
struct Cursor<'w> {
    wanted: &'w Wanted,
    at_exact: usize,
    at_range: usize,
}

impl Wanted {
    /// For the paths `changed` (relative, `/`-separated, as Watchman names
    /// them).
    pub(crate) fn new(changed: &[Vec<u8>]) -> Wanted {
        let mut roots: Vec<Vec<u8>> = changed.iter().filter(|p| !p.is_empty()).cloned().collect();
        roots.sort();
        roots.dedup();
        // None below another: a root below one kept is read with it. (An
        // ancestor need not sort right before: `a` < `a-b` < `a/x`.)
        let kept: Vec<Vec<u8>> = roots
            .iter()
            .filter(|r| {
                !ancestors(r).any(|a| roots.binary_search_by(|x| x.as_slice().cmp(a)).is_ok())
            })
            .cloned()
            .collect();
        let mut exact = Vec::new();
        exact.push(b".turnbackignore".to_vec());
        for p in changed {
            for (k, _) in p.iter().enumerate().filter(|(_, b)| **b == b'/') {
                exact.push(p[..k].to_vec());
                exact.push([&p[..k], b"/.turnbackignore".as_slice()].concat());
            }
            exact.push(p.clone());
            exact.push([p.as_slice(), b"/.turnbackignore".as_slice()].concat());
        }
        exact.sort();
        exact.dedup();
        // Disjoint, since no root is below another, and sorted by where
        // they start (`a-b/` before `a/`, though `a` sorts before `a-b`).
        let mut ranges: Vec<(Vec<u8>, Vec<u8>)> = kept
            .iter()
            .map(|r| {
                let lo = [r.as_slice(), b"/".as_slice()].concat();
                let hi = [r.as_slice(), &[b'/' + 1]].concat();
                (lo, hi)
            })
            .collect();
        ranges.sort();
        Wanted {
            exact,
            ranges,
            roots: kept,
        }
    }

    /// A cursor for paths asked from the start.
    fn cursor(&self) -> Cursor<'_> {
        Cursor {
            wanted: self,
            at_exact: 0,
            at_range: 0,
        }
    }

    /// Whether a path from `lo` (inclusive) to `hi` (exclusive; none: no
    /// end) may be wanted.
    fn meets(&self, lo: &[u8], hi: Option<&[u8]>) -> bool {
        let before_hi = |p: &[u8]| hi.is_none_or(|h| p < h);
        let k = self.exact.partition_point(|e| e.as_slice() < lo);
        if self.exact.get(k).is_some_and(|e| before_hi(e)) {
            return true;
        }
        // Disjoint and sorted by where they start, so by where they end.
        let k = self.ranges.partition_point(|(_, end)| end.as_slice() <= lo);
        self.ranges
            .get(k)
            .is_some_and(|(start, _)| before_hi(start))
    }

    /// Whether the old subtree of `path` was read whole (it is a root or
    /// lies below one).
    pub(crate) fn covers(roots: &[Vec<u8>], path: &[u8]) -> bool {
        let is_root = |p: &[u8]| roots.binary_search_by(|r| r.as_slice().cmp(p)).is_ok();
        is_root(path) || ancestors(path).any(is_root)
    }
}

impl Cursor<'_> {
    /// Whether the entry at `path` is wanted; paths are asked in
    /// ascending order.
    fn wants(&mut self, path: &[u8]) -> bool {
        let w = self.wanted;
        while w
            .exact
            .get(self.at_exact)
            .is_some_and(|e| e.as_slice() < path)
        {
            self.at_exact += 1;
        }
        if w.exact.get(self.at_exact).is_some_and(|e| e == path) {
            return true;
        }
        while w
            .ranges
            .get(self.at_range)
            .is_some_and(|(_, hi)| hi.as_slice() <= path)
        {
            self.at_range += 1;
        }
        w.ranges
            .get(self.at_range)
            .is_some_and(|(lo, _)| lo.as_slice() <= path)
    }
}

/// The proper ancestors of a `/`-separated path, nearest last.
fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .map(move |(k, _)| &path[..k])
}

/// Reads the tree of `store` (with its delta and head, as [`super::load`])
/// keeping only the entries `wanted` says, and the unreadable ones: only
/// the runs of the tree file that may hold them are read. The tree is
/// read whole (no [`Partial`]) when its files are of a format before the
/// tree file's index or the delta's counts.
pub(crate) fn load_partial(
    store: &OwnedFd,
    store_path: &Path,
    wanted: Wanted,
) -> Result<(Loaded, Option<Layers>, Option<Partial>)> {
    let mut partial = None;
    let (loaded, layers) = load_using(store, store_path, |file, delta, shadowed| {
        let bytes: Bytes = file.clone();
        let changes = delta.map_or(&[][..], |d| d.changes.as_slice());
        let framed = tree_reader(file.as_ref(), false)?;
        let delta_totals = delta.map(|d| d.totals);
        if framed.2.is_none() || delta_totals.is_some_and(|t| t.is_none()) {
            let (t, count) = decode_with(file.as_ref(), changes, shadowed)?;
            let made = t.entries.len() as u64;
            return Ok((t, count, made));
        }
        let meets = |lo: &[u8], hi: Option<&[u8]>| wanted.meets(lo, hi);
        let fresh = || RunKeep::new(&wanted);
        let Decoded {
            tree,
            count,
            kept,
            index,
        } = decode_entries(framed, changes, shadowed, Some(fresh), Some(&meets))?;
        let (file_totals, index) = index.expect("a tree file with an index was read with it");
        let totals = delta_totals.flatten().unwrap_or(file_totals);
        let mut inodes = Box::new(Inodes {
            files: Table::new(bytes.clone(), index.files()),
            others: Table::new(bytes, index.others()),
            plus_files: Vec::new(),
            plus_others: Vec::new(),
            minus_files: Vec::new(),
            minus_others: Vec::new(),
            kept: Vec::new(),
        });
        for e in changes.iter().filter_map(|(_, e)| e.as_ref()) {
            match e.kind_code() {
                KIND_FILE => inodes.plus_files.push(e.stat.ino),
                KIND_DIR => {}
                _ => inodes.plus_others.push(e.stat.ino),
            }
        }
        for k in kept {
            inodes.minus_files.extend(k.minus_files);
            inodes.minus_others.extend(k.minus_others);
        }
        inodes.kept = tree
            .entries
            .iter()
            .filter(|e| e.kind_code() != KIND_DIR)
            .map(|e| e.stat.ino)
            .collect();
        for list in [
            &mut inodes.plus_files,
            &mut inodes.plus_others,
            &mut inodes.minus_files,
            &mut inodes.minus_others,
            &mut inodes.kept,
        ] {
            list.sort_unstable();
        }
        partial = Some(Partial {
            roots: Vec::new(),
            totals,
            inodes,
        });
        Ok((tree, count, totals.entries))
    })?;
    let partial = partial.filter(|_| layers.is_some()).map(|p| Partial {
        roots: wanted.roots,
        ..p
    });
    Ok((loaded, layers, partial))
}

/// What a partial read keeps of one run of the tree's entries: those
/// wanted, and the unreadable ones (always looked at again); and the
/// inodes of the tree file's entries a change replaced.
struct RunKeep<'w> {
    wanted: Cursor<'w>,
    minus_files: Vec<u64>,
    minus_others: Vec<u64>,
}

impl<'w> RunKeep<'w> {
    fn new(wanted: &'w Wanted) -> RunKeep<'w> {
        RunKeep {
            wanted: wanted.cursor(),
            minus_files: Vec::new(),
            minus_others: Vec::new(),
        }
    }
}

impl Keep for RunKeep<'_> {
    fn keep(&mut self, path: &[u8], _: u8, _: &Stat, unreadable: bool) -> bool {
        self.wanted.wants(path) || unreadable
    }

    fn shadowed(&mut self, kind: u8, stat: &Stat) {
        match kind {
            KIND_FILE => self.minus_files.push(stat.ino),
            KIND_DIR => {}
            _ => self.minus_others.push(stat.ino),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::IoResultExt;
    use crate::fsx;
    use crate::id::{BlobId, TurnId};
    use crate::tree::{Excluded, Kind, Stat, Tree, TreeWriter};

    /// A random tree: directories `a`..`c` two deep, files, symlinks,
    /// excluded and unreadable entries, ignore files, some files sharing
    /// an inode.
    fn random_tree(seed: &mut u64) -> Vec<Entry> {
        let mut next = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        };
        let mut entries = Vec::new();
        let names = ["a", "a-b", "a.c", "a0", "b", "c", ".turnbackignore", "f"];
        let mut dirs = vec![Vec::new()];
        for depth in 0..3 {
            let mut deeper = Vec::new();
            for d in &dirs {
                for n in names {
                    if next() % 3 == 0 {
                        continue;
                    }
                    let path = if d.is_empty() {
                        n.as_bytes().to_vec()
                    } else {
                        [d.as_slice(), b"/", n.as_bytes()].concat()
                    };
                    let r = next();
                    let kind = match r % 7 {
                        0 | 1 if depth < 2 => {
                            deeper.push(path.clone());
                            Kind::Dir
                        }
                        2 => Kind::Symlink { target: "x".into() },
                        3 => Kind::Excluded(Excluded::Unreadable("denied".into())),
                        4 => Kind::Excluded(Excluded::TooLarge(10)),
                        _ => Kind::File {
                            blob: BlobId([r as u8; 32]),
                        },
                    };
                    let stat = Stat {
                        size: r % 1000,
                        ino: 1 + r % 60,
                        mode: 0o100644,
                        ..Stat::default()
                    };
                    entries.push(Entry { path, stat, kind });
                }
            }
            dirs = deeper;
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        entries
    }

    /// Writes the tree of `entries` (stamp and log sequence 1) to the
    /// store in `dir`.
    fn commit_tree(store: &OwnedFd, dir: &Path, entries: Vec<Entry>) -> Result<Tree> {
        let tree = Tree {
            stamp_ns: 1,
            log_seq: 1,
            turn: TurnId::new("t").expect("valid"),
            pending: false,
            entries,
        };
        TreeWriter::begin(store, dir)?.commit(store, dir, &tree)?;
        Ok(tree)
    }

    /// Writes a delta of `changes` (stamp and log sequence 2), making a
    /// tree of `count` entries with `totals` (none: format 1), for the
    /// tree file `base`.
    fn commit_delta(
        store: &OwnedFd,
        dir: &Path,
        base: (u64, u32),
        (count, totals): (usize, Option<Totals>),
        changes: Vec<crate::tree::Change>,
    ) -> Result<()> {
        let delta = crate::tree::Delta {
            base,
            stamp_ns: 2,
            log_seq: 2,
            pending: false,
            turn: TurnId::new("t").expect("valid"),
            count: count as u64,
            totals,
            changes,
        };
        TreeWriter::begin(store, dir)?.commit_delta(store, dir, &delta)?;
        Ok(())
    }

    /// What a partial read must keep of `e` for the paths `changed`.
    fn wanted(e: &Entry, changed: &[Vec<u8>]) -> bool {
        let under =
            |x: &[u8], p: &[u8]| x.starts_with(p) && matches!(x.get(p.len()), None | Some(b'/'));
        let ignore_of = |x: &[u8]| -> Option<Vec<u8>> {
            x.strip_suffix(b".turnbackignore".as_slice())
                .map(|d| d.strip_suffix(b"/".as_slice()).unwrap_or(d).to_vec())
        };
        matches!(e.kind, Kind::Excluded(Excluded::Unreadable(_)))
            || changed.iter().any(|p| {
                under(&e.path, p)
                    || under(p, &e.path)
                    || ignore_of(&e.path).is_some_and(|d| d.is_empty() || under(p, &d))
            })
    }

    /// Asked in path order, `Wanted` wants exactly what a plain statement
    /// of it says, and `covers` exactly the paths at or below a named one,
    /// also for names that sort between a directory and what lies below it
    /// (`a` < `a-b` < `a.c` < `a/x` < `a0`).
    #[test]
    fn wanted_paths_are_the_named_ones_their_ancestors_subtrees_and_ignore_files() {
        let names = ["a", "a-b", "a.c", "a0", ".turnbackignore", "x"];
        let mut all: Vec<Vec<u8>> = Vec::new();
        let mut level: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for d in &level {
                for n in names {
                    let p = if d.is_empty() {
                        n.as_bytes().to_vec()
                    } else {
                        [d.as_slice(), b"/", n.as_bytes()].concat()
                    };
                    next.push(p);
                }
            }
            all.extend(next.iter().cloned());
            level = next;
        }
        all.sort();
        let entry = |p: &[u8]| Entry {
            path: p.to_vec(),
            stat: crate::tree::Stat::default(),
            kind: crate::tree::Kind::Dir,
        };
        let cases: [&[&str]; 5] = [
            &["a", "a-b", "a/x"],
            &["a/a-b/x", "a/a"],
            &["a.c", "a0/a"],
            &["x/x/x"],
            &["a/a", "a", "a-b/a.c"],
        ];
        for named in cases {
            let named: Vec<Vec<u8>> = named.iter().map(|p| p.as_bytes().to_vec()).collect();
            let w = Wanted::new(&named);
            let mut w = w.cursor();
            for p in &all {
                assert_eq!(
                    w.wants(p),
                    wanted(&entry(p), &named),
                    "{named:?}: {:?}",
                    String::from_utf8_lossy(p)
                );
                let under = named
                    .iter()
                    .any(|r| p.starts_with(r) && matches!(p.get(r.len()), None | Some(b'/')));
                assert_eq!(
                    Wanted::covers(&w.wanted.roots, p),
                    under,
                    "{named:?}: covers {:?}",
                    String::from_utf8_lossy(p)
                );
            }
        }
    }

    /// Read in part, a tree (with a delta) keeps exactly the entries the
    /// changed paths can touch, as read whole, and counts the others.
    #[test]
    fn a_partial_read_keeps_what_the_changed_paths_touch_and_counts_the_rest() -> Result<()> {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for round in 0..40 {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = fsx::open_dir_path(dir.path()).ctx("open", dir.path())?;
            let mut base = random_tree(&mut seed);
            // Every other round, enough entries for the tree file to hold
            // several runs (see `STRIDE`), and a named path among them.
            let padded = round % 2 == 1;
            if padded {
                let pad = |i: u64| Entry {
                    path: format!("a-b/p{i:05}").into_bytes(),
                    stat: Stat {
                        size: i % 1000,
                        ino: 100 + i,
                        mode: 0o100644,
                        ..Stat::default()
                    },
                    kind: Kind::File {
                        blob: BlobId([i as u8; 32]),
                    },
                };
                base.retain(|e| !e.path.starts_with(b"a-b/p"));
                base.extend((0..9_000).map(pad));
                base.sort_by(|a, b| a.path.cmp(&b.path));
            }
            let tree = commit_tree(&store, dir.path(), base.clone())?;
            // A delta: some entries gone, some changed, some added.
            let mut other = random_tree(&mut seed);
            other.retain(|e| e.stat.size % 4 == 0);
            let gone: Vec<Vec<u8>> = base
                .iter()
                .filter(|e| e.stat.size % 5 == 0)
                .map(|e| e.path.clone())
                .collect();
            let (crate::tree::Loaded::Tree(_), Some(layers)) =
                crate::tree::load_layers(&store, dir.path())?
            else {
                panic!("round {round}: the tree loads");
            };
            let changes = crate::tree::compose(Vec::new(), gone, other);
            let changes_at: Vec<Vec<u8>> = changes.iter().map(|(p, _)| p.clone()).collect();
            let (whole, _) =
                crate::tree::decode_with(&crate::tree::encode(&tree), &changes, &mut Vec::new())
                    .expect("a tree encoded here");
            let (count, totals) = (whole.entries.len(), Some(Totals::of(&whole.entries)));
            commit_delta(&store, dir.path(), layers.base, (count, totals), changes)?;
            let all: Vec<Vec<u8>> = whole.entries.iter().map(|e| e.path.clone()).collect();
            let mut changed: Vec<Vec<u8>> = (0..3)
                .map(
                    |k| match all.get((seed as usize + k * 7) % all.len().max(1)) {
                        Some(p) if k != 2 => p.clone(),
                        _ => b"b/new/deep".to_vec(),
                    },
                )
                .collect();
            if padded {
                changed.push(b"a-b/p04097".to_vec());
            }
            let (loaded, _, Some(partial)) =
                load_partial(&store, dir.path(), Wanted::new(&changed))?
            else {
                panic!("round {round}: the tree loads in part");
            };
            let crate::tree::Loaded::Tree(part) = loaded else {
                panic!("round {round}: a tree");
            };
            let expected: Vec<Entry> = whole
                .entries
                .iter()
                .filter(|e| wanted(e, &changed))
                .cloned()
                .collect();
            assert_eq!(part.entries, expected, "round {round}: {changed:?}");
            assert_eq!(partial.totals, Totals::of(&whole.entries), "round {round}");
            // The inode counts: never too low, and too high only by the
            // tree file's entries the delta replaced.
            let count = |list: &[Entry], file: bool, ino: u64| {
                list.iter()
                    .filter(|e| e.stat.ino == ino && !matches!(e.kind, Kind::Dir))
                    .filter(|e| !file || matches!(e.kind, Kind::File { .. }))
                    .count()
            };
            let left_out: Vec<Entry> = whole
                .entries
                .iter()
                .filter(|e| !wanted(e, &changed))
                .cloned()
                .collect();
            let replaced: Vec<Entry> = base
                .iter()
                .filter(|e| changes_at.binary_search(&e.path).is_ok())
                .cloned()
                .collect();
            for ino in (0..70).chain(100..9_100) {
                let (files, out) = (
                    count(&whole.entries, true, ino),
                    count(&left_out, false, ino),
                );
                let said = (partial.inodes.files(ino), partial.inodes.left_out(ino));
                let slack = (count(&replaced, true, ino), count(&replaced, false, ino));
                assert!(
                    (files..=files + slack.0).contains(&said.0)
                        && (out..=out + slack.1 + slack.0).contains(&said.1),
                    "round {round}, inode {ino}: {said:?} for {files} files, {out} left out"
                );
            }
            let kept_files = || {
                part.entries
                    .iter()
                    .filter(|e| matches!(e.kind, Kind::File { .. }))
            };
            let shared = kept_files().any(|e| count(&whole.entries, true, e.stat.ino) >= 2);
            let maybe = kept_files().any(|e| count(&replaced, true, e.stat.ino) > 0);
            let said = partial.links_kept(&part.entries);
            assert!(
                if shared { said } else { !said || maybe },
                "round {round}: links kept {said}, shared {shared}"
            );
            assert_eq!(part.stamp_ns, 2, "the delta's header");
        }
        Ok(())
    }

    /// A partial read reads only the runs of the tree file that may hold
    /// what it wants, each verified by its own checksum: damage in another
    /// run goes unread (a whole read finds it), damage in one it reads is
    /// found. A tree file of version 2, or a delta of version 1, is read
    /// whole, and the next tree is then written whole.
    #[test]
    fn a_partial_read_reads_only_the_runs_it_needs() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = fsx::open_dir_path(dir.path()).ctx("open", dir.path())?;
        let entries: Vec<Entry> = (0..3 * 4096 + 17_u64)
            .map(|i| Entry {
                path: format!("d{:03}/f{i:05}", i / 100).into_bytes(),
                stat: Stat {
                    size: i,
                    ino: 10 + i,
                    mode: 0o100644,
                    ..Stat::default()
                },
                kind: Kind::File {
                    blob: BlobId([i as u8; 32]),
                },
            })
            .collect();
        commit_tree(&store, dir.path(), entries.clone())?;
        let file = dir.path().join(crate::tree::TREE_FILE);
        let good = std::fs::read(&file).ctx("read", &file)?;
        // A byte of entry 10000's path, in the run of entries 9984 to
        // 10239.
        let at = good
            .windows(6)
            .position(|w| w == b"f10000")
            .expect("the entry is in the file");
        let mut bad = good.clone();
        bad[at + 5] = b'9';
        std::fs::write(&file, &bad).ctx("write", &file)?;
        let read = |named: &str| load_partial(&store, dir.path(), Wanted::new(&[named.into()]));
        let (Loaded::Tree(t), Some(_), Some(p)) = read("d010/f01000")? else {
            panic!("a run not damaged reads");
        };
        assert_eq!(t.entries, [entries[1000].clone()]);
        assert_eq!(p.totals, Totals::of(&entries));
        let (Loaded::Damaged(why), None, None) = read("d100/f10001")? else {
            panic!("the damaged run is read");
        };
        assert!(why.contains("checksum mismatch"), "{why}");
        assert!(matches!(
            crate::tree::load(&store, dir.path())?,
            Loaded::Damaged(_)
        ));
        // Version 2: read whole, and marked stale.
        std::fs::write(&file, &good).ctx("write", &file)?;
        let v2 = crate::tree::tests::older(&good, 2);
        std::fs::write(&file, &v2).ctx("write", &file)?;
        let (Loaded::Tree(t), Some(layers), None) = read("d010/f01000")? else {
            panic!("version 2 reads whole");
        };
        assert!(t.entries == entries && layers.stale);
        // A delta of version 1 on a tree file of version 3: read whole.
        std::fs::write(&file, &good).ctx("write", &file)?;
        let (_, Some(layers), Some(_)) = read("d010/f01000")? else {
            panic!("version 3 reads in part");
        };
        assert!(!layers.stale);
        let gone = vec![(entries[5].path.clone(), None)];
        commit_delta(
            &store,
            dir.path(),
            layers.base,
            (entries.len() - 1, None),
            gone,
        )?;
        let (Loaded::Tree(t), Some(_), None) = read("d010/f01000")? else {
            panic!("a delta of version 1 makes the tree read whole");
        };
        assert_eq!(t.entries.len(), entries.len() - 1);
        Ok(())
    }

    /// A table's count of an inode is a plain count of the list, for
    /// inodes held once, many times (across several stretches), not at
    /// all, below and above every one.
    #[test]
    fn a_table_counts_each_inode_as_the_list_holds_it() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for len in [0, 1, 63, 64, 65, 200, 1_000] {
            let mut list: Vec<u64> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // Few distinct values in some lists: long stretches
                    // of one inode.
                    if len % 2 == 0 { seed % 7 } else { seed % 5_000 }
                })
                .collect();
            list.sort_unstable();
            let bytes: Vec<u8> = list.iter().flat_map(|i| i.to_le_bytes()).collect();
            let at = 0..bytes.len();
            let table = Table::new(std::sync::Arc::new(bytes), at);
            for ino in (0..5_010).chain([u64::MAX]) {
                let plain = list.iter().filter(|&&x| x == ino).count();
                assert_eq!(table.count(ino), plain, "{len} inodes, inode {ino}");
            }
        }
    }
}
