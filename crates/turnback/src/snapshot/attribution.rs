//! Which turns a scan's changes are recorded in, when shell commands of
//! several turns run at once in one folder.
//!
//! Every before half opens a *window* for its command (see
//! [`crate::exec_window`]) and every after half closes its own. A scan
//! compares the folder with the tree state, which the last half of any
//! command wrote; so each change it finds was made after that last scan
//! and before this one. Any command whose window is open now could have
//! made it, and no other command could: a window that closed since scanned
//! at its close, and one that opened since scanned at its start. Hence:
//!
//! - An after half records the changes in its own turn and in the turn of
//!   every other open window. With one window that is its own turn alone,
//!   as before; with several the change is *shared*: it is recorded in
//!   each of those turns (the capture record's `shared_with` names the
//!   others), so rewinding any of them brings the file back, and `show` and
//!   `rewind` say that another turn's command may have made it.
//! - A before half records the changes since the last scan in the turns of
//!   the windows open before its own (none: the changes are nobody's
//!   command's, and are not recorded, as before), then opens its window.
//! - Records for several turns are appended in the order their windows
//!   opened, so a turn that a shared change creates sorts before the turns
//!   of commands that started after its own: rewinding the later turn does
//!   not undo the earlier one. (A turn is still created by its first
//!   record, not by its before half: until its command's changes are
//!   recorded there is no turn to rewind, so every live turn rewinds
//!   exactly, also after a crash between the halves.)
//! - A change to a path that a file tool (`write`, `capture`, ...) captured
//!   in some turn after the last scan belongs to that turn: it is recorded
//!   in no other turn (the file tool's capture holds the pre-image).
//! - A window whose process (`turnback exec` runs both halves in one
//!   process and records its id) is gone was killed before its after
//!   half: the next half records the changes since the last scan in it as
//!   well, and closes it. A window without a process (`turnback snapshot`,
//!   hooks) is closed by the next before half of the same session (the
//!   agent session whose hooks opened it; none for `turnback snapshot`),
//!   which records the changes since the last scan in it (one command of a
//!   session at a time); another session's command may still run, so its
//!   window stays open and shares the changes. An after half that finds no
//!   window of its own takes over such windows of its session and records
//!   their changes in its turn.
//! - A session's next prompt closes the windows its hooks left open (an
//!   interrupted tool call gets no after event), recording what changed
//!   since the last scan in them. An after half of a command still running
//!   in the background records what changed so far and keeps its window
//!   open, so later changes are the command's too until its session's next
//!   event closes it.
//! - A rewind, revert, undo or redo first takes a *closing* half when a
//!   window is open: it records like a before half (every open window's
//!   turn gets the changes since the last scan; killed commands' windows
//!   and windows without a process are closed) and opens none. So a
//!   command killed between its halves, or a hook's before half whose
//!   after half never came, is in its turn before the operation plans:
//!   `rewind` of an earlier turn undoes it too, never skips it.

use std::collections::HashMap;

use crate::error::Result;
use crate::exec_window::Window;
use crate::id::TurnId;
use crate::index::{Index, Turn};
use crate::log::FileEntry;
use crate::path::RelPath;
use crate::snapshot::CapturedSince;
use crate::tree::Tree;

/// The half being taken.
pub(crate) struct Half<'a> {
    pub turn: &'a TurnId,
    pub label: Option<&'a str>,
    pub after: bool,
    /// A half that opens no window of its own and records like a before
    /// half, to close open windows (see [`Closing`]).
    pub closing: Option<Closing>,
    /// An after half whose command goes on running (a shell the agent
    /// started in the background): the changes so far are recorded and its
    /// window stays open, for the next event of its session to close.
    pub keep_open: bool,
    /// The process running both halves, if one does.
    pub pid: Option<u32>,
    /// The agent session whose hook takes the half, if one does.
    pub session: Option<&'a str>,
    pub last_seq: u64,
    pub stamp_ns: i64,
}

/// Which windows a closing half closes (besides those of killed commands,
/// which every half closes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closing {
    /// Every window without a process: before a rewind, revert, undo or
    /// redo, which must not plan around a command left half-recorded.
    All,
    /// The windows the half's session opened: its next prompt, whose
    /// tool calls begin only after the last prompt's are over.
    Session,
}

/// A turn the changes are recorded in, with the label to give it.
pub(crate) struct Owner {
    pub turn: TurnId,
    pub label: Option<String>,
    /// When its window opened (log sequence; `u64::MAX`: it has none).
    start: u64,
}

/// The outcome of [`plan`].
pub(crate) struct Plan {
    /// Where the changes since the last scan go (the caller's turn first
    /// on an after half); empty: nowhere.
    pub owners: Vec<Owner>,
    /// The windows open once this half is done.
    pub windows: Vec<Window>,
}

/// Decides where the changes since `base` go and which windows stay open.
/// `loaded` is `None` for a store from before windows were kept.
pub(crate) fn plan(
    half: &Half<'_>,
    base: Option<&Tree>,
    loaded: Option<Vec<Window>>,
    rewound: bool,
    warnings: &mut Vec<String>,
) -> Plan {
    let open = loaded.unwrap_or_else(|| legacy_window(base));
    let own_window = Window {
        turn: half.turn.clone(),
        pid: half.pid,
        session: half.session.map(str::to_owned),
        label: half.label.map(str::to_owned),
        start_seq: half.last_seq,
        start_ns: half.stamp_ns,
    };
    let mine = |w: &Window| {
        &w.turn == half.turn && w.pid == half.pid && w.session.as_deref() == half.session
    };
    let had_mine = open.iter().any(mine);
    let taken_over = half.after && !had_mine && half.pid.is_none();
    // A window without a process is one command of a session at a time
    // (hooks, `turnback snapshot`): the next before half of the same
    // session closes it. Another session's command may still be running.
    let ours = |w: &Window| w.pid.is_none() && w.session.as_deref() == half.session;
    let (ending, mut staying): (Vec<Window>, Vec<Window>) = open.into_iter().partition(|w| {
        w.dead()
            || match half.closing {
                Some(Closing::All) => w.pid.is_none(),
                Some(Closing::Session) => ours(w),
                None => (!half.after && ours(w)) || (taken_over && ours(w)),
            }
    });
    let mut owners: Vec<Owner> = Vec::new();
    let mut add = |turn: &TurnId, label: Option<&str>, start: u64| match owners
        .iter_mut()
        .find(|o| &o.turn == turn)
    {
        Some(o) => o.start = o.start.min(start),
        None => owners.push(Owner {
            turn: turn.clone(),
            label: label.map(str::to_owned),
            start,
        }),
    };
    if half.after {
        warn_after(half, had_mine, &ending, taken_over, rewound, warnings);
        let own_start = match staying.iter().position(mine) {
            Some(i) if half.keep_open => staying[i].start_seq,
            Some(i) => staying.remove(i).start_seq,
            None => u64::MAX,
        };
        add(half.turn, half.label, own_start);
        for w in staying
            .iter()
            .filter(|w| !mine(w))
            .chain(ending.iter().filter(|_| !taken_over))
        {
            add(&w.turn, w.label.as_deref(), w.start_seq);
        }
    } else if rewound {
        for w in &ending {
            warnings.push(format!(
                "the before-snapshot of turn {:?} was followed by a rewind, not by its after half; it is set aside",
                w.turn.as_str()
            ));
        }
    } else {
        for w in staying.iter().chain(&ending) {
            add(&w.turn, w.label.as_deref(), w.start_seq);
        }
        for w in &ending {
            warnings.push(format!(
                "the before-snapshot of turn {:?} never got its after half (was its command killed?); the changes since then are recorded in that turn",
                w.turn.as_str()
            ));
        }
    }
    if !half.after && half.closing.is_none() {
        staying.push(own_window);
    }
    owners.sort_by_key(|o| o.start);
    Plan {
        owners: if base.is_some() { owners } else { Vec::new() },
        windows: staying,
    }
}

/// The pending mark of a tree written before windows were kept.
fn legacy_window(base: Option<&Tree>) -> Vec<Window> {
    base.filter(|t| t.pending)
        .map(|t| Window {
            turn: t.turn.clone(),
            pid: None,
            session: None,
            label: None,
            start_seq: t.log_seq,
            start_ns: t.stamp_ns,
        })
        .into_iter()
        .collect()
}

fn warn_after(
    half: &Half<'_>,
    had_mine: bool,
    ending: &[Window],
    taken_over: bool,
    rewound: bool,
    warnings: &mut Vec<String>,
) {
    let turn = half.turn.as_str();
    if !had_mine && (!taken_over || ending.is_empty()) {
        warnings.push(format!(
            "no before-snapshot was pending: the changes since the last snapshot are recorded in turn {turn:?}"
        ));
    }
    for w in ending {
        if taken_over {
            if &w.turn != half.turn {
                warnings.push(format!(
                    "the pending before-snapshot was taken for turn {:?}; its changes are recorded in turn {turn:?}",
                    w.turn.as_str()
                ));
            }
        } else {
            warnings.push(format!(
                "the command of turn {:?} ended without its after half (was it killed?); the changes since the last snapshot are recorded in that turn too",
                w.turn.as_str()
            ));
        }
    }
    if rewound {
        warnings.push(
            "a rewind ran since the last snapshot: the paths it restored are recorded in this turn too"
                .into(),
        );
    }
}

/// The changes given to one turn.
pub(crate) struct Assigned {
    pub turn: TurnId,
    pub label: Option<String>,
    /// Pre-images to append to the turn.
    pub fresh: Vec<FileEntry>,
    /// Paths the turn had captured already (its earlier pre-image wins).
    pub already: Vec<RelPath>,
    /// The other turns the changes are recorded in too.
    pub shared_with: Vec<TurnId>,
}

/// Splits the pre-images of the changes since the last scan (whose tree
/// was written at log sequence `base_seq`) among `owners`; also returns
/// the changes left to the turn whose file tool captured them.
pub(crate) fn assign(
    owners: Vec<Owner>,
    files: Vec<FileEntry>,
    index: &Index,
    base_seq: u64,
) -> Result<(Vec<Assigned>, Vec<CapturedSince>)> {
    // A path a file tool touched since the scan: its capture (the first
    // write of the path in its turn) or the post-image a later write of
    // it recorded (its PostToolUse, or the capture of a write to a path
    // the turn had captured already: see `Store::capture_locked`).
    let mut by_tool: HashMap<&RelPath, &TurnId> = HashMap::new();
    for t in index.turns_captured_after(base_seq)? {
        for c in t.files.iter().filter(|c| c.seq > base_seq) {
            by_tool.entry(&c.entry.path).or_insert(&t.id);
        }
        for (path, _, _) in t.posts.iter().filter(|(_, seq, _)| *seq > base_seq) {
            by_tool.entry(path).or_insert(&t.id);
        }
    }
    let turns: Vec<TurnId> = owners.iter().map(|o| o.turn.clone()).collect();
    // Each owner's live turn, if it has one yet.
    let mut live: HashMap<&TurnId, &Turn> = HashMap::new();
    for (id, t) in turns.iter().zip(&owners) {
        if let Some(found) = index.turn(&t.turn)? {
            live.insert(id, found);
        }
    }
    // One owner (the common case) takes every pre-image: its list is made
    // to size, not doubled as it grows (100,000 entries are 8 MB).
    let room = if owners.len() == 1 { files.len() } else { 0 };
    let mut out: Vec<Assigned> = owners
        .into_iter()
        .map(|o| Assigned {
            shared_with: turns.iter().filter(|t| **t != o.turn).cloned().collect(),
            turn: o.turn,
            label: o.label,
            fresh: Vec::with_capacity(room),
            already: Vec::new(),
        })
        .collect();
    let mut elsewhere = Vec::new();
    for f in files {
        let tool = by_tool.get(&f.path).copied();
        if let Some(u) = tool
            && !turns.contains(u)
        {
            elsewhere.push(CapturedSince {
                path: f.path.to_string(),
                turn: u.clone(),
            });
            continue;
        }
        let takes = |a: &Assigned| tool.is_none_or(|u| *u == a.turn);
        let had = |a: &Assigned| {
            live.get(&a.turn)
                .is_some_and(|t| t.captured(&f.path).is_some())
        };
        // The last turn to take the pre-image gets it moved, the others a
        // copy.
        let last_fresh = out.iter().rposition(|a| takes(a) && !had(a));
        for (k, a) in out.iter_mut().enumerate() {
            if !takes(a) {
                continue;
            }
            if had(a) {
                a.already.push(f.path.clone());
            } else if Some(k) != last_fresh {
                a.fresh.push(f.clone());
            }
        }
        if let Some(k) = last_fresh {
            out[k].fresh.push(f);
        }
    }
    Ok((out, elsewhere))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn t(id: &str) -> TurnId {
        TurnId::new(id).expect("valid turn id")
    }

    fn base() -> Tree {
        Tree {
            stamp_ns: 1,
            log_seq: 5,
            turn: t("tA"),
            pending: true,
            entries: Vec::new(),
        }
    }

    #[cfg(unix)]
    fn window(turn: &str, pid: Option<u32>, start_seq: u64) -> Window {
        Window {
            turn: t(turn),
            pid,
            session: None,
            label: None,
            start_seq,
            start_ns: 1,
        }
    }

    fn half(turn: &TurnId, after: bool, pid: Option<u32>) -> Half<'_> {
        Half {
            turn,
            label: None,
            after,
            closing: None,
            keep_open: false,
            pid,
            session: None,
            last_seq: 9,
            stamp_ns: 2,
        }
    }

    fn turns(p: &Plan) -> Vec<&str> {
        p.owners.iter().map(|o| o.turn.as_str()).collect()
    }

    #[test]
    #[cfg(unix)] // spawns `sleep` and kills it with a signal
    fn a_running_command_shares_and_a_killed_one_is_closed() -> TestResult {
        let me = std::process::id();
        let mut child = std::process::Command::new("true").spawn()?;
        let gone = child.id();
        child.wait()?;
        let tb = t("tB");
        let mut w = Vec::new();
        // tB's after half while tA (this live process) still runs: shared,
        // tA's window stays open; the records go in the order the windows
        // opened.
        let open = vec![window("tA", Some(me), 3), window("tB", Some(me), 7)];
        let p = plan(
            &half(&tb, true, Some(me)),
            Some(&base()),
            Some(open),
            false,
            &mut w,
        );
        assert_eq!(turns(&p), ["tA", "tB"]);
        assert_eq!(p.windows, [window("tA", Some(me), 3)]);
        assert!(w.is_empty(), "{w:?}");
        // tC's before half after tA's process died: tA gets the changes
        // since the last scan and its window is closed; tC's opens.
        let tc = t("tC");
        let open = vec![window("tA", Some(gone), 3)];
        let p = plan(
            &half(&tc, false, Some(me)),
            Some(&base()),
            Some(open),
            false,
            &mut w,
        );
        assert_eq!(turns(&p), ["tA"]);
        assert_eq!(
            p.windows,
            [Window {
                start_ns: 2,
                ..window("tC", Some(me), 9)
            }]
        );
        assert!(
            w.iter().any(|m| m.contains("never got its after half")),
            "{w:?}"
        );
        Ok(())
    }

    #[test]
    fn without_a_windows_file_the_pending_mark_is_one_window_as_before() {
        let mut w = Vec::new();
        let tb = t("tB");
        // A before half: the pending command (no process known) is taken
        // as killed, its changes recorded in it.
        let p = plan(&half(&tb, false, None), Some(&base()), None, false, &mut w);
        assert_eq!(turns(&p), ["tA"]);
        assert_eq!(p.windows.len(), 1);
        // An after half of another turn takes it over.
        let p = plan(&half(&tb, true, None), Some(&base()), None, false, &mut w);
        assert_eq!(turns(&p), ["tB"]);
        assert!(p.windows.is_empty());
        assert!(
            w.iter().any(|m| m.contains("was taken for turn \"tA\"")),
            "{w:?}"
        );
    }
}
