use std::ffi::OsString;
use std::process::Command;

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
            errln!("turnback: warning: {w}");
        }
        if let Some(rec) = &before.recorded {
            for line in super::snapshot::describe_changes(rec) {
                errln!("turnback: {line}");
            }
        }
    }
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given; usage: turnback exec --turn T -- CMD ARGS...")?;
    // What `turnback log` shows the turn ran: a description, so a failure
    // to note it is a warning.
    let line: Vec<String> = args
        .command
        .iter()
        .map(|w| crate::platform::quote_program(&w.to_string_lossy()))
        .collect();
    if let Err(e) = store.note_command(&turn, &line.join(" ")) {
        errln!("turnback: warning: the command is not noted for `turnback log`: {e}");
    }
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
        let _signals = crate::platform::ChildSignals::guard(child.id());
        child.wait().context("cannot wait for the command")?
    };
    let code = crate::platform::exit_code(status);
    let after = store.snapshot_for_command(&turn, label, true, &bar).with_context(|| {
        format!(
            "the command ran (exit code {code}) but its changes could not be recorded in turn {turn}"
        )
    })?;
    if ctx.json() {
        let report = serde_json::json!({ "exit_code": code, "before": before, "after": after });
        errln!("{report}");
    } else if !args.quiet {
        for w in &after.warnings {
            errln!("turnback: warning: {w}");
        }
        if let Some(rec) = &after.recorded {
            let c = &rec.changes;
            if c.is_empty() {
                errln!("turnback: turn {turn}: the command changed nothing");
            } else {
                errln!(
                    "turnback: turn {turn}: {} modified, {} created, {} deleted, {} renamed; `turnback rewind {turn}` undoes them",
                    c.modified.len(),
                    c.created.len(),
                    c.deleted.len(),
                    c.renamed.len()
                );
            }
            for n in &c.not_captured {
                errln!(
                    "turnback: NOT CAPTURED {} ({}): {}",
                    n.path,
                    n.change.as_str(),
                    n.reason
                );
            }
            for line in super::snapshot::describe_sharing(rec) {
                errln!("turnback: {line}");
            }
        }
    }
    Ok(code)
}
