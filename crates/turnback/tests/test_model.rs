//! The store against an in-memory model, over random sequences of agent
//! actions: writes through the store (through symlinks too), captures
//! followed by the agent's own write, delete or symlink, new turns, rewinds
//! to a random live turn, and reopening the store from its log.
//!
//! The model keeps the folder's files (bytes and mode), symlinks and
//! directories, and for every live turn the folder as it was just before
//! it. After every
//! rewind the real folder must equal that state exactly; after every other
//! step it must equal the model's current state.
//!
//! Cases default to [`DEFAULT_CASES`] (a few seconds in a debug build);
//! `PROPTEST_CASES=N` runs more.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use turnback::{Error, PathProblem, RewindOptions, Store, TurnId};

use crate::common::{Node, Project, TestResult, Tree, diff, write_under};

const DEFAULT_CASES: u32 = 48;

/// Top-level and nested paths, so writes create directories and rewinds
/// remove them. None is the parent of another, so a symlink at one of them
/// never stands where a directory is needed.
const PATHS: &[&str] = &["a", "b", "d/c", "d/e/f", "d/e/g"];

#[derive(Debug, Clone)]
enum Step {
    /// The next capture starts a new turn.
    NewTurn,
    /// `Store::write`: capture, then the store writes.
    Write { path: usize, bytes: Vec<u8> },
    /// `Store::capture`, then the agent writes the file itself and sets its
    /// mode.
    CaptureThenWrite {
        path: usize,
        bytes: Vec<u8>,
        exec: bool,
    },
    /// `Store::capture`, then the agent deletes the file itself.
    CaptureThenDelete { path: usize },
    /// `Store::capture`, then the agent puts a relative symlink there
    /// pointing at another of the paths (which may be missing, or a link:
    /// chains and loops happen).
    CaptureThenSymlink { path: usize, to: usize },
    /// Rewind a live turn, picked at random.
    Rewind { pick: Index },
    /// Drop the store and open it again from its log.
    Reopen,
}

#[derive(Debug, Clone)]
struct Case {
    /// Files present before the first turn: (path, bytes, executable).
    initial: Vec<(usize, Vec<u8>, bool)>,
    steps: Vec<Step>,
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    // A small alphabet, so that identical contents (shared blobs) are common.
    prop::collection::vec(prop::sample::select(vec![b'x', b'y', b'\n', 0u8]), 0..12)
}

fn step() -> impl Strategy<Value = Step> {
    let path = 0..PATHS.len();
    prop_oneof![
        2 => Just(Step::NewTurn),
        4 => (path.clone(), bytes()).prop_map(|(path, bytes)| Step::Write { path, bytes }),
        3 => (path.clone(), bytes(), any::<bool>())
            .prop_map(|(path, bytes, exec)| Step::CaptureThenWrite { path, bytes, exec }),
        2 => path.clone().prop_map(|path| Step::CaptureThenDelete { path }),
        2 => (path.clone(), path).prop_map(|(path, to)| Step::CaptureThenSymlink { path, to }),
        2 => any::<Index>().prop_map(|pick| Step::Rewind { pick }),
        1 => Just(Step::Reopen),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0..PATHS.len(), bytes(), any::<bool>()), 0..4),
        prop::collection::vec(step(), 1..30),
    )
        .prop_map(|(initial, steps)| Case { initial, steps })
}

/// What stands at one of the paths.
#[derive(Debug, Clone)]
enum Entry {
    File(Vec<u8>, u32),
    /// A symlink to another of the paths, and its target as written.
    Link(&'static str, String),
}

/// What the folder should hold.
#[derive(Debug, Clone, Default)]
struct Model {
    files: BTreeMap<&'static str, Entry>,
    dirs: BTreeSet<String>,
}

/// The target, relative to the link's directory, of a link at `at` to `to`.
fn link_target(at: &str, to: &str) -> String {
    format!("{}{to}", "../".repeat(at.matches('/').count()))
}

fn path_index(path: &str) -> Option<&'static str> {
    PATHS.iter().copied().find(|p| *p == path)
}

impl Model {
    fn tree(&self) -> Tree {
        let mut t = Tree::new();
        for d in &self.dirs {
            t.insert(d.clone(), Node::Dir);
        }
        for (p, e) in &self.files {
            let node = match e {
                Entry::File(bytes, mode) => Node::File {
                    bytes: bytes.clone(),
                    mode: *mode,
                },
                Entry::Link(_, target) => Node::Symlink(PathBuf::from(target)),
            };
            t.insert((*p).to_owned(), node);
        }
        t
    }

    fn put(&mut self, path: &'static str, entry: Entry) {
        let mut parts: Vec<&str> = path.split('/').collect();
        parts.pop();
        for i in 1..=parts.len() {
            self.dirs.insert(parts[..i].join("/"));
        }
        self.files.insert(path, entry);
    }

    /// Where a write to `path` lands, following links; `None` for a loop.
    fn follow(&self, path: &'static str) -> Option<&'static str> {
        let mut cur = path;
        let mut seen = BTreeSet::new();
        while let Some(Entry::Link(to, _)) = self.files.get(cur) {
            if !seen.insert(cur) {
                return None;
            }
            cur = to;
        }
        Some(cur)
    }

    fn mode_of(&self, path: &str) -> u32 {
        match self.files.get(path) {
            Some(Entry::File(_, mode)) => *mode,
            _ => 0o644,
        }
    }
}

struct Run {
    project: Project,
    store: Store,
    model: Model,
    /// Live turns, oldest first, each with the folder as it was before it.
    live: Vec<(TurnId, Tree)>,
    /// Whether the last live turn still takes captures.
    open_turn: bool,
    next_id: u32,
}

impl Run {
    /// The turn the next capture belongs to, starting one if needed; and
    /// whether it was started now.
    fn current_turn(&mut self) -> TestResult<(TurnId, bool)> {
        let fresh = !self.open_turn || self.live.is_empty();
        if fresh {
            self.next_id += 1;
            let id = TurnId::new(format!("t{}", self.next_id))?;
            self.live.push((id, self.model.tree()));
            self.open_turn = true;
        }
        let (id, _) = self.live.last().ok_or("a turn was just started")?;
        Ok((id.clone(), fresh))
    }

    /// Removes whatever file or link stands at `rel`.
    fn clear(&mut self, rel: &'static str) -> TestResult {
        if self.model.files.remove(rel).is_some() {
            std::fs::remove_file(self.project.path(rel))?;
        }
        Ok(())
    }

    fn step(&mut self, step: &Step) -> TestResult {
        match step {
            Step::NewTurn => self.open_turn = false,
            Step::Write { path, bytes } => {
                let rel = PATHS[*path];
                let (t, fresh) = self.current_turn()?;
                let result = self.store.write(&t, None, rel, bytes);
                match self.model.follow(rel) {
                    Some(target) => {
                        result?;
                        let mode = self.model.mode_of(target);
                        self.model.put(target, Entry::File(bytes.clone(), mode));
                    }
                    None => {
                        // Writing through a symlink loop is refused before
                        // anything is captured.
                        match result {
                            Err(Error::BadPath {
                                reason: PathProblem::SymlinkLoop,
                                ..
                            }) => {}
                            other => {
                                return Err(format!(
                                    "a write through a symlink loop gave {other:?}"
                                )
                                .into());
                            }
                        }
                        if fresh {
                            self.live.pop();
                            self.open_turn = false;
                        }
                    }
                }
            }
            Step::CaptureThenWrite { path, bytes, exec } => {
                let rel = PATHS[*path];
                let (t, _) = self.current_turn()?;
                self.store.capture(&t, None, rel)?;
                let mode = if *exec { 0o755 } else { 0o644 };
                // The agent replaces what is there (a link too).
                self.clear(rel)?;
                write_under(&self.project.root, rel, bytes)?;
                self.project.chmod(rel, mode)?;
                self.model.put(rel, Entry::File(bytes.clone(), mode));
            }
            Step::CaptureThenDelete { path } => {
                let rel = PATHS[*path];
                let (t, _) = self.current_turn()?;
                self.store.capture(&t, None, rel)?;
                self.clear(rel)?;
            }
            Step::CaptureThenSymlink { path, to } => {
                let (rel, to) = (PATHS[*path], PATHS[*to]);
                let (t, _) = self.current_turn()?;
                self.store.capture(&t, None, rel)?;
                self.clear(rel)?;
                let target = link_target(rel, to);
                let at = self.project.path(rel);
                if let Some(parent) = at.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::os::unix::fs::symlink(&target, &at)?;
                self.model.put(rel, Entry::Link(to, target));
            }
            Step::Rewind { pick } => {
                if self.live.is_empty() {
                    return Ok(());
                }
                let k = pick.index(self.live.len());
                let (id, before) = self.live[k].clone();
                let report = self.store.rewind(&id, &RewindOptions::default())?;
                if !report.complete() {
                    return Err(format!("rewind of {id} incomplete: {:?}", report.failed).into());
                }
                let got = self.project.snapshot()?;
                if got != before {
                    return Err(format!(
                        "after rewinding {id}, the folder differs from its state before {id}:\n{}",
                        diff(&before, &got)
                    )
                    .into());
                }
                self.live.truncate(k);
                self.open_turn = false;
                self.model = model_of(&before)?;
            }
            Step::Reopen => self.store = Store::open(&self.project.root)?,
        }
        Ok(())
    }
}

/// The model of a snapshot taken from it.
fn model_of(tree: &Tree) -> TestResult<Model> {
    let mut m = Model::default();
    for (path, node) in tree {
        match node {
            Node::Dir => {
                m.dirs.insert(path.clone());
            }
            Node::File { bytes, mode } => {
                let p = path_index(path).ok_or_else(|| format!("unexpected file {path}"))?;
                m.files.insert(p, Entry::File(bytes.clone(), *mode));
            }
            Node::Symlink(target) => {
                let p = path_index(path).ok_or_else(|| format!("unexpected link {path}"))?;
                let to = PATHS
                    .iter()
                    .copied()
                    .find(|to| target.as_path() == std::path::Path::new(&link_target(p, to)))
                    .ok_or_else(|| format!("unexpected link target {}", target.display()))?;
                m.files.insert(p, Entry::Link(to, link_target(p, to)));
            }
        }
    }
    Ok(m)
}

fn run_case(case: &Case) -> TestResult {
    let project = Project::new()?;
    let mut model = Model::default();
    for (path, bytes, exec) in &case.initial {
        let rel = PATHS[*path];
        let mode = if *exec { 0o755 } else { 0o644 };
        write_under(&project.root, rel, bytes)?;
        std::fs::set_permissions(project.path(rel), std::fs::Permissions::from_mode(mode))?;
        model.put(rel, Entry::File(bytes.clone(), mode));
    }
    let store = project.open()?;
    let mut run = Run {
        project,
        store,
        model,
        live: Vec::new(),
        open_turn: false,
        next_id: 0,
    };
    for (i, step) in case.steps.iter().enumerate() {
        run.step(step)
            .map_err(|e| format!("step {i} ({step:?}): {e}"))?;
        let want = run.model.tree();
        let got = run.project.snapshot()?;
        if got != want {
            return Err(format!(
                "after step {i} ({step:?}) the folder differs from the model:\n{}",
                diff(&want, &got)
            )
            .into());
        }
        let ids: Vec<&TurnId> = run.store.turns()?.iter().map(|t| &t.id).collect();
        let want_ids: Vec<&TurnId> = run.live.iter().map(|(id, _)| id).collect();
        if ids != want_ids {
            return Err(format!(
                "after step {i} ({step:?}) the store's live turns are {ids:?}, not {want_ids:?}"
            )
            .into());
        }
    }
    Ok(())
}

#[test]
fn store_matches_model_over_random_turns_and_rewinds() -> TestResult {
    let mut config = Config {
        source_file: Some(file!()),
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = DEFAULT_CASES;
    }
    let mut runner = TestRunner::new(config);
    runner
        .run(&case(), |case| {
            run_case(&case).map_err(|e| TestCaseError::fail(e.to_string()))
        })
        .map_err(|e| e.to_string().into())
}
