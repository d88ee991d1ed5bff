//! The open command windows: `<store>/windows`.
//!
//! A window is the time between a command's before half and its after half
//! (see [`crate::snapshot`]): any change the tree shows in that time may be
//! the command's. Several commands may run at once (an agent's subagents
//! and background shells share one folder), so the store keeps every open
//! window, not one pending mark.
//!
//! Format: one JSON document, replaced whole (temporary file, rename) under
//! the store lock, just before the tree state it goes with. A half that
//! leaves the tree file as it is (it found nothing changed) writes the same
//! document as the note of the tree's head instead (see [`crate::tree`]),
//! so it replaces one small file, not two; a head whose document goes with
//! the tree in place is read before this file. Like the tree head, neither
//! is synced: each is read only with the tree it names, and a lost or torn
//! one after a power cut falls back to the tree's own pending mark (below),
//! so a sync would only slow every snapshot half by two flushes:
//!
//! ```text
//! {"tree":{"stamp_ns":1700000000000000000,"log_seq":17,"pending":true,"turn":"tA"},
//!  "windows":[{"turn":"tA","pid":4242,"start_seq":17,"start_ns":1700000000000000000}]}
//! ```
//!
//! - `tree`: the header of the tree state (stamp, log sequence, pending
//!   mark, turn; see [`crate::tree`]) written right after this file, or
//!   with it in the head. The document is read only when the tree in place
//!   has that header: a crash between the two writes leaves the old tree
//!   with a newer windows file, which is then ignored, and the tree's own
//!   pending mark stands, exactly as before windows were kept. The head is
//!   removed before a new tree is renamed into place, so a head whose
//!   document goes with the tree in place is newer than the file.
//! - `turn`: the turn the command runs in.
//! - `pid`: the process that runs both halves (`turnback exec`), absent when
//!   the halves are separate processes (`turnback snapshot`, hooks). A
//!   window whose process is gone was killed before its after half.
//! - `session`: the agent session whose hook opened the window (its halves
//!   are separate processes), absent otherwise (older stores hold none).
//!   Such a window is closed by the next event of its own session, not by
//!   another session's before half (see [`crate::snapshot::attribution`]).
//! - `label`: the turn's label given to the before half, for a record
//!   another half appends to the turn (absent: none).
//! - `start_seq`: the last log sequence number when the window opened.
//! - `start_ns`: the before half's scan stamp (file-system clock).
//!
//! A missing file (a store from before windows were kept) or one that does
//! not go with the tree in place: the tree's pending mark stands for one
//! window without a process. A damaged file is reported and read the same
//! way.

use crate::sys::OwnedFd;
use std::io::Read;
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
    /// The agent session whose hook opened it (halves taken by separate
    /// hook processes), absent for `turnback exec` and `turnback snapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The turn's label as the before half was given it: a turn created by
    /// another half's record (a closed or shared window) keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
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

impl WindowsFile {
    /// Whether it goes with `tree`, the tree state in place.
    fn goes_with(&self, tree: Option<&Tree>) -> bool {
        tree.is_some_and(|t| {
            self.tree
                == TreeMark {
                    stamp_ns: t.stamp_ns,
                    log_seq: t.log_seq,
                    pending: t.pending,
                    turn: t.turn.clone(),
                }
        })
    }
}

/// The open windows: the tree head's, else the file's; `None` when neither
/// is there or goes with `tree`, the tree state in place.
pub(crate) fn load(
    store: &OwnedFd,
    store_path: &Path,
    tree: Option<&Tree>,
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<Window>>> {
    if let Some(note) = crate::tree::head_note(store) {
        match serde_json::from_slice::<WindowsFile>(&note) {
            Ok(f) if f.goes_with(tree) => return Ok(Some(f.windows)),
            Ok(_) => {}
            Err(e) => warnings.push(format!(
                "{}: its open command windows do not read ({e}); the windows file is used instead",
                store_path.join(crate::tree::HEAD_FILE).display()
            )),
        }
    }
    let shown = store_path.join(WINDOWS_FILE);
    let file = match fsx::open_file(store, WINDOWS_FILE) {
        Ok((f, fsx::Node::File { .. })) => f,
        Ok(_) => {
            warnings.push(format!(
                "{}: not a regular file; the tree state's pending mark is used instead",
                shown.display()
            ));
            return Ok(None);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open", &shown),
    };
    // Not synced: after a power cut it may hold anything, UTF-8 or not.
    let mut text = Vec::new();
    (&file)
        .take(16 << 20)
        .read_to_end(&mut text)
        .ctx("read", &shown)?;
    match serde_json::from_slice::<WindowsFile>(&text) {
        Ok(f) => Ok(f.goes_with(tree).then_some(f.windows)),
        Err(e) => {
            warnings.push(format!(
                "{}: {e}; the tree state's pending mark is used instead",
                shown.display()
            ));
            Ok(None)
        }
    }
}

/// The document of `windows` open with the tree header `tree`, for the
/// file or the tree head's note.
pub(crate) fn encode(store_path: &Path, tree: &TreeMark, windows: &[Window]) -> Result<Vec<u8>> {
    let doc = WindowsFile {
        tree: tree.clone(),
        windows: windows.to_vec(),
    };
    serde_json::to_vec(&doc)
        .map_err(std::io::Error::other)
        .ctx("encode", store_path.join(WINDOWS_FILE))
}

/// Replaces the file with `windows` (not synced; see the module docs).
pub(crate) fn save(
    store: &OwnedFd,
    store_path: &Path,
    tree: &TreeMark,
    windows: &[Window],
) -> Result<()> {
    let shown = store_path.join(WINDOWS_FILE);
    let bytes = encode(store_path, tree, windows)?;
    let (mut f, tmp) = fsx::create_temp(store, WINDOWS_FILE, 0o644).ctx("create", &shown)?;
    let res = std::io::Write::write_all(&mut f, &bytes)
        .and_then(|()| fsx::rename(store, &tmp, WINDOWS_FILE));
    if res.is_err() {
        let _ = fsx::unlink(store, &tmp);
    }
    res.ctx("replace", &shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_torn_or_foreign_windows_file_falls_back_with_a_warning() -> TestResult {
        let dir = tempfile::tempdir()?;
        let fd = fsx::open_dir_path(dir.path())?;
        // What a power cut can leave of an unsynced file: garbage bytes that
        // are not even UTF-8, or a file cut short.
        for bytes in [
            &b"\xff\xfe\x00garbage"[..],
            &b"{\"tree\":{\"stamp_ns\":1"[..],
        ] {
            std::fs::write(dir.path().join(WINDOWS_FILE), bytes)?;
            let mut warnings = Vec::new();
            let loaded = load(&fd, dir.path(), None, &mut warnings)?;
            assert!(loaded.is_none());
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(warnings[0].contains("pending mark"), "{warnings:?}");
        }
        Ok(())
    }
}
