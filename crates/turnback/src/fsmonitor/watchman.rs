//! A Watchman client: its JSON protocol over its unix socket, one request
//! and one answer per line, with a time limit on every read and write.
//!
//! Why not the `watchman_client` crate (the one jj uses): it is async
//! (tokio, futures, its own BSER codec: some thirty crates for what is here
//! a few lines over a blocking socket), and it finds the socket by running
//! `watchman get-sockname`, which starts a Watchman server when none runs.
//! turnback only ever uses a server that is already running, and finds
//! its socket in this order:
//! 1. `WATCHMAN_SOCK` (what Watchman sets for its triggers, and what jj and
//!    `watchman_client` honour; the tests point it at their own server);
//! 2. the socket a previous snapshot found, kept in the store's fsmonitor
//!    state (so a hook does not start a process each time);
//! 3. `watchman --no-spawn get-sockname`, when a `watchman` binary is on
//!    `PATH` (`--no-spawn`: asking never starts a server).
//!
//! The JSON protocol is the one every Watchman since 2.x speaks (4.9, the
//! Debian package, included): a request is a JSON array on one line, an
//! answer a JSON object on one line; a unilateral PDU (`"unilateral":
//! true`, a subscription's) is skipped.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// An open connection to a Watchman server.
pub(super) struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    /// Connects to the server at `sock`; every later read and write waits
    /// at most `limit`.
    pub(super) fn connect(sock: &Path, limit: Duration) -> io::Result<Conn> {
        let stream = UnixStream::connect(sock)?;
        stream.set_read_timeout(Some(limit))?;
        stream.set_write_timeout(Some(limit))?;
        Ok(Conn {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    /// Sends one request and returns its answer; an answer with an
    /// `error` field is an `Err` with that text.
    pub(super) fn call(&mut self, request: &Value) -> Result<Value, String> {
        let mut line = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .map_err(|e| describe_io("sending to Watchman", &e))?;
        loop {
            let mut answer = Vec::new();
            let n = self
                .reader
                .read_until(b'\n', &mut answer)
                .map_err(|e| describe_io("waiting for Watchman", &e))?;
            if n == 0 {
                return Err("Watchman closed the connection without answering".into());
            }
            let v: Value = serde_json::from_slice(&answer)
                .map_err(|e| format!("Watchman's answer could not be read: {e}"))?;
            if v.get("unilateral").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            if let Some(err) = v.get("error") {
                return Err(err.as_str().map_or_else(|| err.to_string(), str::to_owned));
            }
            return Ok(v);
        }
    }
}

fn describe_io(what: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("Watchman did not answer in time ({what})")
        }
        _ => format!("{what}: {e}"),
    }
}

/// The `watchman` binary on `PATH`, if there is one.
pub(super) fn find_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("watchman"))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Asks `binary` where its server's socket is, without starting a server
/// (`--no-spawn`); gives up after `limit`.
pub(super) fn get_sockname(binary: &Path, limit: Duration) -> Result<PathBuf, String> {
    let mut child = Command::new(binary)
        .args(["--no-spawn", "--output-encoding=json", "get-sockname"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{} could not be started: {e}", binary.display()))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(1)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{} get-sockname` did not answer in time",
                    binary.display()
                ));
            }
            Err(e) => return Err(format!("`{} get-sockname`: {e}", binary.display())),
        }
    }
    let mut out = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        io::Read::read_to_end(&mut stdout, &mut out)
            .map_err(|e| format!("`{} get-sockname`: {e}", binary.display()))?;
    }
    let v: Value = serde_json::from_slice(&out).map_err(|e| {
        format!(
            "`{} get-sockname` answered what is not JSON: {e}",
            binary.display()
        )
    })?;
    v.get("sockname")
        .or_else(|| v.get("unix_domain"))
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .ok_or_else(|| format!("`{} get-sockname` named no socket", binary.display()))
}
