//! Gemini CLI integration, end to end: `turnback init gemini-cli` writes
//! `.gemini/settings.json`; the recorded hook events in
//! `tests/fixtures/gemini-cli/` (written from Gemini CLI's hooks reference)
//! go through the command that file configures, the tool's effect is applied
//! in between, and `turnback rewind` must give the folder back byte for byte.
//! `init` also writes the policy that lets the chat commands' turnback
//! command run, in the user's `~/.gemini/policies/`: every `init` here runs
//! with a HOME of its own.
//!
//! Unix only: the hook commands `turnback init` writes are POSIX shell
//! lines (the program quoted for `sh`), run here through `sh -c` as the
//! agent runs them.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::Output;

use common::{TestResult, list, project, run_hook, tree, turnback};
use serde_json::Value;

fn fixture(name: &str, root: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    common::fixture("gemini-cli", name, root)
}

/// The `turnback hook gemini-cli` command configured for `event` (and `tool`).
fn configured_command(
    root: &Path,
    event: &str,
    tool: Option<&str>,
) -> Result<String, Box<dyn std::error::Error>> {
    let settings: Value =
        serde_json::from_slice(&std::fs::read(root.join(".gemini/settings.json"))?)?;
    for g in settings["hooks"][event].as_array().into_iter().flatten() {
        let matches = match (tool, g.get("matcher").and_then(Value::as_str)) {
            (Some(t), Some(m)) => m.split('|').any(|x| x == t),
            _ => true,
        };
        for h in g["hooks"].as_array().into_iter().flatten() {
            if let Some(c) = h["command"].as_str()
                && matches
                && c.ends_with("hook gemini-cli")
            {
                return Ok(c.to_owned());
            }
        }
    }
    Err(format!("settings run no turnback hook for {event} {tool:?}").into())
}

fn send(root: &Path, event: &Value) -> Result<Output, Box<dyn std::error::Error>> {
    let name = event["hook_event_name"].as_str().ok_or("no event name")?;
    let tool = event.get("tool_name").and_then(Value::as_str);
    let command = configured_command(root, name, tool)?;
    run_hook(
        root,
        &command,
        serde_json::to_string(event)?.as_bytes(),
        &[],
    )
}

fn send_ok(root: &Path, event: &Value) -> TestResult {
    let out = send(root, event)?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        stdout,
        serde_json::json!({}),
        "stdout is JSON, as Gemini CLI requires"
    );
    Ok(())
}

/// `turnback init gemini-cli` in `root` with `HOME=home`.
fn init_in(root: &Path, home: &Path) -> Result<Output, std::io::Error> {
    std::process::Command::new(common::BIN)
        .args(["init", "gemini-cli"])
        .current_dir(root)
        .env("HOME", home)
        .env_remove("GEMINI_CLI_HOME")
        .output()
}

/// `init` in `root`, with a HOME of its own (the policy goes there),
/// which the caller keeps.
fn init(root: &Path) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    let home = tempfile::tempdir()?;
    let out = init_in(root, home.path())?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(home)
}

const POLICY: &str = ".gemini/policies/turnback.toml";

#[test]
fn init_allows_the_chat_commands_turnback_command_and_keeps_a_users_policy() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    let home = init(root)?;
    let policy = std::fs::read_to_string(home.path().join(POLICY))?;
    assert!(policy.starts_with("# Installed by `turnback init gemini-cli`."));
    // The rule names exactly the commands the chat commands run.
    let rewind = std::fs::read_to_string(root.join(".gemini/commands/turnback/rewind.toml"))?;
    let command = rewind
        .split_once("!{")
        .and_then(|(_, c)| c.split_once(" {{args}}}"))
        .map(|(c, _)| c)
        .ok_or("no command")?;
    let program = command.strip_suffix(" rewind").ok_or("not a rewind")?;
    let prefixes = serde_json::to_string(&[
        format!("{program} list"),
        format!("{program} rewind"),
        format!("{program} undo"),
    ])?;
    assert!(
        policy.contains(&format!(
            "commandPrefix = {}\n",
            prefixes.replace(",", ", ")
        )),
        "{policy}"
    );
    assert!(policy.contains("\ndecision = \"allow\"\n"), "{policy}");
    // A second init changes nothing.
    let out = init_in(root, home.path())?;
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("already installed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A policy of the user's by that name stops init before it writes.
    let other = tempfile::tempdir()?;
    let home2 = tempfile::tempdir()?;
    let users = "[[rule]]\ntoolName = \"run_shell_command\"\ndecision = \"deny\"\npriority = 1\n";
    std::fs::create_dir_all(home2.path().join(".gemini/policies"))?;
    std::fs::write(home2.path().join(POLICY), users)?;
    let out = init_in(other.path(), home2.path())?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not written by turnback"), "{err}");
    assert_eq!(std::fs::read_to_string(home2.path().join(POLICY))?, users);
    assert!(
        !other.path().join(".gemini").exists(),
        "nothing was written"
    );
    Ok(())
}

#[test]
fn recorded_gemini_events_make_a_rewindable_turn() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    let _home = init(root)?;
    let settings: Value =
        serde_json::from_slice(&std::fs::read(root.join(".gemini/settings.json"))?)?;
    assert_eq!(
        settings["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"], 30_000,
        "Gemini CLI timeouts are in milliseconds"
    );
    let before = tree(root)?;

    send_ok(root, &fixture("before_agent.json", root)?)?;
    // replace: src/config.js
    send_ok(root, &fixture("before_tool_replace.json", root)?)?;
    let cfg = root.join("src/config.js");
    let text = std::fs::read_to_string(&cfg)?;
    assert!(text.contains("theme: 'light'"));
    std::fs::write(&cfg, text.replacen("theme: 'light'", "theme: 'dark'", 1))?;
    send_ok(root, &fixture("after_tool_replace.json", root)?)?;
    // write_file: a new file in a new directory
    let write = fixture("before_tool_write_file.json", root)?;
    send_ok(root, &write)?;
    std::fs::create_dir_all(root.join("docs"))?;
    std::fs::write(
        root.join("docs/CHANGELOG.md"),
        write["tool_input"]["content"].as_str().ok_or("content")?,
    )?;
    send_ok(root, &fixture("after_tool_write_file.json", root)?)?;

    let turns = list(root)?;
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(turns[0]["turn"], "gemini-f1d2c3b4-1");
    assert_eq!(turns[0]["label"], "Make the config use the dark theme");
    assert_eq!(
        turns[0]["file_count"], 3,
        "config.js, docs/, docs/CHANGELOG.md"
    );
    assert_ne!(tree(root)?, before);

    let out = turnback(root, &["rewind", "gemini-f1d2c3b4-1"])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tree(root)?, before, "byte for byte");
    Ok(())
}

#[test]
fn gemini_shell_commands_are_snapshotted_and_failed_saves_block() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    let _home = init(root)?;
    send_ok(root, &fixture("before_agent.json", root)?)?;
    let out = send(root, &fixture("before_tool_run_shell_command.json", root)?)?;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        common::store_dir(root).join("tree").is_file(),
        "the before half recorded the tree state: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    send_ok(root, &fixture("before_tool_replace.json", root)?)?;
    let log = common::store_dir(root).join("log.jsonl");
    let mut bytes = std::fs::read(&log)?;
    bytes.extend_from_slice(b"not a record\n");
    std::fs::write(&log, bytes)?;
    let out = send(root, &fixture("before_tool_write_file.json", root)?)?;
    assert_eq!(out.status.code(), Some(2), "exit 2 blocks the tool");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("turnback blocked this write_file"), "{err}");
    assert!(err.contains(".gemini/settings.json"), "{err}");
    Ok(())
}
