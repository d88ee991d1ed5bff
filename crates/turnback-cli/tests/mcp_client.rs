//! The MCP server against the official MCP Python SDK: runs
//! `tests/mcp/run.sh` (a virtual environment with the pinned `mcp` package,
//! then a client script that drives `turnback mcp` over stdio) on the binary
//! this test build made.
//!
//! Unix only: the script is bash and the virtual environment's `bin/python`.
#![cfg(unix)]

use std::process::Command;

#[test]
fn official_python_sdk_client_writes_edits_rewinds_and_undoes() {
    let bin = assert_cmd::cargo::cargo_bin("turnback");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/run.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("TURNBACK_BIN", &bin)
        .output()
        .expect("bash runs the MCP client script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        script.display(),
        out.status
    );
    assert!(stdout.contains(" 0 failed"), "{stdout}");
}
