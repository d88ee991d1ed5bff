use std::path::PathBuf;

use turnback::TurnId;

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Delete a file or symlink after saving it in a turn (a rewind brings it back)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// The file or symlink (never what a symlink points to; not directories)
    path: PathBuf,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
    let mut store = ctx.open(args.opts.options())?;
    let path = std::path::absolute(&args.path)?;
    let report = store.remove_file(&turn, args.opts.label.as_deref(), &path)?;
    if ctx.json() {
        ctx.print_json(&report)?;
    } else {
        super::print_capture(&report)?;
        outln!("deleted {}", args.path.display())?;
    }
    Ok(0)
}
