//! The tree read in part: for a snapshot half that Watchman told which
//! paths changed, only the entries that half can look at are decoded; of
//! the rest, one pass over the file keeps the counts and the inodes (see
//! [`load_partial`]).

use std::path::Path;

use super::{
    Entry, KIND_DIR, KIND_FILE, KIND_SYMLINK, Keep, Layers, Loaded, Stat, decode_keeping,
    load_using,
};
use crate::error::Result;
use crate::sys::OwnedFd;

/// What a partial read keeps of the entries it leaves out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Partial {
    /// The paths whose subtrees were read whole (sorted, none below
    /// another); see [`Wanted`].
    pub(crate) roots: Vec<Vec<u8>>,
    /// Counts of the whole tree.
    pub(crate) totals: Totals,
    /// The inode of every file entry of the whole tree, in path order,
    /// a list per run of the tree file as it was read (not joined: at
    /// 100,000 files, joining them cost 1.6 MB of fresh pages per half).
    file_inodes: Vec<Vec<u64>>,
    /// The inodes of the entries left out that are not directories, in
    /// path order, a list per run.
    outside_inodes: Vec<Vec<u64>>,
}

impl Partial {
    /// Whether a file among `kept` (the entries read) shares its inode
    /// with another file entry of the tree, which may be one left out.
    pub(crate) fn links_kept(&self, kept: &[Entry]) -> bool {
        let files = kept
            .iter()
            .filter(|e| matches!(e.kind, super::Kind::File { .. }))
            .map(|e| e.stat.ino);
        !crate::links::shared_inodes_of(files, self.file_inodes()).is_empty()
    }

    /// The inode of every file entry of the whole tree, in path order.
    pub(crate) fn file_inodes(&self) -> impl Iterator<Item = u64> + '_ {
        self.file_inodes.iter().flatten().copied()
    }

    /// The inodes of the entries left out that are not directories, in
    /// path order.
    pub(crate) fn outside_inodes(&self) -> impl Iterator<Item = u64> + '_ {
        self.outside_inodes.iter().flatten().copied()
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
/// keeping only the entries `wanted` says, and the unreadable ones; of the
/// others only their counts and inodes.
pub(crate) fn load_partial(
    store: &OwnedFd,
    store_path: &Path,
    wanted: Wanted,
) -> Result<(Loaded, Option<(Layers, Partial)>)> {
    let mut partial = Partial::default();
    let (loaded, layers) = load_using(store, store_path, |bytes, changes, shadowed| {
        let fresh = || RunKeep::new(&wanted);
        let (t, count, runs) = decode_keeping(bytes, changes, shadowed, Some(fresh))?;
        partial.file_inodes = Vec::with_capacity(runs.len());
        partial.outside_inodes = Vec::with_capacity(runs.len());
        for run in runs {
            partial.totals.add(&run.totals);
            partial.file_inodes.push(run.file_inodes);
            partial.outside_inodes.push(run.outside_inodes);
        }
        Ok((t, count, partial.totals.entries))
    })?;
    partial.roots = wanted.roots;
    Ok((loaded, layers.map(|l| (l, partial))))
}

/// What a partial read keeps of one run of the tree's entries: every
/// entry is counted; only those wanted, and the unreadable ones (always
/// looked at again), are kept.
struct RunKeep<'w> {
    wanted: Cursor<'w>,
    totals: Totals,
    file_inodes: Vec<u64>,
    outside_inodes: Vec<u64>,
}

impl<'w> RunKeep<'w> {
    fn new(wanted: &'w Wanted) -> RunKeep<'w> {
        RunKeep {
            wanted: wanted.cursor(),
            totals: Totals::default(),
            file_inodes: Vec::new(),
            outside_inodes: Vec::new(),
        }
    }
}

impl Keep for RunKeep<'_> {
    fn keep(&mut self, path: &[u8], kind: u8, stat: &Stat, unreadable: bool) -> bool {
        self.totals.add_entry(kind, stat.size, unreadable, 1);
        if kind == KIND_FILE {
            self.file_inodes.push(stat.ino);
        }
        let kept = self.wanted.wants(path) || unreadable;
        if !kept && kind != KIND_DIR {
            self.outside_inodes.push(stat.ino);
        }
        kept
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
            let tree = Tree {
                stamp_ns: 1,
                log_seq: 1,
                turn: TurnId::new("t").expect("valid"),
                pending: false,
                entries: base.clone(),
            };
            TreeWriter::begin(&store, dir.path())?.commit(&store, dir.path(), &tree)?;
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
            let (whole, _) =
                crate::tree::decode_with(&crate::tree::encode(&tree), &changes, &mut Vec::new())
                    .expect("a tree encoded here");
            let delta = crate::tree::Delta {
                base: layers.base,
                stamp_ns: 2,
                log_seq: 2,
                pending: false,
                turn: TurnId::new("t").expect("valid"),
                count: whole.entries.len() as u64,
                changes,
            };
            TreeWriter::begin(&store, dir.path())?.commit_delta(&store, dir.path(), &delta)?;
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
            let (loaded, Some((_, partial))) =
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
            let files: Vec<u64> = whole
                .entries
                .iter()
                .filter(|e| matches!(e.kind, Kind::File { .. }))
                .map(|e| e.stat.ino)
                .collect();
            assert_eq!(
                partial.file_inodes().collect::<Vec<_>>(),
                files,
                "round {round}"
            );
            let outside: Vec<u64> = whole
                .entries
                .iter()
                .filter(|e| !wanted(e, &changed) && !matches!(e.kind, Kind::Dir))
                .map(|e| e.stat.ino)
                .collect();
            assert_eq!(
                partial.outside_inodes().collect::<Vec<_>>(),
                outside,
                "round {round}"
            );
            assert_eq!(part.stamp_ns, 2, "the delta's header");
        }
        Ok(())
    }
}
