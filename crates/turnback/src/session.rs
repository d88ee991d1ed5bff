//! Agent sessions: `<store>/sessions/<key>.json`, one small file per agent
//! session (a Claude Code session id, say) naming the turn its writes go to,
//! so that separate hook processes agree on the current turn.
//!
//! Format: one JSON object, [`Session`]:
//!
//! ```text
//! {"key":"3f2a…","turn":"claude-3f2a9c1e-2","number":2,"prompt_id":"…","label":"fix the header","updated_at":1700000000000000000,
//!  "earlier":[{"prompt_id":"…","turn":"claude-3f2a9c1e-1","label":"add tests"}]}
//! ```
//!
//! `earlier` (absent when empty; older files have none) keeps the last 16
//! turns an earlier prompt id began, so a late tool call of an earlier
//! prompt joins its own turn.
//!
//! Invariants:
//! - The file name is the key itself when it is 1 to 100 characters of
//!   `[A-Za-z0-9_-]`, else `h-` and the first 32 hex digits of the SHA-256 of
//!   the key; the key is repeated inside, and a file whose key differs is
//!   treated as absent.
//! - A session file is replaced whole (temporary file in the same directory,
//!   fsync, rename, directory fsync), never edited in place, and only under
//!   the store lock; readers need no lock and see the old or the new file.
//! - The file only points at a turn: losing it loses no pre-image (the next
//!   event starts a new turn).

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::id::TurnId;
use crate::id::now_ns;
use crate::store::Store;
use crate::sys::fs::OFlags;

/// Name of the sessions directory inside the store.
pub const SESSIONS_DIR: &str = "sessions";

/// Session files larger than this are treated as damaged.
const MAX_SESSION_FILE: u64 = 64 << 10;

/// The current turn of one agent session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The session's key as the agent names it.
    pub key: String,
    /// The turn the session's writes go to now.
    pub turn: TurnId,
    /// How many turns the session has begun (1 for the first).
    pub number: u64,
    /// The agent's id for the prompt that began the turn, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_id: Option<String>,
    /// The turn's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Unix time (ns) of the last update (informational).
    pub updated_at: u64,
    /// The session's earlier turns that a prompt id began, newest last (at
    /// most [`EARLIER_KEPT`]): a tool call of an earlier prompt that is
    /// still running (a background subagent) joins its own turn, not the
    /// current one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<EarlierTurn>,
}

/// How many of a session's earlier prompts are remembered.
pub const EARLIER_KEPT: usize = 16;

/// A turn an earlier prompt of the session began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierTurn {
    /// The agent's id of that prompt.
    pub prompt_id: String,
    /// Its turn.
    pub turn: TurnId,
    /// Its label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl Session {
    /// The session as it is for a tool call of the earlier prompt
    /// `prompt_id`, if the session remembers it.
    pub fn for_earlier_prompt(&self, prompt_id: &str) -> Option<Session> {
        let e = self
            .earlier
            .iter()
            .rev()
            .find(|e| e.prompt_id == prompt_id)?;
        Some(Session {
            turn: e.turn.clone(),
            prompt_id: Some(e.prompt_id.clone()),
            label: e.label.clone(),
            earlier: Vec::new(),
            ..self.clone()
        })
    }

    /// The session's remembered turns once `self`'s current turn gives way
    /// to the next one.
    pub fn earlier_with_current(&self) -> Vec<EarlierTurn> {
        let mut earlier = self.earlier.clone();
        if let Some(prompt_id) = &self.prompt_id {
            earlier.retain(|e| &e.prompt_id != prompt_id);
            earlier.push(EarlierTurn {
                prompt_id: prompt_id.clone(),
                turn: self.turn.clone(),
                label: self.label.clone(),
            });
        }
        let extra = earlier.len().saturating_sub(EARLIER_KEPT);
        earlier.drain(..extra);
        earlier
    }
}

/// The file name for a session key.
pub fn session_file_name(key: &str) -> String {
    let plain = !key.is_empty()
        && key.len() <= 100
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        format!("{key}.json")
    } else {
        let digest = Sha256::digest(key.as_bytes());
        format!("h-{}.json", &hex::encode(digest)[..32])
    }
}

impl Store {
    /// The session `key`, if its file exists and is readable. A damaged or
    /// foreign file reads as `None` (it only points at a turn).
    pub fn session(&self, key: &str) -> Result<Option<Session>> {
        let Some(dirs) = &self.place.dirs else {
            return Ok(None);
        };
        let path = self.place.store_path.join(SESSIONS_DIR);
        let Some(dir) = fsx::open_subdir(&dirs.store, SESSIONS_DIR).ctx("open", &path)? else {
            return Ok(None);
        };
        let name = session_file_name(key);
        let shown = path.join(&name);
        let Some(file) =
            fsx::open_store_file(&dir, &name, OFlags::RDONLY, None).ctx("open", &shown)?
        else {
            return Ok(None);
        };
        if file.metadata().ctx("stat", &shown)?.len() > MAX_SESSION_FILE {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        file.take(MAX_SESSION_FILE)
            .read_to_end(&mut bytes)
            .ctx("read", &shown)?;
        Ok(serde_json::from_slice::<Session>(&bytes)
            .ok()
            .filter(|s| s.key == key))
    }

    /// Replaces the session `key` with what `update` makes of its current
    /// state, under the store lock (creating the store if needed), and
    /// returns the new state.
    pub fn update_session<F>(&mut self, key: &str, update: F) -> Result<Session>
    where
        F: FnOnce(Option<Session>) -> Result<Session>,
    {
        let _guard = self.begin_mutation()?;
        let current = self.session(key)?;
        let mut next = update(current)?;
        next.key = key.to_owned();
        next.updated_at = now_ns();
        let dirs = self
            .place
            .dirs
            .as_ref()
            .expect("begin_mutation opens the store directories");
        let path = self.place.store_path.join(SESSIONS_DIR);
        let (dir, created) = fsx::ensure_subdir(&dirs.store, SESSIONS_DIR).ctx("create", &path)?;
        if created {
            fsx::fsync(&dirs.store).ctx("fsync", &self.place.store_path)?;
        }
        let name = session_file_name(key);
        let shown = path.join(&name);
        let mut body = serde_json::to_vec(&next).expect("sessions always serialize");
        body.push(b'\n');
        let (mut f, tmp) = fsx::create_temp(&dir, &name, 0o644).ctx("create", &shown)?;
        let res = f
            .write_all(&body)
            .ctx("write", &shown)
            .and_then(|()| fsx::fdatasync(&f).ctx("fsync", &shown))
            .and_then(|()| fsx::rename(&dir, &tmp, &name).ctx("replace", &shown))
            .and_then(|()| fsx::fsync(&dir).ctx("fsync", &path));
        if res.is_err() {
            let _ = fsx::unlink(&dir, &tmp);
        }
        res.map(|()| next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn begin(number: u64) -> Session {
        Session {
            key: String::new(),
            turn: TurnId::new(format!("t{number}")).expect("valid"),
            number,
            prompt_id: None,
            label: None,
            updated_at: 0,
            earlier: Vec::new(),
        }
    }

    #[test]
    fn sessions_round_trip_between_store_handles() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let mut a = Store::open(tmp.path())?;
        assert_eq!(a.session("s1")?, None, "no store yet");
        let s = a.update_session("s1", |cur| {
            assert!(cur.is_none());
            Ok(begin(1))
        })?;
        assert_eq!(s.key, "s1");
        let b = Store::open(tmp.path())?;
        assert_eq!(b.session("s1")?, Some(s.clone()));
        assert_eq!(b.session("s2")?, None);
        let s2 = a.update_session("s1", |cur| Ok(begin(cur.map_or(1, |c| c.number + 1))))?;
        assert_eq!(s2.number, 2);
        assert_eq!(b.session("s1")?.map(|s| s.turn), Some(s2.turn));
        assert!(
            tmp.path().join(".turnback/.gitignore").exists(),
            "the store is created as a capture would"
        );
        Ok(())
    }

    #[test]
    fn odd_keys_get_hashed_file_names_and_damaged_files_read_as_absent() -> TestResult {
        assert_eq!(session_file_name("abc-1_2"), "abc-1_2.json");
        for odd in ["", "../x", "a/b", ".hidden", &"x".repeat(101)] {
            let n = session_file_name(odd);
            assert!(
                n.starts_with("h-") && n.len() == 2 + 32 + 5,
                "{odd:?} -> {n}"
            );
        }
        let tmp = tempfile::tempdir()?;
        let mut store = Store::open(tmp.path())?;
        store.update_session("../x", |_| Ok(begin(1)))?;
        assert_eq!(store.session("../x")?.map(|s| s.number), Some(1));
        let file = crate::location::store_dir_of(tmp.path())
            .join("sessions")
            .join(session_file_name("../x"));
        std::fs::write(&file, b"{not json")?;
        assert_eq!(store.session("../x")?, None);
        Ok(())
    }
}
