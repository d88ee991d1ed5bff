//! Hostile paths: hand-edited log records with valid checksums that name
//! paths outside the root, inside `.git/` or the store, or malformed ones
//! (a table and a property-test generator); symlinks to outside planted at
//! every component of a real path before a rewind; and a racing thread
//! that swaps a project directory with a symlink to outside
//! (`renameat2(RENAME_EXCHANGE)`) while rewinds and undos run. The canary
//! folder outside the root must stay byte-identical throughout.
//!
//! `TURNBACK_LONG=1` runs more generated paths and race iterations.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use turnback::{Error, RewindOptions, Store};

use crate::common::{Project, TestResult, assert_same, forged_line, snapshot, turn};

fn long_mode() -> bool {
    std::env::var("TURNBACK_LONG").is_ok_and(|v| v == "1")
}

/// An independent statement of which stored paths are acceptable (a
/// backslash is an ordinary byte of a name; only the root's `.git` is
/// refused, a nested repository is part of the project).
fn acceptable(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 4096
        && !path.contains('\0')
        && path.split('/').next() != Some(".git")
        && path.split('/').next() != Some(".turnback")
        && path
            .split('/')
            .all(|c| !matches!(c, "" | "." | "..") && c.len() <= 255)
}

/// A project with one real turn, and the canary beside it.
fn project() -> TestResult<Project> {
    let p = Project::new()?;
    p.write("a.txt", "before\n")?;
    p.write(".git/config", "[core]\n")?;
    std::fs::write(p.outside().join("victim.txt"), "outside\n")?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "a.txt", b"agent\n")?;
    Ok(p)
}

/// Appends a capture record naming `path` (pre-image absent, so a trusted
/// rewind would delete it) with blob id `blob` in a second entry.
fn forge(p: &Project, path: &str, blob: Option<&str>) -> TestResult {
    let seq = p.records()?.len() + 1;
    let mut files = vec![serde_json::json!({"path": path, "pre": {"kind": "absent"}})];
    if let Some(b) = blob {
        files.push(serde_json::json!({"path": "b.txt", "pre": {"kind": "file", "blob": b, "size": 1, "mode": 420}}));
    }
    let json =
        serde_json::json!({"seq": seq, "at": 1, "type": "capture", "turn": "t1", "files": files});
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(p.log_path())?;
    std::io::Write::write_all(&mut f, &forged_line(&json.to_string())?)?;
    Ok(())
}

/// With a forged record naming `path`: refused at open when the path is
/// not acceptable; otherwise a rewind writes only inside the root.
fn try_path(path: &str) -> TestResult<bool> {
    let p = project()?;
    let good_log = std::fs::read(p.log_path())?;
    forge(&p, path, None)?;
    let everything = snapshot(p.parent(), &[])?;
    let outside = snapshot(&p.outside(), &[])?;
    match Store::open(&p.root) {
        Err(Error::LogDamaged { line, .. }) => {
            assert_eq!(line, good_log.iter().filter(|&&b| b == b'\n').count() + 1);
            assert!(!acceptable(path), "{path:?} is acceptable but was refused");
            assert_same(
                &everything,
                &snapshot(p.parent(), &[])?,
                &format!("after refusing {path:?}"),
            );
            Ok(false)
        }
        Err(e) => Err(format!("{path:?}: wrong error {e:?}").into()),
        Ok(mut store) => {
            assert!(
                acceptable(path),
                "{path:?} is not acceptable but the log opened"
            );
            store.rewind(&turn("t1")?, &RewindOptions::default())?;
            assert_same(
                &outside,
                &snapshot(&p.outside(), &[])?,
                &format!("outside, after a rewind deleting {path:?}"),
            );
            assert_eq!(std::fs::read(p.path(".git/config"))?, b"[core]\n");
            Ok(true)
        }
    }
}

#[test]
fn hostile_paths_in_forged_records_are_refused_before_anything_is_written() -> TestResult {
    let long = "x".repeat(300);
    let very_long = vec!["d"; 2100].join("/");
    let table = [
        "../x",
        "../outside/victim.txt",
        "/etc/passwd",
        "a/../../x",
        "a/..",
        "..",
        ".",
        "",
        "./a.txt",
        "a/./b",
        "a//b",
        "a/",
        "/",
        "a\0b",
        ".git",
        ".git/config",
        ".git/hooks/pre-commit",
        ".turnback",
        ".turnback/log.jsonl",
        long.as_str(),
        very_long.as_str(),
    ];
    for path in table {
        assert!(!try_path(path)?, "{path:?} was accepted");
    }
    // Blob ids that are not 64 lowercase hex digits.
    let bad_ids = [
        "",
        "abc",
        &"a".repeat(63),
        &"a".repeat(65),
        &"A".repeat(64),
        &"g".repeat(64),
        &format!("{}\0", "a".repeat(63)),
        "../../../../etc/passwd",
    ];
    for id in bad_ids {
        let p = project()?;
        forge(&p, "fine.txt", Some(id))?;
        let everything = snapshot(p.parent(), &[])?;
        let err = Store::open(&p.root)
            .err()
            .ok_or_else(|| format!("blob id {id:?} accepted"))?;
        assert!(matches!(err, Error::LogDamaged { .. }), "{id:?}: {err:?}");
        assert_same(
            &everything,
            &snapshot(p.parent(), &[])?,
            &format!("after refusing blob id {id:?}"),
        );
    }
    println!(
        "hostile-paths table: {} paths and {} blob ids refused at open, nothing written",
        table.len(),
        bad_ids.len()
    );
    Ok(())
}

/// Paths built from the pieces that make paths dangerous.
fn hostile_path() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "..",
        ".",
        "",
        "a",
        "b.txt",
        ".git",
        ".turnback",
        "\\",
        "\0",
        "C:",
        "é",
        " ",
        "..\\",
        "x/..",
        ".gitx",
    ]);
    (prop::collection::vec(piece, 1..6), any::<bool>()).prop_map(|(parts, absolute)| {
        let joined = parts.join("/");
        if absolute {
            format!("/{joined}")
        } else {
            joined
        }
    })
}

#[test]
fn generated_hostile_paths_are_refused_or_stay_inside() -> TestResult {
    let cases = if long_mode() { 2000 } else { 150 };
    let mut runner = TestRunner::new(Config {
        cases,
        source_file: Some(file!()),
        ..Config::default()
    });
    let (accepted, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (a, r) = (accepted.clone(), refused.clone());
    runner
        .run(&hostile_path(), move |path| {
            let ok = try_path(&path).map_err(|e| TestCaseError::fail(format!("{path:?}: {e}")))?;
            if ok { &a } else { &r }.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    println!(
        "hostile-paths generated: {cases} cases, {} refused at open, {} acceptable (rewound, nothing outside touched)",
        refused.load(Ordering::Relaxed),
        accepted.load(Ordering::Relaxed)
    );
    Ok(())
}

#[test]
fn symlinks_to_outside_planted_at_any_component_never_redirect_a_rewind() -> TestResult {
    let targets = ["OUTSIDE", "../outside", "../..", "/"];
    let components = ["d1", "d1/d2", "d1/d2/f.txt"];
    let mut runs = 0;
    for comp in components {
        for target in targets {
            let p = Project::new()?;
            p.write("d1/d2/f.txt", "before\n")?;
            // The canary mirrors the project, so a followed link would land
            // on files of the same names.
            for mirror in [
                "d2/f.txt",
                "f.txt",
                "d1/d2/f.txt",
                "new.txt",
                "d2/new.txt",
                "d1/d2/new.txt",
            ] {
                crate::common::write_under(&p.outside(), mirror, b"outside\n")?;
            }
            let mut store = p.open()?;
            let t1 = turn("t1")?;
            store.write(&t1, None, "d1/d2/f.txt", b"agent\n")?;
            store.write(&t1, None, "d1/d2/new.txt", b"agent made this\n")?;
            let at = p.path(comp);
            let moved = p.parent().join("moved");
            std::fs::rename(&at, &moved)?;
            let target = if target == "OUTSIDE" {
                p.outside().display().to_string()
            } else {
                target.to_string()
            };
            std::os::unix::fs::symlink(&target, &at)?;
            let outside = snapshot(&p.outside(), &[])?;
            let result = store.rewind(&t1, &RewindOptions::default());
            assert_same(
                &outside,
                &snapshot(&p.outside(), &[])?,
                &format!("link at {comp} -> {target}: outside"),
            );
            match result {
                Ok(report) => {
                    if comp == "d1/d2/f.txt" {
                        // The link stands at the captured path itself: it is
                        // replaced, never written through.
                        assert!(report.complete(), "{comp}: {:?}", report.failed);
                        assert_eq!(p.read("d1/d2/f.txt")?, b"before\n");
                    } else {
                        assert!(
                            !report.complete(),
                            "link at {comp}: the rewind claims to be complete"
                        );
                    }
                }
                Err(e) => return Err(format!("link at {comp} -> {target}: {e}").into()),
            }
            runs += 1;
        }
    }
    println!("symlink-escape: {runs} links planted at every component, none followed");
    Ok(())
}

#[test]
fn a_directory_swapped_for_a_symlink_during_rewinds_never_sends_a_write_outside() -> TestResult {
    let iterations = if long_mode() { 1500 } else { 500 };
    let p = Project::new()?;
    p.write("sub/a.txt", "a before\n")?;
    p.write("sub/deep/b.txt", "b before\n")?;
    for mirror in ["a.txt", "deep/b.txt", "new.txt", "deep/new.txt"] {
        crate::common::write_under(&p.outside(), mirror, b"outside\n")?;
    }
    std::os::unix::fs::symlink(p.outside(), p.path("swap"))?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "sub/a.txt", b"a by the agent\n")?;
    store.write(&t1, None, "sub/deep/b.txt", b"b by the agent\n")?;
    store.write(&t1, None, "sub/new.txt", b"new\n")?;
    store.write(&t1, None, "sub/deep/new.txt", b"new deep\n")?;
    let outside = snapshot(&p.outside(), &[])?;

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let racer = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let (sub, swap) = (p.path("sub"), p.path("swap"));
        std::thread::spawn(move || {
            let mut missed = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // An undo may briefly (or for good) remove one of the two
                // names: the racer keeps trying.
                match rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &sub,
                    rustix::fs::CWD,
                    &swap,
                    rustix::fs::RenameFlags::EXCHANGE,
                ) {
                    Ok(()) => swaps.fetch_add(1, Ordering::Relaxed),
                    Err(_) => {
                        missed += 1;
                        std::thread::yield_now();
                        0
                    }
                };
            }
            missed
        })
    };
    let (mut ok, mut failed_paths, mut errors) = (0, 0, 0);
    for _ in 0..iterations {
        // Rewind and undo in turn; each may meet the link at any moment.
        let r = if store.turn(&t1).is_ok() {
            store.rewind(&t1, &RewindOptions::default())
        } else {
            store.undo()
        };
        match r {
            Ok(report) if report.complete() => ok += 1,
            Ok(report) => failed_paths += report.failed.len(),
            Err(_) => errors += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let missed = racer.join().map_err(|_| "the racer panicked")?;
    assert_same(
        &outside,
        &snapshot(&p.outside(), &[])?,
        "outside the root, after the race",
    );
    // The race over, the store still opens and its log parses.
    Store::open(&p.root)?;
    p.records()?;
    println!(
        "toctou race: {iterations} rewinds/undos against {} directory swaps: {ok} complete, {failed_paths} paths refused, {errors} errors ({missed} swaps missed a name); outside unchanged",
        swaps.load(Ordering::Relaxed)
    );
    Ok(())
}
