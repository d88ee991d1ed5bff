//! What a command's turn records of a path the before-snapshot saw (see
//! [`crate::tree`]): its pre-image, and whether a path there before and
//! after changed in a way a rewind must undo.
//!
//! A directory is recorded with its mode (`Pre::Dir`) when the command
//! removed it (empty or not), replaced it, or changed its mode, so a rewind
//! makes it again or gives it its mode back. A FIFO is recorded with its
//! mode (see [`crate::special`]); a socket or device is not restorable and
//! stays a "not captured" path. Special files the command created did not
//! exist before: a rewind removes them.

use crate::id::BlobId;
use crate::log::Pre;
use crate::special;
use crate::tree::{Entry, Excluded, Kind};

/// The pre-image of the path of `old`, a before-snapshot entry, or why
/// there is none. `blob_size` says whether the store holds a blob, and its
/// size.
pub(crate) fn pre_of(
    old: &Entry,
    blob_size: impl Fn(&BlobId) -> Option<u64>,
) -> Result<Pre, String> {
    match &old.kind {
        Kind::File { blob } => match blob_size(blob) {
            Some(size) => Ok(Pre::File {
                blob: *blob,
                size,
                mode: old.stat.perm(),
                link: None,
            }),
            None => Err("its bytes from before are not in the store".into()),
        },
        Kind::Symlink { target } => Ok(Pre::Symlink {
            target: target.clone(),
        }),
        Kind::Dir => Ok(Pre::Dir {
            mode: old.stat.perm(),
        }),
        Kind::Excluded(Excluded::Special) => match special::pre_of_special(old.stat.mode) {
            Pre::Skipped { reason, .. } => Err(reason),
            pre => Ok(pre),
        },
        Kind::Excluded(x) => Err(x.describe()),
    }
}

/// For a path there before (`old`) and after (`new`): `Some(changed)` when
/// it is a directory or a FIFO before, whose recorded state is its type
/// and mode; `None` to let the caller compare the rest.
pub(crate) fn kept_changed(old: &Entry, new: &Entry) -> Option<bool> {
    match (&old.kind, &new.kind) {
        (Kind::Dir, Kind::Dir) => Some(old.stat.perm() != new.stat.perm()),
        (Kind::Dir, Kind::Excluded(Excluded::Special)) => Some(true),
        (Kind::Excluded(Excluded::Special), _) if special::is_fifo(old.stat.mode) => {
            Some(old.stat.mode != new.stat.mode)
        }
        _ => None,
    }
}

/// Whether `new`, a path the command created, is a FIFO, socket or device:
/// not covered by the snapshot, but a rewind removes it like any path that
/// did not exist before.
pub(crate) fn created_special(new: &Entry) -> bool {
    matches!(new.kind, Kind::Excluded(Excluded::Special))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Stat;

    fn entry(kind: Kind, mode: u32) -> Entry {
        Entry {
            path: b"p".to_vec(),
            stat: Stat {
                mode,
                ..Stat::default()
            },
            kind,
        }
    }

    #[test]
    fn a_directory_changes_by_its_mode_and_a_fifo_by_type_and_mode() {
        let dir = |m: u32| entry(Kind::Dir, 0o040000 | m);
        let special = |m: u32| entry(Kind::Excluded(Excluded::Special), m);
        assert_eq!(kept_changed(&dir(0o750), &dir(0o750)), Some(false));
        assert_eq!(kept_changed(&dir(0o750), &dir(0o700)), Some(true));
        assert_eq!(kept_changed(&dir(0o2775), &dir(0o775)), Some(true));
        assert_eq!(
            kept_changed(&special(0o010640), &special(0o010640)),
            Some(false)
        );
        assert_eq!(
            kept_changed(&special(0o010640), &special(0o010600)),
            Some(true)
        );
        assert_eq!(
            kept_changed(&special(0o010640), &special(0o140640)),
            Some(true)
        );
        assert_eq!(kept_changed(&special(0o140640), &special(0o140640)), None);
        assert_eq!(
            pre_of(&dir(0o1777), |_| None),
            Ok(Pre::Dir { mode: 0o1777 })
        );
        assert_eq!(
            pre_of(&special(0o010640), |_| None),
            Ok(Pre::Fifo { mode: 0o640 })
        );
        assert!(pre_of(&special(0o140755), |_| None).is_err());
    }
}
