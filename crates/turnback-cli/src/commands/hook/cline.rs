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

fn parse(v: &Value, _event: Option<&str>) -> anyhow::Result<Event> {
    let name =
        str_field(v, &["hookName", "hook_event_name"]).context("the event has no hookName")?;
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
    let prompt = v
        .pointer("/userPromptSubmit/prompt")
        .or_else(|| v.pointer("/taskStart/taskMetadata/initialTask"))
        .and_then(Value::as_str)
        .map(str::to_owned);
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
}
