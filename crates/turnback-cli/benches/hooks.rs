//! The hook benchmark: the latency `turnback hook claude-code` adds to each
//! Claude Code tool call, process start included, on a project of 500 real
//! files, against spawning `/bin/true` the same way in the same run. The
//! figures are printed and written to a marked section of
//! `docs/BENCHMARKS.md` (other sections are left alone).
//!
//! ```text
//! cargo bench -p turnback-cli --bench hooks [-- --reps N]
//! ```
//!
//! Every iteration is one prompt as Claude Code delivers it: `UserPromptSubmit`
//! (a new prompt id: a new turn), `PreToolUse Write` of an existing file (its
//! capture), the write itself (untimed), `PostToolUse Write` (its post-image),
//! `PreToolUse Bash` (tree snapshot), a file changed by "the command"
//! (untimed), `PostToolUse Bash` (second snapshot). Each hook call is the
//! release binary spawned with the event on stdin and the project as cwd;
//! right after it `/bin/true` is spawned with the same stdin.
//!
//! The same table is measured again with the project's store already
//! holding `TURNBACK_BENCH_TURNS` turns (default 10,000), and a second table
//! times one `turnback write` process (capture, write, exit) into a store of
//! that many turns and into one of `TURNBACK_BENCH_SMALL_TURNS` (default
//! 200) small turns, each against the same call into a store holding one
//! turn, alternated call by call in the same run (issue 14: the cost of a
//! call must not grow with the store). Those stores are built once per run
//! with `Store::write` in `/dev/shm` (when it is a tmpfs) with automatic gc
//! off and `keep_turns` raised, and copied afresh, with an untimed open,
//! for every repetition.
//!
//! Every store is in its project (`TURNBACK_STORE=project`), so a prebuilt
//! store is copied with its project.
//!
//! Settings: `--reps N` / `TURNBACK_BENCH_REPS` (default 5; each a fresh
//! copy of the project), `TURNBACK_BENCH_RUNS` (iterations per repetition,
//! default 50), `TURNBACK_BENCH_TREE` / `TURNBACK_BENCH_FILES` (default
//! `/usr/include`, 500), `TURNBACK_BENCH_TURNS`, `TURNBACK_BENCH_SMALL_TURNS`,
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
const SESSION: &str = "8c35adc1-4f1e-4c9a-9a51-0f6b7e2d1c3a";
/// The events, in the order of one iteration.
const EVENTS: [&str; 5] = [
    "UserPromptSubmit",
    "PreToolUse Write (capture)",
    "PostToolUse Write (post-image)",
    "PreToolUse Bash (tree snapshot)",
    "PostToolUse Bash (tree snapshot)",
];

struct Config {
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
    tmp: PathBuf,
    build_dir: PathBuf,
    out: PathBuf,
    write: bool,
}

fn env_usize(name: &str, default: usize) -> Res<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a whole number").into()),
        Err(_) => Ok(default),
    }
}

fn config() -> Res<Config> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = fs::canonicalize(&workspace).unwrap_or(workspace);
    let mut reps = env_usize("TURNBACK_BENCH_REPS", MIN_REPS)?;
    let mut write =
        std::env::var("TURNBACK_BENCH_NO_WRITE").map_or(true, |v| v.is_empty() || v == "0");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--no-write" => write = false,
            "--reps" => {
                let v = args.next().ok_or("--reps needs a number, e.g. --reps 7")?;
                reps = v
                    .parse()
                    .map_err(|_| format!("--reps {v:?}: not a whole number"))?;
            }
            _ if a.starts_with("--reps=") => {
                let v = &a["--reps=".len()..];
                reps = v
                    .parse()
                    .map_err(|_| format!("{a:?}: not a whole number"))?;
            }
            _ => {
                return Err(format!(
                    "unknown argument {a:?}; this benchmark takes --reps N and --no-write"
                )
                .into());
            }
        }
    }
    if reps == 0 {
        return Err("the repetition count must be at least 1".into());
    }
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
    let only_write = match std::env::var("TURNBACK_BENCH_ONLY") {
        Ok(v) if v == "write" => true,
        Ok(v) if v.is_empty() => false,
        Ok(v) => return Err(format!("TURNBACK_BENCH_ONLY={v:?}: only \"write\" is known").into()),
        Err(_) => false,
    };
    Ok(Config {
        reps,
        runs,
        tree: std::env::var_os("TURNBACK_BENCH_TREE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include")),
        files: env_usize("TURNBACK_BENCH_FILES", 500)?,
        turns: env_usize("TURNBACK_BENCH_TURNS", 10_000)?,
        small_turns: env_usize("TURNBACK_BENCH_SMALL_TURNS", 200)?,
        only_write,
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
/// returns the elapsed time. The hook must exit 0 and print nothing.
fn spawn(program: &Path, args: &[&str], root: &Path, event: &[u8], check: bool) -> Res<f64> {
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
            Err(e) if !check && e.kind() == std::io::ErrorKind::BrokenPipe => {}
            r => r?,
        }
    }
    let out = child.wait_with_output()?;
    let t = t0.elapsed().as_secs_f64();
    if check && (!out.status.success() || !out.stdout.is_empty() || !out.stderr.is_empty()) {
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
    if store.turns().len() != turns {
        return Err(format!(
            "the prebuilt store holds {} turns, {turns} wanted",
            store.turns().len()
        )
        .into());
    }
    Ok(root)
}

/// The config of every store the benchmark prepares: automatic gc off,
/// every turn kept.
const NO_AUTO_GC: &str = "[retention]\nkeep_turns = 1000000000\nkeep_days = 1000000\nmax_size = \"1024P\"\n\n[gc]\nauto_every_captures = 0\n";

/// Copies a directory recursively (a prebuilt project with its store).
fn copy_dir(src: &Path, dst: &Path) -> Res<()> {
    fs::create_dir_all(dst).map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
    for entry in fs::read_dir(src).map_err(|e| format!("cannot list {}: {e}", src.display()))? {
        let entry = entry?;
        let to = dst.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else {
            fs::copy(entry.path(), &to)
                .map_err(|e| format!("cannot copy {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

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

/// One repetition: a fresh copy of the project (of `prebuilt`, a project
/// whose store holds `base_turns` turns, when given), `runs` iterations.
fn repetition(
    files: &[(String, Vec<u8>)],
    cfg: &Config,
    bin: &Path,
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
    let mut times = vec![Times::default(); EVENTS.len()];
    let truebin = Path::new("/bin/true");
    for i in 0..cfg.runs {
        let prompt_id = format!("bench-{rep}-{i}");
        let (wrel, wbytes) = &files[(2 * i) % files.len()];
        let (brel, bbytes) = &files[(2 * i + 1) % files.len()];
        let wpath = format!("{r}/{wrel}");
        let mut content = wbytes.clone();
        content.extend_from_slice(format!("\n/* written by the agent, run {i} */\n").as_bytes());
        let content_str = String::from_utf8_lossy(&content).into_owned();
        let base = |name: &str| {
            json!({
                "session_id": SESSION,
                "prompt_id": prompt_id,
                "transcript_path": "/home/user/.claude/projects/-proj/session.jsonl",
                "cwd": r,
                "permission_mode": "default",
                "hook_event_name": name,
            })
        };
        let mut prompt = base("UserPromptSubmit");
        prompt["prompt"] = json!(format!("Benchmark prompt {i}\nChange two files."));
        let mut pre_w = base("PreToolUse");
        pre_w["tool_name"] = json!("Write");
        pre_w["tool_input"] = json!({"file_path": wpath, "content": content_str});
        pre_w["tool_use_id"] = json!(format!("toolu_w{i}"));
        let mut post_w = pre_w.clone();
        post_w["hook_event_name"] = json!("PostToolUse");
        post_w["tool_response"] = json!({"filePath": wpath, "success": true});
        let mut pre_b = base("PreToolUse");
        pre_b["tool_name"] = json!("Bash");
        pre_b["tool_input"] = json!({
            "command": format!("printf '/* run {i} */\\n' >> {brel}"),
            "description": "Append a line",
            "timeout": 120000
        });
        pre_b["tool_use_id"] = json!(format!("toolu_b{i}"));
        let mut post_b = pre_b.clone();
        post_b["hook_event_name"] = json!("PostToolUse");
        post_b["tool_response"] =
            json!({"stdout": "", "stderr": "", "interrupted": false, "isImage": false});

        let events: [&Value; 5] = [&prompt, &pre_w, &post_w, &pre_b, &post_b];
        for (k, ev) in events.iter().enumerate() {
            let bytes = serde_json::to_vec(ev)?;
            let t = spawn(bin, &["hook", "claude-code"], &root, &bytes, true)?;
            let p = spawn(truebin, &[], &root, &bytes, false)?;
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
    let turns = store.turns();
    if turns.len() != base_turns + cfg.runs {
        return Err(format!(
            "the hooks made {} turns, {} expected",
            turns.len() - base_turns.min(turns.len()),
            cfg.runs
        )
        .into());
    }
    for (i, t) in turns[base_turns..].iter().enumerate() {
        let want = &files[(2 * i) % files.len()].0;
        if !t.files.iter().any(|f| f.entry.path.as_str() == want) {
            return Err(format!("turn {i} did not capture {want}").into());
        }
    }
    Ok((times, work))
}

/// Spawns `turnback write --turn TURN REL` in `root` with `bytes` on stdin
/// and returns the elapsed time; it must exit 0 with nothing on stderr.
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
    for (root, base) in [(&large, cfg.turns), (&small, cfg.small_turns), (&peer, 1)] {
        let n = turnback::Store::open(root)?.turns().len();
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
    per_rep: &[Vec<Times>],
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
        "## Hooks: latency added per Claude Code tool call\n\n\
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
         paths ({} bytes), a fresh copy for every repetition.",
        thousands(n_files as u64),
        cfg.tree.display(),
        thousands(tree_bytes),
    );
    let _ = writeln!(
        s,
        "- **Repetitions:** {}, each of {} prompts (so {} runs of every event). A cell is the \
         median over the repetitions of each repetition's median, the range of those medians \
         in brackets; the added latency is the hook's median minus the peer's.\n",
        cfg.reps,
        cfg.runs,
        cfg.reps * cfg.runs,
    );
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
            if r.value <= 1.2 {
                "**met**"
            } else {
                "**missed**"
            },
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
         a new turn each.\n"
    );
    for (title, reps) in [
        (
            "a new project (the store starts empty)".to_string(),
            per_rep,
        ),
        (
            format!("a store already holding {big} turns"),
            per_rep_large,
        ),
    ] {
        if reps.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "### Hook latency, {title}\n\n\
             | Event | `turnback hook claude-code` | peer: `/bin/true`, spawned the same way | added latency | ratio of the medians | median of the per-repetition ratios |\n|---|---|---|---|---|---|"
        );
        for (k, name) in EVENTS.iter().enumerate() {
            let hook: Vec<f64> = reps.iter().map(|r| median(&r[k].hook)).collect();
            let peer: Vec<f64> = reps.iter().map(|r| median(&r[k].peer)).collect();
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
    if let (false, false) = (per_rep.is_empty(), per_rep_large.is_empty()) {
        let _ = writeln!(
            s,
            "The hooks in the {big}-turn store against the same in the new project (ratio of the medians):\n"
        );
        for (k, name) in EVENTS.iter().enumerate() {
            let a: Vec<f64> = per_rep_large.iter().map(|r| median(&r[k].hook)).collect();
            let b: Vec<f64> = per_rep.iter().map(|r| median(&r[k].hook)).collect();
            let r = Ratio::new(&a, &b);
            let _ = writeln!(
                s,
                "- {name}: {:.2}x (per repetition {:.2}x)",
                r.value, r.paired
            );
        }
    }
    let _ = writeln!(
        s,
        "\nHow it is measured: each prompt sends, as Claude Code does, `UserPromptSubmit` \
         (a new prompt id, so a new turn), `PreToolUse` `Write` of an existing file (the \
         hook captures it), then the write itself, `PostToolUse` `Write` (the hook records \
         its post-image), `PreToolUse` `Bash` (the hook snapshots the tree), then the \
         command's change to another file, `PostToolUse` `Bash` (second snapshot; the \
         changed file is captured). Every event is the JSON of Claude Code's hook schema \
         on stdin of the release binary spawned directly (no shell), the project as cwd; \
         the time runs from spawn to exit, and the hook must exit 0 with nothing on stdout \
         or stderr. Right after each hook call `/bin/true` is spawned with the same stdin \
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
    eprintln!("loading {} files of {} ...", cfg.files, cfg.tree.display());
    let files = load_tree(&cfg.tree, cfg.files)?;
    let tree_bytes = files.iter().map(|(_, b)| b.len() as u64).sum();
    eprintln!(
        "building stores of {} and {} turns in {} ...",
        cfg.turns,
        cfg.small_turns,
        cfg.build_dir.display()
    );
    let built_large = TempDir::with_prefix_in("turnback-bench-large-", &cfg.build_dir)?;
    let large = build_store(&files, cfg.turns, built_large.path())?;
    let built_small = TempDir::with_prefix_in("turnback-bench-small-", &cfg.build_dir)?;
    let small = build_store(&files, cfg.small_turns, built_small.path())?;
    let mut per_rep = Vec::new();
    let mut per_rep_large = Vec::new();
    let mut writes = Vec::new();
    let mut keep = Vec::new();
    for rep in 0..cfg.reps {
        eprintln!("repetition {}/{} ...", rep + 1, cfg.reps);
        let (w, dir) = write_repetition(&files, &cfg, &bin, rep, &large, &small)?;
        writes.push(w);
        keep.push(dir);
        if cfg.only_write {
            continue;
        }
        let (times, dir) = repetition(&files, &cfg, &bin, rep, None)?;
        per_rep.push(times);
        keep.push(dir);
        let (times, dir) = repetition(&files, &cfg, &bin, rep, Some((&large, cfg.turns)))?;
        per_rep_large.push(times);
        keep.push(dir);
    }
    let load_end = load_average();
    let body = render(
        &cfg,
        &m,
        &per_rep,
        &per_rep_large,
        &writes,
        files.len(),
        tree_bytes,
        &bin,
        &load_end,
        &commit,
    );
    println!("{body}");
    if !cfg.write || cfg.only_write {
        println!("(not written: --no-write or TURNBACK_BENCH_ONLY)");
    } else if cfg!(debug_assertions) {
        println!(
            "(not written to {}: a debug build; run `cargo bench`)",
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
