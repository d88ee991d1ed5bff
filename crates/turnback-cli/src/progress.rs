//! The progress bar of a long scan, rewind, revert, undo or redo: shown on
//! a terminal only (standard error), and only once the work has run for
//! half a second (a quick one prints nothing). `TURNBACK_PROGRESS_DELAY_MS`
//! sets that delay in milliseconds, for tests (`0`: drawn at once).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const DELAY: Duration = Duration::from_millis(500);

/// The delay before a bar is drawn: [`DELAY`], or the test's.
fn delay() -> Duration {
    std::env::var("TURNBACK_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(DELAY, Duration::from_millis)
}

/// A [`turnback::Progress`] drawn with indicatif on standard error.
pub struct Bar {
    bar: ProgressBar,
    start: Instant,
    delay: Duration,
    enabled: bool,
    shown: AtomicBool,
    files_total: AtomicU64,
    files_done: AtomicU64,
}

impl Bar {
    /// A bar that draws only if standard error is a terminal.
    pub fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        Bar {
            bar,
            start: Instant::now(),
            delay: delay(),
            enabled: std::io::stderr().is_terminal(),
            shown: AtomicBool::new(false),
            files_total: AtomicU64::new(0),
            files_done: AtomicU64::new(0),
        }
    }

    /// A bar whose rewind, revert, undo or redo (see
    /// [`turnback::Progress::changing`]) is said as `doing` ("rewinding").
    pub fn doing(doing: &str) -> Bar {
        let bar = Bar::new();
        bar.bar.set_message(doing.to_string());
        bar
    }

    fn maybe_show(&self) {
        if self.enabled
            && self.start.elapsed() >= self.delay
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
}

impl turnback::Progress for Bar {
    fn walking(&self, entries: u64) {
        self.maybe_show();
        self.bar
            .set_message(format!("scanning: {entries} paths found"));
        self.bar.tick();
    }

    fn hashing(&self, files: u64, bytes: u64) {
        self.files_total.store(files, Ordering::Relaxed);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} {wide_bar} {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, about {eta} left)",
        ) {
            self.bar.set_style(style);
        }
        self.bar.set_length(bytes);
        self.bar.set_position(0);
        self.bar.set_message(format!("reading 0/{files} files"));
        self.maybe_show();
    }

    fn hashed(&self, files: u64, bytes: u64) {
        let done = self.files_done.fetch_add(files, Ordering::Relaxed) + files;
        let total = self.files_total.load(Ordering::Relaxed);
        self.bar
            .set_message(format!("reading {done}/{total} files"));
        self.bar.inc(bytes);
        self.maybe_show();
    }

    fn done(&self) {
        self.bar.finish_and_clear();
    }

    fn changing(&self, paths: u64) {
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} {wide_bar} {pos}/{len} paths ({per_sec}, about {eta} left)",
        ) {
            self.bar.set_style(style);
        }
        self.bar.set_length(paths);
        self.bar.set_position(0);
        self.maybe_show();
    }

    fn changed(&self, paths: u64) {
        self.bar.inc(paths);
        self.maybe_show();
    }
}
