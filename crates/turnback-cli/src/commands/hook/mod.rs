//! `turnback hook <agent>`: adapters that read one hook event an agent sends
//! and record it in the store. One module per agent whose hook format is
//! documented; they share [`engine`] (and [`patch`], for the agents whose
//! edits arrive as a patch).

pub mod claude_code;
pub mod cline;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod engine;
pub mod gemini_cli;
pub mod opencode;
pub mod patch;

use crate::{Ctx, Outcome};

/// Handle one hook event from a coding agent (reads the event on standard input)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    agent: Agent,
}

#[derive(clap::Subcommand, Debug)]
enum Agent {
    /// A Claude Code hook event (UserPromptSubmit, PreToolUse, PostToolUse,
    /// PreSkillShellCommand); `turnback init claude-code` installs it
    ClaudeCode(claude_code::Args),
    /// A Gemini CLI hook event (BeforeAgent, BeforeTool, AfterTool);
    /// `turnback init gemini-cli` installs it
    GeminiCli(gemini_cli::Args),
    /// A Codex CLI hook event (UserPromptSubmit, PreToolUse, PostToolUse);
    /// `turnback init codex` installs it
    Codex(codex::Args),
    /// A GitHub Copilot CLI hook event (userPromptSubmitted, preToolUse,
    /// postToolUse); `turnback init copilot` installs it
    Copilot(copilot::Args),
    /// A Cline hook event (TaskStart, UserPromptSubmit, PreToolUse,
    /// PostToolUse); `turnback init cline` installs it
    Cline(cline::Args),
    /// An event from turnback's opencode plugin; `turnback init opencode`
    /// installs it
    Opencode(opencode::Args),
    /// A Cursor hook event (beforeSubmitPrompt, preToolUse, postToolUse);
    /// `turnback init cursor` installs it
    Cursor(cursor::Args),
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    match args.agent {
        Agent::ClaudeCode(a) => claude_code::run(ctx, a),
        Agent::GeminiCli(a) => gemini_cli::run(ctx, a),
        Agent::Codex(a) => codex::run(ctx, a),
        Agent::Copilot(a) => copilot::run(ctx, a),
        Agent::Cline(a) => cline::run(ctx, a),
        Agent::Opencode(a) => opencode::run(ctx, a),
        Agent::Cursor(a) => cursor::run(ctx, a),
    }
}

/// Every agent's dialect.
pub const DIALECTS: [&engine::Dialect; 7] = [
    &claude_code::DIALECT,
    &gemini_cli::DIALECT,
    &codex::DIALECT,
    &copilot::DIALECT,
    &cline::DIALECT,
    &opencode::DIALECT,
    &cursor::DIALECT,
];

/// The agent and session of a turn a hook began, from its id
/// (`<prefix>-<session>-<n>`, see [`engine`]): the agent's dialect and
/// the session's tag. `None` for any other id.
pub fn agent_of_turn(id: &str) -> Option<(&'static engine::Dialect, &str)> {
    DIALECTS.iter().find_map(|d| {
        let rest = id.strip_prefix(d.turn_prefix)?.strip_prefix('-')?;
        let (tag, n) = rest.rsplit_once('-')?;
        let numbered = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
        (numbered && !tag.is_empty()).then_some((*d, tag))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_hook_turn_names_its_agent_and_session() {
        let agent_of_turn = |id| super::agent_of_turn(id).map(|(d, tag)| (d.name, tag.to_owned()));
        assert_eq!(
            agent_of_turn("claude-8c35adc1-3"),
            Some(("claude-code", "8c35adc1".to_owned()))
        );
        assert_eq!(
            agent_of_turn("gemini-ab-cd-12"),
            Some(("gemini-cli", "ab-cd".to_owned()))
        );
        assert_eq!(agent_of_turn("claude-8c35adc1-x"), None);
        assert_eq!(agent_of_turn("claude--3"), None);
        assert_eq!(agent_of_turn("msg_01"), None);
    }
}
