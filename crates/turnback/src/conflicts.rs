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

use std::collections::HashMap;

use crate::index::Turn;
use crate::log::Post;
use crate::names::Folding;
use crate::path::RelPath;

/// For each path the turns (oldest first) touched, the post-image of the
/// last of them that touched it, if that turn recorded one: one list
/// sorted by path, made to size (a map of 100,000 paths took 13 MB, and
/// twice that while it grew).
///
/// On a file system that does not tell some spellings apart (see
/// [`Folding`]), the spellings of one file are one path here: the last
/// turn that touched any of them gives the reference, its latest post-image
/// under any of them.
#[derive(Debug, Default)]
pub(crate) struct LastPosts {
    list: Vec<(RelPath, Post)>,
    /// With a folding: each key's place in `list`.
    folded: Option<(Folding, HashMap<Vec<u8>, usize>)>,
}

/// A post-image with the sequence number that recorded it and the spelling
/// it was recorded under.
type Latest<'a> = (u64, &'a RelPath, &'a Post);

impl LastPosts {
    pub(crate) fn of(turns: &[&Turn], folding: Folding) -> LastPosts {
        if folding.any() {
            return LastPosts::folded(turns, folding);
        }
        if let [t] = turns {
            let mut list = Vec::with_capacity(t.posts.len());
            list.extend(t.posts.iter().map(|(p, _, post)| (p.clone(), post.clone())));
            return LastPosts { list, folded: None };
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
        LastPosts { list, folded: None }
    }

    /// [`LastPosts::of`] where spellings fold: keyed by [`Folding::key`].
    fn folded(turns: &[&Turn], folding: Folding) -> LastPosts {
        // Per key: the last turn that touched it, and the latest post-image
        // that turn recorded under any of its spellings.
        let mut last: HashMap<Vec<u8>, (usize, Option<Latest<'_>>)> = HashMap::new();
        for (k, t) in turns.iter().enumerate() {
            let paths = t.files.iter().map(|c| &c.entry.path).chain(t.posts.keys());
            for p in paths {
                let post = t.post(p).map(|(seq, post)| (seq, p, post));
                let slot = last
                    .entry(folding.key(p.as_bytes()).into_owned())
                    .or_insert((k, None));
                if slot.0 < k {
                    *slot = (k, None);
                }
                if post.is_some_and(|(seq, ..)| slot.1.is_none_or(|(had, ..)| had < seq)) {
                    slot.1 = post;
                }
            }
        }
        let mut list = Vec::with_capacity(last.len());
        let mut places = HashMap::with_capacity(last.len());
        for (key, (_, post)) in last {
            if let Some((_, path, post)) = post {
                places.insert(key, list.len());
                list.push((path.clone(), post.clone()));
            }
        }
        LastPosts {
            list,
            folded: Some((folding, places)),
        }
    }

    /// The reference post-image of `path`.
    pub(crate) fn get(&self, path: &RelPath) -> Option<&Post> {
        let i = match &self.folded {
            Some((folding, places)) => *places.get(folding.key(path.as_bytes()).as_ref())?,
            None => self.list.binary_search_by(|(p, _)| p.cmp(path)).ok()?,
        };
        Some(&self.list[i].1)
    }
}
