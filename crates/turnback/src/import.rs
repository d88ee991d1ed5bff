//! Reading a store of the original Python implementation ("osfoundry") into
//! turnback's, so its turns can be rewound with turnback.
//!
//! Source format: `<project>/.osfoundry/checkpoints/index.json` holds a JSON
//! list of turns, and `blobs/<sha256>` beside it the raw pre-image bytes:
//!
//! ```text
//! [{"turn": "t1", "label": "fix", "at": 1700000000000000000,
//!   "files": [{"path": "/abs/project/a.py", "pre": {"kind": "content", "sha256": "<64 hex>", "bytes": 52}},
//!             {"path": "/abs/project/new.py", "pre": {"kind": "absent"}},
//!             {"path": "/abs/project/big.bin", "pre": {"kind": "skipped", "reason": "too large"}}]}]
//! ```
//!
//! How it is imported:
//! - Turns are appended in the order of their `at` (ties keep the file's
//!   order), each as one capture record with its own pack, through the
//!   store's normal record path, all under one hold of the store lock. Each
//!   turn is durable before the next begins, so an interrupted import leaves
//!   whole turns only, and running it again finishes it. The records' own
//!   `at` is the time of the import (the log's clock); the osfoundry time is
//!   in the report.
//! - Paths (absolute in the format) are resolved against the root like a
//!   capture's ([`Store::resolve`]): a relative path, one outside the root
//!   (directly, by `..`, or through a symlinked directory that leaves it),
//!   or one inside `.git/` or `.turnback/` is refused, reported, and not
//!   imported.
//! - Blobs: the name must be 64 lowercase hex digits (so an entry cannot
//!   make the import read `../../x`); the file is opened without following a
//!   symlink and streamed through SHA-256 and zstd into the pack, and kept
//!   only if it hashes to its name. A missing, non-regular or mismatching
//!   blob is not imported: its entry is recorded as *skipped* with a reason
//!   naming the blob, so a rewind reports that path as not restored. The
//!   import goes on: aborting would leave every other turn of the history
//!   unrewindable for one damaged blob, and dropping the entry instead would
//!   make a rewind silently leave the agent's version of that file.
//! - Modes: the format records none. A pre-image gets the permission bits of
//!   the file now at its path when that is a regular file (an executable
//!   script stays executable), else 0o644; setuid, setgid and sticky bits are
//!   never guessed.
//! - Idempotence: an osfoundry turn whose id is a live turn capturing the
//!   same paths is already imported and skipped; a live turn of that id with
//!   other paths is a different turn, and the osfoundry one is refused; a
//!   turn of that id that was rewound is skipped (importing again must not
//!   bring back what was undone).
//! - Order: a turn older than the newest live turn that did not come from
//!   this osfoundry store is refused: appended after it, a rewind would mix
//!   states that never existed together.

use crate::sys::OwnedFd;
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, IoResultExt, Result};
use crate::fsx::{self, Node};
use crate::id::{BlobId, TurnId, cut_label};
use crate::index::Turn;
use crate::log::{FileEntry, Op, Pre, StoredBlob};
use crate::pack::{self, PackWriter};
use crate::path::RelPath;
use crate::store::Store;

/// The index file's name.
pub const INDEX_FILE: &str = "index.json";

/// The mode given to a pre-image when no file stands at its path now.
pub const DEFAULT_MODE: u32 = 0o644;

/// What [`Store::import_osfoundry`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    /// The osfoundry checkpoints directory read.
    pub source: PathBuf,
    /// Turns recorded now, in the order appended.
    pub imported: Vec<ImportedTurn>,
    /// Turns already in the store from an earlier import.
    pub already_imported: Vec<TurnId>,
    /// Turns imported before and since rewound; not brought back.
    pub already_rewound: Vec<TurnId>,
    /// Turns not imported, with the reason.
    pub refused_turns: Vec<RefusedTurn>,
    /// Entries not imported because their path is not acceptable.
    pub refused_paths: Vec<RefusedPath>,
    /// Entries recorded as skipped because their blob could not be used.
    pub not_saved: Vec<NotSaved>,
    /// Turns with no entry to record.
    pub empty_turns: Vec<String>,
}

impl ImportReport {
    /// Whether everything in the osfoundry store was imported.
    pub fn complete(&self) -> bool {
        self.refused_turns.is_empty() && self.refused_paths.is_empty() && self.not_saved.is_empty()
    }
}

/// One turn recorded by the import.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedTurn {
    /// The turn.
    pub turn: TurnId,
    /// Its label.
    pub label: Option<String>,
    /// Its osfoundry time (Unix nanoseconds).
    #[serde(serialize_with = "crate::time::ser_ns")]
    pub osfoundry_at: u64,
    /// Sequence number of its record.
    pub seq: u64,
    /// Paths recorded.
    #[serde(rename = "file_count")]
    pub files: usize,
    /// Blobs written.
    #[serde(rename = "new_blob_count")]
    pub new_blobs: usize,
    /// Compressed bytes written.
    pub stored_bytes: u64,
}

/// A turn not imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedTurn {
    /// Its id.
    pub turn: String,
    /// Why.
    pub reason: String,
}

/// An entry not imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedPath {
    /// Its turn.
    pub turn: String,
    /// The path as the osfoundry store has it.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// An entry recorded as skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotSaved {
    /// Its turn.
    pub turn: TurnId,
    /// The path.
    pub path: RelPath,
    /// Why its pre-image could not be imported.
    pub reason: String,
}

/// Finds the osfoundry checkpoints directory for `dir`: `dir` itself, or
/// `dir/checkpoints`, or `dir/.osfoundry/checkpoints`, the first holding an
/// `index.json`.
pub fn find_osfoundry(dir: &Path) -> Result<PathBuf> {
    let candidates = [
        dir.to_path_buf(),
        dir.join("checkpoints"),
        dir.join(".osfoundry").join("checkpoints"),
    ];
    for c in &candidates {
        if c.join(INDEX_FILE).is_file() {
            return Ok(c.clone());
        }
    }
    Err(Error::Io {
        op: "find an osfoundry store in",
        path: dir.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no {INDEX_FILE} in {}, {} or {}; name the project or its .osfoundry/checkpoints directory",
                candidates[0].display(),
                candidates[1].display(),
                candidates[2].display()
            ),
        ),
    })
}

/// One osfoundry entry, as it will be recorded.
enum Entry {
    /// A blob to import.
    Content {
        path: RelPath,
        blob: BlobId,
        mode: u32,
    },
    /// Recorded as it is.
    Ready(FileEntry),
}

impl Entry {
    fn path(&self) -> &RelPath {
        match self {
            Entry::Content { path, .. } => path,
            Entry::Ready(e) => &e.path,
        }
    }
}

/// One osfoundry turn, checked.
struct SourceTurn {
    id: TurnId,
    label: Option<String>,
    at: u64,
    entries: Vec<Entry>,
}

fn malformed(index: &Path, what: String) -> Error {
    Error::Io {
        op: "import",
        path: index.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what}; it is not an osfoundry index, and nothing was imported"),
        ),
    }
}

impl Store {
    /// Imports the osfoundry store found for `dir` (see [`find_osfoundry`]
    /// and the module documentation). `Err` when the index cannot be read or
    /// is not in the format (then nothing is imported) or the store cannot be
    /// written (then the turns already reported durable stay, and running the
    /// import again finishes it).
    pub fn import_osfoundry(&mut self, dir: impl AsRef<Path>) -> Result<ImportReport> {
        let source = find_osfoundry(dir.as_ref())?;
        let index_path = source.join(INDEX_FILE);
        let bytes = std::fs::read(&index_path).ctx("read", &index_path)?;
        let mut report = ImportReport {
            source: source.clone(),
            ..ImportReport::default()
        };
        let mut turns = self.parse_osfoundry(&index_path, &bytes, &mut report)?;
        turns.sort_by_key(|t| t.at);
        let blobs_path = source.join("blobs");
        let blobs_fd = match fsx::open_dir_path(&blobs_path) {
            Ok(fd) => Some(fd),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).ctx("open", &blobs_path),
        };

        let _guard = self.begin_mutation()?;
        let todo = self.classify(turns, &mut report)?;
        for t in todo {
            self.import_turn(t, blobs_fd.as_ref(), &blobs_path, &mut report)?;
        }
        Ok(report)
    }

    /// Reads the index; entries whose path is refused are reported and
    /// dropped here.
    fn parse_osfoundry(
        &self,
        index_path: &Path,
        bytes: &[u8],
        report: &mut ImportReport,
    ) -> Result<Vec<SourceTurn>> {
        let doc: Value = serde_json::from_slice(bytes)
            .map_err(|e| malformed(index_path, format!("it is not valid JSON ({e})")))?;
        let list = doc
            .as_array()
            .ok_or_else(|| malformed(index_path, "its top level is not a list".into()))?;
        let mut out = Vec::with_capacity(list.len());
        for (i, t) in list.iter().enumerate() {
            let bad = |what: &str| malformed(index_path, format!("turn #{} {what}", i + 1));
            let id = match t.get("turn") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => return Err(bad("has no \"turn\" string or number")),
            };
            let id = TurnId::new(id).map_err(|e| bad(&format!("has a bad id: {e}")))?;
            let at = t
                .get("at")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("has no \"at\" time in nanoseconds"))?;
            let label = match t.get("label") {
                Some(Value::String(s)) if !s.is_empty() => Some(cut_label(s)),
                _ => None,
            };
            let files = match t.get("files") {
                Some(Value::Array(f)) => f,
                None | Some(Value::Null) => &Vec::new(),
                Some(_) => return Err(bad("has a \"files\" that is not a list")),
            };
            let mut entries = Vec::with_capacity(files.len());
            let mut seen: HashSet<RelPath> = HashSet::new();
            for f in files {
                let shown_path = match f.get("path") {
                    Some(Value::String(s)) => s.clone(),
                    other => {
                        report.refused_paths.push(RefusedPath {
                            turn: id.to_string(),
                            path: other.map(Value::to_string).unwrap_or_default(),
                            reason: "the entry has no \"path\" string".into(),
                        });
                        continue;
                    }
                };
                let path = match self.import_path(&shown_path) {
                    Ok(p) => p,
                    Err(reason) => {
                        report.refused_paths.push(RefusedPath {
                            turn: id.to_string(),
                            path: shown_path,
                            reason,
                        });
                        continue;
                    }
                };
                if !seen.insert(path.clone()) {
                    continue; // the first entry of a path in a turn wins
                }
                let entry = self.import_entry(&id, path, f.get("pre"), report);
                entries.push(entry);
            }
            out.push(SourceTurn {
                id,
                label,
                at,
                entries,
            });
        }
        Ok(out)
    }

    fn import_path(&self, path: &str) -> std::result::Result<RelPath, String> {
        if !Path::new(path).is_absolute() {
            return Err(
                "the osfoundry format stores absolute paths; a relative one is ambiguous".into(),
            );
        }
        self.resolve(path, false).map_err(|e| match e {
            Error::BadPath { reason, .. } => reason.to_string(),
            other => other.to_string(),
        })
    }

    fn import_entry(
        &self,
        turn: &TurnId,
        path: RelPath,
        pre: Option<&Value>,
        report: &mut ImportReport,
    ) -> Entry {
        let kind = pre.and_then(|p| p.get("kind")).and_then(Value::as_str);
        let skipped = |path: RelPath, reason: String, report: &mut ImportReport| {
            report.not_saved.push(NotSaved {
                turn: turn.clone(),
                path: path.clone(),
                reason: reason.clone(),
            });
            Entry::Ready(FileEntry {
                path,
                pre: Pre::Skipped { reason, size: 0 },
            })
        };
        match kind {
            Some("absent") => Entry::Ready(FileEntry {
                path,
                pre: Pre::Absent,
            }),
            Some("skipped") => {
                let why = pre
                    .and_then(|p| p.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                Entry::Ready(FileEntry {
                    path,
                    pre: Pre::Skipped {
                        reason: format!("not saved by osfoundry: {why}"),
                        size: 0,
                    },
                })
            }
            Some("content") => {
                let sha = pre
                    .and_then(|p| p.get("sha256"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match sha.parse::<BlobId>() {
                    Ok(blob) => {
                        let mode = self.current_mode(&path);
                        Entry::Content { path, blob, mode }
                    }
                    Err(_) => skipped(
                        path,
                        format!("its osfoundry sha256 {sha:?} is not 64 lowercase hex digits"),
                        report,
                    ),
                }
            }
            other => skipped(
                path,
                format!(
                    "unknown osfoundry pre-image kind {}",
                    other.map_or("(none)".to_owned(), |k| format!("{k:?}"))
                ),
                report,
            ),
        }
    }

    /// The permission bits of the regular file now at `path`, else 0o644.
    fn current_mode(&self, path: &RelPath) -> u32 {
        match crate::fsx::open_dir_path(&self.place.root).and_then(|root| {
            Ok(crate::sys::fs::statat(
                &root,
                path.as_path(),
                crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
            )?)
        }) {
            Ok(st)
                if crate::sys::file_type(crate::sys::mode(&st))
                    == crate::sys::fs::FileType::RegularFile =>
            {
                crate::sys::mode(&st) & 0o777
            }
            _ => DEFAULT_MODE,
        }
    }

    /// Decides which turns to import (with the lock held).
    fn classify(
        &self,
        turns: Vec<SourceTurn>,
        report: &mut ImportReport,
    ) -> Result<Vec<SourceTurn>> {
        let mut paths_of: HashMap<&TurnId, HashSet<&RelPath>> = HashMap::new();
        for t in &turns {
            paths_of
                .entry(&t.id)
                .or_default()
                .extend(t.entries.iter().map(Entry::path));
        }
        let mut imported_before: HashSet<TurnId> = HashSet::new();
        let mut collisions: HashSet<TurnId> = HashSet::new();
        for (id, paths) in &paths_of {
            if let Some(live) = self.index.turn(id)? {
                let have: HashSet<&RelPath> = live.files.iter().map(|c| &c.entry.path).collect();
                if &have == paths {
                    imported_before.insert((*id).clone());
                } else {
                    collisions.insert((*id).clone());
                }
            }
        }
        // The newest live turn that is not from this osfoundry store.
        let mut newest_other: Option<&Turn> = None;
        for t in &self.index.turns {
            let t = t?;
            if !imported_before.contains(&t.id)
                && newest_other.is_none_or(|n| t.started_at >= n.started_at)
            {
                newest_other = Some(t);
            }
        }
        let mut todo = Vec::new();
        let mut reported: HashSet<TurnId> = HashSet::new();
        for t in turns {
            let first_time = reported.insert(t.id.clone());
            if imported_before.contains(&t.id) {
                if first_time {
                    report.already_imported.push(t.id);
                }
                continue;
            }
            if collisions.contains(&t.id) {
                report.refused_turns.push(RefusedTurn {
                    turn: t.id.to_string(),
                    reason: "the store already has a live turn of this id that captured other paths; rewind or rename it first".into(),
                });
                continue;
            }
            if self.index.ended(&t.id)?.is_some() && self.index.turn(&t.id)?.is_none() {
                if first_time {
                    report.already_rewound.push(t.id);
                }
                continue;
            }
            if let Some(newer) = newest_other.filter(|n| n.started_at > t.at) {
                report.refused_turns.push(RefusedTurn {
                    turn: t.id.to_string(),
                    reason: format!(
                        "it is older than the store's live turn {}; appended after it, a rewind would mix states (rewind {} first to import it)",
                        newer.id, newer.id
                    ),
                });
                continue;
            }
            if t.entries.is_empty() {
                report.empty_turns.push(t.id.to_string());
                continue;
            }
            todo.push(t);
        }
        Ok(todo)
    }

    /// Records one turn: its blobs into one pack, then one capture record.
    fn import_turn(
        &mut self,
        t: SourceTurn,
        blobs_fd: Option<&OwnedFd>,
        blobs_path: &Path,
        report: &mut ImportReport,
    ) -> Result<()> {
        let seq = self.index.last_seq + 1;
        let pack_name = pack::pack_name(seq);
        let mut files: Vec<FileEntry> = Vec::with_capacity(t.entries.len());
        let mut blobs: Vec<StoredBlob> = Vec::new();
        let mut stored = 0u64;
        {
            let packs = &self
                .place
                .dirs
                .as_ref()
                .expect("begin_mutation opened the store directories")
                .packs;
            let mut writer: Option<PackWriter> = None;
            let result = self.fill_import_pack(
                &t,
                blobs_fd,
                blobs_path,
                &mut writer,
                &mut files,
                &mut blobs,
                &mut stored,
                report,
            );
            match (result, writer) {
                (Err(e), Some(w)) => {
                    w.abandon();
                    return Err(e);
                }
                (Err(e), None) => return Err(e),
                (Ok(()), Some(w)) if blobs.is_empty() => w.abandon(),
                (Ok(()), Some(w)) => w.commit(packs, &pack_name)?,
                (Ok(()), None) => {}
            }
        }
        let count = files.len();
        let seq = self.append(Op::Capture {
            turn: t.id.clone(),
            label: t.label.clone(),
            pack: (!blobs.is_empty()).then_some(pack_name),
            blobs: blobs.clone(),
            files,
            posts: Vec::new(),
            shared_with: Vec::new(),
        })?;
        report.imported.push(ImportedTurn {
            turn: t.id,
            label: t.label,
            osfoundry_at: t.at,
            seq,
            files: count,
            new_blobs: blobs.len(),
            stored_bytes: stored,
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn fill_import_pack(
        &self,
        t: &SourceTurn,
        blobs_fd: Option<&OwnedFd>,
        blobs_path: &Path,
        writer: &mut Option<PackWriter>,
        files: &mut Vec<FileEntry>,
        blobs: &mut Vec<StoredBlob>,
        stored: &mut u64,
        report: &mut ImportReport,
    ) -> Result<()> {
        let level = self.options().compression_level;
        let mut fresh: HashMap<BlobId, u64> = HashMap::new();
        for entry in &t.entries {
            let (path, want, mode) = match entry {
                Entry::Ready(e) => {
                    files.push(e.clone());
                    continue;
                }
                Entry::Content { path, blob, mode } => (path, *blob, *mode),
            };
            let mut not_saved = |reason: String, size: u64| {
                report.not_saved.push(NotSaved {
                    turn: t.id.clone(),
                    path: path.clone(),
                    reason: reason.clone(),
                });
                files.push(FileEntry {
                    path: path.clone(),
                    pre: Pre::Skipped { reason, size },
                });
            };
            let name = want.to_hex();
            let shown = blobs_path.join(&name);
            let opened = match blobs_fd {
                None => Err(format!(
                    "osfoundry blob {name} is missing ({} does not exist)",
                    blobs_path.display()
                )),
                Some(fd) => match fsx::node_at(fd, &name).ctx("look at", &shown)? {
                    Node::Missing => Err(format!(
                        "osfoundry blob {name} is missing from {}",
                        blobs_path.display()
                    )),
                    Node::File { .. } => {
                        let (file, node) = fsx::open_file(fd, &name).ctx("open", &shown)?;
                        match node {
                            Node::File { .. } => Ok(file),
                            _ => Err(format!("osfoundry blob {name} changed while being read")),
                        }
                    }
                    _ => Err(format!(
                        "osfoundry blob {name} is not a regular file (a symlink, directory or FIFO), so it is not read"
                    )),
                },
            };
            let file = match opened {
                Ok(f) => f,
                Err(reason) => {
                    not_saved(reason, 0);
                    continue;
                }
            };
            if writer.is_none() {
                *writer = Some(PackWriter::create(
                    &self.place.dirs().store,
                    &self.place.store_path,
                )?);
            }
            let w = writer.as_mut().expect("created just above");
            let known = &self.index.blobs;
            let streamed = w.append_stream(&file, level, |id| {
                *id == want && !known.contains_key(id) && !fresh.contains_key(id)
            })?;
            if streamed.id != want {
                not_saved(
                    format!(
                        "osfoundry blob {name} is damaged: its bytes hash to {}",
                        streamed.id
                    ),
                    streamed.size,
                );
                continue;
            }
            if let Some((offset, len)) = streamed.kept {
                fresh.insert(want, streamed.size);
                *stored += len;
                blobs.push(StoredBlob {
                    pack: None,
                    base: None,
                    id: want,
                    offset,
                    len,
                    size: streamed.size,
                });
            }
            files.push(FileEntry {
                path: path.clone(),
                pre: Pre::File {
                    blob: want,
                    size: streamed.size,
                    mode,
                    link: None,
                },
            });
        }
        Ok(())
    }
}

// Built on Unix modes, symlinks and inode numbers; the Windows run has
// the integration tests and the identity rules.
#[cfg(all(test, unix))]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::*;
    use crate::{RewindOptions, TurnId};

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    /// An osfoundry store written the way the Python class writes it.
    struct Osf {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
        dir: PathBuf,
        turns: Vec<Value>,
    }

    impl Osf {
        fn new() -> std::result::Result<Osf, Box<dyn std::error::Error>> {
            let tmp = tempfile::tempdir()?;
            let base = std::fs::canonicalize(tmp.path())?;
            let root = base.join("proj");
            let outside = base.join("outside");
            let dir = root.join(".osfoundry").join("checkpoints");
            std::fs::create_dir_all(dir.join("blobs"))?;
            std::fs::create_dir_all(&outside)?;
            Ok(Osf {
                _tmp: tmp,
                root,
                outside,
                dir,
                turns: Vec::new(),
            })
        }

        fn abs(&self, rel: &str) -> String {
            self.root.join(rel).to_string_lossy().into_owned()
        }

        /// A `content` pre-image, its blob written raw.
        fn content(&self, bytes: &[u8]) -> Value {
            let sha = pack::hash_bytes(bytes).to_hex();
            std::fs::write(self.dir.join("blobs").join(&sha), bytes).expect("blob");
            json!({"kind": "content", "sha256": sha, "bytes": bytes.len()})
        }

        fn turn(&mut self, turn: Value, at: u64, files: Vec<(String, Value)>) {
            let files: Vec<Value> = files
                .into_iter()
                .map(|(path, pre)| json!({"path": path, "pre": pre}))
                .collect();
            self.turns
                .push(json!({"turn": turn, "label": "edit", "at": at, "files": files}));
            std::fs::write(
                self.dir.join(INDEX_FILE),
                serde_json::to_vec_pretty(&self.turns).expect("json"),
            )
            .expect("index");
        }
    }

    /// The project's files (not the stores): path -> (bytes, mode).
    fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("list") {
                let p = e.expect("entry").path();
                let rel = p
                    .strip_prefix(root)
                    .expect("inside")
                    .to_string_lossy()
                    .into_owned();
                if rel == ".turnback" || rel == ".osfoundry" {
                    continue;
                }
                let m = std::fs::symlink_metadata(&p).expect("stat");
                if m.is_dir() {
                    stack.push(p);
                } else {
                    let mode = m.permissions().mode() & 0o7777;
                    out.insert(rel, (std::fs::read(&p).expect("read"), mode));
                }
            }
        }
        out
    }

    fn tid(s: &str) -> TurnId {
        TurnId::new(s).expect("valid")
    }

    fn set_mode(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn imported_turns_follow_at_and_rewind_byte_for_byte() -> TestResult {
        let mut o = Osf::new()?;
        std::fs::create_dir_all(o.root.join("sub"))?;
        std::fs::write(o.root.join("a.txt"), b"a0\n")?;
        std::fs::write(o.root.join("sub/run.sh"), b"#!/bin/sh\necho 0\n")?;
        std::fs::write(o.root.join("empty"), b"")?;
        set_mode(&o.root.join("sub/run.sh"), 0o755);
        let before = tree(&o.root);
        // Listed newest first: the import orders by "at".
        let a1 = o.content(b"a1\n");
        let t2 = vec![(o.abs("a.txt"), a1), (o.abs("empty"), o.content(b""))];
        o.turn(json!(2), 200, t2);
        let t1 = vec![
            (o.abs("a.txt"), o.content(b"a0\n")),
            (o.abs("sub/run.sh"), o.content(b"#!/bin/sh\necho 0\n")),
            (o.abs("new.txt"), json!({"kind": "absent"})),
        ];
        o.turn(json!(1), 100, t1);
        // The agent's edits, as they are now.
        std::fs::write(o.root.join("a.txt"), b"a2\n")?;
        std::fs::write(o.root.join("sub/run.sh"), b"broken\n")?;
        std::fs::write(o.root.join("empty"), b"now full\n")?;
        std::fs::write(o.root.join("new.txt"), b"created\n")?;

        let mut store = Store::open(&o.root)?;
        let report = store.import_osfoundry(&o.root)?;
        assert!(report.complete(), "{report:#?}");
        let order: Vec<&str> = report.imported.iter().map(|t| t.turn.as_str()).collect();
        assert_eq!(order, ["1", "2"]);
        assert_eq!(report.imported[0].osfoundry_at, 100);
        let turns: Vec<&str> = store.turns()?.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(turns, ["1", "2"]);
        assert!(crate::verify_root(&o.root)?.whole);

        let done = store.rewind(&tid("1"), &RewindOptions::default())?;
        assert!(done.complete(), "{done:#?}");
        assert_eq!(tree(&o.root), before);
        Ok(())
    }

    #[test]
    fn importing_twice_adds_nothing_and_a_rewound_turn_stays_rewound() -> TestResult {
        let mut o = Osf::new()?;
        std::fs::write(o.root.join("a.txt"), b"a0\n")?;
        let files = vec![(o.abs("a.txt"), o.content(b"a0\n"))];
        o.turn(json!("t1"), 100, files);
        let files = vec![(o.abs("b.txt"), json!({"kind": "absent"}))];
        o.turn(json!("t2"), 200, files);
        let mut store = Store::open(&o.root)?;
        assert_eq!(store.import_osfoundry(&o.dir)?.imported.len(), 2);
        let log = crate::location::store_dir_of(&o.root).join("log.jsonl");
        let lines = std::fs::read(&log)?;

        let again = store.import_osfoundry(o.root.join(".osfoundry"))?;
        assert!(again.imported.is_empty() && again.complete(), "{again:#?}");
        assert_eq!(again.already_imported, [tid("t1"), tid("t2")]);
        assert_eq!(std::fs::read(&log)?, lines, "nothing appended");
        assert_eq!(store.turns()?.len(), 2);

        store.rewind(&tid("t2"), &RewindOptions::default())?;
        let third = store.import_osfoundry(&o.root)?;
        assert_eq!(third.already_imported, [tid("t1")]);
        assert_eq!(third.already_rewound, [tid("t2")]);
        assert!(third.imported.is_empty());
        Ok(())
    }

    #[test]
    fn entries_outside_the_root_are_refused_and_the_rest_imported() -> TestResult {
        let mut o = Osf::new()?;
        std::fs::write(o.root.join("ok.txt"), b"fine\n")?;
        std::fs::create_dir_all(o.root.join(".git"))?;
        std::os::unix::fs::symlink(&o.outside, o.root.join("link"))?;
        let passwd = std::fs::read("/etc/passwd").unwrap_or_else(|_| b"root:x:0:0\n".to_vec());
        let hostile = [
            "/etc/passwd".to_owned(),
            "../x".to_owned(),
            format!("{}/../x", o.root.display()),
            o.abs(".git/config"),
            o.abs(".turnback/log.jsonl"),
            o.abs("link/escape.txt"),
            "relative.txt".to_owned(),
        ];
        let mut files: Vec<(String, Value)> = hostile
            .iter()
            .map(|p| (p.clone(), o.content(&passwd)))
            .collect();
        files.push((o.abs("ok.txt"), o.content(b"fine\n")));
        files.push((
            o.abs("sneaky.txt"),
            json!({"kind": "content", "sha256": "../../../../etc/passwd", "bytes": 3}),
        ));
        o.turn(json!("t1"), 100, files);
        let outside_before = std::fs::read_dir(&o.outside)?.count();

        let mut store = Store::open(&o.root)?;
        let report = store.import_osfoundry(&o.root)?;
        let refused: Vec<&str> = report
            .refused_paths
            .iter()
            .map(|r| r.path.as_str())
            .collect();
        assert_eq!(
            refused,
            hostile.iter().map(String::as_str).collect::<Vec<_>>()
        );
        for r in &report.refused_paths {
            assert!(!r.reason.is_empty());
        }
        assert_eq!(report.not_saved.len(), 1, "{report:#?}");
        assert_eq!(report.not_saved[0].path.as_str(), "sneaky.txt");
        assert!(!report.complete());
        let t = store.turn(&tid("t1"))?;
        let paths: Vec<&str> = t.files.iter().map(|c| c.entry.path.as_str()).collect();
        assert_eq!(paths, ["ok.txt", "sneaky.txt"]);
        // Rewinding touches only what was imported.
        std::fs::write(o.root.join("ok.txt"), b"changed\n")?;
        let done = store.rewind(&tid("t1"), &RewindOptions::default())?;
        assert_eq!(std::fs::read(o.root.join("ok.txt"))?, b"fine\n");
        assert_eq!(done.failed.len(), 1);
        assert_eq!(std::fs::read_dir(&o.outside)?.count(), outside_before);
        assert!(!o.root.join("x").exists() && !o.root.parent().expect("base").join("x").exists());
        Ok(())
    }

    #[test]
    fn a_damaged_missing_or_symlinked_blob_is_recorded_as_not_saved() -> TestResult {
        let mut o = Osf::new()?;
        for n in ["good", "flipped", "missing", "linked"] {
            std::fs::write(o.root.join(n), format!("{n} now\n"))?;
        }
        let good = o.content(b"good before\n");
        let flipped = o.content(b"flipped before\n");
        let sha_flipped = flipped["sha256"].as_str().expect("sha").to_owned();
        std::fs::write(o.dir.join("blobs").join(&sha_flipped), b"flipped bef0re\n")?;
        let missing = o.content(b"missing before\n");
        std::fs::remove_file(
            o.dir
                .join("blobs")
                .join(missing["sha256"].as_str().expect("sha")),
        )?;
        let linked = o.content(b"linked before\n");
        let sha_linked = linked["sha256"].as_str().expect("sha").to_owned();
        let blob = o.dir.join("blobs").join(&sha_linked);
        std::fs::rename(&blob, o.outside.join("same-bytes"))?;
        std::os::unix::fs::symlink(o.outside.join("same-bytes"), &blob)?;
        let files = vec![
            (o.abs("good"), good),
            (o.abs("flipped"), flipped),
            (o.abs("missing"), missing),
            (o.abs("linked"), linked),
        ];
        o.turn(json!("t1"), 100, files);

        let mut store = Store::open(&o.root)?;
        let report = store.import_osfoundry(&o.root)?;
        let bad: Vec<(&str, &str)> = report
            .not_saved
            .iter()
            .map(|n| (n.path.as_str(), n.reason.as_str()))
            .collect();
        assert_eq!(bad.len(), 3, "{report:#?}");
        assert!(
            bad[0].0 == "flipped"
                && bad[0].1.contains(&sha_flipped)
                && bad[0].1.contains("damaged")
        );
        assert!(bad[1].0 == "missing" && bad[1].1.contains("missing"));
        assert!(bad[2].0 == "linked" && bad[2].1.contains("not a regular file"));
        let done = store.rewind(&tid("t1"), &RewindOptions::default())?;
        assert_eq!(std::fs::read(o.root.join("good"))?, b"good before\n");
        let failed: Vec<&str> = done.failed.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(failed, ["flipped", "linked", "missing"]);
        // Left as they were, never overwritten with unverified bytes.
        assert_eq!(std::fs::read(o.root.join("flipped"))?, b"flipped now\n");
        assert_eq!(std::fs::read(o.root.join("linked"))?, b"linked now\n");
        Ok(())
    }

    #[test]
    fn the_mode_is_the_current_files_or_0644() -> TestResult {
        let mut o = Osf::new()?;
        std::fs::write(o.root.join("tool"), b"now\n")?;
        set_mode(&o.root.join("tool"), 0o4755);
        let files = vec![
            (o.abs("tool"), o.content(b"before\n")),
            (o.abs("gone"), o.content(b"was here\n")),
        ];
        o.turn(json!("t1"), 100, files);
        let mut store = Store::open(&o.root)?;
        store.import_osfoundry(&o.root)?;
        let modes: Vec<(String, u32)> = store.turns()?[0]
            .files
            .iter()
            .filter_map(|c| match c.entry.pre {
                Pre::File { mode, .. } => Some((c.entry.path.to_string(), mode)),
                _ => None,
            })
            .collect();
        assert_eq!(
            modes,
            [("tool".into(), 0o755), ("gone".into(), DEFAULT_MODE)]
        );
        Ok(())
    }

    #[test]
    fn an_older_turn_behind_a_native_one_or_a_colliding_id_is_refused() -> TestResult {
        let mut o = Osf::new()?;
        std::fs::write(o.root.join("a.txt"), b"a\n")?;
        let mut store = Store::open(&o.root)?;
        store.write(&tid("1"), None, "a.txt", b"native\n")?;
        let files = vec![(o.abs("b.txt"), json!({"kind": "absent"}))];
        o.turn(json!(1), 100, files.clone());
        o.turn(json!("old"), 100, files.clone());
        o.turn(json!("future"), u64::MAX, files);
        let report = store.import_osfoundry(&o.root)?;
        let refused: Vec<&str> = report
            .refused_turns
            .iter()
            .map(|r| r.turn.as_str())
            .collect();
        assert_eq!(refused, ["1", "old"], "{report:#?}");
        assert!(report.refused_turns[0].reason.contains("other paths"));
        assert!(report.refused_turns[1].reason.contains("older"));
        let turns: Vec<&str> = store.turns()?.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(turns, ["1", "future"]);
        assert_eq!(store.turn(&tid("1"))?.files[0].entry.path.as_str(), "a.txt");
        Ok(())
    }

    #[test]
    fn a_malformed_index_imports_nothing() -> TestResult {
        let o = Osf::new()?;
        let mut store = Store::open(&o.root)?;
        for bad in [
            &b"{\"turn\": 1}"[..],
            b"[{\"turn\": 1, \"files\": []}]",
            b"[{\"turn\": \"\", \"at\": 1, \"files\": []}]",
            b"[{\"turn\": 1, \"at\": 1, \"files\": {}}]",
            b"[{\"turn\": 1, \"at\": 1, \"files\": [",
        ] {
            std::fs::write(o.dir.join(INDEX_FILE), bad)?;
            let err = store.import_osfoundry(&o.root).expect_err("refused");
            let msg = err.to_string();
            assert!(
                msg.contains("index.json") && msg.contains("nothing was imported"),
                "{msg}"
            );
            assert!(store.turns()?.is_empty());
        }
        assert!(crate::location::locate(&o.root, None)?.is_none());
        let missing = Store::open(&o.outside)?
            .import_osfoundry(&o.outside)
            .expect_err("none");
        assert!(missing.to_string().contains("no index.json"), "{missing}");
        Ok(())
    }
}
