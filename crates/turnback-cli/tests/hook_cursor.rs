//! Cursor integration: `turnback init cursor` writes `.cursor/hooks.json`;
//! the hook events in `tests/fixtures/cursor/` (shaped as Cursor's hooks
//! documentation defines them: `conversation_id`, `workspace_roots`,
//! `preToolUse` for `Write`, `Delete` and `Shell`, `beforeSubmitPrompt`) go
//! through the command that file configures, the tool's effect is applied
//! in between, and rewind / undo must give each state back byte for byte.
//! Cursor's agent cannot be pointed at a local model, so these events are
//! its only test.
//!
//! Unix only: the hook commands `turnback init` writes are POSIX shell
//! lines (the program quoted for `sh`), run here through `sh -c` as the
//! agent runs them.
#![cfg(unix)]

mod common;

use std::path::Path;

use common::scenario::{self, States, configured_command};
use common::{TestResult, list, tree, turnback};
use serde_json::Value;

const SETTINGS: &str = ".cursor/hooks.json";

fn fixture(name: &str, root: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    common::fixture("cursor", name, root)
}

fn send_ok(root: &Path, event: &Value) -> TestResult {
    let name = event["hook_event_name"].as_str().ok_or("no event name")?;
    let tool = event.get("tool_name").and_then(Value::as_str);
    let command = configured_command(root, SETTINGS, name, tool)?;
    scenario::send_ok(root, &command, event, "{}")
}

/// preToolUse, the tool, postToolUse.
fn tool_call(root: &Path, pre: &Value, effect: fn(&Path) -> TestResult) -> TestResult {
    send_ok(root, pre)?;
    effect(root)?;
    let mut post = pre.clone();
    post["hook_event_name"] = "postToolUse".into();
    post["tool_output"] = "{}".into();
    send_ok(root, &post)
}

#[test]
fn cursor_turns_rewind_and_undo_byte_for_byte() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "cursor", &[])?;
    let before = tree(root)?;

    send_ok(root, &fixture("before_submit_prompt.json", root)?)?;
    tool_call(
        root,
        &fixture("pre_tool_use_write_new.json", root)?,
        scenario::write_new_file,
    )?;
    tool_call(
        root,
        &fixture("pre_tool_use_write_edit.json", root)?,
        scenario::edit_tracked_file,
    )?;
    send_ok(root, &fixture("pre_tool_use_shell.json", root)?)?;
    scenario::run_shell(root)?;
    send_ok(root, &fixture("post_tool_use_shell.json", root)?)?;
    let after_1 = tree(root)?;

    let mut prompt2 = fixture("before_submit_prompt.json", root)?;
    prompt2["prompt"] = scenario::PROMPT_2.into();
    prompt2["generation_id"] = "9a8b7c6d-0000-4000-8000-000000000002".into();
    send_ok(root, &prompt2)?;
    let mut edit2 = fixture("pre_tool_use_write_new.json", root)?;
    edit2["tool_input"]["content"] = "# Todo\n\n- ship it today\n".into();
    tool_call(root, &edit2, scenario::edit_new_file)?;
    let after_2 = tree(root)?;

    let states = States {
        before,
        after_1,
        after_2,
    };
    scenario::check_turns(root, &states, "cursor")
}

#[test]
fn cursor_delete_is_rewound_and_a_failed_save_denies() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    let user =
        serde_json::json!({"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}});
    std::fs::create_dir_all(root.join(".cursor"))?;
    std::fs::write(root.join(SETTINGS), serde_json::to_vec(&user)?)?;
    scenario::init(root, "cursor", &[])?;
    let v: Value = serde_json::from_slice(&std::fs::read(root.join(SETTINGS))?)?;
    assert_eq!(v["hooks"]["afterFileEdit"], user["hooks"]["afterFileEdit"]);
    let before = tree(root)?;

    send_ok(root, &fixture("before_submit_prompt.json", root)?)?;
    tool_call(root, &fixture("pre_tool_use_delete.json", root)?, |r| {
        Ok(std::fs::remove_file(r.join("draft.md"))?)
    })?;
    let turns = list(root)?;
    let id = turns[0]["turn"].as_str().ok_or("turn id")?;
    assert!(turnback(root, &["rewind", id])?.status.success());
    assert_eq!(tree(root)?, before, "the deleted file is back");

    scenario::damage_log(root)?;
    let pre = fixture("pre_tool_use_write_new.json", root)?;
    let c = configured_command(root, SETTINGS, "preToolUse", Some("Write"))?;
    let out = common::run_hook(root, &c, serde_json::to_string(&pre)?.as_bytes(), &[])?;
    assert_eq!(out.status.code(), Some(2), "exit 2 denies the write");
    Ok(())
}
