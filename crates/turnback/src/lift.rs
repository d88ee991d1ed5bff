//! Read-only directories an operation must write into.
//!
//! Restoring a file, removing one or making a directory changes the
//! entries of its parent directory, which needs write permission there. A
//! directory the process owns but may not write (mode 0555, say) is given
//! owner write (and search) permission for the operation and its exact mode
//! back afterwards, and the report says so. A directory owned by another
//! user is left alone: the paths in it are reported as not restored, with
//! the reason. A file's own mode never stops a restore: files are replaced
//! by temporary file and rename, which needs only the directory.

use crate::sys::OwnedFd;
use std::collections::HashMap;

use crate::fsx;

/// A directory given owner write permission for an operation.
struct LiftedDir {
    /// Root-relative, `.` for the root.
    shown: String,
    fd: OwnedFd,
    mode: u32,
}

/// The directories lifted by one operation; [`Lifts::put_back`] (or, if
/// the operation ends early, dropping it) gives them their modes back.
#[derive(Default)]
pub(crate) struct Lifts {
    dirs: Vec<LiftedDir>,
    /// Directories checked: `None` writable (or lifted), else why not.
    checked: HashMap<String, Option<String>>,
}

impl Lifts {
    /// Makes the directory `dir` (shown as `shown`) writable for this
    /// process if it is not and the process owns it. `Err` with the reason
    /// when it stays read-only.
    pub(crate) fn ensure(&mut self, shown: &str, dir: &OwnedFd) -> Result<(), String> {
        if let Some(seen) = self.checked.get(shown) {
            return seen.clone().map_or(Ok(()), Err);
        }
        let res = self.try_lift(shown, dir);
        self.checked.insert(shown.to_owned(), res.clone().err());
        res
    }

    fn try_lift(&mut self, shown: &str, dir: &OwnedFd) -> Result<(), String> {
        let cannot = |e: std::io::Error| format!("its directory {shown} cannot be checked: {e}");
        if fsx::dir_writable(dir).map_err(cannot)? {
            return Ok(());
        }
        let (mode, owner) = fsx::dir_mode_owner(dir).map_err(cannot)?;
        if owner != fsx::euid() {
            return Err(format!(
                "Permission denied: its directory {shown} (mode {mode:o}) is read-only and belongs to another user (uid {owner}); only its owner can make it writable"
            ));
        }
        fsx::set_dir_mode(dir, mode | 0o300).map_err(|e| {
            format!("Permission denied: its directory {shown} is read-only (mode {mode:o}) and its mode cannot be changed: {e}")
        })?;
        let fd = crate::sys::dup(dir).map_err(|e| cannot(e.into()))?;
        self.dirs.push(LiftedDir {
            shown: shown.to_owned(),
            fd,
            mode,
        });
        Ok(())
    }

    /// Gives every lifted directory its mode back. Returns, per directory,
    /// a note for the report, or the reason its mode could not be put back.
    pub(crate) fn put_back(&mut self) -> Vec<(String, Result<String, String>)> {
        self.dirs
            .drain(..)
            .map(|d| {
                let res = fsx::set_dir_mode(&d.fd, d.mode)
                    .map(|()| {
                        format!(
                            "read-only directory (mode {:o}): owner write permission was added for the operation and the mode put back afterwards",
                            d.mode
                        )
                    })
                    .map_err(|e| {
                        format!(
                            "owner write permission was added for the operation, but its mode {:o} could not be put back: {e}",
                            d.mode
                        )
                    });
                (d.shown, res)
            })
            .collect()
    }
}

impl Drop for Lifts {
    fn drop(&mut self) {
        // An operation that ended early still leaves no directory writable
        // that was not (best effort: the error has been reported already).
        for d in self.dirs.drain(..) {
            let _ = fsx::set_dir_mode(&d.fd, d.mode);
        }
    }
}

// Built on Unix modes, symlinks and inode numbers; the Windows run has
// the integration tests and the identity rules.
#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_writable_directory_is_left_as_it_is() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let fd = fsx::open_dir_path(dir.path())?;
        let mut lifts = Lifts::default();
        assert_eq!(lifts.ensure(".", &fd), Ok(()));
        assert!(lifts.put_back().is_empty());
        let mode = std::fs::metadata(dir.path())?.permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755);
        Ok(())
    }
}
