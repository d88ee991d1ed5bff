//! Directories (modes, empty ones), FIFOs, sockets and read-only places
//! through the real binary: `turnback exec` runs a shell command, `turnback
//! rewind` must give back the whole folder (path, type, mode, bytes or link
//! target). The read-only cases run the binary as an ordinary user (uid
//! 65534), since root ignores permission bits.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{BIN, Project, Res, TestResult, texts};

/// The ordinary user the read-only cases run as.
const USER: u32 = 65534;

/// path -> (type, mode, bytes or link target), the store left out.
type Tree = BTreeMap<String, (&'static str, u32, Vec<u8>)>;

/// The whole folder below `root`, without the root's `.turnback/` marker
/// (the store lives outside the project). Special files are described,
/// never opened (reading a FIFO would wait).
fn tree(root: &Path) -> Res<Tree> {
    let store = root.join(".turnback");
    let mut out = Tree::new();
    walk(root, root, &store, &mut out)?;
    Ok(out)
}

fn walk(root: &Path, dir: &Path, store: &Path, out: &mut Tree) -> TestResult {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p == store {
            continue;
        }
        let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
        let m = std::fs::symlink_metadata(&p)?;
        let mode = m.permissions().mode() & 0o7777;
        let ft = m.file_type();
        let entry = if ft.is_symlink() {
            let t = std::fs::read_link(&p)?;
            ("link", 0, t.to_string_lossy().as_bytes().to_vec())
        } else if ft.is_dir() {
            walk(root, &p, store, out)?;
            ("dir", mode, Vec::new())
        } else if ft.is_fifo() {
            ("fifo", mode, Vec::new())
        } else if ft.is_socket() {
            ("socket", mode, Vec::new())
        } else {
            ("file", mode, std::fs::read(&p)?)
        };
        out.insert(rel, entry);
    }
    Ok(())
}

fn run(p: &Project, args: &[&str]) -> Res<Output> {
    Ok(p.tb().args(args).output()?)
}

fn mkdir(p: &Project, rel: &str, mode: u32) -> TestResult {
    std::fs::create_dir_all(p.path(rel))?;
    p.chmod(rel, mode)
}

#[test]
fn directory_modes_and_empty_directories_come_back_exactly() -> TestResult {
    let p = Project::new()?;
    mkdir(&p, "d", 0o750)?;
    mkdir(&p, "sg", 0o2775)?;
    mkdir(&p, "st", 0o1777)?;
    mkdir(&p, "gone/sub", 0o700)?;
    p.write("gone/sub/x", "x\n")?;
    mkdir(&p, "mv1", 0o710)?;
    p.write("mv1/y", "y\n")?;
    mkdir(&p, "y", 0o755)?;
    mkdir(&p, "e1", 0o705)?;
    mkdir(&p, "e2/e3", 0o750)?;
    let before = tree(&p.root)?;

    let out = run(
        &p,
        &[
            "exec",
            "--turn",
            "t1",
            "--",
            "sh",
            "-c",
            "chmod 700 d; chmod g-s sg; chmod -t st; rm -rf gone; mv mv1 mv2; rmdir y; echo f > y; rmdir e1; rm -rf e2",
        ],
    )?;
    assert!(out.status.success(), "{:?}", texts(&out));
    let after_turn = tree(&p.root)?;
    assert_eq!(after_turn["d"].1, 0o700);

    let out = run(&p, &["rewind", "t1"])?;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(tree(&p.root)?, before);
    for path in ["d", "sg", "st", "e1", "e2/e3", "y", "gone/sub"] {
        assert!(
            stdout.contains(&format!("restored  {path}\n")),
            "{path}: {stdout}"
        );
    }

    let out = run(&p, &["undo"])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", texts(&out));
    assert_eq!(tree(&p.root)?, after_turn);
    Ok(())
}

#[test]
fn a_fifo_comes_back_and_a_removed_socket_is_named_as_not_restored() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a\n")?;
    let status = Command::new("mkfifo")
        .args(["-m", "640"])
        .arg(p.path("pipe"))
        .status()?;
    assert!(status.success());
    let listener = std::os::unix::net::UnixListener::bind(p.path("sock"))?;
    let before = tree(&p.root)?;
    assert_eq!(before["pipe"].0, "fifo");
    assert_eq!(before["sock"].0, "socket");

    let out = run(
        &p,
        &[
            "exec",
            "--turn",
            "t1",
            "--",
            "sh",
            "-c",
            "rm pipe sock; echo b > a.txt; mkfifo made",
        ],
    )?;
    assert!(out.status.success(), "{:?}", texts(&out));
    drop(listener);

    let out = run(&p, &["rewind", "t1"])?;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("NOT RESTORED  sock: ") && stdout.contains("socket"),
        "{stdout}"
    );
    assert!(!stdout.contains("restored  sock"), "{stdout}");
    assert!(stdout.contains("restored  pipe\n"), "{stdout}");
    let mut want = before;
    want.remove("sock");
    assert_eq!(tree(&p.root)?, want);
    Ok(())
}

/// Runs the binary as [`USER`] in `root`, with a home of its own.
fn as_user(root: &Path, home: &Path, args: &[&str]) -> Res<Output> {
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
            BIN,
        ])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .current_dir(root)
        .output()?;
    Ok(out)
}

/// A project owned by [`USER`], readable by it from the top; fails (never
/// passes vacuously) when privileges cannot be dropped.
fn user_project() -> Res<(Project, PathBuf)> {
    let p = Project::new()?;
    std::fs::set_permissions(&p.outer, std::fs::Permissions::from_mode(0o755))?;
    let home = p.outer.join("home");
    std::fs::create_dir(&home)?;
    std::os::unix::fs::lchown(&home, Some(USER), Some(USER))?;
    std::os::unix::fs::lchown(&p.root, Some(USER), Some(USER))?;
    let id = Command::new("setpriv")
        .args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
            "id",
            "-u",
        ])
        .output()
        .map_err(|e| format!("cannot run setpriv to drop to uid {USER}: {e}"))?;
    assert_eq!(
        String::from_utf8_lossy(&id.stdout).trim(),
        USER.to_string(),
        "these cases must run as an ordinary user; setpriv could not drop to uid {USER}: {:?}",
        texts(&id)
    );
    Ok((p, home))
}

fn chown_tree(path: &Path) -> TestResult {
    std::os::unix::fs::lchown(path, Some(USER), Some(USER))?;
    if std::fs::symlink_metadata(path)?.is_dir() {
        for e in std::fs::read_dir(path)? {
            chown_tree(&e?.path())?;
        }
    }
    Ok(())
}

#[test]
fn read_only_places_are_made_writable_for_the_rewind_and_put_back() -> TestResult {
    let (p, home) = user_project()?;
    p.write("ro/f", "old\n")?;
    p.write("ro/rf", "read-only file\n")?;
    p.chmod("ro/rf", 0o444)?;
    p.chmod("ro", 0o555)?;
    p.write("rf", "old top\n")?;
    p.chmod("rf", 0o444)?;
    mkdir(&p, "ro2", 0o755)?;
    p.write("ro2/keep", "k\n")?;
    p.chmod("ro2", 0o555)?;
    chown_tree(&p.root)?;
    let before = tree(&p.root)?;

    let script = "echo new > ro/f && chmod u+w ro && rm ro/rf && echo changed > ro/rf && chmod 444 ro/rf && chmod 555 ro \
                  && chmod 644 rf && echo new > rf && chmod 444 rf \
                  && chmod u+w ro2 && echo n > ro2/new && chmod 555 ro2";
    let out = as_user(
        &p.root,
        &home,
        &["exec", "--turn", "t1", "--", "sh", "-c", script],
    )?;
    assert!(out.status.success(), "{:?}", texts(&out));
    let after_turn = tree(&p.root)?;
    assert_eq!(after_turn["ro/rf"], ("file", 0o444, b"changed\n".to_vec()));

    let out = as_user(&p.root, &home, &["rewind", "t1"])?;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stdout.contains("Permission denied"), "{stdout}");
    for dir in ["ro", "ro2"] {
        assert!(
            stdout.contains(&format!("NOTE      {dir}: read-only directory (mode 555)")),
            "{dir}: {stdout}"
        );
    }
    assert_eq!(tree(&p.root)?, before);

    // Undo writes into the same read-only places, the same way.
    let out = as_user(&p.root, &home, &["undo"])?;
    assert_eq!(out.status.code(), Some(0), "{:?}", texts(&out));
    assert_eq!(tree(&p.root)?, after_turn);
    Ok(())
}

#[test]
fn a_read_only_directory_of_another_user_is_named_with_the_reason() -> TestResult {
    let (p, home) = user_project()?;
    p.write("theirs/f", "old\n")?;
    p.chmod("theirs/f", 0o666)?;
    p.write("mine.txt", "old\n")?;
    chown_tree(&p.path("mine.txt"))?;
    chown_tree(&p.path("theirs/f"))?;
    p.chmod("theirs", 0o755)?;
    // `theirs` stays root's, mode 0755: the user may write the file in
    // it, not replace it.
    let before = tree(&p.root)?;
    let out = as_user(
        &p.root,
        &home,
        &[
            "exec",
            "--turn",
            "t1",
            "--",
            "sh",
            "-c",
            "echo new > theirs/f && echo new > mine.txt",
        ],
    )?;
    assert!(out.status.success(), "{:?}", texts(&out));

    let out = as_user(&p.root, &home, &["rewind", "t1"])?;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("NOT RESTORED  theirs/f: Permission denied")
            && stdout.contains("belongs to another user"),
        "{stdout}"
    );
    assert!(stdout.contains("restored  mine.txt"), "{stdout}");
    let mut want = before;
    want.insert("theirs/f".into(), ("file", 0o666, b"new\n".to_vec()));
    assert_eq!(tree(&p.root)?, want, "only the other user's place is left");
    assert_eq!(p.mode("theirs")?, 0o755, "its mode is not touched");
    Ok(())
}
