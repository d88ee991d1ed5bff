//! The daily loop (issue 28): turn references (full ids, unique prefixes,
//! `@` and `@~N`) in every command that takes a turn, `turnback log`,
//! `show --stat` and `--patch`, color and the pager.

use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;

use crate::common::{Project, Res, TestResult, parse_json, strings, texts};

/// Writes `text` to `path` in `turn` through `turnback write`.
fn write(p: &Project, turn: &str, path: &str, text: &str) -> TestResult {
    p.tb()
        .args(["write", "--turn", turn, path])
        .write_stdin(text.to_owned())
        .assert()
        .success();
    Ok(())
}

/// Five turns, oldest first, each writing its own new file.
const FIVE: [&str; 5] = ["alpha-1", "alpha-2", "beta", "t1", "t10"];

fn five_turns(p: &Project) -> TestResult {
    for id in FIVE {
        write(p, id, &format!("{id}.txt"), &format!("{id}\n"))?;
    }
    Ok(())
}

/// The turn `show --json REF` shows.
fn shown(p: &Project, reference: &str) -> Res<String> {
    let v = p.json(&["show", reference])?;
    Ok(v["turn"]
        .as_str()
        .ok_or("show --json names its turn")?
        .to_owned())
}

/// Runs `turnback ARGS`, expects exit 1, returns stderr.
fn fails(p: &Project, args: &[&str]) -> Res<String> {
    let out = p.tb().args(args).assert().code(1).stdout("");
    Ok(texts(out.get_output()).1)
}

#[test]
fn a_turn_is_named_by_its_id_a_unique_prefix_or_its_place_from_the_newest() -> TestResult {
    let p = Project::new()?;
    five_turns(&p)?;
    // Full ids win, even one that begins another (`t1` of `t10`).
    assert_eq!(shown(&p, "t1")?, "t1");
    assert_eq!(shown(&p, "t10")?, "t10");
    // Unique prefixes.
    assert_eq!(shown(&p, "b")?, "beta");
    assert_eq!(shown(&p, "alpha-2")?, "alpha-2");
    assert_eq!(shown(&p, "alpha-1")?, "alpha-1");
    // The newest, and N before it.
    assert_eq!(shown(&p, "@")?, "t10");
    assert_eq!(shown(&p, "@~0")?, "t10");
    assert_eq!(shown(&p, "@~")?, "t1");
    assert_eq!(shown(&p, "@~2")?, "beta");
    assert_eq!(shown(&p, "@~4")?, "alpha-1");
    Ok(())
}

#[test]
fn an_ambiguous_prefix_is_an_error_listing_the_candidates_newest_first() -> TestResult {
    let p = Project::new()?;
    five_turns(&p)?;
    let before = p.snapshot()?;
    for cmd in ["show", "diff", "rewind", "revert", "seal"] {
        let err = fails(&p, &[cmd, "alpha"])?;
        assert!(
            err.contains(
                r#""alpha" is ambiguous: it begins the ids of 2 turns (alpha-2, alpha-1)"#
            ),
            "{cmd}: {err}"
        );
        assert!(err.contains("turnback log"), "{cmd}: {err}");
    }
    // `t` begins t1 and t10: t1 is not taken for being whole.
    let err = fails(&p, &["rewind", "t"])?;
    assert!(err.contains("(t10, t1)"), "{err}");
    let out = p.tb().args(["--json", "rewind", "alpha"]).assert().code(1);
    let v = parse_json(&out.get_output().stdout)?;
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("ambiguous")),
        "{v}"
    );
    assert_eq!(
        p.snapshot()?,
        before,
        "a failed reference changed something"
    );
    Ok(())
}

#[test]
fn a_reference_past_the_history_or_matching_nothing_names_itself() -> TestResult {
    let p = Project::new()?;
    five_turns(&p)?;
    let err = fails(&p, &["show", "@~5"])?;
    assert!(
        err.contains(r#"unknown turn "@~5": it goes back 5 turn(s) from the newest, and only 5 turns are live (@ to @~4)"#),
        "{err}"
    );
    let err = fails(&p, &["rewind", "@~99999999999999999999999"])?;
    assert!(err.contains("only 5 turns are live"), "{err}");
    let err = fails(&p, &["diff", "zeta"])?;
    assert!(err.contains(r#"unknown turn "zeta""#), "{err}");
    assert!(err.contains("`turnback log`"), "{err}");
    // A rewound turn's full id says so.
    p.ok(&["rewind", "t10"])?;
    let err = fails(&p, &["rewind", "t10"])?;
    assert!(err.contains("already rewound"), "{err}");
    // Only live turns count: `t` is now t1 alone, `@` is t1.
    assert_eq!(shown(&p, "t")?, "t1");
    assert_eq!(shown(&p, "@")?, "t1");
    // An empty project: `@` names nothing.
    let empty = Project::new()?;
    let err = fails(&empty, &["show", "@"])?;
    assert!(err.contains("no turn is live"), "{err}");
    Ok(())
}

#[test]
fn rewind_revert_diff_and_seal_take_references() -> TestResult {
    let p = Project::new()?;
    five_turns(&p)?;
    write(&p, "t10", "t1.txt", "changed\n")?;
    // diff @: t10's pre-images against now.
    let d = p.json(&["diff", "@"])?;
    assert_eq!(strings(&d, Some("path")), ["t10.txt", "t1.txt"]);
    let sealed = p.json(&["seal", "@"])?;
    assert_eq!(sealed["turn"], "t10");
    // revert a prefix: beta alone.
    let r = p.json(&["revert", "be"])?;
    assert_eq!(strings(&r["turns"], None), ["beta"]);
    assert!(!p.exists("beta.txt"));
    // rewind @~1 (now t1, beta being reverted): t1 and t10.
    let r = p.json(&["rewind", "@~1"])?;
    assert_eq!(strings(&r["turns"], None), ["t1", "t10"]);
    assert!(!p.exists("t1.txt") && !p.exists("t10.txt"));
    assert!(p.exists("alpha-2.txt"));
    Ok(())
}

/// One turn that modified `a.txt`, created `new.txt` and deleted `old.txt`.
fn three_kinds(p: &Project, turn: &str) -> TestResult {
    p.write("a.txt", "one\ntwo\nthree\n")?;
    p.write("old.txt", "gone\n")?;
    write(p, turn, "a.txt", "one\nTWO\nthree\nfour\n")?;
    write(p, turn, "new.txt", "fresh\n")?;
    p.ok(&["rm", "--turn", turn, "old.txt"])?;
    Ok(())
}

#[test]
fn log_lists_turns_newest_first_with_counts_labels_and_marked_prefixes() -> TestResult {
    let p = Project::new()?;
    five_turns(&p)?;
    three_kinds(&p, "claude-8c35adc1-1")?;
    p.tb()
        .args([
            "write",
            "--turn",
            "claude-8c35adc1-1",
            "--label",
            "fix the header",
            "a.txt",
        ])
        .write_stdin("again\n")
        .assert()
        .success();
    let out = p.ok(&["log"])?;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    // Newest first; the shortest unique part of each id in brackets.
    let firsts: Vec<&str> = lines
        .iter()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(
        firsts,
        [
            "[c]laude-8c35adc1-1",
            "[t10]",
            "[t1]",
            "[b]eta",
            "[alpha-2]",
            "[alpha-1]"
        ]
    );
    let newest = lines[0];
    assert!(
        newest.contains("1 created, 1 modified, 1 deleted"),
        "{newest}"
    );
    assert!(newest.contains("Claude Code 8c35adc1"), "{newest}");
    assert!(newest.ends_with("fix the header"), "{newest}");
    assert!(lines[1].contains("1 created"), "{}", lines[1]);
    // Local time with its zone (TZ here, a POSIX zone), and how long ago.
    let out = p
        .tb()
        .env("TZ", "XYZ-3")
        .args(["log", "-n", "1"])
        .assert()
        .success();
    let line = texts(out.get_output()).0;
    assert!(line.contains(" XYZ ("), "{line}");
    assert!(
        line.contains("ago)") || line.contains("just now)"),
        "{line}"
    );
    // -n N: the newest N.
    let two = p.ok(&["log", "-n", "2"])?;
    assert_eq!(two.lines().count(), 2, "{two}");
    assert!(
        two.lines().nth(1).is_some_and(|l| l.starts_with("[t10]")),
        "{two}"
    );
    // No color, no escape, when piped.
    assert!(!out.get_output().stdout.contains(&0x1b));
    // `list` is unchanged: oldest first.
    let list = p.ok(&["list"])?;
    assert!(list.starts_with("alpha-1 "), "{list}");
    Ok(())
}

#[test]
fn log_json_gives_each_turn_its_counts_agent_and_commands() -> TestResult {
    let p = Project::new()?;
    three_kinds(&p, "t1")?;
    let cmd: &[&str] = if cfg!(windows) {
        &["cmd", "/c", "echo x> made.txt"]
    } else {
        &["sh", "-c", "echo x > made.txt"]
    };
    let mut args = vec!["exec", "--turn", "claude-ab12cd34-2", "--"];
    args.extend(cmd);
    p.tb().args(&args).assert().success();
    let v = p.json(&["log"])?;
    let rows = v.as_array().ok_or("an array")?;
    assert_eq!(rows.len(), 2, "{v}");
    let (exec, t1) = (&rows[0], &rows[1]);
    assert_eq!(exec["kind"], "turn");
    assert_eq!(exec["turn"], "claude-ab12cd34-2");
    assert_eq!(exec["unique_prefix"], "c");
    assert_eq!(exec["agent"], "claude-code");
    assert_eq!(exec["session"], "ab12cd34");
    assert_eq!(exec["created_count"], 1);
    assert_eq!(exec["live"], true);
    let ran = strings(&exec["commands"], None);
    assert_eq!(ran.len(), 1, "{exec}");
    assert!(ran[0].contains("made.txt"), "{ran:?}");
    assert_eq!(
        (
            &t1["created_count"],
            &t1["modified_count"],
            &t1["deleted_count"]
        ),
        (&Value::from(1), &Value::from(1), &Value::from(1))
    );
    assert_eq!(t1["agent"], Value::Null);
    assert!(
        t1["started_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.contains('T'))
    );
    assert!(t1["seq"].as_u64() < exec["seq"].as_u64());
    // The human log names the command under its turn.
    let out = p.ok(&["log"])?;
    assert!(
        out.lines()
            .nth(1)
            .is_some_and(|l| l.trim_start().starts_with("$ ") && l.contains("made.txt")),
        "{out}"
    );
    Ok(())
}

#[test]
fn log_all_shows_rewound_turns_and_every_operation_as_an_event() -> TestResult {
    let p = Project::new()?;
    for t in ["t1", "t2", "t3"] {
        write(&p, t, &format!("{t}.txt"), "x\n")?;
    }
    p.ok(&["rewind", "t3"])?;
    p.ok(&["undo"])?;
    p.ok(&["redo"])?;
    p.ok(&["revert", "t1"])?;
    // Without --all: only the live turn.
    let live = p.json(&["log"])?;
    assert_eq!(strings(&live, Some("turn")), ["t2"]);
    let v = p.json(&["log", "--all"])?;
    let kinds = strings(&v, Some("kind"));
    assert_eq!(
        kinds,
        ["revert", "redo", "undo", "rewind", "turn", "turn", "turn"],
        "{v}"
    );
    let rows = v.as_array().ok_or("an array")?;
    assert_eq!(rows[0]["turn"], "t1");
    assert_eq!(
        (&rows[1]["op_kind"], &rows[1]["turn"]),
        (&Value::from("rewind"), &Value::from("t3"))
    );
    assert_eq!(rows[1]["op_seq"], rows[3]["seq"]);
    assert_eq!(rows[2]["op_seq"], rows[3]["seq"]);
    assert_eq!(rows[3]["undone"], false, "redone since");
    let turns: Vec<(&str, bool)> = rows[4..]
        .iter()
        .map(|r| (r["turn"].as_str().unwrap_or(""), r["live"] == true))
        .collect();
    assert_eq!(turns, [("t3", false), ("t2", true), ("t1", false)]);
    assert_eq!(rows[4]["ended_by_seq"], rows[3]["seq"]);
    assert_eq!(rows[6]["ended_by_seq"], rows[0]["seq"]);
    assert!(
        rows[4].get("unique_prefix").is_none(),
        "an ended turn is no reference"
    );
    let human = p.ok(&["log", "--all"])?;
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines.len(), 7, "{human}");
    assert!(lines[0].contains("revert of turn t1 alone"), "{human}");
    assert!(
        lines[1].contains("redo of the rewind of turn t3"),
        "{human}"
    );
    assert!(
        lines[2].contains("undo of the rewind of turn t3"),
        "{human}"
    );
    assert!(
        lines[3].contains("rewind of turn t3 and every later turn"),
        "{human}"
    );
    assert!(
        lines[4].starts_with("t3 ") && lines[4].contains("[rewound]"),
        "{human}"
    );
    assert!(lines[5].starts_with("[t]2 "), "{human}");
    assert!(
        lines[6].starts_with("t1 ") && lines[6].contains("[reverted]"),
        "{human}"
    );
    // -n counts the events too.
    assert_eq!(p.ok(&["log", "--all", "-n", "3"])?.lines().count(), 3);
    Ok(())
}

#[test]
fn log_of_a_project_without_turns_says_so_and_makes_no_store() -> TestResult {
    let p = Project::new()?;
    let out = p.ok(&["log"])?;
    assert_eq!(out, format!("no turns in {}\n", p.root.display()));
    assert_eq!(p.json(&["log", "--all"])?, Value::Array(Vec::new()));
    assert!(!p.exists(".turnback"));
    Ok(())
}

#[test]
fn show_stat_and_patch_show_what_the_turn_itself_did() -> TestResult {
    let p = Project::new()?;
    three_kinds(&p, "t1")?;
    // A later turn changes a.txt again: t1's patch stops at what t1 left.
    write(&p, "t2", "a.txt", "later\n")?;
    let stat = p.ok(&["show", "t1", "--stat"])?;
    assert!(stat.starts_with("turn t1\nDate:   "), "{stat}");
    assert!(stat.contains("\n a.txt   | 3 ++-\n"), "{stat}");
    assert!(stat.contains("\n new.txt | 1 +\n"), "{stat}");
    assert!(stat.contains("\n old.txt | 1 -\n"), "{stat}");
    assert!(
        stat.ends_with(" 3 files changed, 3 insertions(+), 2 deletions(-)\n"),
        "{stat}"
    );
    let patch = p.ok(&["show", "@~1", "--patch"])?;
    assert!(
        patch.contains(
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n three\n+four\n"
        ),
        "{patch}"
    );
    assert!(!patch.contains("later"), "{patch}");
    assert!(
        patch.contains("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n"),
        "{patch}"
    );
    assert!(
        patch.contains("--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n"),
        "{patch}"
    );
    // Both: the stat, then the patch.
    let both = p.ok(&["show", "t1", "--stat", "-p"])?;
    let (s, rest) = both
        .split_once("\n\n--- ")
        .ok_or("stat, blank line, patch")?;
    assert!(s.contains("3 files changed"), "{both}");
    assert!(rest.starts_with("a/a.txt"), "{both}");
    // JSON: per file, its change and counts (and its diff with --patch).
    let v = p.json(&["show", "t1", "--patch"])?;
    assert_eq!(v["turn"], "t1");
    assert_eq!(
        (
            v["file_count"].as_u64(),
            v["insertion_count"].as_u64(),
            v["deletion_count"].as_u64()
        ),
        (Some(3), Some(3), Some(2))
    );
    assert_eq!(
        strings(&v["files"], Some("change")),
        ["modified", "created", "deleted"]
    );
    assert!(
        v["files"][1]["diff"]
            .as_str()
            .is_some_and(|d| d.contains("+fresh"))
    );
    let v = p.json(&["show", "t1", "--stat"])?;
    assert!(v["files"][0].get("diff").is_none(), "{v}");
    // Without flags, show is as it was: each capture with its pre-image.
    let plain = p.ok(&["show", "t1"])?;
    assert!(plain.starts_with("turn t1  \n"), "{plain}");
    assert!(plain.contains("absent (created by the turn)"), "{plain}");
    Ok(())
}

#[test]
fn show_names_binary_and_large_files_with_their_sizes() -> TestResult {
    let p = Project::new()?;
    p.write("logo.bin", b"\x00\x01\x02 old bytes")?;
    let big = "a line of a large file\n".repeat(400_000);
    p.write("big.txt", &big)?;
    p.ok(&["capture", "--turn", "t1", "logo.bin", "big.txt", "made.bin"])?;
    p.write("logo.bin", b"\x00\x01\x02 new bytes, more of them")?;
    p.write("big.txt", format!("{big}one more\n"))?;
    p.write("made.bin", b"\xff\xfe")?;
    let stat = p.ok(&["show", "t1", "--stat"])?;
    assert!(stat.contains(" logo.bin | Bin 13 B -> 27 B\n"), "{stat}");
    assert!(
        stat.contains(" big.txt  | Large 8.8 MiB -> 8.8 MiB\n"),
        "{stat}"
    );
    assert!(stat.contains(" made.bin | Bin 0 B -> 2 B\n"), "{stat}");
    let patch = p.ok(&["show", "t1", "--patch"])?;
    assert!(
        patch.contains("logo.bin: binary file, not diffed (13 B -> 27 B)"),
        "{patch}"
    );
    assert!(
        patch.contains("big.txt: large file, not diffed (8.8 MiB -> 8.8 MiB)"),
        "{patch}"
    );
    assert!(!patch.contains("a line of a large file"), "{patch}");
    let v = p.json(&["show", "t1", "--stat"])?;
    assert_eq!(
        strings(&v["files"], Some("change")),
        ["binary", "modified", "created"]
    );
    assert_eq!(v["files"][1]["size_before"], big.len());
    Ok(())
}

#[test]
fn show_says_when_what_the_turn_left_is_not_kept() -> TestResult {
    let p = Project::new()?;
    p.write("a.txt", "before\n")?;
    write(&p, "t1", "a.txt", "the agent's\n")?;
    // Changed by someone else since: t1's post-image is only a hash now.
    p.write("a.txt", "the user's\n")?;
    let patch = p.ok(&["show", "t1", "-p"])?;
    assert!(
        patch.contains("a.txt: what the turn left is not kept: the file changed since"),
        "{patch}"
    );
    assert!(!patch.contains("the user's"), "{patch}");
    // A later turn stored those bytes as its pre-image: shown again.
    p.write("a.txt", "the agent's\n")?;
    write(&p, "t2", "a.txt", "t2\n")?;
    let patch = p.ok(&["show", "t1", "-p"])?;
    assert!(patch.contains("-before\n+the agent's\n"), "{patch}");
    Ok(())
}

#[test]
fn color_always_styles_log_and_show_and_is_off_when_piped() -> TestResult {
    let p = Project::new()?;
    three_kinds(&p, "t1")?;
    let colored = p.ok(&["--color=always", "show", "t1", "--stat", "--patch"])?;
    assert!(colored.contains("\x1b[31m-two\x1b[0m"), "{colored:?}");
    assert!(colored.contains("\x1b[32m+TWO\x1b[0m"), "{colored:?}");
    assert!(
        colored.contains("\x1b[32m++\x1b[0m\x1b[31m-\x1b[0m"),
        "{colored:?}"
    );
    let log = p.ok(&["log", "--color", "always"])?;
    // The unique prefix bold and colored, the rest dimmed, no brackets.
    assert!(
        log.starts_with("\x1b[1m\x1b[35mt\x1b[0m\x1b[90m1\x1b[0m "),
        "{log:?}"
    );
    for args in [
        &["show", "t1", "--patch"][..],
        &["log"][..],
        &["--color=never", "log"][..],
    ] {
        let out = p.tb().args(args).env("NO_COLOR", "").assert().success();
        assert!(
            !out.get_output().stdout.contains(&0x1b),
            "{args:?}: {:?}",
            texts(out.get_output()).0
        );
    }
    p.tb()
        .args(["--color", "sometimes", "log"])
        .assert()
        .code(2)
        .stderr(contains("sometimes"));
    Ok(())
}

/// The pager's and the terminal's: a project, a pager script that notes
/// each call, run in a pseudo-terminal.
#[cfg(unix)]
mod terminal {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::Stdio;

    use crate::common::{Project, Res, TestResult, std_turnback_in};

    /// Runs `turnback ARGS` with its standard streams on a new
    /// pseudo-terminal, `env` added; returns what it wrote there (line
    /// ends as the terminal gives them, `\r\n`) and its exit code.
    #[allow(unsafe_code)] // openpty, and owning the descriptors it opened
    pub fn run(p: &Project, args: &[&str], env: &[(&str, &str)]) -> Res<(String, Option<i32>)> {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty only writes the two descriptors it opens; no
        // name, terminal settings or size are passed.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: both were just opened by openpty and are owned here alone.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut cmd = std_turnback_in(&p.root);
        cmd.args(args)
            .env("TERM", "xterm")
            .envs(env.iter().copied())
            .stdin(Stdio::from(slave.try_clone()?))
            .stdout(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave));
        let mut child = cmd.spawn()?;
        // The only ends of the terminal left are the child's (and its
        // pager's): reading stops when they are closed.
        drop(cmd);
        let mut out = Vec::new();
        let mut master = std::fs::File::from(master);
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
                Err(e) => return Err(e.into()),
            }
        }
        let status = child.wait()?;
        Ok((String::from_utf8_lossy(&out).into_owned(), status.code()))
    }

    /// A `$PAGER` that appends a line to `called` and copies its input.
    fn pager(p: &Project) -> Res<(String, std::path::PathBuf)> {
        let called = p.outer.join("pager-called");
        let script = p.outer.join("pager.sh");
        std::fs::write(
            &script,
            format!("echo called >> '{}'\nexec cat\n", called.display()),
        )?;
        Ok((format!("sh '{}'", script.display()), called))
    }

    #[test]
    fn on_a_terminal_log_and_show_are_colored_and_paged() -> TestResult {
        let p = Project::new()?;
        super::three_kinds(&p, "t1")?;
        let (pager, called) = pager(&p)?;
        let env = [("PAGER", pager.as_str())];
        let (out, code) = run(&p, &["log"], &env)?;
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.contains("\x1b[1m\x1b[35mt\x1b[0m\x1b[90m1\x1b[0m"),
            "{out:?}"
        );
        assert!(out.contains("1 modified"), "{out:?}");
        assert_eq!(std::fs::read_to_string(&called)?, "called\n");
        let (out, code) = run(&p, &["show", "@", "--patch"], &env)?;
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("\x1b[32m+TWO\x1b[0m"), "{out:?}");
        assert_eq!(std::fs::read_to_string(&called)?, "called\ncalled\n");
        // `show` without --stat or --patch is not paged, as before.
        run(&p, &["show", "t1"], &env)?;
        // --no-pager: straight to the terminal, still colored.
        let (out, code) = run(&p, &["--no-pager", "log"], &env)?;
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("\x1b[35m"), "{out:?}");
        // NO_COLOR: no escapes; paged all the same.
        let (out, _) = run(
            &p,
            &["show", "t1", "--stat"],
            &[("PAGER", &pager), ("NO_COLOR", "1")],
        )?;
        assert!(out.contains("a.txt   | 3 ++-"), "{out:?}");
        assert!(!out.contains('\x1b'), "{out:?}");
        assert_eq!(std::fs::read_to_string(&called)?.lines().count(), 3);
        // `--json` is never paged nor colored.
        let (out, _) = run(&p, &["--json", "log"], &env)?;
        assert!(
            out.trim_start().starts_with('[') && !out.contains('\x1b'),
            "{out:?}"
        );
        assert_eq!(std::fs::read_to_string(&called)?.lines().count(), 3);
        Ok(())
    }

    #[test]
    fn an_empty_pager_or_cat_is_no_pager() -> TestResult {
        let p = Project::new()?;
        super::three_kinds(&p, "t1")?;
        for pager in ["", "cat"] {
            let (out, code) = run(&p, &["log"], &[("PAGER", pager)])?;
            assert_eq!(code, Some(0), "{out}");
            assert!(out.contains("1 modified"), "{pager:?}: {out:?}");
        }
        Ok(())
    }
}

#[test]
fn piped_output_is_never_paged() -> TestResult {
    let p = Project::new()?;
    three_kinds(&p, "t1")?;
    let called = p.outer.join("pager-called");
    let pager = format!("touch '{}'; cat", called.display());
    p.tb()
        .args(["log"])
        .env("PAGER", &pager)
        .assert()
        .success()
        .stdout(contains("1 modified"));
    p.tb()
        .args(["show", "t1", "--patch"])
        .env("PAGER", &pager)
        .assert()
        .success()
        .stdout(contains("+TWO").and(contains("\x1b").not()));
    assert!(!called.exists(), "a pager ran with no terminal");
    Ok(())
}

/// A Claude Code hook event from `tests/fixtures/claude-code/NAME.json`,
/// its `{{ROOT}}` the project's root.
#[cfg(unix)]
fn claude_event(p: &Project, name: &str) -> Res<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code")
        .join(format!("{name}.json"));
    let root = serde_json::to_string(&p.root.display().to_string())?;
    Ok(std::fs::read_to_string(path)?.replace("\"{{ROOT}}\"", &root))
}

#[cfg(unix)]
#[test]
fn log_shows_the_command_an_agent_ran_through_its_hook() -> TestResult {
    let p = Project::new()?;
    p.write("src/config.js", "theme = 'light'\n")?;
    for (event, then) in [
        ("user_prompt_submit", None),
        (
            "pre_tool_use_bash",
            Some("sed -i 's/light/dark/' src/config.js && printf 'built\\n' > build.log"),
        ),
        ("post_tool_use_bash", None),
    ] {
        p.tb()
            .args(["hook", "claude-code"])
            .write_stdin(claude_event(&p, event)?)
            .assert()
            .success();
        if let Some(command) = then {
            // The agent runs the command between its two events.
            std::process::Command::new("sh")
                .args(["-c", command])
                .current_dir(&p.root)
                .status()?;
        }
    }
    let v = p.json(&["log"])?;
    let turn = &v[0];
    assert_eq!(turn["agent"], "claude-code", "{v}");
    assert_eq!(turn["session"], "8c35adc1", "{v}");
    assert_eq!(
        strings(&turn["commands"], None),
        ["sed -i 's/light/dark/' src/config.js && printf 'built\\n' > build.log"]
    );
    assert_eq!(
        (
            turn["modified_count"].as_u64(),
            turn["created_count"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let shown = p.ok(&["show", "@", "--stat"])?;
    assert!(
        shown.contains("Agent:  Claude Code, session 8c35adc1"),
        "{shown}"
    );
    assert!(shown.contains("Ran:    $ sed -i"), "{shown}");
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_commands_file_that_is_not_a_regular_file_is_a_warning_never_a_hang() -> TestResult {
    let p = Project::new()?;
    write(&p, "t1", "a.txt", "a\n")?;
    let file = p.store_dir()?.join("commands.jsonl");
    let made = std::process::Command::new("mkfifo").arg(&file).status()?;
    assert!(made.success(), "mkfifo {}", file.display());
    let guard = std::time::Duration::from_secs(60);
    let out = p.tb().args(["log"]).timeout(guard).assert().success();
    let (stdout, stderr) = texts(out.get_output());
    assert!(stdout.starts_with("[t]1 "), "{stdout}");
    assert!(
        stderr.contains("commands.jsonl") && stderr.contains("not a regular file"),
        "{stderr}"
    );
    let out = p
        .tb()
        .args(["exec", "--turn", "t2", "--", "true"])
        .timeout(guard)
        .assert()
        .success();
    let stderr = texts(out.get_output()).1;
    assert!(stderr.contains("not noted for `turnback log`"), "{stderr}");
    Ok(())
}
