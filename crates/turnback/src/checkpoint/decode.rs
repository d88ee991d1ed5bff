//! Reading a checkpoint's head and a turn's bytes (see the format in
//! [`super`]).

use std::collections::HashMap;

use super::paths::FrozenPathBlobs;
use crate::id::{BlobId, TurnId};
use crate::index::{Applied, Captured, Index, OpInfo, PathBlobs, Posts, Reversed, Turn};
use crate::log::{FileEntry, Post, PostEntry, Pre};
use crate::path::RelPath;

/// Reads a checkpoint's bytes; `at` is where `rest` starts in them.
pub(super) struct Reader<'a> {
    pub(super) rest: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        self.at += n;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    pub(super) fn num(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    pub(super) fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.num()?).ok()?;
        // Every element takes at least one byte: a bound on allocations.
        (n <= self.rest.len()).then_some(n)
    }

    fn str(&mut self) -> Option<String> {
        self.str_ref().map(str::to_owned)
    }

    /// A string borrowed from the checkpoint's bytes (no allocation).
    fn str_ref(&mut self) -> Option<&'a str> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.num()?).ok()
    }

    /// A `u32` of fixed width, little endian.
    pub(super) fn le_u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.byte()? {
            0 => Some(None),
            1 => f(self).map(Some),
            _ => None,
        }
    }

    fn blob(&mut self) -> Option<BlobId> {
        Some(BlobId(self.take(32)?.try_into().ok()?))
    }

    fn path(&mut self) -> Option<RelPath> {
        let n = self.len()?;
        RelPath::from_stored(self.take(n)?).ok()
    }

    fn turn_id(&mut self) -> Option<TurnId> {
        TurnId::new(self.str()?).ok()
    }

    fn map<K: Eq + std::hash::Hash, V>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Option<(K, V)>,
    ) -> Option<HashMap<K, V>> {
        let n = self.len()?;
        let mut map = HashMap::with_capacity(n);
        for _ in 0..n {
            let (k, v) = f(self)?;
            map.insert(k, v);
        }
        Some(map)
    }

    fn vec<T>(&mut self, mut f: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let n = self.len()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(f(self)?);
        }
        Some(v)
    }

    fn entry(&mut self) -> Option<FileEntry> {
        let path = self.path()?;
        let pre = match self.byte()? {
            tag @ (0 | 6) => Pre::File {
                blob: self.blob()?,
                size: self.num()?,
                mode: self.u32()?,
                link: if tag == 6 { Some(self.num()?) } else { None },
            },
            1 => Pre::Symlink {
                target: self.str()?,
            },
            2 => Pre::Absent,
            3 => Pre::Dir { mode: self.u32()? },
            4 => Pre::Skipped {
                reason: self.str()?,
                size: self.num()?,
            },
            5 => Pre::Fifo { mode: self.u32()? },
            tag @ (7 | 8) => Pre::Aside {
                seq: self.num()?,
                n: self.num()?,
                size: self.num()?,
                mode: self.u32()?,
                blob: if tag == 8 { Some(self.blob()?) } else { None },
            },
            _ => return None,
        };
        Some(FileEntry { path, pre })
    }

    fn post(&mut self) -> Option<Post> {
        Some(match self.byte()? {
            0 => Post::File {
                sha256: self.blob()?,
                stat: None,
            },
            5 => Post::File {
                sha256: self.blob()?,
                stat: Some(crate::log::StatKey {
                    dev: self.num()?,
                    ino: self.num()?,
                    size: self.num()?,
                    mtime: self.num()? as i64,
                    ctime: self.num()? as i64,
                }),
            },
            1 => Post::Symlink {
                target: self.str()?,
            },
            2 => Post::Absent,
            3 => Post::Dir,
            4 => Post::Other,
            _ => return None,
        })
    }

    pub(super) fn turn(&mut self) -> Option<Turn> {
        let turn = Turn {
            id: self.turn_id()?,
            label: self.opt(Self::str)?,
            first_seq: self.num()?,
            started_at: self.num()?,
            sealed: match self.byte()? {
                0 => false,
                1 => true,
                _ => return None,
            },
            ended_by: self.opt(Self::num)?,
            files: self.vec(|r| {
                Some(Captured {
                    seq: r.num()?,
                    entry: r.entry()?,
                    shared_with: r.vec(Self::turn_id)?,
                })
            })?,
            posts: {
                let mut seqs = Vec::new();
                let list = self.vec(|r| {
                    let path = r.path()?;
                    seqs.push(r.num()?);
                    Some(PostEntry {
                        path,
                        post: r.post()?,
                    })
                })?;
                Posts::from_sorted(list, seqs)?
            },
            by_path: self.vec(|r| u32::try_from(r.num()?).ok())?,
        };
        // Each capture once, ordered by path.
        let n = turn.files.len();
        let mut named = vec![false; n];
        let path_at = |i: u32| turn.files.get(i as usize).map(|c| &c.entry.path);
        let once = turn.by_path.len() == n
            && turn.by_path.iter().all(|&i| {
                named
                    .get_mut(i as usize)
                    .is_some_and(|seen| !std::mem::replace(seen, true))
            });
        let ordered = turn
            .by_path
            .windows(2)
            .all(|w| path_at(w[0]) < path_at(w[1]));
        (once && ordered).then_some(turn)
    }

    /// A count or length, with no bound but the platform's.
    pub(super) fn len_any(&mut self) -> Option<usize> {
        usize::try_from(self.num()?).ok()
    }

    /// The head's part of the index: counters and small maps; the tables
    /// are added by [`open`].
    pub(super) fn index(&mut self) -> Option<Index> {
        let last_seq = self.num()?;
        let captures = self.num()?;
        let lines = self.len_any()?;
        let consumed = self.num()?;
        let live_count = self.len_any()?;
        let stored_bytes = self.num()?;
        let saved = self.map(|r| Some((r.num()?, r.vec(Self::entry)?)))?;
        let ops = self.map(|r| {
            let seq = r.num()?;
            let info = OpInfo {
                turns: r.vec(Self::num)?,
                turn: r.turn_id()?,
                at: r.num()?,
                kept: r.vec(|r| Some((r.num()?, r.vec(Self::path)?)))?,
            };
            Some((seq, info))
        })?;
        let applied = |r: &mut Self| {
            Some(Applied {
                op: r.num()?,
                saved: r.num()?,
            })
        };
        let done = self.vec(applied)?;
        let undone = self.vec(applied)?;
        let reversed = self.vec(|r| {
            Some(Reversed {
                op: r.num()?,
                saved: r.num()?,
                until: r.num()?,
            })
        })?;
        // Kept as written, with where each path is (see FrozenPathBlobs).
        let from = self.rest;
        let start = self.at;
        let n = self.len()?;
        let mut paths = Vec::with_capacity(n);
        for _ in 0..n {
            let len = self.len()?;
            let at = u32::try_from(self.at - start).ok()?;
            paths.push((at, u32::try_from(len).ok()?));
            self.take(len)?;
            self.take(32)?;
        }
        let bytes = &from[..from.len() - self.rest.len()];
        let path_blob = PathBlobs::from_frozen(FrozenPathBlobs {
            bytes: bytes.into(),
            paths,
        });
        Some(Index {
            saved,
            ops,
            done,
            undone,
            reversed,
            last_seq,
            path_blob,
            captures,
            lines,
            consumed,
            live_count,
            stored_bytes,
            ..Index::default()
        })
    }
}
