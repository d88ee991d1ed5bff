//! An agent's write tool built on `Store::write`: every write it makes can be
//! undone with `turnback rewind <turn>` (or `Store::rewind`).
//! Run with `cargo run -p turnback --example agent_write_tool`.

use turnback::{RewindOptions, Store, TurnId};

/// The tool: save the file's current bytes in the turn, then write.
fn write_tool(root: &str, turn: &str, path: &str, content: &str) -> turnback::Result<String> {
    let mut store = Store::open(root)?; // <root>/.turnback/, created by the first write
    let turn = TurnId::new(turn)?; // the agent's message id, a counter...
    let report = store.write(&turn, Some("agent edit"), path, content.as_bytes())?;
    let saved = report.captured.len();
    Ok(format!(
        "wrote {path}; {saved} pre-image(s) saved in turn {turn}"
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let project = tempfile::tempdir()?;
    let root = project
        .path()
        .to_str()
        .ok_or("the temporary path is not UTF-8")?;
    std::fs::write(project.path().join("main.py"), "print('v1')\n")?;
    println!(
        "{}",
        write_tool(root, "msg-1", "main.py", "print('broken')\n")?
    );
    println!("{}", write_tool(root, "msg-1", "src/new.py", "x = 1\n")?);
    let report = Store::open(root)?.rewind(&TurnId::new("msg-1")?, &RewindOptions::default())?;
    assert!(report.complete());
    assert_eq!(
        std::fs::read_to_string(project.path().join("main.py"))?,
        "print('v1')\n"
    );
    assert!(!project.path().join("src").exists());
    println!("rewound msg-1: main.py is back, src/ is gone");
    Ok(())
}
