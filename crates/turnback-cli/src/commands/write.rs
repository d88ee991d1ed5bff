use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use anyhow::Context;
use turnback::TurnId;

use super::CaptureOpts;
use crate::{Ctx, Outcome, UsageError};

/// Capture PATH, then write standard input to it (an agent's write tool)
///
/// Standard input must be a pipe or a file: on a terminal the command
/// refuses (exit code 2) rather than wait for typing. An empty pipe writes
/// an empty file.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// The file to write (relative to the current directory, or absolute)
    path: PathBuf,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
    if std::io::stdin().is_terminal() {
        return Err(UsageError(format!(
            "standard input is a terminal, and `turnback write` writes what it reads there to {}; give it the new contents through a pipe or a file: `turnback write --turn {} PATH < new-contents` (`printf '' | turnback write ...` writes an empty file)",
            args.path.display(),
            args.opts.turn
        ))
        .into());
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .context("cannot read the new contents from standard input")?;
    let mut store = ctx.open(args.opts.options())?;
    let path = std::path::absolute(&args.path)?;
    let report = store.write(&turn, args.opts.label.as_deref(), &path, &bytes)?;
    if ctx.json() {
        ctx.print_json(&report)?;
    } else {
        super::print_capture(&report)?;
        let shown = turnback::path::escaped(args.path.as_os_str().as_encoded_bytes());
        outln!("wrote {} bytes to {shown}", bytes.len())?;
    }
    Ok(0)
}
