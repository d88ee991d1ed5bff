use turnback::{GcOptions, Options};

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
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let report = store.gc(&GcOptions {
        keep_turns: args.keep_turns,
        keep_days: args.keep_days,
        max_size: args.max_size,
    })?;
    if ctx.json() {
        ctx.print_json(&report)?;
        return Ok(0);
    }
    outln!(
        "gc: kept {} turn(s), dropped {} turn(s) and {} operation(s); {} pack(s) removed; {} -> {} bytes",
        report.kept_turns,
        report.dropped_turns.len(),
        report.dropped_operations,
        report.packs_removed,
        report.bytes_before,
        report.bytes_after
    )?;
    for t in &report.dropped_turns {
        outln!("  dropped turn {t}")?;
    }
    Ok(0)
}
