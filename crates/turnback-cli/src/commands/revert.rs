use turnback::{Options, RevertOptions};

use crate::{Ctx, Outcome};

/// Undo TURN alone and keep later turns
///
/// A file only TURN touched returns to its state before TURN. A file a later
/// turn also touched is a conflict, explained (what TURN changed, what came
/// after) and left as it is unless --force.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn to revert: its id, a unique prefix of it, @ (the newest turn) or @~N (N turns before it)
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

    /// Revert only these files or folders (and all below them) of TURN; the
    /// rest of it stays, and the turn can still be reverted or rewound whole
    #[arg(last = true, value_name = "PATH")]
    paths: Vec<std::path::PathBuf>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let turn = ctx.turn(&store, &args.turn)?;
    let paths = super::rewind::named_paths(&store, &args.paths)?;
    let shared = super::rewind::shared_changes(store.turn(&turn).ok());
    let report = store.revert(
        &turn,
        &RevertOptions {
            dry_run: args.dry_run,
            force: args.force,
            keep_conflicts: args.keep_conflicts,
            paths,
        },
    )?;
    let code = super::rewind::print_report(ctx, &report)?;
    if !ctx.json() {
        super::rewind::print_shared(&report, &shared)?;
    }
    Ok(code)
}
