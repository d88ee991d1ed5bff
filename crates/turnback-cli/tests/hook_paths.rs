//! The hooks take the paths the agents send on each platform: absolute in
//! the platform's own spelling (`C:\Users\me\proj\src\app.js` on Windows,
//! `/Users/me/proj/src/app.js` on macOS), with the project's `cwd`. Runs
//! everywhere, on Windows under Wine: `turnback hook AGENT` is spawned
//! directly with the event on stdin, as the agent's hook runner does once
//! its shell has started the program.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{BIN, TestResult, fixture, list};

/// Runs `turnback hook AGENT` in `root` with `event` on stdin.
fn hook(root: &Path, agent: &str, event: &serde_json::Value) -> TestResult {
    let mut child = Command::new(BIN)
        .args(["hook", agent])
        .current_dir(root)
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        let mut input = child.stdin.take().ok_or("no stdin")?;
        input.write_all(event.to_string().as_bytes())?;
    }
    let out = child.wait_with_output()?;
    assert!(
        out.status.success(),
        "hook {agent}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The before-write event of `agent`'s fixture, naming `rel` by its native
/// absolute path.
fn before_write(
    agent: &str,
    name: &str,
    root: &Path,
    rel: &[&str],
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let mut event = fixture(agent, name, root)?;
    let native = rel.iter().fold(root.to_path_buf(), |p, c| p.join(c));
    event["tool_input"]["file_path"] = native.to_string_lossy().into_owned().into();
    Ok(event)
}

fn captures_by_native_path_and_rewinds(agent: &str, fixture_name: &str) -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = common::portable::canonical(tmp.path())?.join("project");
    std::fs::create_dir_all(root.join("src"))?;
    std::fs::write(root.join("src").join("app.js"), "before\n")?;
    let event = before_write(agent, fixture_name, &root, &["src", "app.js"])?;
    let shown = event["tool_input"]["file_path"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if cfg!(windows) {
        assert!(
            shown.contains(r"\src\app.js"),
            "not a Windows path: {shown}"
        );
    }
    hook(&root, agent, &event)?;
    // The agent's write, after its hook.
    std::fs::write(root.join("src").join("app.js"), "written by the agent\n")?;
    let turns = list(&root)?;
    assert_eq!(turns.len(), 1, "{turns:?}");
    let turn = turns[0]["turn"].as_str().ok_or("no turn id")?.to_owned();
    let out = Command::new(BIN)
        .args(["--json", "show", &turn])
        .current_dir(&root)
        .output()?;
    let shown_turn = String::from_utf8_lossy(&out.stdout);
    assert!(shown_turn.contains("src/app.js"), "{shown_turn}");
    let out = Command::new(BIN)
        .args(["rewind", &turn])
        .current_dir(&root)
        .output()?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(root.join("src").join("app.js"))?, b"before\n");
    Ok(())
}

#[test]
fn claude_code_sends_native_absolute_paths() -> TestResult {
    captures_by_native_path_and_rewinds("claude-code", "pre_tool_use_write.json")
}

#[test]
fn gemini_cli_sends_native_absolute_paths() -> TestResult {
    captures_by_native_path_and_rewinds("gemini-cli", "before_tool_write_file.json")
}
