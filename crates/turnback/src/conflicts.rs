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
use crate::path::RelPath;

/// For each path the `turns` (oldest first) touched, the post-image of the
/// last of them that touched it, if that turn recorded one.
pub(crate) fn last_posts(turns: &[&Turn]) -> HashMap<RelPath, Post> {
    let mut last: HashMap<&RelPath, &Turn> = HashMap::new();
    for t in turns {
        for p in t.files.iter().map(|c| &c.entry.path).chain(t.posts.keys()) {
            last.insert(p, t);
        }
    }
    last.into_iter()
        .filter_map(|(p, t)| t.post(p).map(|(_, post)| (p.clone(), post.clone())))
        .collect()
}
