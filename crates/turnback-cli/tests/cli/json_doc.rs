//! docs/JSON.md against the binary: every command is run with `--json`
//! (most several times, so that its lists are not empty), and each document
//! it prints is checked against the table of its section: a field the
//! table does not list, a listed field that is missing (where its parent
//! is there), or a value of another type fails the test. So does a
//! command of the top-level help that has no section, and a section that
//! no run here checked. The conventions of the page are checked on every
//! key as well: no `id`, no `*_ns`, times under `*_at` in RFC 3339, `files`
//! a list, and no plural noun holding a count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::common::*;

/// One row of a table: the type of a field.
#[derive(Debug, Clone)]
struct FieldType {
    /// `string`, `integer`, `boolean`, `time`, `path`, `any`, `array`,
    /// `object`, `array of T`, or `object (SECTION)`.
    base: String,
    nullable: bool,
    optional: bool,
}

/// The tables of docs/JSON.md, by the command names of their headings.
struct Doc {
    sections: BTreeMap<String, BTreeMap<String, FieldType>>,
    /// The commands the page says print no JSON.
    no_json: BTreeSet<String>,
}

fn doc() -> Res<Doc> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/JSON.md");
    let text = std::fs::read_to_string(&path)?;
    let mut sections = BTreeMap::new();
    let mut no_json = BTreeSet::new();
    let mut current: Vec<String> = Vec::new();
    let mut in_no_json = false;
    let mut table: BTreeMap<String, FieldType> = BTreeMap::new();
    let mut flush = |names: &mut Vec<String>, table: &mut BTreeMap<String, FieldType>| {
        for n in names.drain(..) {
            sections.insert(n, table.clone());
        }
        table.clear();
    };
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            flush(&mut current, &mut table);
            in_no_json = heading == "Commands that print no JSON";
            // Backticked names; `Errors: \`error\`` names the error shape.
            current = heading
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            continue;
        }
        if in_no_json {
            // The commands named first in each sentence's backticks.
            for name in line.split('`').skip(1).step_by(2) {
                if ["hook", "mcp", "maintain"].contains(&name) {
                    no_json.insert(name.to_owned());
                }
            }
        }
        if !current.is_empty() && line.starts_with("| `") {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let field = cells[1].trim_matches('`').to_owned();
            let ty = cells[2];
            let mut parts = ty.split(", ");
            let head = parts.next().unwrap_or("");
            let optional = parts.any(|p| p == "optional");
            let (base, nullable) = match head.strip_suffix(" or null") {
                Some(b) => (b.to_owned(), true),
                None => (head.to_owned(), false),
            };
            let previous = table.insert(
                field.clone(),
                FieldType {
                    base,
                    nullable,
                    optional,
                },
            );
            assert!(previous.is_none(), "{field} is listed twice in a section");
        }
    }
    flush(&mut current, &mut table);
    Ok(Doc { sections, no_json })
}

/// `2026-12-06T09:40:35.786684193Z`.
fn is_rfc3339_nanos(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 30
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..29)
        && b[29] == b'Z'
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Checks `v`, at `path` of a document of `section`, against the tables;
/// problems are collected in `errors`, fields seen in `seen`.
struct Checker<'d> {
    doc: &'d Doc,
    errors: Vec<String>,
    seen: BTreeSet<(String, String)>,
}

impl Checker<'_> {
    fn document(&mut self, section: &str, v: &Value) {
        let Some(table) = self.doc.sections.get(section) else {
            self.errors
                .push(format!("docs/JSON.md has no section `{section}`"));
            return;
        };
        match v {
            Value::Array(items) => {
                for item in items {
                    self.object(section, table, "[]", item);
                }
            }
            _ => self.object(section, table, "", v),
        }
    }

    fn object(
        &mut self,
        section: &str,
        table: &BTreeMap<String, FieldType>,
        path: &str,
        v: &Value,
    ) {
        let Some(map) = v.as_object() else {
            self.errors
                .push(format!("{section}: {path} is not an object: {v}"));
            return;
        };
        for (key, value) in map {
            self.convention(section, path, key, value);
            self.field(section, table, &join(path, key), value);
        }
        // Every listed field of this object that is not optional is here.
        for (field, ty) in table {
            let Some(key) = (if path.is_empty() {
                Some(field.as_str())
            } else {
                field.strip_prefix(path).and_then(|r| r.strip_prefix('.'))
            }) else {
                continue;
            };
            if key.contains(['.', '[']) || ty.optional || field.starts_with("[]") && path.is_empty()
            {
                continue;
            }
            if !map.contains_key(key) {
                self.errors
                    .push(format!("{section}: `{field}` is listed but missing in {v}"));
            }
        }
    }

    fn field(&mut self, section: &str, table: &BTreeMap<String, FieldType>, path: &str, v: &Value) {
        let Some(ty) = table.get(path) else {
            self.errors.push(format!(
                "{section}: `{path}` is not in docs/JSON.md (value {v})"
            ));
            return;
        };
        self.seen.insert((section.to_owned(), path.to_owned()));
        if v.is_null() {
            if !ty.nullable {
                self.errors.push(format!("{section}: `{path}` is null"));
            }
            return;
        }
        let base = ty.base.as_str();
        if let Some(inner) = base
            .strip_prefix("object (")
            .and_then(|r| r.strip_suffix(')'))
        {
            let inner = inner.to_owned();
            self.document(&inner, v);
            return;
        }
        if base == "array" {
            match v.as_array() {
                Some(items) => {
                    for item in items {
                        self.object(section, table, &format!("{path}[]"), item);
                    }
                }
                None => self
                    .errors
                    .push(format!("{section}: `{path}` is not an array: {v}")),
            }
            return;
        }
        if base == "object" {
            self.object(section, table, path, v);
            return;
        }
        if let Some(of) = base.strip_prefix("array of ") {
            match v.as_array() {
                Some(items) => {
                    for item in items {
                        self.scalar(section, path, of, item);
                    }
                }
                None => self
                    .errors
                    .push(format!("{section}: `{path}` is not an array: {v}")),
            }
            return;
        }
        self.scalar(section, path, base, v);
    }

    fn scalar(&mut self, section: &str, path: &str, ty: &str, v: &Value) {
        let ok = match ty {
            "string" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "boolean" => v.is_boolean(),
            "time" => v.as_str().is_some_and(is_rfc3339_nanos),
            "path" => {
                v.is_string()
                    || v.as_object().is_some_and(|o| {
                        o.len() == 1 && o.get("bytes_hex").is_some_and(Value::is_string)
                    })
            }
            "any" => true,
            other => {
                self.errors
                    .push(format!("{section}: `{path}` has an unknown type {other:?}"));
                return;
            }
        };
        if !ok {
            self.errors
                .push(format!("{section}: `{path}` is not {ty}: {v}"));
        }
    }

    /// The page's naming conventions, on every key.
    fn convention(&mut self, section: &str, path: &str, key: &str, v: &Value) {
        let at = join(path, key);
        // `config` mirrors config.toml's own keys.
        if at.starts_with("config.") {
            return;
        }
        let mut bad = |why: &str| {
            self.errors.push(format!("{section}: `{at}`: {why}"));
        };
        if key == "id" {
            bad("a turn's id is `turn`");
        }
        if key.ends_with("_ns") {
            bad("times are RFC 3339 strings under *_at");
        }
        if (key.ends_with("_at") || key == "at") && !v.as_str().is_some_and(is_rfc3339_nanos) {
            bad("a name ending in _at holds an RFC 3339 time");
        }
        if key == "files" && !v.is_array() {
            bad("`files` is always a list");
        }
        if v.is_u64() || v.is_i64() {
            let stem = key.trim_end_matches("_before").trim_end_matches("_after");
            let last = stem.rsplit('_').next().unwrap_or(stem);
            if last.ends_with('s') && last != "bytes" {
                bad("a count is named <thing>_count (a plural noun is a list)");
            }
        }
    }
}

/// A project and the runs of the binary that the checks read.
struct Runs {
    p: Project,
    home: std::path::PathBuf,
}

impl Runs {
    fn new() -> Res<Runs> {
        let p = Project::new()?;
        let home = p.outer.join("home");
        std::fs::create_dir(&home)?;
        Ok(Runs { p, home })
    }

    /// `turnback --json ARGS` with `stdin`; expects `code`; returns the
    /// document (from stdout, or from stderr for `exec`).
    fn run(&self, args: &[&str], stdin: &str, code: i32) -> Res<Value> {
        let out = self
            .p
            .tb()
            .env("TURNBACK_NO_BACKGROUND", "1")
            .env("HOME", &self.home)
            .arg("--json")
            .args(args)
            .write_stdin(stdin.to_owned())
            .assert()
            .code(code);
        let o = out.get_output();
        let stream = if args.first() == Some(&"exec") {
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            err.lines()
                .rev()
                .find(|l| l.starts_with('{'))
                .ok_or_else(|| format!("exec printed no JSON on stderr: {err}"))?
                .as_bytes()
                .to_vec()
        } else {
            o.stdout.clone()
        };
        parse_json(&stream)
    }
}

#[test]
fn every_command_json_matches_docs_json_md() -> TestResult {
    let doc = doc()?;
    let r = Runs::new()?;
    let p = &r.p;
    // (section, document)
    let mut docs: Vec<(&str, Value)> = Vec::new();
    p.write("a.txt", "one\n")?;
    p.write("b.txt", "bee\n")?;
    p.write("keep.txt", "mine\n")?;
    docs.push((
        "write",
        r.run(
            &["write", "--turn", "t1", "--label", "first", "a.txt"],
            "two\n",
            0,
        )?,
    ));
    docs.push((
        "capture",
        r.run(
            &["capture", "--turn", "t2", "a.txt", "b.txt", "new.txt"],
            "",
            0,
        )?,
    ));
    docs.push((
        "mkdir",
        r.run(&["mkdir", "--turn", "t2", "dir/sub"], "", 0)?,
    ));
    docs.push((
        "mv",
        r.run(&["mv", "--turn", "t2", "b.txt", "c.txt"], "", 0)?,
    ));
    docs.push(("rm", r.run(&["rm", "--turn", "t2", "c.txt"], "", 0)?));
    docs.push((
        "edit",
        r.run(
            &[
                "edit", "--turn", "t3", "--old", "two", "--new", "three", "a.txt",
            ],
            "",
            0,
        )?,
    ));
    docs.push((
        "edit",
        r.run(
            &[
                "edit",
                "--turn",
                "t3",
                "--old",
                "three",
                "--new",
                "x",
                "--dry-run",
                "a.txt",
            ],
            "",
            0,
        )?,
    ));
    docs.push(("seal", r.run(&["seal", "t3"], "", 0)?));
    docs.push(("list", r.run(&["list"], "", 0)?));
    docs.push(("log", r.run(&["log", "--all"], "", 0)?));
    for t in ["t1", "t2", "t3"] {
        docs.push(("show", r.run(&["show", t], "", 0)?));
        docs.push(("show --stat", r.run(&["show", t, "--stat"], "", 0)?));
        docs.push(("show --patch", r.run(&["show", t, "--patch"], "", 0)?));
        docs.push(("diff", r.run(&["diff", t], "", 0)?));
    }
    #[cfg(unix)]
    {
        docs.push(("snapshot", r.run(&["snapshot", "--turn", "t4"], "", 0)?));
        docs.push((
            "exec",
            r.run(
                &[
                    "exec",
                    "--turn",
                    "t4",
                    "--",
                    "sh",
                    "-c",
                    "echo z > z.txt; mv keep.txt kept.txt",
                ],
                "",
                0,
            )?,
        ));
        docs.push(("snapshot", r.run(&["snapshot", "--turn", "t5"], "", 0)?));
        p.write("y.txt", "why\n")?;
        docs.push((
            "snapshot",
            r.run(&["snapshot", "--turn", "t5", "--after"], "", 0)?,
        ));
        p.write("y.txt", "changed\n")?;
        p.write("node_modules/.package-lock.json", "{}\n")?;
        docs.push(("status", r.run(&["status"], "", 0)?));
    }
    #[cfg(not(unix))]
    docs.push(("status", r.run(&["status"], "", 0)?));
    // A file of yours changed after the turn: a conflict.
    p.write("a.txt", "yours\n")?;
    docs.push(("rewind", r.run(&["rewind", "t3", "--dry-run"], "", 0)?));
    docs.push((
        "rewind",
        r.run(&["rewind", "t1", "--dry-run", "--", "a.txt"], "", 0)?,
    ));
    docs.push(("rewind", r.run(&["rewind", "t3"], "", 0)?));
    docs.push(("undo", r.run(&["undo"], "", 0)?));
    docs.push(("redo", r.run(&["redo"], "", 0)?));
    docs.push(("undo", r.run(&["undo"], "", 0)?));
    docs.push(("revert", r.run(&["revert", "t2", "--dry-run"], "", 0)?));
    docs.push((
        "revert",
        r.run(&["revert", "t1", "--keep-conflicts"], "", 0)?,
    ));
    docs.push(("list", r.run(&["list"], "", 0)?));
    docs.push(("log", r.run(&["log", "--all"], "", 0)?));
    docs.push((
        "gc",
        r.run(&["gc", "--dry-run", "--keep-turns", "2"], "", 0)?,
    ));
    docs.push(("gc", r.run(&["gc"], "", 0)?));
    docs.push(("verify", r.run(&["verify"], "", 0)?));
    docs.push(("repair", r.run(&["repair", "--dry-run"], "", 0)?));
    docs.push(("store", r.run(&["store"], "", 0)?));
    docs.push(("store --list", r.run(&["store", "--list"], "", 0)?));
    // Moving a store is tested on Unix only (tests/store_location.rs);
    // under Wine the move's removal of the old folder is refused.
    #[cfg(unix)]
    {
        docs.push((
            "store --in-project",
            r.run(&["store", "--in-project"], "", 0)?,
        ));
        docs.push(("store --data-dir", r.run(&["store", "--data-dir"], "", 0)?));
    }
    // A damaged store: verify and repair with their lists filled.
    let store_dir = p.store_dir()?;
    let log = store_dir.join("log.jsonl");
    let mut bytes = std::fs::read(&log)?;
    let first_end = bytes.iter().position(|&b| b == b'\n').ok_or("a log line")?;
    bytes[first_end / 2] ^= 0x01;
    bytes.extend_from_slice(b"{\"torn");
    std::fs::write(&log, &bytes)?;
    std::fs::write(store_dir.join("packs").join("stray.txt"), "x")?;
    docs.push(("verify", r.run(&["verify"], "", 1)?));
    docs.push(("repair", r.run(&["repair", "--dry-run"], "", 0)?));
    docs.push(("repair", r.run(&["repair"], "", 0)?));
    docs.push(("init", r.run(&["init", "claude-code"], "", 0)?));
    // An osfoundry store: one entry imported, one outside the project
    // refused, one whose blob is missing recorded as not saved.
    let osf = p.root.join(".osfoundry/checkpoints");
    std::fs::create_dir_all(osf.join("blobs"))?;
    // Newer than the store's turns (an older one is refused: it would be
    // appended after them).
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let at = u64::try_from(now.as_nanos())? + 1_000_000_000;
    let index = serde_json::json!([{
        "turn": "o1", "label": "old", "at": at,
        "files": [
            {"path": p.path("o-new.txt"), "pre": {"kind": "absent"}},
            {"path": p.outer.join("outside.txt"), "pre": {"kind": "absent"}},
            {"path": p.path("o-lost.txt"), "pre": {"kind": "content", "sha256": "00".repeat(32), "bytes": 3}},
        ],
    }]);
    std::fs::write(osf.join("index.json"), index.to_string())?;
    docs.push(("import-osfoundry", r.run(&["import-osfoundry"], "", 3)?));
    #[cfg(unix)]
    docs.push(("demo", r.run(&["demo"], "", 0)?));
    docs.push(("completions", r.run(&["completions", "bash"], "", 0)?));
    docs.push(("man", r.run(&["man"], "", 0)?));
    docs.push(("error", r.run(&["show", "no-such-turn"], "", 1)?));
    docs.push(("error", r.run(&["rewnd"], "", 2)?));
    let forget = Runs::new()?;
    forget.run(&["write", "--turn", "t1", "f.txt"], "f\n", 0)?;
    docs.push(("store --forget", forget.run(&["store", "--forget"], "", 0)?));

    let mut check = Checker {
        doc: &doc,
        errors: Vec::new(),
        seen: BTreeSet::new(),
    };
    for (section, v) in &docs {
        check.document(section, v);
    }
    // Every command of the help has a section (or prints no JSON), and
    // every section was checked here.
    let help = p.ok(&["--help"])?;
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.ends_with("commands:"))
        .take_while(|l| !l.starts_with("Options:"))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 28, "{commands:?}");
    for c in &commands {
        if !doc.sections.contains_key(*c) && !doc.no_json.contains(*c) {
            check
                .errors
                .push(format!("`{c}` has no section in docs/JSON.md"));
        }
    }
    let run: BTreeSet<&str> = docs.iter().map(|(s, _)| *s).collect();
    for s in doc.sections.keys() {
        let unix_only = [
            "exec",
            "snapshot",
            "demo",
            "store --in-project",
            "store --data-dir",
        ];
        let on_this_platform = cfg!(unix) || !unix_only.contains(&s.as_str());
        if on_this_platform && !run.contains(s.as_str()) {
            check.errors.push(format!(
                "section `{s}` of docs/JSON.md is checked by no run"
            ));
        }
    }
    assert!(
        check.errors.is_empty(),
        "docs/JSON.md and the output disagree:\n{}",
        check.errors.join("\n")
    );
    // The runs reached the lists' elements, not only empty lists.
    for (section, field) in [
        ("write", "captured[].pre.blob"),
        ("capture", "already_captured"),
        ("show", "files[].pre.mode"),
        ("rewind", "conflicts[].reason"),
        ("revert", "kept[].reason"),
        ("verify", "damage[].turn_hint"),
        ("verify", "warnings[].name"),
        ("repair", "dropped[].line"),
        ("import-osfoundry", "imported[].osfoundry_at"),
        ("import-osfoundry", "refused_paths[].reason"),
        ("import-osfoundry", "not_saved[].reason"),
        ("store", "oldest_turn.started_at"),
    ] {
        assert!(
            check.seen.contains(&(section.to_owned(), field.to_owned())),
            "no run showed {section}'s {field}"
        );
    }
    #[cfg(unix)]
    for (section, field) in [
        ("snapshot", "recorded.changes.created"),
        ("status", "snapshot.at"),
        ("status", "not_covered[].reason"),
    ] {
        assert!(
            check.seen.contains(&(section.to_owned(), field.to_owned())),
            "no run showed {section}'s {field}"
        );
    }
    Ok(())
}

#[test]
fn the_checker_fails_on_an_undocumented_or_renamed_field() -> TestResult {
    let doc = doc()?;
    let mut check = Checker {
        doc: &doc,
        errors: Vec::new(),
        seen: BTreeSet::new(),
    };
    let row = serde_json::json!([{
        "turn": "t1", "label": null, "started_at": "2026-12-06T09:40:35.786684193Z",
        "first_seq": 1, "file_count": 2,
    }]);
    check.document("list", &row);
    assert_eq!(check.errors, Vec::<String>::new());
    // Renamed back to the old names: the new ones are missing, the old
    // ones undocumented, and the conventions broken.
    let old = serde_json::json!([{
        "turn": "t1", "label": null, "started_at_ns": 1, "seq": 1, "files": 2,
    }]);
    check.document("list", &old);
    let text = check.errors.join("\n");
    for want in [
        "`[].started_at_ns` is not in docs/JSON.md",
        "`[].files`: `files` is always a list",
        "`[].file_count` is listed but missing",
        "times are RFC 3339",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    Ok(())
}
