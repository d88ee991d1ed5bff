//! Several processes at once on one store: agents capturing the same and
//! different files in loops while a gc loops beside them, some of every
//! kind killed at random (SIGKILL, possibly while holding the lock). No
//! acknowledged record may be lost or duplicated, every pre-image must be
//! the bytes the file held, and a dead lock holder must never block the
//! others (the kernel drops its `flock`; no lock file is ever removed).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use turnback::log::{Op, Pre};
use turnback::{Store, TurnId};

use crate::harness::*;

/// What one worker saw: (turn, acknowledged, bytes of its own file before).
type Outcomes = Vec<(String, bool, Vec<u8>)>;

fn own_file(w: usize) -> String {
    format!("own/w{w}.txt")
}

/// Runs `inv`, killing it after `kill_after` if given; returns whether it
/// exited 0.
fn run_maybe_killed(
    lab_root: &std::path::Path,
    args: &[String],
    kill_after: Option<Duration>,
) -> Res<bool> {
    let mut cmd = tb(lab_root);
    cmd.arg("--lock-timeout")
        .arg("60")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let Some(d) = kill_after {
        std::thread::sleep(d);
        let _ = child.kill();
    }
    let out = child.wait_with_output()?;
    if kill_after.is_none() && !out.status.success() {
        return Err(format!("{args:?} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(out.status.success())
}

fn agent(
    root: std::path::PathBuf,
    w: usize,
    rounds: usize,
    seed: u64,
    start: Arc<Barrier>,
) -> Res<Outcomes> {
    let mut rng = Rng::seeded(seed);
    let own = own_file(w);
    let mut out = Vec::new();
    start.wait();
    for i in 0..rounds {
        let id = format!("w{w}-{i}");
        let before = std::fs::read(root.join(&own))?;
        let args: Vec<String> = ["capture", "--turn", &id, &own, "shared.txt"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let kill = (rng.below(5) == 0).then(|| Duration::from_micros(rng.below(20_000)));
        let acked = run_maybe_killed(&root, &args, kill)?;
        if acked {
            // The agent's write, after the acknowledged capture.
            std::fs::write(root.join(&own), format!("w{w} after round {i}\n"))?;
        }
        out.push((id, acked, before));
    }
    Ok(out)
}

#[test]
fn concurrent_captures_and_gc_with_kills_lose_and_duplicate_nothing() -> Res {
    let (workers, rounds) = if long_mode() { (8, 60) } else { (4, 12) };
    let mut rng = Rng::from_env("concurrent_captures_and_gc_with_kills");
    let lab = Lab::new()?;
    let r = lab.root.clone();
    put(&r, "shared.txt", b"shared by every agent\n", 0o644)?;
    for w in 0..workers {
        put(
            &r,
            &own_file(w),
            format!("w{w} initial\n").as_bytes(),
            0o644,
        )?;
    }
    let canary = snapshot(&lab.canary, &[])?;
    let start = Arc::new(Barrier::new(workers + 1));
    let mut handles = Vec::new();
    for w in 0..workers {
        let (root, start, seed) = (r.clone(), start.clone(), rng.next());
        handles.push(std::thread::spawn(move || {
            agent(root, w, rounds, seed, start).map_err(|e| e.to_string())
        }));
    }
    // A gc that keeps everything, looping beside them, sometimes killed.
    let gc = {
        let (root, start, seed) = (r.clone(), start.clone(), rng.next());
        std::thread::spawn(move || -> Result<(usize, usize), String> {
            let mut rng = Rng::seeded(seed);
            start.wait();
            let (mut runs, mut killed) = (0, 0);
            for _ in 0..rounds {
                let args: Vec<String> = ["gc", "--keep-turns", "1000000"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                let kill = (rng.below(4) == 0).then(|| Duration::from_micros(rng.below(20_000)));
                runs += 1;
                killed +=
                    usize::from(!run_maybe_killed(&root, &args, kill).map_err(|e| e.to_string())?);
            }
            Ok((runs, killed))
        })
    };
    let mut outcomes = Vec::new();
    for h in handles {
        outcomes.extend(h.join().map_err(|_| "an agent thread panicked")??);
    }
    let (gc_runs, gc_killed) = gc.join().map_err(|_| "the gc thread panicked")??;

    // Every record once at most; every acknowledged one exactly once, with
    // the bytes its file held.
    let mut found = Found::default();
    let checker = Checker {
        must_live: vec![],
        may_live: vec![],
        canary,
        log_may_be_rewritten: true,
    };
    let records = checker.check_log(&lab, &[], &mut found)?;
    checker.check_blobs(&lab, &mut found)?;
    checker.check_canary(&lab)?;
    let mut per_turn: BTreeMap<String, Vec<&turnback::log::Record>> = BTreeMap::new();
    for rec in &records {
        if let Op::Capture { turn, .. } = &rec.op {
            per_turn.entry(turn.to_string()).or_default().push(rec);
        }
    }
    let store = Store::open(&r)?;
    let (mut acked, mut killed, mut landed) = (0, 0, 0);
    for (id, ok, before) in &outcomes {
        let recs = per_turn.get(id).map_or(&[][..], Vec::as_slice);
        if recs.len() > 1 {
            return Err(format!("turn {id} has {} capture records", recs.len()).into());
        }
        if *ok {
            acked += 1;
            if recs.is_empty() {
                return Err(format!("acknowledged turn {id} has no record").into());
            }
        } else {
            killed += 1;
        }
        let Some(rec) = recs.first() else { continue };
        landed += usize::from(!ok);
        let w: usize = id[1..id.find('-').ok_or("turn id")?].parse()?;
        let Op::Capture { files, .. } = &rec.op else {
            continue;
        };
        for f in files {
            let want: Vec<u8> = if f.path.as_str() == "shared.txt" {
                b"shared by every agent\n".to_vec()
            } else if f.path.as_str() == own_file(w) {
                before.clone()
            } else {
                return Err(format!("turn {id} captured {}", f.path).into());
            };
            let Pre::File { blob, .. } = &f.pre else {
                return Err(format!("turn {id}: {} is not a file: {:?}", f.path, f.pre).into());
            };
            let got = store.read_blob(blob)?;
            if got != want {
                return Err(format!(
                    "turn {id}: the pre-image of {} is not what the file held",
                    f.path
                )
                .into());
            }
        }
        // Still live, so it can be rewound.
        store.turn(&TurnId::new(id.as_str())?)?;
    }
    drop(store);
    check_recovery_idempotent(&lab)?;
    println!(
        "concurrency: {workers} agents x {rounds} captures ({acked} acknowledged, all recorded once; {killed} killed, {landed} of them recorded) beside {gc_runs} gc runs ({gc_killed} killed); {} blob reads verified",
        found.blobs_verified
    );
    Ok(())
}

/// The strace'd process's own child: the traced turnback.
fn tracee_of(strace_pid: u32) -> Res<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let path = format!("/proc/{strace_pid}/task/{strace_pid}/children");
        for pid in std::fs::read_to_string(&path)?.split_whitespace() {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "turnback" {
                return Ok(pid.parse()?);
            }
        }
        if Instant::now() > deadline {
            return Err("strace started no process".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_killed_lock_holder_never_needs_a_lock_removed_by_hand() -> Res {
    if let Some(why) = strace_problem() {
        return skip_or_fail("a killed lock holder", &why);
    }
    let lab = Lab::new()?;
    let r = &lab.root;
    put(r, "a.txt", b"alpha\n", 0o644)?;
    put(r, "b.txt", b"beta\n", 0o644)?;
    let ok = run(
        r,
        &Invocation::new(&["capture", "--turn", "t0", "b.txt"]),
        &[],
    )?;
    assert!(ok.status.success(), "{}", texts(&ok));
    // The holder stops for a minute on entering the fsync of its pack,
    // with the lock held.
    let mut holder = {
        let mut c = Command::new("strace");
        c.args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=fdatasync",
            "-e",
            "inject=fdatasync:delay_enter=60s:when=1",
            "--",
        ])
        .arg(BIN)
        .arg("--root")
        .arg(r)
        .args(["capture", "--turn", "t1", "a.txt"])
        .current_dir(r)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        c.spawn()?
    };
    let pid = tracee_of(holder.id())?;
    let lock = r.join(".turnback/lock");
    // Wait until it is inside the fsync (its temporary pack exists; they
    // are written in the store directory).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_dir(r.join(".turnback"))?
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().contains(TEMP_MARK))
    {
        assert!(
            Instant::now() < deadline,
            "the holder never reached its fsync"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // While it lives, another process waits and then says who holds it.
    let blocked = tb(r)
        .args(["--lock-timeout", "0.3", "capture", "--turn", "t2", "b.txt"])
        .output()?;
    assert_eq!(blocked.status.code(), Some(1), "{}", texts(&blocked));
    let err = String::from_utf8_lossy(&blocked.stderr);
    assert!(
        err.contains("held by another turnback process")
            && err.contains("no file needs to be removed by hand"),
        "{err}"
    );
    // One that waits longer, then the holder dies.
    let waiter = tb(r)
        .args(["--lock-timeout", "30", "capture", "--turn", "t2", "b.txt"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(200));
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .output()?;
    assert!(
        killed.status.success(),
        "kill {pid}: {} (strace {}: {:?})",
        texts(&killed),
        holder.id(),
        std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
    );
    // A tracee held in strace's delay dies only once strace lets go of it.
    let _ = holder.kill();
    let _ = holder.wait();
    let t0 = Instant::now();
    let out = waiter.wait_with_output()?;
    assert!(
        out.status.success(),
        "the waiter failed after the holder died: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(lock.exists(), "the lock file is kept (it is never removed)");
    // The holder's capture never happened; its temporary pack is swept.
    let store = Store::open(r)?;
    assert!(store.turn(&TurnId::new("t1")?).is_err());
    store.turn(&TurnId::new("t2")?)?;
    let temps: Vec<String> = snapshot(r, &[])?
        .into_keys()
        .filter(|k| k.contains(TEMP_MARK))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
    println!(
        "stale lock: the waiter went on {:?} after the holder was killed; no lock file removed",
        t0.elapsed()
    );
    Ok(())
}
