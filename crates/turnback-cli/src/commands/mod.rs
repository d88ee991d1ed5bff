//! One module per subcommand; each has `Args` (whose doc comments are the
//! help text) and `run`.

pub mod capture;
pub mod completions;
pub mod demo;
pub mod diff;
pub mod edit;
pub mod exec;
pub mod gc;
pub mod hook;
pub mod import_osfoundry;
pub mod init;
pub mod list;
pub mod log;
pub mod maintain;
pub mod man;
pub mod mcp;
pub mod mkdir;
pub mod mv;
pub mod repair;
pub mod revert;
pub mod rewind;
pub mod rm;
pub mod seal;
pub mod show;
pub mod snapshot;
pub mod status;
pub mod store;
pub mod undo;
pub mod verify;
pub mod write;

use turnback::{Options, Pre};

/// Options shared by the commands that capture.
#[derive(clap::Args, Debug)]
pub struct CaptureOpts {
    /// The turn to record into (any string: an agent's message id, a counter)
    #[arg(long, value_name = "T")]
    pub turn: String,

    /// A label for the turn (cut to 120 characters)
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// Files larger than this are recorded as skipped, not saved
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = turnback::parse_size)]
    pub max_file_size: u64,
}

impl CaptureOpts {
    /// Store options for these flags.
    pub fn options(&self) -> Options {
        Options {
            max_file_size: self.max_file_size,
            ..Options::default()
        }
    }
}

/// A short human description of a pre-image.
pub fn describe_pre(pre: &Pre) -> String {
    match pre {
        Pre::File { size, mode, .. } => format!("file, {size} bytes, mode {mode:o}"),
        Pre::Symlink { target } => format!("symlink -> {target}"),
        Pre::Absent => "absent (created by the turn)".into(),
        Pre::Dir { mode } => format!("directory, mode {mode:o}"),
        Pre::Fifo { mode } => format!("FIFO, mode {mode:o}"),
        Pre::Skipped { reason, .. } => format!("not saved: {reason}"),
        Pre::Aside { size, mode, .. } => {
            format!("file kept aside in the store, {size} bytes, mode {mode:o}")
        }
    }
}

/// Prints what a capture did, for humans.
pub fn print_capture(report: &turnback::CaptureReport) -> std::io::Result<()> {
    for e in &report.captured {
        outln!("captured {}  ({})", e.path, describe_pre(&e.pre))?;
    }
    for p in &report.already_captured {
        outln!("already captured in this turn: {p}")?;
    }
    for p in &report.links_outside {
        errln!(
            "turnback: warning: {p} is a symlink that points outside the project; a write through it cannot be rewound"
        );
    }
    for p in &report.hard_links_outside {
        errln!(
            "turnback: warning: {p} has hard links outside the project; those names keep the old bytes after a write or a rewind"
        );
    }
    for w in &report.warnings {
        errln!("turnback: warning: {w}");
    }
    Ok(())
}
