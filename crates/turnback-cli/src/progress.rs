//! The progress bar of a long scan: shown on a terminal only, and only once
//! the scan has run for half a second (a quick scan prints nothing).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const DELAY: Duration = Duration::from_millis(500);

/// A [`turnback::Progress`] drawn with indicatif on standard error.
pub struct Bar {
    bar: ProgressBar,
    start: Instant,
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
            enabled: std::io::stderr().is_terminal(),
            shown: AtomicBool::new(false),
            files_total: AtomicU64::new(0),
            files_done: AtomicU64::new(0),
        }
    }

    fn maybe_show(&self) {
        if self.enabled
            && self.start.elapsed() >= DELAY
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
}
