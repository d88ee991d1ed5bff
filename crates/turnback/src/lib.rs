//! turnback: a checkpoint store for AI coding agents.
//!
//! Before an agent's write reaches a file, the file's current bytes (its
//! pre-image) are saved in a content-addressed store outside the project,
//! in the user's data directory (`<store>` in the module docs; see
//! [`location`] for where and how a project finds it); [`Store::rewind`]
//! writes them back, undoing that turn
//! and every later one. Unlike `git checkout` or `git stash`, a rewind
//! returns the folder exactly as it was before the turn: uncommitted and
//! git-ignored files included, files the agent created deleted, nothing else
//! touched.
//!
//! ```
//! use turnback::{RewindOptions, Store, TurnId};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let project = tempfile::tempdir()?;
//! std::fs::write(project.path().join("app.js"), "console.log('v1');\n")?;
//!
//! let mut store = Store::open(project.path())?;
//! let turn = TurnId::new("turn-1")?;
//! // An agent's write tool: capture first, then write.
//! store.write(&turn, Some("rewrite app.js"), "app.js", b"broken();\n")?;
//! store.write(&turn, None, "new.js", b"created by the agent\n")?;
//!
//! let report = store.rewind(&turn, &RewindOptions::default())?;
//! assert!(report.complete());
//! assert_eq!(std::fs::read_to_string(project.path().join("app.js"))?, "console.log('v1');\n");
//! assert!(!project.path().join("new.js").exists());
//! # Ok(())
//! # }
//! ```
//!
//! The on-disk format is described module by module: [`log`] (the
//! append-only index), [`pack`] (the blobs), [`lock`] (the one lock for all
//! mutations), [`path`] (which paths may be stored), [`tree`] (the tree
//! state kept by snapshots, which cover what shell commands change: see
//! [`Store::snapshot`]), [`checkpoint`] (a cache of the index, so opening a
//! store reads only the end of its log).

#![deny(missing_docs)]

mod aside;
pub mod checkpoint;
pub mod command_notes;
pub mod config;
mod conflicts;
mod dirstack;
mod durable;
mod entry_pre;
mod error;
mod exclude;
mod exec_window;
pub mod fsmonitor;
mod fsx;
mod gc;
mod generated;
mod history;
mod id;
pub mod import;
mod index;
mod journal;
mod lift;
mod links;
pub mod location;
pub mod lock;
pub mod log;
mod maintain;
pub mod names;
mod ops;
pub mod pack;
mod par;
pub mod path;
pub mod repair;
mod restore;
mod rewind;
pub mod session;
mod snapshot;
mod sparse;
mod special;
mod store;
mod subtree_stat;
#[allow(unsafe_code)] // The platform layer: each block says why it is sound.
mod sys;
#[cfg(test)]
mod test_project;
pub mod time;
mod trash;
pub mod tree;
pub mod turn_ref;
pub mod verify;

pub use config::{Config, parse_size};
pub use error::{Error, PathProblem, Result};
pub use gc::{GcOptions, GcReport};
pub use history::{BlobReader, Left};
pub use id::{BadBlobId, BlobId, TurnId, cut_label};
pub use import::ImportReport;
pub use index::{Captured, Turn};
pub use links::LinkSplit;
pub use log::{FailedPath, FileEntry, Post, PostEntry, Pre};
pub use maintain::MaintainReport;
pub use path::RelPath;
pub use repair::{RepairReport, repair_root};
pub use rewind::{Action, Conflict, Note, Report, RevertOptions, RewindOptions, RewindPlan, Step};
pub use session::{EarlierTurn, Session};
pub use snapshot::{
    Baseline, CapturedSince, ChangeKind, Changes, DEFAULT_EXCLUDES, IGNORE_FILE, NoProgress,
    NotCaptured, NotCovered, Progress, Recorded, Renamed, ScanStats, SnapshotReport, Status,
};
pub use store::{
    CaptureReport, DEFAULT_MAX_FILE_SIZE, Options, Store, discover_root, never_a_root,
};
pub use verify::{VerifyReport, verify_root};

/// The README's Rust example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// What durability this process had, when it was less than turnback
/// promises (a macOS file system that refused `F_FULLFSYNC`, where a plain
/// `fsync` stood in: the writes reached the drive, whose own cache may
/// still lose them in a power cut). `None` when every flush was whole.
pub fn durability_note() -> Option<&'static str> {
    sys::durability_note()
}

/// Makes the entries of the directory at `path` durable (a file renamed or
/// removed in it), the way the store does its own: on Windows through a
/// directory handle (`FILE_FLAG_BACKUP_SEMANTICS`) flushed with write
/// access where the file system gives one, which `std::fs::File::open` of
/// a directory cannot open there ("Access denied").
pub fn sync_dir(path: &std::path::Path) -> std::io::Result<()> {
    fsx::fsync(&fsx::open_dir_path(path)?)
}
