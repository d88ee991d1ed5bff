//! `turnback hook codex`: one Codex CLI hook event on standard input, with
//! the fields Codex's hooks documentation defines (`session_id`, `turn_id`,
//! `cwd`, `hook_event_name`, `tool_name`, `tool_input`, `prompt`); `turn_id`
//! is the turn key; see [`super::engine`] for what each event does.
//!
//! - `UserPromptSubmit` begins turn `codex-<session>-<n>`; the session file
//!   is keyed `codex-<session_id>`.
//! - `PreToolUse` for `apply_patch` captures every path the patch in
//!   `tool_input.command` names (added, updated, deleted, the `Move to`
//!   destination), relative to `cwd`, before the patch applies; exit 2
//!   blocks the call and shows stderr to the model.
//! - `PreToolUse` / `PostToolUse` for `Bash` (every Codex shell tool reaches
//!   hooks as `Bash` with `tool_input.command`): the shell snapshot.
//! - Nothing is printed on stdout.

use serde_json::{Value, json};

use super::engine::{self, Block, Dialect, Event, PromptRule};
use crate::{Ctx, Outcome};

/// How Codex names its events and tools.
pub const DIALECT: Dialect = Dialect {
    name: "codex",
    agent: "Codex",
    turn_prefix: "codex",
    session_key_prefix: "codex-",
    tag_from_end: true,
    prompt_events: &[("UserPromptSubmit", PromptRule::Begin)],
    pre_tool: &["PreToolUse"],
    post_tool: &["PostToolUse"],
    file_tools: &[],
    patch_tools: &[("apply_patch", "command")],
    shell_tools: &["Bash"],
    path_keys: &[],
    stdout_ok: "",
    block: Block::Exit2,
    project_env: None,
    settings_file: ".codex/hooks.json",
    parse,
};

fn parse(v: &Value, _event: Option<&str>) -> anyhow::Result<Event> {
    engine::parse_common(v, &["turn_id"])
}

/// Handle one Codex hook event read from standard input
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    engine::run(ctx, &DIALECT, None)
}

/// The `hooks` section of `.codex/hooks.json` (Claude Code's shape) that
/// runs `command` on every event the adapter handles. Timeouts are in
/// seconds.
pub fn settings_hooks(command: &str) -> Value {
    let handler = engine::handler(command, 1);
    let matcher = DIALECT.tool_matcher();
    json!({
        "UserPromptSubmit": [{ "hooks": handler }],
        "PreToolUse": [{ "matcher": matcher, "hooks": handler }],
        "PostToolUse": [{ "matcher": matcher, "hooks": handler }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_match_apply_patch_and_bash() {
        let h = settings_hooks("turnback hook codex");
        assert_eq!(h["PreToolUse"][0]["matcher"], "apply_patch|Bash");
        assert!(DIALECT.is_our_command("/bin/turnback hook codex"));
        assert!(!DIALECT.is_our_command("turnback hook codex-other"));
    }
}
