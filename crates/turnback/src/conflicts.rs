//! Which post-image a rewind compares a path against to tell someone
//! else's change from the agent's.
//!
//! A rewind of turn T undoes T and every later turn, so a change a later
//! turn made is part of what is undone, never a change by someone else.
//! For each path, the reference is the post-image recorded by the *last*
//! live turn (in turn order) that touched it: what that turn left. When that
//! turn recorded no post-image for the path (it was never sealed), there is
//! no reference and no conflict is reported for it: an earlier turn's
//! post-image would call the later turn's own change a conflict.

use crate::index::Turn;
use crate::log::Post;
use crate::path::RelPath;

/// For each path the turns (oldest first) touched, the post-image of the
/// last of them that touched it, if that turn recorded one: one list
/// sorted by path, made to size (a map of 100,000 paths took 13 MB, and
/// twice that while it grew).
#[derive(Debug, Default)]
pub(crate) struct LastPosts(Vec<(RelPath, Post)>);

impl LastPosts {
    pub(crate) fn of(turns: &[&Turn]) -> LastPosts {
        if let [t] = turns {
            let mut list = Vec::with_capacity(t.posts.len());
            list.extend(t.posts.iter().map(|(p, _, post)| (p.clone(), post.clone())));
            return LastPosts(list);
        }
        // Each path with the place of the last turn that touched it.
        let mut last: Vec<(&RelPath, usize)> = turns
            .iter()
            .enumerate()
            .flat_map(|(k, t)| {
                let paths = t.files.iter().map(|c| &c.entry.path).chain(t.posts.keys());
                paths.map(move |p| (p, k))
            })
            .collect();
        last.sort_unstable_by(|a, b| a.0.cmp(b.0).then(b.1.cmp(&a.1)));
        last.dedup_by(|later, first| later.0 == first.0);
        let mut list = Vec::new();
        list.extend(last.into_iter().filter_map(|(p, k)| {
            let (_, post) = turns[k].post(p)?;
            Some((p.clone(), post.clone()))
        }));
        LastPosts(list)
    }

    /// The reference post-image of `path`.
    pub(crate) fn get(&self, path: &RelPath) -> Option<&Post> {
        let i = self.0.binary_search_by(|(p, _)| p.cmp(path)).ok()?;
        Some(&self.0[i].1)
    }
}
