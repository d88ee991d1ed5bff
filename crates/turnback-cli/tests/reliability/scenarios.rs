//! The states the fault tests start from, built through the library (the
//! same code as the binary), each with the folder as it was before every
//! turn, and the command to interrupt.

use std::path::Path;

use turnback::{GcOptions, RewindOptions, Store, TurnId};

use crate::harness::*;

/// A command to interrupt, in the state it starts from.
pub struct Scenario {
    pub name: &'static str,
    /// The lab before the command (copied for every run).
    pub template: Lab,
    pub inv: Invocation,
    /// The project before the command.
    pub before: Tree,
    /// The project after the complete command (from a plain run).
    pub after: Tree,
    /// The live turns after the complete command.
    pub final_live: Vec<String>,
    /// Checks right after a fault.
    pub mid: Checker,
    /// Checks after recovery and the rerun (and `post`).
    pub fin: Checker,
    /// Whether the interrupted command must be run again (its effect is
    /// not in the store yet).
    pub rerun: fn(&Lab, &[u8]) -> Res<bool>,
    /// What an agent does once the command has succeeded (writes the files
    /// it captured), so that the rewind checks compare real changes.
    pub post: Option<fn(&Path) -> Res>,
    /// Run in every copy of the template before the command (a copy has
    /// new inodes and times, which a snapshot's tree state must see again
    /// for a scan to find nothing changed).
    pub prepare: Option<fn(&Path) -> Res>,
}

impl Scenario {
    /// A fresh copy of the template, prepared.
    pub fn lab(&self) -> Res<Lab> {
        let lab = Lab::copy_of(&self.template)?;
        if let Some(prepare) = self.prepare {
            prepare(&lab.root)?;
        }
        Ok(lab)
    }
}

fn t(id: &str) -> TurnId {
    TurnId::new(id).expect("valid turn id")
}

/// Poorly compressible bytes.
pub fn noise(len: usize, mut x: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The files every scenario starts with.
fn initial(root: &Path) -> Res {
    put(root, "a.txt", b"alpha\n", 0o644)?;
    put(root, "bin/run.sh", b"#!/bin/sh\necho run\n", 0o755)?;
    put(root, "docs/readme.md", b"# readme\n", 0o600)?;
    put(root, "big.bin", &noise(48 << 10, 7), 0o644)?;
    Ok(())
}

fn always(_: &Lab, _: &[u8]) -> Res<bool> {
    Ok(true)
}

fn count_ops(bytes: &[u8], want: fn(&turnback::log::Op) -> bool) -> usize {
    turnback::log::parse(bytes, 1)
        .lines
        .into_iter()
        .filter_map(|(_, r)| r.ok())
        .filter(|r| want(&r.op))
        .count()
}

/// Finishes a scenario: runs the command once plainly in a copy to learn
/// the complete outcome.
#[allow(clippy::too_many_arguments)]
fn finish(
    name: &'static str,
    template: Lab,
    inv: Invocation,
    mid: Checker,
    fin: Checker,
    rerun: fn(&Lab, &[u8]) -> Res<bool>,
    post: Option<fn(&Path) -> Res>,
) -> Res<Scenario> {
    let before = project_tree(&template.root)?;
    let reference = Lab::copy_of(&template)?;
    let out = run(&reference.root, &inv, &[])?;
    if !out.status.success() {
        return Err(format!("{name}: the plain run failed:\n{}", texts(&out)).into());
    }
    let after = project_tree(&reference.root)?;
    let final_live = Store::open(&reference.root)?
        .turns()?
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    Ok(Scenario {
        name,
        template,
        inv,
        before,
        after,
        final_live,
        mid,
        fin,
        rerun,
        post,
        prepare: None,
    })
}

fn checker(lab: &Lab, must: Vec<(String, Tree)>, may: Vec<(String, Tree)>) -> Res<Checker> {
    Ok(Checker {
        must_live: must,
        may_live: may,
        canary: snapshot(&lab.canary, &[])?,
        log_may_be_rewritten: false,
    })
}

/// `capture --turn t2` of three files (one large) and a path in a new
/// directory, after a turn t1.
pub fn capture() -> Res<Scenario> {
    let lab = Lab::new()?;
    initial(&lab.root)?;
    let tree0 = project_tree(&lab.root)?;
    let mut store = Store::open(&lab.root)?;
    store.write(&t("t1"), Some("first"), "a.txt", b"alpha v2\n")?;
    drop(store);
    let tree1 = project_tree(&lab.root)?;
    let inv = Invocation::new(&[
        "capture",
        "--turn",
        "t2",
        "a.txt",
        "bin/run.sh",
        "big.bin",
        "new/dir/file.txt",
    ]);
    let mid = checker(
        &lab,
        vec![("t1".into(), tree0.clone())],
        vec![("t2".into(), tree1.clone())],
    )?;
    let fin = checker(
        &lab,
        vec![("t1".into(), tree0), ("t2".into(), tree1)],
        vec![],
    )?;
    fn post(root: &Path) -> Res {
        put(root, "a.txt", b"alpha v3 by the agent\n", 0o644)?;
        put(root, "bin/run.sh", b"#!/bin/sh\necho changed\n", 0o700)?;
        put(root, "big.bin", &noise(40 << 10, 9), 0o644)?;
        put(root, "new/dir/file.txt", b"created\n", 0o644)?;
        Ok(())
    }
    finish("capture", lab, inv, mid, fin, always, Some(post))
}

/// `capture --turn t1` of two files in a project without a store yet: the
/// store, `packs/`, its files and the log are all made by the command.
pub fn capture_first() -> Res<Scenario> {
    let lab = Lab::new()?;
    initial(&lab.root)?;
    let tree0 = project_tree(&lab.root)?;
    let inv = Invocation::new(&["capture", "--turn", "t1", "a.txt", "big.bin"]);
    let mid = checker(&lab, vec![], vec![("t1".into(), tree0.clone())])?;
    let fin = checker(&lab, vec![("t1".into(), tree0)], vec![])?;
    finish("capture-first", lab, inv, mid, fin, always, None)
}

/// `capture --turn next a.txt` after 600 turns, whose log (over 256 KiB)
/// makes the command write the index checkpoint (`.turnback/index`, renamed
/// into place without an fsync: a cache). Only the last two turns are
/// checked by rewinding; the earlier ones by the log staying a prefix.
pub fn capture_after_long_log() -> Res<Scenario> {
    let lab = Lab::new()?;
    initial(&lab.root)?;
    let mut store = Store::open(&lab.root)?;
    let mut trees = Vec::new();
    for i in 0..600 {
        trees.push(project_tree(&lab.root)?);
        store.capture(&t(&format!("t{i}")), None, "a.txt")?;
        put(&lab.root, "a.txt", format!("alpha {i}\n").as_bytes(), 0o644)?;
    }
    drop(store);
    let now = project_tree(&lab.root)?;
    let last: Vec<(String, Tree)> = [598, 599]
        .iter()
        .map(|&i| (format!("t{i}"), trees[i].clone()))
        .collect();
    let inv = Invocation::new(&["capture", "--turn", "next", "a.txt"]);
    let mid = checker(&lab, last.clone(), vec![("next".into(), now.clone())])?;
    let mut all = last;
    all.push(("next".into(), now));
    let fin = checker(&lab, all, vec![])?;
    finish("capture-long-log", lab, inv, mid, fin, always, None)
}

/// `write --turn t2 docs/readme.md` (mode 600 kept) after a turn t1.
pub fn write() -> Res<Scenario> {
    write_after_t1(
        "write",
        "docs/readme.md",
        b"# readme, rewritten by the agent\n",
    )
}

/// `write --turn t2 notes/2026/plan.md`: a new file (mode 644) in two new
/// directories, after a turn t1.
pub fn write_new() -> Res<Scenario> {
    write_after_t1(
        "write-new",
        "notes/2026/plan.md",
        b"# plan, written by the agent\n",
    )
}

/// `write --turn t2 PATH` with `bytes` on its input, after a turn t1 that
/// wrote a.txt through the library.
fn write_after_t1(name: &'static str, path: &str, bytes: &[u8]) -> Res<Scenario> {
    let lab = Lab::new()?;
    initial(&lab.root)?;
    let tree0 = project_tree(&lab.root)?;
    let mut store = Store::open(&lab.root)?;
    store.write(&t("t1"), None, "a.txt", b"alpha v2\n")?;
    drop(store);
    let tree1 = project_tree(&lab.root)?;
    let inv = Invocation::new(&["write", "--turn", "t2", path]).with_stdin(bytes);
    let mid = checker(
        &lab,
        vec![("t1".into(), tree0.clone())],
        vec![("t2".into(), tree1.clone())],
    )?;
    let fin = checker(
        &lab,
        vec![("t1".into(), tree0), ("t2".into(), tree1)],
        vec![],
    )?;
    finish(name, lab, inv, mid, fin, always, None)
}

/// Three turns: t0 (a file), t1 (a changed file, a new file in a new
/// directory, a file whose bytes and mode the agent changed), t2 (a
/// deleted file, a new symlink, a large file rewritten). Returns the lab
/// and the folder before each turn and now.
fn three_turns() -> Res<(Lab, [Tree; 4])> {
    let lab = Lab::new()?;
    initial(&lab.root)?;
    let r = &lab.root;
    let before0 = project_tree(r)?;
    let mut store = Store::open(r)?;
    store.write(&t("t0"), None, "z.txt", b"zed\n")?;
    let before1 = project_tree(r)?;
    store.write(&t("t1"), None, "a.txt", b"alpha by t1\n")?;
    store.write(&t("t1"), None, "gen/new.txt", b"generated by t1\n")?;
    store.capture(&t("t1"), None, "bin/run.sh")?;
    put(r, "bin/run.sh", b"#!/bin/sh\necho t1\n", 0o700)?;
    let before2 = project_tree(r)?;
    store.capture_many(&t("t2"), None, &["docs/readme.md", "link", "big.bin"])?;
    std::fs::remove_file(r.join("docs/readme.md"))?;
    std::os::unix::fs::symlink("a.txt", r.join("link"))?;
    put(r, "big.bin", &noise(50 << 10, 11), 0o644)?;
    store.seal(&t("t2"))?;
    drop(store);
    let now = project_tree(r)?;
    Ok((lab, [before0, before1, before2, now]))
}

fn turn_live(lab: &Lab, id: &str) -> Res<bool> {
    Ok(Store::open(&lab.root)?.turn(&t(id)).is_ok())
}

/// `rewind t1` (undoing t1 and t2; t0 stays). Its four files are above the
/// per-file flush threshold, so it makes them durable with `syncfs`.
pub fn rewind() -> Res<Scenario> {
    rewind_flushed("rewind", Invocation::new(&["rewind", "t1"]))
}

/// The per-file durability of small rewinds (an `fsync` of every file
/// written and every directory changed instead of `syncfs`), forced for the
/// same four files by raising the threshold (`TURNBACK_FSYNC_AT_MOST`).
const PER_FILE: (&str, &str) = ("TURNBACK_FSYNC_AT_MOST", "64");

/// [`rewind`] made durable file by file.
pub fn rewind_per_file() -> Res<Scenario> {
    let inv = Invocation::new(&["rewind", "t1"]).with_env(PER_FILE.0, PER_FILE.1);
    rewind_flushed("rewind (per-file fsync)", inv)
}

fn rewind_flushed(name: &'static str, inv: Invocation) -> Res<Scenario> {
    let (lab, [b0, ..]) = three_turns()?;
    let mid = checker(&lab, vec![("t0".into(), b0.clone())], vec![])?;
    let fin = checker(&lab, vec![("t0".into(), b0)], vec![])?;
    fn rerun(lab: &Lab, _: &[u8]) -> Res<bool> {
        turn_live(lab, "t1")
    }
    finish(name, lab, inv, mid, fin, rerun, None)
}

/// `undo` of a `rewind t1`.
pub fn undo() -> Res<Scenario> {
    undo_flushed("undo", Invocation::new(&["undo"]))
}

/// [`undo`] made durable file by file (see [`rewind_per_file`]). It makes
/// `gen/` and stages `gen/.new.txt.turnback-tmp-*` in it: a fault there
/// leaves both until the next mutation rolls the undo back.
pub fn undo_per_file() -> Res<Scenario> {
    let inv = Invocation::new(&["undo"]).with_env(PER_FILE.0, PER_FILE.1);
    undo_flushed("undo (per-file fsync)", inv)
}

fn undo_flushed(name: &'static str, inv: Invocation) -> Res<Scenario> {
    let (lab, [b0, b1, b2, _]) = three_turns()?;
    Store::open(&lab.root)?.rewind(&t("t1"), &RewindOptions::default())?;
    let mid = checker(&lab, vec![("t0".into(), b0.clone())], vec![])?;
    let fin = checker(
        &lab,
        vec![("t0".into(), b0), ("t1".into(), b1), ("t2".into(), b2)],
        vec![],
    )?;
    fn rerun(lab: &Lab, before: &[u8]) -> Res<bool> {
        let is_undo = |op: &turnback::log::Op| matches!(op, turnback::log::Op::Undo { .. });
        Ok(count_ops(&lab.log_bytes(), is_undo) == count_ops(before, is_undo))
    }
    finish(name, lab, inv, mid, fin, rerun, None)
}

/// `gc --keep-turns 2` over five turns and a rewind: two turns dropped,
/// the log compacted, packs deleted.
pub fn gc() -> Res<Scenario> {
    let lab = Lab::new()?;
    initial(&lab.root)?;
    let r = &lab.root;
    let mut store = Store::open(r)?;
    let mut before = Vec::new();
    for i in 0..5 {
        before.push(project_tree(r)?);
        let id = format!("t{i}");
        store.write(&t(&id), None, "a.txt", format!("alpha {i}\n").as_bytes())?;
        store.write(
            &t(&id),
            None,
            format!("f{i}.txt"),
            &noise(2000 + i * 100, i as u64 + 1),
        )?;
    }
    store.rewind(&t("t4"), &RewindOptions::default())?;
    // Nothing dropped yet: the automatic gc after the rewind keeps 1000.
    store.gc(&GcOptions::default())?;
    drop(store);
    let inv = Invocation::new(&["gc", "--keep-turns", "2"]);
    let mut mid = checker(
        &lab,
        vec![
            ("t2".into(), before[2].clone()),
            ("t3".into(), before[3].clone()),
        ],
        vec![
            ("t0".into(), before[0].clone()),
            ("t1".into(), before[1].clone()),
        ],
    )?;
    mid.log_may_be_rewritten = true;
    let mut fin = mid.clone();
    fin.may_live.clear();
    finish("gc", lab, inv, mid, fin, always, None)
}

/// The automatic gc a background `turnback maintain` runs, over the same
/// five turns and rewind as [`gc`], with a config that keeps two turns and
/// checks after every capture: planned and written without the lock, put
/// in place under it.
pub fn maintain_gc() -> Res<Scenario> {
    let mut sc = gc()?;
    let store = Store::open(&sc.template.root)?;
    std::fs::write(
        store.store_dir().join("config.toml"),
        "[retention]\nkeep_turns = 2\n\n[gc]\nauto_every_captures = 1\n",
    )?;
    drop(store);
    sc.name = "maintain-gc";
    sc.inv = Invocation::new(&["maintain"]);
    // Its plain run ends where `gc --keep-turns 2` does.
    let reference = Lab::copy_of(&sc.template)?;
    let out = run(&reference.root, &sc.inv, &[])?;
    let live: Vec<String> = Store::open(&reference.root)?
        .turns()?
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    if !out.status.success() || live != sc.final_live {
        return Err(format!(
            "maintain-gc: the plain run left {live:?}, {:?} expected:\n{}",
            sc.final_live,
            texts(&out)
        )
        .into());
    }
    Ok(sc)
}

/// The files of the snapshot scenarios besides [`initial`]'s: a file to
/// rename, a script to make executable, and a git-ignored `.env` (covered:
/// a snapshot covers ignored files too).
fn initial_for_snapshots(root: &Path) -> Res {
    initial(root)?;
    put(root, ".gitignore", b"/.env\n", 0o644)?;
    put(root, ".env", b"TOKEN=one\n", 0o600)?;
    put(root, "notes.txt", b"notes to be renamed\n", 0o644)?;
    put(root, "tool.sh", b"#!/bin/sh\necho tool\n", 0o644)?;
    Ok(())
}

/// Recovery's gc drops from `snapshot` records the blobs the tree state no
/// longer names (and a capture names from its own pack entry), so after
/// recovery the log is rewritten, not appended to; right after the fault it
/// must still be a prefix.
const SNAPSHOT_LOG_COMPACTED: bool = true;

fn snapshot_half(root: &Path, turn: &str, after: bool) -> Res {
    Store::open(root)?.snapshot(&t(turn), None, after, &turnback::NoProgress)?;
    Ok(())
}

/// Whether the log holds a capture record of `turn`.
fn has_capture_of(bytes: &[u8], turn: &str) -> bool {
    turnback::log::parse(bytes, 1)
        .lines
        .into_iter()
        .filter_map(|(_, r)| r.ok())
        .any(|r| matches!(&r.op, turnback::log::Op::Capture { turn: x, .. } if x.as_str() == turn))
}

/// `snapshot --turn t-cmd --after`: the store holds the before half of
/// t-cmd, after which a shell command modified a file, created one in a new
/// directory, deleted one, renamed one, made one executable and modified
/// the git-ignored `.env`. Rewinding t-cmd must give back the folder before
/// the command, also after the next command's before half (`post`).
pub fn snapshot_after() -> Res<Scenario> {
    let lab = Lab::new()?;
    let r = &lab.root;
    initial_for_snapshots(r)?;
    snapshot_half(r, "t-cmd", false)?;
    let before_cmd = project_tree(r)?;
    // The command.
    put(r, "a.txt", b"alpha, changed by the command\n", 0o644)?;
    put(r, "gen/out/new.txt", b"made by the command\n", 0o644)?;
    std::fs::remove_file(r.join("docs/readme.md"))?;
    std::fs::rename(r.join("notes.txt"), r.join("notes-moved.txt"))?;
    std::fs::set_permissions(
        r.join("tool.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    put(r, ".env", b"TOKEN=two, set by the command\n", 0o600)?;
    let inv = Invocation::new(&["snapshot", "--turn", "t-cmd", "--after"]);
    let mid = checker(&lab, vec![], vec![("t-cmd".into(), before_cmd.clone())])?;
    let mut fin = checker(&lab, vec![("t-cmd".into(), before_cmd)], vec![])?;
    fin.log_may_be_rewritten = SNAPSHOT_LOG_COMPACTED;
    fn rerun(lab: &Lab, _: &[u8]) -> Res<bool> {
        Ok(!has_capture_of(&lab.log_bytes(), "t-cmd"))
    }
    fn post(root: &Path) -> Res {
        // The next command's before half. After a kill between the capture
        // record and the tree state, it finds the tree still pending for
        // t-cmd and must add nothing that changes t-cmd's rewind.
        snapshot_half(root, "t-next", false)
    }
    finish("snapshot-after", lab, inv, mid, fin, rerun, Some(post))
}

/// `snapshot --turn t2`, the before half of a second command: turn t1 was
/// a command (both halves: a file modified, one created in a new
/// directory), then the user edited files by hand (a file modified, one
/// created, `.env` modified). The before half must store the user's new
/// bytes: after it, the second command runs and its after half is taken
/// (`post`), and rewinding t2 must give back the user's edits.
pub fn snapshot_before() -> Res<Scenario> {
    let lab = Lab::new()?;
    let r = &lab.root;
    initial_for_snapshots(r)?;
    snapshot_half(r, "t1", false)?;
    let before_t1 = project_tree(r)?;
    put(r, "a.txt", b"alpha, changed by the first command\n", 0o644)?;
    put(r, "out/gen.txt", b"made by the first command\n", 0o644)?;
    snapshot_half(r, "t1", true)?;
    // The user's edits, outside any turn.
    put(r, "docs/readme.md", b"# readme, edited by hand\n", 0o600)?;
    put(r, "user.txt", b"written by hand\n", 0o644)?;
    put(r, ".env", b"TOKEN=edited by hand\n", 0o600)?;
    let edited = project_tree(r)?;
    // Rewinding t1 (and every later turn) restores t1's paths and keeps
    // the user's edits.
    let mut rewound_t1 = edited.clone();
    for k in ["a.txt", "out", "out/gen.txt"] {
        match before_t1.get(k) {
            Some(n) => rewound_t1.insert(k.to_string(), n.clone()),
            None => rewound_t1.remove(k),
        };
    }
    let inv = Invocation::new(&["snapshot", "--turn", "t2"]);
    let mid = checker(&lab, vec![("t1".into(), rewound_t1.clone())], vec![])?;
    let mut fin = checker(
        &lab,
        vec![("t1".into(), rewound_t1), ("t2".into(), edited)],
        vec![],
    )?;
    fin.log_may_be_rewritten = SNAPSHOT_LOG_COMPACTED;
    fn rerun(lab: &Lab, _: &[u8]) -> Res<bool> {
        // The before half's effect is the tree marked pending for t2.
        let st = Store::open(&lab.root)?.status(&turnback::NoProgress)?;
        Ok(!st
            .snapshot
            .is_some_and(|b| b.pending && b.turn.as_str() == "t2"))
    }
    fn post(root: &Path) -> Res {
        // The second command, then its after half.
        put(
            root,
            "docs/readme.md",
            b"# readme, by the second command\n",
            0o644,
        )?;
        std::fs::remove_file(root.join("user.txt"))?;
        put(
            root,
            "gen2/made.txt",
            b"made by the second command\n",
            0o644,
        )?;
        put(root, ".env", b"TOKEN=three\n", 0o600)?;
        snapshot_half(root, "t2", true)
    }
    finish("snapshot-before", lab, inv, mid, fin, rerun, Some(post))
}

/// `snapshot --turn t2` when nothing changed since turn t1's after half:
/// the tree state is not rewritten, only its head (`.turnback/tree-head`,
/// renamed into place without a sync: a cache) marks it pending for t2.
/// Every copy first takes t1's after half again (`prepare`), so the tree
/// state holds the copy's inodes and times. Then the second command runs
/// and its after half is taken (`post`): rewinding t2 must give back the
/// folder before it.
pub fn snapshot_unchanged() -> Res<Scenario> {
    let lab = Lab::new()?;
    let r = &lab.root;
    initial_for_snapshots(r)?;
    snapshot_half(r, "t1", false)?;
    let before_t1 = project_tree(r)?;
    put(r, "a.txt", b"alpha, changed by the first command\n", 0o644)?;
    snapshot_half(r, "t1", true)?;
    let now = project_tree(r)?;
    let mut rewound_t1 = now.clone();
    if let Some(n) = before_t1.get("a.txt") {
        rewound_t1.insert("a.txt".into(), n.clone());
    }
    let inv = Invocation::new(&["snapshot", "--turn", "t2"]);
    let mid = checker(&lab, vec![("t1".into(), rewound_t1.clone())], vec![])?;
    let mut fin = checker(
        &lab,
        vec![("t1".into(), rewound_t1), ("t2".into(), now)],
        vec![],
    )?;
    fin.log_may_be_rewritten = SNAPSHOT_LOG_COMPACTED;
    fn rerun(lab: &Lab, _: &[u8]) -> Res<bool> {
        let st = Store::open(&lab.root)?.status(&turnback::NoProgress)?;
        Ok(!st
            .snapshot
            .is_some_and(|b| b.pending && b.turn.as_str() == "t2"))
    }
    fn prepare(root: &Path) -> Res {
        // Copied files must be older than the scan stamp, or they are
        // racily clean and hashed again.
        std::thread::sleep(std::time::Duration::from_millis(20));
        snapshot_half(root, "t1", true)
    }
    fn post(root: &Path) -> Res {
        put(
            root,
            "docs/readme.md",
            b"# readme, by the second command\n",
            0o644,
        )?;
        put(
            root,
            "gen2/made.txt",
            b"made by the second command\n",
            0o644,
        )?;
        snapshot_half(root, "t2", true)
    }
    let mut sc = finish("snapshot-unchanged", lab, inv, mid, fin, rerun, Some(post))?;
    sc.prepare = Some(prepare);
    Ok(sc)
}
