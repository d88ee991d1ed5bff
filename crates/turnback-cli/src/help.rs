//! The help text beyond what clap derives from the doc comments: the
//! top-level help lists the commands in groups (clap has no command
//! groups, so the list is rendered here into the help template, from each
//! command's own one-line description), and every command's help ends with
//! examples.
//!
//! A command missing from [`GROUPS`] is listed under "Other commands", and
//! a test fails until it is placed; one with no entry in [`EXAMPLES`] (and
//! no `after_help` of its own) fails the test that every `--help` shows
//! examples.

use clap::Command;

/// The groups of the top-level help, in order, with their commands in
/// order. A name with no such command yet is skipped.
pub const GROUPS: &[(&str, &[&str])] = &[
    (
        "Everyday commands",
        &[
            "log", "show", "rewind", "revert", "undo", "redo", "status", "diff", "list",
        ],
    ),
    (
        "For agents (their hooks, file tools and MCP server)",
        &[
            "init", "hook", "mcp", "write", "capture", "seal", "exec", "snapshot", "edit", "mkdir",
            "mv", "rm",
        ],
    ),
    (
        "Upkeep",
        &[
            "gc",
            "verify",
            "repair",
            "store",
            "import-osfoundry",
            "completions",
            "man",
            "demo",
        ],
    ),
];

/// One to three examples per command: (command line, what it does).
pub const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "log",
        &[
            ("turnback log", "the turns, newest first"),
            ("turnback log -n 5", "the five newest"),
            (
                "turnback log --all",
                "rewound turns too, with the rewinds, undos and redos",
            ),
        ],
    ),
    (
        "show",
        &[
            ("turnback show t3", "the paths turn t3 captured"),
            (
                "turnback --json show t3",
                "the same, as JSON (docs/JSON.md)",
            ),
        ],
    ),
    (
        "rewind",
        &[
            (
                "turnback rewind t3 --dry-run",
                "what undoing t3 and every later turn would do",
            ),
            ("turnback rewind t3", "do it"),
            (
                "turnback rewind t3 --keep-conflicts",
                "leave the files you changed since as they are",
            ),
        ],
    ),
    (
        "revert",
        &[
            (
                "turnback revert t3 --dry-run",
                "what undoing t3 alone would do",
            ),
            ("turnback revert t3", "undo t3, keep the later turns"),
        ],
    ),
    (
        "undo",
        &[
            ("turnback undo", "reverse the last rewind or revert"),
            ("turnback undo && turnback undo", "the two last ones"),
        ],
    ),
    (
        "redo",
        &[(
            "turnback redo",
            "rewind again what the last undo brought back",
        )],
    ),
    (
        "status",
        &[
            (
                "turnback status",
                "what changed since the last snapshot, and what is not covered",
            ),
            ("turnback status --all", "every path not covered"),
        ],
    ),
    (
        "diff",
        &[
            (
                "turnback diff t3",
                "each file t3 captured, its pre-image against now",
            ),
            ("turnback diff t3 | less -R", "through a pager"),
        ],
    ),
    (
        "list",
        &[
            (
                "turnback list",
                "the turns that can be rewound, oldest first",
            ),
            ("turnback --json list", "the same, as JSON (docs/JSON.md)"),
        ],
    ),
    (
        "init",
        &[
            (
                "turnback init claude-code",
                "install the hooks and chat commands in this project",
            ),
            (
                "turnback init codex --print",
                "print them for the user-level settings instead",
            ),
        ],
    ),
    (
        "hook",
        &[(
            "turnback hook claude-code < event.json",
            "handle one event (the agent runs this; `turnback init` sets it up)",
        )],
    ),
    (
        "mcp",
        &[
            (
                "turnback mcp",
                "serve the file tools over stdio (an MCP client starts it)",
            ),
            (
                "turnback --root ~/proj mcp --turn-gap 0",
                "every tool call a turn of its own",
            ),
        ],
    ),
    (
        "write",
        &[
            (
                "turnback write --turn t1 src/app.js < new-app.js",
                "save src/app.js, then write the new contents",
            ),
            (
                "printf '' | turnback write --turn t1 empty.txt",
                "write an empty file",
            ),
        ],
    ),
    (
        "capture",
        &[
            (
                "turnback capture --turn t1 src/a.rs src/b.rs",
                "save both files before the agent writes them",
            ),
            (
                "turnback capture --turn t1 --label 'fix tests' Cargo.toml",
                "with a label for the turn",
            ),
        ],
    ),
    (
        "seal",
        &[(
            "turnback seal t1",
            "record what turn t1 left, so later edits of yours are told apart",
        )],
    ),
    (
        "exec",
        &[
            (
                "turnback exec --turn t2 -- npm install",
                "run it and record every path it changed",
            ),
            (
                "turnback exec --turn t2 -q -- sh -c 'make clean && make'",
                "a shell line, reporting only problems",
            ),
        ],
    ),
    (
        "snapshot",
        &[
            (
                "turnback snapshot --turn t2",
                "before an agent's shell command",
            ),
            (
                "turnback snapshot --turn t2 --after",
                "after it: record what it changed in t2",
            ),
        ],
    ),
    (
        "edit",
        &[
            (
                "turnback edit --turn t1 --old 'let x = 1' --new 'let x = 2' src/main.rs",
                "replace text after saving the file",
            ),
            (
                "turnback edit --turn t1 --old a --new b --dry-run notes.txt",
                "print the diff, write nothing",
            ),
        ],
    ),
    (
        "mkdir",
        &[(
            "turnback mkdir --turn t1 src/new/module",
            "create it and its parents; a rewind removes them",
        )],
    ),
    (
        "mv",
        &[(
            "turnback mv --turn t1 old.rs new.rs",
            "move a file; a rewind moves it back",
        )],
    ),
    (
        "rm",
        &[(
            "turnback rm --turn t1 build.log",
            "delete a file; a rewind brings it back",
        )],
    ),
    (
        "gc",
        &[
            (
                "turnback gc --dry-run",
                "what gc would drop and the room it would free",
            ),
            ("turnback gc", "apply the limits of the store's config.toml"),
            (
                "turnback gc --keep-turns 50 --max-size 500M",
                "tighter limits, once",
            ),
        ],
    ),
    (
        "verify",
        &[
            (
                "turnback verify",
                "check every record and blob of the store",
            ),
            (
                "turnback --json verify",
                "the same, as JSON; exit code 0 only when whole",
            ),
        ],
    ),
    (
        "repair",
        &[
            (
                "turnback repair --dry-run",
                "the log lines a repair would set aside",
            ),
            (
                "turnback repair",
                "set them aside (the original log is kept)",
            ),
        ],
    ),
    (
        "store",
        &[
            (
                "turnback store",
                "where the store is, its size, turns and limits",
            ),
            (
                "turnback store --list",
                "every project with a store in the data directory",
            ),
            (
                "turnback store --in-project",
                "keep the store in .turnback/ (dev containers)",
            ),
        ],
    ),
    (
        "import-osfoundry",
        &[(
            "turnback import-osfoundry ~/proj/.osfoundry",
            "take in the turns of an osfoundry store",
        )],
    ),
    (
        "completions",
        &[
            (
                "turnback completions bash > ~/.local/share/bash-completion/completions/turnback",
                "bash",
            ),
            (
                "turnback completions zsh > ~/.zfunc/_turnback",
                "zsh (with ~/.zfunc in $fpath)",
            ),
            (
                "turnback completions fish > ~/.config/fish/completions/turnback.fish",
                "fish",
            ),
        ],
    ),
    (
        "man",
        &[
            ("turnback man | man -l -", "read the manual page"),
            (
                "turnback man > ~/.local/share/man/man1/turnback.1",
                "install it for `man turnback`",
            ),
        ],
    ),
    (
        "demo",
        &[
            (
                "turnback demo",
                "turnback against git's undo commands, in a temporary folder",
            ),
            ("turnback demo --keep", "keep the folders to look at"),
        ],
    ),
    (
        "maintain",
        &[(
            "turnback maintain",
            "(started in the background by other commands; not needed by hand)",
        )],
    ),
];

/// `cmd` with the grouped command list in its help and examples at the
/// end of every command's help (its subcommands' too).
pub fn decorate(cmd: Command) -> Command {
    let groups = grouped_commands(&cmd);
    let template = format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{groups}Options:\n{{options}}{{after-help}}"
    );
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    let mut cmd = cmd.help_template(template).after_help(
        "Each command's help (`turnback COMMAND --help`) ends with examples.\n\
         Exit codes: 0 done, 1 error (nothing changed), 2 usage, 3 a rewind that could not restore every path.",
    );
    for name in names {
        cmd = cmd.mut_subcommand(&name, |sub| with_examples(sub, &name));
    }
    cmd
}

/// `sub` (the command `name`) and its own subcommands with examples.
fn with_examples(sub: Command, name: &str) -> Command {
    let mut sub = match EXAMPLES.iter().find(|(n, _)| *n == name) {
        Some((_, examples)) if sub.get_after_help().is_none() => {
            sub.after_help(render_examples(examples))
        }
        _ => sub,
    };
    // `hook AGENT` and `init AGENT`: one example per agent.
    let children: Vec<String> = sub
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for child in children {
        let line = format!("turnback {name} {child}");
        let examples: Vec<(String, &str)> = match name {
            "hook" => vec![(
                format!("{line} < event.json"),
                "handle one event (the agent runs this; `turnback init` sets it up)",
            )],
            "init" => vec![
                (
                    line.clone(),
                    "install turnback for this agent in this project",
                ),
                (
                    format!("{line} --print"),
                    "print the configuration instead of writing it",
                ),
            ],
            _ => vec![(line, "")],
        };
        let refs: Vec<(&str, &str)> = examples.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let text = render_examples(&refs);
        sub = sub.mut_subcommand(&child, |c| {
            if c.get_after_help().is_none() {
                c.after_help(text)
            } else {
                c
            }
        });
    }
    sub
}

/// The "Examples:" section.
pub fn render_examples(examples: &[(&str, &str)]) -> String {
    let mut out = String::from("Examples:\n");
    for (line, what) in examples {
        out.push_str(&format!("  {line}\n"));
        if !what.is_empty() {
            out.push_str(&format!("      {what}\n"));
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// The subcommands of `cmd` but the `help` clap adds when it builds it.
pub fn own_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|s| s.get_name() != "help")
}

/// The visible subcommands of `cmd`, in [`GROUPS`], each with the first
/// sentence of its description; any not in a group last, under "Other
/// commands".
fn grouped_commands(cmd: &Command) -> String {
    // `help` comes last, written below.
    let visible: Vec<&Command> = own_subcommands(cmd).filter(|s| !s.is_hide_set()).collect();
    let width = visible
        .iter()
        .map(|s| s.get_name().len())
        .chain(["help".len()])
        .max()
        .unwrap_or(0);
    let line = |name: &str, about: &str| format!("  {name:<width$}  {about}\n");
    let about =
        |s: &Command| first_sentence(&s.get_about().map(|a| a.to_string()).unwrap_or_default());
    let mut out = String::new();
    for (title, names) in GROUPS {
        out.push_str(&format!("{title}:\n"));
        for name in *names {
            if let Some(s) = visible.iter().find(|s| s.get_name() == *name) {
                out.push_str(&line(name, &about(s)));
            }
        }
        out.push('\n');
    }
    let others: Vec<&&Command> = visible
        .iter()
        .filter(|s| !GROUPS.iter().any(|(_, n)| n.contains(&s.get_name())))
        .collect();
    out.push_str(if others.is_empty() {
        ""
    } else {
        "Other commands:\n"
    });
    for s in others {
        out.push_str(&line(s.get_name(), &about(s)));
    }
    out.push_str(&line(
        "help",
        "Print this message or the help of the given command",
    ));
    out.push('\n');
    out
}

/// The text up to its first full stop followed by a space: the long
/// descriptions of some commands go on after it.
fn first_sentence(text: &str) -> String {
    match text.find(". ") {
        Some(i) => text[..i].to_owned(),
        None => text.trim_end_matches('.').to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_command_is_in_a_group_and_has_examples() {
        let cmd = crate::full_command();
        for sub in own_subcommands(&cmd) {
            let name = sub.get_name();
            if !sub.is_hide_set() {
                assert!(
                    GROUPS.iter().any(|(_, n)| n.contains(&name)),
                    "{name} is in no group of help.rs"
                );
            }
            assert!(
                sub.get_after_help().is_some() || EXAMPLES.iter().any(|(n, _)| *n == name),
                "{name} has no examples in help.rs"
            );
        }
    }

    #[test]
    fn the_grouped_list_keeps_the_groups_order() {
        let text = grouped_commands(&crate::full_command());
        let at = |s: &str| text.find(s).unwrap_or(usize::MAX);
        assert!(at("Everyday commands:") < at("For agents"));
        assert!(at("For agents") < at("Upkeep:"));
        assert!(!text.contains("Other commands"), "{text}");
        assert!(
            !text.contains("maintain"),
            "a hidden command is listed: {text}"
        );
    }

    /// The tree `turnback help` completes (each command's name,
    /// description and subcommands) is built from the commands as a
    /// command line that names them builds them (see `full_command`).
    #[test]
    fn the_help_tree_has_every_command_with_its_description_and_subcommands() {
        fn names(cmd: &Command) -> Vec<&str> {
            own_subcommands(cmd).map(|s| s.get_name()).collect()
        }
        let cmd = crate::full_command();
        let help = cmd.find_subcommand("help").expect("a help command");
        assert_eq!(names(help), names(&cmd));
        for sub in own_subcommands(&cmd) {
            let copy = help.find_subcommand(sub.get_name()).expect("in the tree");
            assert!(
                sub.get_about().is_some(),
                "{} has no description",
                sub.get_name()
            );
            assert_eq!(
                copy.get_about().map(ToString::to_string),
                sub.get_about().map(ToString::to_string)
            );
            assert_eq!(names(copy), names(sub), "{}", sub.get_name());
        }
        assert!(names(cmd.find_subcommand("hook").expect("hook")).len() >= 7);
    }

    /// `main` parses with the plain command and turns to the decorated one
    /// only for help and errors: the decoration must leave every command's
    /// arguments and subcommands as they are.
    #[test]
    fn the_decoration_changes_no_argument() {
        fn shape(cmd: &Command, path: &str, out: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                out.push(format!(
                    "{path} {} {:?} {:?} {:?} {} {} {:?}",
                    a.get_id(),
                    a.get_long(),
                    a.get_short(),
                    a.get_num_args(),
                    a.is_required_set(),
                    a.is_global_set(),
                    a.get_action(),
                ));
            }
            for sub in cmd.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                out.push(path.clone());
                shape(sub, &path, out);
            }
        }
        let (mut plain, mut decorated) = (Vec::new(), Vec::new());
        shape(&crate::full_command(), "turnback", &mut plain);
        shape(&crate::command(), "turnback", &mut decorated);
        assert!(plain.len() > 100, "{plain:?}");
        assert_eq!(plain, decorated);
    }
}
