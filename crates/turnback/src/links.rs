//! Hard links: files with more than one name.
//!
//! Recording: a captured regular file with more than one name has its
//! inode number in its pre-image (`"link"` in [`crate::log::Pre::File`]).
//! A capture also captures every other name of that inode inside the
//! project (found by walking the project, `.git/` and the store left out),
//! so a rewind has the whole group; a snapshot marks the old tree's file
//! entries that share an inode. Names outside the project cannot be
//! captured: the capture report lists the paths that have some.
//!
//! Restoring: restored paths whose pre-images have the same `link`, bytes
//! and mode were one file. The first (in path order) is restored, and each
//! other one is replaced by a hard link to it (link to a temporary name,
//! then rename), so they are one file again. Paths with the same `link` but
//! different bytes or modes (captured at different times, one of them
//! changed in between), or a link the file system refuses, are restored as
//! separate files and reported per path as split, never silently.
//!
//! Writing through a name: [`crate::Store::write`] replaces the named file
//! by a new one (temporary file and rename, as for any file) and then
//! re-links every other name of the group inside the project to it, so all
//! of them see the new bytes, as after a plain write. Names outside the
//! project keep the old bytes (turnback never writes outside the project);
//! the report lists the paths that have such names.

use crate::sys::OwnedFd;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;

use crate::sys::Errno;
use crate::sys::fs::{AtFlags, FileType};
use serde::Serialize;

use crate::dirstack::{DirStack, Reach};
use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::id::BlobId;
use crate::log::{FileEntry, Pre};
use crate::path::{RelPath, STORE_DIR};
use crate::rewind::{Action, Step};
use crate::store::Place;
use crate::tree::{Entry, Kind};

/// The link key of a regular file whose `fstat` is `st`: its inode number
/// when it has more than one name.
pub(crate) fn link_of(st: &crate::sys::fs::Stat) -> Option<u64> {
    (crate::sys::nlink(st) > 1).then_some(st.st_ino)
}

/// The values that occur at least twice in `inodes`.
pub(crate) fn shared_inodes(inodes: impl Iterator<Item = u64>) -> SharedInodes {
    // Sorted, not hashed: 100,000 inodes sort in a third of the time a
    // hash set of them takes to build.
    let mut all: Vec<u64> = inodes.collect();
    all.sort_unstable();
    let mut shared: Vec<u64> = all
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    shared.dedup();
    SharedInodes(shared)
}

/// The inodes of `asked` that `inodes` holds more than once: what
/// [`shared_inodes`] of `inodes` says about them, for one pass over
/// `inodes` and no sort of them (a few changed files of a large tree).
pub(crate) fn shared_inodes_of(
    asked: impl Iterator<Item = u64>,
    inodes: impl Iterator<Item = u64>,
) -> SharedInodes {
    let asked = FewInodes::new(asked.collect());
    let mut seen = vec![0u8; asked.sorted.len()];
    for ino in inodes {
        if let Some(k) = asked.position(ino) {
            seen[k] = seen[k].saturating_add(1);
        }
    }
    SharedInodes(
        asked
            .sorted
            .into_iter()
            .zip(seen)
            .filter_map(|(ino, n)| (n >= 2).then_some(ino))
            .collect(),
    )
}

/// A few inodes, asked about once for each of the many inodes of a tree:
/// sorted, with a filter of their low bits, so that most inodes not among
/// them are turned away without a search.
pub(crate) struct FewInodes {
    sorted: Vec<u64>,
    /// Bit `ino % 4096` of each inode held.
    low_bits: Box<[u64; 64]>,
}

impl FewInodes {
    pub(crate) fn new(mut inodes: Vec<u64>) -> FewInodes {
        inodes.sort_unstable();
        inodes.dedup();
        let mut low_bits = Box::new([0u64; 64]);
        for ino in &inodes {
            let bit = (ino % 4096) as usize;
            low_bits[bit / 64] |= 1 << (bit % 64);
        }
        FewInodes {
            sorted: inodes,
            low_bits,
        }
    }

    /// Where `ino` is among them (sorted), if it is.
    pub(crate) fn position(&self, ino: u64) -> Option<usize> {
        let bit = (ino % 4096) as usize;
        if self.low_bits[bit / 64] & (1 << (bit % 64)) == 0 {
            return None;
        }
        self.sorted.binary_search(&ino).ok()
    }

    /// Whether `ino` is among them.
    pub(crate) fn contains(&self, ino: u64) -> bool {
        self.position(ino).is_some()
    }

    /// The inodes held, sorted.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.sorted.iter().copied()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

/// The inodes [`shared_inodes`] found more than once, sorted.
#[derive(Debug, Default)]
pub(crate) struct SharedInodes(Vec<u64>);

impl SharedInodes {
    /// Of the inodes `found` (in any order, repeated or not).
    pub(crate) fn of(mut found: Vec<u64>) -> SharedInodes {
        found.sort_unstable();
        found.dedup();
        SharedInodes(found)
    }

    /// Whether `ino` is one of them.
    pub(crate) fn contains(&self, ino: &u64) -> bool {
        self.0.binary_search(ino).is_ok()
    }
}

/// The other names of hard-linked paths.
#[derive(Debug, Default)]
pub(crate) struct Names {
    /// Names inside the project, not among the paths asked about.
    pub(crate) found: Vec<RelPath>,
    /// Paths asked about that also have names outside the project.
    pub(crate) outside: Vec<RelPath>,
}

/// A regular file's identity and its number of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Inode {
    dev: u64,
    ino: u64,
}

/// The regular files with more than one name among some paths: inode ->
/// (names it has, names known: the paths, then the names found). A file
/// with one name has no other: only the others are kept (a rewind of
/// 100,000 files would otherwise copy every path here).
#[derive(Debug, Default)]
pub(crate) struct Linked(BTreeMap<Inode, (u64, Vec<RelPath>)>);

impl Linked {
    /// Notes `rel`, whose `lstat` is `st`, when it is a regular file with
    /// more than one name.
    pub(crate) fn note(&mut self, rel: &RelPath, st: &crate::sys::fs::Stat) {
        if let Some((inode, nlink)) = linked_inode(st) {
            let e = self.0.entry(inode).or_insert((nlink, Vec::new()));
            if !e.1.contains(rel) {
                e.1.push(rel.clone());
            }
        }
    }
}

/// Finds the other names, inside the project, of every path in `rels` that
/// is a regular file with more than one name. Walks the project only when
/// some of those names are not in `rels` already. A path or directory that
/// is missing, not a directory or not readable (`EACCES`) is passed over;
/// any other error (out of descriptors, an I/O error) fails the call.
pub(crate) fn other_names(place: &Place, rels: &[RelPath]) -> Result<Names> {
    let mut linked = Linked::default();
    let mut walk = place.walk();
    for rel in rels {
        if let Some(st) = stat_rel(&mut walk, rel).ctx("look at", place.root.join(rel.as_str()))? {
            linked.note(rel, &st);
        }
    }
    drop(walk);
    names_of(place, linked, rels)
}

/// The other names, inside the project, of the files of `linked` (noted
/// among `rels` by whoever looked at them, see [`other_names`]).
pub(crate) fn names_of(place: &Place, linked: Linked, rels: &[RelPath]) -> Result<Names> {
    let mut wanted = linked.0;
    let mut names = Names::default();
    if wanted.values().all(|(n, known)| known.len() as u64 >= *n) {
        return Ok(names);
    }
    let root = crate::sys::dup(&place.root_fd).ctx("open", &place.root)?;
    let skip = match &place.dirs {
        Some(d) => {
            let st = crate::sys::fs::fstat(&d.store).ctx("look at", &place.store_path)?;
            Some(Inode {
                dev: crate::sys::dev(&st),
                ino: st.st_ino,
            })
        }
        None => None,
    };
    let mut walk = Walk {
        wanted: &mut wanted,
        skip,
        found: &mut names.found,
    };
    if let Err((at, e)) = walk.dir(root, None) {
        let path = match at {
            Some(p) => place.root.join(p.as_str()),
            None => place.root.clone(),
        };
        return Err(e).ctx("look for the other names of a hard-linked file in", path);
    }
    for (n, known) in wanted.values() {
        if (known.len() as u64) < *n {
            names
                .outside
                .extend(known.iter().filter(|k| rels.contains(k)).cloned());
        }
    }
    names.found.sort();
    names.found.dedup();
    names.outside.sort();
    Ok(names)
}

/// Whether an error only means "nothing to find here".
fn passed_over(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::NOENT | Errno::NOTDIR | Errno::ACCESS | Errno::LOOP)
    ) || matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory | io::ErrorKind::PermissionDenied
    )
}

/// The `lstat` of `rel`, `None` when it or a directory on the way is
/// missing, not a directory or not readable. `walk` holds the directories
/// on the way (paths in order open each once).
fn stat_rel(walk: &mut DirStack, rel: &RelPath) -> io::Result<Option<crate::sys::fs::Stat>> {
    let dir = match walk.parent_of(rel, false) {
        Ok(Reach::Open(dir)) => dir,
        Ok(Reach::Missing { .. } | Reach::NotDir { .. }) => return Ok(None),
        Err(e) if passed_over(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    match crate::sys::fs::statat(dir, rel.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(e) if passed_over(&e.into()) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The inode and link count of `st` when it is a regular file with more
/// than one name.
fn linked_inode(st: &crate::sys::fs::Stat) -> Option<(Inode, u64)> {
    let regular = crate::sys::file_type(crate::sys::mode(st)) == FileType::RegularFile;
    (regular && crate::sys::nlink(st) > 1).then_some((
        Inode {
            dev: crate::sys::dev(st),
            ino: st.st_ino,
        },
        crate::sys::nlink(st),
    ))
}

/// A walk of the project looking for the names of wanted inodes.
struct Walk<'a> {
    wanted: &'a mut BTreeMap<Inode, (u64, Vec<RelPath>)>,
    skip: Option<Inode>,
    found: &'a mut Vec<RelPath>,
}

/// An error of the walk, with the directory where it happened.
type WalkError = (Option<RelPath>, io::Error);

impl Walk<'_> {
    fn done(&self) -> bool {
        self.wanted
            .values()
            .all(|(n, known)| known.len() as u64 >= *n)
    }

    /// Looks through `dir` (at `at`, `None` for the root) and below it. A
    /// directory that cannot be read for lack of permission is passed over
    /// (its names stay unfound: the paths are reported as having names
    /// outside the project).
    fn dir(&mut self, dir: OwnedFd, at: Option<&RelPath>) -> Result<(), WalkError> {
        let fail = |e: io::Error| (at.cloned(), e);
        let mut entries = match crate::sys::fs::Dir::read_from(&dir) {
            Ok(d) => d,
            Err(e) if passed_over(&e.into()) => return Ok(()),
            Err(e) => return Err(fail(e.into())),
        };
        let mut subdirs = Vec::new();
        while let Some(entry) = entries.read() {
            if self.done() {
                return Ok(());
            }
            let entry = entry.map_err(|e| fail(e.into()))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if matches!(name, "." | ".." | ".git" | STORE_DIR) {
                continue;
            }
            let st = match crate::sys::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(e) if passed_over(&e.into()) => continue,
                Err(e) => return Err(fail(e.into())),
            };
            let inode = Inode {
                dev: crate::sys::dev(&st),
                ino: st.st_ino,
            };
            let rel = match at {
                None => RelPath::parse(name),
                Some(p) => RelPath::parse(&format!("{p}/{name}")),
            };
            let Ok(rel) = rel else { continue };
            match crate::sys::file_type(crate::sys::mode(&st)) {
                FileType::Directory if Some(inode) != self.skip => subdirs.push(rel),
                FileType::RegularFile => {
                    if let Some((_, known)) = self.wanted.get_mut(&inode)
                        && !known.contains(&rel)
                    {
                        known.push(rel.clone());
                        self.found.push(rel);
                    }
                }
                _ => {}
            }
        }
        drop(entries);
        for sub in subdirs {
            if self.done() {
                return Ok(());
            }
            match fsx::open_subdir(&dir, sub.file_name()) {
                Ok(Some(fd)) => self.dir(fd, Some(&sub))?,
                Ok(None) => {}
                Err(e) if passed_over(&e) => {}
                Err(e) => return Err(fail(e)),
            }
        }
        Ok(())
    }
}

/// Completes the groups of a snapshot's changes: for every changed file
/// that shared its inode with other entries of the `old` tree, those other
/// names are recorded too (with their old state, usually unchanged), so a
/// rewind restores the whole group as one file, also when the command
/// replaced one name by a new file.
pub(crate) fn add_unchanged_names(
    old: &[Entry],
    files: &mut Vec<FileEntry>,
    blob_size: impl Fn(&BlobId) -> Option<u64>,
) {
    let links: HashSet<u64> = files
        .iter()
        .filter_map(|f| match f.pre {
            Pre::File { link, .. } => link,
            _ => None,
        })
        .collect();
    if links.is_empty() {
        return;
    }
    let present: HashSet<RelPath> = files.iter().map(|f| f.path.clone()).collect();
    for e in old {
        let Kind::File { blob } = &e.kind else {
            continue;
        };
        if !links.contains(&e.stat.ino) {
            continue;
        }
        let (Ok(path), Some(size)) = (
            std::str::from_utf8(&e.path)
                .map_err(|_| ())
                .and_then(|p| RelPath::parse(p).map_err(|_| ())),
            blob_size(blob),
        ) else {
            continue;
        };
        if present.contains(&path) {
            continue;
        }
        files.push(FileEntry {
            path,
            pre: Pre::File {
                blob: *blob,
                size,
                mode: e.stat.perm(),
                link: Some(e.stat.ino),
            },
        });
    }
}

/// Replaces each of `others` by a hard link to `target` (link to a
/// temporary name beside it, then rename), and makes the renames durable.
pub(crate) fn relink(place: &Place, target: &RelPath, others: &[RelPath]) -> Result<()> {
    if others.is_empty() {
        return Ok(());
    }
    let open_parent = |rel: &RelPath| -> Result<OwnedFd> {
        let mut dir = crate::sys::dup(&place.root_fd).ctx("open", &place.root)?;
        for anc in rel.ancestors() {
            let shown = place.root.join(anc.as_str());
            dir = fsx::open_subdir(&dir, anc.file_name())
                .ctx("open directory", &shown)?
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
                .ctx("open directory", &shown)?;
        }
        Ok(dir)
    };
    let from = open_parent(target)?;
    for other in others {
        let shown = place.root.join(other.as_str());
        let dir = open_parent(other)?;
        link_over(&from, target.file_name(), &dir, other.file_name())
            .ctx("hard-link to the new file", &shown)?;
        fsx::fsync(&dir).ctx("fsync", shown.parent().unwrap_or(&place.root))?;
    }
    Ok(())
}

/// Makes `name` in `dir` a hard link to `from_name` in `from`, replacing
/// what is there by rename (never seen missing).
fn link_over(
    from: &OwnedFd,
    from_name: impl fsx::Name,
    dir: &OwnedFd,
    name: impl fsx::Name,
) -> io::Result<()> {
    let tmp = fsx::temp_name(name);
    crate::sys::fs::linkat(from, from_name, dir, tmp.as_str(), AtFlags::empty())?;
    fsx::rename(dir, &tmp, name).inspect_err(|_| {
        let _ = fsx::unlink(dir, &tmp);
    })
}

/// A set of restored paths that were one file: the first is restored, the
/// others are linked to it.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    leader: RelPath,
    followers: Vec<RelPath>,
}

impl Group {
    /// Every name of the group, the leader first.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &RelPath> {
        std::iter::once(&self.leader).chain(&self.followers)
    }
}

/// A path restored as a separate file although it was a hard link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkSplit {
    /// The path.
    pub path: RelPath,
    /// Why it is no longer linked to the others.
    pub reason: String,
}

/// Groups the restore steps that were one file, and names the paths that
/// shared an inode but cannot be one file again (different bytes or mode).
pub(crate) fn plan<'s>(steps: impl IntoIterator<Item = &'s Step>) -> (Vec<Group>, Vec<LinkSplit>) {
    let mut by_link: BTreeMap<u64, Vec<&Step>> = BTreeMap::new();
    for s in steps {
        if let Action::Restore {
            link: Some(link), ..
        } = &s.action
        {
            by_link.entry(*link).or_default().push(s);
        }
    }
    let mut groups = Vec::new();
    let mut splits = Vec::new();
    for (_, mut members) in by_link {
        members.sort_by(|a, b| a.path.cmp(&b.path));
        let mut same: HashMap<(BlobId, u32), Vec<RelPath>> = HashMap::new();
        for m in &members {
            if let Action::Restore { blob, mode, .. } = &m.action {
                same.entry((*blob, *mode)).or_default().push(m.path.clone());
            }
        }
        if same.len() > 1 {
            let all: Vec<&str> = members.iter().map(|m| m.path.as_str()).collect();
            for m in &members {
                splits.push(LinkSplit {
                    path: m.path.clone(),
                    reason: format!(
                        "it was a hard link of {}, but their recorded bytes or modes differ (captured at different times); restored as a separate file",
                        all.iter().filter(|p| **p != m.path.as_str()).cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        for (_, mut paths) in same {
            if paths.len() > 1 {
                paths.sort();
                let leader = paths.remove(0);
                groups.push(Group {
                    leader,
                    followers: paths,
                });
            }
        }
    }
    (groups, splits)
}

/// After the restored files are in place: links each group's followers to
/// its leader. `dir_of` gives the open directory of a restored path;
/// `restored` says which paths were restored. A follower that cannot be
/// linked keeps its own restored copy and is reported as split.
pub(crate) fn relink_groups<'a>(
    groups: &[Group],
    dir_of: impl Fn(&RelPath) -> Option<&'a OwnedFd>,
    restored: &HashSet<&RelPath>,
    splits: &mut Vec<LinkSplit>,
) {
    for g in groups {
        let split = |path: &RelPath, why: String| LinkSplit {
            path: path.clone(),
            reason: format!(
                "it was a hard link of {}, but {why}; restored as a separate file",
                g.leader
            ),
        };
        let leader_dir = dir_of(&g.leader).filter(|_| restored.contains(&g.leader));
        for f in &g.followers {
            let res = match (leader_dir, dir_of(f)) {
                (Some(from), Some(to)) if restored.contains(f) => {
                    link_over(from, g.leader.file_name(), to, f.file_name())
                        .map_err(|e| format!("the link could not be made: {e}"))
                }
                _ => Err("one of them could not be restored".to_string()),
            };
            if let Err(why) = res {
                splits.push(split(f, why));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_inodes_are_the_ones_seen_twice_or_more() {
        let shared = shared_inodes([7, 3, 9, 3, 1, 7, 3].into_iter());
        assert!(shared.contains(&3) && shared.contains(&7));
        assert!(![1, 9, 4].iter().any(|i| shared.contains(i)));
        assert!(!shared_inodes(std::iter::empty()).contains(&0));
    }

    /// A few inodes answer as a plain set does, also for inodes that share
    /// their low bits with one held, and the shared ones among them are
    /// those `shared_inodes` finds.
    #[test]
    fn a_few_inodes_answer_as_a_set_and_find_the_shared_ones() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let held: Vec<u64> = (0..300).map(|_| next() % 1_000_000).collect();
        let few = FewInodes::new(held.clone());
        let set: HashSet<u64> = held.iter().copied().collect();
        let near = held
            .iter()
            .flat_map(|&i| [i + 4096, i.saturating_sub(4096), i + 1]);
        let random: Vec<u64> = (0..20_000).map(|_| next() % 1_000_000).collect();
        for ino in near
            .chain(random.iter().copied())
            .chain(held.iter().copied())
        {
            assert_eq!(few.contains(ino), set.contains(&ino), "inode {ino}");
        }
        assert!(!few.is_empty() && FewInodes::new(Vec::new()).is_empty());
        let tree: Vec<u64> = random
            .iter()
            .chain(&held[..50])
            .chain(&held[..20])
            .copied()
            .collect();
        let asked = held[..100].iter().chain(&random[..10]).copied();
        let of = shared_inodes_of(asked.clone(), tree.iter().copied());
        let all = shared_inodes(tree.iter().copied());
        for ino in asked {
            assert_eq!(of.contains(&ino), all.contains(&ino), "inode {ino}");
        }
    }

    fn restore(path: &str, blob: u8, mode: u32, link: Option<u64>) -> Step {
        Step {
            path: RelPath::parse(path).expect("valid path"),
            action: Action::Restore {
                blob: BlobId([blob; 32]),
                size: 1,
                mode,
                link,
            },
        }
    }

    #[test]
    fn same_link_bytes_and_mode_make_one_group_others_are_split() {
        let steps = [
            restore("b", 1, 0o644, Some(7)),
            restore("a", 1, 0o644, Some(7)),
            restore("c", 1, 0o644, None),
            restore("x", 2, 0o644, Some(9)),
            restore("y", 3, 0o644, Some(9)),
            restore("m1", 4, 0o644, Some(11)),
            restore("m2", 4, 0o600, Some(11)),
        ];
        let (groups, splits) = plan(&steps);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].leader.as_str(), "a");
        let followers: Vec<&str> = groups[0].followers.iter().map(|f| f.as_str()).collect();
        assert_eq!(followers, ["b"]);
        let mut split: Vec<&str> = splits.iter().map(|s| s.path.as_str()).collect();
        split.sort();
        assert_eq!(split, ["m1", "m2", "x", "y"]);
        assert!(splits.iter().all(|s| s.reason.contains("hard link")));
    }
}
