//! The two-turn scenario every agent's hook adapter is tested with: a git
//! repository holding uncommitted work and a git-ignored `.env`; turn 1
//! creates a file in a new directory, edits a tracked file and runs one
//! shell command that deletes a file, edits `.env` with `sed -i` and
//! creates another file; turn 2 edits turn 1's new file. Then `turnback
//! list` must show two turns labelled with the prompts, and rewind / undo
//! must give each state back byte for byte (path, type, mode, bytes,
//! `.git/` included).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{TestResult, Tree, list, tree, turnback};

pub const PROMPT_1: &str = "Add a todo list, switch to the dark theme and clean up";
pub const PROMPT_2: &str = "Make the todo more urgent";

/// The new file of turn 1, in a new directory.
pub const NEW_FILE: &str = "docs/notes/todo.md";
pub const NEW_TEXT: &str = "# Todo\n\n- ship it\n";
/// Turn 1's edit of a tracked file.
pub const EDITED: &str = "src/config.js";
/// Turn 1's shell command.
pub const SHELL: &str = "rm old.txt && sed -i 's/^API_URL=.*/API_URL=http:\\/\\/localhost:8080/' .env && printf 'built\\n' > build.log";

/// Runs `git ARGS` in `root`.
fn git(root: &Path, args: &[&str]) -> TestResult {
    let status = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(root)
        .status()?;
    if !status.success() {
        return Err(format!("git {args:?} failed").into());
    }
    Ok(())
}

/// The small site of [`super::project`] as a git repository: committed,
/// then changed without a commit (uncommitted work), with `.env` ignored.
pub fn git_project() -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    let tmp = super::project()?;
    let root = tmp.path();
    std::fs::write(root.join(".gitignore"), ".env\nbuild.log\n")?;
    std::fs::write(root.join("old.txt"), "an old note\n")?;
    git(root, &["init", "-q"])?;
    git(root, &["add", "-A"])?;
    git(root, &["commit", "-qm", "the site"])?;
    std::fs::write(root.join("app.js"), "console.log('v2, not committed');\n")?;
    std::fs::write(root.join("draft.md"), "uncommitted draft\n")?;
    Ok(tmp)
}

/// What each tool call of the scenario does to the folder, as the agent's
/// tool would.
pub fn write_new_file(root: &Path) -> TestResult {
    std::fs::create_dir_all(root.join("docs/notes"))?;
    std::fs::write(root.join(NEW_FILE), NEW_TEXT)?;
    Ok(())
}

pub fn edit_tracked_file(root: &Path) -> TestResult {
    let p = root.join(EDITED);
    let text = std::fs::read_to_string(&p)?;
    assert!(text.contains("theme: 'light'"));
    std::fs::write(p, text.replacen("theme: 'light'", "theme: 'dark'", 1))?;
    Ok(())
}

pub fn run_shell(root: &Path) -> TestResult {
    let status = Command::new("sh")
        .arg("-c")
        .arg(SHELL)
        .current_dir(root)
        .status()?;
    assert!(status.success(), "the scenario's shell command ran");
    Ok(())
}

pub fn edit_new_file(root: &Path) -> TestResult {
    let p = root.join(NEW_FILE);
    let text = std::fs::read_to_string(&p)?;
    std::fs::write(p, text.replace("ship it", "ship it today"))?;
    Ok(())
}

/// The folder states the scenario passes through.
pub struct States {
    pub before: Tree,
    pub after_1: Tree,
    pub after_2: Tree,
}

/// `tree` without the paths (and everything under them) an agent writes
/// for itself, outside its tools (opencode's plugin dependencies, say): not
/// the agent's edits, so not a turn's.
pub fn without(mut tree: Tree, agent_state: &[&str]) -> Tree {
    tree.retain(|path, _| {
        !agent_state
            .iter()
            .any(|a| path == a || path.starts_with(&format!("{a}/")))
    });
    tree
}

/// Checks what turn 1 and turn 2 did to the folder.
pub fn check_effects(root: &Path, states: &States) -> TestResult {
    let (b, a1, a2) = (&states.before, &states.after_1, &states.after_2);
    assert!(b.contains_key(".env") && b.contains_key("old.txt"));
    assert!(a1.contains_key(NEW_FILE) && a1.contains_key("build.log"));
    assert!(!a1.contains_key("old.txt"));
    assert_ne!(a1[".env"], b[".env"], "sed -i changed .env");
    assert_ne!(a1[EDITED], b[EDITED]);
    assert_ne!(a2[NEW_FILE], a1[NEW_FILE]);
    let _ = root;
    Ok(())
}

fn ok(root: &Path, args: &[&str]) -> TestResult {
    let out = turnback(root, args)?;
    assert!(
        out.status.success(),
        "turnback {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Asserts two folder states are equal, naming each path that differs.
pub fn assert_same(now: &Tree, want: &Tree, what: &str) {
    let mut diffs = Vec::new();
    for (path, entry) in want {
        match now.get(path) {
            None => diffs.push(format!("missing {path}")),
            Some(e) if e != entry => diffs.push(format!(
                "differs {path}: {} {:o} {} bytes, want {} {:o} {} bytes",
                e.0,
                e.1,
                e.2.len(),
                entry.0,
                entry.1,
                entry.2.len()
            )),
            Some(_) => {}
        }
    }
    for path in now.keys().filter(|p| !want.contains_key(*p)) {
        diffs.push(format!("extra {path}"));
    }
    assert!(diffs.is_empty(), "{what}: {diffs:#?}");
}

/// `turnback list` shows the two turns labelled with the prompts; rewind of
/// turn 2 gives the state after turn 1, rewind of turn 1 the state before
/// it; undo, twice, brings turn 1's and then turn 2's state back.
pub fn check_turns(root: &Path, states: &States, prefix: &str) -> TestResult {
    check_effects(root, states)?;
    assert_same(&tree(root)?, &states.after_2, "the agent left the folder");
    let turns = list(root)?;
    let labels: Vec<&str> = turns.iter().filter_map(|t| t["label"].as_str()).collect();
    assert_eq!(labels, [PROMPT_1, PROMPT_2], "{turns:?}");
    let ids: Vec<String> = turns
        .iter()
        .filter_map(|t| t["turn"].as_str().map(str::to_owned))
        .collect();
    for id in &ids {
        assert!(id.starts_with(&format!("{prefix}-")), "{id}");
    }
    ok(root, &["rewind", &ids[1]])?;
    assert_same(&tree(root)?, &states.after_1, "rewind of turn 2");
    ok(root, &["rewind", &ids[0]])?;
    assert_same(&tree(root)?, &states.before, "rewind of turn 1");
    ok(root, &["undo"])?;
    assert_same(
        &tree(root)?,
        &states.after_1,
        "undo of the rewind of turn 1",
    );
    ok(root, &["undo"])?;
    assert_same(
        &tree(root)?,
        &states.after_2,
        "undo of the rewind of turn 2",
    );
    Ok(())
}

/// The store's directory for `root`, wherever the store keeps it.
pub fn store_dir(root: &Path) -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
    Ok(turnback::Store::open(root)?.store_dir().to_owned())
}

/// Damages the store's log so that no capture can be trusted.
pub fn damage_log(root: &Path) -> TestResult {
    let log = store_dir(root)?.join("log.jsonl");
    let mut bytes = std::fs::read(&log)?;
    bytes.extend_from_slice(b"{\"seq\":99,\"damaged\":true}\n");
    std::fs::write(&log, bytes)?;
    Ok(())
}

/// `value` with every `{{ROOT}}` in its strings replaced.
pub fn with_root(value: &Value, root: &Path) -> Value {
    let r = root.to_string_lossy();
    match value {
        Value::String(s) => Value::String(s.replace("{{ROOT}}", &r)),
        Value::Array(a) => Value::Array(a.iter().map(|v| with_root(v, root)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), with_root(v, root)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether a configured matcher (`a|b`, `^(a|b)$`, or none) selects `tool`.
fn matcher_selects(matcher: Option<&str>, tool: Option<&str>) -> bool {
    match (matcher, tool) {
        (Some(m), Some(t)) => m
            .trim_start_matches("^(")
            .trim_end_matches(")$")
            .split('|')
            .any(|x| x == t),
        _ => true,
    }
}

/// The turnback hook command the JSON settings file `rel` configures for
/// `event` (and `tool`): matcher groups (`{"matcher","hooks":[…]}`) and
/// flat handler lists (`{"command"|"bash","matcher"}`) alike.
pub fn configured_command(
    root: &Path,
    rel: &str,
    event: &str,
    tool: Option<&str>,
) -> Result<String, Box<dyn std::error::Error>> {
    let settings: Value = serde_json::from_slice(&std::fs::read(root.join(rel))?)?;
    for entry in settings["hooks"][event].as_array().into_iter().flatten() {
        if !matcher_selects(entry.get("matcher").and_then(Value::as_str), tool) {
            continue;
        }
        let handlers = match entry.get("hooks").and_then(Value::as_array) {
            Some(h) => h.clone(),
            None => vec![entry.clone()],
        };
        for h in handlers {
            let command = h
                .get("command")
                .or_else(|| h.get("bash"))
                .and_then(Value::as_str);
            if let Some(c) = command.filter(|c| c.contains(" hook ")) {
                return Ok(c.to_owned());
            }
        }
    }
    Err(format!("{rel} runs no turnback hook for {event} {tool:?}").into())
}

/// `turnback init AGENT` in `root`, with `env` set.
pub fn init(root: &Path, agent: &str, env: &[(&str, &Path)]) -> TestResult {
    let mut cmd = Command::new(super::BIN);
    cmd.args(["init", agent]).current_dir(root);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    assert!(
        out.status.success(),
        "init {agent}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Runs `command` in a shell in `root` with `event` on stdin; asserts the
/// hook let the agent go on (exit 0) and printed `stdout`.
pub fn send_ok(root: &Path, command: &str, event: &Value, stdout: &str) -> TestResult {
    let out = super::run_hook(root, command, serde_json::to_string(event)?.as_bytes(), &[])?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), stdout);
    Ok(())
}
