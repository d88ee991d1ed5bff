//! Files kept aside: a rewind, undo or redo gives each regular file it
//! replaces (one name, no post-image to compare) a second name in the store
//! instead of reading it, and undo copies it back.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use turnback::log::{Op, Pre};
use turnback::{GcOptions, RewindOptions, Store, TurnId};

use crate::common::*;

/// The states of the last `saved` record: (path, state).
fn last_saved(store: &Store) -> TestResult<(u64, Vec<(String, Pre)>)> {
    let rec = records(store)?
        .into_iter()
        .rev()
        .find(|r| matches!(r.op, Op::Saved { .. }))
        .ok_or("no saved record")?;
    let Op::Saved { files, .. } = rec.op else {
        unreachable!("found as a saved record");
    };
    Ok((
        rec.seq,
        files
            .into_iter()
            .map(|f| (f.path.to_string(), f.pre))
            .collect(),
    ))
}

/// Every record of the store's log.
fn records(store: &Store) -> TestResult<Vec<turnback::log::Record>> {
    let bytes = std::fs::read(store.store_dir().join(turnback::log::LOG_FILE))?;
    let mut out = Vec::new();
    for (line, rec) in turnback::log::parse(&bytes, 1).lines {
        out.push(rec.map_err(|e| format!("line {line}: {e}"))?);
    }
    Ok(out)
}

/// Where the store keeps the file `n` of the record `seq`.
fn kept_path(store: &Store, seq: u64, n: u64) -> PathBuf {
    store
        .store_dir()
        .join("aside")
        .join(seq.to_string())
        .join((n / 1024).to_string())
        .join(n.to_string())
}

#[test]
fn a_rewind_keeps_what_it_replaces_aside_unread_and_undo_copies_it_back() -> TestResult {
    let p = Project::new()?;
    let rels: Vec<String> = (0..5).map(|i| format!("d/f{i}.txt")).collect();
    for (i, rel) in rels.iter().enumerate() {
        p.write(rel, format!("original {i}\n"))?;
    }
    p.chmod("d/f0.txt", 0o755)?;
    let mut store = p.open_own()?;
    let t = TurnId::new("t1")?;
    store.capture_many(&t, None, &rels)?;
    let mut agent = Vec::new();
    for (i, rel) in rels.iter().enumerate() {
        p.write(rel, format!("agent {i}\n"))?;
        agent.push(std::fs::metadata(p.path(rel))?.ino());
    }
    p.chmod("d/f1.txt", 0o600)?;
    let before_rewind = p.state()?;

    let report = store.rewind(&t, &RewindOptions::default())?;
    assert_eq!(report.restored.len(), 5, "{report:?}");
    for (i, rel) in rels.iter().enumerate() {
        assert_eq!(p.read(rel)?, format!("original {i}\n").into_bytes());
        assert_eq!(std::fs::metadata(p.path(rel))?.nlink(), 1, "{rel}");
    }
    // Every replaced file is kept, unread: the agent's own inode, its
    // bytes and mode, one name left (the store's).
    let (seq, saved) = last_saved(&store)?;
    let mut kept = 0;
    for (path, pre) in &saved {
        let Pre::Aside {
            seq: s,
            n,
            size,
            mode,
            blob,
        } = pre
        else {
            assert!(matches!(pre, Pre::Dir { .. }), "{path}: {pre:?}");
            continue;
        };
        kept += 1;
        assert_eq!(*s, seq);
        // No post-image: its hash is not known until it is stored.
        assert_eq!(*blob, None, "{path}");
        let i = rels.iter().position(|r| r == path).ok_or("not planned")?;
        let file = kept_path(&store, seq, *n);
        let meta = std::fs::metadata(&file)?;
        assert_eq!(meta.ino(), agent[i], "{path}");
        assert_eq!(meta.nlink(), 1, "{path}");
        assert_eq!(std::fs::read(&file)?, format!("agent {i}\n").into_bytes());
        assert_eq!(*size, meta.len());
        let want = match i {
            0 => 0o755,
            1 => 0o600,
            _ => 0o644,
        };
        assert_eq!(*mode, want, "{path}");
    }
    assert_eq!(kept, 5, "{saved:?}");

    // Undo copies them back (the kept files stay: a rollback of the undo
    // may need them again).
    store.undo()?;
    assert_same_state(&before_rewind, &p.state()?, "after undo");
    for (i, rel) in rels.iter().enumerate() {
        let meta = std::fs::metadata(p.path(rel))?;
        assert_ne!(meta.ino(), agent[i], "{rel} was moved, not copied");
        assert_eq!(meta.nlink(), 1);
    }
    // Redo undoes the undo from its own kept files.
    store.redo()?;
    for (i, rel) in rels.iter().enumerate() {
        assert_eq!(p.read(rel)?, format!("original {i}\n").into_bytes());
    }
    assert_eq!(p.mode("d/f0.txt")?, 0o755);
    Ok(())
}

#[test]
fn a_file_a_conflict_check_compares_or_with_other_names_is_read() -> TestResult {
    let p = Project::new()?;
    p.write("written.txt", "one\n")?;
    p.write("plain.txt", "two\n")?;
    p.write("linked.txt", "three\n")?;
    p.write("more/a.txt", "a\n")?;
    p.write("more/b.txt", "b\n")?;
    let mut store = p.open_own()?;
    let t = TurnId::new("t1")?;
    // A write through turnback records its post-image: the rewind compares
    // it with what is there, so it must read it.
    store.write(&t, None, "written.txt", b"one by the agent\n")?;
    store.capture_many(
        &t,
        None,
        &["plain.txt", "linked.txt", "more/a.txt", "more/b.txt"],
    )?;
    p.write("plain.txt", "two by the agent\n")?;
    p.write("linked.txt", "three by the agent\n")?;
    std::fs::hard_link(p.path("linked.txt"), p.parent().join("outside/other-name"))?;
    store.rewind(&t, &RewindOptions::default())?;
    let (_, saved) = last_saved(&store)?;
    let kind = |path: &str| -> TestResult<&'static str> {
        let (_, pre) = saved.iter().find(|(p, _)| p == path).ok_or("not saved")?;
        Ok(match pre {
            Pre::Aside { .. } => "kept",
            Pre::File { .. } => "read",
            _ => "other",
        })
    };
    assert_eq!(kind("written.txt")?, "read");
    assert_eq!(kind("plain.txt")?, "kept");
    assert_eq!(kind("linked.txt")?, "read");
    // The name outside still holds the agent's bytes.
    assert_eq!(
        std::fs::read(p.parent().join("outside/other-name"))?,
        b"three by the agent\n"
    );
    store.undo()?;
    assert_eq!(p.read("written.txt")?, b"one by the agent\n");
    assert_eq!(p.read("plain.txt")?, b"two by the agent\n");
    assert_eq!(p.read("linked.txt")?, b"three by the agent\n");
    Ok(())
}

#[test]
fn files_kept_by_an_operation_that_died_before_its_record_go_first() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "one\n")?;
    let mut store = p.open_own()?;
    store.capture(&TurnId::new("t1")?, None, "a.txt")?;
    let next = records(&store)?.last().ok_or("no record")?.seq + 1;
    // A rewind that died after keeping a.txt, before its saved record.
    let kept = kept_path(&store, next, 0);
    std::fs::create_dir_all(kept.parent().ok_or("no bucket")?)?;
    std::fs::hard_link(p.path("a.txt"), &kept)?;
    assert_eq!(std::fs::metadata(p.path("a.txt"))?.nlink(), 2);
    store.capture(&TurnId::new("t2")?, None, "a.txt")?;
    assert!(
        !store
            .store_dir()
            .join("aside")
            .join(next.to_string())
            .exists()
    );
    assert_eq!(std::fs::metadata(p.path("a.txt"))?.nlink(), 1);
    assert_last_turn_unlinked(&store)
}

#[test]
fn gc_removes_the_files_kept_for_the_records_it_drops() -> TestResult {
    let p = Project::new()?;
    let mut store = p.open_own()?;
    let mut dirs = Vec::new();
    for t in ["t1", "t2"] {
        // Enough files for a rewind to keep them aside.
        let rels: Vec<String> = (0..4).map(|i| format!("{t}/f{i}.txt")).collect();
        for rel in &rels {
            p.write(rel, "one\n")?;
        }
        let t = TurnId::new(t)?;
        store.capture_many(&t, None, &rels)?;
        for rel in &rels {
            p.write(rel, "agent\n")?;
        }
        store.rewind(&t, &RewindOptions::default())?;
        let (seq, _) = last_saved(&store)?;
        dirs.push(store.store_dir().join("aside").join(seq.to_string()));
    }
    assert!(dirs.iter().all(|d| d.is_dir()), "{dirs:?}");
    // Keeping one operation drops the first rewind (it can no longer be
    // undone) and its saved record.
    let report = store.gc(&GcOptions {
        keep_turns: Some(1),
        ..GcOptions::default()
    })?;
    assert_eq!(report.dropped_operations, 1, "{report:?}");
    assert!(!dirs[0].exists(), "the kept files of a dropped record stay");
    assert!(dirs[1].is_dir(), "the kept files of a kept record went");
    store.undo()?;
    assert_eq!(p.read("t2/f0.txt")?, b"agent\n");
    Ok(())
}

#[test]
fn maintenance_stores_the_kept_files_as_blobs_once_and_removes_them() -> TestResult {
    let p = Project::new()?;
    let rels: Vec<String> = (0..4).map(|i| format!("f{i}.txt")).collect();
    for (i, rel) in rels.iter().enumerate() {
        p.write(rel, format!("original {i}\n"))?;
    }
    let mut store = p.open_own()?;
    let t = TurnId::new("t1")?;
    store.capture_many(&t, None, &rels)?;
    for (i, rel) in rels.iter().enumerate() {
        p.write(rel, format!("agent {i}\n"))?;
    }
    store.rewind(&t, &RewindOptions::default())?;
    assert!(store.maintenance_due());
    let done = store.maintain()?;
    assert_eq!(done.kept_stored, 4);
    assert!(!store.store_dir().join("aside").exists());
    assert!(!store.maintenance_due());
    // The saved states are blobs now, in the index and in the log.
    let (seq, saved) = last_saved(&store)?;
    let packed: Vec<_> = records(&store)?
        .into_iter()
        .filter(|r| matches!(&r.op, Op::Packed { saved, .. } if *saved == seq))
        .collect();
    assert_eq!(packed.len(), 1);
    assert!(
        saved
            .iter()
            .all(|(_, pre)| !matches!(pre, Pre::File { .. })),
        "the saved record itself is never rewritten"
    );
    drop(store);
    let mut store = p.open_own()?;
    store.undo()?;
    for (i, rel) in rels.iter().enumerate() {
        assert_eq!(p.read(rel)?, format!("agent {i}\n").into_bytes());
    }
    // The undo kept the restored originals; they are the turn's own
    // blobs, so storing them adds no pack.
    let done = store.maintain()?;
    assert_eq!(done.kept_stored, 4);
    let last = records(&store)?.pop().ok_or("no record")?;
    assert!(
        matches!(&last.op, Op::Packed { pack: None, blobs, .. } if blobs.is_empty()),
        "{last:?}"
    );
    store.redo()?;
    for (i, rel) in rels.iter().enumerate() {
        assert_eq!(p.read(rel)?, format!("original {i}\n").into_bytes());
    }
    Ok(())
}

#[test]
fn an_operation_on_a_few_paths_reads_them() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "one\n")?;
    let mut store = p.open_own()?;
    let t = TurnId::new("t1")?;
    store.capture(&t, None, "a.txt")?;
    p.write("a.txt", "agent\n")?;
    store.rewind(&t, &RewindOptions::default())?;
    let (_, saved) = last_saved(&store)?;
    assert!(
        matches!(saved.as_slice(), [(_, Pre::File { .. })]),
        "{saved:?}"
    );
    assert!(!store.store_dir().join("aside").exists());
    Ok(())
}

/// Waits until the file system's clock is past the `ctime` of every file
/// of `paths`: the look of a file hashed after that can be trusted later.
fn clock_past(p: &Project, rels: &[String]) -> TestResult {
    let newest = rels
        .iter()
        .map(|r| std::fs::metadata(p.path(r)).map(|m| (m.ctime(), m.ctime_nsec())))
        .collect::<std::io::Result<Vec<_>>>()?
        .into_iter()
        .max()
        .ok_or("no file")?;
    let stamp = p.parent().join("clock");
    for _ in 0..10_000 {
        std::fs::write(&stamp, "")?;
        let m = std::fs::metadata(&stamp)?;
        if (m.ctime(), m.ctime_nsec()) > newest {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Err("the file system's clock did not move".into())
}

#[test]
fn a_sealed_turns_files_unchanged_since_are_kept_unread_and_a_changed_one_is_read() -> TestResult {
    let p = Project::new()?;
    let rels: Vec<String> = (0..5).map(|i| format!("f{i}.txt")).collect();
    for rel in &rels {
        p.write(rel, "original\n")?;
    }
    let mut store = p.open_own()?;
    let t = TurnId::new("t1")?;
    store.capture_many(&t, None, &rels)?;
    for rel in &rels {
        p.write(rel, "by agent\n")?;
    }
    clock_past(&p, &rels)?;
    // The post-images, each with the file's look.
    store.seal(&t)?;
    // Someone rewrites f0 after the seal: same size, other bytes.
    p.write("f0.txt", "BY AGENT\n")?;
    let report = store.rewind(&t, &RewindOptions::default())?;
    let conflicts: Vec<&str> = report.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(conflicts, ["f0.txt"], "{report:?}");
    let agent = turnback::pack::hash_bytes(b"by agent\n");
    let (_, saved) = last_saved(&store)?;
    for (path, pre) in &saved {
        match (path.as_str(), pre) {
            ("f0.txt", Pre::File { .. }) => {}
            (_, Pre::Aside { blob, .. }) if path != "f0.txt" => {
                assert_eq!(*blob, Some(agent), "{path}")
            }
            _ => return Err(format!("{path}: {pre:?}").into()),
        }
    }
    // Undo gives back the agent's files and the one changed after it.
    store.undo()?;
    assert_eq!(p.read("f0.txt")?, b"BY AGENT\n");
    for rel in &rels[1..] {
        assert_eq!(p.read(rel)?, b"by agent\n");
    }
    // The background maintenance stores them under the hash they were
    // kept with.
    let done = store.maintain()?;
    assert!(done.kept_stored >= 4, "{done:?}");
    Ok(())
}

/// More directories than one run of keeping holds (256): the files are
/// kept in two runs, numbered on from one to the next, every one of them
/// kept with its own inode, and undo brings back every agent's file.
#[test]
fn files_in_more_directories_than_a_run_holds_are_kept_in_runs_numbered_on() -> TestResult {
    let p = Project::new()?;
    let rels: Vec<String> = (0..300).map(|i| format!("d{i:03}/f.txt")).collect();
    for (i, rel) in rels.iter().enumerate() {
        p.write(rel, format!("original {i}\n"))?;
    }
    let mut store = p.open_own()?;
    let t = TurnId::new("t1")?;
    store.capture_many(&t, None, &rels)?;
    let mut agent = std::collections::HashMap::new();
    for (i, rel) in rels.iter().enumerate() {
        p.write(rel, format!("agent {i}\n"))?;
        agent.insert(rel.clone(), std::fs::metadata(p.path(rel))?.ino());
    }
    let after_agent = p.state()?;
    let report = store.rewind(&t, &RewindOptions::default())?;
    assert!(
        report.complete() && report.restored.len() == 300,
        "{report:?}"
    );

    let (seq, saved) = last_saved(&store)?;
    let mut numbers = Vec::new();
    // The directories' states are saved too; the files are the ones kept.
    for (path, pre) in saved.iter().filter(|(path, _)| agent.contains_key(path)) {
        let Pre::Aside { n, .. } = pre else {
            return Err(format!("{path} not kept: {pre:?}").into());
        };
        let kept = std::fs::metadata(kept_path(&store, seq, *n))?;
        assert_eq!(Some(&kept.ino()), agent.get(path), "{path}");
        numbers.push(*n);
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (0..300).collect::<Vec<u64>>());

    store.undo()?;
    assert_eq!(p.state()?, after_agent);
    Ok(())
}
