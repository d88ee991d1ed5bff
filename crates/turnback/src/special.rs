//! FIFOs, sockets and devices: which of them a pre-image can hold.
//!
//! A FIFO is only a name and a mode, so it is recorded (`Pre::Fifo`) and a
//! rewind makes a new one. A socket exists only while a process listens on
//! it and a device node needs privileges to make: neither can be made again
//! by a rewind, so both are recorded as not saved, with the reason, and a
//! rewind reports them as not restored.

use crate::sys::fs::FileType;

use crate::log::Pre;

/// The pre-image of a path that is neither a regular file, a directory nor a
/// symlink, from its `st_mode`.
pub(crate) fn pre_of_special(st_mode: u32) -> Pre {
    match crate::sys::file_type(st_mode) {
        FileType::Fifo => Pre::Fifo {
            mode: st_mode & 0o7777,
        },
        FileType::Socket => Pre::Skipped {
            reason: "a socket: only a live process can make one, so a rewind cannot restore it"
                .into(),
            size: 0,
        },
        _ => Pre::Skipped {
            reason: "a device node: a rewind does not make device nodes".into(),
            size: 0,
        },
    }
}

/// Whether `st_mode` is a FIFO's.
pub(crate) fn is_fifo(st_mode: u32) -> bool {
    crate::sys::file_type(st_mode) == FileType::Fifo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_are_recorded_with_their_mode_and_sockets_are_not() {
        assert_eq!(pre_of_special(0o010640), Pre::Fifo { mode: 0o640 });
        assert!(matches!(
            pre_of_special(0o140755),
            Pre::Skipped { reason, .. } if reason.contains("socket")
        ));
        assert!(matches!(
            pre_of_special(0o020600),
            Pre::Skipped { reason, .. } if reason.contains("device")
        ));
        assert!(is_fifo(0o010600) && !is_fifo(0o100600));
    }
}
