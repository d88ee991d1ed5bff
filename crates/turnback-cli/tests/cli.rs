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
#[path = "cli/demo.rs"]
mod demo;
#[path = "cli/dirs_special.rs"]
mod dirs_special;
#[path = "cli/exact_rewinds.rs"]
mod exact_rewinds;
#[path = "cli/list_show_diff.rs"]
mod list_show_diff;
#[path = "cli/rewind.rs"]
mod rewind;
#[path = "cli/root.rs"]
mod root;
#[path = "cli/scan.rs"]
mod scan;
#[path = "cli/store_files.rs"]
mod store_files;
#[path = "cli/write_capture.rs"]
mod write_capture;
