use std::path::PathBuf;

use turnback::TurnId;

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Save the current bytes of PATHs in a turn, for agents that write files
/// themselves (many paths in one call: one lock, one durable record)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// The files about to be written
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
    let mut store = ctx.open(args.opts.options())?;
    let paths = args
        .paths
        .iter()
        .map(std::path::absolute)
        .collect::<Result<Vec<_>, _>>()?;
    let report = store.capture_many(&turn, args.opts.label.as_deref(), &paths)?;
    if ctx.json() {
        ctx.print_json(&report)?;
    } else {
        super::print_capture(&report)?;
    }
    Ok(0)
}
