//! Codex CLI integration: `turnback init codex` writes `.codex/hooks.json`;
//! the hook events in `tests/fixtures/codex/` (shaped as Codex sends them:
//! `apply_patch` edits with the whole patch in `tool_input.command`, shell
//! commands as `Bash`, `turn_id` on every event) go through the command that
//! file configures, the tool's effect is applied in between, and rewind /
//! undo must give each state back byte for byte. `init` also installs the
//! chat skill `.agents/skills/turnback/SKILL.md` and removes the custom
//! prompts earlier releases wrote in `$CODEX_HOME/prompts/`.
//!
//! Unix only: the hook commands `turnback init` writes are POSIX shell
//! lines (the program quoted for `sh`), run here through `sh -c` as the
//! agent runs them.
#![cfg(unix)]

mod common;

use std::path::Path;

use common::scenario::{self, States, configured_command};
use common::{TestResult, list, tree, turnback};
use serde_json::Value;

const SETTINGS: &str = ".codex/hooks.json";

fn fixture(name: &str, root: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    common::fixture("codex", name, root)
}

fn send_ok(root: &Path, event: &Value) -> TestResult {
    let name = event["hook_event_name"].as_str().ok_or("no event name")?;
    let tool = event.get("tool_name").and_then(Value::as_str);
    let command = configured_command(root, SETTINGS, name, tool)?;
    scenario::send_ok(root, &command, event, "")
}

fn post(pre: &Value) -> Value {
    let mut e = pre.clone();
    e["hook_event_name"] = "PostToolUse".into();
    e["tool_response"] = "Success.".into();
    e
}

fn init(root: &Path, codex_home: &Path) -> TestResult {
    scenario::init(root, "codex", &[("CODEX_HOME", codex_home)])
}

#[test]
fn codex_turns_rewind_and_undo_byte_for_byte() -> TestResult {
    let tmp = scenario::git_project()?;
    let home = tempfile::tempdir()?;
    let root = tmp.path();
    init(root, home.path())?;
    let before = tree(root)?;

    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    send_ok(root, &fixture("pre_tool_use_apply_patch.json", root)?)?;
    scenario::write_new_file(root)?;
    scenario::edit_tracked_file(root)?;
    send_ok(root, &fixture("post_tool_use_apply_patch.json", root)?)?;
    send_ok(root, &fixture("pre_tool_use_bash.json", root)?)?;
    scenario::run_shell(root)?;
    send_ok(root, &fixture("post_tool_use_bash.json", root)?)?;
    let after_1 = tree(root)?;

    let turn2 = fixture("pre_tool_use_apply_patch_turn2.json", root)?;
    let mut prompt2 = fixture("user_prompt_submit.json", root)?;
    prompt2["prompt"] = scenario::PROMPT_2.into();
    prompt2["turn_id"] = turn2["turn_id"].clone();
    send_ok(root, &prompt2)?;
    send_ok(root, &turn2)?;
    scenario::edit_new_file(root)?;
    send_ok(root, &post(&turn2))?;
    let after_2 = tree(root)?;

    let states = States {
        before,
        after_1,
        after_2,
    };
    scenario::check_turns(root, &states, "codex")
}

#[test]
fn codex_patches_that_move_and_delete_are_rewound() -> TestResult {
    let tmp = scenario::git_project()?;
    let home = tempfile::tempdir()?;
    let root = tmp.path();
    init(root, home.path())?;
    let before = tree(root)?;
    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    let mut pre = fixture("pre_tool_use_apply_patch.json", root)?;
    pre["tool_input"]["command"] = "*** Begin Patch\n*** Update File: app.js\n*** Move to: src/app.js\n@@\n-console.log('v2, not committed');\n+console.log('v3');\n*** Delete File: draft.md\n*** End Patch\n".into();
    send_ok(root, &pre)?;
    std::fs::remove_file(root.join("app.js"))?;
    std::fs::write(root.join("src/app.js"), "console.log('v3');\n")?;
    std::fs::remove_file(root.join("draft.md"))?;
    send_ok(root, &post(&pre))?;
    let turns = list(root)?;
    assert_eq!(turns.len(), 1);
    assert_eq!(
        turns[0]["file_count"], 3,
        "app.js, src/app.js, draft.md: {turns:?}"
    );
    let id = turns[0]["turn"].as_str().ok_or("turn id")?;
    assert!(turnback(root, &["rewind", id])?.status.success());
    assert_eq!(tree(root)?, before);
    Ok(())
}

#[test]
fn codex_patch_that_cannot_be_saved_is_blocked_and_init_is_idempotent() -> TestResult {
    let tmp = scenario::git_project()?;
    let home = tempfile::tempdir()?;
    let root = tmp.path();
    std::fs::create_dir_all(root.join(".codex"))?;
    std::fs::write(
        root.join(SETTINGS),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./notify.sh"}]}]}}"#,
    )?;
    // Custom prompts an earlier `init` wrote (Codex 0.171 no longer reads
    // them) go; a prompt of the user's by that name stays.
    let prompts = home.path().join("prompts");
    std::fs::create_dir_all(&prompts)?;
    let old = "---\ndescription: x\n---\n<!-- Installed by `turnback init codex`. -->\n";
    std::fs::write(prompts.join("turnback-list.md"), old)?;
    std::fs::write(prompts.join("turnback-undo.md"), "my own undo\n")?;
    init(root, home.path())?;
    assert!(
        !prompts.join("turnback-list.md").exists(),
        "ours is removed"
    );
    assert_eq!(
        std::fs::read_to_string(prompts.join("turnback-undo.md"))?,
        "my own undo\n"
    );
    let once = std::fs::read(root.join(SETTINGS))?;
    init(root, home.path())?;
    assert_eq!(std::fs::read(root.join(SETTINGS))?, once, "idempotent");
    let v: Value = serde_json::from_slice(&once)?;
    assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "./notify.sh");
    let skill = std::fs::read_to_string(root.join(".agents/skills/turnback/SKILL.md"))?;
    assert!(skill.starts_with("---\nname: turnback\n"), "{skill}");
    assert!(skill.contains(" rewind TURN`"), "{skill}");

    send_ok(root, &fixture("user_prompt_submit.json", root)?)?;
    send_ok(root, &fixture("pre_tool_use_bash.json", root)?)?;
    scenario::damage_log(root)?;
    let pre = fixture("pre_tool_use_apply_patch.json", root)?;
    let command = configured_command(root, SETTINGS, "PreToolUse", Some("apply_patch"))?;
    let out = common::run_hook(root, &command, serde_json::to_string(&pre)?.as_bytes(), &[])?;
    assert_eq!(out.status.code(), Some(2), "exit 2 blocks the patch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("turnback blocked this apply_patch"), "{err}");
    Ok(())
}

#[test]
fn codex_sessions_with_time_ordered_ids_get_turns_of_their_own() -> TestResult {
    let tmp = scenario::git_project()?;
    let home = tempfile::tempdir()?;
    let root = tmp.path();
    init(root, home.path())?;
    // Codex session ids are UUIDv7: sessions started close together share
    // their first characters; these two even share their last eight.
    let sessions = [
        "019a7c3e-5b1d-7f20-9c4e-8d2a61b0f3c7",
        "019a7c3e-77aa-7f20-9c4e-8d2a61b0f3c7",
    ];
    for (i, session) in sessions.iter().enumerate() {
        for name in ["user_prompt_submit.json", "pre_tool_use_apply_patch.json"] {
            let mut e = fixture(name, root)?;
            e["session_id"] = (*session).into();
            e["turn_id"] = format!("turn-{i}").into();
            send_ok(root, &e)?;
        }
        if i == 0 {
            scenario::write_new_file(root)?;
        }
        let mut next = fixture("user_prompt_submit.json", root)?;
        next["session_id"] = (*session).into();
        next["turn_id"] = format!("turn-{i}-b").into();
        send_ok(root, &next)?;
        let mut bash = fixture("pre_tool_use_bash.json", root)?;
        bash["session_id"] = (*session).into();
        bash["turn_id"] = format!("turn-{i}-b").into();
        bash["tool_input"]["command"] = format!("echo {i} > s{i}.txt").into();
        send_ok(root, &bash)?;
        std::fs::write(root.join(format!("s{i}.txt")), format!("{i}\n"))?;
        bash["hook_event_name"] = "PostToolUse".into();
        send_ok(root, &bash)?;
    }
    let turns = list(root)?;
    let ids: Vec<&str> = turns.iter().filter_map(|t| t["turn"].as_str()).collect();
    assert_eq!(ids.len(), 4, "{turns:?}");
    let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), 4, "no two sessions share a turn: {ids:?}");
    assert_eq!(ids[..2], ["codex-61b0f3c7-1", "codex-61b0f3c7-2"]);
    let whole = "codex-019a7c3e77aa7f209c4e8d2a61b0f3c7";
    assert_eq!(ids[2..], [format!("{whole}-1"), format!("{whole}-2")]);
    Ok(())
}

/// `turnback init codex` in `root` with `CODEX_HOME=codex_home`.
fn init_codex(
    root: &Path,
    codex_home: &Path,
    args: &[&str],
) -> Result<std::process::Output, std::io::Error> {
    std::process::Command::new(common::BIN)
        .args(args)
        .current_dir(root)
        .env("CODEX_HOME", codex_home)
        .output()
}

#[test]
fn codex_init_keeps_a_users_skill_and_print_writes_nothing() -> TestResult {
    let tmp = scenario::git_project()?;
    let home = tempfile::tempdir()?;
    let root = tmp.path();
    let prompts = home.path().join("prompts");
    std::fs::create_dir_all(&prompts)?;
    let old = prompts.join("turnback-rewind.md");
    std::fs::write(&old, "<!-- Installed by `turnback init codex`. -->\n")?;

    let print = ["init", "codex", "--print", "--program", "turnback"];
    let out = init_codex(root, home.path(), &print)?;
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        v["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"],
        "turnback hook codex"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(".agents/skills/turnback/SKILL.md"), "{err}");
    assert!(err.contains("~/.agents/skills/turnback/SKILL.md"), "{err}");
    assert!(
        err.contains("writable_roots in .codex/config.toml"),
        "{err}"
    );
    assert!(!root.join(".codex").exists(), "--print writes nothing");
    assert!(!root.join(".agents").exists(), "--print writes nothing");
    assert!(old.exists(), "--print removes nothing");

    // A skill of the user's by that name stops init before anything.
    let skill = root.join(".agents/skills/turnback/SKILL.md");
    std::fs::create_dir_all(skill.parent().ok_or("parent")?)?;
    std::fs::write(&skill, "---\nname: turnback\ndescription: mine\n---\n")?;
    let out = init_codex(root, home.path(), &["init", "codex"])?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not written by turnback"), "{err}");
    assert!(
        std::fs::read_to_string(&skill)?.ends_with("mine\n---\n"),
        "the user's skill is kept"
    );
    assert!(!root.join(SETTINGS).exists(), "nothing was written");
    assert!(old.exists(), "nothing was removed");

    std::fs::remove_file(&skill)?;
    let out = init_codex(root, home.path(), &["--json", "init", "codex"])?;
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["removed"][0], Value::from(old.to_string_lossy()));
    assert!(!old.exists(), "the old prompt is removed");
    assert!(skill.is_file(), "the skill is installed");
    let out = init_codex(root, home.path(), &["--json", "init", "codex"])?;
    let report: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(report["changed"], false, "idempotent: {report}");
    Ok(())
}

/// `init codex` lets Codex's workspace-write sandbox write the store: it
/// adds turnback's data directory to `[sandbox_workspace_write]
/// writable_roots` in `.codex/config.toml`, keeping the user's settings,
/// comments and roots (written `~/…` when it lies under HOME); a file it
/// cannot read as TOML stops it before anything is written.
#[test]
fn codex_init_adds_the_data_directory_to_the_sandboxs_writable_roots() -> TestResult {
    let tmp = scenario::git_project()?;
    let root = tmp.path();
    let home = tempfile::tempdir()?;
    let codex_home = home.path().join(".codex");
    let data = home.path().join(".local/share/turnback");
    let init = |root: &Path, data: &Path| {
        std::process::Command::new(common::BIN)
            .args(["--json", "init", "codex"])
            .current_dir(root)
            .env("HOME", home.path())
            .env("CODEX_HOME", &codex_home)
            .env("TURNBACK_DATA_DIR", data)
            .output()
    };
    let config = root.join(".codex/config.toml");
    std::fs::create_dir_all(root.join(".codex"))?;
    let users = "# the team's Codex settings\napproval_policy = \"on-request\" # ask first\n\n[sandbox_workspace_write]\nnetwork_access = true\nwritable_roots = [\"/srv/cache\"]\n";
    std::fs::write(&config, users)?;
    let out = init(root, &data)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&config)?;
    assert!(
        text.starts_with(
            "# the team's Codex settings\napproval_policy = \"on-request\" # ask first\n"
        ),
        "{text}"
    );
    assert!(text.contains("network_access = true\n"), "{text}");
    assert!(
        text.contains("writable_roots = [\n    \"/srv/cache\",\n    # turnback's data directory")
            && text.contains(
                "Installed by `turnback init codex`.\n    \"~/.local/share/turnback\",\n]\n"
            ),
        "{text}"
    );
    let report: Value = serde_json::from_slice(&init(root, &data)?.stdout)?;
    assert_eq!(report["changed"], false, "idempotent: {report}");

    // The same file in a project whose data directory is elsewhere (another
    // machine's checkout): written whole, in place of turnback's earlier
    // entry; the user's root stays.
    let moved = scenario::git_project()?;
    let config = moved.path().join(".codex/config.toml");
    std::fs::create_dir_all(moved.path().join(".codex"))?;
    std::fs::write(&config, &text)?;
    let elsewhere = tempfile::tempdir()?;
    let out = init(moved.path(), elsewhere.path())?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&config)?;
    assert!(!text.contains("~/.local/share/turnback"), "{text}");
    assert!(
        text.contains(&format!("    \"{}\",\n]\n", elsewhere.path().display())),
        "{text}"
    );
    assert!(text.contains("\"/srv/cache\""), "{text}");

    // A file that is not TOML is left as it is, and so is everything else.
    let other = scenario::git_project()?;
    std::fs::create_dir_all(other.path().join(".codex"))?;
    std::fs::write(other.path().join(".codex/config.toml"), "model = \n")?;
    let out = init(other.path(), &data)?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(".codex/config.toml"), "{err}");
    assert_eq!(
        std::fs::read_to_string(other.path().join(".codex/config.toml"))?,
        "model = \n"
    );
    assert!(!other.path().join(SETTINGS).exists(), "nothing was written");
    Ok(())
}
