use turnback::{Options, TurnId};

use super::describe_pre;
use crate::{Ctx, Outcome};

/// Show the paths a turn captured, with their pre-image kind and size
///
/// With no TURN on a terminal, a picker lists the turns, newest first, with
/// what each changed; the one picked is shown.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn [default: pick one on a terminal]
    turn: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = match &args.turn {
        Some(turn) => TurnId::new(turn)?,
        None => match super::rewind::pick_turn(ctx, "show")? {
            super::rewind::Picked::Turn(turn) => turn,
            super::rewind::Picked::Done(code) => return Ok(code),
        },
    };
    let store = ctx.open(Options::default())?;
    let t = store.turn(&turn)?;
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
