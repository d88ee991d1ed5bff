//! Several writers at once, each with its own handle on one store.

use std::collections::BTreeMap;

use turnback::log::Op;

use crate::common::{Project, TestResult, turn};

const WRITERS: usize = 4;
const TURNS_EACH: usize = 12;

#[test]
fn concurrent_captures_lose_no_record() -> TestResult {
    let p = Project::new()?;
    p.write("shared.txt", "shared\n")?;
    for w in 0..WRITERS {
        for i in 0..TURNS_EACH {
            p.write(&format!("w{w}/f{i}.txt"), format!("writer {w} file {i}\n"))?;
        }
    }
    let root = p.root.clone();
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let root = root.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let mut store = turnback::Store::open(&root).map_err(|e| e.to_string())?;
                for i in 0..TURNS_EACH {
                    let t =
                        turnback::TurnId::new(format!("w{w}-t{i}")).map_err(|e| e.to_string())?;
                    let own = format!("w{w}/f{i}.txt");
                    let report = store
                        .capture_many(&t, None, &[own.as_str(), "shared.txt"])
                        .map_err(|e| format!("{t}: {e}"))?;
                    if report.captured.len() != 2 {
                        return Err(format!("{t}: captured {:?}", report.captured));
                    }
                    // A second capture of the shared path in the same turn is a no-op.
                    let again = store
                        .capture(&t, None, "shared.txt")
                        .map_err(|e| format!("{t}: {e}"))?;
                    if !again.captured.is_empty() {
                        return Err(format!("{t}: captured shared.txt twice"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "a writer panicked")??;
    }

    let records = p.captures()?;
    assert_eq!(records.len(), WRITERS * TURNS_EACH);
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in &records {
        let Op::Capture { turn, files, .. } = &r.op else {
            return Err(format!("unexpected record {r:?}").into());
        };
        for f in files {
            *seen
                .entry((turn.to_string(), f.path.to_string()))
                .or_default() += 1;
        }
    }
    let store = p.open()?;
    assert_eq!(store.turns()?.len(), WRITERS * TURNS_EACH);
    for w in 0..WRITERS {
        for i in 0..TURNS_EACH {
            let t = format!("w{w}-t{i}");
            for path in [format!("w{w}/f{i}.txt"), "shared.txt".to_string()] {
                assert_eq!(
                    seen.get(&(t.clone(), path.clone())),
                    Some(&1),
                    "{t} {path} in the log"
                );
            }
            let live = store.turn(&turn(&t)?)?;
            assert_eq!(live.files.len(), 2, "{t}: {:?}", live.files);
        }
    }
    assert_eq!(seen.len(), WRITERS * TURNS_EACH * 2);
    Ok(())
}
