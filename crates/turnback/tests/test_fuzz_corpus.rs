//! The committed fuzz corpus (`fuzz/corpus/<target>/`), replayed through the
//! same bodies the `cargo fuzz` targets run (`fuzz/src/lib.rs`), on stable
//! Rust: no input may panic.

use std::path::{Path, PathBuf};

#[path = "../../../fuzz/src/lib.rs"]
mod bodies;

fn corpus(target: &str) -> Result<Vec<PathBuf>, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("{}: no corpus", dir.display()));
    }
    Ok(files)
}

fn replay(target: &str, body: fn(&[u8])) -> Result<(), String> {
    let files = corpus(target)?;
    for f in &files {
        let data = std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
        std::panic::catch_unwind(|| body(&data))
            .map_err(|_| format!("{target}: input {} panicked", f.display()))?;
    }
    println!("fuzz corpus {target}: {} inputs replayed", files.len());
    Ok(())
}

#[test]
fn fuzz_corpus_log_parse_replays_without_panic() -> Result<(), String> {
    replay("log_parse", bodies::log_parse)
}

#[test]
fn fuzz_corpus_parse_then_plan_replays_without_panic() -> Result<(), String> {
    replay("parse_then_plan", bodies::parse_then_plan)
}
