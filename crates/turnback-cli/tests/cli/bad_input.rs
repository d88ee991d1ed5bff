//! Bad input: refused with a clear error that names the path, and nothing
//! changed.

use predicates::prelude::*;
use predicates::str::contains;

use crate::common::{Project, TestResult, parse_json};

#[test]
fn a_path_outside_the_root_is_refused_by_name() -> TestResult {
    let p = Project::new()?;
    std::fs::write(p.outer.join("outside.txt"), "not yours")?;
    p.write("inside.txt", "mine")?;
    let outside = p.outer.join("outside.txt").to_string_lossy().into_owned();
    for path in ["../outside.txt", outside.as_str()] {
        p.tb()
            .args(["capture", "--turn", "t1", "inside.txt", path])
            .assert()
            .code(1)
            .stdout("")
            .stderr(contains("outside.txt").and(contains("outside the project root")));
    }
    // One bad path fails the whole call: nothing was captured.
    assert!(!p.exists(".turnback"));
    assert_eq!(p.json(&["list"])?, serde_json::json!([]));

    // A write outside is refused before standard input is written anywhere.
    p.tb()
        .args(["write", "--turn", "t1", "../outside.txt"])
        .write_stdin("overwritten")
        .assert()
        .code(1)
        .stderr(contains("outside.txt").and(contains("outside the project root")));
    assert_eq!(std::fs::read(p.outer.join("outside.txt"))?, b"not yours");
    Ok(())
}

/// Unix only: on Windows a symlink needs a privilege tests cannot count on.
#[cfg(unix)]
#[test]
fn a_symlink_that_leaves_the_root_is_not_a_way_out() -> TestResult {
    let p = Project::new()?;
    std::fs::create_dir(p.outer.join("elsewhere"))?;
    std::fs::write(p.outer.join("elsewhere/secret.txt"), "secret")?;
    crate::common::symlink(p.outer.join("elsewhere"), p.path("door"))?;
    p.tb()
        .args(["write", "--turn", "t1", "door/secret.txt"])
        .write_stdin("overwritten")
        .assert()
        .code(1)
        .stderr(contains("door/secret.txt").and(contains("outside the project root")));
    assert_eq!(
        std::fs::read(p.outer.join("elsewhere/secret.txt"))?,
        b"secret"
    );
    Ok(())
}

#[test]
fn paths_inside_git_or_the_store_are_refused_by_name() -> TestResult {
    let p = Project::new()?;
    p.write(".git/config", "[core]\n")?;
    p.write("a.txt", "a")?;
    p.ok(&["capture", "--turn", "t0", "a.txt"])?;
    let before = p.snapshot()?;
    p.tb()
        .args(["capture", "--turn", "t1", ".git/x"])
        .assert()
        .code(1)
        .stderr(contains(native(".git/x")).and(contains("inside .git/")));
    p.tb()
        .args(["write", "--turn", "t1", ".git/config"])
        .write_stdin("[core]\n\tbroken\n")
        .assert()
        .code(1)
        .stderr(contains(native(".git/config")).and(contains("inside .git/")));
    p.tb()
        .args(["capture", "--turn", "t1", "sub/../.turnback/log.jsonl"])
        .assert()
        .code(1)
        .stderr(
            contains(".turnback/log.jsonl")
                .or(contains(native(".turnback/log.jsonl")))
                .and(contains("inside turnback's own directory")),
        );
    // With --json the error is one JSON object on stdout, naming the path.
    let out = p
        .tb()
        .args(["--json", "capture", "--turn", "t1", ".git/x"])
        .assert()
        .code(1);
    let v = parse_json(&out.get_output().stdout)?;
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains(&native(".git/x"))),
        "{v}"
    );
    assert_eq!(p.snapshot()?, before, "a refused path changed something");
    Ok(())
}

#[test]
fn a_directory_is_refused_with_advice() -> TestResult {
    let p = Project::new()?;
    p.write("src/a.rs", "a")?;
    p.tb()
        .args(["capture", "--turn", "t1", "src"])
        .assert()
        .code(1)
        .stderr(contains("\"src\" is a directory").and(contains("capture the files in it")));
    Ok(())
}

#[test]
fn bad_flags_are_usage_errors_with_exit_2() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a")?;
    p.tb()
        .args([
            "capture",
            "--turn",
            "t1",
            "--max-file-size",
            "lots",
            "a.txt",
        ])
        .assert()
        .code(2)
        .stderr(
            contains("invalid value 'lots' for '--max-file-size").and(contains("unknown unit")),
        );
    p.tb()
        .args(["frobnicate"])
        .assert()
        .code(2)
        .stderr(contains("frobnicate"));
    p.tb()
        .args(["capture", "--turn", "", "a.txt"])
        .assert()
        .code(1)
        .stderr(contains("invalid turn id").and(contains("empty")));
    assert!(!p.exists(".turnback"));
    Ok(())
}

/// `rel` with the platform's separator, as the error shows the path given
/// (quoted as Rust quotes a path: a Windows `\\` is shown doubled).
fn native(rel: &str) -> String {
    let quoted = format!("{:?}", rel.replace('/', std::path::MAIN_SEPARATOR_STR));
    quoted.trim_matches('"').to_string()
}
