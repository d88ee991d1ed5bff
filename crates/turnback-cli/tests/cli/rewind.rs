//! `turnback rewind`: restores, deletions, `--dry-run`, exit codes 1 and 3.

use predicates::prelude::*;
use predicates::str::contains;
use serde_json::json;

use crate::common::{Project, TestResult, file_mode, parse_json, strings};

/// A turn that edits a.txt (mode 755), creates new/x.txt and deletes gone.txt.
fn one_turn(p: &Project) -> TestResult {
    p.write("a.txt", "before\n")?;
    p.chmod("a.txt", 0o755)?;
    p.write("gone.txt", "keep me\n")?;
    p.tb()
        .args(["write", "--turn", "t1", "a.txt"])
        .write_stdin("after\n")
        .assert()
        .success();
    p.tb()
        .args(["write", "--turn", "t1", "new/x.txt"])
        .write_stdin("created\n")
        .assert()
        .success();
    p.ok(&["capture", "--turn", "t1", "gone.txt"])?;
    std::fs::remove_file(p.path("gone.txt"))?;
    p.chmod("a.txt", 0o644)?;
    Ok(())
}

fn check_back(p: &Project) -> TestResult {
    assert_eq!(p.read("a.txt")?, b"before\n");
    assert_eq!(p.mode("a.txt")?, file_mode(0o755));
    assert_eq!(p.read("gone.txt")?, b"keep me\n");
    assert!(!p.exists("new/x.txt"));
    assert!(!p.exists("new"));
    Ok(())
}

#[test]
fn rewind_restores_files_and_modes_and_deletes_what_the_turn_created() -> TestResult {
    let p = Project::new()?;
    one_turn(&p)?;
    let human = p.ok(&["rewind", "t1"])?;
    assert_eq!(
        human,
        "rewound turns: t1\n  restored  a.txt\n  restored  gone.txt\n  deleted   new/x.txt\n  deleted   new\nrestored 2, deleted 2, conflicts 0, not restored 0\n"
    );
    check_back(&p)?;
    assert_eq!(p.json(&["list"])?, json!([]));
    // A second rewind to the same point has nothing to do.
    p.tb()
        .args(["rewind", "t1"])
        .assert()
        .code(1)
        .stderr(contains("nothing to rewind").and(contains("already rewound")));
    Ok(())
}

#[test]
fn rewind_json_reports_restored_and_deleted_paths() -> TestResult {
    let p = Project::new()?;
    one_turn(&p)?;
    let v = p.json(&["rewind", "t1"])?;
    assert_eq!(v["turn"], "t1");
    assert_eq!(v["turns"], json!(["t1"]));
    assert_eq!(v["dry_run"], false);
    assert_eq!(v["restored"], json!(["a.txt", "gone.txt"]));
    assert_eq!(v["deleted"], json!(["new/x.txt", "new"]));
    assert_eq!(v["failed"], json!([]));
    check_back(&p)
}

#[test]
fn rewind_undoes_every_later_turn_too() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "v0")?;
    for (turn, text) in [("t1", "v1"), ("t2", "v2"), ("t3", "v3")] {
        p.tb()
            .args(["write", "--turn", turn, "a.txt"])
            .write_stdin(text)
            .assert()
            .success();
    }
    let v = p.json(&["rewind", "t2"])?;
    assert_eq!(v["turns"], json!(["t2", "t3"]));
    assert_eq!(p.read("a.txt")?, b"v1");
    assert_eq!(strings(&p.json(&["list"])?, Some("turn")), ["t1"]);
    Ok(())
}

#[test]
fn rewind_dry_run_prints_the_plan_and_changes_nothing() -> TestResult {
    let p = Project::new()?;
    one_turn(&p)?;
    let before = p.snapshot()?;
    let human = p.ok(&["rewind", "t1", "--dry-run"])?;
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines[0], "rewind of t1 would undo turns: t1", "{human}");
    let step = |path: &str| {
        lines
            .iter()
            .find(|l| l.ends_with(&format!(" {path}")))
            .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
    };
    assert_eq!(step("a.txt").as_deref(), Some("restore"), "{human}");
    let restore = format!("restore  (7 bytes, mode {:o})", file_mode(0o755));
    assert!(human.contains(&restore), "{human}");
    assert_eq!(step("gone.txt").as_deref(), Some("restore"), "{human}");
    assert_eq!(step("new/x.txt").as_deref(), Some("delete"), "{human}");
    assert_eq!(step("new").as_deref(), Some("delete"), "{human}");
    assert_eq!(p.snapshot()?, before, "a dry run changed the folder");

    let v = p.json(&["rewind", "t1", "--dry-run"])?;
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["restored"], json!([]));
    assert_eq!(v["deleted"], json!([]));
    let actions: Vec<(String, String)> = v["plan"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    (
                        s["path"].as_str().unwrap_or_default().to_owned(),
                        s["action"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    for (path, action) in [
        ("a.txt", "restore"),
        ("gone.txt", "restore"),
        ("new/x.txt", "delete"),
        ("new", "delete"),
    ] {
        assert!(
            actions.contains(&(path.to_owned(), action.to_owned())),
            "{path} {action} missing from {actions:?}"
        );
    }
    assert_eq!(p.snapshot()?, before, "a dry run changed the folder");
    // The turn is still there to rewind for real.
    p.ok(&["rewind", "t1"])?;
    check_back(&p)
}

#[test]
fn rewind_of_an_unknown_turn_is_exit_1_and_changes_nothing() -> TestResult {
    let p = Project::new()?;
    one_turn(&p)?;
    let before = p.snapshot()?;
    p.tb()
        .args(["rewind", "no-such-turn"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(contains("unknown turn \"no-such-turn\""));
    let out = p
        .tb()
        .args(["--json", "rewind", "no-such-turn"])
        .assert()
        .code(1);
    let v = parse_json(&out.get_output().stdout)?;
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("no-such-turn")),
        "{v}"
    );
    assert_eq!(p.snapshot()?, before);
    Ok(())
}

#[test]
fn rewind_is_exit_3_when_a_file_over_the_size_cap_cannot_be_restored() -> TestResult {
    let p = Project::new()?;
    p.write("big.bin", vec![1u8; 3000])?;
    p.write("small.txt", "small\n")?;
    p.ok(&[
        "capture",
        "--turn",
        "t1",
        "--max-file-size",
        "2K",
        "big.bin",
        "small.txt",
    ])?;
    p.write("big.bin", "replaced")?;
    p.write("small.txt", "changed")?;

    let plan = p.ok(&["rewind", "t1", "--dry-run"])?;
    assert!(plan.contains("CANNOT RESTORE"), "{plan}");
    assert!(plan.contains("--max-file-size"), "{plan}");

    let out = p.tb().args(["rewind", "t1"]).assert().code(3);
    let (stdout, stderr) = crate::common::texts(out.get_output());
    assert!(stdout.contains("  restored  small.txt\n"), "{stdout}");
    assert!(stdout.contains("  NOT RESTORED  big.bin: "), "{stdout}");
    assert!(
        stderr.contains("1 path(s) could not be restored"),
        "{stderr}"
    );
    assert_eq!(p.read("small.txt")?, b"small\n");
    // The file that could not be saved is left as it is, not half-restored.
    assert_eq!(p.read("big.bin")?, b"replaced");

    // The same in JSON.
    p.write("huge.bin", vec![2u8; 5000])?;
    p.ok(&[
        "capture",
        "--turn",
        "t2",
        "--max-file-size",
        "2K",
        "huge.bin",
    ])?;
    p.write("huge.bin", "x")?;
    let out = p.tb().args(["--json", "rewind", "t2"]).assert().code(3);
    let v = parse_json(&out.get_output().stdout)?;
    assert_eq!(strings(&v["failed"], Some("path")), ["huge.bin"]);
    assert!(
        v["failed"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("--max-file-size")),
        "{v}"
    );
    Ok(())
}

/// Where frees are deferred (Linux, the data directory on the project's device), the
/// rewind links the files it replaces into the trash; the process
/// it starts in the background removes them, and nothing is left there.
#[cfg(target_os = "linux")]
#[test]
fn the_trash_a_rewind_fills_is_emptied_in_the_background() -> TestResult {
    use std::os::unix::fs::MetadataExt;
    let p = Project::new()?;
    // A data directory of its own, beside the project (on its device): the
    // shared one's trash also holds other tests' names.
    let data = p.root.with_extension("data");
    std::fs::create_dir_all(&data)?;
    let tb = |args: &[&str]| -> TestResult {
        p.tb()
            .env("TURNBACK_DATA_DIR", &data)
            .args(args)
            .assert()
            .success();
        Ok(())
    };
    for i in 0..20 {
        p.write(&format!("d/f{i}.txt"), format!("before {i}\n"))?;
    }
    let names: Vec<String> = (0..20).map(|i| format!("d/f{i}.txt")).collect();
    let mut args = vec!["capture", "--turn", "t1"];
    args.extend(names.iter().map(String::as_str));
    tb(&args)?;
    for (i, n) in names.iter().enumerate() {
        p.write(n, format!("after {i}\n"))?;
    }
    let trash = data.join("trash");
    let same_device = std::fs::metadata(&data)?.dev() == std::fs::metadata(p.path("d"))?.dev();
    tb(&["rewind", "t1"])?;
    for (i, n) in names.iter().enumerate() {
        assert_eq!(p.read(n)?, format!("before {i}\n").into_bytes());
    }
    if !same_device {
        assert!(!trash.exists(), "a trash across devices");
        return Ok(());
    }
    // The background process needs no lock and removes only names; wait
    // for it (bounded), then nothing is left.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while trash.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!trash.exists(), "the trash is still there after 30 s");
    // And the rewind undoes exactly.
    tb(&["undo"])?;
    for (i, n) in names.iter().enumerate() {
        assert_eq!(p.read(n)?, format!("after {i}\n").into_bytes());
    }
    Ok(())
}

/// With no turn and no terminal (the tests' pipes), rewind, revert and show
/// stay usage errors: exit 2, the missing argument named, nothing changed.
#[test]
fn a_missing_turn_without_a_terminal_is_a_usage_error() -> TestResult {
    let p = Project::new()?;
    one_turn(&p)?;
    let before = p.snapshot()?;
    for command in ["rewind", "revert", "show"] {
        let out = p.tb().arg(command).write_stdin("y\n").assert().code(2);
        let (stdout, stderr) = crate::common::texts(out.get_output());
        assert_eq!(stdout, "", "{command}");
        assert!(stderr.contains("<TURN>"), "{command}: {stderr}");
        assert!(stderr.contains("terminal"), "{command}: {stderr}");
        assert!(
            stderr.contains(&format!("Usage: turnback {command}")),
            "{command}: {stderr}"
        );
    }
    // --json wants output for a program: never a picker.
    let out = p.tb().args(["--json", "rewind"]).assert().code(2);
    let (_, stderr) = crate::common::texts(out.get_output());
    assert!(stderr.contains("<TURN>"), "{stderr}");
    assert_eq!(p.snapshot()?, before);
    Ok(())
}
