//! Printing that never panics.
//!
//! `println!` panics when its write fails: `turnback list | head -1` closes
//! the pipe after one line, and the next line ended the process with exit
//! 101 and "failed printing to stdout: Broken pipe". `outln!` and `out!`
//! hand the write's error back instead; the command returns it with `?` and
//! `main` exits quietly with 0 when a cause of its error is a broken pipe,
//! as ripgrep does. The Rust runtime ignores SIGPIPE, so a closed pipe is
//! this error on Unix as on Windows (where it is the only way to see it),
//! and it stops a command only where it prints: never a rewind half-way, as
//! restoring the signal's default action would. `errln!` writes to stderr
//! and drops a failure: there is nowhere left to report it, and a warning
//! nobody can read must not stop the work. The crate denies
//! `clippy::print_stdout` and `clippy::print_stderr`, so these stay the only
//! way to print.
//!
//! Color and the pager are decided here, once, for every command:
//! - [`init_color`] takes `--color auto|always|never`: `auto` colors when
//!   standard output is a terminal, `NO_COLOR` is unset or empty and
//!   `TERM` is not `dumb`; `always` colors even into a pipe (and over
//!   `NO_COLOR`, which yields to a flag given on the command line). A
//!   command asks [`color`] and styles with [`paint`] (anstyle, the
//!   styling crate clap itself uses), so no escape is written by hand.
//! - [`Pager::start`] sends what `out!`/`outln!` print through `$PAGER`
//!   (run by the shell on Unix; empty or `cat`: no pager), else `less
//!   -FRX` (quit at once when it fits the screen, keep colors, leave the
//!   text on the screen), when standard output is a terminal, as git does.
//!   Dropping it ends the pager's input and waits for the reader to quit;
//!   meanwhile the terminal's Ctrl-C goes to the pager alone. A pager that
//!   cannot be started is no pager: the text goes to the terminal.

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use anstyle::{AnsiColor, Style};

/// `println!` to stdout, handing back the write's error.
macro_rules! outln {
    () => {
        $crate::out::stdout(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stdout(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

/// `print!` to stdout, handing back the write's error.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::stdout(::std::format_args!($($arg)*))
    };
}

/// `eprintln!` that ignores a failed write instead of panicking.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::stderr(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

/// Where a running pager reads what is printed (see [`Pager`]).
static PAGER_INPUT: Mutex<Option<io::BufWriter<ChildStdin>>> = Mutex::new(None);

/// Writes `args` to stdout, or to the pager when one runs.
pub fn stdout(args: fmt::Arguments<'_>) -> io::Result<()> {
    let mut pager = PAGER_INPUT.lock().unwrap_or_else(PoisonError::into_inner);
    match pager.as_mut() {
        Some(input) => input.write_fmt(args),
        None => io::stdout().lock().write_fmt(args),
    }
}

/// When to color what is printed (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// When standard output is a terminal and `NO_COLOR` is unset or empty.
    Auto,
    /// Always, into a pipe or a file too.
    Always,
    /// Never.
    Never,
}

static COLOR: AtomicBool = AtomicBool::new(false);

/// Decides, once for the process, whether printed text is colored.
pub fn init_color(choice: ColorChoice) {
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            io::stdout().is_terminal()
                && !anstyle_query::no_color()
                && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
                // A Windows console takes escapes once asked to.
                && anstyle_query::windows::enable_ansi_colors() != Some(false)
        }
    };
    COLOR.store(on, Ordering::Relaxed);
}

/// Whether printed text is colored (see [`init_color`]).
pub fn color() -> bool {
    COLOR.load(Ordering::Relaxed)
}

/// The styles of the commands' output, one name per meaning.
pub mod style {
    use super::{AnsiColor, Style};

    /// The part of a turn id that names it (its shortest unique prefix).
    pub const ID_PREFIX: Style = AnsiColor::Magenta.on_default().bold();
    /// The rest of a turn id.
    pub const ID_REST: Style = AnsiColor::BrightBlack.on_default();
    /// A time, and how long ago it was.
    pub const TIME: Style = AnsiColor::Cyan.on_default();
    /// The agent and session of a turn.
    pub const AGENT: Style = AnsiColor::Blue.on_default();
    /// Something added: created files, inserted lines.
    pub const ADDED: Style = AnsiColor::Green.on_default();
    /// Something removed: deleted files, deleted lines.
    pub const REMOVED: Style = AnsiColor::Red.on_default();
    /// Something changed in place: modified files.
    pub const CHANGED: Style = AnsiColor::Yellow.on_default();
    /// A shell command a turn ran.
    pub const COMMAND: Style = Style::new().italic();
    /// A turn no longer live, and the operations of the history.
    pub const ENDED: Style = AnsiColor::BrightBlack.on_default();
    /// An operation (rewind, revert, undo, redo).
    pub const OPERATION: Style = AnsiColor::Yellow.on_default().bold();
    /// The header lines of a diff.
    pub const HEADER: Style = Style::new().bold();
    /// A diff's hunk header.
    pub const HUNK: Style = AnsiColor::Cyan.on_default();
}

/// `text` in `style` when color is on, else as it is.
pub fn paint<T: fmt::Display>(style: Style, text: T) -> Painted<T> {
    Painted {
        style: color().then_some(style),
        text,
    }
}

/// Text in a style (see [`paint`]).
pub struct Painted<T> {
    style: Option<Style>,
    text: T,
}

impl<T: fmt::Display> fmt::Display for Painted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.style {
            Some(s) => {
                // Nothing to style is no escapes either.
                let text = self.text.to_string();
                if text.is_empty() {
                    return Ok(());
                }
                write!(f, "{}{text}{}", s.render(), s.render_reset())
            }
            None => self.text.fmt(f),
        }
    }
}

/// Text gathered for one write, handed to `out!` a piece of at most
/// [`Buffer::PIECE`] bytes at a time: a listing of 10,000 turns is a few
/// writes, not 10,000 (standard output writes each line when it is a
/// pipe, as a pager's input is).
#[derive(Default)]
pub struct Buffer(String);

impl Buffer {
    /// Bytes gathered before they are written.
    pub const PIECE: usize = 1 << 20;

    /// Adds `text`.
    pub fn push(&mut self, text: &str) {
        self.0.push_str(text);
    }

    /// Writes what was gathered if it is a piece's worth.
    pub fn flush_if_full(&mut self) -> io::Result<()> {
        if self.0.len() >= Self::PIECE {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what was gathered.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.0.is_empty() {
            out!("{}", self.0)?;
            self.0.clear();
        }
        Ok(())
    }
}

impl fmt::Write for Buffer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.push_str(s);
        Ok(())
    }
}

/// The pager a command's output goes through while it lives (see the
/// module docs).
pub struct Pager {
    child: Option<Child>,
    _signals: Option<crate::platform::ChildSignals>,
}

impl Pager {
    /// Starts the pager when `wanted` (not `--no-pager`, not `--json`) and
    /// standard output is a terminal; else printing goes on as before.
    pub fn start(wanted: bool) -> Pager {
        let none = Pager {
            child: None,
            _signals: None,
        };
        if !wanted || !io::stdout().is_terminal() {
            return none;
        }
        let Some(mut cmd) = pager_command() else {
            return none;
        };
        let Ok(mut child) = cmd.stdin(Stdio::piped()).spawn() else {
            return none;
        };
        let Some(input) = child.stdin.take() else {
            return none;
        };
        let signals = crate::platform::ChildSignals::guard(child.id());
        *PAGER_INPUT.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(io::BufWriter::new(input));
        Pager {
            child: Some(child),
            _signals: Some(signals),
        }
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        let input = PAGER_INPUT
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut input) = input {
            // A reader that quit early closed the pipe: nothing to report.
            let _ = input.flush();
        }
        if let Some(child) = &mut self.child {
            let _ = child.wait();
        }
    }
}

/// The pager to run: `$PAGER` (none when empty or `cat`), else `less -FRX`.
fn pager_command() -> Option<Command> {
    match std::env::var("PAGER") {
        Ok(p) if p.trim().is_empty() || p.trim() == "cat" => None,
        Ok(p) => Some(shell_command(&p)),
        Err(_) => {
            let mut less = Command::new("less");
            less.arg("-FRX");
            Some(less)
        }
    }
}

/// `line` run as the user's shell runs a `$PAGER` line.
#[cfg(unix)]
fn shell_command(line: &str) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(line);
    sh
}

/// `line` run as a program and its arguments, split at white space.
#[cfg(windows)]
fn shell_command(line: &str) -> Command {
    let mut words = line.split_whitespace();
    let mut cmd = Command::new(words.next().unwrap_or("more"));
    cmd.args(words);
    cmd
}

/// Writes `args` to stderr; a failure is dropped (see the module doc).
pub fn stderr(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// Whether the error is a write to a closed pipe: a print's, which `?`
/// hands up as a bare `io::Error` (seen through any context added to it).
/// Its causes are not searched: a broken pipe beneath a library error is a
/// failure of the work, not a reader that stopped reading.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_print_to_a_closed_pipe_is_told_from_other_errors() {
        let pipe = || anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(is_broken_pipe(&pipe()));
        assert!(is_broken_pipe(&pipe().context("printing the report")));
        let full = anyhow::Error::new(io::Error::from(io::ErrorKind::StorageFull));
        assert!(!is_broken_pipe(&full));
        assert!(!is_broken_pipe(&anyhow::anyhow!("Broken pipe")));
    }
}
