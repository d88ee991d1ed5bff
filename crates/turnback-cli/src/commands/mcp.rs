//! `turnback mcp`: a Model Context Protocol server over stdio, built on the
//! official Rust SDK (`rmcp`).
//!
//! Its file tools are named and shaped like the reference filesystem MCP
//! server's (`write_file {path, content}`, `edit_file {path, edits:
//! [{oldText, newText}], dryRun}`, `create_directory {path}`, `move_file
//! {source, destination}`), plus `delete_file {path}`, which the reference
//! server lacks; each captures before it writes. `list_turns`, `show_turn`,
//! `diff_turn` and `rewind` expose the store.
//!
//! Paths are relative to the project root or absolute inside it; anything
//! else (`..`, a symlink leading out, `.git/`, `.turnback/`) is a tool error
//! and nothing is written.
//!
//! The turn rule ([`TURN_RULE`]): a write tool's optional `turn` argument
//! names the turn. Without it, the call joins the server's current default
//! turn `mcp-<n>` when the server finished its previous tool call (of any
//! kind) less than `--turn-gap` seconds before (2 by default), which keeps
//! the calls of one client request batch together; otherwise it begins the
//! next default turn. A `rewind` ends the current default turn, and so does
//! a rewind of it from outside. `<n>` is the smallest number from 1 up whose
//! id this store has never used.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use turnback::{Error, Options, RewindOptions, Store, TurnId};

use super::edit::{apply_edits, read_text, unified};
use super::maintain::{self, Maintained};

use crate::{Ctx, Outcome};

/// The rule by which calls without a `turn` argument are grouped into turns.
pub const TURN_RULE: &str = turn_rule!();

/// The text of [`TURN_RULE`], as a literal for the tool descriptions.
macro_rules! turn_rule {
    () => {
        "Turns: pass `turn` to name the turn yourself (any string; every write with the same `turn` is undone together). Without it, a call joins the current default turn mcp-<n> if the server finished its previous tool call less than the turn gap ago (2 s unless the server was started with --turn-gap), so the calls of one request batch form one turn; otherwise it begins the next default turn. A rewind ends the current default turn. Every result names the turn it recorded into."
    };
}
use turn_rule;

/// Serve the turnback tools over MCP on standard input and output
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Calls without a `turn` argument that come less than this many seconds
    /// after the previous tool call finished join its turn (0: every call is
    /// a turn of its own)
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = parse_gap)]
    turn_gap: Duration,
}

fn parse_gap(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is not a duration"))
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    // Opening once checks the root before the client is answered.
    let store = ctx.open(Options::default())?;
    let server = Server::new(store.root().to_path_buf(), args.turn_gap);
    drop(store);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the MCP session: {e}"))?;
        service
            .waiting()
            .await
            .map_err(|e| anyhow::anyhow!("the MCP session ended with an error: {e}"))?;
        Ok(0)
    })
}

/// Default-turn bookkeeping.
struct Turns {
    gap: Duration,
    current: Option<TurnId>,
    next: u64,
    last_end: Option<Instant>,
}

impl Turns {
    /// The turn for a call: `explicit`, or the default turn by the rule.
    fn pick(&mut self, store: &Store, explicit: Option<&str>) -> Result<TurnId, Error> {
        if let Some(t) = explicit {
            return TurnId::new(t);
        }
        let recent = self.last_end.is_some_and(|end| end.elapsed() < self.gap);
        if let Some(cur) = &self.current
            && recent
            && !matches!(store.turn(cur), Err(Error::AlreadyRewound { .. }))
        {
            return Ok(cur.clone());
        }
        loop {
            let id = TurnId::new(format!("mcp-{}", self.next))?;
            self.next += 1;
            if matches!(store.turn(&id), Err(Error::UnknownTurn { .. })) {
                self.current = Some(id.clone());
                return Ok(id);
            }
        }
    }
}

struct State {
    root: PathBuf,
    turns: Turns,
}

/// The MCP server.
#[derive(Clone)]
pub struct Server {
    state: Arc<Mutex<State>>,
    tool_router: ToolRouter<Server>,
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

fn tool_error(s: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(s)])
}

fn json_result(v: &impl serde::Serialize) -> CallToolResult {
    match serde_json::to_string_pretty(v) {
        Ok(s) => text(s),
        Err(e) => tool_error(format!("cannot render the result: {e}")),
    }
}

/// `write_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFile {
    /// The file, relative to the project root or absolute inside it
    path: String,
    /// The file's new content (UTF-8 text)
    content: String,
    /// The turn to record into (default: see the turn rule)
    #[serde(default)]
    turn: Option<String>,
}

/// One exact-text replacement.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Edit {
    /// Text to find: it must occur exactly once in the file (at that point of the edits)
    #[serde(rename = "oldText")]
    old_text: String,
    /// Text to put in its place
    #[serde(rename = "newText")]
    new_text: String,
}

/// `edit_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFile {
    /// The file, relative to the project root or absolute inside it
    path: String,
    /// Replacements, applied in order, each to the result of the ones before
    edits: Vec<Edit>,
    /// Only return the diff; write nothing
    #[serde(default, rename = "dryRun")]
    dry_run: bool,
    /// The turn to record into (default: see the turn rule)
    #[serde(default)]
    turn: Option<String>,
}

/// A path argument.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PathArg {
    /// Relative to the project root or absolute inside it
    path: String,
    /// The turn to record into (default: see the turn rule)
    #[serde(default)]
    turn: Option<String>,
}

/// `move_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MoveFile {
    /// The file or symlink to move
    source: String,
    /// Where it goes; must not exist (missing parent directories are created)
    destination: String,
    /// The turn to record into (default: see the turn rule)
    #[serde(default)]
    turn: Option<String>,
}

/// A turn argument.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TurnArg {
    /// The turn id, as list_turns shows it
    turn: String,
}

/// `rewind` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RewindArg {
    /// The turn to undo, with every later turn
    turn: String,
    /// Only return the plan; change nothing
    #[serde(default, rename = "dryRun")]
    dry_run: bool,
    /// Take back only these files or folders (relative to the project
    /// root) of the turns; the turns stay and can still be rewound whole
    #[serde(default)]
    paths: Vec<String>,
}

/// The arguments of list_turns (none).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

impl Server {
    /// A server for the project at `root`.
    pub fn new(root: PathBuf, gap: Duration) -> Self {
        Server {
            state: Arc::new(Mutex::new(State {
                root,
                turns: Turns {
                    gap,
                    current: None,
                    next: 1,
                    last_end: None,
                },
            })),
            tool_router: Self::tool_router(),
        }
    }

    /// Runs `f` with a freshly opened store (so turns recorded by other
    /// processes are seen) and the turn bookkeeping; marks the call's end.
    fn with_store(
        &self,
        f: impl FnOnce(&mut Store, &mut Turns) -> Result<CallToolResult, String>,
    ) -> CallToolResult {
        let mut state = match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let state = &mut *state;
        let result = Maintained::open(&state.root, Options::default())
            .map_err(|e| format!("cannot open the turnback store: {e}"))
            .and_then(|mut store| f(&mut store, &mut state.turns));
        state.turns.last_end = Some(Instant::now());
        // The store is dropped: work it left (an automatic gc that came due,
        // names in the trash) runs in the background, not in this call.
        maintain::start_noted();
        result.unwrap_or_else(tool_error)
    }

    /// A write tool: pick the turn, act, report.
    fn write_op(
        &self,
        explicit: Option<&str>,
        label: String,
        act: impl FnOnce(&mut Store, &TurnId, &str) -> Result<String, Error>,
    ) -> CallToolResult {
        self.with_store(|store, turns| {
            let turn = turns.pick(store, explicit).map_err(|e| e.to_string())?;
            let done = act(store, &turn, &label).map_err(|e| e.to_string())?;
            Ok(text(format!("{done}\nturn: {turn}")))
        })
    }
}

fn pairs(edits: &[Edit]) -> impl Iterator<Item = (&str, &str)> {
    edits
        .iter()
        .map(|e| (e.old_text.as_str(), e.new_text.as_str()))
}

fn describe(verb: &str, path: &str) -> String {
    format!("{verb} {path}")
}

#[tool_router]
impl Server {
    #[tool(
        description = concat!(
            "Create a new file or overwrite an existing one with `content`. turnback saves the file's current bytes first, so the turn can be rewound. ",
            turn_rule!()
        ),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true)
    )]
    fn write_file(&self, Parameters(p): Parameters<WriteFile>) -> CallToolResult {
        let label = describe("write_file", &p.path);
        self.write_op(p.turn.as_deref(), label, |store, turn, label| {
            store.write(turn, Some(label), &p.path, p.content.as_bytes())?;
            Ok(format!("wrote {} bytes to {}", p.content.len(), p.path))
        })
    }

    #[tool(
        description = concat!(
            "Edit a text file with exact-text replacements: each oldText must occur exactly once (in the text left by the edits before it) and is replaced by newText. Returns a unified diff; with dryRun the diff only, nothing written. turnback saves the file's current bytes first. ",
            turn_rule!()
        ),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false)
    )]
    fn edit_file(&self, Parameters(p): Parameters<EditFile>) -> CallToolResult {
        if p.dry_run {
            return self.with_store(|store, _| {
                let (rel, old) = read_text(store, &p.path)?;
                let new = apply_edits(&old, pairs(&p.edits))?;
                Ok(text(format!(
                    "dry run: nothing written\n{}",
                    unified(&rel, &old, &new)
                )))
            });
        }
        self.with_store(|store, turns| {
            let (rel, old) = read_text(store, &p.path)?;
            let new = apply_edits(&old, pairs(&p.edits))?;
            let turn = turns
                .pick(store, p.turn.as_deref())
                .map_err(|e| e.to_string())?;
            let label = describe("edit_file", &p.path);
            store
                .write(&turn, Some(&label), &p.path, new.as_bytes())
                .map_err(|e| e.to_string())?;
            Ok(text(format!("{}turn: {turn}", unified(&rel, &old, &new))))
        })
    }

    #[tool(
        description = concat!(
            "Create a directory, with any missing parents; an existing directory is success. Directories it creates are recorded, so a rewind removes them again. ",
            turn_rule!()
        ),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    fn create_directory(&self, Parameters(p): Parameters<PathArg>) -> CallToolResult {
        let label = describe("create_directory", &p.path);
        self.write_op(p.turn.as_deref(), label, |store, turn, label| {
            let r = store.create_dir(turn, Some(label), &p.path)?;
            Ok(if r.captured.is_empty() {
                format!("{} already exists", p.path)
            } else {
                format!("created {}", p.path)
            })
        })
    }

    #[tool(
        description = concat!(
            "Move or rename a file or symlink. Fails if the destination exists; directories are not moved (move the files in them). Both paths are recorded first, so a rewind moves it back. ",
            turn_rule!()
        ),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false)
    )]
    fn move_file(&self, Parameters(p): Parameters<MoveFile>) -> CallToolResult {
        let label = describe("move_file", &p.source);
        self.write_op(p.turn.as_deref(), label, |store, turn, label| {
            store.rename(turn, Some(label), &p.source, &p.destination)?;
            Ok(format!("moved {} to {}", p.source, p.destination))
        })
    }

    #[tool(
        description = concat!(
            "Delete a file or symlink (never what a symlink points to; not directories). Its bytes are saved first, so a rewind brings it back. ",
            turn_rule!()
        ),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false)
    )]
    fn delete_file(&self, Parameters(p): Parameters<PathArg>) -> CallToolResult {
        let label = describe("delete_file", &p.path);
        self.write_op(p.turn.as_deref(), label, |store, turn, label| {
            store.remove_file(turn, Some(label), &p.path)?;
            Ok(format!("deleted {}", p.path))
        })
    }

    #[tool(
        description = "List the turns that can be rewound, oldest first, as JSON (the shape of `turnback list --json`, docs/JSON.md): turn, label, started_at (RFC 3339, UTC), first_seq, file_count.",
        annotations(read_only_hint = true)
    )]
    fn list_turns(&self, Parameters(_): Parameters<NoArgs>) -> CallToolResult {
        self.with_store(|store, _| {
            let turns = store.turns().map_err(|e| e.to_string())?;
            Ok(json_result(&super::list::rows(&turns)))
        })
    }

    #[tool(
        description = "Show the paths a turn recorded, each with its state before the turn (file with size and mode, symlink, absent, or not saved), as JSON.",
        annotations(read_only_hint = true)
    )]
    fn show_turn(&self, Parameters(p): Parameters<TurnArg>) -> CallToolResult {
        self.with_store(|store, _| {
            let turn = TurnId::new(&p.turn).map_err(|e| e.to_string())?;
            let t = store.turn(&turn).map_err(|e| e.to_string())?;
            Ok(json_result(t))
        })
    }

    #[tool(
        description = "What changed since a turn began: for each path it recorded, a unified diff of its state before the turn against its current contents (binary files summarised), as JSON.",
        annotations(read_only_hint = true)
    )]
    fn diff_turn(&self, Parameters(p): Parameters<TurnArg>) -> CallToolResult {
        self.with_store(|store, _| {
            let turn = TurnId::new(&p.turn).map_err(|e| e.to_string())?;
            let d = super::diff::diffs(store, &turn).map_err(|e| format!("{e:#}"))?;
            Ok(json_result(&d))
        })
    }

    #[tool(
        description = "Put the folder back as it was before a turn, undoing it and every later turn, byte for byte (files written back, files the turns created deleted). With paths, only those files or folders (the turns stay). With dryRun, only the plan. Returns the report as JSON; it is a tool error if any path could not be restored. Ends the current default turn.",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false
        )
    )]
    fn rewind(&self, Parameters(p): Parameters<RewindArg>) -> CallToolResult {
        self.with_store(|store, turns| {
            let turn = TurnId::new(&p.turn).map_err(|e| e.to_string())?;
            let paths = p
                .paths
                .iter()
                .map(|path| store.resolve(path, false))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let report = store
                .rewind(
                    &turn,
                    &RewindOptions {
                        dry_run: p.dry_run,
                        keep_conflicts: false,
                        paths,
                    },
                )
                .map_err(|e| e.to_string())?;
            if !p.dry_run {
                turns.current = None;
            }
            let mut result = json_result(&report);
            if !report.complete() {
                result.is_error = Some(true);
            }
            Ok(result)
        })
    }

    #[tool(
        description = "Reverse the last rewind (call again to walk further back): files it deleted come back, files it restored return to the bytes it replaced, and its turns can be rewound again. Returns the report as JSON; a tool error if nothing is to undo or a path could not be restored. Ends the current default turn.",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false
        )
    )]
    fn undo(&self) -> CallToolResult {
        self.with_store(|store, turns| {
            let report = store.undo().map_err(|e| e.to_string())?;
            turns.current = None;
            let mut result = json_result(&report);
            if !report.complete() {
                result.is_error = Some(true);
            }
            Ok(result)
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let root = match self.state.lock() {
            Ok(s) => s.root.clone(),
            Err(p) => p.into_inner().root.clone(),
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("turnback", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "File tools for the project at {} that save each file's bytes before writing it, so any turn can be rewound exactly. Paths are relative to that root or absolute inside it. {TURN_RULE}",
                display(&root)
            ))
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_rule_in_the_docs_is_the_one_in_the_tool_descriptions() {
        for t in Server::tool_router().list_all() {
            let d = t.description.as_deref().unwrap_or("");
            if t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(false)
                && t.name != "rewind"
                && t.name != "undo"
            {
                assert!(d.ends_with(TURN_RULE), "{} states the turn rule", t.name);
            }
        }
    }

    #[test]
    fn gaps_parse_as_seconds() {
        assert_eq!(parse_gap("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_gap("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_gap("-1").is_err());
        assert!(parse_gap("soon").is_err());
    }
}
