//! Linux and macOS: the POSIX `*at` system calls through rustix, with the
//! descriptor types of std. The modules above use these names, which
//! `windows` implements again over Win32.

pub(crate) use rustix::io::{Errno, dup};
pub(crate) use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The `*at` file-system calls, their flags and the `stat` record.
pub(crate) mod fs {
    pub(crate) use rustix::fs::*;
    pub(crate) use rustix::path::Arg;
}

/// Whether the process `pid` is running (a signal 0 that finds no process).
pub(crate) fn process_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}

/// The effective user id of this process.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}
