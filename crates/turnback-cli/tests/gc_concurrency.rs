//! gc beside a capture paused mid-write (SIGSTOP while it holds the lock and
//! is writing its pack): gc must wait, never delete the capture's blob.
//!
//! Unix only: the capture is paused and resumed by signals (SIGSTOP, SIGCONT).
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn turnback(root: &std::path::Path) -> Command {
    let mut c = Command::cargo_bin("turnback").expect("binary built");
    c.env_clear()
        .env(
            "TURNBACK_DATA_DIR",
            std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
        )
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    c.current_dir(root).arg("--root").arg(root);
    c
}

fn kill(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .map(|s| s.success());
    assert_eq!(ok.ok(), Some(true), "kill {sig} {pid}");
}

#[test]
fn gc_beside_a_paused_capture_loses_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    // Older turns for gc to drop.
    for i in 0..5 {
        std::fs::write(root.join(format!("old{i}.txt")), format!("old {i}\n"))?;
        let st = turnback(root)
            .args([
                "capture",
                "--turn",
                &format!("old{i}"),
                &format!("old{i}.txt"),
            ])
            .status()?;
        assert!(st.success());
    }
    // A file large enough that its capture is still writing when we stop it
    // (poorly compressible bytes from a simple generator).
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let big: Vec<u8> = (0..(96usize << 20))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    std::fs::write(root.join("big.bin"), &big)?;
    std::fs::set_permissions(root.join("big.bin"), std::fs::Permissions::from_mode(0o640))?;

    let mut capture = turnback(root)
        .args(["capture", "--turn", "new", "big.bin"])
        .stdout(Stdio::null())
        .spawn()?;
    // Wait until its temporary pack exists, then pause it mid-write.
    let packs = turnback::location::locate(root, None)?
        .ok_or("earlier turns made a store")?
        .store_dir;
    let start = Instant::now();
    loop {
        let writing = std::fs::read_dir(&packs)?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().contains(".turnback-tmp-"));
        if writing {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "capture never started writing"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    kill(capture.id(), "-STOP");

    // gc cannot take the lock while the capture holds it: it fails cleanly.
    let gc = turnback(root)
        .args(["--lock-timeout", "0.5", "gc", "--keep-turns", "1"])
        .output()?;
    assert_eq!(gc.status.code(), Some(1));
    let err = String::from_utf8_lossy(&gc.stderr);
    assert!(err.contains("held by another turnback process"), "{err}");

    kill(capture.id(), "-CONT");
    assert!(capture.wait()?.success(), "the paused capture completes");

    // Now gc runs and drops the old turns, keeping the new one whole.
    let gc = turnback(root).args(["gc", "--keep-turns", "1"]).output()?;
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    std::fs::write(root.join("big.bin"), b"the agent's write")?;
    let rw = turnback(root).args(["rewind", "new"]).output()?;
    assert!(
        rw.status.success(),
        "{}",
        String::from_utf8_lossy(&rw.stderr)
    );
    assert!(
        std::fs::read(root.join("big.bin"))? == big,
        "the big file came back byte for byte"
    );
    let mode = std::fs::metadata(root.join("big.bin"))?
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o640);
    Ok(())
}
