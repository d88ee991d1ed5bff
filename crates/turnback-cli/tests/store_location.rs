//! Where the store lives: outside the project, so that the commands agents
//! run every day (`git clean -fdx`, `git stash --all`, `rm -rf .turnback`,
//! `rm -rf` of the project itself) cannot take the pre-images with them.
//! Each test runs the real binary and real git in a temporary project and
//! compares the whole folder (path, type, mode, bytes or link target).
//! Unix only: the tests drive git, which the Windows run (under Wine) lacks.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{BIN, TestResult};

/// The folder as a map (path, kind, mode, bytes), without the root's
/// `.git/` (git's own state, which turnback never touches) and the marker.
fn tree(root: &Path) -> Result<common::Tree, Box<dyn std::error::Error>> {
    let mut t = common::tree(root)?;
    t.retain(|path, _| path != ".git" && !path.starts_with(".git/"));
    Ok(t)
}

/// A git repository with a commit, uncommitted work, a git-ignored `.env`,
/// an untracked file, and a data directory of its own beside it.
struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    data: PathBuf,
}

impl Repo {
    fn new() -> Result<Repo, Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("proj");
        let data = tmp.path().join("data");
        std::fs::create_dir(&root)?;
        let root = std::fs::canonicalize(&root)?;
        let repo = Repo {
            _tmp: tmp,
            root,
            data,
        };
        repo.git(&["init", "-q"])?;
        std::fs::write(repo.root.join("main.c"), "code\n")?;
        std::fs::write(repo.root.join(".gitignore"), ".env\n")?;
        repo.git(&["add", "main.c", ".gitignore"])?;
        repo.git(&["commit", "-qm", "1"])?;
        std::fs::write(repo.root.join("main.c"), "code, edited by hand\n")?;
        std::fs::write(repo.root.join(".env"), "SECRET=xyz\n")?;
        std::fs::write(repo.root.join("notes.txt"), "notes\n")?;
        std::fs::create_dir_all(repo.root.join("src/deep"))?;
        std::fs::write(repo.root.join("src/deep/lib.c"), "lib\n")?;
        Ok(repo)
    }

    fn git(&self, args: &[&str]) -> TestResult {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()?;
        assert!(out.status.success(), "git {args:?}: {out:?}");
        Ok(())
    }

    /// `turnback ARGS` in `dir`, with this repository's data directory.
    fn tb_in(&self, dir: &Path, args: &[&str]) -> std::io::Result<Output> {
        Command::new(BIN)
            .args(args)
            .current_dir(dir)
            .env("TURNBACK_DATA_DIR", &self.data)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
    }

    fn tb(&self, args: &[&str]) -> Result<String, Box<dyn std::error::Error>> {
        let out = self.tb_in(&self.root, args)?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "turnback {args:?}: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(text)
    }

    fn store_dir(&self) -> Result<PathBuf, Box<dyn std::error::Error>> {
        let out = self.tb(&["--json", "store"])?;
        let v: serde_json::Value = serde_json::from_str(&out)?;
        Ok(PathBuf::from(v["store_dir"].as_str().ok_or("a store")?))
    }

    /// One earlier turn through a file tool, so a command that destroys
    /// the store would take it too.
    fn earlier_turn(&self) -> TestResult {
        let out = Command::new(BIN)
            .args(["write", "--turn", "t0", "main.c"])
            .current_dir(&self.root)
            .env("TURNBACK_DATA_DIR", &self.data)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().map(|mut i| i.write_all(b"agent v0\n"));
                c.wait_with_output()
            })?;
        assert!(out.status.success(), "{out:?}");
        Ok(())
    }
}

/// Runs `command` (program and arguments) under `turnback exec --turn t1`, then checks that
/// rewinding t1 gives back the folder as it was before, and rewinding t0
/// the folder before the earlier turn.
fn survives(command: &[&str]) -> TestResult {
    let r = Repo::new()?;
    let before_t0 = tree(&r.root)?;
    r.earlier_turn()?;
    let before = tree(&r.root)?;
    let store = r.store_dir()?;
    assert!(
        !store.starts_with(&r.root),
        "{store:?} is inside the project"
    );
    r.tb(&[&["exec", "--turn", "t1", "--"][..], command].concat())?;
    assert_ne!(tree(&r.root)?, before, "{command:?} changed nothing");
    let listed = r.tb(&["list"])?;
    assert!(
        listed.contains("t0") && listed.contains("t1"),
        "{command:?}: {listed}"
    );
    r.tb(&["rewind", "t1"])?;
    assert_eq!(tree(&r.root)?, before, "after {command:?}, rewind t1");
    r.tb(&["rewind", "t0"])?;
    assert_eq!(tree(&r.root)?, before_t0, "after {command:?}, rewind t0");
    Ok(())
}

#[test]
fn git_clean_fdx_cannot_delete_the_pre_images() -> TestResult {
    survives(&["git", "clean", "-fdxq"])
}

#[test]
fn git_stash_all_cannot_delete_the_pre_images() -> TestResult {
    survives(&["git", "stash", "--all", "-q"])
}

#[test]
fn git_stash_untracked_cannot_delete_the_pre_images() -> TestResult {
    survives(&["git", "stash", "-u", "-q"])
}

#[test]
fn rm_rf_of_the_marker_and_env_cannot_delete_the_pre_images() -> TestResult {
    if cfg!(windows) {
        survives(&["cmd", "/c", "rmdir /s /q .turnback && del /f /q .env"])
    } else {
        survives(&["rm", "-rf", ".turnback", ".env"])
    }
}

/// Unix only: Windows cannot remove a folder that is a running process's
/// current directory (the command's and turnback's own).
#[cfg(unix)]
#[test]
fn a_project_deleted_by_a_command_comes_back_whole() -> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    let before = tree(&r.root)?;
    r.tb(&[
        "exec",
        "--turn",
        "t1",
        "--",
        "sh",
        "-c",
        "cd .. && rm -rf proj",
    ])?;
    assert!(!r.root.exists());
    // The user makes the folder again and rewinds from inside it: the
    // registry finds the store by the project's path.
    std::fs::create_dir(&r.root)?;
    r.tb(&["rewind", "t1"])?;
    assert_eq!(tree(&r.root)?, before);
    assert!(r.root.join(".turnback/store.toml").is_file());
    Ok(())
}

#[test]
fn a_subdirectory_finds_the_root_through_the_registry_when_the_marker_is_gone() -> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    std::fs::remove_dir_all(r.root.join(".turnback"))?;
    let out = r.tb_in(&r.root.join("src/deep"), &["list"])?;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("t0"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("registry"));
    assert!(r.root.join(".turnback/store.toml").is_file());
    Ok(())
}

#[test]
fn a_deleted_store_is_named_with_what_can_be_done() -> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    let store = r.store_dir()?;
    std::fs::remove_dir_all(&store)?;
    let out = r.tb_in(&r.root, &["rewind", "t0"])?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&store.display().to_string()), "{err}");
    assert!(err.contains("is gone"), "{err}");
    assert!(err.contains("turnback store --forget"), "{err}");
    assert!(!err.contains("lock file"), "{err}");
    // Capturing is refused too, rather than starting over in silence.
    let out = r.tb_in(&r.root, &["capture", "--turn", "t1", "notes.txt"])?;
    assert_eq!(out.status.code(), Some(1));
    r.tb(&["store", "--forget"])?;
    r.tb(&["capture", "--turn", "t1", "notes.txt"])?;
    assert!(r.tb(&["list"])?.contains("t1"));
    Ok(())
}

#[test]
fn a_store_of_the_in_project_layout_is_migrated_without_loss() -> TestResult {
    let r = Repo::new()?;
    // An in-project store, then its marker taken away: exactly the layout
    // earlier versions wrote (`.turnback/log.jsonl`, `packs/`, ...).
    r.tb(&["store", "--in-project"])?;
    let before = tree(&r.root)?;
    r.earlier_turn()?;
    assert!(r.root.join(".turnback/log.jsonl").is_file());
    std::fs::remove_file(r.root.join(".turnback/store.toml"))?;
    let out = r.tb_in(&r.root, &["list"])?;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("t0"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("was moved to"));
    let mut left: Vec<String> = std::fs::read_dir(r.root.join(".turnback"))?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, std::io::Error>>()?;
    left.sort();
    assert_eq!(left, [".gitignore", "lock", "store.toml"]);
    assert!(!r.store_dir()?.starts_with(&r.root));
    r.tb(&["rewind", "t0"])?;
    assert_eq!(tree(&r.root)?, before);
    Ok(())
}

#[test]
fn the_store_moves_into_the_project_and_back_keeping_its_turns() -> TestResult {
    let r = Repo::new()?;
    let before = tree(&r.root)?;
    r.earlier_turn()?;
    let outside = r.store_dir()?;
    r.tb(&["store", "--in-project"])?;
    assert_eq!(r.store_dir()?, r.root.join(".turnback"));
    assert!(!outside.exists());
    assert!(r.tb(&["list"])?.contains("t0"));
    r.tb(&["store", "--data-dir"])?;
    assert!(r.store_dir()?.starts_with(&r.data));
    r.tb(&["rewind", "t0"])?;
    assert_eq!(tree(&r.root)?, before);
    Ok(())
}

/// Linux only: the XDG layout (`$XDG_DATA_HOME`, `~/.local/share`).
#[cfg(target_os = "linux")]
#[test]
fn without_turnback_data_dir_the_store_goes_to_the_platform_data_directory() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let home = tmp.path().join("home");
    let root = tmp.path().join("proj");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join("a.txt"), "a\n")?;
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .current_dir(&root)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
    };
    let out = run(&["capture", "--turn", "t1", "a.txt"])?;
    assert!(out.status.success(), "{out:?}");
    let stores = home.join(".local/share/turnback/stores");
    assert_eq!(std::fs::read_dir(&stores)?.count(), 1, "{stores:?}");
    // XDG_DATA_HOME wins over HOME.
    let xdg = tmp.path().join("xdg");
    let out = Command::new(BIN)
        .args(["--json", "store"])
        .current_dir(&root)
        .env_clear()
        .env("HOME", &home)
        .env("XDG_DATA_HOME", &xdg)
        .output()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    // The marker names the store; under another data directory it is gone,
    // and that is what the command says.
    assert!(v["store_dir"].is_null(), "{v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&xdg.join("turnback").display().to_string()),
        "{err}"
    );
    Ok(())
}

#[test]
fn turnback_store_project_in_the_environment_keeps_a_new_store_in_the_project() -> TestResult {
    let r = Repo::new()?;
    let before = tree(&r.root)?;
    let out = Command::new(BIN)
        .args(["capture", "--turn", "t1", "notes.txt", "main.c"])
        .current_dir(&r.root)
        .env("TURNBACK_DATA_DIR", &r.data)
        .env("TURNBACK_STORE", "project")
        .output()?;
    assert!(out.status.success(), "{out:?}");
    assert!(r.root.join(".turnback/log.jsonl").is_file());
    assert!(!r.data.join("stores").exists());
    // Without the variable, the existing store is still found in the project.
    std::fs::write(r.root.join("notes.txt"), "agent\n")?;
    r.tb(&["rewind", "t1"])?;
    assert_eq!(tree(&r.root)?, before);
    assert_eq!(r.store_dir()?, r.root.join(".turnback"));
    Ok(())
}

#[test]
fn a_copy_whose_original_lost_its_marker_still_gets_its_own_store() -> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    let copy = r.root.with_file_name("copy");
    copy_dir(&r.root, &copy)?;
    // A command in the original deletes its marker before the copy is used.
    std::fs::remove_dir_all(r.root.join(".turnback"))?;
    let out = r.tb_in(&copy, &["rewind", "t0"])?;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a copy of"));
    // The original keeps its own history.
    let listed = r.tb(&["list"])?;
    assert!(listed.contains("t0"), "{listed}");
    Ok(())
}

#[test]
fn a_new_clone_at_the_old_path_of_a_moved_project_and_the_moved_project_both_keep_the_history()
-> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    let moved = r.root.with_file_name("moved");
    std::fs::rename(&r.root, &moved)?;
    std::fs::create_dir(&r.root)?;
    std::fs::write(r.root.join("fresh.txt"), "a new clone\n")?;
    // The clone is opened first: a project re-made at its path (a re-clone,
    // `rm -rf` and a new folder) finds the path's store, as it must for a
    // rewind to bring a deleted project back.
    let listed = r.tb(&["list"])?;
    assert!(listed.contains("t0"), "{listed}");
    // The moved folder's marker names that store too, and its old path is
    // taken: it is a copy, and gets a store of its own with the history.
    let out = r.tb_in(&moved, &["list"])?;
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("t0"),
        "{out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a copy of"),
        "{out:?}"
    );
    let out = r.tb_in(&moved, &["--json", "store"])?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let moved_store = PathBuf::from(v["store_dir"].as_str().ok_or("a store")?);
    assert_ne!(
        r.store_dir()?,
        moved_store,
        "two folders never share one log"
    );
    Ok(())
}

/// The store a folder uses, by `turnback --json store` run in it.
fn store_of(r: &Repo, dir: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let out = r.tb_in(dir, &["--json", "store"])?;
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    Ok(PathBuf::from(v["store_dir"].as_str().ok_or("a store")?))
}

#[test]
fn a_copy_never_takes_over_the_store_of_an_original_that_was_deleted() -> TestResult {
    let r = Repo::new()?;
    let before = tree(&r.root)?;
    r.earlier_turn()?;
    let original_store = r.store_dir()?;
    // The copy ships the original's marker; then the original is deleted.
    let clone = r.root.with_file_name("clone");
    copy_dir(&r.root, &clone)?;
    std::fs::remove_dir_all(&r.root)?;
    let out = r.tb_in(&clone, &["list"])?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        err.contains("is a copy of") && !err.contains("moved"),
        "{err}"
    );
    assert_ne!(store_of(&r, &clone)?, original_store);
    // The copy's own turns stay in its own store.
    let out = r.tb_in(&clone, &["capture", "--turn", "in-clone", "notes.txt"])?;
    assert!(out.status.success(), "{out:?}");
    // The original made again at its path finds its own history, whole,
    // and nothing the copy did.
    std::fs::create_dir(&r.root)?;
    assert_eq!(r.store_dir()?, original_store);
    let listed = r.tb(&["list"])?;
    assert!(
        listed.contains("t0") && !listed.contains("in-clone"),
        "{listed}"
    );
    r.tb(&["rewind", "t0"])?;
    assert_eq!(
        tree(&r.root)?.get("main.c"),
        before.get("main.c"),
        "the original's pre-image comes back at its own path"
    );
    Ok(())
}

#[test]
fn a_moved_project_keeps_its_store_though_its_old_path_was_made_again() -> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    let store = r.store_dir()?;
    let moved = r.root.with_file_name("moved");
    std::fs::rename(&r.root, &moved)?;
    // Something made a folder at the old path before the moved project
    // was used again: the path is taken, yet this is still the same folder.
    std::fs::create_dir(&r.root)?;
    let out = r.tb_in(&moved, &["list"])?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("t0"),
        "{out:?}"
    );
    assert!(err.contains("moved from") && !err.contains("copy"), "{err}");
    assert_eq!(store_of(&r, &moved)?, store, "the store follows a move");
    // The folder at the old path is another project: it has no store.
    let out = r.tb_in(&r.root, &["list"])?;
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("t0"),
        "{out:?}"
    );
    Ok(())
}

#[test]
fn a_copy_and_its_original_each_keep_their_own_turns() -> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    let copy = r.root.with_file_name("copy");
    copy_dir(&r.root, &copy)?;
    let out = r.tb_in(&copy, &["capture", "--turn", "in-copy", "notes.txt"])?;
    assert!(out.status.success(), "{out:?}");
    r.tb(&["capture", "--turn", "in-original", "notes.txt"])?;
    let here = r.tb(&["list"])?;
    let out = r.tb_in(&copy, &["list"])?;
    let there = String::from_utf8_lossy(&out.stdout);
    // Both start from the original's turns; each sees only its own after.
    assert!(here.contains("t0") && there.contains("t0"), "{here}{there}");
    assert!(
        here.contains("in-original") && !here.contains("in-copy"),
        "{here}"
    );
    assert!(
        there.contains("in-copy") && !there.contains("in-original"),
        "{there}"
    );
    assert_ne!(store_of(&r, &copy)?, r.store_dir()?);
    Ok(())
}

/// Unix only: a symlink on Windows needs a privilege tests cannot count on.
#[cfg(unix)]
#[test]
fn a_marker_directory_that_is_a_symlink_is_refused() -> TestResult {
    let r = Repo::new()?;
    let other = r.root.with_file_name("other");
    std::fs::create_dir(&other)?;
    common::portable::symlink(&other, r.root.join(".turnback"))?;
    let out = r.tb_in(&r.root, &["list"])?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symlink"), "{err}");
    Ok(())
}

#[test]
fn a_relative_turnback_data_dir_is_refused_by_name() -> TestResult {
    let r = Repo::new()?;
    let out = Command::new(BIN)
        .args(["capture", "--turn", "t1", "notes.txt"])
        .current_dir(&r.root)
        .env("TURNBACK_DATA_DIR", "data")
        .output()?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TURNBACK_DATA_DIR") && err.contains("relative"),
        "{err}"
    );
    assert!(!r.root.join("data").exists());
    Ok(())
}

#[test]
fn a_nested_project_whose_marker_was_deleted_is_not_taken_for_the_outer_one() -> TestResult {
    let r = Repo::new()?;
    r.earlier_turn()?;
    let inner = r.root.join("src");
    let out = r.tb_in(
        &inner,
        &["--root", ".", "capture", "--turn", "inner", "deep/lib.c"],
    )?;
    assert!(out.status.success(), "{out:?}");
    std::fs::remove_dir_all(inner.join(".turnback"))?;
    let out = r.tb_in(&inner.join("deep"), &["list"])?;
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("inner") && !listed.contains("t0"),
        "{listed}"
    );
    Ok(())
}

/// Copies the folder `from` to `to` with its files' modes (what `cp -a`
/// does for the files, directories and symlinks of these projects).
fn copy_dir(from: &Path, to: &Path) -> TestResult {
    std::fs::create_dir(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type()?;
        if ft.is_dir() {
            copy_dir(&src, &dst)?;
        } else if ft.is_symlink() {
            #[cfg(unix)]
            common::portable::symlink(std::fs::read_link(&src)?, &dst)?;
            #[cfg(not(unix))]
            return Err(format!("{}: a symlink", src.display()).into());
        } else {
            // Copies the permissions too.
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}
