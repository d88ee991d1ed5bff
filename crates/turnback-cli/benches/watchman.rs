//! The Watchman benchmark: what a shell command's two snapshots cost when
//! Watchman says what changed, against the scan of the whole tree and
//! against `git status` with git's own Watchman hook, on generated trees,
//! all in the same run. The figures are printed and written to a marked
//! section of `docs/BENCHMARKS.md` (other sections are left alone).
//!
//! ```text
//! cargo bench -p turnback-cli --bench watchman [-- --reps N]
//! ```
//!
//! Linux, with `watchman` and `git` on PATH. The benchmark starts its own
//! Watchman server (its own socket, state file, log and pid file in the
//! run's folder) and stops it; turnback finds it through `WATCHMAN_SOCK`,
//! git's hook (`fsmonitor-watchman.sample` from git's templates, as
//! `core.fsmonitor`, with `core.untrackedCache`) through a `watchman`
//! wrapper first on its PATH that adds `--sockname` (Watchman 4.9's
//! command ignores `WATCHMAN_SOCK`).
//!
//! Per tree (`TURNBACK_BENCH_WATCHMAN_FILES`, default `100000,1000000`
//! files, 100 per directory, each a line of text, a thousand distinct
//! contents): two copies of the tree, each with its store in its own data
//! directory, one with `TURNBACK_FSMONITOR=watchman` (and git's
//! repository), one with `off`; every change is made to both; every timed
//! call is the release binary as a process, as a hook runs it; the
//! `turnback maintain` that a command starts in the background once it
//! has answered is waited for (untimed) before the next timed call, as it
//! ends while an agent waits for its model, so that the two never share
//! the CPU. Rows:
//! 1. the first snapshot after Watchman starts (store empty: everything
//!    stored; Watchman's crawl begins, and the snapshot waits for it up to
//!    its 1 s limit), against the first snapshot of the scan's store; then
//!    Watchman's crawl alone: a fresh server, `watch-project` and a synced
//!    `clock`;
//! 2. a snapshot pair (before and after halves) around a command that
//!    changes nothing, Watchman against the scan, and `git status`;
//! 3. the pair around a command that appends a line to 100 files, each
//!    half recording all 100 checked, and `git status` showing them;
//! 4. Claude Code's PreToolUse and PostToolUse hooks of a shell command
//!    (`turnback hook claude-code`, the fixture events) against the same
//!    hooks in a generated 500-file project, with Watchman both.
//!
//! Settings: `--reps N` / `TURNBACK_BENCH_REPS` (default 5),
//! `TURNBACK_BENCH_WATCHMAN_FILES`, `TURNBACK_BENCH_HOOK_RUNS` (hook
//! calls per repetition, default 10), `TURNBACK_BENCH_TMP`, `--no-write`.

#[path = "../../turnback/benches/common/mod.rs"]
mod common;

#[cfg(target_os = "linux")]
#[path = "watchman/linux.rs"]
mod linux;

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the Watchman benchmark runs on Linux only");
}
