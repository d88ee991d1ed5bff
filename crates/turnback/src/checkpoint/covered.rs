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
    index: OnceLock<Option<Index>>,
}

impl Fallback {
    pub(super) fn new(log: Option<(File, u64)>) -> Fallback {
        Fallback {
            log,
            index: OnceLock::new(),
        }
    }

    /// The index the covered prefix gives, if it can be read and applied.
    pub(super) fn index(&self) -> Option<&Index> {
        self.index
            .get_or_init(|| {
                let (log, len) = self.log.as_ref()?;
                let bytes = read_at(log, 0, usize::try_from(*len).ok()?)?;
                let parsed = crate::log::parse(&bytes, 1);
                let mut index = Index::default();
                for (_, rec) in &parsed.lines {
                    index.apply(rec.as_ref().ok()?).ok()?;
                }
                Some(index)
            })
            .as_ref()
    }

    /// The same, where the caller cannot go on without it: a part of the
    /// checkpoint is damaged and the log it covers no longer gives it
    /// either (two faults at once), so the process stops rather than
    /// answer from part of an index.
    pub(super) fn needed(&self) -> &Index {
        self.index().expect(
            "a part of the index checkpoint is damaged and the log it covers no longer \
             gives it; delete <store>/index and run `turnback verify`",
        )
    }
}
