//! GitHub Copilot CLI integration: `turnback init copilot` writes
//! `.github/hooks/turnback.json`; the camelCase hook events in
//! `tests/fixtures/copilot/` (shaped as Copilot sends them: `sessionId`,
//! `toolName`, `toolArgs` as an object, absolute paths, no event name in
//! the JSON) go through the command that file configures for each event,
//! the tool's effect is applied in between, and rewind / undo must give
//! each state back byte for byte.
//!
//! Unix only: the hook commands `turnback init` writes are POSIX shell
//! lines (the program quoted for `sh`), run here through `sh -c` as the
//! agent runs them.
#![cfg(unix)]

mod common;

use std::path::Path;

use common::scenario::{self, States, configured_command};
use common::{TestResult, tree};
use serde_json::Value;

const SETTINGS: &str = ".github/hooks/turnback.json";

fn fixture(name: &str, root: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    common::fixture("copilot", name, root)
}

fn command(
    root: &Path,
    event: &str,
    payload: &Value,
) -> Result<String, Box<dyn std::error::Error>> {
    let tool = payload.get("toolName").and_then(Value::as_str);
    configured_command(root, SETTINGS, event, tool)
}

fn send_ok(root: &Path, event: &str, payload: &Value) -> TestResult {
    let c = command(root, event, payload)?;
    scenario::send_ok(root, &c, payload, "")
}

/// preToolUse, the tool, postToolUse.
fn tool_call(root: &Path, pre: &Value, effect: fn(&Path) -> TestResult) -> TestResult {
    send_ok(root, "preToolUse", pre)?;
    effect(root)?;
    let mut post = pre.clone();
    post["toolResult"] = serde_json::json!({"resultType": "success", "textResultForLlm": "done"});
    send_ok(root, "postToolUse", &post)
}

#[test]
fn copilot_turns_rewind_and_undo_byte_for_byte() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "copilot", &[])?;
    let before = tree(root)?;

    send_ok(
        root,
        "userPromptSubmitted",
        &fixture("user_prompt_submitted.json", root)?,
    )?;
    tool_call(
        root,
        &fixture("pre_tool_use_create.json", root)?,
        scenario::write_new_file,
    )?;
    tool_call(
        root,
        &fixture("pre_tool_use_edit.json", root)?,
        scenario::edit_tracked_file,
    )?;
    send_ok(
        root,
        "preToolUse",
        &fixture("pre_tool_use_bash.json", root)?,
    )?;
    scenario::run_shell(root)?;
    send_ok(
        root,
        "postToolUse",
        &fixture("post_tool_use_bash.json", root)?,
    )?;
    let after_1 = tree(root)?;

    let mut prompt2 = fixture("user_prompt_submitted.json", root)?;
    prompt2["prompt"] = scenario::PROMPT_2.into();
    send_ok(root, "userPromptSubmitted", &prompt2)?;
    tool_call(
        root,
        &fixture("pre_tool_use_edit_turn2.json", root)?,
        scenario::edit_new_file,
    )?;
    let after_2 = tree(root)?;

    let states = States {
        before,
        after_1,
        after_2,
    };
    scenario::check_turns(root, &states, "copilot")
}

#[test]
fn copilot_hooks_deny_only_a_write_that_cannot_be_saved() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "copilot", &[])?;
    let once = std::fs::read(root.join(SETTINGS))?;
    scenario::init(root, "copilot", &[])?;
    assert_eq!(std::fs::read(root.join(SETTINGS))?, once, "idempotent");

    // Copilot denies a tool on any non-zero exit: unreadable input, an
    // event without a session, or a foreign path all exit 0.
    let pre = fixture("pre_tool_use_edit.json", root)?;
    let c = command(root, "preToolUse", &pre)?;
    for input in ["", "{}", "[1]"] {
        let out = common::run_hook(root, &c, input.as_bytes(), &[])?;
        assert_eq!(out.status.code(), Some(0), "input {input:?}");
    }
    let mut outside = pre.clone();
    outside["toolArgs"]["path"] = "/etc/hostname".into();
    send_ok(root, "preToolUse", &outside)?;

    send_ok(
        root,
        "userPromptSubmitted",
        &fixture("user_prompt_submitted.json", root)?,
    )?;
    send_ok(root, "preToolUse", &pre)?;
    scenario::damage_log(root)?;
    let create = fixture("pre_tool_use_create.json", root)?;
    let c = command(root, "preToolUse", &create)?;
    let out = common::run_hook(root, &c, serde_json::to_string(&create)?.as_bytes(), &[])?;
    assert_eq!(out.status.code(), Some(2), "exit 2 denies the create");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("turnback blocked this create"), "{err}");
    Ok(())
}

/// Where `turnback init copilot` puts its skill.
const SKILL: &str = ".github/skills/turnback/SKILL.md";

#[test]
fn copilot_init_installs_the_skill_and_keeps_a_users() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();

    let print = ["init", "copilot", "--print", "--program", "turnback"];
    let out = common::turnback(root, &print)?;
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout)?;
    assert!(v["hooks"]["userPromptSubmitted"].is_array(), "{v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(SKILL), "{err}");
    assert!(err.contains("~/.copilot/skills/turnback/SKILL.md"), "{err}");
    assert!(!root.join(".github").exists(), "--print writes nothing");

    // A skill of the user's by that name stops init before anything.
    let skill = root.join(SKILL);
    std::fs::create_dir_all(skill.parent().ok_or("parent")?)?;
    std::fs::write(&skill, "---\nname: turnback\ndescription: mine\n---\n")?;
    let out = common::turnback(root, &["init", "copilot"])?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not written by turnback"), "{err}");
    assert!(
        std::fs::read_to_string(&skill)?.ends_with("mine\n---\n"),
        "the user's skill is kept"
    );
    assert!(!root.join(SETTINGS).exists(), "nothing was written");

    std::fs::remove_file(&skill)?;
    scenario::init(root, "copilot", &[])?;
    let text = std::fs::read_to_string(&skill)?;
    assert!(text.starts_with("---\nname: turnback\n"), "{text}");
    assert!(text.contains("- `/turnback rewind TURN`: run `"), "{text}");
    assert!(text.contains(" rewind TURN`."), "{text}");
    assert!(
        text.contains("Installed by `turnback init copilot`"),
        "{text}"
    );
    let out = common::turnback(root, &["--json", "init", "copilot"])?;
    let report: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["changed"], false, "idempotent: {report}");
    Ok(())
}
