use std::path::PathBuf;

use turnback::Options;

use crate::{Ctx, EXIT_INCOMPLETE, Outcome};

/// Import the turns of an osfoundry store (`.osfoundry/checkpoints/`, the
/// original Python implementation) so they can be rewound with turnback.
///
/// Paths outside the project are refused; blobs are re-hashed, and one that
/// does not match its name is recorded as not saved. Importing again skips
/// the turns already imported. Exit code 0 when everything was imported, 3
/// when some entries or turns were not.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The project holding `.osfoundry/`, or that `.osfoundry/` or its
    /// `checkpoints/` directory [default: the project root]
    dir: Option<PathBuf>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let dir = match args.dir {
        Some(d) => d,
        None => store.root().to_path_buf(),
    };
    let report = store.import_osfoundry(&dir)?;
    let code = if report.complete() {
        0
    } else {
        EXIT_INCOMPLETE
    };
    if ctx.json() {
        ctx.print_json(&report)?;
        return Ok(code);
    }
    outln!("osfoundry store {}:", report.source.display())?;
    for t in &report.imported {
        outln!(
            "  imported turn {:<20} {:>5} file(s), {} new blob(s)  {}",
            t.turn.as_str(),
            t.files,
            t.new_blobs,
            t.label.as_deref().unwrap_or("")
        )?;
    }
    for t in &report.already_imported {
        outln!("  already imported: {t}")?;
    }
    for t in &report.already_rewound {
        outln!("  imported before and since rewound (not brought back): {t}")?;
    }
    for t in &report.empty_turns {
        outln!("  nothing to record for turn {t}")?;
    }
    for t in &report.refused_turns {
        outln!("  REFUSED turn {}: {}", t.turn, t.reason)?;
    }
    for p in &report.refused_paths {
        outln!("  REFUSED {} (turn {}): {}", p.path, p.turn, p.reason)?;
    }
    for n in &report.not_saved {
        outln!(
            "  NOT SAVED {} (turn {}): {}; a rewind reports it as not restored",
            n.path,
            n.turn,
            n.reason
        )?;
    }
    if report.imported.is_empty() && report.complete() {
        outln!("  nothing new to import")?;
    }
    if !report.complete() {
        errln!(
            "turnback: the import is incomplete: {} turn(s) and {} path(s) refused, {} pre-image(s) not saved",
            report.refused_turns.len(),
            report.refused_paths.len(),
            report.not_saved.len()
        );
    }
    Ok(code)
}
