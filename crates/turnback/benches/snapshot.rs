//! The snapshot benchmark: what covering shell commands costs, on real
//! source trees, against `git add -A && git stash create` (what shadow-git
//! checkpoint tools run before every turn) on the same tree in the same run.
//! Each figure is a median of several repetitions; the figures are printed
//! and written to a marked section of `docs/BENCHMARKS.md` (other sections
//! are left alone).
//!
//! ```text
//! cargo bench -p turnback --bench snapshot [-- --reps N]
//! ```
//!
//! Per tree, turnback's store lives in the tree (`.turnback/`) and git's
//! repository outside it (`--git-dir`, `--work-tree` = the same tree, with
//! `.turnback/` in its exclude file), so both read the very same files. A
//! `.turnbackignore` that re-includes the default exclusions is written into
//! the tree, so both cover every file. turnback is timed in-process
//! (`Store::open` + `Store::snapshot`, i.e. reading the log, the walk, the
//! reads and every fsync); git as the two processes it takes.
//!
//! Rows:
//! 1. first scan into an empty store (time, store size on disk) against
//!    `git init && git add -A && git commit` into a fresh repository (time,
//!    size of the repository);
//! 2. the pre-command scan of an unchanged tree;
//! 3. the after half once a command changed 4 files, with the turn's store
//!    growth;
//! 4. the after half once every file's mtime changed (a formatter that
//!    rewrote nothing);
//! 5. a scan with no stat cache (tree state deleted; git: index deleted).
//!
//! Settings: `--reps N` / `TURNBACK_BENCH_REPS` (default 5; heavy rows of
//! the large tree use at most 3), `TURNBACK_BENCH_SMALL_TREE` (default
//! `/usr/include`, its first `TURNBACK_BENCH_SMALL_FILES` = 4700 regular
//! files in byte order), `TURNBACK_BENCH_LARGE_TREE` (default the pyenv
//! Python 3.11 library folder, every regular file; `none` skips it),
//! `TURNBACK_BENCH_TMP` (default the system temp dir), `--no-write`.

use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use turnback::{DEFAULT_EXCLUDES, IGNORE_FILE, NoProgress, Store, TurnId};

#[path = "common/mod.rs"]
mod common;

type Res<T> = Result<T, Box<dyn Error>>;

const SECTION: &str = "snapshot";

struct Config {
    reps: usize,
    small: PathBuf,
    small_files: usize,
    large: Option<PathBuf>,
    tmp: PathBuf,
    write: bool,
}

fn config() -> Res<Config> {
    let env = |k: &str| std::env::var(k).ok();
    let mut reps: usize = env("TURNBACK_BENCH_REPS")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(5);
    let mut write = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().ok_or("--reps needs a number")?.parse()?,
            "--no-write" => write = false,
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let large = match env("TURNBACK_BENCH_LARGE_TREE").as_deref() {
        Some("none") => None,
        Some(p) => Some(PathBuf::from(p)),
        None => Some(PathBuf::from("/root/.pyenv/versions/3.11.7/lib/python3.11")),
    };
    Ok(Config {
        reps: reps.max(1),
        small: env("TURNBACK_BENCH_SMALL_TREE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include")),
        small_files: env("TURNBACK_BENCH_SMALL_FILES")
            .map(|v| v.parse())
            .transpose()?
            .unwrap_or(4700),
        large,
        tmp: env("TURNBACK_BENCH_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir),
        write: write && env("TURNBACK_BENCH_NO_WRITE").as_deref() != Some("1"),
    })
}

/// Regular files of `src` (relative paths, byte order), at most `limit`.
fn list_files(src: &Path, limit: usize) -> Res<Vec<PathBuf>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Res<()> {
        for e in fs::read_dir(dir)? {
            let e = e?;
            let ft = e.file_type()?;
            let p = e.path();
            if ft.is_dir() {
                walk(root, &p, out)?;
            } else if ft.is_file() {
                out.push(p.strip_prefix(root)?.to_path_buf());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(src, src, &mut out)?;
    out.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    out.truncate(limit);
    Ok(out)
}

fn copy_files(src: &Path, files: &[PathBuf], dst: &Path) -> Res<u64> {
    let mut bytes = 0;
    for f in files {
        let to = dst.join(f);
        if let Some(p) = to.parent() {
            fs::create_dir_all(p)?;
        }
        bytes += fs::copy(src.join(f), &to)?;
    }
    let mut ignore = String::from("# cover everything, as git does in this benchmark\n");
    for d in DEFAULT_EXCLUDES {
        let _ = writeln!(ignore, "!{d}");
    }
    fs::write(dst.join(IGNORE_FILE), ignore)?;
    Ok(bytes)
}

/// Disk usage (allocated blocks) of everything under `p`, like `du`.
fn du(p: &Path) -> Res<u64> {
    let m = match fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let mut total = common::disk_bytes(&m);
    if m.is_dir() {
        for e in fs::read_dir(p)? {
            total += du(&e?.path())?;
        }
    }
    Ok(total)
}

/// Lists and lstats every path under `dir` (the cost no scan can avoid).
fn lstat_all(dir: &Path) -> Res<usize> {
    let mut n = 0;
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        let m = fs::symlink_metadata(&p)?;
        n += 1;
        if m.is_dir() && !p.ends_with(".turnback") {
            n += lstat_all(&p)?;
        }
    }
    Ok(n)
}

/// The same pass on every core, with the system calls a scan makes: each
/// directory opened from its parent's descriptor, listed, and each entry
/// `fstatat`ed relative to it; nothing stored, compared or allocated per
/// entry beyond the listing. What no stat-based scan can go below here.
#[cfg(unix)]
fn fstatat_all_parallel(root: &Path) -> Res<usize> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use std::sync::atomic::{AtomicUsize, Ordering};
    fn walk<'s>(dir: std::os::fd::OwnedFd, n: &'s AtomicUsize, s: &rayon::Scope<'s>) {
        let Ok(mut listing) = rustix::fs::Dir::new(dir) else {
            return;
        };
        let mut names = Vec::new();
        while let Some(Ok(e)) = listing.read() {
            names.push(e.file_name().to_owned());
        }
        let Ok(dir) = listing.fd() else { return };
        for name in names {
            let b = name.to_bytes();
            if b == b"." || b == b".." || b == b".turnback" {
                continue;
            }
            let Ok(st) = rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            n.fetch_add(1, Ordering::Relaxed);
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                if let Ok(fd) = rustix::fs::openat(dir, &name, flags, Mode::empty()) {
                    s.spawn(move |s| walk(fd, n, s));
                }
            }
        }
    }
    let n = AtomicUsize::new(0);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(root, flags, Mode::empty())?;
    rayon::scope(|s| walk(fd, &n, s));
    Ok(n.into_inner())
}

/// The peer is measured with Unix's `*at` calls only.
#[cfg(not(unix))]
fn fstatat_all_parallel(_root: &Path) -> Res<usize> {
    Err("the fstatat peer is measured on Unix only".into())
}

struct Git {
    dir: PathBuf,
    tree: PathBuf,
}

impl Git {
    fn cmd(&self, args: &[&str]) -> Res<String> {
        let out = Command::new("git")
            .arg(format!("--git-dir={}", self.dir.display()))
            .arg(format!("--work-tree={}", self.tree.display()))
            .args(args)
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.com")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.com")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "git {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `git init` of a fresh repository that ignores the store, then
    /// `git add -A && git commit`; returns the time of all three.
    fn fresh_commit(&self) -> Res<Duration> {
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir)?;
        }
        let t = Instant::now();
        self.cmd(&["init", "-q"])?;
        fs::write(self.dir.join("info/exclude"), "/.turnback/\n")?;
        self.cmd(&["add", "-A"])?;
        self.cmd(&["commit", "-q", "-m", "bench"])?;
        Ok(t.elapsed())
    }

    /// `git add -A && git stash create`.
    fn stash_create(&self) -> Res<Duration> {
        let t = Instant::now();
        self.cmd(&["add", "-A"])?;
        self.cmd(&["stash", "create"])?;
        Ok(t.elapsed())
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn turn(s: String) -> TurnId {
    TurnId::new(s).expect("bench turn ids are valid")
}

/// Opens the store and takes one snapshot half; returns its time.
fn snap(tree: &Path, id: &str, after: bool) -> Res<(Duration, turnback::SnapshotReport)> {
    let t = Instant::now();
    let mut store = Store::open(tree)?;
    let r = store.snapshot(&turn(id.to_string()), None, after, &NoProgress)?;
    Ok((t.elapsed(), r))
}

/// Waits until the file-system clock has moved past everything just
/// written, so neither tool meets racily clean entries it would not meet
/// between two real agent turns.
fn settle() {
    std::thread::sleep(Duration::from_millis(1100));
}

/// Sets every file's mtime to `when` (bytes unchanged).
fn touch_all(tree: &Path, files: &[PathBuf], when: SystemTime) -> Res<()> {
    for f in files {
        fs::File::options()
            .write(true)
            .open(tree.join(f))?
            .set_modified(when)?;
    }
    Ok(())
}

struct Row {
    name: String,
    ours: String,
    git: String,
    ratio: String,
    target: &'static str,
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn size(b: u64) -> String {
    if b >= 10 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", b as f64 / 1024.0)
    }
}

fn ratio(git: Duration, ours: Duration) -> String {
    format!("{:.1}×", git.as_secs_f64() / ours.as_secs_f64())
}

struct TreeResult {
    title: String,
    files: usize,
    bytes: u64,
    covered: u64,
    git_files: usize,
    rows: Vec<Row>,
    checks: Vec<String>,
}

fn bench_tree(
    cfg: &Config,
    name: &str,
    src: &Path,
    limit: usize,
    heavy_reps: usize,
) -> Res<TreeResult> {
    let work = tempfile::Builder::new()
        .prefix(&format!("turnback-bench-{name}-"))
        .tempdir_in(&cfg.tmp)?;
    let tree = work.path().join("tree");
    eprintln!("[{name}] copying {} ...", src.display());
    let files = list_files(src, limit)?;
    let bytes = copy_files(src, &files, &tree)?;
    let git = Git {
        dir: work.path().join("git"),
        tree: tree.clone(),
    };
    let store_dir = tree.join(".turnback");
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let mut seq = 0usize;
    let mut next = |p: &str| {
        seq += 1;
        format!("{p}-{seq}")
    };

    // 1. First scan against a fresh git repository.
    let first_reps = heavy_reps;
    let (mut ours_t, mut ours_sz, mut git_t, mut git_sz) = (vec![], vec![], vec![], vec![]);
    let mut covered = 0;
    for rep in 0..first_reps {
        eprintln!("[{name}] first scan {}/{first_reps}", rep + 1);
        if store_dir.exists() {
            fs::remove_dir_all(&store_dir)?;
        }
        let (d, r) = snap(&tree, &next("first"), false)?;
        covered = r.scan.files;
        ours_t.push(d);
        ours_sz.push(du(&store_dir)?);
        git_t.push(git.fresh_commit()?);
        git_sz.push(du(&git.dir)?);
    }
    let git_files = git.cmd(&["ls-files"])?.lines().count();
    let (o, g) = (median(ours_t), median(git_t));
    rows.push(Row {
        name: "first scan (everything stored)".into(),
        ours: ms(o),
        git: format!("{} (init + add -A + commit)", ms(g)),
        ratio: ratio(g, o),
        target: "reported",
    });
    let (os, gs) = (median_u64(ours_sz), median_u64(git_sz));
    rows.push(Row {
        name: "first scan: store size on disk (du)".into(),
        ours: size(os),
        git: format!("{} (.git)", size(gs)),
        ratio: format!("{:.2}× larger for git", gs as f64 / os as f64),
        target: "reported",
    });
    // Leave the store as an agent would find it: after an after half.
    snap(&tree, &next("warm"), true)?;
    settle();

    // 2. Pre-command scan of an unchanged tree.
    let (mut ours_t, mut git_t, mut open_t, mut floor_t) = (vec![], vec![], vec![], vec![]);
    let mut floor_par_t = vec![];
    for _ in 0..cfg.reps {
        let t = Instant::now();
        drop(Store::open(&tree)?);
        open_t.push(t.elapsed());
        let t = Instant::now();
        let n = lstat_all(&tree)?;
        floor_t.push(t.elapsed());
        if n < files.len() {
            checks.push(format!("floor walk saw {n} paths"));
        }
        let t = Instant::now();
        let n = fstatat_all_parallel(&tree)?;
        floor_par_t.push(t.elapsed());
        if n < files.len() {
            checks.push(format!("parallel floor walk saw {n} paths"));
        }
        let (d, r) = snap(&tree, &next("before"), false)?;
        if r.scan.hashed_files != 0 {
            checks.push(format!(
                "unchanged tree: {} files were read (the stat cache should vouch for all)",
                r.scan.hashed_files
            ));
        }
        ours_t.push(d);
        git_t.push(git.stash_create()?);
        snap(&tree, &next("after"), true)?;
    }
    let (o, g) = (median(ours_t), median(git_t));
    rows.push(Row {
        name: "pre-command scan, unchanged tree".into(),
        ours: ms(o),
        git: ms(g),
        ratio: ratio(g, o),
        target: "≥ 3×",
    });
    rows.push(Row {
        name: "… of which `Store::open` (reading the log)".into(),
        ours: ms(median(open_t)),
        git: String::new(),
        ratio: String::new(),
        target: "reported",
    });

    rows.push(Row {
        name: "floor: `read_dir` + `lstat` of every path, one thread, nothing else".into(),
        ours: ms(median(floor_t)),
        git: String::new(),
        ratio: String::new(),
        target: "reported",
    });
    let fp = median(floor_par_t);
    rows.push(Row {
        name: "floor: `openat` + `getdents` + `fstatat` of every path on every core, nothing else"
            .into(),
        ours: ms(fp),
        git: ms(g),
        ratio: ratio(g, fp),
        target: "the most any stat scan can reach",
    });

    // 3. After a command changed 4 files.
    let picks: Vec<&PathBuf> = (0..4)
        .map(|k| &files[(k * 2 + 1) * files.len() / 8])
        .collect();
    let (mut ours_t, mut git_t, mut ours_g, mut git_g) = (vec![], vec![], vec![], vec![]);
    for rep in 0..cfg.reps {
        settle();
        let id = next("four");
        let store0 = du(&store_dir)?;
        snap(&tree, &id, false)?;
        for p in &picks {
            let path = tree.join(p);
            let mut data = fs::read(&path)?;
            data.extend_from_slice(format!("/* edited by a command, run {rep} */\n").as_bytes());
            fs::write(&path, data)?;
        }
        let (d, r) = snap(&tree, &id, true)?;
        let n = r.recorded.as_ref().map_or(0, |x| x.captured.len());
        if n != 4 {
            checks.push(format!("4-file command: {n} paths recorded, 4 expected"));
        }
        ours_t.push(d);
        ours_g.push(du(&store_dir)?.saturating_sub(store0));
        let git0 = du(&git.dir)?;
        git_t.push(git.stash_create()?);
        git_g.push(du(&git.dir)?.saturating_sub(git0));
    }
    let (o, g) = (median(ours_t), median(git_t));
    rows.push(Row {
        name: "after half, a command changed 4 files".into(),
        ours: ms(o),
        git: ms(g),
        ratio: ratio(g, o),
        target: "≥ 3×",
    });
    rows.push(Row {
        name: "store growth of that turn (du)".into(),
        ours: size(median_u64(ours_g)),
        git: size(median_u64(git_g)),
        ratio: String::new(),
        target: "reported",
    });

    // 4. After every file's mtime changed.
    let (mut ours_t, mut git_t) = (vec![], vec![]);
    for rep in 0..heavy_reps {
        eprintln!("[{name}] mtime row {}/{heavy_reps}", rep + 1);
        let id = next("fmt");
        snap(&tree, &id, false)?;
        touch_all(
            &tree,
            &files,
            SystemTime::now() - Duration::from_secs(3600 + rep as u64),
        )?;
        settle();
        let (d, r) = snap(&tree, &id, true)?;
        if r.scan.hashed_files < files.len() as u64 {
            checks.push(format!(
                "mtime row: {} files read, {} touched",
                r.scan.hashed_files,
                files.len()
            ));
        }
        if r.recorded.as_ref().is_some_and(|x| !x.captured.is_empty()) {
            checks.push("mtime row: a touch was recorded as a change".into());
        }
        ours_t.push(d);
        git_t.push(git.stash_create()?);
    }
    let (o, g) = (median(ours_t), median(git_t));
    rows.push(Row {
        name: "after half, every file's mtime changed".into(),
        ours: ms(o),
        git: ms(g),
        ratio: ratio(g, o),
        target: "≥ 1×",
    });

    // 5. No stat cache.
    let (mut ours_t, mut git_t) = (vec![], vec![]);
    for rep in 0..heavy_reps {
        eprintln!("[{name}] no-cache row {}/{heavy_reps}", rep + 1);
        snap(&tree, &next("pre"), true)?;
        settle();
        fs::remove_file(store_dir.join(turnback::tree::TREE_FILE))?;
        let (d, r) = snap(&tree, &next("nocache"), false)?;
        if r.scan.new_blobs != 0 {
            checks.push(format!(
                "no-cache row: {} blobs stored again",
                r.scan.new_blobs
            ));
        }
        ours_t.push(d);
        fs::remove_file(git.dir.join("index"))?;
        git_t.push(git.stash_create()?);
    }
    let (o, g) = (median(ours_t), median(git_t));
    rows.push(Row {
        name: "scan with no stat cache (tree state / index deleted)".into(),
        ours: ms(o),
        git: ms(g),
        ratio: ratio(g, o),
        target: "reported",
    });

    let title = if limit == usize::MAX {
        format!("{} (every regular file)", src.display())
    } else {
        format!(
            "the first {} regular files of {} in byte order",
            files.len(),
            src.display()
        )
    };
    Ok(TreeResult {
        title,
        files: files.len(),
        bytes,
        covered,
        git_files,
        rows,
        checks,
    })
}

fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".into(), |s| s.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let git = Command::new("git")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!(
        "{cpu}, {cores} cores available, Linux {}, {git}",
        kernel.trim()
    )
}

fn fs_of(p: &Path) -> String {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let canon = fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_, mnt, ty) = (it.next()?, it.next()?, it.next()?);
            canon
                .starts_with(mnt)
                .then(|| (mnt.len(), format!("{ty} mounted at {mnt}")))
        })
        .max()
        .map_or("unknown".into(), |(_, s)| s)
}

fn render(cfg: &Config, results: &[TreeResult], load_start: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Snapshots: covering shell commands\n");
    let _ = writeln!(
        s,
        "Written by `cargo bench -p turnback --bench snapshot` (release build) on {} at commit {}, \
         {}; load average {load_start} at the start, {} at the end (the machine is shared). \
         Each time is the median of \
         {} repetitions ({} for the first scan, the mtime row and the no-cache row of the large \
         tree, which read every file); the ratio is git's time divided by turnback's, both measured in the same run on \
         the same tree.\n",
        common::today(),
        common::commit(),
        common::rustc_version(),
        common::load_average(),
        cfg.reps,
        cfg.reps.min(3)
    );
    let _ = writeln!(s, "- **Machine:** {}", machine());
    let _ = writeln!(
        s,
        "- **Where:** copies of the trees under {} ({}); file contents in the page cache. \
         turnback is timed in-process (`Store::open` + `Store::snapshot`: the log read, the \
         parallel walk, the reads, every fsync); git as the two processes `git add -A` and \
         `git stash create`, its repository outside the tree (`--git-dir`, `--work-tree`). \
         git does not fsync by default; turnback makes its pack, log record and tree state \
         durable before it returns. A `.turnbackignore` re-including the default exclusions \
         makes both cover every file.",
        cfg.tmp.display(),
        fs_of(&cfg.tmp)
    );
    let _ = writeln!(
        s,
        "- **Rows:** the pre-command scan is the before half after an after half, on an \
         unchanged tree; \"4 files\" is the after half once a command appended a line to 4 \
         files, and its store growth is the turn's (both halves); the mtime row is the after \
         half once every file's mtime changed with its bytes unchanged (a formatter that \
         rewrote nothing), so every file is read again; the no-cache row deletes the tree \
         state (git: its index), so every file is read and hashed, nothing stored again.\n"
    );
    for r in results {
        let _ = writeln!(
            s,
            "### {}: {} files, {:.1} MiB\n",
            r.title,
            r.files,
            r.bytes as f64 / (1 << 20) as f64
        );
        let _ = writeln!(
            s,
            "Covered by turnback: {} files; tracked by git: {} files (the extra one is `.turnbackignore`, which both count).\n",
            r.covered, r.git_files
        );
        let _ = writeln!(s, "| row | turnback | git | git ÷ turnback | target |");
        let _ = writeln!(s, "|---|---:|---:|---:|---|");
        for row in &r.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                row.name, row.ours, row.git, row.ratio, row.target
            );
        }
        if r.checks.is_empty() {
            let _ = writeln!(
                s,
                "\nChecks: every run recorded what it should (4 paths for the 4-file command, none for the touch, no blob stored twice).\n"
            );
        } else {
            let _ = writeln!(s, "\nChecks that failed:\n");
            for c in &r.checks {
                let _ = writeln!(s, "- {c}");
            }
            let _ = writeln!(s);
        }
    }
    s
}

fn write_section(path: &Path, body: &str) -> Res<()> {
    let begin = format!("<!-- BEGIN benchmark:{SECTION} (generated; do not edit by hand) -->");
    let end = format!("<!-- END benchmark:{SECTION} -->");
    let section = format!("{begin}\n{body}{end}\n");
    let old = match fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "# Benchmarks\n\nEach section below is written by the benchmark it names; run that benchmark again to update it rather than editing it by hand.\n\n".to_string(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display()).into()),
    };
    let begin_key = format!("<!-- BEGIN benchmark:{SECTION} ");
    let new = match (old.find(&begin_key), old.find(&end)) {
        (Some(b), Some(e)) if e > b => {
            let rest = &old[e + end.len()..];
            format!(
                "{}{section}{}",
                &old[..b],
                rest.strip_prefix('\n').unwrap_or(rest)
            )
        }
        (None, None) => {
            let sep = if old.ends_with("\n\n") || old.is_empty() {
                ""
            } else if old.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            format!("{old}{sep}{section}")
        }
        _ => {
            return Err(format!(
                "{}: the markers of the {SECTION:?} section are damaged; fix them by hand",
                path.display()
            )
            .into());
        }
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(path, new)?;
    Ok(())
}

#[allow(unsafe_code)] // the environment, set before any thread
fn main() -> Res<()> {
    // The figures are of the store's own files and their write order, kept
    // in the measured tree as before (the default data-directory store
    // differs only by the small marker and registry reads at open).
    // SAFETY: set before any thread is started.
    unsafe { std::env::set_var(turnback::location::STORE_ENV, "project") };
    let cfg = config()?;
    let load_start = common::load_average();
    let mut results = vec![bench_tree(
        &cfg,
        "small",
        &cfg.small,
        cfg.small_files,
        cfg.reps,
    )?];
    if let Some(large) = &cfg.large {
        results.push(bench_tree(
            &cfg,
            "large",
            large,
            usize::MAX,
            cfg.reps.min(3),
        )?);
    }
    let body = render(&cfg, &results, &load_start);
    println!("{body}");
    if cfg.write {
        let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/BENCHMARKS.md");
        write_section(&out, &body)?;
        eprintln!("wrote the {SECTION:?} section of {}", out.display());
    }
    Ok(())
}
