//! Restoring files' bytes: each planned file decompressed into a temporary
//! file beside its target, then renamed over it, relative to directory
//! handles held by a [`DirStack`].
//!
//! The jobs come sorted by path, so each pass opens every directory once
//! and holds one handle per level of the current path (see
//! [`crate::dirstack`]); the work is done in chunks of [`CHUNK`] files on
//! every core, each chunk holding only its own directories' handles, so
//! descriptors and memory are bounded by the chunk, not the tree. Within a
//! chunk, a directory's files (up to [`RUN`] of them) go to one thread:
//! two threads creating files in one directory serialize on its lock. A
//! blob is streamed through its decompressor into the file (never read
//! whole into memory) and re-hashed on the way: a blob that does not match
//! its id never reaches the project. All-zero blocks are left as holes (see
//! [`crate::sparse`]).
//!
//! Temporary names are made by [`fsx::temp_name`] (`O_CREAT | O_EXCL`,
//! never through a symlink); the staging pass sweeps every directory it
//! opens of the temporary files of an interrupted process. A failed path
//! leaves no temporary file. Whether each temporary file is `fsync`ed here
//! or the whole file system is flushed once the pass is done is the
//! caller's choice (see [`crate::durable`]).

use crate::sys::OwnedFd;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::Arc;

use crate::sys::Errno;

use crate::dirstack::{DirStack, Reach, parent_bytes};
use crate::error::{Error, Result};
use crate::fsx;
use crate::id::BlobId;
use crate::log::FailedPath;
use crate::path::RelPath;
use crate::sparse::SparseWriter;
use crate::store::Store;
use crate::trash::Trash;

/// Files handled together on every core.
const CHUNK: usize = 256;

/// Where a restored file's bytes come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    /// A blob, in a pack the caller opened.
    Blob(&'a BlobId),
    /// A file an earlier operation kept aside (see `aside.rs`): its
    /// record, its number, and the bucket the caller opened.
    Kept { seq: u64, n: u64 },
}

/// One file to restore: its path, where its bytes are and its mode bits.
pub(crate) type Job<'a> = (&'a RelPath, Source<'a>, u32);

/// The buckets of the kept files a restore reads.
pub(crate) use crate::aside::Buckets;

/// A file written under a temporary name beside its path.
pub(crate) type Staged<'a> = (&'a RelPath, fsx::Temp);

/// Runs `work` on every item of `items` (sorted by path) with the handle
/// of the directory holding it, chunk by chunk on every core. Items whose
/// directory cannot be reached (or made, with `make`) get `unreachable`
/// with the reason. Results come back chunk by chunk, in path order within
/// each directory.
fn in_dirs<'a, T: Sync, R: Send>(
    walk: &mut DirStack,
    items: &'a [T],
    path: impl Fn(&T) -> &RelPath,
    make: bool,
    unreachable: &str,
    work: impl Fn(&OwnedFd, &'a T) -> Result<R, String> + Sync,
) -> Vec<(&'a T, Result<R, String>)> {
    let mut out = Vec::with_capacity(items.len());
    for chunk in items.chunks(CHUNK) {
        // Each directory's handle, shared with the walk (`None`: the root).
        let mut handles: Vec<Option<Arc<OwnedFd>>> = Vec::new();
        let mut todo: Vec<(usize, &'a T)> = Vec::with_capacity(chunk.len());
        let mut last: Option<&[u8]> = None;
        for item in chunk {
            let dir = parent_bytes(path(item));
            if last != Some(dir) {
                last = None;
                let reached = match walk.reach(dir, make) {
                    Ok(Reach::Open(_)) => Ok(()),
                    Ok(Reach::Missing { .. } | Reach::NotDir { .. }) => {
                        Err(unreachable.to_string())
                    }
                    Err(e) => Err(format!("{unreachable}: {e}")),
                };
                match reached {
                    Ok(()) => {
                        handles.push(walk.shared());
                        last = Some(dir);
                    }
                    Err(reason) => {
                        out.push((item, Err(reason)));
                        continue;
                    }
                }
            }
            todo.push((handles.len() - 1, item));
        }
        let root = walk.root();
        let handle = |h: usize| handles[h].as_deref().unwrap_or(root);
        // One directory's files on one thread at a time: files created or
        // renamed in one directory by two threads wait for each other on
        // its lock, one of them spinning (see `RUN` for large ones).
        let runs = dir_runs(&todo);
        let done: Vec<Vec<(&'a T, Result<R, String>)>> = crate::par::map(&runs, |run| {
            run.iter()
                .map(|&(h, item)| (item, work(handle(h), item)))
                .collect()
        });
        out.extend(done.into_iter().flatten());
    }
    out
}

/// Calls its function when dropped: once per job, however the job ends.
struct Ticks<'a, F: Fn()>(&'a F);

impl<F: Fn()> Drop for Ticks<'_, F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Files of one directory done in a row on one thread, at most: a larger
/// directory is split, so its files still use every core.
const RUN: usize = 64;

/// `todo` (sorted by directory) cut into runs of one directory's files, at
/// most [`RUN`] long.
fn dir_runs<T>(todo: &[(usize, T)]) -> Vec<&[(usize, T)]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=todo.len() {
        if i == todo.len() || todo[i].0 != todo[start].0 || i - start == RUN {
            runs.push(&todo[start..i]);
            start = i;
        }
    }
    runs
}

/// Copies the kept file `n` of the record `seq` into the temporary file
/// `file`; `fsync`ed when `per_file`. Returns whether it was written:
/// `false` when the kept file is gone (the operation that kept it left
/// the path as it was).
fn stage_kept(
    buckets: &Buckets,
    seq: u64,
    n: u64,
    file: File,
    per_file: bool,
) -> Result<bool, String> {
    let Some(bucket) = buckets.held(seq, n) else {
        return Ok(false);
    };
    let Some(mut kept) = crate::aside::open_in(bucket, n)
        .map_err(|e| format!("cannot open the file kept for it in the store: {e}"))?
    else {
        return Ok(false);
    };
    let mut w = SparseWriter::new(file);
    std::io::copy(&mut kept, &mut w)
        .map_err(|e| format!("cannot copy the file kept for it in the store: {e}"))?;
    finish(w, per_file).map(|()| true)
}

/// Ends a staged file's writing; `fsync`s it when `per_file`.
fn finish(w: SparseWriter, per_file: bool) -> Result<(), String> {
    let f = w.finish().map_err(|e| format!("cannot write: {e}"))?;
    if per_file {
        // fsync, not fdatasync: the mode is metadata.
        fsx::fsync_queued(&f).map_err(|e| format!("cannot flush it to disk: {e}"))?;
    }
    Ok(())
}

impl Store {
    /// Writes every job's bytes into a temporary file beside its path
    /// (missing directories on the way are made), `fsync`ed when
    /// `per_file`; the file there now gives it its extended attributes.
    /// Returns the staged files, sorted by path; the paths that failed go
    /// to `failed`, what could not be kept of a file replaced to `lost`.
    /// A kept file that is gone (its operation left the path as it was)
    /// stages nothing and fails nothing.
    pub(crate) fn stage_all<'a>(
        &self,
        packs: &HashMap<String, File>,
        buckets: &Buckets,
        jobs: &[Job<'a>],
        per_file: bool,
        failed: &mut Vec<FailedPath>,
        lost: &mut Vec<String>,
    ) -> Result<Vec<Staged<'a>>> {
        let mut walk = self.place.walk().sweeping();
        // Each job counts as done once its file is staged (or failed): the
        // renames that follow are quick (see `Progress::changed`).
        let worked = std::sync::atomic::AtomicUsize::new(0);
        let tick = || {
            if let Some(p) = &self.progress {
                p.changed(1);
            }
        };
        let done = in_dirs(
            &mut walk,
            jobs,
            |j| j.0,
            true,
            "its directory cannot be created",
            |dir, &(path, source, mode)| {
                let _done = Ticks(&tick);
                worked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (file, temp, lost) = fsx::create_temp_replacing(dir, path.file_name(), mode)
                    .map_err(|e| format!("cannot create a temporary file: {e}"))?;
                let written = match source {
                    Source::Blob(blob) => self.stage_blob(packs, blob, file, per_file),
                    Source::Kept { seq, n } => stage_kept(buckets, seq, n, file, per_file),
                };
                if !matches!(written, Ok(true)) {
                    let _ = fsx::unlink(dir, temp.beside(path.file_name()).as_str());
                }
                written.map(|w| w.then_some((temp, lost)))
            },
        );
        // Jobs whose directory could not be reached did no work.
        let unreached = jobs.len() - worked.into_inner();
        if let Some(p) = self.progress.as_ref().filter(|_| unreached > 0) {
            p.changed(unreached as u64);
        }
        let mut staged = Vec::with_capacity(jobs.len());
        for (&(path, _, _), res) in done {
            match res {
                Ok(Some((tmp, not_kept))) => {
                    lost.extend(not_kept.into_iter().map(|w| format!("{path}: {w}")));
                    staged.push((path, tmp));
                }
                Ok(None) => {}
                Err(reason) => failed.push(FailedPath {
                    path: path.clone(),
                    reason,
                }),
            }
        }
        staged.sort_by(|a, b| a.0.cmp(b.0));
        Ok(staged)
    }

    /// Decompresses and verifies a blob into the temporary file `file`;
    /// `fsync`ed when `per_file`. Returns whether it was written.
    fn stage_blob(
        &self,
        packs: &HashMap<String, File>,
        blob: &BlobId,
        file: File,
        per_file: bool,
    ) -> Result<bool, String> {
        let loc = self
            .index
            .blobs
            .get(blob)
            .ok_or("its blob is not in the store")?;
        let pack = packs.get(&*loc.pack).ok_or("its pack is not open")?;
        // All-zero blocks become holes: a sparse pre-image comes back sparse.
        let mut w = SparseWriter::new(file);
        self.copy_blob_from(pack, blob, &loc, &mut w)
            .map_err(|e| match e {
                // The temporary file failed, not the blob: said as `finish`
                // says it of the last bytes.
                Error::BlobWrite { source, .. } => format!("cannot write: {source}"),
                e => e.to_string(),
            })?;
        finish(w, per_file).map(|()| true)
    }

    /// Renames every staged file over its path (an empty directory standing
    /// there is removed first, flushed first when `per_file`: removals in it
    /// are durable before it goes). Returns, per staged file, whether it is
    /// in place or why not; a file not renamed leaves no temporary file.
    pub(crate) fn rename_all<'a>(
        &self,
        staged: &'a [Staged<'a>],
        per_file: bool,
        kept_aside: &HashSet<&RelPath>,
    ) -> Vec<(&'a RelPath, Result<(), String>)> {
        let mut walk = self.place.walk();
        // The files replaced get a second name in the trash first, so the
        // renames free nothing while the user waits (see `trash.rs`); those
        // kept aside in the store already have one.
        let trash = self
            .trash_data_dir()
            .filter(|_| staged.iter().any(|(p, _)| !kept_aside.contains(p)))
            .and_then(|data| Trash::open(data, &self.place.root_fd));
        let done = in_dirs(
            &mut walk,
            staged,
            |s| s.0,
            false,
            "its directory is gone",
            |dir, (path, temp)| {
                let name = path.file_name();
                let tmp = temp.beside(name);
                let tmp = tmp.as_str();
                let kept = trash
                    .as_ref()
                    .filter(|_| !kept_aside.contains(path))
                    .and_then(|t| t.keep(dir, name));
                let res = match fsx::rename(dir, tmp, name) {
                    Ok(()) => Ok(()),
                    // A directory stands there: only an empty one goes.
                    Err(e) if e.raw_os_error() == Some(Errno::ISDIR.raw_os_error()) => {
                        fsx::rmdir_flushed(dir, name, per_file)
                            .map_err(|e| {
                                format!(
                                    "a directory stands in its place and cannot be removed: {e}"
                                )
                            })
                            .and_then(|()| fsx::rename(dir, tmp, name).map_err(|e| e.to_string()))
                    }
                    Err(e) => Err(e.to_string()),
                };
                if res.is_err() {
                    let _ = fsx::unlink(dir, tmp);
                    if let (Some(t), Some(entry)) = (&trash, &kept) {
                        t.forget(entry);
                    }
                }
                res
            },
        );
        // A file whose directory could not be reached still has its
        // temporary file: another try to remove it.
        let left: Vec<Staged> = done
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(s, _)| **s)
            .collect();
        self.unlink_staged(&left);
        done.into_iter().map(|(s, r)| (s.0, r)).collect()
    }

    /// Removes staged temporary files (best effort: the operation failed).
    pub(crate) fn unlink_staged(&self, staged: &[Staged<'_>]) {
        let mut walk = self.place.walk();
        for (path, temp) in staged {
            if let Ok(Reach::Open(d)) = walk.parent_of(path, false) {
                let _ = fsx::unlink(d, temp.beside(path.file_name()).as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_keep_one_directory_each_and_no_more_than_run_files() {
        let mut todo: Vec<(usize, u32)> = Vec::new();
        for (dir, files) in [(0, 3), (1, 1), (2, RUN * 2 + 1), (3, 2)] {
            todo.extend((0..files).map(|f| (dir, f as u32)));
        }
        let lens: Vec<(usize, usize)> = dir_runs(&todo).iter().map(|r| (r[0].0, r.len())).collect();
        assert_eq!(
            lens,
            vec![(0, 3), (1, 1), (2, RUN), (2, RUN), (2, 1), (3, 2)]
        );
        for run in dir_runs(&todo) {
            assert!(run.iter().all(|(d, _)| *d == run[0].0));
        }
        assert!(dir_runs::<u32>(&[]).is_empty());
    }
}
