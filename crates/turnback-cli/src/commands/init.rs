//! `turnback init <agent>`: set a project up for an agent.
//!
//! `init claude-code` merges the hook configuration of
//! `turnback hook claude-code` into `<root>/.claude/settings.json`, and
//! `init gemini-cli` that of `turnback hook gemini-cli` into
//! `<root>/.gemini/settings.json`: the file is created if missing; every
//! other setting and every other hook in it is kept, in its order; hook
//! handlers that run `… hook <agent>` are replaced, so running it twice
//! changes nothing the second time. The file
//! is replaced atomically (temporary file beside it, fsync, rename). It also
//! creates the store (and its `.turnback/` marker), so hooks run from a subdirectory find
//! the project root.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value};
use turnback::Options;

use super::hook::engine::Dialect;
use super::hook::{claude_code, gemini_cli};
use crate::{Ctx, Outcome};

/// Set a project up for an agent (install its hooks)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    agent: Agent,
}

#[derive(clap::Subcommand, Debug)]
enum Agent {
    /// Merge turnback's hooks into .claude/settings.json (created if needed)
    ClaudeCode(AgentArgs),
    /// Merge turnback's hooks into .gemini/settings.json (created if needed)
    GeminiCli(AgentArgs),
}

#[derive(clap::Args, Debug)]
struct AgentArgs {
    /// Print the hook configuration (for ~/.claude/settings.json, say)
    /// instead of writing the project's settings
    #[arg(long)]
    print: bool,

    /// The turnback program the hooks run [default: `turnback` when it is
    /// this program on PATH, else this program's absolute path]
    #[arg(long, value_name = "PROGRAM")]
    program: Option<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    match args.agent {
        Agent::ClaudeCode(a) => install(ctx, a, &claude_code::DIALECT, claude_code::settings_hooks),
        Agent::GeminiCli(a) => install(ctx, a, &gemini_cli::DIALECT, gemini_cli::settings_hooks),
    }
}

fn install(ctx: &Ctx, args: AgentArgs, d: &Dialect, settings_hooks: fn(&str) -> Value) -> Outcome {
    let program = match args.program {
        Some(p) => p,
        None => default_program()?,
    };
    let command = format!("{program} hook {}", d.name);
    let hooks = settings_hooks(&command);
    if args.print {
        let snippet = serde_json::json!({ "hooks": hooks });
        println!("{}", serde_json::to_string_pretty(&snippet)?);
        return Ok(0);
    }
    let root = ctx.root()?;
    let mut store = ctx.open(Options::default())?;
    store.ensure_created()?;
    let path = root.join(d.settings_file);
    let old = match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display())));
        }
    };
    let settings: Value = match &old {
        Some(b) if b.iter().all(u8::is_ascii_whitespace) => Value::Object(Map::new()),
        Some(b) => serde_json::from_slice(b).with_context(|| {
            format!(
                "{} is not valid JSON; fix it (or move it away) and run `turnback init {}` again; it was left unchanged",
                path.display(),
                d.name
            )
        })?,
        None => Value::Object(Map::new()),
    };
    let merged = merge(settings, &hooks, d)
        .with_context(|| format!("cannot merge into {}", path.display()))?;
    let mut bytes = serde_json::to_vec_pretty(&merged)?;
    bytes.push(b'\n');
    let changed = old.as_deref() != Some(bytes.as_slice());
    if changed {
        write_atomically(&path, &bytes)?;
    }
    if ctx.json() {
        ctx.print_json(&serde_json::json!({
            "settings": path,
            "changed": changed,
            "command": command,
        }))?;
    } else if changed {
        println!("turnback hooks installed in {}", path.display());
        println!("  command: {command}");
        println!("{} picks them up in its next session.", d.agent);
    } else {
        println!("turnback hooks already installed in {}", path.display());
    }
    Ok(0)
}

/// Merges `ours` (event -> matcher groups) into the settings' `hooks`,
/// replacing earlier turnback handlers and keeping everything else.
fn merge(mut settings: Value, ours: &Value, d: &Dialect) -> anyhow::Result<Value> {
    let Some(obj) = settings.as_object_mut() else {
        bail!("the settings are not a JSON object");
    };
    let hooks = obj
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        bail!("its \"hooks\" is not a JSON object");
    };
    let ours = ours.as_object().expect("settings_hooks returns an object");
    for (event, groups) in ours {
        let list = hooks
            .entry(event.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            bail!("its hooks.{event} is not a JSON array");
        };
        list.retain_mut(|group| {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                return true;
            };
            let before = handlers.len();
            handlers.retain(|h| {
                !h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| d.is_our_command(c))
            });
            // A group that held only turnback's handlers goes with them.
            !(handlers.is_empty() && before > 0)
        });
        list.extend(groups.as_array().into_iter().flatten().cloned());
    }
    Ok(settings)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().expect("the settings path has a parent");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".settings.json.")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot fsync {}", dir.display()))?;
    Ok(())
}

/// `turnback` when that name on PATH is this program, else its absolute
/// path, quoted for the shell Claude Code runs hooks with.
fn default_program() -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<PathBuf>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("turnback"))
        .find(|c| c.is_file());
    if let Some(found) = on_path
        && std::fs::canonicalize(&found).is_ok_and(|c| c == exe)
    {
        return Ok("turnback".into());
    }
    Ok(shell_quote(&exe.to_string_lossy()))
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_keeps_other_settings_and_hooks_and_is_idempotent() -> anyhow::Result<()> {
        let ours = claude_code::settings_hooks("turnback hook claude-code");
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
        assert_eq!(pre[2], ours["PreToolUse"][0]);
        Ok(())
    }

    #[test]
    fn merge_refuses_settings_of_the_wrong_shape() {
        let ours = claude_code::settings_hooks("turnback hook claude-code");
        let d = &claude_code::DIALECT;
        assert!(merge(json!([1]), &ours, d).is_err());
        assert!(merge(json!({"hooks": 3}), &ours, d).is_err());
        assert!(merge(json!({"hooks": {"PreToolUse": {}}}), &ours, d).is_err());
    }

    #[test]
    fn programs_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("/usr/bin/turnback"), "/usr/bin/turnback");
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
