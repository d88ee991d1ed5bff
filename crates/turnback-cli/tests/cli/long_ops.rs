//! Long rewinds, reverts, undos and redos: the per-path lines only up to
//! 50 paths or with `-v`, a summary line always, every path in `--json`,
//! problems always listed, and no progress bar when standard error is not
//! a terminal (the bar on a terminal: `terminal.rs`).

use serde_json::Value;

use crate::common::{Project, Res, TestResult, texts};

/// A turn that changes `n` files (`src/fNN.txt`), each captured first.
fn turn_of(p: &Project, n: usize) -> TestResult {
    let names: Vec<String> = (0..n).map(|k| format!("src/f{k:02}.txt")).collect();
    for name in &names {
        p.write(name, format!("before {name}\n"))?;
    }
    let mut args = vec!["capture", "--turn", "t1"];
    args.extend(names.iter().map(String::as_str));
    p.ok(&args)?;
    for name in &names {
        p.write(name, "agent\n")?;
    }
    Ok(())
}

/// Lines of `text` that list one path restored or deleted.
fn path_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("  restored  ") || l.starts_with("  deleted   "))
        .count()
}

/// `turnback ARGS` run with a progress bar due at once; (code, stdout,
/// stderr).
fn run(p: &Project, args: &[&str]) -> Res<(i32, String, String)> {
    let out = p
        .tb()
        .env("TURNBACK_PROGRESS_DELAY_MS", "0")
        .args(args)
        .output()?;
    let (stdout, stderr) = texts(&out);
    Ok((out.status.code().unwrap_or(-1), stdout, stderr))
}

#[test]
fn a_rewind_of_60_files_prints_a_summary_and_lists_them_only_with_v() -> TestResult {
    let p = Project::new()?;
    turn_of(&p, 60)?;
    let (code, stdout, stderr) = run(&p, &["rewind", "t1"])?;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(path_lines(&stdout), 0, "{stdout}");
    assert_eq!(
        stdout,
        "rewound turns: t1\nrestored 60, deleted 0, conflicts 0, not restored 0 (-v lists every path)\n"
    );
    // Piped: no bar, not one escape sequence.
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    assert_eq!(stderr, "");
    assert_eq!(p.read("src/f07.txt")?, b"before src/f07.txt\n");

    // Undo and redo say it the same way; `-v` lists every path.
    let (_, stdout, _) = run(&p, &["undo"])?;
    assert_eq!(path_lines(&stdout), 0, "{stdout}");
    assert!(
        stdout.contains("restored 60, deleted 0, conflicts 0, not restored 0"),
        "{stdout}"
    );
    let (_, stdout, _) = run(&p, &["redo", "-v"])?;
    assert_eq!(path_lines(&stdout), 60, "{stdout}");
    assert!(stdout.contains("  restored  src/f59.txt\n"), "{stdout}");
    assert!(
        stdout.ends_with("\nrestored 60, deleted 0, conflicts 0, not restored 0\n"),
        "{stdout}"
    );
    // And --json names every path, whatever their number.
    let (_, stdout, _) = run(&p, &["undo", "--json"])?;
    let v: Value = serde_json::from_str(&stdout)?;
    assert_eq!(v["restored"].as_array().map(Vec::len), Some(60), "{v}");
    Ok(())
}

#[test]
fn a_rewind_of_3_files_lists_each_path() -> TestResult {
    let p = Project::new()?;
    turn_of(&p, 3)?;
    let (code, stdout, _) = run(&p, &["rewind", "t1"])?;
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "rewound turns: t1\n  restored  src/f00.txt\n  restored  src/f01.txt\n  restored  src/f02.txt\nrestored 3, deleted 0, conflicts 0, not restored 0\n"
    );
    Ok(())
}

#[test]
fn a_revert_of_60_files_lists_them_with_verbose_only() -> TestResult {
    let p = Project::new()?;
    turn_of(&p, 60)?;
    let (_, stdout, _) = run(&p, &["revert", "t1", "--dry-run"])?;
    // The plan is the plan: every path, however many.
    assert_eq!(stdout.lines().filter(|l| l.contains("src/f")).count(), 60);
    let (code, stdout, _) = run(&p, &["revert", "t1", "--verbose"])?;
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(path_lines(&stdout), 60, "{stdout}");
    Ok(())
}

/// A path that cannot be restored is listed among 60 that are not, and so
/// is a conflict.
#[test]
fn problems_are_always_listed() -> TestResult {
    let p = Project::new()?;
    let names: Vec<String> = (0..60).map(|k| format!("f{k:02}.txt")).collect();
    for name in &names {
        p.write(name, "small\n")?;
    }
    p.write("big.bin", vec![1u8; 3000])?;
    let mut args = vec![
        "capture",
        "--turn",
        "t1",
        "--max-file-size",
        "2K",
        "big.bin",
    ];
    args.extend(names.iter().map(String::as_str));
    p.ok(&args)?;
    for name in &names {
        p.write(name, "agent\n")?;
    }
    p.write("big.bin", "replaced")?;
    p.ok(&["seal", "t1"])?;
    // Changed since the agent's turn: a conflict.
    p.write("f00.txt", "mine\n")?;

    let (code, stdout, stderr) = run(&p, &["rewind", "t1"])?;
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert_eq!(path_lines(&stdout), 0, "{stdout}");
    assert!(stdout.contains("  NOT RESTORED  big.bin: "), "{stdout}");
    assert!(stdout.contains("  CONFLICT  f00.txt: "), "{stdout}");
    assert!(
        stdout
            .contains("restored 60, deleted 0, conflicts 1, not restored 1 (-v lists every path)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("1 path(s) could not be restored"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    Ok(())
}
