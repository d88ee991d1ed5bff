//! Injected I/O errors, the SQLite way: the Nth call of a system call fails
//! (once, or from then on), for N = 1, 2, ... until the command no longer
//! meets the fault. A command that met the fault must exit non-zero (never
//! 0 after a failed fsync), leave the user's files as they were (or, for a
//! rewind, each path old or new), leave no temporary file in the project,
//! and leave a store that opens and verifies; run again without the fault,
//! it completes. Plus a real full disk: a 1 MiB tmpfs.

use std::path::Path;

use turnback::Store;

use crate::harness::*;
use crate::scenarios::{self, Scenario};

/// (syscall, errno) pairs injected into every command.
const FAULTS: &[(&str, &str)] = &[
    ("write", "ENOSPC"),
    ("write", "EIO"),
    ("write", "EDQUOT"),
    ("openat", "ENOSPC"),
    ("openat", "EDQUOT"),
    ("mkdirat", "ENOSPC"),
    ("renameat", "EIO"),
    ("renameat", "ENOSPC"),
    ("fdatasync", "EIO"),
    ("fdatasync", "ENOSPC"),
    ("fsync", "EIO"),
    ("syncfs", "EIO"),
    ("ftruncate", "EIO"),
    // Resource edges: out of descriptors, a read-only file system, a rename
    // across file systems (a store must fail, never fall back to a copy).
    ("openat", "EMFILE"),
    ("openat", "EROFS"),
    ("mkdirat", "EROFS"),
    ("renameat", "EROFS"),
    ("renameat", "EXDEV"),
];

/// Whether `errno` is an error that the traced `call` can really return
/// and that the operation depends on: ENOSPC and EDQUOT on an open only when
/// it creates a file, EROFS only when it creates or writes; nothing on the
/// directory listing of the best-effort sweep of stale temporary files,
/// whose failure only postpones the sweep, nor on opening a cache file.
fn realistic(syscall: &str, errno: &str, call: &str) -> bool {
    if syscall == "openat" {
        if call.contains(r#", ".","#) {
            return false;
        }
        // The caches (the index checkpoint, the tree head) are optional:
        // failing to open one only costs time.
        if call.contains(r#", "index","#) || call.contains(r#", "tree-head","#) {
            return false;
        }
        if matches!(errno, "ENOSPC" | "EDQUOT") {
            return call.contains("O_CREAT");
        }
        if errno == "EROFS" {
            return call.contains("O_CREAT")
                || call.contains("O_WRONLY")
                || call.contains("O_RDWR");
        }
    }
    true
}

#[derive(Default, Debug)]
struct Stats {
    runs: usize,
    met: usize,
    store_temps_after_error: usize,
}

/// What must hold after one injected run; then recovery and the rerun.
fn check_after_error(
    sc: &Scenario,
    lab: &Lab,
    log_before: &[u8],
    met: bool,
    out: &std::process::Output,
    what: &str,
    stats: &mut Stats,
) -> Res {
    if met && out.status.success() {
        return Err(format!(
            "{what}: the command met the fault and still exited 0:\n{}",
            texts(out)
        )
        .into());
    }
    let mut found = Found::default();
    sc.mid.check_log(lab, log_before, &mut found)?;
    // The user's files: as before (or, mid-rewind, each old or new), and
    // no temporary file left behind by the failed operation.
    let allowed: Vec<&Tree> = if sc.name == "rewind" {
        vec![&sc.before, &sc.after]
    } else if out.status.success() {
        vec![&sc.after]
    } else if sc.name == "write" {
        // A write fails before or after its rename (an error printing).
        vec![&sc.before, &sc.after]
    } else {
        vec![&sc.before]
    };
    let temps = check_midway(&lab.root, &allowed)?;
    if !temps.is_empty() {
        return Err(format!(
            "{what}: the failed command left temporary files in the project: {temps:?}"
        )
        .into());
    }
    let store_temps = snapshot(&lab.root, &[])?
        .keys()
        .filter(|k| k.starts_with(".turnback/") && k.contains(TEMP_MARK))
        .count();
    stats.store_temps_after_error += usize::from(store_temps > 0);
    sc.mid.check_blobs(lab, &mut found)?;
    sc.mid.check_canary(lab)?;
    check_recovery_idempotent(lab)?;
    // Without the fault the command completes (a rewind that recorded
    // failed paths is undone and run again).
    if sc.name == "rewind" && !(sc.rerun)(lab, log_before)? && project_tree(&lab.root)? != sc.after
    {
        let undo = run(&lab.root, &Invocation::new(&["undo"]), &[])?;
        if !undo.status.success() {
            return Err(format!(
                "{what}: undo of the incomplete rewind failed:\n{}",
                texts(&undo)
            )
            .into());
        }
    }
    if (sc.rerun)(lab, log_before)? {
        let again = run(&lab.root, &sc.inv, &[])?;
        if !again.status.success() {
            return Err(format!(
                "{what}: the command failed again without the fault:\n{}",
                texts(&again)
            )
            .into());
        }
    }
    let now = project_tree(&lab.root)?;
    if now != sc.after {
        return Err(format!(
            "{what}: after the rerun the folder is not what the command leaves:\n{}",
            diff(&sc.after, &now)
        )
        .into());
    }
    if let Some(post) = sc.post {
        post(&lab.root)?;
    }
    sc.fin.check_log(lab, log_before, &mut found)?;
    sc.fin.check_blobs(lab, &mut found)?;
    sc.fin.check_rewinds(lab, &mut found)?;
    sc.fin.check_canary(lab)?;
    Ok(())
}

fn sweep_errors(sc: Scenario) -> Res {
    if let Some(why) = strace_problem() {
        return skip_or_fail(&format!("I/O errors in {}", sc.name), &why);
    }
    let calls = count_syscalls(&sc.template, &sc.inv)?;
    let mut stats = Stats::default();
    for (syscall, errno) in FAULTS {
        let count = calls.max.get(*syscall).copied().unwrap_or(0);
        for forever in [false, true] {
            for n in 1..=count + 1 {
                let when = if forever {
                    format!("{n}+")
                } else {
                    n.to_string()
                };
                let what = format!(
                    "{} with {syscall} call {when} failing with {errno}",
                    sc.name
                );
                let met =
                    calls.hits_lab(syscall, n, forever, |call| realistic(syscall, errno, call));
                // CI: every call the operation depends on, failing once;
                // failing from then on only for writes and syncs; and the
                // first run past the last call. The long mode runs all.
                let sampled_out = (!met && n <= count)
                    || (forever && !matches!(*syscall, "write" | "fdatasync" | "fsync" | "syncfs"));
                if sampled_out && !long_mode() {
                    continue;
                }
                let lab = Lab::copy_of(&sc.template)?;
                let log_before = lab.log_bytes();
                let wrapper = strace_inject(syscall, &format!("error={errno}:when={when}"));
                let out = run(&lab.root, &sc.inv, &wrapper)?;
                stats.runs += 1;
                stats.met += usize::from(met);
                check_after_error(&sc, &lab, &log_before, met, &out, &what, &mut stats)?;
            }
        }
    }
    println!(
        "io-errors {}: {} runs ({} fault kinds, once and from then on, {}), {} met the fault and exited non-zero; {} left a temporary file in the store (swept by the next mutation)",
        sc.name,
        stats.runs,
        FAULTS.len(),
        if long_mode() { "every N" } else { "sampled" },
        stats.met,
        stats.store_temps_after_error
    );
    Ok(())
}

#[test]
fn io_errors_in_capture() -> Res {
    sweep_errors(scenarios::capture()?)
}

#[test]
fn io_errors_in_write() -> Res {
    sweep_errors(scenarios::write()?)
}

#[test]
fn io_errors_in_rewind() -> Res {
    sweep_errors(scenarios::rewind()?)
}

/// A full disk in the project while a rewind writes a file larger than one
/// batch of its writes (256 KiB, so the write fails while the blob is still
/// being decompressed into it): the report says the write failed, and never
/// calls the blob damaged, which would send the user to `turnback repair`
/// for nothing; `verify` finds the store whole.
#[test]
fn a_full_disk_during_a_rewind_is_a_failed_write_not_a_damaged_blob() -> Res {
    let test = "a_full_disk_during_a_rewind_is_a_failed_write_not_a_damaged_blob";
    if let Some(why) = strace_problem() {
        return skip_or_fail(test, &why);
    }
    let lab = Lab::new()?;
    let r = &lab.root;
    put(r, "big.bin", &scenarios::noise(700 << 10, 7), 0o644)?;
    let capture = Invocation::new(&["capture", "--turn", "t1", "big.bin"]);
    let ok = run(r, &capture, &[])?;
    assert!(ok.status.success(), "{}", texts(&ok));
    put(r, "big.bin", b"the agent's change\n", 0o644)?;

    let full = strace_inject("pwrite64", "error=ENOSPC:when=1+");
    let out = run(r, &Invocation::new(&["rewind", "t1"]), &full)?;
    let text = texts(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "not an incomplete rewind: {text}"
    );
    assert!(
        text.contains("big.bin: cannot write: No space left on device"),
        "the failed write is not named: {text}"
    );
    assert!(!text.contains("damaged"), "{text}");

    let verify = run(r, &Invocation::new(&["verify"]), &[])?;
    assert!(verify.status.success(), "{}", texts(&verify));
    Ok(())
}

/// Real short writes: the command runs with `RLIMIT_FSIZE` set to N bytes
/// and `SIGXFSZ` ignored, so the kernel itself stops every file at N bytes:
/// the write that crosses N returns short, the next one fails with EFBIG,
/// as on a file system or quota that fills mid-write. N sweeps from 0 past
/// the largest file the command writes (CI: every boundary of every written
/// file and 24 points between; long mode: every 64 bytes as well). A
/// command that cannot write what it must exits non-zero and leaves what
/// [`check_after_error`] requires; with the limit off it then completes.
fn sweep_file_size_limits(sc: Scenario) -> Res {
    // The files the command writes, and how large they end up.
    let plain = Lab::copy_of(&sc.template)?;
    let before = snapshot(&plain.root, &[])?;
    let out = run(&plain.root, &sc.inv, &[])?;
    if !out.status.success() {
        return Err(format!("{}: the plain run failed:\n{}", sc.name, texts(&out)).into());
    }
    let mut grown: Vec<(u64, u64)> = Vec::new(); // (size before, size after)
    for (path, node) in snapshot(&plain.root, &[])? {
        if let Node::File { bytes, .. } = &node
            && before.get(&path) != Some(&node)
        {
            let was = match before.get(&path) {
                Some(Node::File { bytes, .. }) => bytes.len() as u64,
                _ => 0,
            };
            grown.push((was, bytes.len() as u64));
        }
    }
    let largest = grown.iter().map(|g| g.1).max().unwrap_or(0);
    let mut limits: std::collections::BTreeSet<u64> = [0, 1].into();
    for &(was, now) in &grown {
        for n in [was, was + 1, now / 2, now.saturating_sub(1), now] {
            limits.insert(n);
        }
    }
    let step = (largest / 24).max(1);
    let step = if long_mode() { step.min(64) } else { step };
    limits.extend((0..=largest).step_by(step as usize));
    let mut stats = Stats::default();
    let mut failed = 0;
    for n in limits {
        let lab = Lab::copy_of(&sc.template)?;
        let log_before = lab.log_bytes();
        let wrapper: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            r#"trap '' XFSZ; exec prlimit --fsize="$0" "$@""#.into(),
            n.to_string(),
        ];
        let out = run(&lab.root, &sc.inv, &wrapper)?;
        // Some file must grow past N: the command cannot succeed.
        let met = n < largest;
        stats.runs += 1;
        stats.met += usize::from(met);
        failed += usize::from(!out.status.success());
        let what = format!("{} with files limited to {n} bytes", sc.name);
        check_after_error(&sc, &lab, &log_before, met, &out, &what, &mut stats)?;
    }
    println!(
        "short-writes {}: {} runs with RLIMIT_FSIZE from 0 to {largest} bytes ({} written files), {} could not write everything and all exited non-zero ({failed} non-zero in all); {} left a temporary file in the store (swept by the next mutation)",
        sc.name,
        stats.runs,
        grown.len(),
        stats.met,
        stats.store_temps_after_error
    );
    Ok(())
}

#[test]
fn short_writes_in_capture() -> Res {
    sweep_file_size_limits(scenarios::capture()?)
}

#[test]
fn short_writes_in_write() -> Res {
    sweep_file_size_limits(scenarios::write()?)
}

#[test]
fn short_writes_in_rewind() -> Res {
    sweep_file_size_limits(scenarios::rewind()?)
}

/// Mounts a tmpfs of `size` at a new folder, or says why it cannot.
pub struct Tmpfs {
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::Builder::new()
            .prefix("turnback-tmpfs-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount cannot be run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed (not root, or the sandbox forbids mounts): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the file system holding `dir` with a ballast file until a write
/// fails; returns its path.
fn fill(dir: &Path) -> Res<std::path::PathBuf> {
    use std::io::Write;
    let ballast = dir.join("ballast");
    let mut f = std::fs::File::create(&ballast)?;
    let chunk = vec![0x5au8; 4096];
    loop {
        if f.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = f.sync_all();
    Ok(ballast)
}

#[test]
fn full_disk_fails_cleanly_and_frees_up() -> Res {
    let fs = match Tmpfs::mount("1m") {
        Ok(fs) => fs,
        Err(why) => {
            // Mounting needs root and a sandbox that allows it; CI runs as
            // root, but a sandbox may still refuse: say so loudly.
            println!("SKIPPED full_disk_fails_cleanly_and_frees_up: {why}");
            eprintln!("SKIPPED full_disk_fails_cleanly_and_frees_up: {why}");
            return Ok(());
        }
    };
    let lab = Lab::new_in(Some(fs.path()))?;
    let r = &lab.root;
    put(r, "a.txt", b"alpha\n", 0o644)?;
    put(r, "big.bin", &scenarios::noise(200 << 10, 3), 0o644)?;
    let ok = run(
        r,
        &Invocation::new(&["capture", "--turn", "t1", "a.txt"]),
        &[],
    )?;
    assert!(ok.status.success(), "{}", texts(&ok));
    put(r, "a.txt", b"alpha by t1\n", 0o644)?;
    let canary = snapshot(&lab.canary, &[])?;
    let before = project_tree(r)?;
    let log_before = lab.log_bytes();
    let ballast = fill(&lab.base)?;

    // Captures and writes on a full disk: errors that name the problem,
    // nothing changed, the store whole.
    let attempts = [
        Invocation::new(&["capture", "--turn", "t2", "big.bin", "a.txt"]),
        Invocation::new(&["write", "--turn", "t2", "a.txt"])
            .with_stdin(&scenarios::noise(64 << 10, 5)),
        Invocation::new(&["rewind", "t1"]),
    ];
    let mut failures = 0;
    for inv in &attempts {
        let out = run(r, inv, &[])?;
        if out.status.success() {
            // A rewind may fit (its blob is small); then it must be exact.
            assert_eq!(
                inv.name(),
                "rewind",
                "{:?} succeeded on a full disk:\n{}",
                inv.args,
                texts(&out)
            );
            continue;
        }
        failures += 1;
        let err = texts(&out);
        assert!(
            err.contains("No space left on device") || err.contains("os error 28"),
            "{:?}: the error does not say the disk is full: {err}",
            inv.args
        );
        assert_eq!(
            project_tree(r)?,
            before,
            "{:?} changed the folder",
            inv.args
        );
        let log = lab.log_bytes();
        assert!(log.starts_with(&log_before), "the log lost bytes");
        let parsed = turnback::log::parse(&log, 1);
        assert!(
            parsed.lines.iter().all(|(_, r)| r.is_ok()),
            "the log does not parse"
        );
        Store::open(r)?;
    }
    assert!(
        failures >= 2,
        "only {failures} of the commands met the full disk"
    );
    assert_eq!(snapshot(&lab.canary, &[])?, canary);

    // Space freed: the next mutation sweeps what the failures left, and the
    // commands work.
    std::fs::remove_file(&ballast)?;
    let out = run(
        r,
        &Invocation::new(&["capture", "--turn", "t2", "big.bin", "a.txt"]),
        &[],
    )?;
    assert!(out.status.success(), "{}", texts(&out));
    let leftovers: Vec<String> = snapshot(r, &[])?
        .into_keys()
        .filter(|k| k.contains(TEMP_MARK))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary files survived the next mutation: {leftovers:?}"
    );
    let mut found = Found::default();
    let checker = Checker {
        must_live: vec![],
        may_live: vec![],
        canary,
        log_may_be_rewritten: false,
    };
    checker.check_log(&lab, &log_before, &mut found)?;
    checker.check_blobs(&lab, &mut found)?;
    put(r, "big.bin", b"the agent's big change\n", 0o644)?;
    let rw = run(r, &Invocation::new(&["rewind", "t2"]), &[])?;
    assert!(rw.status.success(), "{}", texts(&rw));
    assert_eq!(project_tree(r)?, before);
    checker.check_canary(&lab)?;
    println!(
        "disk-full: {} of {} commands met the full 1 MiB tmpfs and failed cleanly; after freeing space, capture and rewind exact, no temporary file left",
        failures,
        attempts.len()
    );
    Ok(())
}
