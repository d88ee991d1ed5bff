use turnback::{GcOptions, GcReport, Options};

use crate::size::human;
use crate::{Ctx, Outcome};

/// Drop the oldest turns beyond the limits and delete what nothing refers to
///
/// Limits not given come from the store's config.toml (`turnback store`
/// says where); gc also runs on its own
/// after each rewind and every N captures (see that file).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Keep this many of the newest turns (the newest is always kept)
    #[arg(long, value_name = "N")]
    keep_turns: Option<usize>,

    /// Drop turns older than this many days (never the newest)
    #[arg(long, value_name = "D")]
    keep_days: Option<u64>,

    /// Drop the oldest turns until the store fits in SIZE (e.g. 500M, 2G)
    #[arg(long, value_name = "SIZE", value_parser = turnback::parse_size)]
    max_size: Option<u64>,

    /// Say what gc would drop and how much room it would free; change nothing
    #[arg(long)]
    dry_run: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let options = GcOptions {
        keep_turns: args.keep_turns,
        keep_days: args.keep_days,
        max_size: args.max_size,
    };
    let report = if args.dry_run {
        store.gc_dry_run(&options)?
    } else {
        store.gc(&options)?
    };
    if ctx.json() {
        ctx.print_json(&report)?;
        return Ok(0);
    }
    for line in describe(&report) {
        outln!("{line}")?;
    }
    Ok(0)
}

/// Lines for people describing a gc run (or a dry run).
pub fn describe(r: &GcReport) -> Vec<String> {
    let (would, drop, remove) = if r.dry_run {
        ("gc would keep", "drop", "remove")
    } else {
        ("gc kept", "dropped", "removed")
    };
    let freed = r.bytes_before.saturating_sub(r.bytes_after);
    let size = if r.bytes_after > r.bytes_before {
        format!(
            "{} -> {} (the log grows by {})",
            human(r.bytes_before),
            human(r.bytes_after),
            human(r.bytes_after - r.bytes_before)
        )
    } else {
        format!(
            "{} -> {}, {} {}",
            human(r.bytes_before),
            human(r.bytes_after),
            human(freed),
            if r.dry_run { "would be freed" } else { "freed" }
        )
    };
    let mut out = vec![format!(
        "{would} {} turn(s), {drop} {} turn(s) and {} operation(s), {remove} {} pack(s); {size}",
        r.kept_turns,
        r.dropped_turns.len(),
        r.dropped_operations,
        r.packs_removed,
    )];
    for t in &r.dropped_turns {
        out.push(format!("  {drop} turn {t}"));
    }
    if r.dry_run {
        out.push("dry run: nothing changed".into());
    }
    out
}
