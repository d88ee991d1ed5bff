//! Root discovery: `--root`, else the nearest ancestor of the current
//! directory holding `.turnback/`, else the current directory.

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
