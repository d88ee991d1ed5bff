//! The rewind benchmark against git: a rewind of a shell command's turn
//! that modified every file of a real tree, through the release binary,
//! against `git checkout -- .` of the same modifications, both in the
//! same run, measured two ways. The figures are printed and written to a
//! marked section of `docs/BENCHMARKS.md` (other sections are left alone).
//!
//! ```text
//! cargo bench -p turnback-cli --bench checkout [-- --reps N]
//! ```
//!
//! Linux, with `git` on PATH. The tree: the first
//! `TURNBACK_BENCH_FILES` (default 4,686) regular files of
//! `TURNBACK_BENCH_TREE` (default `/usr/include`) in byte order of their
//! paths. Each repetition appends a line to every file (untimed; for
//! turnback between the two halves of a snapshot, as a shell command's
//! turn records it), flushes the file system (`sync -f`, so neither side
//! pays for the other's writes), then times the restore as a process,
//! spawn to exit, and checks every file's bytes against the original.
//! turnback's rewind makes its files durable (`fsync`/`syncfs`); git's
//! checkout does not. The background maintenance a rewind starts runs
//! untimed (`turnback maintain`) before the next timed step.
//!
//! - **Back to back in one folder**: a user rewinding twice in an
//!   afternoon. One folder is both the turnback project and the git
//!   repository; repetitions alternate turnback and git, each after the
//!   other's deletions.
//! - **Copies kept**: every repetition of either side in a copy of its
//!   own, all made first, none deleted before the end (no repetition
//!   follows the file system's work of freeing another's files).
//!
//! Settings: `--reps N` / `TURNBACK_BENCH_REPS` (default 7),
//! `TURNBACK_BENCH_TREE`, `TURNBACK_BENCH_FILES`, `TURNBACK_BENCH_TMP`,
//! `--no-write`.

#[path = "../../turnback/benches/common/mod.rs"]
mod common;

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the checkout benchmark runs on Linux only");
}

#[cfg(target_os = "linux")]
mod linux {
    use std::error::Error;
    use std::fmt::Write as _;
    use std::fs;
    use std::io::Write as _;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::Instant;

    use crate::common::*;

    type Res<T> = Result<T, Box<dyn Error>>;

    const SECTION: &str = "checkout";

    struct Env {
        bin: PathBuf,
        data: PathBuf,
        home: PathBuf,
    }

    /// Runs `program ARGS` in `root`; it must exit 0. Its time, spawn to
    /// exit.
    fn run(env: &Env, program: &Path, root: &Path, args: &[&str]) -> Res<f64> {
        let start = Instant::now();
        let out = Command::new(program)
            .args(args)
            .current_dir(root)
            .env("TURNBACK_DATA_DIR", &env.data)
            .env("HOME", &env.home)
            .env("TURNBACK_NO_BACKGROUND", "1")
            .env("TURNBACK_FSMONITOR", "off")
            .output()?;
        let took = start.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!(
                "{} {} in {}: {}",
                program.display(),
                args.join(" "),
                root.display(),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(took)
    }

    fn tb(env: &Env, root: &Path, args: &[&str]) -> Res<f64> {
        run(env, &env.bin, root, args)
    }

    fn git(env: &Env, root: &Path, args: &[&str]) -> Res<f64> {
        run(env, Path::new("git"), root, args)
    }

    /// A folder holding `files`, committed to git (turnback's marker left
    /// out of git's view), with turnback's first snapshot taken.
    fn prepare(env: &Env, root: &Path, files: &[(String, Vec<u8>)]) -> Res<()> {
        for (rel, bytes) in files {
            let path = root.join(rel);
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)?;
            }
            fs::write(path, bytes)?;
        }
        git(env, root, &["init", "-q"])?;
        fs::write(root.join(".git/info/exclude"), ".turnback/\n")?;
        git(env, root, &["add", "-A"])?;
        git(
            env,
            root,
            &[&GIT_AS_BENCH[..], &["commit", "-q", "-m", "tree"]].concat(),
        )?;
        tb(env, root, &["snapshot", "--turn", "first"])?;
        tb(env, root, &["snapshot", "--turn", "first", "--after"])?;
        Ok(())
    }

    /// Appends a line to every file.
    fn modify(root: &Path, files: &[(String, Vec<u8>)], rep: usize) -> Res<()> {
        for (rel, _) in files {
            let mut f = fs::OpenOptions::new().append(true).open(root.join(rel))?;
            writeln!(f, "changed in repetition {rep}")?;
        }
        Ok(())
    }

    /// Every file holds its original bytes again.
    fn check(root: &Path, files: &[(String, Vec<u8>)], who: &str) -> Res<()> {
        for (rel, bytes) in files {
            if fs::read(root.join(rel))? != *bytes {
                return Err(format!("after {who}: {rel} is not as it was").into());
            }
        }
        Ok(())
    }

    /// turnback's side of one repetition in `root`: the turn recorded as a
    /// shell command's, then its rewind timed.
    fn turnback_rep(env: &Env, root: &Path, files: &[(String, Vec<u8>)], rep: usize) -> Res<f64> {
        let turn = format!("t{rep}");
        tb(env, root, &["snapshot", "--turn", &turn])?;
        modify(root, files, rep)?;
        tb(env, root, &["snapshot", "--turn", &turn, "--after"])?;
        sync_fs(root)?;
        let took = tb(env, root, &["rewind", &turn])?;
        check(root, files, "turnback rewind")?;
        // What the rewind left to the background, untimed.
        tb(env, root, &["maintain"])?;
        sync_fs(root)?;
        Ok(took)
    }

    /// git's side of one repetition in `root`.
    fn git_rep(env: &Env, root: &Path, files: &[(String, Vec<u8>)], rep: usize) -> Res<f64> {
        modify(root, files, rep)?;
        sync_fs(root)?;
        let took = git(env, root, &["checkout", "--", "."])?;
        check(root, files, "git checkout")?;
        sync_fs(root)?;
        Ok(took)
    }

    pub fn main() -> Res<()> {
        let (reps, write) = reps_and_write(7)?;
        let source = std::env::var_os("TURNBACK_BENCH_TREE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include"));
        let limit = env_usize("TURNBACK_BENCH_FILES", 4686)?;
        let tmp = bench_tmp();
        let m = machine(&tmp)?;
        let rels = regular_files(&source)?;
        if rels.len() < limit {
            return Err(format!(
                "{} holds only {} regular files, {limit} wanted; set TURNBACK_BENCH_FILES or TURNBACK_BENCH_TREE",
                source.display(),
                rels.len()
            )
            .into());
        }
        let mut files = Vec::with_capacity(limit);
        for rel in rels.into_iter().take(limit) {
            let bytes = fs::read(source.join(&rel))?;
            files.push((rel, bytes));
        }
        let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
        let base = tempfile::Builder::new()
            .prefix("turnback-bench-checkout-")
            .tempdir_in(&tmp)?;
        let home = base.path().join("home");
        fs::create_dir_all(&home)?;
        let env = Env {
            bin: PathBuf::from(env!("CARGO_BIN_EXE_turnback")),
            data: base.path().join("data"),
            home,
        };

        // Back to back in one folder.
        let one = base.path().join("one");
        eprintln!("preparing {} ...", one.display());
        prepare(&env, &one, &files)?;
        let (mut one_tb, mut one_git) = (Vec::new(), Vec::new());
        for rep in 0..reps {
            eprintln!("back to back: repetition {}/{reps} ...", rep + 1);
            one_tb.push(turnback_rep(&env, &one, &files, rep)?);
            one_git.push(git_rep(&env, &one, &files, rep)?);
        }

        // Copies kept: all made first, the turns recorded, none deleted.
        let mut copies = Vec::new();
        for rep in 0..reps {
            for side in ["tb", "git"] {
                let root = base.path().join(format!("copy-{side}-{rep}"));
                eprintln!("preparing {} ...", root.display());
                prepare(&env, &root, &files)?;
                copies.push((side, rep, root));
            }
        }
        let (mut kept_tb, mut kept_git) = (Vec::new(), Vec::new());
        for (side, rep, root) in &copies {
            eprintln!("copies kept: {side} repetition {}/{reps} ...", rep + 1);
            match *side {
                "tb" => kept_tb.push(turnback_rep(&env, root, &files, *rep)?),
                _ => kept_git.push(git_rep(&env, root, &files, *rep)?),
            }
        }

        let mut body = String::new();
        writeln!(
            body,
            "## Checkout: a full-tree rewind against `git checkout -- .`\n\n\
             Written by `cargo bench -p turnback-cli --bench checkout` on {} at commit {}, {}, release build; \
             load average {} at the start, {} at the end (the machine is shared). git {}. \
             The tree: the first {} regular files of `{}` ({} MiB), every one modified by the turn \
             (a line appended, recorded as a shell command's turn); the rewind makes its files durable, \
             git's checkout does not. Medians of {reps} repetitions, each a process, spawn to exit, \
             after `sync -f`; every file checked after each.\n",
            today(),
            commit(),
            rustc_version(),
            m.load_start,
            load_average(),
            git_version(),
            thousands(limit as u64),
            source.display(),
            total / (1 << 20),
        )?;
        writeln!(body, "{}", m.lines(""))?;
        writeln!(
            body,
            "| protocol | `turnback rewind` | `git checkout -- .` | rewind ÷ checkout | target |"
        )?;
        writeln!(body, "|---|---:|---:|---:|---|")?;
        for (name, t, g) in [
            (
                "back to back in one folder (alternating)",
                &one_tb,
                &one_git,
            ),
            ("copies kept, none deleted", &kept_tb, &kept_git),
        ] {
            writeln!(
                body,
                "| {name} | {} | {} | {:.2}x | ≤ 1x |",
                time_cell(t),
                time_cell(g),
                median(t) / median(g)
            )?;
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
