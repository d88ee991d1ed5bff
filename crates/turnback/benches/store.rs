//! The store benchmark: capture, rewind and store size on a real source
//! tree, each figure a median of several repetitions with its ratio against
//! a peer measured in the same run. The figures are printed and written to a
//! marked section of `docs/BENCHMARKS.md` (other sections are left alone).
//!
//! ```text
//! cargo bench -p turnback --bench store [-- --reps N]
//! ```
//!
//! Rows:
//! 1. full-tree turn: `capture_many` of every file in one call, then each
//!    file written with one line appended, against the same writes with no
//!    capture; the store's size on disk against git's object store after
//!    `git add -A && git commit` of the same tree; the rewind against the
//!    bare writes; then every file is checked against its original bytes.
//! 2. single captures, one `Store::capture` call each: 100 into an empty
//!    store against 100 into a store already holding 10,000 records.
//! 3. a small turn (4 edited files, 1 new): capture+write, store growth,
//!    rewind.
//! 4. to 6. rewinds through the release binary: system calls per restored
//!    file (`strace -c -f`), a rewind of 100,000 generated small files with
//!    its peak RSS against plain writes, and a one-file rewind against
//!    `git checkout HEAD -- FILE` (see `store_rows/rewind_cli.rs`).
//!
//! Settings (a flag wins over the environment):
//! - `--reps N` / `TURNBACK_BENCH_REPS`: repetitions (default 5; with fewer
//!   than 5 the figures are printed but not written to the docs);
//! - `TURNBACK_BENCH_TREE`: source tree (default `/usr/include`);
//! - `TURNBACK_BENCH_FILES`: how many of its regular files, the first in
//!   byte order of their relative paths (default 4686);
//! - `TURNBACK_BENCH_TMP`: where the tree copies and their stores go
//!   (default the system temp dir);
//! - `TURNBACK_BENCH_BUILD_DIR`: where the 10,000-record store is built
//!   before being copied next to the measured tree (default `/dev/shm` when
//!   it is a tmpfs, else the temp dir);
//! - `TURNBACK_BENCH_RECORDS`: records in the large store (default 10000);
//! - `TURNBACK_BENCH_MANY`: files in row 5 (default 100000);
//!   `TURNBACK_BENCH_MANY_REPS`: its repetitions (default: as the others);
//! - `TURNBACK_BENCH_ONLY=cli`: rows 4 to 6 only; `TURNBACK_BENCH_ONLY=library`:
//!   rows 1 to 3 only (either printed, never written);
//! - `TURNBACK_BENCH_OUT`: the Markdown file (default `docs/BENCHMARKS.md`
//!   of the workspace); `--no-write` / `TURNBACK_BENCH_NO_WRITE=1` only
//!   prints.

use std::collections::BTreeSet;
use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use turnback::{RewindOptions, Store, TurnId};

#[path = "common/mod.rs"]
mod common;
use common::*;

#[path = "store_rows/rewind_cli.rs"]
mod rewind_cli;

type Res<T> = Result<T, Box<dyn Error>>;

/// Name of this benchmark's section in the Markdown file.
const SECTION: &str = "store";
/// The line each write of the full-tree turn appends.
const FULL_LINE: &[u8] = b"// turnback benchmark: one line added by the full-tree turn\n";
/// The line each write of the small turn appends.
const SMALL_LINE: &[u8] = b"// turnback benchmark: one line added by the small turn\n";
/// The file the small turn creates (in the directory of its first edit).
const NEW_FILE: &str = "turnback-bench-new.h";
/// Single captures measured per store.
const SINGLES: usize = 100;
/// Single captures measured with a fresh `Store::open` each (as one CLI
/// process does).
const CLI_SINGLES: usize = 20;
/// Captures per turn in the single-capture rows and in the large store.
const PER_TURN: usize = 10;
/// Fewest repetitions whose figures are written to the docs.
const MIN_REPS: usize = 5;

struct Config {
    reps: usize,
    tree: PathBuf,
    files: usize,
    tmp: PathBuf,
    build_dir: PathBuf,
    records: usize,
    out: PathBuf,
    write: bool,
    many: usize,
    many_reps: usize,
    /// `TURNBACK_BENCH_ONLY=cli`: rows 4 to 6 alone.
    only_cli: bool,
    /// `TURNBACK_BENCH_ONLY=library`: rows 1 to 3 alone.
    only_library: bool,
}

fn config() -> Res<Config> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = fs::canonicalize(&workspace).unwrap_or(workspace);
    let (reps, write) = reps_and_write(MIN_REPS)?;
    let only = std::env::var("TURNBACK_BENCH_ONLY").ok();
    if let Some(o) = only.as_deref().filter(|o| !matches!(*o, "cli" | "library")) {
        return Err(format!(
            "TURNBACK_BENCH_ONLY={o:?}: the benchmark runs `cli` (rows 4 to 6) or `library` (rows 1 to 3) alone"
        )
        .into());
    }
    let tmp = std::env::var_os("TURNBACK_BENCH_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let build_dir = match std::env::var_os("TURNBACK_BENCH_BUILD_DIR") {
        Some(d) => PathBuf::from(d),
        None if fs_type(Path::new("/dev/shm")).is_ok_and(|(t, _)| t == "tmpfs") => {
            PathBuf::from("/dev/shm")
        }
        None => tmp.clone(),
    };
    Ok(Config {
        reps,
        tree: std::env::var_os("TURNBACK_BENCH_TREE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include")),
        files: env_usize("TURNBACK_BENCH_FILES", 4686)?,
        tmp,
        build_dir,
        records: env_usize("TURNBACK_BENCH_RECORDS", 10_000)?,
        out: std::env::var_os("TURNBACK_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("docs/BENCHMARKS.md")),
        write,
        many: env_usize("TURNBACK_BENCH_MANY", 100_000)?,
        many_reps: env_usize("TURNBACK_BENCH_MANY_REPS", reps)?,
        only_cli: only.as_deref() == Some("cli"),
        only_library: only.as_deref() == Some("library"),
    })
}

// ---------------------------------------------------------------- the tree

struct TreeFile {
    rel: String,
    bytes: Vec<u8>,
    mode: u32,
}

struct Tree {
    source: PathBuf,
    /// Regular files in the source, before taking the first `files`.
    available: usize,
    files: Vec<TreeFile>,
    dirs: usize,
}

impl Tree {
    fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes.len() as u64).sum()
    }
}

/// The first `limit` regular files of `source` in byte order of their
/// relative paths (symlinks and special files skipped), read into memory.
fn load_tree(source: &Path, limit: usize) -> Res<Tree> {
    let mut rels = regular_files(source)?;
    let available = rels.len();
    if available < limit {
        return Err(format!(
            "{} holds only {available} regular files, {limit} wanted; set TURNBACK_BENCH_FILES or TURNBACK_BENCH_TREE",
            source.display()
        )
        .into());
    }
    rels.truncate(limit);
    let mut files = Vec::with_capacity(limit);
    let mut dirs = BTreeSet::new();
    for rel in rels {
        let path = source.join(&rel);
        let bytes = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let meta =
            fs::metadata(&path).map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
        let mut p = Path::new(&rel).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(d.to_path_buf());
            p = d.parent();
        }
        files.push(TreeFile {
            rel,
            bytes,
            mode: mode_of(&meta),
        });
    }
    Ok(Tree {
        source: source.to_path_buf(),
        available,
        files,
        dirs: dirs.len(),
    })
}

/// Writes a fresh copy of the tree under `dst`.
fn copy_tree(tree: &Tree, dst: &Path) -> Res<()> {
    for f in &tree.files {
        let p = dst.join(&f.rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        fs::write(&p, &f.bytes).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        set_mode(&p, f.mode).map_err(|e| format!("cannot chmod {}: {e}", p.display()))?;
    }
    Ok(())
}

fn with_line(bytes: &[u8], line: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(bytes.len() + line.len() + 1);
    v.extend_from_slice(bytes);
    if !v.is_empty() && !v.ends_with(b"\n") {
        v.push(b'\n');
    }
    v.extend_from_slice(line);
    v
}

/// The write both sides of a comparison make: a plain `fs::write`, as an
/// editor or formatter does.
fn write_files(root: &Path, writes: &[(&str, &[u8])]) -> Res<()> {
    for (rel, bytes) in writes {
        let p = root.join(rel);
        fs::write(&p, bytes).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Checks that every file in `expect` holds exactly its bytes, that no path
/// in `absent` exists, and (with `exhaustive`) that nothing else is in the
/// tree outside `.turnback/` (no leftover temporary file).
fn verify(root: &Path, expect: &[(&str, &[u8])], absent: &[&str], exhaustive: bool) -> Res<()> {
    let mut wrong = Vec::new();
    for (rel, bytes) in expect {
        let p = root.join(rel);
        match fs::read(&p) {
            Ok(got) if got == *bytes => {}
            Ok(got) => wrong.push(format!(
                "{rel}: {} bytes, {} expected, contents differ",
                got.len(),
                bytes.len()
            )),
            Err(e) => wrong.push(format!("{rel}: cannot read: {e}")),
        }
    }
    for rel in absent {
        if fs::symlink_metadata(root.join(rel)).is_ok() {
            wrong.push(format!(
                "{rel}: exists, but the rewind should have deleted it"
            ));
        }
    }
    if exhaustive {
        let found = regular_files(root)?;
        let wanted: BTreeSet<&str> = expect.iter().map(|(r, _)| *r).collect();
        for rel in found {
            if !rel.starts_with(".turnback/") && !wanted.contains(rel.as_str()) {
                wrong.push(format!("{rel}: not in the tree before the turn"));
            }
        }
    }
    if wrong.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = wrong.iter().take(20).map(String::as_str).collect();
    Err(format!(
        "VERIFICATION FAILED under {}: {} path(s) differ from the state before the turn:\n  {}",
        root.display(),
        wrong.len(),
        shown.join("\n  ")
    )
    .into())
}

// ------------------------------------------------------------ measurement

fn du_kib(path: &Path) -> Res<u64> {
    let out = Command::new("du")
        .arg("-sk")
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run du: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "du -sk {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let kib = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("du -sk {}: unexpected output {text:?}", path.display()))?;
    Ok(kib)
}

/// Sum of file lengths under `path` (what the store holds, without the
/// file system's block rounding).
fn apparent_bytes(path: &Path) -> Res<u64> {
    let rels = regular_files(path)?;
    let mut total = 0;
    for rel in rels {
        total += fs::symlink_metadata(path.join(&rel))?.len();
    }
    Ok(total)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn timed<T>(f: impl FnOnce() -> Res<T>) -> Res<(T, f64)> {
    let t0 = Instant::now();
    let v = f()?;
    Ok((v, secs(t0.elapsed())))
}

/// Every figure, one value per repetition.
#[derive(Default)]
struct Figures {
    full_bare: Vec<f64>,
    full_cw: Vec<f64>,
    full_rewind: Vec<f64>,
    full_trash: Vec<f64>,
    full_trash_names: usize,
    store_kib: Vec<f64>,
    store_bytes: Vec<f64>,
    small_bare: Vec<f64>,
    small_cw: Vec<f64>,
    small_rewind: Vec<f64>,
    small_growth_kib: Vec<f64>,
    small_growth_bytes: Vec<f64>,
    single_empty: Vec<f64>,
    single_large: Vec<f64>,
    single_empty_p90: Vec<f64>,
    single_large_p90: Vec<f64>,
    cli_empty: Vec<f64>,
    cli_large: Vec<f64>,
    open_large: Vec<f64>,
}

/// Row 1 and row 3, one repetition.
fn full_and_small(tree: &Tree, cfg: &Config, rep: usize, fig: &mut Figures) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-", &cfg.tmp)?;
    let subject = work.path().join("subject");
    let peer = work.path().join("peer");
    copy_tree(tree, &subject)?;
    copy_tree(tree, &peer)?;

    let edited: Vec<Vec<u8>> = tree
        .files
        .iter()
        .map(|f| with_line(&f.bytes, FULL_LINE))
        .collect();
    let full_writes: Vec<(&str, &[u8])> = tree
        .files
        .iter()
        .zip(&edited)
        .map(|(f, e)| (f.rel.as_str(), e.as_slice()))
        .collect();
    let rels: Vec<&str> = tree.files.iter().map(|f| f.rel.as_str()).collect();
    let full_turn = TurnId::new(format!("full-{rep}"))?;

    let run_peer = |fig: &mut Figures| -> Res<()> {
        sync_fs(work.path())?;
        let ((), t) = timed(|| write_files(&peer, &full_writes))?;
        fig.full_bare.push(t);
        Ok(())
    };
    let run_subject = |fig: &mut Figures| -> Res<Store> {
        sync_fs(work.path())?;
        let (store, t) = timed(|| {
            let mut store = Store::open(&subject)?;
            let report = store.capture_many(&full_turn, Some("full-tree turn"), &rels)?;
            if report.captured.len() != rels.len() {
                return Err(format!(
                    "capture_many recorded {} of {} paths",
                    report.captured.len(),
                    rels.len()
                )
                .into());
            }
            write_files(&subject, &full_writes)?;
            Ok(store)
        })?;
        fig.full_cw.push(t);
        Ok(store)
    };
    // Alternate which side goes first, so neither always meets a warmer or
    // busier machine.
    let mut store = if rep.is_multiple_of(2) {
        run_peer(fig)?;
        run_subject(fig)?
    } else {
        let s = run_subject(fig)?;
        run_peer(fig)?;
        s
    };
    let store_dir = subject.join(".turnback");
    fig.store_kib.push(du_kib(&store_dir)? as f64);
    fig.store_bytes.push(apparent_bytes(&store_dir)? as f64);

    // Row 3: a small turn on top of the full-tree one: 4 edited files spread
    // over the tree and 1 new file.
    let n = tree.files.len();
    let picks: Vec<usize> = (0..4).map(|k| (2 * k + 1) * n / 8).collect();
    let new_rel = match Path::new(&tree.files[picks[0]].rel).parent() {
        Some(d) if !d.as_os_str().is_empty() => format!("{}/{NEW_FILE}", d.display()),
        _ => NEW_FILE.to_string(),
    };
    let small_bytes: Vec<Vec<u8>> = picks
        .iter()
        .map(|&i| with_line(&edited[i], SMALL_LINE))
        .collect();
    let new_bytes = b"/* created by the turnback benchmark's small turn */\n".to_vec();
    let mut small_writes: Vec<(&str, &[u8])> = picks
        .iter()
        .zip(&small_bytes)
        .map(|(&i, b)| (tree.files[i].rel.as_str(), b.as_slice()))
        .collect();
    small_writes.push((new_rel.as_str(), new_bytes.as_slice()));
    let small_rels: Vec<&str> = small_writes.iter().map(|(r, _)| *r).collect();
    let small_turn = TurnId::new(format!("small-{rep}"))?;

    sync_fs(work.path())?;
    let ((), t) = timed(|| write_files(&peer, &small_writes))?;
    fig.small_bare.push(t);

    let before_kib = du_kib(&store_dir)?;
    let before_bytes = apparent_bytes(&store_dir)?;
    sync_fs(work.path())?;
    let ((), t) = timed(|| {
        let report = store.capture_many(&small_turn, Some("small turn"), &small_rels)?;
        if report.captured.len() != small_rels.len() {
            return Err(format!(
                "the small turn recorded {} of {} paths",
                report.captured.len(),
                small_rels.len()
            )
            .into());
        }
        write_files(&subject, &small_writes)
    })?;
    fig.small_cw.push(t);
    fig.small_growth_kib
        .push(du_kib(&store_dir)? as f64 - before_kib as f64);
    fig.small_growth_bytes
        .push(apparent_bytes(&store_dir)? as f64 - before_bytes as f64);

    sync_fs(work.path())?;
    let (report, t) = timed(|| Ok(store.rewind(&small_turn, &RewindOptions::default())?))?;
    fig.small_rewind.push(t);
    if !report.complete() || report.restored.len() != 4 || report.deleted.len() != 1 {
        return Err(format!(
            "small rewind: {} restored, {} deleted, failed: {:?}",
            report.restored.len(),
            report.deleted.len(),
            report.failed
        )
        .into());
    }
    let after_full: Vec<(&str, &[u8])> = picks.iter().map(|&i| full_writes[i]).collect();
    verify(&subject, &after_full, &[new_rel.as_str()], false)?;

    // The full-tree rewind, then every file against its original bytes,
    // with the store in its default place, the data directory (where the
    // rewind's trash is; the rows above measured the store's files in the
    // tree).
    drop(store);
    to_data_dir(&subject)?;
    let mut store = Store::open(&subject)?;
    sync_fs(work.path())?;
    let (report, t) = timed(|| Ok(store.rewind(&full_turn, &RewindOptions::default())?))?;
    fig.full_rewind.push(t);
    // The names the rewind left in the trash (Linux), removed as the
    // command line's background process would: timed apart, not hidden.
    let (emptied, t) = timed(|| Ok(store.empty_trash()))?;
    fig.full_trash.push(t);
    fig.full_trash_names = emptied;
    if !report.complete() || report.restored.len() != n {
        return Err(format!(
            "full rewind: {} of {n} restored, failed: {:?}",
            report.restored.len(),
            report.failed
        )
        .into());
    }
    let originals: Vec<(&str, &[u8])> = tree
        .files
        .iter()
        .map(|f| (f.rel.as_str(), f.bytes.as_slice()))
        .collect();
    verify(&subject, &originals, &[new_rel.as_str()], true)?;
    Ok(work)
}

/// A store holding `records` single-file capture records, built with
/// ordinary `Store::write` calls (capture, then write a new line) in turns of
/// `PER_TURN`, in `cfg.build_dir` (a tmpfs makes the fsyncs free; the store
/// is the same bytes either way). The tree first gets one line, naming the
/// file, added to every file, so every record stores a new blob and no
/// pristine file's blob is in the store: the measured captures of pristine
/// files store new blobs, as in the empty store.
fn build_large_store(tree: &Tree, cfg: &Config) -> Res<(TempDir, f64)> {
    let dir = TempDir::with_prefix_in("turnback-bench-large-", &cfg.build_dir)?;
    let root = dir.path().join("tree");
    copy_tree(tree, &root)?;
    let mut current: Vec<Vec<u8>> = tree
        .files
        .iter()
        .enumerate()
        .map(|(j, f)| {
            // The file's index makes every pre-image unique, even of files
            // the tree holds twice.
            let line = format!("// turnback benchmark: large store, file {j}\n");
            with_line(&f.bytes, line.as_bytes())
        })
        .collect();
    for (f, c) in tree.files.iter().zip(&current) {
        fs::write(root.join(&f.rel), c)?;
    }
    let t0 = Instant::now();
    let mut store = Store::open(&root)?;
    for i in 0..cfg.records {
        let j = i % tree.files.len();
        let next = with_line(&current[j], format!("// record {i}\n").as_bytes());
        let turn = TurnId::new(format!("build-{}", i / PER_TURN))?;
        let report = store.write(&turn, None, &tree.files[j].rel, &next)?;
        if report.captured.len() != 1 || report.new_blobs != 1 {
            return Err(format!(
                "building the large store: record {i} captured {} paths and {} blobs",
                report.captured.len(),
                report.new_blobs
            )
            .into());
        }
        current[j] = next;
    }
    let built = secs(t0.elapsed());
    let recorded: usize = store.turns()?.iter().map(|t| t.files.len()).sum();
    if recorded != cfg.records {
        return Err(format!(
            "the large store holds {recorded} captures, {} wanted",
            cfg.records
        )
        .into());
    }
    Ok((dir, built))
}

/// `count` captures, each its own `Store::capture` call, `PER_TURN` a turn.
/// Returns each call's time and the blobs they stored.
fn single_captures(
    root: &Path,
    rels: &[&str],
    prefix: &str,
    reopen: bool,
) -> Res<(Vec<f64>, usize)> {
    let mut store = Store::open(root)?;
    let mut times = Vec::with_capacity(rels.len());
    let mut blobs = 0;
    for (k, rel) in rels.iter().enumerate() {
        let turn = TurnId::new(format!("{prefix}-{}", k / PER_TURN))?;
        let t0 = Instant::now();
        if reopen {
            store = Store::open(root)?;
        }
        let report = store.capture(&turn, None, rel)?;
        times.push(secs(t0.elapsed()));
        if report.captured.len() != 1 {
            return Err(
                format!("capture of {rel} recorded {} paths", report.captured.len()).into(),
            );
        }
        blobs += report.new_blobs;
    }
    Ok((times, blobs))
}

fn p90(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() * 9).div_ceil(10))
        .saturating_sub(1)
        .min(v.len() - 1)]
}

/// Row 2, one repetition.
fn singles(tree: &Tree, cfg: &Config, large: &Path, rep: usize, fig: &mut Figures) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-single-", &cfg.tmp)?;
    let empty = work.path().join("empty");
    let full = work.path().join("large");
    copy_tree(tree, &empty)?;
    copy_tree(tree, &full)?;
    copy_dir(&large.join(".turnback"), &full.join(".turnback"))?;
    let n = tree.files.len();
    let picked: Vec<&str> = (0..SINGLES)
        .map(|k| tree.files[k * n / SINGLES].rel.as_str())
        .collect();
    let cli_picked: Vec<&str> = (0..CLI_SINGLES)
        .map(|k| tree.files[(2 * k + 1) * n / (2 * CLI_SINGLES)].rel.as_str())
        .collect();

    let (_, t) = timed(|| Ok(Store::open(&full)?))?;
    fig.open_large.push(t);

    let mut run = |root: &Path, large_side: bool| -> Res<usize> {
        sync_fs(work.path())?;
        let (times, blobs) = single_captures(root, &picked, "single", false)?;
        let (cli, _) = single_captures(root, &cli_picked, "cli", true)?;
        let (m, p) = (median(&times), p90(&times));
        if large_side {
            fig.single_large.push(m);
            fig.single_large_p90.push(p);
            fig.cli_large.push(median(&cli));
        } else {
            fig.single_empty.push(m);
            fig.single_empty_p90.push(p);
            fig.cli_empty.push(median(&cli));
        }
        Ok(blobs)
    };
    let (b_empty, b_large) = if rep.is_multiple_of(2) {
        let e = run(&empty, false)?;
        (e, run(&full, true)?)
    } else {
        let l = run(&full, true)?;
        (run(&empty, false)?, l)
    };
    if b_empty != b_large {
        return Err(format!(
            "the single captures stored {b_empty} blobs in the empty store but {b_large} in the large one: the comparison would not be like for like"
        )
        .into());
    }
    Ok(work)
}

fn git_objects(tree: &Tree, cfg: &Config) -> Res<(u64, f64, TempDir)> {
    let work = TempDir::with_prefix_in("turnback-bench-git-", &cfg.tmp)?;
    let root = work.path().join("tree");
    copy_tree(tree, &root)?;
    let git = |args: &[&str]| git_in(&root, work.path(), args);
    sync_fs(work.path())?;
    let ((), t) = timed(|| {
        git(&["init", "-q"])?;
        git(&["add", "-A"])?;
        git(&["commit", "-q", "-m", "tree"])
    })?;
    Ok((du_kib(&root.join(".git/objects"))?, t, work))
}

// ---------------------------------------------------------------- machine

fn kib_cell(xs: &[f64]) -> String {
    format!("{} KiB", thousands(median(xs).max(0.0) as u64))
}

struct Ratio {
    /// Median of the measured side over median of the peer: decides the
    /// target.
    value: f64,
    /// Median of the per-repetition ratios (each side measured back to
    /// back), less sensitive to a machine whose load drifts.
    paired: f64,
    limit: Option<f64>,
}

impl Ratio {
    fn new(subject: &[f64], peer: &[f64], limit: Option<f64>) -> Self {
        let per_rep: Vec<f64> = subject
            .iter()
            .enumerate()
            .map(|(i, s)| s / peer[i % peer.len()])
            .collect();
        Ratio {
            value: median(subject) / median(peer),
            paired: median(&per_rep),
            limit,
        }
    }
    fn met(&self) -> Option<bool> {
        self.limit.map(|l| self.value <= l)
    }
    fn cells(&self, target: &str) -> String {
        let met = match self.met() {
            Some(true) => "**met**",
            Some(false) => "**missed**",
            None => "(no target)",
        };
        format!(
            "{:.2}x | {:.2}x | {target} | {met}",
            self.value, self.paired
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn render(
    cfg: &Config,
    m: &Machine,
    tree: &Tree,
    fig: &Figures,
    git_kib: u64,
    git_secs: f64,
    large_built: f64,
    load_end: &str,
    commit: &str,
    cli_fig: &rewind_cli::CliFigures,
) -> (String, Vec<(String, bool)>) {
    let mut cli_results = Vec::new();
    let mut cli_rows = String::new();
    rewind_cli::render_rows(cli_fig, &mut cli_rows, &mut cli_results);
    let r_cw = Ratio::new(&fig.full_cw, &fig.full_bare, Some(1.5));
    let r_size = Ratio::new(&fig.store_kib, &[git_kib as f64], Some(1.0));
    let r_rw = Ratio::new(&fig.full_rewind, &fig.full_bare, Some(1.0));
    let r_single = Ratio::new(&fig.single_large, &fig.single_empty, Some(1.2));
    let r_small_cw = Ratio::new(&fig.small_cw, &fig.small_bare, None);
    let r_small_rw = Ratio::new(&fig.small_rewind, &fig.small_bare, None);
    let r_cli = Ratio::new(&fig.cli_large, &fig.cli_empty, None);
    let n = tree.files.len();
    let bytes = tree.bytes();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Store: capture, rewind and store size\n\n\
         Written by `cargo bench -p turnback --bench store` (source: \
         `crates/turnback/benches/store.rs`) on {} at commit {commit}, {}, {} build.\n",
        today(),
        rustc_version(),
        if cfg!(debug_assertions) {
            "debug (not representative)"
        } else {
            "release"
        }
    );
    let _ = writeln!(
        s,
        "- **Machine:** {} ({} cores in /proc/cpuinfo, available parallelism {}), \
         Linux {}, {:.1} GiB RAM. Temp dir `{}` on **{}** ({}); each store is made inside \
         its tree copy and, for the full-tree rewinds, moved to a data directory in the \
         same temp dir, so always on the same file system. The machine is shared with other \
         work: load average {} at the start, {load_end} at the end.",
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
        "- **Tree:** `{}`, the first {} of its {} regular files in byte order of their \
         relative paths (symlinks skipped, nothing generated): {} files, {} bytes \
         ({:.1} MiB), in {} directories. Copied afresh for every repetition.",
        tree.source.display(),
        thousands(n as u64),
        thousands(tree.available as u64),
        thousands(n as u64),
        thousands(bytes),
        bytes as f64 / (1024.0 * 1024.0),
        thousands(tree.dirs as u64),
    );
    let _ = writeln!(
        s,
        "- **Repetitions:** {} (`--reps N` or `TURNBACK_BENCH_REPS`). Each figure is the \
         median over them, the range in brackets; a target is judged on \
         the ratio of the medians of the measured side and of its peer from the same run; \
         the median of the per-repetition ratios (both sides measured back to back) is shown \
         beside it, as it is less sensitive to the load of a shared machine drifting.\n",
        cfg.reps
    );
    let _ = writeln!(
        s,
        "| Row | turnback | peer | ratio of the medians | median of the per-repetition ratios | target (on the ratio of the medians) | result |\n|---|---|---|---|---|---|---|"
    );
    let _ = writeln!(
        s,
        "| 1. full-tree turn: `capture_many` of all {} files in one call, then each file written with one line added | {} | the same writes, no capture: {} | {} |",
        thousands(n as u64),
        time_cell(&fig.full_cw),
        time_cell(&fig.full_bare),
        r_cw.cells("≤ 1.5x the bare writes"),
    );
    let _ = writeln!(
        s,
        "| 1. store size on disk after the full-tree turn (`du -sk .turnback`) | {} ({} bytes in files) | git's object store after `git init && git add -A && git commit` (`du -sk .git/objects`): {} KiB | {} |",
        kib_cell(&fig.store_kib),
        thousands(median(&fig.store_bytes) as u64),
        thousands(git_kib),
        r_size.cells("≤ 1.0x git's"),
    );
    let _ = writeln!(
        s,
        "| 1. rewind of the full tree (then all {} files checked byte for byte: all matched) | {} | the bare writes of the tree: {} | {} |",
        thousands(n as u64),
        time_cell(&fig.full_rewind),
        time_cell(&fig.full_bare),
        r_rw.cells("≤ 1.0x the bare writes"),
    );
    let _ = writeln!(
        s,
        "| 2. single capture, one `Store::capture` call each (median of {SINGLES} calls) into a store holding {} records | {} (p90 {}) | the same into an empty store: {} (p90 {}) | {} |",
        thousands(cfg.records as u64),
        time_cell(&fig.single_large),
        ms(median(&fig.single_large_p90)),
        time_cell(&fig.single_empty),
        ms(median(&fig.single_empty_p90)),
        r_single.cells("≤ 1.2x the empty store"),
    );
    let _ = writeln!(
        s,
        "| 3. small turn: `capture_many` of 4 edited files and 1 new file, then the 5 writes | {} | the same writes, no capture: {} | {} |",
        time_cell(&fig.small_cw),
        time_cell(&fig.small_bare),
        r_small_cw.cells("none"),
    );
    let _ = writeln!(
        s,
        "| 3. small turn: store growth | {} on disk, {} bytes in files | | | | | |",
        kib_cell(&fig.small_growth_kib),
        thousands(median(&fig.small_growth_bytes) as u64),
    );
    let _ = writeln!(
        s,
        "| 3. small turn: rewind (4 restored, 1 deleted, checked) | {} | the bare writes of the 5 files: {} | {} |",
        time_cell(&fig.small_rewind),
        time_cell(&fig.small_bare),
        r_small_rw.cells("none"),
    );
    s.push_str(&cli_rows);
    let _ = writeln!(s);
    let _ = writeln!(s, "Also measured (no target):\n");
    let _ = writeln!(
        s,
        "- `Store::open` + one capture per call, as one `turnback capture` process does (median of {CLI_SINGLES}): {} in the {}-record store, {} in the small one ({:.2}x). `Store::open` alone of the {}-record store: {}.",
        time_cell(&fig.cli_large),
        thousands(cfg.records as u64),
        time_cell(&fig.cli_empty),
        r_cli.value,
        thousands(cfg.records as u64),
        time_cell(&fig.open_large),
    );
    if !fig.full_trash.is_empty() {
        let _ = writeln!(
            s,
            "- Row 1's rewind left {} names of the files it replaced in the trash (see `trash.rs`; the command line removes them in a background process once it has answered): removing them afterwards took {}, not counted in the rewind.",
            thousands(fig.full_trash_names as u64),
            time_cell(&fig.full_trash),
        );
    }
    let _ = writeln!(
        s,
        "- git for comparison: `git init && git add -A && git commit` of the same tree took {} (once per run).",
        ms(git_secs)
    );
    let _ = writeln!(
        s,
        "- Building the {}-record store with ordinary `Store::write` calls in `{}` took {} (once per run).\n",
        thousands(cfg.records as u64),
        cfg.build_dir.display(),
        ms(large_built)
    );
    let _ = writeln!(
        s,
        "How each row is measured:\n\n\
         - Every write, on both sides of every comparison, is a plain `std::fs::write` of \
         bytes prepared in memory beforehand (the original plus one line). The file system \
         is synced (`syncfs`, not timed) before each timed phase, so no phase pays for the \
         dirty pages of the one before. Every copy is kept until the run ends, so no \
         repetition pays for the deletions of the one before, and rows 1 to 3 run before \
         rows 4 to 6, whose background processes remove the files their rewinds kept \
         aside: ext4 without a journal skips the inodes freed in the last minute or more \
         at every allocation, and each restored file takes a new inode (the plain writes \
         take none).\n\
         - Row 1 times `Store::open` + `capture_many` (every file, one call) + the writes, \
         against the writes alone on a second copy of the tree; which side runs first \
         alternates between repetitions. The rewind is `Store::rewind` of that turn after \
         row 3's turn was rewound, with the store moved (untimed) to the data directory, \
         its default place and the only one whose rewinds use the trash; the names the \
         rewind left there are then removed by `Store::empty_trash`, timed apart (\"Also \
         measured\"); afterwards every file is compared with its original \
         bytes and the tree is checked for stray files (the benchmark fails if any differ). \
         git's object store is measured once per run on a third copy.\n\
         - Row 2: {SINGLES} files spread evenly over the tree, each captured by its own \
         `Store::capture` call ({PER_TURN} a turn) on one open `Store`, each call timed. The \
         {}-record store is built once per run by that many `Store::write` calls ({PER_TURN} a \
         turn, each capturing a new version of a file of the tree, so each record has its own \
         pack), after a line was added to every file so that none of the measured captures \
         finds its blob already stored; it is then copied next to a fresh copy of the tree for \
         every repetition. Both stores must store the same number of new blobs, or the \
         benchmark fails.\n\
         - Row 3 runs on the row-1 store (after the full-tree turn, before its rewind): 4 files \
         spread over the tree get a second line and 1 new file is created; growth is `du -sk` \
         of `.turnback` after minus before. The rewind restores the 4 and deletes the new file, \
         which is checked.\n{}",
        thousands(cfg.records as u64),
        rewind_cli::HOW,
    );
    let results = vec![
        (
            "full-tree capture+write within 1.5x the bare writes".into(),
            r_cw.met() == Some(true),
        ),
        (
            "store size no larger than git's object store".into(),
            r_size.met() == Some(true),
        ),
        (
            "full-tree rewind no slower than the bare writes".into(),
            r_rw.met() == Some(true),
        ),
        (
            format!(
                "single captures into the {}-record store within 1.2x the empty store",
                cfg.records
            ),
            r_single.met() == Some(true),
        ),
    ];
    let mut results = results;
    results.extend(cli_results);
    (s, results)
}

/// Moves the store of `root` to the data directory (the default place of
/// a store, and the only one whose rewinds use the trash; see the
/// library's `trash.rs`): the benchmark's stores are made in their
/// projects, so they can be copied with them.
pub(crate) fn to_data_dir(root: &Path) -> Res<()> {
    turnback::location::move_store(root, None, false)?;
    Ok(())
}

#[allow(unsafe_code)] // the environment, set before any thread
fn main() -> Res<()> {
    // Stores are made in their trees, so a store can be copied with its
    // tree and its size read there; the rewinds of full trees (rows 1, 4
    // and 5) run with the store moved to the data directory, its default
    // place, where the rewind's trash is used (see `to_data_dir`).
    // SAFETY: set before any thread is started.
    unsafe { std::env::set_var(turnback::location::STORE_ENV, "project") };
    let cfg = config()?;
    // The data directory of the stores moved there, on the trees' device.
    let data = TempDir::with_prefix_in("turnback-bench-data-", &cfg.tmp)?;
    // SAFETY: no thread is started yet.
    unsafe { std::env::set_var(turnback::location::DATA_DIR_ENV, data.path()) };
    let m = machine(&cfg.tmp)?;
    let commit = commit();
    eprintln!("loading {} files of {} ...", cfg.files, cfg.tree.display());
    let tree = load_tree(&cfg.tree, cfg.files)?;
    let mut fig = Figures::default();
    let mut keep: Vec<TempDir> = Vec::new();
    let mut cli_fig = rewind_cli::CliFigures::default();
    let mut library = None;
    // The library's rows first: the command line's rows below end with
    // background processes removing the files their rewinds kept aside
    // (100,000 at a time), and ext4 without a journal skips inodes freed
    // in the last minute or more at every allocation (each restored file
    // takes a new inode), so a rewind timed after them measures those
    // frees. Every copy is kept until the end of the run for the same
    // reason: no repetition pays for the deletions of the one before.
    if !cfg.only_cli {
        eprintln!("git object store ...");
        let (git_kib, git_secs, git_dir) = git_objects(&tree, &cfg)?;
        keep.push(git_dir);
        eprintln!(
            "building the {}-record store in {} ...",
            cfg.records,
            cfg.build_dir.display()
        );
        let (large, large_built) = build_large_store(&tree, &cfg)?;
        let large_root = large.path().join("tree");
        for rep in 0..cfg.reps {
            eprintln!("repetition {}/{} ...", rep + 1, cfg.reps);
            keep.push(full_and_small(&tree, &cfg, rep, &mut fig)?);
            keep.push(singles(&tree, &cfg, &large_root, rep, &mut fig)?);
        }
        drop(large);
        library = Some((git_kib, git_secs, large_built));
    }
    if !cfg.only_library {
        let cli = rewind_cli::cli_binary()?;
        eprintln!("system calls of a full-tree rewind ...");
        rewind_cli::syscalls(&tree, &cfg, &cli, &mut cli_fig)?;
        eprintln!("one-file rewinds ...");
        keep.push(rewind_cli::one_file(&tree, &cfg, &cli, &mut cli_fig)?);
        let many = rewind_cli::generated(cfg.many);
        for rep in 0..cfg.many_reps {
            eprintln!(
                "rewind of {} generated files, repetition {}/{} ...",
                cfg.many,
                rep + 1,
                cfg.many_reps
            );
            // Which turn goes first alternates: the rewind after the other
            // one's frees pays for them (ext4 without a journal).
            if rep % 2 == 1 {
                keep.push(rewind_cli::many_exec(&cfg, &cli, &many, &mut cli_fig)?);
            }
            keep.push(rewind_cli::many_files(
                &cfg,
                &cli,
                &many,
                rep,
                &mut cli_fig,
            )?);
            if rep % 2 == 0 {
                keep.push(rewind_cli::many_exec(&cfg, &cli, &many, &mut cli_fig)?);
            }
        }
    }
    let Some((git_kib, git_secs, large_built)) = library else {
        let mut rows = String::new();
        let mut results = Vec::new();
        rewind_cli::render_rows(&cli_fig, &mut rows, &mut results);
        println!("{rows}");
        for (what, met) in &results {
            println!("target {}: {what}", if *met { "met" } else { "MISSED" });
        }
        return Ok(());
    };
    let load_end = load_average();
    let (body, results) = render(
        &cfg,
        &m,
        &tree,
        &fig,
        git_kib,
        git_secs,
        large_built,
        &load_end,
        &commit,
        &cli_fig,
    );
    println!("{body}");
    for (what, met) in &results {
        println!("target {}: {what}", if *met { "met" } else { "MISSED" });
    }
    if !cfg.write {
        println!("(not written: --no-write)");
    } else if cfg.only_library {
        println!("(not written: TURNBACK_BENCH_ONLY=library ran rows 1 to 3 alone)");
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
    eprintln!("removing the tree copies ...");
    drop(keep);
    Ok(())
}

/// Runs git in `root` with `home` as its home and a fixed identity, so no
/// configuration of the machine's applies; fails with git's message.
fn git_in(root: &Path, home: &Path, args: &[&str]) -> Res<()> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}
