//! The hook benchmark: the latency `turnback hook AGENT` adds to each tool
//! call of every agent turnback has hooks for (Claude Code, Gemini CLI,
//! Codex, Copilot CLI, Cline, opencode, Cursor), process start included, on
//! a project of 500 real files, against spawning `/bin/true` the same way
//! in the same run. The figures are printed and written to a marked section
//! of `docs/BENCHMARKS.md` (other sections are left alone).
//!
//! ```text
//! cargo bench -p turnback-cli --bench hooks [-- --reps N]
//! ```
//!
//! Every iteration is one prompt as the agent delivers it, each event in
//! the agent's own JSON (the shapes its adapter reads, as in
//! `tests/fixtures/<agent>/`): the prompt event (a new turn), the
//! before-edit event of an existing file (its capture), the write itself
//! (untimed), the after-edit event (its post-image), the before-shell event
//! (tree snapshot), a file changed by "the command" (untimed), the
//! after-shell event (second snapshot). Each hook call is the release binary
//! spawned with the event on stdin and the project as cwd; right after it
//! `/bin/true` is spawned with the same stdin.
//!
//! The same table is measured again with the project's store already
//! holding `TURNBACK_BENCH_TURNS` turns (default 10,000), and a second table
//! times one `turnback write` process (capture, write, exit) into a store of
//! that many turns and into one of `TURNBACK_BENCH_SMALL_TURNS` (default
//! 200) small turns, each against the same call into a store holding one
//! turn, alternated call by call in the same run (issue 14: the cost of a
//! call must not grow with the store); one row times the call that makes
//! automatic gc due in a copy of the large store (against the large
//! store's same call) and how long the background gc then takes. Those stores are built once per run
//! with `Store::write` in `/dev/shm` (when it is a tmpfs) with automatic gc
//! off and `keep_turns` raised, and copied afresh, with an untimed open,
//! for every repetition.
//!
//! Every store is in its project (`TURNBACK_STORE=project`), so a prebuilt
//! store is copied with its project.
//!
//! Settings: `--reps N` / `TURNBACK_BENCH_REPS` (default 5; each a fresh
//! copy of the project per agent), `TURNBACK_BENCH_RUNS` (iterations per
//! repetition, default 50), `TURNBACK_BENCH_AGENTS` (a comma-separated
//! subset of the agents' hook names, e.g. `codex,cline`; the section is
//! written only with all of them), `TURNBACK_BENCH_TREE` /
//! `TURNBACK_BENCH_FILES` (default `/usr/include`, 500),
//! `TURNBACK_BENCH_TURNS`, `TURNBACK_BENCH_SMALL_TURNS`,
//! `TURNBACK_BENCH_ONLY=write` (only the `turnback write` rows),
//! `TURNBACK_BENCH_TMP`, `TURNBACK_BENCH_OUT`, `--no-write` /
//! `TURNBACK_BENCH_NO_WRITE=1`.

use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use tempfile::TempDir;

#[path = "../../turnback/benches/common/mod.rs"]
mod common;
use common::*;

type Res<T> = Result<T, Box<dyn Error>>;
/// Files by relative path, with their bytes.
type Files = Vec<(String, Vec<u8>)>;

/// Name of this benchmark's section in the Markdown file.
const SECTION: &str = "hooks";
/// Fewest repetitions whose figures are written to the docs.
const MIN_REPS: usize = 5;
/// Fewest runs of each event in a repetition.
const MIN_RUNS: usize = 50;
/// An agent whose hook is measured.
struct Agent {
    /// `turnback hook NAME`.
    name: &'static str,
    /// How the docs name it.
    title: &'static str,
    /// What the hook prints on success (trimmed).
    stdout: &'static str,
    /// The five events of one iteration, as the table names them.
    events: [&'static str; 5],
}

const AGENTS: [Agent; 7] = [
    Agent {
        name: "claude-code",
        title: "Claude Code",
        stdout: "",
        events: [
            "UserPromptSubmit",
            "PreToolUse Write (capture)",
            "PostToolUse Write (post-image)",
            "PreToolUse Bash (tree snapshot)",
            "PostToolUse Bash (tree snapshot)",
        ],
    },
    Agent {
        name: "gemini-cli",
        title: "Gemini CLI",
        stdout: "{}",
        events: [
            "BeforeAgent",
            "BeforeTool write_file (capture)",
            "AfterTool write_file (post-image)",
            "BeforeTool run_shell_command (tree snapshot)",
            "AfterTool run_shell_command (tree snapshot)",
        ],
    },
    Agent {
        name: "codex",
        title: "Codex CLI",
        stdout: "",
        events: [
            "UserPromptSubmit",
            "PreToolUse apply_patch (patch parsed, capture)",
            "PostToolUse apply_patch (post-image)",
            "PreToolUse Bash (tree snapshot)",
            "PostToolUse Bash (tree snapshot)",
        ],
    },
    Agent {
        name: "copilot",
        title: "Copilot CLI",
        stdout: "",
        events: [
            "userPromptSubmitted",
            "preToolUse edit (capture)",
            "postToolUse edit (post-image)",
            "preToolUse bash (tree snapshot)",
            "postToolUse bash (tree snapshot)",
        ],
    },
    Agent {
        name: "cline",
        title: "Cline (CLI 3.x event names; a task per prompt)",
        stdout: "{\"cancel\":false}",
        events: [
            "TaskStart (`agent_start`)",
            "PreToolUse editor (`tool_call`, capture)",
            "PostToolUse editor (`tool_result`, post-image)",
            "PreToolUse run_commands (tree snapshot)",
            "PostToolUse run_commands (tree snapshot)",
        ],
    },
    Agent {
        name: "opencode",
        title: "opencode (the events its plugin sends)",
        stdout: "",
        events: [
            "chat.message",
            "tool.execute.before edit (capture)",
            "tool.execute.after edit (post-image)",
            "tool.execute.before bash (tree snapshot)",
            "tool.execute.after bash (tree snapshot)",
        ],
    },
    Agent {
        name: "cursor",
        title: "Cursor",
        stdout: "{}",
        events: [
            "beforeSubmitPrompt",
            "preToolUse Write (capture)",
            "postToolUse Write (post-image)",
            "preToolUse Shell (tree snapshot)",
            "postToolUse Shell (tree snapshot)",
        ],
    },
];

/// One iteration's inputs.
struct Iteration<'a> {
    /// The project root.
    root: &'a str,
    rep: usize,
    i: usize,
    /// The file the write tool writes, relative and absolute, and its new text.
    wrel: &'a str,
    wpath: &'a str,
    content: &'a str,
    /// The shell command (it changes another file).
    command: &'a str,
}

/// The five events of one iteration for `agent`: the extra argument of
/// `turnback hook AGENT` (Copilot's event name), and the JSON.
fn events(agent: &str, it: &Iteration) -> Res<[(Option<&'static str>, Value); 5]> {
    let (r, i) = (it.root, it.i);
    let prompt = format!("Benchmark prompt {i}\nChange two files.");
    let turn = format!("bench-{}-{i}", it.rep);
    Ok(match agent {
        "claude-code" => {
            let base = |name: &str| {
                json!({
                    "session_id": "8c35adc1-4f1e-4c9a-9a51-0f6b7e2d1c3a",
                    "prompt_id": turn,
                    "transcript_path": "/home/user/.claude/projects/-proj/session.jsonl",
                    "cwd": r,
                    "permission_mode": "default",
                    "hook_event_name": name,
                })
            };
            let with = |name: &str, tool: &str, input: Value, extra: Option<(&str, Value)>| {
                let mut v = base(name);
                v["tool_name"] = json!(tool);
                v["tool_input"] = input;
                v["tool_use_id"] = json!(format!("toolu_{tool}{i}"));
                if let Some((k, x)) = extra {
                    v[k] = x;
                }
                v
            };
            let mut p = base("UserPromptSubmit");
            p["prompt"] = json!(prompt);
            let w = json!({"file_path": it.wpath, "content": it.content});
            let b =
                json!({"command": it.command, "description": "Append a line", "timeout": 120000});
            [
                (None, p),
                (None, with("PreToolUse", "Write", w.clone(), None)),
                (
                    None,
                    with(
                        "PostToolUse",
                        "Write",
                        w,
                        Some((
                            "tool_response",
                            json!({"filePath": it.wpath, "success": true}),
                        )),
                    ),
                ),
                (None, with("PreToolUse", "Bash", b.clone(), None)),
                (
                    None,
                    with(
                        "PostToolUse",
                        "Bash",
                        b,
                        Some((
                            "tool_response",
                            json!({"stdout": "", "stderr": "", "interrupted": false, "isImage": false}),
                        )),
                    ),
                ),
            ]
        }
        "gemini-cli" => {
            let base = |name: &str| {
                json!({
                    "session_id": "f1d2c3b4-5a69-4788-9abc-def012345678",
                    "transcript_path": "/home/user/.gemini/tmp/project/chats/session-f1d2c3b4.json",
                    "cwd": r,
                    "hook_event_name": name,
                    "timestamp": "2026-12-03T10:00:00.000Z",
                })
            };
            let with = |name: &str, tool: &str, input: Value, post: bool| {
                let mut v = base(name);
                v["tool_name"] = json!(tool);
                v["tool_input"] = input;
                if post {
                    v["tool_response"] = json!({"llmContent": "ok", "returnDisplay": "ok"});
                }
                v
            };
            let mut p = base("BeforeAgent");
            p["prompt"] = json!(prompt);
            let w = json!({"file_path": it.wpath, "content": it.content});
            let b = json!({"command": it.command, "description": "Append a line"});
            [
                (None, p),
                (None, with("BeforeTool", "write_file", w.clone(), false)),
                (None, with("AfterTool", "write_file", w, true)),
                (
                    None,
                    with("BeforeTool", "run_shell_command", b.clone(), false),
                ),
                (None, with("AfterTool", "run_shell_command", b, true)),
            ]
        }
        "codex" => {
            let base = |name: &str| {
                json!({
                    "session_id": "019a7c3e-5b1d-7f20-9c4e-8d2a61b0f3c7",
                    "turn_id": turn,
                    "transcript_path": "/root/.codex/sessions/2026/12/03/rollout-2026-12-03T10-00-00-019a7c3e.jsonl",
                    "cwd": r,
                    "hook_event_name": name,
                    "model": "gpt-5.5",
                    "permission_mode": "bypassPermissions",
                })
            };
            let with = |name: &str, tool: &str, command: &str, post: bool| {
                let mut v = base(name);
                v["tool_name"] = json!(tool);
                v["tool_input"] = json!({"command": command});
                v["tool_use_id"] = json!(format!("call_{tool}{i}"));
                if post {
                    v["tool_response"] = json!("Success. Updated the following files:");
                }
                v
            };
            let mut p = base("UserPromptSubmit");
            p["prompt"] = json!(prompt);
            let patch = format!(
                "*** Begin Patch\n*** Update File: {}\n@@\n+/* written by the agent, run {i} */\n*** End Patch\n",
                it.wrel
            );
            [
                (None, p),
                (None, with("PreToolUse", "apply_patch", &patch, false)),
                (None, with("PostToolUse", "apply_patch", &patch, true)),
                (None, with("PreToolUse", "Bash", it.command, false)),
                (None, with("PostToolUse", "Bash", it.command, true)),
            ]
        }
        "copilot" => {
            let base = || {
                json!({
                    "sessionId": "6f1c2a9e-3d4b-4e8a-9b7c-1a2b3c4d5e6f",
                    "timestamp": 1764756000000u64 + i as u64,
                    "cwd": r,
                })
            };
            let with = |tool: &str, args: Value, post: bool| {
                let mut v = base();
                v["toolName"] = json!(tool);
                v["toolArgs"] = args;
                if post {
                    v["toolResult"] = json!({"resultType": "success", "textResultForLlm": "ok"});
                }
                v
            };
            let mut p = base();
            p["prompt"] = json!(prompt);
            let e = json!({"path": it.wpath, "old_str": "", "new_str": it.content});
            let b = json!({"command": it.command, "description": "Append a line"});
            [
                (Some("userPromptSubmitted"), p),
                (Some("preToolUse"), with("edit", e.clone(), false)),
                (Some("postToolUse"), with("edit", e, true)),
                (Some("preToolUse"), with("bash", b.clone(), false)),
                (Some("postToolUse"), with("bash", b, true)),
            ]
        }
        "cline" => {
            // As Cline's CLI runs a prompt: a task of its own.
            let task = format!("conv_{turn}");
            let base = |name: &str| {
                json!({
                    "clineVersion": "",
                    "timestamp": "2026-12-03T10:00:00.000Z",
                    "taskId": task,
                    "sessionContext": {"rootSessionId": format!("bench_{turn}")},
                    "workspaceRoots": [r],
                    "workspaceInfo": {"rootPath": r, "hint": "project"},
                    "userId": "unknown",
                    "agent_id": "agent_bench",
                    "parent_agent_id": null,
                    "hookName": name,
                })
            };
            let params = |input: &Value| -> Value {
                let o = input.as_object().cloned().unwrap_or_default();
                Value::Object(
                    o.into_iter()
                        .map(|(k, v)| {
                            let s = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                            (k, Value::String(s))
                        })
                        .collect(),
                )
            };
            let with = |tool: &str, input: Value, post: bool| {
                let id = format!("call_{tool}{i}");
                if post {
                    let mut v = base("tool_result");
                    v["iteration"] = json!(1);
                    v["tool_result"] = json!({"id": id, "name": tool, "input": input, "output": {"success": true}});
                    v["postToolUse"] = json!({"toolName": tool, "parameters": params(&input), "result": "ok", "success": true, "executionTimeMs": 5});
                    v
                } else {
                    let mut v = base("tool_call");
                    v["iteration"] = json!(1);
                    v["tool_call"] = json!({"id": id, "name": tool, "input": input});
                    v["preToolUse"] = json!({"toolName": tool, "parameters": params(&input)});
                    v
                }
            };
            let mut p = base("agent_start");
            p["taskStart"] = json!({"taskMetadata": {}});
            let e = json!({"path": it.wpath, "new_text": it.content});
            let b = json!({"commands": [it.command]});
            [
                (None, p),
                (None, with("editor", e.clone(), false)),
                (None, with("editor", e, true)),
                (None, with("run_commands", b.clone(), false)),
                (None, with("run_commands", b, true)),
            ]
        }
        "opencode" => {
            let session = "ses_5a1f0c2e3ffeYq7Wm2kR9sT4uV";
            let message = format!("msg_{turn}");
            let with = |name: &str, tool: &str, input: Value| {
                json!({
                    "cwd": r,
                    "hook_event_name": name,
                    "session_id": session,
                    "message_id": message,
                    "tool_name": tool,
                    "tool_input": input,
                })
            };
            let p = json!({
                "cwd": r,
                "hook_event_name": "chat.message",
                "session_id": session,
                "message_id": message,
                "prompt": prompt,
            });
            let e = json!({"filePath": it.wpath, "oldString": "", "newString": it.content});
            let b = json!({"command": it.command, "description": "Append a line"});
            [
                (None, p),
                (None, with("tool.execute.before", "edit", e.clone())),
                (None, with("tool.execute.after", "edit", e)),
                (None, with("tool.execute.before", "bash", b.clone())),
                (None, with("tool.execute.after", "bash", b)),
            ]
        }
        "cursor" => {
            let base = |name: &str| {
                json!({
                    "conversation_id": "c0ffee12-3456-4789-abcd-ef0123456789",
                    "generation_id": format!("gen-{turn}"),
                    "model": "claude-4.5-sonnet",
                    "session_id": "c0ffee12-3456-4789-abcd-ef0123456789",
                    "cursor_version": "2.4.0",
                    "workspace_roots": [r],
                    "transcript_path": "/root/.cursor/projects/p/agent-transcripts/c0ffee12.txt",
                    "hook_event_name": name,
                })
            };
            let with = |name: &str, tool: &str, input: Value| {
                let mut v = base(name);
                v["tool_name"] = json!(tool);
                v["tool_use_id"] = json!(format!("toolu_{tool}{i}"));
                v["cwd"] = json!(r);
                v["tool_input"] = input;
                v
            };
            let mut p = base("beforeSubmitPrompt");
            p["prompt"] = json!(prompt);
            p["attachments"] = json!([]);
            let w = json!({"file_path": it.wpath, "content": it.content});
            let b = json!({"command": it.command, "cwd": r});
            [
                (None, p),
                (None, with("preToolUse", "Write", w.clone())),
                (None, with("postToolUse", "Write", w)),
                (None, with("preToolUse", "Shell", b.clone())),
                (None, with("postToolUse", "Shell", b)),
            ]
        }
        other => return Err(format!("no events for agent {other:?}").into()),
    })
}

struct Config {
    /// The agents measured, in the order of [`AGENTS`].
    agents: Vec<&'static Agent>,
    reps: usize,
    runs: usize,
    tree: PathBuf,
    files: usize,
    /// Turns in the large store.
    turns: usize,
    /// Turns in the small store of the `turnback write` rows.
    small_turns: usize,
    /// Only the `turnback write` rows (no hook tables; never written).
    only_write: bool,
    /// Only the rows of calls made while maintenance runs (never written).
    only_maintenance: bool,
    /// Files of the project whose rewind leaves maintenance to do.
    maint_files: usize,
    tmp: PathBuf,
    build_dir: PathBuf,
    out: PathBuf,
    write: bool,
}

fn config() -> Res<Config> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = fs::canonicalize(&workspace).unwrap_or(workspace);
    let (reps, write) = reps_and_write(MIN_REPS)?;
    let agents = match std::env::var("TURNBACK_BENCH_AGENTS") {
        Ok(list) if !list.trim().is_empty() => {
            let names: Vec<&str> = list.split(',').map(str::trim).collect();
            if let Some(bad) = names.iter().find(|n| !AGENTS.iter().any(|a| a.name == **n)) {
                let known: Vec<&str> = AGENTS.iter().map(|a| a.name).collect();
                return Err(format!(
                    "TURNBACK_BENCH_AGENTS: no agent {bad:?}; the agents are {}",
                    known.join(",")
                )
                .into());
            }
            AGENTS.iter().filter(|a| names.contains(&a.name)).collect()
        }
        _ => AGENTS.iter().collect(),
    };
    let runs = env_usize("TURNBACK_BENCH_RUNS", MIN_RUNS)?;
    if runs == 0 {
        return Err("TURNBACK_BENCH_RUNS must be at least 1".into());
    }
    let tmp = std::env::var_os("TURNBACK_BENCH_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let build_dir = if fs_type(Path::new("/dev/shm")).is_ok_and(|(t, _)| t == "tmpfs") {
        PathBuf::from("/dev/shm")
    } else {
        tmp.clone()
    };
    let (only_write, only_maintenance) = match std::env::var("TURNBACK_BENCH_ONLY") {
        Ok(v) if v == "write" => (true, false),
        Ok(v) if v == "maintenance" => (false, true),
        Ok(v) if v.is_empty() => (false, false),
        Ok(v) => {
            return Err(format!(
                "TURNBACK_BENCH_ONLY={v:?}: only \"write\" and \"maintenance\" are known"
            )
            .into());
        }
        Err(_) => (false, false),
    };
    Ok(Config {
        agents,
        reps,
        runs,
        tree: std::env::var_os("TURNBACK_BENCH_TREE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include")),
        files: env_usize("TURNBACK_BENCH_FILES", 500)?,
        turns: env_usize("TURNBACK_BENCH_TURNS", 10_000)?,
        small_turns: env_usize("TURNBACK_BENCH_SMALL_TURNS", 200)?,
        only_write,
        only_maintenance,
        maint_files: env_usize("TURNBACK_BENCH_MAINT_FILES", 20_000)?,
        tmp,
        build_dir,
        out: std::env::var_os("TURNBACK_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("docs/BENCHMARKS.md")),
        write,
    })
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Res<()> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let ft = entry.file_type()?;
        if ft.is_dir() {
            walk(&entry.path(), &rel, out)?;
        } else if ft.is_file() {
            out.push(rel);
        }
    }
    Ok(())
}

fn load_tree(source: &Path, limit: usize) -> Res<Files> {
    let mut rels = Vec::new();
    walk(source, "", &mut rels)?;
    rels.sort();
    if rels.len() < limit {
        return Err(format!(
            "{} holds only {} regular files, {limit} wanted; set TURNBACK_BENCH_FILES",
            source.display(),
            rels.len()
        )
        .into());
    }
    rels.truncate(limit);
    let mut files = Vec::with_capacity(limit);
    for rel in rels {
        let p = source.join(&rel);
        let bytes = fs::read(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        files.push((rel, bytes));
    }
    Ok(files)
}

fn write_tree(files: &[(String, Vec<u8>)], dst: &Path) -> Res<()> {
    for (rel, bytes) in files {
        let p = dst.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&p, bytes).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Spawns `program args` in `root` with `event` on stdin, waits, and
/// returns the elapsed time. With `check: Some(stdout)`, the hook must exit
/// 0, print `stdout` (trimmed) and nothing on stderr.
fn spawn(
    program: &Path,
    args: &[&str],
    root: &Path,
    event: &[u8],
    check: Option<&str>,
) -> Res<f64> {
    let t0 = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .current_dir(root)
        .env("CLAUDE_PROJECT_DIR", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    {
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        match stdin.write_all(event) {
            // `/bin/true` exits without reading its input.
            Err(e) if check.is_none() && e.kind() == std::io::ErrorKind::BrokenPipe => {}
            r => r?,
        }
    }
    let out = child.wait_with_output()?;
    let t = t0.elapsed().as_secs_f64();
    let printed = String::from_utf8_lossy(&out.stdout);
    if let Some(want) = check
        && (!out.status.success() || printed.trim() != want || !out.stderr.is_empty())
    {
        return Err(format!(
            "{} {}: {}, stdout {:?}, stderr {:?}",
            program.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(t)
}

/// Per event: the hook's times and `/bin/true`'s, one per run.
#[derive(Default, Clone)]
struct Times {
    hook: Vec<f64>,
    peer: Vec<f64>,
}

/// A project of `files` whose store holds `turns` turns, each one
/// `Store::write` of a file with a line added, automatic gc off and
/// `keep_turns` raised so every turn stays. Built in `dir`.
fn build_store(files: &[(String, Vec<u8>)], turns: usize, dir: &Path) -> Res<PathBuf> {
    let root = dir.join("project");
    write_tree(files, &root)?;
    let root = fs::canonicalize(&root)?;
    let mut store = turnback::Store::open(&root)?;
    let mut current: Vec<Vec<u8>> = files.iter().map(|(_, b)| b.clone()).collect();
    for i in 0..turns {
        let j = i % files.len();
        current[j].extend_from_slice(format!("/* turn {i} */\n").as_bytes());
        let turn = turnback::TurnId::new(format!("built-{i}"))?;
        store.write(
            &turn,
            Some("a turn of the prebuilt store"),
            &files[j].0,
            &current[j],
        )?;
        if i == 0 {
            fs::write(store.store_dir().join("config.toml"), NO_AUTO_GC)?;
        }
    }
    if store.turns()?.len() != turns {
        return Err(format!(
            "the prebuilt store holds {} turns, {turns} wanted",
            store.turns()?.len()
        )
        .into());
    }
    Ok(root)
}

/// The config of every store the benchmark prepares: automatic gc off,
/// every turn kept.
const NO_AUTO_GC: &str = "[retention]\nkeep_turns = 1000000000\nkeep_days = 1000000\nmax_size = \"1024P\"\n\n[gc]\nauto_every_captures = 0\n";

/// A fresh copy of `prebuilt` (a project and its store) under `work`,
/// opened once untimed (the copy's log is a new file, so this open reads
/// it whole and writes the index checkpoint the measured calls use).
fn copy_prebuilt(prebuilt: &Path, work: &Path) -> Res<PathBuf> {
    let root = work.join("project");
    copy_dir(prebuilt, &root)?;
    let root = fs::canonicalize(&root)?;
    drop(turnback::Store::open(&root)?);
    Ok(root)
}

/// One repetition for `agent`: a fresh copy of the project (of `prebuilt`,
/// a project whose store holds `base_turns` turns, when given), `runs`
/// iterations.
fn repetition(
    files: &[(String, Vec<u8>)],
    cfg: &Config,
    bin: &Path,
    agent: &Agent,
    rep: usize,
    prebuilt: Option<(&Path, usize)>,
) -> Res<(Vec<Times>, TempDir)> {
    let work = TempDir::with_prefix_in("turnback-bench-hooks-", &cfg.tmp)?;
    let (root, base_turns) = match prebuilt {
        Some((p, n)) => (copy_prebuilt(p, work.path())?, n),
        None => {
            let root = fs::canonicalize(work.path())?;
            write_tree(files, &root)?;
            drop(turnback::Store::open(&root)?);
            (root, 0)
        }
    };
    let r = root.display().to_string();
    let mut times = vec![Times::default(); agent.events.len()];
    let truebin = Path::new("/bin/true");
    for i in 0..cfg.runs {
        let (wrel, wbytes) = &files[(2 * i) % files.len()];
        let (brel, bbytes) = &files[(2 * i + 1) % files.len()];
        let wpath = format!("{r}/{wrel}");
        let mut content = wbytes.clone();
        content.extend_from_slice(format!("\n/* written by the agent, run {i} */\n").as_bytes());
        let content_str = String::from_utf8_lossy(&content).into_owned();
        let command = format!("printf '/* run {i} */\\n' >> {brel}");
        let it = Iteration {
            root: &r,
            rep,
            i,
            wrel,
            wpath: &wpath,
            content: &content_str,
            command: &command,
        };
        for (k, (event, ev)) in events(agent.name, &it)?.iter().enumerate() {
            let bytes = serde_json::to_vec(ev)?;
            let mut args = vec!["hook", agent.name];
            args.extend(event);
            let t = spawn(bin, &args, &root, &bytes, Some(agent.stdout))?;
            let p = spawn(truebin, &[], &root, &bytes, None)?;
            times[k].hook.push(t);
            times[k].peer.push(p);
            // What the tool does between its Pre and Post events.
            if k == 1 {
                fs::write(&wpath, &content)?;
            } else if k == 3 {
                let mut b = fs::read(root.join(brel)).unwrap_or_else(|_| bbytes.clone());
                b.extend_from_slice(format!("/* run {i} */\n").as_bytes());
                fs::write(root.join(brel), b)?;
            }
        }
    }
    // The hooks recorded what they were sent: one turn per prompt, each
    // holding the written file's pre-image.
    let store = turnback::Store::open(&root)?;
    let turns = store.turns()?;
    if turns.len() != base_turns + cfg.runs {
        return Err(format!(
            "{}: the hooks made {} turns, {} expected",
            agent.name,
            turns.len() - base_turns.min(turns.len()),
            cfg.runs
        )
        .into());
    }
    for (i, t) in turns[base_turns..].iter().enumerate() {
        let want = &files[(2 * i) % files.len()].0;
        if !t.files.iter().any(|f| f.entry.path.as_str() == want) {
            return Err(format!("{}: turn {i} did not capture {want}", agent.name).into());
        }
    }
    Ok((times, work))
}

fn spawn_write(bin: &Path, root: &Path, turn: &str, rel: &str, bytes: &[u8]) -> Res<f64> {
    let t0 = Instant::now();
    let mut child = Command::new(bin)
        .args(["write", "--turn", turn, rel])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    child.stdin.take().ok_or("no stdin")?.write_all(bytes)?;
    let out = child.wait_with_output()?;
    let t = t0.elapsed().as_secs_f64();
    if !out.status.success() || !out.stderr.is_empty() {
        return Err(format!(
            "turnback write in {}: {}, stderr {:?}",
            root.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(t)
}

/// The `turnback write` rows, one repetition: per call, its time in the
/// large store, in the small one and in the one-turn peer.
#[derive(Default, Clone)]
struct WriteTimes {
    large: Vec<f64>,
    small: Vec<f64>,
    peer: Vec<f64>,
    /// Calls into fresh copies of the large store whose limit they exceed
    /// (automatic gc comes due), and the same calls (turn, file and bytes)
    /// into fresh copies where it is not.
    gc_due: Vec<f64>,
    gc_peer: Vec<f64>,
    /// From that call's exit until the background gc left the limit.
    gc_background: Vec<f64>,
}

/// Calls that make automatic gc due per repetition, each with its peer.
const GC_PAIRS: usize = 3;

/// The config of the copy of the large store in which the measured call
/// makes automatic gc due: `keep_turns` nine tenths of the turns it holds.
fn gc_due_config(turns: usize) -> String {
    format!(
        "[retention]\nkeep_turns = {}\nkeep_days = 1000000\nmax_size = \"1024P\"\n\n[gc]\nauto_every_captures = 1\n",
        turns * 9 / 10
    )
}

/// Waits (at most two minutes) until the store of `root` holds `want`
/// turns (a background gc is done), and returns how long that took.
fn wait_for_turns(root: &Path, want: usize) -> Res<f64> {
    let t0 = Instant::now();
    loop {
        // Opening takes the shared lock, so it waits for a gc under way.
        let n = turnback::Store::open(root)?.turns()?.len();
        if n == want {
            return Ok(t0.elapsed().as_secs_f64());
        }
        if t0.elapsed().as_secs() > 120 {
            return Err(format!(
                "{}: {n} turns two minutes after the call that made gc due, {want} expected",
                root.display()
            )
            .into());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// One repetition of the `turnback write` rows: fresh copies of the two
/// prebuilt stores and a new one-turn store, then `runs` calls into each,
/// the three calls of an iteration back to back in a rotating order, each
/// a new turn writing the same file with the same new bytes in all three.
fn write_repetition(
    files: &[(String, Vec<u8>)],
    cfg: &Config,
    bin: &Path,
    rep: usize,
    large: &Path,
    small: &Path,
) -> Res<(WriteTimes, TempDir)> {
    let work = TempDir::with_prefix_in("turnback-bench-write-", &cfg.tmp)?;
    let large_built = large;
    let large = copy_prebuilt(large, &work.path().join("large"))?;
    let small = copy_prebuilt(small, &work.path().join("small"))?;
    let peer = build_store(files, 1, &work.path().join("peer"))?;
    drop(turnback::Store::open(&peer)?);
    let mut t = WriteTimes::default();
    for i in 0..cfg.runs {
        let (rel, bytes) = &files[(7 * i + 3) % files.len()];
        let mut content = bytes.clone();
        content.extend_from_slice(format!("\n/* turnback write, call {i} */\n").as_bytes());
        let turn = format!("write-{rep}-{i}");
        for k in 0..3 {
            match (i + k) % 3 {
                0 => t
                    .large
                    .push(spawn_write(bin, &large, &turn, rel, &content)?),
                1 => t
                    .small
                    .push(spawn_write(bin, &small, &turn, rel, &content)?),
                _ => t.peer.push(spawn_write(bin, &peer, &turn, rel, &content)?),
            }
        }
    }
    // Last, so neither its copy nor its gc disturbs the calls above: the
    // last iteration's call again, into the copy where it makes gc due; its
    // peer is that call into the large store.
    let last = cfg.runs - 1;
    let (rel, bytes) = &files[(7 * last + 3) % files.len()];
    let mut content = bytes.clone();
    content.extend_from_slice(format!("\n/* turnback write, call {last} */\n").as_bytes());
    // Its peer is the same call into another fresh copy, where gc is not
    // due: the first call into a copy costs more than the later ones (by
    // hand, 4.9-6.3 ms against 4.1-6.2 ms for the second), so the large
    // store's last call made the gc-due call look dearer than it is.
    for pair in 0..GC_PAIRS {
        let copy = |name: &str, config: Option<String>| -> Res<PathBuf> {
            let root = copy_prebuilt(large_built, &work.path().join(format!("{name}-{pair}")))?;
            if let Some(config) = config {
                fs::write(
                    turnback::Store::open(&root)?
                        .store_dir()
                        .join("config.toml"),
                    config,
                )?;
            }
            sync_fs(&root)?;
            Ok(root)
        };
        let due = copy("due", Some(gc_due_config(cfg.turns)))?;
        let not_due = copy("not-due", None)?;
        let turn = format!("write-{rep}-{last}");
        let run_due = |t: &mut WriteTimes| -> Res<()> {
            t.gc_due.push(spawn_write(bin, &due, &turn, rel, &content)?);
            t.gc_background
                .push(wait_for_turns(&due, cfg.turns * 9 / 10)?);
            Ok(())
        };
        // Which goes first alternates.
        if (rep + pair).is_multiple_of(2) {
            run_due(&mut t)?;
            t.gc_peer
                .push(spawn_write(bin, &not_due, &turn, rel, &content)?);
        } else {
            t.gc_peer
                .push(spawn_write(bin, &not_due, &turn, rel, &content)?);
            run_due(&mut t)?;
        }
    }
    for (root, base) in [(&large, cfg.turns), (&small, cfg.small_turns), (&peer, 1)] {
        let n = turnback::Store::open(root)?.turns()?.len();
        if n != base + cfg.runs {
            return Err(format!(
                "{}: {n} turns after the calls, {} expected",
                root.display(),
                base + cfg.runs
            )
            .into());
        }
    }
    Ok((t, work))
}

/// Calls made right after a rewind that leaves maintenance to do (the
/// files it kept aside, stored by a background `turnback maintain`), and
/// the same calls after the same rewind with no maintenance running.
#[derive(Default, Clone)]
struct MaintTimes {
    /// Per call kind ([`MAINT_CALLS`]): while maintenance runs.
    during: [Vec<f64>; 2],
    /// The same with no maintenance running (`TURNBACK_NO_BACKGROUND`).
    peer: [Vec<f64>; 2],
    /// Calls after which the kept files were still being stored (the
    /// call ran wholly while maintenance did).
    overlapped: usize,
    /// How long the background maintenance took, from the rewind's exit.
    maintenance: Vec<f64>,
}

/// The calls timed while maintenance runs.
const MAINT_CALLS: [&str; 2] = [
    "`turnback write` (capture, write)",
    "`turnback hook claude-code` PreToolUse Write (capture)",
];

/// Whether the store of `root` still has work left for maintenance (the
/// files kept aside, the trash).
fn kept_pending(root: &Path) -> Res<bool> {
    Ok(turnback::Store::open(root)?.maintenance_due())
}

/// A project of `n` small files in 100 directories, its store holding
/// turn `t1` that changed every one (a command's before and after
/// snapshots), rewound by the command line: the rewind keeps every file it
/// replaces aside, so it leaves them to be stored. `background`: the
/// rewind starts `turnback maintain` as it always does; otherwise it is
/// kept from starting. Returns when the rewind has exited.
fn rewound_project(bin: &Path, dir: &Path, n: usize, background: bool) -> Res<PathBuf> {
    let root = dir.to_path_buf();
    for i in 0..n {
        let d = root.join(format!("src/d{}", i % 100));
        fs::create_dir_all(&d)?;
        fs::write(d.join(format!("f{i}.txt")), format!("file {i}\n"))?;
    }
    fs::write(root.join("x.txt"), "x\n")?;
    let run = |args: &[&str]| -> Res<()> {
        let mut c = Command::new(bin);
        c.args(args).current_dir(&root).stdin(Stdio::null());
        if !background {
            c.env("TURNBACK_NO_BACKGROUND", "1");
        } else {
            c.env_remove("TURNBACK_NO_BACKGROUND");
        }
        let out = c.output()?;
        if !out.status.success() {
            return Err(format!(
                "turnback {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(())
    };
    run(&["snapshot", "--turn", "t1"])?;
    for i in 0..n {
        let f = root.join(format!("src/d{}/f{i}.txt", i % 100));
        fs::write(f, format!("file {i}, changed by the command\n"))?;
    }
    run(&["snapshot", "--turn", "t1", "--after"])?;
    sync_fs(&root)?;
    run(&["rewind", "t1"])?;
    Ok(root)
}

/// One repetition of the maintenance rows: the two projects (maintenance
/// running, and not) made the same way, which goes first alternating; in
/// each, right after the rewind, one call of each kind.
fn maintenance_repetition(cfg: &Config, bin: &Path, rep: usize) -> Res<(MaintTimes, TempDir)> {
    let work = TempDir::with_prefix_in("turnback-bench-maint-", &cfg.tmp)?;
    let mut t = MaintTimes::default();
    let hook_event = |root: &Path| -> Res<Vec<u8>> {
        Ok(serde_json::to_vec(&json!({
            "session_id": "8c35adc1-4f1e-4c9a-9a51-0f6b7e2d1c3a",
            "prompt_id": format!("p-{rep}"),
            "transcript_path": "/home/user/.claude/projects/-proj/8c35adc1.jsonl",
            "cwd": root,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": { "file_path": root.join("src/d1/f1.txt"), "content": "new\n" },
        }))?)
    };
    for side in 0..2 {
        let background = (rep + side).is_multiple_of(2);
        let root = rewound_project(
            bin,
            &work.path().join(format!("p{side}")),
            cfg.maint_files,
            background,
        )?;
        let after_rewind = Instant::now();
        if background && !kept_pending(&root)? {
            return Err(format!(
                "{}: the rewind kept no file aside, so left no maintenance to measure",
                root.display()
            )
            .into());
        }
        let times = [
            spawn_write(bin, &root, "t2", "x.txt", b"y\n")?,
            spawn(
                bin,
                &["hook", "claude-code"],
                &root,
                &hook_event(&root)?,
                Some(""),
            )?,
        ];
        let which = if background {
            &mut t.during
        } else {
            &mut t.peer
        };
        for (k, time) in times.into_iter().enumerate() {
            which[k].push(time);
        }
        if background {
            if kept_pending(&root)? {
                t.overlapped += 1;
            }
            let t0 = Instant::now();
            while kept_pending(&root)? {
                if t0.elapsed().as_secs() > 300 {
                    return Err(format!(
                        "{}: maintenance still running after 5 minutes",
                        root.display()
                    )
                    .into());
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            t.maintenance.push(after_rewind.elapsed().as_secs_f64());
        }
    }
    Ok((t, work))
}

/// Calls made right after the one that makes automatic gc due (the gc then
/// runs in a background `turnback maintain`), and the same calls into a
/// copy where gc is not due.
#[derive(Default, Clone)]
struct GcTimes {
    /// The first call after the one that made gc due, then the others.
    during: [Vec<f64>; 2],
    peer: [Vec<f64>; 2],
    /// Calls that ended before the gc had put its log in place.
    overlapped: usize,
    /// From the gc-due call's exit until the compacted log was in place.
    gc: Vec<f64>,
}

/// Timed calls after the one that makes gc due, per repetition.
const GC_CALLS: usize = 5;

/// The length of the log of the project `root` (its store is in the
/// project: the benchmark sets `TURNBACK_STORE=project`). It only grows,
/// but when gc puts a compacted log in its place.
fn log_len(root: &Path) -> Res<u64> {
    Ok(fs::metadata(root.join(".turnback/log.jsonl"))?.len())
}

/// One repetition of the gc rows: two fresh copies of the large store,
/// one whose config makes the next call make gc due; in each, that call
/// (untimed), then [`GC_CALLS`] timed calls, each a new turn. Which copy
/// goes first alternates.
fn gc_repetition(
    files: &[(String, Vec<u8>)],
    cfg: &Config,
    bin: &Path,
    rep: usize,
    large: &Path,
) -> Res<(GcTimes, TempDir)> {
    let work = TempDir::with_prefix_in("turnback-bench-gc-", &cfg.tmp)?;
    let mut t = GcTimes::default();
    let copy = |name: &str, config: Option<String>| -> Res<PathBuf> {
        let root = copy_prebuilt(large, &work.path().join(name))?;
        if let Some(config) = config {
            fs::write(root.join(".turnback/config.toml"), config)?;
        }
        sync_fs(&root)?;
        Ok(root)
    };
    let due = copy("due", Some(gc_due_config(cfg.turns)))?;
    let not_due = copy("not-due", None)?;
    let call = |root: &Path, i: usize| -> Res<f64> {
        let (rel, bytes) = &files[(11 * i + 5) % files.len()];
        let mut content = bytes.clone();
        content.extend_from_slice(format!("\n/* gc row, call {i} */\n").as_bytes());
        spawn_write(bin, root, &format!("gc-{rep}-{i}"), rel, &content)
    };
    for side in 0..2 {
        let gc = (rep + side).is_multiple_of(2);
        let root = if gc { &due } else { &not_due };
        let before = log_len(root)?;
        call(root, 0)?;
        let exit = Instant::now();
        for i in 1..=GC_CALLS {
            let time = call(root, i)?;
            let k = usize::from(i > 1);
            if gc {
                t.during[k].push(time);
                if log_len(root)? >= before {
                    t.overlapped += 1;
                }
            } else {
                t.peer[k].push(time);
            }
        }
        if gc {
            while log_len(root)? >= before {
                if exit.elapsed().as_secs() > 120 {
                    return Err(format!(
                        "{}: no gc two minutes after the call that made it due",
                        root.display()
                    )
                    .into());
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            t.gc.push(exit.elapsed().as_secs_f64());
            // Every call's turn is there, and the limit holds.
            let store = turnback::Store::open(root)?;
            let turns = store.turns()?;
            let ours = turns
                .iter()
                .filter(|x| x.id.as_str().starts_with(&format!("gc-{rep}-")))
                .count();
            if ours != GC_CALLS + 1 || turns.len() > cfg.turns * 9 / 10 + GC_CALLS + 1 {
                return Err(format!(
                    "{}: {} turns, {ours} of the {} calls made after the gc came due",
                    root.display(),
                    turns.len(),
                    GC_CALLS + 1
                )
                .into());
            }
            if !store.verify()?.whole {
                return Err(format!("{}: not whole after the gc", root.display()).into());
            }
        }
    }
    Ok((t, work))
}

/// The rows of calls made while a background gc runs.
fn render_gc(cfg: &Config, gc: &[GcTimes]) -> String {
    let took: Vec<f64> = gc.iter().flat_map(|g| g.gc.clone()).collect();
    let overlapped: usize = gc.iter().map(|g| g.overlapped).sum();
    let mut s = String::from(
        "\n| Call | while the background gc runs | peer: the same calls, gc not due | difference of the medians | ratio of the medians | target | result |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let rows = [
        "`turnback write`: the first call after the one that made gc due",
        "`turnback write`: the next calls",
    ];
    let mut calls = 0;
    for (k, name) in rows.iter().enumerate() {
        let during: Vec<f64> = gc.iter().flat_map(|g| g.during[k].clone()).collect();
        let peer: Vec<f64> = gc.iter().flat_map(|g| g.peer[k].clone()).collect();
        if during.is_empty() || peer.is_empty() {
            continue;
        }
        calls += during.len();
        s.push_str(&latency_row(name, &during, &peer));
    }
    let _ = writeln!(
        s,
        "\nThe gc rows: fresh copies of a store of {} single-file turns (built by `Store::write`); \
         in one, the config keeps {} turns and checks after every capture, so the first call \
         (untimed) makes gc due and leaves it to a background `turnback maintain`; then {GC_CALLS} \
         calls, each a new turn, are timed from spawn to exit. The peer is the same calls into \
         the other copy, where gc is not due; which goes first alternates. {overlapped} of \
         {calls} timed calls ended before the gc had put its compacted log in place; the gc took \
         {} from the first call's exit. Afterwards every call's turn is in the store and \
         `verify` finds it whole.",
        thousands(cfg.turns as u64),
        thousands((cfg.turns * 9 / 10) as u64),
        time_cell(&took),
    );
    s
}

/// A row of a latency table: a call while background work runs against
/// its peer, judged on the difference of the medians (issue 26: ≤ +50 ms).
fn latency_row(name: &str, during: &[f64], peer: &[f64]) -> String {
    let diff = median(during) - median(peer);
    format!(
        "| {name} | {} | {} | {} | {:.2}x | ≤ +50 ms | {} |\n",
        time_cell(during),
        time_cell(peer),
        ms(diff),
        median(during) / median(peer),
        verdict(diff <= 0.050),
    )
}

/// The result cell of a row with a target.
fn verdict(met: bool) -> &'static str {
    if met { "**met**" } else { "**missed**" }
}

/// The table of calls made while maintenance runs.
fn render_maintenance(cfg: &Config, maint: &[MaintTimes]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n### Calls while background maintenance runs\n\n\
         Each cell is the median over the repetitions (one call each). The peer is the same call \
         right after the same rewind, in a project made the same way, with no maintenance \
         running (`TURNBACK_NO_BACKGROUND=1`); which of the two projects goes first alternates. \
         Target (issue 26): a foreground call answered within 50 ms of the peer.\n\n\
         | Call | while maintenance runs | peer: no maintenance running | difference of the medians | ratio of the medians | target | result |\n|---|---|---|---|---|---|---|"
    );
    for (k, name) in MAINT_CALLS.iter().enumerate() {
        let during: Vec<f64> = maint.iter().flat_map(|m| m.during[k].clone()).collect();
        let peer: Vec<f64> = maint.iter().flat_map(|m| m.peer[k].clone()).collect();
        if during.is_empty() || peer.is_empty() {
            continue;
        }
        s.push_str(&latency_row(name, &during, &peer));
    }
    let maintenance: Vec<f64> = maint.iter().flat_map(|m| m.maintenance.clone()).collect();
    let overlapped: usize = maint.iter().map(|m| m.overlapped).sum();
    let _ = writeln!(
        s,
        "\nThe project: {} files of a few bytes in 100 directories; its store holds one turn, \
         `turnback snapshot --turn t1`, every file rewritten, `turnback snapshot --turn t1 --after`, \
         then `turnback rewind t1`, which keeps each file it replaces aside in the store and \
         leaves storing them to the `turnback maintain` it starts in the background. Right after \
         the rewind exits, `turnback write` of another file (a new turn) and a Claude Code \
         PreToolUse Write event on `turnback hook claude-code` (a capture), each timed from \
         spawn to exit. In {overlapped} of {} repetitions the kept files were still being \
         stored when both calls had answered; the background maintenance took {} from the \
         rewind's exit.",
        thousands(cfg.maint_files as u64),
        maint.len(),
        time_cell(&maintenance),
    );
    s
}

// ------------------------------------------------- copied from turnback's store bench

struct Ratio {
    /// Median of the measured side over median of the peer.
    value: f64,
    /// Median of the per-repetition ratios (each side measured back to
    /// back), less sensitive to a machine whose load drifts.
    paired: f64,
}

impl Ratio {
    fn new(subject: &[f64], peer: &[f64]) -> Self {
        let per_rep: Vec<f64> = subject
            .iter()
            .enumerate()
            .map(|(i, s)| s / peer[i % peer.len()])
            .collect();
        Ratio {
            value: median(subject) / median(peer),
            paired: median(&per_rep),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn render(
    cfg: &Config,
    m: &Machine,
    per_agent: &[Vec<Vec<Times>>],
    per_rep_large: &[Vec<Times>],
    writes: &[WriteTimes],
    n_files: usize,
    tree_bytes: u64,
    bin: &Path,
    load_end: &str,
    commit: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Hooks: latency added per tool call, per agent\n\n\
         Written by `cargo bench -p turnback-cli --bench hooks` (source: \
         `crates/turnback-cli/benches/hooks.rs`) on {} at commit {commit}, {}, {} build \
         of `turnback` (`{}`).\n",
        today(),
        rustc_version(),
        if cfg!(debug_assertions) {
            "debug (not representative)"
        } else {
            "release"
        },
        bin.file_name()
            .map_or("turnback".into(), |n| n.to_string_lossy()),
    );
    let _ = writeln!(
        s,
        "- **Machine:** {} ({} cores in /proc/cpuinfo, available parallelism {}), \
         Linux {}, {:.1} GiB RAM. Temp dir `{}` on **{}** ({}). The machine is shared \
         with other work: load average {} at the start, {load_end} at the end.",
        m.cpu,
        m.cores,
        m.parallelism,
        m.kernel,
        m.mem_gib,
        m.tmp.display(),
        m.fs,
        m.device,
        m.load_start,
    );
    let _ = writeln!(
        s,
        "- **Project:** the first {} regular files of `{}` in byte order of their relative \
         paths ({} bytes), a fresh copy for every repetition of every agent.",
        thousands(n_files as u64),
        cfg.tree.display(),
        thousands(tree_bytes),
    );
    let _ = writeln!(
        s,
        "- **Repetitions:** {} per agent, each of {} prompts (so {} runs of every event). A cell is the \
         median over the repetitions of each repetition's median, the range of those medians \
         in brackets; the added latency is the hook's median minus the peer's.\n",
        cfg.reps,
        cfg.runs,
        cfg.reps * cfg.runs,
    );
    for (agent, per_rep) in cfg.agents.iter().zip(per_agent) {
        let _ = writeln!(
            s,
            "### {}\n\n| Event | `turnback hook {}` | peer: `/bin/true`, spawned the same way | added latency | ratio of the medians | median of the per-repetition ratios |\n|---|---|---|---|---|---|",
            agent.title, agent.name
        );
        for (k, name) in agent.events.iter().enumerate() {
            let hook: Vec<f64> = per_rep.iter().map(|r| median(&r[k].hook)).collect();
            let peer: Vec<f64> = per_rep.iter().map(|r| median(&r[k].peer)).collect();
            let r = Ratio::new(&hook, &peer);
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} | {:.1}x | {:.1}x |",
                time_cell(&hook),
                time_cell(&peer),
                ms(median(&hook) - median(&peer)),
                r.value,
                r.paired,
            );
        }
        let _ = writeln!(s);
    }
    let big = thousands(cfg.turns as u64);
    let _ = writeln!(
        s,
        "### `turnback write`: one process into a store of {big} turns and of {} small turns\n\n\
         Each cell is the median over the repetitions of each repetition's median of {} calls. \
         The peer is the same call into a store holding one turn, in the same iteration (the \
         three calls of an iteration back to back, in a rotating order). Target (issue 14): \
         at most 1.2x the peer, on the ratio of the medians.\n",
        thousands(cfg.small_turns as u64),
        cfg.runs,
    );
    let _ = writeln!(
        s,
        "| Store | `turnback write` | peer: the same into a one-turn store | ratio of the medians | median of the per-repetition ratios | target | result |\n|---|---|---|---|---|---|---|"
    );
    let peer: Vec<f64> = writes.iter().map(|w| median(&w.peer)).collect();
    for (name, side) in [
        (
            format!("{big} turns"),
            writes
                .iter()
                .map(|w| median(&w.large))
                .collect::<Vec<f64>>(),
        ),
        (
            format!("{} small turns", thousands(cfg.small_turns as u64)),
            writes.iter().map(|w| median(&w.small)).collect(),
        ),
    ] {
        if side.is_empty() {
            continue;
        }
        let r = Ratio::new(&side, &peer);
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {:.2}x | {:.2}x | ≤ 1.2x | {} |",
            time_cell(&side),
            time_cell(&peer),
            r.value,
            r.paired,
            verdict(r.value <= 1.2),
        );
    }
    let due: Vec<f64> = writes.iter().flat_map(|w| &w.gc_due).copied().collect();
    let due_peer: Vec<f64> = writes.iter().flat_map(|w| &w.gc_peer).copied().collect();
    let background: Vec<f64> = writes
        .iter()
        .flat_map(|w| &w.gc_background)
        .copied()
        .collect();
    if !due.is_empty() && due.len() == due_peer.len() {
        let r = Ratio::new(&due, &due_peer);
        let _ = writeln!(
            s,
            "| the call that makes automatic gc due ({big} turns, `keep_turns` {}; {GC_PAIRS} calls per repetition; the background gc then took {}) | {} | {} (the same call into another fresh copy of the {big}-turn store, gc not due) | {:.2}x | {:.2}x | ≤ 1.2x | {} |",
            thousands((cfg.turns * 9 / 10) as u64),
            time_cell(&background),
            time_cell(&due),
            time_cell(&due_peer),
            r.value,
            r.paired,
            verdict(r.value <= 1.2),
        );
    }
    let _ = writeln!(
        s,
        "\nThe stores are built once per run by `Store::write` calls (one turn each, \
         cycling over the project's files, a line added each time; the {big}-turn store's \
         log is the one a real store of that many single-file turns has), with automatic \
         gc off and `keep_turns` raised, and copied afresh for every repetition; an untimed \
         open of each copy writes its index checkpoint, as the first command after any copy \
         would. Each call writes the same file with the same new bytes in the three stores, \
         a new turn each. The automatic gc row: after the last iteration's calls, its call goes \
         again, {GC_PAIRS} times, to a fresh copy of the {big}-turn store whose config keeps {} \
         turns and checks after every capture, so that call makes gc due (past the limit's \
         tenth), and to another fresh copy with the config unchanged, the peer (which goes \
         first alternates): a first call into a copy costs more than the later ones. Each is \
         timed from spawn to exit like the others (the command line leaves gc to a \
         background `turnback maintain` once it has answered); after the gc-due call the store \
         is opened every 5 ms (a shared lock, which waits for a gc under way) until it holds \
         {} turns: that wait is the background gc's time.\n",
        thousands((cfg.turns * 9 / 10) as u64),
        thousands((cfg.turns * 9 / 10) as u64),
    );
    // The first agent's table again, in a store already holding that many
    // turns, against the same agent's table in a new project.
    if let (Some(agent), Some(fresh), false) = (
        cfg.agents.first(),
        per_agent.first(),
        per_rep_large.is_empty(),
    ) {
        let _ = writeln!(
            s,
            "### {}, in a store already holding {big} turns\n\n\
             | Event | `turnback hook {}` | peer: `/bin/true`, spawned the same way | added latency | ratio of the medians | against the new project's table (ratio of the medians) |\n|---|---|---|---|---|---|",
            agent.title, agent.name
        );
        for (k, name) in agent.events.iter().enumerate() {
            let hook: Vec<f64> = per_rep_large.iter().map(|r| median(&r[k].hook)).collect();
            let peer: Vec<f64> = per_rep_large.iter().map(|r| median(&r[k].peer)).collect();
            let before: Vec<f64> = fresh.iter().map(|r| median(&r[k].hook)).collect();
            let r = Ratio::new(&hook, &peer);
            let g = Ratio::new(&hook, &before);
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} | {:.1}x | {:.2}x (per repetition {:.2}x) |",
                time_cell(&hook),
                time_cell(&peer),
                ms(median(&hook) - median(&peer)),
                r.value,
                g.value,
                g.paired,
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "How it is measured: each prompt sends, as the agent does, its prompt event (a \
         new turn: Claude Code's `prompt_id`, Codex's `turn_id` and opencode's message id \
         change with every prompt; Cline's CLI runs each prompt as a task of its own), the \
         before-edit event of an existing file (the hook captures it; for Codex the path \
         comes from parsing the `apply_patch` text), then the write itself, the after-edit \
         event (the hook records its post-image), the before-shell event (the hook snapshots \
         the tree), then the command's change to another file, the after-shell event \
         (second snapshot; the changed file is captured). Every event is the JSON the \
         agent's adapter reads (`crates/turnback-cli/tests/fixtures/<agent>/`; for opencode \
         what turnback's plugin sends), on stdin of the release binary spawned directly \
         (no shell; Copilot's event name as the extra argument its hooks pass), the \
         project as cwd; the time runs from spawn to exit, and the hook must exit 0, print \
         only the agent's success answer (nothing, `{{}}` for Gemini CLI and Cursor, \
         `{{\"cancel\":false}}` for Cline) and nothing on stderr. Right after each hook call `/bin/true` is spawned with the same stdin \
         and timed the same way, so the ratio and the difference say what the hook costs \
         beyond starting a process. The file writes between events are not timed. After \
         each repetition the store must hold one turn per prompt, each with its written \
         file's pre-image. The store's turn count grows over the run ({} turns at the end of \
         each repetition; {} more in the prebuilt store, a copy of the {big}-turn store of \
         the `turnback write` rows, which also wrote into the project's files). Every store \
         is kept in its project (`TURNBACK_STORE=project`).",
        cfg.runs, cfg.runs,
    );
    s
}

#[allow(unsafe_code)] // the environment, set before any thread
fn main() -> Res<()> {
    // Stores in their projects, so a prebuilt store is copied with its
    // project (spawned commands inherit it).
    // SAFETY: set before any thread is started.
    unsafe { std::env::set_var(turnback::location::STORE_ENV, "project") };
    let cfg = config()?;
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_turnback"));
    if !bin.is_file() {
        return Err(format!(
            "{}: no turnback binary; run `cargo build --release`",
            bin.display()
        )
        .into());
    }
    let m = machine(&cfg.tmp)?;
    let commit = commit();
    let mut maint = Vec::new();
    for rep in 0..cfg.reps {
        eprintln!(
            "calls during maintenance: repetition {}/{} ...",
            rep + 1,
            cfg.reps
        );
        let (times, dir) = maintenance_repetition(&cfg, &bin, rep)?;
        maint.push(times);
        drop(dir);
    }
    eprintln!("loading {} files of {} ...", cfg.files, cfg.tree.display());
    let files = load_tree(&cfg.tree, cfg.files)?;
    let tree_bytes = files.iter().map(|(_, b)| b.len() as u64).sum();
    eprintln!(
        "building a store of {} turns in {} ...",
        cfg.turns,
        cfg.build_dir.display()
    );
    let built_large = TempDir::with_prefix_in("turnback-bench-large-", &cfg.build_dir)?;
    let large = build_store(&files, cfg.turns, built_large.path())?;
    let mut gc = Vec::new();
    for rep in 0..cfg.reps {
        eprintln!("calls during gc: repetition {}/{} ...", rep + 1, cfg.reps);
        let (times, dir) = gc_repetition(&files, &cfg, &bin, rep, &large)?;
        gc.push(times);
        drop(dir);
    }
    let maintenance_rows = render_maintenance(&cfg, &maint) + &render_gc(&cfg, &gc);
    if cfg.only_maintenance {
        println!("{maintenance_rows}");
        println!("(not written: TURNBACK_BENCH_ONLY)");
        return Ok(());
    }
    eprintln!(
        "building a store of {} turns in {} ...",
        cfg.small_turns,
        cfg.build_dir.display()
    );
    let built_small = TempDir::with_prefix_in("turnback-bench-small-", &cfg.build_dir)?;
    let small = build_store(&files, cfg.small_turns, built_small.path())?;
    let mut keep = Vec::new();
    let mut writes = Vec::new();
    let mut per_rep_large = Vec::new();
    for rep in 0..cfg.reps {
        eprintln!("turnback write: repetition {}/{} ...", rep + 1, cfg.reps);
        let (w, dir) = write_repetition(&files, &cfg, &bin, rep, &large, &small)?;
        writes.push(w);
        keep.push(dir);
        if cfg.only_write {
            continue;
        }
        if let Some(agent) = cfg.agents.first() {
            let prebuilt = Some((large.as_path(), cfg.turns));
            let (times, dir) = repetition(&files, &cfg, &bin, agent, rep, prebuilt)?;
            per_rep_large.push(times);
            keep.push(dir);
        }
    }
    let mut per_agent = Vec::new();
    for agent in cfg.agents.iter().filter(|_| !cfg.only_write) {
        let mut per_rep = Vec::new();
        for rep in 0..cfg.reps {
            eprintln!("{}: repetition {}/{} ...", agent.name, rep + 1, cfg.reps);
            let (times, dir) = repetition(&files, &cfg, &bin, agent, rep, None)?;
            per_rep.push(times);
            keep.push(dir);
        }
        per_agent.push(per_rep);
    }
    let load_end = load_average();
    let body = render(
        &cfg,
        &m,
        &per_agent,
        &per_rep_large,
        &writes,
        files.len(),
        tree_bytes,
        &bin,
        &load_end,
        &commit,
    ) + &maintenance_rows;
    println!("{body}");
    if !cfg.write || cfg.only_write {
        println!("(not written: --no-write or TURNBACK_BENCH_ONLY)");
    } else if cfg!(debug_assertions) {
        println!(
            "(not written to {}: a debug build; run `cargo bench`)",
            cfg.out.display()
        );
    } else if cfg.agents.len() < AGENTS.len() {
        println!(
            "(not written to {}: only some agents measured, TURNBACK_BENCH_AGENTS)",
            cfg.out.display()
        );
    } else if cfg.reps < MIN_REPS || cfg.runs < MIN_RUNS {
        println!(
            "(not written to {}: {} repetitions of {} runs, at least {MIN_REPS} of {MIN_RUNS} needed)",
            cfg.out.display(),
            cfg.reps,
            cfg.runs
        );
    } else {
        write_section(&cfg.out, SECTION, &body)?;
        println!("written to {}", cfg.out.display());
    }
    drop(keep);
    Ok(())
}
