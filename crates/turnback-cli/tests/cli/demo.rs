//! `turnback demo`: only turnback's row matches, and each git row names the
//! files that git by its nature misses.

use std::collections::BTreeMap;

use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;

use crate::common::{Project, Res, TestResult, parse_json, texts, turnback_in};

/// Per method: whether it matches, and the differing paths with how.
type Rows = BTreeMap<String, (bool, Vec<(String, String)>)>;

fn rows(v: &Value) -> Res<Rows> {
    let mut out = BTreeMap::new();
    for r in v.as_array().ok_or("the demo's JSON is not an array")? {
        let method = r["method"].as_str().ok_or("a row without a method")?;
        let matches = r["matches"].as_bool().ok_or("a row without a verdict")?;
        let diffs = r["differences"]
            .as_array()
            .ok_or("a row without differences")?
            .iter()
            .map(|d| {
                (
                    d["path"].as_str().unwrap_or_default().to_owned(),
                    d["how"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        out.insert(method.to_owned(), (matches, diffs));
    }
    Ok(out)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, h)| (p.to_string(), h.to_string()))
        .collect()
}

#[test]
fn demo_json_shows_only_turnback_matching_and_what_each_git_method_misses() -> TestResult {
    let p = Project::new()?;
    let out = p.tb().args(["demo", "--json"]).assert().success();
    let v = parse_json(&out.get_output().stdout)?;
    assert_eq!(v.as_array().map(Vec::len), Some(5));
    assert_eq!(v[0]["method"], "turnback rewind");
    let rows = rows(&v)?;
    let row = |m: &str| rows.get(m).cloned().ok_or(format!("no row for {m}"));

    assert_eq!(row("turnback rewind")?, (true, vec![]));
    // Tracked files go back to the index: the user's title edit is lost,
    // the git-ignored .env keeps the agent's edit, theme.css stays.
    assert_eq!(
        row("git checkout -- .")?,
        (
            false,
            pairs(&[
                (".env", "different"),
                ("index.html", "different"),
                ("theme.css", "extra")
            ])
        )
    );
    // The untracked notes.md is put away with the agent's theme.css.
    assert_eq!(
        row("git stash -u")?,
        (
            false,
            pairs(&[
                (".env", "different"),
                ("index.html", "different"),
                ("notes.md", "missing")
            ])
        )
    );
    // git clean deletes the user's notes.md along with theme.css.
    assert_eq!(
        row("git checkout -- . && git clean -fd")?,
        (
            false,
            pairs(&[
                (".env", "different"),
                ("index.html", "different"),
                ("notes.md", "missing")
            ])
        )
    );
    // The stash keeps the title edit, but not .env, and theme.css stays.
    assert_eq!(
        row("git stash create + git checkout")?,
        (
            false,
            pairs(&[(".env", "different"), ("theme.css", "extra")])
        )
    );
    for r in v.as_array().into_iter().flatten() {
        assert_eq!(r["matches"], r["expected_match"], "{r}");
    }
    // The demo leaves nothing behind in the current directory.
    assert_eq!(p.snapshot()?, vec![]);
    Ok(())
}

#[test]
fn demo_prints_a_table_of_the_five_methods() -> TestResult {
    let p = Project::new()?;
    let out = p.tb().arg("demo").assert().success();
    let (stdout, _) = texts(out.get_output());
    let verdict = |method: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{method}  ")))
            .and_then(|l| l[method.len()..].split_whitespace().next())
            .map(str::to_owned)
    };
    assert_eq!(
        verdict("turnback rewind").as_deref(),
        Some("yes"),
        "{stdout}"
    );
    for m in [
        "git checkout -- .",
        "git stash -u",
        "git checkout -- . && git clean -fd",
        "git stash create + git checkout",
    ] {
        assert_eq!(verdict(m).as_deref(), Some("no"), "{m}: {stdout}");
    }
    assert!(stdout.contains("212 -> 41 lines"), "{stdout}");
    assert!(
        stdout.contains("Only `turnback rewind` put the folder back as it was before the turn."),
        "{stdout}"
    );
    Ok(())
}

#[test]
fn the_kept_demo_folders_hold_what_the_table_says() -> TestResult {
    let p = Project::new()?;
    let out = p.tb().args(["demo", "--json", "--keep"]).assert().success();
    let (_, stderr) = texts(out.get_output());
    let kept = stderr
        .lines()
        .find_map(|l| l.strip_prefix("turnback: the demo's folders are kept in "))
        .ok_or(format!("no folder named in {stderr:?}"))?;
    let kept = std::path::PathBuf::from(kept);
    let check = || -> TestResult {
        let site = |m: &str, f: &str| kept.join(m).join(f);
        // Checked on disk, apart from the demo's own comparison.
        assert!(
            std::fs::read_to_string(site("turnback-rewind", "index.html"))?
                .contains("<title>Harbor Bakery: fresh bread daily</title>")
        );
        assert!(!site("turnback-rewind", "theme.css").exists());
        assert!(
            std::fs::read_to_string(site("turnback-rewind", ".env"))?
                .contains("API_URL=https://api.harborbakery.example/v1")
        );
        assert!(!site("git-stash-u", "notes.md").exists());
        assert!(site("git-checkout", "theme.css").exists());
        assert!(
            std::fs::read_to_string(site("git-checkout", ".env"))?
                .contains("API_URL=http://localhost:8080")
        );
        assert_eq!(
            std::fs::read_to_string(site("site", "styles.css"))?
                .lines()
                .count(),
            41
        );
        assert_eq!(
            std::fs::read_to_string(site("turnback-rewind", "styles.css"))?
                .lines()
                .count(),
            212
        );
        Ok(())
    };
    let result = check();
    std::fs::remove_dir_all(&kept)?;
    result
}

#[test]
fn demo_without_git_says_git_is_needed() -> TestResult {
    let p = Project::new()?;
    let empty = p.outer.join("no-git-here");
    std::fs::create_dir(&empty)?;
    turnback_in(&p.root)
        .env("PATH", &empty)
        .arg("demo")
        .assert()
        .code(1)
        .stdout("")
        .stderr(contains("needs the real `git`").and(contains("install git")));
    Ok(())
}

/// The demo's stores live in its own temporary folder: it registers and
/// leaves nothing in the user's data directory (its projects are gone once
/// it ends).
#[test]
fn the_demo_leaves_nothing_in_the_data_directory() -> TestResult {
    let p = Project::new()?;
    let data = p.outer.join("data");
    std::fs::create_dir(&data)?;
    p.tb()
        .env("TURNBACK_DATA_DIR", &data)
        .args(["demo", "--json"])
        .assert()
        .success();
    let left = std::fs::read_dir(&data)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<Vec<_>, _>>()?;
    assert!(
        left.is_empty(),
        "the demo left {left:?} in {}",
        data.display()
    );
    Ok(())
}
