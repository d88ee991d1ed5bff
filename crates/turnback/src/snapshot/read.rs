//! The reads of a snapshot: the files the walk could not vouch for by
//! their stat are read and hashed in parallel, and in the storing mode the
//! ones whose blob the store lacks are compressed and appended to one new
//! pack (not yet committed: the caller makes it durable and names it in
//! the log).
//!
//! Files up to [`WHOLE_READ_LIMIT`] are read whole, in chunks of at most
//! 256 files and 64 MiB so memory stays bounded by the chunk, and
//! compressed on every core; larger ones are streamed one at a time after
//! them. A file is opened by its path with `O_NOFOLLOW`: one that became a
//! symlink, changed type, grew past the size cap or vanished since the walk
//! is recorded as what it is now, never followed.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::sys::fs::{Mode, OFlags};
use rayon::prelude::*;

use super::scan::Reading;
use super::{Progress, ScanStats};
use crate::error::{IoResultExt, Result};
use crate::id::BlobId;
use crate::log::StoredBlob;
use crate::pack::{self, PackWriter};
use crate::store::{Store, append_once, append_streamed};
use crate::tree::{Entry, Excluded, Kind, Stat};

/// Files up to this size are read whole and compressed in parallel; larger
/// ones are streamed.
const WHOLE_READ_LIMIT: u64 = 4 << 20;

/// What the reads gave: counts, the new pack with its blobs (when anything
/// new was stored), and the indexes of entries that vanished.
pub(super) struct Reads {
    pub(super) stats: ScanStats,
    pub(super) pack: Option<(PackWriter, Vec<StoredBlob>)>,
    pub(super) gone: HashSet<usize>,
}

/// The new pack of a scan, created on its first blob.
struct NewPack<'s> {
    store: &'s Store,
    writer: Option<PackWriter>,
    blobs: Vec<StoredBlob>,
    fresh: HashSet<BlobId>,
}

/// The pack in `slot`, created in `store` if there is none yet.
fn open_writer<'w>(store: &Store, slot: &'w mut Option<PackWriter>) -> Result<&'w mut PackWriter> {
    match slot {
        Some(w) => Ok(w),
        None => Ok(slot.insert(PackWriter::create(
            &store.place.dirs().store,
            &store.place.store_path,
        )?)),
    }
}

impl NewPack<'_> {
    /// Stores a compressed frame unless this scan stored its blob already
    /// ([`append_once`]); returns the compressed bytes stored.
    fn add_frame(&mut self, id: BlobId, size: u64, frame: &[u8]) -> Result<u64> {
        let writer = open_writer(self.store, &mut self.writer)?;
        let blob = append_once(writer, &mut self.fresh, id, size, frame, None)?;
        Ok(self.keep(blob))
    }

    /// Streams a file too large to read whole, keeping its frame unless the
    /// store or this scan has its blob ([`append_streamed`]); returns its
    /// id, its size and the compressed bytes stored.
    fn add_streamed(&mut self, file: &File, level: i32) -> Result<(BlobId, u64, u64)> {
        let writer = open_writer(self.store, &mut self.writer)?;
        let known = &self.store.index.blobs;
        let (id, size, blob) = append_streamed(writer, &mut self.fresh, known, file, level)?;
        Ok((id, size, self.keep(blob)))
    }

    /// Lists a blob stored in the pack; returns its compressed bytes.
    fn keep(&mut self, blob: Option<StoredBlob>) -> u64 {
        blob.map_or(0, |b| {
            let len = b.len;
            self.blobs.push(b);
            len
        })
    }

    fn abandon(self) {
        if let Some(w) = self.writer {
            w.abandon();
        }
    }

    fn finish(self) -> Option<(PackWriter, Vec<StoredBlob>)> {
        match self.writer {
            Some(w) if !self.blobs.is_empty() => Some((w, self.blobs)),
            Some(w) => {
                w.abandon();
                None
            }
            None => None,
        }
    }
}

impl Store {
    /// Reads the entries at `to_read` (indexes into `entries`, whose
    /// stat and blob it sets from what it read).
    pub(super) fn read_changed(
        &self,
        entries: &mut [Entry],
        to_read: &[usize],
        mode: Reading,
        progress: &dyn Progress,
    ) -> Result<Reads> {
        let mut new = NewPack {
            store: self,
            writer: None,
            blobs: Vec::new(),
            fresh: HashSet::new(),
        };
        let mut stats = ScanStats::default();
        let mut gone = HashSet::new();
        match self.read_into(
            entries, to_read, mode, progress, &mut new, &mut stats, &mut gone,
        ) {
            Ok(()) => {}
            Err(e) => {
                new.abandon();
                return Err(e);
            }
        }
        stats.new_blobs = new.blobs.len() as u64;
        Ok(Reads {
            stats,
            pack: new.finish(),
            gone,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn read_into(
        &self,
        entries: &mut [Entry],
        to_read: &[usize],
        mode: Reading,
        progress: &dyn Progress,
        new: &mut NewPack<'_>,
        stats: &mut ScanStats,
        gone: &mut HashSet<usize>,
    ) -> Result<()> {
        let known = &self.index.blobs;
        let cap = self.options().max_file_size;
        let level = self.options().compression_level;
        let compress = (mode == Reading::Store).then_some((known, level));
        let mut large: Vec<(usize, File, Stat)> = Vec::new();
        let mut start = 0;
        while start < to_read.len() {
            let mut end = start;
            let mut bytes = 0u64;
            while end < to_read.len() && end - start < 256 && bytes < (64 << 20) {
                bytes += entries[to_read[end]].stat.size;
                end += 1;
            }
            let chunk = &to_read[start..end];
            let done: Vec<ReadOne> = chunk
                .par_iter()
                .map(|&i| read_one(&self.place.root, &entries[i].path, cap, compress))
                .collect();
            for (&i, r) in chunk.iter().zip(done) {
                match r {
                    ReadOne::Hashed {
                        id,
                        len,
                        stat,
                        frame,
                    } => {
                        stats.hashed_files += 1;
                        stats.hashed_bytes += len;
                        entries[i].stat = stat;
                        entries[i].kind = Kind::File { blob: id };
                        if let Some(frame) = frame {
                            stats.stored_bytes += new.add_frame(id, len, &frame)?;
                        }
                    }
                    ReadOne::Large { file, stat } => large.push((i, file, stat)),
                    ReadOne::Gone => {
                        gone.insert(i);
                    }
                    ReadOne::Now(x, stat) => {
                        entries[i].stat = stat;
                        entries[i].kind = Kind::Excluded(x);
                    }
                }
            }
            progress.hashed((end - start) as u64, bytes);
            start = end;
        }
        for (i, file, stat) in large {
            let (id, len) = if mode == Reading::Store {
                let (id, size, stored) = new.add_streamed(&file, level)?;
                stats.stored_bytes += stored;
                (id, size)
            } else {
                let shown = self.place.root.join(crate::sys::os_str(&entries[i].path));
                let mut h = pack::HashingReader::new(&file);
                io::copy(&mut h, &mut io::sink()).ctx("read", &shown)?;
                h.finish()
            };
            stats.hashed_files += 1;
            stats.hashed_bytes += len;
            entries[i].stat = stat;
            entries[i].kind = Kind::File { blob: id };
        }
        Ok(())
    }
}

/// A file read in parallel.
enum ReadOne {
    Hashed {
        id: BlobId,
        len: u64,
        stat: Stat,
        frame: Option<Vec<u8>>,
    },
    Large {
        file: File,
        stat: Stat,
    },
    Gone,
    Now(Excluded, Stat),
}

fn read_one(
    root: &Path,
    rel: &[u8],
    cap: u64,
    compress: Option<(&crate::index::Blobs, i32)>,
) -> ReadOne {
    let full = root.join(crate::sys::os_str(rel));
    let fd = match crate::sys::fs::open(
        &full,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(crate::sys::Errno::NOENT) => return ReadOne::Gone,
        Err(crate::sys::Errno::LOOP) => {
            return ReadOne::Now(
                Excluded::Unreadable(
                    "it became a symlink while being scanned; snapshot again".into(),
                ),
                Stat::default(),
            );
        }
        Err(e) => {
            return ReadOne::Now(
                Excluded::Unreadable(io::Error::from(e).to_string()),
                Stat::default(),
            );
        }
    };
    let file = File::from(fd);
    let stat = match Stat::of_file(&file) {
        Ok(st) => st,
        Err(e) => return ReadOne::Now(Excluded::Unreadable(e.to_string()), Stat::default()),
    };
    if crate::sys::file_type(stat.mode) != crate::sys::fs::FileType::RegularFile {
        return ReadOne::Now(
            Excluded::Unreadable("it changed type while being scanned; snapshot again".into()),
            stat,
        );
    }
    if stat.size > cap {
        return ReadOne::Now(Excluded::TooLarge(cap), stat);
    }
    if stat.size > WHOLE_READ_LIMIT {
        return ReadOne::Large { file, stat };
    }
    let mut data = Vec::with_capacity(stat.size as usize);
    if let Err(e) = (&file).take(WHOLE_READ_LIMIT + 1).read_to_end(&mut data) {
        return ReadOne::Now(Excluded::Unreadable(e.to_string()), stat);
    }
    let id = pack::hash_bytes(&data);
    let frame = match compress {
        Some((known, level)) if !known.contains_key(&id) => {
            match pack::compress_whole(&data, level) {
                Ok(f) => Some(f),
                Err(e) => {
                    return ReadOne::Now(Excluded::Unreadable(format!("compress: {e}")), stat);
                }
            }
        }
        _ => None,
    };
    ReadOne::Hashed {
        id,
        len: data.len() as u64,
        stat,
        frame,
    }
}
