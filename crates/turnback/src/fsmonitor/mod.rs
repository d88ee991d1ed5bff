//! Watchman as the change source of snapshots.
//!
//! A snapshot normally stats the whole tree (see [`crate::snapshot`]).
//! When Watchman runs, a snapshot instead asks it which paths changed
//! since the clock stored with the tree state ([`state`]), and stats and
//! reads only those, on top of the tree state and its stat cache. This
//! module is that question and nothing more: [`ask`] answers with the
//! changed paths, or with the reason the full scan must run instead
//! ([`Answer::changed`] is `Err`), and with the clock to store with the
//! tree the snapshot writes.
//!
//! Never trusted blindly: every one of these is a full scan for that
//! snapshot, with its reason kept for `status`, never "nothing changed":
//! no Watchman (`fsmonitor = "off"`, no binary, no server running: auto
//! mode never starts one), no clock stored with this tree (the first
//! snapshot, or a snapshot without Watchman wrote the tree since), a
//! clock of another folder (the project moved, or copied with its store
//! forked: the store holds the old folder's watch), a rewind, revert, undo
//! or redo since the last snapshot (it gives the files it keeps a second
//! name for a while: a link count and ctime change Watchman does not
//! report; decided by the snapshot, which reads the log), a name made
//! and removed since the clock that was another name of a file or that
//! Watchman never saw (a write through it changed a file Watchman does not
//! name; see `gone_link`), a
//! fresh instance (`is_fresh_instance`: Watchman restarted, recrawled
//! after an overflow, or no longer knows the clock), a deleted watch, an
//! error, or no answer within [`limit`]. Which paths Watchman's answer
//! makes the snapshot look at, and when it needs the full scan anyway,
//! is decided by the walk ([`crate::snapshot`]'s `walk::walk_changed`).
//!
//! Setting: `fsmonitor = "auto" | "watchman" | "off"` in the store's
//! `config.toml` (see [`crate::config`]), overridden by the environment
//! variable `TURNBACK_FSMONITOR`. `auto` (the default) uses a Watchman
//! server that is running; `watchman` does the same and warns on every
//! snapshot that cannot use it; `off` never asks.
//!
//! Platforms: Linux and macOS (a unix socket). On Windows Watchman speaks
//! over a named pipe, which turnback does not use yet: the scan runs, and
//! `status` says so.

use std::path::Path;
#[cfg(unix)]
use std::time::Duration;

use serde::Serialize;

use crate::config::FsMonitor;
use crate::error::{Error, Result};

pub(crate) mod state;
#[cfg(unix)]
mod watchman;

pub(crate) use state::{State, Token, Unheld, Used};

/// The environment variable that overrides the config's `fsmonitor`.
pub const ENV: &str = "TURNBACK_FSMONITOR";

/// How a snapshot found its changes (in `status` and a snapshot's report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeSource {
    /// `"watchman"` when Watchman's answer was used, `"scan"` when the
    /// whole tree was stat-walked.
    pub source: &'static str,
    /// Why the scan ran (absent when Watchman was used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ChangeSource {
    pub(crate) fn of(used: Used, reason: &str) -> ChangeSource {
        ChangeSource {
            source: if used == Used::Watchman {
                "watchman"
            } else {
                "scan"
            },
            reason: (used != Used::Watchman).then(|| reason.to_owned()),
        }
    }

    /// A sentence for people.
    pub fn describe(&self) -> String {
        match &self.reason {
            None => "Watchman (only the paths it named were looked at)".into(),
            Some(why) => format!("full scan ({why})"),
        }
    }
}

/// The mode in force: `TURNBACK_FSMONITOR` when set, else the config's.
pub(crate) fn mode(config: FsMonitor) -> Result<FsMonitor> {
    match std::env::var(ENV) {
        Err(std::env::VarError::NotPresent) => Ok(config),
        Ok(v) if v.is_empty() => Ok(config),
        Ok(v) => match v.as_str() {
            "auto" => Ok(FsMonitor::Auto),
            "watchman" => Ok(FsMonitor::Watchman),
            "off" => Ok(FsMonitor::Off),
            _ => Err(Error::BadEnv {
                name: ENV,
                value: v,
                reason: "it must be auto, watchman or off".into(),
            }),
        },
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::BadEnv {
            name: ENV,
            value: v.to_string_lossy().into_owned(),
            reason: "it must be auto, watchman or off".into(),
        }),
    }
}

/// How long one exchange with Watchman may take before the scan runs
/// instead: 1 s, or `TURNBACK_WATCHMAN_TIMEOUT_MS` (for tests).
#[cfg(unix)]
fn limit() -> Duration {
    let ms = std::env::var("TURNBACK_WATCHMAN_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1000);
    Duration::from_millis(ms.max(1))
}

/// Why the last snapshot did not use Watchman, when it kept no state
/// saying so: nothing is stored while Watchman cannot be used.
pub(crate) fn why_not() -> String {
    #[cfg(unix)]
    {
        if std::env::var_os("WATCHMAN_SOCK").is_none_or(|s| s.is_empty())
            && watchman::find_binary().is_none()
        {
            return "Watchman is not installed (no `watchman` on PATH)".into();
        }
        "no Watchman server answered when it was taken, or it was taken without Watchman".into()
    }
    #[cfg(not(unix))]
    {
        "turnback does not use Watchman on this platform yet".into()
    }
}

/// What the change source says for one snapshot.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The paths changed since the stored clock (relative to the project
    /// root, `/`-separated, as Watchman named them), or why the full scan
    /// must run.
    pub(crate) changed: std::result::Result<Vec<Vec<u8>>, String>,
    /// The clock to store with the tree this snapshot writes: answered
    /// before the snapshot looks at any path.
    pub(crate) next: Option<Token>,
    /// The socket Watchman answered on (or was looked for at).
    pub(crate) sock: String,
    /// Whether this was [`FsMonitor::Off`].
    pub(crate) off: bool,
    /// Among the paths changed, those that may hide a change to another
    /// file, and why (see `gone_link`): a snapshot that looks at such a
    /// path scans the whole tree.
    pub(crate) gone_links: Vec<(Vec<u8>, &'static str)>,
}

impl Answer {
    fn scan(reason: impl Into<String>, sock: String) -> Answer {
        Answer {
            changed: Err(reason.into()),
            next: None,
            sock,
            off: false,
            gone_links: Vec::new(),
        }
    }
}

/// Asks the change source what changed in `root` since the clock
/// `stored` holds, when that clock goes with `tree` (the tree state in
/// place: its stamp and entry count).
pub(crate) fn ask(
    root: &Path,
    mode: FsMonitor,
    stored: Option<&State>,
    tree: Option<(i64, u64)>,
) -> Answer {
    if mode == FsMonitor::Off {
        return Answer {
            off: true,
            ..Answer::scan("fsmonitor is off", String::new())
        };
    }
    ask_watchman(root, stored, tree)
}

#[cfg(not(unix))]
fn ask_watchman(_root: &Path, _stored: Option<&State>, _tree: Option<(i64, u64)>) -> Answer {
    Answer::scan(
        "turnback does not use Watchman on this platform yet",
        String::new(),
    )
}

#[cfg(unix)]
fn ask_watchman(root: &Path, stored: Option<&State>, tree: Option<(i64, u64)>) -> Answer {
    use serde_json::{Value, json};
    let limit = limit();
    let from_env = std::env::var_os("WATCHMAN_SOCK").filter(|s| !s.is_empty());
    let cached = stored.map(|s| s.sock.as_str()).filter(|s| !s.is_empty());
    let discover = || -> std::result::Result<std::path::PathBuf, String> {
        let bin =
            watchman::find_binary().ok_or("Watchman is not installed (no `watchman` on PATH)")?;
        watchman::get_sockname(&bin, limit)
    };
    let (sock, mut conn) = match (&from_env, cached) {
        (Some(s), _) => {
            let sock = std::path::PathBuf::from(s);
            match watchman::Conn::connect(&sock, limit) {
                Ok(c) => (sock, c),
                Err(e) => {
                    let shown = sock.display().to_string();
                    return Answer::scan(
                        format!("no Watchman server answers at WATCHMAN_SOCK={shown}: {e}"),
                        shown,
                    );
                }
            }
        }
        (None, cached) => {
            let first = cached.map(std::path::PathBuf::from);
            let tried = first.as_ref().and_then(|s| {
                watchman::Conn::connect(s, limit)
                    .ok()
                    .map(|c| (s.clone(), c))
            });
            match tried {
                Some(found) => found,
                None => {
                    let sock = match discover() {
                        Ok(s) => s,
                        Err(why) => return Answer::scan(why, String::new()),
                    };
                    let shown = sock.display().to_string();
                    match watchman::Conn::connect(&sock, limit) {
                        Ok(c) => (sock, c),
                        Err(e) => {
                            return Answer::scan(
                                format!(
                                    "no Watchman server is running at {shown} ({e}); `watchman watch-project` starts one"
                                ),
                                shown,
                            );
                        }
                    }
                }
            }
        }
    };
    let sock = sock.display().to_string();
    let Some(root_str) = root.to_str() else {
        return Answer::scan("the project's path is not UTF-8", sock);
    };
    // A clock goes only with the tree it was stored with, and only with
    // the server and root it came from: a store that went with its project
    // to another folder (moved, or forked for a copy) holds the clock of
    // the old folder, which says nothing of this one.
    let same_root = |t: &Token| Path::new(&t.watch).join(&t.rel) == root;
    let usable = stored.and_then(|s| {
        let t = s.token.as_ref()?;
        (Some(s.tree) == tree && s.sock == sock && same_root(t)).then_some(t)
    });
    let sync = limit.as_millis().min(u128::from(u32::MAX)) as u64;
    if let Some(t) = usable {
        let mut q = json!({
            "since": t.clock,
            // Beside the name, what tells a name made and removed since
            // the clock that was another name of a file (see `gone_link`).
            "fields": ["name", "exists", "new", "type", "ino", "nlink"],
            "empty_on_fresh_instance": true,
            "sync_timeout": sync,
        });
        if !t.rel.is_empty() {
            q["relative_root"] = Value::from(t.rel.as_str());
        }
        match conn.call(&json!(["query", t.watch, q])) {
            Ok(v) => {
                let clock = v.get("clock").and_then(Value::as_str);
                let next = clock.map(|c| Token {
                    clock: c.to_owned(),
                    ..t.clone()
                });
                let recrawls = recrawls_of(&v);
                let next = next.map(|n| Token { recrawls, ..n });
                if recrawls != t.recrawls {
                    return Answer {
                        next,
                        ..Answer::scan(
                            format!(
                                "Watchman recrawled the folder (an overflow of file system events, say; {recrawls} recrawls so far)"
                            ),
                            sock,
                        )
                    };
                }
                if v.get("is_fresh_instance").and_then(Value::as_bool) != Some(false) {
                    return Answer {
                        next,
                        ..Answer::scan(
                            "Watchman restarted, recrawled the folder or no longer knows the stored clock (a fresh instance)",
                            sock,
                        )
                    };
                }
                let Some(next) = next else {
                    return Answer::scan("Watchman's answer had no clock", sock);
                };
                let Some(files) = v.get("files").and_then(Value::as_array) else {
                    return Answer::scan("Watchman's answer listed no files", sock);
                };
                let mut changed = Vec::with_capacity(files.len());
                let mut gone_links = Vec::new();
                for f in files {
                    let Some(name) = f.get("name").and_then(Value::as_str) else {
                        return Answer::scan("Watchman's answer named a file oddly", sock);
                    };
                    if let Some(why) = gone_link(f) {
                        gone_links.push((name.as_bytes().to_vec(), why));
                    }
                    changed.push(name.as_bytes().to_vec());
                }
                return Answer {
                    changed: Ok(changed),
                    next: Some(next),
                    sock,
                    off: false,
                    gone_links,
                };
            }
            Err(e) => {
                // The watch was deleted (or the server forgot it): watch
                // again below, scan this time.
                if !(e.contains("not watched") || e.contains("unable to resolve root")) {
                    return Answer::scan(format!("Watchman: {e}"), sock);
                }
                let why = format!("the watch of {} was deleted", t.watch);
                let fresh = watch_and_clock(&mut conn, root_str, sync);
                return Answer {
                    next: fresh.ok(),
                    ..Answer::scan(why, sock)
                };
            }
        }
    }
    let why = match stored {
        Some(s) if s.token.is_some() && s.sock != sock => {
            "the stored Watchman clock is another server's"
        }
        Some(s) if s.token.as_ref().is_some_and(|t| !same_root(t)) => {
            "the stored Watchman clock is another folder's (the project was moved or copied)"
        }
        Some(s) if s.token.is_some() => {
            "the stored Watchman clock goes with another tree state (a snapshot without Watchman, or an interrupted one, wrote the tree since)"
        }
        _ => "no Watchman clock stored yet (the first snapshot with Watchman)",
    };
    match watch_and_clock(&mut conn, root_str, sync) {
        Ok(t) => Answer {
            next: Some(t),
            ..Answer::scan(why, sock)
        },
        Err(e) => Answer::scan(format!("Watchman cannot watch the folder: {e}"), sock),
    }
}

/// Why a file Watchman names may hide a change to another file, if it
/// may: a name made and removed since the clock (`new`, not `exists`)
/// that was another name of a regular file (a hard link: `nlink` above 1
/// when Watchman looked), or that was gone before Watchman could look
/// (`ino` 0). A write through such a name changes the file's other name,
/// for which Watchman reports nothing. A directory (whose `nlink` counts
/// its subdirectories) or a symlink made and removed hides nothing.
#[cfg(unix)]
fn gone_link(f: &serde_json::Value) -> Option<&'static str> {
    use serde_json::Value;
    let flag = |k: &str| f.get(k).and_then(Value::as_bool);
    let num = |k: &str| f.get(k).and_then(Value::as_u64).unwrap_or(0);
    if flag("exists") != Some(false) || flag("new") != Some(true) {
        return None;
    }
    let kind = f.get("type").and_then(Value::as_str);
    if kind == Some("f") && num("nlink") > 1 {
        Some(
            "was made and removed since the last snapshot while another name of its file (a hard link) stayed, which a write through it changes unreported",
        )
    } else if num("ino") == 0 && matches!(kind, Some("f" | "?") | None) {
        Some(
            "was made and removed before Watchman could look at it: it may have been another name of a file (a hard link), which a write through it changes unreported",
        )
    } else {
        None
    }
}

/// Watches `root` (or the project holding it) and takes a clock.
#[cfg(unix)]
fn watch_and_clock(
    conn: &mut watchman::Conn,
    root: &str,
    sync: u64,
) -> std::result::Result<Token, String> {
    use serde_json::{Value, json};
    let w = conn.call(&json!(["watch-project", root]))?;
    let watch = w
        .get("watch")
        .and_then(Value::as_str)
        .ok_or("`watch-project` named no root")?
        .to_owned();
    let rel = w
        .get("relative_path")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    // A query since a clock no instance gave: the clock of now, synced,
    // with no file listed, and the recrawl warning that `clock` leaves out.
    let c = conn.call(&json!(["query", watch, {
        "since": "c:0:0:0:0",
        "empty_on_fresh_instance": true,
        "fields": ["name"],
        "sync_timeout": sync,
    }]))?;
    let clock = c
        .get("clock")
        .and_then(Value::as_str)
        .ok_or("Watchman gave no clock")?
        .to_owned();
    Ok(Token {
        watch,
        rel,
        clock,
        recrawls: recrawls_of(&c),
    })
}

/// How many times Watchman says it recrawled the watch, from the warning
/// it adds to every answer after a recrawl ("Recrawled this watch N
/// times, ..."); 0 without one.
#[cfg(unix)]
fn recrawls_of(v: &serde_json::Value) -> u64 {
    let Some(w) = v.get("warning").and_then(serde_json::Value::as_str) else {
        return 0;
    };
    let Some(at) = w.find("Recrawled this watch ") else {
        // A warning of another kind: counted as one more recrawl than any
        // clock holds, so the scan runs.
        return u64::MAX;
    };
    let digits: String = w[at + "Recrawled this watch ".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(u64::MAX)
}

#[cfg(all(test, unix))]
mod tests {
    use super::gone_link;
    use serde_json::json;

    #[test]
    fn only_a_file_name_made_and_removed_that_was_a_hard_link_or_never_seen_hides_a_change() {
        let f = |exists: bool, new: bool, ty: &str, ino: u64, nlink: u64| json!({"name": "x", "exists": exists, "new": new, "type": ty, "ino": ino, "nlink": nlink});
        let hides = |v: serde_json::Value| gone_link(&v).is_some();
        // Made and removed while another name of its file stayed.
        assert!(hides(f(false, true, "f", 7, 2)));
        // Made and removed before Watchman looked.
        assert!(hides(f(false, true, "?", 0, 0)));
        // A temporary file renamed away, or one name only: nothing hidden.
        assert!(!hides(f(false, true, "f", 7, 1)));
        // A directory's link count counts its subdirectories; a symlink's
        // writes go to its target, which Watchman names.
        assert!(!hides(f(false, true, "d", 7, 3)));
        assert!(!hides(f(false, true, "l", 7, 2)));
        // Still there (the walk looks at it), or there before the clock
        // (the tree holds it and its links).
        assert!(!hides(f(true, true, "f", 7, 2)));
        assert!(!hides(f(false, false, "f", 7, 2)));
        assert!(!hides(f(false, false, "?", 0, 0)));
    }
}
