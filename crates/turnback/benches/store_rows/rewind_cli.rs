//! Rows 4 to 6 of the store benchmark: rewinds through the release
//! `turnback` binary, as a user runs them, each against a peer measured in
//! the same run.
//!
//! 4. system calls per restored file of a full-tree rewind (`strace -c -f`
//!    of one run; skipped when strace is missing);
//! 5. a rewind of a capture turn of many generated small files (default
//!    100,000), with the peak RSS of the process (`/usr/bin/time -f %M`,
//!    the child's `getrusage`), against plain writes of the same files;
//! 6. a rewind of a one-file turn in the tree whose store already holds a
//!    full-tree turn, against `git checkout HEAD -- FILE` of the same file.

use super::*;
use std::collections::BTreeMap;

/// The release `turnback` binary of this workspace, built if needed.
pub(crate) fn cli_binary() -> Res<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "-q", "-p", "turnback-cli"])
        .current_dir(&workspace)
        .status()
        .map_err(|e| format!("cannot run cargo to build the CLI: {e}"))?;
    if !status.success() {
        return Err("cargo build --release -p turnback-cli failed".into());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let exe = target.join("release/turnback");
    if !exe.is_file() {
        return Err(format!("{} was not built", exe.display()).into());
    }
    Ok(exe)
}

/// A finished CLI run: wall time and the peak RSS in KiB (when
/// `/usr/bin/time` is there to ask the kernel for it).
struct Run {
    secs: f64,
    rss_kib: Option<u64>,
}

/// Runs `turnback ARGS` in `root`; it must exit 0.
/// With `rss`, under `/usr/bin/time` when present, to read the peak RSS:
/// that adds a process to the time, so a row whose peer is spawned
/// directly (row 6's `git checkout`) runs turnback directly too.
fn run_cli(cli: &Path, root: &Path, args: &[&str], rss: bool) -> Res<Run> {
    let rss_file = root.with_extension("rss");
    let time = Path::new("/usr/bin/time");
    let mut cmd = if rss && time.is_file() {
        let mut c = Command::new(time);
        c.arg("-f").arg("%M").arg("-o").arg(&rss_file).arg(cli);
        c
    } else {
        Command::new(cli)
    };
    cmd.args(args)
        .current_dir(root)
        .env(turnback::location::STORE_ENV, "project")
        .stdout(std::process::Stdio::null());
    let t0 = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cli.display()))?;
    let secs = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "turnback {} in {}: {}\n{}",
            args.join(" "),
            root.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let rss_kib = fs::read_to_string(&rss_file)
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| l.trim().parse().ok()));
    let _ = fs::remove_file(&rss_file);
    Ok(Run { secs, rss_kib })
}

/// Figures of rows 4 to 6.
#[derive(Default)]
pub(crate) struct CliFigures {
    /// (syscall, calls per restored file) of one strace run of the rewind
    /// process, or why none.
    pub(crate) syscalls: Option<Result<Vec<(String, f64)>, String>>,
    /// The same, of the processes it started (the background maintenance
    /// storing the files the rewind kept aside).
    pub(crate) background: Vec<(String, f64)>,
    /// The rewind process's, for the same turn sealed first: its
    /// post-images compared, so every file is read.
    pub(crate) sealed: Option<Vec<(String, f64)>>,
    pub(crate) many_files: usize,
    pub(crate) many_rewind: Vec<f64>,
    pub(crate) many_bare: Vec<f64>,
    pub(crate) many_rss_kib: Vec<f64>,
    pub(crate) many_trash: Vec<f64>,
    /// The exec turn of the same files: the peak RSS of `snapshot
    /// --after`, then the rewind's time and peak RSS.
    pub(crate) exec_after_rss_kib: Vec<f64>,
    pub(crate) exec_rewind: Vec<f64>,
    pub(crate) exec_rewind_rss_kib: Vec<f64>,
    pub(crate) one_rewind: Vec<f64>,
    pub(crate) one_git: Vec<f64>,
}

/// A tree copy with a full-tree capture turn `turn` made through the
/// library and every file then written with a line added. Returns the
/// original bytes to check the rewind against.
fn full_turn(tree: &Tree, root: &Path, turn: &str) -> Res<()> {
    copy_tree(tree, root)?;
    let rels: Vec<&str> = tree.files.iter().map(|f| f.rel.as_str()).collect();
    let mut store = Store::open(root)?;
    store.capture_many(&TurnId::new(turn)?, Some("full-tree turn"), &rels)?;
    drop(store);
    super::to_data_dir(root)?;
    for f in &tree.files {
        fs::write(root.join(&f.rel), with_line(&f.bytes, FULL_LINE))?;
    }
    Ok(())
}

fn originals(tree: &Tree) -> Vec<(&str, &[u8])> {
    tree.files
        .iter()
        .map(|f| (f.rel.as_str(), f.bytes.as_slice()))
        .collect()
}

/// Row 4, once per run: the full-tree rewind, then the same of a sealed
/// turn.
pub(crate) fn syscalls(tree: &Tree, cfg: &Config, cli: &Path, fig: &mut CliFigures) -> Res<()> {
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .iter()
        .map(Path::new)
        .find(|p| p.is_file());
    let Some(strace) = strace else {
        fig.syscalls = Some(Err("strace is not installed".into()));
        return Ok(());
    };
    for sealed in [false, true] {
        let work = TempDir::with_prefix_in("turnback-bench-strace-", &cfg.tmp)?;
        let root = work.path().join("tree");
        full_turn(tree, &root, "full")?;
        if sealed {
            run_cli(cli, &root, &["seal", "full"], false)?;
        }
        sync_fs(work.path())?;
        let traces = work.path().join("strace");
        fs::create_dir(&traces)?;
        let out = Command::new(strace)
            .args(["-f", "-ff", "-o"])
            .arg(traces.join("t"))
            .arg(cli)
            .args(["rewind", "full"])
            .current_dir(&root)
            .env(turnback::location::STORE_ENV, "project")
            .output()?;
        if !out.status.success() {
            fig.syscalls = Some(Err(format!(
                "strace of the rewind failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
            return Ok(());
        }
        verify(&root, &originals(tree), &[], true)?;
        // The background maintenance outlives the rewind: its trace ends
        // when it does.
        let (own, started) = wait_and_count(&traces, out_pid(&traces)?)?;
        let n = tree.files.len() as f64;
        let per_file = |calls: BTreeMap<String, u64>| {
            let mut v: Vec<(String, f64)> =
                calls.into_iter().map(|(c, k)| (c, k as f64 / n)).collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1));
            v
        };
        if sealed {
            fig.sealed = Some(per_file(own));
        } else {
            fig.syscalls = Some(Ok(per_file(own)));
            fig.background = per_file(started);
        }
    }
    Ok(())
}

/// The pid of the traced command: the one trace file (`t.<tid>`) no clone
/// in another made.
fn out_pid(traces: &Path) -> Res<u64> {
    let (files, parents) = clones(traces)?;
    files
        .keys()
        .copied()
        .filter(|t| !parents.contains_key(t))
        .min()
        .ok_or_else(|| "no strace output".into())
}

/// Per trace file (tid), its lines; and per tid made by a clone, (the
/// tid that made it, whether it is a thread of the same process).
#[allow(clippy::type_complexity)]
fn clones(traces: &Path) -> Res<(BTreeMap<u64, String>, BTreeMap<u64, (u64, bool)>)> {
    let mut files = BTreeMap::new();
    for e in fs::read_dir(traces)? {
        let path = e?.path();
        let tid = path
            .extension()
            .and_then(|x| x.to_str())
            .and_then(|x| x.parse::<u64>().ok())
            .ok_or_else(|| format!("unexpected trace file {}", path.display()))?;
        files.insert(tid, fs::read_to_string(&path)?);
    }
    let mut parents = BTreeMap::new();
    for (tid, text) in &files {
        for line in text.lines() {
            if !(line.starts_with("clone") || line.starts_with("fork") || line.starts_with("vfork"))
            {
                continue;
            }
            let Some(child) = line
                .rsplit_once("= ")
                .and_then(|(_, r)| r.split_whitespace().next())
                .and_then(|r| r.parse::<u64>().ok())
            else {
                continue;
            };
            parents.insert(child, (*tid, line.contains("CLONE_THREAD")));
        }
    }
    Ok((files, parents))
}

/// Waits (up to a minute) for every process the rewind `root` started to
/// end, then counts the system calls of the rewind's process (its
/// threads included) and of the others.
fn wait_and_count(traces: &Path, root: u64) -> Res<(BTreeMap<String, u64>, BTreeMap<String, u64>)> {
    for _ in 0..600 {
        let (files, _) = clones(traces)?;
        let running = files.values().any(|t| {
            !t.lines()
                .any(|l| l.starts_with("+++ exited") || l.starts_with("+++ killed"))
        });
        if !running {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (files, parents) = clones(traces)?;
    // The process of a tid: up through threads to the tid that is not one.
    let process = |mut t: u64| {
        while let Some((parent, true)) = parents.get(&t) {
            t = *parent;
        }
        t
    };
    let (mut own, mut started) = (BTreeMap::new(), BTreeMap::new());
    for (tid, text) in &files {
        let into = if process(*tid) == root {
            &mut own
        } else {
            &mut started
        };
        for line in text.lines() {
            if line.starts_with("+++") || line.starts_with("---") {
                continue;
            }
            if let Some((name, _)) = line.split_once('(') {
                *into.entry(name.to_string()).or_insert(0u64) += 1;
            }
        }
    }
    Ok((own, started))
}

/// The generated small files of row 5: `count` files in directories of
/// 100, each a few hundred bytes of text unique to it.
pub(crate) fn generated(count: usize) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let rel = format!("gen/d{:04}/f{:03}.txt", i / 100, i % 100);
            let mut bytes = Vec::new();
            for line in 0..(3 + i % 17) {
                bytes.extend_from_slice(
                    format!("file {i} line {line}: generated for the rewind benchmark\n")
                        .as_bytes(),
                );
            }
            (rel, bytes)
        })
        .collect()
}

fn write_generated(root: &Path, files: &[(String, Vec<u8>)], edit: bool) -> Res<()> {
    for (rel, bytes) in files {
        let p = root.join(rel);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d)?;
        }
        if edit {
            fs::write(&p, with_line(bytes, FULL_LINE))?;
        } else {
            fs::write(&p, bytes)?;
        }
    }
    Ok(())
}

/// Row 5, one repetition.
pub(crate) fn many_files(
    cfg: &Config,
    cli: &Path,
    files: &[(String, Vec<u8>)],
    rep: usize,
    fig: &mut CliFigures,
) -> Res<TempDir> {
    fig.many_files = files.len();
    let work = TempDir::with_prefix_in("turnback-bench-many-", &cfg.tmp)?;
    let subject = work.path().join("subject");
    let peer = work.path().join("peer");
    write_generated(&subject, files, false)?;
    write_generated(&peer, files, false)?;
    let rels: Vec<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
    let mut store = Store::open(&subject)?;
    store.capture_many(&TurnId::new("many")?, Some("generated files"), &rels)?;
    drop(store);
    super::to_data_dir(&subject)?;
    write_generated(&subject, files, true)?;
    write_generated(&peer, files, true)?;
    let writes: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(r, b)| (r.as_str(), b.as_slice()))
        .collect();
    let run_peer = |fig: &mut CliFigures| -> Res<()> {
        sync_fs(work.path())?;
        let ((), t) = timed(|| write_files(&peer, &writes))?;
        fig.many_bare.push(t);
        Ok(())
    };
    let run_subject = |fig: &mut CliFigures| -> Res<()> {
        sync_fs(work.path())?;
        let run = run_cli(cli, &subject, &["rewind", "many"], true)?;
        fig.many_rewind.push(run.secs);
        // The background removal of the trash runs to its end before the
        // next timed phase, so it never slows the peer.
        fig.many_trash.push(wait_for_trash(&subject)?);
        if let Some(kib) = run.rss_kib {
            fig.many_rss_kib.push(kib as f64);
        }
        Ok(())
    };
    if rep.is_multiple_of(2) {
        run_peer(fig)?;
        run_subject(fig)?;
    } else {
        run_subject(fig)?;
        run_peer(fig)?;
    }
    verify(&subject, &writes, &[], false)?;
    Ok(work)
}

/// Waits until the background process a rewind in `root` started has
/// emptied the trash; returns how long that took.
fn wait_for_trash(root: &Path) -> Res<f64> {
    let t0 = Instant::now();
    let trash = Store::open(root)?.trash_dir().ok_or("no data directory")?;
    while trash.exists() {
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(format!("{} still there after 120 s", trash.display()).into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Row 5's exec turn, one repetition: the same generated files
/// snapshotted before and after every one is written with a line added
/// (`turnback snapshot`, `snapshot --after`), then that turn rewound; its
/// peer is the same repetition's plain writes (`many_bare`).
pub(crate) fn many_exec(
    cfg: &Config,
    cli: &Path,
    files: &[(String, Vec<u8>)],
    fig: &mut CliFigures,
) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-exec-", &cfg.tmp)?;
    let subject = work.path().join("subject");
    write_generated(&subject, files, false)?;
    drop(Store::open(&subject)?);
    super::to_data_dir(&subject)?;
    run_cli(cli, &subject, &["snapshot", "--turn", "exec"], false)?;
    write_generated(&subject, files, true)?;
    sync_fs(work.path())?;
    let after = run_cli(
        cli,
        &subject,
        &["snapshot", "--turn", "exec", "--after"],
        true,
    )?;
    fig.exec_after_rss_kib
        .extend(after.rss_kib.map(|k| k as f64));
    sync_fs(work.path())?;
    let run = run_cli(cli, &subject, &["rewind", "exec"], true)?;
    fig.exec_rewind.push(run.secs);
    fig.exec_rewind_rss_kib
        .extend(run.rss_kib.map(|k| k as f64));
    // As after the capture turn's rewind: nothing of it runs on into the
    // next timed phase.
    wait_for_trash(&subject)?;
    let originals: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(r, b)| (r.as_str(), b.as_slice()))
        .collect();
    verify(&subject, &originals, &[], false)?;
    Ok(work)
}

/// Row 6: the tree under git (committed) with a full-tree turn in the
/// store; each repetition captures and writes one file in a new turn and
/// rewinds it, then changes the same file again and has git check it out.
pub(crate) fn one_file(
    tree: &Tree,
    cfg: &Config,
    cli: &Path,
    fig: &mut CliFigures,
) -> Res<TempDir> {
    let work = TempDir::with_prefix_in("turnback-bench-one-", &cfg.tmp)?;
    let root = work.path().join("tree");
    copy_tree(tree, &root)?;
    let git = |args: &[&str]| git_in(&root, work.path(), args);
    git(&["init", "-q"])?;
    git(&["add", "-A"])?;
    git(&["commit", "-q", "-m", "tree"])?;
    // The store holds one earlier full-tree turn.
    let rels: Vec<&str> = tree.files.iter().map(|f| f.rel.as_str()).collect();
    let mut store = Store::open(&root)?;
    store.capture_many(&TurnId::new("full")?, Some("full-tree turn"), &rels)?;
    drop(store);
    for f in &tree.files {
        fs::write(root.join(&f.rel), with_line(&f.bytes, FULL_LINE))?;
    }
    let file = &tree.files[tree.files.len() / 2];
    let edited = with_line(&with_line(&file.bytes, FULL_LINE), SMALL_LINE);
    let before = with_line(&file.bytes, FULL_LINE);
    for rep in 0..cfg.reps {
        let turn = format!("one-{rep}");
        let mut store = Store::open(&root)?;
        store.capture(&TurnId::new(&turn)?, None, &file.rel)?;
        drop(store);
        fs::write(root.join(&file.rel), &edited)?;
        sync_fs(work.path())?;
        let run = run_cli(cli, &root, &["rewind", &turn], false)?;
        fig.one_rewind.push(run.secs);
        verify(&root, &[(file.rel.as_str(), before.as_slice())], &[], false)?;
        fs::write(root.join(&file.rel), &edited)?;
        sync_fs(work.path())?;
        let ((), t) = timed(|| git(&["checkout", "HEAD", "--", &file.rel]))?;
        fig.one_git.push(t);
        verify(
            &root,
            &[(file.rel.as_str(), file.bytes.as_slice())],
            &[],
            false,
        )?;
        // Back to the state the next turn starts from.
        fs::write(root.join(&file.rel), &before)?;
    }
    Ok(work)
}

/// The rows' lines for the table, and their targets' outcomes.
pub(crate) fn render_rows(fig: &CliFigures, s: &mut String, results: &mut Vec<(String, bool)>) {
    if let Some(per_file) = &fig.syscalls {
        match per_file {
            Ok(calls) => {
                let get = |n: &str| calls.iter().find(|(c, _)| c == n).map_or(0.0, |(_, v)| *v);
                let shown: Vec<String> = calls
                    .iter()
                    .take(8)
                    .map(|(c, v)| format!("`{c}` {v:.2}"))
                    .collect();
                let openat = get("openat");
                let met = openat <= 2.0;
                let of = |v: &[(String, f64)], n: &str| {
                    v.iter().find(|(c, _)| c == n).map_or(0.0, |(_, k)| *k)
                };
                let sealed = fig.sealed.as_deref().map_or_else(
                    || "not measured".to_string(),
                    |v| format!("`openat` {:.2}", of(v, "openat")),
                );
                let _ = writeln!(
                    s,
                    "| 4. system calls per restored file of the full-tree rewind (`strace -f -ff` of `turnback rewind`, one run; the rewind's process, its threads included): {} | `openat` {openat:.2}, `close` {:.2}, `newfstatat` {:.2}; the background `turnback maintain` it starts (storing the files it kept aside, after the answer): `openat` {:.2}; the same rewind of the turn sealed first (post-images compared, so every file is read): {sealed} | the issue's measurement before this work: `openat` 17, `close` 20, `newfstatat` 11 | | | ≤ 2 `openat` per file | {} |",
                    shown.join(", "),
                    get("close"),
                    get("newfstatat"),
                    of(&fig.background, "openat"),
                    if met { "**met**" } else { "**missed**" },
                );
                results.push(("at most 2 openat per restored file".into(), met));
            }
            Err(why) => {
                let _ = writeln!(
                    s,
                    "| 4. system calls per restored file | not measured: {why} | | | | ≤ 2 `openat` per file | |"
                );
            }
        }
    }
    if !fig.many_rewind.is_empty() {
        let r = Ratio::new(&fig.many_rewind, &fig.many_bare, Some(1.0));
        let _ = writeln!(
            s,
            "| 5. `turnback rewind` of a capture turn of {} generated small files (the process, from spawn to exit) | {} | the plain writes of the same files: {} | {} |",
            thousands(fig.many_files as u64),
            time_cell(&fig.many_rewind),
            time_cell(&fig.many_bare),
            r.cells("≤ 1.0x the plain writes"),
        );
        results.push((
            format!(
                "{}-file rewind no slower than the plain writes",
                fig.many_files
            ),
            r.met() == Some(true),
        ));
        peak_rss_row(
            s,
            results,
            "5. peak RSS of that rewind",
            &fig.many_rss_kib,
            "rewind peak RSS at most 100 MB".into(),
        );
        if !fig.exec_rewind.is_empty() {
            let r = Ratio::new(&fig.exec_rewind, &fig.many_bare, Some(1.0));
            let _ = writeln!(
                s,
                "| 5. the same files as an exec turn (`turnback snapshot`, every file written, `snapshot --after`): `turnback rewind` of that turn (the process) | {} | the plain writes above: {} | {} |",
                time_cell(&fig.exec_rewind),
                time_cell(&fig.many_bare),
                r.cells("≤ 1.0x the plain writes"),
            );
            results.push((
                "exec-turn rewind no slower than the plain writes".into(),
                r.met() == Some(true),
            ));
            for (what, kib) in [
                ("`snapshot --after`", &fig.exec_after_rss_kib),
                ("that rewind", &fig.exec_rewind_rss_kib),
            ] {
                peak_rss_row(
                    s,
                    results,
                    &format!("5. exec turn: peak RSS of {what}"),
                    kib,
                    format!("exec turn: {what} peak RSS at most 100 MB"),
                );
            }
        }
        if !fig.many_trash.is_empty() {
            let _ = writeln!(
                s,
                "| 5. after that rewind exited: its background removal of the replaced files' names from the trash, waited for before the next phase (not counted above) | {} | | | | none | (no target) |",
                time_cell(&fig.many_trash),
            );
        }
    }
    if !fig.one_rewind.is_empty() {
        let r = Ratio::new(&fig.one_rewind, &fig.one_git, Some(1.0));
        let _ = writeln!(
            s,
            "| 6. `turnback rewind` of a one-file turn, the store holding an earlier full-tree turn (the process) | {} | `git checkout HEAD -- FILE` of the same file: {} | {} |",
            time_cell(&fig.one_rewind),
            time_cell(&fig.one_git),
            r.cells("≤ 1.0x git's"),
        );
        results.push((
            "one-file rewind no slower than git checkout of the file".into(),
            r.met() == Some(true),
        ));
    }
}

/// How rows 4 to 6 are measured.
pub(crate) const HOW: &str = "\
- Rows 4 to 6 run the release `turnback` binary (built by the benchmark if needed) \
as a child process in the tree; the time runs from spawn to exit. The stores of rows 4 \
and 5 are moved (untimed) to the data directory, a store's default place and the only \
one whose rewinds use the trash (on the trees' device, where files are also kept aside \
in the store rather than read); row 6's stays in its tree \
(`TURNBACK_STORE=project`). Row 4: one `strace -f -ff` run of `turnback rewind` \
of a full-tree capture turn (made through the library, then every file written with \
a line added), each thread's calls counted and given to its process (a clone without \
`CLONE_THREAD` starts one): the rewind's own, then those of the processes it starts \
(the background `turnback maintain`, waited for), divided by the number of files; then \
the same with the turn sealed (`turnback seal`) before the rewind. Row 5: `TURNBACK_BENCH_MANY` files \
(default 100,000) in directories of 100, each a few hundred bytes of generated text, \
captured in one turn and then written with a line added, on two copies; the rewind runs \
under `/usr/bin/time -f %M` (the peak RSS the kernel reports for the child), the peer \
writes the original bytes back with plain `fs::write`s; which side goes first alternates; \
every file is checked afterwards. Then the same files as an exec turn, on a third copy: \
`turnback snapshot`, every file written with a line added, `turnback snapshot --after` \
and `turnback rewind` of that turn, both under `/usr/bin/time -f %M`; the rewind's peer is \
the same repetition's plain writes; every file is checked afterwards. The capture turn and \
the exec turn take turns going first in a repetition: each rewind's background removal of \
100,000 names frees as many inodes, which the rewind after it skips at every allocation \
(as the first point above says). Row 6: the tree is committed to git, a full-tree turn is \
captured and written, then each repetition captures one file (the middle one) in a new \
turn, writes it, runs `turnback rewind` of that turn, writes the file again and runs \
`git checkout HEAD -- FILE`; both results are checked; both processes are spawned \
directly (no `/usr/bin/time`).";

/// The row `row` of a peak RSS (`kib`, KiB, one per repetition) against
/// the 100 MB, and its result as `result`; nothing when none was
/// measured. The target is met when the median is within 10^8 bytes (some
/// 95.4 MiB; the table shows MiB).
fn peak_rss_row(
    s: &mut String,
    results: &mut Vec<(String, bool)>,
    row: &str,
    kib: &[f64],
    result: String,
) {
    if kib.is_empty() {
        return;
    }
    let mib = median(kib) / 1024.0;
    let (lo, hi) = min_max(kib);
    let met = median(kib) * 1024.0 <= 100e6;
    let _ = writeln!(
        s,
        "| {row} (`/usr/bin/time -f %M`) | {mib:.0} MiB ({:.0}–{:.0} MiB) | | | | ≤ 100 MB | {} |",
        lo / 1024.0,
        hi / 1024.0,
        if met { "**met**" } else { "**missed**" },
    );
    results.push((result, met));
}
