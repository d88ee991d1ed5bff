//! `turnback list`, `show` and `diff`.

use predicates::prelude::*;
use predicates::str::contains;
use serde_json::{Value, json};

use crate::common::{Project, TestResult, file_mode, std_turnback_in, strings};

#[test]
fn list_of_an_empty_project_says_so() -> TestResult {
    let p = Project::new()?;
    let human = p.ok(&["list"])?;
    assert_eq!(
        human,
        format!("no turns to rewind in {}\n", p.root.display())
    );
    assert_eq!(p.json(&["list"])?, json!([]));
    // Reading creates no store.
    assert!(!p.exists(".turnback"));
    Ok(())
}

#[test]
fn list_shows_turns_oldest_first_with_label_and_file_count() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a")?;
    p.write("b.txt", "b")?;
    // Ids that sort the other way round: order is the log's, not the id's.
    p.ok(&[
        "capture",
        "--turn",
        "zeta",
        "--label",
        "first turn",
        "a.txt",
        "b.txt",
    ])?;
    p.ok(&["capture", "--turn", "alpha", "a.txt"])?;
    p.ok(&["capture", "--turn", "zeta", "c.txt"])?;

    let v = p.json(&["list"])?;
    assert_eq!(strings(&v, Some("turn")), ["zeta", "alpha"]);
    assert_eq!(v[0]["label"], "first turn");
    assert_eq!(v[0]["file_count"], 3);
    assert_eq!(v[1]["label"], Value::Null);
    assert_eq!(v[1]["file_count"], 1);
    let (s0, s1) = (v[0]["first_seq"].as_u64(), v[1]["first_seq"].as_u64());
    assert!(s0 < s1, "{v}");
    // RFC 3339, UTC, nanoseconds: 2026-12-06T09:40:35.786684193Z.
    let at = v[0]["started_at"]
        .as_str()
        .ok_or("started_at is a string")?;
    assert_eq!(at.len(), 30, "{at}");
    assert!(
        at.ends_with('Z') && at.as_bytes()[10] == b'T' && at.as_bytes()[19] == b'.',
        "{at}"
    );

    let human = p.ok(&["list"])?;
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines.len(), 2, "{human}");
    assert!(lines[0].starts_with("zeta "), "{human}");
    assert!(lines[0].contains("    3 file(s)  first turn"), "{human}");
    assert!(lines[1].starts_with("alpha "), "{human}");
    assert!(lines[1].contains("    1 file(s)"), "{human}");
    // The time column: YYYY-MM-DD HH:MM:SS.
    let time = lines[0].split_whitespace().nth(1).unwrap_or_default();
    assert_eq!(time.len(), 10, "{human}");
    assert_eq!(time.matches('-').count(), 2, "{human}");
    Ok(())
}

#[test]
fn show_lists_each_path_with_its_pre_image_kind_and_size() -> TestResult {
    let p = Project::new()?;
    p.write("run.sh", "#!/bin/sh\n")?;
    p.chmod("run.sh", 0o755)?;
    // The symlink's row on Unix only (on Windows a symlink needs a
    // privilege tests cannot count on).
    let mut paths = vec!["run.sh"];
    #[cfg(unix)]
    {
        crate::common::symlink("run.sh", p.path("latest"))?;
        paths.push("latest");
    }
    paths.push("new.txt");
    let mut args = vec!["capture", "--turn", "t1", "--label", "tidy"];
    args.extend(&paths);
    p.ok(&args)?;

    let human = p.ok(&["show", "t1"])?;
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines[0], "turn t1  tidy");
    assert_eq!(lines.len(), 1 + paths.len(), "{human}");
    let row = |path: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(path))
            .map(|l| l.trim_start()[path.len()..].trim().to_owned())
    };
    let mode = file_mode(0o755);
    assert_eq!(
        row("run.sh"),
        Some(format!("file, 10 bytes, mode {mode:o}"))
    );
    #[cfg(unix)]
    assert_eq!(row("latest").as_deref(), Some("symlink -> run.sh"));
    assert_eq!(
        row("new.txt").as_deref(),
        Some("absent (created by the turn)")
    );

    let v = p.json(&["show", "t1"])?;
    assert_eq!(v["turn"], "t1");
    assert_eq!(v["label"], "tidy");
    assert_eq!(strings(&v["files"], Some("path")), paths);
    let pre = &v["files"][0]["pre"];
    assert_eq!(pre["kind"], "file");
    assert_eq!(pre["size"], 10);
    assert_eq!(pre["mode"], mode);
    assert_eq!(pre["blob"].as_str().map(str::len), Some(64));
    #[cfg(unix)]
    assert_eq!(
        v["files"][1]["pre"],
        json!({"kind": "symlink", "target": "run.sh"})
    );
    assert_eq!(
        v["files"][paths.len() - 1]["pre"],
        json!({"kind": "absent"})
    );
    Ok(())
}

/// A reader that stops early (`turnback show T | head -1`) closes the pipe
/// while turnback still prints: it exits quietly with 0, as git and ripgrep
/// do, rather than panic with exit 101 ("failed printing to stdout").
#[test]
fn a_reader_closing_stdout_early_ends_the_command_quietly() -> TestResult {
    use std::io::BufRead;
    let p = Project::new()?;
    // 3,000 rows of `show`, about 200 KB: more than a pipe and the reader's
    // buffer hold, so turnback is still printing when the pipe closes.
    let names: Vec<String> = (0..3000).map(|i| format!("new-{i:04}.txt")).collect();
    let mut args = vec!["capture", "--turn", "t1", "--label", "many"];
    args.extend(names.iter().map(String::as_str));
    p.ok(&args)?;

    let mut child = std_turnback_in(&p.root)
        .args(["show", "t1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut first = String::new();
    {
        let stdout = child.stdout.take().ok_or("no stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut first)?;
    }
    assert_eq!(first, "turn t1  many\n");
    let out = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
    Ok(())
}

#[test]
fn show_and_diff_of_an_unknown_turn_fail_with_exit_1() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a")?;
    p.ok(&["capture", "--turn", "t1", "a.txt"])?;
    for cmd in ["show", "diff"] {
        p.tb()
            .args([cmd, "t9"])
            .assert()
            .code(1)
            .stdout("")
            .stderr(contains("unknown turn \"t9\"").and(contains("turnback log")));
        let out = p.tb().args(["--json", cmd, "t9"]).assert().code(1);
        let v = crate::common::parse_json(&out.get_output().stdout)?;
        assert!(v["error"].as_str().is_some_and(|e| e.contains("t9")), "{v}");
    }
    Ok(())
}

#[test]
fn diff_shows_text_changes_as_unified_diffs_and_summarises_binary_files() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "one\ntwo\nthree\n")?;
    p.write("same.txt", "unchanged\n")?;
    p.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")?;
    p.write("gone.txt", "bye\n")?;
    p.ok(&[
        "capture", "--turn", "t1", "a.txt", "same.txt", "logo.png", "gone.txt", "new.txt",
    ])?;
    p.write("a.txt", "one\n2\nthree\n")?;
    p.write(
        "logo.png",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x01",
    )?;
    std::fs::remove_file(p.path("gone.txt"))?;
    p.write("new.txt", "hello\n")?;

    let human = p.ok(&["diff", "t1"])?;
    let expected_a = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n";
    assert!(human.contains(expected_a), "{human}");
    assert!(
        human.contains("Binary files a/logo.png and b/logo.png differ (16 bytes -> 19 bytes)\n"),
        "{human}"
    );
    assert!(human.contains("-bye\n"), "{human}");
    assert!(human.contains("+++ b/new.txt\n"), "{human}");
    assert!(human.contains("+hello\n"), "{human}");
    assert!(!human.contains("same.txt"), "{human}");
    // The binary bytes are never printed.
    assert!(!human.contains("IHDR"), "{human}");

    let v = p.json(&["diff", "t1"])?;
    let change = |path: &str| {
        v.as_array()
            .and_then(|a| a.iter().find(|d| d["path"] == path))
            .map(|d| (d["change"].clone(), d.get("diff").cloned()))
    };
    assert_eq!(change("same.txt"), Some((json!("unchanged"), None)));
    let (c, d) = change("a.txt").ok_or("a.txt missing from the diff")?;
    assert_eq!(c, "modified");
    assert!(d.and_then(|d| d.as_str().map(|s| s.contains("-two\n+2\n"))) == Some(true));
    let (c, d) = change("logo.png").ok_or("logo.png missing from the diff")?;
    assert_eq!(c, "binary");
    assert!(d.is_some_and(|d| {
        d.as_str()
            .is_some_and(|s| s.contains("differ (16 bytes -> 19 bytes)"))
    }));
    assert_eq!(change("gone.txt").map(|x| x.0), Some(json!("deleted")));
    assert_eq!(change("new.txt").map(|x| x.0), Some(json!("created")));
    Ok(())
}

#[test]
fn diff_says_when_a_file_was_not_saved() -> TestResult {
    let p = Project::new()?;
    p.write("big.bin", vec![7u8; 4096])?;
    p.ok(&[
        "capture",
        "--turn",
        "t1",
        "--max-file-size",
        "1K",
        "big.bin",
    ])?;
    let human = p.ok(&["diff", "t1"])?;
    assert_eq!(human, "big.bin: not saved\n");
    let v = p.json(&["diff", "t1"])?;
    assert_eq!(v, json!([{"path": "big.bin", "change": "not_saved"}]));
    Ok(())
}
