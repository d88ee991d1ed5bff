//! Chat commands that let the user list turns, rewind and undo without
//! leaving the agent: `/turnback-list`, `/turnback-rewind TURN`,
//! `/turnback-undo` (Gemini CLI: `/turnback:list`, `/turnback:rewind TURN`,
//! `/turnback:undo`), each in the agent's own custom-command format (Cline:
//! its workflows). Codex, which has no custom commands any more, and
//! Copilot CLI, whose custom commands are skills, get a skill named
//! `turnback` (Codex `$turnback list`, `$turnback rewind TURN`, `$turnback
//! undo`; Copilot `/turnback list`, …). Where the format can run a shell
//! command itself (Claude Code and opencode `` !`cmd` ``, Gemini CLI
//! `!{cmd}`), the command runs turnback and the model only relays the
//! output; a skill or a Cline workflow cannot, so it tells the model the
//! one command to run (the hook leaves a command that only runs turnback
//! alone). A turn's label is the prompt that began it, so the list reads as
//! the user's own words.

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

/// Gemini CLI's policy rule that lets the commands of [`gemini_cli`] run
/// their turnback command, as `policies/turnback.toml` in the user's
/// `.gemini/` folder `gemini_dir`. Gemini CLI 0.61 checks every `!{cmd}`
/// of a custom command against its policy engine before running it, as a
/// `run_shell_command` call, and refuses it headless (`Blocked by policy`)
/// unless a rule allows it. A project cannot say so: 0.61 ignores a
/// workspace's `.gemini/policies/` (`disableWorkspacePolicies`), and a
/// project's `tools.allowed: ["run_shell_command(turnback)"]` denies every
/// other shell command, in every approval mode (its "narrowing
/// enforcement"). So the rule is the user's, and as narrow as the commands:
/// `turnback list`, `turnback rewind …` and `turnback undo` (the prefix
/// must end at a space or the end); Gemini CLI checks each part of a
/// command line on its own (`a && b`, `a; b`, pipes), so nothing chained
/// to them is allowed, and it quotes the user's arguments as one word.
/// Not in plan mode, which allows no writes.
pub fn gemini_policy(program: &str, gemini_dir: &std::path::Path) -> OwnedFile {
    let prefixes: Vec<String> = ACTIONS
        .iter()
        .map(|a| {
            let sub = a.args.split(' ').next().unwrap_or(a.args);
            toml_string(&format!("{program} {sub}"))
        })
        .collect();
    let text = format!(
        "# {}\n# Lets the commands /turnback:list, /turnback:rewind and /turnback:undo\n# (.gemini/commands/turnback/) run turnback without asking: a headless\n# run refuses them otherwise. These three turnback commands alone, with\n# nothing chained to them.\n[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = [{}]\ndecision = \"allow\"\npriority = 100\nmodes = [\"default\", \"autoEdit\", \"yolo\"]\n",
        marker("gemini-cli"),
        prefixes.join(", "),
    );
    OwnedFile {
        path: gemini_dir.join(GEMINI_POLICY),
        text,
        executable: false,
    }
}

/// Where `init gemini-cli` puts its policy, relative to the user's
/// `.gemini/` folder.
pub const GEMINI_POLICY: &str = "policies/turnback.toml";

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

/// The skill `.agents/skills/turnback/SKILL.md` (`$turnback list`,
/// `$turnback rewind TURN`, `$turnback undo`). Codex 0.171 reads skills
/// from `.agents/skills/` in the project (from the working directory up to
/// the repository root), `$HOME/.agents/skills/` and `$CODEX_HOME/skills/`;
/// naming a skill with `$` puts its whole `SKILL.md` in the conversation.
/// A skill cannot run a command itself, so it tells the model the one
/// command to run for each action.
pub fn codex(program: &str) -> OwnedFile {
    let text = skill(
        program,
        ("codex", "Codex"),
        "$turnback",
        "The user names an action after `$turnback`",
        "",
    );
    OwnedFile::project(CODEX_SKILL.to_owned(), text)
}

/// The skill `.github/skills/turnback/SKILL.md` for Copilot CLI
/// (`/turnback list`, `/turnback rewind TURN`, `/turnback undo`). Copilot
/// 1.0.102 reads skills from `.github/skills/`, `.agents/skills/` and
/// `.claude/skills/` in the project and `~/.copilot/skills/`; a skill is a
/// slash command, and invoking it puts the skill's text (without its front
/// matter) in the user's message, followed by `ARGUMENTS: <the rest of the
/// line>`. `.github/skills/` comes first, so this skill, not the Codex one
/// in `.agents/skills/`, is the one Copilot uses where both are installed.
pub fn copilot(program: &str) -> OwnedFile {
    let text = skill(
        program,
        ("copilot", "Copilot"),
        "/turnback",
        "The user names an action after `/turnback` (Copilot passes it on as `ARGUMENTS:`)",
        "argument-hint: \"list | rewind TURN | undo\"\n",
    );
    OwnedFile::project(COPILOT_SKILL.to_owned(), text)
}

/// A `SKILL.md` named `turnback` for `agent` (`init` name, display name),
/// whose user types `usage` before an action, said as `named`; `front`
/// holds more front matter lines.
fn skill(
    program: &str,
    (agent, display): (&str, &str),
    usage: &str,
    named: &str,
    front: &str,
) -> String {
    let mut actions = String::new();
    for a in &ACTIONS {
        let args = a.args.replace("ARGS", "TURN");
        let words = a.hint.map(|h| format!(" {h}")).unwrap_or_default();
        actions.push_str(&format!(
            "- `{usage} {}{words}`: run `{program} {args}`. {}.\n",
            a.name, a.description
        ));
    }
    format!(
        "---\nname: turnback\ndescription: {}\n{front}---\n<!-- {} -->\n# turnback\n\n{named}; TURN is a turn id as `turnback list` shows it. Run the action's one shell command in the project folder, exactly as written with the user's TURN, and nothing else:\n\n{actions}\nWith no action named, run the list command. {}\n",
        toml_string(
            &SKILL_DESCRIPTION
                .replace("AGENT", display)
                .replace("USAGE", usage)
        ),
        marker(agent),
        RELAY.replace("above", "of the command"),
    )
}

/// Where `init copilot` puts the skill, relative to the project root.
pub const COPILOT_SKILL: &str = ".github/skills/turnback/SKILL.md";

/// Cline's workflows `.clinerules/workflows/turnback-{list,rewind,undo}.md`.
/// Cline (CLI 3.x, on its SDK) reads workflows from `.clinerules/workflows/`
/// and `.cline/workflows/` in the project, `~/Documents/Cline/Workflows/`
/// and `~/.cline/workflows/`; `/turnback-rewind abc-1` (the file's name
/// without `.md`) replaces the user's message with the workflow's text,
/// trimmed, followed by the rest of the line (` abc-1`). A workflow cannot
/// run a command itself, so it names the one command for the model to run;
/// the rewind's ends with `Turn:`, which the user's turn id follows.
pub fn cline(program: &str) -> Vec<OwnedFile> {
    ACTIONS
        .iter()
        .map(|a| {
            let words = a.hint.map(|h| format!(" {h}")).unwrap_or_default();
            let cmd = format!("{program} {}", a.args.replace("ARGS", "TURN"));
            let (which, ending) = match a.hint {
                Some(h) => (
                    format!(", with {h} replaced by the turn id after `Turn:` below (as `turnback list` shows it)"),
                    "\n\nTurn:".to_owned(),
                ),
                None => (String::new(), String::new()),
            };
            let text = format!(
                "<!-- {} -->\n# /turnback-{}{words}\n\nturnback: {}. Run `{cmd}` in the project folder{which}, and nothing else. {}{ending}\n",
                marker("cline"),
                a.name,
                a.description,
                RELAY.replace("above", "of the command"),
            );
            OwnedFile::project(format!(".clinerules/workflows/turnback-{}.md", a.name), text)
        })
        .collect()
}

/// Where `init codex` puts the skill, relative to the project root.
pub const CODEX_SKILL: &str = ".agents/skills/turnback/SKILL.md";

const SKILL_DESCRIPTION: &str = "Rewind the project with turnback without leaving AGENT. List the turns turnback recorded (each labelled with the prompt that began it), put the project back as it was before a turn, or undo the last rewind. Use when the user asks to list turns, rewind or undo a turn, or names USAGE.";

/// The custom prompts earlier releases of `init codex` wrote into
/// `$CODEX_HOME/prompts/`: Codex 0.171 no longer reads custom prompts, so
/// `init codex` removes these (only those that carry its marker).
pub fn codex_stale_prompts(codex_home: &std::path::Path) -> Vec<PathBuf> {
    ACTIONS
        .iter()
        .map(|a| codex_home.join(format!("prompts/turnback-{}.md", a.name)))
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
        let policy = gemini_policy("turnback", std::path::Path::new("/h/.gemini"));
        assert_eq!(
            policy.path,
            PathBuf::from("/h/.gemini/policies/turnback.toml")
        );
        assert!(policy.text.contains(
            "commandPrefix = [\"turnback list\", \"turnback rewind\", \"turnback undo\"]\n"
        ));
        assert!(policy.text.contains("turnback init gemini-cli`"));
        assert!(
            files[0]
                .path
                .ends_with(".gemini/commands/turnback/list.toml")
        );
        let skill = codex("turnback");
        assert_eq!(
            skill.path,
            PathBuf::from(".agents/skills/turnback/SKILL.md")
        );
        assert!(
            skill
                .text
                .starts_with("---\nname: turnback\ndescription: \"")
        );
        assert!(skill.text.contains("run `turnback rewind TURN`"));
        assert!(skill.text.contains("run `turnback undo`"));
        assert!(skill.text.contains("turnback init codex`"));
        assert_eq!(
            codex_stale_prompts(std::path::Path::new("/h"))[2],
            PathBuf::from("/h/prompts/turnback-undo.md")
        );
        let skill = copilot("turnback");
        assert_eq!(
            skill.path,
            PathBuf::from(".github/skills/turnback/SKILL.md")
        );
        assert!(
            skill
                .text
                .contains("argument-hint: \"list | rewind TURN | undo\"\n---\n")
        );
        assert!(
            skill
                .text
                .contains("- `/turnback rewind TURN`: run `turnback rewind TURN`.")
        );
        assert!(skill.text.contains("turnback init copilot`"));
        assert!(skill.text.contains("without leaving Copilot."));
        let flows = cline("turnback");
        assert_eq!(
            flows[1].path,
            PathBuf::from(".clinerules/workflows/turnback-rewind.md")
        );
        assert!(flows[1].text.contains("Run `turnback rewind TURN`"));
        assert!(flows[1].text.ends_with("\n\nTurn:\n"));
        assert!(
            flows[2]
                .text
                .contains("Run `turnback undo` in the project folder, and")
        );
        for f in claude_code("t").iter().chain(&opencode("t")).chain(&flows) {
            assert!(f.text.contains("turnback init"), "{}", f.text);
        }
    }
}
