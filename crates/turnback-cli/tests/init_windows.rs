//! A user's first session on Windows, for every agent `init` supports
//! (runs under Wine in CI): `turnback.exe init AGENT` in a fresh project,
//! with a home, profile, app data and data directory of its own; every file
//! it wrote is whole; the exact hook command line it wrote is read back and
//! run the way that agent runs it, with that agent's event on stdin; the
//! capture really happened (`list` shows the turn, and `rewind` brings the
//! file back). Once with `turnback.exe` on PATH (init writes `turnback`) and
//! once not, from a folder with a space in its name (init writes the
//! program's path, quoted).
//!
//! How each agent runs the line on Windows, and how it is run here:
//! - Claude Code: Git Bash. Here: a POSIX shell for Windows (brush, see
//!   `tests/wine/posix-shell.sh`), and cmd.
//! - Cline: the hook file through `sh` (its shebang). Here: the same file
//!   through the POSIX shell.
//! - Gemini CLI, Codex, Copilot (its `powershell` key) and Cursor:
//!   PowerShell (Codex falls back to cmd, Cursor has been seen using
//!   either). Wine has no PowerShell (its `powershell.exe` is a stub that
//!   runs nothing): here cmd runs the same line, which `init` writes to
//!   run in both (docs/PLATFORMS.md).
//! - opencode: its plugin spawns the program it names, with no shell. Here:
//!   the same program and arguments, read from the plugin.
//!
//! cmd runs a line as `cmd.exe /d /s /c "LINE"` (Node's `shell: true`, which
//! these agents use): the line exactly as written.
#![cfg(windows)]

use std::io::Write;
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

const BIN: &str = env!("CARGO_BIN_EXE_turnback");

/// The session's folder is removed at the end, as `TempDir` cannot: the
/// store's packs are read-only, which Windows (Wine) refuses to delete
/// ("Access denied") until the attribute is cleared, and the background
/// `turnback maintain` the session's commands started may still hold a
/// file for a moment. `TempDir` gave up silently, which left 80 to 200 MB
/// per session in the Wine prefix's `Temp`.
impl Drop for Session {
    fn drop(&mut self) {
        let Some(tmp) = self.tmp.take() else { return };
        let path = tmp.keep();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            writable(&path);
            match std::fs::remove_dir_all(&path) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) if std::time::Instant::now() > deadline => {
                    eprintln!("could not remove {}: {e}", path.display());
                    return;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
            }
        }
    }
}

/// Clears the read-only attribute of everything below `dir`.
fn writable(dir: &Path) {
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in list.flatten() {
        let path = entry.path();
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if meta.is_dir() {
                writable(&path);
            } else if meta.permissions().readonly() {
                let mut perm = meta.permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                perm.set_readonly(false);
                let _ = std::fs::set_permissions(&path, perm);
            }
        }
    }
}

/// How a hook line is run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shell {
    Cmd,
    Posix,
}

/// A fresh user: a home, profile and app data folders, a data directory
/// and a project with `src/config.js` in it, and the turnback program
/// (on PATH, or a copy in a folder with a space in its name).
struct Session {
    tmp: Option<tempfile::TempDir>,
    home: PathBuf,
    data: PathBuf,
    root: PathBuf,
    program: PathBuf,
    on_path: bool,
}

impl Session {
    fn new(on_path: bool) -> Res<Session> {
        let tmp = tempfile::Builder::new()
            .prefix("turnback-init-")
            .tempdir()?;
        let base = native(tmp.path())?;
        let home = base.join("home");
        for d in ["AppData/Roaming", "AppData/Local"] {
            std::fs::create_dir_all(home.join(d))?;
        }
        let data = base.join("data");
        let root = base.join("project");
        std::fs::create_dir_all(root.join("src"))?;
        std::fs::write(root.join("src").join("config.js"), "theme: 'light'\n")?;
        let program = if on_path {
            native(Path::new(BIN))?
        } else {
            let dir = base.join("Program Files").join("turnback");
            std::fs::create_dir_all(&dir)?;
            let copy = dir.join("turnback.exe");
            std::fs::copy(BIN, &copy)?;
            copy
        };
        Ok(Session {
            tmp: Some(tmp),
            home,
            data,
            root,
            program,
            on_path,
        })
    }

    /// The user's environment, nothing else: PATH holds the system folders
    /// (and turnback's, when it is on PATH).
    fn env(&self, cmd: &mut Command) {
        let system_root = std::env::var("SystemRoot").unwrap_or_else(|_| r"C:\windows".into());
        let mut path = format!(r"{system_root}\system32;{system_root}");
        if self.on_path
            && let Some(dir) = self.program.parent()
        {
            path = format!("{};{path}", dir.display());
        }
        cmd.env_clear()
            .env("PATH", path)
            .env("SystemRoot", &system_root)
            .env("windir", &system_root)
            .env("COMSPEC", format!(r"{system_root}\system32\cmd.exe"))
            .env("HOME", &self.home)
            .env("USERPROFILE", &self.home)
            .env("APPDATA", self.home.join("AppData").join("Roaming"))
            .env("LOCALAPPDATA", self.home.join("AppData").join("Local"))
            .env("TURNBACK_DATA_DIR", &self.data)
            .current_dir(&self.root);
    }

    /// `turnback ARGS` (the program of this session) in the project.
    fn turnback(&self, args: &[&str]) -> Res<Output> {
        let mut cmd = Command::new(&self.program);
        cmd.args(args);
        self.env(&mut cmd);
        Ok(cmd.output()?)
    }

    /// Runs `line` as `shell` runs it, with `event` on stdin.
    fn run_line(&self, shell: Shell, line: &str, event: &Value) -> Res<Output> {
        let mut cmd = match shell {
            Shell::Cmd => {
                let mut c = Command::new("cmd.exe");
                c.raw_arg(format!("/d /s /c \"{line}\""));
                c
            }
            Shell::Posix => {
                let mut c = Command::new(posix_shell()?);
                c.arg("-c").arg(line);
                c
            }
        };
        self.env(&mut cmd);
        run_with_stdin(cmd, event)
    }
}

/// `path` absolute, as Windows spells it (`C:\\…`, `Z:\\work\\…` for a path
/// Cargo gave in Unix spelling), without the verbatim prefix.
fn native(path: &Path) -> Res<PathBuf> {
    let full = std::fs::canonicalize(path)?;
    let text = full.to_string_lossy();
    Ok(PathBuf::from(text.strip_prefix(r"\\?\").unwrap_or(&text)))
}

/// The POSIX shell for Windows that `tests/wine/runner.sh` names.
fn posix_shell() -> Res<PathBuf> {
    match std::env::var_os("TURNBACK_POSIX_SHELL") {
        Some(p) if Path::new(&p).is_file() => Ok(PathBuf::from(p)),
        _ => Err(
            "no POSIX shell for Windows: run tests/wine/posix-shell.sh (it builds brush \
             into the Wine cache; tests/wine/runner.sh then names it in TURNBACK_POSIX_SHELL)"
                .into(),
        ),
    }
}

fn run_with_stdin(mut cmd: Command, event: &Value) -> Res<Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    {
        let mut input = child.stdin.take().ok_or("no stdin")?;
        input.write_all(event.to_string().as_bytes())?;
    }
    Ok(child.wait_with_output()?)
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An agent's event, from the fixtures the Unix hook tests use, for the
/// project `root`, naming `src/config.js` by its Windows path.
fn event(agent: &str, root: &Path) -> Res<Value> {
    let native = root.join("src").join("config.js");
    let native = native.to_string_lossy().into_owned();
    let fixture = |name: &str| -> Res<Value> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(agent);
        let text = std::fs::read_to_string(dir.join(name))?;
        let root_json = serde_json::to_string(&root.to_string_lossy())?;
        Ok(serde_json::from_str(
            &text.replace("{{ROOT}}", &root_json[1..root_json.len() - 1]),
        )?)
    };
    Ok(match agent {
        "claude-code" => {
            let mut e = fixture("pre_tool_use_write.json")?;
            e["tool_input"]["file_path"] = native.into();
            e
        }
        "gemini-cli" => {
            let mut e = fixture("before_tool_write_file.json")?;
            e["tool_input"]["file_path"] = native.into();
            e
        }
        // The patch names its files relative to `cwd`, on every platform.
        "codex" => fixture("pre_tool_use_apply_patch.json")?,
        "copilot" => {
            let mut e = fixture("pre_tool_use_edit.json")?;
            e["toolArgs"]["path"] = native.into();
            e
        }
        "cursor" => {
            let mut e = fixture("pre_tool_use_write_edit.json")?;
            e["tool_input"]["file_path"] = native.into();
            e
        }
        "cline" => {
            let mut e = fixture("pre_tool_use_editor_edit.json")?;
            e["tool_call"]["input"]["path"] = native.clone().into();
            e["preToolUse"]["parameters"]["path"] = native.into();
            e
        }
        // What the plugin sends (`opencode_plugin.js`), as `drive.mjs` does.
        "opencode" => json!({
            "cwd": root.to_string_lossy(),
            "hook_event_name": "tool.execute.before",
            "session_id": "ses_5a1f0c2e3ffeYq7Wm2kR9sT4uV",
            "message_id": "msg_a1b2c3d4e5f6Aa1Bb2Cc3Dd4",
            "tool_name": "write",
            "tool_input": {"filePath": native, "content": "theme: 'dark'\n"},
        }),
        other => return Err(format!("no event for {other}").into()),
    })
}

/// `turnback --json init AGENT`: exit 0; every file it wrote is whole (a
/// settings file parses as JSON, a file turnback owns carries its marker
/// and ends with a newline) and no temporary file is left beside it.
fn init(s: &Session, agent: &str) -> Res<Vec<PathBuf>> {
    let out = s.turnback(&["--json", "init", agent])?;
    assert_eq!(out.status.code(), Some(0), "init {agent}: {}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout)?;
    let written: Vec<PathBuf> = report["written"]
        .as_array()
        .ok_or("init reports what it wrote")?
        .iter()
        .filter_map(Value::as_str)
        .map(PathBuf::from)
        .collect();
    assert!(!written.is_empty(), "init {agent} wrote nothing: {report}");
    for path in &written {
        let bytes = std::fs::read(path)?;
        let shown = path.display();
        let is_json = path.extension().is_some_and(|e| e == "json");
        if is_json {
            serde_json::from_slice::<Value>(&bytes)
                .map_err(|e| format!("{shown} is not whole JSON: {e}"))?;
        } else {
            let t = String::from_utf8(bytes)?;
            assert!(
                t.contains(&format!("turnback init {agent}`")),
                "{shown} lacks the marker:\n{t}"
            );
            assert!(t.ends_with('\n'), "{shown} is cut short:\n{t}");
        }
        let dir = path.parent().ok_or("a written file has a parent")?;
        for e in std::fs::read_dir(dir)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            assert!(
                !name.starts_with(".turnback-init."),
                "a temporary file left in {}: {name}",
                dir.display()
            );
        }
    }
    Ok(written)
}

/// The JSON settings file `rel` of the project.
fn settings(s: &Session, rel: &str) -> Res<Value> {
    Ok(serde_json::from_slice(&std::fs::read(s.root.join(rel))?)?)
}

/// The first handler's `key` of `event` in a settings file of matcher
/// groups (`{"hooks": {event: [{"matcher", "hooks": [handler]}]}}`).
fn grouped_command(v: &Value, event: &str, key: &str) -> Res<String> {
    v["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().into_iter().flatten())
        .find_map(|h| h[key].as_str().map(str::to_owned))
        .ok_or_else(|| format!("no {event} hook with {key} in {v}").into())
}

/// The first handler's `key` of `event` in a flat handler list.
fn flat_command(v: &Value, event: &str, key: &str) -> Res<String> {
    v["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|h| h[key].as_str().map(str::to_owned))
        .ok_or_else(|| format!("no {event} hook with {key} in {v}").into())
}

/// What init wrote the line to start with: `turnback` on PATH, else the
/// session's program in the spelling the line's shell reads.
fn check_names_program(s: &Session, line: &str) {
    if s.on_path {
        assert!(line.starts_with("turnback hook "), "{line}");
    } else {
        let path = s.program.display().to_string();
        assert!(line.contains(&format!("\"{path}\"")), "{line} names {path}");
        assert!(!line.contains(r"\\?\"), "{line}");
    }
}

/// After the hook ran: the agent writes `src/config.js`; `list` shows one
/// turn; rewinding it brings the file back.
fn check_captured(s: &Session, agent: &str, how: &str) -> Res {
    std::fs::write(s.root.join("src").join("config.js"), "theme: 'dark'\n")?;
    let out = s.turnback(&["--json", "list"])?;
    assert_eq!(out.status.code(), Some(0), "{agent} {how}: {}", text(&out));
    let turns: Value = serde_json::from_slice(&out.stdout)?;
    let ids: Vec<&str> = turns
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["turn"].as_str())
        .collect();
    assert_eq!(ids.len(), 1, "{agent} {how}: one turn captured: {turns}");
    let out = s.turnback(&["rewind", ids[0]])?;
    assert_eq!(out.status.code(), Some(0), "{agent} {how}: {}", text(&out));
    assert_eq!(
        std::fs::read_to_string(s.root.join("src").join("config.js"))?,
        "theme: 'light'\n",
        "{agent} {how}: the pre-image came back"
    );
    Ok(())
}

/// Init, then the line read back from where the agent reads it, run by
/// `shell` with the agent's event, then the capture checked; a fresh
/// session for each way the line is run.
fn session(agent: &str, on_path: bool, shell: Shell) -> Res {
    let s = Session::new(on_path)?;
    init(&s, agent)?;
    let how = format!(
        "{shell:?}, turnback {}on PATH",
        if on_path { "" } else { "not " }
    );
    let e = event(agent, &s.root)?;
    let out = match agent {
        "claude-code" => {
            let line = grouped_command(
                &settings(&s, ".claude/settings.json")?,
                "PreToolUse",
                "command",
            )?;
            check_names_program(&s, &line);
            s.run_line(shell, &line, &e)?
        }
        "gemini-cli" => {
            let line = grouped_command(
                &settings(&s, ".gemini/settings.json")?,
                "BeforeTool",
                "command",
            )?;
            check_names_program(&s, &line);
            s.run_line(shell, &line, &e)?
        }
        "codex" => {
            let line =
                grouped_command(&settings(&s, ".codex/hooks.json")?, "PreToolUse", "command")?;
            check_names_program(&s, &line);
            s.run_line(shell, &line, &e)?
        }
        "copilot" => {
            let line = flat_command(
                &settings(&s, ".github/hooks/turnback.json")?,
                "preToolUse",
                "powershell",
            )?;
            check_names_program(&s, &line);
            s.run_line(shell, &line, &e)?
        }
        "cursor" => {
            let line = flat_command(
                &settings(&s, ".cursor/hooks.json")?,
                "preToolUse",
                "command",
            )?;
            check_names_program(&s, &line);
            s.run_line(shell, &line, &e)?
        }
        "cline" => {
            // Cline runs the file by its shebang: `sh FILE`.
            let file = s.root.join(".clinerules").join("hooks").join("PreToolUse");
            let script = std::fs::read_to_string(&file)?;
            assert!(script.starts_with("#!/bin/sh\n"), "{script}");
            let line = script
                .lines()
                .find(|l| l.starts_with("exec "))
                .ok_or("the hook file runs turnback")?;
            check_names_program(&s, line.trim_start_matches("exec "));
            // brush has no `exec` builtin on Windows (Git Bash's runs the
            // program and exits with its status, as MSYS has no exec
            // either): given one that does that, it reads the file.
            let mut cmd = Command::new(posix_shell()?);
            cmd.arg("-c")
                .arg(r#"exec() { "$@"; exit; }; . "$0""#)
                .arg(&file);
            s.env(&mut cmd);
            run_with_stdin(cmd, &e)?
        }
        "opencode" => {
            // The plugin's `spawnSync(PROGRAM, ["hook", "opencode"])`.
            let plugin = std::fs::read_to_string(s.root.join(".opencode/plugin/turnback.js"))?;
            let literal = plugin
                .lines()
                .find_map(|l| l.strip_prefix("const PROGRAM = "))
                .and_then(|l| l.strip_suffix(';'))
                .ok_or("the plugin names its program")?;
            let program: String = serde_json::from_str(literal)?;
            if on_path {
                assert_eq!(program, "turnback");
            } else {
                assert_eq!(Path::new(&program), s.program);
            }
            // Node looks a bare name up on PATH, as cmd does.
            let resolved = if on_path {
                s.program.clone()
            } else {
                PathBuf::from(&program)
            };
            let mut cmd = Command::new(resolved);
            cmd.args(["hook", "opencode"]);
            s.env(&mut cmd);
            run_with_stdin(cmd, &e)?
        }
        other => return Err(format!("unknown agent {other}").into()),
    };
    assert_eq!(
        out.status.code(),
        Some(0),
        "{agent} ({how}): the hook line failed: {}",
        text(&out)
    );
    check_captured(&s, agent, &how)
}

fn both(agent: &str, shell: Shell) -> Res {
    session(agent, true, shell)?;
    session(agent, false, shell)
}

#[test]
fn claude_code_s_hook_line_runs_from_bash_and_cmd() -> Res {
    both("claude-code", Shell::Posix)?;
    both("claude-code", Shell::Cmd)
}

#[test]
fn gemini_cli_s_hook_line_runs_from_cmd() -> Res {
    both("gemini-cli", Shell::Cmd)
}

#[test]
fn codex_s_hook_line_runs_from_cmd() -> Res {
    both("codex", Shell::Cmd)
}

#[test]
fn copilot_s_powershell_hook_line_runs_from_cmd() -> Res {
    both("copilot", Shell::Cmd)
}

#[test]
fn cursor_s_hook_line_runs_from_cmd() -> Res {
    both("cursor", Shell::Cmd)
}

#[test]
fn cline_s_hook_file_runs_from_sh() -> Res {
    both("cline", Shell::Posix)
}

#[test]
fn opencode_s_plugin_program_runs() -> Res {
    both("opencode", Shell::Cmd)
}
