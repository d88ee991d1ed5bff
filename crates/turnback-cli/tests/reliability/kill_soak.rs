//! Random-kill soak: captures and writes in a loop, each killed (SIGKILL)
//! after a random delay around the time one takes, the Jepsen way. An
//! agent writes a file only after its capture was acknowledged. At the end,
//! after recovery, every acknowledged turn must be live and rewind to the
//! folder as it was before it (acknowledged ⊆ recovered), and so must every
//! interrupted one whose record landed.

use std::time::{Duration, Instant};

use turnback::Store;

use crate::harness::*;

const FILES: &[&str] = &["a.txt", "src/b.rs", "src/deep/c.md", "d.bin"];

#[test]
fn random_kill_soak() -> Res {
    let iterations = if long_mode() { 5000 } else { 200 };
    let mut rng = Rng::from_env("random_kill_soak");
    let lab = Lab::new()?;
    let r = &lab.root;
    for f in FILES {
        put(r, f, format!("{f} v0\n").as_bytes(), 0o644)?;
    }
    let canary = snapshot(&lab.canary, &[])?;
    let mut must: Vec<(String, Tree)> = Vec::new();
    let mut typical = calibrate(r, &mut must, 0)?;
    let mut may: Vec<(String, Tree)> = Vec::new();
    let (mut acked, mut killed) = (0, 0);
    let mut widest = typical;
    for i in 0..iterations {
        // Captures slow down as the log grows (each process reads it): the
        // delays follow.
        if i > 0 && i % 100 == 0 {
            typical = calibrate(r, &mut must, i)?;
            widest = widest.max(typical);
        }
        let id = format!("s{i}");
        let file = FILES[rng.below(FILES.len() as u64) as usize];
        let before = without_temps(project_tree(r)?);
        let write = rng.below(10) < 3;
        let inv = if write {
            Invocation::new(&["write", "--turn", &id, file])
                .with_stdin(format!("{file} written by {id}\n").as_bytes())
        } else {
            Invocation::new(&["capture", "--turn", &id, file])
        };
        let delay = Duration::from_micros(rng.below(typical.as_micros() as u64 * 3 / 2 + 1));
        let mut child = {
            let mut cmd = tb(r);
            cmd.args(&inv.args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            cmd.spawn()?
        };
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            let _ = stdin.write_all(&inv.stdin);
        }
        std::thread::sleep(delay);
        let _ = child.kill();
        let status = child.wait()?;
        if status.success() {
            acked += 1;
            must.push((id.clone(), before));
            if !write {
                // The agent's own write, only after an acknowledged capture.
                put(
                    r,
                    file,
                    format!("{file} by the agent in {id}\n").as_bytes(),
                    0o644,
                )?;
            }
        } else {
            killed += 1;
            may.push((id, before));
        }
        // Every tenth kill: the store opens and its log parses right away.
        if killed % 10 == 1 && !status.success() {
            let parsed = turnback::log::parse(&lab.log_bytes(), 1);
            if let Some((line, e)) = parsed
                .lines
                .iter()
                .find_map(|(n, r)| r.as_ref().err().map(|e| (n, e)))
            {
                return Err(format!("after kill {killed}: log line {line}: {e}").into());
            }
            Store::open(r)?;
        }
    }
    let stray = project_tree(r)?
        .into_keys()
        .filter(|k| k.contains(TEMP_MARK))
        .count();
    check_recovery_idempotent(&lab)?;
    let live: Vec<String> = Store::open(r)?
        .turns()?
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    let lost: Vec<&String> = must
        .iter()
        .map(|(id, _)| id)
        .filter(|id| !live.contains(id))
        .collect();
    assert!(lost.is_empty(), "acknowledged turns lost: {lost:?}");
    let landed = may.iter().filter(|(id, _)| live.contains(id)).count();
    // Rewinds of every turn (a sample of 60 in the long mode).
    let mut check_must = must.clone();
    let mut check_may: Vec<(String, Tree)> = may
        .into_iter()
        .filter(|(id, _)| live.contains(id))
        .collect();
    while check_must.len() + check_may.len() > 60 {
        let from_may = check_must.is_empty() || (!check_may.is_empty() && rng.below(2) == 0);
        let list = if from_may {
            &mut check_may
        } else {
            &mut check_must
        };
        list.remove(rng.below(list.len() as u64) as usize);
    }
    let checker = Checker {
        must_live: check_must,
        may_live: check_may,
        canary,
        log_may_be_rewritten: false,
    };
    let mut found = Found::default();
    checker.check_log(&lab, &[], &mut found)?;
    checker.check_blobs(&lab, &mut found)?;
    checker.check_rewinds(&lab, &mut found)?;
    checker.check_canary(&lab)?;
    println!(
        "random-kill soak: {iterations} captures/writes, {acked} acknowledged (all recovered), {killed} killed ({landed} of them recorded anyway), delays 0..{:?}; {} rewinds checked, {} blob reads verified; {stray} temporary files of killed writes not yet swept (a later operation in their directory removes them)",
        widest * 3 / 2,
        found.rewinds_checked,
        found.blobs_verified
    );
    assert!(
        killed > 0 && acked > 0,
        "the delays never (or always) killed: {killed} killed, {acked} acknowledged"
    );
    Ok(())
}

/// The median time of three captures here (acknowledged turns, added to
/// `must`): the kills land around it.
fn calibrate(r: &std::path::Path, must: &mut Vec<(String, Tree)>, at: usize) -> Res<Duration> {
    let mut times = Vec::new();
    for (k, file) in FILES.iter().take(3).enumerate() {
        let id = format!("calibrate-{at}-{k}");
        must.push((id.clone(), without_temps(project_tree(r)?)));
        let start = Instant::now();
        let out = run(r, &Invocation::new(&["capture", "--turn", &id, file]), &[])?;
        times.push(start.elapsed());
        assert!(out.status.success(), "{}", texts(&out));
    }
    times.sort();
    Ok(times[1].max(Duration::from_millis(1)))
}
