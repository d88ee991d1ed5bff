use turnback::Options;

use crate::{Ctx, Outcome};

/// Record the post-images of a turn (what the agent left) so a later rewind
/// can tell your edits from the agent's; done implicitly when the next turn
/// begins
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The turn: its id, a unique prefix of it, @ (the newest turn) or @~N (N turns before it)
    turn: String,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let mut store = ctx.open(Options::default())?;
    let turn = ctx.turn(&store, &args.turn)?;
    let n = store.seal(&turn)?;
    if ctx.json() {
        ctx.print_json(&serde_json::json!({ "turn": turn, "sealed_path_count": n }))?;
    } else {
        outln!("sealed turn {turn}: {n} post-image(s) recorded")?;
    }
    Ok(0)
}
