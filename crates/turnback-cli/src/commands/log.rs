//! `turnback log`: the history, newest first.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;
use turnback::log::{Op, Post, Pre, Record};
use turnback::{Options, Store, Turn, TurnId};

use crate::out::{Buffer, paint, style};
use crate::when::{self, Clock};
use crate::{Ctx, Outcome};

/// Show the turns, newest first: id, time, what each changed and ran
///
/// Each turn's id has the shortest part that names it marked (bold on a
/// terminal, in brackets otherwise): `turnback show`, `rewind`, `revert`
/// and `diff` take that part, the full id, @ (the newest turn) or @~N (N
/// turns before it). Then its local time and how long ago, the files it
/// created, modified and deleted, its agent and session (turns begun by a
/// hook), its label, and the shell commands it ran.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Show only the newest N entries
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    max_count: Option<usize>,

    /// Also show turns rewound or reverted (marked), and the rewinds,
    /// reverts, undos and redos themselves, each when it happened
    #[arg(long)]
    all: bool,
}

/// One entry of the history.
enum Entry<'a> {
    Turn(&'a Turn),
    Op(&'a Record),
}

impl Entry<'_> {
    fn seq(&self) -> u64 {
        match self {
            Entry::Turn(t) => t.first_seq,
            Entry::Op(r) => r.seq,
        }
    }
}

/// A turn's files, counted.
#[derive(Default, Serialize)]
struct Counts {
    #[serde(rename = "created_count")]
    created: usize,
    #[serde(rename = "modified_count")]
    modified: usize,
    #[serde(rename = "deleted_count")]
    deleted: usize,
}

/// What a turn did to each file it captured: created (nothing before it),
/// deleted (nothing after it), else modified. Directories are not
/// counted, nor a file it created and deleted again; a path with no
/// post-image counts as modified (or created).
fn counts(t: &Turn) -> Counts {
    let mut n = Counts::default();
    for c in &t.files {
        let post = t.post(&c.entry.path).map(|(_, p)| p);
        let before_absent = matches!(c.entry.pre, Pre::Absent);
        match (&c.entry.pre, post) {
            (Pre::Dir { .. }, _) | (_, Some(Post::Dir)) => {}
            (_, Some(Post::Absent)) if before_absent => {}
            (_, Some(Post::Absent)) => n.deleted += 1,
            _ if before_absent => n.created += 1,
            _ => n.modified += 1,
        }
    }
    n
}

/// A turn in `log --json`.
#[derive(Serialize)]
struct TurnEntry<'a> {
    kind: &'static str,
    turn: &'a TurnId,
    /// The shortest prefix that names it (live turns only).
    #[serde(skip_serializing_if = "Option::is_none")]
    unique_prefix: Option<&'a str>,
    label: Option<&'a str>,
    seq: u64,
    started_at: String,
    live: bool,
    #[serde(rename = "ended_by_seq", skip_serializing_if = "Option::is_none")]
    ended_by: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(flatten)]
    counts: Counts,
    commands: &'a [&'a str],
}

/// An operation in `log --json`.
#[derive(Serialize)]
struct OpEntry<'a> {
    /// "rewind", "revert", "undo", "redo" or "rolled_back".
    kind: &'static str,
    seq: u64,
    at: String,
    /// The turn the rewind or revert (or the one undone or redone) named.
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<&'a TurnId>,
    /// For an undo or redo: the operation it reversed, and its kind.
    #[serde(rename = "op_seq", skip_serializing_if = "Option::is_none")]
    op: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    op_kind: Option<&'static str>,
    /// For a rewind or revert: whether an undo reverses it now.
    #[serde(skip_serializing_if = "Option::is_none")]
    undone: Option<bool>,
    /// Paths it could not restore.
    #[serde(rename = "failed_count")]
    failed: usize,
}

fn op_kind(op: &Op) -> &'static str {
    match op {
        Op::Rewind { .. } => "rewind",
        Op::Revert { .. } => "revert",
        Op::Undo { .. } => "undo",
        Op::Redo { .. } => "redo",
        Op::RolledBack { .. } => "rolled_back",
        _ => "other",
    }
}

fn failed_of(op: &Op) -> usize {
    match op {
        Op::Rewind { failed, .. }
        | Op::Revert { failed, .. }
        | Op::Undo { failed, .. }
        | Op::Redo { failed, .. }
        | Op::RolledBack { failed, .. } => failed.len(),
        _ => 0,
    }
}

/// The operations, by seq, and whether each rewind or revert is undone
/// now (its last undo not redone).
struct Ops<'a> {
    by_seq: HashMap<u64, &'a Record>,
    undone: HashMap<u64, bool>,
}

impl<'a> Ops<'a> {
    fn new(records: &'a [Record]) -> Ops<'a> {
        let mut undone = HashMap::new();
        for r in records {
            match &r.op {
                Op::Rewind { .. } | Op::Revert { .. } => {
                    undone.insert(r.seq, false);
                }
                Op::Undo { op, .. } => {
                    undone.insert(*op, true);
                }
                Op::Redo { op, .. } => {
                    undone.insert(*op, false);
                }
                _ => {}
            }
        }
        Ops {
            by_seq: records.iter().map(|r| (r.seq, r)).collect(),
            undone,
        }
    }

    /// The turn a rewind or revert named.
    fn turn_of(&self, seq: u64) -> Option<&'a TurnId> {
        match self.by_seq.get(&seq).map(|r| &r.op) {
            Some(Op::Rewind { turn, .. } | Op::Revert { turn, .. }) => Some(turn),
            _ => None,
        }
    }

    fn kind_of(&self, seq: u64) -> Option<&'static str> {
        self.by_seq.get(&seq).map(|r| op_kind(&r.op))
    }
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let store = ctx.open(Options::default())?;
    let limit = args.max_count.unwrap_or(usize::MAX);
    let turns: Vec<&Turn> = if args.all {
        store.all_turns()?
    } else if limit < usize::MAX {
        let mut newest = store.newest_turns(limit, false)?;
        newest.reverse();
        newest
    } else {
        store.turns()?
    };
    let records = if args.all {
        store.operations()?
    } else {
        Vec::new()
    };
    let ops = Ops::new(&records);
    let mut entries: Vec<Entry> = turns.iter().map(|t| Entry::Turn(t)).collect();
    entries.extend(records.iter().map(Entry::Op));
    entries.sort_by_key(|e| std::cmp::Reverse(e.seq()));
    entries.truncate(limit);

    let live = store.live_ids()?;
    let ids: Vec<&str> = live.iter().map(TurnId::as_str).collect();
    let lens = turnback::turn_ref::unique_prefix_lens(&ids);
    let prefix: HashMap<&str, usize> = ids.iter().copied().zip(lens).collect();
    let notes = commands_noted(&store);
    let commands = turnback::command_notes::by_turn(&notes, &turns);
    let no_commands: Vec<&str> = Vec::new();

    if ctx.json() {
        return print_json(ctx, &entries, &prefix, &commands, &ops);
    }
    let _pager = ctx.pager();
    if entries.is_empty() {
        outln!("no turns in {}", store.root().display())?;
        return Ok(0);
    }
    let clock = Clock::local();
    let width = entries
        .iter()
        .map(|e| match e {
            Entry::Turn(t) => {
                let n = t.id.as_str().chars().count();
                // Brackets around the marked part when there is no color.
                if crate::out::color() || !t.is_live() {
                    n
                } else {
                    n + 2
                }
            }
            Entry::Op(_) => 0,
        })
        .max()
        .unwrap_or(0);
    let mut out = Buffer::default();
    for e in &entries {
        match e {
            Entry::Turn(t) => {
                let cmds = commands.get(&t.first_seq).unwrap_or(&no_commands);
                write_turn(
                    &mut out,
                    &clock,
                    t,
                    prefix.get(t.id.as_str()).copied(),
                    width,
                    cmds,
                    &ops,
                );
            }
            Entry::Op(r) => write_op(&mut out, &clock, r, width, &ops),
        }
        out.flush_if_full()?;
    }
    out.flush()?;
    Ok(0)
}

/// The shell commands the store noted; a file that cannot be read is a
/// warning (they only describe turns).
pub fn commands_noted(store: &Store) -> Vec<turnback::command_notes::CommandNote> {
    store.command_notes().unwrap_or_else(|e| {
        errln!("turnback: warning: the shell commands of turns are not shown: {e}");
        Vec::new()
    })
}

/// The id with its unique prefix marked: bold on a terminal, else in
/// brackets; an ended turn's id dimmed, unmarked (it is not a reference).
fn marked_id(id: &str, prefix: Option<usize>) -> (String, usize) {
    let shown = id.chars().count();
    match prefix {
        None => (paint(style::ENDED, id).to_string(), shown),
        Some(n) if crate::out::color() => (
            format!(
                "{}{}",
                paint(style::ID_PREFIX, &id[..n]),
                paint(style::ID_REST, &id[n..])
            ),
            shown,
        ),
        Some(n) => (format!("[{}]{}", &id[..n], &id[n..]), shown + 2),
    }
}

fn write_turn(
    out: &mut Buffer,
    clock: &Clock,
    t: &Turn,
    prefix: Option<usize>,
    width: usize,
    commands: &[&str],
    ops: &Ops,
) {
    let (id, shown) = marked_id(t.id.as_str(), prefix.filter(|_| t.is_live()));
    let pad = width.saturating_sub(shown);
    let _ = write!(
        out,
        "{id}{:pad$}  {}",
        "",
        paint(
            style::TIME,
            format_args!(
                "{} ({})",
                clock.local_time(t.started_at),
                clock.ago(t.started_at)
            )
        )
    );
    if let Some(by) = t.ended_by {
        let how = match ops.kind_of(by) {
            Some("revert") => "reverted",
            _ => "rewound",
        };
        let _ = write!(out, "  {}", paint(style::REMOVED, format_args!("[{how}]")));
    }
    let n = counts(t);
    let mut parts = Vec::new();
    if n.created > 0 {
        parts.push(paint(style::ADDED, format!("{} created", n.created)).to_string());
    }
    if n.modified > 0 {
        parts.push(paint(style::CHANGED, format!("{} modified", n.modified)).to_string());
    }
    if n.deleted > 0 {
        parts.push(paint(style::REMOVED, format!("{} deleted", n.deleted)).to_string());
    }
    if parts.is_empty() {
        parts.push("no files".to_owned());
    }
    let _ = write!(out, "  {}", parts.join(", "));
    if let Some((d, session)) = super::hook::agent_of_turn(t.id.as_str()) {
        let _ = write!(
            out,
            "  {}",
            paint(style::AGENT, format_args!("{} {session}", d.agent))
        );
    }
    if let Some(label) = &t.label {
        let _ = write!(out, "  {label}");
    }
    let _ = writeln!(out);
    for c in commands {
        let _ = writeln!(
            out,
            "    {}",
            paint(style::COMMAND, format_args!("$ {}", one_line(c)))
        );
    }
}

/// A command's first line, cut to 100 characters.
fn one_line(command: &str) -> String {
    let first = command.lines().next().unwrap_or("");
    let mut shown: String = first.chars().take(100).collect();
    if shown.len() < command.trim_end().len() {
        shown.push_str(" …");
    }
    shown
}

fn write_op(out: &mut Buffer, clock: &Clock, r: &Record, width: usize, ops: &Ops) {
    let what = match &r.op {
        Op::Rewind { turn, .. } => format!("rewind of turn {turn} and every later turn"),
        Op::Revert { turn, .. } => format!("revert of turn {turn} alone"),
        Op::Undo { op, .. } | Op::Redo { op, .. } => {
            let verb = if matches!(r.op, Op::Undo { .. }) {
                "undo"
            } else {
                "redo"
            };
            match (ops.kind_of(*op), ops.turn_of(*op)) {
                (Some(kind), Some(turn)) => format!("{verb} of the {kind} of turn {turn}"),
                _ => format!("{verb} of the operation at log record {op}"),
            }
        }
        Op::RolledBack { .. } => {
            "an interrupted rewind, revert, undo or redo was rolled back".to_owned()
        }
        _ => return,
    };
    let _ = write!(
        out,
        "{:width$}  {}  {}",
        "",
        paint(
            style::TIME,
            format_args!("{} ({})", clock.local_time(r.at), clock.ago(r.at))
        ),
        paint(style::OPERATION, what)
    );
    if ops.undone.get(&r.seq) == Some(&true) {
        let _ = write!(out, "  {}", paint(style::ENDED, "[undone]"));
    }
    let failed = failed_of(&r.op);
    if failed > 0 {
        let _ = write!(
            out,
            "  {}",
            paint(
                style::REMOVED,
                format_args!("{failed} path(s) not restored")
            )
        );
    }
    let _ = writeln!(out);
}

fn print_json(
    ctx: &Ctx,
    entries: &[Entry],
    prefix: &HashMap<&str, usize>,
    commands: &HashMap<u64, Vec<&str>>,
    ops: &Ops,
) -> Outcome {
    let mut rows: Vec<serde_json::Value> = Vec::with_capacity(entries.len());
    for e in entries {
        let row = match e {
            Entry::Turn(t) => {
                let agent = super::hook::agent_of_turn(t.id.as_str());
                let p = prefix
                    .get(t.id.as_str())
                    .filter(|_| t.is_live())
                    .map(|&n| &t.id.as_str()[..n]);
                serde_json::to_value(TurnEntry {
                    kind: "turn",
                    turn: &t.id,
                    unique_prefix: p,
                    label: t.label.as_deref(),
                    seq: t.first_seq,
                    started_at: when::rfc3339(t.started_at),
                    live: t.is_live(),
                    ended_by: t.ended_by,
                    agent: agent.map(|(d, _)| d.name),
                    session: agent.map(|(_, s)| s),
                    counts: counts(t),
                    commands: commands.get(&t.first_seq).map_or(&[], Vec::as_slice),
                })?
            }
            Entry::Op(r) => {
                let reversed = match &r.op {
                    Op::Undo { op, .. } | Op::Redo { op, .. } => Some(*op),
                    _ => None,
                };
                let turn = match &r.op {
                    Op::Rewind { turn, .. } | Op::Revert { turn, .. } => Some(turn),
                    _ => reversed.and_then(|op| ops.turn_of(op)),
                };
                serde_json::to_value(OpEntry {
                    kind: op_kind(&r.op),
                    seq: r.seq,
                    at: when::rfc3339(r.at),
                    turn,
                    op: reversed,
                    op_kind: reversed.and_then(|op| ops.kind_of(op)),
                    undone: ops.undone.get(&r.seq).copied(),
                    failed: failed_of(&r.op),
                })?
            }
        };
        rows.push(row);
    }
    ctx.print_json(&rows)?;
    Ok(0)
}
