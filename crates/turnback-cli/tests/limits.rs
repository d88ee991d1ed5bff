//! Resource limits: a batch capture of thousands of files must not need a
//! descriptor per file (desktop sessions often allow only 1,024).
//!
//! Linux only: a descriptor limit (`ulimit -n`) and GNU `xargs -a`.
#![cfg(target_os = "linux")]

use std::process::Command;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[test]
fn a_batch_of_3000_files_captures_and_rewinds_under_a_limit_of_128_descriptors() -> TestResult {
    let dir = tempfile::tempdir()?;
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
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(root)
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
