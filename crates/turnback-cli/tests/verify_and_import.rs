//! The real `turnback` binary on real stores: `verify` on damaged ones, and
//! `import-osfoundry` on one written by a Python implementation of the
//! original checkpoint class.

// The import test and its helpers run on Unix only (see below).
#![cfg_attr(not(unix), allow(unused_imports))]

#[path = "common/portable.rs"]
mod portable;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use portable::{mode_of, set_mode};

/// The store directory of the project at `root`, which has a store.
fn store_dir(root: &Path) -> PathBuf {
    turnback::location::locate(root, None)
        .expect("locate the store")
        .expect("the project has a store")
        .store_dir
}

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn turnback(root: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("turnback")
        .expect("binary built")
        .env_clear()
        .env(
            "TURNBACK_DATA_DIR",
            std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
        )
        .current_dir(root)
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .expect("turnback runs")
}

#[cfg(unix)]
fn osfoundry(project: &Path, turn: &str, paths: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/osfoundry.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(project)
        .arg(turn)
        .arg(format!("label of {turn}"))
        .args(paths)
        .output()
        .expect("python3 is needed to build an osfoundry store");
    assert!(
        out.status.success(),
        "osfoundry.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The project's files, without the two stores: path -> (bytes, mode).
#[cfg(unix)]
fn tree(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list") {
            let p = e.expect("entry").path();
            let rel = p.strip_prefix(root).expect("inside").to_path_buf();
            if rel == Path::new(".turnback") || rel == Path::new(".osfoundry") {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).expect("stat");
            if m.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, (std::fs::read(&p).expect("read"), mode_of(&m)));
            }
        }
    }
    out
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
// Builds the store with the original Python design (python3), which the
// Windows run under Wine lacks.
#[cfg(unix)]
fn osfoundry_store_imports_once_and_rewinds_byte_for_byte() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?.join("proj");
    std::fs::create_dir_all(root.join("src"))?;
    std::fs::write(root.join("index.html"), "<title>mine</title>\n")?;
    std::fs::write(root.join("src/app.js"), "console.log(1);\n".repeat(40))?;
    std::fs::write(root.join("build.sh"), "#!/bin/sh\nmake\n")?;
    set_mode(&root.join("build.sh"), 0o755)?;
    std::fs::write(root.join(".env"), "API_URL=https://example.org\n")?;
    let before = tree(&root);

    // Turn 1: the agent edits three files and creates one.
    osfoundry(
        &root,
        "msg_1",
        &["index.html", "src/app.js", "build.sh", "src/theme.css"],
    );
    std::fs::write(root.join("index.html"), "<title>agent</title>\n")?;
    std::fs::write(root.join("src/app.js"), "broken(\n")?;
    std::fs::write(root.join("build.sh"), "#!/bin/sh\nrm -rf /\n")?;
    std::fs::write(root.join("src/theme.css"), "body{}\n")?;
    // Turn 2: edits again, and touches .env; and a hostile turn.
    osfoundry(&root, "msg_2", &["src/app.js", ".env"]);
    std::fs::write(root.join("src/app.js"), "more broken(\n")?;
    std::fs::write(root.join(".env"), "API_URL=http://localhost\n")?;
    osfoundry(&root, "msg_3", &["/etc/passwd", "../x", "index.html"]);

    let out = turnback(&root, &["--json", "import-osfoundry"]);
    assert_eq!(out.status.code(), Some(3), "some entries were refused");
    let report = json(&out);
    let imported: Vec<&str> = report["imported"]
        .as_array()
        .expect("list")
        .iter()
        .map(|t| t["turn"].as_str().expect("id"))
        .collect();
    assert_eq!(imported, ["msg_1", "msg_2", "msg_3"]);
    let refused: Vec<&str> = report["refused_paths"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| r["path"].as_str().expect("path"))
        .collect();
    let dotdot = root.join("../x");
    assert_eq!(refused, ["/etc/passwd", dotdot.to_str().expect("utf8")]);

    // Importing again adds nothing.
    let again = turnback(&root, &["import-osfoundry", root.to_str().expect("utf8")]);
    assert_eq!(
        again.status.code(),
        Some(3),
        "the refused entries are still refused"
    );
    let text = String::from_utf8(again.stdout)?;
    assert!(text.contains("already imported: msg_1"), "{text}");
    let list = json(&turnback(&root, &["--json", "list"]));
    assert_eq!(list.as_array().expect("list").len(), 3);

    let verify = turnback(&root, &["verify"]);
    assert_eq!(verify.status.code(), Some(0));
    let text = String::from_utf8(verify.stdout)?;
    assert!(text.contains("whole") && text.contains("msg_1"), "{text}");

    let rewind = turnback(&root, &["rewind", "msg_1"]);
    assert_eq!(
        rewind.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&rewind.stderr)
    );
    assert_eq!(tree(&root), before);
    Ok(())
}

/// A store with two turns, each with its own pack.
fn two_turns() -> Result<(tempfile::TempDir, PathBuf), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    std::fs::write(root.join("a.txt"), "a0\n".repeat(30))?;
    std::fs::write(root.join("b.txt"), "b0\n".repeat(30))?;
    for (turn, file) in [("t1", "a.txt"), ("t2", "b.txt")] {
        let out = Command::cargo_bin("turnback")?
            .env_clear()
            .env(
                "TURNBACK_DATA_DIR",
                std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
            )
            .current_dir(&root)
            .arg("--root")
            .arg(&root)
            .args(["write", "--turn", turn, file])
            .write_stdin_bytes(b"edited\n")?;
        assert!(out.status.success());
    }
    Ok((tmp, root))
}

trait WriteStdin {
    fn write_stdin_bytes(&mut self, bytes: &[u8]) -> std::io::Result<std::process::Output>;
}

impl WriteStdin for Command {
    fn write_stdin_bytes(&mut self, bytes: &[u8]) -> std::io::Result<std::process::Output> {
        use std::io::Write;
        let mut child = self
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        child.stdin.take().expect("piped").write_all(bytes)?;
        child.wait_with_output()
    }
}

#[test]
fn verify_exits_1_and_names_a_missing_pack_by_turn_and_path() -> TestResult {
    let (_tmp, root) = two_turns()?;
    let ok = turnback(&root, &["verify"]);
    assert_eq!(ok.status.code(), Some(0));

    // The pack written by the second record.
    let pack = std::fs::read_dir(store_dir(&root).join("packs"))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("000000000002-"))
        .ok_or("no pack for record 2")?;
    // Packs are read-only; Windows removes only a writable file.
    let pack_path = store_dir(&root).join("packs").join(&pack);
    set_mode(&pack_path, 0o644)?;
    std::fs::remove_file(&pack_path)?;
    let out = turnback(&root, &["verify"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout)?;
    assert!(text.contains("DAMAGED"), "{text}");
    assert!(
        text.contains(&format!("pack {pack}: it is missing")),
        "{text}"
    );
    assert!(text.contains("pre-image of b.txt in turn t2"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("t1") && l.contains("CANNOT")),
        "{text}"
    );

    let report = json(&turnback(&root, &["--json", "verify"]));
    assert_eq!(report["whole"], false);
    assert_eq!(report["damage"][0]["kind"], "pack");
    assert_eq!(report["turns"][1]["turn"], "t2");
    assert_eq!(report["turns"][1]["rewindable"], false);
    Ok(())
}

#[test]
fn verify_runs_where_the_store_cannot_be_opened() -> TestResult {
    let (_tmp, root) = two_turns()?;
    let log = store_dir(&root).join("log.jsonl");
    let mut bytes = std::fs::read(&log)?;
    bytes[10] ^= 0x02; // inside line 1
    std::fs::write(&log, &bytes)?;
    let list = turnback(&root, &["list"]);
    assert_eq!(
        list.status.code(),
        Some(1),
        "the store refuses a damaged log"
    );
    assert!(String::from_utf8(list.stderr)?.contains("turnback verify"));

    let out = turnback(&root, &["verify"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout)?;
    assert!(text.contains("log line 1: checksum mismatch"), "{text}");
    assert!(text.contains("appears to belong to turn \"t1\""), "{text}");
    // The hint is read from damaged bytes: line 1 may as well have begun
    // t2, so t2 is not promised whole either.
    assert!(
        text.lines()
            .any(|l| l.contains("t2") && l.contains("CANNOT be rewound whole")),
        "{text}"
    );
    assert!(text.contains("`turnback repair`"), "{text}");

    // repair --dry-run changes nothing; repair keeps the original and the
    // store opens again, with t2's rewind exact.
    let dry = turnback(&root, &["repair", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0));
    assert!(String::from_utf8(dry.stdout)?.contains("would drop log line 1"));
    assert_eq!(std::fs::read(&log)?, bytes);
    let fixed = turnback(&root, &["repair"]);
    assert_eq!(fixed.status.code(), Some(0));
    let text = String::from_utf8(fixed.stdout)?;
    assert!(
        text.contains("dropped log line 1: checksum mismatch"),
        "{text}"
    );
    assert!(text.contains("1 of 2 line(s) kept"), "{text}");
    assert_eq!(
        std::fs::read(store_dir(&root).join("log.damaged-1.jsonl"))?,
        bytes
    );
    assert_eq!(turnback(&root, &["verify"]).status.code(), Some(0));
    let rewind = turnback(&root, &["rewind", "t2"]);
    assert_eq!(rewind.status.code(), Some(0), "{rewind:?}");
    assert_eq!(
        std::fs::read(root.join("b.txt"))?,
        "b0\n".repeat(30).as_bytes()
    );
    assert_eq!(
        std::fs::read(root.join("a.txt"))?,
        b"edited\n",
        "t1's record is gone"
    );
    Ok(())
}
