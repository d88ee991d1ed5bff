use turnback::verify::{BlobUse, Damage, Warning};

use crate::{Ctx, Outcome};

/// Check the store without changing it: every log line, every blob, every
/// path; say what is damaged, by turn and path, and which turns can still be
/// rewound whole. Exit code 0 only when the store is whole, 1 otherwise.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// How many captured paths to print per damaged blob or pack.
const SHOWN_USES: usize = 10;

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    let report = turnback::verify_root(ctx.root()?)?;
    let code = if report.whole { 0 } else { 1 };
    if ctx.json() {
        ctx.print_json(&report)?;
        return Ok(code);
    }
    let store = &report.store_dir;
    if !report.store_found {
        outln!(
            "no store in {} (nothing captured yet): nothing to verify",
            report.root.display()
        )?;
        return Ok(code);
    }
    outln!(
        "store {}: {}",
        store.display(),
        if report.whole { "whole" } else { "DAMAGED" }
    )?;
    outln!(
        "log: {} line(s), {} usable record(s); {} pack(s), {} blob(s) re-hashed",
        report.log_lines,
        report.records,
        report.packs_checked,
        report.blobs_checked
    )?;
    if !report.damage.is_empty() {
        outln!("damage:")?;
    }
    for d in &report.damage {
        match d {
            Damage::Store { path, reason } => outln!("  {}: {reason}", path.display())?,
            Damage::LogLine {
                line,
                reason,
                turn_hint,
            } => {
                let hint = turn_hint
                    .as_ref()
                    .map(|t| format!(" (it appears to belong to turn {t:?})"))
                    .unwrap_or_default();
                outln!("  log line {line}: {reason}{hint}")?;
            }
            Damage::Pack {
                pack,
                reason,
                unreadable_blobs,
                uses,
            } => {
                outln!("  pack {pack}: {reason}; {unreadable_blobs} blob(s) in it cannot be read")?;
                print_uses(uses)?;
            }
            Damage::Blob {
                blob, reason, uses, ..
            } => {
                outln!("  blob {blob}: {reason}")?;
                print_uses(uses)?;
            }
            Damage::LostRecords { packs, last_seq } => outln!(
                "  the log has lost records: {} packs are numbered after its last record ({last_seq}): {}",
                packs.len(),
                packs.join(", ")
            )?,
        }
    }
    if report
        .damage
        .iter()
        .any(|d| matches!(d, Damage::LogLine { .. }))
    {
        outln!(
            "  `turnback repair` sets the damaged lines aside (keeping the original log); the turns below that can be rewound whole then rewind"
        )?;
    }
    if !report.warnings.is_empty() {
        outln!("warnings:")?;
    }
    for w in &report.warnings {
        match w {
            Warning::TornTail {
                line,
                bytes,
                turn_hint,
            } => {
                let hint = turn_hint
                    .as_ref()
                    .map(|t| format!(", of turn {t:?}"))
                    .unwrap_or_default();
                outln!(
                    "  log line {line} is a torn final append ({bytes} bytes{hint}): it is ignored and cut off by the next change; if the log was truncated rather than interrupted, what followed it is lost"
                )?;
            }
            Warning::NoLog => outln!("  the store has no log: nothing was ever recorded")?,
            Warning::UnreferencedPack { pack } => outln!(
                "  pack {pack} is named by no record (left by an interrupted capture, or its record was lost)"
            )?,
            Warning::TemporaryFile { name } => outln!(
                "  packs/{name} is a temporary file left by an interrupted process; the next change removes it"
            )?,
            Warning::UnexpectedFile { name } => {
                outln!("  packs/{name} was not written by turnback")?
            }
            Warning::HardLinkedPack { pack, links } => outln!(
                "  pack {pack} has {links} hard links: its bytes are intact, but another name can change them; replace it by a copy (cp, then mv over it) to make it the store's own"
            )?,
        }
    }
    if report.turns.is_empty() {
        outln!("no live turns")?;
        return Ok(code);
    }
    outln!("turns (oldest first):")?;
    for t in &report.turns {
        if t.rewindable {
            outln!("  {:<24} can be rewound whole", t.turn.as_str())?;
            continue;
        }
        outln!("  {:<24} CANNOT be rewound whole", t.turn.as_str())?;
        for p in &t.damaged {
            outln!(
                "      damaged: {} (captured in {}): {}",
                p.path,
                p.captured_in,
                p.reason
            )?;
        }
        for p in &t.not_saved {
            outln!(
                "      not saved at capture: {} (in {}): {}",
                p.path,
                p.captured_in,
                p.reason
            )?;
        }
        for line in &t.uncertain_lines {
            outln!("      log line {line} is damaged and may hold records this rewind needs")?;
        }
    }
    Ok(code)
}

fn print_uses(uses: &[BlobUse]) -> std::io::Result<()> {
    for u in uses.iter().take(SHOWN_USES) {
        let state = if u.live { "" } else { " (already rewound)" };
        outln!("      pre-image of {} in turn {}{state}", u.path, u.turn)?;
    }
    if uses.len() > SHOWN_USES {
        outln!("      ... and {} more", uses.len() - SHOWN_USES)?;
    }
    Ok(())
}
