//! Rewinds, undo and redo across type changes, and conflicts that are
//! only conflicts when someone other than a turn made the change. Each case
//! compares the whole project (path, type, mode, bytes or link target, link
//! groups) with the state it must be back to. The turns made by `sh -c`
//! scripts (`ln -s`, `chmod`, `mv`) run on Unix only.

use crate::common::{Project, Res, State, TestResult, texts};

/// Runs `turnback ARGS` and expects exit 0, returning stdout and stderr.
fn ok(p: &Project, args: &[&str]) -> Res<String> {
    let out = p.tb().args(args).output()?;
    let (o, e) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "turnback {args:?}:\n{o}\n{e}");
    Ok(o + &e)
}

#[cfg(unix)]
fn sh(p: &Project, turn: &str, script: &str) -> Res<String> {
    ok(p, &["exec", "--turn", turn, "--", "sh", "-c", script])
}

/// Rewinds t1, then undoes and redoes it, checking the whole project
/// after each step and that no step reports a conflict or a failure.
fn round_trip(p: &Project, before: &State, what: &str) -> TestResult {
    let after = p.state()?;
    assert_ne!(&after, before, "{what}: the turn changed nothing");
    for (args, want) in [
        (&["rewind", "t1"][..], before),
        (&["undo"][..], &after),
        (&["redo"][..], before),
        (&["undo"][..], &after),
    ] {
        let out = ok(p, args)?;
        assert!(!out.contains("CONFLICT"), "{what}: {args:?}: {out}");
        assert_eq!(&p.state()?, want, "{what}: after {args:?}: {out}");
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn undo_and_redo_cross_every_type_change_both_ways() -> TestResult {
    // (what, set-up, the turn's command)
    let cases = [
        (
            "file to dir",
            "echo file > x",
            "rm x; mkdir x; echo inner > x/y",
        ),
        (
            "dir to file",
            "mkdir x; echo inner > x/y",
            "rm -r x; echo file > x",
        ),
        (
            "symlink to dir",
            "ln -s elsewhere x",
            "rm x; mkdir -p x/z; echo inner > x/z/y",
        ),
        (
            "dir to symlink",
            "mkdir -p x/z; echo inner > x/z/y",
            "rm -r x; ln -s elsewhere x",
        ),
        (
            "file to symlink",
            "echo file > x",
            "rm x; ln -s elsewhere x",
        ),
        (
            "symlink to file",
            "ln -s elsewhere x",
            "rm x; echo file > x",
        ),
    ];
    for (what, setup, command) in cases {
        let p = Project::new()?;
        std::process::Command::new("sh")
            .args(["-c", setup])
            .current_dir(&p.root)
            .status()?;
        let before = p.state()?;
        sh(&p, "t1", command)?;
        round_trip(&p, &before, what)?;
    }
    Ok(())
}

#[test]
// Windows (under Wine): the directory the write made is removed but its
// name stays taken, so the file cannot come back in the same rewind (exit
// 3, reported); a known gap, docs/PLATFORMS.md.
#[cfg(unix)]
fn undo_after_a_file_became_a_directory_through_write() -> TestResult {
    let p = Project::new()?;
    p.write("x", "file\n")?;
    let before = p.state()?;
    ok(&p, &["rm", "--turn", "t1", "x"])?;
    p.tb()
        .args(["write", "--turn", "t1", "x/y"])
        .write_stdin("inner\n")
        .assert()
        .success();
    round_trip(&p, &before, "rm then write beneath")
}

#[cfg(unix)]
fn written_then_exec(script: &str) -> Res<(Project, State)> {
    let p = Project::new()?;
    p.write("f", "original\n")?;
    p.write("keep", "untouched\n")?;
    let before = p.state()?;
    p.tb()
        .args(["write", "--turn", "t1", "f"])
        .write_stdin("agent\n")
        .assert()
        .success();
    sh(&p, "t2", script)?;
    Ok((p, before))
}

#[cfg(unix)]
#[test]
fn a_later_exec_turn_changing_the_file_is_no_conflict() -> TestResult {
    for script in ["echo later > f", "rm f", "mv f g", "chmod 600 f"] {
        for keep in [false, true] {
            let (p, before) = written_then_exec(script)?;
            let mut args = vec!["rewind", "t1"];
            if keep {
                args.push("--keep-conflicts");
            }
            let out = ok(&p, &args)?;
            assert!(!out.contains("CONFLICT"), "{script}: {out}");
            assert!(!out.contains("kept"), "{script}: {out}");
            assert_eq!(p.state()?, before, "{script} (keep {keep}): {out}");
        }
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_change_after_the_last_turn_is_still_a_conflict() -> TestResult {
    let (p, before) = written_then_exec("echo later > f")?;
    p.write("f", "mine\n")?;
    let out = p.tb().args(["rewind", "t1", "--keep-conflicts"]).output()?;
    let (o, e) = texts(&out);
    assert!(
        o.contains("f") && (o.contains("kept") || o.contains("KEPT")),
        "{o}\n{e}"
    );
    assert_eq!(p.read("f")?, b"mine\n");
    let (p, _) = written_then_exec("echo later > f")?;
    p.write("f", "mine\n")?;
    let out = ok(&p, &["rewind", "t1"])?;
    assert!(out.contains("CONFLICT"), "{out}");
    assert_eq!(p.state()?, before);
    Ok(())
}

#[cfg(unix)]
#[test]
fn hard_links_come_back_as_one_file_after_a_command() -> TestResult {
    // In place (both names change), by rename (one name gets a new file),
    // and one name removed.
    for command in ["echo two > a", "echo two > a.new && mv a.new a", "rm b"] {
        let p = Project::new()?;
        p.write("a", "one\n")?;
        std::fs::create_dir(p.path("d"))?;
        std::fs::hard_link(p.path("a"), p.path("b"))?;
        std::fs::hard_link(p.path("a"), p.path("d/c"))?;
        let before = p.state()?;
        assert_eq!(before.links.len(), 1);
        sh(&p, "t1", command)?;
        round_trip(&p, &before, command)?;
    }
    Ok(())
}

#[test]
fn a_write_through_a_hard_linked_name_changes_every_name() -> TestResult {
    let p = Project::new()?;
    p.write("a", "one\n")?;
    std::fs::hard_link(p.path("a"), p.path("b"))?;
    let before = p.state()?;
    p.tb()
        .args(["write", "--turn", "t1", "a"])
        .write_stdin("two\n")
        .assert()
        .success();
    assert_eq!(p.read("b")?, b"two\n");
    assert_eq!(p.state()?.links, before.links);
    round_trip(&p, &before, "write through a hard link")
}
