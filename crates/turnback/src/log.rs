//! The log: `<store>/log.jsonl`, the store's only index.
//!
//! Format: one JSON object per line, appended, never rewritten in place.
//! Every record has `seq` (strictly increasing from 1, the order of turns:
//! wall-clock time is informational only), `at` (Unix time in nanoseconds)
//! and `type`. Its last field is `"crc"`: the CRC-32 (IEEE), as 8 lowercase
//! hex digits, of the line's bytes with `,"crc":"…"` removed, so a flipped
//! byte inside a string (a path, a blob id) is detected, not trusted.
//!
//! ```text
//! {"seq":1,"at":1700000000000000000,"type":"capture","turn":"t1","label":"fix","pack":"000000000001-0123456789abcdef.pack","blobs":[{"id":"<64 hex>","offset":8,"len":41,"size":52}],"files":[{"path":"src/a.rs","pre":{"kind":"file","blob":"<64 hex>","size":52,"mode":420}}],"crc":"1a2b3c4d"}
//! {"seq":2,"at":1700000000000000001,"type":"saved","files":[{"path":"src/a.rs","pre":{"kind":"file","blob":"<64 hex>","size":60,"mode":420}}],"crc":"…"}
//! {"seq":3,"at":1700000000000000002,"type":"rewind","turn":"t1","from_seq":1,"saved":2,"crc":"…"}
//! {"seq":4,"at":1700000000000000003,"type":"saved","files":[{"path":"gen","pre":{"kind":"absent"}}],"crc":"…"}
//! {"seq":5,"at":1700000000000000004,"type":"rolled_back","saved":4,"crc":"…"}
//! ```
//!
//! A path is a JSON string when its bytes are UTF-8 and otherwise an object
//! with its bytes in hex, `{"path":{"bytes_hex":"6b2fff"},...}` for `k/`
//! then the byte 0xFF (see [`crate::path`]); both forms are read anywhere a
//! path is.
//!
//! Invariants:
//! - A record is appended with one `write` to an `O_APPEND` descriptor and
//!   `fdatasync`ed before the operation reports success; everything a record
//!   names (packs) is durable before it.
//! - A final line without its newline is a torn append from a crash: it is
//!   ignored and reported, and cut off before the next append. Any other
//!   damaged line is an error naming its line number.
//! - A `capture` record's `files` list, per path, the state before the turn's
//!   first write; its `posts` (and a `seal` record's) the hashes of what the
//!   agent left (for a shell command's turn, what the command left).
//! - A file's state may carry `"link"`: its inode number, when it had more
//!   than one name (hard links). Paths with the same `link`, blob and mode
//!   were one file and are restored as one. Absent in records written
//!   before it existed, which read as files with one name.
//! - A `saved` record holds the state of paths just before a rewind,
//!   revert, undo or redo changed them, and precedes that operation's record.
//!   When the operation was interrupted before its record, the next
//!   mutation puts its paths back and appends a `rolled_back` record naming
//!   the `saved` record, which it directly follows (see [`crate::journal`]):
//!   a `saved` record that is the log's last one is the mark of an
//!   interrupted operation, and no other. Its states may be `aside`
//!   (`seq`, `n`, `size`, `mode`): a regular file kept whole in the store
//!   instead of read (see [`crate::aside`]). A later `packed` record
//!   (`saved`, `pack`, `blobs`, `files`) stores those files as blobs once
//!   the operation is done: each of its `files` replaces the `saved`
//!   record's state of that path, and an `aside` state it does not list
//!   (a kept file that was gone: the operation left that path alone) is
//!   dropped. An `aside` state may carry the `blob` its bytes hash to,
//!   when that was known without reading them.
//! - A `file` post-image may carry a `stat` (`dev`, `ino`, `size`, `mtime`,
//!   `ctime`): the file's look when it was hashed, recorded only when its
//!   `ctime` was before the file system's clock read first (see
//!   [`StatKey`]). Older binaries ignore it.
//! - A `rewind` record ends every live turn whose first record has
//!   `seq >= from_seq`; `revert` ends one turn; `undo` and `redo` name the
//!   operation they reverse, which must be on top of its stack. A `capture`
//!   record that adds paths to a turn the undone operation on top would end
//!   again empties the stack of undone operations (nothing can be redone
//!   after that: redoing it would leave those paths with the turn's bytes).
//! - A blob is introduced once, by the first record that needs it, with its
//!   pack (the record's, or its own `pack` field after gc) and, for a delta,
//!   its `base`, introduced earlier.
//! - A pre-image is one of `file` (`blob`, `size`, `mode`), `symlink`
//!   (`target`), `absent`, `dir` (`mode`: the permission bits with setuid,
//!   setgid and sticky, as `st_mode & 0o7777`), `fifo` (`mode`), `skipped`
//!   (`reason`, `size`: not saved, e.g. a socket or a file over the cap) or,
//!   in `saved` records only, `aside` (above).
//!   Stores written before `fifo` existed hold none; every older record
//!   reads unchanged.
//! - A `capture` record's `shared_with` names the other turns its files were
//!   recorded in too, when shell commands of several turns ran at once.
//! - A `snapshot` record introduces the blobs a tree scan stored (its
//!   pack), for a later `capture` record or the tree state (see
//!   [`crate::tree`]) to name.

use serde::{Deserialize, Serialize};

use crate::id::{BlobId, TurnId};
use crate::path::RelPath;

mod de;

/// The log's file name inside the store.
pub const LOG_FILE: &str = "log.jsonl";

/// One line of the log (read by [`de`], in one pass).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// Strictly increasing sequence number.
    pub seq: u64,
    /// Unix time in nanoseconds (informational).
    pub at: u64,
    /// What happened.
    #[serde(flatten)]
    pub op: Op,
}

/// The kinds of record.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// Pre-images saved for a turn.
    Capture {
        /// The turn.
        turn: TurnId,
        /// The turn's label, when the caller gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// The pack written for this record, if it stored new blobs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pack: Option<String>,
        /// The blobs stored in that pack.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blobs: Vec<StoredBlob>,
        /// The paths captured, each with its pre-image.
        files: Vec<FileEntry>,
        /// Post-images of writes made through turnback in this record.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        posts: Vec<PostEntry>,
        /// Other turns these `files` were recorded in as well: shell
        /// commands of those turns ran at the same time as this turn's, and
        /// any of them may have made the changes (see [`crate::snapshot`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        shared_with: Vec<TurnId>,
    },
    /// Post-images (hashes of what the agent left) recorded when a turn
    /// ends: `turnback seal`, or implicitly when the next turn begins.
    Seal {
        /// The turn.
        turn: TurnId,
        /// Each path the turn touched, with its state as the turn left it.
        posts: Vec<PostEntry>,
    },
    /// The state of paths just before a rewind, revert, undo or redo
    /// changed them: what that operation overwrote or deleted. Appended, with
    /// its blobs durable, before the operation touches the project, so
    /// nothing it replaces is ever lost.
    Saved {
        /// The pack holding the new blobs, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pack: Option<String>,
        /// Blobs stored in that pack.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blobs: Vec<StoredBlob>,
        /// Each path with its state before the operation.
        files: Vec<FileEntry>,
    },
    /// The files kept aside for a `saved` record (see [`crate::aside`]),
    /// read and stored as blobs once their operation was done: each entry
    /// replaces that record's state of the same path, and a kept file not
    /// listed was gone (its path left as it was): its state is dropped.
    Packed {
        /// The `saved` record.
        saved: u64,
        /// The pack holding the new blobs, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pack: Option<String>,
        /// Blobs stored in that pack.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blobs: Vec<StoredBlob>,
        /// Each path stored, with its state.
        files: Vec<FileEntry>,
    },
    /// Blobs stored by a tree snapshot (see [`crate::tree`]): the bytes of
    /// the files a scan found new or changed. Names no turn's pre-image by
    /// itself; a later `capture` record (the snapshot's after half) does.
    Snapshot {
        /// The turn the snapshot was taken for.
        turn: TurnId,
        /// Whether it was the after half.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        after: bool,
        /// The pack written for this record.
        pack: String,
        /// The blobs stored in that pack.
        blobs: Vec<StoredBlob>,
    },
    /// Turns undone by a rewind.
    Rewind {
        /// The turn named by the rewind.
        turn: TurnId,
        /// Every live turn whose first record has `seq >= from_seq` is ended
        /// (none when `paths` limits the rewind).
        from_seq: u64,
        /// The paths (files, or folders and all below them) the rewind was
        /// limited to: only they were put back, and no turn is ended. Empty:
        /// the whole of the turns.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        paths: Vec<RelPath>,
        /// The `saved` record holding what the rewind overwrote.
        saved: u64,
        /// Paths changed since the turn's post-image (kept in `saved`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<RelPath>,
        /// Paths changed since the turn's post-image and left as they were
        /// (`keep_conflicts`): the operation did not change them, so their
        /// states in `saved` are not put back by an undo.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kept: Vec<RelPath>,
        /// Paths that could not be restored, with the reason.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<FailedPath>,
    },
    /// One turn undone alone, later turns kept.
    Revert {
        /// The turn reverted.
        turn: TurnId,
        /// Its first record's sequence number (identifies it).
        turn_seq: u64,
        /// The paths the revert was limited to (as for a rewind): the turn
        /// stays live. Empty: the whole turn, which the revert ends.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        paths: Vec<RelPath>,
        /// The `saved` record holding what the revert overwrote.
        saved: u64,
        /// Paths left as they were (touched by a later turn, or changed
        /// since the turn and kept): not put back by an undo.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kept: Vec<RelPath>,
        /// Paths that could not be restored.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<FailedPath>,
    },
    /// The last rewind or revert still in effect was reversed.
    Undo {
        /// Sequence number of the rewind or revert undone.
        op: u64,
        /// The `saved` record holding what the undo overwrote.
        saved: u64,
        /// Paths that could not be restored.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<FailedPath>,
    },
    /// The last undo was reversed.
    Redo {
        /// Sequence number of the rewind or revert redone.
        op: u64,
        /// The `saved` record holding what the redo overwrote.
        saved: u64,
        /// Paths that could not be restored.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<FailedPath>,
    },
    /// The rewind, revert, undo or redo that appended the `saved` record
    /// just before this one was interrupted before its own record: what it
    /// changed was put back to the saved states (see [`crate::journal`]).
    RolledBack {
        /// The `saved` record of the interrupted operation.
        saved: u64,
        /// Paths left as they are, with the reason (changed by someone
        /// else since, or not restorable).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<FailedPath>,
    },
}

/// A path's state as an agent left it: only its hash is kept, to tell
/// whether someone changed it since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostEntry {
    /// The path.
    pub path: RelPath,
    /// Its state.
    pub post: Post,
}

/// The hash-only state of a path (read by [`de`]). Two states are equal
/// when they say the same thing of the path: a file's [`StatKey`] is how
/// its hash may be known again without reading it, not part of its state.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Post {
    /// A regular file with these bytes.
    File {
        /// SHA-256 of its bytes.
        sha256: BlobId,
        /// The file as it was looked at when it was hashed, when that look
        /// can be trusted later (see [`StatKey`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stat: Option<StatKey>,
    },
    /// A symlink.
    Symlink {
        /// Its target.
        target: String,
    },
    /// Nothing (the agent deleted it).
    Absent,
    /// A directory.
    Dir,
    /// Something turnback does not compare (a FIFO, or a file over the cap).
    Other,
}

impl PartialEq for Post {
    fn eq(&self, other: &Post) -> bool {
        match (self, other) {
            (Post::File { sha256: a, .. }, Post::File { sha256: b, .. }) => a == b,
            (Post::Symlink { target: a }, Post::Symlink { target: b }) => a == b,
            (Post::Absent, Post::Absent) | (Post::Dir, Post::Dir) | (Post::Other, Post::Other) => {
                true
            }
            _ => false,
        }
    }
}

impl Eq for Post {}

/// A regular file's identity and times, as `fstat` gave them just before
/// and just after its bytes were hashed (the same both times), recorded
/// only when its `ctime` was before the file system's clock read before
/// the hashing began. Any later change to the file sets its `ctime` to
/// that clock's "now" or later, so a file whose `lstat` still gives this
/// key holds the bytes hashed: a rewind then needs no read to know them
/// (see [`crate::aside`]). The racily clean case, a change within the
/// clock tick of the hashing, is what the `ctime` bound rules out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatKey {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime: i64,
    /// Status change time, nanoseconds since the epoch.
    pub ctime: i64,
}

impl StatKey {
    /// The key of `st` (a regular file's `stat`).
    pub(crate) fn of(st: &crate::sys::fs::Stat) -> StatKey {
        StatKey {
            dev: crate::sys::dev(st),
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: crate::sys::mtime_ns(st),
            ctime: crate::sys::ctime_ns(st),
        }
    }
}

/// A blob introduced by a capture record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredBlob {
    /// SHA-256 of the uncompressed bytes.
    pub id: BlobId,
    /// The pack holding it, when not the record's own pack (a record that
    /// gc rewrote names blobs that stay where earlier records put them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<String>,
    /// Offset of its zstd frame in the record's pack.
    pub offset: u64,
    /// Compressed length.
    pub len: u64,
    /// Uncompressed size.
    pub size: u64,
    /// The blob whose bytes are this frame's zstd reference prefix (a delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BlobId>,
}

/// One captured path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the root.
    pub path: RelPath,
    /// Its state before the turn.
    pub pre: Pre,
}

/// A path's state before a turn's first write to it (read by [`de`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Pre {
    /// A regular file.
    File {
        /// Its bytes.
        blob: BlobId,
        /// Its size.
        size: u64,
        /// Its permission bits.
        mode: u32,
        /// When it had more than one name (hard links): its inode number.
        /// Captured paths with the same `link`, bytes and mode were one
        /// file, and a rewind restores them as one file again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        link: Option<u64>,
    },
    /// A symlink (never followed).
    Symlink {
        /// Where it pointed.
        target: String,
    },
    /// Nothing was there (a file the agent created, or a directory its
    /// write had to create); a rewind removes it.
    Absent,
    /// A directory: one a turn removed, replaced or changed the mode of,
    /// or one a rewind or undo changed. A rewind makes it (or sets its mode).
    Dir {
        /// Its mode bits (permissions with setuid, setgid and sticky).
        mode: u32,
    },
    /// A FIFO (named pipe); a rewind makes a new one.
    Fifo {
        /// Its mode bits.
        mode: u32,
    },
    /// A regular file an operation replaced or removed, kept whole (not
    /// read) as a second name in the store: `aside/<seq>/<n / 1024>/<n>`
    /// (see [`crate::aside`]). Only in `saved` records.
    Aside {
        /// The `saved` record's sequence number.
        seq: u64,
        /// Its number within that record's kept files.
        n: u64,
        /// Its size when it was kept.
        size: u64,
        /// Its permission bits.
        mode: u32,
        /// Its bytes' hash, when it was known without reading them: the
        /// post-image's, the file unchanged since (see [`StatKey`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<BlobId>,
    },
    /// Not saved; a rewind reports it as not restored.
    Skipped {
        /// Why.
        reason: String,
        /// Its size, when known.
        size: u64,
    },
}

/// A path a rewind could not restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedPath {
    /// The path.
    pub path: RelPath,
    /// Why.
    pub reason: String,
}

const CRC_SUFFIX_LEN: usize = r#","crc":"00000000"}"#.len();

/// Serializes a record as one log line, newline included.
pub fn encode(record: &Record) -> Vec<u8> {
    // Measured first, then written into a buffer of its exact size: a line
    // may name 100,000 paths, and a growing buffer would hold up to twice
    // its bytes.
    let mut size = Counted(0);
    serde_json::to_writer(&mut size, record).expect("records always serialize");
    let mut line = Vec::with_capacity(size.0 - 1 + CRC_SUFFIX_LEN + 1);
    write_line(record, &mut line).expect("writing to memory does not fail");
    line
}

/// Writes `record` as one log line, newline included, to `out` as it is
/// serialized, never whole in memory (a saved record of 100,000 paths is
/// some 25 MB of JSON); the check is computed on the way. A line shorter
/// than [`WRITE_BLOCK`] reaches `out` in one write, as a line encoded whole
/// would; a longer one in blocks of that size. Returns the line's length.
/// An error leaves part of a line written: the caller cuts it off (a reader
/// would find it torn).
pub fn write_line(record: &Record, out: impl std::io::Write) -> std::io::Result<u64> {
    use std::io::Write as _;
    let mut w = Checked {
        out: std::io::BufWriter::with_capacity(WRITE_BLOCK, out),
        crc: crc32fast::Hasher::new(),
        held: None,
        len: 0,
    };
    // Serialized into blocks, so the check sees large slices, not every
    // token.
    let mut blocks = std::io::BufWriter::with_capacity(WRITE_BLOCK, &mut w);
    serde_json::to_writer(&mut blocks, record).map_err(std::io::Error::other)?;
    blocks.flush()?;
    drop(blocks);
    // The body's closing brace gives way to the check and the brace, then
    // the newline.
    if w.held != Some(b'}') {
        return Err(std::io::Error::other(
            "a record did not serialize as an object",
        ));
    }
    // The check covers the whole body, its closing brace included (what
    // `decode` re-computes).
    w.crc.update(b"}");
    let crc = w.crc.finalize();
    let tail = format!(r#","crc":"{crc:08x}"}}"#);
    w.out.write_all(tail.as_bytes())?;
    w.out.write_all(b"\n")?;
    w.out.flush()?;
    Ok(w.len + tail.len() as u64 + 1)
}

/// The size of the blocks [`write_line`] writes a long line in.
const WRITE_BLOCK: usize = 64 << 10;

/// A writer that passes bytes on to `out` and into the line's check, one
/// byte behind: the last byte written (the body's closing brace) is held
/// back.
struct Checked<W> {
    out: W,
    crc: crc32fast::Hasher,
    held: Option<u8>,
    len: u64,
}

impl<W: std::io::Write> Checked<W> {
    fn pass(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.crc.update(bytes);
        self.len += bytes.len() as u64;
        Ok(())
    }
}

impl<W: std::io::Write> std::io::Write for Checked<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some((&last, body)) = buf.split_last() else {
            return Ok(0);
        };
        if let Some(b) = self.held.take() {
            self.pass(&[b])?;
        }
        self.pass(body)?;
        self.held = Some(last);
        Ok(buf.len())
    }
    /// Passes nothing on: `out` is flushed once the line is whole, so a
    /// short line reaches it in one write.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer that only counts the bytes written to it.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Parses one line (without its newline).
pub fn decode(line: &[u8]) -> Result<Record, String> {
    if line.len() < CRC_SUFFIX_LEN + 2 {
        return Err("too short to be a record".into());
    }
    let (head, tail) = line.split_at(line.len() - CRC_SUFFIX_LEN);
    let hex = tail
        .strip_prefix(br#","crc":""#)
        .and_then(|t| t.strip_suffix(br#""}"#))
        .ok_or("no checksum at the end of the line")?;
    if !hex.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return Err("checksum is not 8 lowercase hex digits".into());
    }
    let want = std::str::from_utf8(hex)
        .ok()
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("checksum is not hex")?;
    // The check is over the line without its `crc` field (`head` and the
    // closing brace), computed in place: no copy of a line that may hold
    // 100,000 paths.
    let mut crc = crc32fast::Hasher::new();
    crc.update(head);
    crc.update(b"}");
    let got = crc.finalize();
    if got != want {
        return Err(format!(
            "checksum mismatch (line says {want:08x}, bytes give {got:08x})"
        ));
    }
    // Parsed whole: the `crc` field is one no record type has, so it is
    // passed over.
    serde_json::from_slice(line).map_err(|e| e.to_string())
}

/// The result of reading a stretch of the log.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Each complete line: its 1-based number and the record or what is wrong.
    pub lines: Vec<(usize, Result<Record, String>)>,
    /// A final line without newline: its line number and length in bytes.
    pub torn: Option<(usize, usize)>,
    /// Bytes of complete lines (the offset to continue from).
    pub consumed: usize,
}

/// Splits `bytes` into records; `first_line` is the number of the first.
pub fn parse(bytes: &[u8], first_line: usize) -> Parsed {
    let mut out = Parsed::default();
    let mut start = 0;
    let mut line_no = first_line;
    while start < bytes.len() {
        match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(n) => {
                let line = &bytes[start..start + n];
                out.lines.push((line_no, decode(line)));
                start += n + 1;
                out.consumed = start;
                line_no += 1;
            }
            None => {
                out.torn = Some((line_no, bytes.len() - start));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        let id: BlobId = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            .parse()
            .expect("valid");
        vec![
            Record {
                seq: 1,
                at: 1_700_000_000_000_000_000,
                op: Op::Capture {
                    turn: TurnId::new("t1").expect("valid"),
                    label: Some("fix the header".into()),
                    pack: Some("000000000001-0123456789abcdef.pack".into()),
                    blobs: vec![StoredBlob {
                        id,
                        pack: None,
                        offset: 8,
                        len: 13,
                        size: 4,
                        base: None,
                    }],
                    files: vec![
                        FileEntry {
                            path: RelPath::parse("src/a.rs").expect("valid"),
                            pre: Pre::File {
                                blob: id,
                                size: 4,
                                mode: 0o644,
                                link: None,
                            },
                        },
                        FileEntry {
                            path: RelPath::parse("src/b.rs").expect("valid"),
                            pre: Pre::File {
                                blob: id,
                                size: 4,
                                mode: 0o644,
                                link: Some(4242),
                            },
                        },
                        FileEntry {
                            path: RelPath::parse("new").expect("valid"),
                            pre: Pre::Absent,
                        },
                        FileEntry {
                            path: RelPath::parse("link").expect("valid"),
                            pre: Pre::Symlink {
                                target: "src/a.rs".into(),
                            },
                        },
                        FileEntry {
                            path: RelPath::parse("big.bin").expect("valid"),
                            pre: Pre::Skipped {
                                reason: "larger than the 1 GiB cap".into(),
                                size: 2 << 30,
                            },
                        },
                    ],
                    posts: vec![],
                    shared_with: vec![],
                },
            },
            Record {
                seq: 2,
                at: 1_700_000_000_000_000_001,
                op: Op::Rewind {
                    turn: TurnId::new("t1").expect("valid"),
                    from_seq: 1,
                    paths: vec![],
                    saved: 1,
                    conflicts: vec![],
                    kept: vec![],
                    failed: vec![],
                },
            },
            Record {
                seq: 3,
                at: 1_700_000_000_000_000_002,
                op: Op::Saved {
                    pack: None,
                    blobs: vec![],
                    files: vec![
                        FileEntry {
                            path: RelPath::parse("d").expect("valid"),
                            pre: Pre::Dir { mode: 0o2750 },
                        },
                        FileEntry {
                            path: RelPath::parse("p").expect("valid"),
                            pre: Pre::Fifo { mode: 0o640 },
                        },
                    ],
                },
            },
        ]
    }

    /// Pins the on-disk record format: a change here breaks every store
    /// already written and needs a format version bump.
    #[test]
    fn on_disk_record_format_is_pinned() {
        let lines: Vec<String> = sample()
            .iter()
            .map(|r| String::from_utf8(encode(r)).expect("utf8"))
            .collect();
        let id = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let want0 = [
            r#"{"seq":1,"at":1700000000000000000,"type":"capture","turn":"t1","label":"fix the header","#,
            r#""pack":"000000000001-0123456789abcdef.pack","blobs":[{"id":"ID","offset":8,"len":13,"size":4}],"#,
            r#""files":[{"path":"src/a.rs","pre":{"kind":"file","blob":"ID","size":4,"mode":420}},"#,
            r#"{"path":"src/b.rs","pre":{"kind":"file","blob":"ID","size":4,"mode":420,"link":4242}},"#,
            r#"{"path":"new","pre":{"kind":"absent"}},{"path":"link","pre":{"kind":"symlink","target":"src/a.rs"}},"#,
            r#"{"path":"big.bin","pre":{"kind":"skipped","reason":"larger than the 1 GiB cap","size":2147483648}}],"#,
            r#""crc":"8f9dccce"}"#,
            "\n",
        ]
        .concat()
        .replace("ID", id);
        assert_eq!(lines[0], want0);
        assert_eq!(
            lines[1],
            concat!(
                r#"{"seq":2,"at":1700000000000000001,"type":"rewind","turn":"t1","from_seq":1,"saved":1,"crc":"09e5ff02"}"#,
                "\n"
            )
        );
        // A directory's mode keeps its setgid bit (0o2750); a FIFO has its own kind.
        assert_eq!(
            lines[2],
            concat!(
                r#"{"seq":3,"at":1700000000000000002,"type":"saved","files":[{"path":"d","pre":{"kind":"dir","mode":1512}},"#,
                r#"{"path":"p","pre":{"kind":"fifo","mode":416}}],"crc":"4b00bc60"}"#,
                "\n"
            )
        );
    }

    /// Pins the form of a path that is not UTF-8, beside a UTF-8 one.
    #[test]
    #[cfg(unix)] // such a name exists on Unix only
    fn a_path_that_is_not_utf8_is_pinned_as_its_bytes_in_hex() {
        let r = Record {
            seq: 3,
            at: 7,
            op: Op::Capture {
                turn: TurnId::new("t2").expect("valid"),
                label: None,
                pack: None,
                blobs: vec![],
                files: vec![
                    FileEntry {
                        path: RelPath::from_bytes(b"k/\xff").expect("valid"),
                        pre: Pre::Absent,
                    },
                    FileEntry {
                        path: RelPath::parse("k/\u{e9}").expect("valid"),
                        pre: Pre::Absent,
                    },
                ],
                posts: vec![],
                shared_with: vec![],
            },
        };
        let line = encode(&r);
        assert_eq!(
            String::from_utf8(line.clone()).expect("utf8"),
            concat!(
                r#"{"seq":3,"at":7,"type":"capture","turn":"t2","files":["#,
                r#"{"path":{"bytes_hex":"6b2fff"},"pre":{"kind":"absent"}},"#,
                r#"{"path":"k/é","pre":{"kind":"absent"}}],"crc":"238dbbec"}"#,
                "\n"
            )
        );
        assert_eq!(decode(&line[..line.len() - 1]), Ok(r));
    }

    #[test]
    fn records_round_trip() {
        for r in sample() {
            let line = encode(&r);
            assert_eq!(decode(&line[..line.len() - 1]), Ok(r));
        }
    }

    /// The streamed line (as appended to the log) is the encoded one, its
    /// length as returned, whatever size of writes the sink takes.
    #[test]
    fn a_streamed_line_is_the_encoded_line() {
        /// Takes at most 3 bytes per call.
        struct Trickle(Vec<u8>);
        impl std::io::Write for Trickle {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let n = buf.len().min(3);
                self.0.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        /// Counts the writes it is given.
        struct Calls(usize);
        impl std::io::Write for Calls {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += 1;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        for r in sample() {
            let mut out = Trickle(Vec::new());
            let len = write_line(&r, &mut out).expect("written to memory");
            assert_eq!(out.0, encode(&r));
            assert_eq!(len, out.0.len() as u64);
            assert_eq!(decode(&out.0[..out.0.len() - 1]), Ok(r.clone()));
            // A short line in one write, as when lines were encoded whole.
            let mut calls = Calls(0);
            write_line(&r, &mut calls).expect("written to memory");
            assert_eq!(calls.0, 1);
        }
    }

    #[test]
    fn a_line_is_encoded_into_a_buffer_of_its_exact_size() {
        for r in sample() {
            let line = encode(&r);
            assert_eq!(line.capacity(), line.len(), "{line:?}");
        }
    }

    #[test]
    fn torn_last_line_is_reported_not_fatal() {
        let mut bytes: Vec<u8> = sample().iter().flat_map(encode).collect();
        let full = bytes.len();
        bytes.extend_from_slice(br#"{"seq":4,"at":5,"ty"#);
        let p = parse(&bytes, 1);
        assert_eq!(p.lines.len(), 3);
        assert!(p.lines.iter().all(|(_, r)| r.is_ok()));
        assert_eq!(p.torn, Some((4, 19)));
        assert_eq!(p.consumed, full);
    }

    #[test]
    fn malformed_middle_line_is_named_by_number() {
        let recs = sample();
        let mut bytes = encode(&recs[0]);
        bytes.extend_from_slice(b"not json\n");
        bytes.extend_from_slice(&encode(&recs[1]));
        let p = parse(&bytes, 1);
        assert_eq!(p.lines.len(), 3);
        assert!(p.lines[1].1.is_err());
        assert_eq!(p.lines[1].0, 2);
        assert!(p.torn.is_none());
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let line = encode(&sample()[0]);
        let body = &line[..line.len() - 1];
        for i in 0..body.len() {
            for bit in [0x01u8, 0x20, 0x80] {
                let mut m = body.to_vec();
                m[i] ^= bit;
                if m[i] == b'\n' {
                    continue;
                }
                assert!(
                    decode(&m).is_err(),
                    "flip at {i} (bit {bit:#x}) went unnoticed"
                );
            }
        }
    }

    #[test]
    fn hostile_paths_in_a_record_are_refused() {
        for bad in [
            "../x",
            "/etc/passwd",
            ".git/config",
            ".turnback/log.jsonl",
            "a//b",
        ] {
            let json = format!(
                r#"{{"seq":1,"at":0,"type":"capture","turn":"t","files":[{{"path":{bad:?},"pre":{{"kind":"absent"}}}}]}}"#
            );
            let crc = crc32fast::hash(json.as_bytes());
            let line = format!("{},\"crc\":\"{crc:08x}\"}}", &json[..json.len() - 1]);
            assert!(decode(line.as_bytes()).is_err(), "{bad}");
        }
    }
}
