//! Claude Code integration, end to end: `turnback init claude-code` writes
//! `.claude/settings.json`; the recorded hook events in
//! `tests/fixtures/claude-code/` (one per event type, written from Claude
//! Code's documented hook schema) are fed through the hook command exactly
//! as that file configures it, the tool's effect is applied in between as
//! Claude Code would, and `turnback rewind` must give the folder back byte
//! for byte.
//!
//! Unix only: the hook commands `turnback init` writes are POSIX shell
//! lines (the program quoted for `sh`), run here through `sh -c` as the
//! agent runs them.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{TestResult, list, project, tree, turnback};
use serde_json::Value;
const SESSION_TAG: &str = "8c35adc1";

fn fixture(name: &str, root: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    common::fixture("claude-code", name, root)
}

/// The hook command `init` wrote for `event` in `.claude/settings.json`.
fn configured_command(
    root: &Path,
    event: &str,
    tool: Option<&str>,
) -> Result<String, Box<dyn std::error::Error>> {
    let settings: Value =
        serde_json::from_slice(&std::fs::read(root.join(".claude/settings.json"))?)?;
    let groups = settings["hooks"][event]
        .as_array()
        .ok_or_else(|| format!("no {event} hooks in settings"))?;
    for g in groups {
        let matches = match (tool, g.get("matcher").and_then(Value::as_str)) {
            (None, _) => true,
            (Some(t), Some(m)) => m.split('|').any(|x| x == t),
            (Some(_), None) => true,
        };
        if !matches {
            continue;
        }
        for h in g["hooks"].as_array().into_iter().flatten() {
            if let Some(c) = h["command"].as_str()
                && c.ends_with("hook claude-code")
            {
                return Ok(c.to_owned());
            }
        }
    }
    Err(format!("settings run no turnback hook for {event} {tool:?}").into())
}

/// Runs one event through the configured hook, as Claude Code does: the
/// command line in a shell, the event on stdin, the project as cwd.
fn send(root: &Path, event: &Value) -> Result<Output, Box<dyn std::error::Error>> {
    let name = event["hook_event_name"]
        .as_str()
        .ok_or("no hook_event_name")?;
    let tool = event.get("tool_name").and_then(Value::as_str);
    let command = configured_command(root, name, tool)?;
    send_with(root, &command, event)
}

/// Runs one event through `command`.
fn send_with(
    root: &Path,
    command: &str,
    event: &Value,
) -> Result<Output, Box<dyn std::error::Error>> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .env("CLAUDE_PROJECT_DIR", root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        stdin.write_all(serde_json::to_string(event)?.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    assert!(
        out.stdout.is_empty(),
        "a hook prints nothing on stdout (UserPromptSubmit's stdout reaches the model): {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(out)
}

fn send_ok(root: &Path, event: &Value) -> TestResult {
    let out = send(root, event)?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "hook failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// What Claude Code's tool does between PreToolUse and PostToolUse.
fn apply_tool(root: &Path, event: &Value) -> TestResult {
    let input = &event["tool_input"];
    match event["tool_name"].as_str() {
        Some("Write") => {
            let p = PathBuf::from(input["file_path"].as_str().ok_or("file_path")?);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)?;
            }
            std::fs::write(p, input["content"].as_str().ok_or("content")?)?;
        }
        Some("Edit") => {
            let p = input["file_path"].as_str().ok_or("file_path")?;
            let text = std::fs::read_to_string(p)?;
            let old = input["old_string"].as_str().ok_or("old_string")?;
            assert!(text.contains(old), "fixture's old_string is in {p}");
            std::fs::write(
                p,
                text.replacen(old, input["new_string"].as_str().ok_or("new")?, 1),
            )?;
        }
        Some("MultiEdit") => {
            let p = input["file_path"].as_str().ok_or("file_path")?;
            let mut text = std::fs::read_to_string(p)?;
            for e in input["edits"].as_array().ok_or("edits")? {
                let old = e["old_string"].as_str().ok_or("old_string")?;
                assert!(text.contains(old), "fixture's old_string is in {p}");
                text = text.replacen(old, e["new_string"].as_str().ok_or("new")?, 1);
            }
            std::fs::write(p, text)?;
        }
        Some("NotebookEdit") => {
            let p = input["notebook_path"].as_str().ok_or("notebook_path")?;
            let mut nb: Value = serde_json::from_slice(&std::fs::read(p)?)?;
            nb["cells"][0]["source"] = input["new_source"].clone();
            std::fs::write(p, serde_json::to_vec(&nb)?)?;
        }
        Some("Bash") => {
            let status = Command::new("sh")
                .arg("-c")
                .arg(input["command"].as_str().ok_or("command")?)
                .current_dir(root)
                .status()?;
            assert!(status.success());
        }
        other => return Err(format!("no tool {other:?}").into()),
    }
    Ok(())
}

/// One tool call: PreToolUse, the tool, PostToolUse.
fn tool_call(root: &Path, pre: &Value) -> TestResult {
    send_ok(root, pre)?;
    apply_tool(root, pre)?;
    let mut post = pre.clone();
    post["hook_event_name"] = "PostToolUse".into();
    send_ok(root, &post)
}

fn init(root: &Path) -> TestResult {
    let out = turnback(root, &["init", "claude-code"])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn prompt(root: &Path, text: &str, prompt_id: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let mut e = fixture("user_prompt_submit.json", root)?;
    e["prompt"] = text.into();
    e["prompt_id"] = prompt_id.into();
    Ok(e)
}

fn with_prompt_id(mut e: Value, id: &str) -> Value {
    e["prompt_id"] = id.into();
    e
}

#[test]
fn recorded_events_make_rewindable_turns_byte_for_byte() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    let before = tree(root)?;

    // Turn 1: every file tool.
    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    let theme = serde_json::json!({
        "file_path": root.join("styles/theme.css"),
        "content": "body { color: #111; }\n",
    });
    let mut write_new = fixture("pre_tool_use_write.json", root)?;
    write_new["tool_input"] = theme;
    for pre in [
        fixture("pre_tool_use_write.json", root)?,
        fixture("pre_tool_use_edit.json", root)?,
        fixture("pre_tool_use_multi_edit.json", root)?,
        fixture("pre_tool_use_notebook_edit.json", root)?,
        write_new,
    ] {
        tool_call(root, &pre)?;
    }
    let after_first = tree(root)?;
    assert_ne!(after_first, before);

    // Turn 2: a new prompt writes app.js again.
    let p2 = "2";
    send_ok(root, &prompt(root, "Now make app.js log the theme", p2)?)?;
    let mut write2 = with_prompt_id(fixture("pre_tool_use_write.json", root)?, p2);
    write2["tool_input"]["content"] = "console.log('dark');\n".into();
    tool_call(root, &write2)?;

    let turns = list(root)?;
    let ids: Vec<&str> = turns.iter().filter_map(|t| t["turn"].as_str()).collect();
    let (t1, t2) = (
        format!("claude-{SESSION_TAG}-1"),
        format!("claude-{SESSION_TAG}-2"),
    );
    assert_eq!(ids, [t1.as_str(), t2.as_str()]);
    assert_eq!(turns[0]["label"], "Switch the site to the new theme");
    assert_eq!(turns[1]["label"], "Now make app.js log the theme");
    assert_eq!(
        turns[0]["file_count"], 6,
        "5 files and the styles/ directory: {turns:?}"
    );

    let out = turnback(root, &["rewind", &t2])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        tree(root)?,
        after_first,
        "rewinding turn 2 leaves turn 1's files"
    );

    let out = turnback(root, &["rewind", &t1])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        tree(root)?,
        before,
        "rewinding turn 1 gives the folder back byte for byte"
    );
    Ok(())
}

#[test]
fn separate_hook_processes_agree_on_the_turn_and_a_repeated_prompt_begins_one() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    let submit = fixture("user_prompt_submit.json", root)?;
    send_ok(root, &submit)?;
    send_ok(root, &submit)?; // the same prompt_id delivered twice
    tool_call(root, &fixture("pre_tool_use_write.json", root)?)?;
    tool_call(root, &fixture("pre_tool_use_edit.json", root)?)?;
    let turns = list(root)?;
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(turns[0]["turn"], format!("claude-{SESSION_TAG}-1"));
    assert_eq!(turns[0]["file_count"], 2);

    // A tool call from a prompt the hook never saw begins a turn of its own.
    let unseen = with_prompt_id(fixture("pre_tool_use_multi_edit.json", root)?, "unseen");
    tool_call(root, &unseen)?;
    let turns = list(root)?;
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(turns[1]["turn"], format!("claude-{SESSION_TAG}-2"));
    Ok(())
}

#[test]
fn tool_calls_before_any_prompt_get_a_turn() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    let before = tree(root)?;
    tool_call(root, &fixture("pre_tool_use_write.json", root)?)?;
    let turns = list(root)?;
    assert_eq!(turns.len(), 1);
    let id = turns[0]["turn"].as_str().ok_or("turn id")?;
    let out = turnback(root, &["rewind", id])?;
    assert!(out.status.success());
    assert_eq!(tree(root)?, before);
    Ok(())
}

#[test]
fn a_pre_image_that_cannot_be_saved_blocks_the_write_with_exit_2() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    tool_call(root, &fixture("pre_tool_use_edit.json", root)?)?;
    // Damage a complete line of the log: no capture can be trusted now.
    let log = common::store_dir(root).join("log.jsonl");
    let mut bytes = std::fs::read(&log)?;
    bytes.extend_from_slice(b"{\"seq\":99,\"damaged\":true}\n");
    std::fs::write(&log, bytes)?;

    let out = send(root, &fixture("pre_tool_use_write.json", root)?)?;
    assert_eq!(
        out.status.code(),
        Some(2),
        "Claude Code blocks the tool call on exit 2"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("turnback blocked this Write"), "{err}");
    assert!(
        err.contains(&root.join("app.js").display().to_string()),
        "{err}"
    );
    assert!(
        err.contains("line"),
        "the reason names the damaged line: {err}"
    );

    // Other events never block: a prompt is never refused.
    let out = send(root, &prompt(root, "next", "p-next")?)?;
    assert_eq!(out.status.code(), Some(0));
    assert!(!out.stderr.is_empty(), "but the failure is reported");
    Ok(())
}

#[test]
fn internal_errors_and_foreign_paths_never_break_the_agent() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    let command = configured_command(root, "PreToolUse", Some("Write"))?;
    for input in ["", "not json", "{\"hook_event_name\": \"PreToolUse\"}"] {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        {
            use std::io::Write;
            child
                .stdin
                .take()
                .ok_or("stdin")?
                .write_all(input.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        assert_eq!(out.status.code(), Some(0), "input {input:?}");
        assert!(out.stdout.is_empty());
        assert!(String::from_utf8_lossy(&out.stderr).contains("ignoring the event"));
    }
    // An event the adapter does not handle.
    let mut stop = fixture("user_prompt_submit.json", root)?;
    stop["hook_event_name"] = "Stop".into();
    let out = send_with(root, &command, &stop)?;
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty());

    // A write outside the project is not ours to checkpoint or to block.
    let outside = tempfile::tempdir()?;
    let mut w = fixture("pre_tool_use_write.json", root)?;
    w["tool_input"]["file_path"] = outside.path().join("x.txt").to_string_lossy().into();
    let out = send(root, &w)?;
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not checkpointed"));
    assert!(list(root)?.is_empty(), "nothing was recorded");
    Ok(())
}

#[test]
fn bash_hook_notes_changes_to_paths_a_scan_leaves_out() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    let out = send(root, &fixture("pre_tool_use_bash.json", root)?)?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "a shell command is never blocked"
    );
    // The command changes a file in an excluded folder.
    std::fs::create_dir_all(root.join("node_modules/pkg"))?;
    std::fs::write(root.join("node_modules/pkg/index.js"), "x")?;
    let out = send(root, &fixture("post_tool_use_bash.json", root)?)?;
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node_modules") && err.contains("not captured"),
        "the user is told: {err}"
    );
    Ok(())
}

#[test]
fn a_turn_that_changed_files_only_through_bash_is_rewindable() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    let before = tree(root)?;
    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    send_ok(root, &fixture("pre_tool_use_bash.json", root)?)?;
    apply_tool(root, &fixture("pre_tool_use_bash.json", root)?)?;
    send_ok(root, &fixture("post_tool_use_bash.json", root)?)?;
    assert_ne!(tree(root)?, before);
    let turns = list(root)?;
    let id = turns
        .first()
        .and_then(|t| t["turn"].as_str())
        .ok_or("no turn recorded")?;
    let out = turnback(root, &["rewind", id])?;
    assert!(out.status.success());
    assert_eq!(tree(root)?, before);
    Ok(())
}

#[test]
fn init_merges_into_existing_settings_idempotently() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    std::fs::create_dir_all(root.join(".claude"))?;
    let user = r#"{
  "permissions": {"allow": ["Bash(npm test)"]},
  "model": "opus",
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}]}
}"#;
    std::fs::write(root.join(".claude/settings.json"), user)?;
    init(root)?;
    let once = std::fs::read(root.join(".claude/settings.json"))?;
    let out = turnback(root, &["init", "claude-code"])?;
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("already installed"));
    assert_eq!(
        std::fs::read(root.join(".claude/settings.json"))?,
        once,
        "idempotent"
    );

    let v: Value = serde_json::from_slice(&once)?;
    let keys: Vec<&String> = v.as_object().ok_or("object")?.keys().collect();
    assert_eq!(keys, ["permissions", "model", "hooks"], "order kept");
    assert_eq!(
        v["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "./guard.sh"
    );
    assert_eq!(v["hooks"]["PreToolUse"].as_array().map(Vec::len), Some(2));
    assert!(root.join(".turnback").is_dir(), "init creates the store");
    assert!(configured_command(root, "UserPromptSubmit", None).is_ok());
    assert!(configured_command(root, "PostToolUse", Some("Bash")).is_ok());
    Ok(())
}

#[test]
fn init_print_writes_nothing_and_bad_settings_are_left_alone() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    let out = turnback(
        root,
        &["init", "claude-code", "--print", "--program", "turnback"],
    )?;
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        v["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "turnback hook claude-code"
    );
    assert!(!root.join(".claude").exists(), "--print writes nothing");

    std::fs::create_dir_all(root.join(".claude"))?;
    std::fs::write(root.join(".claude/settings.json"), "{ broken")?;
    let out = turnback(root, &["init", "claude-code"])?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("settings.json is not valid JSON"), "{err}");
    assert_eq!(
        std::fs::read(root.join(".claude/settings.json"))?,
        b"{ broken"
    );
    Ok(())
}

#[test]
fn parallel_tool_calls_before_any_prompt_share_one_turn() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    init(root)?;
    let command = configured_command(root, "PreToolUse", Some("Write"))?;
    // Hold the store lock shared: every hook can open the store and read
    // the session (none yet), but none can begin a turn until it is
    // released, so all of them race to begin one.
    let lock = std::fs::File::open(common::store_dir(root).join("lock"))?;
    lock.lock_shared()?;
    let mut children = Vec::new();
    for i in 0..16 {
        let mut e = fixture("pre_tool_use_write.json", root)?;
        if let Some(o) = e.as_object_mut() {
            o.remove("prompt_id");
        }
        e["tool_input"]["file_path"] = root.join(format!("par/{i}.txt")).to_string_lossy().into();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        {
            use std::io::Write;
            child
                .stdin
                .take()
                .ok_or("stdin")?
                .write_all(serde_json::to_string(&e)?.as_bytes())?;
        }
        children.push(child);
    }
    // Not a timing assertion: the result must be the same however far the
    // hooks got; the pause only makes the race likely.
    std::thread::sleep(std::time::Duration::from_millis(300));
    lock.unlock()?;
    for c in children {
        let out = c.wait_with_output()?;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let turns = list(root)?;
    assert_eq!(turns.len(), 1, "one turn, not one per process: {turns:?}");
    assert_eq!(turns[0]["file_count"], 17, "par/ and its 16 files");
    Ok(())
}

/// An event of session `session` as Claude Code sends it, with `fields`.
fn event(root: &Path, session: &str, name: &str, fields: Value) -> Value {
    let mut e = serde_json::json!({
        "session_id": session,
        "transcript_path": format!("/home/user/.claude/projects/-proj/{session}.jsonl"),
        "cwd": root,
        "permission_mode": "default",
        "hook_event_name": name,
    });
    if let (Some(e), Value::Object(f)) = (e.as_object_mut(), fields) {
        e.extend(f);
    }
    e
}

fn bash(root: &Path, session: &str, name: &str, command: &str, prompt_id: &str) -> Value {
    event(
        root,
        session,
        name,
        serde_json::json!({
            "tool_name": "Bash",
            "tool_input": { "command": command },
            "prompt_id": prompt_id,
        }),
    )
}

fn user_prompt(root: &Path, session: &str, text: &str, prompt_id: &str) -> Value {
    event(
        root,
        session,
        "UserPromptSubmit",
        serde_json::json!({ "prompt": text, "prompt_id": prompt_id }),
    )
}

/// A live turn as `(id, label, paths)`.
type Listed = (String, String, Vec<String>);

/// The live turns, oldest first.
fn turns(root: &Path) -> Result<Vec<Listed>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for t in list(root)? {
        let id = t["turn"].as_str().ok_or("turn id")?.to_owned();
        let show = turnback(root, &["--json", "show", &id])?;
        assert!(show.status.success(), "show {id}");
        let v: Value = serde_json::from_slice(&show.stdout)?;
        let paths = v["files"]
            .as_array()
            .ok_or("show's files")?
            .iter()
            .filter_map(|f| f["path"].as_str().map(str::to_owned))
            .collect();
        out.push((id, t["label"].as_str().unwrap_or("").to_owned(), paths));
    }
    Ok(out)
}

fn rewind_ok(root: &Path, turn: &str) -> TestResult {
    let out = turnback(root, &["rewind", turn])?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "rewind {turn}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A Bash call the user interrupted gets no PostToolUse: the session's
/// next prompt records what the command changed in the interrupted turn,
/// which keeps its label and rewinds exactly.
#[test]
fn an_interrupted_bash_call_is_recorded_by_the_next_prompt() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path();
    init(root)?;
    std::fs::write(root.join("a"), "a0\n")?;
    let s = "11111111-aaaa";
    send_ok(root, &user_prompt(root, s, "run it", "p1"))?;
    send_ok(
        root,
        &bash(root, s, "PreToolUse", "echo a1 > a; sleep 600", "p1"),
    )?;
    std::fs::write(root.join("a"), "a1\n")?;
    send_ok(root, &user_prompt(root, s, "next", "p2"))?;
    // The next prompt only writes a file.
    let w = event(
        root,
        s,
        "PreToolUse",
        serde_json::json!({
            "tool_name": "Write",
            "tool_input": { "file_path": root.join("b"), "content": "b\n" },
            "prompt_id": "p2",
        }),
    );
    tool_call(root, &w)?;
    let t = turns(root)?;
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(
        (t[0].1.as_str(), t[0].2.clone()),
        ("run it", vec!["a".to_owned()])
    );
    assert_eq!(
        (t[1].1.as_str(), t[1].2.clone()),
        ("next", vec!["b".to_owned()])
    );
    rewind_ok(root, &t[1].0)?;
    assert_eq!(
        std::fs::read(root.join("a"))?,
        b"a1\n",
        "turn 2 left a alone"
    );
    assert!(!root.join("b").exists());
    rewind_ok(root, &t[0].0)?;
    assert_eq!(std::fs::read(root.join("a"))?, b"a0\n");
    Ok(())
}

/// A Bash call run in the background: what its command writes after its
/// PostToolUse is its turn's too, until the session's next prompt.
#[test]
fn a_background_shell_keeps_recording_until_the_next_prompt() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path();
    init(root)?;
    std::fs::write(root.join("late"), "before\n")?;
    let s = "22222222-bbbb";
    send_ok(root, &user_prompt(root, s, "start the server", "p1"))?;
    let mut pre = bash(root, s, "PreToolUse", "sleep 1; echo late > late", "p1");
    pre["tool_input"]["run_in_background"] = true.into();
    send_ok(root, &pre)?;
    let mut post = pre.clone();
    post["hook_event_name"] = "PostToolUse".into();
    send_ok(root, &post)?;
    // The command goes on after its PostToolUse.
    std::fs::write(root.join("late"), "late\n")?;
    send_ok(root, &user_prompt(root, s, "now test", "p2"))?;
    tool_call(root, &bash(root, s, "PreToolUse", "echo t > t", "p2"))?;
    let t = turns(root)?;
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(t[0].2, ["late"], "{t:?}");
    assert_eq!(t[1].2, ["t"], "{t:?}");
    rewind_ok(root, &t[0].0)?;
    assert_eq!(std::fs::read(root.join("late"))?, b"before\n");
    assert!(!root.join("t").exists());
    Ok(())
}

/// Two sessions' Bash calls overlap: A's command changes a file while B's
/// is running too. The change is recorded in both turns (shared), A's turn
/// keeps its label, and reverting A's turn gives the file back.
#[test]
fn two_sessions_overlapping_bash_calls_share_the_change() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path();
    init(root)?;
    std::fs::write(root.join("xa"), "xa0\n")?;
    let (a, b) = ("aaaaaaaa-0001", "bbbbbbbb-0002");
    send_ok(root, &user_prompt(root, a, "task a", "pa"))?;
    send_ok(root, &user_prompt(root, b, "task b", "pb"))?;
    let pre_a = bash(root, a, "PreToolUse", "echo xa1 > xa", "pa");
    let pre_b = bash(root, b, "PreToolUse", "true", "pb");
    send_ok(root, &pre_a)?;
    send_ok(root, &pre_b)?;
    std::fs::write(root.join("xa"), "xa1\n")?;
    let mut post_b = pre_b.clone();
    post_b["hook_event_name"] = "PostToolUse".into();
    send_ok(root, &post_b)?;
    let mut post_a = pre_a.clone();
    post_a["hook_event_name"] = "PostToolUse".into();
    send_ok(root, &post_a)?;
    let t = turns(root)?;
    let of = |label: &str| t.iter().find(|x| x.1 == label).cloned();
    let ta = of("task a").ok_or(format!("A's turn keeps its label: {t:?}"))?;
    let tb = of("task b").ok_or(format!("B's turn keeps its label: {t:?}"))?;
    assert_eq!(ta.2, ["xa"], "{t:?}");
    assert_eq!(tb.2, ["xa"], "{t:?}");
    let shown = turnback(root, &["show", &tb.0])?;
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("SHARED") || text.contains("shared"), "{text}");
    let out = turnback(root, &["revert", &ta.0, "--force"])?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(root.join("xa"))?, b"xa0\n");
    Ok(())
}

/// A tool call of an earlier prompt (a background subagent still running)
/// that arrives after the session's next prompt joins its own prompt's
/// turn: the same key never begins two turns, and both keep their labels.
#[test]
fn a_late_event_of_an_earlier_prompt_joins_its_own_turn() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path();
    init(root)?;
    let s = "33333333-cccc";
    send_ok(root, &user_prompt(root, s, "one", "p1"))?;
    send_ok(root, &user_prompt(root, s, "two", "p2"))?;
    let write = |path: &str, pid: &str| {
        event(
            root,
            s,
            "PreToolUse",
            serde_json::json!({
                "tool_name": "Write",
                "tool_input": { "file_path": root.join(path), "content": path },
                "prompt_id": pid,
            }),
        )
    };
    let w1 = write("one.txt", "p1");
    send_ok(root, &w1)?;
    apply_tool(root, &w1)?;
    tool_call(root, &write("two.txt", "p2"))?;
    let mut post1 = w1.clone();
    post1["hook_event_name"] = "PostToolUse".into();
    let out = send(root, &post1)?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("not recorded"), "{err}");
    let t = turns(root)?;
    let labels: Vec<(&str, &[String])> = t.iter().map(|x| (x.1.as_str(), &x.2[..])).collect();
    assert_eq!(
        labels,
        [
            ("one", &["one.txt".to_owned()][..]),
            ("two", &["two.txt".to_owned()][..])
        ],
        "{t:?}"
    );
    Ok(())
}
