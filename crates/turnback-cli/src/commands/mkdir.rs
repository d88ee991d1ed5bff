use std::path::PathBuf;

use turnback::TurnId;

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Create a directory and its missing parents, recording the ones created
/// (a rewind removes them again once empty)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// The directory (relative to the current directory, or absolute)
    path: PathBuf,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
    let mut store = ctx.open(args.opts.options())?;
    let path = std::path::absolute(&args.path)?;
    let report = store.create_dir(&turn, args.opts.label.as_deref(), &path)?;
    if ctx.json() {
        ctx.print_json(&report)?;
    } else if report.captured.is_empty() {
        outln!("{} already exists", args.path.display())?;
    } else {
        super::print_capture(&report)?;
        outln!("created {}", args.path.display())?;
    }
    Ok(0)
}
