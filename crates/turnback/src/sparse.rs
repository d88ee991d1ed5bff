//! Writing restored bytes with holes: a file whose pre-image was sparse (a
//! disk image, a database preallocated with zeros) comes back sparse
//! instead of taking its full size on disk.
//!
//! [`SparseWriter`] writes into a new, empty file. Every aligned block of
//! [`BLOCK`] bytes that is all zeros is skipped (a hole reads as zeros), the
//! others are written at their offsets, and [`SparseWriter::finish`] sets
//! the length, so trailing zeros are a hole too. The bytes read back are
//! exactly the bytes given; only the allocation differs. A dense run of
//! zeros in the original also becomes a hole, as `cp --sparse=always`
//! does: the contents, not the allocation, are what a rewind restores.

use std::fs::File;
use std::io::{self, Write};

/// The hole granularity: the usual file-system block size.
pub(crate) const BLOCK: usize = 4096;

/// Data written in batches of about this size.
const BATCH: usize = 256 * 1024;

/// A writer into a new empty file that leaves all-zero blocks as holes.
pub(crate) struct SparseWriter {
    file: File,
    /// Bytes given so far (the logical length).
    len: u64,
    /// The current, incomplete block.
    block: Vec<u8>,
    /// Non-zero blocks waiting to be written at `pending_at`.
    pending: Vec<u8>,
    pending_at: u64,
    /// The end of the last bytes written (the file's length without
    /// [`SparseWriter::finish`]'s `set_len`).
    written_to: u64,
}

impl SparseWriter {
    /// Writes into `file`, which must be new and empty.
    pub(crate) fn new(file: File) -> Self {
        SparseWriter {
            file,
            len: 0,
            block: Vec::with_capacity(BLOCK),
            // Grown as blocks come, up to a batch: a batch's room taken
            // and given back for each small file made the allocator trim
            // its heap (an `madvise`) once per restored file.
            pending: Vec::new(),
            pending_at: 0,
            written_to: 0,
        }
    }

    /// Writes what is pending and sets the file's length when it ends in
    /// a hole (trailing zeros). Returns the file.
    pub(crate) fn finish(mut self) -> io::Result<File> {
        let block = std::mem::take(&mut self.block);
        self.push_block(&block)?;
        self.flush_pending()?;
        if self.written_to != self.len {
            self.file.set_len(self.len)?;
        }
        Ok(self.file)
    }

    /// Takes one block (a full one, or the last, shorter one).
    fn push_block(&mut self, block: &[u8]) -> io::Result<()> {
        if block.is_empty() {
            return Ok(());
        }
        let at = self.len;
        self.len += block.len() as u64;
        if block.iter().all(|&b| b == 0) {
            return self.flush_pending();
        }
        if self.pending.is_empty() {
            self.pending_at = at;
        }
        self.pending.extend_from_slice(block);
        if self.pending.len() >= BATCH {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            crate::sys::write_all_at(&self.file, &self.pending, self.pending_at)?;
            self.written_to = self.pending_at + self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }
}

impl Write for SparseWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        if !self.block.is_empty() {
            let take = (BLOCK - self.block.len()).min(rest.len());
            self.block.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.block.len() == BLOCK {
                let block = std::mem::take(&mut self.block);
                self.push_block(&block)?;
                self.block = block;
                self.block.clear();
            }
        }
        while rest.len() >= BLOCK {
            let (head, tail) = rest.split_at(BLOCK);
            self.push_block(head)?;
            rest = tail;
        }
        self.block.extend_from_slice(rest);
        Ok(buf.len())
    }

    /// Pending blocks are written by [`SparseWriter::finish`]; a partial
    /// block cannot be written before the rest of it is known.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// Built on Unix modes, symlinks and inode numbers; the Windows run has
// the integration tests and the identity rules.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn write_in_pieces(data: &[u8], piece: usize) -> io::Result<(Vec<u8>, u64)> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let mut w = SparseWriter::new(File::create(&path)?);
        for chunk in data.chunks(piece) {
            w.write_all(chunk)?;
        }
        w.finish()?.sync_all()?;
        let blocks = std::fs::metadata(&path)?.blocks();
        Ok((std::fs::read(&path)?, blocks))
    }

    #[test]
    fn bytes_come_back_exactly_whatever_the_piece_size() -> io::Result<()> {
        let mut data = vec![0u8; 10 * BLOCK + 123];
        data[5] = 1;
        data[3 * BLOCK + 7] = 2;
        data[10 * BLOCK + 100] = 3;
        for piece in [1, 7, 4095, 4096, 4097, 65536, data.len()] {
            let (got, _) = write_in_pieces(&data, piece)?;
            assert!(got == data, "piece {piece}");
        }
        for data in [
            vec![],
            vec![0u8; 3],
            vec![0u8; BLOCK * 2],
            vec![9u8; BLOCK + 1],
        ] {
            assert_eq!(write_in_pieces(&data, 1000)?.0, data);
        }
        Ok(())
    }

    #[test]
    fn zero_blocks_take_no_space() -> io::Result<()> {
        let mut data = vec![0u8; 16 << 20];
        data[8 << 20] = 1;
        let (got, blocks) = write_in_pieces(&data, 256 * 1024)?;
        assert!(got == data);
        // One 4 KiB block of data, in 512-byte units, with room for the
        // file system's own rounding; far from the 32768 of a dense file.
        assert!(blocks <= 64, "{blocks} blocks allocated");
        Ok(())
    }
}
