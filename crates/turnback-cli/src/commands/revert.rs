use turnback::{Options, RevertOptions, TurnId};

use crate::{Ctx, Outcome};

/// Undo TURN alone and keep later turns
///
/// A file only TURN touched returns to its state before TURN. A file a later
/// turn also touched is a conflict, explained (what TURN changed, what came
/// after) and left as it is unless --force.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn to revert
    turn: String,

    /// Print the plan and change nothing
    #[arg(long)]
    dry_run: bool,

    /// Also revert files a later turn changed (their bytes are saved first)
    #[arg(long)]
    force: bool,

    /// Leave files changed since the agent's turn as they are
    #[arg(long)]
    keep_conflicts: bool,

    #[command(flatten)]
    verbose: super::rewind::Verbose,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.turn)?;
    let mut store = ctx.open(Options::default())?;
    let shared = super::rewind::shared_changes(store.turn(&turn).ok());
    let bar = super::rewind::progress_bar(&mut store, "reverting");
    let report = store.revert(
        &turn,
        &RevertOptions {
            dry_run: args.dry_run,
            force: args.force,
            keep_conflicts: args.keep_conflicts,
        },
    );
    turnback::Progress::done(&*bar);
    let report = report?;
    let code = super::rewind::print_report(ctx, &report, args.verbose)?;
    if !ctx.json() {
        super::rewind::print_shared(&report, &shared)?;
    }
    Ok(code)
}
