use turnback::Options;

use crate::{Ctx, Outcome};

/// Reverse the last rewind or revert (repeat to walk further back)
#[derive(clap::Args, Debug)]
pub struct UndoArgs {}

/// Reverse the last undo
#[derive(clap::Args, Debug)]
pub struct RedoArgs {}

pub fn run_undo(ctx: &Ctx, _args: UndoArgs) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let report = store.undo()?;
    super::rewind::print_report(ctx, &report)
}

pub fn run_redo(ctx: &Ctx, _args: RedoArgs) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let report = store.redo()?;
    super::rewind::print_report(ctx, &report)
}
