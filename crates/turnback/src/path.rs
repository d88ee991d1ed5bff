//! Paths inside the project, as the store keeps them.
//!
//! A [`RelPath`] is relative to the project root, UTF-8, `/`-separated, with
//! no empty, `.` or `..` component, no NUL or backslash, and no component
//! named `.git`, and no first component `.turnback` (the root's marker
//! directory; see [`crate::location`]). Every path read back from the log is parsed
//! into a `RelPath` again before it is used, so a hand-edited log cannot name
//! a path outside the root or inside the store.

use std::fmt;
use std::path::{Component, Path};

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Error, PathProblem};

/// The marker's directory name under the project root (which holds the
/// store itself when it is kept in the project).
pub const STORE_DIR: &str = ".turnback";

const MAX_PATH: usize = 4096;
const MAX_COMPONENT: usize = 255;

/// A validated path relative to the project root.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RelPath(String);

impl RelPath {
    /// Parses a path in stored (normal) form.
    pub fn parse(s: &str) -> Result<Self, PathProblem> {
        if s.is_empty() {
            return Err(PathProblem::Empty);
        }
        if s.len() > MAX_PATH {
            return Err(PathProblem::TooLong);
        }
        if s.contains('\0') {
            return Err(PathProblem::Nul);
        }
        if s.contains('\\') {
            return Err(PathProblem::Backslash);
        }
        for (i, comp) in s.split('/').enumerate() {
            check_component(comp, i == 0)?;
        }
        Ok(RelPath(s.to_owned()))
    }

    /// Builds a path from components that were each checked.
    pub(crate) fn from_components<S: AsRef<str>>(comps: &[S]) -> Result<Self, PathProblem> {
        let joined = comps
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join("/");
        RelPath::parse(&joined)
    }

    /// The path as a `/`-separated string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The components.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The parent directory, or `None` at the top level.
    pub fn parent(&self) -> Option<RelPath> {
        self.0.rsplit_once('/').map(|(p, _)| RelPath(p.to_owned()))
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit_once('/').map_or(&self.0, |(_, n)| n)
    }

    /// Number of components.
    pub fn depth(&self) -> usize {
        self.0.split('/').count()
    }

    /// Every proper ancestor, top-down (`a`, `a/b` for `a/b/c`).
    pub fn ancestors(&self) -> Vec<RelPath> {
        let mut out = Vec::new();
        for (i, b) in self.0.bytes().enumerate() {
            if b == b'/' {
                out.push(RelPath(self.0[..i].to_owned()));
            }
        }
        out
    }

    /// Whether `self` is `other` or lies beneath it.
    pub fn starts_with(&self, other: &RelPath) -> bool {
        self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }

    /// Joins one more component.
    pub fn join(&self, name: &str) -> Result<RelPath, PathProblem> {
        RelPath::parse(&format!("{}/{}", self.0, name))
    }
}

/// `top`: the component is the first one, directly under the root. Only
/// the root's `.turnback` is turnback's (the marker, or an in-project
/// store); one deeper is the user's like any other name.
fn check_component(comp: &str, top: bool) -> Result<(), PathProblem> {
    match comp {
        "" | "." | ".." => Err(PathProblem::NotNormal),
        ".git" => Err(PathProblem::InsideGit),
        STORE_DIR if top => Err(PathProblem::InsideStore),
        c if c.len() > MAX_COMPONENT => Err(PathProblem::TooLong),
        _ => Ok(()),
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl<'de> Deserialize<'de> for RelPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        RelPath::parse(&s).map_err(|e| serde::de::Error::custom(format!("path {s:?}: {e}")))
    }
}

/// Turns a caller's path (absolute, or relative to the root) into lexically
/// normalized components relative to `root`. `root` must be absolute and
/// canonical. Symlinks are not resolved here.
pub(crate) fn lexical_components(root: &Path, input: &Path) -> Result<Vec<String>, Error> {
    let shown = input.to_string_lossy().into_owned();
    let bad = |reason| Error::BadPath {
        path: shown.clone(),
        reason,
    };
    if input.as_os_str().is_empty() {
        return Err(bad(PathProblem::Empty));
    }
    let rel: &Path = if input.is_absolute() {
        match input.strip_prefix(root) {
            Ok(rel) => rel,
            Err(_) => {
                // The caller may name the root through a symlink (/tmp vs /private/tmp).
                return match canonical_prefix(input)
                    .and_then(|c| c.strip_prefix(root).ok().map(|r| r.to_path_buf()))
                {
                    Some(rel) => lexical_components(root, &rel),
                    None => Err(bad(PathProblem::OutsideRoot)),
                };
            }
        }
    } else {
        input
    };
    let mut out: Vec<String> = Vec::new();
    for comp in rel.components() {
        match comp {
            Component::Normal(c) => {
                let c = c.to_str().ok_or_else(|| bad(PathProblem::NotUtf8))?;
                if c.contains('\\') {
                    return Err(bad(PathProblem::Backslash));
                }
                out.push(c.to_owned());
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if out.pop().is_none() {
                    return Err(bad(PathProblem::OutsideRoot));
                }
            }
            Component::RootDir | Component::Prefix(_) => return Err(bad(PathProblem::OutsideRoot)),
        }
    }
    if out.is_empty() {
        return Err(bad(PathProblem::Empty));
    }
    Ok(out)
}

/// Canonicalizes the longest existing ancestor of `p` and appends the rest.
fn canonical_prefix(p: &Path) -> Option<std::path::PathBuf> {
    let mut existing = p;
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            let mut out = c;
            for r in rest.iter().rev() {
                out.push(r);
            }
            return Some(out);
        }
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_normal_paths() {
        for ok in ["a", "a/b.txt", ".env", "src/.gitignore", "dir/..x", "é/ü"] {
            assert!(RelPath::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn parse_rejects_hostile_paths() {
        let cases = [
            ("", PathProblem::Empty),
            ("/etc/passwd", PathProblem::NotNormal),
            ("../x", PathProblem::NotNormal),
            ("a/../../x", PathProblem::NotNormal),
            ("a//b", PathProblem::NotNormal),
            ("./a", PathProblem::NotNormal),
            ("a/", PathProblem::NotNormal),
            ("a\0b", PathProblem::Nul),
            ("a\\..\\b", PathProblem::Backslash),
            (".git/hooks/pre-commit", PathProblem::InsideGit),
            ("sub/.git/config", PathProblem::InsideGit),
            (".turnback/log.jsonl", PathProblem::InsideStore),
        ];
        for (input, want) in cases {
            assert_eq!(RelPath::parse(input), Err(want), "{input:?}");
        }
        // A nested `.turnback` is the user's: only the root's is turnback's.
        assert!(RelPath::parse("a/.turnback/f").is_ok());
        assert_eq!(
            RelPath::parse(&"a/".repeat(3000)),
            Err(PathProblem::TooLong)
        );
        assert_eq!(RelPath::parse(&"x".repeat(256)), Err(PathProblem::TooLong));
    }

    #[test]
    fn ancestors_and_prefixes() {
        let p = RelPath::parse("a/b/c").expect("valid");
        let anc: Vec<_> = p.ancestors().iter().map(|a| a.to_string()).collect();
        assert_eq!(anc, ["a", "a/b"]);
        assert!(p.starts_with(&RelPath::parse("a/b").expect("valid")));
        assert!(!p.starts_with(&RelPath::parse("a/bc").expect("valid")));
        assert_eq!(p.parent().map(|p| p.to_string()).as_deref(), Some("a/b"));
        assert_eq!(p.file_name(), "c");
    }

    #[test]
    fn lexical_components_resolves_dots_and_refuses_escapes() {
        let root = Path::new("/proj");
        let c = lexical_components(root, Path::new("/proj/a/./b/../c")).expect("inside");
        assert_eq!(c, ["a", "c"]);
        assert!(lexical_components(root, Path::new("a/../../x")).is_err());
        assert!(lexical_components(root, Path::new("/etc/passwd")).is_err());
        assert!(lexical_components(root, Path::new("/proj")).is_err());
        assert!(lexical_components(root, Path::new("..")).is_err());
    }
}
