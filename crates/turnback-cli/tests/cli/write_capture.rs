//! `turnback write` and `turnback capture`.

use serde_json::json;

use crate::common::{Project, TestResult, file_mode, parse_json, strings};

#[test]
fn write_captures_the_file_then_writes_standard_input_to_it() -> TestResult {
    let p = Project::new()?;
    p.write("app.js", "console.log(1);\n")?;
    let out = p
        .tb()
        .args(["write", "--turn", "t1", "--label", "edit app", "app.js"])
        .write_stdin("console.log(2);\n")
        .assert()
        .success();
    let stdout = String::from_utf8(out.get_output().stdout.clone())?;
    assert_eq!(
        stdout,
        "captured app.js  (file, 16 bytes, mode 644)\nwrote 16 bytes to app.js\n"
    );
    assert_eq!(p.read("app.js")?, b"console.log(2);\n");
    // The pre-image is the file as it was before the write.
    let show = p.json(&["show", "t1"])?;
    assert_eq!(show["label"], "edit app");
    assert_eq!(show["files"][0]["path"], "app.js");
    assert_eq!(show["files"][0]["pre"]["kind"], "file");
    assert_eq!(show["files"][0]["pre"]["size"], 16);
    Ok(())
}

#[test]
fn write_json_reports_the_directories_it_had_to_create() -> TestResult {
    let p = Project::new()?;
    let out = p
        .tb()
        .args(["--json", "write", "--turn", "t1", "src/new/mod.rs"])
        .write_stdin("pub fn f() {}\n")
        .assert()
        .success();
    let v = parse_json(&out.get_output().stdout)?;
    assert_eq!(v["turn"], "t1");
    assert_eq!(
        v["captured"],
        json!([
            {"path": "src", "pre": {"kind": "absent"}},
            {"path": "src/new", "pre": {"kind": "absent"}},
            {"path": "src/new/mod.rs", "pre": {"kind": "absent"}},
        ])
    );
    assert_eq!(p.read("src/new/mod.rs")?, b"pub fn f() {}\n");
    Ok(())
}

#[test]
fn write_keeps_the_mode_of_the_file_it_replaces() -> TestResult {
    let p = Project::new()?;
    p.write("run.sh", "#!/bin/sh\necho 1\n")?;
    p.chmod("run.sh", 0o755)?;
    p.tb()
        .args(["write", "--turn", "t1", "run.sh"])
        .write_stdin("#!/bin/sh\necho 2\n")
        .assert()
        .success()
        .stdout(predicates::str::contains(format!(
            "mode {:o}",
            file_mode(0o755)
        )));
    assert_eq!(p.mode("run.sh")?, file_mode(0o755));
    Ok(())
}

#[test]
fn capture_takes_many_paths_in_one_call_and_one_record() -> TestResult {
    let p = Project::new()?;
    let mut args: Vec<String> = vec!["capture".into(), "--turn".into(), "fmt".into()];
    for i in 0..60 {
        let rel = format!("src/f{i:02}.rs");
        p.write(&rel, format!("fn f{i}() {{}}\n"))?;
        args.push(rel);
    }
    args.push("src/absent.rs".into());
    let out = p.tb().args(&args).assert().success();
    let stdout = String::from_utf8(out.get_output().stdout.clone())?;
    assert_eq!(stdout.lines().count(), 61, "{stdout}");
    assert!(stdout.contains("captured src/f00.rs  (file, 11 bytes, mode 644)\n"));
    assert!(stdout.contains("captured src/absent.rs  (absent (created by the turn))\n"));
    // One process, one lock, one durable record, one pack.
    assert_eq!(p.log_lines()?.len(), 1);
    let packs = std::fs::read_dir(p.store_dir()?.join("packs"))?.count();
    assert_eq!(packs, 1);
    let list = p.json(&["list"])?;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert_eq!(list[0]["turn"], "fmt");
    assert_eq!(list[0]["file_count"], 61);
    Ok(())
}

#[test]
fn capture_json_lists_every_path_with_its_pre_image() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "aaaa")?;
    p.write("b.txt", "bb")?;
    // The symlink on Unix only (on Windows a symlink needs a privilege
    // tests cannot count on).
    let mut args = vec!["capture", "--turn", "t1", "a.txt", "b.txt"];
    #[cfg(unix)]
    {
        crate::common::symlink("a.txt", p.path("link"))?;
        args.push("link");
    }
    args.push("c.txt");
    let v = p.json(&args)?;
    let paths = strings(&v["captured"], Some("path"));
    assert_eq!(paths, args[3..]);
    assert_eq!(v["captured"][0]["pre"]["size"], 4);
    assert_eq!(v["captured"][1]["pre"]["size"], 2);
    #[cfg(unix)]
    assert_eq!(
        v["captured"][2]["pre"],
        json!({"kind": "symlink", "target": "a.txt"})
    );
    assert_eq!(
        v["captured"][paths.len() - 1]["pre"],
        json!({"kind": "absent"})
    );
    assert_eq!(v["new_blob_count"], 2);
    Ok(())
}

#[test]
fn a_second_capture_in_the_same_turn_is_a_no_op() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "first")?;
    p.ok(&["capture", "--turn", "t1", "a.txt"])?;
    p.write("a.txt", "second")?;
    let v = p.json(&["capture", "--turn", "t1", "a.txt"])?;
    assert_eq!(v["captured"], json!([]));
    assert_eq!(v["already_captured"], json!(["a.txt"]));
    let human = p.ok(&["capture", "--turn", "t1", "a.txt"])?;
    assert_eq!(human, "already captured in this turn: a.txt\n");
    // The pre-image is still the first one.
    let show = p.json(&["show", "t1"])?;
    assert_eq!(show["files"][0]["pre"]["size"], 5);
    Ok(())
}

#[test]
fn capture_needs_a_turn_and_a_path() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a")?;
    p.tb()
        .args(["capture", "a.txt"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--turn"));
    p.tb()
        .args(["capture", "--turn", "t1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("<PATHS>"));
    assert!(!p.exists(".turnback"));
    Ok(())
}

#[test]
fn labels_are_cut_to_120_characters() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a")?;
    let long = "é".repeat(300);
    p.ok(&["capture", "--turn", "t1", "--label", &long, "a.txt"])?;
    let list = p.json(&["list"])?;
    let label = list[0]["label"].as_str().unwrap_or_default();
    assert_eq!(label.chars().count(), 120);
    assert!(long.starts_with(label));
    Ok(())
}

/// `turnback write` with its standard input on a terminal refuses at once
/// (exit code 2, a hint) instead of waiting for typing, and changes
/// nothing; run in a real pseudo-terminal made by `script` (util-linux).
/// `timeout` only guards against the old behaviour, a wait forever.
#[cfg(target_os = "linux")]
#[test]
fn write_refuses_a_terminal_on_standard_input() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "old\n")?;
    for json in [false, true] {
        let line = format!(
            "'{}' {}write --turn t1 a.txt",
            crate::common::BIN,
            if json { "--json " } else { "" }
        );
        let mut cmd = std::process::Command::new("timeout");
        cmd.args(["60", "script", "-qec", &line, "/dev/null"])
            .env_clear()
            .env(
                "TURNBACK_DATA_DIR",
                std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
            )
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&p.root)
            .stdin(std::process::Stdio::null());
        let out = cmd
            .output()
            .map_err(|e| format!("timeout and script are needed (.ci/run installs them): {e}"))?;
        let (stdout, stderr) = crate::common::texts(&out);
        // What the command printed on the terminal.
        assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("standard input is a terminal")
                && stdout.contains("turnback write --turn t1 PATH < new-contents"),
            "{stdout}"
        );
        if json {
            let first = stdout.lines().next().unwrap_or("");
            let v: serde_json::Value = serde_json::from_str(first.trim_end_matches('\r'))?;
            assert!(
                v["error"].as_str().is_some_and(|e| e.contains("terminal")),
                "{v}"
            );
        }
    }
    assert_eq!(p.read("a.txt")?, b"old\n");
    assert!(!p.exists(".turnback"), "a store was made");
    Ok(())
}

#[test]
fn write_from_an_empty_pipe_writes_an_empty_file() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "old\n")?;
    p.tb()
        .args(["write", "--turn", "t1", "a.txt"])
        .write_stdin("")
        .assert()
        .success();
    assert_eq!(p.read("a.txt")?, b"");
    let show = p.json(&["show", "t1"])?;
    assert_eq!(show["files"][0]["pre"]["size"], 4);
    Ok(())
}
