use serde::Serialize;
use turnback::Options;

use crate::{Ctx, Outcome};

/// List the turns that can be rewound, oldest first
#[derive(clap::Args, Debug)]
pub struct Args {}

/// One live turn as `list --json` (and the MCP server's `list_turns`)
/// give it; see docs/JSON.md.
#[derive(Serialize)]
pub struct Row<'a> {
    pub turn: &'a str,
    pub label: Option<&'a str>,
    /// RFC 3339 in UTC with nanoseconds.
    pub started_at: String,
    pub first_seq: u64,
    pub file_count: usize,
    #[serde(skip)]
    started_at_ns: u64,
}

/// The rows of `turns`, oldest first.
pub fn rows<'a>(turns: &[&'a turnback::Turn]) -> Vec<Row<'a>> {
    turns
        .iter()
        .map(|t| Row {
            turn: t.id.as_str(),
            label: t.label.as_deref(),
            started_at: turnback::time::rfc3339(i128::from(t.started_at)),
            first_seq: t.first_seq,
            file_count: t.files.len(),
            started_at_ns: t.started_at,
        })
        .collect()
}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    let store = ctx.open(Options::default())?;
    let turns = store.turns()?;
    let rows = rows(&turns);
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
            r.file_count,
            r.label.unwrap_or("")
        )?;
    }
    Ok(0)
}

/// Formats Unix nanoseconds as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = turnback::time::civil_from_days(i128::from(days));
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
