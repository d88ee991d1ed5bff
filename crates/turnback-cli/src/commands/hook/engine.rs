//! The engine shared by the hook adapters: each adapter reads its agent's
//! event JSON from standard input into one [`Event`] (session, turn key,
//! cwd, event name, tool, tool input, prompt), and a [`Dialect`] names the
//! agent's events and tools; everything else is here.
//!
//! - A prompt event begins a new turn, `<prefix>-<session>-<n>` (the first
//!   8 alphanumerics of the session id, and the session's prompt count),
//!   labelled with the prompt's first line. The session's current turn is
//!   kept in the store ([`Store::update_session`]), so the separate hook
//!   processes of one session agree on it. Where the agent sends a turn key
//!   (Claude Code's `prompt_id`, Codex's `turn_id`, opencode's message id,
//!   Cline's task id), the same key never begins two turns, and a prompt
//!   that arrives after its turn's first tool call labels that turn.
//! - The pre-tool event of a file tool captures the paths the tool names
//!   (a patch tool's paths are parsed from the patch, see [`super::patch`])
//!   in the current turn. A tool call that arrives before any prompt was
//!   seen, or with another turn key, begins a turn of its own first.
//! - The pre/post-tool events of a shell tool: the before/after snapshot of
//!   the command goes through [`shell_snapshot`]. A command that only runs
//!   turnback itself (a rewind asked for from the chat) is left alone:
//!   turnback records its own rewinds.
//! - The post-tool event of a file tool: the post-image goes through
//!   [`post_image`].
//!
//! - A prompt event first closes the command windows its session's hooks
//!   left open (a shell call the user interrupted gets no post-tool event;
//!   one in the background keeps its window past it), recording what
//!   changed in their turns. A session remembers the turns of its last 16
//!   prompt ids, so a tool call of an earlier prompt (a subagent still
//!   running) joins that prompt's turn.
//!
//! The root is `--root`, else the nearest ancestor of the event's `cwd` that
//! has a store, else that of the agent's project directory variable
//! (`$CLAUDE_PROJECT_DIR`), else the event's `cwd`; never the home folder,
//! a file-system root or a folder holding the data directory
//! (`turnback::never_a_root`).
//!
//! A hook must never break the agent: an internal error prints a message on
//! stderr and the hook succeeds, and stdout holds only what the agent
//! expects. The one exception: when the pre-image of a file about to be
//! written cannot be saved, the hook blocks the tool call the agent's way
//! ([`Block`]: exit 2 with the reason on stderr for most agents, a `cancel`
//! answer for Cline, which ignores failing hooks), so no file is overwritten
//! that could not be rewound.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};
use turnback::{Error, Options, Session, Store, TurnId};

use super::super::maintain::Maintained;
use super::patch;
use crate::{Ctx, Outcome};

/// The exit code that makes the agent block a tool call and show stderr to
/// the model.
pub const EXIT_BLOCK: u8 = 2;

/// How long a hook waits for another turnback process's lock: well inside
/// the hook timeout `turnback init` sets, so a wait that runs out blocks the
/// write instead of being killed by the agent.
const LOCK_WAIT: Duration = Duration::from_secs(20);

/// The hook timeout written into the agent's settings, in seconds.
pub const HOOK_TIMEOUT_SECS: u64 = 30;

/// Events larger than this are refused (a write's content is in the event).
const MAX_EVENT: u64 = 256 << 20;

/// How a hook tells the agent to block a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// Exit 2 with the reason on stderr.
    Exit2,
    /// Exit 0 with `{"cancel":true,"errorMessage":REASON}` on stdout (Cline,
    /// which lets a tool run when its hook fails).
    CancelJson,
}

/// One hook event, as the adapter read it from the agent's JSON.
#[derive(Debug, Default, Clone)]
pub struct Event {
    /// The agent's session (conversation, task) id.
    pub session_id: String,
    /// The agent's key of the turn the event belongs to, when it sends one.
    pub turn_key: Option<String>,
    /// The directory the agent ran the hook for.
    pub cwd: Option<PathBuf>,
    /// The event's name, as the agent names it.
    pub name: String,
    /// The tool's name, for tool events.
    pub tool: Option<String>,
    /// The tool's input, for tool events.
    pub input: Option<Value>,
    /// The prompt's text, for prompt events.
    pub prompt: Option<String>,
}

/// What a prompt event does when the session already has a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptRule {
    /// Begins the next turn (unless its turn key began the current one).
    Begin,
    /// Begins a turn only if the session has none yet, else labels the
    /// current one (Cline's task start, which the CLI sends detached, so it
    /// may arrive after the task's first tool call).
    BeginOnce,
}

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
    /// Whether the agent's session ids begin with a timestamp, so turn ids
    /// take their last characters, not their first.
    pub tag_from_end: bool,
    /// The events that submit a prompt, and what each does.
    pub prompt_events: &'static [(&'static str, PromptRule)],
    /// The events before a tool runs.
    pub pre_tool: &'static [&'static str],
    /// The events after a tool ran.
    pub post_tool: &'static [&'static str],
    /// Tools that write the file named in their input.
    pub file_tools: &'static [&'static str],
    /// Tools whose input holds a patch (`*** Begin Patch` format), with the
    /// input key that holds it; the paths are parsed from the patch.
    pub patch_tools: &'static [(&'static str, &'static str)],
    /// Tools that run a shell command.
    pub shell_tools: &'static [&'static str],
    /// The input keys that hold a file tool's path, first found wins.
    pub path_keys: &'static [&'static str],
    /// What stdout holds when the hook lets the agent go on.
    pub stdout_ok: &'static str,
    /// How the hook blocks a tool call.
    pub block: Block,
    /// An environment variable naming the project directory, if the agent
    /// sets one for hooks.
    pub project_env: Option<&'static str>,
    /// The project file that installs the hooks, relative to the root.
    pub settings_file: &'static str,
    /// Reads the agent's event JSON; the second argument is the event name
    /// given on the command line, for agents whose JSON lacks it.
    pub parse: fn(&Value, Option<&str>) -> anyhow::Result<Event>,
}

impl Dialect {
    /// The matcher for every tool the adapter handles.
    pub fn tool_matcher(&self) -> String {
        let patch = self.patch_tools.iter().map(|(t, _)| *t);
        let tools: Vec<&str> = self
            .file_tools
            .iter()
            .copied()
            .chain(patch)
            .chain(self.shell_tools.iter().copied())
            .collect();
        tools.join("|")
    }

    /// Whether a configured hook command is this adapter's: it runs
    /// `… hook <name>`, possibly followed by an event name.
    pub fn is_our_command(&self, command: &str) -> bool {
        let words: Vec<&str> = command.split_whitespace().collect();
        words
            .windows(2)
            .enumerate()
            .any(|(i, w)| w == ["hook", self.name] && words.len() <= i + 3)
    }
}

/// A string field of `v`, the first of `keys` found.
pub fn str_field(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
}

/// The event shape Claude Code documents and Gemini CLI, Codex and Cursor
/// share: `session_id`, `cwd`, `hook_event_name`, `tool_name`,
/// `tool_input`, `prompt`; the turn key is the first of `turn_keys` found.
pub fn parse_common(v: &Value, turn_keys: &[&str]) -> anyhow::Result<Event> {
    let name = str_field(v, &["hook_event_name"]).context("the event has no hook_event_name")?;
    let session_id = str_field(v, &["session_id"]).context("the event has no session_id")?;
    Ok(Event {
        session_id,
        turn_key: str_field(v, turn_keys),
        cwd: str_field(v, &["cwd"]).map(PathBuf::from),
        name,
        tool: str_field(v, &["tool_name"]),
        input: v.get("tool_input").cloned(),
        prompt: str_field(v, &["prompt"]),
    })
}

/// What the hook tells the agent.
enum Verdict {
    /// Go on.
    Allow,
    /// Block the tool call; the reason goes to the model.
    Block(String),
}

/// Handles the event on standard input; the exit code for the agent.
pub fn run(ctx: &Ctx, d: &Dialect, event_name: Option<&str>) -> Outcome {
    let verdict = match read_event(d, event_name) {
        Err(e) => {
            errln!("turnback hook {}: ignoring the event: {e:#}", d.name);
            Verdict::Allow
        }
        Ok(event) => handle(ctx, d, &event).unwrap_or_else(|e| {
            errln!(
                "turnback hook {}: {} was not recorded: {e:#}",
                d.name,
                event.name
            );
            Verdict::Allow
        }),
    };
    let (code, stdout) = match (verdict, d.block) {
        (Verdict::Allow, _) => (0, d.stdout_ok.to_owned()),
        (Verdict::Block(reason), Block::Exit2) => {
            errln!("{reason}");
            return Ok(EXIT_BLOCK);
        }
        (Verdict::Block(reason), Block::CancelJson) => {
            errln!("{reason}");
            let answer = json!({ "cancel": true, "errorMessage": reason });
            (0, answer.to_string())
        }
    };
    if !stdout.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{stdout}");
    }
    Ok(code)
}

fn read_event(d: &Dialect, event_name: Option<&str>) -> anyhow::Result<Event> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_EVENT)
        .read_to_end(&mut bytes)
        .context("cannot read standard input")?;
    let v: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("standard input is not a {} hook event", d.agent))?;
    (d.parse)(&v, event_name)
        .with_context(|| format!("standard input is not a {} hook event", d.agent))
}

fn handle(ctx: &Ctx, d: &Dialect, event: &Event) -> anyhow::Result<Verdict> {
    let tool = event.tool.as_deref().unwrap_or("");
    let name = event.name.as_str();
    let pre = d.pre_tool.contains(&name);
    let post = d.post_tool.contains(&name);
    if let Some((_, rule)) = d.prompt_events.iter().find(|(e, _)| *e == name) {
        let mut store = open(ctx, d, event)?;
        // The session's last tool calls are over: a shell command the user
        // interrupted (no post-tool event) or left in the background is
        // recorded in its turn before the next turn begins.
        if let Some(report) = store.close_session_windows(&session_key(d, event))? {
            for w in report.warnings {
                errln!("turnback: note: {w}");
            }
        }
        begin_turn(&mut store, d, event, *rule)?;
    } else if pre && is_file_tool(d, tool) {
        return Ok(capture_before_write(ctx, d, event));
    } else if (pre || post) && d.shell_tools.contains(&tool) {
        if runs_only_turnback(event.input.as_ref()) {
            return Ok(Verdict::Allow);
        }
        let mut store = open(ctx, d, event)?;
        let session = current_turn(&mut store, d, event)?;
        let phase = if pre { Phase::Before } else { Phase::After };
        let shell = Shell {
            session: &session_key(d, event),
            background: runs_in_background(event.input.as_ref()),
        };
        match shell_snapshot(&mut store, &session, phase, Some(&shell))? {
            Coverage::Recorded => {}
            Coverage::RecordedWithNotes(notes) => {
                for n in notes {
                    errln!("turnback: note: {n}");
                }
            }
        }
        // What `turnback log` shows the turn ran (a description: a
        // failure to note it stops nothing).
        if phase == Phase::Before
            && let Some(command) = command_text(event.input.as_ref())
            && let Err(e) = store.note_command(&session.turn, &command)
        {
            errln!("turnback: note: the command is not noted for `turnback log`: {e}");
        }
    } else if post && is_file_tool(d, tool) {
        let mut store = open(ctx, d, event)?;
        let session = current_turn(&mut store, d, event)?;
        let paths = tool_paths(d, event)?;
        if !paths.is_empty() {
            post_image(&mut store, &session, &paths)?;
        }
    }
    Ok(Verdict::Allow)
}

fn is_file_tool(d: &Dialect, tool: &str) -> bool {
    d.file_tools.contains(&tool) || d.patch_tools.iter().any(|(t, _)| *t == tool)
}

/// A command line's first word, with the quotes around it removed.
fn first_word(command: &str) -> &str {
    let c = command.trim_start();
    for q in ['\'', '"'] {
        if let Some(rest) = c.strip_prefix(q) {
            return rest.split(q).next().unwrap_or("");
        }
    }
    c.split_whitespace().next().unwrap_or("")
}

/// The command line a shell tool's input holds: `command` as a string
/// (or a list of words, joined), or Cline's `commands` list, one a line.
fn command_text(input: Option<&Value>) -> Option<String> {
    let input = input?;
    let words = |list: &Vec<Value>| -> Option<String> {
        let words: Vec<&str> = list.iter().map(Value::as_str).collect::<Option<_>>()?;
        Some(words.join(" "))
    };
    let text = match (input.get("command"), input.get("commands")) {
        (Some(Value::String(c)), _) => c.clone(),
        (Some(Value::Array(list)), _) => words(list)?,
        (_, Some(Value::Array(list))) => list
            .iter()
            .map(|c| {
                c.as_str()
                    .or_else(|| c.get("command").and_then(Value::as_str))
            })
            .collect::<Option<Vec<&str>>>()?
            .join("\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

/// Whether a shell tool's input runs nothing but the `turnback` program
/// (one simple command, no pipes, lists or substitutions).
fn runs_only_turnback(input: Option<&Value>) -> bool {
    let Some(input) = input else { return false };
    let commands: Vec<&str> = match (input.get("command"), input.get("commands")) {
        (Some(Value::String(c)), _) => vec![c.as_str()],
        (_, Some(Value::Array(list))) => list
            .iter()
            .map(|c| {
                c.as_str()
                    .or_else(|| c.get("command").and_then(Value::as_str))
            })
            .collect::<Option<Vec<&str>>>()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    !commands.is_empty()
        && commands.iter().all(|c| {
            let simple = !c.contains(['\n', ';', '&', '|', '<', '>', '`', '$', '(']);
            simple && first_word(c).rsplit('/').next() == Some("turnback")
        })
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
    // A marker, or a registered store whose marker a command deleted.
    let has_store = |p: &Path| {
        p.join(turnback::path::STORE_DIR).is_dir()
            || matches!(turnback::location::locate(p, None), Ok(Some(_)))
    };
    // The home folder, a file-system root or the folder holding the data
    // directory is never taken (`turnback::never_a_root`): an agent started
    // there gets an error on stderr and its hooks record nothing.
    let found = turnback::discover_root(&cwd);
    if let Ok(found) = &found
        && has_store(found)
    {
        return Ok(found.clone());
    }
    if let Some(project) = d.project_env.and_then(std::env::var_os).map(PathBuf::from)
        && project.is_absolute()
    {
        let found = turnback::discover_root(&project)?;
        return Ok(if has_store(&found) { found } else { project });
    }
    Ok(found?)
}

fn open(ctx: &Ctx, d: &Dialect, event: &Event) -> anyhow::Result<Maintained> {
    let root = root_for(ctx, d, event)?;
    let options = Options {
        lock_timeout: LOCK_WAIT,
        ..Options::default()
    };
    let store = Maintained::open(&root, options)
        .with_context(|| format!("cannot open the turnback store of {}", root.display()))?;
    for w in store.warnings() {
        errln!("turnback: warning: {w}");
    }
    Ok(store)
}

/// The short form of a session id used in turn ids.
/// Agents whose session ids begin with a timestamp (UUIDv7, `Date.now()`)
/// are tagged by their last 8 alphanumerics, the others by their first 8.
fn session_tag(session_id: &str, from_end: bool) -> String {
    let alnum: Vec<char> = session_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let tag: String = if from_end {
        alnum[alnum.len().saturating_sub(8)..].iter().collect()
    } else {
        alnum.iter().take(8).collect()
    };
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

/// Begins the next turn of the event's session (see [`PromptRule`]).
fn begin_turn(
    store: &mut Store,
    d: &Dialect,
    event: &Event,
    rule: PromptRule,
) -> anyhow::Result<Session> {
    let label = event.prompt.as_deref().map(label_of);
    let mode = match rule {
        PromptRule::Begin => Begin::Prompt,
        PromptRule::BeginOnce => Begin::Once,
    };
    next_turn(store, d, event, label, mode)
}

fn session_key(d: &Dialect, event: &Event) -> String {
    format!("{}{}", d.session_key_prefix, event.session_id)
}

/// Whether `event` belongs to the prompt that began `s` (true when either
/// lacks a turn key).
fn same_prompt(s: &Session, event: &Event) -> bool {
    match (&s.prompt_id, &event.turn_key) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Who asks [`next_turn`] for a turn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Begin {
    /// A prompt: the next turn.
    Prompt,
    /// A prompt that begins a turn only if the session has none (and
    /// labels the current one otherwise).
    Once,
    /// A tool call: a turn another hook process began meanwhile for the
    /// same prompt is joined, so parallel tool calls agree on one turn.
    ToolCall,
}

/// The tag of a session's first turn: its short tag, unless another
/// session with the same short tag already has turns; then its whole id,
/// so turn ids never collide.
fn fresh_tag(store: &Store, d: &Dialect, event: &Event) -> anyhow::Result<String> {
    let short = session_tag(&event.session_id, d.tag_from_end);
    let taken = format!("{}-{short}-", d.turn_prefix);
    let collides = store.session(&session_key(d, event))?.is_none()
        && store
            .turns()?
            .iter()
            .any(|t| t.id.as_str().starts_with(&taken));
    if !collides {
        return Ok(short);
    }
    Ok(event
        .session_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(64)
        .collect())
}

/// The tag in a turn id `<prefix>-<tag>-<n>`.
fn tag_of(turn: &TurnId, d: &Dialect) -> Option<String> {
    let rest = turn
        .as_str()
        .strip_prefix(d.turn_prefix)?
        .strip_prefix('-')?;
    let (tag, _) = rest.rsplit_once('-')?;
    Some(tag.to_owned())
}

/// Begins the session's next turn under the store lock. The same turn key
/// never begins two turns; a prompt that finds its turn already begun (by
/// a tool call) gives it its label.
fn next_turn(
    store: &mut Store,
    d: &Dialect,
    event: &Event,
    label: Option<String>,
    mode: Begin,
) -> anyhow::Result<Session> {
    let fresh = fresh_tag(store, d, event)?;
    // A tool call (or a prompt event arriving late) of an earlier prompt
    // joins that prompt's turn; the session's current turn stays.
    let mut earlier_turn = None;
    let session = store.update_session(&session_key(d, event), |cur| {
        let same_key = |c: &Session| {
            event.turn_key.is_some() && c.prompt_id.as_deref() == event.turn_key.as_deref()
        };
        if let Some(cur) = &cur {
            let join = match mode {
                Begin::Prompt => same_key(cur),
                Begin::Once => true,
                Begin::ToolCall => same_prompt(cur, event),
            };
            if join {
                let mut s = cur.clone();
                s.label = s.label.or(label);
                return Ok(s);
            }
            if mode != Begin::Once
                && let Some(key) = &event.turn_key
                && let Some(mut s) = cur.for_earlier_prompt(key)
            {
                s.label = s.label.or(label);
                earlier_turn = Some(s);
                let mut kept = cur.clone();
                if let Some(e) = kept.earlier.iter_mut().find(|e| &e.prompt_id == key) {
                    e.label = earlier_turn.as_ref().and_then(|s| s.label.clone());
                }
                return Ok(kept);
            }
        }
        let number = cur.as_ref().map_or(1, |c| c.number + 1);
        // A session keeps the tag its first turn got.
        let tag = cur
            .as_ref()
            .and_then(|c| tag_of(&c.turn, d))
            .unwrap_or_else(|| fresh.clone());
        Ok(Session {
            key: String::new(),
            turn: TurnId::new(format!("{}-{tag}-{number}", d.turn_prefix))?,
            number,
            prompt_id: event.turn_key.clone(),
            label,
            updated_at: 0,
            earlier: cur
                .as_ref()
                .map(Session::earlier_with_current)
                .unwrap_or_default(),
        })
    })?;
    Ok(earlier_turn.unwrap_or(session))
}

/// The session's current turn; a tool call with no turn yet (hooks installed
/// mid-session) or from another prompt begins one, unlabelled until its
/// prompt arrives, unless the tool event itself knows the prompt (Cline's,
/// from its session record: its prompt event may come last).
fn current_turn(store: &mut Store, d: &Dialect, event: &Event) -> anyhow::Result<Session> {
    if let Some(s) = store.session(&session_key(d, event))? {
        if same_prompt(&s, event) {
            return Ok(s);
        }
        // A late tool call of an earlier prompt: its own turn, read
        // without the lock, as the current one is.
        if let Some(earlier) = event
            .turn_key
            .as_deref()
            .and_then(|k| s.for_earlier_prompt(k))
        {
            return Ok(earlier);
        }
    }
    let label = event.prompt.as_deref().map(label_of);
    next_turn(store, d, event, label, Begin::ToolCall)
}

/// Makes `raw` absolute against the event's `cwd`.
fn absolute(event: &Event, raw: &str) -> anyhow::Result<PathBuf> {
    let p = PathBuf::from(raw);
    if p.is_absolute() {
        return Ok(p);
    }
    let base = match &event.cwd {
        Some(c) if c.is_absolute() => c.clone(),
        _ => std::env::current_dir()?,
    };
    Ok(base.join(p))
}

/// The files a file or patch tool is about to write, made absolute against
/// the event's `cwd`.
fn tool_paths(d: &Dialect, event: &Event) -> anyhow::Result<Vec<PathBuf>> {
    let Some(input) = event.input.as_ref() else {
        return Ok(Vec::new());
    };
    let tool = event.tool.as_deref().unwrap_or("");
    let raw: Vec<String> = if let Some((_, key)) = d.patch_tools.iter().find(|(t, _)| *t == tool) {
        input
            .get(*key)
            .and_then(Value::as_str)
            .map(patch::paths)
            .unwrap_or_default()
    } else {
        str_field(input, d.path_keys).into_iter().collect()
    };
    raw.iter()
        .filter(|r| !r.is_empty())
        .map(|r| absolute(event, r))
        .collect()
}

/// Pre-tool event of a file tool: save the pre-images, or block the write.
fn capture_before_write(ctx: &Ctx, d: &Dialect, event: &Event) -> Verdict {
    let tool = event.tool.as_deref().unwrap_or("");
    let paths = match tool_paths(d, event) {
        Ok(p) if p.is_empty() => {
            errln!(
                "turnback hook {}: {tool} names no file path; nothing was captured",
                d.name
            );
            return Verdict::Allow;
        }
        Ok(p) => p,
        Err(e) => return block(d, tool, Path::new("?"), &e),
    };
    let mut failed = None;
    let result = open(ctx, d, event).and_then(|mut store| {
        let session = current_turn(&mut store, d, event)?;
        for path in &paths {
            failed = Some(path.clone());
            capture_one(&mut store, &session, path)?;
        }
        Ok(())
    });
    match result {
        Ok(()) => Verdict::Allow,
        Err(e) => {
            let path = failed.unwrap_or_else(|| paths[0].clone());
            block(d, tool, &path, &e)
        }
    }
}

/// Captures one path; a path that is not the project's (outside the root,
/// or in `.git/`) is noted, not captured and not blocked.
fn capture_one(store: &mut Store, session: &Session, path: &Path) -> anyhow::Result<()> {
    match store.capture(&session.turn, session.label.as_deref(), path) {
        Ok(report) => {
            for p in &report.links_outside {
                errln!(
                    "turnback: warning: {p} is a symlink that points outside the project; a write through it cannot be rewound"
                );
            }
            Ok(())
        }
        Err(Error::BadPath { path: p, reason }) => {
            errln!(
                "turnback: note: {p} is not checkpointed ({reason}); rewinds will not restore it"
            );
            Ok(())
        }
        Err(e) => Err(anyhow::Error::new(e)),
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

/// The agent session a hook's shell command runs in.
pub struct Shell<'a> {
    /// The session's key (its window belongs to it).
    pub session: &'a str,
    /// The agent runs the command in the background: its post-tool event
    /// comes while it goes on.
    pub background: bool,
}

/// Whether a shell tool's input asks the agent to run it in the background
/// (Claude Code's `run_in_background`, Gemini CLI's `is_background`).
fn runs_in_background(input: Option<&Value>) -> bool {
    input.is_some_and(|i| {
        ["run_in_background", "is_background"]
            .iter()
            .any(|k| i.get(*k).and_then(Value::as_bool) == Some(true))
    })
}

/// Pre/post-tool event of a shell tool: the before or after snapshot of the
/// tree in the session's turn, so a file the command created, changed,
/// deleted or renamed is rewound like a file tool's write. A hook's window
/// belongs to its agent session (`shell`), so another session's command does
/// not close it; a command in the background keeps it open after its
/// post-tool event.
pub fn shell_snapshot(
    store: &mut Store,
    session: &Session,
    phase: Phase,
    shell: Option<&Shell<'_>>,
) -> anyhow::Result<Coverage> {
    let after = phase == Phase::After;
    let label = session.label.as_deref();
    let progress = &turnback::NoProgress;
    let report = match shell {
        Some(sh) => store.snapshot_in_session(
            &session.turn,
            label,
            after,
            sh.session,
            sh.background,
            progress,
        )?,
        None => store.snapshot(&session.turn, label, after, progress)?,
    };
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
pub fn post_image(store: &mut Store, session: &Session, paths: &[PathBuf]) -> anyhow::Result<()> {
    store.record_post_images(&session.turn, paths)?;
    Ok(())
}

/// One handler list running `command` with the hook timeout, in units per
/// second (1 for seconds, 1000 for milliseconds).
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
    fn a_shell_tool_names_its_command_line() {
        let text = |v: Value| command_text(Some(&v));
        assert_eq!(
            text(json!({"command": "cargo test"})).as_deref(),
            Some("cargo test")
        );
        assert_eq!(
            text(json!({"command": ["bash", "-lc", "ls"]})).as_deref(),
            Some("bash -lc ls")
        );
        assert_eq!(
            text(json!({"commands": ["make", {"command": "ls"}]})).as_deref(),
            Some("make\nls")
        );
        assert_eq!(text(json!({"command": "  "})), None);
        assert_eq!(text(json!({"path": "a"})), None);
    }

    #[test]
    fn only_a_plain_turnback_command_is_left_alone() {
        let cmd = |c: &str| Some(json!({ "command": c }));
        assert!(runs_only_turnback(cmd("turnback list").as_ref()));
        assert!(runs_only_turnback(
            cmd("/usr/bin/turnback rewind t1").as_ref()
        ));
        assert!(runs_only_turnback(cmd("'/a b/turnback' undo").as_ref()));
        assert!(!runs_only_turnback(cmd("turnback list; rm -rf x").as_ref()));
        assert!(!runs_only_turnback(cmd("turnback list > out").as_ref()));
        assert!(!runs_only_turnback(cmd("echo turnback").as_ref()));
        assert!(!runs_only_turnback(None));
        let cline = json!({ "commands": ["turnback list", "ls"] });
        assert!(!runs_only_turnback(Some(&cline)));
        let cline = json!({ "commands": [{"command": "turnback", "args": ["undo"]}] });
        assert!(runs_only_turnback(Some(&cline)));
    }

    #[test]
    fn session_tags_are_short_and_safe() {
        assert_eq!(session_tag("8c35adc1-4f1e-4c9a", false), "8c35adc1");
        assert_eq!(
            session_tag("019a7c3e-5b1d-7f20-9c4e-8d2a61b0f3c7", true),
            "2a61b0f3c7"[2..]
        );
        assert_eq!(session_tag("a/b", false), "ab");
        assert_eq!(session_tag("ab", true), "ab");
        assert_eq!(session_tag("../", true), "session");
    }
}
