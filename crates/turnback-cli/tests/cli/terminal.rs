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
        // Each its own server and files: one test may start several.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let go = p.outer.join(format!("tmux-go-{n}"));
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
            socket: p.outer.join(format!("tmux-{n}.sock")),
            raw: p.outer.join(format!("tmux-raw-{n}")),
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

    /// Types `keys` (tmux key names: `Down`, `Enter`, `Escape`, `y`).
    pub fn keys(&self, keys: &[&str]) -> TestResult {
        for k in keys {
            self.tmux(&["send-keys", "-t", "t", k])?;
        }
        Ok(())
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

    /// Waits until the screen shows `text`.
    pub fn wait_for(&self, text: &str) -> Res<String> {
        self.wait(&format!("{text:?}"), |s| s.contains(text))
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

/// Three turns: t1 modifies a.txt; t2 modifies b.txt and creates c.txt; t3
/// deletes d.txt.
fn three_turns(p: &Project) -> TestResult {
    for f in ["a.txt", "b.txt", "d.txt"] {
        p.write(f, format!("{f} before\n"))?;
    }
    let write = |turn: &str, label: &str, path: &str, text: &str| {
        p.tb()
            .args(["write", "--turn", turn, "--label", label, path])
            .write_stdin(text)
            .assert()
            .success();
    };
    write("t1", "first", "a.txt", "a by t1\n");
    write("t2", "second", "b.txt", "b by t2\n");
    write("t2", "second", "c.txt", "c by t2\n");
    p.ok(&["capture", "--turn", "t3", "--label", "third", "d.txt"])?;
    std::fs::remove_file(p.path("d.txt"))?;
    Ok(())
}

/// The turn ids of the picker's list, top to bottom.
fn listed(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| l.contains("file(s)"))
        .filter_map(|l| {
            l.trim_start_matches(['│', ' ', '>'])
                .split_whitespace()
                .next()
                .map(str::to_owned)
        })
        .collect()
}

#[test]
fn the_picker_lists_turns_newest_first_and_rewinds_the_one_picked_on_y() -> TestResult {
    let p = Project::new()?;
    three_turns(&p)?;
    let t = Tmux::start(&p, &["rewind"], &[])?;
    let screen = t.wait_for("pick a turn")?;
    assert_eq!(listed(&screen), ["t3", "t2", "t1"], "{screen}");
    // The newest is selected, its changes below the list.
    assert!(screen.contains("> t3"), "{screen}");
    assert!(screen.contains("D  d.txt"), "{screen}");
    assert!(
        screen.contains("turn t3: 0 created, 0 modified, 1 deleted"),
        "{screen}"
    );
    t.keys(&["Down"])?;
    let screen = t.wait_for("> t2")?;
    assert!(
        screen.contains("M  b.txt") && screen.contains("A  c.txt"),
        "{screen}"
    );
    assert!(screen.contains("second"), "{screen}");
    t.keys(&["Enter"])?;
    // The dry run, then the question; nothing changed yet.
    let screen = t.wait_for("[y/N]")?;
    assert!(
        screen.contains("rewind of t2 would undo turns: t2, t3"),
        "{screen}"
    );
    assert!(
        screen.contains("delete") && screen.contains("c.txt"),
        "{screen}"
    );
    assert_eq!(p.read("b.txt")?, b"b by t2\n");
    assert!(p.exists("c.txt"));
    t.keys(&["y"])?;
    let (code, screen) = t.exit()?;
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("rewound turns: t2, t3"), "{screen}");
    assert!(
        screen.contains("restored 2, deleted 1, conflicts 0, not restored 0"),
        "{screen}"
    );
    assert_eq!(p.read("a.txt")?, b"a by t1\n");
    assert_eq!(p.read("b.txt")?, b"b.txt before\n");
    assert_eq!(p.read("d.txt")?, b"d.txt before\n");
    assert!(!p.exists("c.txt"));
    Ok(())
}

#[test]
fn n_esc_and_q_in_the_picker_change_nothing() -> TestResult {
    let p = Project::new()?;
    three_turns(&p)?;
    let before = p.snapshot()?;
    // No at the question, Esc at the question, then q and Esc in the list.
    let ways: [&[&str]; 4] = [
        &["Enter", "n"],
        &["Down", "Enter", "Escape"],
        &["q"],
        &["Escape"],
    ];
    for keys in ways {
        let t = Tmux::start(&p, &["rewind"], &[])?;
        t.wait_for("pick a turn")?;
        t.keys(keys)?;
        let (code, screen) = t.exit()?;
        assert_eq!(code, 0, "{keys:?}: {screen}");
        assert!(screen.contains("nothing changed"), "{keys:?}: {screen}");
        assert!(!screen.contains("rewound turns"), "{keys:?}: {screen}");
        assert_eq!(p.snapshot()?, before, "{keys:?}");
    }
    assert_eq!(p.json(&["list"])?.as_array().map(Vec::len), Some(3));
    Ok(())
}

#[test]
fn the_picker_of_revert_reverts_the_turn_picked_alone() -> TestResult {
    let p = Project::new()?;
    three_turns(&p)?;
    let t = Tmux::start(&p, &["revert"], &[])?;
    t.wait_for("pick a turn")?;
    t.keys(&["j", "Enter"])?;
    let screen = t.wait_for("[y/N]")?;
    assert!(
        screen.contains("revert of t2 would undo turns: t2"),
        "{screen}"
    );
    t.keys(&["y"])?;
    let (code, screen) = t.exit()?;
    assert_eq!(code, 0, "{screen}");
    assert_eq!(p.read("b.txt")?, b"b.txt before\n");
    assert!(!p.exists("c.txt"));
    // t3 stays: d.txt is still deleted.
    assert!(!p.exists("d.txt"));
    Ok(())
}

#[test]
fn the_picker_of_show_prints_the_turn_picked() -> TestResult {
    let p = Project::new()?;
    three_turns(&p)?;
    let t = Tmux::start(&p, &["show"], &[])?;
    t.wait_for("pick a turn")?;
    t.keys(&["Down", "Down"])?;
    let screen = t.wait_for("> t1")?;
    assert!(screen.contains("M  a.txt"), "{screen}");
    t.keys(&["Enter"])?;
    let (code, screen) = t.exit()?;
    assert_eq!(code, 0, "{screen}");
    let shown = p.ok(&["show", "t1"])?;
    for line in shown.lines() {
        assert!(screen.contains(line.trim_end()), "{line:?} not in {screen}");
    }
    Ok(())
}
