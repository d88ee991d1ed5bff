//! The scan benchmark: what a snapshot half costs without Watchman, when
//! the command changed nothing and the whole tree is walked, against
//! `git status` of the same tree (untracked cache on, no fsmonitor), all
//! in the same run. The figures are printed and written to a marked
//! section of `docs/BENCHMARKS.md` (other sections are left alone).
//!
//! ```text
//! cargo bench -p turnback-cli --bench scan [-- --reps N]
//! ```
//!
//! Linux, with `git` on PATH. Per tree (`TURNBACK_BENCH_SCAN_FILES`,
//! default `100000,300000` files, 100 per directory, each a line of text):
//! the tree is generated (once per binary: a project names its one
//! store), committed to git with `core.untrackedCache` on
//! and `core.fsmonitor` off, and snapshotted once (both halves, untimed);
//! then each repetition times a before half and an after half of a
//! command that changes nothing (the release binary as a process, as a
//! hook runs it, with `TURNBACK_FSMONITOR=off`), then `git status
//! --porcelain`. Every timed half must hash no file and record nothing,
//! and `git status` must show nothing.
//!
//! `TURNBACK_BENCH_PEER=PATH` measures another turnback binary (say, the
//! commit before a change) the same way in the same run, with a store of
//! its own. Settings: `--reps N` / `TURNBACK_BENCH_REPS` (default 11),
//! `TURNBACK_BENCH_SCAN_FILES`, `TURNBACK_BENCH_PEER`,
//! `TURNBACK_BENCH_TMP`, `--no-write`.

#[path = "../../turnback/benches/common/mod.rs"]
mod common;

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the scan benchmark runs on Linux only");
}

#[cfg(target_os = "linux")]
mod linux {
    use std::error::Error;
    use std::fmt::Write as _;
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::Instant;

    use serde_json::Value;

    use crate::common::*;

    type Res<T> = Result<T, Box<dyn Error>>;

    const SECTION: &str = "scan";

    /// One turnback binary with its own copy of the tree (a project names
    /// its one store) and its own data directory.
    struct Tb {
        bin: PathBuf,
        data: PathBuf,
        home: PathBuf,
        /// Its copy's name among the tree's copies.
        copy: &'static str,
    }

    impl Tb {
        /// Runs a snapshot half; its time, spawn to exit, and its report.
        fn half(&self, root: &Path, turn: &str, after: bool) -> Res<(f64, Value)> {
            let mut cmd = Command::new(&self.bin);
            cmd.args(["snapshot", "--json", "--turn", turn])
                .current_dir(root)
                .env("TURNBACK_DATA_DIR", &self.data)
                .env("HOME", &self.home)
                .env("TURNBACK_NO_BACKGROUND", "1")
                .env("TURNBACK_FSMONITOR", "off");
            if after {
                cmd.arg("--after");
            }
            let start = Instant::now();
            let out = cmd.output()?;
            let took = start.elapsed().as_secs_f64();
            if !out.status.success() {
                return Err(format!(
                    "{} snapshot: {}",
                    self.bin.display(),
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            Ok((took, serde_json::from_slice(&out.stdout)?))
        }
    }

    /// A half that changed nothing: no file hashed, no change recorded.
    fn unchanged(v: &Value, what: &str) -> Res<()> {
        let hashed = v["scan"]["hashed_file_count"].as_u64();
        let changes = &v["recorded"]["changes"];
        let none = changes.is_null()
            || changes
                .as_object()
                .is_some_and(|c| c.values().all(|l| l.as_array().is_some_and(Vec::is_empty)));
        if hashed != Some(0) || !none {
            return Err(format!(
                "{what}: expected an unchanged half, got hashed_file_count {hashed:?}, changes {changes}"
            )
            .into());
        }
        Ok(())
    }

    fn git(root: &Path, args: &[&str]) -> Res<(f64, String)> {
        let start = Instant::now();
        let out = Command::new("git").args(args).current_dir(root).output()?;
        let took = start.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
    }

    struct Rows {
        files: usize,
        /// Per binary: before halves, after halves.
        halves: Vec<(Vec<f64>, Vec<f64>)>,
        git: Vec<f64>,
    }

    fn run_tree(bins: &[Tb], base: &Path, files: usize, reps: usize) -> Res<Rows> {
        let dir = base.join(format!("tree-{files}"));
        let mut roots = Vec::new();
        for tb in bins {
            let root = dir.join(tb.copy);
            fs::create_dir_all(&root)?;
            eprintln!("generating {files} files in {} ...", root.display());
            generate(&root, files)?;
            roots.push(root.canonicalize()?);
        }
        // git's repository is the first copy (its `.turnback/` marker left
        // out of git's view).
        let root = roots[0].clone();
        eprintln!("git add -A and commit ...");
        git(&root, &["init", "-q"])?;
        fs::write(root.join(".git/info/exclude"), ".turnback/\n")?;
        git(&root, &["add", "-A"])?;
        git(
            &root,
            &[&GIT_AS_BENCH[..], &["commit", "-q", "-m", "generated"]].concat(),
        )?;
        git(&root, &["config", "core.untrackedCache", "true"])?;
        git(&root, &["config", "core.fsmonitor", "false"])?;
        for _ in 0..2 {
            git(&root, &["status", "--porcelain"])?;
        }
        for (tb, root) in bins.iter().zip(&roots) {
            eprintln!("first snapshot with {} ...", tb.bin.display());
            tb.half(root, "first", false)?;
            tb.half(root, "first", true)?;
            // Files changed within the first scan's clock tick are hashed
            // once more, then the stat cache vouches for every file.
            tb.half(root, "settle", false)?;
            tb.half(root, "settle", true)?;
        }
        let mut rows = Rows {
            files,
            halves: bins.iter().map(|_| (Vec::new(), Vec::new())).collect(),
            git: Vec::new(),
        };
        for rep in 0..reps {
            eprintln!("{files} files: repetition {}/{reps} ...", rep + 1);
            let turn = format!("noop{rep}");
            for ((tb, root), (before, after)) in bins.iter().zip(&roots).zip(&mut rows.halves) {
                let (b, vb) = tb.half(root, &turn, false)?;
                unchanged(&vb, "before half")?;
                let (a, va) = tb.half(root, &turn, true)?;
                unchanged(&va, "after half")?;
                before.push(b);
                after.push(a);
            }
            let (g, out) = git(&root, &["status", "--porcelain"])?;
            if !out.trim().is_empty() {
                return Err(format!("git status of the unchanged tree: {out}").into());
            }
            rows.git.push(g);
        }
        Ok(rows)
    }

    fn ratio(a: &[f64], b: &[f64]) -> String {
        format!("{:.2}x", median(a) / median(b))
    }

    pub fn main() -> Res<()> {
        let (reps, write) = reps_and_write(11)?;
        let files = env_sizes("TURNBACK_BENCH_SCAN_FILES", "100000,300000")?;
        let tmp = bench_tmp();
        let m = machine(&tmp)?;
        let base = tempfile::Builder::new()
            .prefix("turnback-bench-scan-")
            .tempdir_in(&tmp)?;
        let home = base.path().join("home");
        fs::create_dir_all(&home)?;
        let mut bins = vec![Tb {
            bin: PathBuf::from(env!("CARGO_BIN_EXE_turnback")),
            data: base.path().join("data"),
            home: home.clone(),
            copy: "project",
        }];
        let peer = std::env::var_os("TURNBACK_BENCH_PEER").map(PathBuf::from);
        if let Some(p) = &peer {
            if !p.is_file() {
                return Err(format!("TURNBACK_BENCH_PEER: no file at {}", p.display()).into());
            }
            bins.push(Tb {
                bin: p.clone(),
                data: base.path().join("data-peer"),
                home,
                copy: "peer-copy",
            });
        }
        let mut trees = Vec::new();
        for &n in &files {
            trees.push(run_tree(&bins, base.path(), n, reps)?);
        }

        let mut body = String::new();
        writeln!(
            body,
            "## Scan: an unchanged snapshot half without Watchman, against `git status`\n\n\
             Written by `cargo bench -p turnback-cli --bench scan` on {} at commit {}, {}, release build; \
             load average {} at the start, {} at the end (the machine is shared). git {}, \
             `core.untrackedCache` on, `core.fsmonitor` off, the tree committed. \
             Medians of {reps} repetitions, each a before half, an after half, then `git status --porcelain`; \
             every time is a process, spawn to exit, and every timed half hashed no file.{}\n",
            today(),
            commit(),
            rustc_version(),
            m.load_start,
            load_average(),
            git_version(),
            peer.as_ref()
                .map(|p| format!(" The peer binary: `{}`.", p.display()))
                .unwrap_or_default(),
        )?;
        writeln!(
            body,
            "{}",
            m.lines("; generated trees, 100 files per directory, one line each")
        )?;
        let peer_cols = if peer.is_some() {
            " peer before half | peer after half | peer before ÷ git |"
        } else {
            ""
        };
        writeln!(
            body,
            "| files | before half | after half | `git status` | before ÷ git | after ÷ git |{peer_cols} target |"
        )?;
        writeln!(
            body,
            "|---:|---:|---:|---:|---:|---:|{}---|",
            if peer.is_some() {
                "---:|---:|---:|"
            } else {
                ""
            }
        )?;
        for t in &trees {
            let (b, a) = &t.halves[0];
            let mut row = format!(
                "| {} | {} | {} | {} | {} | {} |",
                thousands(t.files as u64),
                time_cell(b),
                time_cell(a),
                time_cell(&t.git),
                ratio(b, &t.git),
                ratio(a, &t.git)
            );
            if let Some((pb, pa)) = t.halves.get(1) {
                write!(
                    row,
                    " {} | {} | {} |",
                    time_cell(pb),
                    time_cell(pa),
                    ratio(pb, &t.git)
                )?;
            }
            writeln!(body, "{row} ≤ 1x |")?;
        }
        writeln!(body)?;
        print!("{body}");
        if write {
            let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/BENCHMARKS.md");
            write_section(&out, SECTION, &body)?;
        }
        Ok(())
    }
}
