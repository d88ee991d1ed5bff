//! Helpers shared by the safety tests: temp projects and folder snapshots.

use std::collections::BTreeMap;
use std::path::Path;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// What a folder holds, `.turnback/` left out: path -> (kind+bytes, mode).
pub type Tree = BTreeMap<String, (Vec<u8>, u32)>;

/// Reads every file, symlink, directory and special file below `root`
/// (not `.turnback`).
pub fn tree(root: &Path) -> Tree {
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Tree) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("readable test dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let rel = p
            .strip_prefix(root)
            .expect("below root")
            .to_string_lossy()
            .into_owned();
        if rel == ".turnback" {
            continue;
        }
        let meta = std::fs::symlink_metadata(&p).expect("stat");
        let mode = crate::common::mode_of(&meta);
        if meta.file_type().is_symlink() {
            let t = std::fs::read_link(&p).expect("link");
            out.insert(rel, (format!("link:{}", t.display()).into_bytes(), 0));
        } else if meta.is_dir() {
            out.insert(rel, (b"dir".to_vec(), mode));
            walk(root, &p, out);
        } else if let Some(kind) = special_kind(&meta) {
            // Never opened: reading a FIFO would wait for a writer.
            out.insert(rel, (kind.as_bytes().to_vec(), mode));
        } else {
            out.insert(rel, (std::fs::read(&p).expect("read"), mode));
        }
    }
}

/// "fifo", "socket" or "device" for a special file; `None` otherwise.
#[cfg(unix)]
pub fn special_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    if ft.is_fifo() {
        Some("fifo")
    } else if ft.is_socket() {
        Some("socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        Some("device")
    } else {
        None
    }
}

pub fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(p, bytes).expect("write");
}

pub fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).expect("read")
}

/// Windows has no FIFOs, sockets or device nodes in a folder.
#[cfg(windows)]
pub fn special_kind(_meta: &std::fs::Metadata) -> Option<&'static str> {
    None
}
