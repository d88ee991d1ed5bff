use serde::Serialize;
use turnback::Options;

use crate::{Ctx, Outcome};

/// List the turns that can be rewound, oldest first
#[derive(clap::Args, Debug)]
pub struct Args {}

#[derive(Serialize)]
struct Row<'a> {
    turn: &'a str,
    label: Option<&'a str>,
    started_at_ns: u64,
    seq: u64,
    files: usize,
}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    let store = ctx.open(Options::default())?;
    let rows: Vec<Row> = store
        .turns()?
        .iter()
        .map(|t| Row {
            turn: t.id.as_str(),
            label: t.label.as_deref(),
            started_at_ns: t.started_at,
            seq: t.first_seq,
            files: t.files.len(),
        })
        .collect();
    if ctx.json() {
        ctx.print_json(&rows)?;
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("no turns to rewind in {}", store.root().display())?;
    }
    for r in rows {
        outln!(
            "{:<24} {}  {:>5} file(s)  {}",
            r.turn,
            format_time(r.started_at_ns),
            r.files,
            r.label.unwrap_or("")
        )?;
    }
    Ok(0)
}

/// Formats Unix nanoseconds as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_format_as_utc() {
        assert_eq!(super::format_time(0), "1970-01-01 00:00:00");
        assert_eq!(
            super::format_time(1_700_000_000_000_000_000),
            "2023-11-14 22:13:20"
        );
    }
}
