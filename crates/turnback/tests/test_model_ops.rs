//! The store against an in-memory model over random sequences that mix the
//! agent's actions with the user's and with crashes: writes through the
//! store, captures followed by the agent's own write, delete, mkdir or
//! symlink, the user's later edit of a file the turn changed (a conflict),
//! rewinds of a random live turn, undo (repeatable), gc with a random
//! `keep_turns`, reopening, and a crash in the middle of a capture (a
//! temporary pack and a torn final log line left behind) followed by a
//! reopen.
//!
//! The model keeps the folder, the live turns (each with the folder as it
//! was before it) and the stack of rewinds in effect (each with the folder
//! before and after it and the turns it ended). After every step the real
//! folder must equal the model's, the live turns must be the model's, and
//! the log must parse with no torn line once a mutation has run.
//!
//! Cases: 32 (CI), 400 with `TURNBACK_LONG=1`, or `PROPTEST_CASES`.

use std::os::unix::fs::PermissionsExt;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use turnback::log::{self, Op, Record};
use turnback::{GcOptions, RewindOptions, Store, TurnId};

use crate::common::{Project, TestResult, Tree, diff, write_under};

/// Files, none the parent of another; and directories the agent makes.
const PATHS: &[&str] = &["a", "b", "d/c", "d/e/f"];
const DIRS: &[&str] = &["m", "d/n"];

#[derive(Debug, Clone)]
enum Step {
    NewTurn,
    Write {
        path: usize,
        bytes: Vec<u8>,
    },
    CaptureThenWrite {
        path: usize,
        bytes: Vec<u8>,
        exec: bool,
    },
    CaptureThenDelete {
        path: usize,
    },
    CaptureThenMkdir {
        dir: usize,
    },
    CaptureThenSymlink {
        path: usize,
        to: usize,
    },
    /// The user edits a file the newest live turn captured, after it.
    UserEdit {
        pick: Index,
        bytes: Vec<u8>,
    },
    Rewind {
        pick: Index,
    },
    Undo,
    Gc {
        keep: usize,
    },
    Reopen,
    CrashMidCapture {
        path: usize,
    },
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![b'x', b'y', b'\n']), 0..10)
}

fn step() -> impl Strategy<Value = Step> {
    let path = 0..PATHS.len();
    prop_oneof![
        2 => Just(Step::NewTurn),
        4 => (path.clone(), bytes()).prop_map(|(path, bytes)| Step::Write { path, bytes }),
        3 => (path.clone(), bytes(), any::<bool>())
            .prop_map(|(path, bytes, exec)| Step::CaptureThenWrite { path, bytes, exec }),
        1 => path.clone().prop_map(|path| Step::CaptureThenDelete { path }),
        1 => (0..DIRS.len()).prop_map(|dir| Step::CaptureThenMkdir { dir }),
        1 => (path.clone(), path.clone()).prop_map(|(path, to)| Step::CaptureThenSymlink { path, to }),
        2 => (any::<Index>(), bytes()).prop_map(|(pick, bytes)| Step::UserEdit { pick, bytes }),
        3 => any::<Index>().prop_map(|pick| Step::Rewind { pick }),
        3 => Just(Step::Undo),
        1 => (1usize..4).prop_map(|keep| Step::Gc { keep }),
        1 => Just(Step::Reopen),
        1 => path.prop_map(|path| Step::CrashMidCapture { path }),
    ]
}

/// A live turn: its id, creation order, the folder before it, and the
/// paths it captured. `before` is `None` once an undo changed paths after
/// the turn began: an undo is not a turn, so rewinding the turn does not
/// reverse it, and the folder the rewind gives is not the one before the
/// turn.
#[derive(Debug, Clone)]
struct LiveTurn {
    id: TurnId,
    order: u32,
    before: Option<Tree>,
    paths: Vec<String>,
}

/// A rewind in effect.
#[derive(Debug, Clone)]
struct Applied {
    /// Creation order among all rewinds (gc keeps the newest).
    order: u32,
    /// Turns made before it.
    turns_made: u32,
    before: Tree,
    after: Tree,
    ended: Vec<LiveTurn>,
}

struct Run {
    p: Project,
    store: Store,
    live: Vec<LiveTurn>,
    open_turn: bool,
    next_turn: u32,
    /// Rewinds in effect, oldest first.
    done: Vec<Applied>,
    /// Rewinds ever made and undone ones: for gc's choice of what it keeps.
    ops_made: u32,
    undone_orders: Vec<u32>,
    /// A torn line was left by a simulated crash and no mutation ran since.
    torn: bool,
    /// Whether the current step called a mutating store method.
    mutated: bool,
}

fn folder(p: &Project) -> TestResult<Tree> {
    p.snapshot()
}

impl Run {
    fn current_turn(&mut self) -> TestResult<TurnId> {
        if !self.open_turn || self.live.is_empty() {
            self.next_turn += 1;
            self.live.push(LiveTurn {
                id: TurnId::new(format!("t{}", self.next_turn))?,
                order: self.next_turn,
                before: Some(folder(&self.p)?),
                paths: Vec::new(),
            });
            self.open_turn = true;
        }
        Ok(self.live.last().ok_or("a turn")?.id.clone())
    }

    fn note(&mut self, path: &str) {
        if let Some(t) = self.live.last_mut() {
            t.paths.push(path.to_owned());
        }
    }

    /// Clears whatever stands at `rel` (file, link, or a directory tree).
    fn clear(&self, rel: &str) -> TestResult {
        let at = self.p.path(rel);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&at)?,
            Ok(_) => std::fs::remove_file(&at)?,
            Err(_) => {}
        }
        Ok(())
    }

    /// Whether a write to `rel` would go through a link (the model does not
    /// follow links: such steps are skipped) or a file stands where one of
    /// its directories would go.
    fn blocked(&self, rel: &str) -> bool {
        let mut cur = self.p.root.clone();
        let parts: Vec<&str> = rel.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            cur = cur.join(part);
            match std::fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_symlink() => return true,
                Ok(m) if i + 1 < parts.len() && !m.is_dir() => return true,
                Ok(m) if i + 1 == parts.len() && m.is_dir() => return true,
                _ => {}
            }
        }
        false
    }

    fn step(&mut self, step: &Step) -> TestResult {
        self.mutated = false;
        match step {
            Step::NewTurn => self.open_turn = false,
            Step::Write { path, bytes } => {
                let rel = PATHS[*path];
                if self.blocked(rel) {
                    return Ok(());
                }
                let t = self.current_turn()?;
                self.store.write(&t, None, rel, bytes)?;
                self.mutated = true;
                self.note(rel);
            }
            Step::CaptureThenWrite { path, bytes, exec } => {
                let rel = PATHS[*path];
                if self.blocked(rel) {
                    return Ok(());
                }
                let t = self.current_turn()?;
                self.store.capture(&t, None, rel)?;
                self.mutated = true;
                self.note(rel);
                self.clear(rel)?;
                write_under(&self.p.root, rel, bytes)?;
                let mode = if *exec { 0o755 } else { 0o644 };
                std::fs::set_permissions(self.p.path(rel), std::fs::Permissions::from_mode(mode))?;
            }
            Step::CaptureThenDelete { path } => {
                let rel = PATHS[*path];
                if self.blocked(rel) {
                    return Ok(());
                }
                let t = self.current_turn()?;
                self.store.capture(&t, None, rel)?;
                self.mutated = true;
                self.note(rel);
                self.clear(rel)?;
            }
            Step::CaptureThenMkdir { dir } => {
                let dir = DIRS[*dir];
                let inside = format!("{dir}/made.txt");
                if self.p.exists(dir) || self.blocked(&inside) {
                    return Ok(());
                }
                // The agent is about to make `dir` and a file in it.
                let t = self.current_turn()?;
                self.store.capture(&t, None, &inside)?;
                self.mutated = true;
                self.note(&inside);
                write_under(&self.p.root, &inside, b"made\n")?;
            }
            Step::CaptureThenSymlink { path, to } => {
                let (rel, to) = (PATHS[*path], PATHS[*to]);
                if self.blocked(rel) {
                    return Ok(());
                }
                let t = self.current_turn()?;
                self.store.capture(&t, None, rel)?;
                self.mutated = true;
                self.note(rel);
                self.clear(rel)?;
                let at = self.p.path(rel);
                if let Some(parent) = at.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let target = format!("{}{to}", "../".repeat(rel.matches('/').count()));
                std::os::unix::fs::symlink(target, at)?;
            }
            Step::UserEdit { pick, bytes } => {
                let Some(t) = self.live.last() else {
                    return Ok(());
                };
                let files: Vec<&String> = t
                    .paths
                    .iter()
                    .filter(|p| PATHS.contains(&p.as_str()))
                    .collect();
                if files.is_empty() {
                    return Ok(());
                }
                let rel = files[pick.index(files.len())].clone();
                if self.blocked(&rel) {
                    return Ok(());
                }
                write_under(&self.p.root, &rel, bytes)?;
            }
            Step::Rewind { pick } => {
                if self.live.is_empty() {
                    return Ok(());
                }
                let k = pick.index(self.live.len());
                let before_op = folder(&self.p)?;
                let target = self.live[k].clone();
                let report = self.store.rewind(&target.id, &RewindOptions::default())?;
                self.mutated = true;
                if !report.complete() {
                    return Err(
                        format!("rewind of {} incomplete: {:?}", target.id, report.failed).into(),
                    );
                }
                let got = folder(&self.p)?;
                if let Some(want) = &target.before
                    && &got != want
                {
                    return Err(format!(
                        "rewind of {}: not the folder before it:\n{}",
                        target.id,
                        diff(want, &got)
                    )
                    .into());
                }
                let ended = self.live.split_off(k);
                self.ops_made += 1;
                // A new rewind clears what was undone (redo is not modelled).
                self.undone_orders.clear();
                self.done.push(Applied {
                    order: self.ops_made,
                    turns_made: self.next_turn,
                    before: before_op,
                    after: got,
                    ended,
                });
                self.open_turn = false;
            }
            Step::Undo => {
                let Some(top) = self.done.last().cloned() else {
                    let r = self.store.undo();
                    if r.is_ok() {
                        return Err("undo with no rewind in effect succeeded".into());
                    }
                    return Ok(());
                };
                // Exact only when nothing changed since the rewind.
                if folder(&self.p)? != top.after {
                    return Ok(());
                }
                let report = self.store.undo()?;
                self.mutated = true;
                if !report.complete() {
                    return Err(format!("undo incomplete: {:?}", report.failed).into());
                }
                let got = folder(&self.p)?;
                if got != top.before {
                    return Err(format!(
                        "undo: not the folder before the rewind:\n{}",
                        diff(&top.before, &got)
                    )
                    .into());
                }
                self.done.pop();
                self.undone_orders.push(top.order);
                for t in &mut self.live {
                    if t.order > top.turns_made {
                        t.before = None;
                    }
                }
                self.live.extend(top.ended);
                self.live.sort_by_key(|t| t.order);
                self.open_turn = false;
            }
            Step::Gc { keep } => {
                self.store.gc(&GcOptions {
                    keep_turns: Some(*keep),
                    ..GcOptions::default()
                })?;
                // A gc in a project with no store yet makes none.
                self.mutated = self.store.has_store();
                // Live turns: the newest `keep`. Rewinds: the newest `keep`
                // of all ever made, and the undone ones.
                let n = self.live.len();
                self.live.drain(..n.saturating_sub(*keep));
                let first_kept = (self.ops_made as usize).saturating_sub(*keep) as u32;
                let undone = self.undone_orders.clone();
                self.done
                    .retain(|a| a.order > first_kept || undone.contains(&a.order));
            }
            Step::Reopen => self.store = Store::open(&self.p.root)?,
            Step::CrashMidCapture { path } => {
                // What a capture killed between its pack and its record
                // leaves: a temporary pack and half a record.
                // Temporary packs are written in the store directory.
                let Some(store) = crate::common::store_dir_if_any(&self.p.root) else {
                    return Ok(());
                };
                let packs = store.join("packs");
                if !packs.exists() {
                    return Ok(());
                }
                std::fs::write(
                    store.join(".pack.turnback-tmp-999999999-0"),
                    b"TBPACK1\npartial",
                )?;
                let records = log::parse(&std::fs::read(self.p.log_path())?, 1);
                let seq = records.lines.len() as u64 + 1000;
                let rec = Record {
                    seq,
                    at: 1,
                    op: Op::Capture {
                        turn: TurnId::new("crashed")?,
                        label: None,
                        pack: None,
                        blobs: vec![],
                        files: vec![turnback::FileEntry {
                            path: turnback::RelPath::parse(PATHS[*path])
                                .map_err(|e| e.to_string())?,
                            pre: turnback::Pre::Absent,
                        }],
                        posts: vec![],
                        shared_with: vec![],
                    },
                };
                let line = log::encode(&rec);
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(self.p.log_path())?;
                std::io::Write::write_all(&mut f, &line[..line.len() / 2])?;
                self.store = Store::open(&self.p.root)?;
                if !self.store.warnings().iter().any(|w| w.contains("torn")) {
                    return Err(format!(
                        "a torn final line went unreported: {:?}",
                        self.store.warnings()
                    )
                    .into());
                }
                self.torn = true;
            }
        }
        Ok(())
    }
}

/// Every line parses, none is torn, sequence numbers increase (gc keeps
/// them, so they need not start at 1).
fn log_is_clean(p: &Project) -> TestResult {
    let parsed = log::parse(&std::fs::read(p.log_path())?, 1);
    if let Some((line, len)) = parsed.torn {
        return Err(format!("line {line} is torn ({len} bytes)").into());
    }
    let mut last = 0;
    for (line, rec) in parsed.lines {
        let rec = rec.map_err(|e| format!("line {line}: {e}"))?;
        if rec.seq <= last {
            return Err(format!("line {line}: seq {} after {last}", rec.seq).into());
        }
        last = rec.seq;
    }
    Ok(())
}

fn run_case(steps: &[Step]) -> TestResult {
    let p = Project::new()?;
    write_under(&p.root, "a", b"a0\n")?;
    write_under(&p.root, "d/c", b"c0\n")?;
    let store = p.open()?;
    let mut run = Run {
        p,
        store,
        live: Vec::new(),
        open_turn: false,
        next_turn: 0,
        done: Vec::new(),
        ops_made: 0,
        undone_orders: Vec::new(),
        torn: false,
        mutated: false,
    };
    for (i, step) in steps.iter().enumerate() {
        run.step(step)
            .map_err(|e| format!("step {i} ({step:?}): {e}"))?;
        let ids: Vec<String> = run
            .store
            .turns()?
            .iter()
            .map(|t| t.id.to_string())
            .collect();
        let want: Vec<String> = run.live.iter().map(|t| t.id.to_string()).collect();
        if ids != want {
            return Err(format!(
                "after step {i} ({step:?}) the live turns are {ids:?}, not {want:?}"
            )
            .into());
        }
        if run.mutated {
            // The mutation cut the torn line and swept temporary packs.
            run.torn = false;
            let store = crate::common::store_dir_if_any(&run.p.root).ok_or("a store")?;
            for dir in [store.clone(), store.join("packs")] {
                for e in std::fs::read_dir(dir)? {
                    let name = e?.file_name().to_string_lossy().into_owned();
                    if name.contains(".turnback-tmp-") {
                        return Err(format!(
                            "after step {i} ({step:?}) a temporary pack survived: {name}"
                        )
                        .into());
                    }
                }
            }
        }
        if run.p.log_path().exists() && !run.torn {
            log_is_clean(&run.p).map_err(|e| format!("after step {i} ({step:?}): {e}"))?;
        }
    }
    Ok(())
}

#[test]
fn store_matches_model_with_undo_gc_conflicts_and_crashes() -> TestResult {
    let mut config = Config {
        source_file: Some(file!()),
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = if std::env::var("TURNBACK_LONG").is_ok_and(|v| v == "1") {
            400
        } else {
            32
        };
    }
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    runner
        .run(&prop::collection::vec(step(), 1..40), |steps| {
            run_case(&steps).map_err(|e| TestCaseError::fail(e.to_string()))
        })
        .map_err(|e| e.to_string())?;
    println!("model-based (undo, gc, conflicts, crashes): {cases} cases of up to 40 steps");
    Ok(())
}
