//! Which spelling of this program `init` writes into the hooks: one that
//! still runs after the user upgrades or reinstalls turnback.
//!
//! A package manager keeps the binary in a folder an upgrade replaces and
//! puts a stable name in front of it: npm's shim in `<prefix>/bin/` (which
//! runs the launcher of the `turnback` package, which runs the binary in
//! `node_modules/turnback-linux-x64/`), Homebrew's link in `<prefix>/bin/`
//! (to `Cellar/turnback/<version>/bin/turnback`). The hooks must name the
//! stable one. In order:
//!
//! 1. `turnback` when the first `turnback` on PATH is this program, or the
//!    npm shim that started it (the launcher names it in
//!    [`SHIM_ENV`]);
//! 2. else the npm shim's own path, when the launcher named one;
//! 3. else Homebrew's link `<prefix>/bin/turnback` when this program is in
//!    `<prefix>/Cellar/<formula>/<version>/bin/` and the link leads here;
//! 4. else this program's path, unless that lies in a folder an upgrade
//!    replaces (`node_modules`, a Homebrew `Cellar`, or a folder named by
//!    a version such as `1.2.0`, `v1.2` or `turnback-1.2.0-x86_64-…`):
//!    then `turnback`, with a warning that it must be on PATH.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The variable the npm package's launcher (`bin/turnback.js`) sets for
/// the binary it runs: the path of npm's shim that started the launcher,
/// a name that stays when `npm update -g` replaces the packages.
pub const SHIM_ENV: &str = "TURNBACK_SHIM";

/// How the hooks name the program.
#[derive(Debug, PartialEq, Eq)]
pub enum Choice {
    /// `turnback`, found on PATH.
    OnPath,
    /// This absolute path.
    At(PathBuf),
    /// `turnback`, though it is not on PATH (or another one is): the
    /// program's own path is in a folder an upgrade replaces, so the hooks
    /// would break on the next upgrade.
    OnPathUnverified {
        /// The program's own path, which the hooks do not name.
        exe: PathBuf,
    },
}

/// The choice for the program at `exe` (canonical), started by the shim
/// `shim` (as [`SHIM_ENV`] named it, if it did), with the search path
/// `path_var`.
pub fn choose(exe: &Path, shim: Option<&Path>, path_var: Option<&OsStr>) -> Choice {
    let shim = shim.filter(|s| s.is_absolute() && s.is_file());
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    let shim_canon = shim.and_then(canon);
    if let Some(found) = first_on_path(path_var)
        && let Some(found) = canon(&found)
        && (found == exe || Some(&found) == shim_canon.as_ref())
    {
        return Choice::OnPath;
    }
    if let Some(shim) = shim
        && !in_versioned_folder(shim)
    {
        return Choice::At(shim.to_owned());
    }
    if let Some(link) = homebrew_link(exe) {
        return Choice::At(link);
    }
    if in_versioned_folder(exe) {
        return Choice::OnPathUnverified {
            exe: exe.to_owned(),
        };
    }
    Choice::At(exe.to_owned())
}

/// The first file a shell finds for `turnback` on the search path.
fn first_on_path(path_var: Option<&OsStr>) -> Option<PathBuf> {
    // cmd and PowerShell try PATHEXT's extensions in order: `.exe`
    // before `.cmd` (npm's shim on Windows).
    let names: &[&str] = if cfg!(windows) {
        &["turnback.exe", "turnback.cmd"]
    } else {
        &["turnback"]
    };
    std::env::split_paths(path_var?)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|c| c.is_file())
}

/// `<prefix>/bin/<name>` for a program at
/// `<prefix>/Cellar/<formula>/<version>/bin/<name>`, when that link leads
/// to it.
fn homebrew_link(exe: &Path) -> Option<PathBuf> {
    let parts: Vec<Component> = exe.components().collect();
    let cellar = parts.iter().rposition(|c| c.as_os_str() == "Cellar")?;
    let rest = &parts[cellar + 1..];
    if rest.len() != 4 || rest[2].as_os_str() != "bin" {
        return None;
    }
    let prefix: PathBuf = parts[..cellar].iter().collect();
    let link = prefix.join("bin").join(rest[3]);
    (std::fs::canonicalize(&link).ok()? == exe).then_some(link)
}

/// Whether a folder on the way to `path` is one an upgrade replaces.
pub fn in_versioned_folder(path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    dir.components().any(|c| {
        let name = c.as_os_str().to_string_lossy();
        name == "node_modules" || name == "Cellar" || names_a_version(&name)
    })
}

/// `1.2`, `v1.2.0`, `1.2.0-beta`, or a name with `-1.2` / `-v1.2` in it
/// (`turnback-0.1.0-x86_64-unknown-linux-musl`, `node-v20.11.0-linux-x64`).
fn names_a_version(name: &str) -> bool {
    fn starts_with_version(s: &str) -> bool {
        let s = s.strip_prefix('v').unwrap_or(s);
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0
            && s[digits..].starts_with('.')
            && s[digits + 1..].starts_with(|c: char| c.is_ascii_digit())
    }
    starts_with_version(name)
        || name
            .match_indices('-')
            .any(|(i, _)| starts_with_version(&name[i + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn folders_an_upgrade_replaces_are_told_apart() {
        for (path, versioned) in [
            (
                "/usr/lib/node_modules/turnback-linux-x64/bin/turnback",
                true,
            ),
            ("/opt/homebrew/Cellar/turnback/0.1.0/bin/turnback", true),
            (
                "/home/me/.local/share/mise/installs/turnback/0.1.0/bin/turnback",
                true,
            ),
            (
                "/tmp/turnback-0.1.0-x86_64-unknown-linux-musl/turnback",
                true,
            ),
            ("/opt/node-v20.11.0-linux-x64/bin/turnback", true),
            ("/opt/tools/v2.1/turnback", true),
            ("/home/me/.local/bin/turnback", false),
            ("/home/me/.cargo/bin/turnback", false),
            ("/opt/homebrew/bin/turnback", false),
            (
                "/work/turnback/target/x86_64-unknown-linux-musl/release/turnback",
                false,
            ),
            ("/usr/lib/python3.11/turnback", false),
            ("/home/me/2024.notes/turnback", false),
            ("/home/me/.local/bin/turnback-1.0", false),
        ] {
            assert_eq!(in_versioned_folder(Path::new(path)), versioned, "{path}");
        }
    }

    #[cfg(unix)]
    fn canonical_tempdir() -> Result<(tempfile::TempDir, PathBuf), std::io::Error> {
        let dir = tempfile::tempdir()?;
        let canon = std::fs::canonicalize(dir.path())?;
        Ok((dir, canon))
    }

    #[cfg(unix)]
    fn program(path: &Path) -> Result<(), std::io::Error> {
        std::fs::create_dir_all(path.parent().expect("a program has a folder"))?;
        std::fs::write(path, b"#!/bin/sh\n")
    }

    /// A Homebrew install: the hooks name `turnback` when `<prefix>/bin` is
    /// on PATH, else the link there, never the Cellar.
    #[cfg(unix)]
    #[test]
    fn a_homebrew_program_is_named_by_its_link() -> TestResult {
        let (_dir, root) = canonical_tempdir()?;
        let exe = root.join("Cellar/turnback/0.1.0/bin/turnback");
        program(&exe)?;
        std::fs::create_dir_all(root.join("bin"))?;
        std::os::unix::fs::symlink(
            "../Cellar/turnback/0.1.0/bin/turnback",
            root.join("bin/turnback"),
        )?;
        let path_var = std::env::join_paths([root.join("bin")])?;
        assert_eq!(choose(&exe, None, Some(&path_var)), Choice::OnPath);
        let elsewhere = std::env::join_paths([root.join("nowhere")])?;
        assert_eq!(
            choose(&exe, None, Some(&elsewhere)),
            Choice::At(root.join("bin/turnback"))
        );
        // A link to another version is not this program's.
        let other = root.join("Cellar/turnback/0.2.0/bin/turnback");
        program(&other)?;
        assert_eq!(
            choose(&other, None, Some(&elsewhere)),
            Choice::OnPathUnverified { exe: other.clone() }
        );
        Ok(())
    }

    /// An npm install: the launcher names the shim; the hooks name
    /// `turnback` when that shim is first on PATH, else the shim.
    #[cfg(unix)]
    #[test]
    fn an_npm_program_is_named_by_its_shim() -> TestResult {
        let (_dir, root) = canonical_tempdir()?;
        let exe = root.join("lib/node_modules/turnback-linux-x64/bin/turnback");
        program(&exe)?;
        let launcher = root.join("lib/node_modules/turnback/bin/turnback.js");
        program(&launcher)?;
        std::fs::create_dir_all(root.join("bin"))?;
        let shim = root.join("bin/turnback");
        std::os::unix::fs::symlink("../lib/node_modules/turnback/bin/turnback.js", &shim)?;
        let path_var = std::env::join_paths([root.join("bin")])?;
        assert_eq!(choose(&exe, Some(&shim), Some(&path_var)), Choice::OnPath);
        let elsewhere = std::env::join_paths([root.join("nowhere")])?;
        assert_eq!(
            choose(&exe, Some(&shim), Some(&elsewhere)),
            Choice::At(shim.clone())
        );
        // Without the launcher (the binary run by its path), never the
        // node_modules path.
        assert_eq!(
            choose(&exe, None, Some(&elsewhere)),
            Choice::OnPathUnverified { exe: exe.clone() }
        );
        Ok(())
    }

    /// A program in a stable folder keeps being named by its path when
    /// PATH has another `turnback` first.
    #[cfg(unix)]
    #[test]
    fn a_program_in_a_stable_folder_is_named_by_its_path() -> TestResult {
        let (_dir, root) = canonical_tempdir()?;
        let exe = root.join("tools/turnback");
        program(&exe)?;
        let other = root.join("bin/turnback");
        program(&other)?;
        let path_var = std::env::join_paths([root.join("bin"), root.join("tools")])?;
        assert_eq!(choose(&exe, None, Some(&path_var)), Choice::At(exe.clone()));
        let path_var = std::env::join_paths([root.join("tools"), root.join("bin")])?;
        assert_eq!(choose(&exe, None, Some(&path_var)), Choice::OnPath);
        Ok(())
    }
}
