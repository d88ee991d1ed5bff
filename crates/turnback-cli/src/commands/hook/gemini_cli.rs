//! `turnback hook gemini-cli`: one Gemini CLI hook event on standard input,
//! with the fields Gemini CLI's hooks reference defines (`session_id`,
//! `cwd`, `hook_event_name`, `tool_name`, `tool_input`, `prompt`); see
//! [`super::engine`] for what each event does.
//!
//! - `BeforeAgent` begins turn `gemini-<session>-<n>`; the session file is
//!   `sessions/gemini-<session_id>.json` in the store.
//! - `BeforeTool` for `write_file` and `replace` captures
//!   `tool_input.file_path`; exit 2 blocks the call and sends stderr to the
//!   model as the tool's error.
//! - `BeforeTool` / `AfterTool` for `run_shell_command`: the shell snapshot.
//! - On exit 0 stdout is `{}`: Gemini CLI parses it as JSON.

use serde_json::{Value, json};

use super::engine::{self, Block, Dialect, Event, PromptRule};
use crate::{Ctx, Outcome};

/// How Gemini CLI names its events and tools.
pub const DIALECT: Dialect = Dialect {
    name: "gemini-cli",
    agent: "Gemini CLI",
    turn_prefix: "gemini",
    session_key_prefix: "gemini-",
    tag_from_end: false,
    prompt_events: &[("BeforeAgent", PromptRule::Begin)],
    pre_tool: &["BeforeTool"],
    post_tool: &["AfterTool"],
    file_tools: &["write_file", "replace"],
    patch_tools: &[],
    shell_tools: &["run_shell_command"],
    path_keys: &["file_path"],
    stdout_ok: "{}",
    block: Block::Exit2,
    project_env: None,
    settings_file: ".gemini/settings.json",
    parse,
};

fn parse(v: &Value, _event: Option<&str>) -> anyhow::Result<Event> {
    engine::parse_common(v, &[])
}

/// Handle one Gemini CLI hook event read from standard input
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    engine::run(ctx, &DIALECT, None)
}

/// The `hooks` section of `.gemini/settings.json` that runs `command` (the
/// full command line of `turnback hook gemini-cli`) on every event the
/// adapter handles. Timeouts are in milliseconds.
pub fn settings_hooks(command: &str) -> Value {
    let handler = engine::handler(command, 1000);
    let matcher = DIALECT.tool_matcher();
    json!({
        "BeforeAgent": [{ "hooks": handler }],
        "BeforeTool": [{ "matcher": matcher, "hooks": handler }],
        "AfterTool": [{ "matcher": matcher, "hooks": handler }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_match_every_tool_the_adapter_handles() {
        let h = settings_hooks("turnback hook gemini-cli");
        let m = h["BeforeTool"][0]["matcher"].as_str().expect("a matcher");
        assert_eq!(m, "write_file|replace|run_shell_command");
        assert_eq!(h["BeforeTool"][0]["hooks"][0]["timeout"], 30_000);
        assert!(DIALECT.is_our_command("turnback hook gemini-cli"));
        assert!(!DIALECT.is_our_command("turnback hook claude-code"));
    }
}
