//! The log as a plain file that anyone can edit or a crash can tear: what
//! the store trusts in it and what it refuses.

use std::io::Write;

use turnback::log::{self, Op};
use turnback::{Error, RewindOptions, Store};

use crate::common::{Project, TestResult, assert_same, expect_err, forged_line, snapshot, turn};

fn append(p: &Project, bytes: &[u8]) -> TestResult {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(p.log_path())?;
    f.write_all(bytes)?;
    Ok(())
}

#[test]
fn hand_edited_log_path_is_refused() -> TestResult {
    let hostile = [
        "../outside/victim.txt",
        "../victim-beside.txt",
        "sub/../../outside/victim.txt",
        "/tmp/victim-absolute.txt",
        ".git/config",
        ".turnback/log.jsonl",
    ];
    for path in hostile {
        let p = Project::new()?;
        p.write("a.txt", "before\n")?;
        p.write(".git/config", "[core]\n")?;
        std::fs::write(p.outside().join("victim.txt"), "outside\n")?;
        std::fs::write(p.parent().join("victim-beside.txt"), "beside\n")?;
        let mut store = p.open()?;
        let t1 = turn("t1")?;
        store.write(&t1, None, "a.txt", b"agent\n")?;
        let mut absolute_victim = None;
        let path = if path.starts_with('/') {
            // An absolute path to a real file outside, made for this test.
            let victim = p.outside().join("victim-absolute.txt");
            std::fs::write(&victim, "absolute\n")?;
            absolute_victim = Some(victim.clone());
            victim.display().to_string()
        } else {
            path.to_owned()
        };
        // A record that, were it trusted, would delete the victim.
        let json = serde_json::json!({
            "seq": 2,
            "at": 1,
            "type": "capture",
            "turn": "t1",
            "files": [{"path": path, "pre": {"kind": "absent"}}],
        });
        append(&p, &forged_line(&json.to_string())?)?;
        let everything_before = snapshot(p.parent(), &[])?;

        if cfg!(windows) && absolute_victim.is_some() {
            // `C:\...\victim-absolute.txt` is one name to the log, which
            // Linux can hold (a store made there may have it) and Windows
            // cannot: the line is whole, and the path is reported, never
            // reached.
            windows_name_is_reported_not_reached(&p, &path, &everything_before)?;
            if let Some(victim) = absolute_victim {
                assert_eq!(std::fs::read(victim)?, b"absolute\n");
            }
            continue;
        }
        let err = expect_err(p.open(), &format!("opening a log naming {path}"))?;
        match &err {
            Error::LogDamaged { line, .. } => assert_eq!(*line, 2, "{err}"),
            other => return Err(format!("{path}: wrong error {other:?}").into()),
        }
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = expect_err(
            store.rewind(&t1, &RewindOptions::default()),
            &format!("a rewind with a log naming {path}"),
        )?;
        assert!(matches!(err, Error::LogDamaged { line: 2, .. }), "{err:?}");
        let err = expect_err(
            store.capture(&turn("t2")?, None, "a.txt"),
            "a capture on top of a hostile log",
        )?;
        assert!(matches!(err, Error::LogDamaged { .. }), "{err:?}");

        assert_same(
            &everything_before,
            &snapshot(p.parent(), &[])?,
            &format!("after refusing {path}"),
        );
        if let Some(victim) = absolute_victim {
            assert_eq!(std::fs::read(victim)?, b"absolute\n");
        }
    }
    Ok(())
}

/// A hand-edited log naming `path`, a name Windows cannot hold, on
/// Windows: the store opens, a rewind reports the path not restored with
/// the reason and restores the rest, and nothing but the project changes.
fn windows_name_is_reported_not_reached(
    p: &Project,
    path: &str,
    before: &crate::common::Tree,
) -> TestResult {
    let mut store = p.open()?;
    let report = store.rewind(&turn("t1")?, &RewindOptions::default())?;
    let failed: Vec<(String, String)> = report
        .failed
        .iter()
        .map(|f| (f.path.to_string(), f.reason.clone()))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].1.starts_with("Windows cannot hold this name"),
        "{failed:?}"
    );
    assert_eq!(p.read("a.txt")?, b"before\n");
    let mut after = snapshot(p.parent(), &[])?;
    let mut was = before.clone();
    // Only the project and the store in it changed.
    after.retain(|k, _| !k.starts_with("project"));
    was.retain(|k, _| !k.starts_with("project"));
    assert_same(
        &was,
        &after,
        &format!("after rewinding a log naming {path}"),
    );
    Ok(())
}

#[test]
fn torn_last_line_is_ignored_and_reported() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    p.write("b.txt", "b0\n")?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "a.txt", b"a1\n")?;
    // A crash in the middle of the next append.
    let whole = log::encode(&p.records()?[0]);
    append(&p, &whole[..whole.len() / 2])?;

    let mut store2 = p.open()?;
    let warnings = store2.warnings().join("\n");
    assert!(
        warnings.contains("line 2") && warnings.contains("torn"),
        "{warnings:?}"
    );
    assert_eq!(store2.turns()?.len(), 1);

    // The next capture works and leaves a log that parses cleanly.
    let t2 = turn("t2")?;
    store2.write(&t2, None, "b.txt", b"b2\n")?;
    let records = p.captures()?;
    assert_eq!(records.len(), 2);
    assert!(matches!(&records[1].op, Op::Capture { turn, .. } if turn == &t2));
    let fresh = p.open()?;
    assert!(fresh.warnings().is_empty(), "{:?}", fresh.warnings());
    assert_eq!(fresh.turns()?.len(), 2);
    // The store opened before the tear catches up too.
    let report = store.rewind(&t2, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("b.txt")?, b"b0\n");
    assert_eq!(p.read("a.txt")?, b"a1\n");
    Ok(())
}

#[test]
fn malformed_middle_line_is_reported_with_its_line_number() -> TestResult {
    let p = Project::new()?;
    let mut store = p.open()?;
    for (i, t) in ["t1", "t2", "t3"].iter().enumerate() {
        store.write(&turn(t)?, None, format!("f{i}"), b"x")?;
    }
    let bytes = std::fs::read(p.log_path())?;
    let mut lines: Vec<Vec<u8>> = bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    // Three writes: their post-images are recorded with them, so no seal
    // record is needed when the next turn begins.
    assert_eq!(lines.len(), 3);
    let n = lines[1].len();
    lines[1][n / 2] ^= 0x01;
    std::fs::write(p.log_path(), lines.concat())?;
    let err = expect_err(p.open(), "opening a log with a damaged line 2")?;
    assert!(matches!(err, Error::LogDamaged { line: 2, .. }), "{err:?}");
    assert!(err.to_string().contains("line 2"), "{err}");
    assert!(err.to_string().contains("log.jsonl"), "{err}");
    Ok(())
}

#[test]
fn clock_stepping_back_does_not_reorder_turns() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    p.write("b.txt", "b0\n")?;
    p.write("c.txt", "c0\n")?;
    let mut store = p.open()?;
    let ids = ["first", "second", "third"];
    for (id, name) in ids.iter().zip(["a.txt", "b.txt", "c.txt"]) {
        store.write(&turn(id)?, None, name, b"agent\n")?;
    }
    drop(store);
    // Rewrite `at` so that each turn seems to start before the previous one.
    let mut records = p.records()?;
    let n = records.len() as u64;
    for r in &mut records {
        r.at = 1_700_000_000_000_000_000 - r.seq * 3_600_000_000_000 * (n + 1);
    }
    let rewritten: Vec<u8> = records.iter().flat_map(log::encode).collect();
    std::fs::write(p.log_path(), rewritten)?;

    let mut store = Store::open(&p.root)?;
    let order: Vec<&str> = store.turns()?.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(order, ids);
    let starts: Vec<u64> = store.turns()?.iter().map(|t| t.started_at).collect();
    assert!(starts.windows(2).all(|w| w[0] > w[1]), "{starts:?}");
    // Rewinding the second undoes the third (later by seq, earlier by clock)
    // and keeps the first (earlier by seq, later by clock).
    let report = store.rewind(&turn("second")?, &RewindOptions::default())?;
    assert_eq!(report.turns, [turn("second")?, turn("third")?]);
    assert_eq!(p.read("a.txt")?, b"agent\n");
    assert_eq!(p.read("b.txt")?, b"b0\n");
    assert_eq!(p.read("c.txt")?, b"c0\n");
    Ok(())
}
