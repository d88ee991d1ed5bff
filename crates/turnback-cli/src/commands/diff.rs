use std::io::Read;

use serde::Serialize;
use similar::TextDiff;
use turnback::{Options, Pre, Store, TurnId};

use crate::{Ctx, Outcome};

/// Show what changed since a turn began: each captured file's pre-image
/// against its current contents (binary files summarised)
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn: its id, a unique prefix of it, @ (the newest turn) or @~N (N turns before it)
    turn: String,
}

/// Larger files are summarised, not diffed.
const DIFF_LIMIT: u64 = 8 << 20;

/// One captured file against its current contents.
#[derive(Serialize)]
pub struct FileDiff {
    /// The path, relative to the root.
    pub path: String,
    /// "unchanged", "modified", "created", "deleted", "binary", "not_saved",
    /// "name_not_allowed" (a name this platform's file system cannot hold,
    /// from a store made on another: not looked at)
    pub change: &'static str,
    /// The unified diff, or a one-line summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

enum Side {
    Missing,
    Bytes(Vec<u8>),
    Link(String),
    TooLarge(u64),
}

fn current(store: &Store, rel: &std::path::Path) -> anyhow::Result<Side> {
    let p = store.root().join(rel);
    let meta = match std::fs::symlink_metadata(&p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Side::Missing),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot look at {}", p.display())));
        }
    };
    if meta.file_type().is_symlink() {
        return Ok(Side::Link(
            std::fs::read_link(&p)?.to_string_lossy().into_owned(),
        ));
    }
    if !meta.is_file() {
        return Ok(Side::Missing);
    }
    if meta.len() > DIFF_LIMIT {
        return Ok(Side::TooLarge(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&p)?.read_to_end(&mut bytes)?;
    Ok(Side::Bytes(bytes))
}

fn text(b: &[u8]) -> Option<&str> {
    if b.contains(&0) {
        return None;
    }
    std::str::from_utf8(b).ok()
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let store = ctx.open(Options::default())?;
    let turn = ctx.turn(&store, &args.turn)?;
    let out = diffs(&store, &turn)?;
    if ctx.json() {
        ctx.print_json(&out)?;
        return Ok(0);
    }
    for d in &out {
        match &d.diff {
            Some(text) => out!("{text}")?,
            None if d.change == "unchanged" => {}
            None => outln!("{}: {}", d.path, d.change.replace('_', " "))?,
        }
    }
    Ok(0)
}

/// Each file `turn` captured, its pre-image against its current contents.
pub fn diffs(store: &Store, turn: &TurnId) -> anyhow::Result<Vec<FileDiff>> {
    let t = store.turn(turn)?;
    let mut out = Vec::new();
    for c in &t.files {
        let path = c.entry.path.to_string();
        let path = path.as_str();
        if let Some(problem) = c.entry.path.problem_here() {
            out.push(FileDiff {
                path: path.to_owned(),
                change: "name_not_allowed",
                diff: Some(format!("{path}: not compared: {problem}\n")),
            });
            continue;
        }
        let before = match &c.entry.pre {
            Pre::File { blob, size, .. } if *size <= DIFF_LIMIT => {
                Side::Bytes(store.read_blob(blob)?)
            }
            Pre::File { size, .. } => Side::TooLarge(*size),
            Pre::Symlink { target } => Side::Link(target.clone()),
            Pre::Absent | Pre::Dir { .. } | Pre::Fifo { .. } => Side::Missing,
            // Only `saved` records keep files aside, never a turn.
            Pre::Skipped { .. } | Pre::Aside { .. } => {
                out.push(FileDiff {
                    path: path.to_owned(),
                    change: "not_saved",
                    diff: None,
                });
                continue;
            }
        };
        let after = current(store, c.entry.path.as_path())?;
        let empty = Vec::new();
        let (change, diff) = match (&before, &after) {
            (Side::Missing, Side::Missing) => ("unchanged", None),
            (Side::Bytes(a), Side::Bytes(b)) if a == b => ("unchanged", None),
            (Side::Link(a), Side::Link(b)) if a == b => ("unchanged", None),
            (Side::TooLarge(n), _) | (_, Side::TooLarge(n)) => (
                "binary",
                Some(format!(
                    "{path}: too large to diff ({n} bytes), summarised only\n"
                )),
            ),
            (Side::Link(a), _) | (_, Side::Link(a)) => ("modified", Some(format!("symlink {a}\n"))),
            (a, b) => {
                let (ab, bb) = (
                    match a {
                        Side::Bytes(x) => x,
                        _ => &empty,
                    },
                    match b {
                        Side::Bytes(x) => x,
                        _ => &empty,
                    },
                );
                let change = match (a, b) {
                    (Side::Missing, _) => "created",
                    (_, Side::Missing) => "deleted",
                    _ => "modified",
                };
                match (text(ab), text(bb)) {
                    (Some(x), Some(y)) => {
                        let d = TextDiff::from_lines(x, y)
                            .unified_diff()
                            .header(&format!("a/{path}"), &format!("b/{path}"))
                            .to_string();
                        (change, Some(d))
                    }
                    _ => (
                        if change == "modified" {
                            "binary"
                        } else {
                            change
                        },
                        Some(format!(
                            "Binary files a/{path} and b/{path} differ ({} bytes -> {} bytes)\n",
                            ab.len(),
                            bb.len()
                        )),
                    ),
                }
            }
        };
        out.push(FileDiff {
            path: path.to_owned(),
            change,
            diff,
        });
    }
    Ok(out)
}
