//! A user's session end to end, on every platform (on Windows under Wine in
//! CI): an agent writes a file, captures others, runs a shell command that
//! deletes and creates files (`cmd /c` on Windows, `sh -c` elsewhere);
//! then the user rewinds the first turn, undoes that rewind and verifies
//! the store. Each step is compared with the whole folder as it was.

use crate::common::*;

/// A shell command that deletes `notes.txt`, creates `gen/out.txt` and
/// appends a line to `src/main.c`, as an agent's shell tool would.
fn shell_command() -> Vec<&'static str> {
    if cfg!(windows) {
        vec![
            "cmd",
            "/c",
            r"del notes.txt && mkdir gen && echo generated> gen\out.txt && echo // more>> src\main.c",
        ]
    } else {
        vec![
            "sh",
            "-c",
            "rm notes.txt && mkdir gen && echo generated > gen/out.txt && echo // more >> src/main.c",
        ]
    }
}

#[test]
fn write_capture_exec_rewind_undo_verify_give_back_the_folder_byte_for_byte() -> TestResult {
    let p = Project::new()?;
    p.write("src/main.c", "int main() { return 0; }\n")?;
    p.write("notes.txt", "the user's notes\n")?;
    p.write(".env", "SECRET=1\n")?;
    p.write("docs/readme.md", "# readme\n")?;
    let before = p.state()?;

    // Turn t1: the agent's file tool writes main.c and captures readme.md
    // before editing it by hand.
    let out = p
        .tb()
        .args([
            "write",
            "--turn",
            "t1",
            "--label",
            "edit main",
            "src/main.c",
        ])
        .write_stdin("int main() { return 1; }\n")
        .output()?;
    assert!(out.status.success(), "write: {:?}", texts(&out));
    p.ok(&["capture", "--turn", "t1", "docs/readme.md"])?;
    p.write("docs/readme.md", "# readme, edited by the agent\n")?;

    // Turn t2: a shell command, recorded by exec; its exit code comes back.
    let mut exec = p.tb();
    exec.args(["exec", "--turn", "t2", "--"])
        .args(shell_command());
    let out = exec.output()?;
    assert!(out.status.success(), "exec failed: {:?}", texts(&out));
    assert!(!p.exists("notes.txt") && p.exists("gen/out.txt"));
    let after = p.state()?;
    assert_ne!(before, after, "the turns changed nothing");

    // Rewind t1 (and t2 after it): the folder as before t1, byte for byte.
    let out = p.tb().args(["rewind", "t1"]).output()?;
    assert_eq!(out.status.code(), Some(0), "rewind: {:?}", texts(&out));
    let rewound = p.state()?;
    assert_eq!(rewound, before, "the folder after the rewind");

    // Undo the rewind: the folder as the turns left it.
    let out = p.tb().args(["undo"]).output()?;
    assert_eq!(out.status.code(), Some(0), "undo: {:?}", texts(&out));
    assert_eq!(p.state()?, after, "the folder after the undo");

    // The store is whole.
    let v = p.json(&["verify"])?;
    assert_eq!(v["whole"], serde_json::Value::Bool(true), "verify: {v}");
    Ok(())
}

/// A file tool's spelling (`README.md`) and the directory's (`readme.md`)
/// of one file, captured in two turns (the tool's capture, then a later
/// command's snapshot), are one file where the file system does not tell
/// case apart: rewinding the first turn gives back its pre-image once, not
/// the later turn's written over it (sorted by bytes, `README.md` came
/// first and `readme.md` last). Where case is told apart they are two
/// files, each rewound as its own.
#[test]
fn two_spellings_of_one_file_from_a_tool_and_a_snapshot_rewind_once() -> TestResult {
    let p = Project::new()?;
    p.write("readme.md", "v0\n")?;
    let case_insensitive = p.root.join("README.md").exists();
    let before = p.state()?;
    let out = p
        .tb()
        .args(["capture", "--turn", "t1", "README.md"])
        .output()?;
    assert!(out.status.success(), "capture: {:?}", texts(&out));
    // The agent's tool writes after the capture.
    std::fs::write(p.root.join("readme.md"), "v1\n")?;
    let script: Vec<&str> = if cfg!(windows) {
        vec!["cmd", "/c", "echo v2> readme.md"]
    } else {
        vec!["sh", "-c", "echo v2 > readme.md"]
    };
    let out = p
        .tb()
        .args(["exec", "--turn", "t2", "--"])
        .args(&script)
        .output()?;
    assert!(out.status.success(), "exec: {:?}", texts(&out));
    let out = p.tb().args(["rewind", "t1"]).output()?;
    assert_eq!(out.status.code(), Some(0), "rewind: {:?}", texts(&out));
    if case_insensitive {
        assert_eq!(p.state()?, before, "the pre-image of t1, once");
    } else {
        // Two files: README.md was absent before t1; readme.md's change
        // was t2's (v1 → v2), and the tool's write (v0 → v1) no turn's.
        assert!(!p.root.join("README.md").exists());
        assert_eq!(std::fs::read_to_string(p.root.join("readme.md"))?, "v1\n");
    }
    Ok(())
}

/// A turn that renamed `Readme.md` to `README.md` (only the case changes)
/// rewinds to the old spelling, on a file system that tells case apart and
/// on one that does not (on Windows the rename is made in two steps, as
/// Wine ignores a case-only rename).
#[test]
fn a_case_only_rename_rewinds_to_the_old_spelling() -> TestResult {
    let p = Project::new()?;
    p.write("Readme.md", "# the readme\n")?;
    p.write("other.txt", "kept\n")?;
    let before = p.state()?;
    let script: Vec<&str> = if cfg!(windows) {
        vec![
            "cmd",
            "/c",
            "move Readme.md tmp.md >nul && move tmp.md README.md >nul",
        ]
    } else {
        vec!["sh", "-c", "mv Readme.md README.md"]
    };
    let mut exec = p.tb();
    exec.args(["exec", "--turn", "t1", "--"]).args(&script);
    let out = exec.output()?;
    assert!(out.status.success(), "exec: {:?}", texts(&out));
    let names = |p: &Project| -> Res<Vec<String>> {
        let mut v: Vec<String> = std::fs::read_dir(&p.root)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        v.retain(|n| n != ".turnback");
        v.sort();
        Ok(v)
    };
    assert_eq!(names(&p)?, ["README.md", "other.txt"], "the rename");
    let out = p.tb().args(["rewind", "t1"]).output()?;
    assert_eq!(out.status.code(), Some(0), "rewind: {:?}", texts(&out));
    assert_eq!(
        names(&p)?,
        ["Readme.md", "other.txt"],
        "the spelling after the rewind"
    );
    assert_eq!(p.state()?, before);
    Ok(())
}

/// A seal (the next turn beginning) hashes what an earlier turn's paths
/// hold; it touches none of them. So a change a command makes during its
/// window to a path an earlier turn's tool captured before that window is
/// the command's, even when the earlier turn was sealed meanwhile:
/// rewinding the command's turn gives the file back.
#[test]
fn a_seal_during_a_command_window_does_not_take_the_command_s_change() -> TestResult {
    let p = Project::new()?;
    p.write("f.txt", "f0\n")?;
    p.write("g.txt", "g0\n")?;
    let run = |args: &[&str]| -> TestResult {
        let out = p.tb().args(args).output()?;
        assert!(out.status.success(), "{args:?}: {:?}", texts(&out));
        Ok(())
    };
    // A file tool's capture, its write and no post-image (the tool was
    // interrupted): the turn's post-image comes from its seal.
    run(&["capture", "--turn", "t1", "f.txt"])?;
    p.write("f.txt", "f1\n")?;
    run(&["snapshot", "--turn", "t2"])?;
    // Another turn begins while t2's command runs: t1 is sealed.
    run(&["capture", "--turn", "t3", "g.txt"])?;
    // t2's command changes f.txt.
    p.write("f.txt", "f2\n")?;
    run(&["snapshot", "--turn", "t2", "--after"])?;
    let out = p.tb().args(["--json", "show", "t2"]).output()?;
    let v = parse_json(&out.stdout)?;
    let paths = strings(&v["files"], Some("path"));
    assert_eq!(paths, ["f.txt"], "{v}");
    Ok(())
}
