//! Integration tests of the `turnback` binary: each test runs the real
//! executable with a cleared environment (PATH only) in its own temporary
//! folder, and checks its output (human and `--json`), its exit code and the
//! files it leaves.

#[path = "cli/common.rs"]
mod common;

#[path = "cli/bad_input.rs"]
mod bad_input;
#[path = "cli/concurrency.rs"]
mod concurrency;
#[path = "cli/daily.rs"]
mod daily;
// The demo compares with git, which the Windows run (under Wine) lacks.
#[cfg(unix)]
#[path = "cli/demo.rs"]
mod demo;
// Unix only: modes beyond the read-only bit, FIFOs, sockets, other users.
#[cfg(unix)]
#[path = "cli/dirs_special.rs"]
mod dirs_special;
#[path = "cli/exact_rewinds.rs"]
mod exact_rewinds;
#[path = "cli/foreign_names.rs"]
mod foreign_names;
#[path = "cli/gc_store.rs"]
mod gc_store;
#[path = "cli/help.rs"]
mod help;
#[path = "cli/json_doc.rs"]
mod json_doc;
#[path = "cli/list_show_diff.rs"]
mod list_show_diff;
#[path = "cli/long_ops.rs"]
mod long_ops;
#[path = "cli/path_rewinds.rs"]
mod path_rewinds;
#[path = "cli/rewind.rs"]
mod rewind;
#[path = "cli/root.rs"]
mod root;
// Unix only: `sh -c` scripts under `exec`, names that are not UTF-8.
#[cfg(unix)]
#[path = "cli/scan.rs"]
mod scan;
#[path = "cli/session.rs"]
mod session;
#[path = "cli/store_files.rs"]
mod store_files;
// Unix only: tmux drives the binary in a real terminal.
#[cfg(unix)]
#[path = "cli/terminal.rs"]
mod terminal;
#[path = "cli/write_capture.rs"]
mod write_capture;
