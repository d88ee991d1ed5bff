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
                &serde_json::json!({ "root": root, "removed": removed, "kept_store_dir": kept }),
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
    // Where the store is is said even when it cannot be read (deleted by
    // hand, damaged): the reason takes the place of the summary.
    let (summary, problem) = match found.as_ref().map(|l| Summary::of(ctx, &l.store_dir)) {
        Some(Ok(s)) => (Some(s), None),
        Some(Err(e)) => (None, Some(crate::message(&e))),
        None => (None, None),
    };
    if ctx.json() {
        let s = summary.as_ref();
        ctx.print_json(&serde_json::json!({
            "root": root,
            "store_dir": found.as_ref().map(|l| &l.store_dir),
            "in_project": found.as_ref().map(|l| l.kind == Kind::InProject),
            "notes": found.as_ref().map(|l| &l.notes),
            "bytes": s.map(|s| s.bytes),
            "turn_count": s.map(|s| s.turns.len()),
            "oldest_turn": s.and_then(|s| s.turns.first()),
            "newest_turn": s.and_then(|s| s.turns.last()),
            "config": s.map(|s| serde_json::json!({
                "retention": {
                    "keep_turns": s.config.retention.keep_turns,
                    "keep_days": s.config.retention.keep_days,
                    "max_size": s.config.retention.max_size,
                },
                "gc": { "auto_every_captures": s.config.gc.auto_every_captures },
            })),
            "problem": problem,
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
            if let Some(s) = &summary {
                for line in s.describe(&store_dir) {
                    outln!("{line}")?;
                }
            }
            if let Some(why) = &problem {
                outln!("cannot read the store: {why}")?;
            }
        }
    }
    Ok(0)
}

/// What `turnback store` says of a store beyond where it is: its size, its
/// turns and its limits.
struct Summary {
    /// The bytes of every file in the store's directory.
    bytes: u64,
    /// The live turns, oldest first.
    turns: Vec<TurnRow>,
    config: turnback::Config,
}

/// A turn as `store --json` names its oldest and newest.
#[derive(serde::Serialize)]
struct TurnRow {
    turn: String,
    label: Option<String>,
    started_at: String,
    #[serde(skip)]
    started_at_ns: u64,
}

impl Summary {
    fn of(ctx: &Ctx, store_dir: &std::path::Path) -> anyhow::Result<Summary> {
        let store = ctx.open(turnback::Options::default())?;
        let turns = store
            .turns()?
            .iter()
            .map(|t| TurnRow {
                turn: t.id.to_string(),
                label: t.label.clone(),
                started_at: turnback::time::rfc3339(i128::from(t.started_at)),
                started_at_ns: t.started_at,
            })
            .collect();
        Ok(Summary {
            bytes: dir_bytes(store_dir)?,
            turns,
            config: store.config()?,
        })
    }

    fn describe(&self, store_dir: &std::path::Path) -> Vec<String> {
        let mut out = vec![format!("size: {}", crate::size::human(self.bytes))];
        let when = |t: &TurnRow| {
            format!(
                "{} ({} UTC{})",
                t.turn,
                super::list::format_time(t.started_at_ns),
                t.label
                    .as_deref()
                    .map(|l| format!(", {l}"))
                    .unwrap_or_default()
            )
        };
        out.push(match (self.turns.first(), self.turns.last()) {
            (Some(first), Some(last)) if self.turns.len() > 1 => format!(
                "turns: {}, oldest {}, newest {}",
                self.turns.len(),
                when(first),
                when(last)
            ),
            (Some(only), _) => format!("turns: 1, {}", when(only)),
            _ => "turns: none to rewind".to_owned(),
        });
        let r = &self.config.retention;
        let auto = match self.config.gc.auto_every_captures {
            0 => "automatic gc off".to_owned(),
            n => format!("checked after every {n} captures and each rewind"),
        };
        out.push(format!(
            "limits: keep_turns {}, keep_days {}, max_size {} ({auto}; {})",
            r.keep_turns,
            r.keep_days,
            crate::size::human(r.max_size),
            store_dir.join("config.toml").display()
        ));
        out
    }
}

/// The bytes of the files under `dir` (symlinks not followed).
fn dir_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    let mut total = 0;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot list {}", dir.display())));
        }
    };
    for e in entries {
        let e =
            e.map_err(|e| anyhow::Error::new(e).context(format!("cannot list {}", dir.display())))?;
        let meta = match e.metadata() {
            Ok(m) => m,
            // Removed meanwhile (a temporary file).
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => {
                return Err(anyhow::Error::new(err)
                    .context(format!("cannot look at {}", e.path().display())));
            }
        };
        if meta.is_dir() {
            total += dir_bytes(&e.path())?;
        } else {
            total += meta.len();
        }
    }
    Ok(total)
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
                    "store_dir": p.store_dir,
                    "bytes": p.bytes,
                    "turn_count": turns.as_ref().ok(),
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
