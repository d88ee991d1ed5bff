use turnback::Options;

use super::rewind::{Verbose, print_report, progress_bar};
use crate::{Ctx, Outcome};

/// Reverse the last rewind or revert (repeat to walk further back)
#[derive(clap::Args, Debug)]
pub struct UndoArgs {
    #[command(flatten)]
    verbose: Verbose,
}

/// Reverse the last undo
#[derive(clap::Args, Debug)]
pub struct RedoArgs {
    #[command(flatten)]
    verbose: Verbose,
}

pub fn run_undo(ctx: &Ctx, args: UndoArgs) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let bar = progress_bar(&mut store, "undoing");
    let report = store.undo();
    turnback::Progress::done(&*bar);
    print_report(ctx, &report?, args.verbose)
}

pub fn run_redo(ctx: &Ctx, args: RedoArgs) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let bar = progress_bar(&mut store, "redoing");
    let report = store.redo();
    turnback::Progress::done(&*bar);
    print_report(ctx, &report?, args.verbose)
}
