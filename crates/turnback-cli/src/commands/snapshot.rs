use turnback::{SnapshotReport, TurnId};

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Snapshot the project around a command an agent runs itself: once before
/// it (stores the bytes of every covered file that changed since the last
/// snapshot), once with --after (records in the turn the pre-image of every
/// path the command created, modified, deleted or renamed)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// The after half: record the changes since the before half in the turn
    #[arg(long)]
    after: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
    let mut store = ctx.open(args.opts.options())?;
    let bar = crate::progress::Bar::new();
    let report = store.snapshot(&turn, args.opts.label.as_deref(), args.after, &bar)?;
    if ctx.json() {
        ctx.print_json(&report)?;
    } else {
        for line in describe(&report) {
            outln!("{line}")?;
        }
    }
    Ok(0)
}

/// Lines for people describing a snapshot.
pub fn describe(r: &SnapshotReport) -> Vec<String> {
    let mut out = Vec::new();
    for w in &r.warnings {
        out.push(format!("warning: {w}"));
    }
    let s = &r.scan;
    out.push(format!(
        "{} snapshot of turn {}: {} files ({}) covered, {} read, {} new blob(s) stored ({}), {} path(s) not covered",
        if r.after { "after" } else { "before" },
        r.turn,
        s.files,
        crate::size::human(s.bytes),
        s.hashed_files,
        s.new_blobs,
        crate::size::human(s.stored_bytes),
        s.excluded,
    ));
    if let Some(rec) = &r.recorded {
        out.extend(describe_changes(rec));
    }
    out
}

/// Lines for people describing what a snapshot recorded in a turn.
pub fn describe_changes(rec: &turnback::Recorded) -> Vec<String> {
    let c = &rec.changes;
    let mut out = Vec::new();
    if c.is_empty() {
        out.push(format!("no changes recorded in turn {}", rec.turn));
        return out;
    }
    out.push(format!(
        "recorded in turn {}: {} modified, {} created, {} deleted, {} renamed, {} not captured",
        rec.turn,
        c.modified.len(),
        c.created.len(),
        c.deleted.len(),
        c.renamed.len(),
        c.not_captured.len()
    ));
    for p in &c.modified {
        out.push(format!("  modified  {p}"));
    }
    for p in &c.created {
        out.push(format!("  created   {p}"));
    }
    for p in &c.deleted {
        out.push(format!("  deleted   {p}"));
    }
    for r in &c.renamed {
        out.push(format!("  renamed   {} -> {}", r.from, r.to));
    }
    for n in &c.not_captured {
        out.push(format!(
            "  NOT CAPTURED  {} ({}): {}",
            n.path,
            n.change.as_str(),
            n.reason
        ));
    }
    for p in &rec.already_captured {
        out.push(format!(
            "  already captured in this turn (earlier pre-image kept): {p}"
        ));
    }
    out.extend(describe_sharing(rec).into_iter().map(|l| format!("  {l}")));
    out
}

/// Lines saying which changes other turns may own: commands that ran at
/// the same time, file tools of other turns.
pub fn describe_sharing(rec: &turnback::Recorded) -> Vec<String> {
    let mut out = Vec::new();
    if !rec.shared_with.is_empty() && !rec.captured.is_empty() {
        let others: Vec<&str> = rec.shared_with.iter().map(|t| t.as_str()).collect();
        out.push(format!(
            "SHARED: commands of turns {} ran at the same time as this one; these changes are recorded in each of them (rewinding any brings them back)",
            others.join(", ")
        ));
    }
    for c in &rec.captured_elsewhere {
        out.push(format!(
            "left to turn {}: {} (its file tool captured it)",
            c.turn, c.path
        ));
    }
    out
}
