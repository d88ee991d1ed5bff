use std::path::{Path, PathBuf};

use serde::Serialize;
use similar::TextDiff;
use turnback::{CaptureReport, Store, TurnId};

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Capture PATH, then replace exact text in it (an agent's edit tool): each
/// --old must occur exactly once, in the text the edits before it left
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// Text to replace (repeat with --new for several edits, applied in order)
    #[arg(long = "old", value_name = "TEXT", required = true)]
    old: Vec<String>,

    /// Text to put in its place (one per --old)
    #[arg(long = "new", value_name = "TEXT", required = true)]
    new: Vec<String>,

    /// Print the diff and write nothing
    #[arg(long)]
    dry_run: bool,

    /// The file to edit (relative to the current directory, or absolute)
    path: PathBuf,
}

#[derive(Serialize)]
struct Edited {
    path: String,
    dry_run: bool,
    diff: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    capture: Option<CaptureReport>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    if args.old.len() != args.new.len() {
        anyhow::bail!(
            "give one --new for each --old ({} --old, {} --new)",
            args.old.len(),
            args.new.len()
        );
    }
    let turn = TurnId::new(&args.opts.turn)?;
    let mut store = ctx.open(args.opts.options())?;
    let path = std::path::absolute(&args.path)?;
    let (rel, old) = read_text(&store, &path).map_err(anyhow::Error::msg)?;
    let edits = args
        .old
        .iter()
        .map(String::as_str)
        .zip(args.new.iter().map(String::as_str));
    let new = apply_edits(&old, edits)
        .map_err(|e| anyhow::anyhow!("{}: {e}; nothing was written", path.display()))?;
    let diff = unified(&rel, &old, &new);
    let capture = if args.dry_run {
        None
    } else {
        Some(store.write(&turn, args.opts.label.as_deref(), &path, new.as_bytes())?)
    };
    if ctx.json() {
        ctx.print_json(&Edited {
            path: rel,
            dry_run: args.dry_run,
            diff,
            capture,
        })?;
    } else {
        if let Some(report) = &capture {
            super::print_capture(report)?;
        } else {
            outln!("dry run: nothing written")?;
        }
        out!("{diff}")?;
    }
    Ok(0)
}

/// Applies exact-text edits `(old, new)`, each to the result of those
/// before; each `old` must occur exactly once.
pub fn apply_edits<'a>(
    original: &str,
    edits: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<String, String> {
    let mut out = original.to_owned();
    for (i, (old, new)) in edits.into_iter().enumerate() {
        let n = i + 1;
        if old.is_empty() {
            return Err(format!("edit {n}: the text to replace is empty"));
        }
        match out.matches(old).count() {
            0 => {
                return Err(format!(
                    "edit {n}: the text to replace was not found in the file"
                ));
            }
            1 => out = out.replacen(old, new, 1),
            k => {
                return Err(format!(
                    "edit {n}: the text to replace occurs {k} times; include more surrounding text so it occurs once"
                ));
            }
        }
    }
    Ok(out)
}

/// A unified diff of `a` to `b` with `a/PATH`, `b/PATH` headers.
pub fn unified(path: &str, a: &str, b: &str) -> String {
    TextDiff::from_lines(a, b)
        .unified_diff()
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// Reads the text file `path` of the project (a symlink inside it is
/// followed): its stored path and contents.
pub fn read_text(store: &Store, path: impl AsRef<Path>) -> Result<(String, String), String> {
    let rel = store
        .resolve(path.as_ref(), true)
        .map_err(|e| e.to_string())?;
    let full = store.root().join(rel.as_path());
    let meta = std::fs::symlink_metadata(&full)
        .map_err(|e| format!("cannot read {}: {e}", full.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", full.display()));
    }
    let bytes = std::fs::read(&full).map_err(|e| format!("cannot read {}: {e}", full.display()))?;
    let s = String::from_utf8(bytes).map_err(|_| {
        format!(
            "{} is not UTF-8 text; only text can be edited",
            full.display()
        )
    })?;
    Ok((rel.to_string(), s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_apply_in_order_and_must_match_exactly_once() {
        let out = apply_edits("a b c\n", [("a", "x"), ("x b", "y")]);
        assert_eq!(out.as_deref(), Ok("y c\n"));
        assert!(apply_edits("a a", [("a", "b")]).is_err_and(|e| e.contains("2 times")));
        assert!(apply_edits("abc", [("z", "b")]).is_err_and(|e| e.contains("not found")));
        assert!(apply_edits("abc", [("", "b")]).is_err());
    }
}
