use std::fmt::Write as _;

use serde::Serialize;
use turnback::{Options, Turn, TurnId};

use super::describe_pre;
use crate::changes::{self, FileChange};
use crate::out::{Buffer, paint, style};
use crate::when::{self, Clock};
use crate::{Ctx, Outcome};

/// Show a turn: the paths it captured with their pre-images, or with
/// --stat and --patch what it changed
///
/// --stat and --patch show what the turn itself did: each file from its
/// pre-image to what the turn left (its post-image; for a turn never
/// sealed, what the next turn found, or the file now when no later turn
/// touched it), not what happened after it (`turnback diff` compares with
/// the folder now). On a terminal they are colored and go through $PAGER
/// (else less -FRX).
///
/// With no TURN on a terminal, a picker lists the turns, newest first, with
/// what each changed; the one picked is shown.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn: its id, a unique prefix of it, @ (the newest turn) or @~N
    /// (N turns before it) [default: pick one on a terminal]
    turn: Option<String>,

    /// Per file, the number of lines inserted and deleted, then a summary
    /// (like git show --stat)
    #[arg(long)]
    stat: bool,

    /// Each file's unified diff (created files from /dev/null, deleted
    /// ones to it; binary and large files named with their sizes)
    #[arg(long, short = 'p')]
    patch: bool,
}

/// `show --stat`/`--patch` as JSON.
#[derive(Serialize)]
struct Shown<'a> {
    turn: &'a TurnId,
    label: Option<&'a str>,
    started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    commands: Vec<&'a str>,
    file_count: usize,
    insertion_count: usize,
    deletion_count: usize,
    files: Vec<FileChange>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let reference = match &args.turn {
        Some(reference) => reference.clone(),
        None => match super::rewind::pick_turn(ctx, "show")? {
            super::rewind::Picked::Turn(turn) => turn.as_str().to_owned(),
            super::rewind::Picked::Done(code) => return Ok(code),
        },
    };
    let store = ctx.open(Options::default())?;
    let turn = ctx.turn(&store, &reference)?;
    let t = store.turn(&turn)?;
    if !args.stat && !args.patch {
        return show_captures(ctx, t);
    }
    let files = changes::of_turn(&store, t, args.patch)?;
    let notes = super::log::commands_noted(&store);
    let commands: Vec<&str> = turnback::command_notes::by_turn(&notes, &[t])
        .remove(&t.first_seq)
        .unwrap_or_default();
    let agent = super::hook::agent_of_turn(t.id.as_str());
    if ctx.json() {
        ctx.print_json(&Shown {
            turn: &t.id,
            label: t.label.as_deref(),
            started_at: when::rfc3339(t.started_at),
            agent: agent.map(|(d, _)| d.name),
            session: agent.map(|(_, s)| s),
            commands,
            file_count: files.len(),
            insertion_count: files.iter().map(|f| f.insertions).sum(),
            deletion_count: files.iter().map(|f| f.deletions).sum(),
            files,
        })?;
        return Ok(0);
    }
    let _pager = ctx.pager();
    let clock = Clock::local();
    let mut out = Buffer::default();
    let _ = write!(out, "turn {}", paint(style::ID_PREFIX, &t.id));
    if let Some(label) = &t.label {
        let _ = write!(out, "  {label}");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Date:   {}",
        paint(
            style::TIME,
            format_args!(
                "{} ({})",
                clock.local_time(t.started_at),
                clock.ago(t.started_at)
            )
        )
    );
    if let Some((d, session)) = agent {
        let _ = writeln!(
            out,
            "Agent:  {}",
            paint(style::AGENT, format_args!("{}, session {session}", d.agent))
        );
    }
    for (i, c) in commands.iter().enumerate() {
        let head = if i == 0 { "Ran:" } else { "" };
        let _ = writeln!(
            out,
            "{head:<8}{}",
            paint(style::COMMAND, format_args!("$ {c}"))
        );
    }
    let _ = writeln!(out);
    if files.is_empty() {
        let _ = writeln!(out, "The turn changed no file (as far as the store knows).");
    }
    if args.stat && !files.is_empty() {
        changes::write_stat(&mut out, &files)?;
        if args.patch {
            let _ = writeln!(out);
        }
    }
    if args.patch {
        changes::write_patch(&mut out, &files)?;
    }
    out.flush()?;
    Ok(0)
}

/// `show T`: each captured path with its pre-image.
fn show_captures(ctx: &Ctx, t: &Turn) -> Outcome {
    if ctx.json() {
        ctx.print_json(t)?;
        return Ok(0);
    }
    outln!("turn {}  {}", t.id, t.label.as_deref().unwrap_or(""))?;
    for c in &t.files {
        outln!(
            "  {:<48} {}{}",
            c.entry.path.to_string(),
            describe_pre(&c.entry.pre),
            shared_note(&c.shared_with)
        )?;
    }
    Ok(0)
}

/// `; also in turns X, Y (...)` for a change recorded in several turns.
pub fn shared_note(shared_with: &[TurnId]) -> String {
    if shared_with.is_empty() {
        return String::new();
    }
    let others: Vec<&str> = shared_with.iter().map(|t| t.as_str()).collect();
    format!(
        "; SHARED with turn(s) {}: their commands ran at the same time, any may have made this change",
        others.join(", ")
    )
}
