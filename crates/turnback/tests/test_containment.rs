//! Containment: nothing outside the root, and nothing in `.git/` or
//! `.turnback/`, is ever read into the store or written by it.

use std::os::unix::fs::MetadataExt;

use turnback::{Error, PathProblem, RewindOptions};

use crate::common::{Project, TestResult, assert_same, expect_err, snapshot, turn};

#[test]
fn paths_outside_root_are_refused() -> TestResult {
    let p = Project::new()?;
    p.write("sub/inside.txt", "inside\n")?;
    p.write(".git/config", "[core]\n")?;
    std::fs::write(p.outside().join("victim.txt"), "outside\n")?;
    std::os::unix::fs::symlink(p.outside(), p.path("escape"))?;
    std::os::unix::fs::symlink("../..", p.path("sub/up"))?;
    let mut store = p.open()?;
    // Something captured, so the store exists and its log can be compared.
    store.capture(&turn("t0")?, None, "sub/inside.txt")?;

    let outside_abs = p.outside().join("victim.txt");
    let git_abs = p.path(".git/config");
    let cases: Vec<(String, PathProblem)> = vec![
        (outside_abs.display().to_string(), PathProblem::OutsideRoot),
        ("../outside/victim.txt".into(), PathProblem::OutsideRoot),
        (
            "sub/../../outside/victim.txt".into(),
            PathProblem::OutsideRoot,
        ),
        ("escape/victim.txt".into(), PathProblem::OutsideRoot),
        ("escape/new.txt".into(), PathProblem::OutsideRoot),
        ("sub/up/outside/victim.txt".into(), PathProblem::OutsideRoot),
        (".git/config".into(), PathProblem::InsideGit),
        (".git/hooks/pre-commit".into(), PathProblem::InsideGit),
        (git_abs.display().to_string(), PathProblem::InsideGit),
        (".turnback/log.jsonl".into(), PathProblem::InsideStore),
        (".turnback/packs/x".into(), PathProblem::InsideStore),
    ];
    let outside_before = snapshot(p.outside().as_path(), &[])?;
    let project_before = p.snapshot_all()?;
    let t1 = turn("t1")?;
    for (path, want) in &cases {
        for what in ["capture", "write"] {
            let result = if what == "capture" {
                store.capture(&t1, None, path)
            } else {
                store.write(&t1, None, path, b"should never land\n")
            };
            let err = expect_err(result, &format!("{what} of {path}"))?;
            match &err {
                Error::BadPath { reason, .. } => {
                    assert_eq!(reason, want, "{what} of {path}: {err}")
                }
                other => return Err(format!("{what} of {path}: wrong error {other:?}").into()),
            }
            assert!(
                err.to_string().contains(path.as_str()),
                "the error does not name the path: {err}"
            );
        }
    }
    // A batch holding one bad path captures nothing at all.
    let err = expect_err(
        store.capture_many(&t1, None, &["sub/inside.txt", "../outside/victim.txt"]),
        "a batch with one path outside",
    )?;
    assert!(matches!(err, Error::BadPath { .. }), "{err:?}");

    assert_same(
        &outside_before,
        &snapshot(p.outside().as_path(), &[])?,
        "outside the root",
    );
    assert_same(&project_before, &p.snapshot_all()?, "the project and store");
    assert!(
        p.open()?.turn(&t1).is_err(),
        "the refused calls made a turn"
    );
    Ok(())
}

#[test]
fn directory_swapped_for_symlink_cannot_redirect_rewind() -> TestResult {
    let p = Project::new()?;
    p.write("sub/a.txt", "original\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "sub/a.txt", b"agent\n")?;
    store.write(&t1, None, "sub/new.txt", b"agent made this\n")?;
    // Between the turn and the rewind, the directory is swapped for a link
    // to a folder outside holding files of the same names.
    std::fs::write(p.outside().join("a.txt"), "outside a\n")?;
    std::fs::write(p.outside().join("new.txt"), "outside new\n")?;
    std::fs::rename(p.path("sub"), p.parent().join("moved-sub"))?;
    std::os::unix::fs::symlink(p.outside(), p.path("sub"))?;
    let outside_before = snapshot(p.outside().as_path(), &[])?;

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert_same(
        &outside_before,
        &snapshot(p.outside().as_path(), &[])?,
        "outside the root",
    );
    assert!(!report.complete());
    let failed: Vec<&str> = report.failed.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(failed, ["sub/a.txt", "sub/new.txt"], "{:?}", report.failed);
    assert!(
        std::fs::symlink_metadata(p.path("sub"))?
            .file_type()
            .is_symlink()
    );
    Ok(())
}

#[test]
fn files_are_replaced_not_truncated_in_place() -> TestResult {
    let p = Project::new()?;
    let elsewhere = p.outside().join("shared.txt");
    std::fs::write(&elsewhere, "original\n")?;
    std::fs::hard_link(&elsewhere, p.path("linked.txt"))?;
    let inode = std::fs::metadata(p.path("linked.txt"))?.ino();
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.capture(&t1, None, "linked.txt")?;
    // The agent edits in place, through the hard link: both names change.
    std::fs::write(p.path("linked.txt"), "agent\n")?;
    assert_eq!(std::fs::read(&elsewhere)?, b"agent\n");

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("linked.txt")?, b"original\n");
    assert_ne!(std::fs::metadata(p.path("linked.txt"))?.ino(), inode);
    // The other name of the old file was not written through.
    assert_eq!(std::fs::read(&elsewhere)?, b"agent\n");
    Ok(())
}

#[test]
fn store_write_replaces_by_rename() -> TestResult {
    let p = Project::new()?;
    let elsewhere = p.outside().join("shared.txt");
    std::fs::write(&elsewhere, "original\n")?;
    std::fs::hard_link(&elsewhere, p.path("linked.txt"))?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "linked.txt", b"agent\n")?;
    assert_eq!(p.read("linked.txt")?, b"agent\n");
    assert_eq!(std::fs::read(&elsewhere)?, b"original\n");
    Ok(())
}

#[test]
fn symlinks_planted_by_the_agent_are_replaced_not_followed() -> TestResult {
    let p = Project::new()?;
    let victim = p.outside().join("victim.txt");
    std::fs::write(&victim, "outside\n")?;
    p.write("a.txt", "a before\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.capture_many(&t1, None, &["a.txt", "new.txt", "gen/out.txt"])?;
    // The agent turns each captured path into a link out of the root: the
    // file, a file it created, and a directory it created.
    std::fs::remove_file(p.path("a.txt"))?;
    std::os::unix::fs::symlink(&victim, p.path("a.txt"))?;
    std::os::unix::fs::symlink(&victim, p.path("new.txt"))?;
    std::os::unix::fs::symlink(p.outside(), p.path("gen"))?;
    std::fs::write(p.outside().join("out.txt"), "outside out\n")?;
    let outside_before = snapshot(p.outside().as_path(), &[])?;

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert_same(
        &outside_before,
        &snapshot(p.outside().as_path(), &[])?,
        "outside the root",
    );
    assert!(
        !std::fs::symlink_metadata(p.path("a.txt"))?
            .file_type()
            .is_symlink()
    );
    assert_eq!(p.read("a.txt")?, b"a before\n");
    assert!(!p.exists("new.txt"));
    // gen/out.txt cannot be reached without following the link, so it is
    // reported; the link itself, standing where the turn created a
    // directory, is removed.
    let failed: Vec<&str> = report.failed.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(failed, ["gen/out.txt"], "{:?}", report.failed);
    assert!(!p.exists("gen"));
    Ok(())
}
