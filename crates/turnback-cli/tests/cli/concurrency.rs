//! Two real `turnback capture` processes at a time, in loops, on one store:
//! every acknowledged capture is kept, none is duplicated, the log parses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};

use crate::common::{BIN, Project, Res, TestResult, parse_json, strings};

const ROUNDS: usize = 20;
const WORKERS: [&str; 2] = ["a", "b"];

/// What one worker's processes acknowledged: (turn, path) pairs.
type Acked = Vec<(String, String)>;

fn capture(root: &Path, turn: &str, path: &str) -> Res<Acked> {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env(
            "TURNBACK_DATA_DIR",
            std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
        )
        .current_dir(root);
    if let Some(p) = std::env::var_os("PATH") {
        cmd.env("PATH", p);
    }
    let out = cmd
        .args(["--json", "capture", "--turn", turn, "--label", "race", path])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "capture of {path} in {turn} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let v = parse_json(&out.stdout)?;
    Ok(strings(&v["captured"], Some("path"))
        .into_iter()
        .map(|p| (turn.to_owned(), p))
        .collect())
}

fn worker(root: &Path, name: &str, start: &Barrier) -> Res<Acked> {
    start.wait();
    let mut acked = Vec::new();
    for i in 0..ROUNDS {
        // Both workers add to one turn, and each to turns of its own that
        // capture the same path.
        acked.extend(capture(root, "shared", &format!("{name}-{i}.txt"))?);
        acked.extend(capture(root, &format!("{name}-{i}"), "common.txt")?);
    }
    Ok(acked)
}

#[test]
fn two_processes_capturing_at_once_lose_and_duplicate_nothing() -> TestResult {
    let p = Project::new()?;
    for w in WORKERS {
        for i in 0..ROUNDS {
            p.write(
                &format!("{w}-{i}.txt"),
                format!("file {w} {i}\n").repeat(i + 1),
            )?;
        }
    }
    p.write("common.txt", "common\n")?;

    let start = Arc::new(Barrier::new(WORKERS.len()));
    let handles: Vec<_> = WORKERS
        .iter()
        .map(|&w| {
            let (root, start) = (p.root.clone(), Arc::clone(&start));
            std::thread::spawn(move || worker(&root, w, &start).map_err(|e| e.to_string()))
        })
        .collect();
    let mut acked: Acked = Vec::new();
    for h in handles {
        let got = h.join().map_err(|_| "a worker thread panicked")??;
        acked.extend(got);
    }
    assert_eq!(acked.len(), WORKERS.len() * ROUNDS * 2);

    // The log: every line whole and checksummed, sequence numbers 1..=n,
    // one record per acknowledged call, no (turn, path) twice.
    // (A new turn's first capture also appends a seal record for the
    // turn before it.)
    let lines = p.log_lines()?;
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut captures = 0;
    for (n, line) in lines.iter().enumerate() {
        let rec = turnback::log::decode(line.as_bytes())
            .map_err(|e| format!("log line {}: {e}: {line}", n + 1))?;
        assert_eq!(rec.seq, n as u64 + 1, "line {}", n + 1);
        let (turn, files) = match rec.op {
            turnback::log::Op::Capture { turn, files, .. } => (turn, files),
            turnback::log::Op::Seal { .. } => continue,
            _ => {
                return Err(
                    format!("line {} is neither a capture nor a seal: {line}", n + 1).into(),
                );
            }
        };
        captures += 1;
        for f in files {
            let key = (turn.to_string(), f.path.to_string());
            assert!(seen.insert(key.clone()), "{key:?} recorded twice");
        }
    }
    assert_eq!(
        captures,
        acked.len(),
        "one capture record per acknowledged call"
    );
    let acked_set: BTreeSet<_> = acked.iter().cloned().collect();
    assert_eq!(
        acked_set.len(),
        acked.len(),
        "a capture was acknowledged twice"
    );
    assert_eq!(seen, acked_set);

    // `list` and `show` agree, and report no damage.
    let out = p
        .tb()
        .args(["--json", "list"])
        .assert()
        .success()
        .stderr("");
    let list = parse_json(&out.get_output().stdout)?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for t in list.as_array().ok_or("list is not an array")? {
        let id = t["turn"].as_str().ok_or("turn without id")?.to_owned();
        let files = t["file_count"].as_u64().ok_or("turn without file count")?;
        assert!(
            counts.insert(id.clone(), files).is_none(),
            "{id} listed twice"
        );
    }
    assert_eq!(counts.len(), 1 + WORKERS.len() * ROUNDS);
    assert_eq!(
        counts.get("shared"),
        Some(&((WORKERS.len() * ROUNDS) as u64))
    );
    let shared = p.json(&["show", "shared"])?;
    let paths = strings(&shared["files"], Some("path"));
    let unique: BTreeSet<&String> = paths.iter().collect();
    assert_eq!(unique.len(), paths.len(), "show lists a path twice");
    let want: BTreeSet<String> = acked
        .iter()
        .filter(|(t, _)| t == "shared")
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(paths.iter().cloned().collect::<BTreeSet<_>>(), want);
    for w in WORKERS {
        for i in 0..ROUNDS {
            let t = p.json(&["show", &format!("{w}-{i}")])?;
            assert_eq!(strings(&t["files"], Some("path")), ["common.txt"]);
        }
    }

    // Every saved pre-image is intact: rewinding everything brings back
    // every file.
    for w in WORKERS {
        for i in 0..ROUNDS {
            p.write(&format!("{w}-{i}.txt"), "overwritten")?;
        }
    }
    p.write("common.txt", "overwritten")?;
    p.tb().args(["rewind", "shared"]).assert().success();
    for w in WORKERS {
        for i in 0..ROUNDS {
            let want = format!("file {w} {i}\n").repeat(i + 1);
            assert_eq!(p.read(&format!("{w}-{i}.txt"))?, want.as_bytes());
        }
    }
    assert_eq!(p.read("common.txt")?, b"common\n");
    Ok(())
}
