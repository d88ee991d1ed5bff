//! The capture rules: what is recorded before an agent's write, and what a
//! rewind makes of it.

use turnback::{Action, Error, Options, PathProblem, Pre, RewindOptions};

use crate::common::{Project, TestResult, expect_err, turn};

fn pre_of(report: &turnback::CaptureReport, path: &str) -> Option<Pre> {
    report
        .captured
        .iter()
        .find(|e| e.path.as_str() == path)
        .map(|e| e.pre.clone())
}

#[test]
fn first_capture_in_a_turn_wins() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "as the turn began\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "a.txt", b"first edit\n")?;
    let second = store.write(&t1, None, "a.txt", b"second edit\n")?;
    assert!(second.captured.is_empty(), "{:?}", second.captured);
    assert_eq!(second.already_captured.len(), 1);
    assert_eq!(second.already_captured[0].as_str(), "a.txt");
    let third = store.capture(&t1, None, "a.txt")?;
    assert!(third.captured.is_empty());
    assert_eq!(store.turn(&t1)?.files.len(), 1);
    assert_eq!(p.read("a.txt")?, b"second edit\n");

    // A fresh reader of the log sees one capture of the path too.
    let reopened = p.open()?;
    assert_eq!(reopened.turn(&t1)?.files.len(), 1);

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("a.txt")?, b"as the turn began\n");
    Ok(())
}

/// On a file system that does not tell case apart (NTFS, APFS by default;
/// Wine's here), `foo.txt` after `Foo.txt` in one turn is the file captured
/// already; where case matters they are two files and both are captured.
#[test]
fn another_spelling_of_a_captured_file_is_the_same_capture_where_case_is_ignored() -> TestResult {
    let p = Project::new()?;
    p.write("Foo.txt", "as the turn began\n")?;
    let case_insensitive = p.exists("foo.txt");
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "Foo.txt", b"first edit\n")?;
    let second = store.write(&t1, None, "foo.txt", b"second edit\n")?;
    let paths: Vec<String> = store
        .turn(&t1)?
        .files
        .iter()
        .map(|c| c.entry.path.to_string())
        .collect();
    if case_insensitive {
        assert!(second.captured.is_empty(), "{:?}", second.captured);
        assert_eq!(second.already_captured.len(), 1);
        assert_eq!(second.already_captured[0].as_str(), "Foo.txt");
        assert_eq!(paths, ["Foo.txt"]);
    } else {
        assert_eq!(pre_of(&second, "foo.txt"), Some(Pre::Absent));
        assert_eq!(paths, ["Foo.txt", "foo.txt"]);
    }
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("Foo.txt")?, b"as the turn began\n");
    assert_eq!(p.exists("foo.txt"), case_insensitive);
    Ok(())
}

#[test]
fn absent_file_is_deleted_by_rewind() -> TestResult {
    let p = Project::new()?;
    p.write("kept.txt", "user's\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    let report = store.write(&t1, None, "new.txt", b"made by the agent\n")?;
    assert_eq!(pre_of(&report, "new.txt"), Some(Pre::Absent));
    assert!(p.exists("new.txt"));

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert!(!p.exists("new.txt"));
    assert_eq!(
        report
            .deleted
            .iter()
            .map(|d| d.as_str())
            .collect::<Vec<_>>(),
        ["new.txt"]
    );
    assert_eq!(p.read("kept.txt")?, b"user's\n");
    Ok(())
}

#[test]
fn created_directories_are_removed_when_empty() -> TestResult {
    let p = Project::new()?;
    p.write("src/main.rs", "fn main() {}\n")?;
    let before = p.snapshot()?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    let report = store.write(&t1, None, "docs/api/v1/index.md", b"# API\n")?;
    for dir in ["docs", "docs/api", "docs/api/v1"] {
        assert_eq!(pre_of(&report, dir), Some(Pre::Absent), "{dir}");
    }
    // A write into a directory that existed records only what it creates.
    let report = store.write(&t1, None, "src/gen/out.rs", b"// generated\n")?;
    assert_eq!(pre_of(&report, "src"), None);
    assert_eq!(pre_of(&report, "src/gen"), Some(Pre::Absent));

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    crate::common::assert_same(&before, &p.snapshot()?, "after the rewind");
    Ok(())
}

#[test]
fn created_directories_are_kept_when_they_hold_an_uncaptured_file() -> TestResult {
    let p = Project::new()?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "a/b/agent.txt", b"agent\n")?;
    // Someone else puts a file there that no turn captured.
    p.write("a/b/user.txt", "the user's own work\n")?;

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(!p.exists("a/b/agent.txt"));
    assert_eq!(p.read("a/b/user.txt")?, b"the user's own work\n");
    assert!(!report.complete());
    let failed: Vec<&str> = report.failed.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(failed, ["a", "a/b"]);
    for f in &report.failed {
        assert!(
            f.reason.contains("holds files"),
            "reason for {} does not say why: {}",
            f.path,
            f.reason
        );
    }
    Ok(())
}

#[test]
#[cfg(unix)]
fn executable_bit_is_restored() -> TestResult {
    let p = Project::new()?;
    p.write("run.sh", "#!/bin/sh\necho v1\n")?;
    p.chmod("run.sh", 0o755)?;
    p.write("data.txt", "plain\n")?;
    p.chmod("data.txt", 0o644)?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    let report = store.capture_many(&t1, None, &["run.sh", "data.txt"])?;
    assert!(matches!(
        pre_of(&report, "run.sh"),
        Some(Pre::File { mode: 0o755, .. })
    ));
    assert!(matches!(
        pre_of(&report, "data.txt"),
        Some(Pre::File { mode: 0o644, .. })
    ));
    // The agent rewrites both and flips their modes.
    p.write("run.sh", "#!/bin/sh\necho v2\n")?;
    p.chmod("run.sh", 0o600)?;
    p.write("data.txt", "#!/bin/sh\n")?;
    p.chmod("data.txt", 0o755)?;

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.mode("run.sh")?, 0o755);
    assert_eq!(p.read("run.sh")?, b"#!/bin/sh\necho v1\n");
    assert_eq!(p.mode("data.txt")?, 0o644);
    assert_eq!(p.read("data.txt")?, b"plain\n");
    Ok(())
}

#[test]
#[cfg(unix)]
fn symlink_is_recorded_as_symlink_not_followed() -> TestResult {
    let p = Project::new()?;
    p.write("config/real.toml", "level = 1\n")?;
    std::os::unix::fs::symlink("config/real.toml", p.path("current.toml"))?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    let report = store.capture(&t1, None, "current.toml")?;
    assert_eq!(
        pre_of(&report, "current.toml"),
        Some(Pre::Symlink {
            target: "config/real.toml".into()
        })
    );
    // The file it points to is captured as itself, under its own path.
    assert!(matches!(
        pre_of(&report, "config/real.toml"),
        Some(Pre::File { .. })
    ));
    // The agent replaces the link with a regular file and edits the target.
    std::fs::remove_file(p.path("current.toml"))?;
    p.write("current.toml", "level = 9\n")?;
    p.write("config/real.toml", "level = 2\n")?;

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    let meta = std::fs::symlink_metadata(p.path("current.toml"))?;
    assert!(meta.file_type().is_symlink());
    assert_eq!(
        std::fs::read_link(p.path("current.toml"))?,
        std::path::Path::new("config/real.toml")
    );
    assert_eq!(p.read("config/real.toml")?, b"level = 1\n");

    // A write through a link inside the root edits the target, as an editor
    // does, and leaves the link a link.
    let t2 = turn("t2")?;
    store.write(&t2, None, "current.toml", b"level = 3\n")?;
    assert!(
        std::fs::symlink_metadata(p.path("current.toml"))?
            .file_type()
            .is_symlink()
    );
    assert_eq!(p.read("config/real.toml")?, b"level = 3\n");
    let report = store.rewind(&t2, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read("config/real.toml")?, b"level = 1\n");
    assert!(
        std::fs::symlink_metadata(p.path("current.toml"))?
            .file_type()
            .is_symlink()
    );
    Ok(())
}

#[test]
#[cfg(unix)]
fn symlink_out_of_root_is_never_followed() -> TestResult {
    let p = Project::new()?;
    let secret = p.outside().join("secret.txt");
    std::fs::write(&secret, "outside the project\n")?;
    let target = secret.to_string_lossy().into_owned();
    std::os::unix::fs::symlink(&secret, p.path("link"))?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;

    let err = expect_err(
        store.write(&t1, None, "link", b"overwritten\n"),
        "a write through a link out of the root",
    )?;
    assert!(
        matches!(
            err,
            Error::BadPath {
                reason: PathProblem::OutsideRoot,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("link"), "{err}");
    assert_eq!(std::fs::read(&secret)?, b"outside the project\n");

    let report = store.capture(&t1, None, "link")?;
    assert_eq!(
        report.captured.len(),
        1,
        "only the link: {:?}",
        report.captured
    );
    assert_eq!(
        pre_of(&report, "link"),
        Some(Pre::Symlink {
            target: target.clone()
        })
    );
    assert_eq!(report.new_blobs, 0, "the outside file's bytes were read");
    assert_eq!(report.links_outside.len(), 1);

    // The agent replaces the link; the rewind puts the link back, still
    // without touching what it points to.
    std::fs::remove_file(p.path("link"))?;
    p.write("link", "agent\n")?;
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(
        std::fs::read_link(p.path("link"))?,
        std::path::Path::new(&target)
    );
    assert_eq!(std::fs::read(&secret)?, b"outside the project\n");
    Ok(())
}

/// Deterministic incompressible bytes (xorshift64*), generated in pieces.
struct Noise(u64);

impl Noise {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let v = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

const LARGE: usize = 64 << 20;
const PIECE: usize = 1 << 20;
const CHILD_ENV: &str = "TURNBACK_TEST_LARGE_FILE_ROOT";

/// Peak resident memory of this process, in KiB.
#[cfg(target_os = "linux")]
fn vm_hwm_kib() -> TestResult<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .ok_or("no VmHWM in /proc/self/status")?;
    let kib = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib)
}

/// The measured part of [`large_file_is_streamed`], run in a child process
/// of its own so that its peak memory is its own.
#[cfg(target_os = "linux")]
fn large_file_child(root: &str) -> TestResult {
    let before = vm_hwm_kib()?;
    let mut store = turnback::Store::open(root)?;
    let t1 = turn("big")?;
    let report = store.capture(&t1, None, "big.bin")?;
    let Some(Pre::File { size, .. }) = report.captured.first().map(|e| e.pre.clone()) else {
        return Err(format!("not captured as a file: {:?}", report.captured).into());
    };
    assert_eq!(size, LARGE as u64);
    std::fs::write(std::path::Path::new(root).join("big.bin"), "replaced\n")?;
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    let after = vm_hwm_kib()?;
    println!("VmHWM-KiB {before} {after}");
    Ok(())
}

#[test]
#[cfg(target_os = "linux")]
fn large_file_is_streamed() -> TestResult {
    if let Ok(root) = std::env::var(CHILD_ENV) {
        return large_file_child(&root);
    }
    let p = Project::new()?;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(p.path("big.bin"))?);
        let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
        let mut buf = vec![0u8; PIECE];
        for _ in 0..LARGE / PIECE {
            noise.fill(&mut buf);
            std::io::Write::write_all(&mut f, &buf)?;
        }
        std::io::Write::flush(&mut f)?;
    }
    let out = std::process::Command::new(std::env::current_exe()?)
        .args([
            "--exact",
            "test_capture::large_file_is_streamed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &p.root)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The harness prints the test's name on the same line, before it.
    let nums: Vec<u64> = stdout
        .split_once("VmHWM-KiB ")
        .ok_or_else(|| format!("the child printed no measurement: {stdout}"))?
        .1
        .split_whitespace()
        .take(2)
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    assert_eq!(nums.len(), 2, "{stdout}");
    let grown_kib = nums[1].saturating_sub(nums[0]);
    // Reading the file whole would add at least 64 MiB; streaming needs the
    // compressor's window and buffers, a few MiB.
    assert!(
        grown_kib < (LARGE as u64 / 1024) / 4,
        "peak memory grew by {grown_kib} KiB while capturing and rewinding a {} MiB file",
        LARGE >> 20
    );

    // The bytes came back, all of them.
    let mut f = std::fs::File::open(p.path("big.bin"))?;
    assert_eq!(f.metadata()?.len(), LARGE as u64);
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let (mut want, mut got) = (vec![0u8; PIECE], vec![0u8; PIECE]);
    for i in 0..LARGE / PIECE {
        noise.fill(&mut want);
        std::io::Read::read_exact(&mut f, &mut got)?;
        assert!(want == got, "MiB {i} of the restored file differs");
    }
    Ok(())
}

#[test]
fn file_over_cap_is_skipped_and_rewind_reports_it() -> TestResult {
    let p = Project::new()?;
    p.write("huge.bin", vec![7u8; 4096])?;
    p.write("small.txt", "small\n")?;
    let mut store = p.open_with(Options {
        max_file_size: 1000,
        ..Options::default()
    })?;
    let t1 = turn("t1")?;
    let report = store.write(&t1, None, "huge.bin", b"rewritten\n")?;
    match pre_of(&report, "huge.bin") {
        Some(Pre::Skipped { reason, size }) => {
            assert_eq!(size, 4096);
            assert!(reason.contains("1000"), "reason names the cap: {reason}");
        }
        other => return Err(format!("not recorded as skipped: {other:?}").into()),
    }
    store.write(&t1, None, "small.txt", b"edited\n")?;

    let dry = store.rewind(
        &t1,
        &RewindOptions {
            dry_run: true,
            ..RewindOptions::default()
        },
    )?;
    assert!(
        dry.plan
            .iter()
            .any(|s| s.path.as_str() == "huge.bin"
                && matches!(s.action, Action::CannotRestore { .. })),
        "{:?}",
        dry.plan
    );

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(!report.complete());
    assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
    assert_eq!(report.failed[0].path.as_str(), "huge.bin");
    assert!(
        report.failed[0].reason.contains("not saved"),
        "{}",
        report.failed[0].reason
    );
    assert!(report.restored.iter().any(|r| r.as_str() == "small.txt"));
    assert_eq!(p.read("small.txt")?, b"small\n");
    // The skipped file is left as the turn made it, and the report says so.
    assert_eq!(p.read("huge.bin")?, b"rewritten\n");
    Ok(())
}

#[test]
fn identical_bytes_are_stored_once() -> TestResult {
    let p = Project::new()?;
    let text = "the same bytes in three files\n".repeat(50);
    for name in ["a.txt", "b.txt", "sub/c.txt"] {
        p.write(name, &text)?;
    }
    let mut store = p.open()?;
    let report = store.capture_many(&turn("t1")?, None, &["a.txt", "b.txt"])?;
    assert_eq!(report.new_blobs, 1);
    let report = store.capture(&turn("t2")?, None, "sub/c.txt")?;
    assert_eq!(report.new_blobs, 0, "an identical blob was stored again");
    let blobs: Vec<_> = p
        .records()?
        .into_iter()
        .filter_map(|r| match r.op {
            turnback::log::Op::Capture { blobs, .. } => Some(blobs),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(blobs.len(), 1);
    assert_eq!(blobs[0].id, turnback::pack::hash_bytes(text.as_bytes()));
    Ok(())
}

#[test]
fn blobs_are_stored_compressed() -> TestResult {
    let p = Project::new()?;
    let mut source = String::new();
    for i in 0..2000 {
        source.push_str(&format!(
            "fn item_{i}(x: u32) -> u32 {{\n    x.wrapping_mul({i}) + 1\n}}\n"
        ));
    }
    p.write("lib.rs", &source)?;
    let mut store = p.open()?;
    let report = store.capture(&turn("t1")?, None, "lib.rs")?;
    let packs = crate::common::store_dir(&p.root).join("packs");
    let on_disk: u64 = std::fs::read_dir(&packs)?
        .map(|e| Ok(e?.metadata()?.len()))
        .sum::<TestResult<u64>>()?;
    assert!(
        on_disk * 3 < source.len() as u64,
        "{} bytes stored as {on_disk} (reported {})",
        source.len(),
        report.stored_bytes
    );
    assert_eq!(store.read_blob(&blob_of(&report)?)?, source.as_bytes());
    Ok(())
}

fn blob_of(report: &turnback::CaptureReport) -> TestResult<turnback::BlobId> {
    match report.captured.first().map(|e| &e.pre) {
        Some(Pre::File { blob, .. }) => Ok(*blob),
        other => Err(format!("not a file: {other:?}").into()),
    }
}

#[test]
// Unix: a directory descriptor keeps naming the directory it was opened
// on after that is renamed away; a Windows handle is used by its path.
#[cfg(unix)]
fn failed_capture_prevents_the_write() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "before\n")?;
    let mut store = p.open()?;
    store.capture(&turn("t0")?, None, "b.txt")?;
    let records = p.records()?.len();
    // The pack directory this store holds open is swapped for a fresh one,
    // so new packs cannot be created in it: the pre-image cannot be saved.
    let packs = crate::common::store_dir(&p.root).join("packs");
    std::fs::rename(&packs, p.parent().join("old-packs"))?;
    std::fs::remove_dir_all(p.parent().join("old-packs"))?;
    std::fs::create_dir(&packs)?;
    crate::common::set_mode(&packs, 0o755)?;

    let err = expect_err(
        store.write(&turn("t1")?, None, "a.txt", b"after\n"),
        "a write whose pre-image cannot be saved",
    )?;
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(p.read("a.txt")?, b"before\n", "the write happened anyway");
    assert_eq!(p.records()?.len(), records, "a record was appended");
    Ok(())
}

#[test]
fn labels_are_cut_to_120_characters() -> TestResult {
    let p = Project::new()?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    let long = "ü".repeat(500);
    store.write(&t1, Some(&long), "a.txt", b"x")?;
    let label = store.turn(&t1)?.label.clone().ok_or("no label")?;
    assert_eq!(label, "ü".repeat(120));
    assert_eq!(p.open()?.turn(&t1)?.label.as_deref(), Some(label.as_str()));
    Ok(())
}

#[test]
#[cfg(unix)]
fn write_through_a_link_made_earlier_in_the_turn_captures_its_target() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    // The turn first records `current` as absent, then makes it a link.
    store.capture(&t1, None, "current")?;
    std::os::unix::fs::symlink("a.txt", p.path("current"))?;
    // The write lands in a.txt, which this turn has not captured yet.
    store.write(&t1, None, "current", b"a1\n")?;
    assert_eq!(p.read("a.txt")?, b"a1\n");

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert!(!p.exists("current"));
    assert_eq!(
        p.read("a.txt")?,
        b"a0\n",
        "the write through the link stayed"
    );
    Ok(())
}

#[test]
#[cfg(unix)]
fn capture_of_a_retargeted_link_captures_its_new_target() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "a0\n")?;
    p.write("b.txt", "b0\n")?;
    std::os::unix::fs::symlink("a.txt", p.path("current"))?;
    let before = p.snapshot()?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.capture(&t1, None, "current")?;
    // The agent points the link elsewhere, captures it again before writing
    // through it (as an agent that writes itself does), then writes.
    std::fs::remove_file(p.path("current"))?;
    std::os::unix::fs::symlink("b.txt", p.path("current"))?;
    store.capture(&t1, None, "current")?;
    std::fs::write(p.path("current"), "b1\n")?;
    assert_eq!(p.read("b.txt")?, b"b1\n");

    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    crate::common::assert_same(&before, &p.snapshot()?, "after the rewind");
    Ok(())
}

/// A path longer than Windows' old 260-character limit is captured and
/// rewound like any other (std writes it with the `\\?\` prefix there).
#[test]
fn a_path_longer_than_260_characters_round_trips() -> TestResult {
    let p = Project::new()?;
    let deep: Vec<String> = (0..6).map(|i| format!("{i}-{}", "d".repeat(60))).collect();
    let rel = format!("{}/file.txt", deep.join("/"));
    assert!(p.path(&rel).as_os_str().len() > 300, "{}", rel.len());
    p.write(&rel, "before\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, &rel, b"after\n")?;
    store.write(&t1, None, format!("{}/new.txt", deep.join("/")), b"new\n")?;
    let report = store.rewind(&t1, &RewindOptions::default())?;
    assert!(report.complete(), "{:?}", report.failed);
    assert_eq!(p.read(&rel)?, b"before\n");
    assert!(!p.exists(&format!("{}/new.txt", deep.join("/"))));
    Ok(())
}

/// Windows: a file another process holds open for reading without letting
/// it be deleted or renamed (as many editors and scanners do) cannot be
/// replaced. The rewind retries, then reports that path (not restored,
/// with the reason) and restores the rest; once the file is closed, undo
/// and the rewind again finish it. A file held with no sharing
/// at all cannot even be read to be saved: the rewind then refuses before
/// it changes anything, naming the file.
#[cfg(windows)]
#[test]
fn a_file_held_open_elsewhere_is_reported_and_undo_then_rewind_finish() -> TestResult {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_SHARE_READ: u32 = 1;
    let p = Project::new()?;
    p.write("held.txt", "held before\n")?;
    p.write("free.txt", "free before\n")?;
    let mut store = p.open()?;
    let t1 = turn("t1")?;
    store.write(&t1, None, "held.txt", b"held after\n")?;
    store.write(&t1, None, "free.txt", b"free after\n")?;

    // Held with no sharing: nothing changes, and the error names it.
    let exclusive = std::fs::OpenOptions::new()
        .read(true)
        .share_mode(0)
        .open(p.path("held.txt"))?;
    let err = expect_err(
        store.rewind(&t1, &RewindOptions::default()),
        "a rewind over a file held open with no sharing",
    )?;
    assert!(err.to_string().contains("held.txt"), "{err}");
    drop(exclusive);
    assert_eq!(p.read("free.txt")?, b"free after\n", "changed anyway");

    // Held for reading, sharing reads only: that path is reported.
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ)
        .open(p.path("held.txt"))?;
    let report = store.rewind(&t1, &RewindOptions::default())?;
    let failed: Vec<String> = report.failed.iter().map(|f| f.path.to_string()).collect();
    assert_eq!(failed, ["held.txt"], "{:?}", report.failed);
    assert!(
        report.failed[0]
            .reason
            .contains("another process has it open"),
        "{:?}",
        report.failed
    );
    assert_eq!(p.read("free.txt")?, b"free before\n");
    drop(holder);
    assert_eq!(
        p.read("held.txt")?,
        b"held after\n",
        "the held file was touched"
    );
    // Undo gives back the folder as before that rewind; the rewind again,
    // with the file closed, is whole.
    store.undo()?;
    assert_eq!(p.read("free.txt")?, b"free after\n");
    let again = store.rewind(&t1, &RewindOptions::default())?;
    assert!(again.complete(), "{:?}", again.failed);
    assert_eq!(p.read("held.txt")?, b"held before\n");
    assert_eq!(p.read("free.txt")?, b"free before\n");
    Ok(())
}
