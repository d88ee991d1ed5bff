//! The rewind rules: what `rewind T` undoes, what it reports, and what it
//! leaves alone.

use turnback::log::Op;
use turnback::{Action, Error, RewindOptions};

use crate::common::{Project, TestResult, assert_same, expect_err, turn};

#[test]
fn rewind_undoes_later_turns_oldest_pre_image_wins() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    p.write("b.txt", "b0\n")?;
    let mut store = p.open()?;
    let (t1, t2, t3) = (turn("t1")?, turn("t2")?, turn("t3")?);
    store.write(&t1, None, "a.txt", b"a1\n")?;
    let after_t1 = p.snapshot()?;
    store.write(&t2, None, "a.txt", b"a2\n")?;
    store.write(&t2, None, "b.txt", b"b2\n")?;
    store.write(&t2, None, "dir/c.txt", b"c2\n")?;
    store.write(&t3, None, "b.txt", b"b3\n")?;
    store.write(&t3, None, "a.txt", b"a3\n")?;

    // Rewinding t2 undoes t3 as well; b.txt was captured in t2 (b0) and in
    // t3 (b2): the older pre-image, b0, is what comes back.
    let report = store.rewind(&t2, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(report.turns, [t2.clone(), t3.clone()]);
    assert_same(&after_t1, &p.snapshot()?, "after rewinding t2");
    let live: Vec<&str> = store.turns()?.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(live, ["t1"]);

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("a.txt")?, b"a0\n");
    assert_eq!(p.read("b.txt")?, b"b0\n");
    assert!(store.turns()?.is_empty());
    Ok(())
}

#[test]
fn second_rewind_reports_nothing_to_rewind() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "before\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "a.txt", b"agent\n")?;
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("a.txt")?, b"before\n");
    // The user goes on working; a second rewind must not undo that.
    p.write("a.txt", "user, later\n")?;
    let log_before = std::fs::read(p.log_path())?;

    for store in [&mut store, &mut p.open()?] {
        let err = expect_err(
            store.rewind(&t1, &RewindOptions::default()),
            "a second rewind",
        )?;
        assert!(matches!(err, Error::AlreadyRewound { .. }), "{err:?}");
        assert!(err.to_string().contains("nothing to rewind"), "{err}");
    }
    assert_eq!(p.read("a.txt")?, b"user, later\n");
    assert_eq!(std::fs::read(p.log_path())?, log_before);
    Ok(())
}

#[test]
fn unknown_turn_is_an_error_and_changes_nothing() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "before\n")?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "a.txt", b"agent\n")?;
    let before = p.snapshot_all()?;

    for dry_run in [false, true] {
        let err = expect_err(
            store.rewind(
                &turn("no-such-turn")?,
                &RewindOptions {
                    dry_run,
                    ..RewindOptions::default()
                },
            ),
            "a rewind of an unknown turn",
        )?;
        assert!(matches!(err, Error::UnknownTurn { .. }), "{err:?}");
        assert!(err.to_string().contains("no-such-turn"), "{err}");
    }
    assert_same(&before, &p.snapshot_all()?, "project and store");
    assert_eq!(store.turns()?.len(), 1);
    Ok(())
}

#[test]
fn dry_run_changes_nothing() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "before\n")?;
    p.write("big.bin", vec![1u8; 2048])?;
    let mut store = p.open_with(turnback::Options {
        max_file_size: 1024,
        ..turnback::Options::default()
    })?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "a.txt", b"agent\n")?;
    store.write(&t1, None, "new/file.txt", b"agent made\n")?;
    store.write(&t1, None, "big.bin", b"shrunk\n")?;
    let before = p.snapshot_all()?;

    let report = store.rewind(
        &t1,
        &RewindOptions {
            dry_run: true,
            ..RewindOptions::default()
        },
    )?;
    assert!(report.dry_run);
    let plan: Vec<(&str, &str)> = report
        .plan
        .iter()
        .map(|s| {
            let kind = match s.action {
                Action::Restore { .. } => "restore",
                Action::RestoreKept { .. } => "restore kept",
                Action::RestoreSymlink { .. } => "symlink",
                Action::Delete => "delete",
                Action::MakeDir { .. } => "mkdir",
                Action::MakeFifo { .. } => "mkfifo",
                Action::CannotRestore { .. } => "cannot",
            };
            (s.path.as_str(), kind)
        })
        .collect();
    assert_eq!(
        plan,
        [
            ("a.txt", "restore"),
            ("big.bin", "cannot"),
            ("new", "delete"),
            ("new/file.txt", "delete"),
        ]
    );
    assert!(report.restored.is_empty() && report.deleted.is_empty() && report.failed.is_empty());
    assert_same(&before, &p.snapshot_all()?, "project and store");
    assert_eq!(store.turns()?.len(), 1, "the dry run ended the turn");

    // The plan was honest: the real rewind does what it said.
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert_eq!(p.read("a.txt")?, b"before\n");
    assert!(!p.exists("new"));
    assert_eq!(report.failed.len(), 1);
    Ok(())
}

#[test]
fn damaged_blob_is_never_written_into_the_project() -> TestResult {
    let p = Project::new()?;
    let a: String = (0..400).map(|i| format!("line {i} of a\n")).collect();
    p.write("a.txt", &a)?;
    p.write("b.txt", "b before\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    // Two capture calls, so each file's blob sits in a pack of its own.
    store.write(&t1, None, "a.txt", b"a after\n")?;
    store.write(&t1, None, "b.txt", b"b after\n")?;

    let (pack, offset, len) = p
        .records()?
        .into_iter()
        .find_map(|r| match r.op {
            Op::Capture {
                pack: Some(pack),
                blobs,
                files,
                ..
            } if files.iter().any(|f| f.path.as_str() == "a.txt") => {
                blobs.first().map(|b| (pack, b.offset, b.len))
            }
            _ => None,
        })
        .ok_or("no pack holds a.txt")?;
    let pack_path = crate::common::store_dir(&p.root).join("packs").join(pack);
    let mut bytes = std::fs::read(&pack_path)?;
    bytes[(offset + len / 2) as usize] ^= 0x10;
    crate::common::set_mode(&pack_path, 0o644)?;
    std::fs::write(&pack_path, &bytes)?;

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(!report.complete());
    let failed: Vec<&str> = report.failed.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(failed, ["a.txt"]);
    assert!(
        report.failed[0].reason.contains("damaged"),
        "{}",
        report.failed[0].reason
    );
    assert_eq!(
        p.read("a.txt")?,
        b"a after\n",
        "damaged bytes reached the project"
    );
    assert_eq!(p.read("b.txt")?, b"b before\n");
    // No temporary file with the damaged bytes is left behind either.
    let names: Vec<String> = std::fs::read_dir(&p.root)?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<TestResult<_>>()?;
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, [".turnback", "a.txt", "b.txt"]);
    Ok(())
}

#[test]
fn turn_id_can_be_used_again_after_its_rewind() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    let mut store = p.open()?;
    let t = turn("turn-1")?;
    store.write(&t, None, "a.txt", b"a1\n")?;
    store.rewind(&t, &RewindOptions::default())?;
    // An agent counting its turns from 1 again after the rewind.
    store.write(&t, None, "a.txt", b"a1 again\n")?;
    store.write(&t, None, "b.txt", b"b1\n")?;
    assert_eq!(store.turns()?.len(), 1);
    assert_eq!(p.open()?.turn(&t)?.files.len(), 2);
    let report = store.rewind(&t, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("a.txt")?, b"a0\n");
    assert!(!p.exists("b.txt"));
    Ok(())
}

#[test]
fn a_file_linked_from_outside_after_the_agent_is_not_written_through() -> TestResult {
    let p = Project::new()?;
    p.write("b.txt", "b0\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "b.txt", b"b1\n")?;
    // Someone links b.txt from outside the project after the agent.
    let outside = p.outside().join("b-elsewhere");
    std::fs::hard_link(p.path("b.txt"), &outside)?;
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("b.txt")?, b"b0\n");
    assert_eq!(
        std::fs::read(&outside)?,
        b"b1\n",
        "the other name is not written through"
    );
    Ok(())
}

/// A file replaced by a `write` or a rewind keeps the extended attributes
/// the user had on it (a download's origin, a quarantine mark, tags), also
/// when its mode is read-only. Unix only: Windows has none that turnback
/// can reach.
#[cfg(unix)]
#[test]
fn a_replaced_file_keeps_its_extended_attributes() -> TestResult {
    use rustix::fs::{XattrFlags, getxattr, setxattr};
    let get = |path: &std::path::Path| -> TestResult<Vec<u8>> {
        let mut buf = vec![0u8; 256];
        let n = getxattr(path, "user.turnback.origin", &mut buf[..])?;
        buf.truncate(n);
        Ok(buf)
    };
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    p.write("ro.txt", "r0\n")?;
    for name in ["a.txt", "ro.txt"] {
        // A file system without user attributes fails the test: it would
        // prove nothing.
        setxattr(
            p.path(name),
            "user.turnback.origin",
            b"https://example.com/dl",
            XattrFlags::empty(),
        )
        .map_err(|e| format!("this file system must hold user.* attributes: {e}"))?;
    }
    p.chmod("ro.txt", 0o444)?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    let report = store.write(&t1, None, "a.txt", b"a1\n")?;
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(p.read("a.txt")?, b"a1\n");
    assert_eq!(get(&p.path("a.txt"))?, b"https://example.com/dl");
    let t2 = turn("t2")?;
    store.write(&t2, None, "ro.txt", b"r1\n")?;
    assert_eq!(get(&p.path("ro.txt"))?, b"https://example.com/dl");
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(p.read("a.txt")?, b"a0\n");
    assert_eq!(p.read("ro.txt")?, b"r0\n");
    assert_eq!(p.mode("ro.txt")? & 0o777, 0o444);
    for name in ["a.txt", "ro.txt"] {
        assert_eq!(get(&p.path(name))?, b"https://example.com/dl", "{name}");
    }
    Ok(())
}

/// Counts what a rewind reports through [`turnback::Progress`].
#[derive(Default)]
struct Counted {
    total: std::sync::atomic::AtomicU64,
    done: std::sync::atomic::AtomicU64,
    announced: std::sync::atomic::AtomicU64,
}

impl turnback::Progress for Counted {
    fn changing(&self, paths: u64) {
        self.total
            .fetch_add(paths, std::sync::atomic::Ordering::Relaxed);
        self.announced
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn changed(&self, paths: u64) {
        self.done
            .fetch_add(paths, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Counted {
    /// (times announced, paths announced, paths done), reset to zero.
    fn take(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.announced.swap(0, Relaxed),
            self.total.swap(0, Relaxed),
            self.done.swap(0, Relaxed),
        )
    }
}

/// Each path of a rewind's, undo's, redo's and revert's plan is counted
/// done once, failed ones included, and a dry run reports nothing.
#[test]
fn rewinds_report_each_planned_path_done_once() -> TestResult {
    let p = Project::new()?;
    for k in 0..40 {
        p.write(&format!("src/f{k}.txt"), format!("v0 {k}\n"))?;
    }
    p.write("gone.txt", "keep\n")?;
    let mut store = p.open()?;
    let counted = std::sync::Arc::new(Counted::default());
    store.set_progress(Some(counted.clone()));
    let (t1, t2) = (turn("t1")?, turn("t2")?);
    for k in 0..40 {
        store.write(&t1, None, format!("src/f{k}.txt"), b"v1\n")?;
    }
    for k in 0..5 {
        store.write(&t1, None, format!("new/n{k}.txt"), b"new\n")?;
    }
    store.capture_many(&t1, None, &["gone.txt"])?;
    std::fs::remove_file(p.path("gone.txt"))?;
    store.write(&t2, None, "src/f0.txt", b"v2\n")?;
    assert_eq!(counted.take(), (0, 0, 0), "captures report no rewind");

    let dry = store.rewind(
        &t1,
        &RewindOptions {
            dry_run: true,
            ..RewindOptions::default()
        },
    )?;
    assert_eq!(counted.take(), (0, 0, 0), "a dry run changes nothing");
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    let planned = report.plan.len() as u64;
    assert_eq!(planned, dry.plan.len() as u64);
    assert!(planned >= 46, "{planned}");
    assert_eq!(counted.take(), (1, planned, planned));
    for op in ["undo", "redo"] {
        let report = if op == "undo" {
            store.undo()?
        } else {
            store.redo()?
        };
        let planned = report.plan.len() as u64;
        assert_eq!(counted.take(), (1, planned, planned), "{op}");
    }
    store.undo()?;
    counted.take();
    let report = store.revert(&t2, &turnback::RevertOptions::default())?;
    let planned = report.plan.len() as u64;
    assert_eq!(counted.take(), (1, planned, planned), "revert");
    Ok(())
}

/// A turn made while a rewind stood captures what the rewind left; once
/// the rewind is undone, a rewind of a turn it had ended must give the
/// folder before that turn, not the stale capture (found by
/// `test_model_ops`). gc keeps that rewind while it matters, even once a
/// newer rewind has cleared what could be redone, and so does the index
/// checkpoint a reopen reads.
#[test]
fn rewind_after_undo_ignores_captures_made_while_the_undone_rewind_stood() -> TestResult {
    let p = Project::new()?;
    p.write("a", "a0\n")?;
    let mut store = p.open()?;
    let [t1, t2, t3, t4, t5, t6, t7] = ["t1", "t2", "t3", "t4", "t5", "t6", "t7"].map(turn);
    let (t1, t2, t3, t4, t5, t6, t7) = (t1?, t2?, t3?, t4?, t5?, t6?, t7?);
    let rw = RewindOptions::default;
    store.write(&t1, None, "d/e/f", b"f\n")?;
    // Undone before t2 begins: gc may drop this one.
    store.rewind(&t1, &rw())?;
    store.undo()?;
    let before_t2 = p.snapshot()?;
    store.write(&t2, None, "a", b"a2\n")?;
    store.rewind(&t1, &rw())?;
    // Made while the rewind stands: d/e/f is absent for it.
    store.write(&t3, None, "d/e/f", b"t3\n")?;
    store.undo()?;
    assert_eq!(p.read("d/e/f")?, b"f\n");
    // Newer operations clear the undone one from what redo could take.
    store.write(&t4, None, "b", b"t4\n")?;
    store.rewind(&t4, &rw())?;
    store.write(&t5, None, "b", b"t5\n")?;
    store.rewind(&t5, &rw())?;
    store.write(&t6, None, "b", b"t6\n")?;
    store.rewind(&t6, &rw())?;
    store.write(&t7, None, "c", b"t7\n")?;
    // Five operations, three kept by the count, and the second rewind of
    // t1 too (t2 is kept); the first one (undone before t2) goes.
    let gc = store.gc(&turnback::GcOptions {
        keep_turns: Some(3),
        ..turnback::GcOptions::default()
    })?;
    assert_eq!(gc.dropped_operations, 1, "{gc:?}");
    for reopen in [false, true] {
        if reopen {
            store = p.open()?;
        }
        let report = store.rewind(
            &t2,
            &RewindOptions {
                dry_run: true,
                ..rw()
            },
        )?;
        let f = report
            .plan
            .iter()
            .find(|s| s.path.as_str() == "d/e/f")
            .ok_or("d/e/f is planned")?;
        assert!(
            matches!(f.action, Action::Restore { .. }),
            "d/e/f is put back as t1 left it, not deleted: {:?}",
            f.action
        );
    }
    let report = store.rewind(&t2, &rw())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_same(&before_t2, &p.snapshot()?, "after rewinding t2");
    Ok(())
}
