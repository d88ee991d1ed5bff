//! Settling an interrupted rewind, revert, undo or redo: rolling back what
//! it changed, from its `saved` record, before any other mutation.
//!
//! Such an operation appends a `saved` record (the state of every path it
//! may change: each planned path, its ancestors, and the other names of a
//! hard-linked file) and makes it durable before it touches the project;
//! its own record comes only after every change is durable (see
//! [`crate::rewind`]). A `saved` record that is the log's last one is
//! therefore the mark of an operation that was killed, lost power or failed
//! in between, and of nothing else (see [`crate::log`]). The project may then
//! hold part of its changes, the temporary files it staged
//! (`.NAME.turnback-tmp-PID-N`) and directories it made, and no record says
//! so: a later operation that does not touch those paths (a rewind of an
//! earlier turn) would report success over them.
//!
//! Under the store lock, before anything else ([`Store::begin_mutation`]),
//! [`Store::roll_back_interrupted`] rolls the operation back:
//!
//! 1. every directory holding one of the saved paths is swept of the
//!    temporary files of processes that are gone;
//! 2. each saved path's current state is compared with its saved state. A
//!    path that differs is put back only when what it holds now is
//!    something the operation could have left there: nothing, a directory,
//!    or a state the log records for that path (a turn's pre-image or a
//!    saved state: the only states a rewind, revert, undo or redo writes).
//!    Anything else was written by someone since, and is left as it is;
//! 3. the paths are put back by the code that applies a rewind
//!    ([`Store::execute`]): files through a temporary file and a rename, a
//!    path that was absent removed (a directory only when it is empty, so a
//!    directory the operation made goes and one holding anyone's files
//!    stays), with the same durability;
//! 4. a `rolled_back` record naming the `saved` record is appended and
//!    fsynced, listing the paths left as they are and why.
//!
//! Invariants: nothing is changed unless the log's last record is a `saved`
//! record; a file is replaced or removed only when its current bytes are
//! a state the log holds for that path; a directory is removed only when
//! empty and absent in the saved states. After step 4 the last record is
//! no longer the `saved` one, so a rollback is done once: a later edit is
//! never undone by a second pass. A rollback that is itself interrupted
//! leaves the `saved` record last, and the next mutation runs it again
//! (every step leads to the same states; its own temporary files are
//! swept).
//!
//! Why rolled back and not finished: a `saved` record does not say which
//! operation wrote it (the turn of a rewind or a revert is only in the
//! operation's own record, which never landed), so the records cannot
//! finish it; the saved states are what they do hold, exactly. Rolling back
//! makes each operation all or nothing, as the log tells it: the log says
//! it did not happen, and the folder then agrees. Running the command again
//! starts from the folder as it was before the first attempt, and its undo
//! gives that folder back.

use std::collections::{HashMap, HashSet};

use crate::aside;
use crate::dirstack::{DirStack, parent_bytes};
use crate::error::Result;
use crate::id::TurnId;
use crate::log::{FailedPath, FileEntry, Op, Pre};
use crate::path::RelPath;
use crate::rewind::{Report, steps_from};
use crate::store::Store;

impl Store {
    /// Rolls back the operation whose `saved` record is the log's last
    /// record, if any (see the module doc), and says so in the store's
    /// warnings. Called under the store lock.
    pub(crate) fn roll_back_interrupted(&mut self) -> Result<()> {
        let seq = self.index.last_seq;
        let Some(saved) = self.index.saved.get(&seq).cloned() else {
            return Ok(());
        };
        let mut paths: Vec<RelPath> = saved.iter().map(|e| e.path.clone()).collect();
        paths.sort();
        self.sweep_dirs_of(&paths);
        let (back, mut left) = self.to_put_back(&saved, &paths)?;
        let steps = steps_from(back.iter().map(|e| (&e.path, &e.pre)), self);
        let turn = TurnId::new("rolled-back").expect("a valid turn id");
        let mut report = Report::new("rollback", turn, Vec::new(), false, steps);
        self.execute_plan(&mut report, &HashSet::new())?;
        // A rollback is recovery, not a wait to shorten: the names its
        // renames left in the trash go now, so a second recovery finds
        // nothing more to do (see `trash.rs`).
        self.empty_trash();
        left.extend(report.failed);
        left.sort_by(|a, b| a.path.cmp(&b.path));
        self.append(Op::RolledBack {
            saved: seq,
            failed: left.clone(),
        })?;
        let mut note = format!(
            "an operation interrupted before its record (saved record {seq}) was rolled back: {} paths put back, {} removed",
            report.restored.len(),
            report.deleted.len()
        );
        for f in &left {
            note.push_str(&format!("; {} left as it is: {}", f.path, f.reason));
        }
        self.warn(note);
        Ok(())
    }

    /// Sweeps every directory holding one of `paths` (sorted) of stale
    /// temporary files: where the operation staged its files.
    fn sweep_dirs_of(&self, paths: &[RelPath]) {
        let mut walk = DirStack::new(&self.place.root_fd).sweeping();
        for p in paths {
            // A directory that is gone or replaced holds nothing to sweep.
            let _ = walk.reach(parent_bytes(p), false);
        }
    }

    /// The saved states to put back: the paths whose current state differs
    /// and is one the operation could have left. The others that differ
    /// are returned with the reason they stay. A file kept aside (see
    /// `aside.rs`) that is gone, or that is still the file at its path,
    /// was not replaced: nothing is put back (and the store's name of the
    /// latter goes).
    fn to_put_back(
        &self,
        saved: &[FileEntry],
        paths: &[RelPath],
    ) -> Result<(Vec<FileEntry>, Vec<FailedPath>)> {
        let current: HashMap<RelPath, Pre> = self
            .current_entries(paths)?
            .into_iter()
            .map(|e| (e.path, e.pre))
            .collect();
        let mut buckets = aside::Buckets::default();
        let recorded = self.recorded_states(paths, &mut buckets)?;
        let mut back = Vec::new();
        let mut left = Vec::new();
        for e in saved {
            let Some(now) = current.get(&e.path) else {
                continue;
            };
            let was = match &e.pre {
                Pre::Aside { seq, n, .. } => match self.kept_state(&e.path, *seq, *n, &mut buckets)
                {
                    Kept::Gone => continue,
                    Kept::AtPath => {
                        // Best effort: a name left goes with its record.
                        let _ = buckets.remove(&self.place.dirs().store, *seq, *n);
                        continue;
                    }
                    Kept::Replaced(pre) => pre,
                    Kept::Unreadable(reason) => {
                        left.push(FailedPath {
                            path: e.path.clone(),
                            reason,
                        });
                        continue;
                    }
                },
                pre => pre.clone(),
            };
            if same_state(&was, now) {
                continue;
            }
            let known = recorded.get(&e.path).map_or(&[][..], Vec::as_slice);
            if could_have_left(now, known) {
                back.push(e.clone());
            } else {
                left.push(FailedPath {
                    path: e.path.clone(),
                    reason:
                        "changed since an interrupted operation, by someone else; left as it is"
                            .into(),
                });
            }
        }
        // Best effort, as the removals.
        let _ = buckets.sync();
        Ok((back, left))
    }

    /// What became of the file kept aside as `n` of the record `seq` for
    /// `path`.
    fn kept_state(&self, path: &RelPath, seq: u64, n: u64, buckets: &mut aside::Buckets) -> Kept {
        let file = match buckets.open(&self.place.dirs().store, seq, n) {
            Ok(Some(file)) => file,
            Ok(None) => return Kept::Gone,
            Err(e) => {
                return Kept::Unreadable(format!(
                    "the file kept for it in the store cannot be opened ({e}); left as it is"
                ));
            }
        };
        let at_path = crate::sys::fs::statat(
            &self.place.root_fd,
            path.as_path(),
            crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
        );
        let kept = crate::sys::fs::fstat(&file);
        if let (Ok(a), Ok(k)) = (&at_path, &kept)
            && crate::sys::dev(a) == crate::sys::dev(k)
            && a.st_ino == k.st_ino
        {
            return Kept::AtPath;
        }
        match hash_file(&file, kept.ok().map(|k| crate::sys::mode(&k))) {
            Some(pre) => Kept::Replaced(pre),
            None => Kept::Unreadable(
                "the file kept for it in the store cannot be read; left as it is".into(),
            ),
        }
    }

    /// Every state the log records for each of `paths`: the pre-images of
    /// every turn and the states of every `saved` record (a file kept aside
    /// by its hash).
    fn recorded_states(
        &self,
        paths: &[RelPath],
        buckets: &mut aside::Buckets,
    ) -> Result<HashMap<&RelPath, Vec<Pre>>> {
        let wanted: std::collections::HashSet<&RelPath> = paths.iter().collect();
        let mut out: HashMap<&RelPath, Vec<Pre>> = HashMap::new();
        let turns = self.index.turns.iter().collect::<Result<Vec<_>>>()?;
        let entries = turns
            .into_iter()
            .flat_map(|t| &t.files)
            .map(|c| &c.entry)
            .chain(self.index.saved.values().flatten());
        for e in entries.filter(|e| wanted.contains(&e.path)) {
            let pre = match &e.pre {
                Pre::Aside { seq, n, .. } => {
                    let file = buckets.open(&self.place.dirs().store, *seq, *n);
                    match file.ok().flatten().and_then(|f| hash_file(&f, None)) {
                        Some(pre) => pre,
                        None => continue,
                    }
                }
                pre => pre.clone(),
            };
            out.entry(&e.path).or_default().push(pre);
        }
        Ok(out)
    }
}

/// What became of a file kept aside.
enum Kept {
    /// Gone: the operation left its path as it was.
    Gone,
    /// Still the file at its path: not replaced.
    AtPath,
    /// Replaced at its path; its state.
    Replaced(Pre),
    /// There, but it cannot be read: the path is left, and said so.
    Unreadable(String),
}

/// The state of the kept file `file`, by its bytes' hash (`None` when it
/// cannot be read).
fn hash_file(file: &std::fs::File, mode: Option<u32>) -> Option<Pre> {
    let mut h = crate::pack::HashingReader::new(file);
    std::io::copy(&mut h, &mut std::io::sink()).ok()?;
    let (blob, size) = h.finish();
    Some(Pre::File {
        blob,
        size,
        mode: mode.unwrap_or(0o644),
        link: None,
    })
}

/// Whether two states are the same for a rollback (a file's link inode
/// number aside).
fn same_state(a: &Pre, b: &Pre) -> bool {
    match (a, b) {
        (
            Pre::File {
                blob: x, mode: m, ..
            },
            Pre::File {
                blob: y, mode: n, ..
            },
        ) => x == y && m & 0o7777 == n & 0o7777,
        _ => a == b,
    }
}

/// Whether `now` is something a rewind, revert, undo or redo could have
/// left at a path whose recorded states are `known`: nothing, a directory
/// (removed only when empty), or one of those states.
fn could_have_left(now: &Pre, known: &[Pre]) -> bool {
    match now {
        Pre::Absent | Pre::Dir { .. } => true,
        Pre::File { blob, .. } => known
            .iter()
            .any(|k| matches!(k, Pre::File { blob: b, .. } if b == blob)),
        Pre::Symlink { target } => known
            .iter()
            .any(|k| matches!(k, Pre::Symlink { target: t } if t == target)),
        Pre::Fifo { .. } => known.iter().any(|k| matches!(k, Pre::Fifo { .. })),
        // Current states are read, never kept aside.
        Pre::Skipped { .. } | Pre::Aside { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsx::TEMP_MARK;
    use crate::rewind::RewindOptions;
    #[cfg(unix)]
    use crate::test_project::Beside;
    use std::fs;
    use std::path::Path;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn turn(s: &str) -> TurnId {
        TurnId::new(s).expect("valid turn id")
    }

    /// The folder as (path, contents or "<dir>"), the store left out.
    fn tree(root: &Path) -> std::io::Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(dir) = todo.pop() {
            for e in fs::read_dir(&dir)? {
                let path = e?.path();
                let rel = path
                    .strip_prefix(root)
                    .map_err(std::io::Error::other)?
                    .to_string_lossy()
                    .into_owned();
                if rel.starts_with(".turnback") {
                    continue;
                }
                if path.is_dir() {
                    out.push((rel, "<dir>".into()));
                    todo.push(path);
                } else {
                    out.push((rel, fs::read_to_string(&path)?));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The name of a temporary file beside `name` of a process that is gone.
    fn stale_temp(name: &str) -> std::io::Result<String> {
        // This test program, listing its tests: a process that exits at
        // once, on every platform.
        let mut child = std::process::Command::new(std::env::current_exe()?)
            .arg("--list")
            .stdout(std::process::Stdio::null())
            .spawn()?;
        let dead = child.id();
        child.wait()?;
        Ok(format!(".{name}{TEMP_MARK}{dead}-0"))
    }

    /// What an operation killed among its renames did to `name`: its
    /// restored bytes written to a temporary file of a process that is gone
    /// and renamed over it.
    #[cfg(unix)]
    fn rename_from_stale_temp(root: &Path, name: &str, bytes: &str) -> std::io::Result<()> {
        let temp = root.join(stale_temp(name)?);
        fs::write(&temp, bytes)?;
        fs::rename(&temp, root.join(name))
    }

    /// t0 writes z.txt; t1 changes a.txt and makes gen/new.txt; t1 is
    /// rewound. Then an undo of that rewind saves its paths and is killed
    /// after making gen/ and staging gen/new.txt's temporary file, with
    /// a.txt already renamed into place. Returns the folder before t0.
    fn interrupted_undo(
        root: &Path,
    ) -> std::result::Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
        fs::write(root.join("a.txt"), "alpha\n")?;
        let before_t0 = tree(root)?;
        let mut store = Store::open(root)?;
        store.write(&turn("t0"), None, "z.txt", b"zed\n")?;
        store.write(&turn("t1"), None, "a.txt", b"alpha by t1\n")?;
        store.write(&turn("t1"), None, "gen/new.txt", b"generated\n")?;
        store.rewind(&turn("t1"), &RewindOptions::default())?;
        // What the undo does before it is killed.
        let paths: Vec<RelPath> = ["a.txt", "gen", "gen/new.txt"]
            .iter()
            .map(|p| RelPath::parse(p))
            .collect::<std::result::Result<_, _>>()?;
        store.save_states(&paths, None)?;
        fs::create_dir(root.join("gen"))?;
        fs::write(root.join("gen").join(stale_temp("new.txt")?), "generated\n")?;
        fs::write(root.join("a.txt"), "alpha by t1\n")?;
        Ok(before_t0)
    }

    /// A rewind killed among its renames, the files it replaces kept
    /// aside: the rollback copies a replaced file back from the store, and
    /// a kept file still at its path loses its store name.
    #[cfg(unix)]
    #[test]
    fn an_interrupted_rewind_is_rolled_back_from_the_files_it_kept_aside() -> TestResult {
        use std::os::unix::fs::MetadataExt;
        let project = Beside::new(&[("a.txt", "alpha\n"), ("b.txt", "beta\n")])?;
        let root = &project.root;
        let mut store = project.open()?;
        store.capture_many(&turn("t1"), None, &["a.txt", "b.txt"])?;
        fs::write(root.join("a.txt"), "alpha by t1\n")?;
        fs::write(root.join("b.txt"), "beta by t1\n")?;
        let before = tree(root)?;
        // What the rewind does before it is killed: both files kept, a.txt
        // replaced by its restored bytes, b.txt not yet.
        let paths = vec![RelPath::parse("a.txt")?, RelPath::parse("b.txt")?];
        store.save_states(&paths, Some(&|_| crate::store::Expect::Nothing))?;
        assert_eq!(fs::metadata(root.join("b.txt"))?.nlink(), 2, "not kept");
        rename_from_stale_temp(root, "a.txt", "alpha\n")?;
        drop(store);
        let mut store = project.open()?;
        store.ensure_created()?;
        assert_eq!(tree(root)?, before);
        assert_eq!(fs::metadata(root.join("a.txt"))?.nlink(), 1);
        assert_eq!(fs::metadata(root.join("b.txt"))?.nlink(), 1);
        assert!(
            store
                .warnings()
                .iter()
                .any(|w| w.contains("1 paths put back")),
            "{:?}",
            store.warnings()
        );
        Ok(())
    }

    /// A kept file that cannot be read (here: a directory stands in its
    /// place) leaves its path as it is, and the rollback says so.
    #[cfg(unix)]
    #[test]
    fn a_kept_file_that_cannot_be_read_leaves_its_path_and_says_so() -> TestResult {
        let project = Beside::new(&[("a.txt", "alpha\n")])?;
        let root = &project.root;
        let mut store = project.open()?;
        store.capture(&turn("t1"), None, "a.txt")?;
        fs::write(root.join("a.txt"), "alpha by t1\n")?;
        let paths = vec![RelPath::parse("a.txt")?];
        let seq = store.save_states(&paths, Some(&|_| crate::store::Expect::Nothing))?;
        let kept = store.store_dir().join(format!("aside/{seq}/0/0"));
        fs::remove_file(&kept)?;
        fs::create_dir(&kept)?;
        rename_from_stale_temp(root, "a.txt", "alpha\n")?;
        drop(store);
        let mut store = project.open()?;
        store.ensure_created()?;
        assert_eq!(fs::read(root.join("a.txt"))?, b"alpha\n", "left as it is");
        assert!(
            store
                .warnings()
                .iter()
                .any(|w| w.contains("a.txt left as it is: the file kept for it")),
            "{:?}",
            store.warnings()
        );
        Ok(())
    }

    #[test]
    fn a_rewind_after_an_interrupted_undo_rolls_it_back_first() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let before_t0 = interrupted_undo(tmp.path())?;
        let mut store = Store::open(tmp.path())?;
        let report = store.rewind(&turn("t0"), &RewindOptions::default())?;
        assert!(report.complete(), "{:?}", report.failed);
        assert_eq!(
            tree(tmp.path())?,
            before_t0,
            "no stray gen/ or temporary file"
        );
        assert!(
            store.warnings().iter().any(|w| w.contains("rolled back")),
            "{:?}",
            store.warnings()
        );
        // The log: the saved record, its rolled_back record, then the rewind's.
        let bytes = fs::read(store.store_dir().join(crate::log::LOG_FILE))?;
        let ops: Vec<Op> = crate::log::parse(&bytes, 1)
            .lines
            .into_iter()
            .filter_map(|(_, r)| r.ok().map(|r| r.op))
            .collect();
        let k = ops
            .iter()
            .position(|op| matches!(op, Op::RolledBack { .. }))
            .ok_or("no rolled_back record")?;
        assert!(matches!(ops[k - 1], Op::Saved { .. }));
        assert!(matches!(ops[k + 1], Op::Saved { .. }));
        assert!(matches!(ops[k + 2], Op::Rewind { .. }));
        // The store reopens (the record fits the index), and undo of the
        // rewind gives back the folder the rollback left: t0's z.txt back.
        let mut store = Store::open(tmp.path())?;
        store.undo()?;
        assert_eq!(fs::read_to_string(tmp.path().join("z.txt"))?, "zed\n");
        assert_eq!(fs::read_to_string(tmp.path().join("a.txt"))?, "alpha\n");
        assert!(!tmp.path().join("gen").exists());
        Ok(())
    }

    #[test]
    fn a_file_changed_since_is_left_and_nothing_is_rolled_back_twice() -> TestResult {
        let tmp = tempfile::tempdir()?;
        interrupted_undo(tmp.path())?;
        // Someone writes a.txt after the kill, and a file into gen/.
        fs::write(tmp.path().join("a.txt"), "the user's bytes\n")?;
        fs::write(tmp.path().join("gen/mine.txt"), "mine\n")?;
        let mut store = Store::open(tmp.path())?;
        store.ensure_created()?;
        assert_eq!(
            fs::read_to_string(tmp.path().join("a.txt"))?,
            "the user's bytes\n"
        );
        assert_eq!(
            fs::read_to_string(tmp.path().join("gen/mine.txt"))?,
            "mine\n"
        );
        let names: Vec<String> = fs::read_dir(tmp.path().join("gen"))?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<_>>()?;
        assert_eq!(names, ["mine.txt"], "the temporary file is swept");
        let warning = store.warnings().join("\n");
        assert!(warning.contains("a.txt left as it is"), "{warning}");
        assert!(warning.contains("gen left as it is"), "{warning}");
        // Once rolled back, a later mutation changes nothing.
        fs::remove_file(tmp.path().join("gen/mine.txt"))?;
        fs::write(tmp.path().join("a.txt"), "alpha by t1\n")?;
        let mut store = Store::open(tmp.path())?;
        store.ensure_created()?;
        assert!(tmp.path().join("gen").is_dir());
        assert_eq!(
            fs::read_to_string(tmp.path().join("a.txt"))?,
            "alpha by t1\n"
        );
        assert!(store.warnings().is_empty(), "{:?}", store.warnings());
        Ok(())
    }
}
