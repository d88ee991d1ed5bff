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
