//! Resource limits: a batch capture of thousands of files must not need a
//! descriptor per file, nor a snapshot a descriptor per subdirectory of a
//! folder (desktop sessions often allow only 1,024 descriptors, macOS
//! 256).
//!
//! Linux only: a descriptor limit (`ulimit -n`) and GNU `xargs -a`.
#![cfg(target_os = "linux")]

use std::process::Command;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs the shell `script` in `root`, with `data` as turnback's data
/// directory and home, and `env` on top; it must succeed.
fn run_limited(
    root: &std::path::Path,
    data: &std::path::Path,
    script: &str,
    env: &[(&str, &str)],
) -> TestResult {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .env("TURNBACK_DATA_DIR", data)
        .env("HOME", data)
        .envs(env.iter().copied())
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[test]
fn a_batch_of_3000_files_captures_and_rewinds_under_a_limit_of_128_descriptors() -> TestResult {
    let dir = tempfile::tempdir()?;
    let data = tempfile::tempdir()?;
    let root = dir.path();
    let mut names = Vec::new();
    for d in 0..30 {
        std::fs::create_dir_all(root.join(format!("pkg{d}")))?;
        for f in 0..100 {
            let name = format!("pkg{d}/f{f}.txt");
            std::fs::write(root.join(&name), format!("file {d}/{f}\n"))?;
            names.push(name);
        }
    }
    std::fs::write(root.join("list"), names.join("\n"))?;
    let bin = assert_cmd::cargo::cargo_bin("turnback");
    let script = format!(
        "ulimit -n 128 && xargs -a list '{bin}' capture --turn t1 >/dev/null && \
         for f in pkg0/f0.txt pkg29/f99.txt; do echo changed > $f; done && '{bin}' rewind t1 >/dev/null",
        bin = bin.display()
    );
    run_limited(root, data.path(), &script, &[])?;
    assert_eq!(
        std::fs::read_to_string(root.join("pkg0/f0.txt"))?,
        "file 0/0\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("pkg29/f99.txt"))?,
        "file 29/99\n"
    );
    Ok(())
}

/// A folder with ten times more subdirectories than the process may hold
/// descriptors (a `node_modules` of 600 packages under a limit of 64):
/// both halves of a snapshot cover every one of them, record what a
/// command did in them, and the rewind undoes it. A walk that opened every
/// subdirectory before listing any ran out of descriptors and recorded
/// most of them as unreadable, so the changes inside were not covered.
#[test]
fn a_folder_of_600_subdirectories_is_covered_under_a_limit_of_64_descriptors() -> TestResult {
    let dir = tempfile::tempdir()?;
    let data = tempfile::tempdir()?;
    // The reports are kept outside the project, whose turn they are not.
    let reports = tempfile::tempdir()?;
    let root = dir.path();
    for d in 0..600 {
        std::fs::create_dir_all(root.join(format!("lib/m{d}")))?;
        std::fs::write(root.join(format!("lib/m{d}/index.js")), format!("m{d}\n"))?;
    }
    let bin = assert_cmd::cargo::cargo_bin("turnback");
    let script = format!(
        "ulimit -n 64 && '{bin}' --json snapshot --turn t1 > '{out}/before.json' && \
         echo changed > lib/m599/index.js && rm lib/m0/index.js && echo new > lib/m300/new.js && \
         '{bin}' --json snapshot --turn t1 --after > '{out}/after.json' && \
         '{bin}' rewind t1 >/dev/null",
        bin = bin.display(),
        out = reports.path().display(),
    );
    run_limited(root, data.path(), &script, &[("TURNBACK_FSMONITOR", "off")])?;
    for half in ["before.json", "after.json"] {
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(reports.path().join(half))?)?;
        let scan = &report["scan"];
        assert_eq!(scan["excluded_count"], 0, "{half}: {report}");
        assert_eq!(scan["dir_count"], 601, "{half}: {report}");
    }
    let after: serde_json::Value =
        serde_json::from_slice(&std::fs::read(reports.path().join("after.json"))?)?;
    let recorded = after["recorded"].to_string();
    for path in ["lib/m599/index.js", "lib/m0/index.js", "lib/m300/new.js"] {
        assert!(recorded.contains(path), "{path} not recorded: {recorded}");
    }
    assert_eq!(
        std::fs::read_to_string(root.join("lib/m599/index.js"))?,
        "m599\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("lib/m0/index.js"))?,
        "m0\n"
    );
    assert!(!root.join("lib/m300/new.js").exists());
    Ok(())
}
