//! The turn picker: `turnback rewind`, `revert` and `show` with no turn, on
//! a terminal, list the live turns newest first (id, local time, file
//! count, label) above the selected turn's changes (`A` created, `M`
//! modified, `D` deleted, one path a line, as `git show --name-status`).
//! Up/Down or k/j move, PageUp/PageDown and Home/End jump, Enter picks, q,
//! Esc or Ctrl-C cancel. The list is drawn with ratatui on the alternate
//! screen, so the terminal is left as it was once a turn is picked.
//!
//! For rewind and revert the turn picked is then shown as `--dry-run`
//! shows it, and a `[y/N]` question read as one key: only `y` runs the
//! operation. A cancel, in the list or at the question, is not an error:
//! the command prints "nothing changed" and exits 0, as `git add -p` does
//! when told `q`; it has changed nothing.
//!
//! With standard input or output not a terminal a missing turn is a usage
//! error (exit 2), as it always was: scripts never wait on a picker.

use std::io::{IsTerminal, Write};
use std::path::Path;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, List, ListItem, ListState, Paragraph};
use turnback::{Post, Pre, Turn, TurnId};

/// Whether the picker may open: standard input and output are a terminal.
pub fn available() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Prints the usage error of `command` run with no turn where the picker
/// cannot open (no terminal, or `--json`: output for a program), as clap
/// prints a missing argument; returns its exit code.
pub fn missing_turn(command: &str, json: bool) -> u8 {
    if json {
        let msg = serde_json::json!({
            "error": format!("`turnback {command}` needs a turn with --json (the picker opens only without it, on a terminal); `turnback list` names the turns")
        });
        // Nowhere to report a failure to print the error; the usage error
        // follows on stderr.
        let _ = outln!("{msg}");
    }
    let mut cli = <crate::Cli as clap::CommandFactory>::command();
    cli.build();
    let message = "the following required arguments were not provided:\n  <TURN>\n\n\
                   (with no turn, the turn picker opens, but only without --json and when \
                   standard input and output are a terminal; `turnback list` names the turns)";
    let kind = clap::error::ErrorKind::MissingRequiredArgument;
    let err = match cli.find_subcommand_mut(command) {
        Some(sub) => sub.error(kind, message),
        None => cli.error(kind, message),
    };
    // Nowhere to report a failure to print the usage error.
    let _ = err.print();
    2
}

/// One change of a turn, for the picker's preview.
pub struct Change {
    /// `A` created, `M` modified, `D` deleted (as git marks them).
    pub mark: char,
    /// The path, relative to the root.
    pub path: String,
}

/// What `turn` did to each path it captured, from its records: a path
/// whose pre-image is absent was created; one whose recorded post-image
/// (what the turn left) is absent was deleted; any other was modified. A
/// turn not sealed yet (the newest) has no post-image: the path as it is
/// now under `root` stands for it.
pub fn changes(root: &Path, turn: &Turn) -> Vec<Change> {
    turn.files
        .iter()
        .map(|c| {
            let path = &c.entry.path;
            let gone = match turn.post(path) {
                Some((_, post)) => matches!(post, Post::Absent),
                None => std::fs::symlink_metadata(root.join(path.as_path())).is_err(),
            };
            let mark = match (&c.entry.pre, gone) {
                (Pre::Absent, _) => 'A',
                (_, true) => 'D',
                _ => 'M',
            };
            Change {
                mark,
                path: path.to_string(),
            }
        })
        .collect()
}

/// A turn's start as the local time, with its zone's abbreviation.
pub fn local_time(ns: u64) -> String {
    match jiff::Timestamp::from_nanosecond(i128::from(ns)) {
        Ok(t) => t
            .to_zoned_datetime(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        Err(_) => crate::commands::list::format_time(ns) + " UTC",
    }
}

/// Restores the terminal (raw mode off, main screen back) when dropped,
/// however the picker ends.
struct Screen;

impl Drop for Screen {
    fn drop(&mut self) {
        // Nothing more can be done for a terminal that will not restore.
        let _ = ratatui::try_restore();
    }
}

/// Lets the user pick one of `turns` (oldest first, as
/// [`turnback::Store::turns`] gives them; listed newest first); `None` when
/// cancelled. `title` names what the pick is for ("rewind").
pub fn pick(root: &Path, turns: &[&Turn], title: &str) -> anyhow::Result<Option<TurnId>> {
    let newest_first: Vec<&Turn> = turns.iter().rev().copied().collect();
    if newest_first.is_empty() {
        return Ok(None);
    }
    let id_width = newest_first
        .iter()
        .map(|t| t.id.as_str().chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    let items: Vec<ListItem> = newest_first
        .iter()
        .map(|t| {
            ListItem::new(format!(
                "{:<id_width$}  {}  {:>5} file(s)  {}",
                t.id.as_str(),
                local_time(t.started_at),
                t.files.len(),
                t.label.as_deref().unwrap_or("")
            ))
        })
        .collect();
    // Built once, drawn by reference on every key: a store may hold
    // thousands of turns.
    let list = List::new(items)
        .block(Block::bordered().title(format!(
            " turnback {title}: pick a turn ({} live, newest first) ",
            newest_first.len()
        )))
        .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut previews: Vec<Option<Vec<Change>>> = newest_first.iter().map(|_| None).collect();
    let mut state = ListState::default().with_selected(Some(0));
    let mut terminal = ratatui::try_init()?;
    let _screen = Screen;
    let mut page = 10usize;
    loop {
        let at = state.selected().unwrap_or(0).min(newest_first.len() - 1);
        let turn = newest_first[at];
        let preview = previews[at].get_or_insert_with(|| changes(root, turn));
        terminal.draw(|frame| {
            // The list as tall as its turns, up to half the screen; the
            // preview takes the rest.
            let rows = u16::try_from(newest_first.len() + 2).unwrap_or(u16::MAX);
            let [list_area, preview_area, help_area] = Layout::vertical([
                Constraint::Length(rows.min(frame.area().height / 2).max(3)),
                Constraint::Min(3),
                Constraint::Length(1),
            ])
            .areas(frame.area());
            page = usize::from(list_area.height.saturating_sub(2)).max(1);
            frame.render_stateful_widget(&list, list_area, &mut state);
            let room = usize::from(preview_area.height.saturating_sub(2));
            let mut lines: Vec<Line> = Vec::with_capacity(room);
            let shown = if preview.len() > room {
                room.saturating_sub(1)
            } else {
                preview.len()
            };
            for c in &preview[..shown] {
                lines.push(Line::raw(format!("{}  {}", c.mark, c.path)));
            }
            if shown < preview.len() {
                lines.push(Line::raw(format!("... and {} more", preview.len() - shown)));
            }
            let counts = |m: char| preview.iter().filter(|c| c.mark == m).count();
            let summary = format!(
                " turn {}: {} created, {} modified, {} deleted ",
                turn.id,
                counts('A'),
                counts('M'),
                counts('D')
            );
            frame.render_widget(
                Paragraph::new(lines).block(Block::bordered().title(summary)),
                preview_area,
            );
            frame.render_widget(
                Paragraph::new("Up/Down or k/j: move   Enter: pick   q or Esc: cancel"),
                help_area,
            );
        })?;
        let Event::Key(key) = event::read()? else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        let last = newest_first.len() - 1;
        let to = match key.code {
            KeyCode::Enter => return Ok(Some(turn.id.clone())),
            KeyCode::Char('q') | KeyCode::Esc => return Ok(None),
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                return Ok(None);
            }
            KeyCode::Down | KeyCode::Char('j') => (at + 1).min(last),
            KeyCode::Up | KeyCode::Char('k') => at.saturating_sub(1),
            KeyCode::PageDown => (at + page).min(last),
            KeyCode::PageUp => at.saturating_sub(page),
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => last,
            _ => at,
        };
        state.select(Some(to));
    }
}

/// Asks `question` with `[y/N]` and reads one key: only `y` (or `Y`) says
/// yes; anything else, Enter and Esc included, says no.
pub fn confirm(question: &str) -> anyhow::Result<bool> {
    out!("{question} [y/N] ")?;
    std::io::stdout().flush()?;
    ratatui::crossterm::terminal::enable_raw_mode()?;
    let key = loop {
        match event::read() {
            Ok(Event::Key(k)) if k.kind == KeyEventKind::Press => break Ok(k),
            Ok(_) => continue,
            Err(e) => break Err(e),
        }
    };
    ratatui::crossterm::terminal::disable_raw_mode()?;
    let yes = matches!(key?.code, KeyCode::Char('y') | KeyCode::Char('Y'));
    outln!("{}", if yes { "y" } else { "n" })?;
    Ok(yes)
}

/// What the picker's commands print when it was cancelled (exit 0).
pub fn cancelled() -> anyhow::Result<u8> {
    outln!("nothing changed")?;
    Ok(0)
}
