//! Reading the blobs back: verified bytes from their packs, and the base a
//! new blob is stored as a delta against.

use super::*;

impl Store {
    /// Reads a blob's verified bytes into memory (for diffs).
    pub fn read_blob(&self, id: &BlobId) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.copy_blob(id, &mut out)?;
        Ok(out)
    }

    pub(crate) fn copy_blob(&self, id: &BlobId, out: &mut impl Write) -> Result<()> {
        let loc = self.index.blobs.get(id).ok_or_else(|| Error::BlobDamaged {
            id: id.to_hex(),
            reason: "no record stores it".into(),
        })?;
        let pack = self.open_pack(&loc.pack)?;
        self.copy_blob_from(&pack, id, &loc, out)
    }

    /// Decompresses blob `id` at `loc` in the open `pack` into `out`,
    /// verifying its hash (and, for a delta, its base's).
    pub(crate) fn copy_blob_from(
        &self,
        pack: &File,
        id: &BlobId,
        loc: &BlobLoc,
        out: &mut impl Write,
    ) -> Result<()> {
        let base = match &loc.base {
            Some(b) if self.index.delta_depth(id) > pack::MAX_DELTA_DEPTH => {
                return Err(Error::BlobDamaged {
                    id: id.to_hex(),
                    reason: format!("its chain of deltas (through {b}) is too long or loops"),
                });
            }
            Some(b) => Some(self.read_blob(b)?),
            None => None,
        };
        pack::read_blob(pack, id, loc, base.as_deref(), out)
    }

    /// The previous version of `path` to compress a new version against,
    /// with its bytes, when a delta is worth making.
    pub(super) fn delta_base(
        &self,
        path: &RelPath,
        size: u64,
        packs: &HashMap<String, File>,
    ) -> Option<(BlobId, Vec<u8>)> {
        let (base, loc) = self.delta_base_loc(path, size)?;
        // A damaged base only means no delta; the new blob is stored whole.
        let bytes = match packs.get(&*loc.pack) {
            Some(pack) => {
                let mut out = Vec::with_capacity(loc.size as usize);
                self.copy_blob_from(pack, &base, &loc, &mut out)
                    .ok()
                    .map(|()| out)
            }
            None => self.read_blob(&base).ok(),
        };
        bytes.map(|b| (base, b))
    }

    /// The previous version of `path` a new version of `size` bytes is
    /// compressed against, and where it is stored, when a delta is worth
    /// making.
    pub(super) fn delta_base_loc(&self, path: &RelPath, size: u64) -> Option<(BlobId, BlobLoc)> {
        let base = self.index.path_blob.get(path)?;
        let loc = self.index.blobs.get(&base)?;
        if loc.size < 1024
            || loc.size + size > pack::DELTA_LIMIT
            || self.index.delta_depth(&base) + 1 >= pack::MAX_DELTA_DEPTH
        {
            return None;
        }
        Some((base, loc))
    }

    pub(crate) fn open_pack(&self, name: &str) -> Result<File> {
        let path = self.place.store_path.join(PACKS_DIR).join(name);
        let (file, node) =
            fsx::open_file(&self.place.dirs().packs, name).ctx("open pack", &path)?;
        if !matches!(node, Node::File { .. }) {
            return Err(Error::Io {
                op: "open pack",
                path,
                source: io::Error::other("it is not a regular file"),
            });
        }
        Ok(file)
    }
}
