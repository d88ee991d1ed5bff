//! Making a rewind's changes to the project durable: fsyncs of exactly
//! what it wrote for a small batch, one file-system-wide flush for a large
//! one.
//!
//! A rewind (revert, undo, redo) writes its files under temporary names,
//! makes their bytes durable, renames them into place, then makes the new
//! directory entries durable before its record is appended. Two ways do it:
//!
//! - [`Durability::PerFile`]: each temporary file is `fsync`ed after it is
//!   written (`fsync`, not `fdatasync`: its mode is metadata), and once
//!   every entry is in place each directory whose entries or mode the
//!   operation may have changed is `fsync`ed: the parent of every path it
//!   touched and every ancestor up to the root, plus every directory it
//!   made or gave a mode. Only the operation's own inodes are flushed.
//!   The directories are flushed at the same time, one thread each (up to
//!   eight): on ext4 an `fsync` of a directory with nothing dirty still
//!   waits for the device to flush its cache, and the waits overlap, so a
//!   file five levels down costs about one flush, not six in a row.
//! - [`Durability::WholeFs`]: one `syncfs` after the temporary files are
//!   written and one after the renames. `syncfs` also waits for every dirty
//!   page of every other process on the file system (a build writing
//!   gigabytes makes it slow), but beyond a handful of files it is cheaper
//!   than a flush per file: on ext4 without a journal each `fsync` of a new
//!   file waits for its own device writes.
//!
//! On macOS there is no `syncfs`, and an `fsync` only hands the data to
//! the drive: every operation is `PerFile` there, with plain `fsync`s
//! and one `F_FULLFSYNC` (which empties the drive's cache) before the
//! renames and one at the end, so a 5,000-file rewind costs two full
//! flushes, not 5,000 (`crate::sys`).
//!
//! The threshold, [`PER_FILE_AT_MOST`] files, was measured on the
//! development machine (ext4 without a journal, mounted with `discard`,
//! the machine otherwise quiet) with `turnback rewind` of turns of N files
//! in a 4,686-file project, three runs each way (wall time of the process):
//! N = 1: 12.4–16.3 ms against 16.2–26.0 ms with `syncfs`; N = 2:
//! 12.3–21.5 against 16.8–34.9; N = 4: 12.8–27.3 against 12.7–21.7 (within
//! noise); N = 8: 24.8–30.7 against 20.9–25.3; N = 64: 87–101 against
//! 61–88. `TURNBACK_FSYNC_AT_MOST` overrides it (for measurements and
//! tests). An error from either flush fails the operation (after a failed
//! fsync Linux may report a later one as successful with the data gone).

use crate::sys::OwnedFd;
use std::collections::BTreeSet;
use std::io;

use crate::dirstack::{DirStack, Reach, parent_bytes};
use crate::fsx;
use crate::path::RelPath;

/// Up to this many files written, each is flushed on its own; above it,
/// the whole file system is (see the module doc).
pub(crate) const PER_FILE_AT_MOST: usize = 3;

/// How an operation makes its writes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// `fsync` of every file written and every directory changed.
    PerFile,
    /// `syncfs` of the project's file system.
    WholeFs,
}

impl Durability {
    /// The way for an operation that writes `files` files.
    pub(crate) fn for_files(files: usize) -> Durability {
        let at_most = std::env::var("TURNBACK_FSYNC_AT_MOST")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(PER_FILE_AT_MOST);
        if files <= at_most || !crate::sys::WHOLE_FS_FLUSH {
            Durability::PerFile
        } else {
            Durability::WholeFs
        }
    }
}

/// The directories a [`Durability::PerFile`] operation flushes at its end.
#[derive(Debug, Default)]
pub(crate) struct DirsToSync {
    /// Directory paths (empty: the root).
    dirs: BTreeSet<Vec<u8>>,
}

impl DirsToSync {
    /// The directory holding `path` and every directory above it.
    pub(crate) fn entry_of(&mut self, path: &RelPath) {
        self.with_ancestors(parent_bytes(path));
    }

    /// The directory `path` itself (made, or given a mode), and every
    /// directory above it.
    pub(crate) fn dir(&mut self, path: &RelPath) {
        self.with_ancestors(path.as_bytes());
    }

    fn with_ancestors(&mut self, dir: &[u8]) {
        if !self.dirs.insert(dir.to_vec()) {
            return;
        }
        self.dirs.insert(Vec::new());
        for (i, b) in dir.iter().enumerate() {
            if *b == b'/' {
                self.dirs.insert(dir[..i].to_vec());
            }
        }
    }

    /// `fsync`s every directory (reached in path order from `root`, all
    /// flushed at once: see [`fsync_all`]), then commits them (see
    /// `fsx::commit_queued`).
    /// A directory that no longer exists (the operation removed it, or it
    /// is not a directory now) is passed over: its parent holds the change.
    pub(crate) fn sync(&self, root: &OwnedFd) -> io::Result<()> {
        let mut walk = DirStack::new(root);
        let mut fds = Vec::with_capacity(self.dirs.len());
        for dir in &self.dirs {
            if let Reach::Open(fd) = walk.reach(dir, false)? {
                fds.push(crate::sys::dup(fd)?);
            }
        }
        drop(walk);
        fsync_all(&fds)?;
        fsx::commit_queued(root)
    }
}

/// Threads [`fsync_all`] uses at most.
const FSYNC_THREADS: usize = 8;

/// `fsync`s every handle, the flushes running at the same time: each one
/// waits for the device (on ext4, an `fsync` of a directory nothing
/// changed still waits for a cache flush, 0.1 to 4 ms on the development
/// machine), and overlapping waits cost about one. So the directories
/// above a restored file cost about one flush, not one per level. Every
/// result is checked: the first error is returned, after every flush has
/// ended. A thread that cannot be started leaves its share to this one.
fn fsync_all(fds: &[OwnedFd]) -> io::Result<()> {
    if fds.len() <= 1 {
        return fds.iter().try_for_each(fsx::fsync_queued);
    }
    let per = fds.len().div_ceil(FSYNC_THREADS);
    let mut chunks = fds.chunks(per);
    let mine = chunks.next().unwrap_or_default();
    let flush = |chunk: &[OwnedFd]| -> io::Result<()> {
        // Every one is flushed even after an error: none is left running.
        let mut first = Ok(());
        for fd in chunk {
            let r = fsx::fsync_queued(fd);
            if first.is_ok() {
                first = r;
            }
        }
        first
    };
    std::thread::scope(|s| {
        let mut results = Vec::new();
        let mut threads = Vec::new();
        for chunk in chunks {
            match std::thread::Builder::new().spawn_scoped(s, move || flush(chunk)) {
                Ok(t) => threads.push(t),
                Err(_) => results.push(flush(chunk)),
            }
        }
        results.push(flush(mine));
        for t in threads {
            results.push(t.join().unwrap_or_else(|_| {
                Err(io::Error::other("a thread flushing directories panicked"))
            }));
        }
        results
            .into_iter()
            .collect::<io::Result<Vec<()>>>()
            .map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ancestor_is_flushed_once() -> Result<(), Box<dyn std::error::Error>> {
        let mut d = DirsToSync::default();
        d.entry_of(&RelPath::parse("a/b/c.txt")?);
        d.entry_of(&RelPath::parse("a/d.txt")?);
        d.dir(&RelPath::parse("e")?);
        let got: Vec<&[u8]> = d.dirs.iter().map(Vec::as_slice).collect();
        assert_eq!(got, vec![&b""[..], b"a", b"a/b", b"e"]);
        Ok(())
    }
}
