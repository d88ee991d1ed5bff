use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use turnback::TurnId;

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Capture PATH, then write standard input to it (an agent's write tool)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// The file to write (relative to the current directory, or absolute)
    path: PathBuf,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
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
