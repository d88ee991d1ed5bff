//! Root discovery: `--root`, else the nearest ancestor of the current
//! directory holding `.turnback/`, else the current directory.

#[cfg(unix)]
use predicates::prelude::*;

use crate::common::{Project, TestResult, strings, turnback_in};

#[test]
fn root_flag_names_the_project_from_anywhere() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a")?;
    let root = p.root.to_string_lossy().into_owned();
    // Paths are taken relative to the current directory, not to the root.
    turnback_in(&p.outer)
        .args(["--root", &root, "capture", "--turn", "t1", "project/a.txt"])
        .assert()
        .success()
        .stdout("captured a.txt  (file, 1 bytes, mode 644)\n");
    assert!(p.exists(".turnback/store.toml"));
    assert!(p.store_dir()?.join("log.jsonl").exists());
    assert!(!p.outer.join(".turnback").exists());

    let out = turnback_in(&p.outer)
        .args(["--root", &root, "--json", "list"])
        .assert()
        .success();
    let v = crate::common::parse_json(&out.get_output().stdout)?;
    assert_eq!(strings(&v, Some("turn")), ["t1"]);
    // Without --root, the folder above sees no turns (and gains no store).
    turnback_in(&p.outer)
        .args(["list"])
        .assert()
        .success()
        .stdout(format!("no turns to rewind in {}\n", p.outer.display()));
    assert!(!p.outer.join(".turnback").exists());
    Ok(())
}

#[test]
fn the_nearest_ancestor_with_a_store_is_the_root() -> TestResult {
    let p = Project::new()?;
    p.write("top.txt", "top")?;
    p.write("src/deep/lib.rs", "fn main() {}\n")?;
    p.ok(&["capture", "--turn", "t1", "top.txt"])?;

    let deep = p.path("src/deep");
    turnback_in(&deep)
        .args(["capture", "--turn", "t2", "lib.rs"])
        .assert()
        .success()
        .stdout("captured src/deep/lib.rs  (file, 13 bytes, mode 644)\n");
    assert!(!deep.join(".turnback").exists());
    let out = turnback_in(&deep)
        .args(["--json", "list"])
        .assert()
        .success();
    let v = crate::common::parse_json(&out.get_output().stdout)?;
    assert_eq!(strings(&v, Some("turn")), ["t1", "t2"]);

    // A nested project with its own store is its own root.
    p.write("sub/inner.txt", "inner")?;
    let sub = p.path("sub");
    std::fs::create_dir(sub.join(".turnback"))?;
    turnback_in(&sub)
        .args(["capture", "--turn", "t3", "inner.txt"])
        .assert()
        .success()
        .stdout("captured inner.txt  (file, 5 bytes, mode 644)\n");
    let out = turnback_in(&sub)
        .args(["--json", "list"])
        .assert()
        .success();
    let v = crate::common::parse_json(&out.get_output().stdout)?;
    assert_eq!(strings(&v, Some("turn")), ["t3"]);
    assert_eq!(strings(&p.json(&["list"])?, Some("turn")), ["t1", "t2"]);

    // Rewinding from a subdirectory rewinds in the discovered root.
    p.write("src/deep/lib.rs", "broken")?;
    turnback_in(&deep).args(["rewind", "t2"]).assert().success();
    assert_eq!(p.read("src/deep/lib.rs")?, b"fn main() {}\n");
    Ok(())
}

#[test]
fn without_a_store_above_the_current_directory_is_the_root() -> TestResult {
    let p = Project::new()?;
    let stray: Vec<_> = p
        .root
        .ancestors()
        .filter(|a| a.join(".turnback").is_dir())
        .collect();
    assert!(
        stray.is_empty(),
        "this test needs a temporary folder with no .turnback/ above it; found {stray:?}"
    );
    p.write("notes/today.md", "# today\n")?;
    let notes = p.path("notes");
    turnback_in(&notes)
        .args(["capture", "--turn", "t1", "today.md"])
        .assert()
        .success()
        .stdout("captured today.md  (file, 8 bytes, mode 644)\n");
    assert!(notes.join(".turnback/store.toml").exists());
    assert!(!p.exists(".turnback"));
    Ok(())
}

/// A home folder and a data directory of the test's own, and a command
/// running in `cwd` with them (issue 27: a command in the home folder took
/// over every project below it). Unix only: there the home folder is
/// `$HOME`; Windows asks the shell for the profile folder, which an
/// environment variable does not move.
#[cfg(unix)]
struct Home {
    _tmp: tempfile::TempDir,
    home: std::path::PathBuf,
    data: std::path::PathBuf,
}

#[cfg(unix)]
impl Home {
    fn new() -> Result<Home, Box<dyn std::error::Error>> {
        let tmp = tempfile::Builder::new()
            .prefix("turnback-home-")
            .tempdir()?;
        let base = crate::common::canonical(tmp.path())?;
        let home = base.join("home");
        let data = base.join("data");
        std::fs::create_dir_all(&home)?;
        Ok(Home {
            _tmp: tmp,
            home,
            data,
        })
    }

    fn tb(&self, cwd: &std::path::Path) -> assert_cmd::Command {
        let mut c = turnback_in(cwd);
        c.env("HOME", &self.home)
            .env("USERPROFILE", &self.home)
            .env("TURNBACK_DATA_DIR", &self.data);
        c
    }

    /// Every file under the data directory.
    fn data_files(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![self.data.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else {
                    out.push(e.path().to_string_lossy().into_owned());
                }
            }
        }
        out
    }
}

#[cfg(unix)]
#[test]
fn the_home_folder_is_never_adopted_and_a_project_below_it_is_its_own_root() -> TestResult {
    let h = Home::new()?;
    // A command in the home folder fails, and makes nothing.
    h.tb(&h.home).arg("undo").assert().code(1).stderr(
        predicates::str::contains("is your home folder").and(predicates::str::contains("--root")),
    );
    assert!(!h.home.join(".turnback").exists());
    assert!(h.data_files().is_empty(), "{:?}", h.data_files());
    // A project below it is its own root.
    let p = h.home.join("p");
    std::fs::create_dir(&p)?;
    std::fs::write(p.join("a"), "x\n")?;
    h.tb(&p)
        .args(["write", "--turn", "t1", "a"])
        .write_stdin("y\n")
        .assert()
        .success()
        .stdout(predicates::str::contains("captured a "));
    let out = h.tb(&p).args(["--json", "store"]).assert().success();
    let v = crate::common::parse_json(&out.get_output().stdout)?;
    assert_eq!(
        v["root"].as_str().map(std::path::PathBuf::from),
        Some(p.clone())
    );
    let human = h.tb(&p).arg("store").assert().success();
    let text = String::from_utf8_lossy(&human.get_output().stdout).into_owned();
    assert!(
        text.contains(&format!("project: {}", p.display())),
        "{text}"
    );
    // Named with --root, the home folder is taken as asked.
    h.tb(&h.home)
        .args(["--root", &h.home.to_string_lossy(), "list"])
        .assert()
        .success();
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_home_folder_registered_by_an_older_turnback_is_skipped_and_can_be_forgotten() -> TestResult {
    let h = Home::new()?;
    std::fs::write(h.home.join("notes"), "n\n")?;
    // What an older turnback left: a store for the home folder itself.
    let home = h.home.to_string_lossy().into_owned();
    h.tb(&h.home)
        .args(["--root", &home, "write", "--turn", "t0", "notes"])
        .write_stdin("m\n")
        .assert()
        .success();
    let p = h.home.join("p");
    std::fs::create_dir(&p)?;
    std::fs::write(p.join("a"), "x\n")?;
    h.tb(&p)
        .args(["write", "--turn", "t1", "a"])
        .write_stdin("y\n")
        .assert()
        .success()
        .stdout(predicates::str::contains("captured a "));
    // The project's turns are its own; the home store is not its store.
    let out = h.tb(&p).args(["--json", "list"]).assert().success();
    let v = crate::common::parse_json(&out.get_output().stdout)?;
    assert_eq!(strings(&v, Some("turn")), ["t1"]);
    // Both are listed, with their turns; the home one is forgotten.
    let listed = h.tb(&p).args(["store", "--list"]).assert().success();
    let text = String::from_utf8_lossy(&listed.get_output().stdout).into_owned();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.lines().all(|l| l.contains("1 turn(s)")), "{text}");
    h.tb(&p)
        .args(["store", "--forget", &home])
        .assert()
        .success()
        .stdout(predicates::str::contains("removed"));
    assert!(!h.home.join(".turnback/store.toml").exists());
    let listed = h
        .tb(&p)
        .args(["--json", "store", "--list"])
        .assert()
        .success();
    let v = crate::common::parse_json(&listed.get_output().stdout)?;
    let roots: Vec<String> = v
        .as_array()
        .ok_or("a list")?
        .iter()
        .filter_map(|r| r["root"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(roots, [p.to_string_lossy().into_owned()]);
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_command_that_captures_nothing_creates_nothing() -> TestResult {
    let h = Home::new()?;
    let p = h.home.join("p");
    std::fs::create_dir(&p)?;
    std::fs::write(p.join("a"), "x\n")?;
    for args in [
        &["undo"][..],
        &["redo"],
        &["rewind", "t1"],
        &["rewind", "--dry-run", "t1"],
        &["revert", "t1"],
        &["seal", "t1"],
        &["gc"],
        &["list"],
        &["status"],
        &["show", "t1"],
        &["diff", "t1"],
        &["store"],
        &["verify"],
        &["snapshot", "--turn", "t1", "--after"],
    ] {
        let out = h.tb(&p).args(args).output()?;
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {:?} {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!p.join(".turnback").exists(), "{args:?} made a marker");
        assert!(
            h.data_files().is_empty(),
            "{args:?} wrote {:?}",
            h.data_files()
        );
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_file_system_root_is_never_adopted() -> TestResult {
    let h = Home::new()?;
    h.tb(std::path::Path::new("/"))
        .arg("list")
        .assert()
        .code(1)
        .stderr(predicates::str::contains("is a file-system root"));
    assert!(h.data_files().is_empty());
    Ok(())
}
