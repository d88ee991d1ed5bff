//! A turn's post-images: the latest one recorded per path, with the seq of
//! its record, kept as one vector sorted by path.
//!
//! Not a hash map: a turn of 100,000 paths held them in a map of some 16
//! MB, 21 MB while it doubled, on top of the record that brought them. A
//! record's list is sorted and merged in (moved, not copied, when the
//! record is the caller's), and a path is found by binary search.

use crate::log::{Post, PostEntry};
use crate::path::RelPath;

/// See the module doc. Invariant: paths strictly increase; `seqs` has
/// the seq of each entry's record (0 for a seal's, which touches nothing).
#[derive(Debug, Clone, Default)]
pub(crate) struct Posts {
    list: Vec<PostEntry>,
    seqs: Vec<u64>,
}

impl Posts {
    /// Posts already sorted by path, each path once, with their records'
    /// seqs (as a checkpoint holds them); `None` when they are not.
    pub(crate) fn from_sorted(list: Vec<PostEntry>, seqs: Vec<u64>) -> Option<Posts> {
        (list.len() == seqs.len() && list.windows(2).all(|w| w[0].path < w[1].path))
            .then_some(Posts { list, seqs })
    }

    fn find(&self, path: &RelPath) -> Result<usize, usize> {
        self.list.binary_search_by(|p| p.path.cmp(path))
    }

    /// The latest post-image of `path`, with its record's seq.
    pub(crate) fn get(&self, path: &RelPath) -> Option<(u64, &Post)> {
        let i = self.find(path).ok()?;
        Some((self.seqs[i], &self.list[i].post))
    }

    pub(crate) fn contains_key(&self, path: &RelPath) -> bool {
        self.find(path).is_ok()
    }

    /// The paths, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &RelPath> {
        self.list.iter().map(|p| &p.path)
    }

    /// Every path with its record's seq and post-image, in path order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (&RelPath, u64, &Post)> {
        self.list
            .iter()
            .zip(&self.seqs)
            .map(|(p, &seq)| (&p.path, seq, &p.post))
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Records the post-images of record `seq`: each replaces the one its
    /// path had, and of a path listed twice the later stands. The list is
    /// kept as it comes, sorted in place.
    pub(crate) fn insert_all(&mut self, seq: u64, mut posts: Vec<PostEntry>) {
        if posts.len() == 1 {
            // A file tool's record: one post-image, put in its place.
            let one = posts.pop().expect("one post-image");
            match self.find(&one.path) {
                Ok(i) => {
                    self.list[i] = one;
                    self.seqs[i] = seq;
                }
                Err(i) => {
                    self.list.insert(i, one);
                    self.seqs.insert(i, seq);
                }
            }
            return;
        }
        // Stable: of equal paths the later stays last, and is the one kept.
        posts.sort_by(|a, b| a.path.cmp(&b.path));
        posts.dedup_by(|later, kept| {
            let same = later.path == kept.path;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        if self.list.is_empty() {
            self.seqs = vec![seq; posts.len()];
            self.list = posts;
            return;
        }
        let n = self.list.len() + posts.len();
        let (mut list, mut seqs) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut old = std::mem::take(&mut self.list)
            .into_iter()
            .zip(std::mem::take(&mut self.seqs))
            .peekable();
        let mut new = posts.into_iter().map(|p| (p, seq)).peekable();
        loop {
            let next = match (old.peek(), new.peek()) {
                (Some(a), Some(b)) => match a.0.path.cmp(&b.0.path) {
                    std::cmp::Ordering::Less => old.next(),
                    std::cmp::Ordering::Greater => new.next(),
                    std::cmp::Ordering::Equal => {
                        old.next();
                        new.next()
                    }
                },
                (Some(_), None) => old.next(),
                (None, _) => new.next(),
            };
            let Some((p, s)) = next else {
                break;
            };
            list.push(p);
            seqs.push(s);
        }
        self.list = list;
        self.seqs = seqs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(path: &str, n: u8) -> PostEntry {
        PostEntry {
            path: RelPath::parse(path).expect("a valid path"),
            post: Post::File {
                sha256: crate::id::BlobId([n; 32]),
                stat: None,
            },
        }
    }

    fn seen(p: &Posts) -> Vec<(String, u64, u8)> {
        p.iter()
            .map(|(path, seq, post)| {
                let Post::File { sha256, .. } = post else {
                    panic!("as recorded")
                };
                (path.to_string(), seq, sha256.0[0])
            })
            .collect()
    }

    #[test]
    fn the_latest_post_image_of_each_path_stands_in_path_order() {
        let mut p = Posts::default();
        p.insert_all(1, vec![post("m", 1), post("c", 1), post("m", 2)]);
        assert_eq!(
            seen(&p),
            [("c".into(), 1, 1), ("m".into(), 1, 2)],
            "of a path listed twice in one record the later stands"
        );
        p.insert_all(2, vec![post("c", 3)]);
        p.insert_all(3, vec![post("z", 4), post("a", 4), post("m", 5)]);
        p.insert_all(4, vec![post("b", 6)]);
        assert_eq!(
            seen(&p),
            [
                ("a".into(), 3, 4),
                ("b".into(), 4, 6),
                ("c".into(), 2, 3),
                ("m".into(), 3, 5),
                ("z".into(), 3, 4),
            ]
        );
        let m = RelPath::parse("m").expect("valid");
        assert_eq!(p.get(&m).map(|(seq, _)| seq), Some(3));
        assert!(!p.contains_key(&RelPath::parse("n").expect("valid")));
        assert_eq!(p.keys().count(), p.len());
    }

    #[test]
    fn a_list_out_of_order_is_not_taken_as_sorted() {
        let entry = |path: &str| PostEntry {
            path: RelPath::parse(path).expect("valid"),
            post: Post::Absent,
        };
        let sorted = |list: Vec<PostEntry>| Posts::from_sorted(list, vec![1, 1]).is_some();
        assert!(sorted(vec![entry("a"), entry("b")]));
        assert!(!sorted(vec![entry("b"), entry("a")]));
        assert!(!sorted(vec![entry("a"), entry("a")]));
        assert!(Posts::from_sorted(vec![entry("a")], vec![]).is_none());
    }
}
