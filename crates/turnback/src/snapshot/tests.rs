//! Unit tests of snapshots on real files.
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::*;
use crate::exclude::dir_only;
use crate::log::{Post, Pre};
use crate::tree::Kind;
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
                out.insert(
                    rel,
                    ('l', target.as_os_str().as_encoded_bytes().to_vec(), 0),
                );
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
fn a_change_an_older_turns_file_tool_captured_during_the_command_is_left_to_it() -> TestResult {
    let (dir, mut store) = project();
    let root = dir.path();
    // The other turn starts before the command and before a few more
    // turns, so only its capture during the command is after the scan.
    store.write(&t("other"), None, "README.md", b"# by the other turn\n")?;
    for i in 0..3 {
        store.write(&t(&format!("t{i}")), None, "docs/empty-dir-holder", b"x")?;
    }
    store.snapshot(&t("cmd"), Some("shell"), false, &NoProgress)?;
    store.write(
        &t("other"),
        None,
        "src/lib.rs",
        b"by the other turn's file tool\n",
    )?;
    put(root, "src/main.rs", b"fn main() { by the command }\n");
    let r = store.snapshot(&t("cmd"), Some("shell"), true, &NoProgress)?;
    let rec = r.recorded.expect("recorded");
    let captured: Vec<String> = rec.captured.iter().map(|e| e.path.to_string()).collect();
    assert_eq!(captured, ["src/main.rs"]);
    let elsewhere: Vec<(String, &str)> = rec
        .captured_elsewhere
        .iter()
        .map(|c| (c.path.clone(), c.turn.as_str()))
        .collect();
    assert_eq!(elsewhere, [("src/lib.rs".to_string(), "other")]);
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
    let windows_file = store.store_dir().join(crate::exec_window::WINDOWS_FILE);
    let before = inode(&tree_file)?;
    let windows_before = inode(&windows_file)?;
    let r = store.snapshot(&t("t3"), None, false, &NoProgress)?;
    assert_eq!(r.scan.hashed_files, 0);
    assert_eq!(inode(&tree_file)?, before, "the tree is not rewritten");
    assert_eq!(
        inode(&windows_file)?,
        windows_before,
        "nor the windows file: the head carries the open window"
    );
    assert!(head_file.exists());
    // The head's fields and one window.
    assert!(r.scan.tree_bytes < 300, "{}", r.scan.tree_bytes);
    let Loaded::Tree(now) = tree::load(&store.place.dirs().store, &store.place.store_path)? else {
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
fn windows_opened_by_halves_that_change_nothing_are_kept_in_the_head() -> TestResult {
    let (dir, mut store) = project();
    let root = dir.path();
    store.snapshot(&t("t0"), None, false, &NoProgress)?;
    store.snapshot(&t("t0"), None, true, &NoProgress)?;
    std::thread::sleep(Duration::from_millis(20));
    // Settle racily clean entries: from here nothing is hashed again.
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    let head_file = store.store_dir().join(tree::HEAD_FILE);
    let windows_file = store.store_dir().join(crate::exec_window::WINDOWS_FILE);
    // Two sessions' commands start; neither before half finds a change.
    for (turn, session) in [("tA", "session-a"), ("tB", "session-b")] {
        let r = store.snapshot_in_session(&t(turn), None, false, session, false, &NoProgress)?;
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }
    let head = fs::read(&head_file)?;
    let file = fs::read(&windows_file)?;
    let has = |bytes: &[u8], s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(
        has(&head, "session-a") && has(&head, "session-b"),
        "both in the head"
    );
    assert!(
        !has(&file, "session-b"),
        "the windows file is left as it was"
    );
    // B's command changes a file and ends: its window is found open (no
    // warning) and the change is recorded in tB, A's window staying open.
    put(root, "src/lib.rs", b"pub fn f() { /* B */ }\n");
    let r = store.snapshot_in_session(&t("tB"), None, true, "session-b", false, &NoProgress)?;
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let rec = r.recorded.expect("recorded");
    assert_eq!(rec.turn, t("tB"));
    assert_eq!(rec.changes.modified, ["src/lib.rs"]);
    assert_eq!(rec.shared_with, [t("tA")], "A's command ran meanwhile");
    // That half rewrote the tree: the open window moved to the file.
    assert!(!head_file.exists());
    assert!(has(&fs::read(&windows_file)?, "session-a"));
    let r = store.snapshot_in_session(&t("tA"), None, true, "session-a", false, &NoProgress)?;
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert!(
        !store
            .status(&NoProgress)?
            .snapshot
            .is_some_and(|s| s.pending)
    );
    store.rewind(&t("tA"), &RewindOptions::default())?;
    assert_eq!(fs::read(root.join("src/lib.rs"))?, b"pub fn f() {}\n");
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
    // No store is made for it, so no tree either.
    assert!(!store.has_store());
    assert!(!Store::open(dir.path()).is_ok_and(|s| s.has_store()));
    assert!(!dir.path().join(crate::path::STORE_DIR).exists());
    assert!(store.turns().is_ok_and(|t| t.is_empty()));
}

#[test]
fn the_walk_lists_what_it_cannot_cover_and_never_enters_it() -> TestResult {
    let (dir, mut store) = project();
    let root = dir.path();
    put(root, "odd\\name.txt", b"backslash\n");
    fs::write(
        root.join(crate::sys::os_str(b"latin1-\xe9.txt")),
        b"not utf-8\n",
    )?;
    put(root, "bad\\dir/inside.txt", b"never walked\n");
    put(root, "node_modules/pkg/index.js", b"module.exports = 1;\n");
    put(root, "sub/.git/HEAD", b"ref: refs/heads/main\n");
    put(root, "sub/.turnback/log.jsonl", b"{}\n");
    crate::sys::mkfifo_at(&root.join("fifo"))?;
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    let Loaded::Tree(tree) = tree::load(&store.place.dirs().store, &store.place.store_path)? else {
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
        tree::load(&store.place.dirs().store, &store.place.store_path)?,
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
    let Loaded::Tree(tree) = tree::load(&store.place.dirs().store, &store.place.store_path)? else {
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

#[test]
fn a_changed_file_is_recorded_with_its_look_and_an_edit_after_it_is_a_conflict() -> TestResult {
    use std::os::unix::fs::MetadataExt;
    let (dir, mut store) = project();
    let root = dir.path();
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    put(root, "src/main.rs", b"fn main() { run() }\n");
    put(root, "src/lib.rs", b"pub fn g() {}\n");
    // Let the clock pass the writes, so the after half's look at them
    // can be trusted.
    std::thread::sleep(Duration::from_millis(20));
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    let main = RelPath::parse("src/main.rs")?;
    let (_, post) = store.turn(&t("t1"))?.post(&main).ok_or("a post-image")?;
    let Post::File {
        stat: Some(key), ..
    } = post.clone()
    else {
        panic!("recorded without its look: {post:?}")
    };
    let m = fs::symlink_metadata(root.join("src/main.rs"))?;
    let ns = |s: i64, n: i64| s * 1_000_000_000 + n;
    assert_eq!(
        (key.dev, key.ino, key.size, key.mtime, key.ctime),
        (
            m.dev(),
            m.ino(),
            m.size(),
            ns(m.mtime(), m.mtime_nsec()),
            ns(m.ctime(), m.ctime_nsec())
        )
    );
    // Edited by hand after the command: same size, its modification time
    // set back to the one recorded. Only its change time tells, and the
    // rewind must not take the file for what the command left.
    let edited = b"fn main() { edit! }\n";
    assert_eq!(edited.len() as u64, key.size);
    fs::write(root.join("src/main.rs"), edited)?;
    fs::File::options()
        .write(true)
        .open(root.join("src/main.rs"))?
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_nanos(key.mtime as u64))?;
    let report = store.rewind(&t("t1"), &RewindOptions::default())?;
    let conflicts: Vec<&str> = report.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(conflicts, ["src/main.rs"], "{report:?}");
    assert_eq!(fs::read(root.join("src/main.rs"))?, b"fn main() {}\n");
    assert_eq!(fs::read(root.join("src/lib.rs"))?, b"pub fn f() {}\n");
    // Undo gives back the edit, and the command's other file.
    store.undo()?;
    assert_eq!(fs::read(root.join("src/main.rs"))?, edited);
    assert_eq!(fs::read(root.join("src/lib.rs"))?, b"pub fn g() {}\n");
    Ok(())
}

#[test]
fn files_too_large_to_read_whole_are_streamed_into_the_pack_once_and_rewound() -> TestResult {
    let (dir, mut store) = project();
    let root = dir.path();
    // Past the whole-read limit, twice with the same bytes.
    let big: Vec<u8> = (0..(5u32 << 20) / 4)
        .flat_map(|i| (i % 65_521).to_le_bytes())
        .collect();
    put(root, "data/a.bin", &big);
    put(root, "data/b.bin", &big);
    let r = store.snapshot(&t("t1"), None, false, &NoProgress)?;
    assert_eq!(r.scan.hashed_files, 7);
    assert_eq!(r.scan.new_blobs, 6, "the two large files are one blob");
    std::thread::sleep(Duration::from_millis(20));
    put(root, "data/a.bin", b"small now\n");
    fs::remove_file(root.join("data/b.bin"))?;
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    store.rewind(&t("t1"), &RewindOptions::default())?;
    assert_eq!(fs::read(root.join("data/a.bin"))?, big);
    assert_eq!(fs::read(root.join("data/b.bin"))?, big);
    Ok(())
}

#[test]
fn watchman_paths_become_the_paths_the_walk_looks_at_again() {
    use crate::tree::{Excluded, Stat};
    let entry = |p: &str, kind: Kind, ino: u64| Entry {
        path: p.as_bytes().to_vec(),
        stat: Stat {
            ino,
            ..Stat::default()
        },
        kind,
    };
    let file = || Kind::File {
        blob: BlobId([7; 32]),
    };
    let old = vec![
        entry("a", Kind::Dir, 1),
        entry("a/linked", file(), 9),
        entry("a/x", file(), 9),
        entry("b", file(), 3),
        entry(
            "bad",
            Kind::Excluded(Excluded::Unreadable("EACCES".into())),
            4,
        ),
        entry(
            "node_modules",
            Kind::Excluded(Excluded::Default("node_modules/".into())),
            5,
        ),
        entry("top", file(), 6),
    ];
    let paths = |ps: &[&str]| ps.iter().map(|p| p.as_bytes().to_vec()).collect();
    let dirty = walk::dirty_paths(
        &old,
        paths(&[
            "a/x",
            "node_modules/p/deep/q.js",
            ".git/index",
            ".turnback/tree",
            "new/deep/f",
            "b/under-a-file",
            "store/x",
            "a/.f.turnback-tmp-1-2",
        ]),
        Some(b"store"),
    )
    .expect("no rule file changed");
    let shown: Vec<String> = dirty
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    // The changed file and its other name (same inode); the excluded
    // directory instead of what is below it; the topmost new directory; a
    // file that became a directory; what the tree holds as unreadable.
    // Never .git/, .turnback/, the store or a temporary file of turnback's.
    assert_eq!(
        shown,
        ["a/linked", "a/x", "b", "bad", "new", "node_modules"],
        "{shown:?}"
    );
    for rule in [
        "a/.gitignore",
        ".turnbackignore",
        "a/CACHEDIR.TAG",
        "a/pyvenv.cfg",
    ] {
        let why = walk::dirty_paths(&old, paths(&[rule]), None).expect_err(rule);
        assert!(why.contains("what is excluded"), "{rule}: {why}");
    }
    // A marker right inside an excluded directory may make it covered.
    assert!(walk::dirty_paths(&old, paths(&["node_modules/CACHEDIR.TAG"]), None).is_err());
    // A rule file deeper inside it changes nothing the walk looks at.
    assert!(walk::dirty_paths(&old, paths(&["node_modules/p/.gitignore"]), None).is_ok());
    assert!(walk::dirty_paths(&old, paths(&["a/../b"]), None).is_err());
}

/// A directory whose stat is the old tree's is not listed again: a name
/// the tree lacks stays unseen (shown here by giving the tree the
/// directory's new stat without the new name). A tree a half that looked
/// only at Watchman's paths wrote is not trusted that way: the full walk
/// after it lists every directory.
#[test]
fn a_directory_with_its_old_stat_is_not_listed_unless_a_watchman_half_wrote_the_tree() -> TestResult
{
    let (dir, mut store) = project();
    let root = dir.path();
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    put(root, "src/new.rs", b"// new\n");
    std::thread::sleep(Duration::from_millis(20));
    let store_fd = &store.place.dirs().store;
    let path = store.place.store_path.clone();
    let Loaded::Tree(mut tree) = tree::load(store_fd, &path)? else {
        return Err("tree".into());
    };
    // The tree a half that took `src`'s new stat without its new name
    // would leave.
    let src = tree
        .entries
        .iter_mut()
        .find(|e| e.path == b"src")
        .ok_or("src in the tree")?;
    let st = crate::sys::fs::statat(
        &store.place.root_fd,
        "src",
        crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
    )?;
    src.stat = tree::Stat::of_raw(&st);
    let writer = tree::TreeWriter::begin(store_fd, &path)?;
    tree.stamp_ns = writer.stamp_ns;
    writer.commit(store_fd, &path, &tree)?;
    let state = |used| fsmonitor::State {
        tree: (tree.stamp_ns, tree.entries.len() as u64),
        counts: fsmonitor::state::Counts::default(),
        used,
        reason: String::new(),
        sock: String::new(),
        token: None,
        unheld: fsmonitor::Unheld::Some(Vec::new()),
    };
    fsmonitor::state::save(store_fd, &path, &state(Used::Fallback))?;
    let seen =
        |store: &Store| -> Result<Vec<String>> { Ok(store.status(&NoProgress)?.changes.created) };
    // Only where the file system keeps a directory's times in step with
    // its entries (ext4 and tmpfs do; an overlay does not).
    if crate::sys::dir_times_follow_entries(&store.place.root_fd) {
        assert!(
            seen(&store)?.is_empty(),
            "src is not listed again: its stat is the tree's"
        );
    } else {
        assert_eq!(seen(&store)?, ["src/new.rs"], "listed: another file system");
    }
    fsmonitor::state::save(store_fd, &path, &state(Used::Watchman))?;
    assert_eq!(seen(&store)?, ["src/new.rs"], "listed: Watchman's tree");
    Ok(())
}

/// An unchanged scan trusts a file's blob by its stat alone while the log
/// is the one the tree was written with; after a repair drops the log line
/// that introduced the tree's blobs, the next scan reads those files again
/// and stores them, so a later change still has its pre-image.
#[test]
fn after_a_repair_drops_the_line_of_the_trees_blobs_the_next_scan_stores_them_again() -> TestResult
{
    let (dir, mut store) = project();
    let root = dir.path();
    // Line 1: the snapshot record that introduces the five files' blobs.
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    std::thread::sleep(Duration::from_millis(20));
    store.snapshot(&t("t2"), None, false, &NoProgress)?;
    put(root, "README.md", b"changed by t2\n");
    store.snapshot(&t("t2"), None, true, &NoProgress)?;
    std::thread::sleep(Duration::from_millis(20));
    let r = store.snapshot(&t("t3"), None, false, &NoProgress)?;
    assert_eq!(r.scan.hashed_files, 0, "the stat cache alone vouches");
    store.snapshot(&t("t3"), None, true, &NoProgress)?;
    let store_dir = store.store_dir().to_path_buf();
    drop(store);

    // Damage line 1 (its checksum no longer matches) and repair.
    let log_path = store_dir.join(crate::log::LOG_FILE);
    let mut log = fs::read(&log_path)?;
    let first_end = log.iter().position(|&b| b == b'\n').ok_or("one line")?;
    assert!(first_end + 1 < log.len(), "line 1 is not the last");
    let mid = first_end / 2;
    log[mid] = if log[mid] == b'0' { b'1' } else { b'0' };
    fs::write(&log_path, &log)?;
    let report = crate::repair_root(root, false)?;
    assert!(report.repaired);
    assert!(
        store_dir.join(tree::RECHECK_FILE).exists(),
        "repair marks it"
    );

    let mut store = Store::open(root)?;
    let r = store.snapshot(&t("t4"), None, false, &NoProgress)?;
    assert_eq!(
        (r.scan.hashed_files, r.scan.new_blobs),
        (4, 4),
        "the four files whose blobs only line 1 introduced are stored again"
    );
    assert!(!store_dir.join(tree::RECHECK_FILE).exists(), "done");
    put(root, "src/lib.rs", b"changed by t4\n");
    store.snapshot(&t("t4"), None, true, &NoProgress)?;
    std::thread::sleep(Duration::from_millis(20));
    let r = store.snapshot(&t("t5"), None, false, &NoProgress)?;
    assert_eq!(r.scan.hashed_files, 0, "trusted by stat again");
    let report = store.rewind(&t("t4"), &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(fs::read(root.join("src/lib.rs"))?, b"pub fn f() {}\n");
    Ok(())
}

/// A walk given the old tree finds exactly what a walk without it finds,
/// after every kind of change a command makes (and after none): either
/// the same list, or, only when nothing changed, "the old tree's entries"
/// ([`walk::Listing::AsOld`]), which are then what the walk without it
/// found.
#[test]
fn a_walk_with_the_old_tree_finds_what_a_walk_without_it_finds() -> TestResult {
    type Change = fn(&Path) -> std::io::Result<()>;
    let changes: &[(&str, Change)] = &[
        ("nothing", |_| Ok(())),
        ("modify", |r| {
            fs::write(r.join("src/main.rs"), b"fn main() { 1 }\n")
        }),
        ("same size", |r| {
            fs::write(r.join("src/main.rs"), b"fn main() {}\t")
        }),
        ("delete", |r| {
            fs::remove_file(r.join("docs/empty-dir-holder"))
        }),
        ("create", |r| fs::write(r.join("docs/new.txt"), b"new\n")),
        ("chmod", |r| {
            fs::set_permissions(r.join(".env"), fs::Permissions::from_mode(0o600))
        }),
        ("rename", |r| {
            fs::rename(r.join("src/lib.rs"), r.join("src/lib2.rs"))
        }),
        ("mkdir", |r| fs::create_dir(r.join("docs/empty/sub"))),
        ("rmdir", |r| fs::remove_dir(r.join("docs/empty"))),
        ("retarget", |r| {
            fs::remove_file(r.join("main-link"))?;
            std::os::unix::fs::symlink("src/lib.rs", r.join("main-link"))
        }),
        ("file to dir", |r| {
            fs::remove_file(r.join("README.md"))?;
            fs::create_dir(r.join("README.md"))
        }),
        ("excluded dir", |r| {
            fs::write(r.join("node_modules/x/y.js"), b"2")
        }),
        ("ignore rule", |r| {
            fs::write(r.join(".turnbackignore"), b"*.md\n")
        }),
    ];
    for (what, change) in changes {
        let (dir, mut store) = project();
        let root = dir.path();
        put(root, "node_modules/x/y.js", b"1");
        put(root, "node_modules/.package-lock.json", b"{}");
        // Names that sort between a directory and what lies below it
        // (`a` < `a-b` < `a.c` < `a/x` < `a0`).
        for p in [
            "lib/a/x.rs",
            "lib/a/x/y.rs",
            "lib/a-b.rs",
            "lib/a.c/d.rs",
            "lib/a0/z.rs",
        ] {
            put(root, p, b"//\n");
        }
        store.snapshot(&t("t1"), None, false, &NoProgress)?;
        std::thread::sleep(Duration::from_millis(20));
        // Settles every racily clean entry.
        store.snapshot(&t("t1"), None, true, &NoProgress)?;
        change(root)?;
        let Loaded::Tree(old) = tree::load(&store.place.dirs().store, &store.place.store_path)?
        else {
            return Err("tree".into());
        };
        let walk = |old: Option<walk::Old<'_>>| -> std::result::Result<walk::Listing, Box<dyn std::error::Error>> {
            let mut warnings = Vec::new();
            let (matcher, files_too) = crate::exclude::build_matcher(root, &mut warnings)?;
            let ignores = crate::exclude::Ignores {
                dir: Vec::new(),
                matcher,
                files_too,
                parent: None,
            };
            let fd = crate::sys::fs::openat(
                &store.place.root_fd,
                ".",
                crate::sys::fs::OFlags::RDONLY | crate::sys::fs::OFlags::DIRECTORY,
                crate::sys::fs::Mode::empty(),
            )?;
            Ok(walk::walk(root, fd, ignores, u64::MAX, None, &NoProgress, old)?.0)
        };
        let walk::Listing::Found(without) = walk(None)? else {
            return Err(format!("{what}: a walk without a tree has no old entries").into());
        };
        let with = walk(Some(walk::Old {
            tree: &old,
            listed_whole: true,
            files_as_old: true,
        }))?;
        match with {
            walk::Listing::AsOld(totals) => {
                assert_eq!(*what, "nothing", "only an unchanged tree is the old one");
                assert_eq!(totals, tree::Totals::of(&old.entries), "counted as found");
                let old_found: Vec<walk::Found> = old.entries.iter().map(walk::found_of).collect();
                assert_eq!(old_found, without, "{what}");
                // Every directory listed (a tree a Watchman half wrote):
                // each entry is still found as its old one.
                let listed = walk(Some(walk::Old {
                    tree: &old,
                    listed_whole: false,
                    files_as_old: true,
                }))?;
                assert!(
                    matches!(listed, walk::Listing::AsOld(t) if t == tree::Totals::of(&old.entries)),
                    "listed whole"
                );
            }
            walk::Listing::Found(found) => {
                assert_ne!(*what, "nothing", "an unchanged tree is the old one");
                assert_eq!(found, without, "{what}");
            }
            walk::Listing::Patch(_) => {
                return Err(format!("{what}: a walk of the whole tree gave a patch").into());
            }
        }
    }
    Ok(())
}

/// With Watchman off, a scan that finds unchanged the tree a Watchman half
/// wrote (listing every directory, since such a tree's directory stats
/// may hide names) says so in the fsmonitor state, so the scans after it
/// skip the listings again; the clock stays with the tree.
#[test]
fn a_scan_that_lists_a_watchman_tree_whole_and_finds_it_unchanged_vouches_for_it() -> TestResult {
    let (_dir, mut store) = project();
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    std::thread::sleep(Duration::from_millis(20));
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    let store_fd = &store.place.dirs().store;
    let path = store.place.store_path.clone();
    fs::write(
        path.join(crate::config::CONFIG_FILE),
        "fsmonitor = \"off\"\n",
    )?;
    let Loaded::Tree(tree) = tree::load(store_fd, &path)? else {
        return Err("tree".into());
    };
    let watchman = fsmonitor::State {
        tree: (tree.stamp_ns, tree.entries.len() as u64),
        counts: fsmonitor::state::Counts::default(),
        used: Used::Watchman,
        reason: String::new(),
        sock: "/run/watchman.sock".into(),
        token: None,
        unheld: fsmonitor::Unheld::Some(Vec::new()),
    };
    fsmonitor::state::save(store_fd, &path, &watchman)?;
    let r = store.snapshot(&t("t2"), None, false, &NoProgress)?;
    assert_eq!(r.scan.hashed_files, 0, "nothing changed");
    let state = fsmonitor::state::load(&store.place.dirs().store).ok_or("a state")?;
    assert_eq!(state.used, Used::Off, "listed whole by this scan");
    assert_eq!(state.tree, watchman.tree, "the same tree");
    assert_eq!(state.sock, watchman.sock);
    // A tree written by a scan needs no such mark: nothing is saved.
    fs::remove_file(path.join(fsmonitor::state::STATE_FILE))?;
    put(store.place.root.as_path(), "src/new.rs", b"// new\n");
    store.snapshot(&t("t3"), None, false, &NoProgress)?;
    assert!(fsmonitor::state::load(&store.place.dirs().store).is_none());
    Ok(())
}

/// Read in part, a scan of the paths Watchman named that needs an old
/// subtree the part left out (a directory moved away, only one file of it
/// named) says it needs the whole tree, and reads and stores nothing; on
/// the whole tree the same paths drop the directory's whole subtree.
#[test]
fn a_partial_read_that_misses_a_dropped_subtree_asks_for_the_whole_tree() -> TestResult {
    let (dir, mut store) = project();
    put(dir.path(), "src/deep/a.rs", b"a\n");
    put(dir.path(), "src/deep/b.rs", b"b\n");
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    std::thread::sleep(Duration::from_millis(20));
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    let outside = tempfile::tempdir()?;
    fs::rename(dir.path().join("src/deep"), outside.path().join("deep"))?;
    let named = vec![b"src/deep/a.rs".to_vec()];
    let store_fd = crate::sys::dup(&store.place.dirs().store)?;
    let path = store.place.store_path.clone();
    let (Loaded::Tree(part), _, Some(partial)) =
        tree::load_partial(&store_fd, &path, tree::Wanted::new(&named))?
    else {
        return Err("the tree reads in part".into());
    };
    let kept: Vec<&[u8]> = part.entries.iter().map(|e| e.path.as_slice()).collect();
    assert!(
        kept.contains(&b"src/deep".as_slice()),
        "an ancestor: {kept:?}"
    );
    assert!(
        !kept.contains(&b"src/deep/b.rs".as_slice()),
        "not named: {kept:?}"
    );
    let scan = store.scan(
        Some(&part),
        Reading::Store,
        Ok((named.clone(), &fsmonitor::Unheld::Some(Vec::new()))),
        &NoProgress,
        Some(&partial),
    )?;
    assert!(scan.needs_whole, "src/deep's old subtree was not read");
    assert!(scan.pack.is_none() && scan.entries.is_empty());
    let Loaded::Tree(whole) = tree::load(&store_fd, &path)? else {
        return Err("the tree reads whole".into());
    };
    let scan = store.scan(
        Some(&whole),
        Reading::Store,
        Ok((named, &fsmonitor::Unheld::Some(Vec::new()))),
        &NoProgress,
        None,
    )?;
    assert!(!scan.needs_whole);
    let dropped: Vec<&[u8]> = scan
        .patch
        .as_ref()
        .ok_or("a patch")?
        .iter()
        .map(|&i| whole.entries[i].path.as_slice())
        .collect();
    assert_eq!(
        dropped,
        [b"src/deep".as_slice(), b"src/deep/a.rs", b"src/deep/b.rs"],
        "the directory and all below it"
    );
    Ok(())
}

/// A file in the part that shares its inode with another entry (a hard
/// link) makes the tree read whole: the part may leave the other name out,
/// and a change through one name is a change of both.
#[test]
fn a_partial_read_of_a_hard_linked_file_reads_the_whole_tree() -> TestResult {
    let (dir, mut store) = project();
    put(dir.path(), "src/deep/a.rs", b"a\n");
    fs::hard_link(
        dir.path().join("src/deep/a.rs"),
        dir.path().join("docs/a-too.rs"),
    )?;
    store.snapshot(&t("t1"), None, false, &NoProgress)?;
    std::thread::sleep(Duration::from_millis(20));
    store.snapshot(&t("t1"), None, true, &NoProgress)?;
    let store_fd = crate::sys::dup(&store.place.dirs().store)?;
    let path = store.place.store_path.clone();
    let mut warnings = Vec::new();
    let named = |p: &str| tree::Wanted::new(&[p.as_bytes().to_vec()]);
    let (old, _, partial) =
        store.load_old(&store_fd, Some(named("src/deep/a.rs")), &mut warnings)?;
    assert!(partial.is_none(), "read whole");
    let Loaded::Tree(whole) = tree::load(&store_fd, &path)? else {
        return Err("the tree reads whole".into());
    };
    assert_eq!(old.ok_or("a tree")?.entries, whole.entries);
    // A file without another name: read in part.
    let (old, _, partial) = store.load_old(&store_fd, Some(named("src/lib.rs")), &mut warnings)?;
    assert!(partial.is_some(), "read in part");
    assert!(old.ok_or("a tree")?.entries.len() < whole.entries.len());
    assert!(warnings.is_empty(), "{warnings:?}");
    Ok(())
}
