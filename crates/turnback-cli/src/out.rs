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

use std::fmt;
use std::io::{self, Write};

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

/// Writes `args` to stdout.
pub fn stdout(args: fmt::Arguments<'_>) -> io::Result<()> {
    io::stdout().lock().write_fmt(args)
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
