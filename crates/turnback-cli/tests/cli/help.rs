//! The help: the top-level help groups the commands, every command's help
//! ends with examples; the shell completions load in a real bash and
//! complete; the manual page renders with man and groff.

use crate::common::*;

/// The groups of the top-level help, in order, each with commands that
/// must be listed under it.
const GROUPS: [(&str, &[&str]); 3] = [
    (
        "Everyday commands:",
        &[
            "show", "rewind", "revert", "undo", "redo", "status", "diff", "list",
        ],
    ),
    (
        "For agents (their hooks, file tools and MCP server):",
        &[
            "init", "hook", "mcp", "write", "capture", "seal", "exec", "snapshot", "edit", "mkdir",
            "mv", "rm",
        ],
    ),
    (
        "Upkeep:",
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

fn help_of(args: &[&str]) -> Res<String> {
    let p = Project::new()?;
    let out = p.tb().args(args).arg("--help").assert().success();
    Ok(String::from_utf8(out.get_output().stdout.clone())?)
}

/// The command names a help lists under `heading` (up to a blank line).
fn listed_under(help: &str, heading: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_top_level_help_lists_the_commands_in_groups_in_order() -> TestResult {
    let help = help_of(&[])?;
    let mut last = 0;
    for (heading, commands) in GROUPS {
        let at = help
            .find(&format!("\n{heading}\n"))
            .ok_or_else(|| format!("no group {heading:?} in:\n{help}"))?;
        assert!(at > last, "{heading:?} is out of order:\n{help}");
        last = at;
        let listed = listed_under(&help, heading);
        for c in commands {
            assert!(
                listed.iter().any(|l| l == c),
                "{c} is not under {heading:?}: {listed:?}"
            );
        }
    }
    // The everyday group comes before any agent plumbing.
    let everyday = listed_under(&help, GROUPS[0].0);
    assert!(
        matches!(everyday.first().map(String::as_str), Some("log" | "show")),
        "{help}"
    );
    // No command is listed twice, nor left out of the groups.
    let all: Vec<String> = GROUPS
        .iter()
        .flat_map(|(h, _)| listed_under(&help, h))
        .collect();
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        all.len(),
        "a command is listed twice: {all:?}"
    );
    assert!(!help.contains("Other commands:"), "{help}");
    assert!(
        !all.iter().any(|c| c == "maintain"),
        "a hidden command is listed"
    );
    Ok(())
}

#[test]
fn every_command_help_ends_with_examples() -> TestResult {
    let top = help_of(&[])?;
    let mut commands: Vec<Vec<String>> = GROUPS
        .iter()
        .flat_map(|(h, _)| listed_under(&top, h))
        .map(|c| vec![c])
        .collect();
    assert!(commands.len() >= 28, "{commands:?}");
    // The agents of `hook` and `init`, from their own help.
    for parent in ["hook", "init"] {
        let help = help_of(&[parent])?;
        let agents = listed_under(&help, "Commands:");
        assert!(agents.len() >= 7, "{parent}: {agents:?}");
        for a in agents.into_iter().filter(|a| a != "help") {
            commands.push(vec![parent.to_owned(), a]);
        }
    }
    commands.push(vec!["maintain".to_owned()]);
    for c in &commands {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        let help = help_of(&args)?;
        let (_, examples) = help
            .rsplit_once("\nExamples:\n")
            .ok_or_else(|| format!("`turnback {} --help` has no examples:\n{help}", c.join(" ")))?;
        // One to three examples, each a turnback command line, and nothing
        // after them.
        let lines: Vec<&str> = examples
            .lines()
            .filter(|l| l.starts_with("  turnback ") || l.starts_with("  printf "))
            .collect();
        assert!(
            (1..=3).contains(&lines.len()),
            "{}: {examples}",
            c.join(" ")
        );
        assert!(
            examples.lines().all(|l| l.starts_with("  ")),
            "{}: something follows the examples: {examples}",
            c.join(" ")
        );
    }
    Ok(())
}

#[test]
fn usage_errors_print_json_with_json_and_keep_exit_code_2() -> TestResult {
    let p = Project::new()?;
    for args in [
        &["--json", "rewnd"][..],
        &["--json", "rewind"],
        &["rewind", "--json", "--no-such-flag", "t1"],
        &["--json", "completions", "tcsh"],
        &["--json"],
    ] {
        let out = p.tb().args(args).assert().code(2);
        let v = parse_json(&out.get_output().stdout)?;
        let msg = v["error"].as_str().ok_or("an error message")?;
        assert!(!msg.is_empty() && !msg.starts_with("error:"), "{msg}");
        assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");
        let (_, stderr) = texts(out.get_output());
        // clap's text stays on stderr.
        assert!(stderr.starts_with("error: "), "{stderr}");
        if args == ["--json"] {
            assert_eq!(msg, "a command is needed; `turnback --help` lists them");
        }
    }
    // Without --json: text on stderr only, exit code 2 as before.
    let out = p.tb().args(["rewind"]).assert().code(2);
    assert!(out.get_output().stdout.is_empty());
    // After `--`, a --json is the command's own.
    let out = p
        .tb()
        .args(["exec", "--", "true", "--json"])
        .assert()
        .code(2);
    assert!(out.get_output().stdout.is_empty(), "no --turn: text only");
    // --help with --json is still the help.
    let out = p.tb().args(["--json", "gc", "--help"]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("Examples:"));
    Ok(())
}

/// Runs `script` in a real bash (not a login shell, no rc files), failing
/// the test if bash cannot be run.
#[cfg(unix)]
fn bash(script: &str) -> Res<String> {
    let out = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .output()
        .map_err(|e| format!("bash is needed for this test (.ci/run installs it): {e}"))?;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "bash failed: {stdout}\n{stderr}");
    assert!(stderr.is_empty(), "bash said: {stderr}");
    Ok(stdout)
}

#[cfg(unix)]
#[test]
fn the_bash_completion_loads_and_completes_commands_flags_and_values() -> TestResult {
    let p = Project::new()?;
    let script = p.outer.join("turnback.bash");
    let out = p.tb().args(["completions", "bash"]).assert().success();
    std::fs::write(&script, &out.get_output().stdout)?;
    // COMP_WORDS as bash sets them on <TAB>, then the completion function
    // that `complete -p` says is registered for turnback.
    let complete = |words: &[&str]| -> Res<Vec<String>> {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let cur = words.last().copied().unwrap_or("");
        let prev = words.len().checked_sub(2).map_or("", |i| words[i]);
        let out = bash(&format!(
            "source '{}'\n\
             spec=$(complete -p turnback) || exit 1\n\
             fn=${{spec##*-F }}; fn=${{fn%% *}}\n\
             COMP_WORDS=({})\n\
             COMP_CWORD={}\n\
             COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}\n\
             \"$fn\" turnback '{cur}' '{prev}'\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            quoted.join(" "),
            words.len() - 1,
        ))?;
        Ok(out.lines().map(str::to_owned).collect())
    };
    let spec = bash(&format!(
        "source '{}'; complete -p turnback",
        script.display()
    ))?;
    assert!(
        spec.contains("-F ") && spec.trim_end().ends_with(" turnback"),
        "{spec}"
    );
    assert_eq!(complete(&["turnback", "rew"])?, ["rewind"]);
    assert_eq!(
        complete(&["turnback", "re"])?.len(),
        4,
        "rewind revert redo repair"
    );
    let gc = complete(&["turnback", "gc", "--dr"])?;
    assert_eq!(gc, ["--dry-run"]);
    let shells = complete(&["turnback", "completions", ""])?;
    for s in ["bash", "zsh", "fish", "powershell", "elvish"] {
        assert!(shells.iter().any(|x| x == s), "{s}: {shells:?}");
    }
    Ok(())
}

#[test]
fn completions_are_made_for_every_shell() -> TestResult {
    let p = Project::new()?;
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef turnback"),
        ("fish", "complete -c turnback"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[turnback]"),
    ] {
        let out = p.tb().args(["completions", shell]).assert().success();
        let text = String::from_utf8(out.get_output().stdout.clone())?;
        assert!(text.contains(marker), "{shell}: no {marker:?}");
        assert!(text.contains("rewind"), "{shell} does not complete rewind");
    }
    Ok(())
}

/// Runs `program args` with `input` on stdin; fails the test if the
/// program is missing.
#[cfg(unix)]
fn run_with_input(program: &str, args: &[&str], input: &[u8]) -> Res<std::process::Output> {
    use std::io::Write;
    let mut child = std::process::Command::new(program)
        .args(args)
        .env("MANWIDTH", "80")
        .env("LC_ALL", "C.UTF-8")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program} is needed for this test (.ci/run installs it): {e}"))?;
    child.stdin.take().ok_or("stdin")?.write_all(input)?;
    Ok(child.wait_with_output()?)
}

#[cfg(unix)]
#[test]
fn the_man_page_renders_with_man_and_parses_with_groff_without_warnings() -> TestResult {
    let p = Project::new()?;
    let page = p
        .tb()
        .arg("man")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert!(page.starts_with(b".ie") || page.starts_with(b".TH"), "roff");
    // groff with every warning on: none may be given.
    let groff = run_with_input("groff", &["-man", "-Tutf8", "-ww", "-z"], &page)?;
    let (_, warnings) = texts(&groff);
    assert!(groff.status.success() && warnings.is_empty(), "{warnings}");
    let man = run_with_input("man", &["-l", "-"], &page)?;
    let (text, stderr) = texts(&man);
    assert!(man.status.success(), "{stderr}");
    for want in ["NAME", "SYNOPSIS", "turnback", "rewind", "--json"] {
        assert!(
            text.contains(want),
            "{want} not in the rendered page:\n{text}"
        );
    }
    // One command's page.
    let page = p
        .tb()
        .args(["man", "rewind"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let man = run_with_input("man", &["-l", "-"], &page)?;
    let (text, _) = texts(&man);
    for want in ["--keep-conflicts", "Examples:", "turnback rewind t3"] {
        assert!(text.contains(want), "{want} not in the page:\n{text}");
    }
    // An unknown command is an error naming it.
    let out = p.tb().args(["man", "rewnd"]).assert().code(1);
    let (_, stderr) = texts(out.get_output());
    assert!(stderr.contains("\"rewnd\""), "{stderr}");
    Ok(())
}
