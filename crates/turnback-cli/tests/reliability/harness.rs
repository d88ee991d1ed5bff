//! The fault-injection harness: labs (a project with a canary folder beside
//! it), the real binary run plainly or under strace, and the one checker of
//! the store's promises that every fault test runs afterwards.
//!
//! The invariants, as checked by [`Checker`]:
//! - I1: the log parses (only a torn final line may be dropped), the log
//!   from before the fault is a prefix of the log after it (unless the
//!   command may rewrite the log, as gc does), and `Store::open` succeeds;
//! - I2: every blob any record names is read back with `Store::read_blob`
//!   and hashes to its id, and its pack is a regular file;
//! - I3: every turn that must be live is live, and rewinding it (in a copy
//!   of the lab) gives back the folder as it was before it, bytes and modes;
//!   `undo` of that rewind gives back the folder as it was before the rewind
//!   (after the rollback of an interrupted operation, which every mutation
//!   does first);
//! - I4: the canary folder outside the root is unchanged;
//! - I5: right after the fault, every path holds what it held before the
//!   command or what the complete command leaves there, nothing else (stray
//!   temporary files are counted separately); after recovery the folder is
//!   exactly what the complete command leaves;
//! - I6: recovery (opening the store and running a gc that keeps everything,
//!   which cuts a torn line and sweeps temporary and unreferenced packs)
//!   run twice leaves the store byte-identical to running it once;
//! - I7: after a fault in a rewind or undo, the rollback the next mutation
//!   does first leaves the folder exactly as before the command (or as
//!   after it, when its record landed), with no temporary file or
//!   directory of the interrupted command left.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use turnback::log::{self, Op, Pre, Record};
use turnback::{BlobId, GcOptions, RewindOptions, Store, TurnId};

pub type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_turnback");

/// The marker turnback puts in the names of its temporary files.
pub const TEMP_MARK: &str = ".turnback-tmp-";

/// Whether the long mode is on (`TURNBACK_LONG=1`).
pub fn long_mode() -> bool {
    std::env::var("TURNBACK_LONG").is_ok_and(|v| v == "1")
}

#[path = "../common/rng.rs"]
mod rng;
pub use rng::Rng;

/// Says why a test that needs a tool cannot run, and fails: a fault test
/// that injected no fault proves nothing, so a missing tool is never a
/// pass. `.ci/run` installs the tools; on a machine without them,
/// `TURNBACK_ALLOW_SKIP=1` lets such tests return early with the reason
/// printed (never in CI).
pub fn skip_or_fail(test: &str, reason: &str) -> Res {
    if std::env::var_os("TURNBACK_ALLOW_SKIP").is_none_or(|v| v != "1") {
        return Err(format!(
            "{test}: cannot run here: {reason} (.ci/run installs what it needs; TURNBACK_ALLOW_SKIP=1 skips it on purpose)"
        )
        .into());
    }
    println!("SKIPPED {test}: {reason}");
    eprintln!("SKIPPED {test}: {reason}");
    Ok(())
}

#[path = "../common/strace.rs"]
mod strace;
pub use strace::strace_problem;

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Link(PathBuf),
    Dir { mode: u32 },
    Other,
}

/// `/`-separated relative path to entry.
pub type Tree = BTreeMap<String, Node>;

/// Reads a folder without following symlinks; top-level names in `skip`
/// are left out.
pub fn snapshot(root: &Path, skip: &[&str]) -> Res<Tree> {
    let mut out = Tree::new();
    walk(root, "", skip, &mut out)?;
    Ok(out)
}

/// The project as the user sees it (the store left out).
pub fn project_tree(root: &Path) -> Res<Tree> {
    snapshot(root, &[".turnback"])
}

fn walk(dir: &Path, prefix: &str, skip: &[&str], out: &mut Tree) -> Res {
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    for name in names {
        let name = name
            .into_string()
            .map_err(|n| format!("non-UTF-8 name {n:?}"))?;
        if prefix.is_empty() && skip.contains(&name.as_str()) {
            continue;
        }
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let path = dir.join(&name);
        let meta = std::fs::symlink_metadata(&path)?;
        let mode = meta.permissions().mode() & 0o7777;
        let ft = meta.file_type();
        if ft.is_symlink() {
            out.insert(rel, Node::Link(std::fs::read_link(&path)?));
        } else if ft.is_dir() {
            out.insert(rel.clone(), Node::Dir { mode });
            walk(&path, &rel, skip, out)?;
        } else if ft.is_file() {
            let bytes = std::fs::read(&path)?;
            out.insert(rel, Node::File { bytes, mode });
        } else {
            out.insert(rel, Node::Other);
        }
    }
    Ok(())
}

/// How two trees differ, for messages.
pub fn diff(want: &Tree, got: &Tree) -> String {
    let mut lines = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => lines.push(format!("  missing {k} ({})", show(v))),
            Some(g) if g != v => {
                lines.push(format!("  differs {k}: want {}, got {}", show(v), show(g)))
            }
            Some(_) => {}
        }
    }
    for (k, v) in got {
        if !want.contains_key(k) {
            lines.push(format!("  unexpected {k}: {}", show(v)));
        }
    }
    lines.join("\n")
}

fn show(n: &Node) -> String {
    match n {
        Node::File { bytes, mode } => format!(
            "file {mode:o} {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
        ),
        Node::Link(t) => format!("symlink -> {}", t.display()),
        Node::Dir { mode } => format!("dir {mode:o}"),
        Node::Other => "special file".into(),
    }
}

/// Copies a folder: files with their modes, symlinks as symlinks,
/// directories with their modes (set after their contents).
pub fn copy_tree(from: &Path, to: &Path) -> Res {
    std::fs::create_dir_all(to)?;
    let mut names: Vec<_> = std::fs::read_dir(from)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    for name in names {
        let (src, dst) = (from.join(&name), to.join(&name));
        let meta = std::fs::symlink_metadata(&src)?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if ft.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ft.is_file() {
            std::fs::copy(&src, &dst)?;
        } else {
            continue;
        }
        if !ft.is_symlink() {
            std::fs::set_permissions(&dst, meta.permissions())?;
        }
    }
    Ok(())
}

/// Writes a file as an agent or the user would (no turnback), with a mode.
pub fn put(root: &Path, rel: &str, bytes: &[u8], mode: u32) -> Res {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if std::fs::symlink_metadata(&p).is_ok_and(|m| !m.is_dir()) {
        std::fs::remove_file(&p)?;
    }
    std::fs::write(&p, bytes)?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// A temporary folder holding `project/` (the root) and `canary/` beside
/// it, which nothing may change.
pub struct Lab {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub root: PathBuf,
    pub canary: PathBuf,
}

impl Lab {
    pub fn new() -> Res<Lab> {
        Lab::new_in(None)
    }

    /// A lab under `parent` (a small tmpfs, say) or the system temp folder.
    pub fn new_in(parent: Option<&Path>) -> Res<Lab> {
        let tmp = match parent {
            Some(p) => tempfile::Builder::new().prefix("lab-").tempdir_in(p)?,
            None => tempfile::Builder::new().prefix("turnback-rel-").tempdir()?,
        };
        let base = std::fs::canonicalize(tmp.path())?;
        let root = base.join("project");
        let canary = base.join("canary");
        std::fs::create_dir(&root)?;
        keep_store_in_project(&root)?;
        std::fs::create_dir(&canary)?;
        put(
            &canary,
            "victim.txt",
            b"outside the project: never touched\n",
            0o644,
        )?;
        put(&canary, "sub/deep.txt", b"deep outside\n", 0o600)?;
        std::os::unix::fs::symlink("victim.txt", canary.join("link"))?;
        Ok(Lab {
            _tmp: tmp,
            base,
            root,
            canary,
        })
    }

    /// An empty lab folder: neither project nor canary exists yet (the
    /// caller lays them out, as the power-loss simulation does).
    pub fn empty() -> Res<Lab> {
        let tmp = tempfile::Builder::new().prefix("turnback-rel-").tempdir()?;
        let base = std::fs::canonicalize(tmp.path())?;
        Ok(Lab {
            root: base.join("project"),
            canary: base.join("canary"),
            base,
            _tmp: tmp,
        })
    }

    /// A fresh lab holding a copy of `template`'s project (store included)
    /// and canary.
    pub fn copy_of(template: &Lab) -> Res<Lab> {
        let tmp = tempfile::Builder::new().prefix("turnback-rel-").tempdir()?;
        let base = std::fs::canonicalize(tmp.path())?;
        let root = base.join("project");
        let canary = base.join("canary");
        copy_tree(&template.root, &root)?;
        copy_tree(&template.canary, &canary)?;
        Ok(Lab {
            _tmp: tmp,
            base,
            root,
            canary,
        })
    }

    /// A scratch folder inside the lab (beside the project, not in it).
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    pub fn log_path(&self) -> PathBuf {
        self.root.join(".turnback").join(log::LOG_FILE)
    }

    /// The log's bytes (empty when there is no log yet).
    pub fn log_bytes(&self) -> Vec<u8> {
        std::fs::read(self.log_path()).unwrap_or_default()
    }
}

/// The binary with a cleared environment, in `root`, with `--root root`.
pub fn tb(root: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    base_env(&mut cmd);
    cmd.current_dir(root).arg("--root").arg(root);
    cmd
}

fn base_env(cmd: &mut Command) {
    cmd.env_clear().env(
        "TURNBACK_DATA_DIR",
        std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
    );
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    // The same thread count on every machine, so syscall counts per thread
    // (what strace's `when=` counts) do not depend on the core count.
    cmd.env("RAYON_NUM_THREADS", "2");
    // No background process outlives a command (see `maintain`).
    cmd.env("TURNBACK_NO_BACKGROUND", "1");
}

/// A command line for the binary: arguments after `--root`, and what goes
/// to its standard input.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub args: Vec<String>,
    pub stdin: Vec<u8>,
    /// Environment variables set for the command (over the cleared base).
    pub env: Vec<(String, String)>,
}

impl Invocation {
    pub fn new(args: &[&str]) -> Invocation {
        Invocation {
            args: args.iter().map(|s| s.to_string()).collect(),
            stdin: Vec::new(),
            env: Vec::new(),
        }
    }

    pub fn with_env(mut self, key: &str, value: &str) -> Invocation {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn with_stdin(mut self, bytes: &[u8]) -> Invocation {
        self.stdin = bytes.to_vec();
        self
    }

    /// The first argument (the subcommand).
    pub fn name(&self) -> &str {
        self.args.first().map_or("", String::as_str)
    }
}

/// Runs `inv` in `root`, optionally under a wrapper (strace and its options).
pub fn run(root: &Path, inv: &Invocation, wrapper: &[String]) -> Res<Output> {
    let mut cmd = if wrapper.is_empty() {
        tb(root)
    } else {
        let mut c = Command::new(&wrapper[0]);
        base_env(&mut c);
        c.args(&wrapper[1..])
            .arg("--")
            .arg(BIN)
            .arg("--root")
            .arg(root)
            .current_dir(root);
        c
    };
    cmd.args(&inv.args)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().ok_or("stdin is piped")?;
        // A child killed before it reads its input closes the pipe.
        let _ = stdin.write_all(&inv.stdin);
    }
    let out = child.wait_with_output()?;
    if wrapper.is_empty() && out.status.success() {
        maintain(root)?;
    }
    Ok(out)
}

/// Does, in the foreground, the work a command leaves for the background
/// `turnback maintain` (storing the files a rewind or undo kept aside),
/// which the harness keeps from starting (`TURNBACK_NO_BACKGROUND`): a
/// process still running while the checker reads the folder and the store
/// raced it (the crash sweep of undo read `aside/` while one removed it).
/// After a traced run nothing is done: the folder is checked as the fault
/// left it.
fn maintain(root: &Path) -> Res {
    if !root.join(".turnback").exists() {
        return Ok(());
    }
    let out = tb(root).arg("maintain").stdin(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(format!("turnback maintain after the command:\n{}", texts(&out)).into());
    }
    Ok(())
}

/// strace options that kill the traced process at the `n`th call of
/// `syscall` (counted per thread), before the call runs.
pub fn kill_at(syscall: &str, n: u64) -> Vec<String> {
    strace_inject(syscall, &format!("signal=KILL:when={n}"))
}

/// strace options that inject `what` (e.g. `error=ENOSPC:when=3+`) into
/// `syscall`.
pub fn strace_inject(syscall: &str, what: &str) -> Vec<String> {
    vec![
        "strace".into(),
        "-f".into(),
        "-qq".into(),
        "-o".into(),
        "/dev/null".into(),
        "-e".into(),
        format!("trace={syscall}"),
        "-e".into(),
        format!("inject={syscall}:{what}"),
    ]
}

/// Whether a run under `kill_at` was killed (strace re-raises the signal).
pub fn was_killed(out: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    out.status.signal() == Some(9) || out.status.code() == Some(128 + 9)
}

/// The system calls of one complete run, from a full `strace -f -y` trace.
#[derive(Debug, Default)]
pub struct Calls {
    /// Per syscall, the most calls any one thread made (strace's `when=`
    /// counts per thread).
    pub max: BTreeMap<String, u64>,
    /// Per syscall, each call of the main thread in order, when it touched
    /// the lab (a path or descriptor under it, not the loader or the
    /// runtime): its traced line.
    pub main: BTreeMap<String, Vec<Option<String>>>,
}

impl Calls {
    /// Whether failing call `n` (and, with `forever`, every later one) of
    /// `syscall` hits a call turnback makes on the lab for which `fails`
    /// says the error is realistic.
    pub fn hits_lab(
        &self,
        syscall: &str,
        n: u64,
        forever: bool,
        fails: impl Fn(&str) -> bool,
    ) -> bool {
        let Some(calls) = self.main.get(syscall) else {
            return false;
        };
        let from = (n as usize).saturating_sub(1);
        let hit = |c: &Option<String>| c.as_deref().is_some_and(&fails);
        if forever {
            calls.iter().skip(from).any(hit)
        } else {
            calls.get(from).is_some_and(hit)
        }
    }
}

/// Whether a traced call names a path or descriptor under `lab` (the
/// working directory that `-y` shows for `AT_FDCWD` does not count).
fn touches(call: &str, lab: &str) -> bool {
    let mut rest = call;
    let mut cleaned = String::new();
    while let Some(i) = rest.find("AT_FDCWD<") {
        cleaned.push_str(&rest[..i]);
        rest = rest[i..].split_once('>').map_or("", |(_, r)| r);
    }
    cleaned.push_str(rest);
    cleaned.contains(lab)
}

/// Traces one complete run of `inv` in a copy of `template`.
pub fn count_syscalls(template: &Lab, inv: &Invocation) -> Res<Calls> {
    count_syscalls_in(Lab::copy_of(template)?, inv)
}

/// Traces one complete run of `inv` in `lab`.
pub fn count_syscalls_in(lab: Lab, inv: &Invocation) -> Res<Calls> {
    let trace = lab.scratch("trace.txt");
    let wrapper: Vec<String> = ["strace", "-f", "-qq", "-y", "-o"]
        .iter()
        .map(|s| s.to_string())
        .chain([trace.display().to_string()])
        .collect();
    let out = run(&lab.root, inv, &wrapper)?;
    if !out.status.success() {
        return Err(format!(
            "{:?} under strace failed: {}",
            inv.args,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = std::fs::read_to_string(&trace)?;
    let lab_path = lab.base.display().to_string();
    let mut per: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut calls = Calls::default();
    let mut main_tid: Option<String> = None;
    for line in text.lines() {
        let mut parts = line.splitn(2, ' ');
        let (Some(tid), Some(rest)) = (parts.next(), parts.next()) else {
            continue;
        };
        let rest = rest.trim_start();
        if rest.starts_with('<') || rest.starts_with('+') || rest.starts_with('-') {
            continue;
        }
        let Some(name) = rest.split('(').next() else {
            continue;
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        // A call this strace has no name for (`syscall_0x1d1`: listxattrat,
        // newer than it) cannot be named in an injection either. The one a
        // rewind makes asks a question and changes nothing, so a kill there
        // is a kill before the next call, which the sweep samples.
        if name.starts_with("syscall_0x") {
            continue;
        }
        let main = main_tid.get_or_insert_with(|| tid.to_owned());
        if main == tid {
            calls
                .main
                .entry(name.to_owned())
                .or_default()
                .push(touches(rest, &lab_path).then(|| rest.to_owned()));
        }
        *per.entry((name.to_owned(), tid.to_owned())).or_default() += 1;
    }
    for ((name, _), n) in per {
        let e = calls.max.entry(name).or_default();
        *e = (*e).max(n);
    }
    Ok(calls)
}

/// What the checker found besides violations.
#[derive(Debug, Default, Clone)]
pub struct Found {
    /// A torn final log line after the fault.
    pub torn_tail: bool,
    /// Blobs re-read and verified.
    pub blobs_verified: usize,
    /// Rewinds checked in copies.
    pub rewinds_checked: usize,
}

/// The expectations for one lab: what each live turn rewinds to, what the
/// folder may hold right after a fault, and the canary.
#[derive(Clone)]
pub struct Checker {
    /// Turns that must be live, oldest first, each with the folder as it
    /// was just before it.
    pub must_live: Vec<(String, Tree)>,
    /// Turns that may be live (an interrupted capture's), with the folder
    /// before them.
    pub may_live: Vec<(String, Tree)>,
    /// The canary as it must stay.
    pub canary: Tree,
    /// Whether the command may replace the log (gc compacts it).
    pub log_may_be_rewritten: bool,
}

impl Checker {
    /// I1: the log parses (torn final line allowed), the earlier log is a
    /// prefix of it, and the store opens.
    pub fn check_log(&self, lab: &Lab, before: &[u8], found: &mut Found) -> Res<Vec<Record>> {
        let bytes = lab.log_bytes();
        let parsed = log::parse(&bytes, 1);
        let mut records = Vec::new();
        for (line, rec) in parsed.lines {
            records.push(rec.map_err(|e| format!("I1: log line {line} does not parse: {e}"))?);
        }
        found.torn_tail |= parsed.torn.is_some();
        if !self.log_may_be_rewritten && !bytes.starts_with(before) {
            return Err(format!(
                "I1: the log before the command ({} bytes) is not a prefix of the log after it ({} bytes)",
                before.len(),
                bytes.len()
            )
            .into());
        }
        let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
        if seqs.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("I1: sequence numbers do not increase: {seqs:?}").into());
        }
        Store::open(&lab.root).map_err(|e| format!("I1: the store does not open: {e}"))?;
        Ok(records)
    }

    /// I2: every blob named by a record reads back and hashes to its id,
    /// from a pack that is a regular file.
    pub fn check_blobs(&self, lab: &Lab, found: &mut Found) -> Res {
        let records = log::parse(&lab.log_bytes(), 1);
        let store = Store::open(&lab.root).map_err(|e| format!("I2: store does not open: {e}"))?;
        let mut ids: BTreeSet<BlobId> = BTreeSet::new();
        let mut packs: BTreeSet<String> = BTreeSet::new();
        for (_, rec) in parsed_ok(records) {
            let (pack, blobs, files) = match &rec.op {
                Op::Capture {
                    pack, blobs, files, ..
                }
                | Op::Saved { pack, blobs, files }
                | Op::Packed {
                    pack, blobs, files, ..
                } => (pack, blobs, files),
                _ => continue,
            };
            for b in blobs {
                ids.insert(b.id);
                if let Some(p) = b.pack.as_ref().or(pack.as_ref()) {
                    packs.insert(p.clone());
                }
            }
            for f in files {
                if let Pre::File { blob, .. } = &f.pre {
                    ids.insert(*blob);
                }
            }
        }
        for p in &packs {
            let path = lab.root.join(".turnback/packs").join(p);
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| format!("I2: pack {p} named by the log: {e}"))?;
            if !meta.file_type().is_file() {
                return Err(format!("I2: pack {p} is not a regular file").into());
            }
        }
        for id in &ids {
            let bytes = store
                .read_blob(id)
                .map_err(|e| format!("I2: blob {id} does not read back: {e}"))?;
            if turnback::pack::hash_bytes(&bytes) != *id {
                return Err(format!("I2: blob {id} read back with other bytes").into());
            }
        }
        found.blobs_verified += ids.len();
        Ok(())
    }

    /// I3: the turns that must be live are, and each live turn with a known
    /// earlier folder rewinds to it exactly in a copy of the lab; undo of
    /// that rewind gives back the folder as it was before the rewind.
    pub fn check_rewinds(&self, lab: &Lab, found: &mut Found) -> Res {
        let store = Store::open(&lab.root)?;
        let live: Vec<String> = store.turns()?.iter().map(|t| t.id.to_string()).collect();
        for (id, _) in &self.must_live {
            if !live.contains(id) {
                return Err(
                    format!("I3: acknowledged turn {id} is not live (live: {live:?})").into(),
                );
            }
        }
        drop(store);
        for (k, (id, want)) in self.must_live.iter().chain(&self.may_live).enumerate() {
            if !live.contains(id) {
                continue;
            }
            let copy = lab.scratch(&format!("rewind-check-{k}"));
            copy_tree(&lab.root, &copy)?;
            let mut store = Store::open(&copy)?;
            // The rewind first rolls back an operation interrupted before
            // its record: its undo gives back the folder from there. Stray
            // temporary files are judged by check_midway, and a rewind
            // sweeps them: leave them out of the comparison.
            store.ensure_created()?;
            let now = without_temps(project_tree(&copy)?);
            let report = store.rewind(&TurnId::new(id.as_str())?, &RewindOptions::default())?;
            if !report.complete() {
                return Err(format!("I3: rewind of {id} incomplete: {:?}", report.failed).into());
            }
            let got = without_temps(project_tree(&copy)?);
            if &got != want {
                return Err(format!(
                    "I3: rewinding {id} does not give back the folder before it:\n{}",
                    diff(want, &got)
                )
                .into());
            }
            let undo = store.undo()?;
            if !undo.complete() {
                return Err(format!(
                    "I3: undo of the rewind of {id} incomplete: {:?}",
                    undo.failed
                )
                .into());
            }
            let back = without_temps(project_tree(&copy)?);
            if back != now {
                return Err(format!(
                    "I3: undo of the rewind of {id} does not give back the folder before the rewind:\n{}",
                    diff(&now, &back)
                )
                .into());
            }
            std::fs::remove_dir_all(&copy)?;
            found.rewinds_checked += 1;
        }
        Ok(())
    }

    /// I4: the canary is unchanged.
    pub fn check_canary(&self, lab: &Lab) -> Res {
        let got = snapshot(&lab.canary, &[])?;
        if got != self.canary {
            return Err(format!(
                "I4: the canary outside the root changed:\n{}",
                diff(&self.canary, &got)
            )
            .into());
        }
        Ok(())
    }
}

/// A tree without turnback's temporary files.
pub fn without_temps(mut tree: Tree) -> Tree {
    tree.retain(|k, _| !k.contains(TEMP_MARK));
    tree
}

fn parsed_ok(p: log::Parsed) -> impl Iterator<Item = (usize, Record)> {
    p.lines
        .into_iter()
        .filter_map(|(n, r)| r.ok().map(|r| (n, r)))
}

/// I5 right after a fault: every path holds what one of `allowed` holds
/// there (or is absent where one of them has nothing). Temporary files are
/// returned, not judged.
pub fn check_midway(root: &Path, allowed: &[&Tree]) -> Res<Vec<String>> {
    let now = project_tree(root)?;
    let mut temps = Vec::new();
    let mut keys: BTreeSet<&String> = now.keys().collect();
    for t in allowed {
        keys.extend(t.keys());
    }
    for k in keys {
        if k.contains(TEMP_MARK) {
            if now.contains_key(k) {
                temps.push(k.clone());
            }
            continue;
        }
        let got = now.get(k);
        if !allowed.iter().any(|t| t.get(k) == got) {
            let want: Vec<String> = allowed
                .iter()
                .map(|t| t.get(k).map_or("absent".into(), show))
                .collect();
            return Err(format!(
                "I5: {k} holds {} after the fault; allowed: {}",
                got.map_or("nothing".into(), show),
                want.join(" or ")
            )
            .into());
        }
    }
    Ok(temps)
}

/// I7, after a fault in a rewind or undo: the rollback of the interrupted
/// operation, which the next mutation does first, leaves the folder
/// exactly as it was before the command, or as the complete command leaves
/// it when its record landed: temporary files and directories it made
/// included. Run in a copy; returns which of the two it was (true: before).
pub fn check_settled(lab: &Lab, before: &Tree, after: &Tree) -> Res<bool> {
    let copy = lab.scratch("settle-check");
    copy_tree(&lab.root, &copy)?;
    Store::open(&copy)?
        .ensure_created()
        .map_err(|e| format!("I7: the next mutation fails: {e}"))?;
    let got = project_tree(&copy)?;
    std::fs::remove_dir_all(&copy)?;
    if &got == before {
        return Ok(true);
    }
    if &got != after {
        return Err(format!(
            "I7: after the rollback of the interrupted command the folder is neither as before it nor as after it; against before:\n{}",
            diff(before, &got)
        )
        .into());
    }
    Ok(false)
}

/// Whether a command is a rewind or an undo (a fault leaves it half
/// applied until the next mutation rolls it back).
pub fn rolls_back(inv: &Invocation) -> bool {
    matches!(inv.name(), "rewind" | "undo")
}

/// Limits under which gc keeps every turn and operation.
pub fn keep_everything() -> GcOptions {
    GcOptions {
        keep_turns: Some(usize::MAX),
        keep_days: Some(u64::MAX / 86_400 / 1_000_000_000),
        max_size: Some(u64::MAX),
    }
}

/// Makes the project keep its store in `.turnback/`: the fault tests trace
/// every system call a command makes on the lab, so the store must be in
/// the lab. Its files and their write order are the same wherever it lives.
pub fn keep_store_in_project(root: &Path) -> Res {
    put(root, ".turnback/store.toml", b"in_project = true\n", 0o644)
}

/// Recovery: open the store and run a gc that keeps everything (it cuts a
/// torn final line, sweeps temporary packs and deletes unreferenced ones).
/// A project without a store stays without one.
pub fn recover(root: &Path) -> Res {
    let only_marker = |e: std::io::Result<std::fs::DirEntry>| {
        e.is_ok_and(|e| matches!(e.file_name().to_str(), Some("store.toml" | ".gitignore")))
    };
    if std::fs::read_dir(root.join(".turnback")).map_or(true, |mut d| d.all(only_marker)) {
        return Ok(());
    }
    let mut store = Store::open(root).map_err(|e| format!("recovery: open: {e}"))?;
    store
        .gc(&keep_everything())
        .map_err(|e| format!("recovery: gc: {e}"))?;
    Ok(())
}

/// I6: recovery twice leaves everything (store bytes included) as once.
/// Also checks that recovery left no temporary pack behind.
pub fn check_recovery_idempotent(lab: &Lab) -> Res {
    recover(&lab.root)?;
    let once = snapshot(&lab.root, &[])?;
    recover(&lab.root)?;
    let twice = snapshot(&lab.root, &[])?;
    if once != twice {
        return Err(format!(
            "I6: recovering twice differs from once:\n{}",
            diff(&once, &twice)
        )
        .into());
    }
    if let Some(stray) = once
        .keys()
        .find(|k| k.starts_with(".turnback/") && k.contains(TEMP_MARK))
    {
        return Err(format!("I6: temporary file {stray} in the store survived recovery").into());
    }
    Ok(())
}

/// Text of a finished command, for messages.
pub fn texts(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
