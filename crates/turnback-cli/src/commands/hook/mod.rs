//! `turnback hook <agent>`: adapters that read one hook event an agent sends
//! and record it in the store. One module per agent whose hook format is
//! documented; they share [`engine`].

pub mod claude_code;
pub mod engine;
pub mod gemini_cli;

use crate::{Ctx, Outcome};

/// Handle one hook event from a coding agent (reads the event on standard input)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    agent: Agent,
}

#[derive(clap::Subcommand, Debug)]
enum Agent {
    /// A Claude Code hook event (UserPromptSubmit, PreToolUse, PostToolUse);
    /// `turnback init claude-code` installs it
    ClaudeCode(claude_code::Args),
    /// A Gemini CLI hook event (BeforeAgent, BeforeTool, AfterTool);
    /// `turnback init gemini-cli` installs it
    GeminiCli(gemini_cli::Args),
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    match args.agent {
        Agent::ClaudeCode(a) => claude_code::run(ctx, a),
        Agent::GeminiCli(a) => gemini_cli::run(ctx, a),
    }
}
