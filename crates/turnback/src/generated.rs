//! Whether a directory a default exclusion names holds generated files.
//!
//! The default exclusions ([`crate::DEFAULT_EXCLUDES`]) name folders that
//! are usually build or installer output, but the same names hold
//! hand-written sources too (`tools/build/gen.sh`, a `dist/` checked into
//! the repository). A default therefore leaves a directory out only when
//! something says it is generated; otherwise the directory is covered like
//! any other. The evidence, checked in this order, without running git:
//!
//! 1. its name is `node_modules` or `__pycache__`: only a package manager
//!    or the Python interpreter writes those;
//! 2. it holds a regular file `CACHEDIR.TAG` (the Cache Directory Tagging
//!    standard; Cargo writes one in `target/`) or `pyvenv.cfg` (a virtual
//!    environment);
//! 3. the project's `.gitignore` files ignore it: the one in each directory
//!    from the root down to its parent, read with the `ignore` crate's
//!    gitignore matcher, the deepest with a matching pattern deciding (as
//!    git does). A `.gitignore` is read whether or not the folder is a git
//!    repository; one that is a symlink is not read (as git does not).
//!    Git's global excludes and `.git/info/exclude` are not read: they are
//!    one person's settings, not the project's.
//!
//! Without any of these a `dist/` or `build/` is covered. An explicit
//! pattern of `.turnbackignore` is not a default and is never second-guessed.

use crate::sys::BorrowedFd;
use std::ffi::CStr;
use std::path::Path;

use crate::sys::fs::{AtFlags, FileType};
use ignore::gitignore::GitignoreBuilder;

use crate::tree::Excluded;

/// Names that only tools write.
const ALWAYS_GENERATED: &[&[u8]] = &[b"node_modules", b"__pycache__"];

/// Files whose presence marks a directory as generated.
const MARKERS: &[&str] = &["CACHEDIR.TAG", "pyvenv.cfg"];

/// Keeps `why` unless it is a default exclusion of a directory that shows
/// no sign of being generated (see the module doc); `name` is the entry of
/// `dir` at `path` (relative to `root`).
pub(crate) fn confirm(
    why: Excluded,
    root: &Path,
    dir: BorrowedFd<'_>,
    name: &CStr,
    path: &[u8],
) -> Option<Excluded> {
    match why {
        Excluded::Default(_) if !is_generated(root, dir, name, path) => None,
        why => Some(why),
    }
}

fn is_generated(root: &Path, dir: BorrowedFd<'_>, name: &CStr, path: &[u8]) -> bool {
    let name = name.to_bytes();
    ALWAYS_GENERATED.contains(&name) || has_marker(dir, name) || gitignored(root, path)
}

fn has_marker(dir: BorrowedFd<'_>, name: &[u8]) -> bool {
    MARKERS.iter().any(|m| {
        let rel = [name, b"/", m.as_bytes()].concat();
        crate::sys::fs::statat(dir, crate::sys::os_str(&rel), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| crate::sys::file_type(crate::sys::mode(&st)) == FileType::RegularFile)
    })
}

/// Whether the `.gitignore` files from the root down to the parent of the
/// directory `path` ignore it; the deepest with a matching pattern decides.
fn gitignored(root: &Path, path: &[u8]) -> bool {
    let mut cuts: Vec<usize> = vec![0];
    cuts.extend(
        path.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(|(i, _)| i),
    );
    for &cut in cuts.iter().rev() {
        let (dir_rel, rest) = if cut == 0 {
            (&path[..0], path)
        } else {
            (&path[..cut], &path[cut + 1..])
        };
        let dir = root.join(crate::sys::os_str(dir_rel));
        let file = dir.join(".gitignore");
        if !std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file()) {
            continue;
        }
        let mut b = GitignoreBuilder::new(&dir);
        // A line the matcher cannot parse is skipped; the others apply.
        let _ = b.add(&file);
        let Ok(matcher) = b.build() else { continue };
        match matcher.matched(Path::new(crate::sys::os_str(rest)), true) {
            ignore::Match::Ignore(_) => return true,
            ignore::Match::Whitelist(_) => return false,
            ignore::Match::None => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn the_deepest_gitignore_with_a_matching_pattern_decides() -> TestResult {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::create_dir_all(root.join("web/dist"))?;
        std::fs::create_dir_all(root.join("tools/build"))?;
        std::fs::create_dir_all(root.join("app/build"))?;
        std::fs::write(root.join(".gitignore"), "dist/\n/app/build/\n")?;
        std::fs::write(root.join("tools/.gitignore"), "!build/\n")?;
        assert!(gitignored(root, b"web/dist"));
        assert!(gitignored(root, b"app/build"));
        assert!(!gitignored(root, b"tools/build"), "no pattern: covered");
        std::fs::write(root.join("web/.gitignore"), "!dist/\n")?;
        assert!(!gitignored(root, b"web/dist"), "a deeper negation wins");
        Ok(())
    }
}
