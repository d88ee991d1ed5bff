use turnback::{Action, Options, RewindOptions, TurnId};

use crate::{Ctx, EXIT_INCOMPLETE, Outcome};

/// Put the folder back as it was before TURN, undoing it and every later turn
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn to undo (with every later one)
    turn: String,

    /// Print the plan (restore / delete / cannot restore, per path) and change nothing
    #[arg(long)]
    dry_run: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.turn)?;
    let mut store = ctx.open(Options::default())?;
    let report = store.rewind(
        &turn,
        &RewindOptions {
            dry_run: args.dry_run,
        },
    )?;
    let code = if report.complete() {
        0
    } else {
        EXIT_INCOMPLETE
    };
    if ctx.json() {
        ctx.print_json(&report)?;
        return Ok(code);
    }
    let turns: Vec<&str> = report.turns.iter().map(|t| t.as_str()).collect();
    if report.dry_run {
        println!(
            "rewind of {} would undo turns: {}",
            report.turn,
            turns.join(", ")
        );
        for s in &report.plan {
            let what = match &s.action {
                Action::Restore { size, mode, .. } => {
                    format!("restore  ({size} bytes, mode {mode:o})")
                }
                Action::RestoreSymlink { target } => format!("restore  (symlink -> {target})"),
                Action::Delete => "delete".to_string(),
                Action::CannotRestore { reason } => format!("CANNOT RESTORE: {reason}"),
            };
            println!("  {what:<40} {}", s.path);
        }
        return Ok(code);
    }
    println!("rewound turns: {}", turns.join(", "));
    for p in &report.restored {
        println!("  restored  {p}");
    }
    for p in &report.deleted {
        println!("  deleted   {p}");
    }
    for f in &report.failed {
        println!("  NOT RESTORED  {}: {}", f.path, f.reason);
    }
    if !report.complete() {
        eprintln!(
            "turnback: {} path(s) could not be restored; the folder is not fully back to its state before {}",
            report.failed.len(),
            report.turn
        );
    }
    Ok(code)
}
