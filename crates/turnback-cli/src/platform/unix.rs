//! Linux and macOS: modes are `st_mode`'s permission bits; a child killed
//! by signal N exits 128 + N; while it runs, the terminal's SIGINT and
//! SIGQUIT reach it directly (turnback ignores them and lives to take the
//! after half), and SIGTERM and SIGHUP sent to turnback are passed on.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

/// The permission bits of `meta`.
pub fn mode_of(meta: &Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// Whether `meta` is executable by someone.
pub fn is_executable(meta: &Metadata) -> bool {
    meta.permissions().mode() & 0o111 != 0
}

/// Sets the permission bits of the open file `f`.
pub fn set_mode(f: &File, mode: u32) -> io::Result<()> {
    f.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// Creates the symlink `link` pointing to `target`.
pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// The exit code `turnback exec` passes on: the child's, or 128 + N when
/// signal N killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(sig)) => (128 + sig).min(255) as u8,
        (None, None) => 1,
    }
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

/// The signal dispositions while a child runs; restored on drop.
pub struct ChildSignals {
    saved: Vec<(libc::c_int, libc::sighandler_t)>,
}

impl ChildSignals {
    /// Ignores SIGINT and SIGQUIT and forwards SIGTERM and SIGHUP to `pid`.
    pub fn guard(pid: u32) -> ChildSignals {
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
        ChildSignals { saved }
    }
}

impl Drop for ChildSignals {
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

/// `program` quoted for the POSIX shell the agents run hooks through:
/// as it is when it holds only safe characters, else in single quotes.
pub fn quote_program(program: &str) -> String {
    if !program.is_empty()
        && program
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@".contains(&b))
    {
        program.to_owned()
    } else {
        format!("'{}'", program.replace('\'', r"'\''"))
    }
}

/// Puts a background child in its own process group, out of reach of the
/// terminal's signals to this one.
pub fn detach(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
}

/// Makes a freed large buffer go back to the system at once. glibc's
/// malloc raises its mmap threshold to the size of each large block freed
/// (up to 32 MiB), so once a rewind of 100,000 paths has freed its first
/// large buffers (the plan, a sort's scratch), the later ones come from
/// the heap, and the heap's top cannot shrink past what is still in use
/// above it: 15 MB of that run's 134 MB peak was such freed memory.
/// Fixed at 1 MiB, the threshold no longer moves. Other C libraries and
/// the other platforms' allocators map large blocks on their own.
pub fn return_large_frees() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets a tunable of glibc's allocator and touches no
    // memory of ours; it is called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_quoted_for_the_shell() {
        assert_eq!(quote_program("/usr/bin/turnback"), "/usr/bin/turnback");
        assert_eq!(quote_program("/a b/it's"), r"'/a b/it'\''s'");
    }
}
