//! Turn references against a reference model: random sets of turn ids
//! (from a small alphabet, so prefixes collide, with `@`, `~` and digits
//! among the characters) resolve every reference exactly as a naive
//! reading of the rules does, in the pure function and through a store,
//! and each id's marked unique prefix is the shortest that names it.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use turnback::turn_ref::{Resolution, resolve, unique_prefix_lens};
use turnback::{Error, TurnId};

use crate::common::{Project, TestResult};

/// What a reference names among `ids` (oldest first, no repeats), read
/// naively from the rules: an exact id; `@`, `@~`, `@~N`; a prefix of
/// exactly one id.
fn model(ids: &[String], text: &str) -> Resolution {
    if let Some(i) = ids.iter().position(|id| id == text) {
        return Resolution::Found(i);
    }
    let back = match text {
        "@" => Some(0usize),
        "@~" => Some(1),
        _ => text
            .strip_prefix("@~")
            .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
            .map(|d| d.parse().unwrap_or(usize::MAX)),
    };
    if let Some(back) = back {
        return if back < ids.len() {
            Resolution::Found(ids.len() - 1 - back)
        } else {
            Resolution::Beyond { back }
        };
    }
    let mut hits: Vec<usize> = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        if !text.is_empty() && id.starts_with(text) {
            hits.push(i);
        }
    }
    hits.reverse();
    match hits.len() {
        0 => Resolution::NotFound,
        1 => Resolution::Found(hits[0]),
        _ => Resolution::Ambiguous(hits),
    }
}

/// Whether `text` is spelled as a place (`@`, `@~`, `@~N`), not an id.
fn is_place(text: &str) -> bool {
    text == "@"
        || text
            .strip_prefix("@~")
            .is_some_and(|d| d.chars().all(|c| c.is_ascii_digit()))
}

/// The length in bytes of the shortest prefix of `ids[i]` the model takes
/// to it as an id (a prefix spelled as a place names a place, whatever
/// it names today).
fn shortest(ids: &[String], i: usize) -> usize {
    let id = &ids[i];
    let mut end = 0;
    for (k, c) in id.char_indices() {
        end = k + c.len_utf8();
        let p = &id[..end];
        if (!is_place(p) || p == id) && model(ids, p) == Resolution::Found(i) {
            return end;
        }
    }
    end
}

fn ids_strategy(max: usize) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("[ab@~1é]{1,4}", 0..max).prop_map(|mut v| {
        // Live turns have distinct ids; the order stays the drawn one.
        let mut seen = std::collections::HashSet::new();
        v.retain(|id| seen.insert(id.clone()));
        v
    })
}

/// References to try: every prefix of every id, and a few more.
fn references(ids: &[String], extra: &[String]) -> Vec<String> {
    let mut refs: Vec<String> = extra.to_vec();
    refs.extend(["@", "@~", "@~0", "@~1", "@~3", "@~12", "b", "a"].map(String::from));
    for id in ids {
        for (k, c) in id.char_indices() {
            refs.push(id[..k + c.len_utf8()].to_owned());
        }
    }
    refs
}

#[test]
fn references_resolve_as_the_model_reads_the_rules() -> TestResult {
    let mut runner = TestRunner::new(Config {
        cases: 500,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        ids_strategy(12),
        proptest::collection::vec("[ab@~1é]{0,5}", 0..6),
    );
    runner.run(&strategy, |(ids, extra)| {
        let view: Vec<&str> = ids.iter().map(String::as_str).collect();
        for text in references(&ids, &extra) {
            prop_assert_eq!(
                resolve(&view, &text),
                model(&ids, &text),
                "{:?} in {:?}",
                text,
                ids
            );
        }
        let lens = unique_prefix_lens(&view);
        for i in 0..ids.len() {
            prop_assert_eq!(lens[i], shortest(&ids, i), "{:?} in {:?}", ids[i], ids);
        }
        Ok(())
    })?;
    Ok(())
}

#[test]
fn a_store_resolves_references_as_the_model_does() -> TestResult {
    let mut runner = TestRunner::new(Config {
        cases: 12,
        failure_persistence: None,
        ..Config::default()
    });
    runner.run(&ids_strategy(7), |ids| {
        let p = Project::new().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let check = || -> TestResult {
            let mut store = p.open()?;
            for (i, id) in ids.iter().enumerate() {
                store.write(&TurnId::new(id.as_str())?, None, format!("f{i}.txt"), b"x")?;
            }
            assert_eq!(
                store
                    .live_ids()?
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>(),
                ids
            );
            for text in references(&ids, &[String::new(), "zz".into()]) {
                let got = store.resolve_turn(&text);
                match model(&ids, &text) {
                    Resolution::Found(i) => assert_eq!(got?.as_str(), ids[i], "{text:?}"),
                    Resolution::Ambiguous(hits) => match got {
                        Err(Error::AmbiguousTurn {
                            count, candidates, ..
                        }) => {
                            assert_eq!(count, hits.len(), "{text:?}");
                            let want: Vec<&str> = hits.iter().map(|&i| ids[i].as_str()).collect();
                            assert_eq!(candidates, want, "{text:?}");
                        }
                        other => panic!("{text:?} in {ids:?}: {other:?}"),
                    },
                    Resolution::Beyond { .. } => {
                        assert!(
                            matches!(got, Err(Error::NoSuchTurn { .. })),
                            "{text:?} in {ids:?}: {got:?}"
                        );
                    }
                    // Handed on as an id, for the command to look up.
                    Resolution::NotFound => match TurnId::new(text.as_str()) {
                        Ok(id) => {
                            assert_eq!(got?, id, "{text:?} in {ids:?}");
                            assert!(matches!(store.turn(&id), Err(Error::UnknownTurn { .. })));
                        }
                        Err(_) => assert!(
                            matches!(got, Err(Error::NoSuchTurn { .. })),
                            "{text:?} in {ids:?}: {got:?}"
                        ),
                    },
                }
            }
            Ok(())
        };
        check().map_err(|e| TestCaseError::fail(e.to_string()))
    })?;
    Ok(())
}
