//! File operations for agents' tools beyond [`Store::write`]: creating a
//! directory, deleting a file, moving a file. Each one takes the store lock,
//! captures every path it is about to change in the turn (so a rewind undoes
//! it exactly), and only then acts, through directory handles reached from
//! the root without following symlinks (see [`crate::fsx`]).
//!
//! - [`Store::create_dir`] records each directory it creates as absent: a
//!   rewind removes it again once it is empty.
//! - [`Store::remove_file`] records the file's (or symlink's) bytes first: a
//!   rewind writes it back.
//! - [`Store::rename`] records the source as it was and the destination as
//!   absent; it never replaces an existing destination (`RENAME_NOREPLACE`).
//!   Directories are not moved: a rewind could not recreate the empty
//!   directories and modes inside one, so the call is refused instead.

use crate::sys::OwnedFd;
use std::io;
use std::path::Path;

use crate::sys::fs::RenameFlags;

use crate::error::{Error, IoResultExt, Result};
use crate::fsx::{self, Node};
use crate::id::TurnId;
use crate::log::{Post, PostEntry};
use crate::path::RelPath;
use crate::store::{CaptureReport, Store};

impl Store {
    /// Creates the store directory (with its `.gitignore`) if it does not
    /// exist yet, as the first capture would; for set-up commands, so that
    /// root discovery from a subdirectory finds the project.
    pub fn ensure_created(&mut self) -> Result<()> {
        let _guard = self.begin_mutation()?;
        Ok(())
    }

    /// Creates the directory `path` and any missing parents (like `mkdir -p`),
    /// recording each one it creates in `turn`. An existing directory is
    /// success with nothing recorded.
    pub fn create_dir(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        path: impl AsRef<Path>,
    ) -> Result<CaptureReport> {
        let rel = self.resolve(path.as_ref(), true)?;
        let _guard = self.begin_mutation()?;
        // Refuse before recording anything if a non-directory is in the way.
        let mut dir = self.dup_root()?;
        let mut missing_from = None;
        let chain: Vec<RelPath> = rel
            .ancestors()
            .into_iter()
            .chain(std::iter::once(rel.clone()))
            .collect();
        for (k, p) in chain.iter().enumerate() {
            let shown = self.place.root.join(p.as_path());
            match fsx::node_at(&dir, p.file_name()).ctx("look at", &shown)? {
                Node::Dir => {
                    dir = fsx::open_subdir(&dir, p.file_name())
                        .ctx("open directory", &shown)?
                        .ok_or_else(|| vanished(&shown))?;
                }
                Node::Missing => {
                    missing_from = Some(k);
                    break;
                }
                _ => {
                    return Err(Error::Io {
                        op: "create directory",
                        path: shown,
                        source: io::Error::new(
                            io::ErrorKind::AlreadyExists,
                            "a file stands there; delete or move it first",
                        ),
                    });
                }
            }
        }
        let Some(k) = missing_from else {
            return Ok(CaptureReport {
                turn: Some(turn.clone()),
                ..CaptureReport::default()
            });
        };
        let posts = chain[k..]
            .iter()
            .map(|p| PostEntry {
                path: p.clone(),
                post: Post::Dir,
            })
            .collect();
        let report = self.capture_locked(turn, label, std::slice::from_ref(&rel), posts)?;
        for p in &chain[k..] {
            let shown = self.place.root.join(p.as_path());
            let (d, _) = fsx::ensure_subdir(&dir, p.file_name()).ctx("create directory", &shown)?;
            fsx::fsync(&dir).ctx("fsync", shown.parent().unwrap_or(&self.place.root))?;
            dir = d;
        }
        Ok(report)
    }

    /// Deletes the file or symlink `path` (never what a symlink points to),
    /// after recording it in `turn`. A missing path or a directory is an
    /// error and changes nothing.
    pub fn remove_file(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        path: impl AsRef<Path>,
    ) -> Result<CaptureReport> {
        let rel = self.resolve(path.as_ref(), false)?;
        let _guard = self.begin_mutation()?;
        let shown = self.place.root.join(rel.as_path());
        let dir = self
            .parent_dir(&rel, false)?
            .ok_or_else(|| not_found(&shown))?;
        match fsx::node_at(&dir, rel.file_name()).ctx("look at", &shown)? {
            Node::Missing => return Err(not_found(&shown)),
            Node::Dir => {
                return Err(Error::IsDirectory {
                    path: rel.to_string(),
                });
            }
            _ => {}
        }
        let posts = vec![PostEntry {
            path: rel.clone(),
            post: Post::Absent,
        }];
        let report = self.capture_locked(turn, label, std::slice::from_ref(&rel), posts)?;
        fsx::unlink(&dir, rel.file_name()).ctx("delete", &shown)?;
        fsx::fsync(&dir).ctx("fsync", shown.parent().unwrap_or(&self.place.root))?;
        Ok(report)
    }

    /// Moves the file or symlink `from` to `to`, creating `to`'s missing
    /// parent directories, after recording both in `turn`. Fails, changing
    /// nothing, when `to` exists or `from` is a directory.
    pub fn rename(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        from: impl AsRef<Path>,
        to: impl AsRef<Path>,
    ) -> Result<CaptureReport> {
        let src = self.resolve(from.as_ref(), false)?;
        let dst = self.resolve(to.as_ref(), false)?;
        let _guard = self.begin_mutation()?;
        let src_shown = self.place.root.join(src.as_path());
        let dst_shown = self.place.root.join(dst.as_path());
        if src == dst || dst.starts_with(&src) {
            return Err(Error::Io {
                op: "move",
                path: src_shown,
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the destination {dst} is the source itself"),
                ),
            });
        }
        let src_dir = self
            .parent_dir(&src, false)?
            .ok_or_else(|| not_found(&src_shown))?;
        match fsx::node_at(&src_dir, src.file_name()).ctx("look at", &src_shown)? {
            Node::Missing => return Err(not_found(&src_shown)),
            Node::Dir => {
                return Err(Error::Io {
                    op: "move",
                    path: src_shown,
                    source: io::Error::other(
                        "it is a directory; moving directories is not supported, move the files in it one by one",
                    ),
                });
            }
            _ => {}
        }
        if let Some(d) = self.parent_dir(&dst, false)?
            && fsx::node_at(&d, dst.file_name()).ctx("look at", &dst_shown)? != Node::Missing
        {
            return Err(exists(&dst_shown));
        }
        // After the move the destination holds what the source holds now.
        let moved = self
            .hash_states(std::slice::from_ref(&src), false)?
            .into_iter()
            .map(|p| p.post)
            .next()
            .unwrap_or(Post::Other);
        let mut posts: Vec<PostEntry> = self
            .dirs_to_create(&dst)?
            .into_iter()
            .map(|path| PostEntry {
                path,
                post: Post::Dir,
            })
            .collect();
        posts.push(PostEntry {
            path: src.clone(),
            post: Post::Absent,
        });
        posts.push(PostEntry {
            path: dst.clone(),
            post: moved,
        });
        let report = self.capture_locked(turn, label, &[src.clone(), dst.clone()], posts)?;
        let dst_dir = self
            .parent_dir(&dst, true)?
            .ok_or_else(|| not_found(&dst_shown))?;
        match crate::sys::fs::renameat_with(
            &src_dir,
            src.file_name(),
            &dst_dir,
            dst.file_name(),
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {}
            Err(crate::sys::Errno::EXIST) => return Err(exists(&dst_shown)),
            Err(e) => return Err(e).ctx("move", &src_shown),
        }
        fsx::fsync(&dst_dir).ctx("fsync", dst_shown.parent().unwrap_or(&self.place.root))?;
        fsx::fsync(&src_dir).ctx("fsync", src_shown.parent().unwrap_or(&self.place.root))?;
        Ok(report)
    }

    fn dup_root(&self) -> Result<OwnedFd> {
        crate::sys::dup(&self.place.root_fd).ctx("open", &self.place.root)
    }

    /// The directory holding `rel`, reached from the root one component at
    /// a time without following symlinks; with `create`, missing ones are
    /// made. `None` when one is missing and `create` is false.
    fn parent_dir(&self, rel: &RelPath, create: bool) -> Result<Option<OwnedFd>> {
        let mut dir = self.dup_root()?;
        for anc in rel.ancestors() {
            let shown = self.place.root.join(anc.as_path());
            dir = if create {
                let (d, created) =
                    fsx::ensure_subdir(&dir, anc.file_name()).ctx("create directory", &shown)?;
                if created {
                    fsx::fsync(&dir).ctx("fsync", shown.parent().unwrap_or(&self.place.root))?;
                }
                d
            } else {
                match fsx::open_subdir(&dir, anc.file_name()).ctx("open directory", &shown)? {
                    Some(d) => d,
                    None => return Ok(None),
                }
            };
        }
        Ok(Some(dir))
    }
}

fn not_found(path: &Path) -> Error {
    Error::Io {
        op: "find",
        path: path.to_path_buf(),
        source: io::Error::from(io::ErrorKind::NotFound),
    }
}

fn exists(path: &Path) -> Error {
    Error::Io {
        op: "move onto",
        path: path.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the destination exists; delete it first or choose another name",
        ),
    }
}

fn vanished(path: &Path) -> Error {
    Error::Io {
        op: "open directory",
        path: path.to_path_buf(),
        source: io::Error::from(io::ErrorKind::NotFound),
    }
}

// Built on Unix modes, symlinks and inode numbers; the Windows run has
// the integration tests and the identity rules.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::rewind::RewindOptions;
    use std::fs;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn turn(s: &str) -> TurnId {
        TurnId::new(s).expect("valid turn id")
    }

    #[test]
    fn create_dir_is_undone_by_rewind_and_existing_dirs_are_left_alone() -> TestResult {
        let tmp = tempfile::tempdir()?;
        fs::create_dir(tmp.path().join("keep"))?;
        let mut store = Store::open(tmp.path())?;
        let t = turn("t1");
        let r = store.create_dir(&t, None, "keep")?;
        assert!(
            r.captured.is_empty(),
            "an existing directory records nothing"
        );
        let r = store.create_dir(&t, None, "keep/a/b")?;
        let paths: Vec<_> = r.captured.iter().map(|e| e.path.to_string()).collect();
        assert_eq!(paths, ["keep/a", "keep/a/b"]);
        assert!(tmp.path().join("keep/a/b").is_dir());
        let report = store.rewind(&t, &RewindOptions::default())?;
        assert!(report.complete(), "{:?}", report.failed);
        assert!(!tmp.path().join("keep/a").exists());
        assert!(tmp.path().join("keep").is_dir());
        Ok(())
    }

    #[test]
    fn create_dir_over_a_file_is_refused_and_records_nothing() -> TestResult {
        let tmp = tempfile::tempdir()?;
        fs::write(tmp.path().join("f"), "x")?;
        let mut store = Store::open(tmp.path())?;
        assert!(store.create_dir(&turn("t1"), None, "f/sub").is_err());
        assert!(store.create_dir(&turn("t1"), None, "f").is_err());
        assert!(store.turns()?.is_empty());
        assert_eq!(fs::read_to_string(tmp.path().join("f"))?, "x");
        Ok(())
    }

    #[test]
    fn remove_file_is_undone_by_rewind() -> TestResult {
        let tmp = tempfile::tempdir()?;
        fs::create_dir(tmp.path().join("d"))?;
        fs::write(tmp.path().join("d/f.txt"), "bytes\n")?;
        std::os::unix::fs::symlink("f.txt", tmp.path().join("d/link"))?;
        let mut store = Store::open(tmp.path())?;
        let t = turn("t1");
        store.remove_file(&t, None, "d/link")?;
        assert!(
            tmp.path().join("d/f.txt").exists(),
            "a symlink is removed, not its target"
        );
        store.remove_file(&t, None, "d/f.txt")?;
        assert!(!tmp.path().join("d/f.txt").exists());
        assert!(
            store.remove_file(&t, None, "d/f.txt").is_err(),
            "already gone"
        );
        assert!(store.remove_file(&t, None, "d").is_err(), "a directory");
        let report = store.rewind(&t, &RewindOptions::default())?;
        assert!(report.complete(), "{:?}", report.failed);
        assert_eq!(fs::read_to_string(tmp.path().join("d/f.txt"))?, "bytes\n");
        assert_eq!(
            fs::read_link(tmp.path().join("d/link"))?,
            Path::new("f.txt")
        );
        Ok(())
    }

    #[test]
    fn rename_is_undone_by_rewind_and_never_replaces() -> TestResult {
        let tmp = tempfile::tempdir()?;
        fs::write(tmp.path().join("a.txt"), "a\n")?;
        fs::write(tmp.path().join("b.txt"), "b\n")?;
        let mut store = Store::open(tmp.path())?;
        let t = turn("t1");
        assert!(store.rename(&t, None, "a.txt", "b.txt").is_err());
        assert_eq!(fs::read_to_string(tmp.path().join("b.txt"))?, "b\n");
        assert!(store.turns()?.is_empty(), "a refused move records nothing");
        store.rename(&t, None, "a.txt", "new/dir/a.txt")?;
        assert!(!tmp.path().join("a.txt").exists());
        assert_eq!(fs::read_to_string(tmp.path().join("new/dir/a.txt"))?, "a\n");
        fs::create_dir(tmp.path().join("sub"))?;
        assert!(
            store.rename(&t, None, "sub", "sub2").is_err(),
            "directories are refused"
        );
        let report = store.rewind(&t, &RewindOptions::default())?;
        assert!(report.complete(), "{:?}", report.failed);
        assert_eq!(fs::read_to_string(tmp.path().join("a.txt"))?, "a\n");
        assert!(!tmp.path().join("new").exists());
        Ok(())
    }

    #[test]
    fn ops_refuse_paths_outside_the_root() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let outside = tempfile::tempdir()?;
        fs::write(outside.path().join("x"), "x")?;
        fs::write(tmp.path().join("src.txt"), "s")?;
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out"))?;
        let mut store = Store::open(tmp.path())?;
        let t = turn("t1");
        for bad in ["../x", "out/x", ".git/x", ".turnback/x"] {
            assert!(store.remove_file(&t, None, bad).is_err(), "{bad}");
            assert!(
                store.create_dir(&t, None, format!("{bad}/d")).is_err(),
                "{bad}"
            );
            assert!(store.rename(&t, None, "src.txt", bad).is_err(), "{bad}");
        }
        assert!(
            store
                .remove_file(&t, None, outside.path().join("x"))
                .is_err()
        );
        assert!(store.turns()?.is_empty(), "nothing was recorded");
        assert!(tmp.path().join("src.txt").exists());
        assert!(outside.path().join("x").exists());
        assert!(!outside.path().join("d").exists());
        Ok(())
    }
}
