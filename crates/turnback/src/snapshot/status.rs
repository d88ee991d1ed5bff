//! `status`: what changed on disk since the last snapshot, compared
//! without storing or recording anything, with the turns that captured a
//! changed path since and everything no snapshot covers.

use std::collections::HashMap;

use super::diff::{diff, shown_path};
use super::scan::Reading;
use super::{Baseline, CapturedSince, ChangeSource, NotCovered, Progress, Status};
use crate::config::FsMonitor;
use crate::error::Result;
use crate::fsmonitor::{self, Used};
use crate::id::TurnId;
use crate::store::Store;
use crate::tree::{self, Kind, Loaded};

impl Store {
    /// How the snapshot that left `tree` found its changes, as its
    /// fsmonitor state says; without one that goes with `tree`, why no
    /// snapshot used Watchman.
    fn last_change_source(
        &self,
        store: &crate::sys::OwnedFd,
        tree: &crate::tree::Tree,
    ) -> Result<ChangeSource> {
        let mode = fsmonitor::mode(self.config()?.fsmonitor)?;
        if mode == FsMonitor::Off {
            return Ok(ChangeSource::of(Used::Off, "fsmonitor is off"));
        }
        let key = (tree.stamp_ns, tree.entries.len() as u64);
        Ok(match fsmonitor::state::load(store) {
            Some(st) if st.tree == key => ChangeSource::of(st.used, &st.reason),
            _ => ChangeSource::of(Used::Fallback, &fsmonitor::why_not()),
        })
    }

    /// What changed on disk since the last snapshot, without storing or
    /// recording anything. Files whose stat changed are hashed to tell a
    /// real change from a touch.
    pub fn status(&self, progress: &dyn Progress) -> Result<Status> {
        let mut warnings = Vec::new();
        let old = match &self.place.dirs {
            None => None,
            Some(d) => match tree::load(&d.store, &self.place.store_path)? {
                Loaded::Missing => None,
                Loaded::Damaged(why) => {
                    warnings.push(format!(
                        "{why}; the next snapshot rebuilds it and hashes every file again"
                    ));
                    None
                }
                Loaded::Tree(t) => Some(t),
            },
        };
        let change_source = match (&self.place.dirs, &old) {
            (Some(d), Some(t)) => Some(self.last_change_source(&d.store, t)?),
            _ => None,
        };
        let scan = self.scan(
            old.as_ref(),
            Reading::Compare,
            Err("status scans".into()),
            progress,
            None,
        )?;
        warnings.extend(scan.warnings);
        let empty = Vec::new();
        let base = old.as_ref().map_or(&empty, |t| &t.entries);
        let (mut changes, _) = diff(base, &scan.entries, |_| Some(0));
        if old.is_none() {
            // With nothing to compare with, every covered path is new and
            // the excluded ones are listed under not_covered.
            changes.not_captured.clear();
        }
        let mut captured = Vec::new();
        if let Some(t) = &old {
            let mut by_path: HashMap<String, &TurnId> = HashMap::new();
            for turn in self.index.turns_captured_after(t.log_seq)? {
                for c in turn.files.iter().filter(|c| c.seq > t.log_seq) {
                    by_path.entry(c.entry.path.to_string()).or_insert(&turn.id);
                }
            }
            let changed = changes
                .modified
                .iter()
                .chain(&changes.created)
                .chain(&changes.deleted)
                .chain(changes.renamed.iter().flat_map(|r| [&r.from, &r.to]));
            for p in changed {
                if let Some(turn) = by_path.get(p.trim_end_matches('/')) {
                    captured.push(CapturedSince {
                        path: p.clone(),
                        turn: (*turn).clone(),
                    });
                }
            }
        }
        let not_covered = scan
            .entries
            .iter()
            .filter_map(|e| match &e.kind {
                Kind::Excluded(x) => Some(NotCovered {
                    path: shown_path(e),
                    reason: x.describe(),
                }),
                _ => None,
            })
            .collect();
        Ok(Status {
            root: self.place.root.clone(),
            snapshot: old.map(|t| Baseline {
                turn: t.turn,
                pending: t.pending,
                at_ns: t.stamp_ns,
            }),
            changes,
            captured,
            not_covered,
            files: scan.stats.files,
            bytes: scan.stats.bytes,
            change_source,
            warnings,
        })
    }
}
