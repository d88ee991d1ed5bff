//! `turnback man [COMMAND]`: the manual page in roff (clap_mangen), from
//! the same command definition as the help.

use std::io::Write;

use anyhow::Context;

use crate::{Ctx, Outcome};

/// Print the manual page (roff), of turnback or of one command
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The command whose page to print (turnback-COMMAND(1)) [default:
    /// turnback(1), which lists every command]
    command: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let mut cmd = crate::command();
    // Built, so that a command's usage line names `turnback COMMAND`.
    cmd.build();
    let page = match &args.command {
        None => cmd,
        Some(name) => cmd
            .find_subcommand(name)
            .filter(|s| !s.is_hide_set())
            .cloned()
            .with_context(|| {
                format!("there is no command {name:?}; `turnback --help` lists them")
            })?,
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page).render(&mut roff)?;
    if ctx.json() {
        ctx.print_json(&serde_json::json!({ "page": String::from_utf8_lossy(&roff) }))?;
    } else {
        std::io::stdout().lock().write_all(&roff)?;
    }
    Ok(0)
}
