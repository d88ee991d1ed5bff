//! The trash (Linux, where a rename's free is deferred): a rewind gives each
//! file it replaces a second name in the trash, so its renames free
//! nothing; the names go later, and nothing depends on them.

use std::os::unix::fs::MetadataExt;

use turnback::{RewindOptions, TurnId};

use crate::common::*;

/// The trash, and whether it is on the project's device (it is used only
/// then).
fn trash_of(p: &Project, store: &turnback::Store) -> TestResult<(std::path::PathBuf, bool)> {
    let trash = store.trash_dir().ok_or("no data directory")?;
    let data = trash.parent().ok_or("a trash with no parent")?;
    let same = std::fs::metadata(data)?.dev() == std::fs::metadata(&p.root)?.dev();
    Ok((trash, same))
}

/// The names in the trash: in its buckets (`trash/<pid>-<k>/<n>`), as
/// `bucket/name`.
fn trash_names(trash: &std::path::Path) -> Vec<String> {
    let list = |dir: &std::path::Path| -> Vec<std::fs::DirEntry> {
        match std::fs::read_dir(dir) {
            Ok(entries) => entries.filter_map(|e| e.ok()).collect(),
            Err(_) => Vec::new(),
        }
    };
    let mut names = Vec::new();
    for bucket in list(trash) {
        let b = bucket.file_name().to_string_lossy().into_owned();
        if !bucket.path().is_dir() {
            names.push(b);
            continue;
        }
        for e in list(&bucket.path()) {
            names.push(format!("{b}/{}", e.file_name().to_string_lossy()));
        }
    }
    names
}

#[test]
fn a_rewind_keeps_the_replaced_files_in_the_trash_until_it_is_emptied() -> TestResult {
    let p = Project::new()?;
    for i in 0..5 {
        p.write(&format!("d/f{i}.txt"), format!("original {i}\n"))?;
    }
    let mut store = p.open_own()?;
    let t = TurnId::new("t1")?;
    let rels: Vec<String> = (0..5).map(|i| format!("d/f{i}.txt")).collect();
    // Written through turnback: their post-images are compared, so the
    // rewind reads them rather than keeping them aside in the store (see
    // `test_aside.rs`), and the trash gets their names.
    let mut agent_inodes = Vec::new();
    for (i, rel) in rels.iter().enumerate() {
        store.write(&t, None, rel, format!("agent {i}\n").as_bytes())?;
        agent_inodes.push(std::fs::metadata(p.path(rel))?.ino());
    }
    let report = store.rewind(&t, &RewindOptions::default())?;
    assert_eq!(report.restored.len(), 5, "{report:?}");
    for (i, rel) in rels.iter().enumerate() {
        assert_eq!(p.read(rel)?, format!("original {i}\n").into_bytes());
        assert_eq!(std::fs::metadata(p.path(rel))?.nlink(), 1, "{rel}");
    }
    let (trash, same_device) = trash_of(&p, &store)?;
    if !same_device {
        assert!(!store.trash_pending(), "a trash across devices");
        return Ok(());
    }
    // Each replaced file lives on as one name in the trash, bytes intact.
    assert!(store.trash_pending());
    let mut kept: Vec<u64> = trash_names(&trash)
        .iter()
        .map(|n| std::fs::metadata(trash.join(n)).map(|m| m.ino()))
        .collect::<Result<_, _>>()?;
    kept.sort();
    agent_inodes.sort();
    assert_eq!(kept, agent_inodes);
    assert_eq!(store.empty_trash(), 5);
    assert!(!store.trash_pending());
    assert!(!trash.exists(), "the emptied trash is removed");
    // The rewind can still be undone: the agent's bytes are in the store.
    store.undo()?;
    for (i, rel) in rels.iter().enumerate() {
        assert_eq!(p.read(rel)?, format!("agent {i}\n").into_bytes());
    }
    Ok(())
}

#[test]
fn the_next_mutation_empties_the_trash_before_it_reads_the_project() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "one\n")?;
    let mut store = p.open_own()?;
    store.capture(&TurnId::new("t1")?, None, "a.txt")?;
    let (trash, _) = trash_of(&p, &store)?;
    drop(store);
    // A crash between a link and its rename: the project file has a second
    // name in the trash.
    std::fs::create_dir_all(&trash)?;
    std::fs::hard_link(p.path("a.txt"), trash.join("1-0"))?;
    assert_eq!(std::fs::metadata(p.path("a.txt"))?.nlink(), 2);
    let mut store = p.open_own()?;
    assert!(store.trash_pending());
    store.capture(&TurnId::new("t2")?, None, "a.txt")?;
    assert!(!trash.exists(), "the trash was not emptied");
    assert_eq!(std::fs::metadata(p.path("a.txt"))?.nlink(), 1);
    // The capture saw one name: no hard-link group recorded.
    assert_last_turn_unlinked(&store)
}

/// A store kept in its project uses no trash: nothing of the project goes
/// to the data directory, and its rewinds free the files they replace.
#[test]
fn a_store_kept_in_the_project_uses_no_trash() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "one\n")?;
    let mut store = p.open_own()?;
    store.capture(&TurnId::new("t1")?, None, "a.txt")?;
    drop(store);
    turnback::location::move_store(&p.root, Some(&p.parent().join("data")), true)?;
    let mut store = p.open_own()?;
    assert!(
        store.store_dir().starts_with(&p.root),
        "{:?}",
        store.store_dir()
    );
    p.write("a.txt", "agent\n")?;
    let agent_inode = std::fs::metadata(p.path("a.txt"))?.ino();
    let (trash, _) = trash_of(&p, &store)?;
    store.rewind(&TurnId::new("t1")?, &RewindOptions::default())?;
    assert_eq!(p.read("a.txt")?, b"one\n");
    assert!(!store.trash_pending());
    assert!(
        trash_names(&trash).is_empty(),
        "{agent_inode} kept in {}",
        trash.display()
    );
    Ok(())
}
