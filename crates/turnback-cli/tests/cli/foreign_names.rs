//! A store made on Linux that holds names Windows cannot hold (`CON`,
//! `aux.txt`, `trail.`, `a:b`, `back\slash`, a directory `nul`), read on
//! each platform (docs/PLATFORMS.md, "Names"). On Linux every path rewinds.
//! On Windows (this test runs under Wine in CI) the store is whole, not
//! damaged: `list`, `show`, `diff`, `verify` and `repair` read it, and a
//! rewind restores every other path of the turn and reports each of those
//! not restored (exit 3) with the reason, never reaching a device, a
//! stream or another file.
//!
//! How the store is made: the turn is captured by the real binary under
//! placeholder names any platform holds (`name-con`...), then each
//! placeholder in the log is replaced by the name it stands for and the
//! line's CRC made again. The log's format is the same on every platform
//! (a path is a JSON string of its bytes, `log.rs`), so the lines are
//! those Linux writes for those names; only `seq`, `at`, the pack's name
//! and the hashes differ from a capture run on Linux, and none of them
//! depends on a name. The new log is a new file, so the index checkpoint
//! (a cache naming the log by identity) is not trusted for it. Then the
//! project is made as it would be: on Linux the placeholders are renamed
//! to their names; on Windows those files do not exist at all.

use serde_json::Value;

use crate::common::{Project, Res, TestResult, parse_json, strings};

/// Each name and its placeholder.
const FOREIGN: &[(&str, &str)] = &[
    ("CON", "name-con"),
    ("aux.txt", "name-aux"),
    ("trail.", "name-trail"),
    ("a:b", "name-colon"),
    ("back\\slash", "name-backslash"),
    ("nul", "name-nul"),
];

/// The paths of the turn with those names, sorted.
fn foreign_paths() -> Vec<String> {
    let mut v: Vec<String> = [
        "CON",
        "a:b",
        "aux.txt",
        "back\\slash",
        "nul",
        "nul/inside.txt",
        "trail.",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.sort();
    v
}

fn write(p: &Project, turn: &str, path: &str, bytes: &str) -> TestResult {
    p.tb()
        .args(["write", "--turn", turn, path])
        .write_stdin(bytes)
        .assert()
        .success();
    Ok(())
}

/// t1 changes a.txt, creates new.txt, and under placeholders changes
/// aux.txt and a:b and creates CON, trail., back\slash and nul/inside.txt;
/// t2 changes b.txt.
fn two_turns(p: &Project) -> TestResult {
    p.write("a.txt", "alpha\n")?;
    p.write("b.txt", "beta\n")?;
    p.write("name-aux", "aux before\n")?;
    p.write("name-colon", "colon before\n")?;
    write(p, "t1", "a.txt", "alpha by t1\n")?;
    write(p, "t1", "new.txt", "new by t1\n")?;
    write(p, "t1", "name-aux", "aux by t1\n")?;
    write(p, "t1", "name-colon", "colon by t1\n")?;
    write(p, "t1", "name-con", "con by t1\n")?;
    write(p, "t1", "name-trail", "trail by t1\n")?;
    write(p, "t1", "name-backslash", "backslash by t1\n")?;
    write(p, "t1", "name-nul/inside.txt", "inside by t1\n")?;
    write(p, "t2", "b.txt", "beta by t2\n")?;
    Ok(())
}

/// `line` (one log record, newline included) with each placeholder
/// replaced by its name and the CRC made again (see `log.rs`: the CRC-32
/// of the line without its `,"crc":"…"`).
fn renamed_line(line: &str) -> Res<String> {
    let (body, crc) = line
        .trim_end_matches('\n')
        .rsplit_once(",\"crc\":\"")
        .ok_or("a log line ends with its crc")?;
    if crc.len() != 10 || !crc.ends_with("\"}") {
        return Err(format!("not a crc field: {crc:?}").into());
    }
    let mut json = format!("{body}}}");
    for (name, placeholder) in FOREIGN {
        let as_json = serde_json::to_string(name)?;
        json = json.replace(placeholder, &as_json[1..as_json.len() - 1]);
    }
    let crc = crc32fast::hash(json.as_bytes());
    let body = json.strip_suffix('}').ok_or("a record is a JSON object")?;
    Ok(format!("{body},\"crc\":\"{crc:08x}\"}}\n"))
}

/// Replaces the log with its lines renamed, as a new file, and makes the
/// project as the platform holds it.
fn as_made_on_linux(p: &Project) -> TestResult {
    let store = p.store_dir()?;
    let log = store.join("log.jsonl");
    let text = std::fs::read_to_string(&log)?;
    let mut renamed = String::new();
    let mut changed = 0;
    for line in text.split_inclusive('\n') {
        let new = renamed_line(line)?;
        if new != line {
            changed += 1;
        }
        renamed.push_str(&new);
    }
    // Each placeholder's capture record, and any seal, were rewritten.
    assert!(changed >= 6, "{changed} lines named a placeholder:\n{text}");
    for (_, placeholder) in FOREIGN {
        assert!(!renamed.contains(placeholder), "{placeholder} left");
    }
    let fresh = store.join("log.jsonl.new");
    std::fs::write(&fresh, &renamed)?;
    std::fs::rename(&fresh, &log)?;
    for (name, placeholder) in FOREIGN {
        if cfg!(windows) {
            let path = p.path(placeholder);
            if path.is_dir() {
                std::fs::remove_dir_all(path)?;
            } else {
                std::fs::remove_file(path)?;
            }
        } else {
            std::fs::rename(p.path(placeholder), p.path(name))?;
        }
    }
    Ok(())
}

/// The reasons `--json rewind` gave for the paths it did not restore.
fn failed(v: &Value) -> Vec<(String, String)> {
    v["failed"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap_or("?").to_owned(),
                        f["reason"].as_str().unwrap_or("?").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_store_holding_names_windows_cannot_hold_reads_whole_and_rewinds_the_rest() -> TestResult {
    let p = Project::new()?;
    two_turns(&p)?;
    as_made_on_linux(&p)?;

    // The store is whole on every platform: nothing to repair.
    p.ok(&["verify"])?;
    let repair = p.json(&["repair", "--dry-run"])?;
    assert_eq!(repair["dropped"], serde_json::json!([]), "{repair}");
    let turns = p.json(&["list"])?;
    assert_eq!(strings(&turns, Some("turn")), ["t1", "t2"], "{turns}");
    let paths = strings(&p.json(&["show", "t1"])?["files"], Some("path"));
    for name in [
        "CON",
        "aux.txt",
        "trail.",
        "a:b",
        "back\\slash",
        "nul/inside.txt",
    ] {
        assert!(paths.iter().any(|p| p == name), "{name} in {paths:?}");
    }
    let human = p.ok(&["show", "t1"])?;
    assert!(human.contains("back\\\\slash"), "{human}");
    let diff = p.json(&["diff", "t1"])?;
    let not_compared: Vec<String> = diff
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|d| d["change"] == "name_not_allowed")
                .filter_map(|d| d["path"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();

    let out = p.tb().args(["--json", "rewind", "t1"]).output()?;
    let v = parse_json(&out.stdout)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(v["turns"], serde_json::json!(["t1", "t2"]), "{v} {stderr}");
    // Every path any platform holds is back.
    assert_eq!(p.read("a.txt")?, b"alpha\n");
    assert_eq!(p.read("b.txt")?, b"beta\n");
    assert!(!p.exists("new.txt"));
    if cfg!(windows) {
        assert_eq!(out.status.code(), Some(3), "{v}");
        let failed = failed(&v);
        let paths: Vec<String> = failed.iter().map(|(p, _)| p.clone()).collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(sorted, foreign_paths(), "{v}");
        for (path, reason) in &failed {
            assert!(
                reason.starts_with("Windows cannot hold this name: "),
                "{path}: {reason}"
            );
        }
        let reason_of = |path: &str| {
            failed
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, r)| r.clone())
                .unwrap_or_default()
        };
        assert!(reason_of("CON").contains("reserved device name"));
        assert!(reason_of("aux.txt").contains("reserved device name"));
        assert!(reason_of("trail.").contains("ends with a dot"));
        assert!(reason_of("a:b").contains("alternate data stream"));
        assert!(reason_of("back\\slash").contains("character"));
        assert!(reason_of("nul/inside.txt").contains("(the directory nul)"));
        // `diff` shows paths as people read them: a backslash doubled.
        let shown: Vec<String> = foreign_paths()
            .iter()
            .map(|p| p.replace('\\', "\\\\"))
            .collect();
        let mut not_compared = not_compared;
        not_compared.sort();
        assert_eq!(not_compared, shown, "{diff}");
        // Nothing was made under another name (`trail.` is `trail` to
        // Windows, `a:b` a stream of `a`), and nothing else appeared.
        assert!(!p.exists("trail") && !p.exists("a") && !p.exists("back"));
        // And such a name is refused at capture, with the reason (`a:b`
        // as an argument is the path `b` on drive A: to Windows, so a
        // stream of a file here is named `notes.txt:v2`).
        let out = p
            .tb()
            .args(["write", "--turn", "t3", "notes.txt:v2"])
            .write_stdin("x")
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("alternate data stream"), "{stderr}");
        assert!(!p.exists("notes.txt"));
    } else {
        assert_eq!(out.status.code(), Some(0), "{v}");
        assert_eq!(failed(&v), []);
        assert!(not_compared.is_empty(), "{diff}");
        assert_eq!(p.read("aux.txt")?, b"aux before\n");
        assert_eq!(p.read("a:b")?, b"colon before\n");
        for gone in ["CON", "trail.", "back\\slash", "nul"] {
            assert!(!p.exists(gone), "{gone} left");
        }
    }
    // The rewind's own records read back, and it can be undone.
    p.ok(&["verify"])?;
    let undo = p.tb().args(["--json", "undo"]).output()?;
    assert_eq!(undo.status.code(), Some(0), "{:?}", undo);
    assert_eq!(p.read("a.txt")?, b"alpha by t1\n");
    assert_eq!(p.read("b.txt")?, b"beta by t2\n");
    if cfg!(not(windows)) {
        assert_eq!(p.read("CON")?, b"con by t1\n");
        assert_eq!(p.read("nul/inside.txt")?, b"inside by t1\n");
    }
    Ok(())
}
