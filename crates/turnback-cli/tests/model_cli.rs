//! The command line against a small reference model, over random
//! sequences: an agent's writes (`turnback write`) and shell commands
//! (`turnback exec`), the user's own edits (no turnback), `rewind`,
//! `revert`, `undo`, `redo` and `gc`, run with the real binary in a
//! temporary project. After every step the folder must equal the model's
//! byte for byte (files with their bytes and modes, directories, absent
//! paths), and `turnback --json list` must show the model's live turns,
//! oldest first, each with the number of paths it captured.
//!
//! The paths are few (`a`, `b`, `d/c`, `d/e/f` and the directories `d`,
//! `d/e`), so turns, commands and the user collide often.
//!
//! # The model
//!
//! The folder is a map path -> file bytes or directory. A turn keeps, per
//! path it changed, the path's state just before its first change in that
//! turn (a file tool's write also records the directories it created, a
//! shell command every path its command changed); a turn exists from its
//! first record on (a shell command's turn even when the command changed
//! nothing). Its semantics, from the README:
//!
//! - `rewind T`: every path captured in T or a later live turn gets its
//!   oldest state among those turns (the folder as it was before T), and
//!   those turns end. A path that a revert in effect kept (below) is still
//!   T's or a later turn's change: the reverted turn's state counts for it
//!   too, so the folder before T is given back whole. A state taken while
//!   an operation begun after T stood, which an undo has since reversed,
//!   counts as the state that operation saved (the outermost one's): the
//!   undo put that back, so it is what the folder held before T.
//! - `revert T`: the paths T captured that no later live turn captured get
//!   T's state; those a later live turn captured are kept as they are; T
//!   ends. A directory T made that cannot go (a later turn's or the user's
//!   files are in it) stays, and counts as kept.
//! - Both first save the state of every path they change (and of its
//!   directories); `undo` puts back what the last operation in effect
//!   saved and brings its turns back (saving what it replaces), `redo`
//!   does the same the other way. A path a turn brought back by the undo
//!   captured before the redo ended it again keeps the turn's change, and
//!   counts as kept, like a revert's. A new rewind or revert forgets what was
//!   undone; a new turn does not (as `Index::apply` has it).
//! - Putting states back: files and directories that must be there are
//!   made (with their missing directories), then paths that must not be
//!   there are removed, deepest first, a directory only once empty.
//! - The user's edits are nobody's turn: a rewind replaces them (a
//!   conflict, replaced by default) and `undo` brings them back.
//!
//! # Kills
//!
//! In the kill test every sequence runs one of its write, exec, rewind,
//! revert, undo or redo steps under `strace -f` with a SIGKILL injected at
//! the Nth call of a system call (openat, write, fsync, renameat, ...):
//! the step is first run in a copy of the project (its store is kept in
//! the project for that) to count the calls it makes, and one of those it
//! makes and N among its first 40 are drawn. A command that finished
//! anyway is checked as usual. One that was killed may have
//! happened or not (a write: not, its capture only, or whole): the
//! candidates are told apart by `turnback --json list` (and, for a write,
//! the folder); right after a killed rewind, revert, undo or redo each path
//! must hold its state in one of them. The next step is a command that
//! settles the killed one (an exec, rewind, revert, undo or redo; an exec
//! of `true` is put in if the sequence has none): after it the folder must
//! equal the candidate's exactly. A killed `exec` (its shell and the
//! commands it runs are traced too, so they may be killed part way) leaves
//! whatever its command did, each path as before it, as after it, or a
//! file it emptied: every change it made is its turn's, recorded by the
//! command or, once the command is killed between its halves, by the next
//! one.
//!
//! # Replay
//!
//! Every sequence has a seed, printed when it fails (`TURNBACK_SEED=N`
//! runs that sequence first), and a failing sequence is shrunk (steps and
//! shell actions left out while it still fails) and printed as a script
//! that [`replay`] runs: paste it into a `#[test]` (see the regression
//! tests at the end: the three bugs it found are fixed, and each stays as
//! a test of its own).
//!
//! Every process gets the lab's own `TURNBACK_DATA_DIR` and `HOME`, and
//! `TURNBACK_NO_BACKGROUND=1`.
//!
//! Cases: 200 sequences of 6 to 12 steps without kills and 200 with one
//! kill each (measured: 49 s and 58 s, run side by side, 2 cores, debug
//! build; about 97% of the kills land);
//! `TURNBACK_LONG=1` runs 3,000 of each; `TURNBACK_CASES=N` sets both.
//! `TURNBACK_KEEP_GOING=1` runs every sequence and reports every failure,
//! shrunk, instead of the first.
#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_turnback");

/// Files, none a directory of another; and the directories they live in.
const FILES: &[&str] = &["a", "b", "d/c", "d/e/f"];
const DIRS: &[&str] = &["d", "d/e"];

/// The system calls a kill is injected at.
const KILL_AT: &[&str] = &[
    "openat",
    "write",
    "pwrite64",
    "fsync",
    "fdatasync",
    "renameat",
    "renameat2",
    "unlinkat",
    "mkdirat",
    "linkat",
    "fchmod",
    "syncfs",
];

/// The marker turnback puts in the names of its temporary files.
const TEMP_MARK: &str = ".turnback-tmp-";

const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;

/// A test failure whose message is printed as it is (a `String`'s Debug
/// would escape its newlines).
pub struct Failure(String);

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure(e.to_string())
    }
}

type Res<T = ()> = Result<T, String>;

fn err(e: impl fmt::Display) -> String {
    e.to_string()
}

// ---------------------------------------------------------------------
// Steps and their script form
// ---------------------------------------------------------------------

/// One change to the folder, by a shell command or by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Act {
    /// Write a file (its directories made first).
    Put(String, Vec<u8>),
    /// Remove a file (nothing when absent).
    Rm(String),
    /// Remove a directory and everything in it.
    RmDir(String),
    /// Make a directory and its missing parents.
    MkDir(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Write {
        turn: String,
        path: String,
        bytes: Vec<u8>,
    },
    Exec {
        turn: String,
        acts: Vec<Act>,
    },
    User(Act),
    Rewind(String),
    Revert(String),
    /// `rewind TURN -- PATH`: that path (a file, or a folder and all below
    /// it) of the turn and the later ones.
    RewindPath(String, String),
    /// `revert TURN -- PATH`.
    RevertPath(String, String),
    Undo,
    Redo,
    Gc,
    /// `step` run under strace, killed at the `n`th call of `syscall`.
    Kill {
        syscall: String,
        n: u32,
        step: Box<Step>,
    },
}

fn quoted(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

impl fmt::Display for Act {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Act::Put(p, b) => write!(f, "put {p} {}", quoted(b)),
            Act::Rm(p) => write!(f, "rm {p}"),
            Act::RmDir(p) => write!(f, "rmdir {p}"),
            Act::MkDir(p) => write!(f, "mkdir {p}"),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Write { turn, path, bytes } => {
                write!(f, "write {turn} {path} {}", quoted(bytes))
            }
            Step::Exec { turn, acts } => {
                write!(f, "exec {turn}")?;
                for (i, a) in acts.iter().enumerate() {
                    write!(f, "{}{a}", if i == 0 { " " } else { " ; " })?;
                }
                Ok(())
            }
            Step::User(a) => write!(f, "user {a}"),
            Step::Rewind(t) => write!(f, "rewind {t}"),
            Step::Revert(t) => write!(f, "revert {t}"),
            Step::RewindPath(t, p) => write!(f, "rewind-path {t} {p}"),
            Step::RevertPath(t, p) => write!(f, "revert-path {t} {p}"),
            Step::Undo => f.write_str("undo"),
            Step::Redo => f.write_str("redo"),
            Step::Gc => f.write_str("gc"),
            Step::Kill { syscall, n, step } => write!(f, "kill {syscall} {n} {step}"),
        }
    }
}

/// The script form of steps, one a line.
fn script(steps: &[Step]) -> String {
    steps.iter().map(|s| format!("{s}\n")).collect()
}

/// Splits a script line into words, quoted strings (bytes) and `;`.
fn tokens(line: &str) -> Res<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut chars = line.bytes().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            b' ' | b'\t' => {
                chars.next();
            }
            b';' => {
                chars.next();
                out.push(b";".to_vec());
            }
            b'"' => {
                chars.next();
                let mut s = Vec::new();
                loop {
                    match chars.next().ok_or("unterminated string")? {
                        b'"' => break,
                        b'\\' => match chars.next().ok_or("unterminated escape")? {
                            b'n' => s.push(b'\n'),
                            b'x' => {
                                let hex: Vec<u8> = [chars.next(), chars.next()]
                                    .into_iter()
                                    .collect::<Option<_>>()
                                    .ok_or("short \\x escape")?;
                                let hex = std::str::from_utf8(&hex).map_err(err)?;
                                s.push(u8::from_str_radix(hex, 16).map_err(err)?);
                            }
                            other => s.push(other),
                        },
                        other => s.push(other),
                    }
                }
                // A quoted token is marked by a leading NUL.
                let mut t = vec![0];
                t.extend(s);
                out.push(t);
            }
            _ => {
                let mut w = Vec::new();
                while let Some(&c) = chars.peek() {
                    if matches!(c, b' ' | b'\t' | b';' | b'"') {
                        break;
                    }
                    w.push(c);
                    chars.next();
                }
                out.push(w);
            }
        }
    }
    Ok(out)
}

fn word(t: Option<&Vec<u8>>) -> Res<String> {
    let t = t.ok_or("missing word")?;
    if t.first() == Some(&0) {
        return Err("a word expected, not a string".into());
    }
    String::from_utf8(t.clone()).map_err(err)
}

fn bytes_tok(t: Option<&Vec<u8>>) -> Res<Vec<u8>> {
    match t {
        Some(t) if t.first() == Some(&0) => Ok(t[1..].to_vec()),
        _ => Err("a quoted string expected".into()),
    }
}

fn parse_act(toks: &[Vec<u8>]) -> Res<Act> {
    let kind = word(toks.first())?;
    let path = word(toks.get(1))?;
    let act = match kind.as_str() {
        "put" => Act::Put(path, bytes_tok(toks.get(2))?),
        "rm" => Act::Rm(path),
        "rmdir" => Act::RmDir(path),
        "mkdir" => Act::MkDir(path),
        other => return Err(format!("unknown action {other:?}")),
    };
    let len = if matches!(act, Act::Put(..)) { 3 } else { 2 };
    if toks.len() != len {
        return Err(format!("extra words after `{act}`"));
    }
    Ok(act)
}

fn parse_step(toks: &[Vec<u8>]) -> Res<Step> {
    let name = word(toks.first())?;
    let arity = |n: usize| {
        if toks.len() == n {
            Ok(())
        } else {
            Err(format!("`{name}` takes {} argument(s)", n - 1))
        }
    };
    Ok(match name.as_str() {
        "write" => {
            arity(4)?;
            Step::Write {
                turn: word(toks.get(1))?,
                path: word(toks.get(2))?,
                bytes: bytes_tok(toks.get(3))?,
            }
        }
        "exec" => {
            let turn = word(toks.get(1))?;
            let mut acts = Vec::new();
            for part in toks[2..].split(|t| t == b";") {
                if !part.is_empty() {
                    acts.push(parse_act(part)?);
                }
            }
            Step::Exec { turn, acts }
        }
        "user" => Step::User(parse_act(&toks[1..])?),
        "rewind" => {
            arity(2)?;
            Step::Rewind(word(toks.get(1))?)
        }
        "revert" => {
            arity(2)?;
            Step::Revert(word(toks.get(1))?)
        }
        "rewind-path" => {
            arity(3)?;
            Step::RewindPath(word(toks.get(1))?, word(toks.get(2))?)
        }
        "revert-path" => {
            arity(3)?;
            Step::RevertPath(word(toks.get(1))?, word(toks.get(2))?)
        }
        "undo" => {
            arity(1)?;
            Step::Undo
        }
        "redo" => {
            arity(1)?;
            Step::Redo
        }
        "gc" => {
            arity(1)?;
            Step::Gc
        }
        "kill" => Step::Kill {
            syscall: word(toks.get(1))?,
            n: word(toks.get(2))?.parse().map_err(err)?,
            step: Box::new(parse_step(&toks[3..])?),
        },
        other => return Err(format!("unknown step {other:?}")),
    })
}

/// Reads a script: one step a line; blank lines and `#` comments skipped.
fn parse_script(text: &str) -> Res<Vec<Step>> {
    let mut steps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let toks = tokens(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        steps.push(parse_step(&toks).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(steps)
}

// ---------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>),
    Dir,
}

type Folder = BTreeMap<String, Node>;
/// Path -> state (`None`: absent).
type States = BTreeMap<String, Option<Node>>;

/// `d/e/f` -> `d`, `d/e`.
fn ancestors(path: &str) -> Vec<String> {
    path.match_indices('/')
        .map(|(i, _)| path[..i].to_owned())
        .collect()
}

fn is_under(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

impl Act {
    fn path(&self) -> &str {
        match self {
            Act::Put(p, _) | Act::Rm(p) | Act::RmDir(p) | Act::MkDir(p) => p,
        }
    }

    /// What the act does to a folder.
    fn apply(&self, f: &mut Folder) {
        match self {
            Act::Put(p, b) => {
                for a in ancestors(p) {
                    f.entry(a).or_insert(Node::Dir);
                }
                f.insert(p.clone(), Node::File(b.clone()));
            }
            Act::Rm(p) => {
                if matches!(f.get(p), Some(Node::File(_))) {
                    f.remove(p);
                }
            }
            Act::RmDir(d) => f.retain(|p, _| p != d && !is_under(p, d)),
            Act::MkDir(d) => {
                for a in ancestors(d).into_iter().chain([d.clone()]) {
                    f.entry(a).or_insert(Node::Dir);
                }
            }
        }
    }

    /// The paths the act may change in `f`.
    fn touched(&self, f: &Folder) -> BTreeSet<String> {
        let absent_dirs = |p: &str| {
            ancestors(p)
                .into_iter()
                .filter(|a| !f.contains_key(a))
                .collect::<BTreeSet<_>>()
        };
        match self {
            Act::Put(p, _) => {
                let mut t = absent_dirs(p);
                t.insert(p.clone());
                t
            }
            Act::Rm(p) => [p.clone()].into(),
            Act::RmDir(d) => f
                .keys()
                .filter(|p| *p == d || is_under(p, d))
                .cloned()
                .chain([d.clone()])
                .collect(),
            Act::MkDir(d) => {
                let mut t = absent_dirs(d);
                if !f.contains_key(d) {
                    t.insert(d.clone());
                }
                t
            }
        }
    }

    /// The act as a shell command (`sh -c`); bytes written as octal
    /// escapes of `printf`.
    fn shell(&self) -> String {
        let parent = |p: &str| {
            p.rfind('/')
                .map(|i| format!("mkdir -p '{}' && ", &p[..i]))
                .unwrap_or_default()
        };
        match self {
            Act::Put(p, b) => {
                let esc: String = b.iter().map(|b| format!("\\{b:03o}")).collect();
                format!("{}printf '{esc}' > '{p}'", parent(p))
            }
            Act::Rm(p) => format!("rm -f '{p}'"),
            Act::RmDir(d) => format!("rm -rf '{d}'"),
            Act::MkDir(d) => format!("mkdir -p '{d}'"),
        }
    }

    /// The act done by hand, in the project at `root`.
    fn by_hand(&self, root: &Path) -> Res {
        let at = root.join(self.path());
        match self {
            Act::Put(_, b) => {
                if let Some(parent) = at.parent() {
                    std::fs::create_dir_all(parent).map_err(err)?;
                }
                std::fs::write(&at, b).map_err(err)?;
                std::fs::set_permissions(&at, std::fs::Permissions::from_mode(FILE_MODE))
                    .map_err(err)
            }
            Act::Rm(_) => match std::fs::remove_file(&at) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            },
            Act::RmDir(_) => match std::fs::remove_dir_all(&at) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            },
            Act::MkDir(_) => std::fs::create_dir_all(&at).map_err(err),
        }
    }
}

/// A turn: per path, its state before the turn first changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Turn {
    id: String,
    entries: Vec<(String, Option<Node>)>,
    /// When each entry was taken (the model's clock), in `entries`' order.
    at: Vec<u64>,
    /// When the turn began (its first record).
    start: u64,
    ended: bool,
    /// While a revert in effect ended the turn: the paths it kept (a later
    /// live turn had changed them too), still this turn's change.
    kept: BTreeSet<String>,
}

impl Turn {
    fn has(&self, path: &str) -> bool {
        self.entries.iter().any(|(p, _)| p == path)
    }

    fn note(&mut self, path: &str, pre: Option<Node>, at: u64) {
        if !self.has(path) {
            self.entries.push((path.to_owned(), pre));
            self.at.push(at);
        }
    }
}

/// A rewind or revert, in effect or undone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Applied {
    /// `rewind T` or `revert T`, for messages.
    what: String,
    /// The turns it ends.
    ended: Vec<String>,
    /// A revert: the paths it kept.
    kept: BTreeSet<String>,
    /// A rewind: the kept paths of reverted turns it undid, by turn.
    consumed: Vec<(String, String)>,
    /// What the next flip (undo or redo) puts back: the states it saved.
    saved: States,
    /// When its latest application (the operation, or its redo) began.
    at: u64,
}

/// An application of an operation that an undo reversed: from when it
/// began to the undo, a turn that captured a path it had changed took what
/// it left there; the undo put back `saved`, the states before it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Span {
    start: u64,
    until: u64,
    saved: States,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Model {
    folder: Folder,
    /// Every turn, in the order of their first records.
    turns: Vec<Turn>,
    /// Rewinds and reverts in effect, oldest first.
    done: Vec<Applied>,
    /// Undone ones, the last undone last.
    undone: Vec<Applied>,
    /// Every application an undo reversed.
    reversed: Vec<Span>,
    /// Counts the model's records: turns begun, entries taken, operations
    /// applied and undone (the order of the store's sequence numbers).
    clock: u64,
}

impl Model {
    fn turn_at(&self, id: &str) -> Option<usize> {
        self.turns.iter().position(|t| t.id == id)
    }

    fn live_at(&self, id: &str) -> Option<usize> {
        self.turn_at(id).filter(|&k| !self.turns[k].ended)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The turn `id`, made (last) when new.
    fn turn_mut(&mut self, id: &str) -> &mut Turn {
        let k = match self.turn_at(id) {
            Some(k) => k,
            None => {
                let start = self.tick();
                self.turns.push(Turn {
                    id: id.to_owned(),
                    entries: Vec::new(),
                    at: Vec::new(),
                    start,
                    ended: false,
                    kept: BTreeSet::new(),
                });
                self.turns.len() - 1
            }
        };
        &mut self.turns[k]
    }

    /// What `turnback list` shows: live turns, oldest first, with how many
    /// paths each captured.
    fn list(&self) -> Vec<(String, usize)> {
        self.turns
            .iter()
            .filter(|t| !t.ended)
            .map(|t| (t.id.clone(), t.entries.len()))
            .collect()
    }

    /// The folder as read from disk, modes included.
    fn tree(&self) -> Tree {
        self.folder
            .iter()
            .map(|(p, n)| {
                let mode = match n {
                    Node::File(_) => FILE_MODE,
                    Node::Dir => DIR_MODE,
                };
                (p.clone(), (n.clone(), mode))
            })
            .collect()
    }

    /// A file tool's capture of `path` in `turn`: the path and the
    /// directories a write would create, when the turn has not captured
    /// the path yet (a later write of it in the same turn records nothing,
    /// not even a directory it makes again: the first capture stands).
    fn capture(&mut self, turn: &str, path: &str) {
        if self.turn_at(turn).is_some_and(|k| self.turns[k].has(path)) {
            return;
        }
        let mut pre: Vec<(String, Option<Node>)> = ancestors(path)
            .into_iter()
            .filter(|a| !self.folder.contains_key(a))
            .map(|a| (a, None))
            .collect();
        pre.push((path.to_owned(), self.folder.get(path).cloned()));
        self.turn_mut(turn);
        let at = self.tick();
        let t = self.turn_mut(turn);
        for (p, s) in pre {
            t.note(&p, s, at);
        }
        self.forget_redo_if_changed(turn);
    }

    /// A turn that the undone operation on top would end again took in a
    /// new path: nothing can be redone any more (as `Index::apply` has it:
    /// redoing would end the turn and leave that path with its bytes).
    fn forget_redo_if_changed(&mut self, turn: &str) {
        if self
            .undone
            .last()
            .is_some_and(|op| op.ended.iter().any(|t| t == turn))
            && self.live_at(turn).is_some()
        {
            self.undone.clear();
        }
    }

    fn write(&mut self, turn: &str, path: &str, bytes: &[u8]) {
        self.capture(turn, path);
        Act::Put(path.to_owned(), bytes.to_vec()).apply(&mut self.folder);
    }

    /// Records in `turn` every path that differs from `before`. A shell
    /// command's turn exists once its command ran, even if it changed
    /// nothing (the after half records the turn).
    fn record_changes(&mut self, turn: &str, before: &Folder) {
        let paths: BTreeSet<String> = before.keys().chain(self.folder.keys()).cloned().collect();
        let changed: Vec<(String, Option<Node>)> = paths
            .into_iter()
            .filter(|p| before.get(p) != self.folder.get(p))
            .map(|p| {
                let pre = before.get(&p).cloned();
                (p, pre)
            })
            .collect();
        let fresh = !changed.is_empty();
        self.turn_mut(turn);
        let at = self.tick();
        let t = self.turn_mut(turn);
        let had = t.entries.len();
        for (p, pre) in changed {
            t.note(&p, pre, at);
        }
        if fresh && t.entries.len() > had {
            self.forget_redo_if_changed(turn);
        }
    }

    /// The current states of `paths` and their directories: what an
    /// operation saves before it changes them.
    fn save(&self, paths: impl IntoIterator<Item = String>) -> States {
        let mut all = BTreeSet::new();
        for p in paths {
            all.extend(ancestors(&p));
            all.insert(p);
        }
        all.into_iter()
            .map(|p| {
                let s = self.folder.get(&p).cloned();
                (p, s)
            })
            .collect()
    }

    /// Puts `states` back: what must be there is made (with its missing
    /// directories); what must not is removed, deepest first, a directory
    /// only once empty. Returns the directories that must go but stay,
    /// holding paths the states do not put there (each makes the exit
    /// code 3).
    fn put_back(&mut self, states: &States) -> Vec<String> {
        let needed: BTreeSet<String> = states
            .iter()
            .filter(|(_, s)| s.is_some())
            .flat_map(|(p, _)| ancestors(p))
            .collect();
        for (p, s) in states {
            if let Some(n) = s {
                for a in ancestors(p) {
                    self.folder.entry(a).or_insert(Node::Dir);
                }
                self.folder.insert(p.clone(), n.clone());
            }
        }
        let mut absent: Vec<&String> = states
            .iter()
            .filter(|(_, s)| s.is_none())
            .map(|(p, _)| p)
            .collect();
        absent.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
        let mut stay = Vec::new();
        for p in absent {
            let busy = self.folder.keys().any(|q| is_under(q, p));
            if !busy {
                self.folder.remove(p);
            } else if !needed.contains(p) {
                stay.push(p.clone());
            }
        }
        stay
    }

    /// What `rewind` of the turn at `k` puts back: per path, its oldest
    /// state among the live turns from `k` (and the kept paths of ended
    /// ones), where one taken while an application an undo reversed stood
    /// (begun after the turn at `k` did) counts as the state that
    /// application saved for it, the outermost one's; and the kept paths
    /// it takes, by turn.
    fn before_turn(&self, k: usize) -> (States, Vec<(String, String)>) {
        let mut oldest: BTreeMap<String, (u64, Option<Node>)> = BTreeMap::new();
        let mut consumed = Vec::new();
        for t in &self.turns[k..] {
            for ((p, pre), &at) in t.entries.iter().zip(&t.at) {
                if t.ended && !t.kept.contains(p) {
                    continue;
                }
                if t.ended {
                    consumed.push((t.id.clone(), p.clone()));
                }
                if oldest.get(p).is_none_or(|(had, _)| at < *had) {
                    oldest.insert(p.clone(), (at, pre.clone()));
                }
            }
        }
        let from = self.turns[k].start;
        let want = oldest
            .into_iter()
            .map(|(p, (at, pre))| {
                let outer = self
                    .reversed
                    .iter()
                    .filter(|s| s.start > from && s.start < at && at < s.until)
                    .filter(|s| s.saved.contains_key(&p))
                    .min_by_key(|s| s.start);
                let state = match outer {
                    Some(s) => s.saved[&p].clone(),
                    None => pre,
                };
                (p, state)
            })
            .collect();
        (want, consumed)
    }

    /// The exit code of `rewind id` (1: not a live turn).
    fn rewind(&mut self, id: &str) -> i32 {
        let Some(k) = self.live_at(id) else {
            return 1;
        };
        let (want, consumed) = self.before_turn(k);
        let saved = self.save(want.keys().cloned());
        let code = exit_code(&self.put_back(&want));
        let mut ended = Vec::new();
        for t in &mut self.turns[k..] {
            if !t.ended {
                t.ended = true;
                ended.push(t.id.clone());
            }
        }
        for (t, p) in &consumed {
            let k = self.turn_at(t).expect("a turn of the model");
            self.turns[k].kept.remove(p);
        }
        let at = self.tick();
        self.done.push(Applied {
            what: format!("rewind {id}"),
            ended,
            kept: BTreeSet::new(),
            consumed,
            saved,
            at,
        });
        self.undone.clear();
        code
    }

    /// The exit code of `revert id` (1: not a live turn).
    fn revert(&mut self, id: &str) -> i32 {
        let Some(k) = self.live_at(id) else {
            return 1;
        };
        let mut want = States::new();
        let mut kept = BTreeSet::new();
        for (p, pre) in &self.turns[k].entries {
            if self.turns[k + 1..].iter().any(|u| !u.ended && u.has(p)) {
                kept.insert(p.clone());
            } else {
                want.insert(p.clone(), pre.clone());
            }
        }
        let saved = self.save(want.keys().cloned());
        let stay = self.put_back(&want);
        let code = exit_code(&stay);
        // A directory it could not remove (it holds a later turn's or the
        // user's files) is still the turn's change, like a kept path.
        kept.extend(stay);
        self.turns[k].ended = true;
        self.turns[k].kept = kept.clone();
        let at = self.tick();
        self.done.push(Applied {
            what: format!("revert {id}"),
            ended: vec![id.to_owned()],
            kept,
            consumed: Vec::new(),
            saved,
            at,
        });
        self.undone.clear();
        code
    }

    /// The exit code of `rewind id -- path` (1: not a live turn, or a path
    /// none of the turns from it changed): the states of `rewind id` for
    /// `path` and below (and for the folders it lies in that the turns
    /// removed, made again); no turn ends, no kept path is consumed.
    fn rewind_path(&mut self, id: &str, path: &str) -> i32 {
        let Some(k) = self.live_at(id) else {
            return 1;
        };
        let (want, _) = self.before_turn(k);
        if !want.keys().any(|p| p == path || is_under(p, path)) {
            return 1;
        }
        self.take_back_paths(&format!("rewind {id} -- {path}"), limit(want, path))
    }

    /// The exit code of `revert id -- path`: the states of `revert id` for
    /// `path` and below; the turn stays live.
    fn revert_path(&mut self, id: &str, path: &str) -> i32 {
        let Some(k) = self.live_at(id) else {
            return 1;
        };
        let want: States = self.turns[k].entries.iter().cloned().collect();
        if !want.keys().any(|p| p == path || is_under(p, path)) {
            return 1;
        }
        let later = |p: &String| self.turns[k + 1..].iter().any(|u| !u.ended && u.has(p));
        let want: States = limit(want, path)
            .into_iter()
            .filter(|(p, _)| !later(p))
            .collect();
        self.take_back_paths(&format!("revert {id} -- {path}"), want)
    }

    /// Puts back `want` as an operation that ends no turn.
    fn take_back_paths(&mut self, what: &str, want: States) -> i32 {
        let saved = self.save(want.keys().cloned());
        let code = exit_code(&self.put_back(&want));
        let at = self.tick();
        self.done.push(Applied {
            what: what.to_owned(),
            ended: Vec::new(),
            kept: BTreeSet::new(),
            consumed: Vec::new(),
            saved,
            at,
        });
        self.undone.clear();
        code
    }

    /// Reverses the last operation in effect (`undo`) or the last undone
    /// one (`redo`); the exit code (1: there is none).
    fn flip(&mut self, undo: bool) -> i32 {
        let Some(mut op) = (if undo {
            self.done.pop()
        } else {
            self.undone.pop()
        }) else {
            return 1;
        };
        let now: States = op
            .saved
            .keys()
            .map(|p| (p.clone(), self.folder.get(p).cloned()))
            .collect();
        let code = exit_code(&self.put_back(&op.saved));
        for id in &op.ended {
            let k = self.turn_at(id).expect("a turn of the model");
            let t = &mut self.turns[k];
            t.ended = !undo;
            t.kept = if undo {
                BTreeSet::new()
            } else {
                // A path the turn captured once the undo brought it back is
                // not among the states the redo puts back: its change stays,
                // and is still the turn's (like a kept path).
                let later = t
                    .entries
                    .iter()
                    .map(|(p, _)| p)
                    .filter(|p| !op.saved.contains_key(*p))
                    .cloned();
                op.kept.iter().cloned().chain(later).collect()
            };
        }
        for (t, p) in &op.consumed {
            let k = self.turn_at(t).expect("a turn of the model");
            if undo {
                self.turns[k].kept.insert(p.clone());
            } else {
                self.turns[k].kept.remove(p);
            }
        }
        let at = self.tick();
        if undo {
            self.reversed.push(Span {
                start: op.at,
                until: at,
                saved: std::mem::take(&mut op.saved),
            });
        }
        op.saved = now;
        op.at = at;
        if undo {
            self.undone.push(op);
        } else {
            self.done.push(op);
        }
        code
    }

    /// Applies a step; `Some(code)`: the command's exit code.
    fn apply(&mut self, step: &Step) -> Option<i32> {
        Some(match step {
            Step::Write { turn, path, bytes } => {
                self.write(turn, path, bytes);
                0
            }
            Step::Exec { turn, acts } => {
                let before = self.folder.clone();
                for a in acts {
                    a.apply(&mut self.folder);
                }
                self.record_changes(turn, &before);
                0
            }
            Step::User(a) => {
                a.apply(&mut self.folder);
                return None;
            }
            Step::Rewind(t) => self.rewind(t),
            Step::Revert(t) => self.revert(t),
            Step::RewindPath(t, p) => self.rewind_path(t, p),
            Step::RevertPath(t, p) => self.revert_path(t, p),
            Step::Undo => self.flip(true),
            Step::Redo => self.flip(false),
            Step::Gc => 0,
            Step::Kill { step, .. } => return self.apply(step),
        })
    }

    /// Whether `step` is a command that settles a killed one first (and
    /// closes a killed command's window): it takes the store lock for a
    /// mutation and records like a snapshot half.
    fn settles(&self, step: &Step) -> bool {
        match step {
            Step::Exec { .. } => true,
            Step::Rewind(t) | Step::Revert(t) | Step::RewindPath(t, _) | Step::RevertPath(t, _) => {
                self.live_at(t).is_some()
            }
            Step::Undo => !self.done.is_empty(),
            Step::Redo => !self.undone.is_empty(),
            _ => false,
        }
    }

    /// Whether a write or exec in `turn` is one this test makes: in a new
    /// turn, or in the newest turn while it is live.
    fn may_use(&self, turn: &str) -> bool {
        match self.turn_at(turn) {
            None => true,
            Some(k) => k + 1 == self.turns.len() && !self.turns[k].ended,
        }
    }

    fn describe(&self) -> String {
        let show = |s: &Option<Node>| match s {
            None => "absent".to_owned(),
            Some(Node::Dir) => "dir".to_owned(),
            Some(Node::File(b)) => quoted(b),
        };
        let mut out = String::new();
        for t in &self.turns {
            let state = if !t.ended {
                "live".to_owned()
            } else if t.kept.is_empty() {
                "ended".to_owned()
            } else {
                format!("ended, kept {:?}", t.kept)
            };
            let entries: Vec<String> = t
                .entries
                .iter()
                .map(|(p, s)| format!("{p}: {}", show(s)))
                .collect();
            out.push_str(&format!(
                "    turn {} ({state}): {}\n",
                t.id,
                entries.join(", ")
            ));
        }
        let ops = |v: &[Applied]| v.iter().map(|a| a.what.clone()).collect::<Vec<_>>();
        out.push_str(&format!(
            "    in effect: {:?}; undone: {:?}\n",
            ops(&self.done),
            ops(&self.undone)
        ));
        out
    }
}

/// The exit code of an operation that left `stay` as they were.
fn exit_code(stay: &[String]) -> i32 {
    if stay.is_empty() { 0 } else { 3 }
}

// ---------------------------------------------------------------------
// The real folder and the binary
// ---------------------------------------------------------------------

/// Path -> (node, mode).
type Tree = BTreeMap<String, (Node, u32)>;

/// Reads the project (its `.turnback/` marker left out); names with the
/// temporary-file mark are returned apart.
fn read_tree(root: &Path) -> Res<(Tree, Vec<String>)> {
    fn walk(dir: &Path, prefix: &str, tree: &mut Tree, temps: &mut Vec<String>) -> Res {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(err)?
            .map(|e| {
                e.map_err(err)?
                    .file_name()
                    .into_string()
                    .map_err(|n| format!("a name that is not UTF-8: {n:?}"))
            })
            .collect::<Res<_>>()?;
        names.sort();
        for name in names {
            if prefix.is_empty() && name == ".turnback" {
                continue;
            }
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if name.contains(TEMP_MARK) {
                temps.push(rel);
                continue;
            }
            let path = dir.join(&name);
            let meta = std::fs::symlink_metadata(&path).map_err(err)?;
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                tree.insert(rel.clone(), (Node::Dir, mode));
                walk(&path, &rel, tree, temps)?;
            } else if meta.is_file() {
                let bytes = std::fs::read(&path).map_err(err)?;
                tree.insert(rel, (Node::File(bytes), mode));
            } else {
                return Err(format!("{rel} is neither a file nor a directory"));
            }
        }
        Ok(())
    }
    let mut tree = Tree::new();
    let mut temps = Vec::new();
    walk(root, "", &mut tree, &mut temps)?;
    Ok((tree, temps))
}

fn tree_nodes(tree: &Tree) -> Folder {
    tree.iter()
        .map(|(k, (n, _))| (k.clone(), n.clone()))
        .collect()
}

fn show_node(n: Option<&(Node, u32)>) -> String {
    match n {
        None => "absent".into(),
        Some((Node::Dir, m)) => format!("dir {m:o}"),
        Some((Node::File(b), m)) => format!("file {m:o} {}", quoted(b)),
    }
}

fn tree_diff(want: &Tree, got: &Tree) -> String {
    let keys: BTreeSet<&String> = want.keys().chain(got.keys()).collect();
    keys.into_iter()
        .filter(|k| want.get(*k) != got.get(*k))
        .map(|k| {
            format!(
                "    {k}: expected {}, found {}\n",
                show_node(want.get(k)),
                show_node(got.get(k))
            )
        })
        .collect()
}

/// A temporary folder: the project, and the data directory and home of
/// every process the test runs.
struct Lab {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    data: PathBuf,
    home: PathBuf,
}

impl Lab {
    fn new() -> Res<Lab> {
        let tmp = tempfile::Builder::new()
            .prefix("turnback-model-")
            .tempdir()
            .map_err(err)?;
        let base = std::fs::canonicalize(tmp.path()).map_err(err)?;
        let lab = Lab {
            root: base.join("project"),
            data: base.join("data"),
            home: base.join("home"),
            base,
            _tmp: tmp,
        };
        for d in [&lab.root, &lab.data, &lab.home] {
            std::fs::create_dir(d).map_err(err)?;
        }
        Ok(lab)
    }

    /// A copy of the lab, the store included (`cp -a`).
    fn copy(&self) -> Res<Lab> {
        let copy = Lab::new()?;
        for (from, to) in [
            (&self.root, &copy.root),
            (&self.data, &copy.data),
            (&self.home, &copy.home),
        ] {
            let out = Command::new("cp")
                .arg("-a")
                .arg(from.join("."))
                .arg(to)
                .output()
                .map_err(err)?;
            if !out.status.success() {
                return Err(format!("cp -a failed:\n{}", texts(&out)));
            }
        }
        Ok(copy)
    }

    /// The binary (under `wrapper`, strace and its options, when given)
    /// with `--root` and a cleared environment.
    fn command(&self, wrapper: &[String]) -> Command {
        let mut cmd = match wrapper.split_first() {
            None => Command::new(BIN),
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg("--").arg(BIN);
                c
            }
        };
        cmd.env_clear()
            .env("TURNBACK_DATA_DIR", &self.data)
            .env("HOME", &self.home)
            .env("TURNBACK_NO_BACKGROUND", "1")
            // The same thread count everywhere, so that strace's per-thread
            // call counts do not depend on the machine.
            .env("RAYON_NUM_THREADS", "2")
            .current_dir(&self.root)
            .arg("--root")
            .arg(&self.root);
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd
    }

    fn run(&self, args: &[String], stdin: &[u8], wrapper: &[String]) -> Res<Output> {
        let mut child = self
            .command(wrapper)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {BIN}: {e}"))?;
        let mut input = child.stdin.take().ok_or("no stdin")?;
        // A process killed before it reads its input closes the pipe.
        let _ = input.write_all(stdin);
        drop(input);
        child.wait_with_output().map_err(err)
    }

    /// `turnback --json list`: the live turns and how many paths each
    /// captured.
    fn list(&self) -> Res<Vec<(String, usize)>> {
        let out = self.run(&["--json".into(), "list".into()], b"", &[])?;
        if !out.status.success() {
            return Err(format!("turnback list failed:\n{}", texts(&out)));
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(err)?;
        v.as_array()
            .ok_or("list --json is not an array")?
            .iter()
            .map(|t| {
                let id = t["turn"].as_str().ok_or("a turn without id")?;
                let n = t["file_count"].as_u64().ok_or("a turn without files")?;
                Ok((id.to_owned(), n as usize))
            })
            .collect()
    }
}

fn texts(out: &Output) -> String {
    format!(
        "    status {:?}\n    stdout: {}\n    stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim_end(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    )
}

/// The strace options that kill the traced processes at the `n`th call of
/// `syscall` (counted per thread).
fn kill_wrapper(syscall: &str, n: u32) -> Vec<String> {
    [
        "strace",
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        &format!("trace={syscall}"),
        "-e",
        &format!("inject={syscall}:signal=KILL:when={n}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[cfg(target_os = "linux")]
#[path = "common/strace.rs"]
mod strace;
#[cfg(target_os = "linux")]
use strace::strace_problem;

// ---------------------------------------------------------------------
// Running steps against both
// ---------------------------------------------------------------------

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    sequences: usize,
    steps: usize,
    /// Steps run under strace, and those of them that were killed.
    traced: usize,
    killed: usize,
    /// Killed rewinds, reverts, undos and redos, by outcome.
    rolled_back: usize,
    landed: usize,
    /// Stray temporary files seen after a kill.
    temps: usize,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.sequences += o.sequences;
        self.steps += o.steps;
        self.traced += o.traced;
        self.killed += o.killed;
        self.rolled_back += o.rolled_back;
        self.landed += o.landed;
        self.temps += o.temps;
    }
}

struct Runner {
    lab: Lab,
    /// The states the folder and store may be in: one, except right after a
    /// kill, until the binary tells them apart.
    cands: Vec<Model>,
    /// The steps run, in order (settling execs put in included).
    ran: Vec<Step>,
    /// A command was killed: stray temporary files are tolerated.
    after_kill: bool,
    /// The last command was killed: the next must settle it.
    settle: bool,
    next_settle: u32,
    stats: Stats,
}

impl Runner {
    fn new() -> Res<Runner> {
        let lab = Lab::new()?;
        // The store in the project, so that a copy of it (see `arm_kill`)
        // has the same store and makes the same system calls.
        std::fs::create_dir(lab.root.join(".turnback")).map_err(err)?;
        std::fs::write(lab.root.join(".turnback/store.toml"), "in_project = true\n")
            .map_err(err)?;
        let mut m = Model::default();
        for act in [
            Act::Put("a".into(), b"a0\n".to_vec()),
            Act::Put("d/c".into(), b"c0\n".to_vec()),
        ] {
            act.by_hand(&lab.root)?;
            act.apply(&mut m.folder);
        }
        Ok(Runner {
            lab,
            cands: vec![m],
            ran: Vec::new(),
            after_kill: false,
            settle: false,
            next_settle: 0,
            stats: Stats::default(),
        })
    }

    fn model(&self) -> &Model {
        &self.cands[0]
    }

    /// Runs `step` (left out when it writes in a turn this test never
    /// writes in, as a shrunk script may); an exec of `true` first when a
    /// killed command waits to be settled and `step` would not settle it.
    fn step(&mut self, step: &Step) -> Res {
        let inner = match step {
            Step::Kill { step, .. } => step,
            s => s,
        };
        if let Step::Write { turn, .. } | Step::Exec { turn, .. } = inner
            && !self.model().may_use(turn)
        {
            return Ok(());
        }
        if self.settle && !self.model().settles(inner) {
            self.next_settle += 1;
            let s = Step::Exec {
                turn: format!("s{}", self.next_settle),
                acts: Vec::new(),
            };
            self.run_step(&s)?;
        }
        self.run_step(step)
    }

    fn run_step(&mut self, step: &Step) -> Res {
        self.ran.push(step.clone());
        self.stats.steps += 1;
        let settling = std::mem::take(&mut self.settle);
        let res = match step {
            Step::Kill { syscall, n, step } => self.killed(syscall, *n, step),
            _ => {
                let out = invoke(&self.lab, step, &[])?;
                let next = self.expect(step);
                self.check(next, out.as_ref(), true)
            }
        };
        res.map_err(|e| {
            let note = if settling {
                " (settling the killed step before it)"
            } else {
                ""
            };
            format!("step {} `{step}`{note}: {e}", self.ran.len())
        })
    }

    /// Each candidate after `step`, with whether the command must succeed.
    fn expect(&self, step: &Step) -> Vec<(Model, Option<i32>)> {
        self.cands
            .iter()
            .map(|m| {
                let mut m = m.clone();
                let ok = m.apply(step);
                (m, ok)
            })
            .collect()
    }

    /// Arms a kill for `step`: runs it in a copy of the lab under strace,
    /// counting the calls of each system call of [`KILL_AT`] (per thread,
    /// as strace's `when=` counts), and picks one it makes and a call of
    /// it, the Nth of at most 40.
    fn arm_kill(&self, step: Step, rng: &mut Rng) -> Res<Step> {
        let copy = self.lab.copy()?;
        let trace = copy.base.join("trace.txt");
        let wrapper: Vec<String> = ["strace", "-f", "-qq", "-o"]
            .iter()
            .map(|s| s.to_string())
            .chain([
                trace.display().to_string(),
                "-e".into(),
                format!("trace={}", KILL_AT.join(",")),
            ])
            .collect();
        invoke(&copy, &step, &wrapper)?;
        let text = std::fs::read_to_string(&trace).map_err(err)?;
        let mut per: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        for line in text.lines() {
            let Some((tid, rest)) = line.split_once(' ') else {
                continue;
            };
            let name = rest.trim_start().split('(').next().unwrap_or("");
            if let Some(sc) = KILL_AT.iter().find(|s| **s == name) {
                *per.entry((sc, tid)).or_default() += 1;
            }
        }
        let mut most: BTreeMap<&str, u32> = BTreeMap::new();
        for ((sc, _), n) in per {
            let e = most.entry(sc).or_default();
            *e = (*e).max(n);
        }
        let made: Vec<(&str, u32)> = most.into_iter().collect();
        let (syscall, n) = if made.is_empty() {
            (*rng.pick(KILL_AT), 1 + rng.index(40) as u32)
        } else {
            let (sc, count) = *rng.pick(&made);
            (sc, 1 + rng.index(count.min(40) as usize) as u32)
        };
        Ok(Step::Kill {
            syscall: syscall.to_owned(),
            n,
            step: Box::new(step),
        })
    }

    /// Keeps the candidates `next` that the binary agrees with: its exit
    /// status, `list`, and (with `folder`) the folder.
    fn check(
        &mut self,
        next: Vec<(Model, Option<i32>)>,
        out: Option<&Output>,
        folder: bool,
    ) -> Res {
        let (tree, temps) = read_tree(&self.lab.root)?;
        if !temps.is_empty() {
            if !self.after_kill {
                return Err(format!("temporary files left in the project: {temps:?}"));
            }
            self.stats.temps += temps.len();
        }
        let list = self.lab.list()?;
        let status_fits = |code: Option<i32>| match (code, out) {
            (Some(code), Some(o)) => o.status.code() == Some(code),
            _ => true,
        };
        let kept: Vec<Model> = next
            .iter()
            .filter(|(m, ok)| status_fits(*ok) && m.list() == list && (!folder || m.tree() == tree))
            .map(|(m, _)| m.clone())
            .collect();
        if kept.is_empty() {
            let mut msg = String::new();
            for (i, (m, ok)) in next.iter().enumerate() {
                if next.len() > 1 {
                    msg.push_str(&format!("  candidate {}:\n", i + 1));
                }
                if !status_fits(*ok) {
                    msg.push_str(&format!("  expected exit code {ok:?}\n"));
                }
                if m.list() != list {
                    msg.push_str(&format!(
                        "  live turns (turn, paths captured): expected {:?}, found {list:?}\n",
                        m.list()
                    ));
                }
                if folder && m.tree() != tree {
                    msg.push_str(&format!(
                        "  the folder differs:\n{}",
                        tree_diff(&m.tree(), &tree)
                    ));
                }
                msg.push_str(&format!("  model:\n{}", m.describe()));
            }
            if let Some(o) = out {
                msg.push_str(&format!("  command output:\n{}\n", texts(o)));
            }
            return Err(format!("the binary and the model disagree\n{msg}"));
        }
        self.cands = dedup(kept);
        Ok(())
    }

    /// Runs `step` under strace, killed at the `n`th `syscall`.
    fn killed(&mut self, syscall: &str, n: u32, step: &Step) -> Res {
        self.stats.traced += 1;
        let before = self.cands.clone();
        let out = invoke(&self.lab, step, &kill_wrapper(syscall, n))?
            .ok_or("a kill of a step that runs no command")?;
        let was_killed = out.status.signal() == Some(9);
        if was_killed {
            self.stats.killed += 1;
            self.after_kill = true;
        }
        match step {
            Step::Exec { turn, acts } => {
                // The shell and its commands are traced too: whatever the
                // command did is its turn's, as before, as after, or a file
                // it emptied (killed between the open and the write).
                let (tree, _) = read_tree(&self.lab.root)?;
                let mut next = Vec::new();
                for m in &before {
                    let mut after = m.folder.clone();
                    for a in acts {
                        a.apply(&mut after);
                    }
                    let keys: BTreeSet<&String> = m
                        .folder
                        .keys()
                        .chain(after.keys())
                        .chain(tree.keys())
                        .collect();
                    let partial = keys.into_iter().all(|k| {
                        let got = tree.get(k).map(|(n, _)| n);
                        got == m.folder.get(k)
                            || got == after.get(k)
                            || (got == Some(&Node::File(Vec::new()))
                                && matches!(after.get(k), Some(Node::File(_))))
                    });
                    if !partial {
                        return Err(format!(
                            "the traced command left a state that is not its own:\n{}",
                            tree_diff(&m.tree(), &tree)
                        ));
                    }
                    let mut c = m.clone();
                    c.folder = tree_nodes(&tree);
                    c.record_changes(turn, &m.folder);
                    next.push((c, None));
                    if was_killed && tree_nodes(&tree) == m.folder && m.turn_at(turn).is_none() {
                        // Killed before its window opened: no turn.
                        next.push((m.clone(), None));
                    }
                }
                if was_killed {
                    // Its turn is recorded by the next command at the
                    // latest: checked after it.
                    self.cands = dedup(next.into_iter().map(|(m, _)| m).collect());
                    self.settle = true;
                    Ok(())
                } else {
                    // turnback finished: its exit code is the command's.
                    self.check(next, None, true)
                }
            }
            _ if !was_killed => {
                let next = self.expect(step);
                self.check(next, Some(&out), true)
            }
            Step::Write { turn, path, .. } => {
                // Not done, its capture only (with the file's directories
                // made, or not yet), or whole: told apart by the folder and
                // the list.
                let mut next = Vec::new();
                for m in &before {
                    next.push((m.clone(), None));
                    let mut c = m.clone();
                    c.capture(turn, path);
                    next.push((c.clone(), None));
                    // Killed after it made some of the file's directories,
                    // shallowest first.
                    for dir in ancestors(path) {
                        if let std::collections::btree_map::Entry::Vacant(e) = c.folder.entry(dir) {
                            e.insert(Node::Dir);
                            next.push((c.clone(), None));
                        }
                    }
                    let mut w = m.clone();
                    w.apply(step);
                    next.push((w, None));
                }
                self.check(next, None, true)
            }
            Step::Rewind(_)
            | Step::Revert(_)
            | Step::RewindPath(..)
            | Step::RevertPath(..)
            | Step::Undo
            | Step::Redo => {
                // Rolled back by the next command, or done (its record
                // landed): the list tells which; until then each path holds
                // its state in one of them.
                let mut next = Vec::new();
                for m in &before {
                    next.push((m.clone(), None));
                    let mut d = m.clone();
                    if d.apply(step) != Some(1) {
                        next.push((d, None));
                    }
                }
                let (tree, _) = read_tree(&self.lab.root)?;
                let keys: BTreeSet<&String> = next
                    .iter()
                    .flat_map(|(m, _)| m.folder.keys())
                    .chain(tree.keys())
                    .collect();
                for k in keys {
                    let got = tree.get(k).map(|(n, _)| n);
                    if !next.iter().any(|(m, _)| m.folder.get(k) == got) {
                        return Err(format!(
                            "right after the kill {k} holds {}, a state of none of the outcomes",
                            show_node(tree.get(k))
                        ));
                    }
                }
                self.check(next, None, false)?;
                if self.cands.iter().all(|m| before.contains(m)) {
                    self.stats.rolled_back += 1;
                } else {
                    self.stats.landed += 1;
                }
                self.settle = true;
                Ok(())
            }
            _ => Err(format!("`{step}` is not a step a kill is injected in")),
        }
    }
}

/// `want` limited to `path` and below, and to the folders `path` lies in
/// that must be there (made again).
fn limit(want: States, path: &str) -> States {
    let dirs = ancestors(path);
    want.into_iter()
        .filter(|(p, s)| {
            p == path || is_under(p, path) || (dirs.contains(p) && s == &Some(Node::Dir))
        })
        .collect()
}

/// Runs the step's command in `lab` (under `wrapper`), or does the
/// user's edit.
fn invoke(lab: &Lab, step: &Step, wrapper: &[String]) -> Res<Option<Output>> {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (args, stdin) = match step {
        Step::Write { turn, path, bytes } => (s(&["write", "--turn", turn, path]), &bytes[..]),
        Step::Exec { turn, acts } => {
            let cmd = if acts.is_empty() {
                "true".to_owned()
            } else {
                acts.iter().map(Act::shell).collect::<Vec<_>>().join("; ")
            };
            (
                s(&["exec", "--turn", turn, "--", "sh", "-c", &cmd]),
                &b""[..],
            )
        }
        Step::User(a) => {
            a.by_hand(&lab.root)?;
            return Ok(None);
        }
        Step::Rewind(t) => (s(&["rewind", t]), &b""[..]),
        Step::Revert(t) => (s(&["revert", t]), &b""[..]),
        Step::RewindPath(t, p) => (s(&["rewind", t, "--", p]), &b""[..]),
        Step::RevertPath(t, p) => (s(&["revert", t, "--", p]), &b""[..]),
        Step::Undo => (s(&["undo"]), &b""[..]),
        Step::Redo => (s(&["redo"]), &b""[..]),
        Step::Gc => (s(&["gc"]), &b""[..]),
        Step::Kill { .. } => return Err("a kill inside a kill".into()),
    };
    let out = lab.run(&args, stdin, wrapper)?;
    if String::from_utf8_lossy(&out.stderr).contains("strace: ") {
        return Err(format!("strace failed:\n{}", texts(&out)));
    }
    Ok(Some(out))
}

fn dedup(v: Vec<Model>) -> Vec<Model> {
    let mut out: Vec<Model> = Vec::new();
    for m in v {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

// ---------------------------------------------------------------------
// Random sequences
// ---------------------------------------------------------------------

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

/// Picks the steps of one sequence as it runs (each from the state the
/// model is in).
struct Gen {
    rng: Rng,
    next_turn: u32,
    next_user: u32,
}

impl Gen {
    fn bytes(&mut self) -> Vec<u8> {
        let len = self.rng.index(5);
        (0..len).map(|_| *self.rng.pick(b"xy\n")).collect()
    }

    /// The newest turn while it is live (half the time), else a new one.
    fn turn(&mut self, m: &Model) -> String {
        if let Some(t) = m.turns.last()
            && !t.ended
            && self.rng.index(2) == 0
        {
            return t.id.clone();
        }
        self.next_turn += 1;
        format!("t{}", self.next_turn)
    }

    fn act(&mut self, f: &Folder, user: bool) -> Act {
        match self.rng.index(8) {
            0..=3 => {
                let path = self.rng.pick(FILES).to_string();
                let bytes = if user {
                    self.next_user += 1;
                    format!("u{}\n", self.next_user).into_bytes()
                } else {
                    let mut b = self.bytes();
                    // A command's write changes the file.
                    if f.get(&path) == Some(&Node::File(b.clone())) {
                        b.push(b'z');
                    }
                    b
                };
                Act::Put(path, bytes)
            }
            4 | 5 => Act::Rm(self.rng.pick(FILES).to_string()),
            6 => Act::RmDir(self.rng.pick(DIRS).to_string()),
            _ => Act::MkDir(self.rng.pick(DIRS).to_string()),
        }
    }

    /// A turn of `first` half the time (when there is one), else of `live`.
    /// A path to limit a rewind or revert of `turn` to: mostly one the
    /// turns from it changed, or its folder; now and then any path (one
    /// none of them changed is an error).
    fn path_in(&mut self, m: &Model, turn: &str) -> String {
        let k = m.turn_at(turn).unwrap_or(0);
        let changed: Vec<String> = m.turns[k..]
            .iter()
            .flat_map(|t| t.entries.iter().map(|(p, _)| p.clone()))
            .collect();
        if changed.is_empty() || self.rng.index(8) == 0 {
            return self.rng.pick(FILES).to_string();
        }
        let p = self.rng.pick(&changed).clone();
        match ancestors(&p).last() {
            Some(dir) if self.rng.index(3) == 0 => dir.clone(),
            _ => p,
        }
    }

    fn target(&mut self, live: &[String], first: &[String]) -> String {
        if !first.is_empty() && self.rng.index(2) == 0 {
            return self.rng.pick(first).clone();
        }
        self.rng.pick(live).clone()
    }

    /// One to three actions, none touching a path another one touches
    /// (a directory removed and made again would be a change the model
    /// does not see).
    fn acts(&mut self, m: &Model) -> Vec<Act> {
        let mut f = m.folder.clone();
        let mut touched = BTreeSet::new();
        let mut acts = Vec::new();
        for _ in 0..1 + self.rng.index(3) {
            let a = self.act(&f, false);
            let t = a.touched(&f);
            if t.iter().any(|p| touched.contains(p)) {
                continue;
            }
            touched.extend(t);
            a.apply(&mut f);
            acts.push(a);
        }
        acts
    }

    /// A step for model `m`; with `settle`, one that settles a killed
    /// command; with `kill`, one a kill may be injected in (armed by
    /// [`Runner::arm_kill`]).
    fn step(&mut self, m: &Model, settle: bool, kill: bool) -> Step {
        let live: Vec<String> = m
            .turns
            .iter()
            .filter(|t| !t.ended)
            .map(|t| t.id.clone())
            .collect();
        // Half the time, the turns whose rewind or revert meets a kept path
        // (the cases where ended turns' changes are still in effect).
        let rewind_first: Vec<String> = m
            .turns
            .iter()
            .enumerate()
            .filter(|(k, t)| {
                !t.ended
                    && m.turns[k + 1..]
                        .iter()
                        .any(|u| u.ended && !u.kept.is_empty())
            })
            .map(|(_, t)| t.id.clone())
            .collect();
        let revert_first: Vec<String> = m
            .turns
            .iter()
            .enumerate()
            .filter(|(k, t)| {
                !t.ended
                    && m.turns[k + 1..]
                        .iter()
                        .any(|u| !u.ended && t.entries.iter().any(|(p, _)| u.has(p)))
            })
            .map(|(_, t)| t.id.clone())
            .collect();
        loop {
            let step = match self.rng.index(20) {
                0..=3 => Step::Write {
                    turn: self.turn(m),
                    path: self.rng.pick(FILES).to_string(),
                    bytes: self.bytes(),
                },
                4..=6 => Step::Exec {
                    turn: self.turn(m),
                    acts: self.acts(m),
                },
                7 | 8 => Step::User(self.act(&m.folder, true)),
                9 | 10 if !live.is_empty() => Step::Rewind(self.target(&live, &rewind_first)),
                11 | 12 if !live.is_empty() => Step::Revert(self.target(&live, &revert_first)),
                // Undo and redo with nothing to reverse now and then.
                13 | 14 if !m.done.is_empty() || self.rng.index(4) == 0 => Step::Undo,
                15 if !m.undone.is_empty() || self.rng.index(4) == 0 => Step::Redo,
                16 => Step::Gc,
                17 | 18 if !live.is_empty() => {
                    let t = self.target(&live, &rewind_first);
                    let p = self.path_in(m, &t);
                    Step::RewindPath(t, p)
                }
                19 if !live.is_empty() => {
                    let t = self.target(&live, &revert_first);
                    let p = self.path_in(m, &t);
                    Step::RevertPath(t, p)
                }
                _ => continue,
            };
            if settle && !m.settles(&step) {
                continue;
            }
            let killable = match step {
                Step::Write { .. }
                | Step::Exec { .. }
                | Step::Rewind(_)
                | Step::Revert(_)
                | Step::RewindPath(..)
                | Step::RevertPath(..) => true,
                Step::Undo | Step::Redo => m.settles(&step),
                _ => false,
            };
            if kill && !killable {
                continue;
            }
            return step;
        }
    }
}

/// A failed sequence: the steps run and what went wrong.
struct Failed {
    steps: Vec<Step>,
    message: String,
}

/// Runs one random sequence.
fn run_random(seed: u64, with_kill: bool) -> Result<Stats, Failed> {
    let mut g = Gen {
        rng: Rng::seeded(seed),
        next_turn: 0,
        next_user: 0,
    };
    let len = 6 + g.rng.index(7);
    let kill_at = with_kill.then(|| len / 3 + g.rng.index(len - len / 3));
    let mut r = Runner::new().map_err(|message| Failed {
        steps: Vec::new(),
        message,
    })?;
    for i in 0..len {
        let kill = kill_at == Some(i);
        let mut step = g.step(r.model(), r.settle, kill);
        if kill {
            step = r.arm_kill(step, &mut g.rng).map_err(|message| Failed {
                steps: r.ran.clone(),
                message,
            })?;
        }
        if let Err(message) = r.step(&step) {
            return Err(Failed {
                steps: r.ran,
                message,
            });
        }
    }
    finish(r)
}

/// Settles a kill left at the end of a sequence and checks the result.
fn finish(mut r: Runner) -> Result<Stats, Failed> {
    if r.settle {
        let s = Step::Exec {
            turn: "s-end".into(),
            acts: Vec::new(),
        };
        if let Err(message) = r.step(&s) {
            return Err(Failed {
                steps: r.ran,
                message,
            });
        }
    }
    r.stats.sequences = 1;
    Ok(r.stats)
}

/// Runs `steps` in a fresh project.
fn run_steps(steps: &[Step]) -> Result<Stats, Failed> {
    let mut r = Runner::new().map_err(|message| Failed {
        steps: Vec::new(),
        message,
    })?;
    for s in steps {
        if let Err(message) = r.step(s) {
            return Err(Failed {
                steps: r.ran,
                message,
            });
        }
    }
    finish(r)
}

/// The size of a script, for shrinking: steps, then actions, then kills.
fn weight(steps: &[Step]) -> (usize, usize, usize) {
    let mut acts = 0;
    let mut kills = 0;
    for s in steps {
        let s = match s {
            Step::Kill { step, .. } => {
                kills += 1;
                step.as_ref()
            }
            s => s,
        };
        if let Step::Exec { acts: a, .. } = s {
            acts += a.len();
        }
    }
    (steps.len(), acts, kills)
}

/// Smaller scripts than `steps`: one step left out, one action of an exec
/// left out, one kill left out (the step run plainly).
fn smaller(steps: &[Step]) -> Vec<Vec<Step>> {
    let mut out = Vec::new();
    for i in (0..steps.len()).rev() {
        let mut v = steps.to_vec();
        v.remove(i);
        out.push(v);
    }
    for (i, s) in steps.iter().enumerate() {
        let (kill, inner) = match s {
            Step::Kill { syscall, n, step } => (Some((syscall.clone(), *n)), step.as_ref()),
            s => (None, s),
        };
        if let Step::Exec { turn, acts } = inner {
            for j in 0..acts.len() {
                let mut acts = acts.clone();
                acts.remove(j);
                let mut e = Step::Exec {
                    turn: turn.clone(),
                    acts,
                };
                if let Some((syscall, n)) = &kill {
                    e = Step::Kill {
                        syscall: syscall.clone(),
                        n: *n,
                        step: Box::new(e),
                    };
                }
                let mut v = steps.to_vec();
                v[i] = e;
                out.push(v);
            }
        }
        if kill.is_some() {
            let mut v = steps.to_vec();
            v[i] = inner.clone();
            out.push(v);
        }
    }
    out
}

/// Shrinks a failing script: smaller scripts are tried while one still
/// fails (at most `budget` runs).
fn shrink(mut f: Failed, budget: usize) -> Failed {
    let mut runs = 0;
    'outer: loop {
        for cand in smaller(&f.steps) {
            if runs >= budget {
                break 'outer;
            }
            runs += 1;
            if weight(&cand) >= weight(&f.steps) {
                continue;
            }
            if let Err(g) = run_steps(&cand) {
                f = Failed {
                    steps: cand,
                    message: g.message,
                };
                continue 'outer;
            }
        }
        break;
    }
    f
}

fn cases(default: usize) -> usize {
    if let Some(n) = std::env::var("TURNBACK_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return n;
    }
    if std::env::var("TURNBACK_LONG").is_ok_and(|v| v == "1") {
        3000
    } else {
        default
    }
}

#[allow(unsafe_code)] // the platform call of a test
fn set_umask() {
    // Files 0644 and directories 0755 for the shell commands, the user's
    // edits and the binary alike.
    // SAFETY: umask only sets this process's file mode creation mask.
    unsafe {
        libc::umask(0o022);
    }
}

/// Runs `count` random sequences; fails with the first failing one,
/// shrunk, as a script.
fn run_many(test: &str, count: usize, with_kill: bool) -> Result<(), Failure> {
    set_umask();
    let base = rng::env_seed(test);
    let started = std::time::Instant::now();
    let keep_going = std::env::var("TURNBACK_KEEP_GOING").is_ok_and(|v| v == "1");
    let mut stats = Stats::default();
    let mut failures = Vec::new();
    for i in 0..count as u64 {
        let seed = base.wrapping_add(i);
        match run_random(seed, with_kill) {
            Ok(s) => stats.add(&s),
            Err(f) => {
                let first = f.message.clone();
                let full = script(&f.steps);
                let f = shrink(f, 300);
                let report = format!(
                    "{test}: sequence {i} (seed {seed}: TURNBACK_SEED={seed} cargo test --test model_cli {test}) failed:\n{first}\n\nits steps:\n{full}\nshrunk to (paste into replay(r#\"...\"#)):\n{}\nwhich fails with:\n{}",
                    script(&f.steps),
                    f.message
                );
                if !keep_going {
                    return Err(Failure(report));
                }
                println!("{report}\n");
                failures.push(script(&f.steps));
            }
        }
    }
    println!(
        "{test}: {} sequences, {} steps ({} under strace, {} killed: {} rolled back, {} landed; {} stray temporary files) in {:.1?}",
        stats.sequences,
        stats.steps,
        stats.traced,
        stats.killed,
        stats.rolled_back,
        stats.landed,
        stats.temps,
        started.elapsed()
    );
    if !failures.is_empty() {
        return Err(Failure(format!(
            "{test}: {} of {count} sequences failed; shrunk:\n{}",
            failures.len(),
            failures.join("--\n")
        )));
    }
    Ok(())
}

/// Runs a script (the form a failing sequence is printed in) against the
/// binary and the model.
fn replay(text: &str) -> Result<(), Failure> {
    set_umask();
    let steps = parse_script(text)?;
    run_steps(&steps)
        .map(|_| ())
        .map_err(|f| Failure(format!("{}\n\nsteps run:\n{}", f.message, script(&f.steps))))
}

#[test]
fn cli_matches_model() -> Result<(), Failure> {
    run_many("cli_matches_model", cases(200), false)
}

#[cfg(target_os = "linux")]
#[test]
fn cli_matches_model_under_kills() -> Result<(), Failure> {
    if let Some(why) = strace_problem() {
        return Err(Failure(format!(
            "cli_matches_model_under_kills needs strace to inject kills: {why}"
        )));
    }
    run_many("cli_matches_model_under_kills", cases(200), true)
}

#[test]
fn script_form_reads_back() -> Result<(), Failure> {
    let steps = vec![
        Step::Write {
            turn: "t1".into(),
            path: "d/e/f".into(),
            bytes: b"x\"y\\\n\x01".to_vec(),
        },
        Step::Exec {
            turn: "t2".into(),
            acts: vec![
                Act::Put("a".into(), Vec::new()),
                Act::Rm("b".into()),
                Act::RmDir("d".into()),
                Act::MkDir("d/e".into()),
            ],
        },
        Step::Exec {
            turn: "t3".into(),
            acts: Vec::new(),
        },
        Step::User(Act::Put("b".into(), b"u1\n".to_vec())),
        Step::Rewind("t1".into()),
        Step::Revert("t2".into()),
        Step::Undo,
        Step::Redo,
        Step::Gc,
        Step::Kill {
            syscall: "renameat2".into(),
            n: 7,
            step: Box::new(Step::Undo),
        },
    ];
    let text = script(&steps);
    let back = parse_script(&text)?;
    if back != steps {
        return Err(Failure(format!("{text}\nread back as\n{back:?}")));
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Regressions: disagreements found, each as its smallest script
// ---------------------------------------------------------------------

/// A revert keeps `d` (a later turn changed it too) but puts back `d/e`
/// below it, so it makes `d` again; its `undo` removed `d/e` and left
/// `d`, which did not exist before the revert: the kept path's state had
/// been dropped from what the undo puts back. Found by
/// `cli_matches_model_under_kills` in CI (a killed `write` made the later
/// turn). In the shell, with `d/c` in the project:
///
/// ```sh
/// mkdir d/e
/// turnback exec --turn t2 -- rm -rf d
/// echo y | turnback write --turn t3 d/c
/// turnback exec --turn t4 -- rm -rf d
/// turnback revert t2 -- d  # kept d, d/c (t3, t4); restored d/e
/// turnback undo            # deleted d/e
/// ls d                     # an empty directory; expected: none
/// ```
#[test]
fn undo_of_a_revert_that_kept_a_directory_it_made_removes_it() -> Result<(), Failure> {
    replay(
        r#"
        user mkdir d/e
        exec t2 rmdir d
        write t3 d/c "y"
        exec t4 rmdir d
        revert-path t2 d
        undo
        "#,
    )
}

/// The same with the kept directory made by a later turn: the revert
/// keeps `d/e` (removed by `t2`), and its `undo` must remove the `d/e`
/// that `t3` made along with `d/e/f`, as the folder was before the revert.
#[test]
fn undo_of_a_revert_that_kept_a_directory_removes_what_was_made_below_it() -> Result<(), Failure> {
    replay(
        r#"
        write t1 d/e/f "xyyy"
        rewind-path t1 d/e/f
        exec t2 rmdir d/e
        revert t1
        exec t3 put d/e/f "xy\ny"
        undo
        "#,
    )
}

/// A revert that kept `a` (a later turn changed it too), then a rewind of
/// an earlier turn: `a` must be as it was before that turn, not as the
/// reverted turn left it. In the shell:
///
/// ```sh
/// echo original > f; echo x > x
/// echo X | turnback write --turn t1 x
/// echo t2-version | turnback write --turn t2 f
/// turnback exec --turn t3 -- rm f
/// turnback revert t2      # kept f: t3 changed it too
/// turnback rewind t1
/// cat f                   # t2-version; expected: original
/// ```
#[test]
fn revert_kept_then_rewind_of_an_earlier_turn() -> Result<(), Failure> {
    replay(
        r#"
        write t1 b "X\n"
        write t2 a "t2-version\n"
        exec t3 rm a
        revert t2
        rewind t1
        "#,
    )
}

/// `redo` used to end again the turns an undone rewind had ended while a
/// path one of them captured after the `undo` kept that turn's change (the
/// redo put back only the paths the rewind had planned), and a later
/// rewind of an earlier turn skipped it. Such a capture now forgets what
/// was undone: the redo is refused, and the rewind of the earlier turn
/// gives the path back. In the shell:
///
/// ```sh
/// echo a0 > a
/// echo X | turnback write --turn t3 b
/// echo x4 | turnback write --turn t4 b
/// turnback rewind t4
/// turnback undo                        # t4 live again
/// echo t4-a | turnback write --turn t4 a
/// turnback redo                        # exit 1: t4 changed since the undo
/// turnback rewind t3
/// cat a                                # a0, as before t3
/// ```
#[test]
fn redo_then_rewind_of_an_earlier_turn() -> Result<(), Failure> {
    replay(
        r#"
        write t3 b "X\n"
        write t4 b "x4\n"
        rewind t4
        undo
        write t4 a "t4-a\n"
        redo
        rewind t3
        "#,
    )
}

/// A killed `turnback write` leaves its temporary file
/// (`.f.turnback-tmp-PID-N`) in the project; a later shell command that
/// removes the directory records it in its turn as a file of the project,
/// and a rewind of that turn writes turnback's temporary file back into
/// the project. In the shell:
///
/// ```sh
/// mkdir -p d/e; echo c0 > d/c
/// strace -f -qq -o /dev/null -e trace=fsync -e inject=fsync:signal=KILL:when=1 \
///     turnback write --turn t4 d/e/f <<< y     # killed before its rename
/// ls -a d/e                                    # .f.turnback-tmp-18172-0
/// turnback exec --turn t4 -- rm -rf d
/// turnback show t4                             # lists d/e/.f.turnback-tmp-18172-0
/// turnback rewind t4                           # "restored d/e/.f.turnback-tmp-18172-0"
/// ```
#[cfg(target_os = "linux")]
#[test]
fn temporary_file_of_a_killed_write_is_not_the_projects() -> Result<(), Failure> {
    if let Some(why) = strace_problem() {
        return Err(Failure(format!("needs strace: {why}")));
    }
    replay(
        r#"
        exec t3 mkdir d/e
        kill fsync 1 write t4 d/e/f "y"
        exec t4 rmdir d
        rewind t4
        "#,
    )
}

/// A `write` killed before its rename leaves its temporary file in a
/// directory its turn made; a later turn deletes the file, and `revert`
/// of the first turn keeps the file as the later turn left it (absent) and
/// removes the directory the turn made. The temporary file, no one's, made
/// the directory look like it held a user's files: "left in place", exit
/// 3. Found by the long mode (`TURNBACK_LONG=1`, sequence 326 of 3,000).
#[cfg(target_os = "linux")]
#[test]
fn a_killed_writes_temporary_file_does_not_keep_a_directory_a_revert_removes() -> Result<(), Failure>
{
    if let Some(why) = strace_problem() {
        return Err(Failure(format!("needs strace: {why}")));
    }
    replay(
        r#"
        exec t1 put d/e/f "x"
        kill fsync 1 write t1 d/e/f "x"
        exec t2 rm d/e/f
        revert t1
        "#,
    )
}

/// A turn made while a rewind stood took what the rewind left as its
/// pre-images; the rewind's `undo` then put back what was there before
/// it, and a later rewind of a turn the undo brought back gave the stale
/// pre-image: it deleted a file an earlier, still live turn had made.
/// Found by the library's model test (`test_model_ops`). In the shell:
///
/// ```sh
/// echo f | turnback write --turn t1 d/e/f
/// turnback rewind t1
/// turnback undo
/// echo t2 | turnback write --turn t2 a
/// turnback rewind t1                   # d/e/f gone, t1 and t2 ended
/// echo t3 | turnback write --turn t3 d/e/f
/// turnback undo                        # d/e/f is t1's again; t1, t2 live
/// echo t4 | turnback write --turn t4 b
/// turnback rewind t2
/// cat d/e/f                            # was: no such file; expected: f
/// ```
#[test]
fn rewind_after_an_undo_with_a_turn_made_while_the_rewind_stood() -> Result<(), Failure> {
    replay(
        r#"
        write t1 d/e/f "f\n"
        rewind t1
        undo
        write t2 a "t2\n"
        rewind t1
        write t3 d/e/f "t3\n"
        undo
        write t4 b "t4\n"
        rewind t2
        "#,
    )
}

/// Runs the script in the file `TURNBACK_REPLAY` names (a failing sequence
/// as printed): `TURNBACK_REPLAY=case.txt cargo test --test model_cli --
/// --ignored replay_from_file`.
#[test]
#[ignore = "a tool: replays the script in the file TURNBACK_REPLAY names"]
fn replay_from_file() -> Result<(), Failure> {
    let path = std::env::var("TURNBACK_REPLAY")
        .map_err(|_| Failure("set TURNBACK_REPLAY to a script file".into()))?;
    replay(&std::fs::read_to_string(path)?)
}
