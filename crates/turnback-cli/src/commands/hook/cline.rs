//! `turnback hook cline`: one Cline hook event on standard input, with the
//! fields Cline's hook files receive (`hookName`, `taskId`,
//! `workspaceRoots`, `tool_call{name,input}` or `preToolUse{toolName,
//! parameters}`, `userPromptSubmit{prompt}`, `taskStart{taskMetadata}`); see
//! [`super::engine`] for what each event does.
//!
//! - A task is a session (`cline-<taskId>`): `TaskStart` begins its first
//!   turn `cline-<task>-<n>` (Cline's CLI runs it detached, so when it
//!   arrives after the task's first tool call it labels that turn instead);
//!   `UserPromptSubmit` (a follow-up message) begins the next turn. The
//!   task id is the turn key of tool calls; Cline's `iteration` counts model
//!   requests inside one prompt, so it would split a prompt into many turns
//!   and is not used.
//! - `PreToolUse` for `editor` captures `path`; for `apply_patch` every path
//!   the patch in `input` names. Cline lets a tool run when its hook fails,
//!   so a pre-image that cannot be saved is answered with
//!   `{"cancel":true,"errorMessage":…}`, which blocks the call.
//! - `PreToolUse` / `PostToolUse` for `run_commands`: the shell snapshot.
//! - On success stdout is `{"cancel":false}`.
//!
//! Cline's CLI (3.x) runs the file named after the event but puts its own
//! name for it in `hookName` (`agent_start` for `TaskStart`, `tool_call`
//! for `PreToolUse`, `tool_result` for `PostToolUse`, `prompt_submit` for
//! `UserPromptSubmit`); both spellings are read. Its `TaskStart` carries
//! no prompt (`taskStart.taskMetadata` is empty), so the label is the
//! `prompt` of Cline's record of the session (read for tool calls too, so
//! a task whose detached TaskStart comes after its last tool call is
//! labelled all the same),
//! `<sessions>/<rootSessionId>/<rootSessionId>.json`, where `<sessions>` is
//! `$CLINE_SESSION_DATA_DIR`, else `$CLINE_DATA_DIR/sessions`, else
//! `${CLINE_DIR:-$HOME/.cline}/data/sessions` (the hook inherits Cline's
//! environment, `--data-dir` included).

use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

use super::engine::{self, Block, Dialect, Event, PromptRule, str_field};
use crate::{Ctx, Outcome};

/// How Cline names its events and tools.
pub const DIALECT: Dialect = Dialect {
    name: "cline",
    agent: "Cline",
    turn_prefix: "cline",
    session_key_prefix: "cline-",
    tag_from_end: true,
    prompt_events: &[
        ("TaskStart", PromptRule::BeginOnce),
        ("UserPromptSubmit", PromptRule::Begin),
    ],
    pre_tool: &["PreToolUse"],
    post_tool: &["PostToolUse"],
    file_tools: &["editor"],
    patch_tools: &[("apply_patch", "input")],
    shell_tools: &["run_commands"],
    path_keys: &["path"],
    stdout_ok: "{\"cancel\":false}",
    block: Block::CancelJson,
    project_env: None,
    settings_file: ".clinerules/hooks/",
    parse,
};

/// The hook files `turnback init cline` installs, one per event.
pub const EVENTS: [&str; 4] = ["TaskStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"];

/// Cline's own names for the hook files' events, as its CLI sends them in
/// `hookName`.
const SDK_NAMES: [(&str, &str); 9] = [
    ("agent_start", "TaskStart"),
    ("agent_resume", "TaskResume"),
    ("agent_abort", "TaskCancel"),
    ("agent_end", "TaskComplete"),
    ("agent_error", "TaskError"),
    ("tool_call", "PreToolUse"),
    ("tool_result", "PostToolUse"),
    ("prompt_submit", "UserPromptSubmit"),
    ("session_shutdown", "SessionShutdown"),
];

/// The directory of Cline's session records, as Cline resolves it.
fn sessions_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("CLINE_SESSION_DATA_DIR") {
        return Some(d);
    }
    if let Some(d) = var("CLINE_DATA_DIR") {
        return Some(d.join("sessions"));
    }
    let cline = var("CLINE_DIR").or_else(|| var("HOME").map(|h| h.join(".cline")))?;
    Some(cline.join("data/sessions"))
}

/// The first prompt of the Cline session `id`, from Cline's record of it
/// (None when there is no such record, or it has no prompt).
fn session_prompt(id: &str) -> Option<String> {
    // A session id is one path component.
    if id.is_empty() || id.contains('/') || id == "." || id == ".." {
        return None;
    }
    let path = sessions_dir()?.join(id).join(format!("{id}.json"));
    let bytes = std::fs::read(path).ok()?;
    let record: Value = serde_json::from_slice(&bytes).ok()?;
    record
        .get("prompt")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn parse(v: &Value, _event: Option<&str>) -> anyhow::Result<Event> {
    let name =
        str_field(v, &["hookName", "hook_event_name"]).context("the event has no hookName")?;
    let name = SDK_NAMES
        .iter()
        .find(|(sdk, _)| *sdk == name)
        .map_or(name, |(_, file)| (*file).to_owned());
    let session_id = str_field(v, &["taskId"]).context("the event has no taskId")?;
    let root = v
        .get("workspaceRoots")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str);
    let call = v.get("tool_call");
    let named = v.get("preToolUse").or_else(|| v.get("postToolUse"));
    let tool = call
        .and_then(|c| str_field(c, &["name"]))
        .or_else(|| named.and_then(|n| str_field(n, &["toolName"])));
    let input = call
        .and_then(|c| c.get("input"))
        .or_else(|| named.and_then(|n| n.get("parameters")))
        .cloned();
    let mut prompt = v
        .pointer("/userPromptSubmit/prompt")
        .or_else(|| v.pointer("/taskStart/taskMetadata/initialTask"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    // The task's first prompt, for TaskStart and for a tool call that
    // begins the task's first turn before TaskStart (run detached) arrives.
    if prompt.is_none() && name != "UserPromptSubmit" {
        prompt = v
            .pointer("/sessionContext/rootSessionId")
            .and_then(Value::as_str)
            .and_then(session_prompt);
    }
    // A follow-up message begins a turn of its own; everything else belongs
    // to the task's current turn.
    let turn_key = (name != "UserPromptSubmit").then(|| session_id.clone());
    Ok(Event {
        session_id,
        turn_key,
        cwd: root.map(PathBuf::from),
        name,
        tool,
        input,
        prompt,
    })
}

/// Handle one Cline hook event read from standard input
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    engine::run(ctx, &DIALECT, None)
}

/// The hook file for one event: a shell script that runs `program`.
pub fn hook_script(program: &str) -> String {
    format!(
        "#!/bin/sh\n# Installed by `turnback init cline`: saves what Cline's tools change, so `turnback rewind` can undo a turn.\nexec {program} hook cline\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_calls_and_prompts_are_read_from_either_shape() -> anyhow::Result<()> {
        let v = json!({
            "hookName": "PreToolUse", "taskId": "t1", "workspaceRoots": ["/w"],
            "preToolUse": {"toolName": "editor", "parameters": {"path": "/w/a"}}
        });
        let e = parse(&v, None)?;
        assert_eq!(e.tool.as_deref(), Some("editor"));
        assert_eq!(e.input, Some(json!({"path": "/w/a"})));
        assert_eq!(e.turn_key.as_deref(), Some("t1"));
        let v = json!({"hookName": "UserPromptSubmit", "taskId": "t1",
                       "userPromptSubmit": {"prompt": "more"}});
        let e = parse(&v, None)?;
        assert_eq!(e.prompt.as_deref(), Some("more"));
        assert_eq!(e.turn_key, None);
        Ok(())
    }

    #[test]
    fn the_cli_s_own_event_names_are_the_hook_files_names() -> anyhow::Result<()> {
        let v = json!({
            "hookName": "tool_call", "taskId": "conv_1", "workspaceRoots": ["/w"],
            "tool_call": {"id": "call_1", "name": "editor", "input": {"path": "/w/a"}},
            "preToolUse": {"toolName": "editor", "parameters": {"path": "/w/a"}}
        });
        assert_eq!(parse(&v, None)?.name, "PreToolUse");
        let v = json!({"hookName": "prompt_submit", "taskId": "conv_1",
                       "userPromptSubmit": {"prompt": "more", "attachments": []}});
        assert_eq!(parse(&v, None)?.name, "UserPromptSubmit");
        let v = json!({"hookName": "tool_result", "taskId": "conv_1"});
        assert_eq!(parse(&v, None)?.name, "PostToolUse");
        Ok(())
    }

    #[test]
    fn a_session_id_that_is_not_one_path_component_has_no_record() {
        for id in ["", ".", "..", "a/b", "../x"] {
            assert_eq!(session_prompt(id), None, "{id:?}");
        }
    }
}
