//! The real `git`, run for the demo without any of the user's settings: no
//! system or global configuration, hooks, global ignore or attributes file,
//! and a fixed author, committer and date, so every run builds the same
//! repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Settings given with `-c` on every call.
const CONFIG: &[&str] = &[
    "user.name=Demo User",
    "user.email=demo@turnback.invalid",
    "init.defaultBranch=main",
    "commit.gpgSign=false",
    "core.autocrlf=false",
    "core.fileMode=true",
    "core.hooksPath=/dev/null",
    "core.excludesFile=/dev/null",
    "core.attributesFile=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.detachedHead=false",
];

/// A fixed moment, so commit ids do not depend on the clock.
const DATE: &str = "2024-03-01T09:00:00+0000";

/// Runs git in one working tree.
pub struct Git {
    dir: PathBuf,
    home: PathBuf,
}

impl Git {
    /// Git for the working tree `dir`; `home` is an empty folder used as
    /// `HOME`, so no configuration of the user's can be found.
    pub fn new(dir: &Path, home: &Path) -> Git {
        Git {
            dir: dir.to_path_buf(),
            home: home.to_path_buf(),
        }
    }

    /// The same settings for another working tree.
    pub fn at(&self, dir: &Path) -> Git {
        Git::new(dir, &self.home)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Demo User")
            .env("GIT_AUTHOR_EMAIL", "demo@turnback.invalid")
            .env("GIT_AUTHOR_DATE", DATE)
            .env("GIT_COMMITTER_NAME", "Demo User")
            .env("GIT_COMMITTER_EMAIL", "demo@turnback.invalid")
            .env("GIT_COMMITTER_DATE", DATE)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C");
        for c in CONFIG {
            cmd.arg("-c").arg(c);
        }
        cmd.args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs `git ARGS` and returns its standard output; a failure names the
    /// command and carries git's message.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let shown = format!("git {}", args.join(" "));
        let out = self
            .command(args)
            .output()
            .map_err(|e| spawn_error(e, &shown))?;
        if !out.status.success() {
            bail!(
                "`{shown}` failed in {} ({}): {}",
                self.dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        String::from_utf8(out.stdout).with_context(|| format!("`{shown}` printed non-UTF-8 output"))
    }
}

fn spawn_error(e: std::io::Error, shown: &str) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        anyhow::anyhow!(
            "the demo compares turnback with git's own undo commands and needs the real `git`, \
             but none was found on PATH; install git (e.g. `apt-get install git` or \
             `brew install git`) and run `turnback demo` again"
        )
    } else {
        anyhow::Error::new(e).context(format!("cannot run `{shown}`"))
    }
}

/// The version of the `git` on PATH, or a clear error when there is none.
pub fn version(home: &Path) -> Result<String> {
    let out = Git::new(home, home).run(&["--version"])?;
    Ok(out
        .trim()
        .strip_prefix("git version ")
        .unwrap_or(out.trim())
        .to_owned())
}

/// Lines of `git` output, for checks.
pub fn lines(out: &str) -> Vec<&str> {
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}
