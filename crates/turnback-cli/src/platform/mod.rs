//! What the command does differently per platform: file modes, symlinks,
//! and a child command's signals and exit status (`turnback exec`). One
//! module per platform; the commands use these names only.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
