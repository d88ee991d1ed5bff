//! Exclusions: which paths a snapshot leaves out.
//!
//! The defaults ([`DEFAULT_EXCLUDES`]), then the root's `.turnbackignore`
//! (gitignore syntax), then one in any subdirectory, which applies to its
//! subtree and takes precedence over those above it, as in git.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use crate::sys::fs::{Mode, OFlags};
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::error::{IoResultExt, Result};
use crate::tree::Excluded;

/// Directories a snapshot leaves out unless `.turnbackignore` says
/// otherwise: large folders that a build or an installer regenerates, and
/// only when they show it (see [`crate::generated`]).
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "node_modules/",
    "target/",
    ".venv/",
    "__pycache__/",
    "dist/",
    "build/",
];

/// The ignore file read at the project root (gitignore syntax).
pub const IGNORE_FILE: &str = ".turnbackignore";

/// The ignore files that apply in a directory, deepest first: a
/// `.turnbackignore` below the root applies to its directory's subtree
/// and takes precedence over those above it, as in git.
#[derive(Clone)]
pub(crate) struct Ignores {
    /// The directory holding the file, relative to the root, ending with
    /// `/` (empty for the root, whose matcher also holds the defaults).
    pub(crate) dir: Vec<u8>,
    pub(crate) matcher: Gitignore,
    /// Whether a pattern of this file can match something other than a
    /// directory (see [`dir_only`]); if not, files are not matched here.
    pub(crate) files_too: bool,
    pub(crate) parent: Option<Arc<Ignores>>,
}

/// Whether an ignore-file line can only match directories (a pattern that
/// ends with `/`) or nothing (blank, comment). Conservative: trailing tabs
/// or an escaped trailing space make it count as matching files too.
pub(crate) fn dir_only(line: &str) -> bool {
    let t = line.trim_end_matches(' ');
    t.is_empty() || t.starts_with('#') || t.ends_with('/')
}

impl Ignores {
    /// The pattern that excludes `path`, if any: the deepest file with a
    /// matching pattern decides.
    pub(crate) fn excluded(&self, path: &[u8], is_dir: bool) -> Option<Excluded> {
        let mut at = Some(self);
        while let Some(ig) = at {
            if !is_dir && !ig.files_too {
                at = ig.parent.as_deref();
                continue;
            }
            let rel = path.strip_prefix(ig.dir.as_slice()).unwrap_or(path);
            match ig
                .matcher
                .matched(Path::new(crate::sys::os_str(rel)), is_dir)
            {
                ignore::Match::Ignore(glob) => {
                    return Some(match glob.from() {
                        None => Excluded::Default(glob.original().to_owned()),
                        Some(_) => Excluded::IgnoreFile(glob.original().to_owned()),
                    });
                }
                ignore::Match::Whitelist(_) => return None,
                ignore::Match::None => at = ig.parent.as_deref(),
            }
        }
        None
    }
}

/// The matcher of the `.turnbackignore` in `dir` (at `rel`, which ends
/// with `/`), read without following a symlink and only if it is a
/// regular file; a problem with it becomes a warning.
pub(crate) fn nested_matcher(
    dir: crate::sys::BorrowedFd<'_>,
    rel: &[u8],
    root: &Path,
    warnings: &mut Vec<String>,
) -> Option<(Gitignore, bool)> {
    let shown = root.join(crate::sys::os_str(rel)).join(IGNORE_FILE);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let text = crate::sys::fs::openat(dir, IGNORE_FILE, flags, Mode::empty())
        .map_err(io::Error::from)
        .and_then(|fd| {
            let file = File::from(fd);
            if !file.metadata()?.is_file() {
                return Err(io::Error::other("it is not a regular file"));
            }
            let mut text = String::new();
            (&file).take(1 << 20).read_to_string(&mut text)?;
            Ok(text)
        });
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            warnings.push(format!("{}: {e}; it is not read", shown.display()));
            return None;
        }
    };
    let mut b = GitignoreBuilder::new(root.join(crate::sys::os_str(rel)));
    let files_too = add_lines(&mut b, &text, &shown, warnings);
    match b.build() {
        Ok(m) => Some((m, files_too)),
        Err(e) => {
            warnings.push(format!("{}: {e}; it is not read", shown.display()));
            None
        }
    }
}

/// Adds the lines of an ignore file to `b`; a bad line becomes a warning.
/// Returns whether any line can match a non-directory.
fn add_lines(
    b: &mut GitignoreBuilder,
    text: &str,
    shown: &Path,
    warnings: &mut Vec<String>,
) -> bool {
    let mut files_too = false;
    for line in text.lines() {
        match b.add_line(Some(shown.to_path_buf()), line) {
            Ok(_) => files_too |= !dir_only(line),
            Err(e) => warnings.push(format!(
                "{}: {e}; the other lines apply, fix that one",
                shown.display()
            )),
        }
    }
    files_too
}

/// The matcher for exclusions: the defaults, then the root's ignore file;
/// and whether it can match a non-directory.
pub(crate) fn build_matcher(root: &Path, warnings: &mut Vec<String>) -> Result<(Gitignore, bool)> {
    let mut b = GitignoreBuilder::new(root);
    for d in DEFAULT_EXCLUDES {
        debug_assert!(dir_only(d));
        b.add_line(None, d)
            .map_err(|e| io::Error::other(e.to_string()))
            .ctx("parse default exclusion", *d)?;
    }
    let file = root.join(IGNORE_FILE);
    let mut files_too = false;
    match std::fs::symlink_metadata(&file) {
        Ok(m) if m.file_type().is_file() => match std::fs::read(&file) {
            Ok(text) => {
                files_too = add_lines(&mut b, &String::from_utf8_lossy(&text), &file, warnings);
            }
            Err(e) => warnings.push(format!("{}: {e}; it is not read", file.display())),
        },
        Ok(_) => warnings.push(format!(
            "{} is not a regular file; it is not read",
            file.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).ctx("read", &file),
    }
    let matcher = b
        .build()
        .map_err(|e| io::Error::other(e.to_string()))
        .ctx("read", &file)?;
    Ok((matcher, files_too))
}
