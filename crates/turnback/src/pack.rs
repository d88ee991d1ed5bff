//! Pack files: where blobs live.
//!
//! Format: `<store>/packs/<12-digit seq>.pack` starts with the 8-byte magic
//! `TBPACK1\n`, followed by zstd frames, one per blob, back to back. A pack
//! carries no index of its own: the log record that introduces a pack lists
//! each blob's id (the SHA-256 of its *uncompressed* bytes), offset,
//! compressed length and uncompressed size, and is written only after the
//! pack is durable.
//!
//! Invariants:
//! - A pack is written once, as a temporary file in the store directory,
//!   `fdatasync`ed, renamed into `packs/` under its name, and `packs/` is
//!   fsynced; only then may a log
//!   record name it. It is never modified afterwards (gc writes new packs).
//! - One pack per capture call: a batch of 5,000 files costs three fsyncs in
//!   all (pack, directory, log), not three per file, and no 4 KiB block per
//!   small blob.
//! - Every blob is re-hashed as it is decompressed; bytes whose hash or size
//!   does not match the record never reach the project (see [`read_blob`]).

use crate::sys::OwnedFd;
use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Read, Write};

use sha2::{Digest, Sha256};

use crate::error::{Error, IoResultExt, Result};
use crate::fsx;
use crate::id::BlobId;

/// The first bytes of every pack.
pub const MAGIC: &[u8; 8] = b"TBPACK1\n";

/// What is wrong with the header of the pack `file`, if anything (its
/// blobs are checked one by one by [`read_blob`], which re-hashes each).
pub(crate) fn check_header(file: &File) -> std::io::Result<Option<String>> {
    let mut magic = [0u8; MAGIC.len()];
    let got = crate::sys::read_at(file, &mut magic, 0)?;
    Ok((got < magic.len() || &magic != MAGIC)
        .then(|| "its first 8 bytes are not the pack magic TBPACK1".to_string()))
}

/// A fresh pack file name for a record with sequence number `seq`:
/// `<12-digit seq>-<16 hex>.pack`. The random part keeps names unique even
/// when gc rewrites the log and sequence numbers are reused for new packs.
pub fn pack_name(seq: u64) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = Sha256::new();
    h.update(std::process::id().to_le_bytes());
    h.update(crate::id::now_ns().to_le_bytes());
    h.update(
        COUNTER
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_le_bytes(),
    );
    h.update(seq.to_le_bytes());
    let r = h.finalize();
    format!("{seq:012}-{}.pack", hex::encode(&r[..8]))
}

/// Whether `name` has the form of a pack name (so a hostile log cannot name
/// `../x` as a pack).
pub fn is_pack_name(name: &str) -> bool {
    is_pack_name_bytes(name.as_bytes())
}

/// [`is_pack_name`] of raw bytes (a name of that form is ASCII, so UTF-8):
/// checked for every row of an index checkpoint's blob table when it is
/// opened, so it is kept to one pass over the bytes.
pub(crate) fn is_pack_name_bytes(b: &[u8]) -> bool {
    let Ok(b) = <&[u8; 34]>::try_from(b) else {
        return false;
    };
    let digits = b[..12].iter().fold(true, |ok, c| ok & c.is_ascii_digit());
    let hex = b[13..29]
        .iter()
        .fold(true, |ok, c| ok & matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    digits & hex & (b[12] == b'-') & (&b[29..] == b".pack")
}

/// Where one blob lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobLoc {
    /// Pack file name, shared by every blob of the pack (a record of
    /// 100,000 blobs holds one copy of it, not 100,000).
    pub pack: std::sync::Arc<str>,
    /// Offset of the zstd frame in the pack.
    pub offset: u64,
    /// Compressed length.
    pub len: u64,
    /// Uncompressed size.
    pub size: u64,
    /// The blob this one is a delta against: its frame was compressed with
    /// that blob's bytes as zstd reference prefix, and needs them to
    /// decompress.
    pub base: Option<BlobId>,
}

/// Deltas are made only when base and new bytes together fit in this
/// (so the zstd window stays within what any decoder accepts).
pub const DELTA_LIMIT: u64 = 64 << 20;

/// The longest chain of deltas: a blob at this depth is stored whole.
pub const MAX_DELTA_DEPTH: usize = 16;

/// The zstd window log needed to reach back over `len` bytes.
fn window_log_for(len: u64) -> u32 {
    (64 - len.max(1).leading_zeros()).clamp(10, 27)
}

thread_local! {
    /// This thread's decompression context, made once: a context made per
    /// blob cost more than decompressing a small file.
    static DCTX: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
    /// This thread's buffers for a blob read whole: its frame and its bytes.
    static WHOLE: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// A blob whose frame and bytes both fit in this is read and decompressed
/// whole ([`decompress_whole`]); a larger one is streamed.
const WHOLE_LIMIT: u64 = 1 << 20;

/// Decompresses the zstd frames `reader` gives into `writer` with this
/// thread's decompression context. (Compression keeps making one per blob:
/// a context kept in each worker thread changed where the allocator trims
/// its heaps, which made the system calls of a capture vary from run to
/// run, and the fault-injection tests count them.)
fn decompress(reader: impl Read, writer: &mut impl Write) -> io::Result<u64> {
    let reader = io::BufReader::with_capacity(zstd::zstd_safe::DCtx::in_size(), reader);
    DCTX.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let ctx = slot.get_or_insert_with(zstd::zstd_safe::DCtx::create);
            io::copy(
                &mut zstd::stream::read::Decoder::with_context(reader, ctx),
                writer,
            )
        }
        Err(_) => io::copy(
            &mut zstd::stream::read::Decoder::with_buffer(reader)?,
            writer,
        ),
    })
}

/// Reads the `len` bytes of frames `reader` gives and decompresses them in
/// one call into at least `size` bytes of room, through buffers kept per
/// thread, then writes them to `writer`. A streamed blob zeroed a fresh
/// input buffer of 128 KiB per blob (`BufReader` hands only initialized
/// bytes to a reader), twice the size of the files of a typical turn: more
/// than half the instructions of a rewind of 20,000 small files.
fn decompress_whole(
    mut reader: impl Read,
    len: usize,
    size: usize,
    writer: &mut impl Write,
) -> io::Result<u64> {
    WHOLE.with(|cell| {
        let Ok(mut bufs) = cell.try_borrow_mut() else {
            return decompress(reader.take(len as u64), writer);
        };
        let (frame, bytes) = &mut *bufs;
        if frame.len() < len {
            // Only the growth is zeroed; the buffer is kept at its largest.
            frame.resize(len.next_power_of_two().max(64 << 10), 0);
        }
        reader.read_exact(&mut frame[..len])?;
        bytes.clear();
        bytes.reserve(size);
        DCTX.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => slot
                .get_or_insert_with(zstd::zstd_safe::DCtx::create)
                .decompress(bytes, &frame[..len]),
            Err(_) => zstd::zstd_safe::DCtx::create().decompress(bytes, &frame[..len]),
        })
        .map_err(|code| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                zstd::zstd_safe::get_error_name(code),
            )
        })?;
        // The room kept from a larger blob may hold more than `size`.
        if bytes.len() > size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "blob decompresses to more bytes than recorded",
            ));
        }
        writer.write_all(bytes)?;
        Ok(bytes.len() as u64)
    })
}

/// Compresses `data` whole at `level`, as `zstd::bulk::compress` does (the
/// same frame), with one compressor kept per thread. Making one per file
/// (its context allocated, its tables cleared, then freed and its pages
/// given back) was a third of the samples of a capture of 4,686 small
/// files.
pub(crate) fn compress_whole(data: &[u8], level: i32) -> io::Result<Vec<u8>> {
    thread_local! {
        static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { RefCell::new(None) };
    }
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        match &mut *slot {
            Some((at, c)) if *at == level => c.compress(data),
            _ => {
                let mut c = zstd::bulk::Compressor::new(level)?;
                let frame = c.compress(data);
                *slot = Some((level, c));
                frame
            }
        }
    })
}

/// Bytes of a version and its base from which a delta uses long-distance
/// matching.
const LONG_MATCHING_FROM: usize = 1 << 20;

/// Compresses `data` with `base` as zstd reference prefix (patch-from):
/// ten versions of a file, each a line longer, cost about one.
pub(crate) fn compress_delta(data: &[u8], base: &[u8], level: i32) -> io::Result<Vec<u8>> {
    let mut enc = zstd::stream::Encoder::with_ref_prefix(Vec::new(), level, base)?;
    enc.window_log(window_log_for((data.len() + base.len()) as u64))?;
    // Long-distance matching finds what the regular match finder's tables
    // miss across a large window; under [`LONG_MATCHING_FROM`] its set-up
    // costs more than compressing the file.
    if data.len() + base.len() >= LONG_MATCHING_FROM {
        enc.long_distance_matching(true)?;
    }
    enc.include_contentsize(true)?;
    enc.set_pledged_src_size(Some(data.len() as u64))?;
    enc.write_all(data)?;
    enc.finish()
}

/// Hashes everything that passes through it.
pub(crate) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }
    pub(crate) fn finish(self) -> (BlobId, u64) {
        (BlobId(self.hasher.finalize().into()), self.count)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// The SHA-256 of a byte slice.
pub fn hash_bytes(data: &[u8]) -> BlobId {
    BlobId(Sha256::digest(data).into())
}

/// What [`PackWriter::append_stream`] stored.
pub(crate) struct Streamed {
    /// SHA-256 of the bytes read.
    pub(crate) id: BlobId,
    /// How many bytes were read.
    pub(crate) size: u64,
    /// Offset and compressed length, if the frame was kept.
    pub(crate) kept: Option<(u64, u64)>,
}

/// A pack being written.
pub(crate) struct PackWriter {
    file: File,
    /// The directory holding the temporary file (the store directory, so
    /// that finding stale temporary packs never lists `packs/`).
    tmp_dir: OwnedFd,
    tmp: String,
    len: u64,
    shown: std::path::PathBuf,
}

impl PackWriter {
    /// Starts a temporary pack in `tmp_dir` (on the file system of `packs/`).
    pub(crate) fn create(tmp_dir: &OwnedFd, shown_dir: &std::path::Path) -> Result<Self> {
        let (mut file, tmp) = fsx::create_temp(tmp_dir, "pack", 0o444).ctx("create", shown_dir)?;
        let shown = shown_dir.join(&tmp);
        file.write_all(MAGIC).ctx("write", &shown)?;
        let tmp_dir = crate::sys::dup(tmp_dir).ctx("open", shown_dir)?;
        Ok(PackWriter {
            file,
            tmp_dir,
            tmp,
            len: MAGIC.len() as u64,
            shown,
        })
    }

    /// Takes an exclusive lock on the temporary pack for as long as the
    /// writer lives (the lock goes with the file): a pack filled without
    /// the store lock (the background storing of kept files) is then told
    /// from one a killed process left, which the next mutation sweeps
    /// (see `Store::sweep_temp_packs`). The kernel drops the lock when the
    /// process dies.
    pub(crate) fn hold(&self) -> Result<()> {
        self.file.lock().ctx("lock", &self.shown)
    }

    /// Appends one compressed frame; returns its offset.
    pub(crate) fn append(&mut self, frame: &[u8]) -> Result<u64> {
        let offset = self.len;
        self.file.write_all(frame).ctx("write", &self.shown)?;
        self.len += frame.len() as u64;
        Ok(offset)
    }

    /// Streams `reader` through SHA-256 and zstd into the pack, with bounded
    /// memory. Returns the blob id, the uncompressed size and, if the frame
    /// was kept, its offset and compressed length. `keep` decides, given the
    /// id, whether the frame stays (a blob already stored is cut off again).
    pub(crate) fn append_stream(
        &mut self,
        reader: impl Read,
        level: i32,
        keep: impl FnOnce(&BlobId) -> bool,
    ) -> Result<Streamed> {
        let offset = self.len;
        let mut hashing = HashingReader::new(reader);
        let counted = {
            let mut counter = CountingWriter {
                inner: &mut self.file,
                count: 0,
            };
            let mut enc =
                zstd::stream::Encoder::new(&mut counter, level).ctx("compress", &self.shown)?;
            io::copy(&mut hashing, &mut enc).ctx("read and compress into", &self.shown)?;
            enc.finish().ctx("compress", &self.shown)?;
            counter.count
        };
        let (id, size) = hashing.finish();
        if keep(&id) {
            self.len += counted;
            Ok(Streamed {
                id,
                size,
                kept: Some((offset, counted)),
            })
        } else {
            self.file.set_len(offset).ctx("truncate", &self.shown)?;
            io::Seek::seek(&mut self.file, io::SeekFrom::Start(offset)).ctx("seek", &self.shown)?;
            Ok(Streamed {
                id,
                size,
                kept: None,
            })
        }
    }

    /// Makes the pack durable under its final name: fdatasync, rename,
    /// fsync of `packs/`. Any fsync error is returned, never retried.
    pub(crate) fn commit(self, packs: &OwnedFd, name: &str) -> Result<()> {
        fsx::fdatasync(&self.file).ctx("fsync", &self.shown)?;
        crate::sys::fs::renameat(&self.tmp_dir, self.tmp.as_str(), packs, name)
            .ctx("rename", &self.shown)?;
        fsx::fsync(packs).ctx("fsync the pack directory of", &self.shown)?;
        Ok(())
    }

    /// Removes the temporary pack (on failure).
    pub(crate) fn abandon(self) {
        // The store stays valid if this fails: an unnamed temp pack is
        // swept on the next mutation.
        let _ = fsx::unlink(&self.tmp_dir, &self.tmp);
    }
}

struct CountingWriter<W> {
    inner: W,
    count: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads a byte range of a file without moving a shared cursor.
struct RangeReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_sub(self.pos);
        if left == 0 {
            return Ok(0);
        }
        let want = buf.len().min(left as usize);
        let n = crate::sys::read_at(self.file, &mut buf[..want], self.pos)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "pack is shorter than the log says",
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// Hashes and counts what is written through it, and refuses to grow past
/// a limit (so a forged frame cannot decompress into an endless stream).
/// Notes when the writer it wraps fails, so that a full disk where the
/// bytes go is not taken for damage to the blob.
struct VerifyingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
    limit: u64,
    out_failed: bool,
}

impl<W> VerifyingWriter<W> {
    /// Notes a failure of the wrapped writer (an interruption is retried,
    /// not a failure).
    fn note(&mut self, res: io::Result<usize>) -> io::Result<usize> {
        if res
            .as_ref()
            .is_err_and(|e| e.kind() != io::ErrorKind::Interrupted)
        {
            self.out_failed = true;
        }
        res
    }
}

impl<W: Write> Write for VerifyingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.count + buf.len() as u64 > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "blob decompresses to more bytes than recorded",
            ));
        }
        let written = self.inner.write(buf);
        let n = self.note(written)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        let flushed = self.inner.flush().map(|()| 0);
        self.note(flushed).map(drop)
    }
}

/// Decompresses blob `id` from `pack` into `out`, hashing as it goes.
///
/// Returns [`Error::BlobDamaged`] when the frame is damaged or the bytes do
/// not hash to `id`, and [`Error::BlobWrite`] when `out` fails (the blob
/// may be whole: the disk it is written to is full, say). The caller writes into a temporary file and renames it into place
/// only after this returns `Ok`, so unverified bytes never reach the project.
///
/// `base` holds the verified bytes of `loc.base` when the blob is a delta.
pub(crate) fn read_blob(
    pack: &File,
    id: &BlobId,
    loc: &BlobLoc,
    base: Option<&[u8]>,
    out: &mut impl Write,
) -> Result<()> {
    let damaged = |reason: String| Error::BlobDamaged {
        id: id.to_hex(),
        reason: format!("{reason} (pack {} at offset {})", loc.pack, loc.offset),
    };
    let reader = RangeReader {
        file: pack,
        pos: loc.offset,
        end: loc.offset.saturating_add(loc.len),
    };
    let mut writer = VerifyingWriter {
        inner: out,
        hasher: Sha256::new(),
        count: 0,
        limit: loc.size,
        out_failed: false,
    };
    let copied = match base {
        Some(base) => zstd::stream::Decoder::with_ref_prefix(io::BufReader::new(reader), base)
            .and_then(|mut dec| {
                dec.window_log_max(27)?;
                io::copy(&mut dec, &mut writer)
            }),
        None if loc.len <= WHOLE_LIMIT && loc.size <= WHOLE_LIMIT => {
            decompress_whole(reader, loc.len as usize, loc.size as usize, &mut writer)
        }
        None => decompress(reader, &mut writer),
    };
    copied.map_err(|e| {
        if writer.out_failed {
            Error::BlobWrite {
                id: id.to_hex(),
                source: e,
            }
        } else {
            damaged(e.to_string())
        }
    })?;
    if writer.count != loc.size {
        return Err(damaged(format!(
            "it holds {} bytes, the log says {}",
            writer.count, loc.size
        )));
    }
    let got = BlobId(writer.hasher.finalize().into());
    if got != *id {
        return Err(damaged(format!("its bytes hash to {got}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary pack held by a writer that fills it without the store
    /// lock survives another store's mutation; once the writer is gone
    /// without committing (a killed process), the next mutation sweeps it.
    #[test]
    fn a_held_temporary_pack_is_not_swept_until_its_writer_is_gone()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("a"), b"a\n")?;
        let mut store = crate::Store::open(dir.path())?;
        store.ensure_created()?;
        let store_dir = store.store_dir().to_path_buf();
        let temps = || -> Vec<String> {
            std::fs::read_dir(&store_dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".pack") && n.contains(fsx::TEMP_MARK))
                .collect()
        };
        let fd = fsx::open_dir_path(&store_dir)?;
        let mut writer = PackWriter::create(&fd, &store_dir)?;
        writer.hold()?;
        writer.append(b"frame")?;
        let mut other = crate::Store::open(dir.path())?;
        other.capture(&crate::TurnId::new("t1")?, None, dir.path().join("a"))?;
        assert_eq!(temps().len(), 1, "a held pack is in use");
        // What a killed writer leaves: the file, with no lock on it.
        let PackWriter { file, .. } = writer;
        drop(file);
        other.capture(&crate::TurnId::new("t2")?, None, dir.path().join("a"))?;
        assert!(temps().is_empty(), "{:?}", temps());
        Ok(())
    }

    /// The context kept per thread gives each blob its own frame: one
    /// after another, and a frame cut short leaves the next decompression
    /// whole.
    #[test]
    fn a_thread_s_context_serves_one_blob_after_another() -> io::Result<()> {
        let a: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let b = b"a small file\n".repeat(40);
        let fa = zstd::bulk::compress(&a, 3)?;
        let fb = zstd::bulk::compress(&b, 19)?;
        for (frame, want) in [(&fa, &a), (&fb, &b), (&fa, &a)] {
            let mut out = Vec::new();
            decompress(&frame[..], &mut out)?;
            assert_eq!(&out, want);
        }
        let mut out = Vec::new();
        assert!(
            decompress(&fa[..fa.len() / 2], &mut out).is_err(),
            "a cut frame"
        );
        let mut out = Vec::new();
        decompress(&fb[..], &mut out)?;
        assert_eq!(out, b);
        Ok(())
    }

    /// A blob read whole gives the bytes streaming gives, one after another
    /// through the buffers kept per thread (a larger one first, so a
    /// smaller one finds room longer than itself), and refuses a cut
    /// frame, a pack shorter than its range, and a frame that holds more
    /// than its recorded size.
    #[test]
    fn a_blob_read_whole_gives_what_streaming_gives() -> io::Result<()> {
        let a: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let b = b"a small file\n".repeat(40);
        let fa = zstd::bulk::compress(&a, 3)?;
        let fb = zstd::bulk::compress(&b, 19)?;
        let empty = zstd::bulk::compress(b"", 3)?;
        for (frame, want) in [
            (&fa, &a[..]),
            (&fb, &b[..]),
            (&empty, &b""[..]),
            (&fa, &a[..]),
        ] {
            let mut whole = Vec::new();
            let n = decompress_whole(&frame[..], frame.len(), want.len(), &mut whole)?;
            assert_eq!((n, &whole[..]), (want.len() as u64, want));
            let mut streamed = Vec::new();
            decompress(&frame[..], &mut streamed)?;
            assert_eq!(whole, streamed);
        }
        let mut out = Vec::new();
        let cut = fa.len() / 2;
        assert!(
            decompress_whole(&fa[..cut], cut, a.len(), &mut out).is_err(),
            "a cut frame"
        );
        assert!(
            decompress_whole(&fb[..], fb.len() + 1, b.len(), &mut out).is_err(),
            "a range past the pack's end"
        );
        assert!(
            decompress_whole(&fa[..], fa.len(), 1000, &mut out).is_err(),
            "more bytes than recorded"
        );
        let mut out = Vec::new();
        decompress_whole(&fb[..], fb.len(), b.len(), &mut out)?;
        assert_eq!(out, b);
        Ok(())
    }

    /// The compressor kept per thread makes, file after file and across a
    /// change of level, the very frames a compressor of their own makes.
    #[test]
    fn a_thread_s_compressor_makes_each_file_s_own_frame() -> io::Result<()> {
        let large: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 997).to_le_bytes())
            .collect();
        let small = b"a small file\n".repeat(40);
        for (data, level) in [
            (&large[..], 3),
            (&small[..], 3),
            (&large[..], 19),
            (&small[..], 3),
            (&b""[..], 3),
        ] {
            let frame = compress_whole(data, level)?;
            assert_eq!(frame, zstd::bulk::compress(data, level)?);
            let mut out = Vec::new();
            decompress(&frame[..], &mut out)?;
            assert_eq!(out, data);
        }
        Ok(())
    }

    #[test]
    fn pack_names_are_strict() {
        assert!(is_pack_name(&pack_name(42)));
        assert_ne!(pack_name(42), pack_name(42), "names are unique");
        assert!(!is_pack_name("../000000000042-0123456789abcdef.pack"));
        assert!(!is_pack_name("00000000004x-0123456789abcdef.pack"));
        assert!(!is_pack_name("000000000042-0123456789abcdeF.pack"));
    }

    /// A writer on a full disk.
    struct FullDisk;

    impl Write for FullDisk {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::StorageFull.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn streamed_blob_reads_back_verified_and_flipped_byte_is_refused() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let fd = fsx::open_dir_path(dir.path()).ctx("open", dir.path())?;
        let mut w = PackWriter::create(&fd, dir.path())?;
        let data: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let Streamed { id, size, kept } = w.append_stream(&data[..], 3, |_| true)?;
        let (offset, len) = kept.expect("kept");
        assert_eq!(id, hash_bytes(&data));
        // A second frame that is dropped again leaves the pack as it was.
        let Streamed { id: dup, kept, .. } = w.append_stream(&b"dup"[..], 3, |_| false)?;
        assert_eq!(dup, hash_bytes(b"dup"));
        assert!(kept.is_none());
        let name = pack_name(1);
        w.commit(&fd, &name)?;
        let path = dir.path().join(&name);
        let loc = BlobLoc {
            pack: name.into(),
            offset,
            len,
            size,
            base: None,
        };
        assert_eq!(std::fs::metadata(&path).expect("pack").len(), offset + len);
        let mut out = Vec::new();
        read_blob(&File::open(&path).expect("open"), &id, &loc, None, &mut out)?;
        assert_eq!(out, data);
        // A full disk where the bytes go is no damage to the blob.
        let full = read_blob(
            &File::open(&path).expect("open"),
            &id,
            &loc,
            None,
            &mut FullDisk,
        );
        assert!(
            matches!(&full, Err(Error::BlobWrite { source, .. })
                if source.kind() == io::ErrorKind::StorageFull),
            "{full:?}"
        );

        let mut bytes = std::fs::read(&path).expect("read");
        let mid = (offset + len / 2) as usize;
        bytes[mid] ^= 0x40;
        let mut perms = std::fs::metadata(&path).expect("meta").permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(&path, perms).expect("chmod");
        std::fs::write(&path, &bytes).expect("write");
        let err = read_blob(
            &File::open(&path).expect("open"),
            &id,
            &loc,
            None,
            &mut Vec::new(),
        );
        assert!(matches!(err, Err(Error::BlobDamaged { .. })), "{err:?}");
        Ok(())
    }

    #[test]
    fn delta_against_the_previous_version_is_small_and_exact() -> Result<()> {
        let v1: Vec<u8> = (0..40_000)
            .flat_map(|i| format!("line {i} of the file\n").into_bytes())
            .collect();
        let mut v2 = v1.clone();
        v2.extend_from_slice(b"one more line\n");
        let frame = compress_delta(&v2, &v1, 3).expect("compress");
        assert!(frame.len() < 200, "delta frame is {} bytes", frame.len());
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p");
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&frame);
        std::fs::write(&path, &bytes).expect("write");
        let loc = BlobLoc {
            pack: "p".into(),
            offset: 8,
            len: frame.len() as u64,
            size: v2.len() as u64,
            base: Some(hash_bytes(&v1)),
        };
        let mut out = Vec::new();
        read_blob(
            &File::open(&path).expect("open"),
            &hash_bytes(&v2),
            &loc,
            Some(&v1),
            &mut out,
        )?;
        assert_eq!(out, v2);
        // Without (or with the wrong) base the bytes never come out.
        let wrong = read_blob(
            &File::open(&path).expect("open"),
            &hash_bytes(&v2),
            &loc,
            Some(&v2),
            &mut Vec::new(),
        );
        assert!(wrong.is_err());
        Ok(())
    }
}
