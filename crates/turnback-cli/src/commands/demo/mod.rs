//! `turnback demo`: the small-site story, built for real in a temporary
//! folder, then undone five ways, each from an identical copy of the folder
//! as the agent left it; each result is compared byte for byte (and mode)
//! with the folder just before the turn.

mod git;
mod methods;
mod scenario;
mod tree;

use anyhow::{Context, Result};
use serde::Serialize;

use self::git::Git;
use self::methods::Method;
use self::scenario::{Built, NOT_COMPARED};
use self::tree::{Difference, Known, Snapshot};
use crate::{Ctx, Outcome};

/// Show, in a temporary folder, how turnback and git's undo commands compare
///
/// Builds a git repository holding a small site, adds the user's uncommitted
/// work (an edited page title, an untracked notes.md, a git-ignored .env),
/// then an agent's turn recorded by turnback. Each undo method starts from
/// its own copy of that folder; the table says whether it got the folder
/// back exactly as it was before the turn, and which files differ.
/// Exit code 0 when only turnback does; 1 otherwise. Needs `git` on PATH.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Keep the temporary folder (one copy per method) and print where it is
    #[arg(long)]
    keep: bool,
}

/// Where the demo keeps its stores: a data directory of its own.
pub struct Stores {
    data_dir: std::path::PathBuf,
}

impl Stores {
    fn in_dir(data_dir: std::path::PathBuf) -> Stores {
        Stores { data_dir }
    }

    /// The store of the project at `root`.
    pub fn open(&self, root: &std::path::Path) -> turnback::Result<turnback::Store> {
        turnback::Store::open_with(
            root,
            turnback::Options {
                data_dir: Some(self.data_dir.clone()),
                ..turnback::Options::default()
            },
        )
    }
}

/// One undo method's result.
#[derive(Serialize)]
struct Row {
    method: &'static str,
    commands: Vec<String>,
    /// Whether the folder is exactly as it was before the turn.
    matches: bool,
    /// Whether the story says it should be.
    expected_match: bool,
    differences: Vec<Difference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let tmp = tempfile::Builder::new()
        .prefix("turnback-demo-")
        .tempdir()
        .context("cannot create a temporary folder for the demo")?;
    let base = tmp.path().to_path_buf();
    let home = base.join("empty-home");
    std::fs::create_dir(&home).with_context(|| format!("cannot create {}", home.display()))?;
    let version = git::version(&home)?;
    let git = Git::new(&base.join("site"), &home);

    // The demo's stores live in its own folder, never in the user's data
    // directory: its projects are deleted when it ends.
    let stores = Stores::in_dir(base.join("turnback-data"));
    let built = scenario::build(&base.join("site"), &git, &stores)?;
    let rows = undo_all(&built, &base, &git, &stores)?;

    let surprises: Vec<String> = rows.iter().filter_map(surprise).collect();
    if ctx.json() {
        ctx.print_json(&rows)?;
    } else {
        print_table(&built, &rows, &version)?;
    }
    if args.keep {
        let kept = tmp.keep();
        errln!(
            "turnback: the demo's folders are kept in {}",
            kept.display()
        );
    }
    if surprises.is_empty() {
        return Ok(0);
    }
    for s in &surprises {
        errln!("turnback: demo surprise: {s}");
    }
    Ok(1)
}

fn undo_all(built: &Built, base: &std::path::Path, git: &Git, stores: &Stores) -> Result<Vec<Row>> {
    let known = [
        Known {
            name: "as the agent left it",
            snapshot: &built.after,
        },
        Known {
            name: "as last committed",
            snapshot: &built.committed,
        },
    ];
    let mut rows = Vec::new();
    for method in Method::ALL {
        let dir = base.join(method.folder());
        tree::copy_verified(&built.site, &dir)?;
        let note = method
            .apply(&dir, git, &built.stash, stores)
            .with_context(|| format!("the demo's `{}` step failed", method.name()))?;
        let result = Snapshot::take(&dir, NOT_COMPARED)?;
        let differences = tree::compare(&built.before, &result, &known);
        rows.push(Row {
            method: method.name(),
            commands: method.commands(&built.stash),
            matches: differences.is_empty(),
            expected_match: method.expected_match(),
            differences,
            note,
        });
    }
    Ok(rows)
}

fn surprise(row: &Row) -> Option<String> {
    match (row.expected_match, row.matches) {
        (true, false) => Some(format!(
            "`{}` did not return the folder to its state before the turn ({})",
            row.method,
            summary(&row.differences)
        )),
        (false, true) => Some(format!(
            "`{}` returned the folder exactly to its state before the turn, which the demo's \
             story says it cannot do",
            row.method
        )),
        _ => None,
    }
}

fn summary(diffs: &[Difference]) -> String {
    diffs
        .iter()
        .map(|d| format!("{} {}", d.path, d.how.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_table(built: &Built, rows: &[Row], git_version: &str) -> std::io::Result<()> {
    let lines = |s: &Snapshot| scenario::line_count(s, "styles.css");
    outln!("turnback demo: undoing an AI agent's turn in a small site (git {git_version})")?;
    outln!()?;
    outln!("  before the turn  a git repository; since the last commit the user changed the")?;
    outln!("                   page title in index.html and began an untracked notes.md;")?;
    outln!("                   .env is git-ignored")?;
    outln!(
        "  the agent's turn rewrites styles.css ({} -> {} lines) and app.js, makes index.html",
        lines(&built.before),
        lines(&built.after)
    )?;
    outln!("                   load a new theme.css, points API_URL in .env at localhost")?;
    outln!()?;
    outln!("Each method starts from its own copy of the folder as the agent left it.")?;
    outln!("Does the folder match its state before the turn, byte for byte?")?;
    outln!()?;
    let width = rows.iter().map(|r| r.method.len()).max().unwrap_or(0) + 2;
    let name_width = rows
        .iter()
        .flat_map(|r| &r.differences)
        .map(|d| d.path.len())
        .max()
        .unwrap_or(0)
        + 2;
    outln!("{:<width$}{:<9}DIFFERENCES", "METHOD", "MATCHES")?;
    for r in rows {
        let verdict = if r.matches { "yes" } else { "no" };
        if r.differences.is_empty() {
            outln!("{:<width$}{verdict:<9}none", r.method)?;
        }
        for (i, d) in r.differences.iter().enumerate() {
            let (method, verdict) = if i == 0 {
                (r.method, verdict)
            } else {
                ("", "")
            };
            let detail = d
                .detail
                .as_deref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            outln!(
                "{method:<width$}{verdict:<9}{:<name_width$}{}{detail}",
                d.path,
                d.how.as_str()
            )?;
        }
    }
    outln!()?;
    let matching: Vec<&str> = rows
        .iter()
        .filter(|r| r.matches)
        .map(|r| r.method)
        .collect();
    match matching.as_slice() {
        [] => outln!("No method put the folder back as it was before the turn.")?,
        [only] => outln!("Only `{only}` put the folder back as it was before the turn.")?,
        many => outln!(
            "These put the folder back as it was before the turn: {}.",
            many.join(", ")
        )?,
    }
    outln!()?;
    outln!("How each was run:")?;
    for r in rows {
        let note = r
            .note
            .as_deref()
            .map(|n| format!("  ({n})"))
            .unwrap_or_default();
        outln!("  {:<width$}{}{note}", r.method, r.commands.join(", then "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::demo::tree::How;

    fn row(method: &'static str, expected_match: bool, differences: Vec<Difference>) -> Row {
        Row {
            method,
            commands: vec![method.to_owned()],
            matches: differences.is_empty(),
            expected_match,
            differences,
            note: None,
        }
    }

    #[test]
    fn a_surprise_is_named_either_way() {
        let missing = || Difference {
            path: "notes.md".into(),
            how: How::Missing,
            detail: None,
        };
        assert_eq!(surprise(&row("turnback rewind", true, vec![])), None);
        assert_eq!(surprise(&row("git stash -u", false, vec![missing()])), None);
        let s = surprise(&row("turnback rewind", true, vec![missing()]));
        assert!(
            s.as_deref()
                .is_some_and(|s| s.contains("turnback rewind") && s.contains("notes.md missing")),
            "{s:?}"
        );
        let s = surprise(&row("git stash -u", false, vec![]));
        assert!(
            s.as_deref()
                .is_some_and(|s| s.contains("git stash -u") && s.contains("cannot")),
            "{s:?}"
        );
    }
}
