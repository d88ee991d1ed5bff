//! `turnback completions SHELL`: a completion script for the shell, from
//! the same command definition as the help (clap_complete).

use std::io::Write;

use crate::{Ctx, Outcome};

/// Print a completion script for a shell (bash, zsh, fish, powershell, elvish)
///
/// The script completes commands, flags and the shells here; load it from
/// the shell's start-up file or put it where the shell looks for
/// completions (see the examples).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shell
    shell: clap_complete::Shell,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let mut cmd = crate::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "turnback", &mut script);
    if ctx.json() {
        ctx.print_json(&serde_json::json!({
            "shell": args.shell.to_string(),
            "script": String::from_utf8_lossy(&script),
        }))?;
    } else {
        std::io::stdout().lock().write_all(&script)?;
    }
    Ok(0)
}
