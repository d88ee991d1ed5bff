//! Folder snapshots for the demo: every file's bytes and permission bits,
//! every symlink's target and every directory, keyed by `/`-separated path;
//! exact copies of a folder; and the comparison of two snapshots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: its permission bits and bytes.
    File { mode: u32, bytes: Vec<u8> },
    /// A symbolic link and where it points.
    Symlink { target: PathBuf },
    /// A directory and its permission bits.
    Dir { mode: u32 },
}

impl Entry {
    fn kind(&self) -> &'static str {
        match self {
            Entry::File { .. } => "file",
            Entry::Symlink { .. } => "symlink",
            Entry::Dir { .. } => "directory",
        }
    }
}

/// Everything in a folder, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    entries: BTreeMap<String, Entry>,
}

impl Snapshot {
    /// Reads `root`, leaving out the top-level entries named in `skip`.
    pub fn take(root: &Path, skip: &[&str]) -> Result<Snapshot> {
        let mut entries = BTreeMap::new();
        walk(root, root, skip, &mut entries)?;
        Ok(Snapshot { entries })
    }

    /// The entry at `path`.
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.get(path)
    }

    /// The bytes of the file at `path`, if it is one.
    pub fn bytes(&self, path: &str) -> Option<&[u8]> {
        match self.entries.get(path) {
            Some(Entry::File { bytes, .. }) => Some(bytes),
            _ => None,
        }
    }
}

fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, Entry>) -> Result<()> {
    let listing =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for item in listing {
        let item = item.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = item.path();
        let rel = path
            .strip_prefix(root)
            .expect("a listed entry lies under the folder listed")
            .to_str()
            .with_context(|| format!("{} is not a UTF-8 name", path.display()))?
            .to_owned();
        if dir == root && skip.contains(&rel.as_str()) {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("cannot look at {}", path.display()))?;
        let mode = crate::platform::mode_of(&meta);
        let ft = meta.file_type();
        let entry = if ft.is_symlink() {
            let target = std::fs::read_link(&path)
                .with_context(|| format!("cannot read the symlink {}", path.display()))?;
            Entry::Symlink { target }
        } else if ft.is_dir() {
            walk(root, &path, skip, out)?;
            Entry::Dir { mode }
        } else if ft.is_file() {
            let bytes =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            Entry::File { mode, bytes }
        } else {
            bail!(
                "{} is neither a file, a directory nor a symlink",
                path.display()
            );
        };
        out.insert(rel, entry);
    }
    Ok(())
}

/// Copies the folder `src` (`.git/` and `.turnback/` included) to the new
/// folder `dst`, keeping permission bits and symlinks, and checks that the
/// copy is identical.
pub fn copy_verified(src: &Path, dst: &Path) -> Result<()> {
    std::fs::create_dir(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    copy_dir(src, dst)?;
    let (a, b) = (Snapshot::take(src, &[])?, Snapshot::take(dst, &[])?);
    if a != b {
        bail!(
            "the copy {} of {} is not identical to it",
            dst.display(),
            src.display()
        );
    }
    Ok(())
}

fn copy_dir(src: &Path, dst: &Path) -> Result<()> {
    let listing =
        std::fs::read_dir(src).with_context(|| format!("cannot list {}", src.display()))?;
    for item in listing {
        let item = item.with_context(|| format!("cannot list {}", src.display()))?;
        let (from, to) = (item.path(), dst.join(item.file_name()));
        let meta = std::fs::symlink_metadata(&from)
            .with_context(|| format!("cannot look at {}", from.display()))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(&from)
                .with_context(|| format!("cannot read the symlink {}", from.display()))?;
            crate::platform::symlink(&target, &to)
                .with_context(|| format!("cannot create the symlink {}", to.display()))?;
        } else if ft.is_dir() {
            std::fs::create_dir(&to).with_context(|| format!("cannot create {}", to.display()))?;
            copy_dir(&from, &to)?;
            std::fs::set_permissions(&to, meta.permissions())
                .with_context(|| format!("cannot set the mode of {}", to.display()))?;
        } else {
            // Copies the permission bits too.
            std::fs::copy(&from, &to)
                .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        }
    }
    Ok(())
}

/// How a path differs from the folder as it should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// It should be there and is not.
    Missing,
    /// It is there and should not be.
    Extra,
    /// It is there with other contents, mode or type.
    Different,
}

impl How {
    pub fn as_str(self) -> &'static str {
        match self {
            How::Missing => "missing",
            How::Extra => "extra",
            How::Different => "different",
        }
    }
}

/// One path that differs.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub path: String,
    pub how: How,
    /// What is there instead, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A known version of the folder, to say which one a differing file now
/// holds ("the agent's version").
pub struct Known<'a> {
    pub name: &'a str,
    pub snapshot: &'a Snapshot,
}

/// Every path where `actual` differs from `expected`, in path order.
pub fn compare(expected: &Snapshot, actual: &Snapshot, known: &[Known]) -> Vec<Difference> {
    let mut paths: Vec<&String> = expected.entries.keys().collect();
    paths.extend(
        actual
            .entries
            .keys()
            .filter(|p| !expected.entries.contains_key(*p)),
    );
    paths.sort();
    let which = |path: &str, entry: &Entry| {
        known
            .iter()
            .find(|k| k.snapshot.get(path) == Some(entry))
            .map(|k| k.name.to_owned())
    };
    let mut out = Vec::new();
    for path in paths {
        let (how, detail) = match (expected.get(path), actual.get(path)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(_), None) => (How::Missing, None),
            (None, Some(b)) => (How::Extra, which(path, b)),
            (Some(a), Some(b)) => (How::Different, Some(describe_change(path, a, b, &which))),
            (None, None) => continue,
        };
        out.push(Difference {
            path: path.clone(),
            how,
            detail,
        });
    }
    out
}

fn describe_change(
    path: &str,
    expected: &Entry,
    actual: &Entry,
    which: &impl Fn(&str, &Entry) -> Option<String>,
) -> String {
    let mut parts = Vec::new();
    match (expected, actual) {
        (
            Entry::File {
                mode: ma,
                bytes: ba,
            },
            Entry::File {
                mode: mb,
                bytes: bb,
            },
        ) => {
            if ba != bb {
                parts.push(match which(path, actual) {
                    Some(name) => name,
                    None => format!("other contents ({} bytes, was {})", bb.len(), ba.len()),
                });
            }
            if ma != mb {
                parts.push(format!("mode {mb:o}, was {ma:o}"));
            }
        }
        (Entry::Symlink { .. }, Entry::Symlink { target }) => {
            parts.push(format!("points to {}", target.display()));
        }
        (Entry::Dir { mode: ma }, Entry::Dir { mode: mb }) => {
            parts.push(format!("mode {mb:o}, was {ma:o}"));
        }
        (a, b) => parts.push(format!("a {} where a {} was", b.kind(), a.kind())),
    }
    parts.join("; ")
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    type TestResult = Result<()>;

    fn write(root: &Path, rel: &str, bytes: &str, mode: u32) -> TestResult {
        let p = root.join(rel);
        std::fs::write(&p, bytes)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    }

    #[test]
    fn comparison_names_missing_extra_and_different_paths() -> TestResult {
        let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
        for d in [a.path(), b.path()] {
            write(d, "same.txt", "same\n", 0o644)?;
            std::fs::create_dir(d.join(".git"))?;
        }
        write(a.path(), "gone.txt", "x", 0o644)?;
        write(b.path(), "new.txt", "y", 0o644)?;
        write(a.path(), "edited.txt", "old", 0o644)?;
        write(b.path(), "edited.txt", "new", 0o644)?;
        write(a.path(), "chmod.sh", "run", 0o755)?;
        write(b.path(), "chmod.sh", "run", 0o644)?;
        write(b.path(), ".git/only-here", "z", 0o644)?;
        let (sa, sb) = (
            Snapshot::take(a.path(), &[".git"])?,
            Snapshot::take(b.path(), &[".git"])?,
        );
        let known = [Known {
            name: "the new version",
            snapshot: &sb,
        }];
        let diff = compare(&sa, &sb, &known);
        let got: Vec<(&str, How, Option<&str>)> = diff
            .iter()
            .map(|d| (d.path.as_str(), d.how, d.detail.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("chmod.sh", How::Different, Some("mode 644, was 755")),
                ("edited.txt", How::Different, Some("the new version")),
                ("gone.txt", How::Missing, None),
                ("new.txt", How::Extra, Some("the new version")),
            ]
        );
        assert!(compare(&sa, &sa, &known).is_empty());
        Ok(())
    }

    #[test]
    fn copies_are_identical_including_modes_and_symlinks() -> TestResult {
        let src = tempfile::tempdir()?;
        std::fs::create_dir(src.path().join("sub"))?;
        write(src.path(), "sub/run.sh", "#!/bin/sh\n", 0o755)?;
        write(src.path(), "ro.txt", "read only", 0o444)?;
        std::os::unix::fs::symlink("sub/run.sh", src.path().join("link"))?;
        std::fs::set_permissions(
            src.path().join("sub"),
            std::fs::Permissions::from_mode(0o700),
        )?;
        let dst = tempfile::tempdir()?;
        let to = dst.path().join("copy");
        copy_verified(src.path(), &to)?;
        assert_eq!(Snapshot::take(src.path(), &[])?, Snapshot::take(&to, &[])?);
        assert_eq!(
            Snapshot::take(&to, &[])?.get("link"),
            Some(&Entry::Symlink {
                target: "sub/run.sh".into()
            })
        );
        Ok(())
    }
}
