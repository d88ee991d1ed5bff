//! Typed errors of the library. Every error that concerns a file names it;
//! the messages say what to do next.

use std::io;
use std::path::PathBuf;

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation on a named path failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "create", "fsync", ...).
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A path given by the caller or found in the log is not acceptable.
    #[error(
        "refusing path {path:?}: {reason}; turnback records only paths inside the project root (set by --root or the nearest .turnback/), outside .git/ and the root's .turnback/"
    )]
    BadPath {
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: PathProblem,
    },
    /// A turn id or label is not acceptable.
    #[error("invalid turn id {id:?}: {reason}")]
    BadTurnId {
        /// The id as given.
        id: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A line of the log (other than a torn final one) cannot be read.
    #[error(
        "{}: line {line} is damaged ({reason}); run `turnback verify` to see what can still be rewound, then `turnback repair` to set the damaged lines aside (the original log is kept)",
        path.display()
    )]
    LogDamaged {
        /// The log file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A turn of the index checkpoint cannot be read back, and the log
    /// prefix the checkpoint covers, which answers for a damaged part of
    /// it, cannot give the turn either: two faults at once.
    #[error(
        "{turn} cannot be read: its part of the index checkpoint is damaged, and the log the checkpoint covers cannot give it either ({reason}); run `turnback verify` to see what is damaged and which turns can still be rewound, then `turnback repair` to set the damaged log lines aside (the original log is kept)"
    )]
    TurnUnreadable {
        /// The turn: its id when known, else its place among the
        /// checkpoint's turns.
        turn: String,
        /// Why the log cannot give it.
        reason: String,
    },
    /// No live turn has this id.
    #[error("unknown turn {turn:?}; `turnback log` shows the turns and their ids")]
    UnknownTurn {
        /// The turn asked for.
        turn: String,
    },
    /// A turn reference (see [`crate::turn_ref`]) names no live turn.
    #[error("unknown turn {given:?}: {reason}; `turnback log` shows the turns and their ids")]
    NoSuchTurn {
        /// The reference as given.
        given: String,
        /// Why nothing matches.
        reason: String,
    },
    /// A prefix given as a turn reference begins the ids of several live
    /// turns.
    #[error(
        "{given:?} is ambiguous: it begins the ids of {count} turns ({}{}); give more of the id (`turnback log` marks the shortest unique part)",
        candidates.join(", "),
        if *count > candidates.len() { ", ..." } else { "" }
    )]
    AmbiguousTurn {
        /// The prefix as given.
        given: String,
        /// How many live turns it begins.
        count: usize,
        /// Their ids, newest first (at most ten).
        candidates: Vec<String>,
    },
    /// The turn existed but has already been rewound.
    #[error(
        "nothing to rewind: turn {turn:?} was already rewound or reverted (log record {seq}); `turnback undo` reverses that"
    )]
    AlreadyRewound {
        /// The turn asked for.
        turn: String,
        /// Sequence number of the rewind record that removed it.
        seq: u64,
    },
    /// Another process holds the store lock for longer than we wait.
    #[error(
        "{} is held by another turnback process; it is released when that process ends (no file needs to be removed by hand)",
        path.display()
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A blob referenced by the log is missing, fails to decompress or does
    /// not match its name.
    #[error("blob {id} is damaged: {reason}")]
    BlobDamaged {
        /// The blob id (SHA-256 of the original bytes).
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Writing a blob's bytes out failed (a full disk where a rewind
    /// restores a file, say): the blob itself is not known to be damaged.
    #[error("cannot write the bytes of blob {id}: {source}")]
    BlobWrite {
        /// The blob id.
        id: String,
        /// The error of the write.
        #[source]
        source: io::Error,
    },
    /// An environment variable turnback reads holds a value it does not take.
    #[error("the environment variable {name} is {value:?}: {reason}")]
    BadEnv {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        reason: String,
    },
    /// The store's config file cannot be read.
    #[error("{}: {reason}; fix or delete the file (the defaults apply without it)", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `undo` with no rewind in effect, or `redo` with nothing undone.
    #[error("nothing to {what}: {why}")]
    NothingTo {
        /// "undo" or "redo".
        what: &'static str,
        /// Why.
        why: &'static str,
    },
    /// A path named to limit a rewind or revert that none of its turns
    /// changed.
    #[error(
        "{path}: {by} did not change it, so there is nothing to take back there; `turnback show {turn}` lists what {by} changed"
    )]
    PathNotChanged {
        /// The path, relative to the root.
        path: String,
        /// The turn named.
        turn: crate::id::TurnId,
        /// "turn T and the turns after it", or "turn T".
        by: String,
    },
    /// `snapshot --after` found no earlier snapshot to compare with.
    #[error(
        "no snapshot of {} to compare with: run `turnback snapshot --turn T` before the command, or run it with `turnback exec`",
        root.display()
    )]
    NoSnapshot {
        /// The project root.
        root: PathBuf,
    },
    /// No data directory could be found for the store.
    #[error(
        "cannot tell where to keep turnback's store: no per-user data directory is known (HOME is not set?); set TURNBACK_DATA_DIR to a directory outside the project, or keep the store in the project with `turnback store --in-project`"
    )]
    NoDataDir,
    /// `TURNBACK_DATA_DIR` is a relative path.
    #[error(
        "TURNBACK_DATA_DIR is {}, a relative path; set it to an absolute one (turnback runs from many directories, and each would find another store)",
        given.display()
    )]
    RelativeDataDir {
        /// The value given.
        given: PathBuf,
    },
    /// The folder found for a command is one turnback never takes as a
    /// project root unless it is named with `--root`.
    #[error(
        "{} is {reason}: turnback does not make or use a store for it unless you name it with --root. Run turnback in your project's folder (or `cd` into it first), or pass --root {} if this folder really is the project",
        path.display(), path.display()
    )]
    NotARoot {
        /// The folder.
        path: PathBuf,
        /// What it is.
        reason: &'static str,
    },
    /// The store a project's marker or registry entry names is gone.
    #[error(
        "the store of {} is gone: {} (named by {}) does not exist, so the turns it held cannot be rewound here. If turnback ran with another home directory or TURNBACK_DATA_DIR when the store was made, run it with that one again; if the store was deleted, `turnback store --forget` forgets it and the next capture starts a new, empty store. The project's files are untouched",
        root.display(), store_dir.display(), named_by.display()
    )]
    StoreGone {
        /// The project root.
        root: PathBuf,
        /// Where the store was.
        store_dir: PathBuf,
        /// The marker or registry entry that names it.
        named_by: PathBuf,
    },
    /// The marker or a registry entry cannot be read.
    #[error(
        "{}: {reason}; fix or remove it (without the marker, the store is found through the registry of the data directory)",
        path.display()
    )]
    BadMarker {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The path names something that cannot be captured as a file.
    #[error("{path:?} is a directory; capture the files in it instead")]
    IsDirectory {
        /// The path.
        path: String,
    },
}

/// Why a path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathProblem {
    /// The path is empty.
    #[error("the path is empty")]
    Empty,
    /// The path (after resolving `..` and symlinks) lies outside the project root.
    #[error("it lies outside the project root")]
    OutsideRoot,
    /// The path lies inside the store itself.
    #[error(
        "it lies inside turnback's own directory (the root's .turnback/, or the store's directory)"
    )]
    InsideStore,
    /// The path lies inside a `.git` directory.
    #[error("it lies inside .git/, which turnback never touches")]
    InsideGit,
    /// The path contains a NUL byte.
    #[error("it contains a NUL byte")]
    Nul,
    /// The path contains a backslash.
    #[error("it contains a backslash; use / as the separator")]
    Backslash,
    /// A stored path is not in normal form (absolute, `.`/`..`/empty components).
    #[error("it is not a normalized relative path")]
    NotNormal,
    /// The path is not valid UTF-8.
    #[error("it is not valid UTF-8")]
    NotUtf8,
    /// The path or one of its components is too long.
    #[error("it is too long")]
    TooLong,
    /// Resolving symlinks took too many steps.
    #[error("it goes through too many symlinks")]
    SymlinkLoop,
    /// A name this platform's file system cannot hold (see
    /// [`crate::names::windows_problem`]).
    #[error("Windows cannot hold this name: {0}")]
    NotOnWindows(&'static str),
}

/// Adds path context to `io::Result`s.
pub(crate) trait IoResultExt<T> {
    /// Wraps the error with the operation and path it concerns.
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoResultExt<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            op,
            path: path.into(),
            source,
        })
    }
}

impl<T> IoResultExt<T> for std::result::Result<T, crate::sys::Errno> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(io::Error::from).ctx(op, path)
    }
}
