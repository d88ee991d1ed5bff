//! Where the store lives and how it is found: inside the project, with
//! paths relative to the root, so it moves with the folder.

use turnback::RewindOptions;

use crate::common::{Project, TestResult, assert_same, turn};

#[test]
fn moved_project_keeps_a_working_store() -> TestResult {
    let p = Project::new()?;
    p.write("src/app.js", "v1\n")?;
    p.write("README.md", "readme\n")?;
    let before = p.snapshot()?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "src/app.js", b"v2\n")?;
    store.write(&t1, None, "src/new/theme.css", b"body {}\n")?;
    drop(store);
    let after_turn = p.snapshot()?;

    // A copy, made the way a user would.
    let copy = p.parent().join("copy");
    crate::common::copy_dir(&p.root, &copy)?;
    let mut in_copy = turnback::Store::open(&copy)?;
    assert_eq!(in_copy.turns()?.len(), 1);
    let report = in_copy.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_same(
        &before,
        &crate::common::snapshot(&copy, &[".turnback"])?,
        "the rewound copy",
    );
    // The original is left as the turn made it.
    assert_same(&after_turn, &p.snapshot()?, "the original");

    // The original, moved to another name, rewinds in its new place.
    let moved = p.parent().join("moved");
    std::fs::rename(&p.root, &moved)?;
    let mut in_moved = turnback::Store::open(&moved)?;
    let report = in_moved.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_same(
        &before,
        &crate::common::snapshot(&moved, &[".turnback"])?,
        "the rewound moved folder",
    );
    Ok(())
}

#[test]
fn root_is_the_nearest_ancestor_holding_a_store() -> TestResult {
    let p = Project::new()?;
    let deep = p.path("a/b/c");
    std::fs::create_dir_all(&deep)?;
    // No store yet: the directory itself is the root.
    assert_eq!(turnback::discover_root(&deep)?, deep);
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "a/b/c/file.txt", b"x")?;
    assert_eq!(turnback::discover_root(&deep)?, p.root);
    // A nearer store wins.
    let mut inner = turnback::Store::open(p.path("a"))?;
    inner.write(&turn("t1")?, None, "b/other.txt", b"y")?;
    assert_eq!(turnback::discover_root(&deep)?, p.path("a"));
    Ok(())
}
