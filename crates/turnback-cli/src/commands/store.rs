//! `turnback store`: where the project's store lives, and moving it.

use turnback::location::{self, Kind, Location};

use crate::{Ctx, Outcome};

/// Show where this project's store is kept, or move it
///
/// By default the store lives in your data directory (TURNBACK_DATA_DIR, else
/// $XDG_DATA_HOME/turnback, ~/Library/Application Support/turnback or
/// %LOCALAPPDATA%\turnback), out of reach of `git clean -fdx` or `rm -rf`
/// run in the project; the project holds only the small marker .turnback/.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Keep the store inside the project, in .turnback/ (for machines whose
    /// home directory is thrown away, such as dev containers). A command run
    /// in the project can then delete it, and every turn with it
    #[arg(long, conflicts_with_all = ["data_dir", "forget"])]
    in_project: bool,

    /// Keep the store in the data directory (the default)
    #[arg(long, conflicts_with = "forget")]
    data_dir: bool,

    /// Forget the project at ROOT (default: this project): its marker and
    /// its registration go, so the next capture there starts a new, empty
    /// store. The store's files are kept (the command says where); delete
    /// them by hand to free the room
    #[arg(long, value_name = "ROOT", num_args = 0..=1, conflicts_with = "list")]
    forget: Option<Option<std::path::PathBuf>>,

    /// List every project this data directory holds a store for, with the
    /// store's size and turn count
    #[arg(long, conflicts_with_all = ["in_project", "data_dir"])]
    list: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    if args.list {
        return list(ctx);
    }
    if let Some(given) = args.forget {
        // A folder named here is taken as it is: the home folder, which no
        // search adopts, is exactly what one may need to forget.
        let root = match given {
            Some(r) => r,
            None => ctx.root()?,
        };
        let (removed, kept) = location::forget_project(&root, None)?;
        if ctx.json() {
            ctx.print_json(
                &serde_json::json!({ "root": root, "forgotten": removed, "store_kept": kept }),
            )?;
        } else if removed.is_empty() {
            outln!(
                "nothing to forget: {} has no marker or registration",
                root.display()
            )?;
        } else {
            for path in &removed {
                outln!("removed {}", path.display())?;
            }
            if let Some(kept) = kept {
                outln!(
                    "the store's files are still in {}; delete that folder to free its room",
                    kept.display()
                )?;
            }
            outln!("the next capture in {} starts a new store", root.display())?;
        }
        return Ok(0);
    }
    let root = ctx.root()?;
    let found = if args.in_project || args.data_dir {
        Some(location::move_store(&root, None, args.in_project)?)
    } else {
        location::locate(&root, None)?
    };
    if ctx.json() {
        ctx.print_json(&serde_json::json!({
            "root": root,
            "store": found.as_ref().map(|l| &l.store_dir),
            "in_project": found.as_ref().map(|l| l.kind == Kind::InProject),
            "notes": found.as_ref().map(|l| &l.notes),
        }))?;
        return Ok(0);
    }
    match found {
        None if std::env::var_os(location::STORE_ENV).is_some_and(|v| v == "project") => outln!(
            "{} has no store yet; the first capture creates one in {} ({}=project)",
            root.display(),
            root.join(turnback::path::STORE_DIR).display(),
            location::STORE_ENV
        )?,
        None => outln!(
            "{} has no store yet; the first capture creates one in {}",
            root.display(),
            location::data_dir()?.join("stores").display()
        )?,
        Some(Location {
            store_dir,
            kind,
            notes,
        }) => {
            for note in notes {
                outln!("{note}")?;
            }
            let place = match kind {
                Kind::InProject => "inside the project (a command run there can delete it)",
                Kind::DataDir(_) => "in the data directory",
            };
            outln!("project: {}", root.display())?;
            outln!("store: {} ({place})", store_dir.display())?;
        }
    }
    Ok(0)
}

/// `turnback store --list`: every registered project, its store's size and
/// turn count.
fn list(ctx: &Ctx) -> Outcome {
    let projects = location::registered_projects(None)?;
    let mut rows = Vec::new();
    for p in &projects {
        // Opening a store whose folder is gone would find nothing; one
        // that cannot be opened is listed with the reason.
        let turns = if p.root_exists && p.store_exists {
            turnback::Store::open(&p.root)
                .and_then(|s| s.turns().map(|t| t.len()))
                .map_err(|e| e.to_string())
        } else {
            Err(String::from(if p.store_exists {
                "the project folder is gone"
            } else {
                "the store is gone"
            }))
        };
        rows.push((p, turns));
    }
    if ctx.json() {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(p, turns)| {
                serde_json::json!({
                    "root": p.root,
                    "store": p.store_dir,
                    "bytes": p.bytes,
                    "turns": turns.as_ref().ok(),
                    "problem": turns.as_ref().err(),
                })
            })
            .collect();
        ctx.print_json(&v)?;
        return Ok(0);
    }
    if rows.is_empty() {
        outln!(
            "no project has a store in {}",
            location::data_dir()?.display()
        )?;
        return Ok(0);
    }
    for (p, turns) in &rows {
        let what = match turns {
            Ok(n) => format!("{n} turn(s)"),
            Err(why) => why.clone(),
        };
        outln!(
            "{}  {}  {what}  ({})",
            p.root.display(),
            crate::size::human(p.bytes),
            p.store_dir.display()
        )?;
    }
    Ok(0)
}
