use turnback::{Options, Status};

use crate::{Ctx, Outcome};

/// Show what changed on disk since the last snapshot, grouped as modified,
/// created, deleted, renamed and not covered (paths no snapshot protects)
#[derive(clap::Args, Debug)]
pub struct Args {
    /// List every path that is not covered, not just the first 50
    #[arg(long)]
    all: bool,
}

const SHOWN: usize = 50;

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let store = ctx.open(Options::default())?;
    let bar = crate::progress::Bar::new();
    let status = store.status(&bar)?;
    if ctx.json() {
        ctx.print_json(&status)?;
        return Ok(0);
    }
    for line in describe(&status, args.all) {
        outln!("{line}")?;
    }
    Ok(0)
}

fn describe(s: &Status, all: bool) -> Vec<String> {
    let mut out = Vec::new();
    for w in &s.warnings {
        out.push(format!("warning: {w}"));
    }
    match &s.snapshot {
        None => out.push(format!(
            "no snapshot taken yet in {}: nothing below is protected until `turnback snapshot --turn T` (or `turnback exec`) runs",
            s.root.display()
        )),
        Some(b) => out.push(format!(
            "since the {} snapshot of turn {} ({} UTC):",
            if b.pending { "before" } else { "after" },
            b.turn,
            super::list::format_time(b.at_ns.max(0) as u64)
        )),
    }
    let c = &s.changes;
    let captured = |p: &str| {
        s.captured
            .iter()
            .find(|x| x.path == p)
            .map(|x| format!("  (captured in turn {})", x.turn))
            .unwrap_or_default()
    };
    let group = |out: &mut Vec<String>, title: &str, items: &[String]| {
        if !items.is_empty() {
            out.push(format!("{title} ({}):", items.len()));
            for p in items {
                out.push(format!("  {p}{}", captured(p)));
            }
        }
    };
    group(&mut out, "modified", &c.modified);
    group(&mut out, "created", &c.created);
    group(&mut out, "deleted", &c.deleted);
    if !c.renamed.is_empty() {
        out.push(format!("renamed ({}):", c.renamed.len()));
        for r in &c.renamed {
            out.push(format!("  {} -> {}", r.from, r.to));
        }
    }
    if !c.not_captured.is_empty() {
        out.push(format!(
            "changed but not covered ({}): a rewind cannot undo these",
            c.not_captured.len()
        ));
        for n in &c.not_captured {
            out.push(format!(
                "  {} ({}): {}",
                n.path,
                n.change.as_str(),
                n.reason
            ));
        }
    }
    if c.is_empty() && s.snapshot.is_some() {
        out.push("  nothing changed".into());
    }
    if !s.not_covered.is_empty() {
        out.push(format!(
            "not covered ({}): no snapshot saves these (see .turnbackignore)",
            s.not_covered.len()
        ));
        let n = if all { usize::MAX } else { SHOWN };
        for x in s.not_covered.iter().take(n) {
            out.push(format!("  {}: {}", x.path, x.reason));
        }
        if s.not_covered.len() > n {
            out.push(format!(
                "  ... and {} more (--all lists them)",
                s.not_covered.len() - n
            ));
        }
    }
    out.push(format!(
        "{} files ({}) covered",
        s.files,
        crate::size::human(s.bytes)
    ));
    if let Some(source) = &s.change_source {
        out.push(format!(
            "the last snapshot found its changes by {}",
            source.describe()
        ));
    }
    out
}
