//! Whether strace can kill and fail system calls here: the fault-injection
//! tests need it (`.ci/run` installs it), and one that finds it missing
//! fails rather than passing without a fault injected.

use std::process::Command;

/// Why strace cannot trace and inject here (it needs ptrace), if it cannot.
pub fn strace_problem() -> Option<String> {
    let out = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=getpid",
            "-e",
            "inject=getpid:error=EPERM:when=1",
            "true",
        ])
        .output();
    match out {
        Err(e) => Some(format!("strace cannot be started: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "strace cannot trace here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}
