//! The engine shared by the hook adapters: one event, read as JSON on
//! standard input, in the shape both Claude Code and Gemini CLI document
//! (`session_id`, `cwd`, `hook_event_name`, `tool_name`, `tool_input`,
//! `prompt`, and Claude Code's `prompt_id`); a [`Dialect`] names each agent's
//! events and tools.
//!
//! - The prompt event begins a new turn, `<prefix>-<session>-<n>` (the first
//!   8 alphanumerics of the session id, and the session's prompt count),
//!   labelled with the prompt's first line. The session's current turn is
//!   kept in the store (`.turnback/sessions/`), so the separate hook
//!   processes of one session agree on it. The same `prompt_id` delivered
//!   twice begins one turn, not two.
//! - The pre-tool event for a file tool captures the tool's file path in the
//!   current turn. A tool call that arrives before any prompt was seen, or
//!   with another `prompt_id`, begins a turn of its own first.
//! - The pre/post-tool events of a shell tool: the before/after snapshot of
//!   the command goes through [`shell_snapshot`].
//! - The post-tool event of a file tool: the post-image goes through
//!   [`post_image`].
//!
//! The root is `--root`, else the nearest ancestor of the event's `cwd` that
//! has a `.turnback/`, else that of the agent's project directory variable
//! (`$CLAUDE_PROJECT_DIR`), else the event's `cwd`.
//!
//! A hook must never break the agent: an internal error prints a message on
//! stderr and exits 0, and stdout holds only what the agent expects (nothing
//! for Claude Code, which adds a `UserPromptSubmit` hook's stdout to the
//! model's context; `{}` for Gemini CLI, which parses it as JSON). The one
//! exception: when the pre-image of a file about to be written cannot be
//! saved, the hook exits 2 with the reason on stderr, which makes the agent
//! block the tool call and show the reason to the model, so no file is
//! overwritten that could not be rewound.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use serde_json::{Value, json};
use turnback::{Error, Options, Session, Store, TurnId};

use crate::{Ctx, Outcome};

/// The exit code that makes the agent block a tool call and show stderr to
/// the model.
pub const EXIT_BLOCK: u8 = 2;

/// How long a hook waits for another turnback process's lock: well inside
/// the hook timeout `turnback init` sets, so a wait that runs out blocks the
/// write (exit 2) instead of being killed by the agent.
const LOCK_WAIT: Duration = Duration::from_secs(20);

/// The hook timeout written into the agent's settings, in seconds.
pub const HOOK_TIMEOUT_SECS: u64 = 30;

/// Events larger than this are refused (a write's content is in the event).
const MAX_EVENT: u64 = 256 << 20;

/// How an agent names its hook events and tools.
#[derive(Debug)]
pub struct Dialect {
    /// The adapter's name: `turnback hook <name>`.
    pub name: &'static str,
    /// The agent's name, for messages.
    pub agent: &'static str,
    /// Turn ids are `<prefix>-<session>-<n>`.
    pub turn_prefix: &'static str,
    /// Session files are keyed `<session_key_prefix><session_id>`.
    pub session_key_prefix: &'static str,
    /// The event that submits a prompt.
    pub prompt_event: &'static str,
    /// The event before a tool runs.
    pub pre_tool: &'static str,
    /// The event after a tool ran.
    pub post_tool: &'static str,
    /// Tools that write the file named in their input.
    pub file_tools: &'static [&'static str],
    /// Tools that run a shell command.
    pub shell_tools: &'static [&'static str],
    /// The input keys that hold a file tool's path, first found wins.
    pub path_keys: &'static [&'static str],
    /// What stdout holds when the hook exits 0.
    pub stdout_ok: &'static str,
    /// An environment variable naming the project directory, if the agent
    /// sets one for hooks.
    pub project_env: Option<&'static str>,
    /// The project settings file, relative to the root.
    pub settings_file: &'static str,
}

impl Dialect {
    /// The matcher for every tool the adapter handles.
    pub fn tool_matcher(&self) -> String {
        [self.file_tools, self.shell_tools].concat().join("|")
    }

    /// Whether a configured hook command is this adapter's.
    pub fn is_our_command(&self, command: &str) -> bool {
        command.trim_end().ends_with(&format!("hook {}", self.name))
    }
}

/// One hook event; fields the agent adds later are ignored.
#[derive(Debug, Deserialize)]
struct Event {
    session_id: String,
    #[serde(default)]
    prompt_id: Option<String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    hook_event_name: String,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_input: Option<Value>,
    #[serde(default)]
    prompt: Option<String>,
}

/// What the hook tells the agent.
enum Verdict {
    /// Exit 0: go on.
    Allow,
    /// Exit 2: block the tool call; the reason goes to the model.
    Block(String),
}

/// Handles the event on standard input; the exit code for the agent.
pub fn run(ctx: &Ctx, d: &Dialect) -> Outcome {
    let code = match read_event(d) {
        Err(e) => {
            eprintln!("turnback hook {}: ignoring the event: {e:#}", d.name);
            0
        }
        Ok(event) => match handle(ctx, d, &event) {
            Ok(Verdict::Allow) => 0,
            Ok(Verdict::Block(reason)) => {
                eprintln!("{reason}");
                return Ok(EXIT_BLOCK);
            }
            Err(e) => {
                eprintln!(
                    "turnback hook {}: {} was not recorded: {e:#}",
                    d.name, event.hook_event_name
                );
                0
            }
        },
    };
    if !d.stdout_ok.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", d.stdout_ok);
    }
    Ok(code)
}

fn read_event(d: &Dialect) -> anyhow::Result<Event> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_EVENT)
        .read_to_end(&mut bytes)
        .context("cannot read standard input")?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("standard input is not a {} hook event", d.agent))
}

fn handle(ctx: &Ctx, d: &Dialect, event: &Event) -> anyhow::Result<Verdict> {
    let tool = event.tool_name.as_deref().unwrap_or("");
    let name = event.hook_event_name.as_str();
    let pre = name == d.pre_tool;
    let post = name == d.post_tool;
    if name == d.prompt_event {
        let mut store = open(ctx, d, event)?;
        begin_turn(&mut store, d, event)?;
    } else if pre && d.file_tools.contains(&tool) {
        return Ok(capture_before_write(ctx, d, event));
    } else if (pre || post) && d.shell_tools.contains(&tool) {
        let mut store = open(ctx, d, event)?;
        let session = current_turn(&mut store, d, event)?;
        let phase = if pre { Phase::Before } else { Phase::After };
        match shell_snapshot(&mut store, &session, phase)? {
            Coverage::Recorded => {}
            Coverage::RecordedWithNotes(notes) => {
                for n in notes {
                    eprintln!("turnback: note: {n}");
                }
            }
        }
    } else if post && d.file_tools.contains(&tool) {
        let mut store = open(ctx, d, event)?;
        let session = current_turn(&mut store, d, event)?;
        if let Some(path) = tool_path(d, event)? {
            post_image(&mut store, &session, &path)?;
        }
    }
    Ok(Verdict::Allow)
}

/// The project root for an event (see the module docs).
fn root_for(ctx: &Ctx, d: &Dialect, event: &Event) -> anyhow::Result<PathBuf> {
    if let Some(r) = &ctx.root {
        return Ok(r.clone());
    }
    let cwd = match &event.cwd {
        Some(c) if c.is_absolute() => c.clone(),
        _ => std::env::current_dir()?,
    };
    let has_store = |p: &Path| p.join(turnback::path::STORE_DIR).is_dir();
    let found = turnback::discover_root(&cwd);
    if has_store(&found) {
        return Ok(found);
    }
    if let Some(project) = d.project_env.and_then(std::env::var_os).map(PathBuf::from)
        && project.is_absolute()
    {
        let found = turnback::discover_root(&project);
        return Ok(if has_store(&found) { found } else { project });
    }
    Ok(cwd)
}

fn open(ctx: &Ctx, d: &Dialect, event: &Event) -> anyhow::Result<Store> {
    let root = root_for(ctx, d, event)?;
    let options = Options {
        lock_timeout: LOCK_WAIT,
        ..Options::default()
    };
    let store = Store::open_with(&root, options)
        .with_context(|| format!("cannot open the turnback store of {}", root.display()))?;
    for w in store.warnings() {
        eprintln!("turnback: warning: {w}");
    }
    Ok(store)
}

/// The short form of a session id used in turn ids.
fn session_tag(session_id: &str) -> String {
    let tag: String = session_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect();
    if tag.is_empty() {
        "session".into()
    } else {
        tag
    }
}

/// The label of a turn: the prompt's first non-empty line.
fn label_of(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(empty prompt)");
    turnback::cut_label(line)
}

fn unseen_label(d: &Dialect) -> String {
    format!("{} prompt (not seen by the hook)", d.agent)
}

/// Begins the next turn of the event's session (unless this very prompt
/// already began one).
fn begin_turn(store: &mut Store, d: &Dialect, event: &Event) -> anyhow::Result<Session> {
    let label = match &event.prompt {
        Some(p) => label_of(p),
        None => unseen_label(d),
    };
    next_turn(store, d, event, label, false)
}

fn session_key(d: &Dialect, event: &Event) -> String {
    format!("{}{}", d.session_key_prefix, event.session_id)
}

/// Whether `event` belongs to the prompt that began `s` (true when either
/// lacks a prompt id).
fn same_prompt(s: &Session, event: &Event) -> bool {
    match (&s.prompt_id, &event.prompt_id) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Begins the session's next turn under the store lock. The same prompt id
/// never begins two turns; with `reuse_current` (a tool call, not a
/// prompt), a turn that another hook process began meanwhile for the same
/// prompt is joined, so parallel tool calls agree on one turn.
fn next_turn(
    store: &mut Store,
    d: &Dialect,
    event: &Event,
    label: String,
    reuse_current: bool,
) -> anyhow::Result<Session> {
    let tag = session_tag(&event.session_id);
    let session = store.update_session(&session_key(d, event), |cur| {
        if let (Some(cur), Some(id)) = (&cur, &event.prompt_id)
            && cur.prompt_id.as_deref() == Some(id)
        {
            return Ok(cur.clone());
        }
        if let Some(cur) = &cur
            && reuse_current
            && same_prompt(cur, event)
        {
            return Ok(cur.clone());
        }
        let number = cur.as_ref().map_or(1, |c| c.number + 1);
        Ok(Session {
            key: String::new(),
            turn: TurnId::new(format!("{}-{tag}-{number}", d.turn_prefix))?,
            number,
            prompt_id: event.prompt_id.clone(),
            label: Some(label),
            updated_at: 0,
        })
    })?;
    Ok(session)
}

/// The session's current turn; a tool call with no turn yet (hooks installed
/// mid-session) or from another prompt begins one.
fn current_turn(store: &mut Store, d: &Dialect, event: &Event) -> anyhow::Result<Session> {
    if let Some(s) = store.session(&session_key(d, event))?
        && same_prompt(&s, event)
    {
        return Ok(s);
    }
    next_turn(store, d, event, unseen_label(d), true)
}

/// The file a file tool is about to write, made absolute against the
/// event's `cwd`.
fn tool_path(d: &Dialect, event: &Event) -> anyhow::Result<Option<PathBuf>> {
    let input = event.tool_input.as_ref();
    let raw = input
        .and_then(|i| d.path_keys.iter().find_map(|k| i.get(*k)))
        .and_then(Value::as_str);
    let Some(raw) = raw.filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let p = PathBuf::from(raw);
    if p.is_absolute() {
        return Ok(Some(p));
    }
    let base = match &event.cwd {
        Some(c) if c.is_absolute() => c.clone(),
        _ => std::env::current_dir()?,
    };
    Ok(Some(base.join(p)))
}

/// Pre-tool event of a file tool: save the pre-image, or block the write.
fn capture_before_write(ctx: &Ctx, d: &Dialect, event: &Event) -> Verdict {
    let tool = event.tool_name.as_deref().unwrap_or("");
    let path = match tool_path(d, event) {
        Ok(Some(p)) => p,
        Ok(None) => {
            eprintln!(
                "turnback hook {}: {tool} names no file path; nothing was captured",
                d.name
            );
            return Verdict::Allow;
        }
        Err(e) => return block(d, tool, Path::new("?"), &e),
    };
    let result = open(ctx, d, event).and_then(|mut store| {
        let session = current_turn(&mut store, d, event)?;
        match store.capture(&session.turn, session.label.as_deref(), &path) {
            Ok(report) => {
                for p in &report.links_outside {
                    eprintln!(
                        "turnback: warning: {p} is a symlink that points outside the project; a write through it cannot be rewound"
                    );
                }
                Ok(())
            }
            Err(Error::BadPath { path: p, reason }) => {
                // Not the project's file (outside the root, or in .git/):
                // not ours to checkpoint, and not ours to block.
                eprintln!(
                    "turnback: note: {p} is not checkpointed ({reason}); rewinds will not restore it"
                );
                Ok(())
            }
            Err(e) => Err(anyhow::Error::new(e)),
        }
    });
    match result {
        Ok(()) => Verdict::Allow,
        Err(e) => block(d, tool, &path, &e),
    }
}

fn block(d: &Dialect, tool: &str, path: &Path, e: &anyhow::Error) -> Verdict {
    Verdict::Block(format!(
        "turnback blocked this {tool}: it could not save the current contents of {} first, so the change could not be rewound. Reason: {e:#}. Fix the cause and retry, or remove turnback's hooks from {} to write without checkpoints.",
        path.display(),
        d.settings_file
    ))
}

/// Which side of a shell command a snapshot is taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the command runs.
    Before,
    /// After it ran.
    After,
}

/// Whether a shell command's edits are rewindable.
pub enum Coverage {
    /// The snapshot was recorded in the turn.
    Recorded,
    /// Recorded, with things the agent's user should know (paths a scan
    /// leaves out that changed, a missing before half).
    RecordedWithNotes(Vec<String>),
}

/// Pre/post-tool event of a shell tool: the before or after snapshot of the
/// tree in the session's turn, so a file the command created, changed,
/// deleted or renamed is rewound like a file tool's write.
pub fn shell_snapshot(
    store: &mut Store,
    session: &Session,
    phase: Phase,
) -> anyhow::Result<Coverage> {
    let report = store.snapshot(
        &session.turn,
        session.label.as_deref(),
        phase == Phase::After,
        &turnback::NoProgress,
    )?;
    let mut notes = report.warnings;
    if let Some(r) = &report.recorded {
        for n in &r.changes.not_captured {
            notes.push(format!(
                "{} changed but is not captured: {}",
                n.path, n.reason
            ));
        }
    }
    Ok(if notes.is_empty() {
        Coverage::Recorded
    } else {
        Coverage::RecordedWithNotes(notes)
    })
}

/// Post-tool event of a file tool: records the written file's post-image
/// (its hash as the agent left it), so a later rewind reports a file the
/// user changed afterwards as a conflict and saves it first.
pub fn post_image(store: &mut Store, session: &Session, path: &Path) -> anyhow::Result<()> {
    store.record_post_images(&session.turn, &[path])?;
    Ok(())
}

/// One matcher group running `command` with the hook timeout, in `unit`s
/// per second (1 for seconds, 1000 for milliseconds).
pub fn handler(command: &str, per_second: u64) -> Value {
    json!([{
        "type": "command",
        "command": command,
        "timeout": HOOK_TIMEOUT_SECS * per_second,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_first_non_empty_line() {
        assert_eq!(label_of("\n  Fix the header  \nand more"), "Fix the header");
        assert_eq!(label_of(""), "(empty prompt)");
        assert_eq!(label_of(&"x".repeat(500)).chars().count(), 120);
    }

    #[test]
    fn session_tags_are_short_and_safe() {
        assert_eq!(session_tag("8c35adc1-4f1e-4c9a"), "8c35adc1");
        assert_eq!(session_tag("a/b"), "ab");
        assert_eq!(session_tag("../"), "session");
    }
}
