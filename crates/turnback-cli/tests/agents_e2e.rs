//! The real coding agents, end to end: each agent's npm release (pinned in
//! `tests/agents/package-lock.json`, installed by `tests/agents/install.sh`
//! into a cache outside the clone) runs headless, with its own HOME, in a
//! git repository holding uncommitted work and a git-ignored `.env`, after
//! `turnback init <agent>`, driven by a scripted model (our own server on
//! 127.0.0.1, `tests/agents/fake_model.py`, speaking the agent's wire API;
//! Gemini CLI reads its scripted answers from a file). Two prompts: (1)
//! creates a file in a new directory, edits a tracked file and runs one
//! shell command that deletes a file, edits `.env` with `sed -i` and
//! creates another; (2) edits the first turn's new file. Then `turnback
//! list` must show two turns labelled with the prompts, and rewind / undo
//! must give each state back byte for byte. Where `init` installs chat
//! commands (Claude Code, Gemini CLI, opencode; Codex's and Copilot's
//! skill; Cline's workflows), a rewind of the first turn and an undo asked
//! for from the chat must do the same: Codex's in its `workspace-write`
//! sandbox, Gemini CLI's outside yolo mode.
//!
//! An agent that is not installed, or whose hooks did not run, fails the
//! test. Every process an agent leaves behind is killed with its process
//! group; Cline's hub daemon, which leaves that group, by the HOME it was
//! started with.
//!
//! Linux only: the agents' Linux npm binaries, process groups, signals and /proc.
#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use common::scenario::{self, EDITED, NEW_FILE, PROMPT_1, PROMPT_2, SHELL, States, without};
use common::{TestResult, tree};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The agents' node_modules, installed if needed.
fn agents_dir() -> Result<PathBuf, Error> {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/agents/install.sh"))
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err("tests/agents/install.sh could not install the agents".into());
    }
    let dir = PathBuf::from(String::from_utf8(out.stdout)?.trim());
    if !dir.is_dir() {
        return Err(format!("no agents in {}", dir.display()).into());
    }
    Ok(dir)
}

/// The scripted model server, stopped on drop.
struct FakeModel {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl FakeModel {
    fn start(dir: &Path, script: &Value) -> Result<FakeModel, Error> {
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, serde_json::to_vec(script)?)?;
        let log = dir.join("requests.jsonl");
        let mut child = Command::new("python3")
            .arg(repo_root().join("tests/agents/fake_model.py"))
            .arg(&script_path)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().ok_or("stdout")?).read_line(&mut line)?;
        let port = line.trim().parse()?;
        Ok(FakeModel { child, port, log })
    }

    fn requests(&self) -> usize {
        std::fs::read_to_string(&self.log).map_or(0, |t| t.lines().count())
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs an agent in its own process group, then kills whatever of that
/// group is left (daemons an agent starts).
#[allow(unsafe_code)] // the platform call of a test
fn run_agent(mut cmd: Command, what: &str) -> Result<Output, Error> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let pgid = child.id() as i32;
    let out = child.wait_with_output();
    // SAFETY: kill(2) with a negative pid signals that process group only;
    // the group was created for this agent.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let out = out?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(out)
}

/// A clean environment for an agent: PATH, its own HOME, and `vars`.
fn agent_command(program: &Path, root: &Path, home: &Path, vars: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        // The store `turnback init` made, in the test run's data directory.
        .env(
            "TURNBACK_DATA_DIR",
            std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
        );
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

fn abs(root: &Path, rel: &str) -> String {
    root.join(rel).to_string_lossy().into_owned()
}

/// Runs the scenario: `prompt(n)` drives prompt n through the agent.
fn scenario_with(
    agent: &str,
    prefix: &str,
    init_env: &[(&str, &Path)],
    chat: Option<Chat>,
    mut prompt: impl FnMut(&Path, &str) -> TestResult,
) -> TestResult {
    scenario_leaving(agent, prefix, init_env, &[], chat, |root, p| {
        prompt(root, p)
    })
}

/// An agent's chat commands: rewind TURN, undo.
struct Chat {
    rewind: &'static str,
    undo: &'static str,
}

/// [`scenario_with`], for an agent that writes `agent_state` for itself
/// (left out of every comparison, and checked to be nothing else).
fn scenario_leaving(
    agent: &str,
    prefix: &str,
    init_env: &[(&str, &Path)],
    agent_state: &[&str],
    chat: Option<Chat>,
    mut prompt: impl FnMut(&Path, &str) -> TestResult,
) -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, agent, init_env)?;
    let before = tree(root)?;
    prompt(root, PROMPT_1)?;
    let after_1 = without(tree(root)?, agent_state);
    prompt(root, PROMPT_2)?;
    let after_2 = without(tree(root)?, agent_state);
    // What the agent keeps for itself is out of the comparisons from here on.
    for p in agent_state {
        let path = root.join(p);
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else if path.exists() {
            std::fs::remove_file(&path)?;
        }
    }
    let states = States {
        before,
        after_1,
        after_2,
    };
    scenario::check_turns(root, &states, prefix)?;
    if let Some(chat) = chat {
        // Rewind and undo from the chat, with the commands `init` installed.
        let first = common::list(root)?
            .first()
            .and_then(|t| t["turn"].as_str().map(str::to_owned))
            .ok_or("no turn")?;
        // The agent may write its own state again: left out of these too.
        prompt(root, &format!("{} {first}", chat.rewind))?;
        let now = without(tree(root)?, agent_state);
        scenario::assert_same(&now, &states.before, "rewind from the chat");
        prompt(root, chat.undo)?;
        let now = without(tree(root)?, agent_state);
        scenario::assert_same(&now, &states.after_2, "undo from the chat");
    }
    Ok(())
}

#[test]
fn claude_code_real_binary() -> TestResult {
    let agents = agents_dir()?;
    let claude = agents.join("@anthropic-ai/claude-code-linux-x64/claude");
    let work = tempfile::tempdir()?;
    let home = work.path().join("home");
    std::fs::create_dir_all(&home)?;
    let mut server: Option<FakeModel> = None;
    let chat = Chat {
        rewind: "/turnback-rewind",
        undo: "/turnback-undo",
    };
    scenario_with("claude-code", "claude", &[], Some(chat), |root, text| {
        if server.is_none() {
            let script = json!({"prompts": [
                {"match": PROMPT_1, "steps": [
                    {"name": "Write", "input": {"file_path": abs(root, NEW_FILE), "content": scenario::NEW_TEXT}},
                    {"name": "Read", "input": {"file_path": abs(root, EDITED)}},
                    {"name": "Edit", "input": {"file_path": abs(root, EDITED), "old_string": "theme: 'light'", "new_string": "theme: 'dark'"}},
                    {"name": "Bash", "input": {"command": SHELL, "description": "Clean up and build"}},
                ]},
                {"match": PROMPT_2, "steps": [
                    {"name": "Read", "input": {"file_path": abs(root, NEW_FILE)}},
                    {"name": "Edit", "input": {"file_path": abs(root, NEW_FILE), "old_string": "ship it", "new_string": "ship it today"}},
                ]},
            ]});
            server = Some(FakeModel::start(work.path(), &script)?);
        }
        let s = server.as_ref().ok_or("server")?;
        let url = format!("http://127.0.0.1:{}", s.port);
        let vars = [
            ("ANTHROPIC_BASE_URL", url.as_str()),
            ("ANTHROPIC_API_KEY", "test-key"),
            ("IS_SANDBOX", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
        ];
        let mut cmd = agent_command(&claude, root, &home, &vars);
        cmd.args(["-p", text, "--dangerously-skip-permissions"]);
        if text != PROMPT_1 {
            cmd.arg("--continue");
        }
        run_agent(cmd, "claude")?;
        assert!(s.requests() > 0, "Claude Code asked the scripted model");
        Ok(())
    })
}

/// One line of Gemini CLI's scripted answers: a function call, or text.
fn gemini_answer(call: Option<(&str, Value)>) -> Value {
    let part = match call {
        Some((name, args)) => json!({"functionCall": {"name": name, "args": args}}),
        None => json!({"text": "Done."}),
    };
    json!({"method": "generateContentStream", "response": [
        {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]}
    ]})
}

/// The chat commands run headless in Gemini CLI's default approval mode
/// (not yolo, which the scripted prompts' tool calls need): their
/// `turnback` command runs only because of the policy `init` installed in
/// the user's `~/.gemini/policies/` (init runs with the HOME Gemini CLI
/// runs with).
#[test]
fn gemini_cli_real_binary() -> TestResult {
    let agents = agents_dir()?;
    let gemini = agents.join("@google/gemini-cli/bundle/gemini.js");
    if !gemini.is_file() {
        return Err(format!("Gemini CLI is not installed: {}", gemini.display()).into());
    }
    let work = tempfile::tempdir()?;
    let home = work.path().join("home");
    std::fs::create_dir_all(&home)?;
    let chat = Chat {
        rewind: "/turnback:rewind",
        undo: "/turnback:undo",
    };
    let mut n = 0;
    let env = [("HOME", home.as_path())];
    scenario_with("gemini-cli", "gemini", &env, Some(chat), |root, text| {
        n += 1;
        let answers = if text == PROMPT_1 {
            vec![
                gemini_answer(Some((
                    "write_file",
                    json!({"file_path": abs(root, NEW_FILE), "content": scenario::NEW_TEXT}),
                ))),
                gemini_answer(Some((
                    "replace",
                    json!({"file_path": abs(root, EDITED), "old_string": "theme: 'light'", "new_string": "theme: 'dark'", "instruction": "Use the dark theme"}),
                ))),
                gemini_answer(Some((
                    "run_shell_command",
                    json!({"command": SHELL, "description": "Clean up and build"}),
                ))),
                gemini_answer(None),
            ]
        } else if text == PROMPT_2 {
            vec![
                gemini_answer(Some((
                    "replace",
                    json!({"file_path": abs(root, NEW_FILE), "old_string": "ship it", "new_string": "ship it today", "instruction": "Make it urgent"}),
                ))),
                gemini_answer(None),
            ]
        } else {
            // A chat command: turnback ran before the model; it only replies.
            vec![gemini_answer(None)]
        };
        let file = work.path().join(format!("answers-{n}.jsonl"));
        let lines: Vec<String> = answers.iter().map(Value::to_string).collect();
        std::fs::write(&file, lines.join("\n") + "\n")?;
        let vars = [
            ("GEMINI_API_KEY", "test-key"),
            ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
        ];
        let mut cmd = agent_command(Path::new("node"), root, &home, &vars);
        cmd.arg(&gemini).args(["-p", text, "-o", "json"]);
        if !text.starts_with("/turnback:") {
            cmd.args(["--approval-mode", "yolo"]);
        }
        cmd.arg("--fake-responses-non-strict").arg(&file);
        let out = run_agent(cmd, "gemini")?;
        let report: Value = serde_json::from_slice(&out.stdout)?;
        let calls = &report["stats"]["tools"];
        assert_eq!(
            calls["totalFail"],
            0,
            "every scripted tool call of {text:?} succeeded: {calls}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    })
}

/// Codex's `apply_patch` input: one patch.
fn codex_patch(ops: &str) -> String {
    format!("*** Begin Patch\n{ops}*** End Patch\n")
}

/// Where `turnback init codex` puts its skill.
const CODEX_SKILL: &str = ".agents/skills/turnback/SKILL.md";

/// The shell command a turnback skill tells the model to run for `text`
/// (`$turnback rewind TURN`, `/turnback rewind TURN`, …): the skill's line
/// `` - `$turnback rewind TURN`: run `CMD`. … `` for the action `text`
/// names, with the user's TURN.
fn skill_command(skill: &str, text: &str) -> Result<String, Error> {
    let words: Vec<&str> = text.split(' ').collect();
    for line in skill.lines() {
        let Some(rest) = line.strip_prefix("- `") else {
            continue;
        };
        let Some((usage, rest)) = rest.split_once('`') else {
            continue;
        };
        let usage: Vec<&str> = usage.split(' ').collect();
        if usage.len() != words.len() || usage[..2] != words[..2] {
            continue;
        }
        let command = rest
            .split_once("run `")
            .and_then(|(_, c)| c.split_once('`'))
            .map(|(c, _)| c)
            .ok_or_else(|| format!("no command in the skill's line {line:?}"))?;
        return Ok(match (command.strip_suffix(" TURN"), words.get(2)) {
            (Some(c), Some(turn)) => format!("{c} {turn}"),
            _ => command.to_owned(),
        });
    }
    Err(format!("the skill has no action for {text:?}:\n{skill}").into())
}

/// Whether a request Codex sent carried the installed skill whole, as
/// Codex adds a skill the user names with `$` (`<skill><name>turnback</name>
/// <path>…</path> SKILL.md </skill>` in a user message).
fn codex_request_carries_skill(log: &Path, skill: &str) -> Result<bool, Error> {
    for line in std::fs::read_to_string(log)?.lines() {
        let req: Value = serde_json::from_str(line)?;
        let items = req["request"]["input"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for item in items.iter().filter(|i| i["role"] == "user") {
            for part in item["content"].as_array().into_iter().flatten() {
                let text = part["text"].as_str().unwrap_or_default();
                if text.contains("<name>turnback</name>") && text.contains(skill) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// The data directory every turnback of this test run uses.
fn data_dir() -> Result<PathBuf, Error> {
    std::env::var_os("TURNBACK_DATA_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .ok_or_else(|| {
            "the tests need an absolute TURNBACK_DATA_DIR (.cargo/config.toml sets one)".into()
        })
}

/// Codex's user configuration for the test: the scripted model on `port`,
/// the project trusted (Codex reads a project's `.codex/` only then, its
/// hooks and its `config.toml`, where `init` put the sandbox's writable
/// root), and a workspace-write sandbox that does not open `/tmp` and
/// `$TMPDIR` (where the test's folders are: turnback's data directory must
/// be writable through the root `init` added, not through those).
fn codex_user_config(port: u16, root: &Path) -> String {
    format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"Fake\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nenv_key = \"FAKE_KEY\"\nwire_api = \"responses\"\n\n[projects.{}]\ntrust_level = \"trusted\"\n\n[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n",
        Value::from(root.to_string_lossy()),
    )
}

/// The precondition of the sandboxed test: Codex's own sandbox (`codex
/// sandbox`: on Linux `codex-linux-sandbox`, which runs a command in user,
/// mount and PID namespaces of its own under seccomp) works here and confines a command (writing turnback's data directory
/// fails with the writable roots emptied), and lets it write the data
/// directory through the root `turnback init codex` added to the project's
/// `.codex/config.toml`. Fails, naming what is missing, otherwise.
fn codex_sandbox_precondition(
    codex: &Path,
    root: &Path,
    home: &Path,
    codex_home: &Path,
) -> TestResult {
    let data = data_dir()?;
    let probe = data.join(format!(".codex-sandbox-probe-{}", std::process::id()));
    let script = format!("touch '{}'", probe.display());
    let sandboxed = |extra: &[&str]| -> Result<Output, Error> {
        let codex_home_s = codex_home.to_string_lossy().into_owned();
        let mut cmd = agent_command(
            Path::new("node"),
            root,
            home,
            &[("CODEX_HOME", codex_home_s.as_str())],
        );
        cmd.arg(codex)
            .args(["sandbox", "-c", "sandbox_mode=\"workspace-write\""])
            .args(extra)
            .args(["--", "sh", "-c", &script])
            .stdin(Stdio::null());
        Ok(cmd.output()?)
    };
    let confined = sandboxed(&["-c", "sandbox_workspace_write.writable_roots=[]"])?;
    let err = String::from_utf8_lossy(&confined.stderr).into_owned();
    if probe.exists() {
        let _ = std::fs::remove_file(&probe);
        return Err(format!(
            "precondition: Codex's workspace-write sandbox let a command write {} without a writable root for it: no sandbox is in effect here, and a rewind from the chat would prove nothing\n{err}",
            data.display()
        )
        .into());
    }
    if !err.contains("Read-only file system") {
        return Err(format!(
            "precondition: Codex's Linux sandbox (`codex sandbox`: namespaces and seccomp) cannot run here ({}):\n{err}",
            confined.status
        )
        .into());
    }
    let allowed = sandboxed(&[])?;
    let written = probe.exists();
    let _ = std::fs::remove_file(&probe);
    if !allowed.status.success() || !written {
        return Err(format!(
            "Codex's sandbox did not let a command write turnback's data directory {} through the writable root `turnback init codex` added to {} ({}):\n{}\n{}",
            data.display(),
            root.join(".codex/config.toml").display(),
            allowed.status,
            String::from_utf8_lossy(&allowed.stderr),
            std::fs::read_to_string(root.join(".codex/config.toml")).unwrap_or_default()
        )
        .into());
    }
    Ok(())
}

/// What the commands Codex ran answered, as it sent them back to the
/// model (`function_call_output` items of the requests in `log`).
fn codex_command_outputs(log: &Path) -> Result<Vec<String>, Error> {
    let mut found = Vec::new();
    for line in std::fs::read_to_string(log)?.lines() {
        let req: Value = serde_json::from_str(line)?;
        for item in req["request"]["input"].as_array().into_iter().flatten() {
            if item["type"] == "function_call_output" {
                found.push(match &item["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
            }
        }
    }
    Ok(found)
}

/// Rewind from the chat runs the skill `init` installed: the user's prompt
/// names it (`$turnback rewind TURN`, `$turnback undo`), the request Codex
/// sends must carry that skill's `SKILL.md` (a skill Codex did not load
/// fails here), and the scripted model runs the command the skill names.
/// Every run is sandboxed as a trusted project's runs are by default
/// (`-s workspace-write`: a command may write the workspace and the
/// configured writable roots only), so the skill's `turnback rewind`
/// writes the store through the root `init` added; a machine where Codex's
/// sandbox cannot run or does not confine fails the test (see
/// [`codex_sandbox_precondition`]).
#[test]
fn codex_real_binary() -> TestResult {
    let agents = agents_dir()?;
    let codex = agents.join("@openai/codex/bin/codex.js");
    if !codex.is_file() {
        return Err(format!("Codex is not installed: {}", codex.display()).into());
    }
    let work = tempfile::tempdir()?;
    let home = work.path().join("home");
    let codex_home = work.path().join("codex-home");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&codex_home)?;
    // The HOME Codex runs with: `init` writes a data directory under it as
    // `~/…`, which Codex reads from its own HOME.
    let init_env = [
        ("CODEX_HOME", codex_home.as_path()),
        ("HOME", home.as_path()),
    ];
    let chat = Chat {
        rewind: "$turnback rewind",
        undo: "$turnback undo",
    };
    let mut runs = 0;
    scenario_with("codex", "codex", &init_env, Some(chat), |root, text| {
        // A model server per prompt, scripted for that prompt alone (a chat
        // prompt names a turn only known once the turns exist).
        runs += 1;
        let skill = std::fs::read_to_string(root.join(CODEX_SKILL))?;
        let chat = text.starts_with("$turnback");
        let steps = if text == PROMPT_1 {
            let create_and_edit = codex_patch(&format!(
                "*** Add File: {NEW_FILE}\n+# Todo\n+\n+- ship it\n*** Update File: {EDITED}\n@@\n export default {{\n-  theme: 'light',\n+  theme: 'dark',\n"
            ));
            json!([
                {"name": "apply_patch", "custom": create_and_edit},
                {"name": "exec_command", "input": {"cmd": SHELL}},
            ])
        } else if text == PROMPT_2 {
            let urgent = codex_patch(&format!(
                "*** Update File: {NEW_FILE}\n@@\n-- ship it\n+- ship it today\n"
            ));
            json!([{"name": "apply_patch", "custom": urgent}])
        } else {
            json!([{"name": "exec_command", "input": {"cmd": skill_command(&skill, text)?}}])
        };
        let dir = work.path().join(format!("run-{runs}"));
        std::fs::create_dir_all(&dir)?;
        let s = FakeModel::start(&dir, &json!({"prompts": [{"match": text, "steps": steps}]}))?;
        std::fs::write(
            codex_home.join("config.toml"),
            codex_user_config(s.port, root),
        )?;
        if runs == 1 {
            codex_sandbox_precondition(&codex, root, &home, &codex_home)?;
        }
        let codex_home_s = codex_home.to_string_lossy().into_owned();
        let vars = [
            ("CODEX_HOME", codex_home_s.as_str()),
            ("FAKE_KEY", "test-key"),
        ];
        let mut cmd = agent_command(Path::new("node"), root, &home, &vars);
        cmd.arg(&codex).args([
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "--dangerously-bypass-hook-trust",
            text,
        ]);
        let out = run_agent(cmd, "codex")?;
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains("hook: PreToolUse Completed"),
            "Codex ran the hooks: {log}"
        );
        assert!(s.requests() > 0, "Codex asked the scripted model: {log}");
        if chat {
            let outputs = codex_command_outputs(&s.log)?;
            assert!(
                !outputs.is_empty() && !outputs.iter().any(|o| o.contains("Read-only file system")),
                "the skill's command ran and the sandbox let it write the store: {outputs:?}"
            );
            assert!(
                codex_request_carries_skill(&s.log, &skill)?,
                "Codex sent the model the skill `turnback init codex` installed, for {text:?}: {log}"
            );
        }
        Ok(())
    })
}

/// opencode installs its plugin API (`@opencode-ai/plugin`) into a
/// project's `.opencode/` when the project has a plugin, from the npm
/// registry (over a minute), unless it is there: install.sh pins it in
/// `tests/agents/opencode-plugin/` and installs it in the cache, and the
/// test copies it in, so the run is fast and needs no registry.
#[test]
fn opencode_real_binary() -> TestResult {
    let agents = agents_dir()?;
    let opencode = agents.join("opencode-linux-x64/bin/opencode");
    if !opencode.is_file() {
        return Err(format!("opencode is not installed: {}", opencode.display()).into());
    }
    let work = tempfile::tempdir()?;
    let home = work.path().join("home");
    std::fs::create_dir_all(&home)?;
    let mut server: Option<FakeModel> = None;
    // opencode installs its plugin API into .opencode/ and keeps a
    // project id in .git/opencode.
    let own = [
        ".git/opencode",
        ".opencode/.gitignore",
        ".opencode/node_modules",
        ".opencode/package.json",
        ".opencode/package-lock.json",
    ];
    let chat = Chat {
        rewind: "/turnback-rewind",
        undo: "/turnback-undo",
    };
    let plugin_api = agents
        .parent()
        .ok_or("no cache directory")?
        .join("opencode-plugin");
    scenario_leaving(
        "opencode",
        "opencode",
        &[],
        &own,
        Some(chat),
        |root, text| {
            // Before every run: the chat commands run after the scenario has
            // removed what opencode keeps for itself.
            if !root.join(".opencode/node_modules").exists() {
                let status = Command::new("cp")
                    .arg("-a")
                    .arg(plugin_api.join("package.json"))
                    .arg(plugin_api.join("package-lock.json"))
                    .arg(plugin_api.join("node_modules"))
                    .arg(root.join(".opencode"))
                    .status()?;
                if !status.success() {
                    return Err(format!("cannot copy {}", plugin_api.display()).into());
                }
            }
            if server.is_none() {
                let script = json!({"prompts": [
                    {"match": PROMPT_1, "steps": [
                        {"name": "write", "input": {"filePath": abs(root, NEW_FILE), "content": scenario::NEW_TEXT}},
                        {"name": "read", "input": {"filePath": abs(root, EDITED)}},
                        {"name": "edit", "input": {"filePath": abs(root, EDITED), "oldString": "theme: 'light'", "newString": "theme: 'dark'"}},
                        {"name": "bash", "input": {"command": SHELL, "description": "Clean up and build"}},
                    ]},
                    {"match": PROMPT_2, "steps": [
                        {"name": "read", "input": {"filePath": abs(root, NEW_FILE)}},
                        {"name": "edit", "input": {"filePath": abs(root, NEW_FILE), "oldString": "ship it", "newString": "ship it today"}},
                    ]},
                ]});
                server = Some(FakeModel::start(work.path(), &script)?);
            }
            let s = server.as_ref().ok_or("server")?;
            let config = json!({
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": format!("http://127.0.0.1:{}/v1", s.port), "apiKey": "test-key"},
                "models": {"fake-model": {}},
            }},
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "permission": {"edit": "allow", "bash": "allow"},
        })
        .to_string();
            let xdg = |d: &str| home.join(d).to_string_lossy().into_owned();
            let (data, cfg, cache, state) = (
                xdg(".local/share"),
                xdg(".config"),
                xdg(".cache"),
                xdg(".local/state"),
            );
            let vars = [
                ("OPENCODE_CONFIG_CONTENT", config.as_str()),
                ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
                ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
                ("XDG_DATA_HOME", data.as_str()),
                ("XDG_CONFIG_HOME", cfg.as_str()),
                ("XDG_CACHE_HOME", cache.as_str()),
                ("XDG_STATE_HOME", state.as_str()),
            ];
            let mut cmd = agent_command(&opencode, root, &home, &vars);
            cmd.arg("run");
            // A chat command (`/turnback-rewind TURN`) runs headless as
            // `--command NAME ARGS`.
            let command = text.strip_prefix('/');
            let words = match command {
                Some(c) => {
                    let mut w = c.split(' ');
                    cmd.arg("--command").arg(w.next().unwrap_or_default());
                    w.collect::<Vec<_>>()
                }
                // `opencode run` joins its words with spaces and quotes a word
                // that holds one: the prompt goes word by word, as a user types it.
                None => text.split(' ').collect(),
            };
            cmd.args(words);
            let started = std::time::Instant::now();
            let out = run_agent(cmd, "opencode")?;
            let shown = String::from_utf8_lossy(&out.stderr);
            eprintln!("opencode {text:?}: {:.1?}", started.elapsed());
            if command.is_none() {
                assert!(
                    shown.contains("Edit "),
                    "opencode ran the scripted edit: {shown}"
                );
            }
            Ok(())
        },
    )
}

/// Where `turnback init copilot` puts its skill.
const COPILOT_SKILL: &str = ".github/skills/turnback/SKILL.md";

/// One prompt in a session of Copilot's Agent Client Protocol server
/// (`copilot --acp`, JSON-RPC on stdin and stdout, as an editor drives
/// it): `initialize`, `session/new`, `session/prompt`; a permission
/// request is answered with its first "allow" option. Returns the
/// prompt's result. The server runs in its own process group, killed
/// afterwards.
#[allow(unsafe_code)] // the platform call of a test
fn copilot_acp_prompt(mut cmd: Command, root: &Path, text: &str) -> Result<Value, Error> {
    use std::io::Write;
    use std::sync::mpsc;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start copilot --acp: {e}"))?;
    let pgid = child.id() as i32;
    let mut stdin = child.stdin.take().ok_or("stdin")?;
    let stdout = child.stdout.take().ok_or("stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if line.is_err() || tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut seen = Vec::new();
    let mut call = |id: u64, method: &str, params: Value| -> Result<Value, Error> {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}")?;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = rx
                .recv_timeout(left)
                .map_err(|_| format!("no answer to {method} from copilot --acp: {seen:?}"))??;
            let msg: Value = serde_json::from_str(&line)?;
            if msg["id"] == id && msg.get("method").is_none() {
                if let Some(e) = msg.get("error") {
                    return Err(format!("copilot --acp {method}: {e}").into());
                }
                return Ok(msg["result"].clone());
            }
            if msg["method"] == "session/request_permission" {
                let options = msg["params"]["options"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let allow = options
                    .iter()
                    .find(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("allow")))
                    .ok_or_else(|| format!("no allow option: {msg}"))?;
                let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}});
                writeln!(stdin, "{answer}")?;
            } else if msg.get("id").is_some() && msg.get("method").is_some() {
                let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not supported"}});
                writeln!(stdin, "{answer}")?;
            }
            seen.push(line);
        }
    };
    let result = (|| {
        call(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}),
        )?;
        let session = call(2, "session/new", json!({"cwd": root, "mcpServers": []}))?;
        let id = session["sessionId"].clone();
        call(
            3,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": text}]}),
        )
    })();
    // SAFETY: kill(2) with a negative pid signals that process group only;
    // the group was created for this server.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
    result
}

/// Whether a request Copilot sent carried the installed skill's text (all
/// but its front matter), as Copilot adds a skill the user invokes
/// (`<skill-context name="turnback">` in the user's message).
fn copilot_request_carries_skill(log: &Path, skill: &str) -> Result<bool, Error> {
    let body = skill
        .splitn(3, "---\n")
        .nth(2)
        .ok_or("the skill has no front matter")?
        .trim();
    Ok(chat_user_messages(log)?
        .iter()
        .any(|m| m.contains("<skill-context name=\"turnback\">") && m.contains(body)))
}

/// Rewind from the chat runs the skill `init` installed: the user's prompt
/// invokes it (`/turnback rewind TURN`, `/turnback undo`) in a session of
/// Copilot's ACP server (`copilot -p` passes a skill's slash command on to
/// the model as text; the interactive UI and ACP clients expand it), the
/// request Copilot sends must carry the skill's text (a skill Copilot did
/// not load fails here), and the scripted model, which answers only a
/// request that carries it, runs the command the skill names.
#[test]
fn copilot_real_binary() -> TestResult {
    let agents = agents_dir()?;
    let copilot = agents.join("@github/copilot-linux-x64/copilot");
    if !copilot.is_file() {
        return Err(format!("Copilot CLI is not installed: {}", copilot.display()).into());
    }
    let work = tempfile::tempdir()?;
    let home = work.path().join("home");
    std::fs::create_dir_all(&home)?;
    let mut server: Option<FakeModel> = None;
    let chat = Chat {
        rewind: "/turnback rewind",
        undo: "/turnback undo",
    };
    let mut chats = 0;
    scenario_with("copilot", "copilot", &[], Some(chat), |root, text| {
        let vars = |port: u16| {
            [
                (
                    "COPILOT_PROVIDER_BASE_URL",
                    format!("http://127.0.0.1:{port}/v1"),
                ),
                ("COPILOT_PROVIDER_TYPE", "openai".into()),
                ("COPILOT_PROVIDER_API_KEY", "test-key".into()),
                ("COPILOT_MODEL", "gpt-4.1".into()),
                ("COPILOT_OFFLINE", "true".into()),
                ("COPILOT_AUTO_UPDATE", "false".into()),
            ]
        };
        if text.starts_with("/turnback") {
            // A model server for this prompt alone, which answers with the
            // skill's command only a request that carries the skill.
            chats += 1;
            let skill = std::fs::read_to_string(root.join(COPILOT_SKILL))?;
            let steps = json!([{"name": "bash", "input": {"command": skill_command(&skill, text)?, "description": "Run turnback"}}]);
            let dir = work.path().join(format!("chat-{chats}"));
            std::fs::create_dir_all(&dir)?;
            let script = json!({"prompts": [{"match": "<skill-context name=\"turnback\">", "steps": steps}]});
            let s = FakeModel::start(&dir, &script)?;
            let vars = vars(s.port);
            let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let mut cmd = agent_command(&copilot, root, &home, &vars);
            cmd.args(["--acp", "--allow-all"]);
            let result = copilot_acp_prompt(cmd, root, text)?;
            assert_eq!(result["stopReason"], "end_turn", "{text:?}: {result}");
            assert!(
                copilot_request_carries_skill(&s.log, &skill)?,
                "Copilot sent the model the skill `turnback init copilot` installed, for {text:?}"
            );
            return Ok(());
        }
        if server.is_none() {
            // Copilot's `create` needs the directory to exist: the model
            // makes it first, as it would.
            let script = json!({"prompts": [
                {"match": PROMPT_1, "steps": [
                    {"name": "bash", "input": {"command": "mkdir -p docs/notes", "description": "Make the folder"}},
                    {"name": "create", "input": {"path": abs(root, NEW_FILE), "file_text": scenario::NEW_TEXT}},
                    {"name": "edit", "input": {"path": abs(root, EDITED), "old_str": "theme: 'light'", "new_str": "theme: 'dark'"}},
                    {"name": "bash", "input": {"command": SHELL, "description": "Clean up and build"}},
                ]},
                {"match": PROMPT_2, "steps": [
                    {"name": "edit", "input": {"path": abs(root, NEW_FILE), "old_str": "ship it", "new_str": "ship it today"}},
                ]},
            ]});
            server = Some(FakeModel::start(work.path(), &script)?);
        }
        let s = server.as_ref().ok_or("server")?;
        let vars = vars(s.port);
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut cmd = agent_command(&copilot, root, &home, &vars);
        // Repository hooks load only in a trusted folder.
        cmd.args(["-p", text, "--allow-all", "--trust-folder"]);
        let out = run_agent(cmd, "copilot")?;
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            !shown.contains('✗'),
            "every scripted tool call succeeded: {shown}"
        );
        Ok(())
    })
}

/// The processes whose environment has `HOME=home` (only this test's
/// agent runs have it), with their command lines.
fn processes_with_home(home: &Path) -> Vec<(i32, String)> {
    let want = format!("HOME={}", home.display());
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(p.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

#[allow(unsafe_code)] // the platform call of a test
fn kill(pid: i32) {
    // SAFETY: kill(2) on one process of this test's agent runs (found by
    // their HOME).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// After a Cline run: waits (at most 30 s) for the hooks Cline ran
/// detached (TaskStart) to finish, then stops its hub daemon
/// (`cline --cline-hub-daemon`), which runs in a session of its own, out
/// of reach of [`run_agent`]'s process-group kill. Err if anything else
/// was still running.
fn stop_cline_leftovers(home: &Path) -> TestResult {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (hubs, others): (Vec<_>, Vec<_>) = processes_with_home(home)
            .into_iter()
            .partition(|(_, c)| c.contains("--cline-hub-daemon"));
        if others.is_empty() || std::time::Instant::now() > deadline {
            for (pid, _) in hubs.iter().chain(&others) {
                kill(*pid);
            }
            if !others.is_empty() {
                return Err(format!("still running after Cline: {others:?}").into());
            }
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Stops whatever Cline left running with its home, also when a test fails.
struct ClineHome(PathBuf);

impl Drop for ClineHome {
    fn drop(&mut self) {
        for (pid, _) in processes_with_home(&self.0) {
            kill(pid);
        }
    }
}

/// Points Cline (its provider, in `$HOME/.cline`) at the model server on
/// `port`: OpenAI Chat Completions, by IP (the server listens on 127.0.0.1
/// only).
fn cline_auth(cline: &Path, root: &Path, home: &Path, port: u16) -> TestResult {
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut cmd = agent_command(cline, root, home, &[]);
    cmd.args(["auth", "-p", "openai-compatible", "-k", "test-key"])
        .args(["-m", "fake-model", "-b", &url]);
    run_agent(cmd, "cline auth")?;
    stop_cline_leftovers(home)
}

/// The shell command a turnback workflow tells the model to run
/// (`` Run `CMD` ``), with the user's turn for `TURN`.
fn cline_workflow_command(workflow: &str, turn: &str) -> Result<String, Error> {
    let command = workflow
        .split_once("Run `")
        .and_then(|(_, c)| c.split_once('`'))
        .map(|(c, _)| c)
        .ok_or_else(|| format!("no command in the workflow:\n{workflow}"))?;
    Ok(match command.strip_suffix(" TURN") {
        Some(c) => format!("{c} {turn}"),
        None => command.to_owned(),
    })
}

/// Whether a Chat Completions request in `log` has a user message holding
/// `text`.
fn chat_request_carries(log: &Path, text: &str) -> Result<bool, Error> {
    Ok(chat_user_messages(log)?.iter().any(|m| m.contains(text)))
}

/// The text of every user message in the Chat Completions requests in `log`.
fn chat_user_messages(log: &Path) -> Result<Vec<String>, Error> {
    let mut found = Vec::new();
    for line in std::fs::read_to_string(log)?.lines() {
        let req: Value = serde_json::from_str(line)?;
        for m in req["request"]["messages"].as_array().into_iter().flatten() {
            if m["role"] != "user" {
                continue;
            }
            found.push(match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            });
        }
    }
    Ok(found)
}

/// Rewind from the chat runs the workflows `init` installed: the user's
/// prompts `/turnback-rewind TURN` and `/turnback-undo` (headless, each a
/// task of its own), the request Cline sends must carry the workflow's
/// text and the user's turn (a workflow Cline did not load fails here),
/// and the scripted model runs the command the workflow names.
#[test]
fn cline_real_binary() -> TestResult {
    let agents = agents_dir()?;
    let cline = agents.join("@cline/cli-linux-x64/bin/cline");
    if !cline.is_file() {
        return Err(format!("Cline is not installed: {}", cline.display()).into());
    }
    let work = tempfile::tempdir()?;
    let home = ClineHome(work.path().join("home"));
    std::fs::create_dir_all(&home.0)?;
    let mut server: Option<FakeModel> = None;
    let mut turns = 0;
    let chat = Chat {
        rewind: "/turnback-rewind",
        undo: "/turnback-undo",
    };
    let mut chats = 0;
    scenario_with("cline", "cline", &[], Some(chat), |root, text| {
        // Cline checkpoints the project with `git stash create` at each
        // run (objects no ref names, its own state, not the agent's
        // edits): they go to an object directory outside the project,
        // which reads the project's objects as alternates. Its git also
        // refreshes the index's file times (after a rewind from the chat
        // put a tracked file's bytes back under a new mtime): it works on
        // a copy of the index, taken before each run.
        let objects = work.path().join("cline-git-objects");
        std::fs::create_dir_all(&objects)?;
        let objects = objects.to_string_lossy().into_owned();
        let alternates = root.join(".git/objects").to_string_lossy().into_owned();
        let index = work.path().join("cline-git-index");
        std::fs::copy(root.join(".git/index"), &index)?;
        let index = index.to_string_lossy().into_owned();
        let vars = [
            ("CLINE_NO_AUTO_UPDATE", "1"),
            ("GIT_OBJECT_DIRECTORY", objects.as_str()),
            ("GIT_ALTERNATE_OBJECT_DIRECTORIES", alternates.as_str()),
            ("GIT_INDEX_FILE", index.as_str()),
        ];
        if let Some((name, rest)) = text
            .strip_prefix('/')
            .map(|c| c.split_once(' ').unwrap_or((c, "")))
        {
            // A workflow: Cline sends its text, trimmed, and the rest of
            // the line. A model server for this prompt alone answers with
            // the workflow's command only a request that carries it.
            chats += 1;
            let workflow =
                std::fs::read_to_string(root.join(format!(".clinerules/workflows/{name}.md")))?;
            let command = cline_workflow_command(&workflow, rest)?;
            let sent = if rest.is_empty() {
                workflow.trim().to_owned()
            } else {
                format!("{} {rest}", workflow.trim())
            };
            let dir = work.path().join(format!("chat-{chats}"));
            std::fs::create_dir_all(&dir)?;
            let script = json!({"prompts": [{"match": workflow.trim(), "steps": [
                {"name": "run_commands", "input": {"commands": [command]}},
            ]}]});
            let s = FakeModel::start(&dir, &script)?;
            cline_auth(&cline, root, &home.0, s.port)?;
            let mut cmd = agent_command(&cline, root, &home.0, &vars);
            // Cline's CLI takes a lone word for a subcommand it does not
            // know ("Unknown command or unquoted prompt: /turnback-undo"):
            // headless, a command without arguments gets a space after it.
            let prompt = if rest.is_empty() {
                format!("{text} ")
            } else {
                text.to_owned()
            };
            cmd.arg("-c")
                .arg(root)
                .args(["-t", "300", "--json", &prompt]);
            let out = run_agent(cmd, "cline");
            stop_cline_leftovers(&home.0)?;
            let out = out?;
            assert!(
                chat_request_carries(&s.log, &sent)?,
                "Cline sent the model the workflow `turnback init cline` installed, for {text:?}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            return Ok(());
        }
        if server.is_none() {
            // Cline's `editor` creates missing parent directories itself.
            let script = json!({"prompts": [
                {"match": PROMPT_1, "steps": [
                    {"name": "editor", "input": {"path": abs(root, NEW_FILE), "new_text": scenario::NEW_TEXT}},
                    {"name": "editor", "input": {"path": abs(root, EDITED), "old_text": "theme: 'light'", "new_text": "theme: 'dark'"}},
                    {"name": "run_commands", "input": {"commands": [SHELL]}},
                ]},
                {"match": PROMPT_2, "steps": [
                    {"name": "editor", "input": {"path": abs(root, NEW_FILE), "old_text": "ship it", "new_text": "ship it today"}},
                ]},
            ]});
            let s = FakeModel::start(work.path(), &script)?;
            cline_auth(&cline, root, &home.0, s.port)?;
            server = Some(s);
        }
        let s = server.as_ref().ok_or("server")?;
        let before = s.requests();
        // Each prompt is a task of its own, as `cline "prompt"` runs it:
        // its TaskStart hook begins the turn.
        let mut cmd = agent_command(&cline, root, &home.0, &vars);
        // A model it cannot reach makes Cline retry without end: `-t`
        // bounds the run.
        cmd.arg("-c").arg(root).args(["-t", "300", "--json", text]);
        let out = run_agent(cmd, "cline");
        stop_cline_leftovers(&home.0)?;
        let out = out?;
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            s.requests() > before,
            "Cline asked the scripted model: {shown}"
        );
        // The hooks ran: the prompt began a turn (a project whose hooks
        // Cline skipped has none, and fails here, not later).
        turns += 1;
        let listed = common::list(root)?;
        assert_eq!(
            listed.len(),
            turns,
            "Cline ran turnback's hooks for {text:?}: {listed:?}\n{shown}"
        );
        Ok(())
    })
}
