//! Verification of a store (`turnback verify`): a read-only check of
//! everything a rewind relies on, which says what is damaged, by turn and
//! path, and which turns can still be rewound whole.
//!
//! What is checked:
//! - Every line of `log.jsonl` decodes, passes its CRC (see [`crate::log`])
//!   and fits the records before it (the store's own rules, so verify and
//!   [`Store::open`] never disagree). Paths are parsed as [`RelPath`]s while
//!   a line decodes, so a line naming `../x` or `/etc/passwd` is a damaged
//!   line. A damaged line is named by its number, with the turn it appears
//!   to belong to (read from its unverified bytes, so only a hint).
//! - The index checkpoint, when one names the log (which every open then
//!   trusts without reading the lines it covers; see [`crate::checkpoint`]):
//!   it must hold exactly the index those lines give. One that does not is
//!   damage to delete (it is a cache).
//! - Every blob the log stores: its pack is a regular file (not a symlink,
//!   even one pointing at identical bytes elsewhere; not a directory, FIFO,
//!   socket or device), and its frame decompresses to the recorded size and
//!   hashes to its id.
//! - Per live turn `T`: whether `rewind T` would restore every path, that
//!   is, whether every pre-image its plan uses (the oldest one per path among
//!   `T` and the turns after it) is readable and was saved at capture, and
//!   whether every record from `T`'s first line on is readable.
//!
//! Damage (the store is not whole; `turnback verify` exits 1):
//! - a damaged log line other than a torn final one; the store directory,
//!   `packs/`, the log or the lock being something other than a directory or
//!   regular file; a missing or non-regular pack; a blob that does not
//!   decompress or hash to its id;
//! - more than one pack numbered after the last record: an interrupted
//!   capture leaves at most one (the next capture reuses its number), so the
//!   log has lost records.
//!
//! Warnings (the store is whole; they are reported):
//! - a torn final line: the normal trace of a crash mid-append, never
//!   acknowledged, cut off by the next mutation; if the log was truncated by
//!   hand instead, the records after it are lost, and the warning says so;
//! - a pack that no record names (left by an interrupted capture), a
//!   temporary file (swept by the next mutation), a file with an unknown name;
//! - a pack with more than one hard link. Its bytes are checked and intact,
//!   and every read re-hashes them, so wrong bytes can never reach the
//!   project; but another name shares its inode, so the store can no longer
//!   promise it stays immutable. Hard links appear legitimately (`cp -al`
//!   backups, deduplicating tools), so this is not counted as damage.
//!
//! Which turns a damaged log line makes uncertain: the line at number `N`
//! may have held a capture of any turn begun before it (so `rewind T` for
//! every `T` begun before `N` may lack pre-images), the first capture of a
//! new turn, or a rewind that already ended turns begun before it. So every
//! live turn whose first line is before `N` is not rewindable whole. When the
//! damaged line appears to belong to a live turn first seen after `N`, that
//! turn may really have begun at `N`, and every turn begun up to it is
//! uncertain too; when it names no such turn (the hint is read from damaged
//! bytes, so a flipped character may name another turn, or none), the first
//! turn begun after `N` is uncertain, as it may have begun at `N`. Turns
//! begun after that are otherwise unaffected.
//!
//! Invariants: verify writes nothing. It creates no directory, no lock file
//! and no log; it opens files read-only, never through a symlink, and never
//! opens a FIFO or a device. It parses the log leniently with
//! [`log::parse`] and applies what it can, so a store that [`Store::open`]
//! refuses can still be checked. It holds the store lock shared, when the
//! lock file exists, so it sees no half-appended record and no pack being
//! removed.

use crate::sys::OwnedFd;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use crate::checkpoint;
use crate::error::{Error, IoResultExt, Result};
use crate::fsx::{self, Node};
use crate::id::{BlobId, TurnId};
use crate::index::Index;
use crate::lock::{self, Existing};
use crate::log::{self, LOG_FILE, Op, Pre};
use crate::pack::{self, BlobLoc};
use crate::path::{RelPath, STORE_DIR};
use crate::store::{Options, PACKS_DIR, Store};

/// What [`verify_root`] found.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// The project root (canonical).
    pub root: PathBuf,
    /// The store's directory (see [`crate::location`]).
    pub store_dir: PathBuf,
    /// Whether the project has a store at all.
    pub store_found: bool,
    /// Whether nothing is damaged (warnings aside).
    pub whole: bool,
    /// Complete lines in the log.
    #[serde(rename = "log_line_count")]
    pub log_lines: usize,
    /// Records that decoded and fit the log.
    #[serde(rename = "record_count")]
    pub records: usize,
    /// Sequence number of the last such record.
    pub last_seq: u64,
    /// Packs whose blobs were checked.
    #[serde(rename = "checked_pack_count")]
    pub packs_checked: usize,
    /// Blobs decompressed and re-hashed.
    #[serde(rename = "checked_blob_count")]
    pub blobs_checked: usize,
    /// Everything damaged.
    pub damage: Vec<Damage>,
    /// Things worth knowing that are not damage.
    pub warnings: Vec<Warning>,
    /// Every live turn, oldest first, with whether it can be rewound whole.
    pub turns: Vec<TurnCheck>,
}

impl VerifyReport {
    /// The live turns that `rewind` would restore completely.
    pub fn rewindable(&self) -> impl Iterator<Item = &TurnId> {
        self.turns.iter().filter(|t| t.rewindable).map(|t| &t.turn)
    }
}

/// One piece of damage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Damage {
    /// A file or directory of the store itself is not what it must be.
    Store {
        /// The path (`store_file` in JSON: a file of the store, not of
        /// the project).
        #[serde(rename = "store_file")]
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A log line (not a torn final one) cannot be used.
    LogLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
        /// The turn its unverified bytes name, if any.
        turn_hint: Option<String>,
    },
    /// A pack cannot be read at all (or its header is damaged).
    Pack {
        /// The pack's file name.
        pack: String,
        /// What is wrong.
        reason: String,
        /// Blobs of the log in it, now unreadable (0 for a damaged header
        /// whose frames still verify).
        #[serde(rename = "unreadable_blob_count")]
        unreadable_blobs: usize,
        /// The captured paths whose pre-images those blobs hold.
        uses: Vec<BlobUse>,
    },
    /// One blob does not decompress to its recorded size or hash.
    Blob {
        /// The blob's id.
        blob: BlobId,
        /// Its pack.
        pack: String,
        /// Offset of its frame.
        offset: u64,
        /// What is wrong.
        reason: String,
        /// The captured paths whose pre-image it is.
        uses: Vec<BlobUse>,
    },
    /// Packs numbered after the last record: the log lost its end.
    LostRecords {
        /// The packs.
        packs: Vec<String>,
        /// The last record's sequence number.
        last_seq: u64,
    },
}

/// One captured path whose pre-image is a given blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlobUse {
    /// The turn that captured it.
    pub turn: TurnId,
    /// The path.
    pub path: RelPath,
    /// Whether that turn is live (not yet rewound).
    pub live: bool,
}

/// Something worth knowing that is not damage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Warning {
    /// The log ends in a line without newline.
    TornTail {
        /// Its line number.
        line: usize,
        /// Its length in bytes.
        bytes: usize,
        /// The turn its bytes name, if any.
        turn_hint: Option<String>,
    },
    /// The store has no log (no record was ever written).
    NoLog,
    /// A pack no record names.
    UnreferencedPack {
        /// Its file name.
        pack: String,
    },
    /// A temporary file left by an interrupted process.
    TemporaryFile {
        /// Its file name in `packs/`.
        name: String,
    },
    /// A file in `packs/` that turnback did not write.
    UnexpectedFile {
        /// Its file name.
        name: String,
    },
    /// A pack that shares its inode with other names.
    HardLinkedPack {
        /// Its file name.
        pack: String,
        /// Its link count.
        #[serde(rename = "link_count")]
        links: u64,
    },
}

/// Whether one live turn can be rewound whole.
#[derive(Debug, Clone, Serialize)]
pub struct TurnCheck {
    /// The turn.
    pub turn: TurnId,
    /// Its label.
    pub label: Option<String>,
    /// Sequence number of its first record.
    pub first_seq: u64,
    /// Line of its first record.
    pub line: usize,
    /// Paths it captured.
    #[serde(rename = "file_count")]
    pub files: usize,
    /// Whether `rewind` of it would restore every path.
    pub rewindable: bool,
    /// Paths the rewind needs whose pre-image cannot be read.
    pub damaged: Vec<PathIssue>,
    /// Paths whose pre-image was not saved at capture (too large, a FIFO).
    pub not_saved: Vec<PathIssue>,
    /// Damaged log lines that may hold records this rewind depends on.
    pub uncertain_lines: Vec<usize>,
}

/// A path a rewind cannot restore, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathIssue {
    /// The path.
    pub path: RelPath,
    /// The turn whose pre-image the rewind would use.
    pub captured_in: TurnId,
    /// Why it cannot be restored.
    pub reason: String,
}

impl Store {
    /// Checks this store (see [`verify_root`]).
    pub fn verify(&self) -> Result<VerifyReport> {
        verify_in(self.root(), self.options().data_dir.as_deref())
    }
}

/// Checks the store of the project at `root` without writing anything. It
/// does not need [`Store::open`] to succeed: a damaged log is parsed
/// leniently. `Err` only when the root cannot be opened, a file cannot be
/// read at all (permissions), or another process holds the lock too long.
pub fn verify_root(root: impl AsRef<Path>) -> Result<VerifyReport> {
    verify_in(root.as_ref(), None)
}

/// [`verify_root`] with the store's data directory (`None`: the default).
fn verify_in(given: &Path, data_dir: Option<&Path>) -> Result<VerifyReport> {
    let root = crate::sys::canonicalize(given).ctx("open project root", given)?;
    let located = crate::location::locate(&root, data_dir)?;
    let store_path = located
        .as_ref()
        .map_or_else(|| root.join(STORE_DIR), |l| l.store_dir.clone());
    let mut report = VerifyReport {
        root,
        store_dir: store_path.clone(),
        store_found: false,
        whole: false,
        log_lines: 0,
        records: 0,
        last_seq: 0,
        packs_checked: 0,
        blobs_checked: 0,
        damage: Vec::new(),
        warnings: Vec::new(),
        turns: Vec::new(),
    };
    let store_fd = match crate::location::open_store_dir(&store_path) {
        _ if located.is_none() => None,
        Ok(fd) => fd,
        Err(e) => {
            report.store_found = true;
            report.damage.push(Damage::Store {
                path: store_path.clone(),
                reason: format!("it cannot be opened as a directory: {e}"),
            });
            None
        }
    };
    if let Some(store_fd) = store_fd {
        report.store_found = true;
        check_store(&mut report, &store_fd, &store_path)?;
    }
    report.whole = report.damage.is_empty();
    Ok(report)
}

/// A regular file opened for reading, or why it is not one.
enum Opened {
    File(File, crate::sys::fs::Stat),
    Missing,
    Not(String),
}

/// Looks before opening: a FIFO or device is never opened, a symlink never
/// followed.
fn open_regular(dir: &OwnedFd, name: &str) -> io::Result<Opened> {
    let what = match fsx::node_at(dir, name)? {
        Node::Missing => return Ok(Opened::Missing),
        Node::File { .. } => None,
        Node::Symlink => Some("it is a symlink, which turnback never follows"),
        Node::Dir => Some("it is a directory, not a regular file"),
        Node::Other => Some("it is a FIFO, socket or device, not a regular file"),
    };
    if let Some(what) = what {
        return Ok(Opened::Not(what.into()));
    }
    let (file, node) = match fsx::open_file(dir, name) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Opened::Missing),
        Err(e) if e.raw_os_error() == Some(crate::sys::Errno::LOOP.raw_os_error()) => {
            return Ok(Opened::Not(
                "it is a symlink, which turnback never follows".into(),
            ));
        }
        Err(e) => return Err(e),
    };
    if !matches!(node, Node::File { .. }) {
        return Ok(Opened::Not(
            "it changed into something other than a regular file while being checked".into(),
        ));
    }
    let st = crate::sys::fs::fstat(&file)?;
    Ok(Opened::File(file, st))
}

/// The turn a (possibly damaged) line names: the JSON string after its
/// first `"turn":`, if it is a valid turn id.
fn turn_hint(line: &[u8]) -> Option<String> {
    let key = br#""turn":"#;
    let at = line.windows(key.len()).position(|w| w == key)?;
    let rest = &line[at + key.len()..];
    let id = serde_json::Deserializer::from_slice(rest)
        .into_iter::<String>()
        .next()?
        .ok()?;
    TurnId::new(id.clone()).ok().map(|_| id)
}

/// A log line that cannot be used.
pub(crate) struct BadLine {
    /// 1-based line number.
    pub(crate) line: usize,
    /// What is wrong with it.
    pub(crate) reason: String,
    /// The turn its unverified bytes name, if any.
    pub(crate) turn_hint: Option<String>,
}

/// A log applied leniently: every complete line that decodes and fits the
/// lines kept before it is applied, the others are set aside.
pub(crate) struct Lenient {
    /// The index of the kept lines.
    pub(crate) index: Index,
    /// Each kept line: its number, its bytes in the log (newline included)
    /// and its record.
    pub(crate) kept: Vec<(usize, std::ops::Range<usize>, log::Record)>,
    /// The lines set aside, in order.
    pub(crate) bad: Vec<BadLine>,
    /// Complete lines in the log.
    pub(crate) lines: usize,
    /// A final line without newline: its line number and length in bytes.
    pub(crate) torn: Option<(usize, usize)>,
    /// Bytes of complete lines.
    pub(crate) consumed: usize,
}

/// Applies `bytes` (a whole log) leniently; shared by verify and repair, so
/// the two never disagree about which lines are damaged.
pub(crate) fn apply_leniently(bytes: &[u8]) -> Lenient {
    let parsed = log::parse(bytes, 1);
    let lines = parsed.lines.len();
    let mut index = Index::default();
    let mut kept = Vec::new();
    let mut bad = Vec::new();
    let mut start = 0;
    for (line, decoded) in parsed.lines {
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |n| start + n + 1);
        let range = start..end;
        start = end;
        let applied = decoded.and_then(|rec| {
            index
                .apply(&rec)
                .map(|()| rec)
                .map_err(|r| format!("the record does not fit the log: {r}"))
        });
        match applied {
            Ok(rec) => {
                kept.push((line, range, rec));
            }
            Err(reason) => {
                bad.push(BadLine {
                    line,
                    turn_hint: turn_hint(&bytes[range.start..range.end.saturating_sub(1)]),
                    reason,
                });
            }
        }
    }
    Lenient {
        index,
        kept,
        bad,
        lines,
        torn: parsed.torn,
        consumed: parsed.consumed,
    }
}

/// The index checkpoint, when an open would trust it, must hold what the
/// log it names records (see [`checkpoint::verify`]): one that does not is
/// damage to delete (it is a cache).
fn check_checkpoint(
    report: &mut VerifyReport,
    store_fd: &OwnedFd,
    store_path: &Path,
    log: &File,
    st: &crate::sys::fs::Stat,
    bytes: &[u8],
) {
    let ident = (crate::sys::dev(st), st.st_ino);
    if let Some(reason) = checkpoint::verify(store_fd, log, ident, bytes) {
        report.damage.push(Damage::Store {
            path: store_path.join(checkpoint::INDEX_FILE),
            reason,
        });
    }
}

fn check_store(report: &mut VerifyReport, store_fd: &OwnedFd, store_path: &Path) -> Result<()> {
    let lock_path = store_path.join(lock::LOCK_FILE);
    let _guard = match lock::acquire_shared_if_present(
        store_fd,
        store_path,
        Options::default().lock_timeout,
    )? {
        Existing::Held(g) => Some(g),
        Existing::Absent => None,
        Existing::Unusable(reason) => {
            report.damage.push(Damage::Store {
                path: lock_path,
                reason: format!("{reason}; no change can be recorded until it is removed"),
            });
            None
        }
    };
    let bytes = read_log(report, store_fd, store_path)?;
    let log = check_log(report, &bytes);
    let users = blob_users(&log.index, log.uses);
    let blob_status = check_packs(report, store_fd, store_path, &log.index, &users)?;
    check_turns(
        report,
        &log.index,
        &log.line_of_seq,
        &blob_status,
        &log.bad_lines,
    );
    Ok(())
}

/// The log's bytes, with the index checkpoint that covers them checked;
/// a missing log or one that is not a regular file is reported and read
/// as empty.
fn read_log(report: &mut VerifyReport, store_fd: &OwnedFd, store_path: &Path) -> Result<Vec<u8>> {
    let log_path = store_path.join(LOG_FILE);
    Ok(
        match open_regular(store_fd, LOG_FILE).ctx("open", &log_path)? {
            Opened::File(mut f, st) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes).ctx("read", &log_path)?;
                check_checkpoint(report, store_fd, store_path, &f, &st, &bytes);
                bytes
            }
            Opened::Missing => {
                report.warnings.push(Warning::NoLog);
                Vec::new()
            }
            Opened::Not(reason) => {
                report.damage.push(Damage::Store {
                    path: log_path,
                    reason,
                });
                Vec::new()
            }
        },
    )
}

/// What the lenient reading of the log gave.
struct LogFacts {
    /// The index of every intact line.
    index: Index,
    /// The line of each record, by sequence number.
    line_of_seq: HashMap<u64, usize>,
    /// Every stored pre-image: (blob, turn, path, seq of the record).
    uses: Vec<(BlobId, TurnId, RelPath, u64)>,
    /// Damaged lines, with the turn their bytes seem to name.
    bad_lines: Vec<(usize, Option<String>)>,
}

/// Applies the log leniently (see [`apply_leniently`]) and reports every
/// damaged line and a torn tail.
fn check_log(report: &mut VerifyReport, bytes: &[u8]) -> LogFacts {
    let lenient = apply_leniently(bytes);
    let mut line_of_seq: HashMap<u64, usize> = HashMap::new();
    let mut uses = Vec::new();
    for (line, _, rec) in &lenient.kept {
        report.records += 1;
        line_of_seq.insert(rec.seq, *line);
        if let Op::Capture { turn, files, .. } = &rec.op {
            for f in files {
                if let Pre::File { blob, .. } = &f.pre {
                    uses.push((*blob, turn.clone(), f.path.clone(), rec.seq));
                }
            }
        }
    }
    let bad_lines: Vec<(usize, Option<String>)> = lenient
        .bad
        .iter()
        .map(|b| (b.line, b.turn_hint.clone()))
        .collect();
    for b in lenient.bad {
        report.damage.push(Damage::LogLine {
            line: b.line,
            reason: b.reason,
            turn_hint: b.turn_hint,
        });
    }
    report.log_lines = lenient.lines;
    report.last_seq = lenient.index.last_seq;
    if let Some((line, len)) = lenient.torn {
        report.warnings.push(Warning::TornTail {
            line,
            bytes: len,
            turn_hint: turn_hint(&bytes[lenient.consumed..]),
        });
    }
    LogFacts {
        index: lenient.index,
        line_of_seq,
        uses,
        bad_lines,
    }
}

/// The turns of `index`, which verify reads from the log alone.
fn from_log(index: &Index) -> &[crate::index::Turn] {
    index
        .turns
        .read_from_log()
        .expect("verify builds its index from the log, never from a checkpoint")
}

/// Who uses each blob: the turns and paths whose pre-image it is, and
/// whether that turn is still live.
fn blob_users(
    index: &Index,
    uses: Vec<(BlobId, TurnId, RelPath, u64)>,
) -> HashMap<BlobId, Vec<BlobUse>> {
    let live_since: HashMap<&TurnId, u64> = from_log(index)
        .iter()
        .map(|t| (&t.id, t.first_seq))
        .collect();
    let mut users: HashMap<BlobId, Vec<BlobUse>> = HashMap::new();
    for (blob, turn, path, seq) in uses {
        let live = live_since.get(&turn).is_some_and(|&first| seq >= first);
        users
            .entry(blob)
            .or_default()
            .push(BlobUse { turn, path, live });
    }
    users
}

/// The blobs of one pack, in the order of their offsets.
type PackBlobs<'i> = Vec<(&'i BlobId, &'i BlobLoc)>;

/// Checks every pack the index names (in parallel) and lists the packs
/// directory; returns, per blob, whether it reads back whole.
fn check_packs(
    report: &mut VerifyReport,
    store_fd: &OwnedFd,
    store_path: &Path,
    index: &Index,
    users: &HashMap<BlobId, Vec<BlobUse>>,
) -> Result<HashMap<BlobId, Result<(), String>>> {
    // The index verify builds is read from the log, never from a
    // checkpoint: its blobs are all in memory already; one map of them.
    let all: HashMap<BlobId, BlobLoc> = index.blobs.iter().collect();
    let mut by_pack: BTreeMap<&str, PackBlobs<'_>> = BTreeMap::new();
    for (id, loc) in &all {
        by_pack.entry(&*loc.pack).or_default().push((id, loc));
    }
    for blobs in by_pack.values_mut() {
        blobs.sort_by_key(|(_, loc)| loc.offset);
    }
    let packs_path = store_path.join(PACKS_DIR);
    let mut blob_status: HashMap<BlobId, Result<(), String>> = HashMap::new();
    let pack_uses = |blobs: &[(&BlobId, &BlobLoc)]| -> Vec<BlobUse> {
        blobs
            .iter()
            .flat_map(|(id, _)| users.get(*id).into_iter().flatten().cloned())
            .collect()
    };
    let packs_fd = match fsx::open_subdir(store_fd, PACKS_DIR) {
        Ok(Some(fd)) => fd,
        unusable => {
            let reason = match unusable {
                Ok(_) => format!("{} is missing", packs_path.display()),
                Err(e) => {
                    let reason = format!("it cannot be opened as a directory: {e}");
                    report.damage.push(Damage::Store {
                        path: packs_path.clone(),
                        reason: reason.clone(),
                    });
                    format!("{} {reason}", packs_path.display())
                }
            };
            for (name, blobs) in &by_pack {
                report.damage.push(Damage::Pack {
                    pack: (*name).to_owned(),
                    reason: reason.clone(),
                    unreadable_blobs: blobs.len(),
                    uses: pack_uses(blobs),
                });
                for (id, _) in blobs {
                    blob_status.insert(**id, Err(format!("pack {name}: {reason}")));
                }
            }
            return Ok(blob_status);
        }
    };
    let outcomes: Vec<(&str, io::Result<PackOutcome>)> = by_pack
        .par_iter()
        .map(|(name, blobs)| (*name, check_pack(&packs_fd, name, blobs, &all)))
        .collect();
    for (name, outcome) in outcomes {
        let blobs = &by_pack[name];
        let outcome = outcome.ctx("check pack", packs_path.join(name))?;
        if let Some(links) = outcome.links {
            report.warnings.push(Warning::HardLinkedPack {
                pack: name.to_owned(),
                links,
            });
        }
        if let Some(reason) = outcome.unreadable {
            report.damage.push(Damage::Pack {
                pack: name.to_owned(),
                reason: reason.clone(),
                unreadable_blobs: blobs.len(),
                uses: pack_uses(blobs),
            });
            for (id, _) in blobs {
                blob_status.insert(**id, Err(format!("pack {name}: {reason}")));
            }
            continue;
        }
        report.packs_checked += 1;
        if let Some(reason) = outcome.bad_header {
            report.damage.push(Damage::Pack {
                pack: name.to_owned(),
                reason,
                unreadable_blobs: 0,
                uses: Vec::new(),
            });
        }
        for ((id, loc), result) in blobs.iter().zip(outcome.blobs) {
            report.blobs_checked += 1;
            if let Err(reason) = &result {
                report.damage.push(Damage::Blob {
                    blob: **id,
                    pack: name.to_owned(),
                    offset: loc.offset,
                    reason: reason.clone(),
                    uses: users.get(*id).cloned().unwrap_or_default(),
                });
            }
            blob_status.insert(**id, result);
        }
    }
    list_packs(report, &packs_path, &by_pack, index.last_seq)?;
    Ok(blob_status)
}

/// What checking one pack found.
struct PackOutcome {
    /// Why none of its blobs can be read.
    unreadable: Option<String>,
    /// Its first bytes are not the magic.
    bad_header: Option<String>,
    /// Its link count, when more than one.
    links: Option<u64>,
    /// Per blob, in the order given.
    blobs: Vec<Result<(), String>>,
}

fn check_pack(
    packs: &OwnedFd,
    name: &str,
    blobs: &[(&BlobId, &BlobLoc)],
    all: &HashMap<BlobId, BlobLoc>,
) -> io::Result<PackOutcome> {
    let mut out = PackOutcome {
        unreadable: None,
        bad_header: None,
        links: None,
        blobs: Vec::new(),
    };
    let (file, st) = match open_regular(packs, name)? {
        Opened::File(f, st) => (f, st),
        Opened::Missing => {
            out.unreadable = Some("it is missing".into());
            return Ok(out);
        }
        Opened::Not(reason) => {
            out.unreadable = Some(reason);
            return Ok(out);
        }
    };
    let links = crate::sys::nlink(&st);
    if links > 1 {
        out.links = Some(links);
    }
    out.bad_header = pack::check_header(&file)?;
    // Frames are read with pread, so one pack's blobs are checked in parallel.
    out.blobs = blobs
        .par_iter()
        .map(|(id, loc)| {
            let base = match &loc.base {
                Some(b) => Some(base_bytes(packs, all, b, 0)?),
                None => None,
            };
            pack::read_blob(&file, id, loc, base.as_deref(), &mut io::sink()).map_err(|e| match e {
                Error::BlobDamaged { reason, .. } => reason,
                other => other.to_string(),
            })
        })
        .collect();
    Ok(out)
}

/// The verified bytes of a delta's base (itself perhaps a delta).
fn base_bytes(
    packs: &OwnedFd,
    all: &HashMap<BlobId, BlobLoc>,
    id: &BlobId,
    depth: usize,
) -> Result<Vec<u8>, String> {
    if depth > pack::MAX_DELTA_DEPTH {
        return Err(format!(
            "its chain of delta bases (through {id}) is too long or loops"
        ));
    }
    let loc = all
        .get(id)
        .ok_or_else(|| format!("its delta base {id} is not in the store"))?;
    let base = match &loc.base {
        Some(b) => Some(base_bytes(packs, all, b, depth + 1)?),
        None => None,
    };
    let file = match open_regular(packs, &loc.pack).map_err(|e| e.to_string())? {
        Opened::File(f, _) => f,
        _ => {
            return Err(format!(
                "the pack {} of its delta base {id} cannot be read",
                loc.pack
            ));
        }
    };
    let mut out = Vec::new();
    pack::read_blob(&file, id, loc, base.as_deref(), &mut out)
        .map_err(|e| format!("its delta base is damaged: {e}"))?;
    Ok(out)
}

/// Names what `packs/` holds beyond the packs the log uses.
fn list_packs(
    report: &mut VerifyReport,
    packs_path: &Path,
    used: &BTreeMap<&str, Vec<(&BlobId, &BlobLoc)>>,
    last_seq: u64,
) -> Result<()> {
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(packs_path).ctx("list", packs_path)? {
        let entry = entry.ctx("list", packs_path)?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    let mut beyond: Vec<String> = Vec::new();
    for name in names {
        if name.contains(fsx::TEMP_MARK) {
            report.warnings.push(Warning::TemporaryFile { name });
        } else if !pack::is_pack_name(&name) {
            report.warnings.push(Warning::UnexpectedFile { name });
        } else if !used.contains_key(name.as_str()) {
            let seq: u64 = name[..12].parse().unwrap_or(0);
            if seq > last_seq {
                beyond.push(name);
            } else {
                report
                    .warnings
                    .push(Warning::UnreferencedPack { pack: name });
            }
        }
    }
    if beyond.len() > 1 {
        report.damage.push(Damage::LostRecords {
            packs: beyond,
            last_seq,
        });
    } else {
        for pack in beyond {
            report.warnings.push(Warning::UnreferencedPack { pack });
        }
    }
    Ok(())
}

/// Decides, per live turn, whether its rewind would restore every path.
fn check_turns(
    report: &mut VerifyReport,
    index: &Index,
    line_of_seq: &HashMap<u64, usize>,
    blob_status: &HashMap<BlobId, Result<(), String>>,
    bad_lines: &[(usize, Option<String>)],
) {
    let turns = from_log(index);
    let first_line = |t: &crate::index::Turn| line_of_seq.get(&t.first_seq).copied().unwrap_or(0);
    // Each damaged line makes uncertain every turn begun up to `reach`: the
    // turn its hint names, if that one begins after it; otherwise (no hint,
    // or a hint that may itself be damaged) the first turn begun after it,
    // which the line may have begun.
    let reaches: Vec<(usize, usize)> = bad_lines
        .iter()
        .map(|(line, hint)| {
            let hinted = hint
                .as_deref()
                .and_then(|h| turns.iter().find(|t| t.id.as_str() == h))
                .map(first_line)
                .filter(|&l| l > *line);
            let next = turns.iter().map(first_line).filter(|&l| l > *line).min();
            (*line, hinted.or(next).unwrap_or(*line))
        })
        .collect();
    // Walk from the newest turn back; `plan` holds, per path, the oldest
    // capture among the turns seen so far: the rewind plan of the current one.
    let mut plan: HashMap<&RelPath, u64> = HashMap::new();
    let mut issues: BTreeMap<&RelPath, (bool, PathIssue)> = BTreeMap::new();
    let mut checks: Vec<TurnCheck> = Vec::new();
    for t in turns.iter().rev() {
        for c in &t.files {
            let path = &c.entry.path;
            if plan.get(path).is_some_and(|&seq| seq <= c.seq) {
                continue;
            }
            plan.insert(path, c.seq);
            let issue = |damaged: bool, reason: String| {
                (
                    damaged,
                    PathIssue {
                        path: path.clone(),
                        captured_in: t.id.clone(),
                        reason,
                    },
                )
            };
            let problem = match &c.entry.pre {
                Pre::File { blob, .. } => match blob_status.get(blob) {
                    Some(Ok(())) => None,
                    Some(Err(reason)) => Some(issue(true, format!("blob {blob}: {reason}"))),
                    None => Some(issue(true, format!("blob {blob} was not checked"))),
                },
                Pre::Skipped { reason, .. } => Some(issue(false, reason.clone())),
                _ => None,
            };
            match problem {
                Some(p) => issues.insert(path, p),
                None => issues.remove(path),
            };
        }
        let line = first_line(t);
        let uncertain_lines: Vec<usize> = reaches
            .iter()
            .filter(|(_, reach)| line <= *reach)
            .map(|(bad, _)| *bad)
            .collect();
        let (damaged, not_saved): (Vec<_>, Vec<_>) = issues.values().cloned().partition(|p| p.0);
        let damaged: Vec<PathIssue> = damaged.into_iter().map(|p| p.1).collect();
        let not_saved: Vec<PathIssue> = not_saved.into_iter().map(|p| p.1).collect();
        checks.push(TurnCheck {
            turn: t.id.clone(),
            label: t.label.clone(),
            first_seq: t.first_seq,
            line,
            files: t.files.len(),
            rewindable: damaged.is_empty() && not_saved.is_empty() && uncertain_lines.is_empty(),
            damaged,
            not_saved,
            uncertain_lines,
        });
    }
    checks.reverse();
    report.turns = checks;
}

// Built on Unix modes, symlinks and inode numbers; the Windows run has
// the integration tests and the identity rules.
#[cfg(all(test, unix))]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::{RewindOptions, Store, TurnId};

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn tid(s: &str) -> TurnId {
        TurnId::new(s).expect("valid id")
    }

    /// A project with three turns, each in its own record and pack:
    /// t1 edits a.txt, t2 edits b.txt, t3 edits c.txt and creates new.txt.
    /// Beside it, `outside/` holds a canary.
    struct Fixture {
        _tmp: tempfile::TempDir,
        base: PathBuf,
        root: PathBuf,
        outside: PathBuf,
    }

    impl Fixture {
        fn new() -> std::result::Result<Fixture, Box<dyn std::error::Error>> {
            let tmp = tempfile::tempdir()?;
            let base = std::fs::canonicalize(tmp.path())?;
            let root = base.join("proj");
            let outside = base.join("outside");
            std::fs::create_dir_all(&root)?;
            std::fs::create_dir_all(&outside)?;
            std::fs::write(outside.join("canary"), b"do not touch")?;
            for (name, body) in [("a.txt", "a0\n"), ("b.txt", "b0\n"), ("c.txt", "c0\n")] {
                std::fs::write(root.join(name), body.repeat(50))?;
            }
            let mut store = Store::open(&root)?;
            store.write(&tid("t1"), Some("one"), "a.txt", b"a1\n")?;
            store.write(&tid("t2"), Some("two"), "b.txt", b"b1\n")?;
            store.capture_many(&tid("t3"), Some("three"), &["c.txt", "new.txt"])?;
            std::fs::write(root.join("c.txt"), b"c1\n")?;
            std::fs::write(root.join("new.txt"), b"created\n")?;
            Ok(Fixture {
                _tmp: tmp,
                base,
                root,
                outside,
            })
        }

        fn log(&self) -> PathBuf {
            crate::location::store_dir_of(&self.root).join(LOG_FILE)
        }

        /// The file name of the pack written by record `seq`.
        fn pack_name(&self, seq: u64) -> String {
            self.pack(seq)
                .file_name()
                .expect("a pack file")
                .to_string_lossy()
                .into_owned()
        }

        /// The pack written by the record with sequence number `seq`.
        fn pack(&self, seq: u64) -> PathBuf {
            let dir = crate::location::store_dir_of(&self.root).join(PACKS_DIR);
            let prefix = format!("{seq:012}-");
            std::fs::read_dir(&dir)
                .expect("packs listed")
                .map(|e| e.expect("entry").path())
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                })
                .expect("the record wrote a pack")
        }

        /// Everything under the temporary directory, store included.
        fn snapshot(&self) -> BTreeMap<PathBuf, String> {
            let mut out = BTreeMap::new();
            walk(&self.base, &self.base, &mut out);
            out
        }

        /// Runs verify and checks that it wrote nothing anywhere.
        fn verify(&self) -> VerifyReport {
            let before = self.snapshot();
            let report = verify_root(&self.root).expect("verify runs");
            assert_eq!(before, self.snapshot(), "verify changed something");
            report
        }
    }

    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for p in entries {
            let m = std::fs::symlink_metadata(&p).expect("stat");
            let rel = p.strip_prefix(base).expect("inside").to_path_buf();
            let ft = m.file_type();
            let what = if ft.is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).expect("readlink"))
            } else if ft.is_dir() {
                walk(base, &p, out);
                format!("dir {:o} {}", m.permissions().mode(), m.mtime_nsec())
            } else if ft.is_file() {
                let bytes = std::fs::read(&p).expect("read");
                format!(
                    "file {:o} {} {} {}",
                    m.permissions().mode(),
                    m.nlink(),
                    m.mtime_nsec(),
                    pack::hash_bytes(&bytes)
                )
            } else {
                format!("other {:o}", m.permissions().mode())
            };
            out.insert(rel, what);
        }
    }

    fn make_writable(p: &Path) {
        let mut perms = std::fs::metadata(p).expect("meta").permissions();
        perms.set_mode(0o644);
        std::fs::set_permissions(p, perms).expect("chmod");
    }

    fn rewindable(r: &VerifyReport) -> Vec<&str> {
        r.rewindable().map(TurnId::as_str).collect()
    }

    fn check(r: &VerifyReport, turn: &str) -> TurnCheck {
        r.turns
            .iter()
            .find(|t| t.turn.as_str() == turn)
            .cloned()
            .expect("turn listed")
    }

    #[test]
    fn a_sound_store_is_whole_and_every_turn_rewindable() -> TestResult {
        let f = Fixture::new()?;
        let r = f.verify();
        assert!(r.whole, "{r:#?}");
        assert!(r.damage.is_empty() && r.warnings.is_empty(), "{r:#?}");
        assert_eq!(rewindable(&r), ["t1", "t2", "t3"]);
        assert_eq!((r.records, r.packs_checked, r.blobs_checked), (3, 3, 3));
        Ok(())
    }

    #[test]
    fn no_store_is_reported_and_none_is_created() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let r = verify_root(tmp.path())?;
        assert!(!r.store_found && r.whole && r.turns.is_empty());
        assert!(!tmp.path().join(STORE_DIR).exists());
        Ok(())
    }

    #[test]
    fn a_missing_pack_names_its_turn_and_path() -> TestResult {
        let f = Fixture::new()?;
        let name = f.pack_name(2);
        std::fs::remove_file(f.pack(2))?;
        let r = f.verify();
        assert!(!r.whole);
        let Some(Damage::Pack {
            pack, reason, uses, ..
        }) = r.damage.first()
        else {
            panic!("{r:#?}")
        };
        assert_eq!(pack, &name);
        assert!(reason.contains("missing"), "{reason}");
        assert_eq!(uses.len(), 1);
        assert_eq!(
            (uses[0].turn.as_str(), uses[0].path.as_str()),
            ("t2", "b.txt")
        );
        // Rewinding t1 or t2 needs b.txt's pre-image; t3 does not.
        assert_eq!(rewindable(&r), ["t3"]);
        let t1 = check(&r, "t1");
        assert_eq!(t1.damaged.len(), 1);
        assert_eq!(t1.damaged[0].path.as_str(), "b.txt");
        assert_eq!(t1.damaged[0].captured_in.as_str(), "t2");
        // What verify calls rewindable really rewinds whole.
        let mut store = Store::open(&f.root)?;
        assert!(
            store
                .rewind(&tid("t3"), &RewindOptions::default())?
                .complete()
        );
        assert_eq!(
            std::fs::read_to_string(f.root.join("c.txt"))?,
            "c0\n".repeat(50)
        );
        assert!(
            !store
                .rewind(&tid("t1"), &RewindOptions::default())?
                .complete()
        );
        Ok(())
    }

    #[test]
    fn a_flipped_byte_in_a_blob_is_named() -> TestResult {
        let f = Fixture::new()?;
        let p = f.pack(1);
        let mut bytes = std::fs::read(&p)?;
        let mid = pack::MAGIC.len() + (bytes.len() - pack::MAGIC.len()) / 2;
        bytes[mid] ^= 0x10;
        make_writable(&p);
        std::fs::write(&p, &bytes)?;
        let r = f.verify();
        assert!(!r.whole);
        assert_eq!(r.damage.len(), 1, "{r:#?}");
        let Damage::Blob { pack, uses, .. } = &r.damage[0] else {
            panic!("{r:#?}")
        };
        assert_eq!(pack, &f.pack_name(1));
        assert_eq!(
            (uses[0].turn.as_str(), uses[0].path.as_str()),
            ("t1", "a.txt")
        );
        assert_eq!(rewindable(&r), ["t2", "t3"]);
        assert_eq!(check(&r, "t1").damaged[0].path.as_str(), "a.txt");
        Ok(())
    }

    #[test]
    fn a_pack_replaced_by_a_symlink_to_identical_bytes_is_damage() -> TestResult {
        let f = Fixture::new()?;
        let p = f.pack(2);
        let copy = f.outside.join("same.pack");
        std::fs::copy(&p, &copy)?;
        std::fs::remove_file(&p)?;
        std::os::unix::fs::symlink(&copy, &p)?;
        let r = f.verify();
        assert!(!r.whole);
        let Some(Damage::Pack { pack, reason, .. }) = r.damage.first() else {
            panic!("{r:#?}")
        };
        assert_eq!(pack, &f.pack_name(2));
        assert!(reason.contains("symlink"), "{reason}");
        assert_eq!(rewindable(&r), ["t3"]);
        // The store's own read path refuses it too.
        let store = Store::open(&f.root)?;
        assert!(
            store
                .read_blob(&pack::hash_bytes("b0\n".repeat(50).as_bytes()))
                .is_err()
        );
        Ok(())
    }

    #[test]
    fn a_pack_replaced_by_a_directory_or_fifo_is_damage() -> TestResult {
        for kind in ["directory", "FIFO"] {
            let f = Fixture::new()?;
            let p = f.pack(3);
            std::fs::remove_file(&p)?;
            if kind == "directory" {
                std::fs::create_dir(&p)?;
            } else {
                crate::sys::mkfifo_at(&p)?;
            }
            // A FIFO is never opened, so this does not block.
            let r = f.verify();
            assert!(!r.whole);
            let Some(Damage::Pack {
                pack, reason, uses, ..
            }) = r.damage.first()
            else {
                panic!("{kind}: {r:#?}")
            };
            assert_eq!(pack, &f.pack_name(3));
            assert!(reason.contains(kind), "{kind}: {reason}");
            assert_eq!(uses[0].path.as_str(), "c.txt");
            assert_eq!(rewindable(&r), Vec::<&str>::new(), "{kind}");
            assert!(
                check(&r, "t2")
                    .damaged
                    .iter()
                    .any(|d| d.path.as_str() == "c.txt")
            );
        }
        Ok(())
    }

    #[test]
    fn a_hard_linked_pack_is_a_warning_not_damage() -> TestResult {
        let f = Fixture::new()?;
        std::fs::hard_link(f.pack(1), f.outside.join("linked.pack"))?;
        let r = f.verify();
        assert!(r.whole, "{r:#?}");
        assert_eq!(
            r.warnings,
            [Warning::HardLinkedPack {
                pack: f.pack_name(1),
                links: 2
            }]
        );
        assert_eq!(rewindable(&r), ["t1", "t2", "t3"]);
        Ok(())
    }

    #[test]
    fn a_truncated_log_is_named_at_several_offsets() -> TestResult {
        let f = Fixture::new()?;
        let full = std::fs::read(f.log())?;
        let ends: Vec<usize> = full
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(ends.len(), 3);
        make_writable(&f.log());
        let cases = [
            // (offset, whole, rewindable turns)
            (0, false, vec![]),
            (ends[0] / 2, false, vec![]),
            (ends[0], false, vec!["t1"]),
            // Torn line 2 and packs 2 and 3 both orphaned: more than a crash leaves.
            (ends[1] - 40, false, vec!["t1"]),
            (ends[1], true, vec!["t1", "t2"]),
            (ends[2] - 1, true, vec!["t1", "t2"]),
        ];
        for (cut, whole, turns) in cases {
            std::fs::write(f.log(), &full[..cut])?;
            let r = f.verify();
            assert_eq!(r.whole, whole, "cut at {cut}: {r:#?}");
            assert_eq!(rewindable(&r), turns, "cut at {cut}");
            let lost_line = ends.iter().filter(|&&e| e <= cut).count() + 1;
            let torn = r.warnings.iter().find_map(|w| match w {
                Warning::TornTail {
                    line, turn_hint, ..
                } => Some((*line, turn_hint.clone())),
                _ => None,
            });
            if ends.contains(&cut) || cut == 0 {
                assert_eq!(torn, None, "cut at {cut}");
                // The packs of the lost records are named.
                let named: Vec<String> = r
                    .damage
                    .iter()
                    .filter_map(|d| match d {
                        Damage::LostRecords { packs, .. } => Some(packs.clone()),
                        _ => None,
                    })
                    .flatten()
                    .chain(r.warnings.iter().filter_map(|w| match w {
                        Warning::UnreferencedPack { pack } => Some(pack.clone()),
                        _ => None,
                    }))
                    .collect();
                let want: Vec<String> = (lost_line as u64..=3).map(|n| f.pack_name(n)).collect();
                assert_eq!(named, want, "cut at {cut}");
            } else {
                let hint = ["t1", "t2", "t3"][lost_line - 1];
                let (line, turn_hint) = torn.expect("torn line named");
                assert_eq!(line, lost_line, "cut at {cut}");
                if cut > ends.get(lost_line.wrapping_sub(2)).copied().unwrap_or(0) + 40 {
                    assert_eq!(turn_hint.as_deref(), Some(hint), "cut at {cut}");
                }
            }
        }
        Ok(())
    }

    #[test]
    fn a_damaged_middle_line_is_named_and_store_open_refuses_it() -> TestResult {
        let f = Fixture::new()?;
        let mut log = std::fs::read(f.log())?;
        let second = log.iter().position(|&b| b == b'\n').expect("line 1") + 1;
        // A flipped byte inside line 2's label.
        let at = second
            + log[second..]
                .windows(5)
                .position(|w| w == b"\"two\"")
                .expect("label")
            + 1;
        log[at] ^= 0x01;
        make_writable(&f.log());
        std::fs::write(f.log(), &log)?;
        assert!(matches!(
            Store::open(&f.root),
            Err(Error::LogDamaged { line: 2, .. })
        ));
        let r = f.verify();
        assert!(!r.whole);
        let Some(Damage::LogLine {
            line,
            reason,
            turn_hint,
        }) = r.damage.first()
        else {
            panic!("{r:#?}")
        };
        assert_eq!(*line, 2);
        assert!(reason.contains("checksum"), "{reason}");
        assert_eq!(turn_hint.as_deref(), Some("t2"));
        // t1 began before the damaged line: its rewind may need that record.
        assert_eq!(check(&r, "t1").uncertain_lines, [2]);
        // t2 has no other record, so its hint names no live turn: the line
        // may have begun t3 (the hint is read from damaged bytes), so t3 is
        // uncertain too.
        assert_eq!(check(&r, "t3").uncertain_lines, [2]);
        assert!(rewindable(&r).is_empty());
        // Pack 2 is now named by no readable record.
        assert!(r.warnings.contains(&Warning::UnreferencedPack {
            pack: f.pack_name(2)
        }));
        Ok(())
    }

    #[test]
    fn a_hostile_path_with_a_valid_checksum_is_a_damaged_line() -> TestResult {
        let f = Fixture::new()?;
        for bad in ["../x", "/etc/passwd", ".git/config"] {
            let json = format!(
                r#"{{"seq":9,"at":0,"type":"capture","turn":"evil","files":[{{"path":{bad:?},"pre":{{"kind":"absent"}}}}]}}"#
            );
            let crc = crc32fast::hash(json.as_bytes());
            let line = format!("{},\"crc\":\"{crc:08x}\"}}\n", &json[..json.len() - 1]);
            let mut log = std::fs::read(f.log())?;
            let keep = log.len();
            log.extend_from_slice(line.as_bytes());
            make_writable(&f.log());
            std::fs::write(f.log(), &log)?;
            let r = f.verify();
            let Some(Damage::LogLine {
                line,
                reason,
                turn_hint,
                ..
            }) = r.damage.first()
            else {
                panic!("{bad}: {r:#?}")
            };
            assert_eq!(*line, 4);
            assert!(reason.contains(bad), "{bad}: {reason}");
            assert_eq!(turn_hint.as_deref(), Some("evil"));
            assert_eq!(rewindable(&r), Vec::<&str>::new(), "{bad}");
            std::fs::write(f.log(), &log[..keep])?;
        }
        Ok(())
    }

    #[test]
    fn a_store_directory_that_is_a_symlink_is_damage() -> TestResult {
        let f = Fixture::new()?;
        let store = crate::location::store_dir_of(&f.root);
        let moved = f.outside.join("store");
        std::fs::rename(&store, &moved)?;
        std::os::unix::fs::symlink(&moved, &store)?;
        let r = f.verify();
        assert!(!r.whole);
        assert!(
            matches!(r.damage.first(), Some(Damage::Store { path, .. }) if path == &store),
            "{r:#?}"
        );
        Ok(())
    }

    #[test]
    fn every_truncation_and_every_flipped_log_byte_is_named_without_panic() -> TestResult {
        let f = Fixture::new()?;
        let full = std::fs::read(f.log())?;
        make_writable(&f.log());
        for cut in 0..full.len() {
            std::fs::write(f.log(), &full[..cut])?;
            let r = verify_root(&f.root)?;
            assert!(
                !r.damage.is_empty() || !r.warnings.is_empty(),
                "truncation at {cut} went unnoticed"
            );
        }
        for i in 0..full.len() {
            let mut m = full.clone();
            m[i] ^= 0x04;
            std::fs::write(f.log(), &m)?;
            let r = verify_root(&f.root)?;
            assert!(
                !r.damage.is_empty() || !r.warnings.is_empty(),
                "flip at {i} went unnoticed"
            );
        }
        std::fs::write(f.log(), &full)?;
        assert!(f.verify().whole);
        Ok(())
    }
}
