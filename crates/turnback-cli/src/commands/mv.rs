use std::path::PathBuf;

use turnback::TurnId;

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Move a file or symlink, recording both paths first (never replaces an
/// existing destination; directories are not moved)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// The file or symlink to move
    source: PathBuf,

    /// Where it goes (missing parent directories are created)
    destination: PathBuf,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
    let mut store = ctx.open(args.opts.options())?;
    let from = std::path::absolute(&args.source)?;
    let to = std::path::absolute(&args.destination)?;
    let report = store.rename(&turn, args.opts.label.as_deref(), &from, &to)?;
    if ctx.json() {
        ctx.print_json(&report)?;
    } else {
        super::print_capture(&report)?;
        outln!(
            "moved {} to {}",
            args.source.display(),
            args.destination.display()
        )?;
    }
    Ok(0)
}
