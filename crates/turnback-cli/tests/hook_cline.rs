//! Cline integration: `turnback init cline` writes one hook script per
//! event in `.clinerules/hooks/`; the hook events in
//! `tests/fixtures/cline/` (shaped as Cline's hook files receive them:
//! `hookName`, `taskId`, `workspaceRoots`, `tool_call` and `preToolUse`,
//! `userPromptSubmit`, `taskStart`) are fed to those scripts, the tool's
//! effect is applied in between, and rewind / undo must give each state
//! back byte for byte.
//!
//! Unix only: Cline runs its hook files as executables (the mode's
//! execute bits), here through `sh -c`.
#![cfg(unix)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use common::scenario::{self, States};
use common::{TestResult, list, tree};
use serde_json::Value;

const OK: &str = "{\"cancel\":false}";

fn fixture(name: &str, root: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    common::fixture("cline", name, root)
}

/// Runs the hook file Cline would run for the event.
fn send(root: &Path, event: &Value) -> Result<Output, Box<dyn std::error::Error>> {
    let name = event["hookName"].as_str().ok_or("no hookName")?;
    let script = root.join(".clinerules/hooks").join(name);
    let mode = std::fs::metadata(&script)?.permissions().mode();
    assert!(mode & 0o111 != 0, "{} is executable", script.display());
    let command = script.to_string_lossy().into_owned();
    common::run_hook(
        root,
        &command,
        serde_json::to_string(event)?.as_bytes(),
        &[],
    )
}

fn send_ok(root: &Path, event: &Value) -> TestResult {
    let name = event["hookName"].as_str().ok_or("no hookName")?;
    let command = root.join(".clinerules/hooks").join(name);
    scenario::send_ok(root, &command.to_string_lossy(), event, OK)
}

#[test]
fn cline_turns_rewind_and_undo_byte_for_byte() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "cline", &[])?;
    let before = tree(root)?;

    // Cline's CLI runs TaskStart detached: here it arrives after the task's
    // first tool call, and still labels the turn.
    send_ok(root, &fixture("pre_tool_use_editor_create.json", root)?)?;
    scenario::write_new_file(root)?;
    send_ok(root, &fixture("post_tool_use_editor_create.json", root)?)?;
    send_ok(root, &fixture("task_start.json", root)?)?;
    send_ok(root, &fixture("pre_tool_use_editor_edit.json", root)?)?;
    scenario::edit_tracked_file(root)?;
    send_ok(root, &fixture("pre_tool_use_run_commands.json", root)?)?;
    scenario::run_shell(root)?;
    send_ok(root, &fixture("post_tool_use_run_commands.json", root)?)?;
    let after_1 = tree(root)?;

    // A follow-up message in the same task begins the next turn.
    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    let mut edit2 = fixture("pre_tool_use_editor_create.json", root)?;
    edit2["iteration"] = 3.into();
    send_ok(root, &edit2)?;
    scenario::edit_new_file(root)?;
    let after_2 = tree(root)?;

    let states = States {
        before,
        after_1,
        after_2,
    };
    scenario::check_turns(root, &states, "cline")
}

#[test]
fn cline_write_that_cannot_be_saved_is_cancelled() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "cline", &[])?;
    send_ok(root, &fixture("task_start.json", root)?)?;
    send_ok(root, &fixture("pre_tool_use_editor_edit.json", root)?)?;
    scenario::damage_log(root)?;
    // Cline lets a tool run when its hook fails: the hook answers cancel.
    let out = send(root, &fixture("pre_tool_use_editor_create.json", root)?)?;
    assert_eq!(out.status.code(), Some(0));
    let answer: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(answer["cancel"], true, "{answer}");
    let msg = answer["errorMessage"].as_str().ok_or("errorMessage")?;
    assert!(msg.contains("turnback blocked this editor"), "{msg}");
    Ok(())
}

#[test]
fn cline_init_keeps_the_users_hook_files_and_is_idempotent() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    let hooks = root.join(".clinerules/hooks");
    std::fs::create_dir_all(&hooks)?;
    std::fs::write(hooks.join("PostToolUse"), "#!/bin/sh\n./lint.sh\n")?;
    let out = common::turnback(root, &["init", "cline"])?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not written by turnback"), "{err}");
    let names: Vec<_> = std::fs::read_dir(&hooks)?.collect::<Result<_, _>>()?;
    assert_eq!(names.len(), 1, "nothing was written");

    std::fs::remove_file(hooks.join("PostToolUse"))?;
    scenario::init(root, "cline", &[])?;
    let out = common::turnback(root, &["init", "cline"])?;
    assert!(String::from_utf8_lossy(&out.stdout).contains("already installed"));
    assert!(list(root)?.is_empty());
    Ok(())
}

/// As Cline's CLI 3.x sends them: the hook file named after the event, the
/// CLI's own name in `hookName` (`agent_start`, `tool_call`,
/// `tool_result`), and a TaskStart with no prompt, whose label is read
/// from Cline's record of the session (here in `CLINE_SESSION_DATA_DIR`),
/// which the tool calls read too: the store has no record for a label
/// alone, so a TaskStart after the task's last tool call could not label
/// the turn itself.
#[test]
fn cline_cli_event_names_and_the_label_from_its_session_record() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "cline", &[])?;
    let sessions = tempfile::tempdir()?;
    let id = "1796312735222_g6ozu";
    std::fs::create_dir_all(sessions.path().join(id))?;
    std::fs::write(
        sessions.path().join(id).join(format!("{id}.json")),
        serde_json::to_vec(&serde_json::json!({
            "version": 1, "session_id": id, "source": "cli",
            "prompt": scenario::PROMPT_1,
        }))?,
    )?;
    let env = [("CLINE_SESSION_DATA_DIR", sessions.path())];
    let cli = |file: &str, hook: &str, name: &str| -> Result<Value, Box<dyn std::error::Error>> {
        let mut v = fixture(file, root)?;
        v["hookName"] = hook.into();
        v["sessionContext"]["rootSessionId"] = id.into();
        let command = root.join(".clinerules/hooks").join(name);
        let out = common::run_hook(
            root,
            &command.to_string_lossy(),
            serde_json::to_string(&v)?.as_bytes(),
            &env,
        )?;
        assert_eq!(out.status.code(), Some(0));
        Ok(serde_json::from_slice(&out.stdout)?)
    };
    let mut start = fixture("task_start.json", root)?;
    start["taskStart"] = serde_json::json!({"taskMetadata": {}});
    let before = tree(root)?;
    assert_eq!(
        cli("pre_tool_use_editor_edit.json", "tool_call", "PreToolUse")?["cancel"],
        false
    );
    scenario::edit_tracked_file(root)?;
    cli("pre_tool_use_run_commands.json", "tool_call", "PreToolUse")?;
    scenario::run_shell(root)?;
    cli(
        "post_tool_use_run_commands.json",
        "tool_result",
        "PostToolUse",
    )?;
    // TaskStart runs detached: here it arrives after the task's last tool
    // call, and the turn is labelled all the same.
    start["hookName"] = "agent_start".into();
    start["sessionContext"]["rootSessionId"] = id.into();
    let command = root.join(".clinerules/hooks/TaskStart");
    let out = common::run_hook(
        root,
        &command.to_string_lossy(),
        serde_json::to_string(&start)?.as_bytes(),
        &env,
    )?;
    assert_eq!(out.status.code(), Some(0));
    let turns = list(root)?;
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(turns[0]["label"], scenario::PROMPT_1, "{turns:?}");
    let first = turns[0]["turn"].as_str().ok_or("turn")?;
    let out = common::turnback(root, &["rewind", first])?;
    assert!(out.status.success());
    scenario::assert_same(&tree(root)?, &before, "rewind of the task's turn");
    Ok(())
}

#[test]
fn cline_init_installs_the_workflows_and_keeps_a_users() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();

    let print = ["init", "cline", "--print", "--program", "turnback"];
    let out = common::turnback(root, &print)?;
    assert!(out.status.success());
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("# .clinerules/workflows/turnback-rewind.md\n"),
        "{shown}"
    );
    assert!(shown.contains("Run `turnback rewind TURN`"), "{shown}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("~/Documents/Cline/Workflows/"), "{err}");
    assert!(!root.join(".clinerules").exists(), "--print writes nothing");

    // A workflow of the user's by that name stops init before anything.
    let flows = root.join(".clinerules/workflows");
    std::fs::create_dir_all(&flows)?;
    std::fs::write(flows.join("turnback-undo.md"), "git stash\n")?;
    let out = common::turnback(root, &["init", "cline"])?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not written by turnback"), "{err}");
    assert_eq!(
        std::fs::read_to_string(flows.join("turnback-undo.md"))?,
        "git stash\n"
    );
    assert!(
        !root.join(".clinerules/hooks").exists(),
        "nothing was written"
    );

    std::fs::remove_file(flows.join("turnback-undo.md"))?;
    scenario::init(root, "cline", &[])?;
    for name in ["list", "rewind", "undo"] {
        let text = std::fs::read_to_string(flows.join(format!("turnback-{name}.md")))?;
        assert!(
            text.contains("Installed by `turnback init cline`"),
            "{text}"
        );
        assert!(text.contains(&format!(" {name}")), "{text}");
    }
    let out = common::turnback(root, &["--json", "init", "cline"])?;
    let report: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["changed"], false, "idempotent: {report}");
    Ok(())
}
