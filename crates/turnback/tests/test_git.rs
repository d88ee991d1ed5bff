//! The store beside a real git repository: its marker is `.turnback/`, never
//! writes into `.git/`, and git does not see it.

use std::path::Path;
use std::process::Command;

use turnback::RewindOptions;

use crate::common::{Project, TestResult, assert_same, snapshot, turn};

/// Runs git in `dir` with no user or system configuration.
fn git(dir: &Path, args: &[&str]) -> TestResult<String> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", dir)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

#[test]
fn store_lives_in_dot_turnback_and_never_touches_git() -> TestResult {
    let p = Project::new()?;
    git(&p.root, &["init", "-q"])?;
    p.write("index.html", "<title>Old</title>\n")?;
    p.write(".gitignore", ".env\n")?;
    p.write(".env", "API_URL=https://api.example.com\n")?;
    git(&p.root, &["add", "-A"])?;
    git(&p.root, &["commit", "-q", "-m", "initial"])?;
    // The user's uncommitted work.
    p.write("index.html", "<title>New</title>\n")?;
    p.write("notes.md", "todo\n")?;
    let status_before = git(&p.root, &["--no-optional-locks", "status", "--porcelain"])?;
    assert_eq!(status_before, " M index.html\n?? notes.md\n");
    let git_before = snapshot(&p.path(".git"), &[])?;
    let before = p.snapshot()?;

    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "index.html", b"<title>Agent</title>\n")?;
    store.write(&t1, None, ".env", b"API_URL=http://localhost\n")?;
    store.write(&t1, None, "theme.css", b"body {}\n")?;
    store.write(&t1, None, "notes.md", b"overwritten\n")?;
    // Only the .turnback marker was added beside the project's own files;
    // the store itself lives outside the project.
    let top: Vec<String> = std::fs::read_dir(&p.root)?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<TestResult<_>>()?;
    assert!(top.iter().any(|n| n == ".turnback"), "{top:?}");
    assert!(p.path(".turnback/store.toml").is_file());
    assert!(!p.path(".turnback/log.jsonl").exists());
    assert!(!p.store_dir().starts_with(&p.root));
    assert!(p.store_dir().join("log.jsonl").is_file());
    let during = git(
        &p.root,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=all",
        ],
    )?;
    assert!(!during.contains(".turnback"), "{during}");
    assert!(during.contains("theme.css"), "{during}");

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_same(&git_before, &snapshot(&p.path(".git"), &[])?, ".git");
    assert_same(&before, &p.snapshot()?, "the work tree");
    let status_after = git(
        &p.root,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=all",
        ],
    )?;
    assert_eq!(status_after, " M index.html\n?? notes.md\n");
    Ok(())
}
