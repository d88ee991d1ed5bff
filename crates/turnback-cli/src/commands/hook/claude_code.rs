//! `turnback hook claude-code`: one Claude Code hook event on standard
//! input, with the fields Claude Code's hook documentation defines
//! (`session_id`, `prompt_id`, `cwd`, `hook_event_name`, `tool_name`,
//! `tool_input`, `prompt`); `prompt_id` is the turn key; see [`super::engine`] for what each event does.
//!
//! - `UserPromptSubmit` begins turn `claude-<session>-<n>`; the session file
//!   is `sessions/<session_id>.json` in the store.
//! - `PreToolUse` for `Write`, `Edit`, `MultiEdit`, `NotebookEdit` captures
//!   `tool_input.file_path` (`notebook_path` for notebooks); exit 2 blocks
//!   the call and shows stderr to the model.
//! - `PreToolUse` / `PostToolUse` for `Bash` and `PowerShell`: the shell
//!   snapshot; `PreSkillShellCommand` (a skill's own shell command) takes
//!   the before half, and the next shell command's before half closes it.
//! - Nothing is printed on stdout: Claude Code adds a `UserPromptSubmit`
//!   hook's stdout to the model's context.

use serde_json::{Value, json};

use super::engine::{self, Block, Dialect, Event, PromptRule};
use crate::{Ctx, Outcome};

/// How Claude Code names its events and tools.
pub const DIALECT: Dialect = Dialect {
    name: "claude-code",
    agent: "Claude Code",
    turn_prefix: "claude",
    session_key_prefix: "",
    tag_from_end: false,
    prompt_events: &[("UserPromptSubmit", PromptRule::Begin)],
    pre_tool: &["PreToolUse", "PreSkillShellCommand"],
    post_tool: &["PostToolUse"],
    file_tools: &["Write", "Edit", "MultiEdit", "NotebookEdit"],
    patch_tools: &[],
    shell_tools: &["Bash", "PowerShell"],
    path_keys: &["file_path", "notebook_path"],
    stdout_ok: "",
    block: Block::Exit2,
    project_env: Some("CLAUDE_PROJECT_DIR"),
    settings_file: ".claude/settings.json",
    parse,
};

fn parse(v: &Value, _event: Option<&str>) -> anyhow::Result<Event> {
    engine::parse_common(v, &["prompt_id"])
}

/// Handle one Claude Code hook event read from standard input
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    engine::run(ctx, &DIALECT, None)
}

/// The `hooks` section of `.claude/settings.json` that runs `command` (the
/// full command line of `turnback hook claude-code`) on every event the
/// adapter handles. Timeouts are in seconds.
pub fn settings_hooks(command: &str) -> Value {
    let handler = engine::handler(command, 1);
    let matcher = DIALECT.tool_matcher();
    json!({
        "UserPromptSubmit": [{ "hooks": handler }],
        "PreToolUse": [{ "matcher": matcher, "hooks": handler }],
        "PostToolUse": [{ "matcher": matcher, "hooks": handler }],
        "PreSkillShellCommand": [{ "hooks": handler }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_match_every_tool_the_adapter_handles() {
        let h = settings_hooks("turnback hook claude-code");
        for event in ["PreToolUse", "PostToolUse"] {
            let m = h[event][0]["matcher"].as_str().expect("a matcher");
            let tools: Vec<&str> = m.split('|').collect();
            for t in DIALECT.file_tools.iter().chain(DIALECT.shell_tools) {
                assert!(tools.contains(t), "{event} misses {t}");
            }
        }
        assert!(h["UserPromptSubmit"][0].get("matcher").is_none());
        assert_eq!(h["PreToolUse"][0]["hooks"][0]["timeout"], 30);
        assert!(
            DIALECT.is_our_command(
                h["PreToolUse"][0]["hooks"][0]["command"]
                    .as_str()
                    .expect("a command")
            )
        );
        assert!(!DIALECT.is_our_command("./lint.sh"));
        assert!(!DIALECT.is_our_command("turnback hook gemini-cli"));
    }
}
