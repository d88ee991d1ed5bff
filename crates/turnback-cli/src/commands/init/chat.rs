//! Chat commands that let the user list turns, rewind and undo without
//! leaving the agent: `/turnback-list`, `/turnback-rewind TURN`,
//! `/turnback-undo` (Gemini CLI: `/turnback:list`, `/turnback:rewind TURN`,
//! `/turnback:undo`; Codex: `/prompts:turnback-list`, …), each in the
//! agent's own custom-command format. Where the format can run a shell
//! command itself (Claude Code and opencode `` !`cmd` ``, Gemini CLI
//! `!{cmd}`), the command runs turnback and the model only relays the
//! output; Codex prompts cannot, so they ask the model to run it (the hook
//! leaves a command that only runs turnback alone). A turn's label is the
//! prompt that began it, so the list reads as the user's own words.

use std::path::PathBuf;

use super::OwnedFile;

/// One chat command: its name, what it does, and the turnback arguments.
struct Action {
    name: &'static str,
    description: &'static str,
    /// The turnback subcommand; `ARGS` stands for the user's arguments.
    args: &'static str,
    hint: Option<&'static str>,
}

const ACTIONS: [Action; 3] = [
    Action {
        name: "list",
        description: "List the turns turnback can rewind, each labelled with its prompt",
        args: "list",
        hint: None,
    },
    Action {
        name: "rewind",
        description: "Put the project back as it was before a turn (and undo every later one)",
        args: "rewind ARGS",
        hint: Some("TURN"),
    },
    Action {
        name: "undo",
        description: "Undo turnback's last rewind",
        args: "undo",
        hint: None,
    },
];

const RELAY: &str = "Show the output above to the user exactly as it is, with no other action.";

fn marker(agent: &str) -> String {
    format!("Installed by `turnback init {agent}`.")
}

/// `.claude/commands/turnback-*.md`.
pub fn claude_code(program: &str) -> Vec<OwnedFile> {
    ACTIONS
        .iter()
        .map(|a| {
            let cmd = format!("{program} {}", a.args.replace("ARGS", "$ARGUMENTS"));
            let hint = a.hint.map(|h| format!("argument-hint: {h}\n")).unwrap_or_default();
            let text = format!(
                "---\ndescription: {}\n{hint}allowed-tools: Bash({program}:*)\n---\n<!-- {} -->\n!`{cmd}`\n\n{RELAY}\n",
                a.description,
                marker("claude-code"),
            );
            OwnedFile::project(format!(".claude/commands/turnback-{}.md", a.name), text)
        })
        .collect()
}

/// `.gemini/commands/turnback/*.toml` (`/turnback:list`, …).
pub fn gemini_cli(program: &str) -> Vec<OwnedFile> {
    ACTIONS
        .iter()
        .map(|a| {
            let cmd = format!("{program} {}", a.args.replace("ARGS", "{{args}}"));
            let text = format!(
                "# {}\ndescription = {}\nprompt = \"\"\"\n!{{{cmd}}}\n\n{RELAY}\n\"\"\"\n",
                marker("gemini-cli"),
                toml_string(a.description),
            );
            OwnedFile::project(format!(".gemini/commands/turnback/{}.toml", a.name), text)
        })
        .collect()
}

/// `.opencode/command/turnback-*.md`.
pub fn opencode(program: &str) -> Vec<OwnedFile> {
    ACTIONS
        .iter()
        .map(|a| {
            let cmd = format!("{program} {}", a.args.replace("ARGS", "$ARGUMENTS"));
            let text = format!(
                "---\ndescription: {}\n---\n<!-- {} -->\n!`{cmd}`\n\n{RELAY}\n",
                a.description,
                marker("opencode"),
            );
            OwnedFile::project(format!(".opencode/command/turnback-{}.md", a.name), text)
        })
        .collect()
}

/// `$CODEX_HOME/prompts/turnback-*.md` (Codex reads prompts only there).
pub fn codex(program: &str, codex_home: PathBuf) -> Vec<OwnedFile> {
    ACTIONS
        .iter()
        .map(|a| {
            let cmd = format!("{program} {}", a.args.replace("ARGS", "$ARGUMENTS"));
            let hint = a.hint.map(|h| format!("argument-hint: {h}\n")).unwrap_or_default();
            let text = format!(
                "---\ndescription: {}\n{hint}---\n<!-- {} -->\nRun this one shell command in the project folder, exactly as written, and nothing else:\n\n    {cmd}\n\n{}\n",
                a.description,
                marker("codex"),
                RELAY.replace("above", "of the command"),
            );
            OwnedFile::at(codex_home.join(format!("prompts/turnback-{}.md", a.name)), text)
        })
        .collect()
}

fn toml_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_runs_turnback_with_the_users_arguments() {
        let files = claude_code("turnback");
        assert_eq!(files.len(), 3);
        assert!(files[1].text.contains("!`turnback rewind $ARGUMENTS`"));
        assert!(files[1].text.contains("allowed-tools: Bash(turnback:*)"));
        let files = gemini_cli("turnback");
        assert!(files[1].text.contains("!{turnback rewind {{args}}}"));
        assert!(
            files[0]
                .path
                .ends_with(".gemini/commands/turnback/list.toml")
        );
        let files = codex("turnback", PathBuf::from("/h"));
        assert_eq!(files[2].path, PathBuf::from("/h/prompts/turnback-undo.md"));
        assert!(files[2].text.contains("    turnback undo\n"));
        for f in claude_code("t").iter().chain(&opencode("t")) {
            assert!(f.text.contains("turnback init"), "{}", f.text);
        }
    }
}
