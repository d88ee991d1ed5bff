//! Shell commands under `turnback exec` (and the snapshot halves hooks
//! use), run for real in temporary projects and rewound byte for byte.

#[path = "common/portable.rs"]
mod portable;

#[cfg(unix)]
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
#[cfg(unix)]
use std::process::Command as StdCommand;

use assert_cmd::Command;
#[cfg(unix)]
use portable::mode_of;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Kind, bytes (or link target) and mode of every path under `dir`,
/// skipping `skip` names at the top.
#[cfg(unix)]
fn state(dir: &Path, skip: &[&str]) -> BTreeMap<String, (char, Vec<u8>, u32)> {
    fn walk(
        root: &Path,
        dir: &Path,
        skip: &[&str],
        out: &mut BTreeMap<String, (char, Vec<u8>, u32)>,
    ) {
        for e in fs::read_dir(dir).expect("list") {
            let p = e.expect("entry").path();
            let rel = p
                .strip_prefix(root)
                .expect("inside")
                .to_string_lossy()
                .into_owned();
            if skip.contains(&rel.as_str()) {
                continue;
            }
            let m = fs::symlink_metadata(&p).expect("stat");
            let mode = mode_of(&m);
            if m.file_type().is_symlink() {
                let t = fs::read_link(&p).expect("link");
                out.insert(rel, ('l', t.as_os_str().as_encoded_bytes().to_vec(), 0));
            } else if m.is_dir() {
                out.insert(rel, ('d', Vec::new(), mode));
                walk(root, &p, &[], out);
            } else {
                out.insert(rel, ('f', fs::read(&p).expect("read"), mode));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, skip, &mut out);
    out
}

fn turnback(root: &Path) -> Command {
    let mut c = Command::cargo_bin("turnback").expect("the turnback binary");
    c.env_clear()
        .env(
            "TURNBACK_DATA_DIR",
            std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
        )
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root)
        .current_dir(root)
        .arg("--root")
        .arg(root);
    c
}

#[cfg(unix)]
fn git(root: &Path, args: &[&str]) {
    let ok = StdCommand::new("git")
        .args(args)
        .current_dir(root)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("HOME", root)
        .status()
        .expect("git runs")
        .success();
    assert!(ok, "git {args:?}");
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, bytes).expect("write");
}

/// A small git project with a git-ignored `.env` and uncommitted work.
#[cfg(unix)]
fn git_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "README.md", b"# site\n");
    write(root, "src/app.js", b"console.log('v1');\n");
    write(root, "src/lib.js", b"export const x = 1;\n");
    write(root, "run.sh", b"#!/bin/sh\necho run\n");
    write(root, ".gitignore", b".env\n");
    write(
        root,
        ".env",
        b"API_URL=https://api.example.com\nKEY=secret\n",
    );
    write(
        root,
        "gen.sh",
        b"#!/bin/sh\nset -e\nmkdir -p generated/a/b/c generated/d\nfor f in generated/a/one generated/a/b/two generated/a/b/c/three generated/d/four; do echo \"$f\" > \"$f\"; done\n",
    );
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "init"]);
    write(root, "notes.md", b"uncommitted notes\n");
    dir
}

/// Unix only: the commands are Unix tools (`rm`, `sed -i.orig`, `chmod +x`),
/// spelled so that GNU and BSD (macOS) tools read them alike.
#[cfg(unix)]
#[test]
fn real_commands_under_exec_rewind_byte_for_byte_and_git_is_untouched() -> TestResult {
    let dir = git_project();
    let root = dir.path();
    let before = state(root, &[".turnback", ".git"]);
    let git_before = state(&root.join(".git"), &[]);
    let steps: [(&str, &[&str]); 5] = [
        ("t1", &["rm", "README.md"]),
        (
            "t2",
            // `sed -i` takes a suffix argument on macOS (BSD sed) and an
            // attached one on Linux; both read `-i.orig` alike (the backup
            // goes in the same command, so the turn shows `.env` alone).
            &[
                "sh",
                "-c",
                "sed -i.orig s/api.example.com/localhost:8080/ .env && rm .env.orig",
            ],
        ),
        ("t3", &["mv", "src/lib.js", "src/old_lib.js"]),
        ("t4", &["sh", "gen.sh"]),
        ("t5", &["chmod", "+x", "run.sh"]),
    ];
    for (turn, cmd) in steps {
        turnback(root)
            .args(["exec", "--turn", turn, "--"])
            .args(cmd)
            .assert()
            .success();
    }
    assert!(!root.join("README.md").exists());
    assert!(fs::read_to_string(root.join(".env"))?.contains("localhost:8080"));
    assert!(root.join("generated/a/b/c/three").exists());
    assert_eq!(mode_of(&fs::metadata(root.join("run.sh"))?) & 0o111, 0o111);

    // Each turn holds what its command did.
    let show = |turn: &str| -> String {
        let out = turnback(root)
            .args(["show", turn])
            .output()
            .expect("show runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(show("t1").contains("README.md"));
    assert!(
        show("t2").contains(".env"),
        "the git-ignored .env is covered"
    );
    let t3 = show("t3");
    assert!(
        t3.contains("src/lib.js") && t3.contains("src/old_lib.js"),
        "{t3}"
    );
    let t4 = show("t4");
    for p in ["generated ", "generated/a/b/c ", "generated/d/four"] {
        assert!(t4.contains(p), "{p} missing from {t4}");
    }
    assert!(show("t5").contains("mode 644"));

    // Rewinding t3 undoes t3, t4, t5 only.
    turnback(root).args(["rewind", "t3"]).assert().success();
    assert!(root.join("src/lib.js").exists());
    assert!(
        !root.join("generated").exists(),
        "created directories are removed"
    );
    assert!(!root.join("README.md").exists(), "t1 is not undone");
    // Rewinding t1 returns everything, byte for byte and mode for mode.
    turnback(root).args(["rewind", "t1"]).assert().success();
    assert_eq!(state(root, &[".turnback", ".git"]), before);
    assert_eq!(
        state(&root.join(".git"), &[]),
        git_before,
        ".git is untouched"
    );
    Ok(())
}

/// A shell command line, as the program and its arguments: `sh -c` on
/// Unix, `cmd /c` on Windows.
fn shell(unix: &str, windows: &str) -> Vec<String> {
    if cfg!(windows) {
        vec!["cmd".into(), "/c".into(), windows.into()]
    } else {
        vec!["sh".into(), "-c".into(), unix.into()]
    }
}

/// The end of a line a shell's `echo` prints.
const EOL: &str = if cfg!(windows) { "\r\n" } else { "\n" };

#[test]
fn exec_passes_exit_code_stdout_and_stderr_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.txt", b"a\n");
    let out = turnback(dir.path())
        .args(["exec", "--quiet", "--turn", "t1", "--"])
        .args(shell(
            "echo out; echo err >&2; echo changed > a.txt; exit 42",
            "echo out& >&2 echo err& echo changed> a.txt& exit 42",
        ))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(42));
    assert_eq!(out.stdout, format!("out{EOL}").as_bytes());
    assert_eq!(out.stderr, format!("err{EOL}").as_bytes());
    // Without --quiet, turnback's report follows on standard error only.
    let out = turnback(dir.path())
        .args(["exec", "--turn", "t2", "--"])
        .args(shell("echo two; exit 0", "echo two& exit 0"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, format!("two{EOL}").as_bytes());
    assert!(String::from_utf8_lossy(&out.stderr).contains("turn t2: the command changed nothing"));
    turnback(dir.path())
        .args(["rewind", "t1"])
        .assert()
        .success();
    assert_eq!(fs::read(dir.path().join("a.txt")).expect("read"), b"a\n");
}

/// Unix only: Windows has no signals.
#[cfg(unix)]
#[test]
fn a_command_killed_by_a_signal_exits_128_plus_the_signal_and_is_still_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.txt", b"a\n");
    turnback(dir.path())
        .args(["exec", "-q", "--turn", "t1", "--", "sh", "-c"])
        .arg("echo half > a.txt; kill -KILL $$")
        .assert()
        .code(128 + 9);
    turnback(dir.path())
        .args(["rewind", "t1"])
        .assert()
        .success();
    assert_eq!(fs::read(dir.path().join("a.txt")).expect("read"), b"a\n");
}

#[test]
fn a_command_that_cannot_start_is_an_error_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.txt", b"a\n");
    let out = turnback(dir.path())
        .args(["exec", "--turn", "t1", "--", "no-such-command-here"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run"));
    assert_eq!(fs::read(dir.path().join("a.txt")).expect("read"), b"a\n");
}

#[test]
fn snapshot_halves_and_status_work_outside_git() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    write(root, "a.txt", b"one\n");
    write(root, "node_modules/dep/index.js", b"dep\n");
    let out = turnback(root)
        .args(["snapshot", "--after", "--turn", "h1"])
        .output()?;
    assert_eq!(
        out.status.code(),
        Some(1),
        "an after half needs a before half"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no snapshot"));

    turnback(root)
        .args(["snapshot", "--turn", "h1"])
        .assert()
        .success();
    // The agent's own shell tool runs here: what its command
    // `echo two > a.txt; echo new > b.txt; mkdir node_modules/other` does.
    fs::write(root.join("a.txt"), b"two\n")?;
    fs::write(root.join("b.txt"), b"new\n")?;
    fs::create_dir(root.join("node_modules/other"))?;
    let out = turnback(root).args(["status", "--json"]).output()?;
    assert!(out.status.success());
    let st: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(st["changes"]["modified"], serde_json::json!(["a.txt"]));
    assert_eq!(st["changes"]["created"], serde_json::json!(["b.txt"]));
    assert_eq!(st["changes"]["not_captured"][0]["path"], "node_modules/");
    assert_eq!(st["not_covered"][0]["path"], "node_modules/");
    let human = turnback(root).arg("status").output()?;
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("modified (1):") && text.contains("not covered (1)"),
        "{text}"
    );

    let out = turnback(root)
        .args(["snapshot", "--after", "--turn", "h1", "--json"])
        .output()?;
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(r["recorded"]["turn"], "h1");
    assert_eq!(r["recorded"]["captured"].as_array().map(Vec::len), Some(3));
    // The rewind restores what was covered and names what was not.
    let out = turnback(root).args(["rewind", "h1"]).output()?;
    assert_eq!(out.status.code(), Some(3), "node_modules/ was not captured");
    assert!(String::from_utf8_lossy(&out.stdout).contains("NOT RESTORED  node_modules"));
    assert_eq!(fs::read(root.join("a.txt"))?, b"one\n");
    assert!(!root.join("b.txt").exists());
    Ok(())
}
