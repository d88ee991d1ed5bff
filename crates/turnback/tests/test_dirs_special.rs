//! Rewinds of directories (their modes, empty ones), FIFOs and sockets that
//! a shell command changed: the before and after snapshots of `turnback
//! exec` around a real `sh -c` process, then a rewind and an undo, each
//! compared with the whole folder (path, type, mode, bytes or target).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use turnback::{NoProgress, Pre, RewindOptions, Store, TurnId};

use crate::common::turn;
use crate::safety_common::{TestResult, Tree, tree, write};

/// Runs `script` with `sh -c` in `root` between the two halves of a
/// snapshot in `turn`, as `turnback exec` does.
fn exec(store: &mut Store, root: &Path, turn: &TurnId, script: &str) -> TestResult {
    store.snapshot(turn, None, false, &NoProgress)?;
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .status()?;
    assert!(status.success(), "`{script}` failed: {status}");
    store.snapshot(turn, None, true, &NoProgress)?;
    Ok(())
}

fn mkdir(root: &Path, rel: &str, mode: u32) -> TestResult {
    let p = root.join(rel);
    std::fs::create_dir_all(&p)?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn mkfifo(root: &Path, rel: &str, mode: u32) -> TestResult {
    let status = Command::new("mkfifo")
        .arg("-m")
        .arg(format!("{mode:o}"))
        .arg(root.join(rel))
        .status()?;
    assert!(status.success(), "mkfifo {rel}: {status}");
    Ok(())
}

fn assert_tree(want: &Tree, got: &Tree, when: &str) {
    for (path, w) in want {
        assert_eq!(got.get(path), Some(w), "{path} {when}");
    }
    for path in got.keys() {
        assert!(want.contains_key(path), "{path} is there {when}");
    }
}

#[test]
fn directory_modes_come_back_for_changed_removed_and_moved_directories() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    mkdir(root, "d", 0o750)?;
    mkdir(root, "sg", 0o2775)?;
    mkdir(root, "st", 0o1777)?;
    write(root, "st/f", b"in a sticky directory\n");
    mkdir(root, "gone/sub", 0o750)?;
    write(root, "gone/sub/z", b"deep\n");
    std::fs::set_permissions(root.join("gone"), std::fs::Permissions::from_mode(0o700))?;
    mkdir(root, "mv1", 0o710)?;
    write(root, "mv1/y", b"moved\n");
    let before = tree(root);
    let mut store = Store::open(root)?;
    let t1 = turn("t1")?;
    exec(
        &mut store,
        root,
        &t1,
        "chmod 700 d && chmod g-s sg && chmod -t st && rm -rf gone && mv mv1 mv2",
    )?;
    let after_turn = tree(root);
    assert_eq!(after_turn["sg"].1, 0o775, "the command cleared setgid");
    assert_eq!(after_turn["st"].1, 0o777, "the command cleared sticky");

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_tree(&before, &tree(root), "after the rewind");
    for p in ["d", "sg", "st", "gone", "gone/sub", "mv1"] {
        assert!(
            report.restored.iter().any(|r| r.as_str() == p),
            "{p} not reported restored: {:?}",
            report.restored
        );
    }

    // The rewind saved the modes it changed: undo gives them back.
    let undo = store.undo()?;
    assert!(undo.complete(), "{:?}", undo.failed);
    assert_tree(&after_turn, &tree(root), "after the undo");
    Ok(())
}

#[test]
fn empty_directories_come_back_removed_or_replaced_by_a_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "keep.txt", b"kept\n");
    mkdir(root, "y", 0o755)?;
    mkdir(root, "e1", 0o705)?;
    mkdir(root, "e2/e3", 0o750)?;
    mkdir(root, "full/empty", 0o700)?;
    write(root, "full/f", b"f\n");
    let before = tree(root);
    let mut store = Store::open(root)?;
    let t1 = turn("t1")?;
    exec(
        &mut store,
        root,
        &t1,
        "rmdir y && echo f > y && rmdir e1 && rm -rf e2 full",
    )?;
    let captured: Vec<(String, Pre)> = store
        .turn(&t1)?
        .files
        .iter()
        .map(|c| (c.entry.path.to_string(), c.entry.pre.clone()))
        .collect();
    for (path, mode) in [
        ("y", 0o755),
        ("e1", 0o705),
        ("e2/e3", 0o750),
        ("full/empty", 0o700),
    ] {
        assert!(
            captured.contains(&(path.to_string(), Pre::Dir { mode })),
            "{path} not captured as a directory of mode {mode:o}: {captured:?}"
        );
    }
    let after_turn = tree(root);
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_tree(&before, &tree(root), "after the rewind");
    let undo = store.undo()?;
    assert!(undo.complete(), "{:?}", undo.failed);
    assert_tree(&after_turn, &tree(root), "after the undo");
    Ok(())
}

#[test]
fn fifos_come_back_and_a_removed_socket_is_reported_not_restored() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"a\n");
    mkfifo(root, "p", 0o640)?;
    mkfifo(root, "q", 0o600)?;
    let listener = std::os::unix::net::UnixListener::bind(root.join("sock"))?;
    let before = tree(root);
    assert_eq!(before["p"], (b"fifo".to_vec(), 0o640));
    assert_eq!(before["sock"].0, b"socket");
    let mut store = Store::open(root)?;
    let t1 = turn("t1")?;
    exec(
        &mut store,
        root,
        &t1,
        "rm p sock && rm q && echo now-a-file > q && mkfifo -m 600 r && echo b > a.txt",
    )?;
    drop(listener);
    let after_turn = tree(root);

    let report = store.rewind(&t1, &RewindOptions::default())?;
    let failed: Vec<&str> = report.failed.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(failed, ["sock"], "{:?}", report.failed);
    assert!(
        report.failed[0].reason.contains("socket"),
        "{}",
        report.failed[0].reason
    );
    assert!(!report.complete());
    assert!(!report.restored.iter().any(|p| p.as_str() == "sock"));
    let mut want = before.clone();
    want.remove("sock");
    assert_tree(&want, &tree(root), "after the rewind");

    // The FIFO the rewind removed comes back with undo, like the file.
    let undo = store.undo()?;
    assert!(undo.complete(), "{:?}", undo.failed);
    assert_tree(&after_turn, &tree(root), "after the undo");
    Ok(())
}

#[test]
fn a_write_into_new_directories_records_them_absent_and_a_rewind_removes_them() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    mkdir(root, "a", 0o750)?;
    write(root, "a/old.txt", b"old\n");
    let before = tree(root);
    let mut store = Store::open(root)?;
    let t1 = turn("t1")?;
    let report = store.write(&t1, None, "a/b/c/new.txt", b"new\n")?;
    let absent: Vec<&str> = report
        .captured
        .iter()
        .filter(|e| e.pre == Pre::Absent)
        .map(|e| e.path.as_str())
        .collect();
    assert_eq!(absent, ["a/b", "a/b/c", "a/b/c/new.txt"]);
    let rewound = store.rewind(&t1, &RewindOptions::default())?;
    assert!(rewound.complete(), "{:?}", rewound.failed);
    assert_tree(&before, &tree(root), "after the rewind");
    Ok(())
}
