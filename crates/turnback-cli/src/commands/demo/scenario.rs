//! The demo's story, built for real: a git repository holding a small site,
//! the user's uncommitted work on top of it, then an agent's turn recorded
//! through the turnback library (each file captured before it is written).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use turnback::TurnId;

use super::git::{self, Git};
use super::tree::Snapshot;

/// The agent's turn id.
pub const TURN: &str = "agent-turn-1";
/// Its label.
pub const LABEL: &str = "restyle the site with a dark theme";

/// What the comparison leaves out: git's and turnback's own stores.
pub const NOT_COMPARED: &[&str] = &[".git", ".turnback"];

const INDEX_HTML: &str = include_str!("site/index.html");
const STYLES_CSS: &str = include_str!("site/styles.css");
const APP_JS: &str = include_str!("site/app.js");
const DOT_ENV: &str = include_str!("site/env");
const GITIGNORE: &str = include_str!("site/gitignore");
const NOTES_MD: &str = include_str!("site/notes.md");
const AGENT_STYLES_CSS: &str = include_str!("site/agent/styles.css");
const AGENT_APP_JS: &str = include_str!("site/agent/app.js");
const THEME_CSS: &str = include_str!("site/agent/theme.css");

const TITLE: &str = "<title>Harbor Bakery</title>";
const USER_TITLE: &str = "<title>Harbor Bakery: fresh bread daily</title>";
const STYLES_LINK: &str = "  <link rel=\"stylesheet\" href=\"styles.css\">\n";
const THEME_LINK: &str = "  <link rel=\"stylesheet\" href=\"theme.css\">\n";
const API_URL: &str = "API_URL=https://api.harborbakery.example/v1";
const AGENT_API_URL: &str = "API_URL=http://localhost:8080";

/// The files committed in the repository.
pub const COMMITTED: &[&str] = &[".gitignore", "app.js", "index.html", "styles.css"];

/// The built scenario.
pub struct Built {
    /// The repository, as the agent's turn left it.
    pub site: PathBuf,
    /// The folder right after the commit (`.env` included).
    pub committed: Snapshot,
    /// The folder just before the agent's turn: what an undo must return.
    pub before: Snapshot,
    /// The folder as the agent's turn left it.
    pub after: Snapshot,
    /// The commit `git stash create` made just before the turn.
    pub stash: String,
}

/// Replaces the one occurrence of `from` in `text`.
fn edit(text: &str, from: &str, to: &str) -> Result<String> {
    ensure!(
        text.matches(from).count() == 1,
        "the demo's edit expects exactly one {from:?} in its file"
    );
    Ok(text.replacen(from, to, 1))
}

fn write(dir: &Path, rel: &str, contents: &str) -> Result<()> {
    let p = dir.join(rel);
    std::fs::write(&p, contents).with_context(|| format!("cannot write {}", p.display()))
}

fn read(dir: &Path, rel: &str) -> Result<String> {
    let p = dir.join(rel);
    std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))
}

/// Builds the scenario in the new folder `site`.
pub fn build(site: &Path, git: &Git, stores: &super::Stores) -> Result<Built> {
    std::fs::create_dir(site).with_context(|| format!("cannot create {}", site.display()))?;

    // The site as last committed; .env is git-ignored.
    for (rel, contents) in [
        ("index.html", INDEX_HTML),
        ("styles.css", STYLES_CSS),
        ("app.js", APP_JS),
        (".gitignore", GITIGNORE),
        (".env", DOT_ENV),
    ] {
        write(site, rel, contents)?;
    }
    git.run(&["init", "-q"])?;
    git.run(&["add", "-A"])?;
    git.run(&["commit", "-q", "-m", "Harbor Bakery site"])?;
    let tracked = git.run(&["ls-files"])?;
    ensure!(
        git::lines(&tracked) == COMMITTED,
        "git committed {:?}, not the expected {COMMITTED:?}",
        git::lines(&tracked)
    );
    let committed = Snapshot::take(site, NOT_COMPARED)?;

    // The user's work since the last commit.
    write(site, "index.html", &edit(INDEX_HTML, TITLE, USER_TITLE)?)?;
    write(site, "notes.md", NOTES_MD)?;

    // What a careful user might have saved before letting the agent work.
    let stash = git.run(&["stash", "create", "before the agent's turn"])?;
    let stash = stash.trim().to_owned();
    ensure!(
        !stash.is_empty(),
        "`git stash create` saw no change to save"
    );

    let before = Snapshot::take(site, NOT_COMPARED)?;

    // The agent's turn: every file is captured just before it is written.
    let turn = TurnId::new(TURN)?;
    let mut store = stores.open(site)?;
    let index = edit(
        &read(site, "index.html")?,
        STYLES_LINK,
        &(STYLES_LINK.to_owned() + THEME_LINK),
    )?;
    let env = edit(&read(site, ".env")?, API_URL, AGENT_API_URL)?;
    for (rel, contents) in [
        ("styles.css", AGENT_STYLES_CSS),
        ("index.html", index.as_str()),
        ("app.js", AGENT_APP_JS),
        (".env", env.as_str()),
        ("theme.css", THEME_CSS),
    ] {
        store.capture(&turn, Some(LABEL), site.join(rel))?;
        write(site, rel, contents)?;
    }
    let after = Snapshot::take(site, NOT_COMPARED)?;

    Ok(Built {
        site: site.to_path_buf(),
        committed,
        before,
        after,
        stash,
    })
}

/// Number of lines of a text file in a snapshot.
pub fn line_count(s: &Snapshot, rel: &str) -> usize {
    s.bytes(rel)
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_has_the_sizes_the_story_tells() {
        assert_eq!(STYLES_CSS.lines().count(), 212);
        assert_eq!(AGENT_STYLES_CSS.lines().count(), 41);
        assert_eq!(INDEX_HTML.matches(TITLE).count(), 1);
        assert_eq!(INDEX_HTML.matches(STYLES_LINK).count(), 1);
        assert_eq!(DOT_ENV.matches(API_URL).count(), 1);
        assert_eq!(GITIGNORE.lines().next(), Some(".env"));
        assert!(APP_JS != AGENT_APP_JS);
    }

    #[test]
    fn an_edit_needs_exactly_one_match() {
        assert_eq!(edit("a b a", "b", "c").ok().as_deref(), Some("a c a"));
        assert!(edit("a b a", "a", "c").is_err());
        assert!(edit("a b a", "z", "c").is_err());
    }
}
