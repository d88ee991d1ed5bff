//! The head's newest blob of each path, read in place.

use crate::id::BlobId;
use crate::path::RelPath;

/// The head's newest blob of each path, left as written (each path and
/// blob id, sorted by path) with where each path's bytes are: a path is
/// found by binary search, and nothing is decoded into a map unless a new
/// checkpoint is written. The head passed its check when the checkpoint
/// was opened; a path in it that is not a valid path (a checkpoint written
/// wrong) is left out, and a capture then stores its file whole instead
/// of as a delta.
pub(crate) struct FrozenPathBlobs {
    pub(super) bytes: Box<[u8]>,
    /// (offset, length) of each path's bytes in `bytes`, its blob id right
    /// after them.
    pub(super) paths: Vec<(u32, u32)>,
}

impl std::fmt::Debug for FrozenPathBlobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FrozenPathBlobs({} paths)", self.paths.len())
    }
}

impl FrozenPathBlobs {
    /// The bytes of the path at `(offset, length)`.
    fn path(&self, (at, len): (u32, u32)) -> &[u8] {
        &self.bytes[at as usize..(at + len) as usize]
    }

    fn path_at(&self, k: usize) -> &[u8] {
        self.path(self.paths[k])
    }

    fn blob_at(&self, k: usize) -> BlobId {
        let end = (self.paths[k].0 + self.paths[k].1) as usize;
        let mut id = [0; 32];
        id.copy_from_slice(&self.bytes[end..end + 32]);
        BlobId(id)
    }

    /// The newest blob recorded for `path`.
    pub(crate) fn get(&self, path: &RelPath) -> Option<BlobId> {
        let k = self
            .paths
            .binary_search_by(|&p| self.path(p).cmp(path.as_bytes()))
            .ok()?;
        Some(self.blob_at(k))
    }

    /// Every valid path (its bytes) and its blob, in path order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], BlobId)> + '_ {
        (0..self.paths.len())
            .filter(|&k| RelPath::from_stored(self.path_at(k)).is_ok())
            .map(|k| (self.path_at(k), self.blob_at(k)))
    }
}
