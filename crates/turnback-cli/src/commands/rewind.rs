use std::path::PathBuf;

use turnback::{Action, Options, RelPath, Report, RewindOptions, TurnId};

use crate::{Ctx, EXIT_INCOMPLETE, Outcome};

/// Put the folder back as it was before TURN, undoing it and every later turn
///
/// Files changed since the agent's turn (by you, an editor, another tool)
/// are saved in the store before they are replaced; `turnback undo` brings
/// them back. `--keep-conflicts` leaves them as they are instead.
///
/// With no TURN on a terminal, a picker lists the turns, newest first, with
/// what each changed; the one picked is shown as --dry-run shows it, and
/// rewound only once you answer `y` (any other answer, or q or Esc in the
/// list, changes nothing and exits 0).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn to undo (with every later one): its id, a unique prefix of
    /// it, @ (the newest turn) or @~N (N turns before it) [default: pick one
    /// on a terminal]
    turn: Option<String>,

    /// Print the plan (restore / delete / cannot restore, per path) and change nothing
    #[arg(long)]
    dry_run: bool,

    /// Leave files changed since the agent's turn as they are
    #[arg(long)]
    keep_conflicts: bool,

    /// Take back only these files or folders (and all below them); the
    /// rest of the turns stays as it is, and the turns can still be rewound
    #[arg(last = true, value_name = "PATH")]
    paths: Vec<PathBuf>,

    #[command(flatten)]
    verbose: Verbose,
}

/// The `-v` of the commands that restore (rewind, revert, undo, redo).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Verbose {
    /// List every path restored or deleted (by default only when there are
    /// at most 50; problems are always listed, every path is in --json)
    #[arg(short, long)]
    pub verbose: bool,
}

/// At most this many paths restored or deleted are listed one per line
/// without `-v`; more are only counted in the summary line.
pub const LIST_AT_MOST: usize = 50;

/// A progress bar for the operation `doing` ("rewinding"), given to the
/// store: drawn on a terminal only, once the operation has run for a
/// while (see `progress.rs`).
pub fn progress_bar(
    store: &mut turnback::Store,
    doing: &str,
) -> std::sync::Arc<crate::progress::Bar> {
    let bar = std::sync::Arc::new(crate::progress::Bar::doing(doing));
    store.set_progress(Some(bar.clone()));
    bar
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let Some(turn) = &args.turn else {
        return pick(ctx, &args);
    };
    rewind(ctx, turn, &args, args.dry_run)
}

/// Rewinds to before the turn `reference` names, as `args` say (a dry run
/// if `dry_run`).
fn rewind(ctx: &Ctx, reference: &str, args: &Args, dry_run: bool) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let turn = ctx.turn(&store, reference)?;
    let paths = named_paths(&store, &args.paths)?;
    // Only the turns this rewind undoes: older ones are not read. An
    // unknown turn is left for the rewind to report.
    let shared = shared_changes(store.turns_from(&turn).unwrap_or_default());
    let bar = progress_bar(&mut store, "rewinding");
    let report = store.rewind(
        &turn,
        &RewindOptions {
            dry_run,
            keep_conflicts: args.keep_conflicts,
            paths,
        },
    );
    turnback::Progress::done(&*bar);
    let report = report?;
    let code = print_report(ctx, &report, args.verbose)?;
    if !ctx.json() {
        print_shared(&report, &shared)?;
    }
    Ok(code)
}

/// The paths after `--`, as the store names them: each relative to the
/// current directory (or absolute), inside the project. The root itself
/// among them means everything (no limit).
pub fn named_paths(store: &turnback::Store, given: &[PathBuf]) -> anyhow::Result<Vec<RelPath>> {
    let cwd = std::env::current_dir()?;
    let mut out = Vec::with_capacity(given.len());
    for p in given {
        match store.resolve(cwd.join(p), false) {
            Ok(rel) => out.push(rel),
            // The root itself (`.` in it, or its path).
            Err(turnback::Error::BadPath {
                reason: turnback::PathProblem::Empty,
                ..
            }) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// `rewind` with no turn: the picker, then the dry run, then the rewind
/// once confirmed (see `picker.rs`).
fn pick(ctx: &Ctx, args: &Args) -> Outcome {
    let turn = match pick_turn(ctx, "rewind")? {
        Picked::Turn(turn) => turn,
        Picked::Done(code) => return Ok(code),
    };
    let code = rewind(ctx, turn.as_str(), args, true)?;
    if args.dry_run {
        return Ok(code);
    }
    if !crate::picker::confirm(&format!(
        "Rewind the folder to before turn {turn}, undoing it and every later turn?"
    ))? {
        return crate::picker::cancelled();
    }
    rewind(ctx, turn.as_str(), args, false)
}

/// What the picker gave a command run with no turn.
pub enum Picked {
    /// The turn picked.
    Turn(TurnId),
    /// The command is over, with this exit code: the picker could not open
    /// (2, the usage error printed), was cancelled, or had no turn to offer
    /// (0, "nothing changed" printed).
    Done(u8),
}

/// The turn the user picks for `command` ("rewind", "revert", "show").
pub fn pick_turn(ctx: &Ctx, command: &str) -> anyhow::Result<Picked> {
    if ctx.json() || !crate::picker::available() {
        return Ok(Picked::Done(crate::picker::missing_turn(
            command,
            ctx.json(),
        )));
    }
    let store = ctx.open(Options::default())?;
    let turns = store.turns()?;
    if turns.is_empty() {
        outln!("no turns in {}", store.root().display())?;
        return crate::picker::cancelled().map(Picked::Done);
    }
    match crate::picker::pick(store.root(), &turns, command)? {
        Some(turn) => Ok(Picked::Turn(turn)),
        None => crate::picker::cancelled().map(Picked::Done),
    }
}

/// Each of `turns`' changes that are recorded in other turns too.
pub fn shared_changes<'a>(
    turns: impl IntoIterator<Item = &'a turnback::Turn>,
) -> Vec<(TurnId, String, Vec<TurnId>)> {
    let mut out = Vec::new();
    for t in turns {
        for c in t.files.iter().filter(|c| !c.shared_with.is_empty()) {
            out.push((
                t.id.clone(),
                c.entry.path.to_string(),
                c.shared_with.clone(),
            ));
        }
    }
    out
}

/// Says which undone changes another turn's command may have made.
pub fn print_shared(
    report: &Report,
    shared: &[(TurnId, String, Vec<TurnId>)],
) -> std::io::Result<()> {
    for (turn, path, with) in shared {
        if !report.turns.contains(turn) {
            continue;
        }
        let others: Vec<&str> = with
            .iter()
            .filter(|t| !report.turns.contains(t))
            .map(|t| t.as_str())
            .collect();
        if !others.is_empty() {
            outln!(
                "  SHARED    {path}: turn {turn}'s command and that of turn(s) {} ran at the same time; either may have made this change, and it {} undone",
                others.join(", "),
                if report.dry_run { "would be" } else { "was" }
            )?;
        }
    }
    Ok(())
}

/// Prints a rewind/revert/undo/redo report; the exit code says whether it
/// was complete. The paths restored and deleted are listed one per line
/// when there are at most [`LIST_AT_MOST`] of them or with `-v`; the
/// problems always are, and a summary line ends the report.
pub fn print_report(ctx: &Ctx, report: &Report, verbose: Verbose) -> Outcome {
    let code = if report.complete() {
        0
    } else {
        EXIT_INCOMPLETE
    };
    if ctx.json() {
        ctx.print_json(report)?;
        return Ok(code);
    }
    for w in &report.warnings {
        errln!("turnback: warning: {w}");
    }
    let turns: Vec<&str> = report.turns.iter().map(|t| t.as_str()).collect();
    let part = !report.paths.is_empty();
    let verb = match report.operation {
        "undo" => "brought back turns",
        "redo" => "rewound again turns",
        "revert" if part => "reverted part of turn",
        "revert" => "reverted turn",
        _ if part => "took back part of turns",
        _ => "rewound turns",
    };
    if report.dry_run {
        outln!(
            "{} of {} would undo turns: {}",
            report.operation,
            report.turn,
            turns.join(", ")
        )?;
        for s in &report.plan {
            let what = match &s.action {
                Action::Restore { size, mode, .. } => {
                    format!("restore  ({size} bytes, mode {mode:o})")
                }
                Action::RestoreKept { size, mode, .. } => {
                    format!("restore  ({size} bytes, mode {mode:o}, kept aside)")
                }
                Action::RestoreSymlink { target } => format!("restore  (symlink -> {target})"),
                Action::MakeDir { mode } => format!("mkdir    (mode {mode:o})"),
                Action::MakeFifo { mode } => format!("mkfifo   (mode {mode:o})"),
                Action::Delete => "delete".to_string(),
                Action::CannotRestore { reason } => format!("CANNOT RESTORE: {reason}"),
            };
            outln!("  {what:<40} {}", s.path)?;
        }
    } else if turns.is_empty() {
        // The undo or redo of an operation limited to some paths: no turn
        // comes back or ends.
        outln!(
            "{}: put back {} path(s) the last operation changed",
            report.operation,
            report.plan.len()
        )?;
    } else {
        outln!("{verb}: {}", turns.join(", "))?;
    }
    if !report.paths.is_empty() {
        let named: Vec<String> = report.paths.iter().map(|p| p.to_string()).collect();
        outln!(
            "  only {}; {} other path(s) of {} left as they are{}",
            named.join(", "),
            report.left.len(),
            if report.operation == "revert" {
                "the turn"
            } else {
                "these turns"
            },
            if report.dry_run {
                ""
            } else {
                " (the turns can still be rewound whole)"
            }
        )?;
    }
    if !report.dry_run && listed(report, verbose) {
        for p in &report.restored {
            outln!("  restored  {p}")?;
        }
        for p in &report.deleted {
            outln!("  deleted   {p}")?;
        }
    }
    for c in &report.conflicts {
        let tail = if report.dry_run {
            "would be saved in the store, then replaced"
        } else {
            "your later changes were kept in the store; `turnback undo` brings them back"
        };
        outln!("  CONFLICT  {}: {}; {tail}", c.path, c.reason)?;
        if let Some(d) = &c.detail {
            for line in d.lines() {
                outln!("      {line}")?;
            }
        }
    }
    for c in &report.kept {
        outln!("  KEPT      {}: {} (left as it is)", c.path, c.reason)?;
        if let Some(d) = &c.detail {
            for line in d.lines() {
                outln!("      {line}")?;
            }
        }
    }
    for n in &report.notes {
        outln!("  NOTE      {}: {}", n.path, n.note)?;
    }
    for f in &report.failed {
        outln!("  NOT RESTORED  {}: {}", f.path, f.reason)?;
    }
    for s in &report.links_split {
        outln!("  LINK SPLIT  {}: {}", s.path, s.reason)?;
    }
    if !report.dry_run {
        outln!("{}", summary(report, verbose))?;
    }
    if !report.complete() {
        errln!(
            "turnback: {} path(s) could not be restored; the folder is not fully back to its state before {}",
            report.failed.len(),
            report.turn
        );
    }
    Ok(code)
}

/// Whether the paths restored and deleted are listed one per line.
fn listed(report: &Report, verbose: Verbose) -> bool {
    verbose.verbose || report.restored.len() + report.deleted.len() <= LIST_AT_MOST
}

/// The line that ends a report: how many paths were restored, deleted,
/// replaced over a conflict, and not restored.
fn summary(report: &Report, verbose: Verbose) -> String {
    let mut line = format!(
        "restored {}, deleted {}, conflicts {}, not restored {}",
        report.restored.len(),
        report.deleted.len(),
        report.conflicts.len(),
        report.failed.len()
    );
    if !listed(report, verbose) {
        line.push_str(" (-v lists every path)");
    }
    line
}
