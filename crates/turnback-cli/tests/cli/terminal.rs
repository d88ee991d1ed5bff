//! The binary in a real terminal: tmux runs it in a detached session of
//! 120x40 (its own server, socket and no configuration), `send-keys` types,
//! `capture-pane` reads the screen and `pipe-pane` keeps every byte the
//! program wrote. tmux must be installed (`.ci/run` installs it): without
//! it these tests fail, never skip.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{BIN, Project, Res, TestResult};

/// How long a screen may take to show what a test waits for (a debug
/// build, at low priority, beside the other tests).
const PATIENCE: Duration = Duration::from_secs(60);

/// One tmux server and session running `turnback ARGS` in a project.
pub struct Tmux {
    socket: PathBuf,
    /// Every byte the program wrote to the terminal.
    raw: PathBuf,
}

/// `s` quoted for `sh`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Tmux {
    /// Starts `turnback ARGS` in `p`'s root in a new terminal, with its own
    /// HOME and TURNBACK_DATA_DIR (given on the command line through
    /// `env -i`, as the tests' commands get nothing else) and `env` added;
    /// once it ends, the pane shows `[exit N]`.
    pub fn start(p: &Project, args: &[&str], env: &[(&str, &str)]) -> Res<Tmux> {
        let home = p.outer.join("home");
        std::fs::create_dir_all(&home)?;
        let data = std::env::var("TURNBACK_DATA_DIR")?;
        let path = std::env::var("PATH").unwrap_or_default();
        let go = p.outer.join("tmux-go");
        let mut line = format!(
            "while [ ! -e {go} ]; do sleep 0.05; done; cd {root} && env -i PATH={path} HOME={home} TURNBACK_DATA_DIR={data} TERM=xterm-256color",
            go = quoted(&go.to_string_lossy()),
            root = quoted(&p.root.to_string_lossy()),
            path = quoted(&path),
            home = quoted(&home.to_string_lossy()),
            data = quoted(&data),
        );
        for (k, v) in env {
            line.push_str(&format!(" {k}={}", quoted(v)));
        }
        line.push(' ');
        line.push_str(&quoted(BIN));
        for a in args {
            line.push(' ');
            line.push_str(&quoted(a));
        }
        line.push_str("; echo \"[exit $?]\"; sleep 600");
        let t = Tmux {
            socket: p.outer.join("tmux.sock"),
            raw: p.outer.join("tmux-raw"),
        };
        t.tmux(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            "t",
            &line,
        ])?;
        let pipe = format!("cat >> {}", quoted(&t.raw.to_string_lossy()));
        t.tmux(&["pipe-pane", "-t", "t", "-o", &pipe])?;
        std::fs::write(&go, "")?;
        Ok(t)
    }

    /// Runs `tmux ARGS` against this server.
    fn tmux(&self, args: &[&str]) -> Res<String> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .map_err(|e| {
                format!(
                    "cannot run tmux ({e}): the terminal tests need it (.ci/run installs it with apt)"
                )
            })?;
        if !out.status.success() {
            return Err(format!("tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The screen as it is now.
    pub fn screen(&self) -> Res<String> {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits until the screen satisfies `ready`, and returns it.
    pub fn wait(&self, what: &str, ready: impl Fn(&str) -> bool) -> Res<String> {
        let start = Instant::now();
        loop {
            let screen = self.screen()?;
            if ready(&screen) {
                return Ok(screen);
            }
            if start.elapsed() > PATIENCE {
                return Err(format!("the screen never showed {what}:\n{screen}").into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the program's end; its exit code and the screen.
    pub fn exit(&self) -> Res<(i32, String)> {
        let screen = self.wait("the program's end", |s| s.contains("[exit "))?;
        let code = screen
            .split("[exit ")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .and_then(|n| n.parse().ok())
            .ok_or("no exit code")?;
        Ok((code, screen))
    }

    /// Every byte the program wrote to the terminal so far.
    pub fn raw(&self) -> Res<String> {
        Ok(String::from_utf8_lossy(&std::fs::read(&self.raw).unwrap_or_default()).into_owned())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// A turn that changes `n` files (`src/fNNN.txt`), each captured first.
fn turn_of(p: &Project, turn: &str, n: usize) -> TestResult {
    let names: Vec<String> = (0..n).map(|k| format!("src/f{k:03}.txt")).collect();
    for name in &names {
        if !p.exists(name) {
            p.write(name, format!("before {name}\n"))?;
        }
    }
    let mut args = vec!["capture", "--turn", turn];
    args.extend(names.iter().map(String::as_str));
    p.ok(&args)?;
    for name in &names {
        p.write(name, format!("{turn}\n"))?;
    }
    Ok(())
}

#[test]
fn a_rewind_on_a_terminal_draws_a_progress_bar_then_clears_it() -> TestResult {
    let p = Project::new()?;
    turn_of(&p, "t1", 300)?;
    let t = Tmux::start(
        &p,
        &["rewind", "t1"],
        &[("TURNBACK_PROGRESS_DELAY_MS", "0")],
    )?;
    let (code, screen) = t.exit()?;
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen
            .contains("restored 300, deleted 0, conflicts 0, not restored 0 (-v lists every path)"),
        "{screen}"
    );
    // Drawn while it ran (the raw bytes), gone from the final screen.
    let raw = t.raw()?;
    assert!(
        raw.contains("rewinding") && raw.contains("/300 paths"),
        "{raw:?}"
    );
    assert!(!screen.contains("rewinding"), "{screen}");
    assert_eq!(p.read("src/f123.txt")?, b"before src/f123.txt\n");
    Ok(())
}
