//! The test environment: a temporary project folder and the real binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[path = "../common/portable.rs"]
mod portable;
#[cfg(unix)]
pub use portable::symlink;
pub use portable::{canonical, file_id, file_mode, mode_of, set_mode};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_turnback");

/// A command running the real binary in `cwd`, with no environment but PATH.
pub fn turnback_in(cwd: &Path) -> Command {
    Command::from_std(std_turnback_in(cwd))
}

/// `turnback_in` as a `std::process::Command`, for a test that spawns the
/// process and talks to it while it runs.
pub fn std_turnback_in(cwd: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(BIN);
    cmd.env_clear()
        .env(
            "TURNBACK_DATA_DIR",
            std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
        )
        .current_dir(cwd);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd
}

/// A temporary folder holding one project (and room beside it).
pub struct Project {
    _tmp: tempfile::TempDir,
    /// The folder that holds `root` (for paths outside the project).
    pub outer: PathBuf,
    /// The project root (canonical).
    pub root: PathBuf,
}

impl Project {
    pub fn new() -> Res<Project> {
        let tmp = tempfile::Builder::new().prefix("turnback-cli-").tempdir()?;
        let outer = canonical(tmp.path())?;
        let root = outer.join("project");
        std::fs::create_dir(&root)?;
        Ok(Project {
            _tmp: tmp,
            outer,
            root,
        })
    }

    /// Path of `rel` in the project.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file in the project, creating its directories.
    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> TestResult {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, bytes)?;
        Ok(())
    }

    pub fn chmod(&self, rel: &str, mode: u32) -> TestResult {
        set_mode(&self.path(rel), mode)?;
        Ok(())
    }

    pub fn mode(&self, rel: &str) -> Res<u32> {
        Ok(mode_of(&std::fs::metadata(self.path(rel))?))
    }

    pub fn read(&self, rel: &str) -> Res<Vec<u8>> {
        Ok(std::fs::read(self.path(rel))?)
    }

    pub fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.path(rel)).is_ok()
    }

    /// The binary, run in the project root.
    pub fn tb(&self) -> Command {
        turnback_in(&self.root)
    }

    /// Runs `turnback --json ARGS` in the root, expects exit 0, and parses
    /// its one line of output.
    pub fn json(&self, args: &[&str]) -> Res<Value> {
        let out = self.tb().arg("--json").args(args).assert().success();
        parse_json(&out.get_output().stdout)
    }

    /// Runs `turnback ARGS` in the root, expects exit 0, returns stdout.
    pub fn ok(&self, args: &[&str]) -> Res<String> {
        let out = self.tb().args(args).assert().success();
        Ok(String::from_utf8(out.get_output().stdout.clone())?)
    }

    /// Every file under the root (the store included), with its bytes and
    /// mode, to check that a command changed nothing.
    pub fn snapshot(&self) -> Res<Vec<(String, u32, Vec<u8>)>> {
        let mut out = Vec::new();
        walk(&self.root, &self.root, &mut out)?;
        out.sort();
        Ok(out)
    }

    /// Where the library keeps this project's store.
    pub fn store_dir(&self) -> Res<PathBuf> {
        Ok(turnback::Store::open(&self.root)?.store_dir().to_path_buf())
    }

    /// The project as compared between states: every path but the store
    /// (wherever the library keeps it), with its type, mode and bytes or
    /// symlink target, and the link groups (paths sharing an inode).
    pub fn state(&self) -> Res<State> {
        let store = self.store_dir()?;
        let mut tree = Vec::new();
        let mut inodes: BTreeMap<(u64, u64), BTreeSet<String>> = BTreeMap::new();
        walk_state(&self.root, &self.root, &store, &mut tree, &mut inodes)?;
        tree.sort();
        let links = inodes.into_values().filter(|g| g.len() > 1).collect();
        Ok(State { tree, links })
    }

    /// The store's log lines.
    pub fn log_lines(&self) -> Res<Vec<String>> {
        let text = std::fs::read_to_string(self.store_dir()?.join("log.jsonl"))?;
        Ok(text.lines().map(str::to_owned).collect())
    }
}

/// A project's contents and its link groups (see [`Project::state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// (path, mode, bytes or link target); directories end in `/`.
    pub tree: Vec<(String, u32, Vec<u8>)>,
    /// Sets of two or more paths that name one inode.
    pub links: BTreeSet<BTreeSet<String>>,
}

fn walk_state(
    root: &Path,
    dir: &Path,
    store: &Path,
    out: &mut Vec<(String, u32, Vec<u8>)>,
    inodes: &mut BTreeMap<(u64, u64), BTreeSet<String>>,
) -> TestResult {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        // The store, and the root's `.turnback/` marker (the store lives
        // outside the project unless kept there).
        if p == store || p == root.join(".turnback") {
            continue;
        }
        let meta = std::fs::symlink_metadata(&p)?;
        let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
        let mode = mode_of(&meta);
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&p)?;
            out.push((rel, 0, target.to_string_lossy().as_bytes().to_vec()));
        } else if meta.is_dir() {
            out.push((rel + "/", mode, Vec::new()));
            walk_state(root, &p, store, out, inodes)?;
        } else {
            inodes
                .entry(file_id(&p, &meta)?)
                .or_default()
                .insert(rel.clone());
            out.push((rel, mode, std::fs::read(&p)?));
        }
    }
    Ok(())
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u32, Vec<u8>)>) -> TestResult {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let meta = std::fs::symlink_metadata(&p)?;
        let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
        let mode = mode_of(&meta);
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&p)?;
            out.push((rel, 0, target.to_string_lossy().as_bytes().to_vec()));
        } else if meta.is_dir() {
            out.push((rel + "/", mode, Vec::new()));
            walk(root, &p, out)?;
        } else {
            out.push((rel, mode, std::fs::read(&p)?));
        }
    }
    Ok(())
}

/// Parses one line of JSON output.
pub fn parse_json(stdout: &[u8]) -> Res<Value> {
    let text = std::str::from_utf8(stdout)?;
    assert_eq!(
        text.lines().count(),
        1,
        "--json prints exactly one line: {text:?}"
    );
    Ok(serde_json::from_str(text)?)
}

/// The strings of a JSON array (or the given field of each object in it).
pub fn strings(v: &Value, field: Option<&str>) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| match field {
                    Some(f) => x.get(f).and_then(Value::as_str),
                    None => x.as_str(),
                })
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Stdout and stderr of a finished command, as text.
pub fn texts(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
