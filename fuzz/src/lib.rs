//! The bodies of the fuzz targets, shared with the corpus replay test
//! (`crates/turnback/tests/test_fuzz_corpus.rs` includes this file), so the
//! committed corpus runs in CI on stable Rust.
//!
//! - `log_parse`: [`turnback::log::parse`] and [`turnback::log::decode`] on
//!   any bytes: no panic, and every decoded record encodes to a line that
//!   decodes to the same record.
//! - `parse_then_plan`: the bytes as a store's log, opened with
//!   `Store::open`; for every live turn, the rewind is planned and run as a
//!   dry run (which reads the project but writes nothing). No panic, and no
//!   file outside the store changes.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `data` with every line's checksum made right: a line ending in a
/// `,"crc":"…"}` suffix has it replaced, any other line ending in `}` gets
/// one. Random bytes rarely pass a CRC; with this the fuzzer reaches the
/// JSON decoding, the index and the planner behind it.
pub fn with_crcs(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 64);
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        let body = match line.len().checked_sub(18) {
            Some(n) if line[n..].starts_with(br#","crc":""#) && line.ends_with(b"\"}") => {
                let mut b = line[..n].to_vec();
                b.push(b'}');
                b
            }
            _ => line.to_vec(),
        };
        if body.last() == Some(&b'}') {
            let crc = crc32(&body);
            out.extend_from_slice(&body[..body.len() - 1]);
            out.extend_from_slice(format!(r#","crc":"{crc:08x}"}}"#).as_bytes());
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}

/// CRC-32 (IEEE), as the log uses.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Parses `data` as a log and each line as a record, as given and with
/// its checksums made right.
pub fn log_parse(data: &[u8]) {
    log_parse_once(data);
    log_parse_once(&with_crcs(data));
}

fn log_parse_once(data: &[u8]) {
    let parsed = turnback::log::parse(data, 1);
    for (_, rec) in parsed.lines {
        if let Ok(rec) = rec {
            let line = turnback::log::encode(&rec);
            let again = turnback::log::decode(&line[..line.len() - 1]);
            assert_eq!(
                again.as_ref(),
                Ok(&rec),
                "a decoded record does not round-trip"
            );
        }
    }
    let _ = turnback::log::decode(data);
}

/// A project with a store and a few files, made once per process; the log
/// is replaced by each input.
struct Lab {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn lab() -> &'static Lab {
    static LAB: OnceLock<Lab> = OnceLock::new();
    LAB.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let root = dir.path().join("project");
        for (rel, bytes) in [
            ("a.txt", "alpha\n"),
            ("src/b.rs", "fn b() {}\n"),
            ("c.md", "# c\n"),
        ] {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().expect("has a parent")).expect("mkdir");
            std::fs::write(p, bytes).expect("write");
        }
        std::fs::create_dir_all(root.join(".turnback/packs")).expect("mkdir store");
        Lab { _dir: dir, root }
    })
}

/// Everything under `root` but the store: path, and bytes or link target.
fn outside_store(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p == root.join(".turnback") {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.is_dir() {
                out.push((p.clone(), Vec::new()));
                stack.push(p);
            } else if meta.file_type().is_symlink() {
                let t = std::fs::read_link(&p).map(|t| t.into_os_string().into_encoded_bytes());
                out.push((p, t.unwrap_or_default()));
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// Opens `data` as a store's log (its checksums made right) and plans (and
/// dry-runs) every rewind.
pub fn parse_then_plan(data: &[u8]) {
    plan_once(&with_crcs(data));
}

fn plan_once(data: &[u8]) {
    let lab = lab();
    let before = outside_store(&lab.root);
    std::fs::write(lab.root.join(".turnback/log.jsonl"), data).expect("write the log");
    if let Ok(mut store) = turnback::Store::open(&lab.root) {
        let turns: Vec<turnback::TurnId> = store
            .turns()
            .map(|turns| turns.iter().map(|t| t.id.clone()).collect())
            .unwrap_or_default();
        for t in &turns {
            let _ = store.plan_rewind(t);
            let dry = turnback::RewindOptions {
                dry_run: true,
                ..turnback::RewindOptions::default()
            };
            let _ = store.rewind(t, &dry);
        }
    }
    assert!(
        outside_store(&lab.root) == before,
        "opening or planning changed the project"
    );
}
