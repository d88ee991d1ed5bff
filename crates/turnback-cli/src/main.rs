//! The `turnback` command: a thin layer over the `turnback` library that
//! parses arguments, renders reports (human text, or JSON with `--json`) and
//! maps outcomes to exit codes.

#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod out;

mod commands;
mod picker;
#[allow(unsafe_code)] // The platform layer: each block says why it is sound.
mod platform;
mod progress;
mod size;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for a rewind that could not restore every path.
pub const EXIT_INCOMPLETE: u8 = 3;

/// Exact, crash-safe rewinds of a project folder for AI coding agents.
///
/// Before an agent writes a file, turnback saves the file's current bytes in
/// a store outside the project (`turnback store` says where); `turnback
/// rewind TURN` puts the folder back exactly as it was before that turn.
#[derive(Parser, Debug)]
#[command(name = "turnback", version, propagate_version = true)]
pub struct Cli {
    /// The project root [default: the nearest ancestor of the current
    /// directory that has a .turnback/ marker or a registered store, else the
    /// current directory]
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,

    /// Print machine-readable JSON instead of text
    #[arg(long, global = true)]
    json: bool,

    /// How long to wait for another turnback process to finish with the store
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 30.0)]
    lock_timeout: f64,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Write(commands::write::Args),
    Capture(commands::capture::Args),
    Rewind(commands::rewind::Args),
    Revert(commands::revert::Args),
    Undo(commands::undo::UndoArgs),
    Redo(commands::undo::RedoArgs),
    Seal(commands::seal::Args),
    Gc(commands::gc::Args),
    List(commands::list::Args),
    Show(commands::show::Args),
    Diff(commands::diff::Args),
    Demo(commands::demo::Args),
    Hook(commands::hook::Args),
    Init(commands::init::Args),
    Mcp(commands::mcp::Args),
    Edit(commands::edit::Args),
    Mkdir(commands::mkdir::Args),
    Mv(commands::mv::Args),
    Rm(commands::rm::Args),
    Exec(commands::exec::Args),
    Snapshot(commands::snapshot::Args),
    Status(commands::status::Args),
    Store(commands::store::Args),
    Verify(commands::verify::Args),
    Repair(commands::repair::Args),
    ImportOsfoundry(commands::import_osfoundry::Args),
    #[command(hide = true)]
    Maintain(commands::maintain::Args),
}

/// What a command hands back to `main`: the exit code.
pub type Outcome = anyhow::Result<u8>;

/// Shared context of every command.
pub struct Ctx {
    root: Option<PathBuf>,
    json: bool,
    lock_timeout: std::time::Duration,
}

impl Ctx {
    /// The project root per `--root` and discovery.
    pub fn root(&self) -> anyhow::Result<PathBuf> {
        match &self.root {
            Some(r) => Ok(r.clone()),
            None => {
                let cwd = std::env::current_dir()?;
                Ok(turnback::discover_root(&cwd)?)
            }
        }
    }

    /// Opens the store with the given options; an automatic gc that comes
    /// due is left for the background once the command has answered (see
    /// `commands/maintain.rs`), as are the names a rewind puts in the trash.
    pub fn open(
        &self,
        options: turnback::Options,
    ) -> anyhow::Result<commands::maintain::Maintained> {
        let options = commands::maintain::Maintained::options(options);
        self.open_now(options)
            .map(commands::maintain::Maintained::from)
    }

    /// Opens the store with the given options, automatic gc run by the call
    /// that makes it due (for the background maintenance itself).
    pub fn open_now(&self, options: turnback::Options) -> anyhow::Result<turnback::Store> {
        let options = turnback::Options {
            lock_timeout: self.lock_timeout,
            ..options
        };
        let store = turnback::Store::open_with(self.root()?, options)?;
        for w in store.warnings() {
            errln!("turnback: warning: {w}");
        }
        Ok(store)
    }

    /// Whether `--json` was given.
    pub fn json(&self) -> bool {
        self.json
    }

    /// Prints `value` as one line of JSON.
    pub fn print_json(&self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        // As an `io::Error`, so that `main` tells a closed pipe.
        serde_json::to_writer(&mut out, value).map_err(std::io::Error::from)?;
        writeln!(out)?;
        Ok(())
    }
}

fn main() -> ExitCode {
    platform::return_large_frees();
    let cli = Cli::parse();
    let ctx = Ctx {
        root: cli.root,
        json: cli.json,
        lock_timeout: std::time::Duration::try_from_secs_f64(cli.lock_timeout.max(0.0))
            .unwrap_or(std::time::Duration::from_secs(30)),
    };
    let result = match cli.command {
        Command::Write(a) => commands::write::run(&ctx, a),
        Command::Capture(a) => commands::capture::run(&ctx, a),
        Command::Rewind(a) => commands::rewind::run(&ctx, a),
        Command::Revert(a) => commands::revert::run(&ctx, a),
        Command::Undo(a) => commands::undo::run_undo(&ctx, a),
        Command::Redo(a) => commands::undo::run_redo(&ctx, a),
        Command::Seal(a) => commands::seal::run(&ctx, a),
        Command::Gc(a) => commands::gc::run(&ctx, a),
        Command::List(a) => commands::list::run(&ctx, a),
        Command::Show(a) => commands::show::run(&ctx, a),
        Command::Diff(a) => commands::diff::run(&ctx, a),
        Command::Demo(a) => commands::demo::run(&ctx, a),
        Command::Hook(a) => commands::hook::run(&ctx, a),
        Command::Init(a) => commands::init::run(&ctx, a),
        Command::Mcp(a) => commands::mcp::run(&ctx, a),
        Command::Edit(a) => commands::edit::run(&ctx, a),
        Command::Mkdir(a) => commands::mkdir::run(&ctx, a),
        Command::Mv(a) => commands::mv::run(&ctx, a),
        Command::Rm(a) => commands::rm::run(&ctx, a),
        Command::Exec(a) => commands::exec::run(&ctx, a),
        Command::Snapshot(a) => commands::snapshot::run(&ctx, a),
        Command::Status(a) => commands::status::run(&ctx, a),
        Command::Store(a) => commands::store::run(&ctx, a),
        Command::Verify(a) => commands::verify::run(&ctx, a),
        Command::Repair(a) => commands::repair::run(&ctx, a),
        Command::ImportOsfoundry(a) => commands::import_osfoundry::run(&ctx, a),
        Command::Maintain(a) => commands::maintain::run(&ctx, a),
    };
    // The command has answered (its output is written): the work its store
    // left for later starts in the background.
    commands::maintain::start_noted();
    if let Some(note) = turnback::durability_note() {
        errln!("turnback: note: {note}");
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // The reader closed the pipe (`turnback list | head -1`): exit
            // quietly, as git and ripgrep do.
            if out::is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            if ctx.json {
                let msg = serde_json::json!({ "error": message(&e) });
                // Nowhere to report a failure to print the error.
                let _ = outln!("{msg}");
            }
            errln!("turnback: error: {}", message(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes, each once (the library's messages already
/// include their I/O cause).
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}
