//! The undo methods the demo compares, each applied to its own copy of the
//! folder as the agent's turn left it.

use std::path::Path;

use anyhow::Result;
use turnback::{RewindOptions, TurnId};

use super::git::Git;
use super::scenario::TURN;

/// One way of undoing the agent's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `turnback rewind TURN`.
    Turnback,
    /// `git checkout -- .`: tracked files back to the index.
    Checkout,
    /// `git stash -u`: tracked changes and untracked files put away.
    StashUntracked,
    /// `git checkout -- .` then `git clean -fd`: untracked files deleted too.
    CheckoutClean,
    /// `git stash create` before the turn, then `git checkout STASH -- .`.
    StashCreate,
}

impl Method {
    /// Every method, in the order the demo shows them.
    pub const ALL: [Method; 5] = [
        Method::Turnback,
        Method::Checkout,
        Method::StashUntracked,
        Method::CheckoutClean,
        Method::StashCreate,
    ];

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Method::Turnback => "turnback rewind",
            Method::Checkout => "git checkout -- .",
            Method::StashUntracked => "git stash -u",
            Method::CheckoutClean => "git checkout -- . && git clean -fd",
            Method::StashCreate => "git stash create + git checkout",
        }
    }

    /// The folder its copy goes in.
    pub fn folder(self) -> &'static str {
        match self {
            Method::Turnback => "turnback-rewind",
            Method::Checkout => "git-checkout",
            Method::StashUntracked => "git-stash-u",
            Method::CheckoutClean => "git-checkout-clean",
            Method::StashCreate => "git-stash-create",
        }
    }

    /// Whether the demo's story says it returns the folder exactly.
    pub fn expected_match(self) -> bool {
        self == Method::Turnback
    }

    /// The commands a user would type, `stash` being the commit
    /// `git stash create` printed before the turn.
    pub fn commands(self, stash: &str) -> Vec<String> {
        match self {
            Method::Turnback => vec![format!("turnback rewind {TURN}")],
            Method::Checkout => vec!["git checkout -- .".into()],
            Method::StashUntracked => vec!["git stash -u".into()],
            Method::CheckoutClean => vec!["git checkout -- .".into(), "git clean -fd".into()],
            Method::StashCreate => vec![
                "git stash create (before the turn)".into(),
                format!("git checkout {stash} -- ."),
            ],
        }
    }

    /// Undoes the turn in `dir` this way. Returns a note on what happened,
    /// when there is more to say than the comparison shows.
    pub fn apply(
        self,
        dir: &Path,
        git: &Git,
        stash: &str,
        stores: &super::Stores,
    ) -> Result<Option<String>> {
        let git = git.at(dir);
        match self {
            Method::Turnback => {
                let mut store = stores.open(dir)?;
                let report = store.rewind(&TurnId::new(TURN)?, &RewindOptions::default())?;
                let mut note = format!(
                    "restored {} file(s), deleted {}",
                    report.restored.len(),
                    report.deleted.len()
                );
                for f in &report.failed {
                    note.push_str(&format!("; could not restore {}: {}", f.path, f.reason));
                }
                return Ok(Some(note));
            }
            Method::Checkout => {
                git.run(&["checkout", "--", "."])?;
            }
            Method::StashUntracked => {
                git.run(&["stash", "-u"])?;
            }
            Method::CheckoutClean => {
                git.run(&["checkout", "--", "."])?;
                git.run(&["clean", "-fd"])?;
            }
            Method::StashCreate => {
                // The stash commit's tree is the tracked files as they were
                // before the turn; `git checkout STASH -- .` writes every
                // one of them over the agent's edits, without a merge (what
                // `git stash apply` would attempt, and refuse on a dirty
                // tree) and without touching untracked or ignored files.
                git.run(&["checkout", stash, "--", "."])?;
            }
        }
        Ok(None)
    }
}
