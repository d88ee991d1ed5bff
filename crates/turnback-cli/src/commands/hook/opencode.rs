//! `turnback hook opencode`: one event from turnback's opencode plugin
//! (`.opencode/plugin/turnback.js`, which `turnback init opencode` writes),
//! on standard input. opencode's plugin hooks are JavaScript functions, so
//! the plugin forwards each one as JSON in Claude Code's shape:
//! `{"hook_event_name", "session_id", "message_id", "cwd", "tool_name",
//! "tool_input", "prompt"}`. The id of the user message that began the turn
//! (`chat.message`'s `messageID`, which the plugin remembers per session) is
//! the turn key. See [`super::engine`] for what each event does.
//!
//! - `chat.message` begins turn `opencode-<session>-<n>`; the session file
//!   is keyed `opencode-<sessionID>`.
//! - `tool.execute.before` for `write`, `edit`, `multiedit` captures
//!   `filePath`; for `apply_patch` every path the patch in `patchText`
//!   names. Exit 2 makes the plugin throw, which refuses the call.
//! - `tool.execute.before` / `tool.execute.after` for `bash`: the shell
//!   snapshot.
//! - Nothing is printed on stdout.

use serde_json::Value;

use super::engine::{self, Block, Dialect, Event, PromptRule};
use crate::{Ctx, Outcome};

/// How turnback's opencode plugin names opencode's events and tools.
pub const DIALECT: Dialect = Dialect {
    name: "opencode",
    agent: "opencode",
    turn_prefix: "opencode",
    session_key_prefix: "opencode-",
    tag_from_end: true,
    prompt_events: &[("chat.message", PromptRule::Begin)],
    pre_tool: &["tool.execute.before"],
    post_tool: &["tool.execute.after"],
    file_tools: &["write", "edit", "multiedit"],
    patch_tools: &[("apply_patch", "patchText")],
    shell_tools: &["bash"],
    path_keys: &["filePath"],
    stdout_ok: "",
    block: Block::Exit2,
    project_env: None,
    settings_file: ".opencode/plugin/turnback.js",
    parse,
};

fn parse(v: &Value, _event: Option<&str>) -> anyhow::Result<Event> {
    engine::parse_common(v, &["message_id"])
}

/// Handle one event from turnback's opencode plugin, read from standard
/// input
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    engine::run(ctx, &DIALECT, None)
}

/// The plugin's source, running `program` (a path or a name on PATH, not a
/// shell command line).
pub fn plugin_source(program: &str) -> String {
    let tools: Vec<String> = DIALECT
        .tool_matcher()
        .split('|')
        .map(str::to_owned)
        .collect();
    include_str!("opencode_plugin.js")
        .replace("__PROGRAM__", &Value::from(program).to_string())
        .replace("__TOOLS__", &Value::from(tools).to_string())
        .replace(
            "__TIMEOUT_MS__",
            &(engine::HOOK_TIMEOUT_SECS * 1000).to_string(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_names_the_program_and_every_tool() {
        let js = plugin_source("/opt/it's/turnback");
        assert!(
            js.contains(r#"const PROGRAM = "/opt/it's/turnback";"#),
            "{js}"
        );
        assert!(js.contains(r#"["write","edit","multiedit","apply_patch","bash"]"#));
        assert!(!js.contains("__"), "every placeholder is filled");
    }
}
