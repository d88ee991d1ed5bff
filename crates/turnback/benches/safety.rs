//! The safety benchmark: the store's size for ten versions of one file, gc
//! of a long log, verify of a full-tree store and a rewind with conflicts,
//! each figure a median of several repetitions with its ratio against a peer
//! measured in the same run. The figures are printed and written to a marked
//! section of `docs/BENCHMARKS.md` (other sections are left alone).
//!
//! ```text
//! cargo bench -p turnback --bench safety [-- --reps N]
//! ```
//!
//! Rows:
//! 1. ten versions: one ~2 MB text file (real headers concatenated), ten
//!    turns each writing it one line longer through `Store::write`; the
//!    packs' size on disk against ten raw copies and ten separately
//!    zstd-compressed copies; then a rewind to the first turn, checked byte
//!    for byte.
//! 2. gc of a store of 10,000 turns down to 100, against `Store::open` of
//!    the same store (reading its whole log).
//! 3. `verify_root` of the store holding the full tree, against hashing the
//!    tree's files with SHA-256 (what `sha256sum` does).
//! 4. a rewind of 100 files that were all changed after the turn (100
//!    conflicts), against the same rewind with no conflicts.
//!
//! Settings (a flag wins over the environment):
//! - `--reps N` / `TURNBACK_BENCH_REPS`: repetitions (default 5; with fewer
//!   than 5 the figures are printed but not written to the docs);
//! - `TURNBACK_BENCH_GC_REPS`: repetitions of row 2 (default: `--reps`);
//! - `TURNBACK_BENCH_TREE`, `TURNBACK_BENCH_FILES`: source tree and how many
//!   of its files (default `/usr/include`, 4686);
//! - `TURNBACK_BENCH_TMP`: where trees and stores go (default temp dir);
//! - `TURNBACK_BENCH_BUILD_DIR`: where the 10,000-turn store is built before
//!   being copied (default `/dev/shm` when it is a tmpfs);
//! - `TURNBACK_BENCH_OUT`: the Markdown file (default `docs/BENCHMARKS.md`);
//!   `--no-write` / `TURNBACK_BENCH_NO_WRITE=1` only prints.

use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tempfile::TempDir;
use turnback::{GcOptions, RewindOptions, Store, TurnId, verify_root};

#[path = "common/mod.rs"]
mod common;
use common::*;

type Res<T> = Result<T, Box<dyn Error>>;
/// Files by relative path, with their bytes.
type Files = Vec<(String, Vec<u8>)>;

/// Name of this benchmark's section in the Markdown file.
const SECTION: &str = "safety";
/// Fewest repetitions whose figures are written to the docs.
const MIN_REPS: usize = 5;
/// Size of the ten-version file, at least.
const BIG_BYTES: usize = 2 * 1024 * 1024;
/// Versions of it.
const VERSIONS: usize = 10;
/// Target for the ten versions' packs on disk.
const DELTA_TARGET: u64 = 2_500_000;
/// Turns in the gc store, and how many gc keeps.
const GC_TURNS: usize = 10_000;
const GC_KEEP: usize = 100;
/// Distinct small files the gc store's turns write.
const GC_FILES: usize = 100;
/// Files of the conflict row.
const CONFLICTS: usize = 100;

struct Config {
    reps: usize,
    gc_reps: usize,
    tree: PathBuf,
    files: usize,
    tmp: PathBuf,
    build_dir: PathBuf,
    out: PathBuf,
    write: bool,
}

fn config() -> Res<Config> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = fs::canonicalize(&workspace).unwrap_or(workspace);
    let (reps, write) = reps_and_write(MIN_REPS)?;
    let gc_reps = env_usize("TURNBACK_BENCH_GC_REPS", reps)?.max(1);
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
        gc_reps,
        tree: std::env::var_os("TURNBACK_BENCH_TREE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include")),
        files: env_usize("TURNBACK_BENCH_FILES", 4686)?,
        tmp,
        build_dir,
        out: std::env::var_os("TURNBACK_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("docs/BENCHMARKS.md")),
        write,
    })
}

/// The first `limit` regular files of `source` in byte order of their
/// relative paths, as (relative path, bytes).
fn load_tree(source: &Path, limit: usize) -> Res<(Files, usize)> {
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
    for rel in rels {
        let path = source.join(&rel);
        let bytes = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        files.push((rel, bytes));
    }
    Ok((files, available))
}

fn write_tree(files: &[(String, Vec<u8>)], dst: &Path) -> Res<()> {
    for (rel, bytes) in files {
        let p = dst.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        fs::write(&p, bytes).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Bytes on disk (st_blocks * 512) and in files under `dir`.
fn disk_bytes(dir: &Path) -> Res<(u64, u64)> {
    let rels = regular_files(dir)?;
    let (mut disk, mut len) = (0, 0);
    for rel in rels {
        let m = fs::symlink_metadata(dir.join(&rel))?;
        disk += common::disk_bytes(&m);
        len += m.len();
    }
    Ok((disk, len))
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

#[derive(Default)]
struct Figures {
    // Row 1.
    big_len: usize,
    packs_disk: Vec<f64>,
    packs_len: Vec<f64>,
    raw_copies: u64,
    zstd_copies: u64,
    ten_writes: Vec<f64>,
    delta_rewind: Vec<f64>,
    // Row 2.
    gc: Vec<f64>,
    gc_open: Vec<f64>,
    gc_bytes_before: u64,
    gc_bytes_after: u64,
    gc_records: (usize, usize),
    // Row 3.
    verify: Vec<f64>,
    sha: Vec<f64>,
    verify_blobs: usize,
    tree_bytes: u64,
    // Row 4.
    conflict_rewind: Vec<f64>,
    clean_rewind: Vec<f64>,
    conflicts: usize,
}

/// Real text of at least `BIG_BYTES`: the tree's files concatenated.
fn big_text(files: &[(String, Vec<u8>)]) -> Res<Vec<u8>> {
    let mut out = Vec::with_capacity(BIG_BYTES + 100_000);
    for (_, b) in files {
        if out.len() >= BIG_BYTES {
            break;
        }
        if std::str::from_utf8(b).is_ok() {
            out.extend_from_slice(b);
        }
    }
    if out.len() < BIG_BYTES {
        return Err(format!(
            "the tree holds only {} bytes of text, {BIG_BYTES} wanted",
            out.len()
        )
        .into());
    }
    Ok(out)
}

/// Row 1, one repetition.
fn ten_versions(versions: &[Vec<u8>], cfg: &Config, fig: &mut Figures) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-delta-", &cfg.tmp)?;
    let root = work.path();
    fs::write(root.join("big.txt"), &versions[0])?;
    sync_fs(root)?;
    let (mut store, t) = timed(|| {
        let mut store = Store::open(root)?;
        for k in 0..VERSIONS {
            let turn = TurnId::new(format!("v{k}"))?;
            store.write(&turn, None, "big.txt", &versions[k + 1])?;
        }
        Ok(store)
    })?;
    fig.ten_writes.push(t);
    sync_fs(root)?;
    let (disk, len) = disk_bytes(&root.join(".turnback/packs"))?;
    fig.packs_disk.push(disk as f64);
    fig.packs_len.push(len as f64);
    let first = TurnId::new("v0")?;
    let (report, t) = timed(|| Ok(store.rewind(&first, &RewindOptions::default())?))?;
    fig.delta_rewind.push(t);
    if !report.complete() || report.restored.len() != 1 {
        return Err(format!("delta rewind: failed {:?}", report.failed).into());
    }
    let got = fs::read(root.join("big.txt"))?;
    if got != versions[0] {
        return Err(format!(
            "VERIFICATION FAILED: after the rewind big.txt holds {} bytes, not the original {}",
            got.len(),
            versions[0].len()
        )
        .into());
    }
    Ok(work)
}

/// The 10,000-turn store, built once with `Store::write` of small files.
fn build_gc_store(cfg: &Config) -> Res<(TempDir, f64)> {
    let dir = TempDir::with_prefix_in("turnback-bench-gc-", &cfg.build_dir)?;
    let root = dir.path().join("tree");
    fs::create_dir_all(root.join("src"))?;
    let t0 = Instant::now();
    // No automatic gc while it is built: every turn must stay. (The store
    // keeps a config file it finds in place.)
    fs::create_dir_all(root.join(".turnback"))?;
    fs::write(
        root.join(".turnback/config.toml"),
        "[retention]\nkeep_turns = 1000000\nkeep_days = 100000\nmax_size = \"1T\"\n\n[gc]\nauto_every_captures = 0\n",
    )?;
    let mut store = Store::open(&root)?;
    for i in 0..GC_TURNS {
        let turn = TurnId::new(format!("t{i}"))?;
        let body = format!(
            "// file {} version {i}\npub fn value() -> usize {{ {i} }}\n",
            i % GC_FILES
        );
        store.write(
            &turn,
            None,
            format!("src/f{}.rs", i % GC_FILES),
            body.as_bytes(),
        )?;
    }
    let built = secs(t0.elapsed());
    if store.turns()?.len() != GC_TURNS {
        return Err(format!("the gc store holds {} turns", store.turns()?.len()).into());
    }
    Ok((dir, built))
}

/// Row 2, one repetition.
fn gc_row(built: &Path, cfg: &Config, fig: &mut Figures) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-gc-", &cfg.tmp)?;
    copy_dir(built, work.path())?;
    sync_fs(work.path())?;
    let (mut store, t) = timed(|| Ok(Store::open(work.path())?))?;
    fig.gc_open.push(t);
    if store.turns()?.len() != GC_TURNS {
        return Err(format!("the copied store holds {} turns", store.turns()?.len()).into());
    }
    sync_fs(work.path())?;
    let opts = GcOptions {
        keep_turns: Some(GC_KEEP),
        ..GcOptions::default()
    };
    let (report, t) = timed(|| Ok(store.gc(&opts)?))?;
    fig.gc.push(t);
    if report.kept_turns != GC_KEEP || report.dropped_turns.len() != GC_TURNS - GC_KEEP {
        return Err(format!(
            "gc kept {} turns and dropped {}",
            report.kept_turns,
            report.dropped_turns.len()
        )
        .into());
    }
    let after = Store::open(work.path())?;
    if after.turns()?.len() != GC_KEEP {
        return Err(format!("after gc the store holds {} turns", after.turns()?.len()).into());
    }
    fig.gc_bytes_before = report.bytes_before;
    fig.gc_bytes_after = report.bytes_after;
    fig.gc_records = (report.records_before, report.records_after);
    Ok(work)
}

/// Row 3: one full-tree store, verified `reps` times against hashing the
/// tree's files.
fn verify_row(files: &[(String, Vec<u8>)], cfg: &Config, fig: &mut Figures) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-verify-", &cfg.tmp)?;
    let root = work.path();
    write_tree(files, root)?;
    let rels: Vec<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
    let mut store = Store::open(root)?;
    let report = store.capture_many(&TurnId::new("full")?, Some("full tree"), &rels)?;
    if report.captured.len() != rels.len() {
        return Err(format!("captured {} of {} files", report.captured.len(), rels.len()).into());
    }
    drop(store);
    sync_fs(root)?;
    // One untimed pass of each, so both start with the same warm cache.
    verify_root(root)?;
    let hash_tree = || -> Res<usize> {
        let mut n = 0;
        for rel in &rels {
            let bytes = fs::read(root.join(rel))?;
            let digest = Sha256::digest(&bytes);
            n += usize::from(digest[0]);
        }
        Ok(n)
    };
    hash_tree()?;
    for rep in 0..cfg.reps {
        let run_verify = |fig: &mut Figures| -> Res<()> {
            let (v, t) = timed(|| Ok(verify_root(root)?))?;
            if !v.whole {
                return Err(format!("verify found damage: {:?}", v.damage).into());
            }
            fig.verify_blobs = v.blobs_checked;
            fig.verify.push(t);
            Ok(())
        };
        let run_sha = |fig: &mut Figures| -> Res<()> {
            let (_, t) = timed(hash_tree)?;
            fig.sha.push(t);
            Ok(())
        };
        if rep.is_multiple_of(2) {
            run_verify(fig)?;
            run_sha(fig)?;
        } else {
            run_sha(fig)?;
            run_verify(fig)?;
        }
    }
    fig.tree_bytes = files.iter().map(|(_, b)| b.len() as u64).sum();
    Ok(work)
}

/// Row 4, one repetition: the same 100 files, written through the store in
/// one turn, rewound with and without the user's later edits.
fn conflict_row(
    files: &[(String, Vec<u8>)],
    cfg: &Config,
    rep: usize,
    fig: &mut Figures,
) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-conflict-", &cfg.tmp)?;
    let picked: Vec<&(String, Vec<u8>)> = (0..CONFLICTS)
        .map(|k| &files[k * files.len() / CONFLICTS])
        .collect();
    let side = |name: &str, user_edits: bool, fig: &mut Figures| -> Res<()> {
        let root = work.path().join(name);
        let originals: Vec<(String, Vec<u8>)> = picked
            .iter()
            .enumerate()
            .map(|(k, (r, b))| (format!("f{k:03}-{}", r.replace('/', "_")), b.clone()))
            .collect();
        write_tree(&originals, &root)?;
        let mut store = Store::open(&root)?;
        let turn = TurnId::new("agent")?;
        for (rel, bytes) in &originals {
            store.write(
                &turn,
                None,
                rel,
                &with_line(bytes, b"// the agent's line\n"),
            )?;
        }
        if user_edits {
            for (rel, bytes) in &originals {
                let agent = with_line(bytes, b"// the agent's line\n");
                fs::write(root.join(rel), with_line(&agent, b"// the user's line\n"))?;
            }
        }
        sync_fs(&root)?;
        let (report, t) = timed(|| Ok(store.rewind(&turn, &RewindOptions::default())?))?;
        let want = if user_edits { CONFLICTS } else { 0 };
        if !report.complete()
            || report.restored.len() != CONFLICTS
            || report.conflicts.len() != want
        {
            return Err(format!(
                "rewind ({name}): {} restored, {} conflicts ({want} expected), failed {:?}",
                report.restored.len(),
                report.conflicts.len(),
                report.failed
            )
            .into());
        }
        for (rel, bytes) in &originals {
            if fs::read(root.join(rel))? != *bytes {
                return Err(format!("VERIFICATION FAILED: {rel} not restored ({name})").into());
            }
        }
        if user_edits {
            fig.conflicts = report.conflicts.len();
            fig.conflict_rewind.push(t);
        } else {
            fig.clean_rewind.push(t);
        }
        Ok(())
    };
    if rep.is_multiple_of(2) {
        side("conflicts", true, fig)?;
        side("clean", false, fig)?;
    } else {
        side("clean", false, fig)?;
        side("conflicts", true, fig)?;
    }
    Ok(work)
}

// ------------------------------------------------- copied from store.rs

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn timed<T>(f: impl FnOnce() -> Res<T>) -> Res<(T, f64)> {
    let t0 = Instant::now();
    let v = f()?;
    Ok((v, secs(t0.elapsed())))
}

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
    fn cells_bare(&self) -> String {
        format!("{:.2}x | {:.2}x", self.value, self.paired)
    }
}

fn bytes_cell(b: u64) -> String {
    format!("{} bytes ({:.2} MB)", thousands(b), b as f64 / 1e6)
}

#[allow(clippy::too_many_arguments)]
fn render(
    cfg: &Config,
    m: &Machine,
    fig: &Figures,
    n_files: usize,
    available: usize,
    gc_built: f64,
    load_end: &str,
    commit: &str,
) -> (String, Vec<(String, bool)>) {
    let disk = median(&fig.packs_disk) as u64;
    let r_raw = Ratio::new(&fig.packs_disk, &[fig.raw_copies as f64]);
    let r_zstd = Ratio::new(&fig.packs_disk, &[fig.zstd_copies as f64]);
    let r_gc = Ratio::new(&fig.gc, &fig.gc_open);
    let r_verify = Ratio::new(&fig.verify, &fig.sha);
    let r_conf = Ratio::new(&fig.conflict_rewind, &fig.clean_rewind);
    let delta_met = disk < DELTA_TARGET;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Safety: delta storage, gc, verify and conflicts\n\n\
         Written by `cargo bench -p turnback --bench safety` (source: \
         `crates/turnback/benches/safety.rs`) on {} at commit {commit}, {}, {} build.\n",
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
         Linux {}, {:.1} GiB RAM. Temp dir `{}` on **{}** ({}); each store lives inside \
         its tree. The machine is shared with other work: load average {} at the start, \
         {load_end} at the end.",
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
         relative paths: {} bytes. Rows 1 and 4 take their text from it too.",
        cfg.tree.display(),
        thousands(n_files as u64),
        thousands(available as u64),
        thousands(fig.tree_bytes),
    );
    let _ = writeln!(
        s,
        "- **Repetitions:** {} ({} for row 2). Each figure is the median over them, the \
         range in brackets; the ratio of the medians is shown with the median of the \
         per-repetition ratios beside it.\n",
        cfg.reps, cfg.gc_reps
    );
    let _ = writeln!(
        s,
        "| Row | turnback | peer | ratio of the medians | median of the per-repetition ratios | target | result |\n|---|---|---|---|---|---|---|"
    );
    let _ = writeln!(
        s,
        "| 1. ten versions of one {}-byte text file, each one line longer, through `Store::write` (ten turns): packs on disk (st_blocks × 512) | {} ({} bytes in files) | ten raw copies: {} | {} | < 2.5 MB on disk | **{}** |",
        thousands(fig.big_len as u64),
        bytes_cell(disk),
        thousands(median(&fig.packs_len) as u64),
        bytes_cell(fig.raw_copies),
        r_raw.cells_bare(),
        if delta_met { "met" } else { "missed" },
    );
    let _ = writeln!(
        s,
        "| 1. the same packs | {} | ten copies each compressed alone (zstd level 3, bytes): {} | {} | | |",
        bytes_cell(disk),
        bytes_cell(fig.zstd_copies),
        r_zstd.cells_bare(),
    );
    let _ = writeln!(
        s,
        "| 1. rewind to the first turn (then checked byte for byte: matched) | {} | | | | | |",
        time_cell(&fig.delta_rewind),
    );
    let _ = writeln!(
        s,
        "| 2. `Store::gc` keeping {GC_KEEP} of {} turns ({} → {} log records, {} → {} bytes of packs and log) | {} | `Store::open` of the same store (reads the whole log): {} | {} | (none) | |",
        thousands(GC_TURNS as u64),
        thousands(fig.gc_records.0 as u64),
        thousands(fig.gc_records.1 as u64),
        thousands(fig.gc_bytes_before),
        thousands(fig.gc_bytes_after),
        time_cell(&fig.gc),
        time_cell(&fig.gc_open),
        r_gc.cells_bare(),
    );
    let _ = writeln!(
        s,
        "| 3. `verify_root` of the full-tree store ({} blobs decompressed and re-hashed; whole) | {} | SHA-256 of the {} tree files read from disk, one thread (as `sha256sum`): {} | {} | (none) | |",
        thousands(fig.verify_blobs as u64),
        time_cell(&fig.verify),
        thousands(n_files as u64),
        time_cell(&fig.sha),
        r_verify.cells_bare(),
    );
    let _ = writeln!(
        s,
        "| 4. rewind of {CONFLICTS} files all changed by the user after the turn: {} conflicts, each saved before being replaced | {} | the same rewind, no file changed since: {} | {} | (none) | |",
        fig.conflicts,
        time_cell(&fig.conflict_rewind),
        time_cell(&fig.clean_rewind),
        r_conf.cells_bare(),
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Also measured: the ten `Store::write` calls of row 1 took {}; building the \
         {}-turn store with {} `Store::write` calls in `{}` took {} (once per run).\n",
        time_cell(&fig.ten_writes),
        thousands(GC_TURNS as u64),
        thousands(GC_TURNS as u64),
        cfg.build_dir.display(),
        ms(gc_built),
    );
    let _ = writeln!(
        s,
        "How each row is measured:\n\n\
         - Row 1: the file is the tree's UTF-8 files concatenated in path order until it \
         reaches 2 MiB; version k+1 is version k plus one line. Each of the ten turns is one \
         `Store::write` of the next version, so the store holds the ten pre-images (versions \
         0–9). Sizes are of `.turnback/packs` after `syncfs`. The raw and zstd peers are \
         computed over the same ten versions in memory. A fresh directory every repetition.\n\
         - Row 2: the store is built once per run ({} small files under `src/`, one \
         `Store::write` per turn), then copied afresh for every repetition; `Store::open` of \
         the copy is timed (the peer), then `gc` with `keep_turns: {GC_KEEP}` on that open store \
         (it takes the lock, rewrites the log and deletes unreferenced packs). The store's \
         config turns automatic gc off and sets no other limit, so only `keep_turns` drops \
         turns. Afterwards the store is opened again and must hold {GC_KEEP} turns.\n\
         - Rows 1 and 4 use a new store's default config, so each rewind includes the \
         automatic gc check that follows it (limits: 1,000 turns, 30 days, 2 GB; none \
         exceeded, so no gc runs).\n\
         - Row 3: the tree is captured once (`capture_many`, one turn), then `verify_root` and \
         the hashing peer alternate, each after one untimed warm-up pass; verify checks every \
         log line and re-hashes every blob (in parallel over packs), the peer reads and hashes \
         each file on one thread.\n\
         - Row 4: {CONFLICTS} files spread over the tree, each written through `Store::write` in \
         one turn with a line added; on one copy each is then changed again with plain \
         `fs::write` (the user's edit). Both copies are rewound to the turn and every file \
         checked against its original bytes; the conflict count must be {CONFLICTS} and 0.",
        GC_FILES
    );
    let results = vec![(
        format!(
            "ten versions' packs under {} bytes on disk",
            thousands(DELTA_TARGET)
        ),
        delta_met,
    )];
    (s, results)
}

#[allow(unsafe_code)] // the environment, set before any thread
fn main() -> Res<()> {
    // The figures are of the store's own files and their write order, kept
    // in the measured tree as before (the default data-directory store
    // differs only by the small marker and registry reads at open).
    // SAFETY: set before any thread is started.
    unsafe { std::env::set_var(turnback::location::STORE_ENV, "project") };
    let cfg = config()?;
    let m = machine(&cfg.tmp)?;
    let commit = commit();
    eprintln!("loading {} files of {} ...", cfg.files, cfg.tree.display());
    let (files, available) = load_tree(&cfg.tree, cfg.files)?;
    let mut fig = Figures::default();
    let mut keep: Vec<TempDir> = Vec::new();

    // Row 1's versions and its in-memory peers.
    let mut versions = vec![big_text(&files)?];
    for k in 1..=VERSIONS {
        let line = format!("// version {k}: one line longer than the one before\n");
        let next = with_line(&versions[k - 1], line.as_bytes());
        versions.push(next);
    }
    fig.big_len = versions[0].len();
    for v in &versions[..VERSIONS] {
        fig.raw_copies += v.len() as u64;
        fig.zstd_copies += zstd::encode_all(v.as_slice(), 3)?.len() as u64;
    }
    eprintln!("row 1: ten versions ...");
    for _ in 0..cfg.reps {
        keep.push(ten_versions(&versions, &cfg, &mut fig)?);
    }
    eprintln!("row 4: 100 conflicts ...");
    for rep in 0..cfg.reps {
        keep.push(conflict_row(&files, &cfg, rep, &mut fig)?);
    }
    eprintln!("row 3: verify ...");
    keep.push(verify_row(&files, &cfg, &mut fig)?);
    eprintln!(
        "row 2: building the {GC_TURNS}-turn store in {} ...",
        cfg.build_dir.display()
    );
    let (built, gc_built) = build_gc_store(&cfg)?;
    for rep in 0..cfg.gc_reps {
        eprintln!("row 2: gc {}/{} ...", rep + 1, cfg.gc_reps);
        keep.push(gc_row(&built.path().join("tree"), &cfg, &mut fig)?);
    }
    drop(built);
    let load_end = load_average();
    let (body, results) = render(
        &cfg,
        &m,
        &fig,
        files.len(),
        available,
        gc_built,
        &load_end,
        &commit,
    );
    println!("{body}");
    for (what, met) in &results {
        println!("target {}: {what}", if *met { "met" } else { "MISSED" });
    }
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
    drop(keep);
    Ok(())
}
