//! `turnback hook claude-code`: one Claude Code hook event, read as JSON on
//! standard input (fields as Claude Code's hook documentation defines them:
//! `session_id`, `prompt_id`, `cwd`, `hook_event_name`, `tool_name`,
//! `tool_input`, `prompt`).
//!
//! - `UserPromptSubmit` begins a new turn, `claude-<session>-<n>` (the first
//!   8 characters of the session id, and the session's prompt count), labelled
//!   with the prompt's first line. The session's current turn is kept in the
//!   store (`.turnback/sessions/<session_id>.json`), so the separate hook
//!   processes of one session agree on it. The same `prompt_id` delivered
//!   twice begins one turn, not two.
//! - `PreToolUse` for `Write`, `Edit`, `MultiEdit` and `NotebookEdit`
//!   captures `tool_input.file_path` (`notebook_path` for notebooks) in the
//!   current turn. A tool call that arrives before any prompt was seen, or
//!   with another `prompt_id`, begins a turn of its own first.
//! - `PreToolUse` / `PostToolUse` for `Bash`: the before/after snapshot of the
//!   shell command goes through [`shell_snapshot`].
//! - `PostToolUse` for the file tools: the post-image goes through
//!   [`post_image`].
//!
//! The root is `--root`, else the nearest ancestor of the event's `cwd` that
//! has a `.turnback/`, else that of `$CLAUDE_PROJECT_DIR`, else the event's
//! `cwd`.
//!
//! A hook must never break the agent: an internal error prints a message on
//! stderr and exits 0, and nothing is ever printed on stdout (Claude Code
//! adds a `UserPromptSubmit` hook's stdout to the model's context). The one
//! exception: when the pre-image of a file about to be written cannot be
//! saved, the hook exits 2 with the reason on stderr, which makes Claude Code
//! block the tool call and show the reason to the model, so no file is
//! overwritten that could not be rewound.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use serde_json::{Value, json};
use turnback::{Error, Options, Session, Store, TurnId};

use crate::{Ctx, Outcome};

/// The exit code that makes Claude Code block a tool call and show stderr to
/// the model.
pub const EXIT_BLOCK: u8 = 2;

/// The tools whose writes are captured before they happen.
pub const FILE_TOOLS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// How long a hook waits for another turnback process's lock: well inside
/// the hook timeout set by `turnback init claude-code`, so a wait that runs
/// out blocks the write (exit 2) instead of being killed by Claude Code.
const LOCK_WAIT: Duration = Duration::from_secs(20);

/// The hook timeout (seconds) written into `.claude/settings.json`.
pub const HOOK_TIMEOUT_SECS: u64 = 30;

/// Events larger than this are refused (a Write's content is in the event).
const MAX_EVENT: u64 = 256 << 20;

/// Handle one Claude Code hook event read from standard input
#[derive(clap::Args, Debug)]
pub struct Args {}

/// One hook event; fields Claude Code adds later are ignored.
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

/// What the hook tells Claude Code.
enum Verdict {
    /// Exit 0: go on.
    Allow,
    /// Exit 2: block the tool call; the reason goes to the model.
    Block(String),
}

pub fn run(ctx: &Ctx, _args: Args) -> Outcome {
    let event = match read_event() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("turnback hook claude-code: ignoring the event: {e:#}");
            return Ok(0);
        }
    };
    match handle(ctx, &event) {
        Ok(Verdict::Allow) => Ok(0),
        Ok(Verdict::Block(reason)) => {
            eprintln!("{reason}");
            Ok(EXIT_BLOCK)
        }
        Err(e) => {
            eprintln!(
                "turnback hook claude-code: {} was not recorded: {e:#}",
                event.hook_event_name
            );
            Ok(0)
        }
    }
}

fn read_event() -> anyhow::Result<Event> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_EVENT)
        .read_to_end(&mut bytes)
        .context("cannot read standard input")?;
    serde_json::from_slice(&bytes).context("standard input is not a Claude Code hook event")
}

fn handle(ctx: &Ctx, event: &Event) -> anyhow::Result<Verdict> {
    let tool = event.tool_name.as_deref().unwrap_or("");
    match event.hook_event_name.as_str() {
        "UserPromptSubmit" => {
            let mut store = open(ctx, event)?;
            begin_turn(&mut store, event)?;
            Ok(Verdict::Allow)
        }
        "PreToolUse" if FILE_TOOLS.contains(&tool) => Ok(capture_before_write(ctx, event)),
        "PreToolUse" | "PostToolUse" if tool == "Bash" => {
            let mut store = open(ctx, event)?;
            let session = current_turn(&mut store, event)?;
            let phase = if event.hook_event_name == "PreToolUse" {
                Phase::Before
            } else {
                Phase::After
            };
            match shell_snapshot(&mut store, &session, phase)? {
                Coverage::Recorded => {}
                Coverage::NotCaptured(why) => {
                    eprintln!("turnback: note: {why}");
                }
            }
            Ok(Verdict::Allow)
        }
        "PostToolUse" if FILE_TOOLS.contains(&tool) => {
            let mut store = open(ctx, event)?;
            let session = current_turn(&mut store, event)?;
            if let Some(path) = tool_path(event)? {
                post_image(&mut store, &session, &path)?;
            }
            Ok(Verdict::Allow)
        }
        _ => Ok(Verdict::Allow),
    }
}

/// The project root for an event (see the module docs).
fn root_for(ctx: &Ctx, event: &Event) -> anyhow::Result<PathBuf> {
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
    if let Some(project) = std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from)
        && project.is_absolute()
    {
        let found = turnback::discover_root(&project);
        return Ok(if has_store(&found) { found } else { project });
    }
    Ok(cwd)
}

fn open(ctx: &Ctx, event: &Event) -> anyhow::Result<Store> {
    let root = root_for(ctx, event)?;
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

/// Begins the next turn of the event's session (unless this very prompt
/// already began one).
fn begin_turn(store: &mut Store, event: &Event) -> anyhow::Result<Session> {
    let label = match &event.prompt {
        Some(p) => label_of(p),
        None => "Claude Code prompt (not seen by the hook)".to_owned(),
    };
    next_turn(store, event, label)
}

fn next_turn(store: &mut Store, event: &Event, label: String) -> anyhow::Result<Session> {
    let tag = session_tag(&event.session_id);
    let session = store.update_session(&event.session_id, |cur| {
        if let (Some(cur), Some(id)) = (&cur, &event.prompt_id)
            && cur.prompt_id.as_deref() == Some(id)
        {
            return Ok(cur.clone());
        }
        let number = cur.as_ref().map_or(1, |c| c.number + 1);
        Ok(Session {
            key: String::new(),
            turn: TurnId::new(format!("claude-{tag}-{number}"))?,
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
fn current_turn(store: &mut Store, event: &Event) -> anyhow::Result<Session> {
    if let Some(s) = store.session(&event.session_id)? {
        let same_prompt = match (&s.prompt_id, &event.prompt_id) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        if same_prompt {
            return Ok(s);
        }
    }
    next_turn(
        store,
        event,
        "Claude Code prompt (not seen by the hook)".to_owned(),
    )
}

/// The file a file tool is about to write, made absolute against the
/// event's `cwd`.
fn tool_path(event: &Event) -> anyhow::Result<Option<PathBuf>> {
    let input = event.tool_input.as_ref();
    let raw = input
        .and_then(|i| i.get("file_path").or_else(|| i.get("notebook_path")))
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

/// PreToolUse for a file tool: save the pre-image, or block the write.
fn capture_before_write(ctx: &Ctx, event: &Event) -> Verdict {
    let tool = event.tool_name.as_deref().unwrap_or("");
    let path = match tool_path(event) {
        Ok(Some(p)) => p,
        Ok(None) => {
            eprintln!("turnback hook claude-code: {tool} names no file_path; nothing was captured");
            return Verdict::Allow;
        }
        Err(e) => return block(tool, Path::new("?"), &e),
    };
    let result = open(ctx, event).and_then(|mut store| {
        let session = current_turn(&mut store, event)?;
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
        Err(e) => block(tool, &path, &e),
    }
}

fn block(tool: &str, path: &Path, e: &anyhow::Error) -> Verdict {
    Verdict::Block(format!(
        "turnback blocked this {tool}: it could not save the current contents of {} first, so the change could not be rewound. Reason: {e:#}. Fix the cause and retry, or remove turnback's hooks from .claude/settings.json to write without checkpoints.",
        path.display()
    ))
}

/// Which side of a shell command a snapshot is taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// PreToolUse: before the command runs.
    Before,
    /// PostToolUse: after it ran.
    After,
}

/// Whether a shell command's edits are rewindable.
pub enum Coverage {
    /// The snapshot was recorded in the turn.
    #[expect(dead_code, reason = "returned once the store snapshots shell commands")]
    Recorded,
    /// Nothing was recorded, with the reason.
    NotCaptured(String),
}

/// The before/after snapshot of a shell command, so that files it changes
/// are rewindable too: the one place where the store's snapshot call goes.
/// This build has no snapshot support in the store, so nothing is recorded
/// and the caller says so.
pub fn shell_snapshot(
    _store: &mut Store,
    _session: &Session,
    phase: Phase,
) -> anyhow::Result<Coverage> {
    let _ = phase;
    Ok(Coverage::NotCaptured(
        "this turnback build does not snapshot shell commands: files changed by Bash are not rewindable; use the Write and Edit tools, or `turnback capture` before the command".into(),
    ))
}

/// PostToolUse for a file tool: the one place where the written file's
/// post-image is recorded for conflict detection. This build's store has no
/// post-image record, so nothing is recorded (the pre-image, saved before
/// the write, is what a rewind needs).
pub fn post_image(_store: &mut Store, _session: &Session, _path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// The `hooks` section of `.claude/settings.json` that runs `command` (the
/// full command line of `turnback hook claude-code`) on every event the
/// adapter handles.
pub fn settings_hooks(command: &str) -> Value {
    let handler = json!([{
        "type": "command",
        "command": command,
        "timeout": HOOK_TIMEOUT_SECS,
    }]);
    let matcher = [FILE_TOOLS.as_slice(), &["Bash"]].concat().join("|");
    json!({
        "UserPromptSubmit": [{ "hooks": handler }],
        "PreToolUse": [{ "matcher": matcher, "hooks": handler }],
        "PostToolUse": [{ "matcher": matcher, "hooks": handler }],
    })
}

/// Whether a configured hook command is this adapter's.
pub fn is_our_command(command: &str) -> bool {
    command.trim_end().ends_with("hook claude-code")
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

    #[test]
    fn settings_match_every_tool_the_adapter_handles() {
        let h = settings_hooks("turnback hook claude-code");
        for event in ["PreToolUse", "PostToolUse"] {
            let m = h[event][0]["matcher"].as_str().expect("a matcher");
            let tools: Vec<&str> = m.split('|').collect();
            for t in FILE_TOOLS.iter().chain(&["Bash"]) {
                assert!(tools.contains(t), "{event} misses {t}");
            }
        }
        assert!(h["UserPromptSubmit"][0].get("matcher").is_none());
        assert!(is_our_command(
            h["PreToolUse"][0]["hooks"][0]["command"]
                .as_str()
                .expect("a command")
        ));
        assert!(!is_our_command("./lint.sh"));
    }
}
