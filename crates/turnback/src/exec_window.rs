//! The open command windows: `<store>/windows`.
//!
//! A window is the time between a command's before half and its after half
//! (see [`crate::snapshot`]): any change the tree shows in that time may be
//! the command's. Several commands may run at once (an agent's subagents
//! and background shells share one folder), so the store keeps every open
//! window, not one pending mark.
//!
//! Format: one JSON document, replaced whole (temporary file, `fdatasync`,
//! rename, fsync of the store directory) under the store lock, just before
//! the tree state it goes with:
//!
//! ```text
//! {"tree":{"stamp_ns":1700000000000000000,"log_seq":17,"pending":true,"turn":"tA"},
//!  "windows":[{"turn":"tA","pid":4242,"start_seq":17,"start_ns":1700000000000000000}]}
//! ```
//!
//! - `tree`: the header of the tree state (stamp, log sequence, pending
//!   mark, turn; see [`crate::tree`]) written right after this file. The
//!   file is read only when the tree in place has that header: a crash
//!   between the two writes leaves the old tree with a newer windows file,
//!   which is then ignored, and the tree's own pending mark stands, exactly
//!   as before windows were kept.
//! - `turn`: the turn the command runs in.
//! - `pid`: the process that runs both halves (`turnback exec`), absent when
//!   the halves are separate processes (`turnback snapshot`, hooks). A
//!   window whose process is gone was killed before its after half.
//! - `start_seq`: the last log sequence number when the window opened.
//! - `start_ns`: the before half's scan stamp (file-system clock).
//!
//! A missing file (a store from before windows were kept) or one that does
//! not go with the tree in place: the tree's pending mark stands for one
//! window without a process. A damaged file is reported and read the same
//! way.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::id::TurnId;
use crate::tree::Tree;

/// The file's name in the store directory.
pub const WINDOWS_FILE: &str = "windows";

/// One command between its two halves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// The command's turn.
    pub turn: TurnId,
    /// The process running both halves, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The last log sequence number when it opened.
    pub start_seq: u64,
    /// The before half's scan stamp (ns, file-system clock).
    pub start_ns: i64,
}

impl Window {
    /// Whether its process is known to be gone.
    pub(crate) fn dead(&self) -> bool {
        self.pid
            .is_some_and(|p| p != std::process::id() && !fsx::process_alive(p))
    }
}

/// The header of the tree state a windows file goes with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeMark {
    /// The tree's scan stamp.
    pub stamp_ns: i64,
    /// Its log sequence number.
    pub log_seq: u64,
    /// Its pending mark.
    pub pending: bool,
    /// Its turn.
    pub turn: TurnId,
}

#[derive(Serialize, Deserialize)]
struct WindowsFile {
    tree: TreeMark,
    windows: Vec<Window>,
}

/// The open windows; `None` when the file does not exist or does not go
/// with `tree`, the tree state in place.
pub(crate) fn load(
    store: &OwnedFd,
    store_path: &Path,
    tree: Option<&Tree>,
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<Window>>> {
    let shown = store_path.join(WINDOWS_FILE);
    let file = match fsx::open_file(store, WINDOWS_FILE) {
        Ok((f, _)) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open", &shown),
    };
    let mut text = String::new();
    (&file)
        .take(16 << 20)
        .read_to_string(&mut text)
        .ctx("read", &shown)?;
    match serde_json::from_str::<WindowsFile>(&text) {
        Ok(f) => {
            let goes_with = tree.is_some_and(|t| {
                f.tree
                    == TreeMark {
                        stamp_ns: t.stamp_ns,
                        log_seq: t.log_seq,
                        pending: t.pending,
                        turn: t.turn.clone(),
                    }
            });
            Ok(goes_with.then_some(f.windows))
        }
        Err(e) => {
            warnings.push(format!(
                "{}: {e}; the tree state's pending mark is used instead",
                shown.display()
            ));
            Ok(None)
        }
    }
}

/// Replaces the file with `windows`, durably.
pub(crate) fn save(
    store: &OwnedFd,
    store_path: &Path,
    tree: &TreeMark,
    windows: &[Window],
) -> Result<()> {
    let shown = store_path.join(WINDOWS_FILE);
    let doc = WindowsFile {
        tree: tree.clone(),
        windows: windows.to_vec(),
    };
    let bytes = serde_json::to_vec(&doc)
        .map_err(std::io::Error::other)
        .ctx("encode", &shown)?;
    fsx::replace_file(store, WINDOWS_FILE, &bytes).ctx("replace", &shown)?;
    fsx::fsync(store).ctx("sync", store_path)
}
