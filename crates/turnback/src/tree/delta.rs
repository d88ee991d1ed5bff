//! The tree's delta, `<store>/tree-delta`: the entries that changed since
//! the tree file was written, so a snapshot that changed a few paths of a
//! large tree writes those, not the whole tree (see the module doc of
//! [`crate::tree`]).
//!
//! Format (all integers little-endian):
//!
//! ```text
//! magic    "TBDELT2\n"          8 bytes; the digit is the format version
//! base     u64 len, u32 crc     the tree file it applies to: its length and final CRC field
//! stamp    i64, log_seq u64, pending u8, turn u16 len + UTF-8
//!                               the header of the tree it makes (as in the tree file)
//! count    u64                  number of entries of the tree it makes
//! counts   6 × u64              of those: files, their bytes, directories,
//!                               symlinks, excluded entries, unreadable ones
//! changes  u32 count, then each, sorted by path bytes, no duplicates:
//!   path   u16 len + bytes      the whole path
//!   op     u8                   0: the path is gone; 1: an entry follows
//!   entry                       kind, stat and payload as in the tree file
//! crc      u32                  CRC-32 (IEEE) of every byte before it
//! ```
//!
//! The counts let a tree read in part know the whole tree's without the
//! entries of the tree file the changes replaced. Format 1 (`TBDELT1`, no
//! counts) is still read; a tree it belongs to is then read whole.

use std::path::Path;

use super::{Entry, Reader, Totals, put_body, put_str16, read_body};
use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::id::TurnId;
use crate::sys::OwnedFd;
use crate::sys::fs::OFlags;

/// The delta's file name inside the store.
pub const DELTA_FILE: &str = "tree-delta";

/// The first bytes of a delta file.
pub const DELTA_MAGIC: &[u8; 8] = b"TBDELT2\n";

/// The first bytes of a delta file of the format before counts, still
/// read.
const DELTA_MAGIC_1: &[u8; 8] = b"TBDELT1\n";

/// A change of one path: its new entry, or `None` when it is gone.
pub(crate) type Change = (Vec<u8>, Option<Entry>);

/// What a delta file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delta {
    /// The identity of the tree file it applies to (its length and final
    /// CRC field).
    pub(crate) base: (u64, u32),
    /// The header of the tree it makes.
    pub(crate) stamp_ns: i64,
    pub(crate) log_seq: u64,
    pub(crate) pending: bool,
    pub(crate) turn: TurnId,
    /// How many entries the tree it makes has.
    pub(crate) count: u64,
    /// The counts of those entries (none in format 1; written as format 1
    /// when none).
    pub(crate) totals: Option<Totals>,
    /// Sorted by path, no duplicates.
    pub(crate) changes: Vec<Change>,
}

/// The delta in `store` without its changes (`changes` left empty), with
/// its identity (its length and final CRC field): its header and last
/// four bytes are read, not verified (the snapshot that reads the tree
/// whole does that). `Some(None)`: there is one and its header does not
/// read.
#[allow(clippy::type_complexity)]
pub(crate) fn read_header(
    store: &OwnedFd,
    store_path: &Path,
) -> Result<Option<Option<(Delta, (u64, u32))>>> {
    let path = store_path.join(DELTA_FILE);
    let Some(file) =
        fsx::open_store_file(store, DELTA_FILE, OFlags::RDONLY, None).ctx("open", &path)?
    else {
        return Ok(None);
    };
    let len = file.metadata().ctx("stat", &path)?.len();
    // Up to the turn's length: 8 + 12 + 8 + 8 + 1 + 2 bytes.
    const FIXED: usize = 39;
    if len < (FIXED + 8 + 4 + 4) as u64 {
        return Ok(Some(None));
    }
    let mut head = [0u8; FIXED];
    crate::sys::read_exact_at(&file, &mut head, 0).ctx("read", &path)?;
    let turn_len = usize::from(u16::from_le_bytes([head[37], head[38]]));
    if len < (FIXED + turn_len + 8 + 4 + 4) as u64 {
        return Ok(Some(None));
    }
    let mut rest = vec![0u8; turn_len + 8];
    crate::sys::read_exact_at(&file, &mut rest, FIXED as u64).ctx("read", &path)?;
    let mut tail = [0u8; 4];
    crate::sys::read_exact_at(&file, &mut tail, len - 4).ctx("read", &path)?;
    let mut all = head.to_vec();
    all.extend_from_slice(&rest);
    let mut r = Reader { buf: &all, pos: 0 };
    let parsed = (|| -> std::result::Result<Delta, String> {
        let magic = r.take(8)?;
        if magic != DELTA_MAGIC && magic != DELTA_MAGIC_1 {
            return Err("bad magic".into());
        }
        let base = (r.u64()?, r.u32()?);
        let (stamp_ns, log_seq, pending, turn) = r.tree_header()?;
        Ok(Delta {
            base,
            stamp_ns,
            log_seq,
            pending,
            turn,
            count: r.u64()?,
            totals: None,
            changes: Vec::new(),
        })
    })();
    Ok(Some(
        parsed.ok().map(|d| (d, (len, u32::from_le_bytes(tail)))),
    ))
}

/// Serializes a delta (checksum included).
pub(crate) fn encode(d: &Delta) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + d.changes.len() * 100);
    out.extend_from_slice(if d.totals.is_some() {
        DELTA_MAGIC
    } else {
        DELTA_MAGIC_1
    });
    out.extend_from_slice(&d.base.0.to_le_bytes());
    out.extend_from_slice(&d.base.1.to_le_bytes());
    out.extend_from_slice(&d.stamp_ns.to_le_bytes());
    out.extend_from_slice(&d.log_seq.to_le_bytes());
    out.push(u8::from(d.pending));
    put_str16(&mut out, d.turn.as_str().as_bytes());
    out.extend_from_slice(&d.count.to_le_bytes());
    if let Some(t) = &d.totals {
        t.put_counts(&mut out);
    }
    out.extend_from_slice(&(d.changes.len() as u32).to_le_bytes());
    for (path, entry) in &d.changes {
        put_str16(&mut out, path);
        match entry {
            None => out.push(0),
            Some(e) => {
                out.push(1);
                put_body(&mut out, e);
            }
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Parses a delta file's bytes.
pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<Delta, String> {
    let magic = if bytes.starts_with(DELTA_MAGIC_1) {
        DELTA_MAGIC_1
    } else {
        DELTA_MAGIC
    };
    let mut r = Reader::framed(bytes, magic, "a tree delta", "tree delta format")?;
    let base = (r.u64()?, r.u32()?);
    let (stamp_ns, log_seq, pending, turn) = r.tree_header()?;
    let count = r.u64()?;
    let totals = if magic == DELTA_MAGIC {
        Some(Totals::read_counts(&mut r, count)?)
    } else {
        None
    };
    let n = r.u32()? as usize;
    // Every change takes at least 3 bytes.
    let mut changes: Vec<Change> = Vec::with_capacity(n.min(r.left() / 3));
    for i in 0..n {
        let path = r.str16()?.to_vec();
        if path.is_empty() {
            return Err(format!("change {i}: empty path"));
        }
        if changes.last().is_some_and(|(p, _)| *p >= path) {
            return Err(format!("change {i}: paths are not sorted"));
        }
        let entry = match r.u8()? {
            0 => None,
            1 => Some(read_body(&mut r, i, path.clone())?),
            op => return Err(format!("change {i}: unknown operation {op}")),
        };
        changes.push((path, entry));
    }
    if r.left() != 0 {
        return Err(format!("{} bytes after the last change", r.left()));
    }
    Ok(Delta {
        base,
        stamp_ns,
        log_seq,
        pending,
        turn,
        count,
        totals,
        changes,
    })
}

/// `changes` followed by a patch: the paths `gone` removed, then the
/// entries `fresh` put in (both sorted by path). A removed path stays in
/// the delta as gone, whether or not the tree file has it.
pub(crate) fn compose(changes: Vec<Change>, gone: Vec<Vec<u8>>, fresh: Vec<Entry>) -> Vec<Change> {
    let mut patch: Vec<Change> = Vec::with_capacity(gone.len() + fresh.len());
    let mut fresh = fresh.into_iter().peekable();
    for p in gone {
        while let Some(f) = fresh.next_if(|f| f.path < p) {
            patch.push((f.path.clone(), Some(f)));
        }
        match fresh.next_if(|f| f.path == p) {
            Some(f) => patch.push((p, Some(f))),
            None => patch.push((p, None)),
        }
    }
    patch.extend(fresh.map(|f| (f.path.clone(), Some(f))));
    let mut out = Vec::with_capacity(changes.len() + patch.len());
    let mut patch = patch.into_iter().peekable();
    for c in changes {
        while let Some(p) = patch.next_if(|p| p.0 < c.0) {
            out.push(p);
        }
        match patch.next_if(|p| p.0 == c.0) {
            Some(p) => out.push(p),
            None => out.push(c),
        }
    }
    out.extend(patch);
    out
}

/// Whether a delta of `changes` paths is written rather than the whole tree
/// of `base_count` entries: up to a sixteenth of it (at least 64), so
/// reading the tree stays about the cost of reading its file.
pub(crate) fn fits(changes: usize, base_count: u64) -> bool {
    changes as u64 <= (base_count / 16).max(64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::BlobId;
    use crate::tree::{Kind, Stat};

    fn file(path: &str, n: u8) -> Entry {
        Entry {
            path: path.as_bytes().to_vec(),
            stat: Stat {
                size: u64::from(n),
                mtime_ns: 1_700_000_000_000_000_000 + i64::from(n),
                ctime_ns: 1_700_000_000_000_000_001,
                ino: 100 + u64::from(n),
                mode: 0o100644,
            },
            kind: Kind::File {
                blob: BlobId([n; 32]),
            },
        }
    }

    fn sample() -> Delta {
        Delta {
            base: (12345, 0xdead_beef),
            stamp_ns: 1_700_000_001_000_000_000,
            log_seq: 9,
            pending: true,
            turn: TurnId::new("t-1").expect("valid"),
            count: 3,
            totals: Some(Totals {
                entries: 3,
                files: 1,
                bytes: 1,
                dirs: 1,
                symlinks: 1,
                ..Totals::default()
            }),
            changes: vec![
                (b"a".to_vec(), Some(file("a", 1))),
                (b"b/c".to_vec(), None),
                (
                    b"d".to_vec(),
                    Some(Entry {
                        path: b"d".to_vec(),
                        stat: Stat::default(),
                        kind: Kind::Symlink { target: "a".into() },
                    }),
                ),
            ],
        }
    }

    #[test]
    fn delta_round_trips_and_damage_is_detected() {
        let d = sample();
        let bytes = encode(&d);
        assert_eq!(decode(&bytes), Ok(d));
        for at in [0, 9, 30, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad).is_err(), "a flipped byte at {at} is found");
        }
        assert!(
            decode(&bytes[..bytes.len() - 3]).is_err(),
            "a cut file is found"
        );
        let mut unsorted = sample();
        unsorted.changes.swap(0, 1);
        assert!(
            decode(&encode(&unsorted)).is_err_and(|e| e.contains("not sorted")),
            "changes out of order are refused"
        );
    }

    /// Pins the bytes: a format change must change the magic's version.
    #[test]
    fn on_disk_delta_format_is_pinned() {
        let d = sample();
        let bytes = encode(&d);
        assert_eq!(&bytes[..8], b"TBDELT2\n");
        let changes = (3 + 1 + 1 + 36 + 32) + (5 + 1) + (3 + 1 + 1 + 36 + 3);
        assert_eq!(
            bytes.len(),
            8 + 12 + 8 + 8 + 1 + 5 + 8 + 6 * 8 + 4 + changes + 4
        );
        // The counts follow the number of entries.
        let at = 8 + 12 + 8 + 8 + 1 + 5 + 8;
        let counts: Vec<u64> = bytes[at..at + 48]
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        assert_eq!(
            counts,
            [1, 1, 1, 1, 0, 0],
            "files, bytes, dirs, symlinks, …"
        );
        assert_eq!(
            crc32fast::hash(&bytes[..bytes.len() - 4]).to_le_bytes(),
            bytes[bytes.len() - 4..]
        );
        // Format 1: no counts, still read.
        let v1 = encode(&Delta {
            totals: None,
            ..d.clone()
        });
        assert_eq!(&v1[..8], b"TBDELT1\n");
        assert_eq!(v1.len(), bytes.len() - 48);
        assert_eq!(
            decode(&v1),
            Ok(Delta {
                totals: None,
                ..d.clone()
            })
        );
        // Counts that do not add up to the entries are damage.
        let mut bad = bytes.clone();
        bad[at] = 2;
        let at = bad.len() - 4;
        let crc = crc32fast::hash(&bad[..at]);
        bad[at..].copy_from_slice(&crc.to_le_bytes());
        assert!(decode(&bad).is_err_and(|e| e.contains("do not add up")));
    }

    /// A delta composed of patches and applied to a tree gives what
    /// applying the patches one by one to the tree gives.
    #[test]
    fn composed_patches_apply_as_the_patches_in_turn() {
        let base: Vec<Entry> = ["a", "b", "c", "d"].iter().map(|p| file(p, 1)).collect();
        // A patch: `gone` paths removed, `fresh` put in, on a list.
        let patch = |list: &[Entry], gone: &[&str], fresh: &[Entry]| -> Vec<Entry> {
            let mut out: Vec<Entry> = list
                .iter()
                .filter(|e| !gone.iter().any(|g| g.as_bytes() == e.path))
                .filter(|e| !fresh.iter().any(|f| f.path == e.path))
                .cloned()
                .chain(fresh.iter().cloned())
                .collect();
            out.sort_by(|a, b| a.path.cmp(&b.path));
            out
        };
        let steps: [(&[&str], Vec<Entry>); 3] = [
            (&["b"], vec![file("a", 2), file("e", 2)]),
            (&["e", "c"], vec![file("b", 3)]),
            (&["a", "x"], vec![file("c", 4), file("a", 4)]),
        ];
        // The entries of `base` with `changes` applied, as a reader of the
        // tree file and its delta sees them.
        let file = crate::tree::encode(&crate::tree::Tree {
            stamp_ns: 1,
            log_seq: 1,
            turn: TurnId::new("t").expect("valid"),
            pending: false,
            entries: base.clone(),
        });
        let apply = |changes: &[Change], shadowed: &mut Vec<BlobId>| {
            crate::tree::decode_with(&file, changes, shadowed)
                .expect("a tree file encoded here")
                .0
                .entries
        };
        let mut expected = base.clone();
        let mut changes = Vec::new();
        for (gone, fresh) in steps {
            expected = patch(&expected, gone, &fresh);
            let mut gone: Vec<Vec<u8>> = gone.iter().map(|g| g.as_bytes().to_vec()).collect();
            gone.sort();
            let mut fresh = fresh;
            fresh.sort_by(|a, b| a.path.cmp(&b.path));
            changes = compose(changes, gone, fresh);
            assert!(
                changes.windows(2).all(|w| w[0].0 < w[1].0),
                "sorted, unique"
            );
            let mut shadowed = Vec::new();
            assert_eq!(apply(&changes, &mut shadowed), expected);
        }
        let mut shadowed = Vec::new();
        apply(&changes, &mut shadowed);
        assert_eq!(
            shadowed.len(),
            3,
            "a, b and c of the tree file were replaced or removed"
        );
    }

    #[test]
    fn a_delta_fits_up_to_a_sixteenth_of_the_tree() {
        assert!(fits(64, 10));
        assert!(!fits(65, 10));
        assert!(fits(6250, 100_000));
        assert!(!fits(6251, 100_000));
    }
}
