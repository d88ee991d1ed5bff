//! Maintenance after the answer (see the library's `maintain.rs`): the
//! stores this process opened note on being dropped whether they left work
//! (names in the trash, files kept aside to store, an automatic gc that
//! came due), and once the
//! command has answered, [`start_noted`] starts the hidden `turnback
//! maintain` in the background to do it. Its standard streams are not the
//! caller's, so an agent waiting for this command's output is not kept
//! waiting; if it cannot start, the next mutation empties the trash and
//! the next due check finds gc due again.

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use turnback::{Options, Store};

use crate::{Ctx, Outcome};

/// Empty the trash, store the files kept aside, run an automatic gc that came due and write the index checkpoint (started in the background by the commands that leave such work)
#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    let mut store = ctx.open_now(Options::default())?;
    store.maintain()?;
    Ok(0)
}

/// The root of a store that left work for after the answer.
static NOTED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// A store opened with automatic gc deferred (see [`Options::defer_gc`]),
/// and its index checkpoint too when a background process will write it
/// (see [`Options::defer_checkpoint`]); on drop it notes whether it left
/// work.
pub struct Maintained(Store);

impl Maintained {
    /// Opens the store of `root` with `options`, its work deferred.
    pub fn open(root: &std::path::Path, options: Options) -> turnback::Result<Maintained> {
        Store::open_with(root, Maintained::options(options)).map(Maintained)
    }

    /// `options` with automatic gc deferred, and the checkpoint unless no
    /// background process is started ([`NO_BACKGROUND_ENV`]): then it is
    /// written before the command ends, as the next command would
    /// otherwise read again what this one appended.
    pub fn options(options: Options) -> Options {
        Options {
            defer_gc: true,
            defer_checkpoint: std::env::var_os(NO_BACKGROUND_ENV).is_none(),
            ..options
        }
    }
}

impl From<Store> for Maintained {
    fn from(store: Store) -> Maintained {
        Maintained(store)
    }
}

impl Deref for Maintained {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.0
    }
}

impl DerefMut for Maintained {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.0
    }
}

impl Drop for Maintained {
    fn drop(&mut self) {
        if self.0.maintenance_due() {
            let mut noted = NOTED.lock().unwrap_or_else(|p| p.into_inner());
            *noted = Some(self.0.root().to_path_buf());
        }
    }
}

/// Set (to anything) to start no background process: the work waits for
/// the next `turnback maintain` (the trash also for the next mutation), for
/// a caller that waits for every process it started, or checks the store
/// right after a command.
pub const NO_BACKGROUND_ENV: &str = "TURNBACK_NO_BACKGROUND";

/// Starts `turnback maintain` in the background for the store noted last,
/// if any, and does not wait for it (not with [`NO_BACKGROUND_ENV`] set).
pub fn start_noted() {
    let root = NOTED.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(root) = root else {
        return;
    };
    if std::env::var_os(NO_BACKGROUND_ENV).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = Command::new(exe);
    cmd.arg("--root")
        .arg(root)
        .arg("maintain")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    crate::platform::detach(&mut cmd);
    // Not waited for: it outlives this process and is reaped by init.
    let _ = cmd.spawn();
}
