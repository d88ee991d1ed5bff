//! The change source's state: `<store>/fsmonitor`, the Watchman clock
//! stored beside the tree state (see [`crate::tree`]), and how the last
//! snapshot found its changes (for `status`).
//!
//! Format (all integers little-endian):
//!
//! ```text
//! magic    "TBFSMON2"           8 bytes; the digit is the format version
//! tree     stamp i64, count u64 the tree state it goes with: its scan stamp
//!                               and its number of entries
//! counts   files u64, bytes u64, dirs u64, symlinks u64, excluded u64,
//!          unreadable u64       that tree's counts (what a snapshot that
//!                               finds nothing changed reports; paths held
//!                               as unreadable are looked at every time)
//! used     u8                   how the last snapshot found its changes:
//!                               0 the scan (fsmonitor off), 1 Watchman,
//!                               2 the scan because Watchman could not be used
//! reason   u16 len + UTF-8      why, when 0 or 2 (empty otherwise)
//! sock     u16 len + UTF-8      the Watchman socket found (empty: none)
//! token    u8                   1: a clock follows, 0: none
//!   watch  u16 len + UTF-8      the watched root (`watch-project`)
//!   rel    u16 len + UTF-8      the project root relative to it (empty: the same)
//!   clock  u16 len + UTF-8      the clock taken before the tree's stats
//!   recrawls u64                how many times Watchman had recrawled the
//!                               watch then (a recrawl since: a full scan)
//! unheld   u32 n, n × u64       the inodes, ascending, of the tree's
//!                               entries with a name the tree does not
//!                               hold (see [`Unheld`]); n = u32::MAX: more
//!                               than [`MAX_UNHELD`], none listed
//! crc      u32                  CRC-32 (IEEE) of every byte before it
//! ```
//!
//! Invariants:
//! - The clock was answered by Watchman before the snapshot that wrote the
//!   tree it names looked at any path: every change after the tree's stats
//!   were taken is in Watchman's answer to "what changed since this
//!   clock". An older clock only names more paths, never fewer, so a file
//!   that is lost or older than the tree costs a full scan, never a missed
//!   change.
//! - It is used only with the tree it names (same stamp, same count);
//!   any other tree (a snapshot without Watchman rewrote it, or a crash
//!   came between the tree and this file) means a full scan.
//! - Written after the tree (or its head), by temporary file and rename,
//!   not synced (like the tree head: a lost or torn one costs one full
//!   scan). A file that does not decode (bad magic, version, checksum,
//!   truncation) is treated as absent.
//! - Version 1 (no `unheld`) is not read: it costs one full scan.
//! - Not written again by a snapshot that found nothing changed when only
//!   its clock would change ([`State::stands_for`]): the older clock
//!   names more paths, never fewer, and a half that changed nothing saves
//!   a file replacement.

use std::io::{Read, Write};
use std::path::Path;

use crate::error::{IoResultExt, Result};
use crate::fsx;
use crate::sys::OwnedFd;
use crate::sys::fs::OFlags;
use crate::tree::Reader;

/// The file's name in the store directory.
pub const STATE_FILE: &str = "fsmonitor";

/// The first bytes of the file.
pub const MAGIC: &[u8; 8] = b"TBFSMON2";

/// The most inodes [`Unheld::Some`] lists; more are [`Unheld::Many`].
pub(crate) const MAX_UNHELD: usize = 1 << 16;

/// The tree's non-directory entries with a name the tree does not hold:
/// hard links whose other name lies inside an excluded directory (whose
/// entries the tree does not hold) or outside the project. Written or
/// removed through the name the tree holds, such a file changes under the
/// other name too (its bytes, or its link count and so its `ctime`), which
/// Watchman does not name; inside an excluded directory the scan sees it,
/// in that directory's folded stat (see [`crate::subtree_stat`]). A half
/// that looks only at Watchman's paths therefore scans the whole tree when
/// one of these changed (see `walk::walk_changed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unheld {
    /// Their inodes, ascending (at most [`MAX_UNHELD`]).
    Some(Vec<u64>),
    /// Too many to list: any file changed may be one.
    Many,
}

impl Unheld {
    /// Of the inodes `inodes` (in any order, repeats allowed).
    pub(crate) fn of(mut inodes: Vec<u64>) -> Unheld {
        inodes.sort_unstable();
        inodes.dedup();
        if inodes.len() > MAX_UNHELD {
            Unheld::Many
        } else {
            Unheld::Some(inodes)
        }
    }

    /// Whether the file with inode `ino` may be one of them.
    pub(crate) fn may_hold(&self, ino: u64) -> bool {
        match self {
            Unheld::Some(v) => v.binary_search(&ino).is_ok(),
            Unheld::Many => true,
        }
    }
}

/// A Watchman clock and where it is valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// The watched root, as `watch-project` answered it.
    pub(crate) watch: String,
    /// The project root relative to `watch` (empty: the same folder).
    pub(crate) rel: String,
    /// The clock.
    pub(crate) clock: String,
    /// How many times Watchman had recrawled the watch when it gave the
    /// clock.
    pub(crate) recrawls: u64,
}

/// How a snapshot found its changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Used {
    /// The scan, because the change source is off.
    Off,
    /// Watchman's answer.
    Watchman,
    /// The scan, because Watchman could not be used (the reason says why).
    Fallback,
}

/// The counts of a tree state (see [`crate::ScanStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Counts {
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    pub(crate) dirs: u64,
    pub(crate) symlinks: u64,
    pub(crate) excluded: u64,
    /// Excluded entries that could not be read (looked at again by every
    /// snapshot).
    pub(crate) unreadable: u64,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct State {
    /// The tree it goes with: (stamp, number of entries).
    pub(crate) tree: (i64, u64),
    /// That tree's counts.
    pub(crate) counts: Counts,
    /// How the last snapshot found its changes.
    pub(crate) used: Used,
    /// Why, for [`Used::Off`] and [`Used::Fallback`].
    pub(crate) reason: String,
    /// The socket Watchman answered on, or was last looked for at.
    pub(crate) sock: String,
    /// The clock for the next snapshot.
    pub(crate) token: Option<Token>,
    /// The tree's entries with a name it does not hold.
    pub(crate) unheld: Unheld,
}

impl State {
    /// Whether `self` says what `newer` says but for an older clock of
    /// the same watch: kept in place of `newer` after a snapshot that found
    /// nothing changed, it names more paths, never fewer (see the module
    /// doc), and the file need not be written again.
    pub(crate) fn stands_for(&self, newer: &State) -> bool {
        let watch = |t: &Option<Token>| {
            t.as_ref()
                .map(|t| (t.watch.clone(), t.rel.clone(), t.recrawls))
        };
        self.tree == newer.tree
            && self.counts == newer.counts
            && self.used == newer.used
            && self.reason == newer.reason
            && self.sock == newer.sock
            && self.unheld == newer.unheld
            && self.token.is_some()
            && watch(&self.token) == watch(&newer.token)
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Longer texts are cut at a character boundary; a socket path, root or
    // clock never comes near 64 KiB, and a cut one simply does not match.
    let mut n = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..n]);
}

/// Serializes a state (checksum included).
pub(crate) fn encode(s: &State) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&s.tree.0.to_le_bytes());
    out.extend_from_slice(&s.tree.1.to_le_bytes());
    let c = &s.counts;
    for n in [
        c.files,
        c.bytes,
        c.dirs,
        c.symlinks,
        c.excluded,
        c.unreadable,
    ] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.push(match s.used {
        Used::Off => 0,
        Used::Watchman => 1,
        Used::Fallback => 2,
    });
    put_str(&mut out, &s.reason);
    put_str(&mut out, &s.sock);
    match &s.token {
        None => out.push(0),
        Some(t) => {
            out.push(1);
            put_str(&mut out, &t.watch);
            put_str(&mut out, &t.rel);
            put_str(&mut out, &t.clock);
            out.extend_from_slice(&t.recrawls.to_le_bytes());
        }
    }
    match &s.unheld {
        Unheld::Some(v) if v.len() <= MAX_UNHELD => {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            for ino in v {
                out.extend_from_slice(&ino.to_le_bytes());
            }
        }
        _ => out.extend_from_slice(&u32::MAX.to_le_bytes()),
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Parses the file's bytes, verifying its magic, version, checksum and
/// every field.
pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<State, String> {
    let mut r = Reader::framed(bytes, MAGIC, "an fsmonitor state", "fsmonitor state")?;
    let tree = (r.u64()? as i64, r.u64()?);
    let counts = Counts {
        files: r.u64()?,
        bytes: r.u64()?,
        dirs: r.u64()?,
        symlinks: r.u64()?,
        excluded: r.u64()?,
        unreadable: r.u64()?,
    };
    let used = match r.u8()? {
        0 => Used::Off,
        1 => Used::Watchman,
        2 => Used::Fallback,
        b => return Err(format!("unknown source {b}")),
    };
    let reason = r.utf8()?;
    let sock = r.utf8()?;
    let token = match r.u8()? {
        0 => None,
        1 => Some(Token {
            watch: r.utf8()?,
            rel: r.utf8()?,
            clock: r.utf8()?,
            recrawls: r.u64()?,
        }),
        b => return Err(format!("bad token flag {b}")),
    };
    let unheld = match r.u32()? {
        u32::MAX => Unheld::Many,
        n if n as usize > MAX_UNHELD => return Err(format!("{n} unheld inodes listed")),
        n => {
            let mut v = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let ino = r.u64()?;
                if v.last().is_some_and(|&last| last >= ino) {
                    return Err("the unheld inodes are not ascending".into());
                }
                v.push(ino);
            }
            Unheld::Some(v)
        }
    };
    if r.left() != 0 {
        return Err(format!("{} bytes after the last field", r.left()));
    }
    Ok(State {
        tree,
        counts,
        used,
        reason,
        sock,
        token,
        unheld,
    })
}

/// The state in `store`, when there is a whole one. A damaged one is
/// treated as absent (it is a cache; see the module doc).
pub(crate) fn load(store: &OwnedFd) -> Option<State> {
    let file = fsx::open_store_file(store, STATE_FILE, OFlags::RDONLY, None).ok()??;
    let mut bytes = Vec::new();
    file.take(1 << 20).read_to_end(&mut bytes).ok()?;
    decode(&bytes).ok()
}

/// Replaces the state (not synced; see the module doc).
pub(crate) fn save(store: &OwnedFd, store_path: &Path, state: &State) -> Result<()> {
    let shown = store_path.join(STATE_FILE);
    let bytes = encode(state);
    let (mut f, tmp) = fsx::create_temp(store, STATE_FILE, 0o644).ctx("create", &shown)?;
    let res = f
        .write_all(&bytes)
        .and_then(|()| fsx::rename(store, &tmp, STATE_FILE));
    if res.is_err() {
        let _ = fsx::unlink(store, &tmp);
    }
    res.ctx("replace", &shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        State {
            tree: (1_700_000_000_123_456_789, 100_000),
            counts: Counts {
                files: 90_000,
                bytes: 1 << 30,
                dirs: 9_000,
                symlinks: 12,
                excluded: 3,
                unreadable: 1,
            },
            used: Used::Fallback,
            reason: "Watchman restarted: its clock is not the one stored".into(),
            sock: "/tmp/u-state/sock".into(),
            token: Some(Token {
                watch: "/home/u/proj".into(),
                rel: "sub dir".into(),
                clock: "c:1700000000:4242:1:77".into(),
                recrawls: 2,
            }),
            unheld: Unheld::Some(vec![7, 4242, u64::MAX]),
        }
    }

    #[test]
    fn a_state_round_trips_and_its_bytes_are_pinned() {
        let s = sample();
        let bytes = encode(&s);
        assert_eq!(decode(&bytes), Ok(s.clone()));
        // The layout: magic, stamp, count, six counts, source, then texts.
        assert_eq!(&bytes[..8], b"TBFSMON2");
        assert_eq!(bytes[8 + 8 + 8 + 6 * 8], 2);
        // Then the unheld inodes, ascending, before the checksum.
        let end = bytes.len() - 4;
        assert_eq!(&bytes[end - 8..end], &u64::MAX.to_le_bytes());
        assert_eq!(&bytes[end - 28..end - 24], &3u32.to_le_bytes());
        let none = State {
            token: None,
            unheld: Unheld::Some(Vec::new()),
            ..s.clone()
        };
        assert_eq!(decode(&encode(&none)), Ok(none));
        let many = State {
            unheld: Unheld::Many,
            ..s
        };
        assert_eq!(decode(&encode(&many)), Ok(many));
    }

    /// More inodes than a state lists are `Many`, which may hold any.
    #[test]
    fn too_many_unheld_inodes_are_many() {
        let all: Vec<u64> = (0..=MAX_UNHELD as u64).rev().collect();
        assert_eq!(Unheld::of(all.clone()), Unheld::Many);
        assert!(Unheld::Many.may_hold(12_345_678));
        let fewer = Unheld::of(all[1..].iter().chain(&all[1..3]).copied().collect());
        let Unheld::Some(v) = &fewer else {
            panic!("{} inodes are listed", MAX_UNHELD)
        };
        assert_eq!(v.len(), MAX_UNHELD);
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        assert!(fewer.may_hold(0) && !fewer.may_hold(MAX_UNHELD as u64));
    }

    /// A state stands for a newer one that differs only in its clock;
    /// any other field changed, or no clock, and it does not.
    #[test]
    fn a_state_stands_for_a_newer_one_only_with_an_older_clock() {
        let old = sample();
        let with = |f: &dyn Fn(&mut State)| {
            let mut s = old.clone();
            f(&mut s);
            s
        };
        let newer = with(&|s| {
            if let Some(t) = s.token.as_mut() {
                t.clock = "c:1700000000:4242:1:99".into();
            }
        });
        assert!(old.stands_for(&newer) && old.stands_for(&old));
        let others: [&dyn Fn(&mut State); 10] = [
            &|s| s.tree.0 += 1,
            &|s| s.tree.1 += 1,
            &|s| s.counts.files += 1,
            &|s| s.used = Used::Watchman,
            &|s| s.reason.clear(),
            &|s| s.sock.push('x'),
            &|s| s.token = None,
            &|s| s.token.iter_mut().for_each(|t| t.watch.push('x')),
            &|s| s.token.iter_mut().for_each(|t| t.recrawls += 1),
            &|s| s.unheld = Unheld::Many,
        ];
        for (k, f) in others.iter().enumerate() {
            assert!(!old.stands_for(&with(f)), "change {k}");
        }
        let none = with(&|s| s.token = None);
        assert!(!none.stands_for(&none), "no clock stands for nothing");
    }

    #[test]
    fn every_damage_is_refused() {
        let bytes = encode(&sample());
        // Every truncation, and every single flipped bit.
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "cut at {n}");
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(decode(&b).is_err(), "byte {i} bit {bit}");
            }
        }
        // Inodes out of order, with the checksum made right.
        let mut b = bytes.clone();
        let end = b.len() - 4;
        b[end - 16..end - 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let crc = crc32fast::hash(&b[..end]);
        b[end..].copy_from_slice(&crc.to_le_bytes());
        let err = decode(&b).expect_err("not ascending");
        assert!(err.contains("ascending"), "{err}");
        let mut v2 = bytes.clone();
        v2[7] = b'3';
        let err = decode(&v2).expect_err("another version");
        assert!(err.contains("version"), "{err}");
    }
}
