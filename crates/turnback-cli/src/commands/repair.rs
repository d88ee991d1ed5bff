use crate::{Ctx, Outcome};

/// Set damaged log lines aside, so the turns they do not touch rewind again
///
/// A damaged log line (other than a torn final one) makes every command
/// refuse the store. Repair keeps every line that is intact and fits, byte
/// for byte, and drops the others; the whole original log is kept beside it
/// in the store as log.damaged-N.jsonl (move it back over log.jsonl to
/// undo; `turnback store` says where the store is).
/// Run `turnback verify` first to see which turns the damage makes
/// uncertain. Exit code 0 unless the repair itself fails (nothing to repair
/// and a dry run are not failures).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Say what would be dropped and kept; change nothing
    #[arg(long)]
    dry_run: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let report = turnback::repair_root(ctx.root()?, args.dry_run)?;
    if ctx.json() {
        ctx.print_json(&report)?;
        return Ok(0);
    }
    if report.dropped.is_empty() {
        outln!(
            "the log of {} has no damaged line: nothing to repair",
            report.root.display()
        )?;
        if let Some((line, bytes)) = report.torn_tail {
            outln!(
                "  (its final line {line}, {bytes} bytes, is a torn append: the next change cuts it)"
            )?;
        }
        return Ok(0);
    }
    let verb = if report.repaired {
        "dropped"
    } else {
        "would drop"
    };
    for d in &report.dropped {
        let hint = d
            .turn_hint
            .as_ref()
            .map(|t| format!(" (it appears to belong to turn {t:?})"))
            .unwrap_or_default();
        outln!("{verb} log line {}: {}{hint}", d.line, d.reason)?;
    }
    outln!(
        "{} of {} line(s) kept byte for byte",
        report.lines_kept,
        report.lines_before
    )?;
    for t in &report.uncertain_turns {
        outln!(
            "  turn {t}: its rewind may lack what the dropped lines held (it restores what is known)"
        )?;
    }
    match &report.original_kept_at {
        Some(p) => outln!(
            "the original log is kept at {} (move it back over log.jsonl to undo)",
            p.display()
        )?,
        None => outln!("dry run: nothing changed")?,
    }
    Ok(0)
}
