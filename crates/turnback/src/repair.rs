//! Setting damaged log lines aside (`turnback repair`), so the turns they do
//! not touch can be rewound again.
//!
//! A log line other than a torn final one that fails its checksum, does not
//! decode or does not fit the records before it makes [`Store::open`]
//! refuse the store: what the line held cannot be known, so no index built
//! without it can be trusted silently. [`verify_root`] says which turns the
//! damage makes uncertain; repair is the explicit step that accepts it.
//!
//! Under the exclusive store lock, repair:
//! 1. applies the log leniently, exactly as verify does: every complete line
//!    that decodes, passes its checksum and fits the lines kept before it is
//!    kept byte for byte; the others, and a torn final line, are dropped;
//! 2. writes the whole original log, unchanged, to
//!    `<store>/log.damaged-<N>.jsonl` (N counts up from 1, never reused):
//!    temporary file, `fdatasync`, rename, fsync of `.turnback/`. Nothing
//!    the log held is deleted, and moving that file back over `log.jsonl`
//!    undoes the repair;
//! 3. marks the tree state for a recheck (`tree-recheck`, made durable
//!    with that copy): a dropped line may have introduced a blob the tree
//!    names, so the next scan looks up every blob it would trust by its
//!    stat (see [`crate::tree`]);
//! 4. writes the kept lines as the new `log.jsonl` the same way.
//!
//! A crash before the rename of step 4 leaves the original log (and perhaps
//! its copy); after it, the repaired one. Just before that rename the index
//! checkpoint is removed, as gc does, since it names the old log (see
//! [`crate::checkpoint`]); the next open reads the whole repaired log.
//! Repair never touches the project, packs or the tree state itself (only
//! the mark beside it). A log with no
//! damaged line is left as it is.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{IoResultExt, Result};
use crate::fsx::{self, Node};
use crate::id::TurnId;
use crate::lock;
use crate::log::LOG_FILE;
use crate::store::Options;
use crate::verify::{VerifyReport, apply_leniently, verify_root};

/// The prefix and suffix of a set-aside original log.
const DAMAGED_PREFIX: &str = "log.damaged-";
const DAMAGED_SUFFIX: &str = ".jsonl";

/// A log line repair drops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedLine {
    /// 1-based line number in the original log.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
    /// The turn its unverified bytes name, if any.
    pub turn_hint: Option<String>,
}

/// What [`repair_root`] did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    /// The project root (canonical).
    pub root: PathBuf,
    /// Whether the log was rewritten (false: nothing to repair, or a dry run).
    pub repaired: bool,
    /// Complete lines in the original log.
    #[serde(rename = "line_count_before")]
    pub lines_before: usize,
    /// Lines kept, byte for byte.
    #[serde(rename = "kept_line_count")]
    pub lines_kept: usize,
    /// Lines dropped (a torn final line is counted in `torn_tail`).
    pub dropped: Vec<DroppedLine>,
    /// A torn final line dropped: its line number and length in bytes.
    pub torn_tail: Option<(usize, usize)>,
    /// Where the original log was kept (when repaired).
    #[serde(rename = "original_log")]
    pub original_kept_at: Option<PathBuf>,
    /// The live turns verify found uncertain before the repair (their
    /// rewind may lack what the dropped lines held).
    pub uncertain_turns: Vec<TurnId>,
    /// The store as verify sees it after the repair (before it, on a dry
    /// run).
    pub verify: VerifyReport,
}

/// Sets the damaged lines of the log of the store at `root` aside (see the
/// module doc). With `dry_run`, only says what it would do.
pub fn repair_root(root: impl AsRef<Path>, dry_run: bool) -> Result<RepairReport> {
    let given = root.as_ref();
    let root = crate::sys::canonicalize(given).ctx("open project root", given)?;
    let before = verify_root(&root)?;
    let uncertain_turns: Vec<TurnId> = before
        .turns
        .iter()
        .filter(|t| !t.uncertain_lines.is_empty())
        .map(|t| t.turn.clone())
        .collect();
    let mut report = RepairReport {
        root: root.clone(),
        repaired: false,
        lines_before: 0,
        lines_kept: 0,
        dropped: Vec::new(),
        torn_tail: None,
        original_kept_at: None,
        uncertain_turns,
        verify: before,
    };
    let Some(located) = crate::location::locate(&root, None)? else {
        return Ok(report);
    };
    let store_path = located.store_dir;
    let store_fd = fsx::open_dir_path(&store_path).ctx("open", &store_path)?;
    // A dry run reads without the lock (verify above held it shared); it
    // must not create a lock file.
    let guard = if dry_run {
        None
    } else {
        Some(lock::acquire(
            &store_fd,
            &store_path,
            true,
            Options::default().lock_timeout,
        )?)
    };
    let log_path = store_path.join(LOG_FILE);
    let bytes = match fsx::node_at(&store_fd, LOG_FILE).ctx("open", &log_path)? {
        Node::Missing => return Ok(report),
        Node::File { .. } => {
            let (mut f, _) = fsx::open_file(&store_fd, LOG_FILE).ctx("open", &log_path)?;
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).ctx("read", &log_path)?;
            bytes
        }
        _ => {
            return Err(std::io::Error::other(
                "it is not a regular file; move it away by hand, repair rewrites only a log file",
            ))
            .ctx("repair", &log_path);
        }
    };
    let lenient = apply_leniently(&bytes);
    report.lines_before = lenient.lines;
    report.lines_kept = lenient.kept.len();
    report.torn_tail = lenient.torn;
    report.dropped = lenient
        .bad
        .into_iter()
        .map(|b| DroppedLine {
            line: b.line,
            reason: b.reason,
            turn_hint: b.turn_hint,
        })
        .collect();
    if report.dropped.is_empty() || dry_run {
        // A torn final line alone is no damage: the next mutation cuts it.
        return Ok(report);
    }
    let mut kept = Vec::with_capacity(bytes.len());
    for (_, range, _) in &lenient.kept {
        kept.extend_from_slice(&bytes[range.clone()]);
    }
    let name = next_damaged_name(&store_path)?;
    fsx::replace_file(&store_fd, &name, &bytes).ctx("write", store_path.join(&name))?;
    // A dropped line may have introduced a blob the tree state names: the
    // next scan looks every blob up (see `crate::tree`).
    crate::tree::mark_recheck(&store_fd, &store_path)?;
    fsx::fsync(&store_fd).ctx("fsync", &store_path)?;
    // The index checkpoint names the old log (see [`crate::checkpoint`]).
    crate::checkpoint::remove(&store_fd)
        .ctx("remove", store_path.join(crate::checkpoint::INDEX_FILE))?;
    fsx::replace_file(&store_fd, LOG_FILE, &kept).ctx("replace", &log_path)?;
    fsx::fsync(&store_fd).ctx("fsync", &store_path)?;
    drop(guard);
    report.repaired = true;
    report.original_kept_at = Some(store_path.join(name));
    report.verify = verify_root(&root)?;
    Ok(report)
}

/// `log.damaged-<N>.jsonl` with N one past the highest already there.
fn next_damaged_name(store_path: &Path) -> Result<String> {
    let mut highest = 0u64;
    for e in std::fs::read_dir(store_path).ctx("list", store_path)? {
        let e = e.ctx("list", store_path)?;
        if let Some(n) = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(DAMAGED_PREFIX))
            .and_then(|n| n.strip_suffix(DAMAGED_SUFFIX))
            .and_then(|n| n.parse::<u64>().ok())
        {
            highest = highest.max(n);
        }
    }
    Ok(format!("{DAMAGED_PREFIX}{}{DAMAGED_SUFFIX}", highest + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RewindOptions, Store};

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn t(s: &str) -> TurnId {
        TurnId::new(s).expect("valid turn id")
    }

    #[test]
    fn a_damaged_line_is_set_aside_the_original_kept_and_later_turns_rewind() -> TestResult {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "a0\n")?;
        std::fs::write(root.join("b.txt"), "b0\n")?;
        let mut store = Store::open(root)?;
        store.write(&t("t1"), None, "a.txt", b"a1\n")?;
        store.write(&t("t2"), Some("two"), "b.txt", b"b2\n")?;
        store.write(&t("t3"), None, "a.txt", b"a3\n")?;
        store.write(&t("t4"), None, "b.txt", b"b4\n")?;
        store.write(&t("t4"), None, "c.txt", b"c4\n")?;
        drop(store);
        let log_path = crate::location::store_dir_of(root).join(LOG_FILE);
        let good = std::fs::read(&log_path)?;
        // Damage t2's label (its line 2... find it by its bytes).
        let at = good
            .windows(5)
            .position(|w| w == b"\"two\"")
            .ok_or("label")?
            + 1;
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&log_path, &bad)?;
        assert!(Store::open(root).is_err(), "open refuses a damaged line");

        let dry = repair_root(root, true)?;
        assert!(!dry.repaired);
        assert_eq!(dry.dropped.len(), 1);
        assert_eq!(std::fs::read(&log_path)?, bad, "a dry run changes nothing");

        let r = repair_root(root, false)?;
        assert!(r.repaired);
        assert_eq!(r.dropped[0].turn_hint.as_deref(), Some("t2"));
        assert_eq!(r.lines_kept, r.lines_before - 1);
        let kept_at = r.original_kept_at.as_ref().ok_or("kept")?;
        assert_eq!(
            std::fs::read(kept_at)?,
            bad,
            "the original is kept as it was"
        );
        assert!(r.verify.whole, "{:#?}", r.verify);
        // t1 began before the line, t3 may have begun at it: uncertain.
        assert_eq!(r.uncertain_turns, [t("t1"), t("t3")]);

        // t4 rewinds exactly as it would have without the damage.
        let mut store = Store::open(root)?;
        let report = store.rewind(&t("t4"), &RewindOptions::default())?;
        assert!(report.complete());
        assert_eq!(std::fs::read(root.join("b.txt"))?, b"b2\n");
        assert_eq!(std::fs::read(root.join("a.txt"))?, b"a3\n");
        assert!(!root.join("c.txt").exists());

        // Nothing left to repair; a second repair changes nothing.
        let again = repair_root(root, false)?;
        assert!(!again.repaired && again.dropped.is_empty());
        // A later repair keeps its original under the next number.
        assert_eq!(
            next_damaged_name(&crate::location::store_dir_of(root))?,
            "log.damaged-2.jsonl"
        );
        Ok(())
    }
}
