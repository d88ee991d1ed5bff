//! The daily-loop benchmark: `turnback log` of a store of 10,000 turns and
//! `turnback show --patch` / `--stat` of a turn of 1,000 files, each
//! against git's same command on a comparable repository (10,001 commits;
//! one commit changing the same 1,000 files the same way), measured in the
//! same run, alternated call by call. The figures are printed and written
//! to a marked section of `docs/BENCHMARKS.md` (other sections are left
//! alone). Target: each within 1.2x of git.
//!
//! ```text
//! cargo bench -p turnback-cli --bench daily [-- --reps N] [-- --no-write]
//! ```
//!
//! Both sides are the release binaries spawned with standard output a
//! pipe that the benchmark reads to its end (as a pager would), from spawn
//! to exit; no color (neither colors a pipe). Each is run once untimed
//! first (turnback's first open of a copied store writes its index
//! checkpoint; git's first run warms its caches alike).
//!
//! The log store: a project of 100 generated text files; turn i is one
//! `Store::write` of file i mod 100 with a line added and a label, built in
//! `/dev/shm` when it is a tmpfs (automatic gc off, every turn kept). The
//! git repository: the same 100 files committed, then one commit per turn
//! with the same change and the label as its message, made by `git
//! fast-import` and then `git gc` (packed, with its commit-graph: git as it
//! is after its own maintenance).
//!
//! The patch turn: a project of 1,000 generated text files of 60 lines;
//! one turn captures all of them (`capture_many`), then each file gets one
//! line changed and one added, and the turn is sealed (its post-images
//! recorded). The git repository: the files committed, then the same
//! change committed.
//!
//! Settings: `--reps N` / `TURNBACK_BENCH_REPS` (default 5),
//! `TURNBACK_BENCH_TURNS` (default 10,000), `TURNBACK_BENCH_PATCH_FILES`
//! (default 1,000), `TURNBACK_BENCH_TMP`, `TURNBACK_BENCH_OUT`,
//! `--no-write` / `TURNBACK_BENCH_NO_WRITE=1`. Needs `git` on the PATH.

use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use tempfile::TempDir;

#[path = "../../turnback/benches/common/mod.rs"]
mod common;
use common::*;

type Res<T> = Result<T, Box<dyn Error>>;

/// Name of this benchmark's section in the Markdown file.
const SECTION: &str = "daily";
/// Fewest repetitions whose figures are written to the docs.
const MIN_REPS: usize = 5;
/// Files of the log store's project.
const LOG_FILES: usize = 100;
/// Lines of each file of the patch turn.
const PATCH_LINES: usize = 60;
/// The target: turnback's median within this of git's.
const TARGET: f64 = 1.2;
/// The config of every store the benchmark prepares: automatic gc off,
/// every turn kept.
const NO_AUTO_GC: &str = "[retention]\nkeep_turns = 1000000000\nkeep_days = 1000000\nmax_size = \"1024P\"\n\n[gc]\nauto_every_captures = 0\n";

struct Config {
    reps: usize,
    turns: usize,
    patch_files: usize,
    tmp: PathBuf,
    build_dir: PathBuf,
    out: PathBuf,
    write: bool,
}

fn config() -> Res<Config> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = fs::canonicalize(&workspace).unwrap_or(workspace);
    let (reps, write) = reps_and_write(MIN_REPS)?;
    let tmp = std::env::var_os("TURNBACK_BENCH_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let build_dir = if fs_type(Path::new("/dev/shm")).is_ok_and(|(t, _)| t == "tmpfs") {
        PathBuf::from("/dev/shm")
    } else {
        tmp.clone()
    };
    Ok(Config {
        reps,
        turns: env_usize("TURNBACK_BENCH_TURNS", 10_000)?.max(1),
        patch_files: env_usize("TURNBACK_BENCH_PATCH_FILES", 1_000)?.max(1),
        tmp,
        build_dir,
        out: std::env::var_os("TURNBACK_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("docs/BENCHMARKS.md")),
        write,
    })
}

/// A generated text file: `lines` lines naming the file and the line.
fn text_file(name: &str, lines: usize) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..lines {
        let _ = writeln!(
            s,
            "{name}: line {i} of a generated file, some words to diff"
        );
    }
    s.into_bytes()
}

fn write_files(root: &Path, files: &[(String, Vec<u8>)]) -> Res<()> {
    for (rel, bytes) in files {
        let p = root.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&p, bytes).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Runs git in `dir`, failing on a non-zero exit.
fn git(dir: &Path, args: &[&str]) -> Res<()> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .map_err(|e| format!("cannot run git (is it installed?): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

/// A fast-import commit on `refs/heads/main` with `files` changed.
fn import_commit(
    stream: &mut Vec<u8>,
    mark: usize,
    message: &str,
    files: &[(&str, &[u8])],
) -> Res<()> {
    write!(
        stream,
        "commit refs/heads/main\nmark :{mark}\ncommitter Bench <bench@example.com> {} +0000\ndata {}\n{message}\n",
        1_700_000_000 + mark,
        message.len() + 1
    )?;
    if mark > 1 {
        writeln!(stream, "from :{}", mark - 1)?;
    }
    for (path, bytes) in files {
        write!(stream, "M 100644 inline {path}\ndata {}\n", bytes.len())?;
        stream.extend_from_slice(bytes);
        stream.push(b'\n');
    }
    stream.push(b'\n');
    Ok(())
}

/// Makes `dir` a git repository of the commits in `stream`, packed.
fn import(dir: &Path, stream: &[u8]) -> Res<()> {
    fs::create_dir_all(dir)?;
    git(dir, &["init", "-q", "-b", "main"])?;
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("git fast-import's stdin")?
        .write_all(stream)?;
    if !child.wait()?.success() {
        return Err("git fast-import failed".into());
    }
    git(dir, &["reset", "-q", "--hard", "main"])?;
    git(dir, &["gc", "-q"])?;
    Ok(())
}

/// The log store (a project whose store holds `turns` turns) and the
/// comparable git repository, built under `dir`.
fn build_log(turns: usize, dir: &Path) -> Res<(PathBuf, PathBuf)> {
    let root = dir.join("project");
    let mut files: Vec<(String, Vec<u8>)> = (0..LOG_FILES)
        .map(|i| {
            let name = format!("src/file{i:03}.txt");
            let bytes = text_file(&name, 20);
            (name, bytes)
        })
        .collect();
    write_files(&root, &files)?;
    let root = fs::canonicalize(&root)?;
    let mut stream = Vec::new();
    let all: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    import_commit(&mut stream, 1, "the project before the turns", &all)?;
    let mut store = turnback::Store::open(&root)?;
    for i in 0..turns {
        let j = i % LOG_FILES;
        files[j]
            .1
            .extend_from_slice(format!("a line added by turn {i}\n").as_bytes());
        let label = format!("turn {i}: one line added to {}", files[j].0);
        let turn = turnback::TurnId::new(format!("turn-{i:05}"))?;
        store.write(&turn, Some(&label), &files[j].0, &files[j].1)?;
        if i == 0 {
            fs::write(store.store_dir().join("config.toml"), NO_AUTO_GC)?;
        }
        import_commit(&mut stream, i + 2, &label, &[(&files[j].0, &files[j].1)])?;
    }
    if store.turns()?.len() != turns {
        return Err(format!(
            "the store holds {} turns, {turns} wanted",
            store.turns()?.len()
        )
        .into());
    }
    drop(store);
    let repo = dir.join("repo");
    import(&repo, &stream)?;
    Ok((root, repo))
}

/// The patch turn's project (its store holding the turn `patch`) and the
/// comparable git repository, built under `dir`.
fn build_patch(n: usize, dir: &Path) -> Res<(PathBuf, PathBuf)> {
    let root = dir.join("project");
    let before: Vec<(String, Vec<u8>)> = (0..n)
        .map(|i| {
            let name = format!("d{:02}/file{i:04}.txt", i / 100);
            let bytes = text_file(&name, PATCH_LINES);
            (name, bytes)
        })
        .collect();
    write_files(&root, &before)?;
    let root = fs::canonicalize(&root)?;
    let after: Vec<(String, Vec<u8>)> = before
        .iter()
        .map(|(name, bytes)| {
            let text = String::from_utf8_lossy(bytes).replacen(
                "line 30 of",
                "line 30, changed by the turn, of",
                1,
            );
            (
                name.clone(),
                format!("{text}a line added by the turn\n").into_bytes(),
            )
        })
        .collect();
    let mut store = turnback::Store::open(&root)?;
    let turn = turnback::TurnId::new("patch")?;
    let paths: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
    store.capture_many(&turn, Some("change every file"), &paths)?;
    fs::write(store.store_dir().join("config.toml"), NO_AUTO_GC)?;
    write_files(&root, &after)?;
    store.seal(&turn)?;
    drop(store);
    let mut stream = Vec::new();
    let b: Vec<(&str, &[u8])> = before
        .iter()
        .map(|(n, x)| (n.as_str(), x.as_slice()))
        .collect();
    let a: Vec<(&str, &[u8])> = after
        .iter()
        .map(|(n, x)| (n.as_str(), x.as_slice()))
        .collect();
    import_commit(&mut stream, 1, "the project before the turn", &b)?;
    import_commit(&mut stream, 2, "change every file", &a)?;
    let repo = dir.join("repo");
    import(&repo, &stream)?;
    Ok((root, repo))
}

/// Spawns `program args` in `dir` with standard output a pipe read to its
/// end; returns the elapsed time and the output's lines. Fails unless it
/// exits 0 with nothing on standard error.
fn run(program: &Path, args: &[&str], dir: &Path) -> Res<(f64, usize)> {
    let t0 = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("TURNBACK_NO_BACKGROUND", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .ok_or("the child's stdout")?
        .read_to_end(&mut out)?;
    let mut err = Vec::new();
    child
        .stderr
        .take()
        .ok_or("the child's stderr")?
        .read_to_end(&mut err)?;
    let status = child.wait()?;
    let elapsed = t0.elapsed().as_secs_f64();
    if !status.success() || !err.is_empty() {
        return Err(format!(
            "{} {} failed ({status}): {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&err)
        )
        .into());
    }
    Ok((elapsed, out.iter().filter(|&&b| b == b'\n').count()))
}

/// One compared pair: turnback's command and git's, with their times.
struct Row {
    what: String,
    tb_args: Vec<&'static str>,
    git_args: Vec<&'static str>,
    tb_dir: PathBuf,
    git_dir: PathBuf,
    tb: Vec<f64>,
    git: Vec<f64>,
    lines: (usize, usize),
}

impl Row {
    /// Runs both once untimed, then `reps` times each, alternating which
    /// goes first.
    fn measure(&mut self, bin: &Path, reps: usize) -> Res<()> {
        let gitbin = PathBuf::from("git");
        let (_, tl) = run(bin, &self.tb_args, &self.tb_dir)?;
        let (_, gl) = run(&gitbin, &self.git_args, &self.git_dir)?;
        self.lines = (tl, gl);
        for rep in 0..reps {
            let mut one = |tb: bool| -> Res<()> {
                if tb {
                    self.tb.push(run(bin, &self.tb_args, &self.tb_dir)?.0);
                } else {
                    self.git
                        .push(run(&gitbin, &self.git_args, &self.git_dir)?.0);
                }
                Ok(())
            };
            let first = rep % 2 == 0;
            one(first)?;
            one(!first)?;
        }
        Ok(())
    }

    fn render(&self) -> String {
        let ratio = median(&self.tb) / median(&self.git);
        let per: Vec<f64> = self.tb.iter().zip(&self.git).map(|(a, b)| a / b).collect();
        format!(
            "| {} | `turnback {}`: {} ({} lines) | `git {}`: {} ({} lines) | {ratio:.2}x | {:.2}x | ≤ {TARGET}x git's | {} |\n",
            self.what,
            self.tb_args.join(" "),
            time_cell(&self.tb),
            thousands(self.lines.0 as u64),
            self.git_args.join(" "),
            time_cell(&self.git),
            thousands(self.lines.1 as u64),
            median(&per),
            if ratio <= TARGET {
                "**met**"
            } else {
                "**not met**"
            },
        )
    }
}

#[allow(unsafe_code)] // the environment, set before any thread
fn main() -> Res<()> {
    // Stores in their projects, so the spawned commands find them there.
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
    eprintln!(
        "building a store of {} turns and a repository of {} commits in {} ...",
        cfg.turns,
        cfg.turns + 1,
        cfg.build_dir.display()
    );
    let t0 = Instant::now();
    let log_dir = TempDir::with_prefix_in("turnback-bench-log-", &cfg.build_dir)?;
    let (log_root, log_repo) = build_log(cfg.turns, log_dir.path())?;
    let built_log = t0.elapsed().as_secs_f64();
    eprintln!("building a turn of {} files ...", cfg.patch_files);
    let patch_dir = TempDir::with_prefix_in("turnback-bench-patch-", &cfg.build_dir)?;
    let (patch_root, patch_repo) = build_patch(cfg.patch_files, patch_dir.path())?;
    let turns = thousands(cfg.turns as u64);
    let files = thousands(cfg.patch_files as u64);
    let mut rows = vec![
        Row {
            what: format!("log of a store of {turns} turns, newest first, every turn"),
            tb_args: vec!["log", "--color=never"],
            git_args: vec!["log", "--oneline"],
            tb_dir: log_root.clone(),
            git_dir: log_repo.clone(),
            tb: Vec::new(),
            git: Vec::new(),
            lines: (0, 0),
        },
        Row {
            what: format!(
                "the patch of a turn of {files} files (one line changed and one added in each)"
            ),
            tb_args: vec!["show", "patch", "--patch", "--color=never"],
            git_args: vec!["show", "--patch", "HEAD"],
            tb_dir: patch_root.clone(),
            git_dir: patch_repo.clone(),
            tb: Vec::new(),
            git: Vec::new(),
            lines: (0, 0),
        },
        Row {
            what: format!("the stat of that turn of {files} files"),
            tb_args: vec!["show", "patch", "--stat", "--color=never"],
            git_args: vec!["show", "--stat", "HEAD"],
            tb_dir: patch_root,
            git_dir: patch_repo,
            tb: Vec::new(),
            git: Vec::new(),
            lines: (0, 0),
        },
    ];
    for row in &mut rows {
        eprintln!("{} ...", row.what);
        row.measure(&bin, cfg.reps)?;
    }
    let load_end = load_average();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "## Daily loop: log and show against git\n\nWritten by `cargo bench -p turnback-cli --bench daily` (source: `crates/turnback-cli/benches/daily.rs`) on {} at commit {commit}, {}, release build of `turnback`.\n",
        today(),
        rustc_version()
    );
    let _ = writeln!(
        body,
        "- **Machine:** {} ({} cores in /proc/cpuinfo, available parallelism {}), Linux {}, {:.1} GiB RAM. Stores and repositories built in `{}`. Load average {} at the start, {load_end} at the end.",
        m.cpu,
        m.cores,
        m.parallelism,
        m.kernel,
        m.mem_gib,
        cfg.build_dir.display(),
        m.load_start
    );
    let _ = writeln!(
        body,
        "- **Repetitions:** {} per row, turnback and git alternated (which goes first alternates), each after one untimed run. A cell is the median, the range in brackets; the target is judged on the ratio of the medians.\n",
        cfg.reps
    );
    body.push_str("| Row | turnback | git | ratio of the medians | median of the per-repetition ratios | target | result |\n|---|---|---|---|---|---|---|\n");
    for row in &rows {
        body.push_str(&row.render());
    }
    let _ = writeln!(
        body,
        "\nBuilding the {turns}-turn store (`Store::write` per turn) and its repository (`git fast-import`, then `git gc`) took {} (once per run).\n\nHow it is measured: each side is the release binary spawned with standard output a pipe the benchmark reads to its end, timed from spawn to exit; no color on either side. The log store: {LOG_FILES} generated text files, turn i one `Store::write` of file i mod {LOG_FILES} with a line added and a label; the repository holds the same files, then one commit per turn with the same change and the label as message. The patch turn: {files} generated files of {PATCH_LINES} lines, captured in one turn (`capture_many`), each then given one changed and one added line, the turn sealed; the repository holds one commit of the files and one of the same change.",
        ms(built_log)
    );
    println!("{body}");
    if !cfg.write {
        println!("(not written: --no-write)");
    } else if cfg!(debug_assertions) {
        println!(
            "(not written to {}: a debug build; run `cargo bench`)",
            cfg.out.display()
        );
    } else if cfg.reps < MIN_REPS {
        println!(
            "(not written to {}: {} repetitions, at least {MIN_REPS} needed)",
            cfg.out.display(),
            cfg.reps
        );
    } else {
        write_section(&cfg.out, SECTION, &body)?;
        println!("written to {}", cfg.out.display());
    }
    Ok(())
}
