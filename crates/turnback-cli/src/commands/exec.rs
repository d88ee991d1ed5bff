use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::Context;
use turnback::TurnId;

use super::CaptureOpts;
use crate::{Ctx, Outcome};

/// Run a command in the project root and record, in the turn, the
/// pre-image of every path it created, modified, deleted or renamed, so
/// that `turnback rewind TURN` undoes it. The command's standard input,
/// output and error are its own and its exit code is passed through (128 +
/// N when a signal N killed it); turnback reports on standard error only
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: CaptureOpts,

    /// Print nothing on standard error unless something went wrong
    #[arg(long, short)]
    quiet: bool,

    /// The command and its arguments (after `--`)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// The running child, for the signal handler that forwards SIGTERM/SIGHUP.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; the pid is our own child's.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// While the child runs: the terminal's SIGINT and SIGQUIT reach it
/// directly, so turnback ignores them (and lives to take the after half);
/// SIGTERM and SIGHUP sent to turnback are passed on to the child.
struct Signals {
    saved: Vec<(libc::c_int, libc::sighandler_t)>,
}

impl Signals {
    fn guard(pid: u32) -> Signals {
        CHILD.store(pid as i32, Ordering::SeqCst);
        let mut saved = Vec::new();
        let handler = forward as extern "C" fn(libc::c_int) as libc::sighandler_t;
        for (sig, how) in [
            (libc::SIGINT, libc::SIG_IGN),
            (libc::SIGQUIT, libc::SIG_IGN),
            (libc::SIGTERM, handler),
            (libc::SIGHUP, handler),
        ] {
            // SAFETY: installs a handler that only calls kill(2), or SIG_IGN.
            let old = unsafe { libc::signal(sig, how) };
            saved.push((sig, old));
        }
        Signals { saved }
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for (sig, old) in self.saved.drain(..) {
            // SAFETY: restores the disposition saved above.
            unsafe {
                libc::signal(sig, old);
            }
        }
        CHILD.store(0, Ordering::SeqCst);
    }
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let turn = TurnId::new(&args.opts.turn)?;
    let label = args.opts.label.as_deref();
    let mut store = ctx.open(args.opts.options())?;
    let root = store.root().to_path_buf();
    let bar = crate::progress::Bar::new();
    // If the before half fails, the command does not run.
    let before = store
        .snapshot_for_command(&turn, label, false, &bar)
        .context("the snapshot before the command failed, so the command was not run")?;
    if !args.quiet {
        for w in &before.warnings {
            eprintln!("turnback: warning: {w}");
        }
        if let Some(rec) = &before.recorded {
            for line in super::snapshot::describe_changes(rec) {
                eprintln!("turnback: {line}");
            }
        }
    }
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given; usage: turnback exec --turn T -- CMD ARGS...")?;
    let mut child = Command::new(program)
        .args(rest)
        .current_dir(&root)
        .spawn()
        .with_context(|| {
            format!(
                "cannot run {:?} in {} (the before-snapshot was taken; nothing changed)",
                program,
                root.display()
            )
        })?;
    let status = {
        let _signals = Signals::guard(child.id());
        child.wait().context("cannot wait for the command")?
    };
    let code: u8 = match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(sig)) => (128 + sig).min(255) as u8,
        (None, None) => 1,
    };
    let after = store.snapshot_for_command(&turn, label, true, &bar).with_context(|| {
        format!(
            "the command ran (exit code {code}) but its changes could not be recorded in turn {turn}"
        )
    })?;
    if ctx.json() {
        let report = serde_json::json!({ "exit_code": code, "before": before, "after": after });
        eprintln!("{report}");
    } else if !args.quiet {
        for w in &after.warnings {
            eprintln!("turnback: warning: {w}");
        }
        if let Some(rec) = &after.recorded {
            let c = &rec.changes;
            if c.is_empty() {
                eprintln!("turnback: turn {turn}: the command changed nothing");
            } else {
                eprintln!(
                    "turnback: turn {turn}: {} modified, {} created, {} deleted, {} renamed; `turnback rewind {turn}` undoes them",
                    c.modified.len(),
                    c.created.len(),
                    c.deleted.len(),
                    c.renamed.len()
                );
            }
            for n in &c.not_captured {
                eprintln!(
                    "turnback: NOT CAPTURED {} ({}): {}",
                    n.path,
                    n.change.as_str(),
                    n.reason
                );
            }
            for line in super::snapshot::describe_sharing(rec) {
                eprintln!("turnback: {line}");
            }
        }
    }
    Ok(code)
}
