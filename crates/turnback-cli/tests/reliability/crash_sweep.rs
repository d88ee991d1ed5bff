//! Crash sweep: a command is killed (SIGKILL, by strace, on entry to a
//! system call) at every (syscall, N) pair it makes, N counted per thread as
//! strace does. After each kill the checker runs on the interrupted state,
//! the store is recovered twice, the command is run again when its effect is
//! not in the store yet, and the outcome must equal a run that was never
//! interrupted.
//!
//! In CI, capture, rewind and both halves of a snapshot (`snapshot --turn
//! T` and `snapshot --turn T --after`) are swept at every pair; write, undo
//! and gc at every pair of the calls that change files (open, write, sync,
//! rename, unlink, mkdir, symlink, truncate, chmod, lock) and at three calls
//! of every other syscall. `TURNBACK_LONG=1` sweeps every pair of all seven.

use std::collections::BTreeMap;

use turnback::Store;

use crate::harness::*;
use crate::scenarios::{self, Scenario};

/// System calls that change files or their durability: swept at every N
/// even in a sampled sweep.
const MUTATING: &[&str] = &[
    "openat",
    "open",
    "write",
    "pwrite64",
    "writev",
    "fdatasync",
    "fsync",
    "syncfs",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "symlinkat",
    "ftruncate",
    "fchmod",
    "fchmodat",
    "flock",
    "linkat",
];

#[derive(Debug, Default)]
pub struct Stats {
    pub pairs: usize,
    pub killed: usize,
    pub not_reached: usize,
    pub reruns: usize,
    pub stray_temps: usize,
    /// Of those, after a rewind or undo: rolled back to the folder before.
    pub rolled_back_with_temps: usize,
    pub torn_tails: usize,
    pub blobs_verified: usize,
    pub rewinds_checked: usize,
    pub undo_differs: usize,
    pub first_undo_difference: Option<String>,
}

/// The (syscall, N) pairs to kill at.
fn select(counts: &BTreeMap<String, u64>, full: bool) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (name, &n) in counts {
        if full || MUTATING.contains(&name.as_str()) {
            out.extend((1..=n).map(|i| (name.clone(), i)));
        } else {
            let mut picks = vec![1, n.div_ceil(2), n];
            picks.dedup();
            out.extend(picks.into_iter().map(|i| (name.clone(), i)));
        }
    }
    out
}

/// Kills `sc`'s command at the `n`th call of `syscall` and checks
/// everything; returns whether the kill happened.
pub fn crash_point(sc: &Scenario, syscall: &str, n: u64, stats: &mut Stats) -> Res {
    let lab = sc.lab()?;
    let log_before = lab.log_bytes();
    let out = run(&lab.root, &sc.inv, &kill_at(syscall, n))?;
    let killed = was_killed(&out);
    if !killed && !out.status.success() {
        return Err(format!("the command failed without being killed:\n{}", texts(&out)).into());
    }
    if killed {
        stats.killed += 1;
    } else {
        stats.not_reached += 1;
    }
    let mut found = Found::default();

    // Right after the fault.
    sc.mid.check_log(&lab, &log_before, &mut found)?;
    let temps = check_midway(&lab.root, &[&sc.before, &sc.after])?;
    if !temps.is_empty() {
        stats.stray_temps += 1;
    }
    if rolls_back(&sc.inv) && check_settled(&lab, &sc.before, &sc.after)? && !temps.is_empty() {
        stats.rolled_back_with_temps += 1;
    }
    sc.mid.check_canary(&lab)?;
    if sc.mid_rewinds() {
        sc.mid.check_rewinds(&lab, &mut found)?;
    }

    // Recovery, twice.
    check_recovery_idempotent(&lab)?;

    // The command again, if its effect is not in the store yet.
    if (sc.rerun)(&lab, &log_before)? {
        stats.reruns += 1;
        let again = run(&lab.root, &sc.inv, &[])?;
        if !again.status.success() {
            return Err(format!("running the command again failed:\n{}", texts(&again)).into());
        }
    }
    let now = project_tree(&lab.root)?;
    if now != sc.after {
        return Err(format!(
            "after recovery the folder differs from an uninterrupted run:\n{}",
            diff(&sc.after, &now)
        )
        .into());
    }
    let live: Vec<String> = Store::open(&lab.root)?
        .turns()?
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    if live != sc.final_live {
        return Err(format!(
            "after recovery the live turns are {live:?}, not {:?}",
            sc.final_live
        )
        .into());
    }
    if sc.name == "rewind" {
        // Undo of the rewind, finished after a crash, must give back the
        // folder as it was before the rewind began.
        let copy = lab.scratch("undo-of-recovered-rewind");
        copy_tree(&lab.root, &copy)?;
        Store::open(&copy)?.undo()?;
        if project_tree(&copy)? != sc.before {
            stats.undo_differs += 1;
            if stats.first_undo_difference.is_none() {
                stats.first_undo_difference = Some(format!(
                    "{syscall} call {n}:\n{}",
                    diff(&sc.before, &project_tree(&copy)?)
                ));
            }
        }
        std::fs::remove_dir_all(&copy)?;
    }
    if let Some(post) = sc.post {
        post(&lab.root)?;
    }
    sc.fin.check_log(&lab, &log_before, &mut found)?;
    sc.fin.check_blobs(&lab, &mut found)?;
    sc.fin.check_rewinds(&lab, &mut found)?;
    sc.fin.check_canary(&lab)?;
    stats.torn_tails += usize::from(found.torn_tail);
    stats.blobs_verified += found.blobs_verified;
    stats.rewinds_checked += found.rewinds_checked;
    Ok(())
}

impl Scenario {
    /// Whether the folder right after a fault is one in which the live
    /// turns can be checked by rewinding (not a half-applied rewind or undo).
    fn mid_rewinds(&self) -> bool {
        !matches!(self.name, "rewind" | "undo")
    }
}

fn sweep(sc: Scenario, full: bool) -> Res {
    if let Some(why) = strace_problem() {
        return skip_or_fail(&format!("crash sweep of {}", sc.name), &why);
    }
    let counts = count_syscalls_in(sc.lab()?, &sc.inv)?.max;
    let pairs = select(&counts, full);
    let mut stats = Stats {
        pairs: pairs.len(),
        ..Stats::default()
    };
    for (syscall, n) in &pairs {
        crash_point(&sc, syscall, *n, &mut stats).map_err(|e| {
            format!(
                "crash sweep of {}: killed at {syscall} call {n}: {e}",
                sc.name
            )
        })?;
    }
    let calls: u64 = counts.values().sum();
    println!(
        "crash-sweep {}: {} syscalls ({} calls in the busiest thread per syscall), {} crash points ({}), {} killed, {} not reached, {} reruns, {} with stray temporary files right after the kill ({} of them removed by the rollback that the next mutation does first), {} torn final lines, {} blob reads verified, {} rewinds checked",
        sc.name,
        counts.len(),
        calls,
        stats.pairs,
        if full { "every pair" } else { "sampled" },
        stats.killed,
        stats.not_reached,
        stats.reruns,
        stats.stray_temps,
        stats.rolled_back_with_temps,
        stats.torn_tails,
        stats.blobs_verified,
        stats.rewinds_checked
    );
    if let Some(d) = &stats.first_undo_difference {
        println!(
            "crash-sweep {}: at {} crash points, undo of the recovered rewind differs from the folder before it; first: {d}",
            sc.name, stats.undo_differs
        );
    }
    if stats.killed == 0 {
        return Err(format!("crash sweep of {}: no kill happened", sc.name).into());
    }
    Ok(())
}

#[test]
fn crash_sweep_capture() -> Res {
    sweep(scenarios::capture()?, true)
}

#[test]
fn crash_sweep_rewind() -> Res {
    sweep(scenarios::rewind()?, true)
}

#[test]
fn crash_sweep_rewind_per_file_fsync() -> Res {
    sweep(scenarios::rewind_per_file()?, true)
}

#[test]
fn crash_sweep_write() -> Res {
    sweep(scenarios::write()?, long_mode())
}

#[test]
fn crash_sweep_undo() -> Res {
    sweep(scenarios::undo()?, long_mode())
}

#[test]
fn crash_sweep_undo_per_file_fsync() -> Res {
    sweep(scenarios::undo_per_file()?, long_mode())
}

#[test]
fn crash_sweep_gc() -> Res {
    sweep(scenarios::gc()?, long_mode())
}

#[test]
fn crash_sweep_maintain_gc() -> Res {
    sweep(scenarios::maintain_gc()?, long_mode())
}

#[test]
fn crash_sweep_snapshot_after() -> Res {
    sweep(scenarios::snapshot_after()?, true)
}

#[test]
fn crash_sweep_snapshot_before() -> Res {
    sweep(scenarios::snapshot_before()?, true)
}

#[test]
fn crash_sweep_snapshot_unchanged() -> Res {
    sweep(scenarios::snapshot_unchanged()?, true)
}

/// A rewind killed after it restored every file but before its record was
/// appended, then run again: `undo` must give back the folder as it was
/// before the first attempt (the second attempt reuses the first attempt's
/// `saved` record instead of saving the half-rewound folder).
#[test]
fn undo_after_a_rewind_finished_after_a_crash_gives_back_the_folder_before_it() -> Res {
    if let Some(why) = strace_problem() {
        return skip_or_fail("undo after a recovered rewind", &why);
    }
    let sc = scenarios::rewind()?;
    let lab = Lab::copy_of(&sc.template)?;
    // The second syncfs comes after the renames, before the record.
    let out = run(&lab.root, &sc.inv, &kill_at("syncfs", 2))?;
    assert!(was_killed(&out), "{}", texts(&out));
    let again = run(&lab.root, &sc.inv, &[])?;
    assert!(again.status.success(), "{}", texts(&again));
    assert_eq!(project_tree(&lab.root)?, sc.after);
    let undo = run(&lab.root, &Invocation::new(&["undo"]), &[])?;
    assert!(undo.status.success(), "{}", texts(&undo));
    let got = project_tree(&lab.root)?;
    assert!(got == sc.before, "{}", diff(&sc.before, &got));
    Ok(())
}

/// The fault the power-loss run of undo found: an undo (per-file
/// durability) killed after it made `gen/` and staged
/// `gen/.new.txt.turnback-tmp-*` in it, then `rewind t0`, a turn earlier
/// than the rewind being undone, whose plan holds neither. The rewind first
/// rolls the undo back: the whole folder must then be exactly the folder
/// before t0, with no stray directory or temporary file, and undo of that
/// rewind must give back the folder from before the interrupted undo. Every
/// kill at an fsync, unlink or rename of the undo is checked this way; at
/// least one must leave the staged temporary file in `gen/`.
#[test]
fn rewind_of_an_earlier_turn_after_an_undo_killed_with_a_staged_file_is_exact() -> Res {
    if let Some(why) = strace_problem() {
        return skip_or_fail("rewind after an interrupted undo", &why);
    }
    let sc = scenarios::undo_per_file()?;
    // Before the undo the folder is the one before t1: t0's z.txt, which
    // rewinding t0 removes.
    let mut before_t0 = sc.before.clone();
    if before_t0.remove("z.txt").is_none() {
        return Err("the folder before the undo holds no z.txt".into());
    }
    let counts = count_syscalls_in(sc.lab()?, &sc.inv)?.max;
    let points: Vec<(String, u64)> = counts
        .iter()
        .filter(|(name, _)| {
            ["fsync", "unlinkat", "rename", "renameat", "renameat2"].contains(&name.as_str())
        })
        .flat_map(|(name, &n)| (1..=n).map(move |i| (name.clone(), i)))
        .collect();
    let (mut killed, mut staged) = (0, 0);
    for (syscall, n) in &points {
        let lab = sc.lab()?;
        let out = run(&lab.root, &sc.inv, &kill_at(syscall, *n))?;
        if !was_killed(&out) {
            continue;
        }
        killed += 1;
        let left = project_tree(&lab.root)?;
        if left.contains_key("gen")
            && left
                .keys()
                .any(|k| k.starts_with("gen/") && k.contains(TEMP_MARK))
        {
            staged += 1;
        }
        let at = format!("undo killed at {syscall} call {n}");
        let rewind = run(&lab.root, &Invocation::new(&["rewind", "t0"]), &[])?;
        if !rewind.status.success() {
            return Err(format!("{at}: rewind t0 failed:\n{}", texts(&rewind)).into());
        }
        let got = project_tree(&lab.root)?;
        if got != before_t0 {
            return Err(format!(
                "{at}: rewind t0 does not give the folder before t0:\n{}",
                diff(&before_t0, &got)
            )
            .into());
        }
        let undo = run(&lab.root, &Invocation::new(&["undo"]), &[])?;
        if !undo.status.success() {
            return Err(format!("{at}: undo of rewind t0 failed:\n{}", texts(&undo)).into());
        }
        let back = project_tree(&lab.root)?;
        if back != sc.before && back != sc.after {
            return Err(format!(
                "{at}: undo of rewind t0 gives neither the folder before the interrupted undo nor after it:\n{}",
                diff(&sc.before, &back)
            )
            .into());
        }
    }
    println!(
        "rewind t0 after an interrupted undo: {} kill points, {killed} killed, {staged} left gen/ with a staged temporary file; every rewind t0 gave the folder before t0 exactly",
        points.len()
    );
    if staged == 0 {
        return Err(
            "no kill left gen/ with a staged temporary file: the scenario was not reproduced"
                .into(),
        );
    }
    Ok(())
}
