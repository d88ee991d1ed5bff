//! Paths inside the project, as the store keeps them.
//!
//! A [`RelPath`] is relative to the project root, `/`-separated, with no
//! empty, `.` or `..` component, no NUL, and not inside the root's own
//! `.git/` or `.turnback/` (the marker, see [`crate::location`]): a nested
//! repository `sub/.git/`, or a nested `sub/.turnback/`, is part of the
//! project and is covered like any folder. It
//! holds the bytes the file system gives for a name (Linux and macOS names
//! are bytes, not necessarily UTF-8) and gives them back exactly. Every path
//! read back from the log is parsed into a `RelPath` again before it is used,
//! so a hand-edited log cannot name a path outside the root or inside the
//! store.
//!
//! JSON form (in `log.jsonl`): a path whose bytes are valid UTF-8 is a JSON
//! string, `"src/a.rs"` (every log written before non-UTF-8 names were kept
//! reads as before); any other path is an object holding its bytes in
//! lowercase hex, `{"bytes_hex":"6b2fff"}` (for `k/` then the byte 0xFF). A
//! reader accepts both forms for any path.
//!
//! A backslash is an ordinary byte of a name on Linux and macOS (`a\..\b`
//! is one file in the directory), so it is held like any other.
//!
//! Shown to people ([`fmt::Display`]), a path is its UTF-8 text with each
//! byte that is not part of valid UTF-8 written `\xNN` and a backslash
//! written `\\`, so two different paths never look the same.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, PathProblem};

/// The marker's directory name under the project root (which holds the
/// store itself when it is kept in the project).
pub const STORE_DIR: &str = ".turnback";

/// The root's git directory: never covered, never written.
const GIT_DIR: &[u8] = b".git";

const MAX_PATH: usize = 4096;
const MAX_COMPONENT: usize = 255;

/// A validated path relative to the project root (raw bytes).
#[derive(Clone)]
pub struct RelPath(Repr);

/// A UTF-8 path is kept as its text; any other as its bytes with the
/// escaped text [`RelPath::as_str`] returns. Shared, not copied, by its
/// clones: a rewind of 100,000 files holds each path in the turn, the plan,
/// the saved states and the report, 13 MB of copies when each had its own.
#[derive(Clone)]
enum Repr {
    Text(Arc<str>),
    Raw(Arc<Raw>),
}

struct Raw {
    bytes: Vec<u8>,
    shown: String,
}

impl PartialEq for RelPath {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for RelPath {}

impl std::hash::Hash for RelPath {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialOrd for RelPath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RelPath {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl RelPath {
    fn new(bytes: Vec<u8>) -> RelPath {
        RelPath(match String::from_utf8(bytes) {
            Ok(text) => Repr::Text(text.into()),
            Err(e) => {
                let bytes = e.into_bytes();
                let shown = escaped(&bytes);
                Repr::Raw(Arc::new(Raw { bytes, shown }))
            }
        })
    }
}

impl RelPath {
    /// Parses a path in stored (normal) form.
    pub fn parse(s: &str) -> Result<Self, PathProblem> {
        RelPath::from_bytes(s.as_bytes())
    }

    /// Parses a path in stored form given as raw bytes (any encoding), for
    /// use on this platform: a name its file system cannot hold is refused
    /// too ([`RelPath::problem_here`]). What the user names, a walk finds
    /// or a capture records goes through here.
    pub fn from_bytes(s: &[u8]) -> Result<Self, PathProblem> {
        RelPath::check_bytes(s)?;
        Ok(RelPath::new(s.to_owned()))
    }

    /// Whether [`RelPath::from_bytes`] takes `s`, without making the path.
    pub(crate) fn check_bytes(s: &[u8]) -> Result<(), PathProblem> {
        RelPath::check_stored(s)?;
        match problem_in(s) {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }

    /// Parses a path as the store holds it, whichever platform wrote it:
    /// only what no platform allows is refused (empty, too long, NUL, an
    /// empty, `.` or `..` component, inside the root's `.git/` or
    /// `.turnback/`). The log and the checkpoint are read through here: a
    /// store made on Linux may hold `CON` or `a:b`, which Windows cannot
    /// hold. Such a path is whole, not damage; it is reported per path
    /// where the file system would be reached ([`RelPath::problem_here`]).
    pub fn from_stored(s: &[u8]) -> Result<Self, PathProblem> {
        RelPath::check_stored(s)?;
        Ok(RelPath::new(s.to_owned()))
    }

    /// Whether [`RelPath::from_stored`] takes `s`.
    fn check_stored(s: &[u8]) -> Result<(), PathProblem> {
        if s.is_empty() {
            return Err(PathProblem::Empty);
        }
        if s.len() > MAX_PATH {
            return Err(PathProblem::TooLong);
        }
        if s.contains(&0) {
            return Err(PathProblem::Nul);
        }
        for (i, comp) in s.split(|&b| b == b'/').enumerate() {
            if i == 0 && comp == GIT_DIR {
                return Err(PathProblem::InsideGit);
            }
            if i == 0 && comp == STORE_DIR.as_bytes() {
                return Err(PathProblem::InsideStore);
            }
            check_component(comp)?;
        }
        Ok(())
    }

    /// Builds a path from components that were each checked.
    pub(crate) fn from_components<S: AsRef<[u8]>>(comps: &[S]) -> Result<Self, PathProblem> {
        let joined = comps
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(&b'/');
        RelPath::from_bytes(&joined)
    }

    /// The path's bytes, `/`-separated.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Text(t) => t.as_bytes(),
            Repr::Raw(r) => &r.bytes,
        }
    }

    /// The path as a relative [`Path`] (exact bytes): what reaches a file.
    pub fn as_path(&self) -> &Path {
        Path::new(crate::sys::os_str(self.as_bytes()))
    }

    /// The path as text, when its bytes are valid UTF-8.
    pub fn to_str(&self) -> Option<&str> {
        match &self.0 {
            Repr::Text(t) => Some(t),
            Repr::Raw(_) => None,
        }
    }

    /// The path as text: exact when it is UTF-8, else with each byte that
    /// is not part of valid UTF-8 written `\xNN` (for people; reach the
    /// file with [`RelPath::as_path`]).
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Text(t) => t,
            Repr::Raw(r) => &r.shown,
        }
    }

    /// The components.
    pub fn components(&self) -> impl Iterator<Item = &OsStr> {
        self.as_bytes()
            .split(|&b| b == b'/')
            .map(crate::sys::os_str)
    }

    /// The parent directory, or `None` at the top level.
    pub fn parent(&self) -> Option<RelPath> {
        let b = self.as_bytes();
        let i = b.iter().rposition(|&c| c == b'/')?;
        Some(RelPath::new(b[..i].to_owned()))
    }

    /// The last component.
    pub fn file_name(&self) -> &OsStr {
        let b = self.as_bytes();
        let start = b.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1);
        crate::sys::os_str(&b[start..])
    }

    /// Number of components.
    pub fn depth(&self) -> usize {
        self.as_bytes().iter().filter(|&&b| b == b'/').count() + 1
    }

    /// Every proper ancestor, top-down (`a`, `a/b` for `a/b/c`).
    pub fn ancestors(&self) -> Vec<RelPath> {
        let mut out = Vec::new();
        let bytes = self.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'/' {
                out.push(RelPath::new(bytes[..i].to_owned()));
            }
        }
        out
    }

    /// Whether `self` is `other` or lies beneath it.
    pub fn starts_with(&self, other: &RelPath) -> bool {
        let (a, b) = (self.as_bytes(), other.as_bytes());
        a == b || (a.starts_with(b) && a.get(b.len()) == Some(&b'/'))
    }

    /// Why this platform's file system cannot hold the path, or `None`
    /// when it can: on Windows, the first component that breaks Windows'
    /// name rules ([`crate::names::windows_problem`]); never on Linux and
    /// macOS. Such a path is never looked up or written here (the name
    /// would reach a device, an alternate data stream, another file or
    /// another directory): a rewind reports it not restored, with this
    /// reason.
    pub fn problem_here(&self) -> Option<PathProblem> {
        problem_in(self.as_bytes())
    }

    /// [`RelPath::problem_here`] as a reason for people, naming the
    /// directory whose name is the problem when it is not the last
    /// component (`nul/a.txt`).
    pub(crate) fn reason_not_here(&self) -> Option<String> {
        let problem = self.problem_here()?;
        let bytes = self.as_bytes();
        let bad_dir = bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(|(i, _)| &bytes[..i])
            .find(|dir| {
                let name = dir.rsplit(|&b| b == b'/').next().unwrap_or(dir);
                crate::names::windows_problem(name).is_some()
            });
        Some(match bad_dir {
            Some(dir) => format!("{problem} (the directory {})", escaped(dir)),
            None => problem.to_string(),
        })
    }

    /// Joins one more component.
    pub fn join(&self, name: impl AsRef<[u8]>) -> Result<RelPath, PathProblem> {
        let mut p = self.as_bytes().to_owned();
        p.push(b'/');
        p.extend_from_slice(name.as_ref());
        RelPath::from_bytes(&p)
    }
}

fn check_component(comp: &[u8]) -> Result<(), PathProblem> {
    match comp {
        b"" | b"." | b".." => Err(PathProblem::NotNormal),
        c if c.len() > MAX_COMPONENT => Err(PathProblem::TooLong),
        _ => Ok(()),
    }
}

/// Writes `bytes` as UTF-8 text with each byte that is not part of valid
/// UTF-8 as `\xNN` and a backslash as `\\` (see the module doc).
pub fn write_escaped(f: &mut impl fmt::Write, bytes: &[u8]) -> fmt::Result {
    for chunk in bytes.utf8_chunks() {
        let mut parts = chunk.valid().split('\\');
        if let Some(first) = parts.next() {
            f.write_str(first)?;
        }
        for part in parts {
            f.write_str("\\\\")?;
            f.write_str(part)?;
        }
        for b in chunk.invalid() {
            write!(f, "\\x{b:02x}")?;
        }
    }
    Ok(())
}

/// `path` as people and shells spell it, without the verbatim prefix that
/// `std::fs::canonicalize` and `std::env::current_exe` may give it on
/// Windows: `\\?\C:\x` is `C:\x`, `\\?\UNC\host\share\x` is
/// `\\host\share\x` (cmd.exe cannot run a program named with the prefix,
/// and Git Bash reads `\\?\Z:\x` as `\?\Z:\x`; std adds it back where a
/// long path needs it). A verbatim path with no drive letter (a volume
/// GUID), one that is not valid Unicode and any other path are left as
/// they are. Text only: it does the same on every platform, where a path
/// never starts with the prefix but in a test.
pub fn strip_verbatim(path: &Path) -> PathBuf {
    let Some(text) = path.to_str() else {
        return path.to_path_buf();
    };
    if let Some(unc) = text.strip_prefix(r"\\?\UNC\") {
        return PathBuf::from(format!(r"\\{unc}"));
    }
    match text.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => PathBuf::from(rest),
        _ => path.to_path_buf(),
    }
}

/// `bytes` shown as [`write_escaped`] writes them.
pub fn escaped(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    write_escaped(&mut s, bytes).expect("writing to a String cannot fail");
    s
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped(f, self.as_bytes())
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

/// The JSON form of a path that is not UTF-8.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HexForm<'a> {
    #[serde(borrow)]
    bytes_hex: std::borrow::Cow<'a, str>,
}

impl Serialize for RelPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.to_str() {
            Some(text) => s.serialize_str(text),
            None => HexForm {
                bytes_hex: hex::encode(self.as_bytes()).into(),
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for RelPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A string, or the hex form: read as it comes, without buffering.
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RelPath;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"a path: a string or {"bytes_hex": "…"}"#)
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<RelPath, E> {
                checked(text.as_bytes())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RelPath, A::Error> {
                let h = HexForm::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let bytes = hex::decode(h.bytes_hex.as_ref()).map_err(|e| {
                    serde::de::Error::custom(format!("path {:?}: bad hex: {e}", h.bytes_hex))
                })?;
                checked(&bytes)
            }
        }
        fn checked<E: serde::de::Error>(bytes: &[u8]) -> Result<RelPath, E> {
            RelPath::from_stored(bytes)
                .map_err(|e| E::custom(format!("path {:?}: {e}", escaped(bytes))))
        }
        d.deserialize_any(V)
    }
}

/// The path `bytes` names if the store can hold it, else its nearest
/// ancestor that it can (with `false`): where a change to a path whose name
/// cannot be stored is recorded, so a rewind still names it.
pub(crate) fn nearest_storable(bytes: &[u8]) -> Option<(RelPath, bool)> {
    if let Ok(p) = RelPath::from_bytes(bytes) {
        return Some((p, true));
    }
    (0..bytes.len())
        .rev()
        .filter(|&i| bytes[i] == b'/')
        .find_map(|i| RelPath::from_bytes(&bytes[..i]).ok())
        .map(|p| (p, false))
}

/// Turns a caller's path (absolute, or relative to the root) into lexically
/// normalized components relative to `root`. `root` must be absolute and
/// canonical. Symlinks are not resolved here.
pub(crate) fn lexical_components(root: &Path, input: &Path) -> Result<Vec<Vec<u8>>, Error> {
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
    let mut out: Vec<Vec<u8>> = Vec::new();
    for comp in rel.components() {
        match comp {
            Component::Normal(c) => {
                out.push(c.as_encoded_bytes().to_owned());
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
        if let Ok(c) = crate::sys::canonicalize(existing) {
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

/// [`RelPath::problem_here`] of the path `bytes`.
fn problem_in(bytes: &[u8]) -> Option<PathProblem> {
    if !crate::sys::WINDOWS_NAMES {
        return None;
    }
    bytes
        .split(|&b| b == b'/')
        .find_map(crate::names::windows_problem)
        .map(PathProblem::NotOnWindows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verbatim_prefix_is_stripped_from_drive_and_unc_paths_only() {
        for (verbatim, plain) in [
            (r"\\?\Z:\tools\turnback.exe", r"Z:\tools\turnback.exe"),
            (r"\\?\c:\x", r"c:\x"),
            (r"\\?\UNC\server\share", r"\\server\share"),
            (
                r"\\?\UNC\server\share\bin\turnback.exe",
                r"\\server\share\bin\turnback.exe",
            ),
            // Left alone: no drive letter, no prefix.
            (r"\\?\Volume{0b1c}\x", r"\\?\Volume{0b1c}\x"),
            (r"\\server\share\x", r"\\server\share\x"),
            (r"C:\x", r"C:\x"),
            ("/usr/local/bin/turnback", "/usr/local/bin/turnback"),
        ] {
            assert_eq!(
                strip_verbatim(Path::new(verbatim)),
                Path::new(plain),
                "{verbatim}"
            );
        }
    }

    /// What no platform allows is damage everywhere; what Windows cannot
    /// hold is a whole stored path everywhere, refused for use on Windows
    /// only, with the reason (and the directory, when it is one).
    #[test]
    fn names_windows_cannot_hold_are_stored_paths_everywhere() {
        for name in [
            "CON",
            "aux.txt",
            "trail.",
            "a:b",
            "back\\slash",
            "nul/inside.txt",
        ] {
            let stored = RelPath::from_stored(name.as_bytes()).expect("a stored path");
            let json = serde_json::to_string(&stored).expect("serialize");
            assert_eq!(
                serde_json::from_str::<RelPath>(&json).expect("a log's path"),
                stored
            );
            let here = RelPath::parse(name);
            if cfg!(windows) {
                assert!(matches!(here, Err(PathProblem::NotOnWindows(_))), "{name}");
                assert!(stored.problem_here().is_some(), "{name}");
            } else {
                assert_eq!(here.as_ref(), Ok(&stored), "{name}");
                assert_eq!(stored.problem_here(), None, "{name}");
                assert_eq!(stored.reason_not_here(), None, "{name}");
            }
        }
        if cfg!(windows) {
            let inside = RelPath::from_stored(b"nul/inside.txt").expect("stored");
            let reason = inside.reason_not_here().unwrap_or_default();
            assert!(reason.ends_with("(the directory nul)"), "{reason}");
            let own = RelPath::from_stored(b"ok/CON").expect("stored");
            let reason = own.reason_not_here().unwrap_or_default();
            assert!(
                reason.contains("reserved device") && !reason.contains("directory"),
                "{reason}"
            );
        }
        for bad in ["../x", "a//b", ".git/x", ".turnback/log.jsonl"] {
            assert!(RelPath::from_stored(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_accepts_normal_paths() {
        for ok in [
            "a",
            "a/b.txt",
            ".env",
            "src/.gitignore",
            "dir/..x",
            "é/ü",
            "sub/.git/config",
        ] {
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
            (".git/hooks/pre-commit", PathProblem::InsideGit),
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
    #[cfg(unix)] // names of any bytes exist on Unix only
    fn any_bytes_but_nul_round_trip_and_show_unambiguously() {
        let p = RelPath::from_bytes(b"d\xfe/a\\b/\xff").expect("bytes are a name");
        assert_eq!(p.as_bytes(), b"d\xfe/a\\b/\xff");
        assert_eq!(p.to_string(), "d\\xfe/a\\\\b/\\xff");
        assert_eq!(p.to_str(), None);
        assert_eq!(p.file_name().as_encoded_bytes(), b"\xff");
        assert_eq!(
            p.parent().map(|q| q.to_string()).as_deref(),
            Some("d\\xfe/a\\\\b")
        );
        // Two paths never show the same: a literal `\xff` vs the byte.
        let literal = RelPath::parse("d\\xfe").expect("text");
        assert_ne!(
            literal.to_string(),
            RelPath::from_bytes(b"d\xfe").expect("bytes").to_string()
        );
        let json = serde_json::to_string(&p).expect("serialize");
        assert_eq!(json, r#"{"bytes_hex":"64fe2f615c622fff"}"#);
        assert_eq!(serde_json::from_str::<RelPath>(&json).expect("parse"), p);
        let text = RelPath::parse("src/é.rs").expect("text");
        assert_eq!(
            serde_json::to_string(&text).expect("serialize"),
            r#""src/é.rs""#
        );
        for bad in [
            r#"{"bytes_hex":"2e2e2f78"}"#,
            r#"{"bytes_hex":"zz"}"#,
            r#"{"bytes_hex":"61","x":1}"#,
            r#"{"bytes_hex":"2e6769742f78"}"#,
        ] {
            assert!(serde_json::from_str::<RelPath>(bad).is_err(), "{bad}");
        }
        assert_eq!(RelPath::from_bytes(b"a\0b"), Err(PathProblem::Nul));
    }

    #[test]
    fn a_name_too_long_to_store_is_recorded_at_its_nearest_ancestor() {
        let long = [b"d/".as_slice(), &[b'x'; 4100]].concat();
        let (p, own) = nearest_storable(&long).expect("an ancestor");
        assert_eq!((p.as_bytes(), own), (b"d".as_slice(), false));
        assert!(nearest_storable(&[b'x'; 4100]).is_none());
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
    #[cfg(unix)] // Unix path spellings
    fn lexical_components_resolves_dots_and_refuses_escapes() {
        let root = Path::new("/proj");
        let c = lexical_components(root, Path::new("/proj/a/./b/../c")).expect("inside");
        assert_eq!(c, [b"a", b"c"]);
        assert!(lexical_components(root, Path::new("a/../../x")).is_err());
        assert!(lexical_components(root, Path::new("/etc/passwd")).is_err());
        assert!(lexical_components(root, Path::new("/proj")).is_err());
        assert!(lexical_components(root, Path::new("..")).is_err());
    }
}
