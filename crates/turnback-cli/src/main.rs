//! The `turnback` command: a thin layer over the `turnback` library that
//! parses arguments, renders reports (human text, or JSON with `--json`) and
//! maps outcomes to exit codes.

#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod out;

mod changes;
mod commands;
mod help;
mod picker;
#[allow(unsafe_code)] // The platform layer: each block says why it is sound.
mod platform;
mod progress;
mod size;
mod when;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Exit code for a rewind that could not restore every path.
pub const EXIT_INCOMPLETE: u8 = 3;

/// Exit code for a usage error (as clap's own).
pub const EXIT_USAGE: u8 = 2;

/// A usage error a command finds itself (clap finds the others): `main`
/// reports it as any error, with exit code [`EXIT_USAGE`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

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

    /// When to color the output: auto (on a terminal, unless NO_COLOR is
    /// set), always or never
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    color: out::ColorChoice,

    /// Print long output (log, show --stat/--patch) straight to the
    /// terminal, not through $PAGER or less
    #[arg(long, global = true)]
    no_pager: bool,

    #[command(subcommand)]
    command: Command,
}

// Each command's arguments and help are built only when a command line
// names it (see `full_command`).
#[derive(Subcommand, Debug)]
#[command(defer = true)]
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
    Log(commands::log::Args),
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
    Completions(commands::completions::Args),
    Man(commands::man::Args),
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
    no_pager: bool,
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

    /// The live turn a turn reference on the command line names (a full
    /// id, a unique prefix of one, `@` or `@~N`; see
    /// `turnback::turn_ref`).
    pub fn turn(&self, store: &turnback::Store, text: &str) -> anyhow::Result<turnback::TurnId> {
        Ok(store.resolve_turn(text)?)
    }

    /// The pager for long output on a terminal, unless `--no-pager` or
    /// `--json` (see `out::Pager`); printing goes through it until it is
    /// dropped.
    pub fn pager(&self) -> out::Pager {
        out::Pager::start(!self.no_pager && !self.json)
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

/// The command line as parsed and as the help, completions and manual
/// page show it: with its commands grouped and examples (see `help.rs`).
pub fn command() -> clap::Command {
    help::decorate(full_command())
}

/// Every command with its arguments and help. A command line that parses
/// builds only the command it names (`defer` on `Command`): building all
/// thirty took a sixth of the instructions of a snapshot half that found
/// nothing changed, in every hook an agent runs. The help, the completions
/// and the manual page show them all, so they build them all first.
pub fn full_command() -> clap::Command {
    // Building copies each command's name, description and subcommands
    // into the tree of `turnback help`, before it builds the commands
    // themselves: a second build is given the first one's commands.
    let mut built = Cli::command();
    built.build();
    let mut cmd = Cli::command();
    for sub in help::own_subcommands(&built) {
        cmd = cmd.mut_subcommand(sub.get_name(), |_| sub.clone());
    }
    cmd.build();
    cmd
}

/// Parses the arguments. A usage error (exit code 2) with `--json` among
/// them also prints `{"error": ...}` on stdout, as every other error does;
/// `--help` and `--version` print their text as always.
fn parse() -> Result<Cli, ExitCode> {
    // The decoration changes only what help and errors print, never what
    // parses: a command line that parses is parsed without it. Building
    // it (examples for every command and subcommand) took a third of the
    // instructions of a snapshot half that found nothing changed, in
    // every hook an agent runs.
    if let Ok(cli) = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        return Ok(cli);
    }
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let e = match parsed {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    use clap::error::ErrorKind;
    let informational = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if !informational && json_requested(std::env::args_os().skip(1)) {
        let text = match e.kind() {
            // The help, or a list of every command (hidden ones too).
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
                "a command is needed; `turnback --help` lists them".to_owned()
            }
            _ => usage_message(&e.to_string()),
        };
        let msg = serde_json::json!({ "error": text });
        // Nowhere to report a failure to print the error.
        let _ = outln!("{msg}");
    }
    // Prints to stderr (help and version to stdout) as clap does.
    let _ = e.print();
    Err(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)))
}

/// Whether `--json` is among the global flags: any argument before a
/// `--` (after it, the arguments are `exec`'s command's own).
fn json_requested(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    args.take_while(|a| a != "--").any(|a| a == "--json")
}

/// A clap error's text for `{"error": ...}`: its first paragraph without
/// the `error: ` prefix (the usage line and the tip follow on stderr).
fn usage_message(rendered: &str) -> String {
    let first = rendered.split("\n\n").next().unwrap_or(rendered).trim();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

fn main() -> ExitCode {
    platform::return_large_frees();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    out::init_color(cli.color);
    let ctx = Ctx {
        root: cli.root,
        json: cli.json,
        no_pager: cli.no_pager,
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
        Command::Log(a) => commands::log::run(&ctx, a),
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
        Command::Completions(a) => commands::completions::run(&ctx, a),
        Command::Man(a) => commands::man::run(&ctx, a),
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
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// The error and its causes, each once (the library's messages already
/// include their I/O cause).
pub fn message(e: &anyhow::Error) -> String {
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
