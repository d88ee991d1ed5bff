//! What a shell command's snapshot covers, and what it leaves out never
//! silently: default exclusions, nested repositories, names that are not
//! UTF-8, and commands of several turns running at once. Every case runs
//! the real binary and compares the whole tree (path bytes, type, mode,
//! bytes or link target).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::{BIN, Project, Res, TestResult, texts};

/// One entry of a tree: type, mode, bytes (or link target).
type Node = (char, u32, Vec<u8>);

/// Every entry under `root` by raw path bytes, the store directory left
/// out.
fn tree(root: &Path) -> Res<BTreeMap<Vec<u8>, Node>> {
    let store = store_dir(root)?;
    let mut out = BTreeMap::new();
    walk(root, root, &store, &mut out)?;
    Ok(out)
}

fn walk(root: &Path, dir: &Path, skip: &Path, out: &mut BTreeMap<Vec<u8>, Node>) -> TestResult {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p == skip {
            continue;
        }
        let meta = std::fs::symlink_metadata(&p)?;
        let rel = p.strip_prefix(root)?.as_os_str().as_bytes().to_vec();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&p)?;
            out.insert(rel, ('l', 0, target.as_os_str().as_bytes().to_vec()));
        } else if meta.is_dir() {
            out.insert(rel, ('d', mode, Vec::new()));
            walk(root, &p, skip, out)?;
        } else {
            out.insert(rel, ('f', mode, std::fs::read(&p)?));
        }
    }
    Ok(())
}

fn store_dir(root: &Path) -> Res<PathBuf> {
    Ok(turnback::Store::open(root)?.store_dir().to_path_buf())
}

/// `turnback ARGS` in the root: exit code, stdout, stderr.
fn run(p: &Project, args: &[&str]) -> Res<(i32, String, String)> {
    let out = p.tb().args(args).output()?;
    let (o, e) = texts(&out);
    Ok((out.status.code().unwrap_or(-1), o, e))
}

/// `turnback exec --turn TURN -- sh -c SCRIPT` in the root.
fn exec(p: &Project, turn: &str, script: &str) -> Res<(i32, String, String)> {
    run(p, &["exec", "--turn", turn, "--", "sh", "-c", script])
}

fn bytes_path(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}

#[test]
fn a_default_exclusion_holds_only_for_generated_output_and_a_change_inside_it_is_reported()
-> TestResult {
    let p = Project::new()?;
    // Hand-written sources under default-excluded names: covered.
    p.write("web/dist/config.js", "old config\n")?;
    p.write("tools/build/gen.sh", "echo generated\n")?;
    // Generated output, by the project's .gitignore: left out.
    p.write(".gitignore", "/out/dist/\n")?;
    p.write("out/dist/bundle.js", "bundle v1\n")?;
    let before = {
        p.ok(&["snapshot", "--turn", "t0"])?;
        p.ok(&["snapshot", "--turn", "t0", "--after"])?;
        tree(&p.root)?
    };
    let (code, _, err) = exec(
        &p,
        "t1",
        "echo new config > web/dist/config.js; echo hacked > tools/build/gen.sh; echo bundle v2 > out/dist/bundle.js",
    )?;
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("changed nothing"), "{err}");
    assert!(err.contains("2 modified"), "{err}");
    assert!(
        err.contains("NOT CAPTURED out/dist/ (modified)"),
        "an edit deep inside an excluded directory is reported: {err}"
    );
    // A later edit inside it shows in status as a change not captured.
    p.write("out/dist/bundle.js", "bundle v3\n")?;
    let st = p.json(&["status"])?;
    let nc: Vec<&str> = st["changes"]["not_captured"]
        .as_array()
        .ok_or("not_captured")?
        .iter()
        .filter_map(|n| n["path"].as_str())
        .collect();
    assert_eq!(nc, ["out/dist/"], "{st}");
    p.write("out/dist/bundle.js", "bundle v2\n")?;
    // The rewind restores what was covered and names what was not (exit 3).
    let (code, out, _) = run(&p, &["rewind", "t1"])?;
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("NOT RESTORED  out/dist"), "{out}");
    let mut want = before;
    want.insert(
        b"out/dist/bundle.js".to_vec(),
        ('f', 0o644, b"bundle v2\n".to_vec()),
    );
    assert_eq!(tree(&p.root)?, want);
    // An explicit .turnbackignore still wins over the rule.
    p.write(".turnbackignore", "tools/build/\n")?;
    let st = p.json(&["status"])?;
    let left_out: Vec<&str> = st["not_covered"]
        .as_array()
        .ok_or("not_covered")?
        .iter()
        .filter_map(|n| n["path"].as_str())
        .collect();
    assert_eq!(left_out, ["out/dist/", "tools/build/"], "{st}");
    Ok(())
}

#[test]
fn a_nested_repository_is_covered_by_commands_and_file_tools() -> TestResult {
    let p = Project::new()?;
    p.write(".git/HEAD", "ref: refs/heads/main\n")?;
    p.write("sub/.git/HEAD", "ref: refs/heads/main\n")?;
    p.write("sub/.git/config", "[core]\n")?;
    p.write("sub/lib.rs", "pub fn f() {}\n")?;
    p.ok(&["snapshot", "--turn", "t0"])?;
    p.ok(&["snapshot", "--turn", "t0", "--after"])?;
    let before = tree(&p.root)?;
    let (code, _, err) = exec(
        &p,
        "t1",
        "echo 'ref: refs/heads/topic' > sub/.git/HEAD; mkdir -p sub/.git/refs/heads; echo abc > sub/.git/refs/heads/topic",
    )?;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("1 modified, 3 created"), "{err}");
    // status lists a later change inside it.
    p.write("sub/.git/config", "[core]\n\tbare = false\n")?;
    let st = p.json(&["status"])?;
    let modified: Vec<&str> = st["changes"]["modified"]
        .as_array()
        .ok_or("modified")?
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(modified, ["sub/.git/config"], "{st}");
    // A file tool writes there too; only the root's .git is refused.
    let out = p
        .tb()
        .args(["write", "--turn", "t2", "sub/.git/description"])
        .write_stdin("nested\n")
        .output()?;
    assert!(out.status.success(), "{:?}", texts(&out));
    let out = p
        .tb()
        .args(["write", "--turn", "t2", ".git/description"])
        .write_stdin("root\n")
        .output()?;
    assert_eq!(out.status.code(), Some(1), "{:?}", texts(&out));
    assert!(!p.exists(".git/description"));
    // Undoes t1 and the later t2; the user's own edit of the config, which
    // no turn made, is left as it is.
    let (code, out, _) = run(&p, &["rewind", "t1"])?;
    assert_eq!(code, 0, "{out}");
    let mut want = before;
    want.insert(
        b"sub/.git/config".to_vec(),
        ('f', 0o644, b"[core]\n\tbare = false\n".to_vec()),
    );
    assert_eq!(tree(&p.root)?, want);
    Ok(())
}

#[test]
fn names_that_are_not_utf8_round_trip_through_commands_and_file_tools() -> TestResult {
    let p = Project::new()?;
    let root = &p.root;
    std::fs::write(bytes_path(root, b"\xff"), b"k")?;
    std::fs::create_dir(bytes_path(root, b"d\xfe"))?;
    std::fs::write(bytes_path(root, b"d\xfe/caf\xe9.txt"), b"latin-1 name\n")?;
    std::fs::set_permissions(
        bytes_path(root, b"d\xfe/caf\xe9.txt"),
        std::fs::Permissions::from_mode(0o600),
    )?;
    p.write("plain.txt", "plain\n")?;
    p.ok(&["snapshot", "--turn", "t0"])?;
    p.ok(&["snapshot", "--turn", "t0", "--after"])?;
    let before = tree(root)?;
    let (code, _, err) = exec(&p, "t1", "rm -rf ./*")?;
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("NOT CAPTURED"), "{err}");
    let show = p.ok(&["show", "t1"])?;
    assert!(show.contains("\\xff "), "shown with escapes: {show}");
    assert!(show.contains("d\\xfe/caf\\xe9.txt"), "{show}");
    let (code, out, _) = run(&p, &["rewind", "t1"])?;
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        tree(root)?,
        before,
        "the exact bytes of every name are back"
    );

    // A file tool writes such a name; list, show, status and the log.
    let name = bytes_path(root, b"new-\xfa");
    let out = p
        .tb()
        .arg("write")
        .args(["--turn", "t2"])
        .arg(&name)
        .write_stdin("v2\n")
        .output()?;
    assert!(out.status.success(), "{:?}", texts(&out));
    assert!(texts(&out).0.contains("new-\\xfa"), "{:?}", texts(&out));
    assert!(p.ok(&["show", "t2"])?.contains("new-\\xfa"));
    assert!(p.ok(&["list"])?.contains("t2"));
    assert!(p.ok(&["status"])?.contains("new-\\xfa"));
    let log = std::fs::read_to_string(store_dir(root)?.join(turnback::log::LOG_FILE))?;
    assert!(
        log.contains(r#""path":{"bytes_hex":"6e65772dfa"}"#),
        "{log}"
    );
    let (code, out, _) = run(&p, &["rewind", "t2"])?;
    assert_eq!(code, 0, "{out}");
    assert_eq!(tree(root)?, before);
    Ok(())
}

#[test]
fn a_name_the_store_cannot_hold_makes_the_rewind_exit_3_naming_it() -> TestResult {
    let p = Project::new()?;
    p.write("keep.txt", "keep\n")?;
    // A path longer than 4096 bytes, made one directory at a time (bash:
    // dash's cd refuses a current directory that long).
    let comp = "d".repeat(200);
    let deep = format!(
        "for i in $(seq 22); do mkdir {comp} && cd {comp} || exit 1; done; printf deep > f"
    );
    let status = Command::new("bash")
        .args(["-c", &deep])
        .current_dir(&p.root)
        .status()?;
    assert!(status.success());
    p.ok(&["snapshot", "--turn", "t0"])?;
    p.ok(&["snapshot", "--turn", "t0", "--after"])?;
    let down = format!("for i in $(seq 22); do cd {comp}; done; rm f");
    let (code, _, err) = run(&p, &["exec", "--turn", "t1", "--", "bash", "-c", &down])?;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("NOT CAPTURED"), "{err}");
    let (code, out, _) = run(&p, &["rewind", "t1"])?;
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("NOT RESTORED") && out.contains("its name cannot be stored: it is too long"),
        "{out}"
    );
    assert_eq!(p.read("keep.txt")?, b"keep\n");
    Ok(())
}

/// `turnback exec` started in the background.
fn spawn_exec(p: &Project, turn: &str, script: &str) -> Res<Child> {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env(
            "TURNBACK_DATA_DIR",
            std::env::var_os("TURNBACK_DATA_DIR").unwrap_or_default(),
        )
        .current_dir(&p.root);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    Ok(cmd
        .args(["exec", "--turn", turn, "--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?)
}

/// Waits until the command made `flag` (outside the project), or fails if
/// the process ended without making it.
fn wait_for(flag: &Path, child: &mut Child) -> TestResult {
    while !flag.exists() {
        if let Some(status) = child.try_wait()? {
            return Err(format!("the command ended ({status}) before {}", flag.display()).into());
        }
        std::thread::yield_now();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

/// A shell loop that waits for `flag`.
fn await_flag(flag: &Path) -> String {
    format!("while [ ! -e '{}' ]; do sleep 0.01; done", flag.display())
}

fn shown(p: &Project, turn: &str) -> Res<Vec<(String, bool)>> {
    let t = p.json(&["show", turn])?;
    Ok(t["files"]
        .as_array()
        .ok_or("files")?
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or("?").to_owned(),
                f.get("shared_with").is_some(),
            )
        })
        .collect())
}

#[test]
fn two_commands_at_once_each_keep_their_own_change_and_share_what_either_could_have_made()
-> TestResult {
    let p = Project::new()?;
    for f in ["a1", "a2", "b", "x"] {
        p.write(f, format!("{f} before\n"))?;
    }
    p.ok(&["snapshot", "--turn", "t0"])?;
    p.ok(&["snapshot", "--turn", "t0", "--after"])?;
    let original = tree(&p.root)?;
    let flag = |n: &str| p.outer.join(n);
    // tA changes a1, then waits while tB runs whole, then changes a2.
    let mut a = spawn_exec(
        &p,
        "tA",
        &format!(
            "echo A > a1; touch '{}'; {}; echo A > a2",
            flag("a1").display(),
            await_flag(&flag("go"))
        ),
    )?;
    wait_for(&flag("a1"), &mut a)?;
    let (code, _, err) = exec(&p, "tB", "echo B > b")?;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("SHARED"), "tA's command was running: {err}");
    std::fs::write(flag("go"), "")?;
    let out = a.wait_with_output()?;
    assert!(out.status.success(), "{:?}", texts(&out));
    // a1 was made before tB's window opened; b while both ran; a2 after
    // tB's command ended.
    assert_eq!(
        shown(&p, "tA")?,
        [
            ("a1".to_owned(), false),
            ("b".to_owned(), true),
            ("a2".to_owned(), false)
        ]
    );
    assert_eq!(shown(&p, "tB")?, [("b".to_owned(), true)]);
    // Rewinding tB undoes b only, and says that tA may have made it.
    let (code, out, _) = run(&p, &["rewind", "tB"])?;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("SHARED    b: turn tB's command and that of turn(s) tA"),
        "{out}"
    );
    let mut want = original.clone();
    want.insert(b"a1".to_vec(), ('f', 0o644, b"A\n".to_vec()));
    want.insert(b"a2".to_vec(), ('f', 0o644, b"A\n".to_vec()));
    assert_eq!(tree(&p.root)?, want);
    let (code, out, _) = run(&p, &["rewind", "tA"])?;
    assert_eq!(code, 0, "{out}");
    assert_eq!(tree(&p.root)?, original);
    Ok(())
}

#[test]
fn changes_made_while_both_commands_ran_are_recorded_in_both_turns() -> TestResult {
    let p = Project::new()?;
    p.write("a", "a before\n")?;
    p.write("b", "b before\n")?;
    p.ok(&["snapshot", "--turn", "t0"])?;
    p.ok(&["snapshot", "--turn", "t0", "--after"])?;
    let original = tree(&p.root)?;
    let flag = |n: &str| p.outer.join(n);
    // tB changes b, then tA changes a; both commands then end.
    let mut a = spawn_exec(
        &p,
        "tA",
        &format!(
            "touch '{}'; {}; echo A > a; touch '{}'",
            flag("a-ready").display(),
            await_flag(&flag("b-done")),
            flag("a-done").display()
        ),
    )?;
    wait_for(&flag("a-ready"), &mut a)?;
    let (code, _, err) = exec(
        &p,
        "tB",
        &format!(
            "echo B > b; touch '{}'; {}",
            flag("b-done").display(),
            await_flag(&flag("a-done"))
        ),
    )?;
    assert_eq!(code, 0, "{err}");
    let out = a.wait_with_output()?;
    assert!(out.status.success(), "{:?}", texts(&out));
    // Either command may have made either change: both turns hold both.
    assert_eq!(
        shown(&p, "tA")?,
        [("a".to_owned(), true), ("b".to_owned(), true)]
    );
    assert_eq!(
        shown(&p, "tB")?,
        [("a".to_owned(), true), ("b".to_owned(), true)]
    );
    let show = p.ok(&["show", "tB"])?;
    assert!(show.contains("SHARED with turn(s) tA"), "{show}");
    let (code, out, _) = run(&p, &["rewind", "tB"])?;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("SHARED    a:") && out.contains("SHARED    b:"),
        "{out}"
    );
    assert_eq!(
        tree(&p.root)?,
        original,
        "rewinding either brings both back"
    );
    Ok(())
}

#[test]
fn a_file_tool_write_during_a_command_stays_with_its_own_turn() -> TestResult {
    let p = Project::new()?;
    p.write("a", "a before\n")?;
    p.write("w", "w before\n")?;
    p.ok(&["snapshot", "--turn", "t0"])?;
    p.ok(&["snapshot", "--turn", "t0", "--after"])?;
    let original = tree(&p.root)?;
    let flag = |n: &str| p.outer.join(n);
    let mut e = spawn_exec(
        &p,
        "tE",
        &format!(
            "echo E > a; touch '{}'; {}",
            flag("e").display(),
            await_flag(&flag("go"))
        ),
    )?;
    wait_for(&flag("e"), &mut e)?;
    let out = p
        .tb()
        .args(["write", "--turn", "tW", "w"])
        .write_stdin("W\n")
        .output()?;
    assert!(out.status.success(), "{:?}", texts(&out));
    std::fs::write(flag("go"), "")?;
    let out = e.wait_with_output()?;
    let (_, err) = texts(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("left to turn tW: w"), "{err}");
    assert_eq!(shown(&p, "tE")?, [("a".to_owned(), false)]);
    assert_eq!(shown(&p, "tW")?, [("w".to_owned(), false)]);
    // Undoing tE alone leaves tW's write.
    let (code, out, _) = run(&p, &["revert", "tE"])?;
    assert_eq!(code, 0, "{out}");
    let mut want = original.clone();
    want.insert(b"w".to_vec(), ('f', 0o644, b"W\n".to_vec()));
    assert_eq!(tree(&p.root)?, want);
    // Once the revert is undone, rewinding tE (its record came after
    // tW's) undoes tE alone, and tW's rewind brings back the rest.
    p.ok(&["undo"])?;
    let (code, out, _) = run(&p, &["rewind", "tE"])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("rewound turns: tE\n"), "{out}");
    assert_eq!(tree(&p.root)?, want);
    let (code, out, _) = run(&p, &["rewind", "tW"])?;
    assert_eq!(code, 0, "{out}");
    assert_eq!(tree(&p.root)?, original);
    Ok(())
}
