//! For unit tests: a project whose store is in a data directory beside it,
//! on the same file system, as a store is by default: its operations keep
//! the files they replace aside (`aside.rs`) and use the trash.

use std::fs;
use std::io;
use std::path::PathBuf;

use crate::error::Result;
use crate::store::{Options, Store};

/// `<tmp>/p`, the project, and `<tmp>/data`, its data directory.
pub(crate) struct Beside {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
}

impl Beside {
    /// A project holding `files` (path, contents), with no store yet.
    pub(crate) fn new(files: &[(&str, &str)]) -> io::Result<Beside> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("p");
        fs::create_dir(&root)?;
        for (path, contents) in files {
            fs::write(root.join(path), contents)?;
        }
        Ok(Beside { tmp, root })
    }

    /// Opens (or makes) the project's store in the data directory.
    pub(crate) fn open(&self) -> Result<Store> {
        Store::open_with(
            &self.root,
            Options {
                data_dir: Some(self.tmp.path().join("data")),
                ..Default::default()
            },
        )
    }
}
