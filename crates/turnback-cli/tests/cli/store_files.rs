//! Store files that are not what they should be: a FIFO in the place of
//! any of them must make a command fail (or, for a cache, be ignored) at
//! once, naming the file, never hang; and a config file's values are
//! checked, naming the key and the file. The FIFO cases are Unix only
//! (Windows has no FIFO in a folder).

#[cfg(unix)]
use std::process::Output;
#[cfg(unix)]
use std::time::Duration;

use crate::common::{Project, Res, TestResult, texts};

/// A command that hangs is killed after this long and fails the test (a
/// guard against a hang, not a measurement: every command here answers in
/// a fraction of it).
#[cfg(unix)]
const HANG_GUARD: Duration = Duration::from_secs(20);

#[cfg(unix)]
#[allow(unsafe_code)] // the platform call of a test
fn mkfifo(path: &std::path::Path) -> TestResult {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
    // A background `turnback maintain` left by the commands before may
    // open the file again (as every store open does, creating it) between
    // its removal and the FIFO's creation: removed again, a few times.
    for _ in 0..20 {
        let _ = std::fs::remove_file(path);
        // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(format!("mkfifo {}: {e}", path.display()).into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(format!("mkfifo {}: the file kept coming back", path.display()).into())
}

/// A project with a write turn, an exec turn and a second exec (so the
/// tree, its stamp and its head exist).
fn used_project() -> Res<Project> {
    let p = Project::new()?;
    p.write("a.txt", "one\n")?;
    p.tb()
        .args(["write", "--turn", "t1", "a.txt"])
        .write_stdin("two\n")
        .assert()
        .success();
    p.tb()
        .args(["exec", "--turn", "t2", "--"])
        .args(NOTHING)
        .assert()
        .success();
    p.tb()
        .args(["exec", "--turn", "t2", "--"])
        .args(NOTHING)
        .assert()
        .success();
    Ok(p)
}

/// Runs `turnback ARGS` under the hang guard; a command killed by it fails
/// the test.
#[cfg(unix)]
fn run_guarded(p: &Project, args: &[&str]) -> Res<Output> {
    let out = p
        .tb()
        .args(args)
        .write_stdin("three\n")
        .timeout(HANG_GUARD)
        .output()?;
    if out.status.code().is_none() {
        return Err(format!("`turnback {}` hung (killed by the guard)", args.join(" ")).into());
    }
    Ok(out)
}

/// A command that changes nothing and succeeds.
#[cfg(unix)]
const NOTHING: &[&str] = &["true"];
/// A command that changes nothing and succeeds.
#[cfg(windows)]
const NOTHING: &[&str] = &["cmd", "/c", "exit 0"];

#[cfg(unix)]
const COMMANDS: &[&[&str]] = &[
    &["write", "--turn", "t3", "a.txt"],
    &["list"],
    &["exec", "--turn", "t3", "--", "true"],
    &["rewind", "t1"],
    &["gc"],
    &["status"],
    &["verify"],
];

#[cfg(unix)]
#[test]
fn a_store_file_replaced_by_a_fifo_never_makes_a_command_hang() -> TestResult {
    // Files a command must read: each makes the named command fail with
    // exit 1 and a message naming the file.
    let read: &[(&str, &[&str])] = &[
        ("log.jsonl", &["list"]),
        ("tree", &["status"]),
        ("config.toml", &["write", "--turn", "t3", "a.txt"]),
        ("tree-stamp", &["exec", "--turn", "t3", "--", "true"]),
        ("lock", &["list"]),
    ];
    // Caches, rebuilt when unusable: commands go on.
    let caches = ["index", "tree-head"];
    let names = read.iter().map(|(n, _)| *n).chain(caches);
    for name in names {
        let p = used_project()?;
        let path = p.store_dir()?.join(name);
        mkfifo(&path)?;
        for args in COMMANDS {
            run_guarded(&p, args)?;
        }
        if let Some((_, args)) = read.iter().find(|(n, _)| *n == name) {
            mkfifo(&path)?;
            let out = run_guarded(&p, args)?;
            let (_, err) = texts(&out);
            assert_eq!(out.status.code(), Some(1), "{name}: {err}");
            assert!(err.contains(&path.display().to_string()), "{name}: {err}");
            assert!(err.contains("not a regular file"), "{name}: {err}");
        } else {
            mkfifo(&path)?;
            let out = run_guarded(&p, &["list"])?;
            assert_eq!(out.status.code(), Some(0), "{name}: {}", texts(&out).1);
        }
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_session_file_replaced_by_a_fifo_never_makes_the_hook_hang() -> TestResult {
    let p = Project::new()?;
    let event = format!(
        r#"{{"session_id":"s-1","prompt_id":"p-1","cwd":{:?},"hook_event_name":"UserPromptSubmit","prompt":"go"}}"#,
        p.root.display().to_string()
    );
    let hook = |p: &Project| -> Res<Output> {
        let out = p
            .tb()
            .args(["hook", "claude-code"])
            .write_stdin(event.clone())
            .timeout(HANG_GUARD)
            .output()?;
        if out.status.code().is_none() {
            return Err("the hook hung (killed by the guard)".into());
        }
        Ok(out)
    };
    hook(&p)?;
    let sessions = p.store_dir()?.join("sessions");
    let files: Vec<_> = std::fs::read_dir(&sessions)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    assert!(!files.is_empty(), "the hook recorded no session");
    for f in &files {
        mkfifo(f)?;
    }
    let out = hook(&p)?;
    let (_, err) = texts(&out);
    assert!(
        err.contains(&files[0].display().to_string()) && err.contains("not a regular file"),
        "{err}"
    );
    Ok(())
}

fn set_config(p: &Project, text: &str) -> TestResult {
    std::fs::write(p.store_dir()?.join("config.toml"), text)?;
    Ok(())
}

#[test]
fn keep_turns_zero_is_refused_before_anything_is_captured() -> TestResult {
    let p = used_project()?;
    let config = p.store_dir()?.join("config.toml");
    set_config(&p, "[retention]\nkeep_turns = 0\n")?;
    let before = p.state()?;
    let log_before = p.log_lines()?;
    let out = p
        .tb()
        .args(["write", "--turn", "t9", "a.txt"])
        .write_stdin("new\n")
        .output()?;
    let (_, err) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("keep_turns"), "{err}");
    assert!(err.contains(&config.display().to_string()), "{err}");
    assert_eq!(p.state()?, before, "the file was written");
    assert_eq!(p.log_lines()?, log_before, "something was recorded");
    Ok(())
}

#[test]
fn keep_turns_one_keeps_the_turn_just_captured() -> TestResult {
    let p = used_project()?;
    set_config(
        &p,
        "[retention]\nkeep_turns = 1\n[gc]\nauto_every_captures = 1\n",
    )?;
    let before = p.state()?;
    p.tb()
        .args(["write", "--turn", "t9", "a.txt"])
        .write_stdin("new\n")
        .assert()
        .success();
    p.tb().args(["rewind", "t9"]).assert().success();
    assert_eq!(p.state()?, before);
    Ok(())
}

#[test]
fn gc_keep_turns_zero_on_the_command_line_keeps_the_newest_turn() -> TestResult {
    let p = used_project()?;
    p.tb().args(["gc", "--keep-turns", "0"]).assert().success();
    let list = p.json(&["list"])?;
    let turns = crate::common::strings(&list, Some("turn"));
    assert_eq!(turns, ["t2"], "{list}");
    Ok(())
}

#[test]
fn auto_gc_zero_means_never() -> TestResult {
    let p = used_project()?;
    set_config(
        &p,
        "[retention]\nkeep_turns = 1\n[gc]\nauto_every_captures = 0\n",
    )?;
    for t in ["t3", "t4", "t5"] {
        p.tb()
            .args(["write", "--turn", t, "a.txt"])
            .write_stdin(t)
            .assert()
            .success();
    }
    let list = p.json(&["list"])?;
    assert_eq!(
        crate::common::strings(&list, Some("turn")),
        ["t1", "t2", "t3", "t4", "t5"],
        "{list}"
    );
    Ok(())
}

#[test]
fn every_meaningless_config_value_is_an_error_naming_key_and_file() -> TestResult {
    let p = used_project()?;
    let config = p.store_dir()?.join("config.toml");
    for (text, key) in [
        ("[retention]\nkeep_days = 0\n", "keep_days"),
        ("[retention]\nkeep_turns = -1\n", "keep_turns"),
        ("[retention]\nmax_size = 0\n", "max_size"),
        ("[gc]\nauto_every_captures = -5\n", "auto_every_captures"),
    ] {
        set_config(&p, text)?;
        let out = p.tb().args(["gc"]).output()?;
        let (_, err) = texts(&out);
        assert_eq!(out.status.code(), Some(1), "{text}: {err}");
        assert!(err.contains(key), "{text}: {err}");
        assert!(err.contains(&config.display().to_string()), "{text}: {err}");
    }
    Ok(())
}

/// A command that appended 64 KiB of log or more answers without writing
/// the index checkpoint of it: the background `turnback maintain` it
/// starts writes it (a store left alone gets one within 30 s). With
/// `TURNBACK_NO_BACKGROUND`, the command writes it itself before it ends.
#[test]
fn the_checkpoint_of_a_large_append_is_written_in_the_background() -> TestResult {
    for background in [true, false] {
        let p = Project::new()?;
        p.write("a.txt", "a\n")?;
        p.json(&["snapshot", "--turn", "t1"])?;
        for i in 0..2000 {
            p.write(&format!("d/f{i:04}.txt"), format!("{i}\n"))?;
        }
        let mut after = p.tb();
        if !background {
            after.env("TURNBACK_NO_BACKGROUND", "1");
        }
        after
            .args(["snapshot", "--turn", "t1", "--after"])
            .assert()
            .success();
        // Found without opening the store, which would write it.
        let store = turnback::location::locate(&p.root, None)?
            .ok_or("the project has a store")?
            .store_dir;
        let log = std::fs::metadata(store.join("log.jsonl"))?.len();
        assert!(log > 64 << 10, "the after half appended {log} bytes");
        let index = store.join("index");
        if !background {
            assert!(index.exists(), "written by the command");
            continue;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !index.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            index.exists(),
            "no checkpoint within 30 s of the after half"
        );
    }
    Ok(())
}

/// The command that makes gc due answers without running it; the gc runs in
/// the background `turnback maintain` it starts, and leaves the limit.
#[test]
fn an_automatic_gc_that_comes_due_runs_in_the_background() -> TestResult {
    let p = used_project()?;
    set_config(
        &p,
        "[retention]\nkeep_turns = 1\n[gc]\nauto_every_captures = 1\n",
    )?;
    p.tb()
        .args(["write", "--turn", "t3", "a.txt"])
        .write_stdin("three\n")
        .assert()
        .success();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let turns = loop {
        let list = p.json(&["list"])?;
        let turns = crate::common::strings(&list, Some("turn"));
        if turns.len() == 1 || std::time::Instant::now() >= deadline {
            break turns;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(turns, ["t3"], "no gc within 30 s of the write");
    p.tb().args(["rewind", "t3"]).assert().success();
    assert_eq!(p.read("a.txt")?, b"two\n");
    Ok(())
}
