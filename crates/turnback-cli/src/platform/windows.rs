//! Windows: a file's mode is 0o444 with the read-only attribute, else
//! 0o644 (there is no executable bit: a hook runs through the agent's
//! shell); a child's exit code is passed on as it is (there are no
//! signals); while it runs, Ctrl+C and Ctrl+Break, which the console sends
//! to every process attached to it, are handled by doing nothing in
//! turnback, so the child decides and turnback lives to take the after half.

use std::fs::{File, Metadata};
use std::io;
use std::path::Path;
use std::process::ExitStatus;

use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
use windows_sys::core::BOOL;

/// The permission bits turnback shows for `meta`.
pub fn mode_of(meta: &Metadata) -> u32 {
    match (meta.is_dir(), meta.permissions().readonly()) {
        (true, _) => 0o755,
        (false, true) => 0o444,
        (false, false) => 0o644,
    }
}

/// Windows runs what its shell is told to; no bit says so.
pub fn is_executable(_meta: &Metadata) -> bool {
    true
}

/// Sets or clears the read-only attribute from the owner's write bit.
pub fn set_mode(f: &File, mode: u32) -> io::Result<()> {
    let mut p = f.metadata()?.permissions();
    p.set_readonly(mode & 0o200 == 0);
    f.set_permissions(p)
}

/// Creates the symlink `link` pointing to `target` (a file link).
pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    std::os::windows::fs::symlink_file(target, link)
}

/// The child's exit code, its low byte as on Unix.
pub fn exit_code(status: ExitStatus) -> u8 {
    status.code().map_or(1, |c| (c & 0xff) as u8)
}

unsafe extern "system" fn ignore(_event: u32) -> BOOL {
    1
}

/// Console control events ignored by turnback while a child runs.
pub struct ChildSignals {
    installed: bool,
}

impl ChildSignals {
    /// Handles Ctrl+C and Ctrl+Break in turnback by ignoring them.
    pub fn guard(_pid: u32) -> ChildSignals {
        // SAFETY: registers a handler function that lives for the process.
        let installed = unsafe { SetConsoleCtrlHandler(Some(ignore), 1) } != 0;
        ChildSignals { installed }
    }
}

impl Drop for ChildSignals {
    fn drop(&mut self) {
        if self.installed {
            // SAFETY: removes the handler registered above.
            unsafe {
                SetConsoleCtrlHandler(Some(ignore), 0);
            }
        }
    }
}

/// `program` in double quotes, which keep its backslashes and spaces in
/// the shells agents run hooks through on Windows (Git Bash for Claude
/// Code, `cmd`); PowerShell runs a quoted program only after `&`, so there
/// turnback should be on PATH (then `init` writes plain `turnback`).
pub fn quote_program(program: &str) -> String {
    format!("\"{program}\"")
}

/// Starts a background child with no console of its own and in a process
/// group of its own, so neither the console's Ctrl+C nor its closing
/// reaches it.
pub fn detach(cmd: &mut std::process::Command) {
    use std::os::windows::process::CommandExt;
    use windows_sys::Win32::System::Threading::{CREATE_NEW_PROCESS_GROUP, DETACHED_PROCESS};
    cmd.creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP);
}

/// Nothing to do: the Windows heap gives blocks over 512 KiB their own
/// mapping, returned when freed.
pub fn return_large_frees() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_quoted_for_bash_and_cmd() {
        assert_eq!(
            quote_program(r"C:\Program Files\turnback\turnback.exe"),
            r#""C:\Program Files\turnback\turnback.exe""#
        );
    }
}
