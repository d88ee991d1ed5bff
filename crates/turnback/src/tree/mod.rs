//! The tree state: `<store>/tree`, what the last snapshot saw of the
//! project, one entry per path, used as a stat cache (a later scan hashes
//! only files whose metadata changed) and as the "before" side of the next
//! `snapshot --after`.
//!
//! Format (all integers little-endian):
//!
//! ```text
//! magic    "TBTREE3\n"          8 bytes; the digit is the format version
//! stamp    i64                  scan stamp, ns since the epoch, file-system clock
//! log_seq  u64                  last log sequence number when the tree was written
//! pending  u8                   1: a command window is open (a before half whose
//!                               after half has not run; `windows` lists them all)
//! turn     u16 len + UTF-8      the turn of the snapshot that wrote the tree
//! count    u32                  number of entries
//! counts   6 × u64              of those: files, their bytes, directories,
//!                               symlinks, excluded entries, unreadable ones
//! entries  sorted by path bytes, each:
//!   shared u16, suffix u16 + bytes   path: `shared` bytes of the previous path, then the suffix
//!   kind   u8                        1 file, 2 symlink, 3 directory, 4 excluded
//!   size u64, mtime i64 (ns), ctime i64 (ns), ino u64, mode u32   as lstat/fstat saw them
//!   file:     blob [u8; 32]          SHA-256 of the bytes read
//!   symlink:  u16 len + target bytes (UTF-8)
//!   excluded: reason u8 + u16 len + detail bytes (UTF-8)
//! index    the entries' summary, read in place by a partial read:
//!   runs   r × (crc u32, unreadable u32)  per run of entries (see starts), the
//!                               CRC-32 of its bytes and how many of its
//!                               entries are unreadable
//!   files  f × u64              the inodes of the file entries, sorted
//!   others o × u64              the inodes of the other entries that are not
//!                               directories (symlinks, excluded), sorted
//!   r u32, f u32, o u32
//!   crc    u32                  CRC-32 of the bytes from the magic to the
//!                               first entry, then of the index before this
//!                               field, then of the starts with their number
//! starts   n × (index u32, offset u64)   the entries a decoder can begin
//!                               at: every [`STRIDE`]th (the first excepted),
//!                               each sharing nothing with the path before
//!                               it, and where it begins in the file
//! n        u32                  number of starts (r = n + 1)
//! crc      u32                  CRC-32 (IEEE) of every byte before it
//! ```
//!
//! The starts let a large tree be decoded on every core (as git's index
//! entry offset table does): read whole, each run into its own part of the
//! entries' memory; read in part or with a delta's changes, each run with
//! its share of the changes into its own list, the lists then joined.
//! Every decoder checks them: each start where the previous run ends,
//! sharing nothing, the runs in order across their ends, as many runs as
//! the index has. A whole read verifies the final CRC, and that the
//! header's counts are those of the entries; a partial read verifies the
//! index's CRC and the CRC of each run it reads, and reads only the runs
//! that may hold a path it wants (see [`partial`]). Versions 2
//! (`TBTREE2`: no counts, no index) and 1 (`TBTREE1`: no starts, no `n`
//! either, one run) are still read, whole; the next half that changes
//! such a tree writes it whole, as version 3, not a delta of it.
//!
//! Paths are relative to the root, `/`-separated, raw bytes, not
//! necessarily UTF-8 (an excluded entry may have a name the store cannot
//! hold, such as one with a backslash; every other entry's path is a valid
//! [`crate::RelPath`]).
//!
//! An excluded directory is not walked for its contents, but its subtree is
//! stat-walked: its entry's `mtime` and `ctime` are the latest over the
//! directory and everything beneath it, so an edit deep inside it (which
//! sets that file's ctime to "now") changes the entry and is reported as
//! not captured.
//!
//! Invariants:
//! - Written only under the store lock, as a temporary file, then
//!   `fdatasync`, rename to `tree`, fsync of `.turnback/`. Readers see the old
//!   tree or the new one, never a mix. The stamp is read from the file
//!   system's clock (the clock that stamps the project's files) when the
//!   scan starts: the kernel sets the times of `<store>/tree-stamp` to
//!   "now" and they are read back.
//! - Every blob a file entry names was made durable, and introduced by a log
//!   record, before the tree naming it was renamed into place. An entry whose
//!   blob the log does not know is not trusted: the next scan hashes the file
//!   again, and a diff reports its pre-image as not saved. A future gc must
//!   keep every blob the tree names.
//! - An entry whose mtime or ctime is at or after the tree's stamp is
//!   "racily clean": the file may have changed within the clock tick after it
//!   was read, so the next scan hashes it instead of trusting its stat.
//! - A damaged tree (bad magic, version, checksum, truncation) is reported
//!   and treated as absent: the next scan hashes every file again (blobs
//!   already stored are not stored twice).
//! - The log keeps introducing every blob the tree names: the log is only
//!   appended to, and gc, which replaces it, keeps every blob the tree
//!   state names (see [`crate::gc`]). So a scan trusts a file's blob by its
//!   stat alone, without looking the blob up in the index, unless:
//!   - the log holds fewer records than when the tree (or its head) was
//!     written: it was cut or replaced by another;
//!   - `<store>/tree-recheck` ([`RECHECK_FILE`]) is there: `turnback
//!     repair` makes it, durably, before it replaces the log, since the
//!     damaged lines it drops may have introduced blobs the tree names.
//!
//!   Then every blob the stat cache vouches for is looked up, a file whose
//!   blob the log no longer introduces is read and stored again, and the
//!   file is removed once a tree (or head) is written after that scan.
//!
//! The delta, `<store>/tree-delta` (see [`delta`]): a snapshot half that
//! Watchman told what changed, and that changed few paths, writes only
//! those paths (their entries, or that they are gone), with the header of
//! the tree they make and the identity (length, final CRC field) of the
//! tree file they apply to, instead of the whole tree. Each delta holds
//! every change since the tree file was written, up to a sixteenth of its
//! entries; past that the tree is written whole. A reader applies the
//! delta only when it names the tree file in place. Written as the tree
//! is (temporary file, `fdatasync`, rename, fsync of the store), and
//! removed before a new tree file is renamed into place: a crash between
//! leaves the older tree, as a lost tree write does. The blobs of the tree
//! file's entries a delta replaced stay named (gc keeps them).
//!
//! A partial read (see [`partial`]): a half that looks only at the paths
//! Watchman named reads only the runs of the tree file that may hold the
//! entries at, below and above them; the counts and inodes of the whole
//! tree come from the header (the delta's when one applies) and the
//! index; whatever needs more reads the whole tree.
//!
//! The head, `<store>/tree-head`: a scan that finds every entry as the
//! tree has it (nothing hashed, nothing changed: the common case before and
//! after a read-only command) does not rewrite the tree, which is large; it
//! writes only the header fields that changed, to this small file:
//!
//! ```text
//! magic    "TBHEAD2\n"          8 bytes
//! tree_len u64                  length of the tree file it belongs to
//! tree_crc u32                  that file's final CRC field
//! log_seq  u64, pending u8, turn u16 len + UTF-8    replace the tree's own
//! note     u32 len + bytes      what the caller keeps with this header
//! crc      u32                  CRC-32 (IEEE) of every byte before it
//! ```
//!
//! The note is the open command windows (see [`crate::exec_window`]), so
//! that a half which leaves the tree file as it is replaces one file, not
//! two; this module does not read it. A head of format 1 (`TBHEAD1`, no
//! note) is still read.
//!
//! A reader applies the head only when it is whole and names the tree file
//! in place by length and CRC (the delta, when one applies); otherwise the
//! tree's own header (or the delta's) stands. It is
//! written by temporary file and rename but not fsynced, like the index
//! checkpoint: it names no blob, and losing it in a power cut only loses
//! the "pending" mark of a command whose process the power cut killed too
//! (the next before half then takes that command's changes into the tree
//! without recording them into its turn, exactly as after a lost tree
//! write). It is removed before a new tree is renamed into place.

use crate::sys::OwnedFd;
use std::io::{Read, Write};

mod delta;
mod partial;
pub(crate) use delta::{Change, Delta, compose, fits as delta_fits};
pub use delta::{DELTA_FILE, DELTA_MAGIC};
pub(crate) use partial::{Partial, Totals, Wanted, load_partial};
use std::path::Path;

use crate::sys::fs::OFlags;

use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::id::{BlobId, TurnId};
use crate::path::RelPath;

/// The tree state's file name inside the store.
pub const TREE_FILE: &str = "tree";

/// The first bytes of a tree file.
pub const MAGIC: &[u8; 8] = b"TBTREE3\n";

/// The first bytes of a tree file of the format before starts (see the
/// module doc), still read.
const MAGIC_1: &[u8; 8] = b"TBTREE1\n";

/// The first bytes of a tree file of the format before its index (see
/// the module doc), still read.
const MAGIC_2: &[u8; 8] = b"TBTREE2\n";

/// Every this many entries, the tree file names a start (see the module
/// doc): some 400 runs for 100,000 entries, small enough that a half
/// Watchman told of a hundred paths spread over the tree reads a quarter
/// of it, and many enough for the pool to share a whole read out evenly.
const STRIDE: usize = 256;

/// The file whose times a scan sets to read the file system's clock.
pub const STAMP_FILE: &str = "tree-stamp";

/// The head's file name inside the store.
pub const HEAD_FILE: &str = "tree-head";

/// The first bytes of a head file.
pub const HEAD_MAGIC: &[u8; 8] = b"TBHEAD2\n";

/// The first bytes of a head file of the format before notes, still read.
const HEAD_MAGIC_1: &[u8; 8] = b"TBHEAD1\n";

/// The largest note a head carries (the open windows file is read to as
/// much; see [`crate::exec_window`]).
const NOTE_MAX: u64 = 16 << 20;

/// The most bytes a head is read to: its fields and the largest note.
const HEAD_MAX: u64 = NOTE_MAX + 4096;

/// The file whose presence makes the next scan look up every blob the stat
/// cache vouches for (see the module doc).
pub const RECHECK_FILE: &str = "tree-recheck";

/// What `lstat` (or `fstat` of the file read) said about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i64,
    /// Inode number.
    pub ino: u64,
    /// `st_mode`: file type and permission bits.
    pub mode: u32,
}

impl Stat {
    /// Of an open file (`fstat`).
    pub fn of_file(f: &std::fs::File) -> std::io::Result<Stat> {
        Ok(Stat::of_raw(&crate::sys::fs::fstat(f)?))
    }

    /// From a raw `stat` record (as `fstatat` returns it); equal to
    /// [`Stat::of_file`] for the same file.
    pub(crate) fn of_raw(st: &crate::sys::fs::Stat) -> Stat {
        Stat {
            size: st.st_size as u64,
            mtime_ns: crate::sys::mtime_ns(st),
            ctime_ns: crate::sys::ctime_ns(st),
            ino: st.st_ino,
            mode: crate::sys::mode(st),
        }
    }

    /// Whether the file may have changed after it was read by a scan with
    /// this stamp without its stat showing it.
    pub fn racy(&self, stamp_ns: i64) -> bool {
        self.mtime_ns.max(self.ctime_ns) >= stamp_ns
    }

    /// The permission bits.
    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// Why a scan leaves a path out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Excluded {
    /// A default exclusion (the pattern, e.g. `node_modules/`).
    Default(String),
    /// A pattern of `.turnbackignore`.
    IgnoreFile(String),
    /// A file larger than the size cap (the cap in bytes).
    TooLarge(u64),
    /// A FIFO, socket or device.
    Special,
    /// A name the store cannot hold (not UTF-8, a backslash, too long).
    BadName(String),
    /// The path could not be read (the error).
    Unreadable(String),
}

impl Excluded {
    /// The code of [`Excluded::Unreadable`] in the tree file.
    const UNREADABLE: u8 = 6;

    fn code(&self) -> (u8, String) {
        match self {
            Excluded::Default(p) => (1, p.clone()),
            Excluded::IgnoreFile(p) => (2, p.clone()),
            Excluded::TooLarge(cap) => (3, cap.to_string()),
            Excluded::Special => (4, String::new()),
            Excluded::BadName(why) => (5, why.clone()),
            Excluded::Unreadable(why) => (Excluded::UNREADABLE, why.clone()),
        }
    }

    fn from_code(code: u8, detail: String) -> std::result::Result<Excluded, String> {
        Ok(match code {
            1 => Excluded::Default(detail),
            2 => Excluded::IgnoreFile(detail),
            3 => Excluded::TooLarge(
                detail
                    .parse()
                    .map_err(|_| format!("bad size cap {detail:?}"))?,
            ),
            4 => Excluded::Special,
            5 => Excluded::BadName(detail),
            Excluded::UNREADABLE => Excluded::Unreadable(detail),
            c => return Err(format!("unknown exclusion code {c}")),
        })
    }

    /// A sentence for people: why the path is not covered and what to do.
    pub fn describe(&self) -> String {
        match self {
            Excluded::Default(p) => {
                format!("excluded by default ({p}); a line `!{p}` in .turnbackignore covers it")
            }
            Excluded::IgnoreFile(p) => format!("excluded by .turnbackignore ({p})"),
            Excluded::TooLarge(cap) => {
                format!("larger than the {cap}-byte cap (--max-file-size)")
            }
            Excluded::Special => "not a regular file, directory or symlink".into(),
            Excluded::BadName(why) => format!("its name cannot be stored: {why}"),
            Excluded::Unreadable(why) => format!("it cannot be read: {why}"),
        }
    }
}

/// What a path is, per the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file and the id of its bytes.
    File {
        /// SHA-256 of the bytes read.
        blob: BlobId,
    },
    /// A symlink (never followed).
    Symlink {
        /// Where it points.
        target: String,
    },
    /// A directory (walked).
    Dir,
    /// Left out of the snapshot; a directory is not walked.
    Excluded(Excluded),
}

/// One path of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Root-relative, `/`-separated, raw bytes.
    pub path: Vec<u8>,
    /// Its metadata when it was scanned.
    pub stat: Stat,
    /// What it is.
    pub kind: Kind,
}

impl Entry {
    /// The path for display (bytes that are not UTF-8 as `\xNN`).
    pub fn path_lossy(&self) -> String {
        crate::path::escaped(&self.path)
    }

    /// Its kind as the tree file writes it (`KIND_*`).
    fn kind_code(&self) -> u8 {
        match &self.kind {
            Kind::File { .. } => KIND_FILE,
            Kind::Symlink { .. } => KIND_SYMLINK,
            Kind::Dir => KIND_DIR,
            Kind::Excluded(_) => KIND_EXCLUDED,
        }
    }

    /// Whether it is a path that could not be read.
    pub(crate) fn is_unreadable(&self) -> bool {
        matches!(self.kind, Kind::Excluded(Excluded::Unreadable(_)))
    }
}

/// The whole tree state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The scan stamp (see the module doc on racily clean entries).
    pub stamp_ns: i64,
    /// The last log sequence number when it was written.
    pub log_seq: u64,
    /// The turn of the snapshot that wrote it.
    pub turn: TurnId,
    /// Whether it is a before-snapshot whose after half has not run.
    pub pending: bool,
    /// Entries sorted by path bytes, no duplicates.
    pub entries: Vec<Entry>,
}

/// The outcome of reading the tree file.
#[derive(Debug)]
pub enum Loaded {
    /// No tree file: no snapshot was taken yet.
    Missing,
    /// A damaged tree file, and what is wrong with it.
    Damaged(String),
    /// The tree.
    Tree(Tree),
}

const KIND_FILE: u8 = 1;
const KIND_SYMLINK: u8 = 2;
const KIND_DIR: u8 = 3;
const KIND_EXCLUDED: u8 = 4;

fn put_str16(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len().min(u16::MAX as usize);
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&s[..n]);
}

/// Serializes a tree (checksum included).
pub fn encode(tree: &Tree) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + tree.entries.len() * 96);
    encode_into(tree, &mut out).expect("writing to a vector does not fail");
    out
}

/// Writes a tree (checksum included) to `to` in pieces of about 64 KiB:
/// never whole in memory (a tree of 100,000 paths is some 10 MB, written
/// while the scan's entries and the index are held). Returns its length.
pub fn encode_into(tree: &Tree, to: &mut impl Write) -> std::io::Result<u64> {
    const PIECE: usize = 64 << 10;
    let mut crc = crc32fast::Hasher::new();
    // Bytes written before those in `out`.
    let mut len = 0u64;
    let mut out = Vec::with_capacity(PIECE + 512);
    let mut put = |out: &mut Vec<u8>, len: &mut u64| -> std::io::Result<()> {
        crc.update(out);
        *len += out.len() as u64;
        to.write_all(out)?;
        out.clear();
        Ok(())
    };
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&tree.stamp_ns.to_le_bytes());
    out.extend_from_slice(&tree.log_seq.to_le_bytes());
    out.push(u8::from(tree.pending));
    put_str16(&mut out, tree.turn.as_str().as_bytes());
    out.extend_from_slice(&(tree.entries.len() as u32).to_le_bytes());
    Totals::of(&tree.entries).put_counts(&mut out);
    let mut table_crc = crc32fast::Hasher::new();
    table_crc.update(&out);
    let mut prev: &[u8] = &[];
    let mut starts: Vec<Start> = Vec::new();
    let mut runs = vec![RunSum::default()];
    let (mut files, mut others) = (Vec::new(), Vec::new());
    for (i, e) in tree.entries.iter().enumerate() {
        let shared = if i > 0 && i % STRIDE == 0 {
            starts.push(Start {
                index: i,
                offset: len + out.len() as u64,
            });
            runs.push(RunSum::default());
            0
        } else {
            prev.iter()
                .zip(&e.path)
                .take_while(|(a, b)| a == b)
                .count()
                .min(u16::MAX as usize)
        };
        let at = out.len();
        out.extend_from_slice(&(shared as u16).to_le_bytes());
        put_str16(&mut out, &e.path[shared..]);
        put_body(&mut out, e);
        let run = runs
            .last_mut()
            .expect("a run is made before the first entry");
        run.crc.update(&out[at..]);
        run.unreadable += u32::from(e.is_unreadable());
        match e.kind {
            Kind::File { .. } => files.push(e.stat.ino),
            Kind::Dir => {}
            _ => others.push(e.stat.ino),
        }
        prev = &e.path;
        if out.len() >= PIECE {
            put(&mut out, &mut len)?;
        }
    }
    files.sort_unstable();
    others.sort_unstable();
    let index_at = out.len();
    for run in &runs {
        out.extend_from_slice(&run.crc.clone().finalize().to_le_bytes());
        out.extend_from_slice(&run.unreadable.to_le_bytes());
    }
    for ino in files.iter().chain(&others) {
        out.extend_from_slice(&ino.to_le_bytes());
    }
    for n in [runs.len(), files.len(), others.len()] {
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    table_crc.update(&out[index_at..]);
    let mut table = Vec::with_capacity(starts.len() * 12 + 4);
    for s in &starts {
        table.extend_from_slice(&(s.index as u32).to_le_bytes());
        table.extend_from_slice(&s.offset.to_le_bytes());
    }
    table.extend_from_slice(&(starts.len() as u32).to_le_bytes());
    table_crc.update(&table);
    out.extend_from_slice(&table_crc.finalize().to_le_bytes());
    out.extend_from_slice(&table);
    put(&mut out, &mut len)?;
    let crc = crc.finalize();
    to.write_all(&crc.to_le_bytes())?;
    Ok(len + 4)
}

/// What the writer keeps of a run of entries for its index (see the
/// module doc): their checksum and how many are unreadable.
#[derive(Default)]
struct RunSum {
    crc: crc32fast::Hasher,
    unreadable: u32,
}

/// Writes what an entry holds after its path: kind, stat and what its kind
/// carries.
fn put_body(out: &mut Vec<u8>, e: &Entry) {
    out.push(e.kind_code());
    let s = &e.stat;
    out.extend_from_slice(&s.size.to_le_bytes());
    out.extend_from_slice(&s.mtime_ns.to_le_bytes());
    out.extend_from_slice(&s.ctime_ns.to_le_bytes());
    out.extend_from_slice(&s.ino.to_le_bytes());
    out.extend_from_slice(&s.mode.to_le_bytes());
    match &e.kind {
        Kind::File { blob } => out.extend_from_slice(&blob.0),
        Kind::Symlink { target } => put_str16(out, target.as_bytes()),
        Kind::Dir => {}
        Kind::Excluded(x) => {
            let (code, detail) = x.code();
            out.push(code);
            put_str16(out, detail.as_bytes());
        }
    }
}

/// Reads what [`put_body`] wrote, for the entry `i` at `path` (checked:
/// not empty, and storable unless excluded).
fn read_body(r: &mut Reader<'_>, i: usize, path: Vec<u8>) -> std::result::Result<Entry, String> {
    if path.is_empty() {
        return Err(format!("entry {i}: empty path"));
    }
    let (kind, stat) = read_kind_stat(r)?;
    let kind = match kind {
        KIND_FILE => Kind::File {
            blob: BlobId(r.arr()?),
        },
        KIND_SYMLINK => Kind::Symlink { target: r.utf8()? },
        KIND_DIR => Kind::Dir,
        KIND_EXCLUDED => {
            let code = r.u8()?;
            let detail = r.utf8()?;
            Kind::Excluded(Excluded::from_code(code, detail)?)
        }
        k => return Err(format!("entry {i}: unknown kind {k}")),
    };
    if !matches!(kind, Kind::Excluded(_)) && RelPath::check_bytes(&path).is_err() {
        return Err(format!("entry {i}: a covered path the store cannot hold"));
    }
    Ok(Entry { path, stat, kind })
}

/// An entry's kind and stat: 37 bytes, read at once.
fn read_kind_stat(r: &mut Reader<'_>) -> std::result::Result<(u8, Stat), String> {
    let head: [u8; 37] = r.arr()?;
    let field = |at: usize| -> [u8; 8] {
        let mut b = [0; 8];
        b.copy_from_slice(&head[at..at + 8]);
        b
    };
    let stat = Stat {
        size: u64::from_le_bytes(field(1)),
        mtime_ns: i64::from_le_bytes(field(9)),
        ctime_ns: i64::from_le_bytes(field(17)),
        ino: u64::from_le_bytes(field(25)),
        mode: u32::from_le_bytes([head[33], head[34], head[35], head[36]]),
    };
    Ok((head[0], stat))
}

/// A reader of the fields of a framed store file (this tree file, the
/// fsmonitor state): magic, version, fields, CRC-32 of all before it.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// The fields of `bytes` after its magic, once the magic (the first
    /// seven bytes name the kind, the eighth its version), and the
    /// checksum in its last four bytes are verified. `what` names the kind
    /// (`"a tree file"`), `format` its format (`"tree format"`).
    pub(crate) fn framed(
        bytes: &'a [u8],
        magic: &[u8; 8],
        what: &str,
        format: &str,
    ) -> std::result::Result<Reader<'a>, String> {
        if bytes.len() < magic.len() + 4 {
            return Err(format!("too short to be {what}"));
        }
        if bytes[..7] != magic[..7] {
            return Err(format!("not {what} (bad magic)"));
        }
        if bytes[..8] != magic[..] {
            return Err(format!(
                "{format} version {:?} is not the one this turnback reads ({:?})",
                bytes[7] as char, magic[7] as char
            ));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        let want = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        let got = crc32fast::hash(body);
        if got != want {
            return Err(format!(
                "checksum mismatch (file says {want:08x}, bytes give {got:08x})"
            ));
        }
        Ok(Reader {
            buf: body,
            pos: magic.len(),
        })
    }

    /// [`Reader::framed`] without the checksum, which the caller verifies
    /// apart.
    fn unchecked(
        bytes: &'a [u8],
        magic: &[u8; 8],
        what: &str,
        format: &str,
    ) -> std::result::Result<Reader<'a>, String> {
        if bytes.len() < magic.len() + 4 || bytes[..8] != magic[..] {
            // The checked reader says what is wrong.
            return Reader::framed(bytes, magic, what, format);
        }
        Ok(Reader {
            buf: &bytes[..bytes.len() - 4],
            pos: magic.len(),
        })
    }

    /// How many bytes before the checksum are left unread.
    pub(crate) fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("truncated at byte {}", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> std::result::Result<u16, String> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    pub(crate) fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    pub(crate) fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    pub(crate) fn i64(&mut self) -> std::result::Result<i64, String> {
        Ok(i64::from_le_bytes(self.arr()?))
    }
    pub(crate) fn str16(&mut self) -> std::result::Result<&'a [u8], String> {
        let n = self.u16()? as usize;
        self.take(n)
    }
    /// The fields a tree file and a delta begin with: the stamp, the log
    /// sequence, the pending flag and the turn.
    fn tree_header(&mut self) -> std::result::Result<(i64, u64, bool, TurnId), String> {
        let stamp_ns = self.i64()?;
        let log_seq = self.u64()?;
        let pending = match self.u8()? {
            0 => false,
            1 => true,
            b => return Err(format!("bad pending flag {b}")),
        };
        let turn = TurnId::new(self.utf8()?).map_err(|e| e.to_string())?;
        Ok((stamp_ns, log_seq, pending, turn))
    }

    pub(crate) fn utf8(&mut self) -> std::result::Result<String, String> {
        let b = self.str16()?;
        String::from_utf8(b.to_vec())
            .map_err(|_| format!("text before byte {} is not UTF-8", self.pos))
    }
}

/// Parses a tree file's bytes.
pub fn decode(bytes: &[u8]) -> std::result::Result<Tree, String> {
    decode_with(bytes, &[], &mut Vec::new()).map(|(t, _)| t)
}

/// [`decode`], with a delta's `changes` (sorted by path) applied as the
/// entries are read: a change's entry replaces the file's at its path, or
/// is put in, and a path a change says is gone is left out. The blobs of
/// the file's entries a change replaced or removed are added to
/// `shadowed`. Also returns how many entries the file holds.
pub(crate) fn decode_with(
    bytes: &[u8],
    changes: &[Change],
    shadowed: &mut Vec<BlobId>,
) -> std::result::Result<(Tree, usize), String> {
    decode_keeping(bytes, changes, shadowed, None::<fn() -> KeepAll>).map(|(t, n, _)| (t, n))
}

/// Asked of every entry of a run of the tree a decoder makes (the tree
/// file's and a delta's), once and in path order, with its path, kind
/// (`KIND_*`), stat and whether it is unreadable: whether to keep it
/// (decode it whole).
pub(crate) trait Keep: Send {
    fn keep(&mut self, path: &[u8], kind: u8, stat: &Stat, unreadable: bool) -> bool;

    /// Told of every entry of the tree file a change replaced or removed
    /// (its kind and stat), when the run holding it is read.
    fn shadowed(&mut self, _kind: u8, _stat: &Stat) {}
}

/// Keeps every entry (the decoder then asks nothing).
pub(crate) struct KeepAll;

impl Keep for KeepAll {
    fn keep(&mut self, _: &[u8], _: u8, _: &Stat, _: bool) -> bool {
        true
    }
}

/// [`decode_with`], keeping only the entries a `K` says, a fresh one for
/// each run of entries (`fresh` makes them; every entry without it).
/// Also returns each run's `K`, in path order.
pub(super) fn decode_keeping<K: Keep, F: Fn() -> K + Sync + Send>(
    bytes: &[u8],
    changes: &[Change],
    shadowed: &mut Vec<BlobId>,
    fresh: Option<F>,
) -> std::result::Result<(Tree, usize, Vec<K>), String> {
    // A large tree: its checksum is worked out on another core while its
    // entries are decoded, or passed over (a damaged file's entries are
    // then dropped, its checksum's verdict given).
    if bytes.len() >= 1 << 20 && rayon::current_num_threads() > 1 {
        let r = match tree_reader(bytes, false) {
            Ok(r) => r,
            // The checksum speaks first.
            Err(e) => return tree_reader(bytes, true).and(Err(e)),
        };
        let (checked, decoded) = rayon::join(
            || tree_reader(bytes, true).map(|_| ()),
            || decode_entries(r, changes, shadowed, fresh, None),
        );
        checked?;
        return decoded.map(|d| (d.tree, d.count, d.kept));
    }
    decode_entries(tree_reader(bytes, true)?, changes, shadowed, fresh, None)
        .map(|d| (d.tree, d.count, d.kept))
}

/// Where a decoder can begin: the entry `index` shares nothing with the
/// path before it and begins at byte `offset` of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Start {
    index: usize,
    offset: u64,
}

/// The entries from one start (or the first) to the next (or the end).
#[derive(Debug, Clone, Copy)]
struct Run {
    from: Start,
    to: Start,
}

/// What [`tree_reader`] gives: a reader of a tree file's fields, its
/// starts and its index.
type Framed<'a> = (Reader<'a>, Vec<Start>, Option<Index<'a>>);

/// A tree file's fields after its magic up to its last entry, its starts
/// (none in version 1) and its index (version 3; not yet verified, see
/// [`Index::verify`]); its checksum verified when `checked`.
fn tree_reader(bytes: &[u8], checked: bool) -> std::result::Result<Framed<'_>, String> {
    let (what, format) = ("a tree file", "tree format");
    let magic = [MAGIC_1, MAGIC_2]
        .into_iter()
        .find(|m| bytes.starts_with(*m))
        .unwrap_or(MAGIC);
    let mut r = if checked {
        Reader::framed(bytes, magic, what, format)?
    } else {
        Reader::unchecked(bytes, magic, what, format)?
    };
    if magic == MAGIC_1 {
        return Ok((r, Vec::new(), None));
    }
    // The starts, then their number, end the fields.
    let end = r.buf.len();
    let at = end
        .checked_sub(4)
        .filter(|&at| at >= r.pos)
        .ok_or("truncated before its starts")?;
    let n = Reader {
        buf: r.buf,
        pos: at,
    }
    .u32()? as usize;
    let table = n
        .checked_mul(12)
        .and_then(|t| (end - 4).checked_sub(t))
        .filter(|&at| at >= r.pos)
        .ok_or("its table of starts is longer than the file")?;
    let mut t = Reader {
        buf: &r.buf[..end - 4],
        pos: table,
    };
    let mut starts = Vec::with_capacity(n);
    for _ in 0..n {
        let index = t.u32()? as usize;
        let offset = t.u64()?;
        starts.push(Start { index, offset });
    }
    let index = if magic == MAGIC {
        let (index, at) = Index::before(r.buf, table, r.pos)?;
        r.buf = &r.buf[..at];
        Some(index)
    } else {
        r.buf = &r.buf[..table];
        None
    };
    Ok((r, starts, index))
}

/// What version 3 writes between the entries and the starts (see the
/// module doc), as read from the file, not yet verified.
#[derive(Debug, Clone)]
pub(super) struct Index<'a> {
    /// A checksum and a count of unreadable entries (u32 each) per run.
    runs: &'a [u8],
    /// Where in the file the inodes of the file entries are, then those of
    /// the others that are not directories, each sorted (u64 each).
    files: std::ops::Range<usize>,
    others: std::ops::Range<usize>,
    /// The bytes its checksum covers after the header: from the index's
    /// first byte to its checksum, and the starts with their number.
    tables: &'a [u8],
    starts: &'a [u8],
    crc: u32,
}

impl<'a> Index<'a> {
    /// The index of the fields `buf` (a tree file less its checksum)
    /// whose starts begin at `table`, the entries at `first`; and where
    /// the index begins.
    fn before(
        buf: &'a [u8],
        table: usize,
        first: usize,
    ) -> std::result::Result<(Index<'a>, usize), String> {
        let short = || "its index is longer than the file".to_string();
        let counts_at = table
            .checked_sub(16)
            .filter(|&at| at >= first)
            .ok_or_else(short)?;
        let mut r = Reader {
            buf,
            pos: counts_at,
        };
        let (runs, files, others) = (r.u32()? as usize, r.u32()? as usize, r.u32()? as usize);
        let crc = r.u32()?;
        let len = |n: usize, size: usize| n.checked_mul(size).ok_or_else(short);
        let (runs_len, files_len, others_len) = (len(runs, 8)?, len(files, 8)?, len(others, 8)?);
        let at = runs_len
            .checked_add(files_len)
            .and_then(|n| n.checked_add(others_len))
            .and_then(|n| counts_at.checked_sub(n))
            .filter(|&at| at >= first)
            .ok_or_else(short)?;
        let files_at = at + runs_len;
        let others_at = files_at + files_len;
        Ok((
            Index {
                runs: &buf[at..files_at],
                files: files_at..others_at,
                others: others_at..counts_at,
                tables: &buf[at..table - 4],
                starts: &buf[table..],
                crc,
            },
            at,
        ))
    }

    /// Checks its checksum over `header` (the file's bytes up to its
    /// first entry), its tables and the starts.
    fn verify(&self, header: &[u8]) -> std::result::Result<(), String> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(header);
        crc.update(self.tables);
        crc.update(self.starts);
        let got = crc.finalize();
        if got != self.crc {
            return Err(format!(
                "index checksum mismatch (file says {:08x}, bytes give {got:08x})",
                self.crc
            ));
        }
        Ok(())
    }

    /// The checksum of run `k` and how many of its entries are unreadable.
    fn run(&self, k: usize) -> (u32, u32) {
        let at = k * 8;
        let word = |at: usize| {
            u32::from_le_bytes([
                self.runs[at],
                self.runs[at + 1],
                self.runs[at + 2],
                self.runs[at + 3],
            ])
        };
        (word(at), word(at + 4))
    }

    /// Where in the file the inodes of the file entries are (sorted, u64
    /// each).
    pub(super) fn files(&self) -> std::ops::Range<usize> {
        self.files.clone()
    }

    /// Where in the file the inodes of the entries that are neither files
    /// nor directories are (sorted, u64 each).
    pub(super) fn others(&self) -> std::ops::Range<usize> {
        self.others.clone()
    }
}

/// The runs of the `count` entries after `r`'s position, between its
/// `starts`, once they are checked to lie in order inside the entries.
fn runs_of(
    r: &Reader<'_>,
    count: usize,
    starts: &[Start],
) -> std::result::Result<Vec<Run>, String> {
    // Every entry takes at least 41 bytes: a hostile count cannot make us
    // allocate more than the file justifies.
    if count > r.left() / 41 {
        return Err(format!("{count} entries do not fit in {} bytes", r.left()));
    }
    let first = Start {
        index: 0,
        offset: r.pos as u64,
    };
    let end = Start {
        index: count,
        offset: r.buf.len() as u64,
    };
    let mut runs = Vec::with_capacity(starts.len() + 1);
    let mut from = first;
    for &s in starts {
        if s.index <= from.index
            || s.index >= count
            || s.offset <= from.offset
            || s.offset >= end.offset
        {
            return Err(format!(
                "a start names entry {} at byte {}, out of place",
                s.index, s.offset
            ));
        }
        runs.push(Run { from, to: s });
        from = s;
    }
    runs.push(Run { from, to: end });
    Ok(runs)
}

/// Whether the path made of the previous one's first bytes and `suffix`
/// comes after it, `rest` being the previous path past those bytes (a
/// byte compared in place, the two slices only when it is the same).
fn comes_after(suffix: &[u8], rest: &[u8]) -> bool {
    match (suffix.first(), rest.first()) {
        (Some(a), Some(b)) if a != b => a > b,
        _ => suffix > rest,
    }
}

/// Reads the path of entry `i` into `prev`, which holds the path before it
/// (empty for the first of a run: a path sharing bytes with nothing is
/// refused); checks it comes after that one unless it is the `first`.
fn next_path(
    r: &mut Reader<'_>,
    i: usize,
    prev: &mut Vec<u8>,
    first: bool,
) -> std::result::Result<(), String> {
    let shared = r.u16()? as usize;
    if shared > prev.len() {
        return Err(format!("entry {i}: shares more than the previous path"));
    }
    let suffix = r.str16()?;
    // The two paths share `shared` bytes: the new one comes after the
    // previous one when its suffix comes after the rest of it.
    if !first && !comes_after(suffix, &prev[shared..]) {
        return Err(format!("entry {i}: paths are not sorted"));
    }
    prev.truncate(shared);
    prev.extend_from_slice(suffix);
    Ok(())
}

/// The whole entry `i`: its path read into `prev` (see [`next_path`]),
/// then what follows it.
fn next_entry(
    r: &mut Reader<'_>,
    i: usize,
    prev: &mut Vec<u8>,
    first: bool,
) -> std::result::Result<Entry, String> {
    next_path(r, i, prev, first)?;
    read_body(r, i, prev.clone())
}

/// What a decoder gives.
pub(super) struct Decoded<'a, K> {
    pub(super) tree: Tree,
    /// How many entries the tree file holds.
    pub(super) count: usize,
    /// The keeper of each run, in order (none when every entry is kept).
    pub(super) kept: Vec<K>,
    /// Version 3: the whole file's counts and its index, verified.
    pub(super) index: Option<(Totals, Index<'a>)>,
}

/// Which runs of a tree file with an index a decoder reads: those whose
/// paths, from the run's first (empty for the first run) to the next
/// run's first (none for the last run), it says may hold an entry wanted;
/// and those holding unreadable entries.
pub(super) type Meets<'m> = &'m (dyn Fn(&[u8], Option<&[u8]>) -> bool + Sync);

/// [`decode_keeping`] of a tree file's fields, `r` just past its magic and
/// ending at its last entry, `starts` its starts; with `only`, of a file
/// with an index, only the runs it says (see [`Meets`]), each verified
/// by its own checksum.
fn decode_entries<'a, K: Keep, F: Fn() -> K + Sync + Send>(
    (mut r, starts, index): Framed<'a>,
    changes: &[Change],
    shadowed: &mut Vec<BlobId>,
    fresh: Option<F>,
    only: Option<Meets<'_>>,
) -> std::result::Result<Decoded<'a, K>, String> {
    let (stamp_ns, log_seq, pending, turn) = r.tree_header()?;
    let count = r.u32()? as usize;
    let index = match index {
        Some(index) => Some((Totals::read_counts(&mut r, count as u64)?, index)),
        None => None,
    };
    if let Some((_, index)) = &index {
        index.verify(&r.buf[..r.pos])?;
    }
    let runs = runs_of(&r, count, &starts)?;
    if let Some((_, index)) = &index
        && index.runs.len() / 8 != runs.len()
    {
        return Err(format!(
            "its index has {} runs, its starts make {}",
            index.runs.len() / 8,
            runs.len()
        ));
    }
    let (entries, kept) = if fresh.is_none() && changes.is_empty() {
        let (entries, found) = decode_in_place(r.buf, count, &runs)?;
        if let Some((totals, _)) = &index
            && found != *totals
        {
            return Err("its header's counts are not those of its entries".into());
        }
        (entries, Vec::new())
    } else {
        let only = only.zip(index.as_ref().map(|(_, index)| index.clone()));
        decode_parts(r.buf, &runs, changes, shadowed, fresh, only)?
    };
    let tree = Tree {
        stamp_ns,
        log_seq,
        turn,
        pending,
        entries,
    };
    Ok(Decoded {
        tree,
        count,
        kept,
        index,
    })
}

/// Every entry of the `runs` of `buf` (`count` of them), and their
/// counts: the runs decoded on the pool, a few thousand entries to a task,
/// each into its own part of the entries (and counted there, while they
/// are in the cache).
fn decode_in_place(
    buf: &[u8],
    count: usize,
    runs: &[Run],
) -> std::result::Result<(Vec<Entry>, Totals), String> {
    use rayon::prelude::*;
    /// Entries a pool task decodes at least (the runs are smaller, so
    /// that a partial read reads little; see [`STRIDE`]).
    const TASK: usize = 4096;
    let mut entries: Vec<Entry> = Vec::with_capacity(count);
    crate::sys::huge_pages(&mut entries);
    // One run (a small tree, or version 1): on this thread, the pool not
    // started for it (see `crate::par`).
    if let [run] = runs {
        let mut r = run.reader(buf);
        let mut prev = Vec::new();
        for i in 0..count {
            entries.push(next_entry(&mut r, i, &mut prev, i == 0)?);
        }
        run.ended(&r)?;
        let totals = Totals::of(&entries);
        return Ok((entries, totals));
    }
    // Placeholders first, written on every core: the memory's first touch
    // is shared out too.
    entries.par_extend((0..count).into_par_iter().map(|_| Entry {
        path: Vec::new(),
        stat: Stat::default(),
        kind: Kind::Dir,
    }));
    let mut tasks: Vec<(&mut [Entry], &[Run])> = Vec::new();
    let mut rest = entries.as_mut_slice();
    let mut from = 0;
    while from < runs.len() {
        let first = runs[from].from.index;
        let to = from + runs[from..].partition_point(|run| run.to.index - first < TASK) + 1;
        let to = to.min(runs.len());
        let (part, tail) = rest.split_at_mut(runs[to - 1].to.index - first);
        tasks.push((part, &runs[from..to]));
        rest = tail;
        from = to;
    }
    let totals = tasks
        .into_par_iter()
        .map(|(part, runs)| {
            let mut slots = part.iter_mut();
            for run in runs {
                let mut r = run.reader(buf);
                let mut prev = Vec::new();
                for (k, slot) in (&mut slots).take(run.to.index - run.from.index).enumerate() {
                    *slot = next_entry(&mut r, run.from.index + k, &mut prev, k == 0)?;
                }
                run.ended(&r)?;
            }
            Ok(Totals::of(part))
        })
        .collect::<std::result::Result<Vec<Totals>, String>>()?;
    // Each run's first path comes after the last of the run before it.
    if let Some(run) = runs[1..]
        .iter()
        .find(|run| entries[run.from.index - 1].path >= entries[run.from.index].path)
    {
        return Err(format!("entry {}: paths are not sorted", run.from.index));
    }
    let mut all = Totals::default();
    totals.iter().for_each(|t| all.add(t));
    Ok((entries, all))
}

impl Run {
    /// A reader of `buf` from the run's first entry to its end.
    fn reader<'a>(&self, buf: &'a [u8]) -> Reader<'a> {
        // `runs_of` checked the offsets lie in order inside `buf`.
        Reader {
            buf: &buf[..self.to.offset as usize],
            pos: self.from.offset as usize,
        }
    }

    /// Whether `r` read the run to its end, not short of it.
    fn ended(&self, r: &Reader<'_>) -> std::result::Result<(), String> {
        match r.left() {
            0 => Ok(()),
            n => Err(format!(
                "{n} bytes after entry {} where entry {} should begin",
                self.to.index.saturating_sub(1),
                self.to.index
            )),
        }
    }

    /// Whether its bytes in `buf` have the checksum `want`.
    fn verify(&self, buf: &[u8], want: u32) -> std::result::Result<(), String> {
        let got = crc32fast::hash(&buf[self.from.offset as usize..self.to.offset as usize]);
        if got != want {
            return Err(format!(
                "entries {} to {}: checksum mismatch (index says {want:08x}, bytes give {got:08x})",
                self.from.index, self.to.index
            ));
        }
        Ok(())
    }

    /// The path of its first entry, which shares nothing.
    fn first_path<'a>(&self, buf: &'a [u8]) -> std::result::Result<&'a [u8], String> {
        let mut r = self.reader(buf);
        if r.u16()? != 0 {
            return Err(format!("entry {}: a start shares a path", self.from.index));
        }
        r.str16()
    }
}

/// What a decoder of parts does with a run.
#[derive(Debug, Clone, Copy)]
enum Reading {
    /// Reads it.
    Read,
    /// Reads it once its bytes are found to have this checksum.
    Checked(u32),
    /// Does not read it: only the changes of its stretch of paths are
    /// looked at.
    Skipped,
}

/// What a run of the tree read in parts gives.
struct Part<K> {
    entries: Vec<Entry>,
    shadowed: Vec<BlobId>,
    keep: Option<K>,
    /// The path of its last entry in the file (when its entries were read).
    last: Vec<u8>,
    /// Whether its entries were read (else only the changes were looked at).
    read: bool,
}

/// The entries of the `runs` of `buf` with `changes` applied, keeping
/// those a fresh `K` of each run says (every one without `fresh`): each
/// run decoded on the pool with its share of the changes (from its first
/// path to the next run's), the parts joined in order. With `only`, a run
/// it does not say is not read (its changes are still offered to its
/// keeper), and one it says is verified by its checksum in the index.
fn decode_parts<K: Keep, F: Fn() -> K + Sync + Send>(
    buf: &[u8],
    runs: &[Run],
    changes: &[Change],
    shadowed: &mut Vec<BlobId>,
    fresh: Option<F>,
    only: Option<(Meets<'_>, Index<'_>)>,
) -> std::result::Result<(Vec<Entry>, Vec<K>), String> {
    let firsts = runs[1..]
        .iter()
        .map(|run| run.first_path(buf))
        .collect::<std::result::Result<Vec<&[u8]>, String>>()?;
    if let Some(k) = (1..firsts.len()).find(|&k| firsts[k - 1] >= firsts[k]) {
        return Err(format!(
            "entry {}: paths are not sorted",
            runs[k + 1].from.index
        ));
    }
    let mut cuts = vec![0];
    cuts.extend(
        firsts
            .iter()
            .map(|f| changes.partition_point(|(p, _)| p.as_slice() < *f)),
    );
    cuts.push(changes.len());
    let read = |k: usize| -> Reading {
        let Some((meets, index)) = &only else {
            return Reading::Read;
        };
        let lo = k.checked_sub(1).map_or(&[][..], |k| firsts[k]);
        let (crc, unreadable) = index.run(k);
        if unreadable > 0 || meets(lo, firsts.get(k).copied()) {
            Reading::Checked(crc)
        } else {
            Reading::Skipped
        }
    };
    let work: Vec<(&Run, &[Change], Reading)> = runs
        .iter()
        .zip(cuts.windows(2))
        .enumerate()
        .map(|(k, (run, c))| (run, &changes[c[0]..c[1]], read(k)))
        .collect();
    // One run (a small tree, or version 1) on this thread (see
    // `crate::par`).
    let parts = crate::par::map(&work, |&(run, changes, read)| {
        let keep = fresh.as_ref().map(|f| f());
        match read {
            Reading::Skipped => Ok(changes_only(changes, keep)),
            Reading::Read => decode_run(buf, run, changes, keep),
            Reading::Checked(crc) => {
                run.verify(buf, crc)?;
                decode_run(buf, run, changes, keep)
            }
        }
    })
    .into_iter()
    .collect::<std::result::Result<Vec<Part<K>>, String>>()?;
    if let Some(k) = (1..parts.len())
        .find(|&k| parts[k - 1].read && parts[k - 1].last.as_slice() >= firsts[k - 1])
    {
        return Err(format!(
            "entry {}: paths are not sorted",
            runs[k].from.index
        ));
    }
    // One part's entries are taken as they are; several are joined into
    // one list sized once.
    let mut entries: Vec<Entry> = Vec::new();
    if parts.len() > 1 {
        entries.reserve_exact(parts.iter().map(|p| p.entries.len()).sum());
        crate::sys::huge_pages(&mut entries);
    }
    let mut kept = Vec::with_capacity(parts.len());
    for part in parts {
        if entries.capacity() == 0 {
            entries = part.entries;
        } else {
            entries.extend(part.entries);
        }
        shadowed.extend(part.shadowed);
        kept.extend(part.keep);
    }
    Ok((entries, kept))
}

/// The entries of `run` of `buf` with `changes` (those from its first path
/// to the next run's) applied, keeping those `keep` says (every one
/// without it).
fn decode_run<K: Keep>(
    buf: &[u8],
    run: &Run,
    changes: &[Change],
    mut keep: Option<K>,
) -> std::result::Result<Part<K>, String> {
    let mut r = run.reader(buf);
    let mut entries: Vec<Entry> = Vec::new();
    let mut shadowed = Vec::new();
    if keep.is_none() {
        entries.reserve((run.to.index - run.from.index).saturating_add(changes.len()));
        crate::sys::huge_pages(&mut entries);
    }
    let wants = |e: &Entry, keep: &mut Option<K>| {
        keep.as_mut()
            .is_none_or(|k| k.keep(&e.path, e.kind_code(), &e.stat, e.is_unreadable()))
    };
    let mut changes = changes.iter().peekable();
    // The previous path of the file (the one the next shares a prefix
    // with), whether or not a change replaced its entry.
    let mut prev: Vec<u8> = Vec::new();
    for i in run.from.index..run.to.index {
        next_path(&mut r, i, &mut prev, i == run.from.index)?;
        while let Some((_, new)) = changes.next_if(|(p, _)| p.as_slice() < prev.as_slice()) {
            if let Some(e) = new.as_ref().filter(|e| wants(e, &mut keep)) {
                entries.push(e.clone());
            }
        }
        // Every entry kept: each is read once, whole.
        if keep.is_none() {
            let e = read_body(&mut r, i, prev.clone())?;
            if let Some((_, new)) = changes.next_if(|(p, _)| p.as_slice() == prev.as_slice()) {
                if let Kind::File { blob } = e.kind {
                    shadowed.push(blob);
                }
                entries.extend(new.iter().cloned());
            } else {
                entries.push(e);
            }
            continue;
        }
        // The entry's kind and stat, and its payload passed over; read
        // again whole when it is kept.
        let start = r.pos;
        let (kind, stat) = read_kind_stat(&mut r)?;
        let (blob, unreadable) = match kind {
            KIND_FILE => (Some(BlobId(r.arr()?)), false),
            KIND_SYMLINK => (r.str16().map(|_| None)?, false),
            KIND_DIR => (None, false),
            KIND_EXCLUDED => {
                let code = r.u8()?;
                r.str16()?;
                (None, code == Excluded::UNREADABLE)
            }
            k => return Err(format!("entry {i}: unknown kind {k}")),
        };
        if let Some((_, new)) = changes.next_if(|(p, _)| p.as_slice() == prev.as_slice()) {
            shadowed.extend(blob);
            if let Some(k) = keep.as_mut() {
                k.shadowed(kind, &stat);
            }
            if let Some(e) = new.as_ref().filter(|e| wants(e, &mut keep)) {
                entries.push(e.clone());
            }
            continue;
        }
        if keep
            .as_mut()
            .is_none_or(|k| k.keep(&prev, kind, &stat, unreadable))
        {
            let mut again = Reader {
                buf: r.buf,
                pos: start,
            };
            entries.push(read_body(&mut again, i, prev.clone())?);
        }
    }
    for (_, new) in changes {
        if let Some(e) = new.as_ref().filter(|e| wants(e, &mut keep)) {
            entries.push(e.clone());
        }
    }
    run.ended(&r)?;
    Ok(Part {
        entries,
        shadowed,
        keep,
        last: prev,
        read: true,
    })
}

/// The part of a run not read: the entries of its `changes` its keeper
/// keeps.
fn changes_only<K: Keep>(changes: &[Change], mut keep: Option<K>) -> Part<K> {
    let entries = changes
        .iter()
        .filter_map(|(_, new)| new.as_ref())
        .filter(|e| {
            keep.as_mut()
                .is_none_or(|k| k.keep(&e.path, e.kind_code(), &e.stat, e.is_unreadable()))
        })
        .cloned()
        .collect();
    Part {
        entries,
        shadowed: Vec::new(),
        keep,
        last: Vec::new(),
        read: false,
    }
}

/// Reads the tree of the store whose directory is `store`: the tree file
/// with its delta applied, when one belongs to it.
pub(crate) fn load(store: &OwnedFd, store_path: &Path) -> Result<Loaded> {
    Ok(load_layers(store, store_path)?.0)
}

/// How the tree in place is stored: what a snapshot that changed a few
/// paths needs to write them as a delta (see [`TreeWriter::commit_delta`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Layers {
    /// The tree file's identity (its length and final CRC field).
    pub(crate) base: (u64, u32),
    /// Its number of entries.
    pub(crate) base_count: u64,
    /// The changes of the delta in place (none without one).
    pub(crate) changes: Vec<Change>,
    /// The blobs of the tree file's entries the delta replaced or removed:
    /// gc keeps them too, as the tree file names them. (Read in part, of
    /// the runs read only.)
    pub(crate) shadowed: Vec<BlobId>,
    /// Whether the tree file is of a format before the current one: the
    /// next snapshot writes the tree whole, not a delta of it.
    pub(crate) stale: bool,
}

/// A tree file's bytes, shared with what keeps a part of them (a partial
/// read's tables of inodes).
pub(super) type FileBytes = std::sync::Arc<crate::sys::FileBytes>;

/// [`load`], and how the tree is stored (`None` when there is no tree or it
/// is damaged).
pub(crate) fn load_layers(store: &OwnedFd, store_path: &Path) -> Result<(Loaded, Option<Layers>)> {
    load_using(store, store_path, |bytes, delta, shadowed| {
        let changes = delta.map_or(&[][..], |d| d.changes.as_slice());
        let (t, count) = decode_with(bytes.as_ref(), changes, shadowed)?;
        let made = t.entries.len() as u64;
        Ok((t, count, made))
    })
}

/// Reads the tree file of `store` and its delta, when one belongs to it,
/// with `decode` (the tree file's bytes and the delta give the tree, how
/// many entries the file holds and how many the tree has; see
/// [`decode_with`]), then applies the delta's header and the head.
fn load_using(
    store: &OwnedFd,
    store_path: &Path,
    decode: impl FnOnce(
        &FileBytes,
        Option<&Delta>,
        &mut Vec<BlobId>,
    ) -> std::result::Result<(Tree, usize, u64), String>,
) -> Result<(Loaded, Option<Layers>)> {
    let path = store_path.join(TREE_FILE);
    let Some(bytes) = fsx::map_store_file(store, TREE_FILE).ctx("read", &path)? else {
        return Ok((Loaded::Missing, None));
    };
    let bytes: FileBytes = std::sync::Arc::new(bytes);
    let base = file_id(&bytes);
    // The delta, when one belongs to this tree file (a delta of another
    // one, which a crash left behind, is not this tree's).
    let delta_path = store_path.join(DELTA_FILE);
    let delta = match fsx::read_store_file(store, DELTA_FILE).ctx("read", &delta_path)? {
        None => None,
        Some(d) => match delta::decode(&d) {
            Ok(delta) => (delta.base == base).then(|| (delta, file_id(&d))),
            Err(reason) => {
                return Ok((
                    Loaded::Damaged(format!("{}: {reason}", delta_path.display())),
                    None,
                ));
            }
        },
    };
    let mut layers = Layers {
        base,
        stale: !bytes.starts_with(MAGIC),
        ..Layers::default()
    };
    let (mut t, made) = match decode(&bytes, delta.as_ref().map(|(d, _)| d), &mut layers.shadowed) {
        Ok((t, count, made)) => {
            layers.base_count = count as u64;
            (t, made)
        }
        Err(reason) => {
            return Ok((
                Loaded::Damaged(format!("{}: {reason}", path.display())),
                None,
            ));
        }
    };
    drop(bytes);
    let mut id = base;
    if let Some((d, delta_id)) = delta {
        if made != d.count {
            return Ok((
                Loaded::Damaged(format!(
                    "{}: makes {made} entries, not the {} it says",
                    delta_path.display(),
                    d.count
                )),
                None,
            ));
        }
        id = delta_id;
        t.stamp_ns = d.stamp_ns;
        t.log_seq = d.log_seq;
        t.pending = d.pending;
        t.turn = d.turn;
        layers.changes = d.changes;
    }
    if let Some(head) = read_head(store)
        && head.tree == id
    {
        t.log_seq = head.log_seq;
        t.pending = head.pending;
        t.turn = head.turn;
    }
    Ok((Loaded::Tree(t), Some(layers)))
}

/// The entries of the tree file in `store` with `changes` applied (a delta
/// too large to be written as one; see [`delta::fits`]).
pub(crate) fn with_changes(
    store: &OwnedFd,
    store_path: &Path,
    changes: &[Change],
) -> Result<Vec<Entry>> {
    let path = store_path.join(TREE_FILE);
    let bytes = fsx::map_store_file(store, TREE_FILE)
        .ctx("read", &path)?
        .ok_or_else(|| crate::error::Error::Io {
            op: "read",
            path: path.clone(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
    decode_with(&bytes, changes, &mut Vec::new())
        .map(|(t, _)| t.entries)
        .map_err(|reason| crate::error::Error::Io {
            op: "read",
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason),
        })
}

/// A tree file opened for its header: the file, its length, its first 27
/// bytes (magic, stamp, log sequence, pending flag, turn length), and its
/// path for errors.
type Header = (std::fs::File, u64, [u8; 27], std::path::PathBuf);

/// The tree file in `store` and its header; `None` when there is none or
/// it is shorter than the header and `spare` more bytes.
fn read_header(store: &OwnedFd, store_path: &Path, spare: u64) -> Result<Option<Header>> {
    let path = store_path.join(TREE_FILE);
    let Some(file) =
        fsx::open_store_file(store, TREE_FILE, OFlags::RDONLY, None).ctx("open", &path)?
    else {
        return Ok(None);
    };
    let len = file.metadata().ctx("stat", &path)?.len();
    let mut header = [0u8; 27];
    if len < header.len() as u64 + spare {
        return Ok(None);
    }
    crate::sys::read_exact_at(&file, &mut header, 0).ctx("read", &path)?;
    Ok(Some((file, len, header, path)))
}

/// The turn of the open command window(s), when the tree in `store` says
/// one is open: its own header's pending mark, its delta's, or the head's
/// when the head belongs to it (see [`load_header`]).
pub(crate) fn pending_turn(store: &OwnedFd, store_path: &Path) -> Result<Option<TurnId>> {
    Ok(load_header(store, store_path)?.and_then(|(t, _)| t.pending.then_some(t.turn)))
}

/// The tree in `store` without its entries (`entries` left empty), with
/// its number of entries: the tree file's header and last four bytes are
/// read, then its delta, when one belongs to it, and the head, when it
/// belongs to them. `None` when there is no tree or its header does not
/// read; the tree file's entries and checksum are not verified (the
/// snapshot that reads the tree whole does that).
pub(crate) fn load_header(store: &OwnedFd, store_path: &Path) -> Result<Option<(Tree, u64)>> {
    Ok(current(store, store_path)?.map(|(t, n, _)| (t, n)))
}

/// [`load_header`], and the identity a head must name to belong to the
/// tree in place: its delta's when one belongs to the tree file, else the
/// tree file's.
fn current(store: &OwnedFd, store_path: &Path) -> Result<Option<(Tree, u64, FileId)>> {
    let Some((file, len, header, path)) = read_header(store, store_path, 8)? else {
        return Ok(None);
    };
    if ![MAGIC, MAGIC_2, MAGIC_1]
        .iter()
        .any(|m| header[..8] == m[..])
    {
        return Ok(None);
    }
    let turn_len = usize::from(u16::from_le_bytes([header[25], header[26]]));
    if len < (27 + turn_len + 8) as u64 {
        return Ok(None);
    }
    let mut rest = vec![0u8; turn_len + 4];
    crate::sys::read_exact_at(&file, &mut rest, 27).ctx("read", &path)?;
    let mut tail = [0u8; 4];
    crate::sys::read_exact_at(&file, &mut tail, len - 4).ctx("read", &path)?;
    let mut r = Reader {
        buf: &header,
        pos: 8,
    };
    let (Ok(stamp_ns), Ok(log_seq), Ok(flag)) = (r.i64(), r.u64(), r.u8()) else {
        return Ok(None);
    };
    let pending = match flag {
        0 => false,
        1 => true,
        _ => return Ok(None),
    };
    let Some(turn) = String::from_utf8(rest[..turn_len].to_vec())
        .ok()
        .and_then(|t| TurnId::new(t).ok())
    else {
        return Ok(None);
    };
    let mut count = u64::from(u32::from_le_bytes([
        rest[turn_len],
        rest[turn_len + 1],
        rest[turn_len + 2],
        rest[turn_len + 3],
    ]));
    let mut tree = Tree {
        stamp_ns,
        log_seq,
        turn,
        pending,
        entries: Vec::new(),
    };
    let mut id = (len, u32::from_le_bytes(tail));
    if let Some(header) = delta::read_header(store, store_path)? {
        // A delta whose header does not read: the tree is read whole,
        // which reports it.
        let Some((d, delta_id)) = header else {
            return Ok(None);
        };
        if d.base == id {
            id = delta_id;
            tree.stamp_ns = d.stamp_ns;
            tree.log_seq = d.log_seq;
            tree.pending = d.pending;
            tree.turn = d.turn;
            count = d.count;
        }
    }
    if let Some(head) = read_head(store)
        && head.tree == id
    {
        tree.log_seq = head.log_seq;
        tree.pending = head.pending;
        tree.turn = head.turn;
    }
    Ok(Some((tree, count, id)))
}

/// What a head says, and which tree file it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    tree: (u64, u32),
    log_seq: u64,
    pending: bool,
    turn: TurnId,
    /// The caller's bytes kept with the header (empty in format 1).
    note: Vec<u8>,
}

/// A tree (or delta) file's identity: its length and its final CRC field.
type FileId = (u64, u32);

/// A tree file's identity: its length and its final CRC field.
fn file_id(bytes: &[u8]) -> (u64, u32) {
    let crc = bytes.len().checked_sub(4).map_or(0, |at| {
        u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
    });
    (bytes.len() as u64, crc)
}

fn encode_head(h: &Head) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(HEAD_MAGIC);
    out.extend_from_slice(&h.tree.0.to_le_bytes());
    out.extend_from_slice(&h.tree.1.to_le_bytes());
    out.extend_from_slice(&h.log_seq.to_le_bytes());
    out.push(u8::from(h.pending));
    put_str16(&mut out, h.turn.as_str().as_bytes());
    let note_len = u32::try_from(h.note.len()).expect("write_head bounds a note to 16 MiB");
    out.extend_from_slice(&note_len.to_le_bytes());
    out.extend_from_slice(&h.note);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode_head(bytes: &[u8]) -> Option<Head> {
    let (mut r, noted) = match Reader::framed(bytes, HEAD_MAGIC, "a head", "head format") {
        Ok(r) => (r, true),
        Err(_) => (
            Reader::framed(bytes, HEAD_MAGIC_1, "a head", "head format").ok()?,
            false,
        ),
    };
    let mut head = Head {
        tree: (r.u64().ok()?, r.u32().ok()?),
        log_seq: r.u64().ok()?,
        pending: match r.u8().ok()? {
            0 => false,
            1 => true,
            _ => return None,
        },
        turn: TurnId::new(r.utf8().ok()?).ok()?,
        note: Vec::new(),
    };
    if noted {
        let len = usize::try_from(r.u32().ok()?).ok()?;
        head.note = r.take(len).ok()?.to_vec();
    }
    (r.left() == 0).then_some(head)
}

/// The head in `store`, if there is a whole one.
fn read_head(store: &OwnedFd) -> Option<Head> {
    // A cache: one that is not a regular file is ignored (the next write
    // replaces it by rename).
    let file = fsx::open_store_file(store, HEAD_FILE, OFlags::RDONLY, None).ok()??;
    let mut bytes = Vec::new();
    file.take(HEAD_MAX).read_to_end(&mut bytes).ok()?;
    decode_head(&bytes)
}

/// The note of the whole head in `store` (none in format 1), whichever
/// tree file it names: the caller tells whether the note goes with the
/// tree in place.
pub(crate) fn head_note(store: &OwnedFd) -> Option<Vec<u8>> {
    read_head(store)
        .map(|h| h.note)
        .filter(|note| !note.is_empty())
}

/// Records new header fields for the tree file in place without rewriting
/// it, with `note` (see the module doc). Under the store lock.
pub(crate) fn write_head(
    store: &OwnedFd,
    store_path: &Path,
    log_seq: u64,
    pending: bool,
    turn: &TurnId,
    note: &[u8],
) -> Result<u64> {
    let path = store_path.join(TREE_FILE);
    let Some((_, _, id)) = current(store, store_path)? else {
        return Err(crate::error::Error::Io {
            op: "read the header of",
            path,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the tree state changed under the store lock",
            ),
        });
    };
    let shown = store_path.join(HEAD_FILE);
    if note.len() as u64 > NOTE_MAX {
        return Err(crate::error::Error::Io {
            op: "write",
            path: shown,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "more than 16 MiB of open command windows",
            ),
        });
    }
    let head = encode_head(&Head {
        tree: id,
        log_seq,
        pending,
        turn: turn.clone(),
        note: note.to_vec(),
    });
    let (mut f, tmp) = fsx::create_temp(store, HEAD_FILE, 0o644).ctx("create", &shown)?;
    let res = f
        .write_all(&head)
        .ctx("write", &shown)
        .and_then(|()| fsx::rename(store, &tmp, HEAD_FILE).ctx("rename", &shown));
    if res.is_err() {
        let _ = fsx::unlink(store, &tmp);
    }
    res.map(|()| head.len() as u64)
}

/// Whether a scan with the old tree `old` must look up the blobs its stat
/// cache vouches for, since the log may no longer introduce all of them
/// (see the module doc); `last_seq` is the log's last sequence number.
pub(crate) fn must_recheck(store: &OwnedFd, old: &Tree, last_seq: u64) -> bool {
    // An error looking is taken as the mark being there.
    last_seq < old.log_seq || !matches!(fsx::lstat_at(store, RECHECK_FILE), Ok(None))
}

/// Makes the next scan look up every blob the stat cache vouches for:
/// created before the log is replaced, made durable by the caller's fsync
/// of the store directory.
pub(crate) fn mark_recheck(store: &OwnedFd, store_path: &Path) -> Result<()> {
    fsx::replace_file(store, RECHECK_FILE, b"").ctx("write", store_path.join(RECHECK_FILE))
}

/// Removes the mark of [`mark_recheck`], once a tree or head written after
/// a scan that looked every blob up is in place.
pub(crate) fn clear_recheck(store: &OwnedFd, store_path: &Path) -> Result<()> {
    match fsx::unlink(store, RECHECK_FILE) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).ctx("remove", store_path.join(RECHECK_FILE))
        }
        _ => Ok(()),
    }
}

/// Removes the head (before a new tree or delta replaces the one it
/// belongs to).
fn remove_head(store: &OwnedFd, store_path: &Path) -> Result<()> {
    remove_if_there(store, store_path, HEAD_FILE)
}

/// Removes the store's file `name` if it is there.
fn remove_if_there(store: &OwnedFd, store_path: &Path, name: &str) -> Result<()> {
    match fsx::unlink(store, name) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).ctx("remove", store_path.join(name))
        }
        _ => Ok(()),
    }
}

/// Opens the store's file `name` (see [`fsx::open_store_file`]); one that
/// is not there is an error naming `shown`.
fn open_there(
    store: &OwnedFd,
    name: &str,
    flags: OFlags,
    create: Option<u32>,
    shown: &Path,
) -> Result<std::fs::File> {
    fsx::open_store_file(store, name, flags, create)
        .ctx("open", shown)?
        .ok_or_else(|| crate::error::Error::Io {
            op: "open",
            path: shown.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
}

/// Reads the file system's clock, the one that stamps the project's files:
/// `<store>/tree-stamp` (created once) has its times set to "now" by the
/// kernel, then they are read back. No inode is allocated.
pub(crate) fn fs_clock(store: &OwnedFd, store_path: &Path) -> Result<i64> {
    let shown = store_path.join(STAMP_FILE);
    let fd = open_there(store, STAMP_FILE, OFlags::WRONLY, Some(0o644), &shown)?;
    let now = crate::sys::fs::Timespec {
        tv_sec: 0,
        tv_nsec: crate::sys::fs::UTIME_NOW,
    };
    crate::sys::fs::futimens(
        &fd,
        &crate::sys::fs::Timestamps {
            last_access: now,
            last_modification: now,
        },
    )
    .ctx("set the times of", &shown)?;
    let st = crate::sys::fs::fstat(&fd).ctx("stat", &shown)?;
    let s = Stat::of_raw(&st);
    Ok(s.mtime_ns.max(s.ctime_ns))
}

/// A scan's stamp, taken when it starts; the tree it leaves is written by
/// [`TreeWriter::commit`] when it is recorded.
pub(crate) struct TreeWriter {
    /// The scan stamp.
    pub(crate) stamp_ns: i64,
}

impl TreeWriter {
    /// Reads the file system's clock, the one that stamps the project's
    /// files: `<store>/tree-stamp` (created once) has its times set to
    /// "now" by the kernel, then they are read back. No inode is allocated,
    /// so an unchanged scan creates and deletes no file.
    pub(crate) fn begin(store: &OwnedFd, store_path: &Path) -> Result<TreeWriter> {
        Ok(TreeWriter {
            stamp_ns: fs_clock(store, store_path)?,
        })
    }

    /// Writes `tree` to a temporary file, makes it durable and renames it
    /// to `tree`.
    pub(crate) fn commit(self, store: &OwnedFd, store_path: &Path, tree: &Tree) -> Result<u64> {
        let (mut file, tmp) =
            fsx::create_temp(store, TREE_FILE, 0o644).ctx("create", store_path)?;
        let shown = store_path.join(&tmp);
        let mut written = 0;
        let res = encode_into(tree, &mut file)
            .ctx("write", &shown)
            .map(|len| written = len)
            .and_then(|()| fsx::fdatasync(&file).ctx("fsync", &shown))
            .and_then(|()| remove_head(store, store_path))
            .and_then(|()| remove_if_there(store, store_path, DELTA_FILE))
            .and_then(|()| fsx::rename(store, &tmp, TREE_FILE).ctx("rename", &shown));
        if let Err(e) = res {
            let _ = fsx::unlink(store, &tmp);
            return Err(e);
        }
        fsx::fsync(store).ctx("fsync", store_path)?;
        Ok(written)
    }

    /// Writes `delta` (for the tree file in place) to a temporary file,
    /// makes it durable and renames it to `tree-delta`.
    pub(crate) fn commit_delta(
        self,
        store: &OwnedFd,
        store_path: &Path,
        delta: &Delta,
    ) -> Result<u64> {
        let bytes = delta::encode(delta);
        let (mut file, tmp) =
            fsx::create_temp(store, DELTA_FILE, 0o644).ctx("create", store_path)?;
        let shown = store_path.join(&tmp);
        let res = file
            .write_all(&bytes)
            .ctx("write", &shown)
            .and_then(|()| fsx::fdatasync(&file).ctx("fsync", &shown))
            .and_then(|()| remove_head(store, store_path))
            .and_then(|()| fsx::rename(store, &tmp, DELTA_FILE).ctx("rename", &shown));
        if let Err(e) = res {
            let _ = fsx::unlink(store, &tmp);
            return Err(e);
        }
        fsx::fsync(store).ctx("fsync", store_path)?;
        Ok(bytes.len() as u64)
    }
}

/// Removes temporary tree files left by a crashed snapshot (under the lock).
pub(crate) fn sweep_temps(store: &OwnedFd, store_path: &Path) -> Result<()> {
    let prefixes = [TREE_FILE, DELTA_FILE].map(|n| format!(".{n}{}", fsx::TEMP_MARK));
    for e in std::fs::read_dir(store_path).ctx("list", store_path)? {
        let e = e.ctx("list", store_path)?;
        if let Some(name) = e.file_name().to_str()
            && prefixes.iter().any(|p| name.starts_with(p.as_str()))
        {
            fsx::unlink(store, name).ctx("remove stale temporary", store_path.join(name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn sample() -> Tree {
        let stat = |n: u64| Stat {
            size: n,
            mtime_ns: 1_700_000_000_123_456_789,
            ctime_ns: 1_700_000_000_223_456_789,
            ino: 1000 + n,
            mode: 0o100644,
        };
        Tree {
            stamp_ns: 1_700_000_001_000_000_000,
            log_seq: 7,
            turn: TurnId::new("t1").expect("valid"),
            pending: true,
            entries: vec![
                Entry {
                    path: b".env".to_vec(),
                    stat: stat(12),
                    kind: Kind::File {
                        blob: crate::pack::hash_bytes(b"API_URL=x\n"),
                    },
                },
                Entry {
                    path: b"link".to_vec(),
                    stat: stat(5),
                    kind: Kind::Symlink {
                        target: "src/a".into(),
                    },
                },
                Entry {
                    path: b"node_modules".to_vec(),
                    stat: stat(4096),
                    kind: Kind::Excluded(Excluded::Default("node_modules/".into())),
                },
                Entry {
                    path: b"src".to_vec(),
                    stat: stat(4096),
                    kind: Kind::Dir,
                },
                Entry {
                    path: b"src/big.bin".to_vec(),
                    stat: stat(1 << 40),
                    kind: Kind::Excluded(Excluded::TooLarge(1 << 30)),
                },
                Entry {
                    path: b"src/\xff".to_vec(),
                    stat: stat(1),
                    kind: Kind::Excluded(Excluded::BadName("not UTF-8".into())),
                },
            ],
        }
    }

    /// A tree file large enough that its checksum is worked out beside
    /// its decoding (1 MiB and more): read whole it is the tree written,
    /// and damaged anywhere, or cut short, it is damage, never entries.
    /// The sample's header over `n` files in folders of 100.
    fn files_tree(n: u64) -> Tree {
        let mut t = sample();
        t.entries = (0..n)
            .map(|i| Entry {
                path: format!("d{:03}/f{i:05}.txt", i / 100).into_bytes(),
                stat: Stat {
                    size: i,
                    mtime_ns: i as i64,
                    ctime_ns: i as i64,
                    ino: i,
                    mode: 0o100644,
                },
                kind: Kind::File {
                    blob: BlobId([i as u8; 32]),
                },
            })
            .collect();
        t
    }

    /// `bytes` with its checksum made right again.
    fn with_crc(mut bytes: Vec<u8>) -> Vec<u8> {
        let at = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..at]);
        bytes[at..].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// A tree file's starts: (where its table begins, the starts).
    fn starts_of(bytes: &[u8]) -> (usize, Vec<(u32, u64)>) {
        let end = bytes.len() - 8;
        let n = u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes")) as usize;
        let at = end - 12 * n;
        let starts = bytes[at..end]
            .chunks(12)
            .map(|c| {
                let index = u32::from_le_bytes(c[..4].try_into().expect("4 bytes"));
                (
                    index,
                    u64::from_le_bytes(c[4..].try_into().expect("8 bytes")),
                )
            })
            .collect();
        (at, starts)
    }

    /// `bytes` with its starts replaced by `starts` (the checksum made
    /// right).
    fn with_starts(bytes: &[u8], starts: &[(u32, u64)]) -> Vec<u8> {
        let (at, _) = starts_of(bytes);
        let mut out = bytes[..at].to_vec();
        for (index, offset) in starts {
            out.extend_from_slice(&index.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        out.extend_from_slice(&(starts.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        with_crc(out)
    }

    /// `bytes` (version 3) as version 2 wrote it (no counts, no index) or
    /// version 1 (no starts either).
    pub(crate) fn older(bytes: &[u8], version: u8) -> Vec<u8> {
        let turn_len = usize::from(u16::from_le_bytes([bytes[25], bytes[26]]));
        let counts_at = 27 + turn_len + 4;
        let entries_at = counts_at + 48;
        let body = &bytes[..bytes.len() - 4];
        let (table, starts) = starts_of(bytes);
        let (_, index_at) = Index::before(body, table, entries_at).expect("an index");
        let mut out = bytes[..counts_at].to_vec();
        out[6] = b'0' + version;
        out.extend_from_slice(&body[entries_at..index_at]);
        if version == 2 {
            for (index, offset) in &starts {
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(&(offset - 48).to_le_bytes());
            }
            out.extend_from_slice(&(starts.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(&[0; 4]);
        with_crc(out)
    }

    /// `decode`, but by the decoder of parts (every entry asked about).
    fn decode_by_parts(bytes: &[u8]) -> std::result::Result<Tree, String> {
        decode_keeping(bytes, &[], &mut Vec::new(), Some(|| KeepAll)).map(|(t, _, _)| t)
    }

    /// Keeps the entries of `d004/`, counting those it is asked about.
    struct Folder4 {
        asked: usize,
    }

    impl Keep for Folder4 {
        fn keep(&mut self, path: &[u8], _: u8, _: &Stat, _: bool) -> bool {
            self.asked += 1;
            path.starts_with(b"d004/")
        }
    }

    /// A tree of several runs reads back the same whichever decoder reads
    /// it: its runs on the pool in place, or in parts keeping every entry
    /// or some, or applying a delta's changes; and as version 1 (no
    /// starts).
    #[test]
    fn a_tree_of_many_runs_reads_back_by_every_decoder() {
        let t = files_tree(3 * STRIDE as u64 + 17);
        let bytes = encode(&t);
        let (_, starts) = starts_of(&bytes);
        let want: Vec<(u32, u64)> = (1..=3).map(|k| (k * STRIDE as u32, 0)).collect();
        assert_eq!(
            starts.iter().map(|s| (s.0, 0)).collect::<Vec<_>>(),
            want,
            "a start every {STRIDE} entries"
        );
        assert!(decode(&bytes) == Ok(t.clone()), "runs on the pool");
        assert!(decode_by_parts(&bytes) == Ok(t.clone()), "in parts");
        let fresh = || Folder4 { asked: 0 };
        let (kept, count, runs) =
            decode_keeping(&bytes, &[], &mut Vec::new(), Some(fresh)).expect("kept some");
        assert_eq!(count, t.entries.len());
        assert_eq!(runs.len(), 4, "a keeper a run");
        let asked: usize = runs.iter().map(|k| k.asked).sum();
        assert_eq!(asked, count, "each entry asked about once");
        let d004: Vec<Entry> = t
            .entries
            .iter()
            .filter(|e| e.path.starts_with(b"d004/"))
            .cloned()
            .collect();
        assert!(d004.len() == 100 && kept.entries == d004);
        // A delta's changes: an entry replaced, the first of a run gone,
        // entries put in before the first, at the end of a run, after the
        // first of the next and after the last.
        let mut changed = t.clone();
        let gone = changed.entries.remove(STRIDE);
        changed.entries[7].stat.size = 99;
        let put_in = |path: &[u8]| Entry {
            path: path.to_vec(),
            ..t.entries[0].clone()
        };
        let fresh = [
            put_in(b"a"),
            put_in(&[&t.entries[STRIDE - 1].path[..], b"a"].concat()),
            put_in(&[&t.entries[STRIDE].path[..], b"a"].concat()),
            put_in(b"z"),
        ];
        let mut changes: Vec<Change> = vec![
            (
                changed.entries[7].path.clone(),
                Some(changed.entries[7].clone()),
            ),
            (gone.path.clone(), None),
        ];
        changes.extend(fresh.iter().map(|e| (e.path.clone(), Some(e.clone()))));
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        changed.entries.extend(fresh);
        changed.entries.sort_by(|a, b| a.path.cmp(&b.path));
        let mut shadowed = Vec::new();
        let (got, _) = decode_with(&bytes, &changes, &mut shadowed).expect("with changes");
        assert!(got == changed, "with a delta's changes");
        let want = [t.entries[7].kind.clone(), gone.kind];
        let shadowed: Vec<Kind> = shadowed
            .into_iter()
            .map(|blob| Kind::File { blob })
            .collect();
        assert_eq!(
            shadowed, want,
            "the blobs the changes replaced, in path order"
        );
        let (got, _, _) = decode_keeping(&bytes, &changes, &mut Vec::new(), Some(|| KeepAll))
            .expect("with changes, every entry asked about");
        assert!(
            got == changed,
            "with a delta's changes, every entry asked about"
        );
        // Versions 2 (no counts, no index) and 1 (no starts either).
        let v2 = older(&bytes, 2);
        assert!(decode(&v2) == Ok(t.clone()), "version 2");
        assert!(decode_by_parts(&v2) == Ok(t.clone()), "version 2 in parts");
        assert!(decode(&older(&bytes, 1)) == Ok(t), "version 1");
    }

    /// Starts that do not name where runs begin are damage to both
    /// decoders, the checksum right or not.
    #[test]
    fn starts_out_of_place_are_damage_to_every_decoder() {
        let t = files_tree(3 * STRIDE as u64 + 17);
        // Version 2, whose starts no index checksum covers.
        let v3 = encode(&t);
        let bytes = older(&v3, 2);
        let (_, starts) = starts_of(&bytes);
        let moved = |k: usize, by: (i64, i64)| {
            let mut s = starts.clone();
            s[k] = (
                (i64::from(s[k].0) + by.0) as u32,
                (s[k].1 as i64 + by.1) as u64,
            );
            s
        };
        let count = t.entries.len() as u32;
        let cases: Vec<(&str, Vec<(u32, u64)>)> = vec![
            ("an offset one byte late", moved(1, (0, 1))),
            ("an offset one byte early", moved(0, (0, -1))),
            ("the entry after the start", moved(2, (1, 0))),
            ("two starts swapped", vec![starts[1], starts[0], starts[2]]),
            ("a start named twice", vec![starts[0], starts[0], starts[1]]),
            (
                "a start at the first entry",
                vec![(0, starts[0].1), starts[1]],
            ),
            (
                "a start past the last entry",
                vec![starts[0], (count, starts[2].1)],
            ),
        ];
        for (what, s) in cases {
            let bad = with_starts(&bytes, &s);
            assert!(decode(&bad).is_err(), "{what}: runs on the pool");
            assert!(decode_by_parts(&bad).is_err(), "{what}: in parts");
            // In version 3, the index's checksum covers the starts.
            let (_, s3) = starts_of(&v3);
            let s: Vec<(u32, u64)> = s.iter().map(|&(i, o)| (i, o + 48)).collect();
            assert_ne!(s, s3);
            let bad = with_starts(&v3, &s);
            for got in [decode(&bad), decode_by_parts(&bad)] {
                assert!(got.is_err_and(|e| e.contains("index checksum")), "{what}");
            }
        }
        // In version 3 fewer starts than the index's runs are damage.
        let (_, s3) = starts_of(&v3);
        let fewer = with_starts(&v3, &s3[..1]);
        assert!(decode(&fewer).is_err() && decode_by_parts(&fewer).is_err());
        // In version 2 fewer starts than written is not damage: a run is
        // longer.
        let fewer = with_starts(&bytes, &starts[..1]);
        assert!(decode(&fewer) == Ok(t.clone()), "fewer starts, on the pool");
        assert!(
            decode_by_parts(&fewer) == Ok(t.clone()),
            "fewer starts, in parts"
        );
        // A count of starts past the table reads into the entries.
        let mut longer = bytes.clone();
        let at = longer.len() - 8;
        longer[at] += 1;
        let longer = with_crc(longer);
        assert!(decode(&longer).is_err() && decode_by_parts(&longer).is_err());
        // Runs each in order but not across a start.
        let mut unsorted = t.clone();
        unsorted.entries.swap(STRIDE - 1, STRIDE);
        let bad = encode(&unsorted);
        for got in [decode(&bad), decode_by_parts(&bad)] {
            assert!(got.is_err_and(|e| e.contains("not sorted")));
        }
    }

    #[test]
    fn a_large_tree_file_is_read_whole_and_its_damage_found() {
        let t = files_tree(16_000);
        let bytes = encode(&t);
        assert!(bytes.len() >= 1 << 20, "{} bytes", bytes.len());
        assert!(decode(&bytes) == Ok(t.clone()), "read whole");
        for at in [8, 100, bytes.len() / 2, bytes.len() - 5, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            let got = decode(&damaged);
            assert!(
                got.as_ref().is_err_and(|e| e.contains("checksum mismatch")),
                "byte {at}: {:?}",
                got.map(|t| t.entries.len())
            );
        }
        let cut = decode(&bytes[..bytes.len() - 1000]);
        assert!(cut.is_err(), "cut short");
    }

    #[test]
    fn tree_round_trips() {
        let t = sample();
        assert_eq!(decode(&encode(&t)), Ok(t));
    }

    /// Pins the on-disk format: a change here needs a version bump.
    #[test]
    fn on_disk_tree_format_is_pinned() {
        let t = Tree {
            entries: sample().entries[..2].to_vec(),
            ..sample()
        };
        let bytes = encode(&t);
        let len = bytes.len();
        let hex = hex::encode(&bytes);
        assert_eq!(
            hex,
            concat!(
                "544254524545330a", // magic
                "00cac471fe9c9717", // stamp
                "0700000000000000", // log_seq
                "01",
                "0200",
                "7431",             // pending, turn "t1"
                "02000000",         // count
                "0100000000000000", // files
                "0c00000000000000", // their bytes
                "0000000000000000", // directories
                "0100000000000000", // symlinks
                "0000000000000000", // excluded
                "0000000000000000", // unreadable
                "0000",
                "0400",
                "2e656e76",
                "01", // ".env", file
                "0c00000000000000",
                "15cd853dfe9c9717",
                "15ae7b43fe9c9717",
                "f403000000000000",
                "a4810000",
                "5e8c4fb4bbd5a8a1cb6f3a3c7a6e5f4fa77d7c2e8a33bd2b7bd5b1a8e0d41c22",
                "0000",
                "0400",
                "6c696e6b",
                "02", // "link", symlink
                "0500000000000000",
                "15cd853dfe9c9717",
                "15ae7b43fe9c9717",
                "ed03000000000000",
                "a4810000",
                "0500",
                "7372632f61",
                "RUNCRC",
                "00000000",         // the run: its checksum, none unreadable
                "f403000000000000", // the files' inodes
                "ed03000000000000", // the others'
                "01000000",
                "01000000",
                "01000000", // runs, files, others
                "TABLECRC",
                "00000000", // no starts
                "CRC"
            )
            .replace(
                "5e8c4fb4bbd5a8a1cb6f3a3c7a6e5f4fa77d7c2e8a33bd2b7bd5b1a8e0d41c22",
                &crate::pack::hash_bytes(b"API_URL=x\n").to_hex()
            )
            .replace(
                "RUNCRC",
                &hex::encode(crc32fast::hash(&bytes[81..len - 48]).to_le_bytes())
            )
            .replace(
                "TABLECRC",
                &hex::encode(
                    crc32fast::hash(
                        &[
                            &bytes[..81],
                            &bytes[len - 48..len - 12],
                            &bytes[len - 8..len - 4]
                        ]
                        .concat()
                    )
                    .to_le_bytes()
                )
            )
            .replace(
                "CRC",
                &hex::encode(crc32fast::hash(&bytes[..len - 4]).to_le_bytes())
            )
        );
    }

    #[test]
    fn damage_is_detected_not_trusted() {
        let bytes = encode(&sample());
        for i in [0, 7, 9, 30, bytes.len() / 2, bytes.len() - 1] {
            let mut m = bytes.clone();
            m[i] ^= 0x04;
            assert!(decode(&m).is_err(), "flip at {i} went unnoticed");
        }
        for n in [0, 5, 12, bytes.len() - 1] {
            assert!(decode(&bytes[..n]).is_err(), "truncation to {n}");
        }
        let mut v2 = bytes.clone();
        v2[7] = b'2';
        let err = decode(&v2).expect_err("other version");
        assert!(err.contains("version"), "{err}");
    }

    #[test]
    fn a_head_applies_only_whole_and_to_the_tree_file_it_names() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = fsx::open_dir_path(dir.path()).ctx("open", dir.path())?;
        let tree = encode(&sample());
        std::fs::write(dir.path().join(TREE_FILE), &tree).ctx("write", dir.path())?;
        let load = || match load(&store, dir.path()) {
            Ok(Loaded::Tree(t)) => (t.log_seq, t.pending, t.turn.to_string()),
            other => panic!("{other:?}"),
        };
        assert_eq!(load(), (7, true, "t1".to_owned()));
        let turn = TurnId::new("t9").expect("turn id");
        write_head(&store, dir.path(), 12, false, &turn, b"windows")?;
        assert_eq!(load(), (12, false, "t9".to_owned()), "the head applies");
        let head = std::fs::read(dir.path().join(HEAD_FILE)).ctx("read", dir.path())?;
        // Any flipped byte or cut: the tree's own header stands.
        for i in 0..head.len() {
            let mut m = head.clone();
            m[i] ^= 0x01;
            assert!(decode_head(&m).is_none(), "flip at {i}");
            assert!(decode_head(&head[..i]).is_none(), "cut at {i}");
        }
        std::fs::write(dir.path().join(HEAD_FILE), &head[..head.len() - 1])
            .ctx("write", dir.path())?;
        assert_eq!(load().0, 7, "a torn head is ignored");
        // A head written for another tree file is ignored.
        std::fs::write(dir.path().join(HEAD_FILE), &head).ctx("write", dir.path())?;
        let mut other = sample();
        other.entries.pop();
        std::fs::write(dir.path().join(TREE_FILE), encode(&other)).ctx("write", dir.path())?;
        assert_eq!(load().0, 7, "the head names another tree file");
        // Committing a new tree removes the head.
        std::fs::write(dir.path().join(TREE_FILE), &tree).ctx("write", dir.path())?;
        assert_eq!(load().0, 12);
        let w = TreeWriter::begin(&store, dir.path())?;
        w.commit(&store, dir.path(), &sample())?;
        assert!(!dir.path().join(HEAD_FILE).exists());
        assert_eq!(load().0, 7);
        Ok(())
    }

    #[test]
    fn a_head_keeps_its_note_and_one_of_format_1_still_reads() -> Result<()> {
        let turn = TurnId::new("t3").expect("turn id");
        let head = Head {
            tree: (4096, 0xdead_beef),
            log_seq: 9,
            pending: true,
            turn: turn.clone(),
            note: b"{\"windows\":[]}".to_vec(),
        };
        let bytes = encode_head(&head);
        assert_eq!(decode_head(&bytes), Some(head.clone()));
        // The note's length and bytes sit between the turn and the checksum.
        let at = 8 + 8 + 4 + 8 + 1 + 2 + 2;
        assert_eq!(&bytes[..8], HEAD_MAGIC);
        assert_eq!(bytes[at..at + 4], 14u32.to_le_bytes());
        assert_eq!(&bytes[at + 4..bytes.len() - 4], &head.note[..]);
        // Format 1: the same fields, no note.
        let mut v1 = HEAD_MAGIC_1.to_vec();
        v1.extend_from_slice(&bytes[8..at]);
        let crc = crc32fast::hash(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        let read = decode_head(&v1).expect("a head of format 1");
        assert_eq!(
            (read.tree, read.log_seq, read.note.len()),
            (head.tree, 9, 0)
        );
        // A note longer or shorter than its length says: no head.
        let mut long = bytes[..bytes.len() - 4].to_vec();
        long.push(b' ');
        let crc = crc32fast::hash(&long);
        long.extend_from_slice(&crc.to_le_bytes());
        assert!(decode_head(&long).is_none());
        // What the store's head gives back.
        let dir = tempfile::tempdir().expect("tempdir");
        let store = fsx::open_dir_path(dir.path()).ctx("open", dir.path())?;
        std::fs::write(dir.path().join(TREE_FILE), encode(&sample())).ctx("write", dir.path())?;
        assert_eq!(head_note(&store), None, "no head");
        write_head(&store, dir.path(), 8, false, &turn, b"noted")?;
        assert_eq!(head_note(&store).as_deref(), Some(&b"noted"[..]));
        write_head(&store, dir.path(), 8, false, &turn, b"")?;
        assert_eq!(head_note(&store), None, "an empty note is none");
        std::fs::write(dir.path().join(HEAD_FILE), &v1).ctx("write", dir.path())?;
        assert_eq!(head_note(&store), None, "format 1 has none");
        let too_long = vec![b' '; (NOTE_MAX + 1) as usize];
        let err = write_head(&store, dir.path(), 8, false, &turn, &too_long)
            .expect_err("a note over 16 MiB");
        assert!(err.to_string().contains("16 MiB"), "{err}");
        Ok(())
    }

    /// A delta applies to the tree file it names and to no other; its
    /// header, its count and a head written after it are what the header
    /// readers see too; a damaged one makes the tree damaged; a whole tree
    /// written after it removes it.
    #[test]
    fn a_delta_applies_only_to_the_tree_file_it_names() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = fsx::open_dir_path(dir.path()).ctx("open", dir.path())?;
        let base = sample();
        let w = TreeWriter::begin(&store, dir.path())?;
        w.commit(&store, dir.path(), &base)?;
        let (Loaded::Tree(_), Some(layers)) = load_layers(&store, dir.path())? else {
            panic!("the tree loads");
        };
        assert!(layers.changes.is_empty());
        // Its first entry replaced, its second gone, one added.
        let mut first = base.entries[0].clone();
        first.stat.size += 1;
        first.kind = Kind::File {
            blob: BlobId([7; 32]),
        };
        let added = Entry {
            path: b"zz".to_vec(),
            ..first.clone()
        };
        let gone = base.entries[1].path.clone();
        let changes = compose(
            layers.changes,
            vec![base.entries[0].path.clone(), gone.clone()],
            vec![first.clone(), added.clone()],
        );
        let turn = TurnId::new("t5").expect("turn id");
        let delta = Delta {
            base: layers.base,
            stamp_ns: base.stamp_ns + 1,
            log_seq: 20,
            pending: true,
            turn: turn.clone(),
            count: base.entries.len() as u64,
            // Format 1, still read.
            totals: None,
            changes,
        };
        let w = TreeWriter::begin(&store, dir.path())?;
        w.commit_delta(&store, dir.path(), &delta)?;
        let mut expected = base.entries.clone();
        expected[0] = first;
        expected.remove(1);
        expected.push(added);
        let loaded = || match load_layers(&store, dir.path()) {
            Ok((Loaded::Tree(t), l)) => (t, l),
            other => panic!("{other:?}"),
        };
        let (t, l) = loaded();
        assert_eq!(t.entries, expected);
        assert_eq!(
            (t.stamp_ns, t.log_seq, t.pending),
            (base.stamp_ns + 1, 20, true)
        );
        assert_eq!(
            l.map(|l| l.shadowed.len()),
            Some(1),
            "the first entry's blob"
        );
        let (h, n) = load_header(&store, dir.path())?.expect("a header");
        assert_eq!((h.log_seq, h.pending, n), (20, true, expected.len() as u64));
        assert_eq!(pending_turn(&store, dir.path())?, Some(turn));
        // A head written now belongs to the delta.
        let t9 = TurnId::new("t9").expect("turn id");
        write_head(&store, dir.path(), 21, false, &t9, b"")?;
        assert_eq!(loaded().0.log_seq, 21);
        assert_eq!(pending_turn(&store, dir.path())?, None);
        // A damaged delta: the tree is damaged, never the tree file alone.
        let bytes = std::fs::read(dir.path().join(DELTA_FILE)).ctx("read", dir.path())?;
        let mut bad = bytes.clone();
        bad[bytes.len() - 20] ^= 1;
        std::fs::write(dir.path().join(DELTA_FILE), &bad).ctx("write", dir.path())?;
        assert!(
            matches!(load(&store, dir.path())?, Loaded::Damaged(why) if why.contains(DELTA_FILE))
        );
        // Its header is read, not verified (as the tree file's); one that
        // does not read gives no header.
        let header = load_header(&store, dir.path())?.map(|(t, _)| t.log_seq);
        assert_eq!(
            header,
            Some(21),
            "the head names the delta by its length and CRC field"
        );
        bad[0] ^= 1;
        std::fs::write(dir.path().join(DELTA_FILE), &bad).ctx("write", dir.path())?;
        assert!(load_header(&store, dir.path())?.is_none());
        // A delta of another tree file is not applied.
        let mut other = delta.clone();
        other.base.1 ^= 1;
        std::fs::write(dir.path().join(DELTA_FILE), delta::encode(&other))
            .ctx("write", dir.path())?;
        assert_eq!(loaded().0.entries, base.entries);
        // A whole tree written removes the delta.
        std::fs::write(dir.path().join(DELTA_FILE), &bytes).ctx("write", dir.path())?;
        assert_eq!(loaded().0.entries, expected);
        let w = TreeWriter::begin(&store, dir.path())?;
        w.commit(&store, dir.path(), &base)?;
        assert!(!dir.path().join(DELTA_FILE).exists());
        assert_eq!(loaded().0.entries, base.entries);
        Ok(())
    }

    #[test]
    fn racy_entries_are_those_at_or_after_the_stamp() {
        let s = Stat {
            mtime_ns: 100,
            ctime_ns: 90,
            ..Stat::default()
        };
        assert!(s.racy(100));
        assert!(s.racy(95));
        assert!(!s.racy(101));
        let c = Stat {
            mtime_ns: 10,
            ctime_ns: 200,
            ..Stat::default()
        };
        assert!(c.racy(150), "a ctime after the stamp is racy too");
    }

    #[test]
    fn writer_stamp_comes_from_the_file_system_clock() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let fd = fsx::open_dir_path(dir.path()).ctx("open", dir.path())?;
        let before = Stat::of_raw(
            &crate::sys::fs::fstat(crate::fsx::open_dir_path(dir.path()).expect("open"))
                .expect("fstat"),
        );
        let w = TreeWriter::begin(&fd, dir.path())?;
        std::fs::write(dir.path().join("later"), b"x").expect("write");
        let later = Stat::of_file(&std::fs::File::open(dir.path().join("later")).expect("open"))
            .expect("fstat");
        assert!(
            later.racy(w.stamp_ns),
            "a file written after the stamp is racy"
        );
        assert!(before.mtime_ns <= w.stamp_ns);
        let t = sample();
        let w_stamp = w.stamp_ns;
        w.commit(&fd, dir.path(), &t)?;
        match load(&fd, dir.path())? {
            Loaded::Tree(back) => assert_eq!(back, t),
            other => panic!("{other:?}"),
        }
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["later", TREE_FILE, STAMP_FILE], "no temporary left");
        // A later scan's stamp does not go back, and creates no file.
        let again = TreeWriter::begin(&fd, dir.path())?;
        assert!(again.stamp_ns >= w_stamp);
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 3);
        Ok(())
    }
}
