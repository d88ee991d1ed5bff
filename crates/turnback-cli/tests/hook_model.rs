//! Claude Code's hooks against a small reference model, over random
//! interleavings of several sessions' events in one project folder:
//! prompts, Write tool calls (some of them a background subagent's, with
//! an earlier prompt's `prompt_id`), Bash calls (PreToolUse, the
//! command's file changes, PostToolUse; or no PostToolUse at all: the user
//! interrupted it), Bash calls run in the background (PostToolUse at once,
//! the command's changes after it) and the user's own edits. Every event
//! goes through the hook command `turnback init claude-code` wrote, run by
//! `sh -c` in the project as Claude Code runs it; the test makes each
//! tool's file changes itself.
//!
//! After the events, `turnback --json list` and `turnback --json show T`
//! must give the model's live turns, oldest first, each with its prompt's
//! label and the set of paths it captured. Then turns are rewound (the
//! latest first, then a random earlier live turn, until none is left), and
//! after each rewind the folder must be the model's byte for byte and the
//! live turns the model's.
//!
//! The paths are few (`a`, `b`, `c`, `e`, all at the top), so sessions,
//! commands and the user collide often.
//!
//! # The model
//!
//! It follows the rules of `commands/hook/engine.rs` and
//! `snapshot/attribution.rs` (their module docs) and the README:
//!
//! - Session `x`'s prompt `k` is turn `claude-xxxxxxxx-k`, labelled with the
//!   prompt's first line. A Write with the `prompt_id` of an earlier prompt
//!   of its session (a background subagent) is that earlier prompt's turn.
//! - A turn exists from its first record on: a Write's capture of a path
//!   the turn has not captured, or a scan that records in it. The turns are
//!   ordered by their first record.
//! - A Write's PreToolUse captures the path's current state in its turn
//!   (the first capture of a path in a turn wins). Its change belongs to
//!   that turn alone: a path a file tool captured since the last scan is
//!   recorded by that scan in no command's turn.
//! - Every Bash PreToolUse and PostToolUse scans the folder; so does a
//!   prompt, and the closing half a rewind takes first, when any window is
//!   open. A scan records each path that changed since the last scan (not
//!   one a file tool captured meanwhile) in the turn of every window open
//!   during that time, with the path's state at the last scan (a turn
//!   that has the path keeps its earlier capture). The records go in the
//!   order the windows opened; a window's turn gets a record even when
//!   nothing changed, so a turn that does not exist yet is created there.
//!   No window open: the changes are nobody's. The very first scan has no
//!   last scan to compare with and records nothing.
//! - Windows: a Bash PreToolUse opens its session's window, in the turn of
//!   the session's current prompt; its PostToolUse closes it (a background
//!   call's PostToolUse leaves it open). The session's next prompt and its
//!   next Bash PreToolUse close the windows its hooks left open (an
//!   interrupted call, a background command): one command of a session at
//!   a time. Another session's events close none. A rewind closes them all.
//! - `rewind T`: every path captured in T or a later live turn gets its
//!   oldest capture's state among those turns (the folder as it was before
//!   T, for the paths those turns changed); every other path is left as it
//!   is (the changes that were nobody's, the user's edits no window saw);
//!   those turns end. A user's edit of a captured path is a conflict,
//!   replaced by default.
//!
//! # Replay
//!
//! Every sequence has a seed, printed when it fails (`TURNBACK_SEED=N`
//! runs that sequence first); a failing sequence is shrunk (steps left out
//! while it still fails) and printed as a script that [`replay`] runs:
//! paste it into a `#[test]` (see the regression tests at the end).
//!
//! Every process gets the lab's own `TURNBACK_DATA_DIR` and `HOME`, and
//! `TURNBACK_NO_BACKGROUND=1`.
//!
//! Cases: 150 sequences of 2 or 3 sessions and 10 to 29 events each, then
//! the rewinds (about 3,250 steps; measured: 47 s on 2 shared cores, debug
//! build, and 27 s in another run; 500 more sequences found no other
//! disagreement); `TURNBACK_LONG=1` runs 1,000,
//! `TURNBACK_CASES=N` runs N. `TURNBACK_KEEP_GOING=1` runs every sequence
//! and reports every failure, shrunk, instead of the first.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_turnback");

/// The files the steps touch, all at the top of the project.
const FILES: &[&str] = &["a", "b", "c", "e"];

/// The sessions: their ids and their letters in scripts.
const SESSIONS: &[&str] = &["aaaaaaaa-0001", "bbbbbbbb-0002", "cccccccc-0003"];
const LETTERS: &[char] = &['a', 'b', 'c'];

/// How many earlier prompts a session remembers (`Session::earlier`).
const EARLIER_KEPT: u32 = 16;

/// Sequences a default run tries.
const DEFAULT_CASES: usize = 150;

/// A test failure whose message is printed as it is.
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

/// Why a sequence stopped.
#[derive(Debug)]
enum Stop {
    /// A step that makes no sense where it is (a shrunk script's PostToolUse
    /// without its call): the script is not a test case.
    Invalid(String),
    /// The binary and the model disagree, or something broke.
    Wrong(String),
}

type Res<T = ()> = Result<T, Stop>;

fn wrong(e: impl fmt::Display) -> Stop {
    Stop::Wrong(e.to_string())
}

// ---------------------------------------------------------------------
// Steps and their script form
// ---------------------------------------------------------------------

/// Which live turn a rewind undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The latest.
    Last,
    /// The `n`th, oldest first.
    Nth(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Session `s` submits its next prompt.
    Prompt(usize),
    /// A whole Write call of session `s`'s prompt `prompt` (its number,
    /// from 1): PreToolUse, the write, PostToolUse.
    Write {
        s: usize,
        prompt: u32,
        path: String,
        word: String,
    },
    /// A Bash call's PreToolUse in session `s`'s current prompt.
    Bash(usize),
    /// A Bash call run in the background: PreToolUse and PostToolUse.
    Background(usize),
    /// The command of session `s`'s open Bash call (pending or in the
    /// background) writes `word` into `path`, or removes it.
    Change {
        s: usize,
        path: String,
        word: Option<String>,
    },
    /// The PostToolUse of session `s`'s pending Bash call.
    Post(usize),
    /// The user writes or removes a file.
    User { path: String, word: Option<String> },
    /// `turnback rewind` of a live turn.
    Rewind(Target),
}

fn letter(s: usize) -> char {
    LETTERS[s]
}

fn word_or_dash(w: &Option<String>) -> &str {
    w.as_deref().unwrap_or("-")
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Prompt(s) => write!(f, "prompt {}", letter(*s)),
            Step::Write {
                s,
                prompt,
                path,
                word,
            } => write!(f, "write {} {prompt} {path} {word}", letter(*s)),
            Step::Bash(s) => write!(f, "bash {}", letter(*s)),
            Step::Background(s) => write!(f, "bg {}", letter(*s)),
            Step::Change { s, path, word } => {
                write!(f, "change {} {path} {}", letter(*s), word_or_dash(word))
            }
            Step::Post(s) => write!(f, "post {}", letter(*s)),
            Step::User { path, word } => write!(f, "user {path} {}", word_or_dash(word)),
            Step::Rewind(Target::Last) => write!(f, "rewind last"),
            Step::Rewind(Target::Nth(n)) => write!(f, "rewind {n}"),
        }
    }
}

fn script(steps: &[Step]) -> String {
    steps.iter().map(|s| format!("{s}\n")).collect()
}

fn parse_step(line: &str) -> Result<Step, String> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let session = |i: usize| -> Result<usize, String> {
        let t = w.get(i).ok_or(format!("{line:?}: a session is missing"))?;
        LETTERS
            .iter()
            .position(|c| t.len() == 1 && t.starts_with(*c))
            .ok_or(format!("{line:?}: no session {t:?}"))
    };
    let path = |i: usize| -> Result<String, String> {
        let p = w.get(i).ok_or(format!("{line:?}: a path is missing"))?;
        if FILES.contains(p) {
            Ok((*p).to_owned())
        } else {
            Err(format!("{line:?}: no path {p:?}"))
        }
    };
    let word = |i: usize| -> Result<Option<String>, String> {
        match w.get(i).copied() {
            Some("-") => Ok(None),
            Some(x) => Ok(Some(x.to_owned())),
            None => Err(format!("{line:?}: a word is missing")),
        }
    };
    let step = match w.first().copied() {
        Some("prompt") => Step::Prompt(session(1)?),
        Some("write") => Step::Write {
            s: session(1)?,
            prompt: w
                .get(2)
                .and_then(|n| n.parse().ok())
                .ok_or(format!("{line:?}: no prompt number"))?,
            path: path(3)?,
            word: word(4)?.ok_or(format!("{line:?}: a Write writes"))?,
        },
        Some("bash") => Step::Bash(session(1)?),
        Some("bg") => Step::Background(session(1)?),
        Some("change") => Step::Change {
            s: session(1)?,
            path: path(2)?,
            word: word(3)?,
        },
        Some("post") => Step::Post(session(1)?),
        Some("user") => Step::User {
            path: path(1)?,
            word: word(2)?,
        },
        Some("rewind") => match w.get(1).copied() {
            Some("last") => Step::Rewind(Target::Last),
            Some(n) => Step::Rewind(Target::Nth(
                n.parse().map_err(|_| format!("{line:?}: no turn {n:?}"))?,
            )),
            None => return Err(format!("{line:?}: which turn?")),
        },
        _ => return Err(format!("{line:?}: no such step")),
    };
    Ok(step)
}

fn parse_script(text: &str) -> Result<Vec<Step>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(parse_step)
        .collect()
}

// ---------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------

/// Path -> bytes; an absent path is not in the map.
type Files = BTreeMap<String, Vec<u8>>;

fn bytes_of(word: &str) -> Vec<u8> {
    format!("{word}\n").into_bytes()
}

fn turn_id(s: usize, prompt: u32) -> String {
    let tag: String = SESSIONS[s].chars().take(8).collect();
    format!("claude-{tag}-{prompt}")
}

fn prompt_id(s: usize, prompt: u32) -> String {
    format!("{}-p{prompt}", letter(s))
}

fn label(s: usize, prompt: u32) -> String {
    format!("task {}{prompt}", letter(s))
}

/// An open command window.
#[derive(Debug, Clone)]
struct Window {
    session: usize,
    turn: String,
    label: String,
    /// When it opened (a counter: earlier windows have smaller ones).
    opened: u64,
    /// Its PostToolUse came, and its command goes on in the background.
    background: bool,
}

#[derive(Debug, Clone)]
struct Turn {
    id: String,
    label: String,
    /// Path -> (the record's sequence number, the state captured).
    caps: BTreeMap<String, (u64, Option<Vec<u8>>)>,
    live: bool,
}

#[derive(Debug, Clone, Default)]
struct Model {
    folder: Files,
    /// The folder at the last scan; `None` before the first.
    base: Option<Files>,
    /// Paths a file tool captured since the last scan.
    by_tool: BTreeSet<String>,
    windows: Vec<Window>,
    /// Every turn, in the order of their first records.
    turns: Vec<Turn>,
    seq: u64,
    opened: u64,
    /// Each session's prompts so far.
    prompts: Vec<u32>,
    rewound: bool,
}

impl Model {
    fn new(folder: Files) -> Model {
        Model {
            folder,
            prompts: vec![0; SESSIONS.len()],
            ..Model::default()
        }
    }

    fn turn_index(&mut self, id: &str, label: &str) -> usize {
        if let Some(k) = self.turns.iter().position(|t| t.id == id) {
            return k;
        }
        self.turns.push(Turn {
            id: id.to_owned(),
            label: label.to_owned(),
            caps: BTreeMap::new(),
            live: true,
        });
        self.turns.len() - 1
    }

    /// A scan: the changes since the last one go into the turn of every
    /// open window, in the order the windows opened.
    fn scan(&mut self) {
        if let Some(base) = self.base.take() {
            let mut changed: Vec<(String, Option<Vec<u8>>)> = Vec::new();
            for p in FILES {
                let (was, now) = (base.get(*p), self.folder.get(*p));
                if was != now && !self.by_tool.contains(*p) {
                    changed.push(((*p).to_owned(), was.cloned()));
                }
            }
            let mut owners = self.windows.clone();
            owners.sort_by_key(|w| w.opened);
            for w in owners {
                self.seq += 1;
                let seq = self.seq;
                let k = self.turn_index(&w.turn, &w.label);
                for (p, pre) in &changed {
                    self.turns[k]
                        .caps
                        .entry(p.clone())
                        .or_insert_with(|| (seq, pre.clone()));
                }
            }
        }
        self.base = Some(self.folder.clone());
        self.by_tool.clear();
    }

    fn put(&mut self, path: &str, word: &Option<String>) {
        match word {
            Some(w) => self.folder.insert(path.to_owned(), bytes_of(w)),
            None => self.folder.remove(path),
        };
    }

    fn window_of(&self, s: usize) -> Option<&Window> {
        self.windows.iter().find(|w| w.session == s)
    }

    /// Whether `step` can be taken now.
    fn check_valid(&self, step: &Step) -> Result<(), String> {
        let has_prompt = |s: usize| {
            if self.prompts[s] == 0 {
                Err(format!("{step}: session {} has no prompt yet", letter(s)))
            } else {
                Ok(())
            }
        };
        if self.rewound && !matches!(step, Step::Rewind(_)) {
            return Err(format!("{step}: the events come before the rewinds"));
        }
        match step {
            Step::Prompt(_) | Step::User { .. } => Ok(()),
            Step::Write { s, prompt, .. } => {
                let cur = self.prompts[*s];
                if *prompt == 0 || *prompt > cur || cur - *prompt > EARLIER_KEPT {
                    Err(format!("{step}: no such prompt remembered"))
                } else {
                    Ok(())
                }
            }
            Step::Bash(s) | Step::Background(s) => has_prompt(*s),
            Step::Change { s, .. } => match self.window_of(*s) {
                Some(_) => Ok(()),
                None => Err(format!("{step}: no command of that session runs")),
            },
            Step::Post(s) => match self.window_of(*s) {
                Some(w) if !w.background => Ok(()),
                _ => Err(format!("{step}: no pending Bash call")),
            },
            Step::Rewind(_) => Ok(()),
        }
    }

    /// Applies an event step (not a rewind).
    fn apply(&mut self, step: &Step) {
        match step {
            Step::Prompt(s) => {
                if !self.windows.is_empty() {
                    self.scan();
                    self.windows.retain(|w| w.session != *s);
                }
                self.prompts[*s] += 1;
            }
            Step::Write {
                s,
                prompt,
                path,
                word,
            } => {
                let (id, label) = (turn_id(*s, *prompt), label(*s, *prompt));
                let has = self
                    .turns
                    .iter()
                    .any(|t| t.id == id && t.caps.contains_key(path));
                if !has {
                    self.seq += 1;
                    let seq = self.seq;
                    let pre = self.folder.get(path).cloned();
                    let k = self.turn_index(&id, &label);
                    self.turns[k].caps.insert(path.clone(), (seq, pre));
                }
                // Every Write is the tool's change for the next scan, also
                // a second one of a path its turn captured already.
                self.by_tool.insert(path.clone());
                self.folder.insert(path.clone(), bytes_of(word));
            }
            Step::Bash(s) | Step::Background(s) => {
                self.scan();
                self.windows.retain(|w| w.session != *s);
                let p = self.prompts[*s];
                self.opened += 1;
                self.windows.push(Window {
                    session: *s,
                    turn: turn_id(*s, p),
                    label: label(*s, p),
                    opened: self.opened,
                    background: false,
                });
                if let Step::Background(_) = step {
                    self.scan();
                    if let Some(w) = self.windows.iter_mut().find(|w| w.session == *s) {
                        w.background = true;
                    }
                }
            }
            Step::Change { path, word, .. } | Step::User { path, word } => self.put(path, word),
            Step::Post(s) => {
                self.scan();
                self.windows.retain(|w| w.session != *s);
            }
            Step::Rewind(_) => {}
        }
    }

    /// The live turns, oldest first.
    fn live(&self) -> Vec<&Turn> {
        self.turns.iter().filter(|t| t.live).collect()
    }

    /// The closing half a rewind takes first when a window is open.
    fn close_all(&mut self) {
        if !self.windows.is_empty() {
            self.scan();
            self.windows.clear();
        }
        self.rewound = true;
    }

    /// Rewinds the live turn `target` picks; its id, or `None` when there
    /// is no such turn.
    fn rewind(&mut self, target: Target) -> Option<String> {
        let live: Vec<usize> = (0..self.turns.len())
            .filter(|k| self.turns[*k].live)
            .collect();
        let k = match target {
            Target::Last => *live.last()?,
            Target::Nth(n) => *live.get(n)?,
        };
        let mut oldest: BTreeMap<String, (u64, Option<Vec<u8>>)> = BTreeMap::new();
        for t in self.turns[k..].iter_mut().filter(|t| t.live) {
            for (p, (seq, pre)) in &t.caps {
                let e = oldest.entry(p.clone()).or_insert((*seq, pre.clone()));
                if *seq < e.0 {
                    *e = (*seq, pre.clone());
                }
            }
            t.live = false;
        }
        for (p, (_, pre)) in oldest {
            match pre {
                Some(b) => self.folder.insert(p, b),
                None => self.folder.remove(&p),
            };
        }
        Some(self.turns[k].id.clone())
    }

    fn describe(&self) -> String {
        let mut out = String::from("  model turns (oldest first):\n");
        for t in &self.turns {
            let caps: Vec<String> = t
                .caps
                .iter()
                .map(|(p, (seq, pre))| format!("{p}@{seq}={}", show_bytes(pre.as_deref())))
                .collect();
            out.push_str(&format!(
                "    {} {:?}{}: {}\n",
                t.id,
                t.label,
                if t.live { "" } else { " (ended)" },
                caps.join(" ")
            ));
        }
        out.push_str(&format!("  model folder: {}\n", show_files(&self.folder)));
        out
    }
}

fn show_bytes(b: Option<&[u8]>) -> String {
    match b {
        None => "absent".into(),
        Some(b) => format!("{:?}", String::from_utf8_lossy(b)),
    }
}

fn show_files(f: &Files) -> String {
    FILES
        .iter()
        .map(|p| format!("{p}={}", show_bytes(f.get(*p).map(Vec::as_slice))))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------
// The project and the binary
// ---------------------------------------------------------------------

/// A project with its own data directory and home.
struct Lab {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    data: PathBuf,
    home: PathBuf,
    /// The hook commands `init` wrote: (event, tool) -> command line.
    hooks: BTreeMap<(String, String), String>,
}

impl Lab {
    fn new(folder: &Files) -> Res<Lab> {
        let tmp = tempfile::Builder::new()
            .prefix("turnback-hookmodel-")
            .tempdir()
            .map_err(wrong)?;
        let base = std::fs::canonicalize(tmp.path()).map_err(wrong)?;
        let mut lab = Lab {
            root: base.join("project"),
            data: base.join("data"),
            home: base.join("home"),
            hooks: BTreeMap::new(),
            _tmp: tmp,
        };
        for d in [&lab.root, &lab.data, &lab.home] {
            std::fs::create_dir(d).map_err(wrong)?;
        }
        for (p, b) in folder {
            std::fs::write(lab.root.join(p), b).map_err(wrong)?;
        }
        let out = lab.run(&["init", "claude-code"])?;
        if !out.status.success() {
            return Err(wrong(format!("init claude-code failed:\n{}", texts(&out))));
        }
        let settings: Value = serde_json::from_slice(
            &std::fs::read(lab.root.join(".claude/settings.json")).map_err(wrong)?,
        )
        .map_err(wrong)?;
        for (event, tool) in [
            ("UserPromptSubmit", ""),
            ("PreToolUse", "Write"),
            ("PostToolUse", "Write"),
            ("PreToolUse", "Bash"),
            ("PostToolUse", "Bash"),
        ] {
            let command = configured_command(&settings, event, tool)?;
            lab.hooks.insert((event.into(), tool.into()), command);
        }
        Ok(lab)
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("TURNBACK_DATA_DIR", &self.data)
            .env("HOME", &self.home)
            .env("TURNBACK_NO_BACKGROUND", "1")
            .current_dir(&self.root);
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
    }

    /// `turnback ARGS` in the project.
    fn run(&self, args: &[&str]) -> Res<Output> {
        let mut cmd = Command::new(BIN);
        self.env(&mut cmd);
        cmd.args(args).output().map_err(wrong)
    }

    /// Runs one event through the hook command `init` configured for it,
    /// as Claude Code does: the command line in a shell, the event on
    /// stdin, the project as cwd and `$CLAUDE_PROJECT_DIR`.
    fn send(&self, event: &Value) -> Res {
        let name = event["hook_event_name"].as_str().unwrap_or("");
        let tool = event["tool_name"].as_str().unwrap_or("");
        let command = self
            .hooks
            .get(&(name.to_owned(), tool.to_owned()))
            .ok_or_else(|| wrong(format!("no hook for {name} {tool}")))?;
        let mut cmd = Command::new("sh");
        self.env(&mut cmd);
        let mut child = cmd
            .arg("-c")
            .arg(command)
            .env("CLAUDE_PROJECT_DIR", &self.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(wrong)?;
        {
            let mut stdin = child.stdin.take().ok_or(wrong("no stdin"))?;
            stdin
                .write_all(event.to_string().as_bytes())
                .map_err(wrong)?;
        }
        let out = child.wait_with_output().map_err(wrong)?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(0)
            || !out.stdout.is_empty()
            || err.contains("not recorded")
            || err.contains("ignoring the event")
        {
            return Err(wrong(format!(
                "the hook failed on {name} {tool}:\n{}",
                texts(&out)
            )));
        }
        Ok(())
    }

    /// An event of session `s` as Claude Code sends it, with `fields`.
    fn event(&self, s: usize, name: &str, fields: Value) -> Value {
        let session = SESSIONS[s];
        let mut e = json!({
            "session_id": session,
            "transcript_path": format!("/home/user/.claude/projects/-proj/{session}.jsonl"),
            "cwd": self.root,
            "permission_mode": "default",
            "hook_event_name": name,
        });
        if let (Some(e), Value::Object(f)) = (e.as_object_mut(), fields) {
            e.extend(f);
        }
        e
    }

    fn bash(&self, s: usize, name: &str, prompt: u32, background: bool) -> Value {
        let mut input = json!({ "command": "./step.sh" });
        if background {
            input["run_in_background"] = true.into();
        }
        self.event(
            s,
            name,
            json!({
                "tool_name": "Bash",
                "tool_input": input,
                "prompt_id": prompt_id(s, prompt),
            }),
        )
    }

    fn put(&self, path: &str, word: &Option<String>) -> Res {
        let p = self.root.join(path);
        match word {
            Some(w) => std::fs::write(p, bytes_of(w)).map_err(wrong),
            None => match std::fs::remove_file(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(wrong(e)),
                _ => Ok(()),
            },
        }
    }

    /// The project's files (`.claude/` and `.turnback/` left out).
    fn folder(&self) -> Res<Files> {
        let mut out = Files::new();
        for e in std::fs::read_dir(&self.root).map_err(wrong)? {
            let e = e.map_err(wrong)?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".claude" || name == ".turnback" {
                continue;
            }
            if !e.file_type().map_err(wrong)?.is_file() {
                return Err(wrong(format!("{name} is not a file")));
            }
            out.insert(name, std::fs::read(e.path()).map_err(wrong)?);
        }
        Ok(out)
    }

    /// The live turns, oldest first: (id, label).
    fn list(&self) -> Res<Vec<(String, String)>> {
        let out = self.run(&["--json", "list"])?;
        if !out.status.success() {
            return Err(wrong(format!("turnback list failed:\n{}", texts(&out))));
        }
        let v: Value = serde_json::from_slice(&out.stdout).map_err(wrong)?;
        let turns = v.as_array().ok_or(wrong("list --json is not an array"))?;
        Ok(turns
            .iter()
            .map(|t| {
                (
                    t["turn"].as_str().unwrap_or("?").to_owned(),
                    t["label"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect())
    }

    /// The paths turn `id` captured (`turnback --json show`).
    fn paths(&self, id: &str) -> Res<BTreeSet<String>> {
        let out = self.run(&["--json", "show", id])?;
        if !out.status.success() {
            return Err(wrong(format!(
                "turnback show {id} failed:\n{}",
                texts(&out)
            )));
        }
        let v: Value = serde_json::from_slice(&out.stdout).map_err(wrong)?;
        Ok(v["files"]
            .as_array()
            .ok_or(wrong("show --json has no files"))?
            .iter()
            .filter_map(|f| f["path"].as_str().map(str::to_owned))
            .collect())
    }
}

/// The hook command `init` wrote for `event` (and `tool`) in the settings.
fn configured_command(settings: &Value, event: &str, tool: &str) -> Res<String> {
    for g in settings["hooks"][event].as_array().into_iter().flatten() {
        let matches = match g.get("matcher").and_then(Value::as_str) {
            Some(m) if !tool.is_empty() => m.split('|').any(|x| x == tool),
            _ => true,
        };
        if !matches {
            continue;
        }
        for h in g["hooks"].as_array().into_iter().flatten() {
            if let Some(c) = h["command"].as_str()
                && c.ends_with("hook claude-code")
            {
                return Ok(c.to_owned());
            }
        }
    }
    Err(wrong(format!(
        "the settings run no turnback hook for {event} {tool}"
    )))
}

fn texts(out: &Output) -> String {
    format!(
        "    status {:?}\n    stdout: {}\n    stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim_end(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    )
}

// ---------------------------------------------------------------------
// Running a sequence
// ---------------------------------------------------------------------

fn initial_folder() -> Files {
    let mut f = Files::new();
    f.insert("a".into(), bytes_of("a0"));
    f.insert("b".into(), bytes_of("b0"));
    f
}

struct Runner {
    lab: Lab,
    model: Model,
    ran: Vec<Step>,
    checked: bool,
}

impl Runner {
    fn new() -> Res<Runner> {
        let folder = initial_folder();
        Ok(Runner {
            lab: Lab::new(&folder)?,
            model: Model::new(folder),
            ran: Vec::new(),
            checked: false,
        })
    }

    fn step(&mut self, step: &Step) -> Res {
        self.model.check_valid(step).map_err(Stop::Invalid)?;
        self.ran.push(step.clone());
        let lab = &self.lab;
        match step {
            Step::Prompt(s) => {
                let k = self.model.prompts[*s] + 1;
                let text = format!("{}\nand the details of it", label(*s, k));
                lab.send(&lab.event(
                    *s,
                    "UserPromptSubmit",
                    json!({ "prompt": text, "prompt_id": prompt_id(*s, k) }),
                ))?;
            }
            Step::Write {
                s,
                prompt,
                path,
                word,
            } => {
                let pre = lab.event(
                    *s,
                    "PreToolUse",
                    json!({
                        "tool_name": "Write",
                        "tool_input": {
                            "file_path": lab.root.join(path),
                            "content": String::from_utf8_lossy(&bytes_of(word)),
                        },
                        "prompt_id": prompt_id(*s, *prompt),
                    }),
                );
                lab.send(&pre)?;
                lab.put(path, &Some(word.clone()))?;
                let mut post = pre;
                post["hook_event_name"] = "PostToolUse".into();
                lab.send(&post)?;
            }
            Step::Bash(s) => {
                lab.send(&lab.bash(*s, "PreToolUse", self.model.prompts[*s], false))?;
            }
            Step::Background(s) => {
                let p = self.model.prompts[*s];
                lab.send(&lab.bash(*s, "PreToolUse", p, true))?;
                lab.send(&lab.bash(*s, "PostToolUse", p, true))?;
            }
            Step::Change { path, word, .. } | Step::User { path, word } => {
                lab.put(path, word)?;
            }
            Step::Post(s) => {
                let w = self.model.window_of(*s).ok_or(wrong("no window"))?;
                let p = w.turn.rsplit('-').next().and_then(|n| n.parse().ok());
                let p = p.ok_or(wrong("a window's turn has no number"))?;
                lab.send(&lab.bash(*s, "PostToolUse", p, false))?;
            }
            Step::Rewind(target) => return self.rewind(*target),
        }
        self.model.apply(step);
        Ok(())
    }

    fn rewind(&mut self, target: Target) -> Res {
        if !self.checked {
            self.check_turns()?;
        }
        self.model.close_all();
        let before = self.model.clone();
        let id = self.model.rewind(target).ok_or(Stop::Invalid(format!(
            "rewind {target:?}: no such live turn"
        )))?;
        let out = self.lab.run(&["--json", "rewind", &id])?;
        if out.status.code() != Some(0) {
            return Err(wrong(format!(
                "rewind {id} failed:\n{}\n{}",
                texts(&out),
                before.describe()
            )));
        }
        let got = self.lab.folder()?;
        if got != self.model.folder {
            return Err(wrong(format!(
                "after rewind {id} the folder is\n    {}\nbut the model says\n    {}\nbefore the rewind:\n{}",
                show_files(&got),
                show_files(&self.model.folder),
                before.describe()
            )));
        }
        let live: Vec<String> = self.model.live().iter().map(|t| t.id.clone()).collect();
        let listed: Vec<String> = self.lab.list()?.into_iter().map(|t| t.0).collect();
        if listed != live {
            return Err(wrong(format!(
                "after rewind {id} the live turns are {listed:?}, the model's {live:?}\n{}",
                before.describe()
            )));
        }
        Ok(())
    }

    /// `list` and `show` against the model's live turns.
    fn check_turns(&mut self) -> Res {
        self.checked = true;
        let listed = self.lab.list()?;
        let mut got = Vec::new();
        for (id, label) in &listed {
            got.push((id.clone(), label.clone(), self.lab.paths(id)?));
        }
        let want: Vec<(String, String, BTreeSet<String>)> = self
            .model
            .live()
            .iter()
            .map(|t| {
                (
                    t.id.clone(),
                    t.label.clone(),
                    t.caps.keys().cloned().collect(),
                )
            })
            .collect();
        if got != want {
            let show = |v: &[(String, String, BTreeSet<String>)]| {
                v.iter()
                    .map(|(id, l, p)| format!("    {id} {l:?} {p:?}\n"))
                    .collect::<String>()
            };
            return Err(wrong(format!(
                "the turns (id, label, paths) are\n{}but the model's are\n{}\n{}",
                show(&got),
                show(&want),
                self.model.describe()
            )));
        }
        Ok(())
    }

    /// The checks of a sequence's end, when no rewind made them.
    fn finish(&mut self) -> Res {
        if !self.checked {
            self.check_turns()?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------
// Random sequences
// ---------------------------------------------------------------------

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

struct Gen {
    rng: Rng,
    words: u32,
}

impl Gen {
    fn word(&mut self) -> String {
        self.words += 1;
        format!("w{}", self.words)
    }

    fn path(&mut self) -> String {
        (*self.rng.pick(FILES)).to_owned()
    }

    fn put(&mut self) -> Option<String> {
        if self.rng.index(4) == 0 {
            None
        } else {
            Some(self.word())
        }
    }

    /// The next event step, from the state the model is in.
    fn step(&mut self, m: &Model, sessions: usize) -> Step {
        let s = self.rng.index(sessions);
        let running: Vec<usize> = m.windows.iter().map(|w| w.session).collect();
        let pending: Vec<usize> = m
            .windows
            .iter()
            .filter(|w| !w.background)
            .map(|w| w.session)
            .collect();
        let roll = self.rng.index(20);
        if m.prompts[s] == 0 || roll < 3 {
            return Step::Prompt(s);
        }
        match roll {
            3..=6 => {
                let cur = m.prompts[s];
                // A third of them a late call of an earlier prompt.
                let prompt = if cur > 1 && self.rng.index(3) == 0 {
                    cur - 1 - self.rng.index((cur - 1).min(EARLIER_KEPT) as usize) as u32
                } else {
                    cur
                };
                Step::Write {
                    s,
                    prompt,
                    path: self.path(),
                    word: self.word(),
                }
            }
            7..=8 => Step::Bash(s),
            9 => Step::Background(s),
            10..=14 if !running.is_empty() => Step::Change {
                s: *self.rng.pick(&running),
                path: self.path(),
                word: self.put(),
            },
            15..=17 if !pending.is_empty() => Step::Post(*self.rng.pick(&pending)),
            _ => Step::User {
                path: self.path(),
                word: self.put(),
            },
        }
    }
}

/// A failed sequence: the steps run and what went wrong.
struct Failed {
    steps: Vec<Step>,
    message: String,
}

fn failed(r: &Runner, stop: Stop) -> Failed {
    let message = match stop {
        Stop::Invalid(m) => format!("an invalid step: {m}"),
        Stop::Wrong(m) => m,
    };
    Failed {
        steps: r.ran.clone(),
        message,
    }
}

/// Runs one random sequence: 2 or 3 sessions, 10 to 29 events, then the
/// rewinds.
fn run_random(seed: u64) -> Result<usize, Failed> {
    let mut g = Gen {
        rng: Rng::seeded(seed),
        words: 0,
    };
    let sessions = 2 + g.rng.index(2);
    let len = 10 + g.rng.index(20);
    let mut r = Runner::new().map_err(|e| Failed {
        steps: Vec::new(),
        message: format!("{e:?}"),
    })?;
    for _ in 0..len {
        let step = g.step(&r.model, sessions);
        r.step(&step).map_err(|e| failed(&r, e))?;
    }
    // The rewinds' closing half gives every open window's turn a record.
    if !r.model.live().is_empty() || !r.model.windows.is_empty() {
        r.step(&Step::Rewind(Target::Last))
            .map_err(|e| failed(&r, e))?;
    }
    loop {
        let live = r.model.live().len();
        if live == 0 {
            break;
        }
        let step = Step::Rewind(Target::Nth(g.rng.index(live)));
        r.step(&step).map_err(|e| failed(&r, e))?;
    }
    r.finish().map_err(|e| failed(&r, e))?;
    Ok(r.ran.len())
}

/// Runs `steps` in a fresh project: `Err(None)` when the script is not a
/// valid sequence.
fn run_steps(steps: &[Step]) -> Result<(), Option<Failed>> {
    let mut r = Runner::new().map_err(|e| {
        Some(Failed {
            steps: Vec::new(),
            message: format!("{e:?}"),
        })
    })?;
    for s in steps {
        match r.step(s) {
            Ok(()) => {}
            Err(Stop::Invalid(_)) => return Err(None),
            Err(e) => return Err(Some(failed(&r, e))),
        }
    }
    r.finish().map_err(|e| Some(failed(&r, e)))
}

/// Shrinks a failing script: steps are left out while it still fails (at
/// most `budget` runs).
fn shrink(mut f: Failed, budget: usize) -> Failed {
    let mut runs = 0;
    'outer: loop {
        for i in (0..f.steps.len()).rev() {
            if runs >= budget {
                break 'outer;
            }
            runs += 1;
            let mut cand = f.steps.clone();
            cand.remove(i);
            if let Err(Some(g)) = run_steps(&cand) {
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

fn cases() -> usize {
    if let Some(n) = std::env::var("TURNBACK_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return n;
    }
    if std::env::var("TURNBACK_LONG").is_ok_and(|v| v == "1") {
        1000
    } else {
        DEFAULT_CASES
    }
}

#[allow(unsafe_code)] // the platform call of a test
fn set_umask() {
    // SAFETY: umask only sets this process's file mode creation mask.
    unsafe {
        libc::umask(0o022);
    }
}

/// Runs `count` random sequences; fails with the first failing one,
/// shrunk, as a script.
fn run_many(test: &str, count: usize) -> Result<(), Failure> {
    set_umask();
    let base = rng::env_seed(test);
    let started = std::time::Instant::now();
    let keep_going = std::env::var("TURNBACK_KEEP_GOING").is_ok_and(|v| v == "1");
    let mut steps = 0;
    let mut failures = Vec::new();
    for i in 0..count as u64 {
        let seed = base.wrapping_add(i);
        match run_random(seed) {
            Ok(n) => steps += n,
            Err(f) => {
                let first = f.message.clone();
                let full = script(&f.steps);
                let f = shrink(f, 300);
                let report = format!(
                    "{test}: sequence {i} (seed {seed}: TURNBACK_SEED={seed} cargo test --test hook_model {test}) failed:\n{first}\n\nits steps:\n{full}\nshrunk to (paste into replay(r#\"...\"#)):\n{}\nwhich fails with:\n{}",
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
        "{test}: {count} sequences, {steps} steps in {:.1?}",
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
    match run_steps(&steps) {
        Ok(()) => Ok(()),
        Err(None) => Err(Failure("the script is not a valid sequence".into())),
        Err(Some(f)) => Err(Failure(format!(
            "{}\n\nsteps run:\n{}",
            f.message,
            script(&f.steps)
        ))),
    }
}

#[test]
fn hooks_match_model() -> Result<(), Failure> {
    run_many("hooks_match_model", cases())
}

#[test]
fn script_form_reads_back() -> Result<(), Failure> {
    let mut g = Gen {
        rng: Rng::seeded(7),
        words: 0,
    };
    let mut m = Model::new(initial_folder());
    let mut steps = Vec::new();
    for _ in 0..200 {
        let s = g.step(&m, 3);
        m.apply(&s);
        steps.push(s);
    }
    steps.push(Step::Rewind(Target::Last));
    steps.push(Step::Rewind(Target::Nth(3)));
    assert_eq!(parse_script(&script(&steps))?, steps);
    Ok(())
}

/// The model's own example: two sessions' Bash calls overlap, one is
/// interrupted; rewinding gives every state back.
#[test]
fn overlapping_and_interrupted_calls() -> Result<(), Failure> {
    replay(
        r#"
        prompt a
        prompt b
        bash a
        bash b
        change a c x1
        post b
        write a 1 a w1
        change a b -
        prompt a
        bg b
        change b e x2
        prompt b
        user a u1
        rewind last
        rewind 0
        "#,
    )
}

/// Runs the script in the file `TURNBACK_REPLAY` names (a failing sequence
/// as printed): `TURNBACK_REPLAY=case.txt cargo test --test hook_model --
/// --ignored replay_from_file`.
#[test]
#[ignore = "a tool: replays the script in the file TURNBACK_REPLAY names"]
fn replay_from_file() -> Result<(), Failure> {
    let path = std::env::var("TURNBACK_REPLAY")
        .map_err(|_| Failure("set TURNBACK_REPLAY to a script file".into()))?;
    replay(&std::fs::read_to_string(Path::new(&path))?)
}

/// A session writes a file a second time with Write while another
/// session's Bash call runs: the second write is its turn's change, though
/// its turn had the path already. Its capture appended nothing, so the
/// after half recorded the change in the Bash call's turn, the later one,
/// as well, and rewinding that turn undid the earlier turn's write. The
/// capture now records the path's post-image while a window is open, and
/// the scan takes a post-image recorded since it began as the tool's.
/// Found by the random test.
#[test]
fn a_second_write_during_another_sessions_command_stays_its_own() -> Result<(), Failure> {
    replay(
        r#"
        prompt a
        prompt b
        bash b
        write a 1 b w1
        post b
        bash b
        write a 1 b w2
        post b
        rewind last
        "#,
    )
}

/// The same when the turn had the path from its own Bash call's scan, and
/// another session's background command is the open window.
#[test]
fn a_second_write_during_another_sessions_background_command_stays_its_own() -> Result<(), Failure>
{
    replay(
        r#"
        prompt b
        bash b
        prompt a
        user e w3
        bg a
        write b 1 e w9
        rewind last
        "#,
    )
}
