//! Fault injection against the real `turnback` binary: kills at every
//! system call, random kills, injected I/O errors, a full disk, and several
//! processes at once. Every test checks the store's promises with the one
//! checker in `reliability/harness.rs`. `TURNBACK_LONG=1` runs the long
//! mode (every crash point of every command, more iterations); counts are
//! printed by each test (`cargo test --test reliability -- --nocapture`).
//!
//! Linux only: strace fault injection, /proc, signals and the power-loss simulation.
#![cfg(target_os = "linux")]

#[path = "reliability/harness.rs"]
mod harness;
#[path = "reliability/scenarios.rs"]
mod scenarios;

#[path = "reliability/concurrency.rs"]
mod concurrency;
#[path = "reliability/crash_sweep.rs"]
mod crash_sweep;
#[path = "reliability/interrupted.rs"]
mod interrupted;
#[path = "reliability/io_errors.rs"]
mod io_errors;
#[path = "reliability/kill_soak.rs"]
mod kill_soak;
#[path = "reliability/powerloss.rs"]
mod powerloss;
