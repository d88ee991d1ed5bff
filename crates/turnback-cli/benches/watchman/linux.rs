//! The benchmark itself (Linux: Watchman's unix socket, /proc).

use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

type Res<T> = Result<T, Box<dyn Error>>;

const SECTION: &str = "watchman";
const HOOK_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/claude-code");
const GIT_HOOK: &str = "/usr/share/git-core/templates/hooks/fsmonitor-watchman.sample";

struct Server {
    dir: PathBuf,
    child: Child,
}

impl Server {
    fn start(dir: &Path) -> Res<Server> {
        fs::create_dir_all(dir)?;
        let _ = fs::remove_file(dir.join("sock"));
        let _ = fs::remove_file(dir.join("state"));
        let arg = |k: &str, n: &str| format!("--{k}={}", dir.join(n).display());
        let child = Command::new("watchman")
            .args([
                "--foreground".to_owned(),
                arg("sockname", "sock"),
                arg("statefile", "state"),
                arg("logfile", "log"),
                arg("pidfile", "pid"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("watchman: {e} (this benchmark needs it on PATH)"))?;
        let s = Server {
            dir: dir.to_path_buf(),
            child,
        };
        let start = Instant::now();
        while std::os::unix::net::UnixStream::connect(s.sock()).is_err() {
            if start.elapsed() > Duration::from_secs(30) {
                return Err("the benchmark's Watchman did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(s)
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("sock")
    }

    fn call(&self, req: &Value) -> Res<Value> {
        let stream = std::os::unix::net::UnixStream::connect(self.sock())?;
        let mut w = stream.try_clone()?;
        let mut line = serde_json::to_vec(req)?;
        line.push(b'\n');
        w.write_all(&line)?;
        let mut answer = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stream), &mut answer)?;
        Ok(serde_json::from_str(&answer)?)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `n` generated files under `root`, 100 per directory.
struct Tb<'a> {
    bin: &'a Path,
    root: PathBuf,
    data: PathBuf,
    env: Vec<(&'static str, String)>,
}

impl Tb<'_> {
    fn cmd(&self) -> Command {
        let mut c = Command::new(self.bin);
        c.env_clear()
            .env("TURNBACK_DATA_DIR", &self.data)
            .env("HOME", &self.data)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&self.root)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs `turnback --json ARGS`; returns its time and JSON.
    fn timed(&self, args: &[&str]) -> Res<(f64, Value)> {
        let start = Instant::now();
        let out = self.cmd().arg("--json").args(args).output()?;
        let t = start.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!(
                "turnback {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        self.maintain()?;
        Ok((t, serde_json::from_slice(&out.stdout)?))
    }

    /// Waits, untimed, for the `turnback maintain` that a timed command
    /// started in the background once it had answered (the index
    /// checkpoint of what it appended, say): it runs while the agent waits
    /// for its model, and here it ends before the next timed call, so
    /// that the two never share the CPU.
    fn maintain(&self) -> Res<()> {
        let root = self.root.as_os_str().as_encoded_bytes();
        let deadline = Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let mut running = false;
            for e in fs::read_dir("/proc")?.flatten() {
                let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
                    continue;
                };
                let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                if args.contains(&&b"maintain"[..]) && args.contains(&root) {
                    running = true;
                }
            }
            if !running {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "a `turnback maintain` of {} still runs after 120 s",
                    self.root.display()
                )
                .into());
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// A hook call with `event` on stdin; returns its time.
    fn hook(&self, event: &[u8]) -> Res<f64> {
        let start = Instant::now();
        let mut child = self
            .cmd()
            .args(["hook", "claude-code"])
            .stdin(Stdio::piped())
            .spawn()?;
        child.stdin.take().ok_or("no stdin")?.write_all(event)?;
        let out = child.wait_with_output()?;
        let t = start.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!("hook: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        self.maintain()?;
        Ok(t)
    }
}

fn source(v: &Value) -> String {
    match v["change_source"]["reason"].as_str() {
        None => v["change_source"]["source"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
        Some(r) => format!("scan: {r}"),
    }
}

fn recorded_count(v: &Value) -> usize {
    v["recorded"]["changes"]["modified"]
        .as_array()
        .map_or(0, Vec::len)
}

fn git(root: &Path, path_env: &str, args: &[&str]) -> Res<(f64, String)> {
    let start = Instant::now();
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .env("PATH", path_env)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()?;
    let t = start.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok((t, String::from_utf8(out.stdout)?))
}

fn event(name: &str, root: &Path) -> Res<Vec<u8>> {
    let text = fs::read_to_string(Path::new(HOOK_FIXTURES).join(name))?;
    let root_json = serde_json::to_string(&root.to_string_lossy())?;
    Ok(text
        .replace("{{ROOT}}", &root_json[1..root_json.len() - 1])
        .into_bytes())
}

/// Medians of one tree's rows.
struct TreeRows {
    files: usize,
    first_watchman: f64,
    first_source: String,
    crawl: f64,
    first_scan: f64,
    noop: (Vec<f64>, Vec<f64>, Vec<f64>),
    hundred: (Vec<f64>, Vec<f64>, Vec<f64>),
    pre: Vec<f64>,
    post: Vec<f64>,
    sources: Vec<String>,
}

/// Claude Code's PreToolUse and PostToolUse of a shell command, `runs`
/// times, after one UserPromptSubmit.
fn hook_times(tb: &Tb<'_>, runs: usize, pre: &mut Vec<f64>, post: &mut Vec<f64>) -> Res<()> {
    tb.hook(&event("user_prompt_submit.json", &tb.root)?)?;
    let pre_ev = event("pre_tool_use_bash.json", &tb.root)?;
    let post_ev = event("post_tool_use_bash.json", &tb.root)?;
    for _ in 0..runs {
        pre.push(tb.hook(&pre_ev)?);
        post.push(tb.hook(&post_ev)?);
    }
    Ok(())
}

fn run_tree(bin: &Path, base: &Path, files: usize, reps: usize, runs: usize) -> Res<TreeRows> {
    // Two copies of the tree: a project names its one store, so the scan's
    // store has its own copy; every change is made to both.
    let dir = base.join(format!("tree-{files}"));
    let root = dir.join("project");
    let scan_root = dir.join("copy");
    for r in [&root, &scan_root] {
        fs::create_dir_all(r)?;
        eprintln!("generating {files} files in {} ...", r.display());
        generate(r, files)?;
    }
    let root = root.canonicalize()?;
    let scan_root = scan_root.canonicalize()?;
    // git's index, before Watchman starts (untimed).
    let wrapper = dir.join("bin");
    fs::create_dir_all(&wrapper)?;
    let server_dir = dir.join("watchman");
    let sock = server_dir.join("sock");
    let wm = wrapper.join("watchman");
    // The real binary by its path: the wrapper is first on the hook's PATH.
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("watchman"))
        .find(|p| p.is_file())
        .ok_or("no watchman on PATH")?;
    fs::write(
        &wm,
        format!(
            "#!/bin/sh\nexec {} --sockname={} \"$@\"\n",
            real.display(),
            sock.display()
        ),
    )?;
    set_mode(&wm, 0o755)?;
    let git_path = format!(
        "{}:{}",
        wrapper.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    eprintln!("git add -A of {files} files ...");
    git(&root, &git_path, &["init", "-q"])?;
    fs::copy(GIT_HOOK, root.join(".git/hooks/query-watchman"))?;
    set_mode(&root.join(".git/hooks/query-watchman"), 0o755)?;
    fs::write(root.join(".git/info/exclude"), ".turnback/\n")?;
    git(&root, &git_path, &["add", "-A"])?;
    git(
        &root,
        &git_path,
        &[&GIT_AS_BENCH[..], &["commit", "-q", "-m", "generated"]].concat(),
    )?;
    git(&root, &git_path, &["config", "core.untrackedCache", "true"])?;

    let scan = Tb {
        bin,
        root: scan_root.clone(),
        data: dir.join("data-scan"),
        env: vec![("TURNBACK_FSMONITOR", "off".into())],
    };
    let with = Tb {
        bin,
        root: root.clone(),
        data: dir.join("data-watchman"),
        env: vec![
            ("TURNBACK_FSMONITOR", "watchman".into()),
            ("WATCHMAN_SOCK", sock.display().to_string()),
        ],
    };
    eprintln!("first snapshot of the scan's store ...");
    let (first_scan, _) = scan.timed(&["snapshot", "--turn", "first"])?;
    scan.timed(&["snapshot", "--turn", "first", "--after"])?;
    sync_fs(&root)?;
    eprintln!("starting Watchman, first snapshot with it ...");
    let server = Server::start(&server_dir)?;
    let (first_watchman, v) = with.timed(&["snapshot", "--turn", "first"])?;
    let first_source = source(&v);
    // The crawl alone: a fresh server, `watch-project`, then a synced clock.
    drop(server);
    let server = Server::start(&server_dir)?;
    let start = Instant::now();
    server.call(&serde_json::json!([
        "watch-project",
        root.to_string_lossy()
    ]))?;
    server
        .call(&serde_json::json!(["clock", root.to_string_lossy(), {"sync_timeout": 600_000}]))?;
    let crawl = start.elapsed().as_secs_f64();
    // The first snapshot after that restart is a fresh instance (a scan);
    // the timed ones come after it.
    with.timed(&["snapshot", "--turn", "first", "--after"])?;
    git(
        &root,
        &git_path,
        &["config", "core.fsmonitor", ".git/hooks/query-watchman"],
    )?;
    git(&root, &git_path, &["status", "--porcelain"])?;

    let mut rows = TreeRows {
        files,
        first_watchman,
        first_source,
        crawl,
        first_scan,
        noop: Default::default(),
        hundred: Default::default(),
        pre: Vec::new(),
        post: Vec::new(),
        sources: Vec::new(),
    };
    for rep in 0..reps {
        eprintln!("{files} files: repetition {}/{reps} ...", rep + 1);
        // A command that changes nothing.
        let turn = format!("noop{rep}");
        let (wb, vb) = with.timed(&["snapshot", "--turn", &turn])?;
        let (sb, _) = scan.timed(&["snapshot", "--turn", &turn])?;
        let (wa, va) = with.timed(&["snapshot", "--turn", &turn, "--after"])?;
        let (sa, _) = scan.timed(&["snapshot", "--turn", &turn, "--after"])?;
        let (g, out) = git(&root, &git_path, &["status", "--porcelain"])?;
        if !out.trim().is_empty() {
            return Err(format!("git status after a no-op: {out}").into());
        }
        rows.sources.push(source(&vb));
        rows.sources.push(source(&va));
        rows.noop.0.push(wb + wa);
        rows.noop.1.push(sb + sa);
        rows.noop.2.push(g);
        // A command that appends a line to 100 files.
        let turn = format!("hundred{rep}");
        let (wb, vb) = with.timed(&["snapshot", "--turn", &turn])?;
        let (sb, _) = scan.timed(&["snapshot", "--turn", &turn])?;
        for r in [&root, &scan_root] {
            for k in 0..100 {
                let p = r.join(file_of((k * files / 100 + rep) % files));
                let mut f = fs::OpenOptions::new().append(true).open(p)?;
                writeln!(f, "changed in repetition {rep}")?;
            }
        }
        let (wa, va) = with.timed(&["snapshot", "--turn", &turn, "--after"])?;
        let (sa, vs) = scan.timed(&["snapshot", "--turn", &turn, "--after"])?;
        for (who, v) in [("Watchman", &va), ("scan", &vs)] {
            if recorded_count(v) != 100 {
                return Err(format!("{who}: {} of 100 changes recorded", recorded_count(v)).into());
            }
        }
        let (g, out) = git(&root, &git_path, &["status", "--porcelain"])?;
        if out.lines().count() != 100 {
            return Err(format!("git status shows {} changes", out.lines().count()).into());
        }
        // Committed (untimed), so the next no-op finds a clean tree.
        git(
            &root,
            &git_path,
            &[&GIT_AS_BENCH[..], &["commit", "-qam", "rep"]].concat(),
        )?;
        rows.sources.push(source(&vb));
        rows.sources.push(source(&va));
        rows.hundred.0.push(wb + wa);
        rows.hundred.1.push(sb + sa);
        rows.hundred.2.push(g);
        hook_times(&with, runs, &mut rows.pre, &mut rows.post)?;
    }
    drop(server);
    Ok(rows)
}

fn ratio(a: &[f64], b: &[f64]) -> String {
    format!("{:.3}x", median(a) / median(b))
}

pub fn main() -> Res<()> {
    let (reps, write) = reps_and_write(5)?;
    let files = env_sizes("TURNBACK_BENCH_WATCHMAN_FILES", "100000,1000000")?;
    let runs = env_usize("TURNBACK_BENCH_HOOK_RUNS", 10)?;
    let tmp = bench_tmp();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_turnback"));
    let m = machine(&tmp)?;
    let base = tempfile::Builder::new()
        .prefix("turnback-bench-watchman-")
        .tempdir_in(&tmp)?;

    // The small project of the hook rows: 500 generated files.
    let small_dir = base.path().join("small");
    let small_root = small_dir.join("project");
    fs::create_dir_all(&small_root)?;
    generate(&small_root, 500)?;
    let small_server = Server::start(&small_dir.join("watchman"))?;
    let small = Tb {
        bin: &bin,
        root: small_root.canonicalize()?,
        data: small_dir.join("data"),
        env: vec![
            ("TURNBACK_FSMONITOR", "watchman".into()),
            ("WATCHMAN_SOCK", small_server.sock().display().to_string()),
        ],
    };
    small.timed(&["snapshot", "--turn", "first"])?;
    small.timed(&["snapshot", "--turn", "first", "--after"])?;

    let mut trees = Vec::new();
    let (mut small_pre, mut small_post) = (Vec::new(), Vec::new());
    for &n in &files {
        trees.push(run_tree(&bin, base.path(), n, reps, runs)?);
        // The small project's hooks in the same stretch of the run.
        for _ in 0..reps {
            hook_times(&small, runs, &mut small_pre, &mut small_post)?;
        }
    }
    drop(small_server);

    let mut body = String::new();
    writeln!(
        body,
        "## Watchman: the snapshots of a shell command, with and without it\n\n\
         Written by `cargo bench -p turnback-cli --bench watchman` on {} at commit {}, {}, release build; \
         load average {} at the start, {} at the end (the machine is shared). Watchman {} (Debian's package), \
         its own server for the run; git {} with its `fsmonitor-watchman` hook on the same server. \
         Medians of {reps} repetitions (hooks: {reps} × {runs} calls); every time is a process, spawn to exit.\n",
        today(),
        commit(),
        rustc_version(),
        m.load_start,
        load_average(),
        Command::new("watchman")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default(),
        git_version(),
    )?;
    writeln!(body, "{}", m.lines("; generated trees, 100 files per directory, one line each (a thousand distinct contents)"))?;
    for t in &trees {
        writeln!(body, "### {} files\n", thousands(t.files as u64))?;
        writeln!(
            body,
            "| row | with Watchman | scan | `git status` (fsmonitor) | Watchman ÷ scan | target |"
        )?;
        writeln!(body, "|---|---:|---:|---:|---:|---|")?;
        writeln!(
            body,
            "| first snapshot after Watchman starts (store empty) | {} ({}) | {} |  |  | reported |",
            ms(t.first_watchman),
            t.first_source,
            ms(t.first_scan)
        )?;
        writeln!(
            body,
            "| Watchman's crawl alone (a fresh server: `watch-project`, then a synced `clock`) | {} |  |  |  | reported |",
            ms(t.crawl)
        )?;
        writeln!(
            body,
            "| snapshot pair, a command that changes nothing | {} | {} | {} | {} | ≤ 0.05x |",
            time_cell(&t.noop.0),
            time_cell(&t.noop.1),
            time_cell(&t.noop.2),
            ratio(&t.noop.0, &t.noop.1)
        )?;
        writeln!(
            body,
            "| snapshot pair, a command that changes 100 files (all 100 recorded by both) | {} | {} | {} | {} | ≤ 0.1x |",
            time_cell(&t.hundred.0),
            time_cell(&t.hundred.1),
            time_cell(&t.hundred.2),
            ratio(&t.hundred.0, &t.hundred.1)
        )?;
        writeln!(
            body,
            "| Claude Code PreToolUse Bash hook (500-file project: {}) | {} |  |  | {} of the 500-file project's | ≤ 30 ms, ≤ 1.2x |",
            ms(median(&small_pre)),
            time_cell(&t.pre),
            ratio(&t.pre, &small_pre)
        )?;
        writeln!(
            body,
            "| Claude Code PostToolUse Bash hook (500-file project: {}) | {} |  |  | {} of the 500-file project's | ≤ 30 ms, ≤ 1.2x |",
            ms(median(&small_post)),
            time_cell(&t.post),
            ratio(&t.post, &small_post)
        )?;
        let used = t.sources.iter().filter(|s| *s == "watchman").count();
        writeln!(
            body,
            "\nChange source of the timed halves with Watchman: {used} of {} through Watchman{}.\n",
            t.sources.len(),
            t.sources
                .iter()
                .find(|s| *s != "watchman")
                .map(|s| format!(" (other: {s})"))
                .unwrap_or_default()
        )?;
    }
    print!("{body}");
    if write {
        let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/BENCHMARKS.md");
        write_section(&out, SECTION, &body)?;
    }
    Ok(())
}
