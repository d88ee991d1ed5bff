use crate::{Ctx, Outcome};

/// Show, in a temporary folder, how turnback and git's undo methods compare
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_ctx: &Ctx, _args: Args) -> Outcome {
    anyhow::bail!("the demo is not built yet")
}
