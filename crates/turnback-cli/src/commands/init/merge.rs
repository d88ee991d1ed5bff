//! Merging turnback's hooks into an agent's JSON settings file, keeping
//! everything else: other settings and other hooks stay, in their order;
//! handlers that run `… hook <agent>` are replaced, so a second merge
//! changes nothing. Two list shapes are understood: matcher groups
//! (`{"matcher", "hooks": [handler…]}`, Claude Code, Gemini CLI, Codex) and
//! flat handler lists (`{"command"|"bash", "matcher"}`, Cursor, Copilot).

use anyhow::bail;
use serde_json::{Map, Value};

use crate::commands::hook::engine::Dialect;

/// Whether a handler runs this adapter.
fn is_ours(handler: &Value, d: &Dialect) -> bool {
    ["command", "bash", "powershell"].iter().any(|k| {
        handler
            .get(*k)
            .and_then(Value::as_str)
            .is_some_and(|c| d.is_our_command(c))
    })
}

/// Merges `ours` (`{"hooks": {event: [...]}, other top-level keys}`) into
/// `settings`. Top-level keys other than `hooks` are added when missing.
pub fn merge(mut settings: Value, ours: &Value, d: &Dialect) -> anyhow::Result<Value> {
    let Some(obj) = settings.as_object_mut() else {
        bail!("the settings are not a JSON object");
    };
    let ours = ours
        .as_object()
        .expect("turnback's hook settings are an object");
    for (k, v) in ours.iter().filter(|(k, _)| *k != "hooks") {
        obj.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let hooks = obj
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        bail!("its \"hooks\" is not a JSON object");
    };
    let our_hooks = ours
        .get("hooks")
        .and_then(Value::as_object)
        .expect("turnback's hook settings have hooks");
    for (event, entries) in our_hooks {
        let list = hooks
            .entry(event.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            bail!("its hooks.{event} is not a JSON array");
        };
        list.retain_mut(|entry| {
            let Some(handlers) = entry.get_mut("hooks").and_then(Value::as_array_mut) else {
                return !is_ours(entry, d);
            };
            let before = handlers.len();
            handlers.retain(|h| !is_ours(h, d));
            // A group that held only turnback's handlers goes with them.
            !(handlers.is_empty() && before > 0)
        });
        list.extend(entries.as_array().into_iter().flatten().cloned());
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::hook::{claude_code, copilot};
    use serde_json::json;

    #[test]
    fn merge_keeps_other_settings_and_hooks_and_is_idempotent() -> anyhow::Result<()> {
        let ours = json!({"hooks": claude_code::settings_hooks("turnback hook claude-code")});
        let user = json!({
            "permissions": {"allow": ["Bash(npm test)"]},
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]},
                    {"matcher": "Write", "hooks": [
                        {"type": "command", "command": "./lint.sh"},
                        {"type": "command", "command": "/old/turnback hook claude-code"}
                    ]}
                ],
                "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]
            }
        });
        let d = &claude_code::DIALECT;
        let once = merge(user.clone(), &ours, d)?;
        let twice = merge(once.clone(), &ours, d)?;
        assert_eq!(once, twice);
        assert_eq!(once["permissions"], user["permissions"]);
        assert_eq!(once["hooks"]["Stop"], user["hooks"]["Stop"]);
        let pre = once["hooks"]["PreToolUse"].as_array().expect("array");
        assert_eq!(pre.len(), 3, "guard, lint (without the old turnback), ours");
        assert_eq!(pre[0], user["hooks"]["PreToolUse"][0]);
        assert_eq!(pre[1]["hooks"].as_array().map(Vec::len), Some(1));
        assert_eq!(pre[2], ours["hooks"]["PreToolUse"][0]);
        Ok(())
    }

    #[test]
    fn flat_handler_lists_are_merged_too() -> anyhow::Result<()> {
        let ours = copilot::hooks_file("turnback", "turnback");
        let user = json!({"version": 1, "hooks": {"preToolUse": [
            {"type": "command", "bash": "./audit.sh"},
            {"type": "command", "bash": "/old/turnback hook copilot preToolUse"}
        ]}});
        let d = &copilot::DIALECT;
        let once = merge(user, &ours, d)?;
        assert_eq!(merge(once.clone(), &ours, d)?, once);
        let pre = once["hooks"]["preToolUse"].as_array().expect("array");
        assert_eq!(pre.len(), 2, "audit, ours: {pre:?}");
        assert_eq!(pre[0]["bash"], "./audit.sh");
        assert_eq!(pre[1]["bash"], "turnback hook copilot preToolUse");
        Ok(())
    }

    #[test]
    fn merge_refuses_settings_of_the_wrong_shape() {
        let ours = json!({"hooks": claude_code::settings_hooks("turnback hook claude-code")});
        let d = &claude_code::DIALECT;
        assert!(merge(json!([1]), &ours, d).is_err());
        assert!(merge(json!({"hooks": 3}), &ours, d).is_err());
        assert!(merge(json!({"hooks": {"PreToolUse": {}}}), &ours, d).is_err());
    }
}
