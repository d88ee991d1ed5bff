//! `cargo xtask`: the project's build tasks that are not `cargo build`.
//!
//! `cargo xtask dist` builds the `turnback` binary for each release target
//! and writes everything a release publishes into `target/dist/`
//! (docs/RELEASING.md lists it and says how a release is cut).

mod archive;
mod dist;
mod homebrew;
mod npm;
mod winget;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "cargo xtask", about = "The project's build tasks")]
enum Task {
    Dist(dist::Args),
}

fn main() -> std::process::ExitCode {
    let result = match Task::parse() {
        Task::Dist(args) => dist::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
