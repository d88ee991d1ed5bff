//! The shell commands turns ran: `<store>/commands.jsonl`, so that
//! `turnback log` can say what each turn ran, not only what it changed.
//!
//! Format: one JSON object a line, appended, in the order the commands
//! began:
//!
//! ```text
//! {"turn":"claude-8c35adc1-3","seq":17,"turn_seq":12,"at":1700000000000000000,"command":"cargo test"}
//! ```
//!
//! - `turn`: the turn the command ran in; `seq`: the log's last sequence
//!   number when its before half was taken; `turn_seq`: the first record
//!   of that turn, when it had begun by then. Turn ids may repeat (a turn
//!   rewound, then a new one of the same id), so a note belongs to the turn
//!   whose first record is `turn_seq`, or without one to the first turn of
//!   its id begun after `seq` (a command's own after half begins its turn
//!   when nothing did before): see [`by_turn`].
//! - `at`: Unix time in nanoseconds; `command`: the command line as the
//!   agent gave it (`turnback exec`: its words, quoted for a POSIX shell),
//!   cut to [`MAX_COMMAND`] characters.
//!
//! A description, never a pre-image: it lies outside the log, so records
//! older binaries read stay as they were. A line is appended in one write
//! to an `O_APPEND` descriptor and not synced (like the windows file, a
//! line lost in a power cut loses a description, nothing a rewind needs);
//! a torn or damaged line is passed over when read. gc does not trim it:
//! a note of a turn gc dropped is never shown, and a note is some 100
//! bytes.

use std::collections::HashMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::id::{TurnId, now_ns};
use crate::index::Turn;
use crate::store::Store;
use crate::sys::fs::OFlags;

/// The file's name in the store directory.
pub const COMMANDS_FILE: &str = "commands.jsonl";

/// The longest command kept, in characters.
pub const MAX_COMMAND: usize = 1000;

/// A shell command a turn ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandNote {
    /// The turn it ran in.
    pub turn: TurnId,
    /// The log's last sequence number when it began.
    pub seq: u64,
    /// The first record of its turn, when the turn had begun by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_seq: Option<u64>,
    /// When it began (Unix time, ns).
    pub at: u64,
    /// The command line.
    pub command: String,
}

impl Store {
    /// Notes that `turn` runs `command` (call it once the command's before
    /// half is taken, which makes the store). Does nothing in a project
    /// without a store.
    pub fn note_command(&self, turn: &TurnId, command: &str) -> Result<()> {
        let Some(dirs) = &self.place.dirs else {
            return Ok(());
        };
        let note = CommandNote {
            turn: turn.clone(),
            seq: self.index.last_seq,
            turn_seq: self.index.turn(turn)?.map(|t| t.first_seq),
            at: now_ns(),
            command: command.chars().take(MAX_COMMAND).collect(),
        };
        let path = self.place.store_path.join(COMMANDS_FILE);
        let mut f = fsx::open_store_file(
            &dirs.store,
            COMMANDS_FILE,
            OFlags::RDWR | OFlags::APPEND,
            Some(0o644),
        )
        .ctx("open", &path)?
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        .ctx("open", &path)?;
        // A torn last line (a crash mid-append) is ended first, so this
        // note stays a line of its own.
        let len = f.metadata().ctx("look at", &path)?.len();
        let mut last = [b'\n'];
        if len > 0 {
            crate::sys::read_exact_at(&f, &mut last, len - 1).ctx("read", &path)?;
        }
        let mut line = if last[0] == b'\n' {
            Vec::new()
        } else {
            vec![b'\n']
        };
        serde_json::to_writer(&mut line, &note)
            .map_err(std::io::Error::other)
            .ctx("encode a line of", &path)?;
        line.push(b'\n');
        f.write_all(&line).ctx("append to", &path)
    }

    /// Every command noted, oldest first (damaged lines passed over).
    pub fn command_notes(&self) -> Result<Vec<CommandNote>> {
        let Some(dirs) = &self.place.dirs else {
            return Ok(Vec::new());
        };
        let path = self.place.store_path.join(COMMANDS_FILE);
        let Some(bytes) = fsx::read_store_file(&dirs.store, COMMANDS_FILE).ctx("read", &path)?
        else {
            return Ok(Vec::new());
        };
        Ok(bytes
            .split(|&b| b == b'\n')
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect())
    }
}

/// The commands of each of `turns` (by `first_seq`), in the order they
/// ran: a note goes to the turn whose first record is its `turn_seq`, or
/// without one to the first turn of its id begun after its `seq`, among
/// `turns` (give every turn of the ids concerned for an exact answer); a
/// note of a turn not among `turns` is left out.
pub fn by_turn<'a>(notes: &'a [CommandNote], turns: &[&Turn]) -> HashMap<u64, Vec<&'a str>> {
    let mut by_id: HashMap<&str, Vec<u64>> = HashMap::new();
    for t in turns {
        by_id.entry(t.id.as_str()).or_default().push(t.first_seq);
    }
    for list in by_id.values_mut() {
        list.sort_unstable();
    }
    let mut out: HashMap<u64, Vec<&str>> = HashMap::new();
    for n in notes {
        let Some(firsts) = by_id.get(n.turn.as_str()) else {
            continue;
        };
        let first = match n.turn_seq {
            Some(s) => firsts.binary_search(&s).ok().map(|_| s),
            None => firsts.iter().copied().find(|&f| f > n.seq),
        };
        if let Some(first) = first {
            out.entry(first).or_default().push(&n.command);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn turn(id: &str, first_seq: u64, ended_by: Option<u64>) -> Turn {
        Turn {
            id: TurnId::new(id).expect("valid"),
            label: None,
            first_seq,
            started_at: 0,
            files: Vec::new(),
            posts: Default::default(),
            sealed: false,
            ended_by,
            by_path: Vec::new(),
        }
    }

    fn note(id: &str, seq: u64, turn_seq: Option<u64>, command: &str) -> CommandNote {
        CommandNote {
            turn: TurnId::new(id).expect("valid"),
            seq,
            turn_seq,
            at: 0,
            command: command.into(),
        }
    }

    #[test]
    fn a_note_goes_to_its_turn_even_when_ids_repeat() {
        // t1 began at 1 and was rewound at 5; a new t1 began at 8.
        let (old, new, other) = (
            turn("t1", 1, Some(5)),
            turn("t1", 8, None),
            turn("t2", 3, None),
        );
        let turns = [&old, &new, &other];
        let notes = [
            note("t1", 2, Some(1), "make"),
            // No t1 was live: the command's own after half began the new one.
            note("t1", 6, None, "npm test"),
            note("t1", 9, Some(8), "ls"),
            note("t2", 3, Some(3), "cargo build"),
            note("gone", 4, None, "rm -rf x"),
            note("t1", 9, Some(7), "of a turn not given"),
        ];
        let got = by_turn(&notes, &turns);
        assert_eq!(got[&1], ["make"]);
        assert_eq!(got[&8], ["npm test", "ls"]);
        assert_eq!(got[&3], ["cargo build"]);
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn notes_are_appended_and_read_back_past_a_torn_line() -> TestResult {
        let project = crate::test_project::Beside::new(&[])?;
        let mut store = project.open()?;
        let t = TurnId::new("t1")?;
        // No store yet: nothing is noted, nothing is made.
        store.note_command(&t, "true")?;
        assert!(store.command_notes()?.is_empty());
        store.write(&t, None, "a.txt", b"x")?;
        store.note_command(&t, "cargo test")?;
        let long = "x".repeat(MAX_COMMAND + 10);
        store.note_command(&t, &long)?;
        let file = store.store_dir().join(COMMANDS_FILE);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)?
            .write_all(b"{\"turn\":\"t1\",\"se")?;
        store.note_command(&t, "ls")?;
        let notes = store.command_notes()?;
        assert_eq!(notes.len(), 3);
        assert_eq!(notes[2].command, "ls");
        assert_eq!(notes[0].command, "cargo test");
        assert_eq!((notes[0].seq, notes[0].turn_seq), (1, Some(1)));
        assert_eq!(notes[1].command.chars().count(), MAX_COMMAND);
        Ok(())
    }
}
