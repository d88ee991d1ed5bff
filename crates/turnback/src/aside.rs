//! Files kept aside: `<store>/aside/<seq>/<n / 1024>/<n>`, the files an
//! operation (a rewind, undo or redo) replaced or removed, kept whole by a
//! second name instead of being read, hashed and compressed into a pack.
//!
//! Saving the current state of every path an operation changes is what
//! makes it undoable, and reading each file for that cost a rewind one
//! `openat` per file, its hashing and its compression. Where the store and
//! the project are on one file system, a regular file with no other name
//! is instead hard-linked into the store while the operation saves the
//! states (its `saved` record names it [`Pre::Aside`]): the rename that
//! later puts the restored bytes at the path only drops the project's name,
//! and the bytes stay, unread, under the store's. A file whose post-image
//! a conflict check compares is kept only when it still has the look
//! (`StatKey`) recorded with that post-image, and is then kept with its
//! hash. A file that cannot be kept this way (another file system, a link
//! refused, other names, a look changed or never recorded) is read as
//! before. Once
//! the operation has answered, the background maintenance
//! ([`Store::maintain`]) reads the kept files, stores them as blobs (a
//! blob stored already is not written again), appends a `packed` record
//! naming the `saved` record, and removes them: the store then holds them
//! as it holds any saved state.
//!
//! Layout: `aside/<seq>/`, one directory per `saved` record (`seq` is its
//! sequence number), holding buckets `<n / 1024>/` of at most 1,024 names
//! `<n>` (a directory of 100,000 names made each link search and grow it;
//! see `trash.rs`). Directories are made `0700`. A run of files is kept on
//! every core: their numbers, and so their buckets, are fixed before any
//! link is made, so a file that is not kept leaves its number unused (the
//! record lists the numbers of the files kept).
//!
//! Invariants:
//! - A name is made before the `saved` record that lists it, and the
//!   buckets, the record's directory and `aside/` are `fsync`ed before that
//!   record is appended: a listed name is durable.
//! - After the link, the kept file has exactly two names, the project's and
//!   the store's (checked on the store's name, so a file swapped in between
//!   is never taken for the one looked at); otherwise the name is removed
//!   and the file read instead.
//! - When the operation is done, a kept file it did not replace or remove
//!   (a path that failed, say) loses its store name, so no project file
//!   keeps a second name (a capture would take it for a hard link). A
//!   listed name that is missing therefore means the operation left that
//!   path as it was: undoing it, or rolling it back, leaves the path alone.
//! - Names are only read (copied out, never moved: the same bytes may be
//!   put back again by a rollback of that undo) and removed with their
//!   whole `aside/<seq>/`, durably: once their `packed` record is durable,
//!   or when gc drops the `saved` record; a directory whose record the log
//!   does not hold (a crash before the record) is removed by the next
//!   mutation. The `saved` record last in the log (an interrupted
//!   operation's, which the next mutation rolls back from its kept files)
//!   is never packed.
//! - A kept file is read only through the store's name; nothing but a
//!   process that held the project file open before the operation can
//!   still write to it.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io;

use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::id::BlobId;
use crate::log::{FileEntry, Op, Pre, StatKey, StoredBlob};
use crate::pack::{self, PackWriter};
use crate::path::RelPath;
use crate::store::Store;
use crate::sys::fs::{AtFlags, Mode};
use crate::sys::{Errno, OwnedFd};

/// The directory of kept files inside the store.
pub const ASIDE_DIR: &str = "aside";

/// Paths an operation must change at least for it to keep files aside:
/// keeping costs a few directories made and four `fsync`s of them, which
/// a one-file rewind paid more for than for reading its file (5.24 ms
/// against `git checkout`'s 4.82 ms, where reading it took 0.91 times
/// git's; `docs/BENCHMARKS.md`). Below it, an operation also makes each
/// file durable by its own `fsync` (`durable.rs`).
pub(crate) const AT_LEAST: usize = 4;

/// Names per bucket.
const BUCKET: u64 = 1024;

/// A kept file: its number, size and permission bits, and its look as
/// the store's name shows it (its `ctime` is the link's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kept {
    pub(crate) n: u64,
    pub(crate) size: u64,
    pub(crate) mode: u32,
    pub(crate) look: crate::log::StatKey,
}

/// Why a file was not kept aside.
pub(crate) enum NotKept {
    /// This file only (read it instead).
    This,
    /// No file of this operation can be (another file system, no room for
    /// the directories): read them all.
    None,
}

/// A file to keep aside: the directory holding it, its name there, and,
/// when it is kept with a hash, the look that hash was known for (the
/// store's name must show the same bytes' look after the link, or the file
/// is read instead: it changed in between).
pub(crate) struct ToKeep<'a> {
    pub(crate) dir: &'a OwnedFd,
    pub(crate) name: &'a OsStr,
    pub(crate) look: Option<StatKey>,
}

/// Whether two looks of one file say the same bytes, but for its `ctime`
/// (a link made since changes it): same file, size and `mtime`. A write
/// after the older look sets `mtime` to a later time than the older one,
/// recorded before the clock's tick of that look's own hashing.
pub(crate) fn same_bytes_look(a: &StatKey, b: &StatKey) -> bool {
    (a.dev, a.ino, a.size, a.mtime) == (b.dev, b.ino, b.size, b.mtime)
}

/// The files kept for one `saved` record, while it is being written.
pub(crate) struct Keeper {
    store: OwnedFd,
    seq: u64,
    /// The number the next file given to [`Keeper::keep_all`] takes.
    next: u64,
    /// How many files are kept.
    kept: u64,
    aside: Option<OwnedFd>,
    record: Option<OwnedFd>,
    /// The buckets made (bucket `b` at index `b`), held open: each is
    /// `fsync`ed before the record.
    buckets: Vec<OwnedFd>,
}

impl Keeper {
    /// Keeps files for the record `seq` of the store whose directory is
    /// `store` (nothing is made until the first file is kept).
    pub(crate) fn new(store: OwnedFd, seq: u64) -> Self {
        Keeper {
            store,
            seq,
            next: 0,
            kept: 0,
            aside: None,
            record: None,
            buckets: Vec::new(),
        }
    }

    /// Whether any file was kept.
    pub(crate) fn any(&self) -> bool {
        self.kept > 0
    }

    /// Gives each regular file of `files` a name in the store, when its only
    /// other name is its own, on every core: the name of `files[i]` is
    /// numbered `next + i`, so the numbers, and the buckets they fall in,
    /// are fixed before any link is made (a file not kept leaves its
    /// number unused). Each thread takes contiguous runs of `files` (rayon
    /// splits the slice in halves), so two threads seldom link into one
    /// bucket. `Err(NotKept::None)` for a file means no file of the
    /// operation can be kept.
    pub(crate) fn keep_all(&mut self, files: &[ToKeep<'_>]) -> Vec<Result<Kept, NotKept>> {
        let Some(last) = (files.len() as u64).checked_sub(1).map(|l| self.next + l) else {
            return Vec::new();
        };
        if self.make_buckets(bucket_of(last)).is_err() {
            return files.iter().map(|_| Err(NotKept::None)).collect();
        }
        let first = self.next;
        self.next = last + 1;
        let buckets = &self.buckets;
        let results = crate::par::map_indexed(files, |i, file| {
            let n = first + i as u64;
            let bucket = &buckets[bucket_of(n) as usize];
            keep_one(bucket, n, file)
        });
        self.kept += results.iter().filter(|r| r.is_ok()).count() as u64;
        results
    }

    /// Makes `aside/`, the record's directory and every bucket up to
    /// `last`, those not made yet.
    fn make_buckets(&mut self, last: u64) -> io::Result<()> {
        if self.record.is_none() {
            let aside = make_dir(&self.store, ASIDE_DIR)?;
            // A directory of this seq is a crashed attempt's: nothing names
            // its files.
            let name = self.seq.to_string();
            if fsx::open_subdir(&aside, name.as_str())?.is_some() {
                remove_record_dir(&aside, &name);
            }
            self.record = Some(make_dir(&aside, &name)?);
            self.aside = Some(aside);
        }
        let record = self.record.as_ref().expect("made above");
        for b in self.buckets.len() as u64..=last {
            self.buckets.push(make_dir(record, &b.to_string())?);
        }
        Ok(())
    }

    /// Removes every name kept (the record was not written).
    pub(crate) fn abandon(self) {
        drop(self.buckets);
        drop(self.record);
        if let Some(aside) = &self.aside {
            remove_record_dir(aside, &self.seq.to_string());
        }
    }

    /// Makes every name kept durable: the buckets, the record's directory
    /// and `aside/`.
    pub(crate) fn sync(&self) -> io::Result<()> {
        for b in &self.buckets {
            fsx::fsync(b)?;
        }
        if let Some(r) = &self.record {
            fsx::fsync(r)?;
        }
        if let Some(a) = &self.aside {
            fsx::fsync(a)?;
        }
        if self.aside.is_some() {
            fsx::fsync(&self.store)?;
        }
        Ok(())
    }
}

/// Links `file` into `bucket` as `n` (see [`Keeper::keep_all`]), checked
/// through the store's name.
fn keep_one(bucket: &OwnedFd, n: u64, file: &ToKeep<'_>) -> Result<Kept, NotKept> {
    let link = n.to_string();
    match crate::sys::fs::linkat(file.dir, file.name, bucket, link.as_str(), AtFlags::empty()) {
        Ok(()) => {}
        Err(Errno::XDEV) => return Err(NotKept::None),
        Err(_) => return Err(NotKept::This),
    }
    // What was linked, looked at through the store's own name.
    let kept = match fsx::lstat_at(bucket, link.as_str()) {
        Ok(Some(st)) if crate::sys::nlink(&st) == 2 => match fsx::node_of(&st) {
            fsx::Node::File { size, mode } => Some(Kept {
                n,
                size,
                mode: mode & 0o7777,
                look: StatKey::of(&st),
            }),
            _ => None,
        },
        _ => None,
    };
    match kept {
        // Changed between the look and the link (its ctime is the link's
        // now): read instead.
        Some(k) if file.look.is_none_or(|l| same_bytes_look(&k.look, &l)) => Ok(k),
        _ => {
            let _ = fsx::unlink(bucket, link.as_str());
            Err(NotKept::This)
        }
    }
}

/// Makes (if missing, `0700`) and opens the directory `name` of `dir`.
fn make_dir(dir: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    match crate::sys::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    fsx::open_subdir(dir, name)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "directory vanished"))
}

/// The bucket (see the module doc) of the kept file `n`.
pub(crate) fn bucket_of(n: u64) -> u64 {
    n / BUCKET
}

/// Opens the kept file `n` in its bucket `bucket` (see [`Buckets`]) for
/// reading; `None` when it is not there.
pub(crate) fn open_in(bucket: &OwnedFd, n: u64) -> io::Result<Option<File>> {
    match fsx::open_file(bucket, n.to_string().as_str()) {
        Ok((f, fsx::Node::File { .. })) => Ok(Some(f)),
        Ok(_) => Err(io::Error::other("it is not a regular file")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Buckets of kept files, each opened once (with `aside/` and its
/// record's directory) by whoever reads or removes many kept files: a
/// rewind's staging, a rollback, the release of the names an operation
/// did not use, the background storing.
#[derive(Default)]
pub(crate) struct Buckets {
    /// By (record, bucket); `None`: not there.
    open: HashMap<(u64, u64), Option<OwnedFd>>,
    /// Buckets a name was removed from, `fsync`ed by [`Buckets::sync`].
    changed: HashSet<(u64, u64)>,
}

impl Buckets {
    /// The bucket of the kept file `n` of the record `seq`, opened the
    /// first time it is asked for; `None` when it is not there.
    pub(crate) fn reach(
        &mut self,
        store: &OwnedFd,
        seq: u64,
        n: u64,
    ) -> io::Result<Option<&OwnedFd>> {
        let key = (seq, bucket_of(n));
        let bucket = match self.open.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(open_bucket(store, seq, key.1)?),
        };
        Ok(bucket.as_ref())
    }

    /// The bucket of the kept file `n` of the record `seq`, when it was
    /// reached before and is there.
    pub(crate) fn held(&self, seq: u64, n: u64) -> Option<&OwnedFd> {
        self.open.get(&(seq, bucket_of(n)))?.as_ref()
    }

    /// Opens the kept file `n` of the record `seq` for reading; `None` when
    /// it is not there.
    pub(crate) fn open(&mut self, store: &OwnedFd, seq: u64, n: u64) -> io::Result<Option<File>> {
        match self.reach(store, seq, n)? {
            Some(bucket) => open_in(bucket, n),
            None => Ok(None),
        }
    }

    /// Removes the kept file `n` of the record `seq` (the operation did
    /// not replace its path); durable once [`Buckets::sync`] returns.
    pub(crate) fn remove(&mut self, store: &OwnedFd, seq: u64, n: u64) -> io::Result<()> {
        let Some(bucket) = self.reach(store, seq, n)? else {
            return Ok(());
        };
        match fsx::unlink(bucket, n.to_string().as_str()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => {
                self.changed.insert((seq, bucket_of(n)));
                Ok(())
            }
        }
    }

    /// Makes the removals durable: `fsync`s each bucket a name left.
    pub(crate) fn sync(&self) -> io::Result<()> {
        for key in &self.changed {
            if let Some(Some(bucket)) = self.open.get(key) {
                fsx::fsync(bucket)?;
            }
        }
        Ok(())
    }
}

/// The bucket `b` of the record `seq`, when it exists.
fn open_bucket(store: &OwnedFd, seq: u64, b: u64) -> io::Result<Option<OwnedFd>> {
    let Some(aside) = fsx::open_subdir(store, ASIDE_DIR)? else {
        return Ok(None);
    };
    let Some(record) = fsx::open_subdir(&aside, seq.to_string().as_str())? else {
        return Ok(None);
    };
    fsx::open_subdir(&record, b.to_string().as_str())
}

/// The records that have a directory in `aside/`.
pub(crate) fn records(store: &OwnedFd) -> io::Result<Vec<u64>> {
    let Some(aside) = fsx::open_subdir(store, ASIDE_DIR)? else {
        return Ok(Vec::new());
    };
    let (names, _) = crate::sys::list_names(&aside);
    Ok(names
        .names()
        .into_iter()
        .filter_map(|n| n.to_str().ok().and_then(|s| s.parse().ok()))
        .collect())
}

/// Removes the directories of `aside/` whose record `keep` does not want
/// (best effort: what stays is removed by the next try). Returns the
/// records removed.
pub(crate) fn remove_unwanted(store: &OwnedFd, keep: impl Fn(u64) -> bool) -> usize {
    let Ok(Some(aside)) = fsx::open_subdir(store, ASIDE_DIR) else {
        return 0;
    };
    let mut removed = 0;
    for seq in records(store).unwrap_or_default() {
        if !keep(seq) {
            remove_record_dir(&aside, &seq.to_string());
            removed += 1;
        }
    }
    removed
}

/// Removes `aside/<seq>/` when it exists: called with the sequence number
/// the next record will take, it finds the files kept by an operation that
/// crashed before its `saved` record (one `fstatat` when there are none).
pub(crate) fn remove_unrecorded(store: &OwnedFd, seq: u64) {
    let dir = format!("{ASIDE_DIR}/{seq}");
    if !matches!(fsx::lstat_at(store, dir.as_str()), Ok(Some(_))) {
        return;
    }
    if let Ok(Some(aside)) = fsx::open_subdir(store, ASIDE_DIR) {
        remove_record_dir(&aside, &seq.to_string());
    }
}

/// Removes `aside/<name>/` and everything in it, durably (each directory
/// `fsync`ed once emptied, then its parent once it is gone): no removal is
/// left for a power loss to undo. Best effort.
fn remove_record_dir(aside: &OwnedFd, name: &str) {
    let Ok(Some(record)) = fsx::open_subdir(aside, name) else {
        return;
    };
    let (buckets, _) = crate::sys::list_names(&record);
    // Buckets and their files are named by numbers: `.` and `..` are not.
    let numbered = |n: &&std::ffi::CStr| n.to_bytes().iter().all(u8::is_ascii_digit);
    for b in buckets.names().into_iter().filter(numbered) {
        let Ok(Some(bucket)) = fsx::open_subdir(&record, b) else {
            let _ = fsx::unlink(&record, b);
            continue;
        };
        let (files, _) = crate::sys::list_names(&bucket);
        for f in files.names().into_iter().filter(numbered) {
            let _ = fsx::unlink(&bucket, f);
        }
        let _ = fsx::fsync(&bucket);
        drop(bucket);
        let _ = fsx::rmdir(&record, b);
    }
    let _ = fsx::fsync(&record);
    drop(record);
    let _ = fsx::rmdir(aside, name);
    let _ = fsx::fsync(aside);
}

impl Store {
    /// Whether files kept aside wait to be stored ([`Store::pack_kept`]).
    pub(crate) fn kept_pending(&self) -> bool {
        self.place
            .dirs
            .as_ref()
            .is_some_and(|d| matches!(fsx::lstat_at(&d.store, ASIDE_DIR), Ok(Some(_))))
    }

    /// Stores the files kept aside for every `saved` record but one still
    /// last in the log (an interrupted operation's, rolled back by the
    /// next mutation) as blobs, one `packed` record each, and removes them:
    /// a kept file is the bytes whole, and the same bytes saved again by a
    /// later operation would take their room again. Run off the latency
    /// path ([`Store::maintain`]). The files are read, hashed and
    /// compressed without the store lock, which is taken only to append
    /// each record (see [`Store::pack_record`]): a foreground command
    /// (an agent's hook) never waits for the reading. Returns the files
    /// stored.
    pub(crate) fn pack_kept(&mut self) -> Result<usize> {
        let mut records: Vec<u64> = self
            .index
            .saved
            .iter()
            .filter(|(seq, files)| {
                **seq != self.index.last_seq
                    && files.iter().any(|f| matches!(f.pre, Pre::Aside { .. }))
            })
            .map(|(seq, _)| *seq)
            .collect();
        records.sort_unstable();
        let mut stored = 0;
        for seq in records {
            stored += self.pack_record(seq)?;
        }
        Ok(stored)
    }

    /// The files the `saved` record `seq` keeps aside: path, number, mode.
    fn kept_of(&self, seq: u64) -> Vec<(RelPath, u64, u32)> {
        self.index
            .saved
            .get(&seq)
            .into_iter()
            .flatten()
            .filter_map(|f| match f.pre {
                Pre::Aside { n, mode, .. } => Some((f.path.clone(), n, mode)),
                _ => None,
            })
            .collect()
    }

    /// Stores the files kept for the `saved` record `seq` (a kept file that
    /// is gone stays out: its path was left as it was), appends their
    /// `packed` record, then removes `aside/<seq>/`. Files up to
    /// [`WHOLE`] bytes are read, hashed and compressed on every core, in
    /// chunks of [`CHUNK`]; larger ones are streamed.
    ///
    /// The reading is done without the lock: a kept name is only ever read
    /// and removed with its whole directory (see the module doc), and the
    /// temporary pack is held with a lock of its own, so no mutation sweeps
    /// it meanwhile ([`PackWriter::hold`]). Under the lock, with the log
    /// read again, the record is
    /// appended only if the `saved` record still keeps the same files, is
    /// not the last one (an interrupted operation's), and every blob the
    /// states name is this pack's or still stored (a gc in between may have
    /// dropped one this reading took as stored); otherwise the pack is
    /// dropped and the files stay for the next maintenance. Blobs another
    /// record stored meanwhile are not introduced twice (their frames stay
    /// in the pack unnamed, for gc).
    fn pack_record(&mut self, seq: u64) -> Result<usize> {
        let kept = self.kept_of(seq);
        let shown = self.place.store_path.join(ASIDE_DIR).join(seq.to_string());
        let mut writer = PackWriter::create(&self.place.dirs().store, &self.place.store_path)?;
        if let Err(e) = writer.hold() {
            writer.abandon();
            return Err(e);
        }
        let stored = self.store_kept(&mut writer, seq, &kept, &shown);
        let (files, mut blobs) = match stored {
            Ok(s) => s,
            Err(e) => {
                writer.abandon();
                return Err(e);
            }
        };
        let guard = match self.begin_mutation() {
            Ok(g) => g,
            Err(e) => {
                writer.abandon();
                return Err(e);
            }
        };
        let ours: HashSet<BlobId> = blobs.iter().map(|b| b.id).collect();
        let named = |f: &FileEntry| match &f.pre {
            Pre::File { blob, .. } => ours.contains(blob) || self.index.blobs.contains_key(blob),
            _ => true,
        };
        if seq == self.index.last_seq || self.kept_of(seq) != kept || !files.iter().all(named) {
            writer.abandon();
            return Ok(0);
        }
        blobs.retain(|b| !self.index.blobs.contains_key(&b.id));
        let record = self.index.last_seq + 1;
        let pack = if blobs.is_empty() {
            writer.abandon();
            None
        } else {
            let name = pack::pack_name(record);
            writer.commit(&self.place.dirs().packs, &name)?;
            Some(name)
        };
        let n = files.len();
        self.append(Op::Packed {
            saved: seq,
            pack,
            blobs,
            files,
        })?;
        // Every kept file is stored now, or was gone: the directory goes,
        // and `aside/` with the last one (best effort: gc removes what
        // stays). No record names it any more, and no mutation touches
        // another record's directory, so it goes after the lock is given
        // back: removing 20,000 names held a hook waiting for seconds.
        drop(guard);
        if let Ok(Some(aside)) = fsx::open_subdir(&self.place.dirs().store, ASIDE_DIR) {
            remove_record_dir(&aside, &seq.to_string());
            drop(aside);
            if fsx::rmdir(&self.place.dirs().store, ASIDE_DIR).is_ok() {
                let _ = fsx::fsync(&self.place.dirs().store);
            }
        }
        Ok(n)
    }

    /// Writes the kept files `kept` of the record `seq` into `writer`;
    /// returns their states and the blobs written.
    fn store_kept(
        &self,
        writer: &mut PackWriter,
        seq: u64,
        kept: &[(RelPath, u64, u32)],
        shown: &std::path::Path,
    ) -> Result<(Vec<FileEntry>, Vec<StoredBlob>)> {
        let level = self.options().compression_level;
        let known = &self.index.blobs;
        let mut buckets = Buckets::default();
        let mut files = Vec::with_capacity(kept.len());
        let mut blobs = Vec::new();
        let mut fresh: HashSet<BlobId> = HashSet::new();
        let mut next = kept.iter();
        loop {
            // Opened here, at most CHUNK files or CHUNK_BYTES to read at
            // once; read on every core.
            let mut opened: Vec<(&(RelPath, u64, u32), File, u64)> = Vec::new();
            let mut bytes = 0;
            while opened.len() < CHUNK && bytes < CHUNK_BYTES {
                let Some(item) = next.next() else {
                    break;
                };
                let n = item.1;
                let path = shown.join(n.to_string());
                let Some(file) = buckets
                    .open(&self.place.dirs().store, seq, n)
                    .ctx("open", &path)?
                else {
                    continue;
                };
                let size = file.metadata().ctx("look at", &path)?.len();
                bytes += size.min(WHOLE + 1);
                opened.push((item, file, size));
            }
            if opened.is_empty() {
                break;
            }
            // `None`: too large to read whole; streamed below.
            let read: Vec<Result<Option<Small>>> =
                crate::par::map(&opened, |(item, file, size)| {
                    if *size > WHOLE {
                        return Ok(None);
                    }
                    let mut data = Vec::with_capacity(*size as usize);
                    io::Read::read_to_end(&mut &*file, &mut data)
                        .ctx("read", shown.join(item.1.to_string()))?;
                    let id = pack::hash_bytes(&data);
                    let frame = match known.contains_key(&id) {
                        true => None,
                        false => Some(
                            pack::compress_whole(&data, level)
                                .ctx("compress", shown.join(item.1.to_string()))?,
                        ),
                    };
                    Ok(Some(Small {
                        id,
                        size: data.len() as u64,
                        frame,
                    }))
                });
            for ((item, file, _), r) in opened.iter().zip(read) {
                let (path, _, mode) = item;
                let (id, size, blob) = match r? {
                    Some(Small { id, size, frame }) => {
                        let blob = match frame {
                            Some(frame) => crate::store::append_once(
                                writer, &mut fresh, id, size, &frame, None,
                            )?,
                            None => None,
                        };
                        (id, size, blob)
                    }
                    None => crate::store::append_streamed(writer, &mut fresh, known, file, level)?,
                };
                blobs.extend(blob);
                files.push(FileEntry {
                    path: path.clone(),
                    pre: Pre::File {
                        blob: id,
                        size,
                        mode: *mode,
                        link: None,
                    },
                });
            }
        }
        Ok((files, blobs))
    }
}

/// A kept file read whole: its hash, size and, unless its blob is stored
/// already, its compressed frame.
struct Small {
    id: BlobId,
    size: u64,
    frame: Option<Vec<u8>>,
}

/// Kept files stored together (hashed and compressed on every core), and
/// the bytes they may read into memory at once.
const CHUNK: usize = 256;
const CHUNK_BYTES: u64 = 64 << 20;

/// Kept files up to this size are read whole to be stored; larger ones
/// are streamed.
const WHOLE: u64 = 4 << 20;

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    /// A project directory and a store directory, both opened.
    fn setup() -> io::Result<(tempfile::TempDir, OwnedFd, OwnedFd)> {
        let tmp = tempfile::tempdir()?;
        fs::create_dir(tmp.path().join("p"))?;
        fs::create_dir(tmp.path().join("store"))?;
        let root = fsx::open_dir_path(&tmp.path().join("p"))?;
        let store = fsx::open_dir_path(&tmp.path().join("store"))?;
        Ok((tmp, root, store))
    }

    fn names(dir: &Path) -> io::Result<Vec<String>> {
        let mut out: Vec<String> = fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<io::Result<_>>()?;
        out.sort();
        Ok(out)
    }

    /// The files named `names` of `root`, to keep with no look to check.
    fn to_keep<'a>(root: &'a OwnedFd, names: &'a [&str]) -> Vec<ToKeep<'a>> {
        names
            .iter()
            .map(|n| ToKeep {
                dir: root,
                name: OsStr::new(n),
                look: None,
            })
            .collect()
    }

    #[test]
    fn only_a_regular_file_with_one_name_is_kept() -> TestResult {
        let (tmp, root, store) = setup()?;
        let p = tmp.path().join("p");
        fs::write(p.join("a"), "alpha")?;
        fs::write(p.join("b"), "beta")?;
        fs::hard_link(p.join("b"), p.join("b2"))?;
        std::os::unix::fs::symlink("a", p.join("c"))?;
        fs::create_dir(p.join("d"))?;
        let mut keeper = Keeper::new(store.try_clone()?, 7);
        let results = keeper.keep_all(&to_keep(&root, &["a", "b", "c", "d", "missing"]));
        let kept = results[0].as_ref().map_err(|_| "a not kept")?;
        assert_eq!((kept.n, kept.size), (0, 5));
        for (other, r) in ["b", "c", "d", "missing"].iter().zip(&results[1..]) {
            assert!(matches!(r, Err(NotKept::This)), "{other}");
        }
        assert!(keeper.any());
        keeper.sync()?;
        let bucket = tmp.path().join("store/aside/7/0");
        assert_eq!(names(&bucket)?, ["0"]);
        assert_eq!(
            fs::metadata(bucket.join("0"))?.ino(),
            fs::metadata(p.join("a"))?.ino()
        );
        assert_eq!(fs::metadata(p.join("b"))?.nlink(), 2, "b's name left");
        let mut buckets = Buckets::default();
        let mut read = String::new();
        let mut kept_a = buckets.open(&store, 7, 0)?.ok_or("not found")?;
        io::Read::read_to_string(&mut kept_a, &mut read)?;
        assert_eq!(read, "alpha");
        assert!(buckets.open(&store, 7, 1)?.is_none());
        assert!(buckets.open(&store, 8, 0)?.is_none(), "no such record");
        assert!(buckets.held(7, 0).is_some() && buckets.held(8, 0).is_none());
        // Removed, durably, and a second removal finds nothing to do.
        buckets.remove(&store, 7, 0)?;
        buckets.remove(&store, 7, 0)?;
        buckets.sync()?;
        assert!(names(&bucket)?.is_empty());
        assert_eq!(fs::metadata(p.join("a"))?.nlink(), 1);
        Ok(())
    }

    #[test]
    fn a_file_whose_look_changed_is_not_kept_and_its_number_stays_unused() -> TestResult {
        let (tmp, root, store) = setup()?;
        let p = tmp.path().join("p");
        fs::write(p.join("a"), "alpha")?;
        fs::write(p.join("b"), "beta")?;
        let look = |name: &str| -> io::Result<StatKey> {
            let st = fsx::lstat_at(&root, name)?.ok_or_else(|| io::Error::other("gone"))?;
            Ok(StatKey::of(&st))
        };
        let mut stale = look("a")?;
        stale.mtime -= 1;
        let mut keeper = Keeper::new(store.try_clone()?, 2);
        let results = keeper.keep_all(&[
            ToKeep {
                dir: &root,
                name: OsStr::new("a"),
                look: Some(stale),
            },
            ToKeep {
                dir: &root,
                name: OsStr::new("b"),
                look: Some(look("b")?),
            },
        ]);
        assert!(matches!(results[0], Err(NotKept::This)));
        assert_eq!(fs::metadata(p.join("a"))?.nlink(), 1, "its name removed");
        let kept = results[1].as_ref().map_err(|_| "b not kept")?;
        assert_eq!(kept.n, 1);
        assert_eq!(names(&tmp.path().join("store/aside/2/0"))?, ["1"]);
        // The next run numbers on.
        fs::write(p.join("c"), "gamma")?;
        let results = keeper.keep_all(&to_keep(&root, &["c"]));
        assert_eq!(results[0].as_ref().map_err(|_| "c not kept")?.n, 2);
        Ok(())
    }

    #[test]
    fn nothing_kept_is_not_any() -> TestResult {
        let (_tmp, root, store) = setup()?;
        let mut keeper = Keeper::new(store.try_clone()?, 4);
        assert!(keeper.keep_all(&[]).is_empty());
        let results = keeper.keep_all(&to_keep(&root, &["missing"]));
        assert!(matches!(results[0], Err(NotKept::This)));
        assert!(!keeper.any());
        Ok(())
    }

    #[test]
    fn buckets_hold_1024_names_and_abandon_removes_them_all() -> TestResult {
        let (tmp, root, store) = setup()?;
        let p = tmp.path().join("p");
        let mut keeper = Keeper::new(store.try_clone()?, 3);
        let all: Vec<String> = (0..1025).map(|i| i.to_string()).collect();
        for n in &all {
            fs::write(p.join(n), "x")?;
        }
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let results = keeper.keep_all(&to_keep(&root, &refs));
        for (i, r) in results.iter().enumerate() {
            assert_eq!(r.as_ref().map_err(|_| "not kept")?.n, i as u64);
        }
        let record = tmp.path().join("store/aside/3");
        assert_eq!(names(&record)?, ["0", "1"]);
        assert_eq!(names(&record.join("0"))?.len(), 1024);
        assert_eq!(names(&record.join("1"))?, ["1024"]);
        keeper.abandon();
        assert!(!record.exists());
        assert_eq!(fs::metadata(p.join("0"))?.nlink(), 1);
        Ok(())
    }

    #[test]
    fn only_the_next_records_directory_is_taken_for_a_crashed_ones() -> TestResult {
        let (tmp, root, store) = setup()?;
        let p = tmp.path().join("p");
        fs::write(p.join("a"), "alpha")?;
        fs::write(p.join("b"), "beta")?;
        for (seq, name) in [(5, "a"), (6, "b")] {
            let results = Keeper::new(store.try_clone()?, seq).keep_all(&to_keep(&root, &[name]));
            results[0].as_ref().map_err(|_| "not kept")?;
        }
        remove_unrecorded(&store, 6);
        remove_unrecorded(&store, 9);
        assert_eq!(names(&tmp.path().join("store/aside"))?, ["5"]);
        assert_eq!(fs::metadata(p.join("b"))?.nlink(), 1);
        // gc's sweep keeps what it is told to.
        assert_eq!(remove_unwanted(&store, |seq| seq == 5), 0);
        assert_eq!(remove_unwanted(&store, |_| false), 1);
        assert!(names(&tmp.path().join("store/aside"))?.is_empty());
        Ok(())
    }
}
