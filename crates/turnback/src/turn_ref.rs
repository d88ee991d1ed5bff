//! Turn references: the ways a person names a turn on the command line,
//! resolved once here for every command that takes one.
//!
//! - A live turn's full id (`claude-8c35adc1-3`).
//! - `@`: the newest live turn; `@~N`: the Nth live turn before it (`@~0`
//!   is `@`, and `@~` is `@~1`, as `HEAD~` is `HEAD~1` in git).
//! - Any prefix of a live turn's id that begins no other live turn's id
//!   (`claude-8c35adc1-1` when no other id starts with it).
//!
//! The order, first match wins:
//! 1. A live turn whose id is the text exactly: every turn can always be
//!    named by its full id, even one that is a prefix of another's
//!    (`t1` beside `t10`) or is itself spelled `@`.
//! 2. `@` and `@~N`, counted among live turns, newest first.
//! 3. A prefix of exactly one live turn's id. A prefix of several is an
//!    error listing them ([`Error::AmbiguousTurn`]), never a guess.
//!
//! Only live turns are resolved: they are the ones a rewind, revert, show
//! or diff acts on. Text that matches none of them and is a well-formed
//! id is handed on as that id, for the command to look up in its own
//! time: a turn whose only record is a shell command's before half (its
//! window still open) is recorded by the rewind that takes the lock, and
//! a rewound turn's id gets the error saying so ([`Error::AlreadyRewound`]),
//! an unknown one [`Error::UnknownTurn`]. The turn of the open command
//! window is an exact id too, before any prefix. `@~N` past the history,
//! and text no id can be, are [`Error::NoSuchTurn`], which says why.

use crate::error::{Error, Result};
use crate::id::TurnId;
use crate::store::Store;

/// How many candidates an ambiguous prefix's error names.
const CANDIDATES_SHOWN: usize = 10;

/// What a reference resolves to among a list of ids (see [`resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The place of the one id it names in the list.
    Found(usize),
    /// `@~N` with N at or beyond the number of ids.
    Beyond {
        /// The N asked for.
        back: usize,
    },
    /// A prefix of several ids: their places, newest (last in the list)
    /// first.
    Ambiguous(Vec<usize>),
    /// Nothing matches.
    NotFound,
}

/// How many turns before the newest `text` names, when it is `@` or
/// `@~N` (a count too large for `usize` is `usize::MAX`, beyond any
/// history).
pub fn newest_offset(text: &str) -> Option<usize> {
    let rest = text.strip_prefix('@')?;
    if rest.is_empty() {
        return Some(0);
    }
    let digits = rest.strip_prefix('~')?;
    if digits.is_empty() {
        return Some(1);
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().unwrap_or(usize::MAX))
}

/// Resolves `text` among `ids`, oldest first (the order of turns): an
/// exact id, then `@`/`@~N`, then a unique prefix (see the module docs).
/// An id that appears twice resolves to its newest place.
pub fn resolve(ids: &[&str], text: &str) -> Resolution {
    if let Some(i) = ids.iter().rposition(|id| *id == text) {
        return Resolution::Found(i);
    }
    if let Some(back) = newest_offset(text) {
        return match ids.len().checked_sub(1).and_then(|n| n.checked_sub(back)) {
            Some(i) => Resolution::Found(i),
            None => Resolution::Beyond { back },
        };
    }
    if text.is_empty() {
        return Resolution::NotFound;
    }
    let matches: Vec<usize> = (0..ids.len())
        .rev()
        .filter(|&i| ids[i].starts_with(text))
        .collect();
    match matches.len() {
        0 => Resolution::NotFound,
        1 => Resolution::Found(matches[0]),
        _ => Resolution::Ambiguous(matches),
    }
}

/// For each of `ids`, the length in bytes of its shortest prefix that
/// [`resolve`] takes to it as a prefix: the shortest that begins no other
/// id and is not spelled as `@` or `@~N` (those name places, not ids), or
/// the whole id (an exact id always wins). Ids that appear twice get their
/// whole length. Found from the neighbours in sorted order, so a list of
/// 10,000 ids costs one sort.
pub fn unique_prefix_lens(ids: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_unstable_by(|&a, &b| ids[a].cmp(ids[b]));
    let common = |a: &str, b: &str| -> usize {
        a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
    };
    let mut out = vec![0; ids.len()];
    for (k, &i) in order.iter().enumerate() {
        let id = ids[i];
        let before = k.checked_sub(1).map_or(0, |p| common(id, ids[order[p]]));
        let after = order.get(k + 1).map_or(0, |&n| common(id, ids[n]));
        let shared = before.max(after);
        // One character past what another id shares, on a character
        // boundary (a common byte run may end inside a character).
        let mut end = shared.min(id.len());
        while !id.is_char_boundary(end) {
            end -= 1;
        }
        let mut chars = id[end..].chars();
        end += chars.next().map_or(0, char::len_utf8);
        while end < id.len() && newest_offset(&id[..end]).is_some() {
            end += chars.next().map_or(0, char::len_utf8);
        }
        out[i] = end;
    }
    out
}

impl Store {
    /// The ids of the live turns, oldest first. A turn of the index
    /// checkpoint is not decoded for it: its id is read from the start of
    /// its bytes (checked in full when the turn itself is used).
    pub fn live_ids(&self) -> Result<Vec<TurnId>> {
        self.index.live_ids()
    }

    /// The live turn `text` names: its full id, `@`, `@~N`, or a unique
    /// prefix of its id (see [`crate::turn_ref`]).
    pub fn resolve_turn(&self, text: &str) -> Result<TurnId> {
        // A full id is found by its hash, without listing the turns; the
        // turn of an open command window (not in the log yet) is one too.
        if let Ok(id) = TurnId::new(text)
            && (self.index.turn(&id)?.is_some() || self.pending_turn()?.as_ref() == Some(&id))
        {
            return Ok(id);
        }
        let live = self.live_ids()?;
        let ids: Vec<&str> = live.iter().map(TurnId::as_str).collect();
        match resolve(&ids, text) {
            Resolution::Found(i) => Ok(live[i].clone()),
            Resolution::Beyond { back } => Err(Error::NoSuchTurn {
                given: text.to_owned(),
                reason: match ids.len() {
                    0 => "no turn is live".to_owned(),
                    1 => format!(
                        "it goes back {back} turn(s) from the newest, and only one turn is live (@)"
                    ),
                    n => format!(
                        "it goes back {back} turn(s) from the newest, and only {n} turns are live (@ to @~{})",
                        n - 1
                    ),
                },
            }),
            Resolution::Ambiguous(places) => Err(Error::AmbiguousTurn {
                given: text.to_owned(),
                count: places.len(),
                candidates: places
                    .iter()
                    .take(CANDIDATES_SHOWN)
                    .map(|&i| ids[i].to_owned())
                    .collect(),
            }),
            Resolution::NotFound => TurnId::new(text).map_err(|_| Error::NoSuchTurn {
                given: text.to_owned(),
                reason: "no turn id can be spelled so".to_owned(),
            }),
        }
    }

    /// The turn of the open command window, if one is open (the tree's
    /// header says so; see [`crate::tree`]).
    fn pending_turn(&self) -> Result<Option<TurnId>> {
        match &self.place.dirs {
            Some(dirs) => crate::tree::pending_turn(&dirs.store, &self.place.store_path),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_and_steps_back_are_parsed() {
        assert_eq!(newest_offset("@"), Some(0));
        assert_eq!(newest_offset("@~"), Some(1));
        assert_eq!(newest_offset("@~0"), Some(0));
        assert_eq!(newest_offset("@~12"), Some(12));
        assert_eq!(newest_offset("@~99999999999999999999999"), Some(usize::MAX));
        assert_eq!(newest_offset("@~x"), None);
        assert_eq!(newest_offset("@@"), None);
        assert_eq!(newest_offset("t@"), None);
    }

    #[test]
    fn exact_ids_win_then_steps_back_then_unique_prefixes() {
        let ids = ["t1", "t10", "abc", "abd", "@"];
        assert_eq!(resolve(&ids, "t1"), Resolution::Found(0));
        assert_eq!(resolve(&ids, "t10"), Resolution::Found(1));
        assert_eq!(resolve(&ids, "t"), Resolution::Ambiguous(vec![1, 0]));
        assert_eq!(resolve(&ids, "ab"), Resolution::Ambiguous(vec![3, 2]));
        assert_eq!(resolve(&ids, "abc"), Resolution::Found(2));
        // A turn spelled `@` is named by it; `@~0` still means the newest.
        assert_eq!(resolve(&ids, "@"), Resolution::Found(4));
        assert_eq!(resolve(&ids, "@~0"), Resolution::Found(4));
        assert_eq!(resolve(&ids, "@~4"), Resolution::Found(0));
        assert_eq!(resolve(&ids, "@~5"), Resolution::Beyond { back: 5 });
        assert_eq!(resolve(&ids, "x"), Resolution::NotFound);
        assert_eq!(resolve(&[], "@"), Resolution::Beyond { back: 0 });
    }

    #[test]
    fn unique_prefixes_stop_one_character_past_what_others_share() {
        let ids = ["t1", "t10", "abc", "abd", "x", "éa", "éb", "@~12b", "@~2"];
        let lens = unique_prefix_lens(&ids);
        let prefixes: Vec<&str> = ids.iter().zip(&lens).map(|(id, &n)| &id[..n]).collect();
        // `@~1` would name a place: `@~12b` is marked past its digits.
        assert_eq!(
            prefixes,
            ["t1", "t10", "abc", "abd", "x", "éa", "éb", "@~12b", "@~2"]
        );
        let lens = unique_prefix_lens(&["alpha", "beta"]);
        assert_eq!(lens, [1, 1]);
        // Each prefix resolves to its own id.
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(resolve(&ids, &id[..lens_of(&ids)[i]]), Resolution::Found(i));
        }
    }

    fn lens_of(ids: &[&str]) -> Vec<usize> {
        unique_prefix_lens(ids)
    }
}
