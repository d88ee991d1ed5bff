//! The log and the index as this process reads them: opening the log,
//! reading what was appended since (with the index checkpoint), appending
//! a record durably, and writing a checkpoint when the index is behind.

use super::*;

/// Appends the compressed `frame` of blob `id` (`size` bytes, a delta
/// against `base` when given) to `writer`, unless this pack holds it
/// already (`fresh`, the blobs written to it so far); returns where it went.
pub(crate) fn append_once(
    writer: &mut PackWriter,
    fresh: &mut HashSet<BlobId>,
    id: BlobId,
    size: u64,
    frame: &[u8],
    base: Option<BlobId>,
) -> Result<Option<StoredBlob>> {
    if !fresh.insert(id) {
        return Ok(None);
    }
    let offset = writer.append(frame)?;
    Ok(Some(StoredBlob {
        pack: None,
        id,
        offset,
        len: frame.len() as u64,
        size,
        base,
    }))
}

/// Streams `file` into `writer` (a file too large to read whole), keeping
/// its frame only when neither the store (`known`) nor this pack
/// (`fresh`) holds its blob; returns its id, its size and where it went.
pub(crate) fn append_streamed(
    writer: &mut PackWriter,
    fresh: &mut HashSet<BlobId>,
    known: &crate::index::Blobs,
    file: &File,
    level: i32,
) -> Result<(BlobId, u64, Option<StoredBlob>)> {
    let pack::Streamed { id, size, kept } = writer.append_stream(file, level, |id| {
        !known.contains_key(id) && !fresh.contains(id)
    })?;
    let stored = kept.map(|(offset, len)| {
        fresh.insert(id);
        StoredBlob {
            pack: None,
            id,
            offset,
            len,
            size,
            base: None,
        }
    });
    Ok((id, size, stored))
}

impl Store {
    pub(crate) fn open_log(&self, mode: OFlags) -> Result<File> {
        let path = self.place.store_path.join(LOG_FILE);
        fsx::open_store_file(&self.place.dirs().store, LOG_FILE, mode, Some(0o644))
            .ctx("open", &path)?
            .ok_or_else(|| Error::Io {
                op: "open",
                path,
                source: io::Error::from(io::ErrorKind::NotFound),
            })
    }

    /// Writes an index checkpoint when the log has grown by `after` bytes
    /// ([`checkpoint::WRITE_AFTER`], or [`checkpoint::WRITE_AFTER_DEFERRED`]
    /// in the background) past the one on disk since this process
    /// read or wrote it, so the next process to open the store does not
    /// read again what this one appended (the after half of a command that
    /// changed 100,000 files appends some 50 MB). Called when the store is
    /// dropped, or by [`Store::maintain`] when the store leaves it for after
    /// the answer ([`crate::Options::defer_checkpoint`]), never in the
    /// middle of a mutation: a long-lived store (the MCP server's) leaves
    /// its appends to the next process that opens the store, as before.
    /// Best effort, like the checkpoint itself; only for the log file the
    /// index was read from.
    pub(crate) fn checkpoint_if_behind(&mut self, after: u64) {
        if !self.checkpoint_behind(after) {
            return;
        }
        let x = &self.index;
        let (Some(dirs), Some(ident)) = (self.place.dirs.as_ref(), x.ident) else {
            return;
        };
        let Ok(log) = self.open_log(OFlags::RDONLY) else {
            return;
        };
        // Under the shared lock, as every checkpoint is written (never while
        // gc or repair replaces the log), and only if it is free now: a
        // store being dropped does not wait for another process's rewind.
        let Ok(_shared) = lock::acquire(&dirs.store, &self.place.store_path, false, Duration::ZERO)
        else {
            return;
        };
        let same = crate::sys::fs::fstat(&log).is_ok_and(|st| {
            (crate::sys::dev(&st), st.st_ino) == ident && st.st_size as u64 >= x.consumed
        });
        if same {
            checkpoint::write(&dirs.store, x, &log, ident);
            self.index.checkpointed = self.index.consumed;
        }
    }

    /// Whether this process read or appended `after` bytes of log past
    /// the checkpoint on disk.
    pub(crate) fn checkpoint_behind(&self, after: u64) -> bool {
        let x = &self.index;
        x.ident.is_some()
            && self.place.dirs.is_some()
            && x.consumed >= x.checkpointed.saturating_add(after)
    }

    /// Forgets an index a record did not fit, applied in part: no
    /// checkpoint is ever written of it, and the next use reads the log
    /// again.
    fn forget_index(&mut self) {
        self.index = Index::default();
    }

    /// Reads lines appended since the last read (or the whole log if it was
    /// replaced). Returns the offset of a torn final line, if any.
    ///
    /// Reading from the start, an index checkpoint that names this very log
    /// file and prefix (see [`crate::checkpoint`]) stands for that prefix:
    /// only the lines past it are read, so an open costs the same however
    /// long the log is.
    pub(crate) fn refresh(&mut self) -> Result<Option<u64>> {
        let path = self.place.store_path.join(LOG_FILE);
        let f = self.open_log(OFlags::RDONLY)?;
        let st = crate::sys::fs::fstat(&f).ctx("stat", &path)?;
        let ident = (crate::sys::dev(&st), st.st_ino);
        let size = st.st_size as u64;
        if self.index.ident != Some(ident) || size < self.index.consumed {
            self.index = Index {
                ident: Some(ident),
                ..Index::default()
            };
        }
        let from_start = self.index.consumed == 0;
        if from_start
            && let Some(mut index) = checkpoint::load(&self.place.dirs().store, &f, ident, size)
        {
            index.ident = Some(ident);
            index.checkpointed = index.consumed;
            self.index = index;
        }
        let start = self.index.consumed;
        let mut f = f;
        io::Seek::seek(&mut f, io::SeekFrom::Start(start)).ctx("read", &path)?;
        // A line at a time, each record applied as it is read: a log of one
        // capture of 100,000 paths is some 40 MB of JSON, and the index and
        // the checkpoint written from it come on top.
        let mut reader = io::BufReader::with_capacity(64 << 10, &f);
        let mut line = Vec::new();
        let (mut lines, mut consumed, mut torn) = (0usize, 0u64, None);
        loop {
            line.clear();
            let n = io::BufRead::read_until(&mut reader, b'\n', &mut line).ctx("read", &path)?;
            if n == 0 {
                break;
            }
            let line_no = self.index.lines + lines + 1;
            if line.last() != Some(&b'\n') {
                torn = Some((line_no, n));
                break;
            }
            let rec = log::decode(&line[..n - 1]);
            if line.capacity() > (1 << 20) {
                // A large record's line is not kept for the next one.
                line = Vec::new();
            }
            let applied = rec
                .map_err(Misfit::Record)
                .and_then(|r| self.index.apply_owned(r));
            if let Err(misfit) = applied {
                self.forget_index();
                return Err(misfit.at(path, line_no));
            }
            lines += 1;
            consumed += n as u64;
        }
        drop(reader);
        self.index.lines += lines;
        self.index.consumed += consumed;
        if lines > 0 {
            self.index.turns.fit();
        }
        if from_start && consumed >= checkpoint::WRITE_AFTER {
            checkpoint::write(&self.place.dirs().store, &self.index, &f, ident);
            self.index.checkpointed = self.index.consumed;
        }
        Ok(torn.map(|(line, len)| {
            self.warnings.push(format!(
                "{}: line {line} is a torn append ({len} bytes, from an interrupted process); it is ignored",
                path.display()
            ));
            self.index.consumed
        }))
    }

    /// Appends one record durably and applies it to the index; returns its
    /// seq. Its `fdatasync` also makes durable every record appended before
    /// it without one.
    pub(crate) fn append(&mut self, op: Op) -> Result<u64> {
        self.append_line(op, true)
    }

    /// Appends one record and applies it to the index without syncing it:
    /// the caller's next [`Store::append`] or [`Store::sync_log`] makes it
    /// durable, with one flush for both, before anything that relies on it
    /// is written. Until then a power cut may lose it (a process killed
    /// meanwhile leaves it in the file, as a synced one).
    pub(crate) fn append_unsynced(&mut self, op: Op) -> Result<u64> {
        self.append_line(op, false)
    }

    /// Makes the records appended by [`Store::append_unsynced`] durable.
    pub(crate) fn sync_log(&mut self) -> Result<()> {
        if !self.log_unsynced {
            return Ok(());
        }
        let path = self.place.store_path.join(LOG_FILE);
        let f = self.open_log(OFlags::WRONLY | OFlags::APPEND)?;
        fsx::fdatasync(&f).ctx("fsync", &path)?;
        self.log_unsynced = false;
        Ok(())
    }

    fn append_line(&mut self, op: Op, sync: bool) -> Result<u64> {
        let rec = Record {
            seq: self.index.last_seq + 1,
            at: crate::id::now_ns(),
            op,
        };
        let path = self.place.store_path.join(LOG_FILE);
        let f = self.open_log(OFlags::WRONLY | OFlags::APPEND)?;
        // Streamed, never whole in memory: a saved record of 100,000 paths
        // is some 25 MB of JSON.
        let written = log::write_line(&rec, &f).ctx("append to", &path);
        let synced = written.and_then(|len| {
            if sync {
                fsx::fdatasync(&f).ctx("fsync", &path)?;
            }
            Ok(len)
        });
        let line_len = match synced {
            Ok(len) => len,
            Err(e) => {
                // Not acknowledged: take the line back so no reader trusts it.
                let _ = f.set_len(self.index.consumed);
                return Err(e);
            }
        };
        if self.index.consumed == 0 {
            // A new log: its directory entry must be durable too.
            fsx::fsync(&self.place.dirs().store).ctx("fsync", &self.place.store_path)?;
        }
        self.log_unsynced = !sync;
        let seq = rec.seq;
        if let Err(misfit) = self.index.apply_owned(rec) {
            let line = self.index.lines + 1;
            self.forget_index();
            return Err(misfit.at(path, line));
        }
        self.index.lines += 1;
        self.index.consumed += line_len;
        if self.index.ident.is_none() {
            let st = crate::sys::fs::fstat(&f).ctx("stat", &path)?;
            self.index.ident = Some((crate::sys::dev(&st), st.st_ino));
        }
        Ok(seq)
    }
}
