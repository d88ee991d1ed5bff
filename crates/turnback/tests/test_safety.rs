//! Safe rewinds and a store that stays small: conflicts, undo/redo, revert,
//! gc and delta storage, through the library on real files.

use proptest::prelude::*;

use crate::safety_common::*;
use turnback::{GcOptions, Options, RevertOptions, RewindOptions, Store, TurnId};

fn t(id: &str) -> TurnId {
    TurnId::new(id).expect("valid turn id")
}

fn rewind_opts() -> RewindOptions {
    RewindOptions::default()
}

#[test]
fn file_changed_after_the_turn_is_saved_and_undo_brings_it_back() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"original\n");
    let mut store = Store::open(root)?;
    store.write(&t("t1"), None, "a.txt", b"agent\n")?;
    write(root, "a.txt", b"the user's later edit\n");
    let report = store.rewind(&t("t1"), &rewind_opts())?;
    assert_eq!(report.conflicts.len(), 1, "{report:?}");
    assert_eq!(report.conflicts[0].path.as_str(), "a.txt");
    assert_eq!(read(root, "a.txt"), "original\n");
    let undo = store.undo()?;
    assert!(undo.complete());
    assert_eq!(read(root, "a.txt"), "the user's later edit\n");
    Ok(())
}

#[test]
fn keep_conflicts_leaves_changed_files_as_they_are() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"a0\n");
    write(root, "b.txt", b"b0\n");
    let mut store = Store::open(root)?;
    store.write(&t("t1"), None, "a.txt", b"a1\n")?;
    store.write(&t("t1"), None, "b.txt", b"b1\n")?;
    write(root, "b.txt", b"user\n");
    let report = store.rewind(
        &t("t1"),
        &RewindOptions {
            keep_conflicts: true,
            ..RewindOptions::default()
        },
    )?;
    assert_eq!(report.kept.len(), 1);
    assert!(report.conflicts.is_empty());
    assert_eq!(read(root, "a.txt"), "a0\n");
    assert_eq!(read(root, "b.txt"), "user\n");
    Ok(())
}

/// An undo puts back only what the operation changed: a path a rewind or
/// a revert kept as a conflict (left as the user had it) is not put back
/// to what it held then, so a change made to it after the operation (here
/// a later turn's write, then the user's) stays.
#[test]
fn undo_leaves_a_path_the_operation_kept_as_it_is_now() -> TestResult {
    for revert in [false, true] {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        write(root, "a.txt", b"a0\n");
        write(root, "b.txt", b"b0\n");
        let mut store = Store::open(root)?;
        store.write(&t("t1"), None, "a.txt", b"a1\n")?;
        store.write(&t("t1"), None, "b.txt", b"b1\n")?;
        write(root, "b.txt", b"user\n");
        let report = if revert {
            store.revert(
                &t("t1"),
                &RevertOptions {
                    keep_conflicts: true,
                    ..RevertOptions::default()
                },
            )?
        } else {
            store.rewind(
                &t("t1"),
                &RewindOptions {
                    keep_conflicts: true,
                    ..RewindOptions::default()
                },
            )?
        };
        assert_eq!(report.kept.len(), 1, "revert {revert}: {report:?}");
        assert_eq!(read(root, "b.txt"), "user\n");
        store.write(&t("t2"), None, "b.txt", b"b2 by a later turn\n")?;
        let undo = store.undo()?;
        assert!(undo.complete(), "revert {revert}: {undo:?}");
        assert_eq!(read(root, "a.txt"), "a1\n", "revert {revert}");
        assert_eq!(
            read(root, "b.txt"),
            "b2 by a later turn\n",
            "revert {revert}: the operation did not change b.txt, so its undo does not"
        );
        write(root, "b.txt", b"the user again\n");
        let redo = store.redo()?;
        assert!(redo.complete(), "revert {revert}: {redo:?}");
        assert_eq!(read(root, "a.txt"), "a0\n", "revert {revert}");
        assert_eq!(read(root, "b.txt"), "the user again\n", "revert {revert}");
        // From the checkpoint and from the log alone, the same.
        drop(store);
        std::fs::remove_file(crate::common::store_dir(root).join("index")).ok();
        let mut store = Store::open(root)?;
        store.undo()?;
        assert_eq!(read(root, "b.txt"), "the user again\n", "revert {revert}");
    }
    Ok(())
}

#[test]
fn a_rerun_capture_seals_the_turn_before_when_a_kill_left_it_unsealed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"v0\n");
    let mut store = Store::open(root)?;
    store.capture(&t("t1"), None, "a.txt")?;
    write(root, "a.txt", b"v1 by the agent\n");
    store.capture(&t("t2"), None, "other.txt")?;
    // As if killed after t2's capture record and before t1's seal: the
    // seal line is cut off the log.
    let log = crate::common::store_dir(root).join("log.jsonl");
    let bytes = std::fs::read(&log)?;
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    assert!(String::from_utf8_lossy(lines[lines.len() - 1]).contains("\"seal\""));
    std::fs::write(&log, lines[..lines.len() - 1].concat())?;
    std::fs::remove_file(crate::common::store_dir(root).join("index")).ok();
    let mut store = Store::open(root)?;
    assert!(!store.turn(&t("t1"))?.sealed);
    // The rerun finds its capture done, and seals t1 now.
    let again = store.capture(&t("t2"), None, "other.txt")?;
    assert!(again.captured.is_empty());
    assert!(store.turn(&t("t1"))?.sealed);
    write(root, "a.txt", b"v2 by the user\n");
    let report = store.rewind(&t("t1"), &rewind_opts())?;
    assert_eq!(report.conflicts.len(), 1, "the user's edit is reported");
    // Once other records follow a turn's first one, a capture into it does
    // not seal the turn before again.
    let seals = || -> std::io::Result<usize> {
        Ok(String::from_utf8_lossy(&std::fs::read(&log)?)
            .lines()
            .filter(|l| l.contains("\"seal\""))
            .count())
    };
    store.capture(&t("t3"), None, "x.txt")?;
    let after_t3 = seals()?;
    store.capture(&t("t3"), None, "y.txt")?;
    assert_eq!(seals()?, after_t3, "no second seal of t2");
    Ok(())
}

#[test]
fn capture_only_turn_is_sealed_when_the_next_turn_begins() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"v0\n");
    let mut store = Store::open(root)?;
    store.capture(&t("t1"), None, "a.txt")?;
    write(root, "a.txt", b"v1 by the agent\n");
    // The next turn's first capture seals t1: its post-image is v1.
    store.capture(&t("t2"), None, "other.txt")?;
    assert!(store.turn(&t("t1"))?.sealed);
    write(root, "a.txt", b"v2 by the user\n");
    let report = store.rewind(&t("t1"), &rewind_opts())?;
    assert_eq!(
        report
            .conflicts
            .iter()
            .map(|c| c.path.as_str())
            .collect::<Vec<_>>(),
        ["a.txt"]
    );
    assert_eq!(read(root, "a.txt"), "v0\n");
    // An explicit seal is recorded too, and an unchanged file is no conflict.
    store.capture(&t("t3"), None, "a.txt")?;
    write(root, "a.txt", b"v3\n");
    assert_eq!(store.seal(&t("t3"))?, 1);
    let report = store.rewind(&t("t3"), &rewind_opts())?;
    assert!(report.conflicts.is_empty(), "{report:?}");
    Ok(())
}

#[test]
fn undo_and_redo_walk_the_operation_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "f.txt", b"0\n");
    let mut store = Store::open(root)?;
    let before = tree(root);
    store.write(&t("t1"), None, "f.txt", b"1\n")?;
    store.write(&t("t1"), None, "new/dir/n.txt", b"new\n")?;
    let after_t1 = tree(root);
    store.write(&t("t2"), None, "f.txt", b"2\n")?;
    let after_t2 = tree(root);

    store.rewind(&t("t2"), &rewind_opts())?;
    assert_eq!(tree(root), after_t1);
    store.rewind(&t("t1"), &rewind_opts())?;
    assert_eq!(tree(root), before);
    store.undo()?;
    assert_eq!(tree(root), after_t1, "first undo reverses the last rewind");
    store.undo()?;
    assert_eq!(tree(root), after_t2, "second undo walks back further");
    assert!(matches!(
        store.undo(),
        Err(turnback::Error::NothingTo { .. })
    ));
    store.redo()?;
    assert_eq!(tree(root), after_t1);
    store.redo()?;
    assert_eq!(tree(root), before);
    assert!(matches!(
        store.redo(),
        Err(turnback::Error::NothingTo { .. })
    ));
    // Undone turns can be rewound again after undo.
    store.undo()?;
    store.rewind(&t("t1"), &rewind_opts())?;
    assert_eq!(tree(root), before);
    Ok(())
}

#[test]
fn revert_undoes_one_turn_and_keeps_later_turns() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"a0\n");
    write(root, "b.txt", b"b0\n");
    let mut store = Store::open(root)?;
    store.write(&t("t1"), None, "a.txt", b"a1\n")?;
    store.write(&t("t1"), None, "created.txt", b"c\n")?;
    store.write(&t("t2"), None, "b.txt", b"b2\n")?;
    let report = store.revert(&t("t1"), &RevertOptions::default())?;
    assert!(report.kept.is_empty() && report.complete(), "{report:?}");
    assert_eq!(read(root, "a.txt"), "a0\n");
    assert!(!root.join("created.txt").exists());
    assert_eq!(read(root, "b.txt"), "b2\n", "the later turn is kept");
    assert_eq!(
        store
            .turns()?
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["t2"]
    );
    Ok(())
}

#[test]
fn revert_of_a_file_a_later_turn_changed_is_explained_and_kept_unless_forced() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"one\ntwo\n");
    let mut store = Store::open(root)?;
    store.write(&t("t1"), None, "a.txt", b"one\nTWO\n")?;
    store.write(&t("t2"), None, "a.txt", b"one\nTWO\nthree\n")?;
    let report = store.revert(&t("t1"), &RevertOptions::default())?;
    assert_eq!(report.kept.len(), 1);
    let detail = report.kept[0].detail.as_deref().unwrap_or("");
    assert!(
        detail.contains("-two") && detail.contains("+TWO"),
        "what t1 changed: {detail}"
    );
    assert!(detail.contains("+three"), "what came after: {detail}");
    assert_eq!(read(root, "a.txt"), "one\nTWO\nthree\n");

    store.undo()?;
    let forced = store.revert(
        &t("t1"),
        &RevertOptions {
            force: true,
            ..RevertOptions::default()
        },
    )?;
    assert_eq!(forced.conflicts.len(), 1);
    assert_eq!(read(root, "a.txt"), "one\ntwo\n");
    store.undo()?;
    assert_eq!(
        read(root, "a.txt"),
        "one\nTWO\nthree\n",
        "forced revert is undoable"
    );
    Ok(())
}

#[test]
fn gc_drops_oldest_turns_compacts_the_log_and_keeps_the_rest_rewindable() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    for i in 0..10 {
        write(
            root,
            &format!("f{i}.txt"),
            format!("original {i}\n").as_bytes(),
        );
    }
    let mut store = Store::open(root)?;
    for i in 0..10 {
        store.write(
            &t(&format!("t{i}")),
            None,
            format!("f{i}.txt"),
            format!("{i}\n").as_bytes(),
        )?;
    }
    let before = tree(root);
    let log = crate::common::store_dir(root).join("log.jsonl");
    let log_before = std::fs::metadata(&log)?.len();
    let report = store.gc(&GcOptions {
        keep_turns: Some(3),
        ..GcOptions::default()
    })?;
    assert_eq!(report.dropped_turns.len(), 7);
    assert_eq!(report.packs_removed, 7, "{report:?}");
    assert!(std::fs::metadata(&log)?.len() < log_before);
    assert_eq!(tree(root), before, "gc touches no project file");
    // A fresh process sees the compacted store.
    let mut store = Store::open(root)?;
    assert_eq!(store.turns()?.len(), 3);
    store.rewind(&t("t7"), &rewind_opts())?;
    for i in 0..10 {
        let want = if i < 7 {
            format!("{i}\n")
        } else {
            format!("original {i}\n")
        };
        assert_eq!(read(root, &format!("f{i}.txt")), want, "f{i}");
    }
    Ok(())
}

/// Automatic gc compares counters after every capture here
/// (`auto_every_captures = 1`) and runs only once `keep_turns` is exceeded
/// by a tenth: the log is rewritten once per 10 turns, not on each.
#[test]
fn automatic_gc_runs_only_past_its_margin_and_then_keeps_the_limit() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "f.txt", b"0\n");
    let mut store = Store::open(root)?;
    store.write(&t("t0"), None, "f.txt", b"1\n")?;
    std::fs::write(
        store.store_dir().join("config.toml"),
        "[retention]\nkeep_turns = 100\n[gc]\nauto_every_captures = 1\n",
    )?;
    let log = store.store_dir().join("log.jsonl");
    let mut rewrites = 0;
    let mut ino = crate::common::file_id(&log)?.1;
    let mut most = 0;
    for i in 1..=250 {
        store.write(
            &t(&format!("t{i}")),
            None,
            "f.txt",
            format!("{i}\n").as_bytes(),
        )?;
        let now = crate::common::file_id(&log)?.1;
        let live = store.turns()?.len();
        most = most.max(live);
        if now != ino {
            rewrites += 1;
            assert_eq!(live, 100, "gc keeps exactly the limit, after turn {i}");
            ino = now;
        }
    }
    assert_eq!(most, 110, "never more than the limit and its margin");
    // 251 turns: the 111th live turn starts a gc that leaves 100, so one
    // runs every 11 turns from the 111th on (13 up to 251).
    assert_eq!(rewrites, 13, "one rewrite per tenth of the limit");
    // A fresh process sees what the last gc left plus the turns since.
    assert_eq!(Store::open(root)?.turns()?.len(), store.turns()?.len());
    Ok(())
}

#[test]
fn gc_keeps_blobs_that_later_turns_share_with_dropped_ones() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "shared.txt", b"same bytes\n");
    write(root, "copy.txt", b"same bytes\n");
    let mut store = Store::open(root)?;
    store.capture(&t("old"), None, "shared.txt")?;
    // Same bytes: deduplicated against the old turn's blob.
    let r = store.capture(&t("new"), None, "copy.txt")?;
    assert_eq!(r.new_blobs, 0);
    write(root, "copy.txt", b"changed\n");
    store.gc(&GcOptions {
        keep_turns: Some(1),
        ..GcOptions::default()
    })?;
    let mut store = Store::open(root)?;
    let report = store.rewind(&t("new"), &rewind_opts())?;
    assert!(report.complete(), "{report:?}");
    assert_eq!(read(root, "copy.txt"), "same bytes\n");
    Ok(())
}

#[test]
#[cfg(unix)]
fn ten_versions_of_a_2mb_file_cost_less_than_2_5mb() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    let mut text = String::new();
    let mut x: u64 = 7;
    while text.len() < 2 << 20 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(&format!(
            "let v{} = compute({}, {});\n",
            x % 10_007,
            x >> 40,
            (x >> 20) % 977
        ));
    }
    write(root, "big.rs", text.as_bytes());
    let original = text.clone().into_bytes();
    let mut store = Store::open(root)?;
    for i in 0..10 {
        text.push_str(&format!("// line {i}\n"));
        store.write(&t(&format!("t{i}")), None, "big.rs", text.as_bytes())?;
    }
    use std::os::unix::fs::MetadataExt;
    let packs: u64 = std::fs::read_dir(crate::common::store_dir(root).join("packs"))?
        .map(|e| e.map(|e| e.metadata().map(|m| m.blocks() * 512)))
        .collect::<Result<Result<Vec<_>, _>, _>>()??
        .iter()
        .sum();
    assert!(
        packs < 2_500_000,
        "ten pre-images take {packs} bytes on disk"
    );
    store.rewind(&t("t0"), &rewind_opts())?;
    assert_eq!(std::fs::read(root.join("big.rs"))?, original);
    Ok(())
}

#[derive(Debug, Clone)]
enum Step {
    Write(usize, u8),
    External(usize, u8),
    Delete(usize),
    Rewind(usize),
    Undo,
}

const PATHS: [&str; 4] = ["a.txt", "d/b.txt", "d/e/c.txt", "top.txt"];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..PATHS.len(), any::<u8>()).prop_map(|(p, b)| Step::Write(p, b)),
        2 => (0..PATHS.len(), any::<u8>()).prop_map(|(p, b)| Step::External(p, b)),
        1 => (0..PATHS.len()).prop_map(Step::Delete),
        2 => (0..4usize).prop_map(Step::Rewind),
        2 => Just(Step::Undo),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// After any rewind, `undo` gives back the exact folder from before it.
    #[test]
    fn undo_after_any_rewind_restores_the_exact_folder(steps in proptest::collection::vec(step(), 1..24)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "a.txt", b"seed\n");
        let mut store = Store::open(root).expect("open");
        let mut turn = 0usize;
        let mut undoable: Vec<(crate::safety_common::Tree, crate::safety_common::Tree)> = Vec::new();
        for s in steps {
            match s {
                Step::Write(p, b) => {
                    turn += 1;
                    store.write(&t(&format!("t{turn}")), None, PATHS[p], &[b, b'\n']).expect("write");
                }
                Step::External(p, b) => write(root, PATHS[p], &[b'x', b]),
                Step::Delete(p) => {
                    let _ = std::fs::remove_file(root.join(PATHS[p]));
                }
                Step::Rewind(k) => {
                    let live: Vec<TurnId> = store.turns()?.iter().map(|t| t.id.clone()).collect();
                    if live.is_empty() {
                        continue;
                    }
                    let target = &live[k % live.len()];
                    let before = tree(root);
                    store.rewind(target, &RewindOptions::default()).expect("rewind");
                    undoable.push((before, tree(root)));
                }
                Step::Undo => {
                    if let Some((before, after)) = undoable.pop() {
                        // Only exact when nothing changed since the rewind.
                        if tree(root) == after {
                            store.undo().expect("undo");
                            prop_assert_eq!(tree(root), before);
                        }
                        undoable.clear();
                    }
                }
            }
        }
    }
}

/// With `defer_gc`, the capture that makes gc due leaves it for
/// `maintain` (which the command line runs in the background once it has
/// answered): the capture changes nothing but its own record, `maintain`
/// then applies the limit, and a second `maintain`, deciding again from the
/// store, finds nothing to do.
#[test]
fn a_deferred_automatic_gc_is_left_for_maintain_and_run_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "f.txt", b"0\n");
    // A data directory of its own: the trash of the default one is shared
    // with every other test's rewinds, and a name there makes maintenance
    // due.
    let data = tempfile::tempdir()?;
    let deferred = || Options {
        defer_gc: true,
        data_dir: Some(data.path().to_path_buf()),
        ..Options::default()
    };
    let mut store = Store::open_with(root, deferred())?;
    store.write(&t("t0"), None, "f.txt", b"1\n")?;
    std::fs::write(
        store.store_dir().join("config.toml"),
        "[retention]\nkeep_turns = 10\n[gc]\nauto_every_captures = 1\n",
    )?;
    let log = store.store_dir().join("log.jsonl");
    let ino = crate::common::file_id(&log)?.1;
    for i in 1..=11 {
        store.write(
            &t(&format!("t{i}")),
            None,
            "f.txt",
            format!("{i}\n").as_bytes(),
        )?;
        assert_eq!(
            store.maintenance_due(),
            i == 11,
            "gc is due only past the margin (turn {i})"
        );
    }
    assert_eq!(store.turns()?.len(), 12, "the capture ran no gc");
    assert_eq!(
        crate::common::file_id(&log)?.1,
        ino,
        "the log was rewritten"
    );
    // Another process (as `turnback maintain` is) decides from the store.
    drop(store);
    let mut other = Store::open_with(
        root,
        Options {
            data_dir: Some(data.path().to_path_buf()),
            ..Options::default()
        },
    )?;
    let done = other.maintain()?;
    let gc = done.gc.ok_or("maintain ran no gc")?;
    assert_eq!((gc.kept_turns, other.turns()?.len()), (10, 10));
    assert!(!other.maintenance_due());
    assert!(other.maintain()?.gc.is_none(), "a second gc ran");
    // The turns kept still rewind.
    other.rewind(&t("t2"), &RewindOptions::default())?;
    assert_eq!(std::fs::read(root.join("f.txt"))?, b"1\n");
    Ok(())
}
