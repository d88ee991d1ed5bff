//! `turnback hook cursor`: one Cursor hook event on standard input, with
//! the fields Cursor's hooks documentation defines (`conversation_id`,
//! `generation_id`, `hook_event_name`, `workspace_roots`, `cwd`,
//! `tool_name`, `tool_input`, `prompt`); see [`super::engine`] for what each
//! event does. Cursor sends no turn key a hook can rely on, so its prompt
//! event marks the turn boundary.
//!
//! - `beforeSubmitPrompt` begins turn `cursor-<conversation>-<n>`; the
//!   session file is keyed `cursor-<conversation_id>`.
//! - `preToolUse` for `Write` and `Delete` captures `tool_input.file_path`
//!   (Cursor has no before-edit event; `preToolUse` is the one that comes
//!   before the write); exit 2 denies the call.
//! - `preToolUse` / `postToolUse` for `Shell`: the shell snapshot.
//! - stdout is `{}`: a permission hook must answer valid JSON, and an empty
//!   answer leaves Cursor's own permission rules in charge.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};

use super::engine::{self, Block, Dialect, Event, PromptRule, str_field};
use crate::{Ctx, Outcome};

/// How Cursor names its events and tools.
pub const DIALECT: Dialect = Dialect {
    name: "cursor",
    agent: "Cursor",
    turn_prefix: "cursor",
    session_key_prefix: "cursor-",
    tag_from_end: false,
    prompt_events: &[("beforeSubmitPrompt", PromptRule::Begin)],
    pre_tool: &["preToolUse"],
    post_tool: &["postToolUse"],
    file_tools: &["Write", "Delete"],
    patch_tools: &[],
    shell_tools: &["Shell"],
    path_keys: &["file_path"],
    stdout_ok: "{}",
    block: Block::Exit2,
    project_env: None,
    settings_file: ".cursor/hooks.json",
    parse,
};

fn parse(v: &Value, _event: Option<&str>) -> anyhow::Result<Event> {
    let name = str_field(v, &["hook_event_name"]).context("the event has no hook_event_name")?;
    let session_id = str_field(v, &["conversation_id", "session_id"])
        .context("the event has no conversation_id")?;
    let root = v
        .get("workspace_roots")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str);
    let cwd = str_field(v, &["cwd"]).or(root.map(str::to_owned));
    Ok(Event {
        session_id,
        turn_key: None,
        cwd: cwd.map(PathBuf::from),
        name,
        tool: str_field(v, &["tool_name"]),
        input: v.get("tool_input").cloned(),
        prompt: str_field(v, &["prompt"]),
    })
}

/// Handle one Cursor hook event read from standard input
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    engine::run(ctx, &DIALECT, None)
}

/// `.cursor/hooks.json` that runs `command` on every event the adapter
/// handles. Timeouts are in seconds.
pub fn hooks_file(command: &str) -> Value {
    let handler = |matcher: Option<String>| {
        let mut h = json!({ "command": command, "timeout": engine::HOOK_TIMEOUT_SECS });
        if let Some(m) = matcher {
            h["matcher"] = m.into();
        }
        json!([h])
    };
    let matcher = DIALECT.tool_matcher();
    json!({
        "version": 1,
        "hooks": {
            "beforeSubmitPrompt": handler(None),
            "preToolUse": handler(Some(matcher.clone())),
            "postToolUse": handler(Some(matcher)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_match_write_delete_and_shell() {
        let h = hooks_file("turnback hook cursor");
        assert_eq!(h["hooks"]["preToolUse"][0]["matcher"], "Write|Delete|Shell");
        assert_eq!(h["version"], 1);
    }
}
