//! The headless API: everything the hooks and the MCP server do, from the
//! CLI with `--json`: edit, mkdir, mv, rm (besides write and capture), then
//! a rewind gives the folder back byte for byte.

mod common;

use common::{TestResult, list, project, tree, turnback};
use serde_json::Value;

fn json_ok(root: &std::path::Path, args: &[&str]) -> Result<Value, Box<dyn std::error::Error>> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = turnback(root, &all)?;
    assert!(
        out.status.success(),
        "turnback {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[test]
fn edit_mkdir_mv_rm_are_rewindable_from_the_cli() -> TestResult {
    let tmp = project()?;
    let root = tmp.path();
    let before = tree(root)?;
    let t = ["--turn", "t1", "--label", "headless"];

    let dry = json_ok(
        root,
        &[
            &["edit"][..],
            &t,
            &[
                "--old",
                "'light'",
                "--new",
                "'dark'",
                "--dry-run",
                "src/config.js",
            ],
        ]
        .concat(),
    )?;
    assert_eq!(dry["dry_run"], true);
    assert!(
        dry["diff"]
            .as_str()
            .is_some_and(|d| d.contains("+  theme: 'dark',")),
        "{dry}"
    );
    assert_eq!(tree(root)?, before, "a dry run writes nothing");

    let e = json_ok(
        root,
        &[
            &["edit"][..],
            &t,
            &[
                "--old",
                "'light'",
                "--new",
                "'dark'",
                "--old",
                "true",
                "--new",
                "false",
                "src/config.js",
            ],
        ]
        .concat(),
    )?;
    assert_eq!(e["capture"]["captured"][0]["path"], "src/config.js");
    assert_eq!(
        std::fs::read_to_string(root.join("src/config.js"))?,
        "export default {\n  theme: 'dark',\n  animations: false,\n};\n"
    );
    let m = json_ok(root, &[&["mkdir"][..], &t, &["assets/img"]].concat())?;
    assert_eq!(m["captured"].as_array().map(Vec::len), Some(2));
    json_ok(
        root,
        &[&["mv"][..], &t, &["app.js", "assets/app.js"]].concat(),
    )?;
    json_ok(root, &[&["rm"][..], &t, &[".env"]].concat())?;
    assert!(!root.join(".env").exists() && root.join("assets/app.js").exists());

    // Refusals: exit 1, nothing written, nothing recorded.
    let after = tree(root)?;
    for args in [
        vec![
            "edit",
            "--turn",
            "t2",
            "--old",
            "no such text",
            "--new",
            "x",
            "index.html",
        ],
        vec!["edit", "--turn", "t2", "--old", "a", "index.html"],
        vec!["mv", "--turn", "t2", "index.html", "../outside.html"],
        vec!["rm", "--turn", "t2", "../x"],
        vec!["mkdir", "--turn", "t2", "/"],
    ] {
        let out = turnback(root, &args)?;
        assert_ne!(out.status.code(), Some(0), "{args:?} must fail");
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
    assert_eq!(tree(root)?, after);
    let turns = list(root)?;
    assert_eq!(turns.len(), 1, "{turns:?}");

    let out = turnback(root, &["rewind", "t1"])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tree(root)?, before, "byte for byte");
    Ok(())
}
