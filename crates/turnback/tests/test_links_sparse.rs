//! Exact rewinds of hard-linked and sparse files: names that were one file
//! are one file again, and holes stay holes. Every case compares the whole
//! folder (paths, types, modes, bytes, link targets and link groups).

use std::os::unix::fs::MetadataExt;

use turnback::RewindOptions;

use crate::common::{Project, State, TestResult, assert_same_state, turn};

fn link(p: &Project, from: &str, to: &str) -> TestResult {
    if let Some(parent) = p.path(to).parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::hard_link(p.path(from), p.path(to))?;
    Ok(())
}

/// Rewinds t1, then undoes and redoes it, comparing the whole folder with
/// `before` and `after` each time.
fn round_trip(p: &Project, before: &State, after: &State) -> TestResult {
    let t1 = turn("t1")?;
    let mut store = p.open()?;
    let r = store.rewind(&t1, &RewindOptions::default())?;
    assert!(r.complete() && r.links_split.is_empty(), "{r:?}");
    assert!(r.conflicts.is_empty(), "{:?}", r.conflicts);
    assert_same_state(before, &p.state()?, "after the rewind");
    let r = store.undo()?;
    assert!(r.complete() && r.links_split.is_empty(), "{r:?}");
    assert_same_state(after, &p.state()?, "after the undo");
    let r = store.redo()?;
    assert!(r.complete() && r.links_split.is_empty(), "{r:?}");
    assert_same_state(before, &p.state()?, "after the redo");
    Ok(())
}

#[test]
fn a_write_through_one_name_reaches_every_name_and_rewinds_as_one_file() -> TestResult {
    let p = Project::new()?;
    p.write("a", "one\n")?;
    link(&p, "a", "b")?;
    link(&p, "a", "sub/c")?;
    p.write("other", "alone\n")?;
    let before = p.state()?;
    assert_eq!(before.links.len(), 1, "{:?}", before.links);
    let mut store = p.open()?;
    let report = store.write(&turn("t1")?, None, "a", b"two\n")?;
    let captured: Vec<&str> = report.captured.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(captured, ["a", "b", "sub/c"]);
    // As after a plain write: every name sees the new bytes, still one file.
    for name in ["a", "b", "sub/c"] {
        assert_eq!(p.read(name)?, b"two\n", "{name}");
    }
    let after = p.state()?;
    assert_eq!(after.links, before.links);
    drop(store);
    round_trip(&p, &before, &after)
}

#[test]
fn an_in_place_write_by_the_agent_rewinds_as_one_file() -> TestResult {
    let p = Project::new()?;
    p.write("a", "one\n")?;
    link(&p, "a", "b")?;
    let before = p.state()?;
    let mut store = p.open()?;
    store.capture(&turn("t1")?, None, "a")?;
    // The agent's own tool truncates and writes in place: both names change.
    std::fs::write(p.path("a"), "two\n")?;
    store.seal(&turn("t1")?)?;
    let after = p.state()?;
    assert_eq!(p.read("b")?, b"two\n");
    drop(store);
    round_trip(&p, &before, &after)
}

#[test]
fn removing_one_name_rewinds_to_the_linked_file() -> TestResult {
    let p = Project::new()?;
    p.write("a", "one\n")?;
    link(&p, "a", "b")?;
    let before = p.state()?;
    let mut store = p.open()?;
    store.remove_file(&turn("t1")?, None, "a")?;
    let after = p.state()?;
    drop(store);
    round_trip(&p, &before, &after)
}

#[test]
fn a_name_outside_the_project_is_reported_and_left_alone() -> TestResult {
    let p = Project::new()?;
    p.write("a", "one\n")?;
    let outside = p.outside().join("a-elsewhere");
    std::fs::hard_link(p.path("a"), &outside)?;
    let mut store = p.open()?;
    let report = store.write(&turn("t1")?, None, "a", b"two\n")?;
    let names: Vec<&str> = report
        .hard_links_outside
        .iter()
        .map(|r| r.as_str())
        .collect();
    assert_eq!(names, ["a"]);
    assert_eq!(std::fs::read(&outside)?, b"one\n");
    store.rewind(&turn("t1")?, &RewindOptions::default())?;
    assert_eq!(p.read("a")?, b"one\n");
    assert_eq!(std::fs::read(&outside)?, b"one\n");
    Ok(())
}

#[test]
fn a_sparse_file_comes_back_sparse() -> TestResult {
    let p = Project::new()?;
    let size: u64 = 64 << 20;
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(p.path("disk.img"))?;
        f.set_len(size)?;
        f.write_all_at(b"header", 0)?;
        f.write_all_at(&[7u8; 3000], 20 << 20)?;
        f.write_all_at(b"trailer", size - 7)?;
        f.sync_all()?;
    }
    let allocated = |p: &Project| -> TestResult<u64> {
        Ok(std::fs::metadata(p.path("disk.img"))?.blocks() * 512)
    };
    let sparse_before = allocated(&p)?;
    assert!(
        sparse_before < 1 << 20,
        "the file system made the test file dense ({sparse_before} bytes); it cannot test holes"
    );
    let before = p.state()?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "disk.img", b"small now\n")?;
    let after = p.state()?;
    drop(store);
    round_trip(&p, &before, &after)?;
    let restored = allocated(&p)?;
    assert!(
        restored <= sparse_before + (64 << 10),
        "restored with {restored} bytes on disk, the original had {sparse_before}"
    );
    assert_eq!(std::fs::metadata(p.path("disk.img"))?.len(), size);
    Ok(())
}

#[test]
fn undo_gives_back_a_link_made_after_the_turn() -> TestResult {
    let p = Project::new()?;
    p.write("a", "one\n")?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "a", b"two\n")?;
    // Someone links a second name to the agent's file after the turn.
    link(&p, "a", "b")?;
    let linked = p.state()?;
    assert_eq!(linked.links.len(), 1);
    let r = store.rewind(&turn("t1")?, &RewindOptions::default())?;
    assert!(r.complete(), "{r:?}");
    assert_eq!(p.read("a")?, b"one\n");
    assert_eq!(
        p.read("b")?,
        b"two\n",
        "a path no turn touched is left alone"
    );
    let r = store.undo()?;
    assert!(r.complete() && r.links_split.is_empty(), "{r:?}");
    assert_same_state(&linked, &p.state()?, "after the undo");
    Ok(())
}
