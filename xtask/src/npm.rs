//! The npm packages, as the tarballs `npm publish` takes (what `npm pack`
//! makes: a gzipped tar of `package/`).
//!
//! - `turnback-<os>-<cpu>`, one per target: `bin/turnback[.exe]`, with
//!   `os` and `cpu` so npm installs only the one for the machine;
//! - `turnback`: the launcher `bin/turnback.js` (the `turnback` command),
//!   the manual page, and every platform package in
//!   `optionalDependencies`, at this exact version.
//!
//! As Codex CLI, Claude Code and Biome do: `npm install -g turnback`
//! fetches nothing but packages from the registry, and runs no install
//! script. The launcher names npm's shim that started it in
//! `TURNBACK_SHIM`, so `turnback init` writes a hook command that survives
//! `npm update -g` (crates/turnback-cli/src/commands/init/program.rs).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::archive::{self, Entry};
use crate::dist::{Built, Release, TARGETS, create_dir};

/// Writes the tarballs into `dir`; gives their paths.
pub fn write(
    dir: &Path,
    release: &Release,
    built: &[Built],
    docs: &[Entry],
) -> anyhow::Result<Vec<PathBuf>> {
    create_dir(dir)?;
    let v = &release.version;
    let repository = json!({ "type": "git", "url": format!("git+{}.git", release.repository) });
    let mut written = Vec::new();
    let mut optional = serde_json::Map::new();
    for b in built {
        let t = b.target;
        let name = t.npm_package();
        let manifest = json!({
            "name": name,
            "version": v,
            "description": format!("The turnback binary for {} {} (installed by the turnback package)", t.npm_os, t.npm_cpu),
            "license": "MIT OR Apache-2.0",
            "repository": repository,
            "os": [t.npm_os],
            "cpu": [t.npm_cpu],
            "files": ["bin"],
            "preferUnplugged": true,
        });
        let mut entries = vec![
            package_json(&manifest)?,
            Entry::new(format!("package/bin/{}", t.exe()), b.binary.clone(), true),
        ];
        entries.extend(common(release));
        let path = dir.join(format!("{name}-{v}.tgz"));
        archive::tar_gz(&path, &entries, release.mtime)?;
        written.push(path);
        optional.insert(name, json!(v));
    }

    let platforms: serde_json::Map<String, serde_json::Value> = TARGETS
        .iter()
        .map(|t| {
            (
                format!("{} {}", t.npm_os, t.npm_cpu),
                json!(t.npm_package()),
            )
        })
        .collect();
    let launcher = include_str!("../assets/turnback.js").replace(
        "/*PLATFORMS*/ {}",
        &serde_json::to_string(&platforms).expect("a map of strings serializes"),
    );
    let manifest = json!({
        "name": "turnback",
        "version": v,
        "description": release.description,
        "license": "MIT OR Apache-2.0",
        "repository": repository,
        "homepage": release.repository,
        "keywords": ["ai", "agent", "checkpoint", "rewind", "undo", "claude-code", "codex"],
        "bin": { "turnback": "bin/turnback.js" },
        "man": ["man/turnback.1"],
        "files": ["bin", "man"],
        "engines": { "node": ">=18" },
        "optionalDependencies": optional,
    });
    let mut entries = vec![
        package_json(&manifest)?,
        Entry::new(
            "package/bin/turnback.js".into(),
            launcher.into_bytes(),
            true,
        ),
    ];
    if let Some(man) = docs.iter().find(|d| d.path == "doc/turnback.1") {
        entries.push(Entry::new(
            "package/man/turnback.1".into(),
            man.bytes.clone(),
            false,
        ));
    }
    entries.extend(common(release));
    let path = dir.join(format!("turnback-{v}.tgz"));
    archive::tar_gz(&path, &entries, release.mtime)?;
    written.push(path);
    Ok(written)
}

fn package_json(manifest: &serde_json::Value) -> anyhow::Result<Entry> {
    let mut text = serde_json::to_string_pretty(manifest)?;
    text.push('\n');
    Ok(Entry::new(
        "package/package.json".into(),
        text.into_bytes(),
        false,
    ))
}

/// README.md and the licenses, in `package/`.
fn common(release: &Release) -> impl Iterator<Item = Entry> + '_ {
    release
        .common_files
        .iter()
        .map(|f| Entry::new(format!("package/{}", f.path), f.bytes.clone(), false))
}
