//! What one turn did to each file it captured, for `show --stat` and
//! `--patch`: from its pre-image to what it left.
//!
//! What a turn left of a path (the library's `Store::left_by`):
//! - its post-image, recorded by the write, the turn's seal or its
//!   command's after half. A file's post-image is a hash: its bytes are
//!   read from the store when a later capture or snapshot stored them,
//!   else from the file when it still holds exactly them. When neither
//!   has them (the file changed since and nothing stored what the turn
//!   left), the file is shown as `not kept`, never guessed: `turnback diff
//!   T` compares the pre-image with the file now.
//! - without a post-image (a turn never sealed), the pre-image the next
//!   turn that captured the path found there;
//! - without that either, the file as it is now: no later turn touched it.
//!
//! Directories are left out (as git leaves them out); so is a file the
//! turn created and deleted again. A file over [`DIFF_LIMIT`] is named
//! with its sizes, as is a binary one (a NUL byte, or not UTF-8).

use std::fmt::Write as _;
use std::io::Read;

use serde::Serialize;
use similar::{ChangeTag, TextDiff};
use turnback::{Left, Post, Pre, Store, Turn};

use crate::out::{paint, style};

/// Larger files are named with their sizes, not diffed.
pub const DIFF_LIMIT: u64 = 8 << 20;

/// A file now larger than this is not read to check it holds what a turn
/// left.
const HASH_LIMIT: u64 = 64 << 20;

/// One side of a file's change.
enum Side {
    Absent,
    Bytes(Vec<u8>),
    Large(u64),
    Link(String),
    Dir,
    /// Not comparable, and why.
    Other(String),
}

/// What a turn did to one file.
#[derive(Serialize)]
pub struct FileChange {
    /// The path, relative to the root.
    pub path: String,
    /// "created", "modified", "deleted", "binary" (modified, not text),
    /// "not_saved" (its pre-image was not saved), "unknown" (what the turn
    /// left is not known).
    pub change: &'static str,
    /// Lines inserted and deleted (0 for a binary or large file).
    #[serde(rename = "insertion_count")]
    pub insertions: usize,
    /// See `insertions`.
    #[serde(rename = "deletion_count")]
    pub deletions: usize,
    /// Its size before the turn, when it was a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_before: Option<u64>,
    /// Its size as the turn left it, when it is a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_after: Option<u64>,
    /// Why it is not diffed, when it is not (binary, large, not kept...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The unified diff (with `--patch`), uncolored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The stat line's right part, without counts: `Bin 1.0 KiB -> ...`.
    #[serde(skip)]
    stat_text: Option<String>,
}

/// Each file `turn` changed, in the order it captured them, with its diff
/// when `patch`. The files are read and compared on up to four threads (a
/// turn of 1,000 files reads 2,000 versions and diffs 1,000 pairs).
pub fn of_turn(store: &Store, turn: &Turn, patch: bool) -> anyhow::Result<Vec<FileChange>> {
    let n = turn.files.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .clamp(1, 4)
        .min(n.div_ceil(64).max(1));
    let chunk = n.div_ceil(threads).max(1);
    let parts: Vec<anyhow::Result<Vec<FileChange>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = turn
            .files
            .chunks(chunk)
            .map(|files| scope.spawn(move || changes_of(store, turn, files, patch)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("comparing the turn's files failed")))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(n);
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// The changes of `files`, some of `turn`'s captures.
fn changes_of(
    store: &Store,
    turn: &Turn,
    files: &[turnback::Captured],
    patch: bool,
) -> anyhow::Result<Vec<FileChange>> {
    let mut blobs = store.blob_reader();
    let mut out = Vec::new();
    for c in files {
        let path = c.entry.path.to_string();
        if let Some(problem) = c.entry.path.problem_here() {
            out.push(noted(path, "unknown", format!("not compared: {problem}")));
            continue;
        }
        let before = side_of_pre(&mut blobs, &c.entry.pre)?;
        if let (Side::Other(why), Pre::Skipped { .. }) = (&before, &c.entry.pre) {
            out.push(noted(path, "not_saved", format!("not saved: {why}")));
            continue;
        }
        let after = match store.left_by(turn, &c.entry.path)? {
            Left::Post(post) => side_of_post(store, &mut blobs, &c.entry.path, post)?,
            Left::NextPre { pre, .. } => side_of_pre(&mut blobs, pre)?,
            Left::Now => current(store, c.entry.path.as_path())?.0,
        };
        if let Some(change) = compare(path, &before, &after, patch) {
            out.push(change);
        }
    }
    Ok(out)
}

fn noted(path: String, change: &'static str, note: String) -> FileChange {
    FileChange {
        path,
        change,
        insertions: 0,
        deletions: 0,
        size_before: None,
        size_after: None,
        stat_text: Some(note.clone()),
        note: Some(note),
        diff: None,
    }
}

fn side_of_pre(blobs: &mut turnback::BlobReader<'_>, pre: &Pre) -> anyhow::Result<Side> {
    Ok(match pre {
        Pre::File { size, .. } if *size > DIFF_LIMIT => Side::Large(*size),
        Pre::File { blob, .. } => Side::Bytes(blobs.read(blob)?),
        Pre::Symlink { target } => Side::Link(target.clone()),
        Pre::Absent => Side::Absent,
        Pre::Dir { .. } => Side::Dir,
        Pre::Fifo { .. } => Side::Other("a FIFO".into()),
        Pre::Skipped { reason, .. } => Side::Other(reason.clone()),
        Pre::Aside { .. } => Side::Other("kept aside by an operation".into()),
    })
}

fn side_of_post(
    store: &Store,
    blobs: &mut turnback::BlobReader<'_>,
    rel: &turnback::RelPath,
    post: &Post,
) -> anyhow::Result<Side> {
    Ok(match post {
        Post::File { sha256, stat } => match store.blob_size(sha256) {
            Some(size) if size > DIFF_LIMIT => Side::Large(size),
            Some(_) => Side::Bytes(blobs.read(sha256)?),
            None => {
                let (now, key) = current(store, rel.as_path())?;
                // The file as it was hashed (same identity and times) holds
                // those bytes: no need to hash it again.
                let unchanged = key.is_some() && key == *stat;
                match now {
                    Side::Bytes(b) if unchanged || turnback::pack::hash_bytes(&b) == *sha256 => {
                        Side::Bytes(b)
                    }
                    Side::Large(n)
                        if unchanged || (n <= HASH_LIMIT && hashes_to(store, rel, sha256)?) =>
                    {
                        Side::Large(n)
                    }
                    _ => Side::Other(
                        "what the turn left is not kept: the file changed since, and no later turn stored those bytes".into(),
                    ),
                }
            }
        },
        Post::Symlink { target } => Side::Link(target.clone()),
        Post::Absent => Side::Absent,
        Post::Dir => Side::Dir,
        Post::Other => {
            Side::Other("not compared (not a regular file, or over the size cap)".into())
        }
    })
}

/// Whether the large file `rel` now hashes to `sha256`.
fn hashes_to(
    store: &Store,
    rel: &turnback::RelPath,
    sha256: &turnback::BlobId,
) -> anyhow::Result<bool> {
    let p = store.root().join(rel.as_path());
    let bytes = std::fs::read(&p)
        .map_err(|e| anyhow::Error::new(e).context(format!("cannot read {}", p.display())))?;
    Ok(turnback::pack::hash_bytes(&bytes) == *sha256)
}

/// The path as it is now, with the identity and times of a regular file
/// (as a post-image's stat key records them; `None` where the platform
/// does not give them all).
fn current(
    store: &Store,
    rel: &std::path::Path,
) -> anyhow::Result<(Side, Option<turnback::log::StatKey>)> {
    let p = store.root().join(rel);
    let cannot = |what: &str, e: std::io::Error| {
        anyhow::Error::new(e).context(format!("cannot {what} {}", p.display()))
    };
    // One open for a regular file (never through a symlink, never waiting
    // on a FIFO); anything else is looked at without opening it.
    let opened = match open_file(&p) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Side::Absent, None)),
        Err(_) => None,
    };
    let (file, meta) = match opened {
        Some(f) => {
            let meta = f.metadata().map_err(|e| cannot("look at", e))?;
            (Some(f), meta)
        }
        None => match std::fs::symlink_metadata(&p) {
            Ok(m) => (None, m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Side::Absent, None)),
            Err(e) => return Err(cannot("look at", e)),
        },
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&p).map_err(|e| cannot("read", e))?;
        return Ok((Side::Link(target.to_string_lossy().into_owned()), None));
    }
    if meta.is_dir() {
        return Ok((Side::Dir, None));
    }
    let (Some(mut file), true) = (file, meta.is_file()) else {
        return Ok((Side::Other("not a regular file".into()), None));
    };
    let key = stat_key(&meta);
    if meta.len() > DIFF_LIMIT {
        return Ok((Side::Large(meta.len()), key));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0) + 1);
    file.read_to_end(&mut bytes)
        .map_err(|e| cannot("read", e))?;
    Ok((Side::Bytes(bytes), key))
}

/// Opens `p` for reading if it is not a symlink, without waiting on a FIFO.
#[cfg(unix)]
fn open_file(p: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
}

/// Opens `p` for reading if it is a regular file (a symlink or anything
/// else is looked at without opening it).
#[cfg(windows)]
fn open_file(p: &std::path::Path) -> std::io::Result<std::fs::File> {
    let meta = std::fs::symlink_metadata(p)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    std::fs::File::open(p)
}

/// A regular file's stat key, as the library records it with a
/// post-image.
#[cfg(unix)]
fn stat_key(meta: &std::fs::Metadata) -> Option<turnback::log::StatKey> {
    use std::os::unix::fs::MetadataExt;
    let ns = |sec: i64, nsec: i64| sec.saturating_mul(1_000_000_000).saturating_add(nsec);
    // macOS's st_dev is 32 bits, which the library keeps unsigned.
    #[cfg(target_os = "macos")]
    let dev = u64::from(meta.dev() as u32);
    #[cfg(not(target_os = "macos"))]
    let dev = meta.dev();
    Some(turnback::log::StatKey {
        dev,
        ino: meta.ino(),
        size: meta.size(),
        mtime: ns(meta.mtime(), meta.mtime_nsec()),
        ctime: ns(meta.ctime(), meta.ctime_nsec()),
    })
}

/// Windows: std does not give a file's change time.
#[cfg(windows)]
fn stat_key(_meta: &std::fs::Metadata) -> Option<turnback::log::StatKey> {
    None
}

/// Text, when `b` is: no NUL byte and valid UTF-8.
fn text(b: &[u8]) -> Option<&str> {
    if b.contains(&0) {
        return None;
    }
    std::str::from_utf8(b).ok()
}

fn size_of(s: &Side) -> Option<u64> {
    match s {
        Side::Bytes(b) => Some(b.len() as u64),
        Side::Large(n) => Some(*n),
        _ => None,
    }
}

/// The change from `before` to `after`, or `None` when the stat and the
/// patch leave it out (a directory, nothing changed).
fn compare(path: String, before: &Side, after: &Side, patch: bool) -> Option<FileChange> {
    use Side::*;
    match (before, after) {
        (Dir, _) | (_, Dir) | (Absent, Absent) => return None,
        (Bytes(a), Bytes(b)) if a == b => return None,
        (Link(a), Link(b)) if a == b => return None,
        _ => {}
    }
    if let (_, Other(why)) | (Other(why), _) = (before, after) {
        return Some(noted(path, "unknown", why.clone()));
    }
    let change = match (before, after) {
        (Absent, _) => "created",
        (_, Absent) => "deleted",
        _ => "modified",
    };
    let mut fc = FileChange {
        path,
        change,
        insertions: 0,
        deletions: 0,
        size_before: size_of(before),
        size_after: size_of(after),
        note: None,
        diff: None,
        stat_text: None,
    };
    let human = |s: Option<u64>| crate::size::human(s.unwrap_or(0));
    if matches!(before, Large(_)) || matches!(after, Large(_)) {
        let sizes = format!("{} -> {}", human(fc.size_before), human(fc.size_after));
        fc.note = Some(format!("large file, not diffed ({sizes})"));
        fc.stat_text = Some(format!("Large {sizes}"));
        return Some(fc);
    }
    let as_text = |s: &Side| -> Option<String> {
        match s {
            Absent => Some(String::new()),
            Bytes(b) => text(b).map(str::to_owned),
            // Like git: a symlink's content is its target, no newline.
            Link(t) => Some(t.clone()),
            _ => None,
        }
    };
    let (Some(old), Some(new)) = (as_text(before), as_text(after)) else {
        if change == "modified" {
            fc.change = "binary";
        }
        let sizes = format!("{} -> {}", human(fc.size_before), human(fc.size_after));
        fc.note = Some(format!("binary file, not diffed ({sizes})"));
        fc.stat_text = Some(format!("Bin {sizes}"));
        return Some(fc);
    };
    let (old_lines, new_lines) = (lines(&old), lines(&new));
    let diff = TextDiff::configure()
        .newline_terminated(true)
        .diff_slices(&old_lines, &new_lines);
    for c in diff.iter_all_changes() {
        match c.tag() {
            ChangeTag::Insert => fc.insertions += 1,
            ChangeTag::Delete => fc.deletions += 1,
            ChangeTag::Equal => {}
        }
    }
    if patch {
        let a = if matches!(before, Absent) {
            "/dev/null".to_owned()
        } else {
            format!("a/{}", fc.path)
        };
        let b = if matches!(after, Absent) {
            "/dev/null".to_owned()
        } else {
            format!("b/{}", fc.path)
        };
        fc.diff = Some(diff.unified_diff().header(&a, &b).to_string());
    }
    Some(fc)
}

/// `text` cut into lines, each with its line end: the lines `similar`
/// would make (cut with `memchr`, faster than its own tokenizer).
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// Writes the patch of `changes` to `out`: each file's unified diff, or a
/// line naming it and why it is not diffed; colored when color is on.
pub fn write_patch(out: &mut crate::out::Buffer, changes: &[FileChange]) -> std::io::Result<()> {
    for c in changes {
        match &c.diff {
            Some(d) if crate::out::color() => {
                for line in d.split_inclusive('\n') {
                    let st = if line.starts_with("+++") || line.starts_with("---") {
                        Some(style::HEADER)
                    } else if line.starts_with("@@") {
                        Some(style::HUNK)
                    } else if line.starts_with('+') {
                        Some(style::ADDED)
                    } else if line.starts_with('-') {
                        Some(style::REMOVED)
                    } else {
                        None
                    };
                    match st {
                        Some(st) => {
                            let body = line.strip_suffix('\n').unwrap_or(line);
                            let _ = writeln!(out, "{}", paint(st, body));
                        }
                        None => out.push(line),
                    }
                }
            }
            Some(d) => out.push(d),
            None => {
                let note = c.note.as_deref().unwrap_or("not diffed");
                let _ = writeln!(out, "{}: {note}", paint(style::HEADER, &c.path));
            }
        }
        out.flush_if_full()?;
    }
    Ok(())
}

/// Writes the stat of `changes` to `out`, as `git show --stat` does: a
/// line per file with its count of changed lines and a bar of `+` and
/// `-`, then a summary line.
pub fn write_stat(out: &mut crate::out::Buffer, changes: &[FileChange]) -> std::io::Result<()> {
    const NAME_MAX: usize = 50;
    const BAR_MAX: usize = 40;
    let shown = |p: &str| -> String {
        let n = p.chars().count();
        if n <= NAME_MAX {
            p.to_owned()
        } else {
            let tail: String = p.chars().skip(n - (NAME_MAX - 3)).collect();
            format!("...{tail}")
        }
    };
    let names: Vec<String> = changes.iter().map(|c| shown(&c.path)).collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let most = changes
        .iter()
        .map(|c| c.insertions + c.deletions)
        .max()
        .unwrap_or(0);
    let digits = most.to_string().len();
    let scale = |n: usize| -> usize {
        if most <= BAR_MAX || n == 0 {
            n
        } else {
            (1 + n * (BAR_MAX - 1) / most).min(BAR_MAX)
        }
    };
    let (mut ins, mut del) = (0, 0);
    for (c, name) in changes.iter().zip(&names) {
        let pad = width - name.chars().count();
        let _ = write!(out, " {name}{:pad$} | ", "");
        match &c.stat_text {
            Some(text) => {
                let _ = writeln!(out, "{text}");
            }
            None => {
                ins += c.insertions;
                del += c.deletions;
                let (mut p, mut m) = (scale(c.insertions), scale(c.deletions));
                if most > BAR_MAX && p + m > BAR_MAX {
                    // Rounding up both may pass the bar's width by one.
                    if p >= m { p -= 1 } else { m -= 1 }
                }
                let _ = writeln!(
                    out,
                    "{:>digits$} {}{}",
                    c.insertions + c.deletions,
                    paint(style::ADDED, "+".repeat(p)),
                    paint(style::REMOVED, "-".repeat(m)),
                );
            }
        }
        out.flush_if_full()?;
    }
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut summary = format!(" {} changed", plural(changes.len(), "file", "files"));
    if ins > 0 || del == 0 {
        summary += &format!(", {}(+)", plural(ins, "insertion", "insertions"));
    }
    if del > 0 || ins == 0 {
        summary += &format!(", {}(-)", plural(del, "deletion", "deletions"));
    }
    let _ = writeln!(out, "{summary}");
    Ok(())
}
