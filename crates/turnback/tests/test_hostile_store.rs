//! A store damaged on purpose, the way a crash, a disk or the agent it
//! protects (it lives in the project) could damage it: every byte of a
//! small valid log flipped, the log cut at every offset, its lines deleted,
//! duplicated, swapped and spliced from another store, and packs corrupted
//! or replaced by a symlink, a directory, a FIFO or a hard link to a file
//! outside. Opening never panics and either refuses with an error or opens;
//! nothing outside the store is ever written; a damaged blob never reaches
//! the project, and turns whose blobs are whole still rewind exactly.
//!
//! `TURNBACK_LONG=1` flips every bit of every byte (CI: three bit
//! patterns per byte).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use turnback::log;
use turnback::{RewindOptions, Store, TurnId};

use crate::common::{Project, TestResult, Tree, assert_same, snapshot, turn};

fn long_mode() -> bool {
    std::env::var("TURNBACK_LONG").is_ok_and(|v| v == "1")
}

/// t1 (a changed file, a new one in a new directory) and t2 (a removed
/// symlink, a changed file), then t2 rewound and the rewind undone.
fn two_turns_rewound_and_undone(p: &Project) -> TestResult<Store> {
    p.write("a.txt", "alpha\n")?;
    p.write("b.txt", "beta\n")?;
    std::os::unix::fs::symlink("a.txt", p.path("link"))?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, Some("one"), "a.txt", b"alpha by t1\n")?;
    store.write(&turn("t1")?, None, "dir/new.txt", b"new by t1\n")?;
    store.capture(&turn("t2")?, None, "link")?;
    std::fs::remove_file(p.path("link"))?;
    store.write(&turn("t2")?, None, "b.txt", b"beta by t2\n")?;
    store.rewind(&turn("t2")?, &RewindOptions::default())?;
    store.undo()?;
    Ok(store)
}

/// A project whose log holds every kind of record: captures (file, absent,
/// symlink pre-images; blobs), seals, saved, rewind, undo, redo, revert.
fn varied_store() -> TestResult<Project> {
    let p = Project::new()?;
    let mut store = two_turns_rewound_and_undone(&p)?;
    store.redo()?;
    store.write(&turn("t3")?, None, "c.txt", b"gamma by t3\n")?;
    store.revert(&turn("t3")?, &turnback::RevertOptions::default())?;
    Ok(p)
}

/// Opens the store after the log was replaced by `bytes`: never a panic;
/// if it opens, every live turn's rewind can be planned.
fn open_damaged(p: &Project, bytes: &[u8], what: &str) -> TestResult<Option<Vec<String>>> {
    std::fs::write(p.log_path(), bytes)?;
    let opened = catch_unwind(AssertUnwindSafe(|| {
        Store::open(&p.root).and_then(|s| {
            let ids: Vec<TurnId> = s.turns()?.iter().map(|t| t.id.clone()).collect();
            for id in &ids {
                // Planning reads nothing but the index: it must not fail
                // on a log that opened.
                s.plan_rewind(id)
                    .expect("a live turn's rewind can be planned");
            }
            Ok(ids.iter().map(|t| t.to_string()).collect::<Vec<_>>())
        })
    }))
    .map_err(|_| format!("{what}: opening panicked"))?;
    Ok(opened.ok())
}

#[test]
fn every_flipped_byte_and_every_cut_of_the_log_is_refused_or_opens() -> TestResult {
    let p = varied_store()?;
    let good = std::fs::read(p.log_path())?;
    let outside = snapshot(&p.outside(), &[])?;
    let project = p.snapshot()?;
    let lines = good.iter().filter(|&&b| b == b'\n').count();
    // CI: one flip per byte, the bit cycling through 0x01, 0x20 (letter
    // case, hex digits) and 0x80; the long mode flips all eight.
    let patterns = [0x01u8, 0x20, 0x80];
    let (mut refused, mut opened, mut flips) = (0, 0, 0);
    for i in 0..good.len() {
        let bits: Vec<u8> = if long_mode() {
            (0..8).map(|b| 1 << b).collect()
        } else {
            vec![patterns[i % patterns.len()]]
        };
        for &bit in &bits {
            flips += 1;
            let mut m = good.clone();
            m[i] ^= bit;
            match open_damaged(&p, &m, &format!("byte {i} ^ {bit:#x}"))? {
                None => refused += 1,
                Some(_) => {
                    // Only a flip that turns the last newline into another
                    // byte leaves a log that opens (its final line is then
                    // torn, and ignored).
                    assert_eq!(i, good.len() - 1, "a flip at {i} ^ {bit:#x} went unnoticed");
                    opened += 1;
                }
            }
        }
    }
    // Every cut: a torn final line is ignored, nothing else is lost.
    let full = Store::open(&p.root).map(|_| ()).err();
    assert!(full.is_none());
    let mut cuts_opened = 0;
    let mut by_whole: std::collections::HashMap<usize, Vec<String>> = Default::default();
    for k in 0..=good.len() {
        let cut = &good[..k];
        // The same as the log of the complete lines before the cut.
        let whole = cut.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
        if let std::collections::hash_map::Entry::Vacant(e) = by_whole.entry(whole) {
            e.insert(open_damaged(&p, &good[..whole], "whole lines")?.ok_or("whole lines open")?);
        }
        let turns = open_damaged(&p, cut, &format!("cut at {k}"))?
            .ok_or_else(|| format!("the log cut at {k} does not open"))?;
        assert_eq!(turns, by_whole[&whole], "cut at {k}");
        cuts_opened += 1;
    }
    std::fs::write(p.log_path(), &good)?;
    assert_same(&outside, &snapshot(&p.outside(), &[])?, "outside the root");
    assert_same(&project, &p.snapshot()?, "the project");
    println!(
        "hostile-store log: {} bytes in {lines} records; {flips} flips: {refused} refused, {opened} opened (final newline flipped); {cuts_opened} cuts all opened with their whole lines",
        good.len(),
    );
    Ok(())
}

#[test]
fn deleted_duplicated_swapped_and_spliced_lines_never_panic_or_escape() -> TestResult {
    let p = varied_store()?;
    let other = varied_store()?;
    let good = std::fs::read(p.log_path())?;
    let foreign = std::fs::read(other.log_path())?;
    let lines: Vec<&[u8]> = good.split_inclusive(|&b| b == b'\n').collect();
    let alien: Vec<&[u8]> = foreign.split_inclusive(|&b| b == b'\n').collect();
    let outside = snapshot(&p.outside(), &[])?;
    let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..lines.len() {
        let mut v = lines.clone();
        v.remove(i);
        variants.push((format!("line {} deleted", i + 1), v.concat()));
        let mut v = lines.clone();
        v.insert(i, lines[i]);
        variants.push((format!("line {} doubled", i + 1), v.concat()));
        if i + 1 < lines.len() {
            let mut v = lines.clone();
            v.swap(i, i + 1);
            variants.push((format!("lines {} and {} swapped", i + 1, i + 2), v.concat()));
        }
        for (j, a) in alien.iter().enumerate() {
            let mut v = lines.clone();
            v[i] = a;
            variants.push((
                format!(
                    "line {} replaced by the other store's line {}",
                    i + 1,
                    j + 1
                ),
                v.concat(),
            ));
        }
    }
    let mut rev = lines.clone();
    rev.reverse();
    variants.push(("reversed".into(), rev.concat()));
    variants.push(("the other store's log".into(), foreign.clone()));
    let (mut refused, mut opened, mut rewound) = (0, 0, 0);
    for (what, bytes) in &variants {
        match open_damaged(&p, bytes, what)? {
            None => refused += 1,
            Some(turns) => {
                opened += 1;
                // Whatever opens may be rewound: in a copy, no panic, and
                // nothing written outside.
                for id in turns {
                    let copy = p.parent().join("copy");
                    copy_dir(&p.root, &copy)?;
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        Store::open(&copy).and_then(|mut s| {
                            s.rewind(&TurnId::new(id.as_str())?, &RewindOptions::default())
                        })
                    }))
                    .map_err(|_| format!("{what}: rewind of {id} panicked"))?;
                    rewound += usize::from(result.is_ok());
                    std::fs::remove_dir_all(&copy)?;
                }
            }
        }
    }
    std::fs::write(p.log_path(), &good)?;
    assert_same(&outside, &snapshot(&p.outside(), &[])?, "outside the root");
    println!(
        "hostile-store lines: {} variants of a {}-line log: {refused} refused, {opened} opened ({rewound} rewinds of their live turns ran, none escaped)",
        variants.len(),
        lines.len()
    );
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> TestResult {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = std::fs::symlink_metadata(&src)?.file_type();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if ft.is_dir() {
            copy_dir(&src, &dst)?;
        } else if ft.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Two turns, each with its own pack: t1's holds a.txt's pre-image, t2's
/// b.txt's. Returns the project, the folder before each turn, and t1's pack.
fn two_packs() -> TestResult<(Project, Tree, Tree, std::path::PathBuf)> {
    let p = Project::new()?;
    p.write(
        "a.txt",
        "alpha before t1, long enough to be its own frame\n",
    )?;
    p.write("b.txt", "beta before t2\n")?;
    let before1 = p.snapshot()?;
    let mut store = p.open()?;
    store.write(&turn("t1")?, None, "a.txt", b"alpha by t1\n")?;
    let before2 = p.snapshot()?;
    store.write(&turn("t2")?, None, "b.txt", b"beta by t2\n")?;
    let recs = p.records()?;
    let pack = recs
        .iter()
        .find_map(|r| match &r.op {
            log::Op::Capture {
                turn,
                pack: Some(pack),
                ..
            } if turn.as_str() == "t1" => Some(pack.clone()),
            _ => None,
        })
        .ok_or("t1 wrote a pack")?;
    let pack = crate::common::store_dir(&p.root).join("packs").join(pack);
    Ok((p, before1, before2, pack))
}

#[test]
fn a_damaged_or_replaced_pack_never_reaches_the_project() -> TestResult {
    type Damage = fn(&Path, &Path) -> TestResult;
    let damages: Vec<(&str, Damage)> = vec![
        ("a flipped byte in its frame", |pack, _| {
            let mut b = std::fs::read(pack)?;
            let i = b.len() - 3;
            b[i] ^= 0x40;
            replace(pack, &b)
        }),
        ("cut in half", |pack, _| {
            let b = std::fs::read(pack)?;
            replace(pack, &b[..b.len() / 2])
        }),
        ("deleted", |pack, _| Ok(std::fs::remove_file(pack)?)),
        ("a symlink to an outside copy of it", |pack, outside| {
            let copy = outside.join("pack-copy");
            std::fs::copy(pack, &copy)?;
            std::fs::remove_file(pack)?;
            std::os::unix::fs::symlink(&copy, pack)?;
            Ok(())
        }),
        ("a directory", |pack, _| {
            std::fs::remove_file(pack)?;
            std::fs::create_dir(pack)?;
            Ok(())
        }),
        ("a FIFO", |pack, _| {
            std::fs::remove_file(pack)?;
            let made = std::process::Command::new("mkfifo").arg(pack).status()?;
            assert!(made.success(), "mkfifo {}: {made}", pack.display());
            Ok(())
        }),
        (
            "a hard link to an outside file of other bytes",
            |pack, outside| {
                let other = outside.join("other-bytes");
                let mut b = std::fs::read(pack)?;
                let i = b.len() - 3;
                b[i] ^= 0x01;
                std::fs::write(&other, &b)?;
                std::fs::remove_file(pack)?;
                std::fs::hard_link(&other, pack)?;
                Ok(())
            },
        ),
    ];
    for (what, damage) in &damages {
        let (p, before1, before2, pack) = two_packs()?;
        damage(&pack, &p.outside())?;
        let outside = snapshot(&p.outside(), &[])?;
        let now = p.snapshot()?;

        // Rewinding t2 needs only t2's pack: exact.
        let copy = p.parent().join("copy-t2");
        copy_dir(&p.root, &copy)?;
        let report = Store::open(&copy)?.rewind(&turn("t2")?, &RewindOptions::default())?;
        assert!(
            report.complete(),
            "{what}: rewind of t2: {:?}",
            report.failed
        );
        assert_same(
            &before2,
            &snapshot(&copy, &[".turnback"])?,
            &format!("{what}: rewind of t2"),
        );

        // Rewinding t1 needs the damaged pack: a.txt is refused and keeps
        // its bytes; b.txt (t2's) is restored.
        let result = Store::open(&p.root)?.rewind(&turn("t1")?, &RewindOptions::default());
        let after = p.snapshot()?;
        match result {
            Ok(report) => {
                let failed: Vec<&str> = report.failed.iter().map(|f| f.path.as_str()).collect();
                assert_eq!(failed, ["a.txt"], "{what}: {:?}", report.failed);
                assert_eq!(
                    after.get("a.txt"),
                    now.get("a.txt"),
                    "{what}: a.txt changed"
                );
                assert_eq!(
                    after.get("b.txt"),
                    before1.get("b.txt"),
                    "{what}: b.txt not restored"
                );
            }
            Err(e) => {
                assert_same(&now, &after, &format!("{what}: a refused rewind ({e})"));
            }
        }
        assert_same(
            &outside,
            &snapshot(&p.outside(), &[])?,
            &format!("{what}: outside"),
        );
    }
    println!(
        "hostile-store packs: {} kinds of damage to a pack: the blob refused, the other turn exact, nothing outside written",
        damages.len()
    );
    Ok(())
}

fn replace(pack: &Path, bytes: &[u8]) -> TestResult {
    std::fs::remove_file(pack)?;
    std::fs::write(pack, bytes)?;
    Ok(())
}

#[test]
fn gc_with_a_huge_keep_days_keeps_old_turns() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    let mut store = p.open()?;
    store.write(&turn("old1")?, None, "a.txt", b"a1\n")?;
    store.write(&turn("old2")?, None, "a.txt", b"a2\n")?;
    drop(store);
    // The turns began an hour ago.
    let hour_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64
        - 3_600_000_000_000;
    let mut records = p.records()?;
    for r in &mut records {
        r.at = hour_ago + r.seq;
    }
    std::fs::write(
        p.log_path(),
        records.iter().flat_map(log::encode).collect::<Vec<u8>>(),
    )?;
    // 213,504 days (585 years) is "keep forever"; in nanoseconds it no
    // longer fits in 64 bits.
    for days in [213_504u64, 1_000_000_000, u64::MAX] {
        let mut store = p.open()?;
        let report = store.gc(&turnback::GcOptions {
            keep_days: Some(days),
            ..turnback::GcOptions::default()
        })?;
        assert!(
            report.dropped_turns.is_empty(),
            "keep_days {days} dropped {:?}",
            report.dropped_turns
        );
        assert_eq!(store.turns()?.len(), 2, "keep_days {days}");
    }
    Ok(())
}

/// Five live turns (file, new-directory, symlink and delete pre-images, a
/// rewind undone in between), so damage to any line leaves turns after it.
fn five_turns() -> TestResult<Project> {
    let p = Project::new()?;
    let mut store = two_turns_rewound_and_undone(&p)?;
    store.write(&turn("t3")?, Some("three"), "c.txt", b"gamma by t3\n")?;
    store.write(&turn("t4")?, None, "b.txt", b"beta by t4\n")?;
    store.capture(&turn("t5")?, None, "a.txt")?;
    std::fs::remove_file(p.path("a.txt"))?;
    store.seal(&turn("t5")?)?;
    Ok(p)
}

/// The folder after rewinding `id` in a copy of `root` (the copy's store
/// must open).
fn rewound_in_copy(root: &Path, copy: &Path, id: &str) -> TestResult<Tree> {
    if copy.exists() {
        std::fs::remove_dir_all(copy)?;
    }
    copy_dir(root, copy)?;
    let mut store = Store::open(copy)?;
    let report = store.rewind(&TurnId::new(id)?, &RewindOptions::default())?;
    let tree = snapshot(copy, &[".turnback"])?;
    if !report.complete() {
        return Err(format!("rewind of {id} did not restore every path").into());
    }
    Ok(tree)
}

#[test]
fn repair_sets_damaged_lines_aside_and_turns_verify_calls_whole_rewind_as_before() -> TestResult {
    let p = five_turns()?;
    let good = std::fs::read(p.log_path())?;
    let lines: Vec<&[u8]> = good.split_inclusive(|&b| b == b'\n').collect();
    let outside = snapshot(&p.outside(), &[])?;
    let project = p.snapshot()?;
    let work = p.parent().join("repair-work");
    let copy = p.parent().join("repair-copy");
    // What each live turn's rewind gives with the undamaged log.
    let live: Vec<String> = p
        .open()?
        .turns()?
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    assert_eq!(live, ["t1", "t2", "t3", "t4", "t5"]);
    let mut expected = std::collections::HashMap::new();
    for id in &live {
        expected.insert(id.clone(), rewound_in_copy(&p.root, &copy, id)?);
    }
    // The damage: in CI three flipped bytes per line (its first, middle and
    // last before the newline) and the line replaced by garbage; in the long
    // mode every byte of every line.
    let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
    let mut start = 0;
    for (i, line) in lines.iter().enumerate() {
        let body = line.len() - 1;
        let offsets: Vec<usize> = if long_mode() {
            (0..body).collect()
        } else {
            vec![0, body / 2, body - 1]
        };
        for o in offsets {
            let mut m = good.clone();
            m[start + o] ^= 0x01;
            variants.push((format!("line {} byte {o} flipped", i + 1), m));
        }
        let mut v = lines.clone();
        let garbage = b"{\"not\": \"a record\"}\n".to_vec();
        v[i] = &garbage;
        variants.push((format!("line {} replaced", i + 1), v.concat()));
        start += line.len();
    }
    let (mut cases, mut whole_turns, mut uncertain_turns, mut other_rewinds) = (0, 0, 0, 0);
    for (what, bytes) in &variants {
        if work.exists() {
            std::fs::remove_dir_all(&work)?;
        }
        copy_dir(&p.root, &work)?;
        std::fs::write(crate::common::store_dir(&work).join(log::LOG_FILE), bytes)?;
        assert!(
            Store::open(&work).is_err(),
            "{what}: the damage went unnoticed"
        );
        let before = turnback::verify_root(&work)?;
        let whole: Vec<String> = before.rewindable().map(|t| t.to_string()).collect();
        let report = catch_unwind(AssertUnwindSafe(|| turnback::repair_root(&work, false)))
            .map_err(|_| format!("{what}: repair panicked"))??;
        assert!(report.repaired, "{what}");
        assert!(!report.dropped.is_empty(), "{what}");
        let kept = std::fs::read(report.original_kept_at.as_ref().ok_or("kept")?)?;
        assert_eq!(&kept, bytes, "{what}: the original log is kept as it was");
        let store = Store::open(&work).map_err(|e| format!("{what}: after repair: {e}"))?;
        let now: Vec<String> = store.turns()?.iter().map(|t| t.id.to_string()).collect();
        drop(store);
        cases += 1;
        for id in &now {
            if whole.contains(id) {
                // verify called it whole: it rewinds exactly as before.
                let got = rewound_in_copy(&work, &copy, id)
                    .map_err(|e| format!("{what}: turn {id}: {e}"))?;
                assert_same(&expected[id], &got, &format!("{what}: rewind of {id}"));
                whole_turns += 1;
            } else {
                // Uncertain: it may restore less, but never panics and
                // never writes outside.
                uncertain_turns += 1;
                let r = catch_unwind(AssertUnwindSafe(|| rewound_in_copy(&work, &copy, id)))
                    .map_err(|_| format!("{what}: rewind of {id} panicked"))?;
                other_rewinds += usize::from(r.is_ok());
            }
        }
        assert_same(&outside, &snapshot(&p.outside(), &[])?, "outside the root");
    }
    assert_same(&project, &p.snapshot()?, "the project");
    assert!(whole_turns > 0, "some turns were checked exactly");
    println!(
        "hostile-store repair: {cases} damaged logs of {} lines repaired; {whole_turns} rewinds of turns verify called whole matched the undamaged store exactly; {uncertain_turns} rewinds of uncertain turns ran ({other_rewinds} complete), none escaped",
        lines.len()
    );
    Ok(())
}
