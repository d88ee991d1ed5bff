//! `turnback empty-trash` (hidden): removes the names a rewind, revert,
//! undo or redo left in the trash, started in the background by
//! those commands once they have answered (see the library's `trash.rs`).

use std::process::{Command, Stdio};

use turnback::{Options, Store};

use crate::{Ctx, Outcome};

/// Remove the names a rewind left in the trash (run in the background by rewind, revert, undo and redo)
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    let store = ctx.open(Options::default())?;
    store.empty_trash();
    Ok(0)
}

/// Starts `turnback empty-trash` for `store` in the background when its
/// trash holds names, and does not wait for it: its standard streams are
/// not the caller's, so an agent waiting for this command's output is not
/// kept waiting. If it cannot start, the next mutation empties the trash.
pub fn empty_later(store: &Store) {
    if !store.trash_pending() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = Command::new(exe);
    cmd.arg("--root")
        .arg(store.root())
        .arg("empty-trash")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    detach(&mut cmd);
    // Not waited for: it outlives this process and is reaped by init.
    let _ = cmd.spawn();
}

/// Puts the child in its own process group, out of reach of the terminal's
/// signals to this one.
#[cfg(unix)]
fn detach(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
}

/// Nothing to do: the trash is only used where frees are deferred (Linux).
#[cfg(not(unix))]
fn detach(_cmd: &mut Command) {}
