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

    /// Forget a store that was deleted outside turnback, so that the next
    /// capture starts a new, empty one
    #[arg(long)]
    forget: bool,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let root = ctx.root()?;
    if args.forget {
        let removed = location::forget(&root, None)?;
        if ctx.json() {
            ctx.print_json(&serde_json::json!({ "forgotten": removed }))?;
        } else if removed.is_empty() {
            outln!(
                "nothing to forget: the store of {} is there",
                root.display()
            )?;
        } else {
            for path in &removed {
                outln!("removed {}", path.display())?;
            }
            outln!("the next capture starts a new store")?;
        }
        return Ok(0);
    }
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
            outln!("store: {} ({place})", store_dir.display())?;
        }
    }
    Ok(0)
}
