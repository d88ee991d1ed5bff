//! The log prefix a checkpoint covers: how the checkpoint names it
//! ([`Covered`], checked at every open), and the index that prefix gives
//! when a part of the checkpoint cannot be read back ([`Fallback`]).

use std::fs::File;
use std::sync::OnceLock;

use super::read_at;
use crate::index::Index;
use crate::pack;

/// Bytes at each end of the covered log prefix whose hash the checkpoint
/// keeps.
pub(super) const WINDOW: u64 = 4096;

/// The log a checkpoint covers: which file, how much of it, and what its
/// first and last [`WINDOW`] bytes of that prefix hash to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Covered {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) len: u64,
    pub(super) head: [u8; 32],
    pub(super) tail: [u8; 32],
}

impl Covered {
    /// What the first `len` bytes of `log` (the file `(dev, ino)`) are.
    pub(super) fn of(log: &File, (dev, ino): (u64, u64), len: u64) -> Option<Covered> {
        let window = |at: u64| -> Option<[u8; 32]> {
            let n = usize::try_from(len.min(WINDOW)).ok()?;
            Some(pack::hash_bytes(&read_at(log, at, n)?).0)
        };
        Some(Covered {
            dev,
            ino,
            len,
            head: window(0)?,
            tail: window(len - len.min(WINDOW))?,
        })
    }

    /// Names nothing (to compare two indexes by their bytes).
    pub(super) fn none(len: u64) -> Covered {
        Covered {
            dev: 0,
            ino: 0,
            len,
            head: [0; 32],
            tail: [0; 32],
        }
    }
}

/// The log prefix a checkpoint covers, kept open: a turn, a table block or
/// a blob row of the checkpoint that cannot be read back whole is taken
/// from the index this prefix gives, read and applied once, as an open
/// without a checkpoint does. So a damaged part of a checkpoint costs a
/// read of the log, never a wrong answer.
#[derive(Debug, Default)]
pub(super) struct Fallback {
    /// The log and the length of it covered (none: a checkpoint read
    /// alone, in tests).
    log: Option<(File, u64)>,
    index: OnceLock<Result<Index, String>>,
}

impl Fallback {
    pub(super) fn new(log: Option<(File, u64)>) -> Fallback {
        Fallback {
            log,
            index: OnceLock::new(),
        }
    }

    /// The index the covered prefix gives, or why it cannot be had (a
    /// line of it is damaged, or it cannot be read): a part of the
    /// checkpoint that is damaged and that the log no longer gives either
    /// (two faults at once) is an error, never an answer from part of an
    /// index.
    pub(super) fn index(&self) -> Result<&Index, &str> {
        self.index
            .get_or_init(|| self.read())
            .as_ref()
            .map_err(String::as_str)
    }

    fn read(&self) -> Result<Index, String> {
        let (log, len) = self
            .log
            .as_ref()
            .ok_or("the checkpoint was read without its log")?;
        let bytes = usize::try_from(*len)
            .ok()
            .and_then(|len| read_at(log, 0, len))
            .ok_or("the log cannot be read back")?;
        let parsed = crate::log::parse(&bytes, 1);
        let mut index = Index::default();
        for (line, rec) in &parsed.lines {
            let rec = rec
                .as_ref()
                .map_err(|reason| format!("line {line} of the log is damaged: {reason}"))?;
            index
                .apply(rec)
                .map_err(|e| format!("line {line} of the log is damaged: {e}"))?;
        }
        Ok(index)
    }

    /// [`Fallback::index`] where the caller has no error to give (a blob
    /// row): the process stops rather than answer from part of an index.
    pub(super) fn needed(&self) -> &Index {
        match self.index() {
            Ok(index) => index,
            Err(why) => panic!(
                "a part of the index checkpoint is damaged and the log it covers no longer \
                 gives it ({why}); delete <store>/index and run `turnback verify`"
            ),
        }
    }
}
