use turnback::{Options, RevertOptions};

use super::rewind::Picked;
use crate::{Ctx, Outcome};

/// Undo TURN alone and keep later turns
///
/// A file only TURN touched returns to its state before TURN. A file a later
/// turn also touched is a conflict, explained (what TURN changed, what came
/// after) and left as it is unless --force.
///
/// With no TURN on a terminal, a picker lists the turns, newest first, with
/// what each changed; the one picked is shown as --dry-run shows it, and
/// reverted only once you answer `y` (any other answer, or q or Esc in the
/// list, changes nothing and exits 0).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn to revert: its id, a unique prefix of it, @ (the newest
    /// turn) or @~N (N turns before it) [default: pick one on a terminal]
    turn: Option<String>,

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

    #[command(flatten)]
    verbose: super::rewind::Verbose,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let Some(turn) = &args.turn else {
        return pick(ctx, &args);
    };
    revert(ctx, turn, &args, args.dry_run)
}

/// `revert` with no turn: the picker, then the dry run, then the revert
/// once confirmed (see `picker.rs`).
fn pick(ctx: &Ctx, args: &Args) -> Outcome {
    let turn = match super::rewind::pick_turn(ctx, "revert")? {
        Picked::Turn(turn) => turn,
        Picked::Done(code) => return Ok(code),
    };
    let code = revert(ctx, turn.as_str(), args, true)?;
    if args.dry_run {
        return Ok(code);
    }
    if !crate::picker::confirm(&format!(
        "Revert turn {turn} alone, keeping the later turns?"
    ))? {
        return crate::picker::cancelled();
    }
    revert(ctx, turn.as_str(), args, false)
}

/// Reverts the turn `reference` names, as `args` say (a dry run if
/// `dry_run`).
fn revert(ctx: &Ctx, reference: &str, args: &Args, dry_run: bool) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let turn = ctx.turn(&store, reference)?;
    let paths = super::rewind::named_paths(&store, &args.paths)?;
    let shared = super::rewind::shared_changes(store.turn(&turn).ok());
    let bar = super::rewind::progress_bar(&mut store, "reverting");
    let report = store.revert(
        &turn,
        &RevertOptions {
            dry_run,
            force: args.force,
            keep_conflicts: args.keep_conflicts,
            paths,
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
