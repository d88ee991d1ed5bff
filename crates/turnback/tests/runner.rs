//! The library's integration tests: one binary, one module per area, each
//! test in its own temporary project folder.

mod common;
mod safety_common;
mod test_capture;
mod test_concurrency;
mod test_containment;
mod test_dirs_special;
mod test_fuzz_corpus;
mod test_git;
mod test_hostile_paths;
mod test_hostile_store;
mod test_links_sparse;
mod test_log;
mod test_model;
mod test_model_ops;
mod test_rewind;
mod test_safety;
mod test_store;
