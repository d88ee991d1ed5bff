//! The tree a snapshot half leaves: the scan's entries, or the old tree
//! with the patch of a scan of the paths Watchman named, written whole or
//! as a delta of the tree file (see [`crate::tree`]).

use super::diff;
use crate::error::Result;
use crate::sys::OwnedFd;
use crate::tree::{self, Entry, Tree, TreeWriter};
use std::path::Path;

/// The tree a half leaves (see [`crate::tree`]).
pub(super) enum NewTree {
    /// Every entry: written whole.
    Whole(Vec<Entry>),
    /// The changes since the tree file, written as its delta; or, when
    /// they are too many for one (`whole`), applied to the tree file and
    /// written whole.
    Delta {
        whole: bool,
        /// The tree file's identity.
        base: (u64, u32),
        changes: Vec<tree::Change>,
        /// The counts of the tree they make.
        totals: tree::Totals,
    },
}

/// The new tree, as `Store::record` holds it.
pub(super) enum New {
    /// The scan's entries (and the old tree, until it is diffed).
    Whole {
        old: Option<Tree>,
        entries: Vec<Entry>,
    },
    /// The old tree with the scan's patch.
    Patched(Patched),
}

impl New {
    /// The entry at `path`, if any.
    pub(super) fn entry(&self, path: &[u8]) -> Option<&Entry> {
        match self {
            New::Whole { entries, .. } => diff::entry_at(entries, path),
            New::Patched(p) => p.entry(path),
        }
    }

    /// The tree to write (see [`Patched::into_new_tree`]).
    pub(super) fn into_new_tree(self, layers: Option<tree::Layers>) -> NewTree {
        match self {
            New::Whole { entries, .. } => NewTree::Whole(entries),
            New::Patched(p) => p.into_new_tree(layers),
        }
    }
}

/// The new tree as a scan of the paths Watchman named found it: the old
/// tree, its entries at `dropped` gone or replaced by `fresh` (see
/// `Scan::patch`).
pub(super) struct Patched {
    pub(super) old: Tree,
    pub(super) dropped: Vec<usize>,
    pub(super) fresh: Vec<Entry>,
    /// How much of the whole tree `old` is, when it was read in part.
    pub(super) partial: Option<tree::Partial>,
}

impl Patched {
    /// The entry at `path`, if any.
    pub(super) fn entry(&self, path: &[u8]) -> Option<&Entry> {
        if let Some(e) = diff::entry_at(&self.fresh, path) {
            return Some(e);
        }
        let i = self
            .old
            .entries
            .binary_search_by(|e| e.path.as_slice().cmp(path))
            .ok()?;
        self.dropped
            .binary_search(&i)
            .is_err()
            .then(|| &self.old.entries[i])
    }

    /// The tree to write: a delta when the tree file's (in `layers`) and
    /// this one's changes fit in one (see [`tree::Layers`]), else whole.
    pub(super) fn into_new_tree(self, layers: Option<tree::Layers>) -> NewTree {
        let Patched {
            old,
            dropped,
            fresh,
            partial,
        } = self;
        // The whole tree's counts, less the old entries dropped, plus the
        // fresh ones.
        let tot = tree::Totals::patched(
            partial
                .as_ref()
                .map_or_else(|| tree::Totals::of(&old.entries), |p| p.totals),
            dropped.iter().map(|&i| &old.entries[i]),
            &fresh,
        );
        match layers {
            // Read in part, the tree is always made of the tree file and
            // the changes.
            Some(l)
                if partial.is_some()
                    || tree::delta_fits(
                        l.changes.len() + dropped.len() + fresh.len(),
                        l.base_count,
                    ) =>
            {
                let gone = dropped
                    .iter()
                    .map(|&i| old.entries[i].path.clone())
                    .collect();
                let changes = tree::compose(l.changes, gone, fresh);
                NewTree::Delta {
                    // A tree file of an older format is written anew.
                    whole: l.stale || !tree::delta_fits(changes.len(), l.base_count),
                    base: l.base,
                    changes,
                    totals: tot,
                }
            }
            _ => {
                let mut out = Vec::with_capacity(tot.entries as usize);
                crate::sys::huge_pages(&mut out);
                let mut dropped = dropped.into_iter().peekable();
                let mut fresh = fresh.into_iter().peekable();
                for (i, e) in old.entries.into_iter().enumerate() {
                    if dropped.next_if_eq(&i).is_some() {
                        continue;
                    }
                    while let Some(f) = fresh.next_if(|f| f.path < e.path) {
                        out.push(f);
                    }
                    out.push(e);
                }
                out.extend(fresh);
                NewTree::Whole(out)
            }
        }
    }
}

impl NewTree {
    /// How many entries it holds in memory (a delta's changes only).
    pub(super) fn held(&self) -> usize {
        match self {
            NewTree::Whole(entries) => entries.len(),
            NewTree::Delta { changes, .. } => changes.len(),
        }
    }

    /// The number of entries and of unreadable ones.
    pub(super) fn counts(&self) -> (u64, u64) {
        match self {
            NewTree::Whole(entries) => (
                entries.len() as u64,
                entries.iter().filter(|e| e.is_unreadable()).count() as u64,
            ),
            NewTree::Delta { totals, .. } => (totals.entries, totals.unreadable),
        }
    }

    /// Writes it with the header fields of `header` (its entries unused);
    /// returns the bytes written.
    pub(super) fn write(
        self,
        writer: TreeWriter,
        store: &OwnedFd,
        store_path: &Path,
        header: Tree,
    ) -> Result<u64> {
        match self {
            NewTree::Whole(entries) => {
                writer.commit(store, store_path, &Tree { entries, ..header })
            }
            NewTree::Delta {
                whole: true,
                changes,
                ..
            } => {
                let entries = tree::with_changes(store, store_path, &changes)?;
                writer.commit(store, store_path, &Tree { entries, ..header })
            }
            NewTree::Delta {
                base,
                changes,
                totals,
                ..
            } => {
                let delta = tree::Delta {
                    base,
                    stamp_ns: header.stamp_ns,
                    log_seq: header.log_seq,
                    pending: header.pending,
                    turn: header.turn,
                    count: totals.entries,
                    totals: Some(totals),
                    changes,
                };
                writer.commit_delta(store, store_path, &delta)
            }
        }
    }
}
