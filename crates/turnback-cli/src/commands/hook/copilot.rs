//! `turnback hook copilot EVENT`: one GitHub Copilot CLI hook event on
//! standard input, with the fields Copilot's hooks reference defines
//! (`sessionId`, `timestamp`, `cwd`, `toolName`, `toolArgs`, `prompt`).
//! Copilot's camelCase events do not name themselves in the JSON, so the
//! installed command names the event (`turnback hook copilot preToolUse`).
//! Copilot sends no turn key: its prompt event marks the turn boundary. See
//! [`super::engine`] for what each event does.
//!
//! - `userPromptSubmitted` begins turn `copilot-<session>-<n>`; the session
//!   file is keyed `copilot-<sessionId>`.
//! - `preToolUse` for `create` and `edit` captures `toolArgs.path`; exit 2
//!   denies the call. Copilot also denies a tool when its hook fails or
//!   exits non-zero, so every other problem exits 0.
//! - `preToolUse` / `postToolUse` for `bash` and `powershell`: the shell
//!   snapshot.
//! - Nothing is printed on stdout.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};

use super::engine::{self, Block, Dialect, Event, PromptRule, str_field};
use crate::{Ctx, Outcome};

/// How Copilot CLI names its events and tools.
pub const DIALECT: Dialect = Dialect {
    name: "copilot",
    agent: "Copilot CLI",
    turn_prefix: "copilot",
    session_key_prefix: "copilot-",
    tag_from_end: false,
    prompt_events: &[("userPromptSubmitted", PromptRule::Begin)],
    pre_tool: &["preToolUse"],
    post_tool: &["postToolUse"],
    file_tools: &["create", "edit"],
    patch_tools: &[],
    shell_tools: &["bash", "powershell"],
    path_keys: &["path"],
    stdout_ok: "",
    block: Block::Exit2,
    project_env: None,
    settings_file: ".github/hooks/turnback.json",
    parse,
};

/// The events the adapter handles, as named on the command line.
const EVENTS: [&str; 3] = ["userPromptSubmitted", "preToolUse", "postToolUse"];

fn parse(v: &Value, event: Option<&str>) -> anyhow::Result<Event> {
    let name = event
        .map(str::to_owned)
        .or_else(|| str_field(v, &["hookEventName", "hook_event_name"]))
        .context("no event name: run it as `turnback hook copilot EVENT`")?;
    let session_id = str_field(v, &["sessionId"]).context("the event has no sessionId")?;
    // `toolArgs` is an object; older releases sent it as a JSON string.
    let input = match v.get("toolArgs") {
        Some(Value::String(s)) => serde_json::from_str(s).ok(),
        other => other.cloned(),
    };
    Ok(Event {
        session_id,
        turn_key: None,
        cwd: str_field(v, &["cwd"]).map(PathBuf::from),
        name,
        tool: str_field(v, &["toolName"]),
        input,
        prompt: str_field(v, &["prompt"]),
    })
}

/// Handle one Copilot CLI hook event read from standard input
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The event's name (userPromptSubmitted, preToolUse, postToolUse)
    event: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    engine::run(ctx, &DIALECT, args.event.as_deref())
}

/// `.github/hooks/turnback.json` that runs `program hook copilot EVENT` on
/// every event the adapter handles. Timeouts are in seconds.
pub fn hooks_file(program: &str, powershell: &str) -> Value {
    let matcher = format!("^({})$", DIALECT.tool_matcher());
    let mut hooks = serde_json::Map::new();
    for event in EVENTS {
        let mut h = json!({
            "type": "command",
            "bash": format!("{program} hook copilot {event}"),
            // What Copilot runs on Windows (through pwsh); `bash` is for
            // Linux and macOS.
            "powershell": format!("{powershell} hook copilot {event}"),
            "timeoutSec": engine::HOOK_TIMEOUT_SECS,
        });
        if event != "userPromptSubmitted" {
            h["matcher"] = matcher.clone().into();
        }
        hooks.insert(event.to_owned(), json!([h]));
    }
    json!({ "version": 1, "hooks": hooks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_name_their_event_and_match_the_tools() {
        let h = hooks_file("turnback", "turnback");
        let pre = &h["hooks"]["preToolUse"][0];
        assert_eq!(pre["bash"], "turnback hook copilot preToolUse");
        assert_eq!(pre["powershell"], "turnback hook copilot preToolUse");
        assert_eq!(pre["matcher"], "^(create|edit|bash|powershell)$");
        assert!(DIALECT.is_our_command("turnback hook copilot preToolUse"));
        assert!(DIALECT.is_our_command("turnback hook copilot"));
        assert!(!DIALECT.is_our_command("turnback hook copilot pre tool"));
    }

    #[test]
    fn tool_args_as_a_string_are_read() -> anyhow::Result<()> {
        let v = json!({"sessionId": "s", "toolName": "create", "toolArgs": "{\"path\":\"/a\"}"});
        let e = parse(&v, Some("preToolUse"))?;
        assert_eq!(e.input, Some(json!({"path": "/a"})));
        Ok(())
    }
}
