//! Helpers shared by the CLI integration tests: the real binary, a small
//! project, and a byte-for-byte picture of a folder.
#![allow(dead_code)]

pub mod portable;
pub mod scenario;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_turnback");

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The store directory of the project at `root`, which has a store.
pub fn store_dir(root: &Path) -> std::path::PathBuf {
    turnback::location::locate(root, None)
        .expect("locate the store")
        .expect("the project has a store")
        .store_dir
}

/// Runs `turnback ARGS` in `root`.
pub fn turnback(root: &Path, args: &[&str]) -> Result<Output, std::io::Error> {
    Command::new(BIN)
        .args(args)
        .current_dir(root)
        .env_remove("CLAUDE_PROJECT_DIR")
        .output()
}

/// Runs a hook `command` line in a shell in `root` with `stdin` as input.
pub fn run_hook(
    root: &Path,
    command: &str,
    stdin: &[u8],
    env: &[(&str, &Path)],
) -> Result<Output, Box<dyn std::error::Error>> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn()?;
    {
        use std::io::Write;
        let mut input = child.stdin.take().ok_or("no stdin")?;
        input.write_all(stdin)?;
    }
    Ok(child.wait_with_output()?)
}

/// `turnback --json list` in `root`.
pub fn list(root: &Path) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let out = turnback(root, &["--json", "list"])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice::<Vec<Value>>(&out.stdout)?)
}

/// Reads a fixture, with `{{ROOT}}` replaced by `root` (JSON-escaped).
pub fn fixture(agent: &str, name: &str, root: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(agent);
    let text = std::fs::read_to_string(dir.join(name))?;
    let root_json = serde_json::to_string(&root.to_string_lossy())?;
    let text = text.replace("{{ROOT}}", &root_json[1..root_json.len() - 1]);
    Ok(serde_json::from_str(&text)?)
}

/// A project as a map: path -> (kind, mode, bytes); `.turnback/` left out.
pub type Tree = BTreeMap<String, (&'static str, u32, Vec<u8>)>;

pub fn tree(root: &Path) -> Result<Tree, Box<dyn std::error::Error>> {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) -> Result<(), Box<dyn std::error::Error>> {
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let p = e.path();
            let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
            if rel == ".turnback" {
                continue;
            }
            let m = std::fs::symlink_metadata(&p)?;
            let mode = portable::mode_of(&m);
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p)?;
                out.insert(
                    rel,
                    ("link", 0, t.to_string_lossy().into_owned().into_bytes()),
                );
            } else if m.is_dir() {
                out.insert(rel, ("dir", mode, Vec::new()));
                walk(root, &p, out)?;
            } else {
                out.insert(rel, ("file", mode, std::fs::read(&p)?));
            }
        }
        Ok(())
    }
    let mut out = Tree::new();
    walk(root, root, &mut out)?;
    Ok(out)
}

/// A small site, before the agent's turns.
pub fn project() -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let r = tmp.path();
    std::fs::write(
        r.join("index.html"),
        "<!doctype html>\n<title>My site</title>\n<link rel=\"stylesheet\" href=\"styles.css\">\n<script src=\"app.js\"></script>\n",
    )?;
    std::fs::write(r.join("app.js"), "console.log('v1');\n")?;
    std::fs::write(r.join(".env"), "API_URL=https://api.example.com\n")?;
    std::fs::create_dir_all(r.join("src"))?;
    std::fs::write(
        r.join("src/config.js"),
        "export default {\n  theme: 'light',\n  animations: true,\n};\n",
    )?;
    std::fs::create_dir_all(r.join("analysis"))?;
    std::fs::write(
        r.join("analysis/colors.ipynb"),
        "{\"cells\": [{\"id\": \"cell-1\", \"cell_type\": \"code\", \"source\": \"palette = []\"}], \"nbformat\": 4}\n",
    )?;
    let tool = r.join("build.sh");
    std::fs::write(&tool, "#!/bin/sh\necho build\n")?;
    portable::set_mode(&tool, 0o755)?;
    Ok(tmp)
}
