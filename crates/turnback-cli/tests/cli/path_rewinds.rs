//! `turnback rewind T -- PATH...` and `turnback revert T -- PATH...`: only
//! those files or folders are taken back, the turns stay, and the
//! operation is undone and redone like any other.

use predicates::prelude::*;
use predicates::str::contains;
use serde_json::json;

use crate::common::{Project, TestResult, strings, turnback_in};

/// t1 edits a.txt, creates new/x.txt and new/y.txt, and deletes
/// old/gone.txt; t2 edits b.txt and a.txt again. (Through `write` and
/// `rm`, so the test runs on every platform.)
fn two_turns(p: &Project) -> TestResult {
    p.write("a.txt", "a0\n")?;
    p.write("b.txt", "b0\n")?;
    p.write("old/gone.txt", "keep me\n")?;
    for (turn, path, text) in [
        ("t1", "a.txt", "a1\n"),
        ("t1", "new/x.txt", "x\n"),
        ("t1", "new/y.txt", "y\n"),
    ] {
        p.tb()
            .args(["write", "--turn", turn, path])
            .write_stdin(text)
            .assert()
            .success();
    }
    p.ok(&["rm", "--turn", "t1", "old/gone.txt"])?;
    for (path, text) in [("b.txt", "b2\n"), ("a.txt", "a2\n")] {
        p.tb()
            .args(["write", "--turn", "t2", path])
            .write_stdin(text)
            .assert()
            .success();
    }
    Ok(())
}

fn live_turns(p: &Project) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    Ok(strings(&p.json(&["list"])?, Some("turn")))
}

#[test]
fn only_the_named_files_and_folders_come_back_and_the_turns_stay() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    let v = p.json(&["rewind", "t1", "--", "a.txt", "old"])?;
    assert_eq!(v["paths"], json!(["a.txt", "old"]));
    assert_eq!(v["restored"], json!(["a.txt", "old/gone.txt"]));
    assert_eq!(v["deleted"], json!([]));
    assert_eq!(v["left"], json!(["b.txt", "new", "new/x.txt", "new/y.txt"]));
    assert_eq!(v["failed"], json!([]));
    assert_eq!(p.read("a.txt")?, b"a0\n");
    assert_eq!(p.read("old/gone.txt")?, b"keep me\n");
    // The rest of both turns is as they left it.
    assert_eq!(p.read("b.txt")?, b"b2\n");
    assert_eq!(p.read("new/x.txt")?, b"x\n");
    assert_eq!(live_turns(&p)?, ["t1", "t2"]);
    Ok(())
}

#[test]
fn a_folder_the_turn_created_goes_with_everything_below_it() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    let human = p.ok(&["rewind", "t1", "--", "new"])?;
    assert!(
        human.contains("took back part of turns: t1, t2\n  only new; 3 other path(s) of these turns left as they are"),
        "{human}"
    );
    assert!(!p.exists("new"));
    assert_eq!(p.read("a.txt")?, b"a2\n");
    assert!(!p.exists("old/gone.txt"));
    Ok(())
}

#[test]
fn paths_are_taken_from_the_current_folder() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    turnback_in(&p.path("new"))
        .args(["rewind", "t1", "--", "x.txt"])
        .assert()
        .success()
        .stdout(contains("restored  new/x.txt").not())
        .stdout(contains("deleted   new/x.txt"));
    assert!(!p.exists("new/x.txt"));
    assert_eq!(p.read("new/y.txt")?, b"y\n");
    Ok(())
}

#[test]
fn a_path_no_turn_changed_is_an_error_and_changes_nothing() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    p.write("untouched.txt", "mine\n")?;
    let before = p.snapshot()?;
    p.tb()
        .args(["rewind", "t2", "--", "untouched.txt"])
        .assert()
        .code(1)
        .stderr(contains(
            "untouched.txt: turn t2 and the turns after it did not change it",
        ));
    p.tb()
        .args(["revert", "t2", "--", "new"])
        .assert()
        .code(1)
        .stderr(contains("new: turn t2 did not change it"));
    assert_eq!(p.snapshot()?, before);
    Ok(())
}

#[test]
fn a_dry_run_plans_only_the_named_paths() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    let before = p.snapshot()?;
    let v = p.json(&["rewind", "t1", "--dry-run", "--", "new/x.txt"])?;
    let planned: Vec<&str> = v["plan"]
        .as_array()
        .ok_or("a plan")?
        .iter()
        .filter_map(|s| s["path"].as_str())
        .collect();
    assert_eq!(planned, ["new/x.txt"]);
    assert_eq!(p.snapshot()?, before);
    Ok(())
}

#[test]
fn undo_and_redo_reverse_a_path_rewind_and_a_full_rewind_after_it_is_exact() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    p.ok(&["rewind", "t1", "--", "a.txt", "new"])?;
    assert_eq!(p.read("a.txt")?, b"a0\n");
    let human = p.ok(&["undo"])?;
    assert!(
        human.starts_with("undo: put back 4 path(s) the last operation changed\n"),
        "{human}"
    );
    assert_eq!(p.read("a.txt")?, b"a2\n");
    assert_eq!(p.read("new/x.txt")?, b"x\n");
    p.ok(&["redo"])?;
    assert_eq!(p.read("a.txt")?, b"a0\n");
    assert!(!p.exists("new"));
    // The whole of the turns, now: what the path rewind put back is no
    // conflict (it already holds what the rewind writes).
    let v = p.json(&["rewind", "t1"])?;
    assert_eq!(v["conflicts"], json!([]));
    assert_eq!(v["turns"], json!(["t1", "t2"]));
    assert_eq!(p.read("a.txt")?, b"a0\n");
    assert_eq!(p.read("b.txt")?, b"b0\n");
    assert_eq!(p.read("old/gone.txt")?, b"keep me\n");
    assert!(!p.exists("new"));
    assert_eq!(live_turns(&p)?, Vec::<String>::new());
    Ok(())
}

#[test]
fn the_root_among_the_paths_means_all_of_the_turns() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    let v = p.json(&["rewind", "t1", "--", "."])?;
    assert!(v.get("paths").is_none(), "{v}");
    assert_eq!(live_turns(&p)?, Vec::<String>::new());
    assert_eq!(p.read("b.txt")?, b"b0\n");
    Ok(())
}

#[test]
fn a_path_revert_keeps_the_turn_and_leaves_what_a_later_turn_changed() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    // a.txt was changed by t2 too: kept; new/ only by t1: reverted.
    let v = p.json(&["revert", "t1", "--", "a.txt", "new"])?;
    assert_eq!(strings(&v["kept"], Some("path")), ["a.txt"]);
    assert_eq!(v["deleted"], json!(["new/x.txt", "new/y.txt", "new"]));
    assert_eq!(p.read("a.txt")?, b"a2\n");
    assert!(!p.exists("old/gone.txt"));
    assert_eq!(live_turns(&p)?, ["t1", "t2"]);
    // The turn can still be reverted whole, then undone step by step.
    p.ok(&["revert", "t1", "--force"])?;
    assert_eq!(p.read("a.txt")?, b"a0\n");
    assert_eq!(p.read("old/gone.txt")?, b"keep me\n");
    assert_eq!(live_turns(&p)?, ["t2"]);
    p.ok(&["undo"])?;
    p.ok(&["undo"])?;
    assert_eq!(p.read("a.txt")?, b"a2\n");
    assert_eq!(p.read("new/y.txt")?, b"y\n");
    assert!(!p.exists("old/gone.txt"));
    assert_eq!(live_turns(&p)?, ["t1", "t2"]);
    Ok(())
}
