//! `gc --dry-run`, a gc that drops nothing, and what `gc` and `store` say
//! of a store's size (human units in text, bytes in JSON).

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

/// Every file under the store's directory with its bytes (the lock file's
/// too: it is empty and stays so).
fn store_files(dir: &Path) -> Res<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            let rel = p.strip_prefix(dir)?.to_string_lossy().into_owned();
            if std::fs::symlink_metadata(&p)?.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p)?);
            }
        }
    }
    Ok(out)
}

/// Runs `turnback ARGS` in the project with no background maintenance (so
/// that nothing changes the store after the command returns).
fn run(p: &Project, args: &[&str], stdin: &[u8]) -> Res<(String, String)> {
    let out = p
        .tb()
        .env("TURNBACK_NO_BACKGROUND", "1")
        .args(args)
        .write_stdin(stdin.to_vec())
        .assert()
        .success();
    Ok(texts(out.get_output()))
}

fn json(p: &Project, args: &[&str]) -> Res<serde_json::Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (stdout, _) = run(p, &all, b"")?;
    parse_json(stdout.as_bytes())
}

/// A size as `turnback` prints it for people: `512 B`, `1.5 KiB`.
fn is_human_size(s: &str) -> bool {
    let Some((n, unit)) = s.split_once(' ') else {
        return false;
    };
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    units.contains(&unit)
        && if unit == "B" {
            n.parse::<u64>().is_ok()
        } else {
            n.split_once('.').is_some_and(|(a, b)| {
                a.parse::<u64>().is_ok() && b.len() == 1 && b.parse::<u8>().is_ok()
            })
        }
}

/// Three turns of `write`s, each of 30 files of 2 KiB.
fn three_turns() -> Res<Project> {
    let p = Project::new()?;
    for turn in ["t1", "t2", "t3"] {
        for i in 0..30 {
            let path = format!("src/f{i}.txt");
            let body = format!("{turn} {i} ").repeat(200);
            run(&p, &["write", "--turn", turn, &path], body.as_bytes())?;
        }
    }
    Ok(p)
}

#[test]
fn gc_dry_run_says_what_gc_would_drop_and_free_and_changes_nothing() -> TestResult {
    let p = three_turns()?;
    let dir = p.store_dir()?;
    let before = store_files(&dir)?;
    let dry = json(&p, &["gc", "--dry-run", "--keep-turns", "1"])?;
    assert_eq!(
        store_files(&dir)?,
        before,
        "a dry run changed the store's files"
    );
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["dropped_turns"], serde_json::json!(["t1", "t2"]));
    assert_eq!(dry["kept_turn_count"], 1);
    let (b, a) = (
        dry["bytes_before"].as_u64().ok_or("bytes_before")?,
        dry["bytes_after"].as_u64().ok_or("bytes_after")?,
    );
    assert!(a < b, "nothing would be freed: {dry}");
    assert!(dry["removed_pack_count"].as_u64() > Some(0), "{dry}");
    // Text: what would go, in human units, and that nothing changed.
    let (text, _) = run(&p, &["gc", "--dry-run", "--keep-turns", "1"], b"")?;
    assert!(
        text.contains("would") && text.contains("dry run: nothing changed"),
        "{text}"
    );
    assert!(
        text.contains("  drop turn t1\n") && text.contains("  drop turn t2\n"),
        "{text}"
    );
    assert_eq!(store_files(&dir)?, before);
    // The real gc does what the dry run said.
    let real = json(&p, &["gc", "--keep-turns", "1"])?;
    assert_eq!(real["dry_run"], false);
    for key in [
        "dropped_turns",
        "kept_turn_count",
        "removed_pack_count",
        "bytes_before",
        "bytes_after",
        "record_count_before",
        "record_count_after",
    ] {
        assert_eq!(real[key], dry[key], "{key}: {real} vs {dry}");
    }
    assert_ne!(store_files(&dir)?, before);
    assert_eq!(strings(&json(&p, &["list"])?, Some("turn")), ["t3"]);
    Ok(())
}

#[test]
fn gc_and_store_print_sizes_in_human_units() -> TestResult {
    let p = three_turns()?;
    let (text, _) = run(&p, &["gc"], b"")?;
    // "gc kept 3 turn(s), ...; 12.3 KiB -> 12.3 KiB, 0 B freed"
    let sizes = text.split(';').nth(1).ok_or_else(|| text.clone())?;
    let (from, rest) = sizes
        .trim()
        .split_once(" -> ")
        .ok_or_else(|| text.clone())?;
    let (to, freed) = rest.split_once(", ").ok_or_else(|| text.clone())?;
    assert!(is_human_size(from) && is_human_size(to), "{text}");
    assert!(freed.trim_end().ends_with(" freed"), "{text}");
    assert!(
        is_human_size(freed.trim_end().trim_end_matches(" freed")),
        "{text}"
    );
    let (text, _) = run(&p, &["store"], b"")?;
    let size = text
        .lines()
        .find_map(|l| l.strip_prefix("size: "))
        .ok_or_else(|| format!("no size in: {text}"))?;
    assert!(is_human_size(size), "{size}");
    let (list, _) = run(&p, &["store", "--list"], b"")?;
    assert!(list.contains("KiB"), "{list}");
    Ok(())
}

#[test]
fn store_shows_its_size_turns_and_limits() -> TestResult {
    let p = three_turns()?;
    std::fs::write(
        p.store_dir()?.join("config.toml"),
        "[retention]\nkeep_turns = 7\nkeep_days = 9\nmax_size = \"3M\"\n[gc]\nauto_every_captures = 0\n",
    )?;
    let v = json(&p, &["store"])?;
    let dir = p.store_dir()?;
    assert_eq!(v["store_dir"].as_str().map(Path::new), Some(dir.as_path()));
    let files = store_files(&dir)?;
    let bytes: u64 = files.values().map(|b| b.len() as u64).sum();
    assert_eq!(v["bytes"], bytes, "{v}");
    assert_eq!(v["turn_count"], 3);
    assert_eq!(v["oldest_turn"]["turn"], "t1");
    assert_eq!(v["newest_turn"]["turn"], "t3");
    assert!(
        v["newest_turn"]["started_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(v["config"]["retention"]["keep_turns"], 7);
    assert_eq!(v["config"]["retention"]["keep_days"], 9);
    assert_eq!(v["config"]["retention"]["max_size"], 3 << 20);
    assert_eq!(v["config"]["gc"]["auto_every_captures"], 0);
    let (text, _) = run(&p, &["store"], b"")?;
    for want in [
        "turns: 3, oldest t1 (",
        ", newest t3 (",
        "limits: keep_turns 7, keep_days 9, max_size 3.0 MiB (automatic gc off;",
        "config.toml)",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    // A folder with no store says so and makes none.
    let empty = Project::new()?;
    let v = json(&empty, &["store"])?;
    assert!(v["store_dir"].is_null() && v["turn_count"].is_null(), "{v}");
    assert!(!empty.exists(".turnback"));
    Ok(())
}

/// A gc that drops nothing leaves every file of the store as it was. It
/// used to rewrite the log whenever a snapshot record named a blob the
/// tree state no longer names, though a capture record still named it
/// (its pack stays): the capture then had to name the blob's pack itself,
/// and the log grew with each such gc while dropping nothing.
#[cfg(unix)]
#[test]
fn a_gc_that_drops_nothing_leaves_the_store_as_it_was() -> TestResult {
    let p = Project::new()?;
    for i in 0..40 {
        p.write(&format!("f{i}.txt"), format!("{i}\n").repeat(50))?;
    }
    run(&p, &["exec", "--turn", "t0", "--", "true"], b"")?;
    for (turn, tag) in [("t1", "x"), ("t2", "y")] {
        let script = format!("for i in $(seq 0 39); do echo {tag}$i > f$i.txt; done");
        run(
            &p,
            &["exec", "--turn", turn, "--", "sh", "-c", &script],
            b"",
        )?;
    }
    let dir = p.store_dir()?;
    let before = store_files(&dir)?;
    let report = json(&p, &["gc"])?;
    assert_eq!(report["dropped_turns"], serde_json::json!([]), "{report}");
    assert_eq!(report["removed_pack_count"], 0, "{report}");
    assert_eq!(report["bytes_after"], report["bytes_before"], "{report}");
    let after = store_files(&dir)?;
    for (name, bytes) in &before {
        let now = after.get(name).map(Vec::len);
        assert_eq!(
            now,
            Some(bytes.len()),
            "{name}: {} bytes before",
            bytes.len()
        );
    }
    assert_eq!(after, before, "a gc that dropped nothing changed the store");
    // Every turn still rewinds whole.
    let v = json(&p, &["rewind", "t0"])?;
    assert_eq!(v["failed"], serde_json::json!([]));
    for i in 0..40 {
        assert_eq!(
            p.read(&format!("f{i}.txt"))?,
            format!("{i}\n").repeat(50).into_bytes()
        );
    }
    Ok(())
}
