//! opencode integration: `turnback init opencode` writes the plugin
//! `.opencode/plugin/turnback.js`; Node.js loads that very file and calls
//! its hooks as opencode does, with the inputs in
//! `tests/fixtures/opencode/events.json` (shaped as `@opencode-ai/plugin`
//! defines them: `chat.message`, `tool.execute.before` / `after` for
//! `write`, `edit`, `apply_patch` and `bash`); the tool's effect is applied
//! in between, and rewind / undo must give each state back byte for byte.
//! Needs `node` on PATH (the test fails without it).
//!
//! Unix only: the scenario's `bash` tool call runs its command through
//! `sh -c`.
#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use common::scenario::{self, States};
use common::{TestResult, tree};
use serde_json::Value;

/// The plugin, loaded by Node.js, taking one hook call at a time.
struct Plugin {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    events: Value,
}

impl Plugin {
    fn load(root: &Path) -> Result<Plugin, Box<dyn std::error::Error>> {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode");
        let events = common::fixture("opencode", "events.json", root)?;
        let mut child = Command::new("node")
            .arg(fixtures.join("drive.mjs"))
            .arg(root.join(".opencode/plugin/turnback.js"))
            .arg(root)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run node (needed to load the opencode plugin): {e}"))?;
        let stdin = child.stdin.take().ok_or("stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("stdout")?);
        Ok(Plugin {
            child,
            stdin,
            stdout,
            events,
        })
    }

    /// Calls the hook of step `name`; what it threw, if anything.
    fn call(&mut self, name: &str) -> Result<Option<String>, Box<dyn std::error::Error>> {
        let step = self.events.get(name).ok_or(format!("no step {name}"))?;
        writeln!(self.stdin, "{}", serde_json::to_string(step)?)?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(format!("the plugin driver died at {name}").into());
        }
        let answer: Value = serde_json::from_str(&line)?;
        Ok(answer["threw"].as_str().map(str::to_owned))
    }

    fn call_ok(&mut self, name: &str) -> TestResult {
        match self.call(name)? {
            None => Ok(()),
            Some(e) => Err(format!("{name} threw: {e}").into()),
        }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn opencode_plugin_turns_rewind_and_undo_byte_for_byte() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "opencode", &[])?;
    for name in ["list", "rewind", "undo"] {
        let p = root.join(format!(".opencode/command/turnback-{name}.md"));
        assert!(p.is_file(), "the chat command {} is installed", p.display());
    }
    let before = tree(root)?;
    let mut plugin = Plugin::load(root)?;

    plugin.call_ok("prompt_1")?;
    plugin.call_ok("write_before")?;
    scenario::write_new_file(root)?;
    plugin.call_ok("write_after")?;
    plugin.call_ok("edit_before")?;
    scenario::edit_tracked_file(root)?;
    plugin.call_ok("edit_after")?;
    plugin.call_ok("bash_before")?;
    scenario::run_shell(root)?;
    plugin.call_ok("bash_after")?;
    let after_1 = tree(root)?;

    plugin.call_ok("prompt_2")?;
    plugin.call_ok("patch_before")?;
    scenario::edit_new_file(root)?;
    plugin.call_ok("patch_after")?;
    let after_2 = tree(root)?;

    let states = States {
        before,
        after_1,
        after_2,
    };
    scenario::check_turns(root, &states, "opencode")
}

#[test]
fn opencode_plugin_refuses_a_write_that_cannot_be_saved() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    scenario::init(root, "opencode", &[])?;
    let once = std::fs::read(root.join(".opencode/plugin/turnback.js"))?;
    scenario::init(root, "opencode", &[])?;
    assert_eq!(
        std::fs::read(root.join(".opencode/plugin/turnback.js"))?,
        once
    );
    let mut plugin = Plugin::load(root)?;
    plugin.call_ok("prompt_1")?;
    plugin.call_ok("edit_before")?;
    scenario::damage_log(root)?;
    let threw = plugin
        .call("write_before")?
        .ok_or("the write was not refused")?;
    assert!(threw.contains("turnback blocked this write"), "{threw}");
    // Other events never throw.
    plugin.call_ok("bash_before")?;
    plugin.call_ok("prompt_2")?;
    Ok(())
}
