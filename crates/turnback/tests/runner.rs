//! The library's integration tests: one binary, one module per area, each
//! test in its own temporary project folder.

// Helpers and fixtures whose only users are tests limited to Linux or Unix.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

mod common;
mod safety_common;
#[cfg(unix)]
mod test_aside;
mod test_capture;
mod test_concurrency;
#[cfg(unix)]
mod test_containment;
#[cfg(unix)]
mod test_dirs_special;
mod test_fuzz_corpus;
#[cfg(unix)]
mod test_git;
#[cfg(unix)]
mod test_hostile_paths;
#[cfg(unix)]
mod test_hostile_store;
#[cfg(unix)]
mod test_links_sparse;
mod test_log;
#[cfg(unix)]
mod test_model;
#[cfg(unix)]
mod test_model_ops;
mod test_rewind;
mod test_safety;
mod test_store;
#[cfg(target_os = "linux")]
mod test_trash;
mod test_turn_ref;
