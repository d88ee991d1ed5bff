//! Power-loss simulation, driven by a trace of the real binary (the method
//! of ALICE, Pillai et al., OSDI 2014).
//!
//! 1. **Record.** A command runs once in a copy of its scenario's lab under
//!    `strace -f -y -xx`, tracing every system call but reads. Each call that
//!    names a path or descriptor in the lab is parsed strictly: a call that
//!    the model does not know fails the test with its line, so a new kind of
//!    write in the store cannot escape the model.
//! 2. **Model.** The calls are resolved into operations on an in-memory file
//!    system that keeps, per inode, the durable bytes and mode and the
//!    operations not yet synced, and per directory the durable entries and
//!    the entry operations (create, rename, unlink, mkdir, symlink) not yet
//!    synced. `fdatasync` makes an inode's data and size durable, `fsync`
//!    also its mode; `fsync` of a directory makes its entry operations
//!    durable; `syncfs` makes everything durable. The model starts as the lab
//!    was before the command, all durable, and after the replay it must equal
//!    the real lab the run left (a check of the parser and the model).
//! 3. **Crash states.** After every operation (the last one is the exit, the
//!    point where the command has answered), crash states are made: only the
//!    durable state; everything (what a killed process leaves); and K random
//!    ones, in which every pending operation is kept or dropped on its own, a
//!    write may be torn at 512-byte or 4 KiB blocks, each block new, old,
//!    zeros or garbage (so an append can grow the size without its data),
//!    and directory operations are kept or dropped independently (reordered).
//!    A rename is atomic: its target names the old or the new inode. Between
//!    two directories, the source entry may only go when the target entry
//!    came (or the source directory was synced).
//! 4. **Checks.** Each distinct crash state is laid out in a fresh folder
//!    (project, store and canary) and checked: the store opens, or refuses
//!    only a damaged final line that the command was still appending (an
//!    unanswered record, counted and reported); the log from before the
//!    command is intact; every blob any record names reads back (I2); the
//!    turns acknowledged before the command are live; each project path holds
//!    its old or its new bytes; the canary is unchanged; live turns rewind
//!    exactly in a copy (I3, where the folder is not a half-applied rewind);
//!    recovery is idempotent (I6). At the exit with only the durable state,
//!    the command's whole effect must be there (ack implies durable).
//! 5. **Ordering monitor**, on the same replay: a file's data is synced before
//!    it is renamed into place; a pack named by a log record is durable (its
//!    data and its entry in `packs/`) when that record is written; the log is
//!    synced and durably linked when the command exits 0; every directory the
//!    command made is durably linked when a record is written and at the exit;
//!    at an exit 0, no entry operation is pending but on temporary files and
//!    the caches (the index checkpoint and the tree head; what the command
//!    answered for is durable).
//!
//! For the snapshot halves, every checked state also takes the next
//! snapshot, which must succeed whatever the power loss left of the tree
//! state, its head and the scan stamp (caches). At the exit with only the
//! durable state, `post` (what the agent does next) runs before the rewinds
//! are checked, as in the crash sweep.
//!
//! A negative control removes the pack's `fdatasync`, and then the fsync of
//! `packs/`, from a recorded capture: the monitor and the simulator must both
//! find the violation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use turnback::log::{self, Op};
use turnback::{Error, Store, TurnId};

use crate::harness::*;
use crate::scenarios::{self, Scenario};

type Ino = usize;

// ---------------------------------------------------------------------------
// Operations, as resolved from the trace.

/// What a newly created inode is.
#[derive(Debug, Clone)]
enum NewKind {
    File { mode: u32 },
    Dir { mode: u32 },
    Link(Vec<u8>),
}

/// One operation on the modelled file system.
#[derive(Debug, Clone)]
enum FsOp {
    Create {
        dir: Ino,
        name: Vec<u8>,
        ino: Ino,
        kind: NewKind,
    },
    Write {
        ino: Ino,
        off: u64,
        bytes: Vec<u8>,
    },
    Trunc {
        ino: Ino,
        len: u64,
    },
    Chmod {
        ino: Ino,
        mode: u32,
    },
    Rename {
        from_dir: Ino,
        from: Vec<u8>,
        to_dir: Ino,
        to: Vec<u8>,
    },
    Unlink {
        dir: Ino,
        name: Vec<u8>,
    },
    Link {
        dir: Ino,
        name: Vec<u8>,
        ino: Ino,
    },
    Fsync {
        ino: Ino,
    },
    Fdatasync {
        ino: Ino,
    },
    Syncfs,
    Exit(i32),
}

/// An operation with the trace line it came from.
#[derive(Debug, Clone)]
struct Step {
    line: usize,
    op: FsOp,
}

// ---------------------------------------------------------------------------
// The model.

#[derive(Debug, Clone)]
enum DataOp {
    Write { off: u64, bytes: Vec<u8> },
    Trunc(u64),
    Chmod(u32),
}

#[derive(Debug, Clone)]
enum EntryOp {
    /// `name` names `ino` (a create, mkdir, symlink, link or the target
    /// side of a rename between directories: `pair`).
    Set {
        name: Vec<u8>,
        ino: Ino,
        pair: Option<u64>,
    },
    /// `name` is gone (an unlink, or the source side of a rename between
    /// directories: `pair`).
    Remove { name: Vec<u8>, pair: Option<u64> },
    /// A rename within one directory (atomic).
    Rename {
        from: Vec<u8>,
        to: Vec<u8>,
        ino: Ino,
    },
}

#[derive(Debug, Clone)]
enum Kind {
    File,
    Dir,
    Link(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Inode {
    kind: Kind,
    data: Vec<u8>,
    mode: u32,
    dur_data: Vec<u8>,
    dur_mode: u32,
    pending: Vec<DataOp>,
    entries: BTreeMap<Vec<u8>, Ino>,
    dur_entries: BTreeMap<Vec<u8>, Ino>,
    dir_pending: Vec<(u64, EntryOp)>,
    parent: Option<Ino>,
}

impl Inode {
    fn new(kind: Kind, mode: u32, parent: Option<Ino>) -> Inode {
        Inode {
            kind,
            data: Vec::new(),
            mode,
            dur_data: Vec::new(),
            dur_mode: mode,
            pending: Vec::new(),
            entries: BTreeMap::new(),
            dur_entries: BTreeMap::new(),
            dir_pending: Vec::new(),
            parent,
        }
    }

    fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir)
    }

    fn has_pending_data(&self) -> bool {
        self.pending
            .iter()
            .any(|p| matches!(p, DataOp::Write { .. } | DataOp::Trunc(_)))
    }
}

fn apply_data(data: &mut Vec<u8>, op: &DataOp) {
    match op {
        DataOp::Write { off, bytes } => {
            let off = *off as usize;
            if data.len() < off + bytes.len() {
                data.resize(off + bytes.len(), 0);
            }
            data[off..off + bytes.len()].copy_from_slice(bytes);
        }
        DataOp::Trunc(len) => data.resize(*len as usize, 0),
        DataOp::Chmod(_) => {}
    }
}

/// The in-memory file system: the lab folder, durable and volatile state.
#[derive(Debug, Clone)]
struct Model {
    inodes: Vec<Inode>,
    base: Ino,
    next_op: u64,
    /// Directories made during the run.
    made_dirs: Vec<Ino>,
}

/// How a crash state is chosen.
enum Pick<'a> {
    Durable,
    All,
    Random(&'a mut Rng),
}

impl Model {
    /// The lab folder as it is on disk, all durable.
    fn load(base: &Path) -> Res<Model> {
        let mut m = Model {
            inodes: vec![Inode::new(Kind::Dir, 0o755, None)],
            base: 0,
            next_op: 0,
            made_dirs: Vec::new(),
        };
        m.load_dir(0, base)?;
        Ok(m)
    }

    fn load_dir(&mut self, ino: Ino, dir: &Path) -> Res {
        let mut names: Vec<_> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let meta = std::fs::symlink_metadata(&path)?;
            let mode = meta.permissions().mode() & 0o7777;
            let ft = meta.file_type();
            let child = self.inodes.len();
            let mut node = if ft.is_dir() {
                Inode::new(Kind::Dir, mode, Some(ino))
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&path)?;
                Inode::new(
                    Kind::Link(target.as_os_str().as_bytes().to_vec()),
                    0o777,
                    Some(ino),
                )
            } else if ft.is_file() {
                let mut n = Inode::new(Kind::File, mode, Some(ino));
                n.data = std::fs::read(&path)?;
                n.dur_data = n.data.clone();
                n
            } else {
                return Err(format!("special file {} in the lab", path.display()).into());
            };
            node.parent = Some(ino);
            self.inodes.push(node);
            let key = name.as_bytes().to_vec();
            self.inodes[ino].entries.insert(key.clone(), child);
            self.inodes[ino].dur_entries.insert(key, child);
            if ft.is_dir() {
                self.load_dir(child, &path)?;
            }
        }
        Ok(())
    }

    fn op_id(&mut self) -> u64 {
        self.next_op += 1;
        self.next_op
    }

    fn dir_op(&mut self, dir: Ino, op: EntryOp) {
        let id = self.op_id();
        self.inodes[dir].dir_pending.push((id, op));
    }

    /// Applies one operation to the volatile state and records what is
    /// pending.
    fn apply(&mut self, op: &FsOp) -> Res {
        match op {
            FsOp::Create {
                dir,
                name,
                ino,
                kind,
            } => {
                if *ino != self.inodes.len() {
                    return Err(format!("inode numbering out of step: {ino}").into());
                }
                let node = match kind {
                    NewKind::File { mode } => Inode::new(Kind::File, *mode, Some(*dir)),
                    NewKind::Dir { mode } => {
                        self.made_dirs.push(*ino);
                        Inode::new(Kind::Dir, *mode, Some(*dir))
                    }
                    NewKind::Link(t) => Inode::new(Kind::Link(t.clone()), 0o777, Some(*dir)),
                };
                self.inodes.push(node);
                self.inodes[*dir].entries.insert(name.clone(), *ino);
                self.dir_op(
                    *dir,
                    EntryOp::Set {
                        name: name.clone(),
                        ino: *ino,
                        pair: None,
                    },
                );
            }
            FsOp::Write { ino, off, bytes } => {
                let d = DataOp::Write {
                    off: *off,
                    bytes: bytes.clone(),
                };
                apply_data(&mut self.inodes[*ino].data, &d);
                self.inodes[*ino].pending.push(d);
            }
            FsOp::Trunc { ino, len } => {
                let d = DataOp::Trunc(*len);
                apply_data(&mut self.inodes[*ino].data, &d);
                self.inodes[*ino].pending.push(d);
            }
            FsOp::Chmod { ino, mode } => {
                self.inodes[*ino].mode = *mode;
                self.inodes[*ino].pending.push(DataOp::Chmod(*mode));
            }
            FsOp::Rename {
                from_dir,
                from,
                to_dir,
                to,
            } => {
                let ino = self.inodes[*from_dir]
                    .entries
                    .remove(from)
                    .ok_or("rename of a missing entry")?;
                self.inodes[*to_dir].entries.insert(to.clone(), ino);
                self.inodes[ino].parent = Some(*to_dir);
                if from_dir == to_dir {
                    self.dir_op(
                        *from_dir,
                        EntryOp::Rename {
                            from: from.clone(),
                            to: to.clone(),
                            ino,
                        },
                    );
                } else {
                    let pair = self.op_id();
                    self.dir_op(
                        *to_dir,
                        EntryOp::Set {
                            name: to.clone(),
                            ino,
                            pair: Some(pair),
                        },
                    );
                    self.dir_op(
                        *from_dir,
                        EntryOp::Remove {
                            name: from.clone(),
                            pair: Some(pair),
                        },
                    );
                }
            }
            FsOp::Unlink { dir, name } => {
                self.inodes[*dir]
                    .entries
                    .remove(name)
                    .ok_or("unlink of a missing entry")?;
                self.dir_op(
                    *dir,
                    EntryOp::Remove {
                        name: name.clone(),
                        pair: None,
                    },
                );
            }
            FsOp::Link { dir, name, ino } => {
                self.inodes[*dir].entries.insert(name.clone(), *ino);
                self.dir_op(
                    *dir,
                    EntryOp::Set {
                        name: name.clone(),
                        ino: *ino,
                        pair: None,
                    },
                );
            }
            FsOp::Fdatasync { ino } | FsOp::Fsync { ino } => {
                let full = matches!(op, FsOp::Fsync { .. });
                self.sync_inode(*ino, full);
            }
            FsOp::Syncfs => {
                for ino in 0..self.inodes.len() {
                    self.sync_inode(ino, true);
                }
            }
            FsOp::Exit(_) => {}
        }
        Ok(())
    }

    fn sync_inode(&mut self, ino: Ino, full: bool) {
        let n = &mut self.inodes[ino];
        if n.is_dir() {
            n.dur_entries = n.entries.clone();
            n.dir_pending.clear();
            if full {
                n.dur_mode = n.mode;
                n.pending.clear();
            }
            return;
        }
        n.dur_data = n.data.clone();
        if full {
            n.dur_mode = n.mode;
            n.pending.clear();
        } else {
            n.pending.retain(|p| matches!(p, DataOp::Chmod(_)));
        }
    }

    /// Whether `ino` is reachable from the base through durable entries
    /// only.
    fn durably_linked(&self, ino: Ino) -> bool {
        let mut cur = ino;
        while cur != self.base {
            let Some(parent) = self.inodes[cur].parent else {
                return false;
            };
            if !self.inodes[parent].dur_entries.values().any(|&c| c == cur) {
                return false;
            }
            cur = parent;
        }
        true
    }

    /// The path of `ino` from the base in the volatile namespace.
    fn path_of(&self, ino: Ino) -> String {
        let mut parts = Vec::new();
        let mut cur = ino;
        while let Some(parent) = self.inodes[cur].parent {
            let name = self.inodes[parent]
                .entries
                .iter()
                .find(|(_, c)| **c == cur)
                .map_or("?".to_string(), |(n, _)| {
                    String::from_utf8_lossy(n).into_owned()
                });
            parts.push(name);
            cur = parent;
        }
        parts.reverse();
        parts.join("/")
    }

    /// Looks up `rel` (a `/`-separated path from the base) in the volatile
    /// namespace.
    fn lookup(&self, rel: &str) -> Option<Ino> {
        let mut cur = self.base;
        for c in rel.split('/').filter(|c| !c.is_empty()) {
            cur = *self.inodes[cur].entries.get(c.as_bytes())?;
        }
        Some(cur)
    }

    /// Looks up `rel` through durable entries only.
    fn lookup_durable(&self, rel: &str) -> Option<Ino> {
        let mut cur = self.base;
        for c in rel.split('/').filter(|c| !c.is_empty()) {
            cur = *self.inodes[cur].dur_entries.get(c.as_bytes())?;
        }
        Some(cur)
    }

    /// One crash state, as a folder tree relative to the base.
    fn crash_state(&self, pick: &mut Pick) -> Res<Tree> {
        // Which entry operations survive, decided for every directory at
        // once so that the two sides of a rename can be kept consistent.
        let mut keep: HashSet<u64> = HashSet::new();
        let mut durable_dir: HashMap<u64, bool> = HashMap::new();
        for n in &self.inodes {
            for (id, op) in &n.dir_pending {
                let k = match pick {
                    Pick::Durable => false,
                    Pick::All => true,
                    Pick::Random(rng) => rng.below(2) == 0,
                };
                if k {
                    keep.insert(*id);
                }
                if let EntryOp::Set { pair: Some(p), .. } = op {
                    durable_dir.insert(*p, k);
                }
            }
        }
        // A source entry of a rename between directories goes only when its
        // target entry came.
        for n in &self.inodes {
            for (id, op) in &n.dir_pending {
                if let EntryOp::Remove { pair: Some(p), .. } = op
                    && !durable_dir.get(p).copied().unwrap_or(true)
                {
                    keep.remove(id);
                }
            }
        }
        let mut contents: HashMap<Ino, (Vec<u8>, u32)> = HashMap::new();
        let mut out = Tree::new();
        self.emit(self.base, "", &keep, pick, &mut contents, &mut out, 0)?;
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &self,
        dir: Ino,
        prefix: &str,
        keep: &HashSet<u64>,
        pick: &mut Pick,
        contents: &mut HashMap<Ino, (Vec<u8>, u32)>,
        out: &mut Tree,
        depth: usize,
    ) -> Res {
        if depth > 64 {
            return Err("directory cycle in the model".into());
        }
        let n = &self.inodes[dir];
        let mut entries = n.dur_entries.clone();
        for (id, op) in &n.dir_pending {
            if !keep.contains(id) {
                continue;
            }
            match op {
                EntryOp::Set { name, ino, .. } => {
                    entries.insert(name.clone(), *ino);
                }
                EntryOp::Remove { name, .. } => {
                    entries.remove(name);
                }
                EntryOp::Rename { from, to, ino } => {
                    entries.remove(from);
                    entries.insert(to.clone(), *ino);
                }
            }
        }
        for (name, ino) in entries {
            let name = String::from_utf8(name).map_err(|_| "non-UTF-8 name in the lab")?;
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let c = &self.inodes[ino];
            match &c.kind {
                Kind::Dir => {
                    let mode = match pick {
                        Pick::All => c.mode,
                        _ => c.dur_mode,
                    };
                    out.insert(rel.clone(), Node::Dir { mode });
                    self.emit(ino, &rel, keep, pick, contents, out, depth + 1)?;
                }
                Kind::Link(t) => {
                    let t = std::ffi::OsStr::from_bytes(t);
                    out.insert(rel, Node::Link(t.into()));
                }
                Kind::File => {
                    let (bytes, mode) = contents
                        .entry(ino)
                        .or_insert_with(|| self.file_state(c, pick))
                        .clone();
                    out.insert(rel, Node::File { bytes, mode });
                }
            }
        }
        Ok(())
    }

    /// A file's bytes and mode in a crash state.
    fn file_state(&self, n: &Inode, pick: &mut Pick) -> (Vec<u8>, u32) {
        let rng = match pick {
            Pick::Durable => return (n.dur_data.clone(), n.dur_mode),
            Pick::All => return (n.data.clone(), n.mode),
            Pick::Random(rng) => rng,
        };
        let mut data = n.dur_data.clone();
        let mut mode = n.dur_mode;
        for op in &n.pending {
            match op {
                DataOp::Chmod(m) => {
                    if rng.below(2) == 0 {
                        mode = *m;
                    }
                }
                DataOp::Trunc(_) => {
                    if rng.below(2) == 0 {
                        apply_data(&mut data, op);
                    }
                }
                DataOp::Write { off, bytes } => match rng.below(8) {
                    0..=2 => {}
                    3..=5 => apply_data(&mut data, op),
                    _ => tear(&mut data, *off, bytes, rng),
                },
            }
        }
        (data, mode)
    }
}

/// A write torn at 512-byte or 4 KiB blocks: each block of it holds the new
/// bytes, the old ones, zeros or garbage; the size grows as if it landed.
fn tear(data: &mut Vec<u8>, off: u64, bytes: &[u8], rng: &mut Rng) {
    let block: u64 = if rng.below(2) == 0 { 512 } else { 4096 };
    let end = off + bytes.len() as u64;
    if (data.len() as u64) < end {
        data.resize(end as usize, 0);
    }
    let mut at = off;
    while at < end {
        let next = ((at / block) + 1) * block;
        let stop = next.min(end);
        let (a, b) = (at as usize, stop as usize);
        match rng.below(4) {
            0 => data[a..b].copy_from_slice(&bytes[a - off as usize..b - off as usize]),
            1 => {}
            2 => data[a..b].fill(0),
            _ => data[a..b].iter_mut().for_each(|x| *x = rng.next() as u8),
        }
        at = stop;
    }
}

// ---------------------------------------------------------------------------
// Recording and parsing the trace.

/// Calls that touch the lab without changing what a crash leaves.
const HARMLESS: &[&str] = &[
    "read",
    "pread64",
    "readv",
    "preadv",
    "preadv2",
    "fstat",
    "newfstatat",
    "statx",
    "stat",
    "lstat",
    "access",
    "faccessat",
    "faccessat2",
    "getdents64",
    "readlink",
    "readlinkat",
    "flock",
    "fadvise64",
    "getcwd",
    "statfs",
    "fstatfs",
    "execve",
    "ioctl",
    "poll",
    "utimensat",
    "futimesat",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    // Linux 6.13; a strace that knows it names it (an older one prints
    // `syscall_0x1d1` with bare numbers, which name no path in the lab).
    "listxattrat",
    "chdir",
    "fchdir",
    "munmap",
];

/// A parsed trace: the operations and what the ordering monitor needs.
struct Trace {
    steps: Vec<Step>,
    /// The model as it was before the command.
    initial: Model,
    /// Calls that touched the lab, by name.
    calls: BTreeMap<String, usize>,
    exit: Option<i32>,
}

/// Decodes strace's `-xx` string (`"\x41\x42"`), refusing a cut one.
fn unhex(s: &str) -> Res<Vec<u8>> {
    let s = s.trim();
    let inner = s
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .ok_or_else(|| format!("not a whole string: {}", &s[..s.len().min(80)]))?;
    hex_bytes(inner)
}

fn hex_bytes(inner: &str) -> Res<Vec<u8>> {
    let b = inner.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 4);
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
            let h = std::str::from_utf8(&b[i + 2..i + 4])?;
            out.push(u8::from_str_radix(h, 16)?);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// The path strace's `-y` shows after a descriptor (`7<\x2f...>`).
fn fd_path(arg: &str) -> Option<Vec<u8>> {
    let i = arg.find('<')?;
    let inner = arg[i + 1..].strip_suffix('>')?;
    hex_bytes(inner).ok()
}

/// The descriptor number (`None` for `AT_FDCWD`).
fn fd_num(arg: &str) -> Res<Option<i64>> {
    let head = arg.split('<').next().unwrap_or("").trim();
    if head == "AT_FDCWD" {
        return Ok(None);
    }
    Ok(Some(head.parse()?))
}

/// Splits an argument list at top-level commas.
fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quoted = false;
    let mut cur = String::new();
    for c in args.chars() {
        match c {
            '"' => quoted = !quoted,
            '(' | '[' | '{' | '<' if !quoted => depth += 1,
            ')' | ']' | '}' | '>' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn hexed(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\x{b:02x}")).collect()
}

/// An open file description.
#[derive(Debug, Clone)]
struct Desc {
    ino: Ino,
    append: bool,
    offset: u64,
}

struct Parser {
    model: Model,
    base: Vec<u8>,
    base_hex: String,
    umask: u32,
    fds: HashMap<i64, usize>,
    descs: Vec<Desc>,
    steps: Vec<Step>,
    line: usize,
    calls: BTreeMap<String, usize>,
    exit: Option<i32>,
}

fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

impl Parser {
    /// The lab-relative path of an absolute one (`None` outside the lab).
    fn rel_of<'a>(&self, abs: &'a [u8]) -> Option<&'a [u8]> {
        if abs == self.base.as_slice() {
            return Some(b"");
        }
        abs.strip_prefix(self.base.as_slice())?.strip_prefix(b"/")
    }

    /// The inode a descriptor argument stands for (`None`: outside the lab).
    fn fd_ino(&self, arg: &str) -> Res<Option<Ino>> {
        let path = fd_path(arg);
        match fd_num(arg)? {
            Some(n) => {
                if let Some(&d) = self.fds.get(&n) {
                    return Ok(Some(self.descs[d].ino));
                }
            }
            None => {
                let p = path.clone().ok_or("AT_FDCWD without a path")?;
                return match self.rel_of(&p) {
                    Some(rel) => Ok(Some(
                        self.walk(self.model.base, rel)?
                            .ok_or("the working directory is not in the model")?,
                    )),
                    None => Ok(None),
                };
            }
        }
        match path.as_deref().and_then(|p| self.rel_of(p)) {
            Some(_) => {
                Err(format!("descriptor {arg} in the lab was never opened in the trace").into())
            }
            None => Ok(None),
        }
    }

    /// Walks `rel` from `start` through the volatile namespace.
    fn walk(&self, start: Ino, rel: &[u8]) -> Res<Option<Ino>> {
        let mut cur = start;
        for c in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            let n = &self.model.inodes[cur];
            cur = match c {
                b"." => cur,
                b".." => match n.parent {
                    Some(p) => p,
                    None => return Err("a path leaves the lab through ..".into()),
                },
                _ => {
                    if !n.is_dir() {
                        return Ok(None);
                    }
                    match n.entries.get(c) {
                        Some(&i) => i,
                        None => return Ok(None),
                    }
                }
            };
            if matches!(self.model.inodes[cur].kind, Kind::Link(_)) {
                return Err(
                    "a path goes through a symlink, which the model does not follow".into(),
                );
            }
        }
        Ok(Some(cur))
    }

    /// Resolves (dirfd, name) to the parent directory and the final name;
    /// `None` when outside the lab.
    fn parent_of(&self, dirfd: &str, name: &[u8]) -> Res<Option<(Ino, Vec<u8>)>> {
        let (start, rel): (Ino, &[u8]) = if name.starts_with(b"/") {
            match self.rel_of(name) {
                Some(r) => (self.model.base, r),
                None => return Ok(None),
            }
        } else {
            match self.fd_ino(dirfd)? {
                Some(i) => (i, name),
                None => return Ok(None),
            }
        };
        let mut comps: Vec<&[u8]> = rel
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        let last = comps.pop().ok_or("an empty name")?;
        if last == b"." || last == b".." {
            return Err("a final component . or .. where an entry is needed".into());
        }
        let joined = comps.join(&b'/');
        let dir = self
            .walk(start, &joined)?
            .ok_or("the parent directory is not in the model")?;
        Ok(Some((dir, last.to_vec())))
    }

    /// Resolves (dirfd, name) to an existing inode (`Ok(None)` outside the
    /// lab, `Err` if missing).
    fn existing(&self, dirfd: &str, name: &[u8]) -> Res<Option<Ino>> {
        if name == b"." || name.is_empty() {
            return self.fd_ino(dirfd);
        }
        match self.parent_of(dirfd, name)? {
            None => Ok(None),
            Some((dir, last)) => Ok(Some(
                *self.model.inodes[dir]
                    .entries
                    .get(&last)
                    .ok_or("an entry the call found is not in the model")?,
            )),
        }
    }

    fn push(&mut self, op: FsOp) -> Res {
        self.model.apply(&op)?;
        self.steps.push(Step {
            line: self.line,
            op,
        });
        Ok(())
    }

    fn new_ino(&self) -> Ino {
        self.model.inodes.len()
    }

    fn touches_lab(&self, text: &str) -> bool {
        let mut rest = text;
        let mut cleaned = String::new();
        while let Some(i) = rest.find("AT_FDCWD<") {
            cleaned.push_str(&rest[..i]);
            rest = rest[i..].split_once('>').map_or("", |(_, r)| r);
        }
        cleaned.push_str(rest);
        cleaned.contains(&self.base_hex)
    }

    fn open_desc(&mut self, ret: &str, ino: Ino, append: bool) -> Res {
        let fd: i64 = ret.split('<').next().unwrap_or("").trim().parse()?;
        self.descs.push(Desc {
            ino,
            append,
            offset: 0,
        });
        self.fds.insert(fd, self.descs.len() - 1);
        Ok(())
    }

    fn write_at(&mut self, fd_arg: &str, bytes: Vec<u8>, at: Option<u64>) -> Res {
        let n = fd_num(fd_arg)?.ok_or("write to AT_FDCWD")?;
        let Some(&d) = self.fds.get(&n) else {
            return match self.fd_ino(fd_arg)? {
                Some(_) => Err("write to an unknown descriptor in the lab".into()),
                None => Ok(()),
            };
        };
        let desc = self.descs[d].clone();
        let off = match at {
            Some(o) => o,
            None if desc.append => self.model.inodes[desc.ino].data.len() as u64,
            None => desc.offset,
        };
        if at.is_none() {
            self.descs[d].offset = off + bytes.len() as u64;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.push(FsOp::Write {
            ino: desc.ino,
            off,
            bytes,
        })
    }

    /// Handles one complete call.
    fn call(&mut self, text: &str) -> Res {
        let name = text.split('(').next().unwrap_or("");
        if !self.touches_lab(text) {
            if name == "exit_group" {
                let code = text
                    .split('(')
                    .nth(1)
                    .and_then(|t| t.split(')').next())
                    .and_then(|c| c.trim().parse().ok())
                    .ok_or("exit_group without a code")?;
                self.exit = Some(code);
                self.push(FsOp::Exit(code))?;
            }
            // sync() has no argument naming the lab and syncs it all.
            if name == "sync" {
                self.push(FsOp::Syncfs)?;
            }
            return Ok(());
        }
        let (left, ret) = text.rsplit_once(" = ").ok_or("no return value")?;
        let ret = ret.trim();
        let left = left.trim_end();
        let args_text = left
            .get(name.len() + 1..left.len().saturating_sub(1))
            .ok_or("no argument list")?;
        *self.calls.entry(name.to_string()).or_default() += 1;
        if ret.starts_with('-') || ret == "?" {
            // A failed call changes nothing.
            return Ok(());
        }
        if HARMLESS.contains(&name) {
            return Ok(());
        }
        let a = split_args(args_text);
        let arg = |i: usize| -> Res<&str> {
            a.get(i)
                .map(String::as_str)
                .ok_or_else(|| format!("argument {i} missing").into())
        };
        match name {
            "openat" | "open" | "creat" => {
                let (dirfd, path, flags, mode) = match name {
                    "openat" => (arg(0)?, unhex(arg(1)?)?, arg(2)?.to_string(), a.get(3)),
                    "open" => ("AT_FDCWD<>", unhex(arg(0)?)?, arg(1)?.to_string(), a.get(2)),
                    _ => (
                        "AT_FDCWD<>",
                        unhex(arg(0)?)?,
                        "O_WRONLY|O_CREAT|O_TRUNC".to_string(),
                        a.get(1),
                    ),
                };
                let dirfd = if dirfd == "AT_FDCWD<>" {
                    // open() resolves relative names from the working
                    // directory, which no argument shows.
                    if !path.starts_with(b"/") {
                        return Err("open() of a relative path".into());
                    }
                    "AT_FDCWD<>"
                } else {
                    dirfd
                };
                if flags.contains("O_TMPFILE") {
                    return Err("O_TMPFILE is not modelled".into());
                }
                let whole_lab = path.starts_with(b"/") && self.rel_of(&path) == Some(b"");
                let resolved = if whole_lab {
                    Some((self.model.base, None))
                } else if path == b"." {
                    self.fd_ino(dirfd)?.map(|i| (i, None))
                } else {
                    match self.parent_of(dirfd, &path)? {
                        None => None,
                        Some((dir, last)) => {
                            let found = if last == b"." {
                                Some(dir)
                            } else {
                                self.model.inodes[dir].entries.get(&last).copied()
                            };
                            match found {
                                Some(i) => Some((i, None)),
                                None => Some((dir, Some(last))),
                            }
                        }
                    }
                };
                let Some((ino, missing)) = resolved else {
                    return Ok(());
                };
                let ino = match missing {
                    None => {
                        if matches!(self.model.inodes[ino].kind, Kind::Link(_)) {
                            return Err("an open that follows a symlink".into());
                        }
                        if flags.contains("O_TRUNC") && !self.model.inodes[ino].is_dir() {
                            self.push(FsOp::Trunc { ino, len: 0 })?;
                        }
                        ino
                    }
                    Some(last) => {
                        if !flags.contains("O_CREAT") {
                            return Err("an open succeeded on an entry not in the model".into());
                        }
                        let mode = u32::from_str_radix(
                            mode.ok_or("O_CREAT without a mode")?
                                .trim_start_matches("0o"),
                            8,
                        )? & !self.umask;
                        let new = self.new_ino();
                        self.push(FsOp::Create {
                            dir: ino,
                            name: last,
                            ino: new,
                            kind: NewKind::File { mode },
                        })?;
                        new
                    }
                };
                self.open_desc(ret, ino, flags.contains("O_APPEND"))?;
                if flags.contains("O_RDWR") && !flags.contains("O_APPEND") {
                    // Reads are not traced, so the offset of a read-write
                    // descriptor would be unknown: refuse writes through it.
                    self.descs.last_mut().expect("just pushed").offset = u64::MAX;
                }
            }
            "write" => {
                let n: usize = ret.parse()?;
                let mut bytes = unhex(arg(1)?)?;
                bytes.truncate(n);
                self.check_offset(arg(0)?)?;
                self.write_at(arg(0)?, bytes, None)?;
            }
            "pwrite64" => {
                let n: usize = ret.parse()?;
                let mut bytes = unhex(arg(1)?)?;
                bytes.truncate(n);
                let off: u64 = arg(3)?.parse()?;
                self.write_at(arg(0)?, bytes, Some(off))?;
            }
            "writev" => {
                let n: usize = ret.parse()?;
                let mut bytes = Vec::new();
                let iov = arg(1)?;
                for part in iov.split("iov_base=").skip(1) {
                    let end = part
                        .find("\",")
                        .or_else(|| part.find("\"}"))
                        .ok_or("iovec")?;
                    bytes.extend(unhex(&part[..end + 1])?);
                }
                bytes.truncate(n);
                self.check_offset(arg(0)?)?;
                self.write_at(arg(0)?, bytes, None)?;
            }
            "ftruncate" => {
                let ino = self.fd_ino(arg(0)?)?.ok_or("ftruncate outside")?;
                self.push(FsOp::Trunc {
                    ino,
                    len: arg(1)?.parse()?,
                })?;
            }
            "truncate" => {
                let ino = self
                    .existing("AT_FDCWD<>", &unhex(arg(0)?)?)?
                    .ok_or("truncate outside")?;
                self.push(FsOp::Trunc {
                    ino,
                    len: arg(1)?.parse()?,
                })?;
            }
            "lseek" => {
                let n = fd_num(arg(0)?)?.ok_or("lseek of AT_FDCWD")?;
                if let Some(&d) = self.fds.get(&n) {
                    self.descs[d].offset = ret.parse()?;
                }
            }
            "fsync" | "fdatasync" => {
                let ino = self.fd_ino(arg(0)?)?.ok_or("sync outside")?;
                self.push(if name == "fsync" {
                    FsOp::Fsync { ino }
                } else {
                    FsOp::Fdatasync { ino }
                })?;
            }
            "syncfs" => self.push(FsOp::Syncfs)?,
            "renameat" | "renameat2" | "rename" => {
                let (od, on, nd, nn) = if name == "rename" {
                    ("AT_FDCWD<>", arg(0)?, "AT_FDCWD<>", arg(1)?)
                } else {
                    (arg(0)?, arg(1)?, arg(2)?, arg(3)?)
                };
                if name == "renameat2" && arg(4)? != "0" && arg(4)? != "RENAME_NOREPLACE" {
                    return Err(format!("renameat2 flags {} are not modelled", arg(4)?).into());
                }
                let from = self.parent_of(od, &unhex(on)?)?;
                let to = self.parent_of(nd, &unhex(nn)?)?;
                match (from, to) {
                    (Some((fd, f)), Some((td, t))) => self.push(FsOp::Rename {
                        from_dir: fd,
                        from: f,
                        to_dir: td,
                        to: t,
                    })?,
                    (None, None) => {}
                    _ => return Err("a rename into or out of the lab".into()),
                }
            }
            "unlinkat" | "unlink" | "rmdir" => {
                let (dirfd, path) = if name == "unlinkat" {
                    (arg(0)?, unhex(arg(1)?)?)
                } else {
                    ("AT_FDCWD<>", unhex(arg(0)?)?)
                };
                if let Some((dir, last)) = self.parent_of(dirfd, &path)? {
                    let ino = *self.model.inodes[dir]
                        .entries
                        .get(&last)
                        .ok_or("unlink of an entry not in the model")?;
                    if self.model.inodes[ino].is_dir() && !self.model.inodes[ino].entries.is_empty()
                    {
                        return Err("rmdir of a directory the model holds entries in".into());
                    }
                    self.push(FsOp::Unlink { dir, name: last })?;
                }
            }
            "mkdirat" | "mkdir" => {
                let (dirfd, path, mode) = if name == "mkdirat" {
                    (arg(0)?, unhex(arg(1)?)?, arg(2)?)
                } else {
                    ("AT_FDCWD<>", unhex(arg(0)?)?, arg(1)?)
                };
                if let Some((dir, last)) = self.parent_of(dirfd, &path)? {
                    let mode = u32::from_str_radix(mode, 8)? & !self.umask;
                    let ino = self.new_ino();
                    self.push(FsOp::Create {
                        dir,
                        name: last,
                        ino,
                        kind: NewKind::Dir { mode },
                    })?;
                }
            }
            "symlinkat" | "symlink" => {
                let target = unhex(arg(0)?)?;
                let (dirfd, path) = if name == "symlinkat" {
                    (arg(1)?, unhex(arg(2)?)?)
                } else {
                    ("AT_FDCWD<>", unhex(arg(1)?)?)
                };
                if let Some((dir, last)) = self.parent_of(dirfd, &path)? {
                    let ino = self.new_ino();
                    self.push(FsOp::Create {
                        dir,
                        name: last,
                        ino,
                        kind: NewKind::Link(target),
                    })?;
                }
            }
            "linkat" | "link" => {
                let (od, on, nd, nn) = if name == "link" {
                    ("AT_FDCWD<>", arg(0)?, "AT_FDCWD<>", arg(1)?)
                } else {
                    (arg(0)?, arg(1)?, arg(2)?, arg(3)?)
                };
                let ino = self.existing(od, &unhex(on)?)?.ok_or("link from outside")?;
                let (dir, last) = self.parent_of(nd, &unhex(nn)?)?.ok_or("link to outside")?;
                self.push(FsOp::Link {
                    dir,
                    name: last,
                    ino,
                })?;
            }
            "fchmod" => {
                let ino = self.fd_ino(arg(0)?)?.ok_or("fchmod outside")?;
                self.push(FsOp::Chmod {
                    ino,
                    mode: u32::from_str_radix(arg(1)?, 8)?,
                })?;
            }
            "fchmodat" | "chmod" => {
                let (dirfd, path, mode) = if name == "fchmodat" {
                    (arg(0)?, unhex(arg(1)?)?, arg(2)?)
                } else {
                    ("AT_FDCWD<>", unhex(arg(0)?)?, arg(1)?)
                };
                if let Some(ino) = self.existing(dirfd, &path)? {
                    self.push(FsOp::Chmod {
                        ino,
                        mode: u32::from_str_radix(mode, 8)?,
                    })?;
                }
            }
            "close" => {
                if let Some(n) = fd_num(arg(0)?)? {
                    self.fds.remove(&n);
                }
            }
            "dup" | "dup2" | "dup3" => {
                let old = fd_num(arg(0)?)?.ok_or("dup of AT_FDCWD")?;
                let new: i64 = ret.split('<').next().unwrap_or("").trim().parse()?;
                match self.fds.get(&old).copied() {
                    Some(d) => {
                        self.fds.insert(new, d);
                    }
                    None => {
                        self.fds.remove(&new);
                    }
                }
            }
            "fcntl" => {
                let cmd = arg(1)?;
                if cmd.starts_with("F_DUPFD") {
                    let old = fd_num(arg(0)?)?.ok_or("fcntl of AT_FDCWD")?;
                    let new: i64 = ret.split('<').next().unwrap_or("").trim().parse()?;
                    if let Some(d) = self.fds.get(&old).copied() {
                        self.fds.insert(new, d);
                    }
                } else if cmd == "F_SETFL" && arg(2)?.contains("O_APPEND") {
                    return Err("fcntl(F_SETFL, O_APPEND) is not modelled".into());
                }
            }
            "mmap" => {
                if text.contains("MAP_SHARED") && text.contains("PROT_WRITE") {
                    return Err("a shared writable mapping of a lab file".into());
                }
            }
            _ => {
                return Err(
                    format!("system call {name} touches the lab and is not modelled").into(),
                );
            }
        }
        Ok(())
    }

    /// A plain write must not go through a read-write descriptor, whose
    /// offset the untraced reads would have moved.
    fn check_offset(&self, fd_arg: &str) -> Res {
        if let Some(n) = fd_num(fd_arg)?
            && let Some(&d) = self.fds.get(&n)
            && self.descs[d].offset == u64::MAX
        {
            return Err("a write through a read-write descriptor (its offset is unknown)".into());
        }
        Ok(())
    }
}

/// Parses a whole trace against the lab it ran in.
fn parse_trace(text: &str, lab_base: &Path, initial: Model) -> Res<Trace> {
    let base = lab_base.as_os_str().as_bytes().to_vec();
    let mut p = Parser {
        model: initial.clone(),
        base_hex: hexed(&base),
        base,
        umask: umask(),
        fds: HashMap::new(),
        descs: Vec::new(),
        steps: Vec::new(),
        line: 0,
        calls: BTreeMap::new(),
        exit: None,
    };
    let mut unfinished: HashMap<String, String> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        p.line = i + 1;
        let Some((tid, rest)) = raw.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if rest.starts_with("+++") || rest.starts_with("---") {
            continue;
        }
        let full = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            unfinished.insert(tid.to_string(), head.to_string());
            continue;
        } else if let Some(tail) = rest.strip_prefix("<... ") {
            let after = tail
                .split_once('>')
                .map(|(_, r)| r)
                .ok_or("bad resumed line")?;
            let head = unfinished
                .remove(tid)
                .ok_or_else(|| format!("trace line {}: resumed call without its start", i + 1))?;
            format!("{head}{after}")
        } else {
            rest.to_string()
        };
        p.call(&full).map_err(|e| {
            format!(
                "trace line {}: {e}: {}",
                i + 1,
                &full[..full.len().min(300)]
            )
        })?;
    }
    Ok(Trace {
        steps: p.steps,
        initial,
        calls: p.calls,
        exit: p.exit,
    })
}

/// Runs `sc`'s command once under strace in a copy of its lab; returns the
/// parsed trace and the lab as the run left it.
fn record(sc: &Scenario) -> Res<(Trace, Lab)> {
    let lab = sc.lab()?;
    let initial = Model::load(&lab.base)?;
    let dir = tempfile::Builder::new()
        .prefix("turnback-trace-")
        .tempdir()?;
    let trace = dir.path().join("trace.txt");
    let wrapper: Vec<String> = [
        "strace",
        "-f",
        "-y",
        "-qq",
        "-s",
        "1048576",
        "-xx",
        "-e",
        "trace=!read,pread64,readv,preadv,preadv2",
        "-o",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([trace.display().to_string()])
    .collect();
    let out = run(&lab.root, &sc.inv, &wrapper)?;
    if !out.status.success() {
        return Err(format!("{} under strace failed:\n{}", sc.name, texts(&out)).into());
    }
    let text = std::fs::read_to_string(&trace)?;
    let parsed = parse_trace(&text, &lab.base, initial)?;
    Ok((parsed, lab))
}

// ---------------------------------------------------------------------------
// The ordering monitor.

/// One broken ordering rule.
#[derive(Debug, Clone)]
struct Violation {
    rule: char,
    line: usize,
    what: String,
}

/// What the replay counted for the audit of persistence properties.
#[derive(Debug, Default)]
struct Audit {
    fdatasync_files: usize,
    fsync_files: usize,
    fsync_dirs: usize,
    syncfs: usize,
    renames_synced: usize,
    renames_unsynced_cache: usize,
    log_appends: usize,
    creates: usize,
    unlinks: usize,
    mkdirs: usize,
    symlinks: usize,
    chmod_then_fdatasync_only: usize,
}

const STORE: &str = "project/.turnback";

/// Store files written without a sync, by design: the index checkpoint
/// (with its own hash; a bad one makes the whole log be read), the tree
/// head (with its own CRC, naming the tree file it belongs to; without a
/// whole one the tree file's own header counts) and the command windows
/// (read only with the tree header they name; without them the tree's own
/// pending mark counts).
fn is_cache(path: &str) -> bool {
    path == format!("{STORE}/index")
        || path == format!("{STORE}/{}", turnback::tree::HEAD_FILE)
        || path == format!("{STORE}/windows")
}

/// Names of packs a log write names.
fn packs_named(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(rec) = log::decode(line) else { continue };
        if let Op::Capture { pack, blobs, .. } | Op::Saved { pack, blobs, .. } = &rec.op {
            out.extend(pack.iter().cloned());
            out.extend(blobs.iter().filter_map(|b| b.pack.clone()));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Checks the ordering rules on `model` as `step` is about to be applied.
fn monitor(model: &Model, step: &Step, audit: &mut Audit, out: &mut Vec<Violation>) {
    let log_ino = model.lookup(&format!("{STORE}/{}", log::LOG_FILE));
    let mut flag = |rule: char, what: String| {
        out.push(Violation {
            rule,
            line: step.line,
            what,
        })
    };
    match &step.op {
        FsOp::Rename {
            from_dir,
            from,
            to_dir,
            to,
        } => {
            let Some(&ino) = model.inodes[*from_dir].entries.get(from) else {
                return;
            };
            let to_path = format!("{}/{}", model.path_of(*to_dir), String::from_utf8_lossy(to));
            if model.inodes[ino].has_pending_data() {
                if is_cache(&to_path) {
                    // The index checkpoint and the tree head are caches
                    // with their own checks.
                    audit.renames_unsynced_cache += 1;
                } else {
                    flag(
                        'a',
                        format!("{to_path} is renamed into place with unsynced data"),
                    );
                }
            } else {
                audit.renames_synced += 1;
            }
        }
        FsOp::Write { ino, bytes, .. } if Some(*ino) == log_ino => {
            audit.log_appends += 1;
            for pack in packs_named(bytes) {
                let rel = format!("{STORE}/packs/{pack}");
                match model.lookup_durable(&rel) {
                    None => flag(
                        'b',
                        format!("a log record names {pack}, whose entry in packs/ is not durable"),
                    ),
                    Some(p)
                        if model.inodes[p].has_pending_data()
                            || model.inodes[p].data != model.inodes[p].dur_data =>
                    {
                        flag(
                            'b',
                            format!("a log record names {pack}, whose data is not durable"),
                        )
                    }
                    Some(_) => {}
                }
            }
            for &d in &model.made_dirs {
                if model.inodes[d].parent.is_some()
                    && model.lookup(&model.path_of(d)) == Some(d)
                    && !model.durably_linked(d)
                {
                    flag(
                        'd',
                        format!(
                            "directory {} is not durably linked when a log record is written",
                            model.path_of(d)
                        ),
                    );
                }
            }
        }
        FsOp::Exit(0) => {
            if let Some(l) = log_ino {
                if model.inodes[l].has_pending_data() {
                    flag('c', "the command exits 0 with unsynced log data".into());
                }
                if !model.durably_linked(l) {
                    flag(
                        'c',
                        "the command exits 0 with the log not durably linked".into(),
                    );
                }
            }
            for &d in &model.made_dirs {
                if model.lookup(&model.path_of(d)) == Some(d) && !model.durably_linked(d) {
                    flag(
                        'd',
                        format!(
                            "directory {} is not durably linked at the exit",
                            model.path_of(d)
                        ),
                    );
                }
            }
            // Everything the command answered for is durable: no entry
            // operation on a name other than a temporary file or the index
            // cache is still pending.
            for (ino, n) in model.inodes.iter().enumerate() {
                for (_, op) in &n.dir_pending {
                    let name = match op {
                        EntryOp::Set { name, .. } | EntryOp::Remove { name, .. } => name,
                        EntryOp::Rename { to, .. } => to,
                    };
                    let name = String::from_utf8_lossy(name);
                    let path = format!("{}/{name}", model.path_of(ino));
                    if !name.contains(TEMP_MARK) && !is_cache(&path) {
                        flag(
                            'e',
                            format!("{path}: its directory entry is not durable at the exit"),
                        );
                    }
                }
            }
        }
        FsOp::Fdatasync { ino } => {
            if model.inodes[*ino].is_dir() {
                audit.fsync_dirs += 1;
            } else {
                audit.fdatasync_files += 1;
                if model.inodes[*ino]
                    .pending
                    .iter()
                    .any(|p| matches!(p, DataOp::Chmod(_)))
                {
                    audit.chmod_then_fdatasync_only += 1;
                }
            }
        }
        FsOp::Fsync { ino } => {
            if model.inodes[*ino].is_dir() {
                audit.fsync_dirs += 1;
            } else {
                audit.fsync_files += 1;
            }
        }
        FsOp::Syncfs => audit.syncfs += 1,
        FsOp::Create { kind, .. } => match kind {
            NewKind::File { .. } => audit.creates += 1,
            NewKind::Dir { .. } => audit.mkdirs += 1,
            NewKind::Link(_) => audit.symlinks += 1,
        },
        FsOp::Unlink { .. } => audit.unlinks += 1,
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// Simulation.

#[derive(Debug, Default)]
struct SimStats {
    points: usize,
    states: usize,
    durable: usize,
    all: usize,
    random: usize,
    distinct: usize,
    refused_torn_tail: usize,
    refused_with_zeros: usize,
    torn_tails: usize,
    stray_temps: usize,
    /// States of a rewind or undo that the next mutation rolled back to the
    /// folder before it (I7).
    rolled_back: usize,
    blobs_verified: usize,
    rewinds_checked: usize,
    recoveries: usize,
    new_record_present: usize,
    next_snapshots: usize,
    trees_rebuilt: usize,
    first_refusal: Option<String>,
}

/// Hashes a tree (for telling crash states apart).
fn tree_hash(t: &Tree) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (k, v) in t {
        k.hash(&mut h);
        match v {
            Node::File { bytes, mode } => (0u8, bytes, mode).hash(&mut h),
            Node::Link(p) => (1u8, p).hash(&mut h),
            Node::Dir { mode } => (2u8, mode).hash(&mut h),
            Node::Other => 3u8.hash(&mut h),
        }
    }
    h.finish()
}

/// Lays a tree out under `base`.
fn materialize(t: &Tree, base: &Path) -> Res {
    for (k, v) in t {
        let p = base.join(k);
        match v {
            Node::Dir { .. } => std::fs::create_dir(&p)?,
            Node::File { bytes, mode } => {
                std::fs::write(&p, bytes)?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
            }
            Node::Link(target) => std::os::unix::fs::symlink(target, &p)?,
            Node::Other => return Err("special file in a crash state".into()),
        }
    }
    for (k, v) in t.iter().rev() {
        if let Node::Dir { mode } = v {
            std::fs::set_permissions(base.join(k), std::fs::Permissions::from_mode(*mode))?;
        }
    }
    Ok(())
}

/// Where a crash state comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateKind {
    Durable,
    All,
    Random,
}

/// Checks one crash state; `last` is the point after the exit.
#[allow(clippy::too_many_arguments)]
fn check_state(
    sc: &Scenario,
    t: &Tree,
    log_before: &[u8],
    live_before: &[String],
    log_synced: usize,
    kind: StateKind,
    last: bool,
    stats: &mut SimStats,
) -> Res {
    let lab = Lab::empty()?;
    materialize(t, &lab.base)?;
    sc.mid.check_canary(&lab)?;
    let bytes = lab.log_bytes();
    let parsed = log::parse(&bytes, 1);
    if parsed.torn.is_some() {
        stats.torn_tails += 1;
    }
    // The log from before the command is intact (gc may replace it whole).
    if !sc.mid.log_may_be_rewritten && !bytes.starts_with(log_before) {
        return Err(format!(
            "I1: the log before the command ({} bytes) is not a prefix of the log after the crash ({} bytes)",
            log_before.len(),
            bytes.len()
        )
        .into());
    }
    match Store::open(&lab.root) {
        Ok(_) => {}
        Err(Error::LogDamaged { line, reason, .. }) => {
            // Refused: allowed only for lines past the log's synced size (an
            // unanswered append torn with a newline landing in it, or
            // garbage holding one), never for a line that was synced.
            let last_line = parsed.lines.last().map(|(n, _)| *n);
            let start: usize = bytes
                .split_inclusive(|&b| b == b'\n')
                .take(line.saturating_sub(1))
                .map(<[u8]>::len)
                .sum();
            let unsynced = start >= log_synced && start >= log_before.len();
            if unsynced && !sc.mid.log_may_be_rewritten && !(last && kind == StateKind::Durable) {
                stats.refused_torn_tail += 1;
                let damaged = &bytes[start..];
                let end = damaged
                    .iter()
                    .position(|&b| b == b'\n')
                    .unwrap_or(damaged.len());
                if damaged[..end].contains(&0) {
                    stats.refused_with_zeros += 1;
                }
                if stats.first_refusal.is_none() {
                    stats.first_refusal = Some(format!("line {line}: {reason}"));
                }
                return Ok(());
            }
            return Err(format!(
                "I1: the store refuses to open: line {line} (of {:?} complete, log {} bytes, {} before the command): {reason}",
                last_line,
                bytes.len(),
                log_before.len()
            )
            .into());
        }
        Err(e) => return Err(format!("I1: the store does not open: {e}").into()),
    }
    let mut found = Found::default();
    let fin = last && kind == StateKind::Durable;
    let checker = if fin { &sc.fin } else { &sc.mid };
    checker.check_blobs(&lab, &mut found)?;
    let live: Vec<String> = Store::open(&lab.root)?
        .turns()?
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    // A turn that must be live but that the complete command does not
    // leave live is made by `post` (checked by `check_rewinds` after it).
    for (id, _) in checker
        .must_live
        .iter()
        .filter(|(id, _)| sc.final_live.contains(id))
    {
        if !live.contains(id) {
            return Err(format!("I3: turn {id} is not live (live: {live:?})").into());
        }
    }
    if live != live_before {
        stats.new_record_present += 1;
    }
    let temps = check_midway(&lab.root, &[&sc.before, &sc.after])?;
    if !temps.is_empty() {
        stats.stray_temps += 1;
    }
    if rolls_back(&sc.inv) {
        stats.rolled_back += usize::from(check_settled(&lab, &sc.before, &sc.after)?);
    }
    if fin {
        // Ack implies durable: the command's whole effect survives.
        if live != sc.final_live {
            return Err(format!(
                "ack-implies-durable: after the exit, only the durable state has live turns {live:?}, not {:?}",
                sc.final_live
            )
            .into());
        }
        let now = without_temps(project_tree(&lab.root)?);
        if now != without_temps(sc.after.clone()) {
            return Err(format!(
                "ack-implies-durable: after the exit, the durable project differs from the command's result:\n{}",
                diff(&sc.after, &now)
            )
            .into());
        }
        // What the agent does next (the after half of the next command,
        // for the before half of a snapshot), as in the crash sweep.
        if let Some(post) = sc.post {
            post(&lab.root).map_err(|e| format!("after the exit: {e}"))?;
        }
    }
    if !matches!(sc.name, "rewind" | "undo") || fin {
        checker.check_rewinds(&lab, &mut found)?;
    }
    check_recovery_idempotent(&lab)?;
    stats.recoveries += 1;
    if sc.inv.name() == "snapshot" {
        // The tree state, its head and the stamp are caches: whatever a
        // power loss left of them, the next snapshot succeeds (a damaged
        // tree is rebuilt).
        let next = TurnId::new("t-next")?;
        let report = Store::open(&lab.root)?
            .snapshot(&next, None, false, &turnback::NoProgress)
            .map_err(|e| format!("the next snapshot fails: {e}"))?;
        stats.next_snapshots += 1;
        if report.warnings.iter().any(|w| w.contains("rebuilt")) {
            stats.trees_rebuilt += 1;
        }
    }
    stats.blobs_verified += found.blobs_verified;
    stats.rewinds_checked += found.rewinds_checked;
    Ok(())
}

/// Replays `steps` from `initial`, running the monitor, and (with `k`) the
/// crash states and their checks. Returns the violations.
fn simulate(
    sc: &Scenario,
    trace: &Trace,
    steps: &[Step],
    k: Option<usize>,
    rng: &mut Rng,
    stats: &mut SimStats,
    audit: &mut Audit,
) -> Res<Vec<Violation>> {
    let mut model = trace.initial.clone();
    let mut violations = Vec::new();
    let log_before = sc.template.log_bytes();
    let live_before: Vec<String> = Store::open(&Lab::copy_of(&sc.template)?.root)?
        .turns()?
        .iter()
        .map(|t| t.id.to_string())
        .collect();
    let mut seen: HashSet<u64> = HashSet::new();
    for (i, step) in steps.iter().enumerate() {
        monitor(&model, step, audit, &mut violations);
        model.apply(&step.op)?;
        let Some(k) = k else { continue };
        let last = i + 1 == steps.len();
        stats.points += 1;
        let log_synced = model
            .lookup(&format!("{STORE}/{}", log::LOG_FILE))
            .map_or(0, |l| model.inodes[l].dur_data.len());
        let mut picks: Vec<(StateKind, Tree)> = vec![
            (StateKind::Durable, model.crash_state(&mut Pick::Durable)?),
            (StateKind::All, model.crash_state(&mut Pick::All)?),
        ];
        for _ in 0..k {
            picks.push((
                StateKind::Random,
                model.crash_state(&mut Pick::Random(rng))?,
            ));
        }
        for (kind, t) in picks {
            stats.states += 1;
            match kind {
                StateKind::Durable => stats.durable += 1,
                StateKind::All => stats.all += 1,
                StateKind::Random => stats.random += 1,
            }
            // The durable state at the exit is always checked: it is the
            // one ack-implies-durable is about.
            let h = tree_hash(&t) ^ u64::from(last && kind == StateKind::Durable);
            if !seen.insert(h) {
                continue;
            }
            stats.distinct += 1;
            check_state(
                sc,
                &t,
                &log_before,
                &live_before,
                log_synced,
                kind,
                last,
                stats,
            )
            .map_err(|e| {
                format!(
                    "power loss in {} after trace line {} ({:?} state): {e}",
                    sc.name, step.line, kind
                )
            })?;
        }
    }
    Ok(violations)
}

/// K random crash states per point.
fn k_random() -> usize {
    if long_mode() { 400 } else { 24 }
}

fn print_audit(name: &str, t: &Trace, a: &Audit) {
    println!(
        "powerloss {name}: relied on: fdatasync of a file makes its bytes and size durable ({} calls); fsync of a file also its mode ({}); fsync of a directory makes its creates, renames and unlinks durable ({}); syncfs makes everything durable ({}); a rename is atomic, its target naming the old or the new inode ({} renames of synced files, {} of an unsynced cache: the index checkpoint or the tree head); an unsynced append may be lost or torn beyond the synced size only ({} log appends); files created {}, directories made {}, symlinks {}, entries removed {}; a mode set by fchmod and synced only by an fdatasync, which need not persist it ({} files: packs and store files, whose mode nothing reads). Calls touching the lab: {:?}",
        a.fdatasync_files,
        a.fsync_files,
        a.fsync_dirs,
        a.syncfs,
        a.renames_synced,
        a.renames_unsynced_cache,
        a.log_appends,
        a.creates,
        a.mkdirs,
        a.symlinks,
        a.unlinks,
        a.chmod_then_fdatasync_only,
        t.calls
    );
}

fn powerloss(sc: Scenario) -> Res {
    if let Some(why) = strace_problem() {
        return skip_or_fail(&format!("power-loss simulation of {}", sc.name), &why);
    }
    let started = std::time::Instant::now();
    let (trace, ran) = record(&sc)?;
    if trace.exit != Some(0) {
        return Err(format!(
            "{}: the traced run did not exit 0: {:?}",
            sc.name, trace.exit
        )
        .into());
    }
    // The model must end where the real run ended.
    let mut end = trace.initial.clone();
    for s in &trace.steps {
        end.apply(&s.op)?;
    }
    let modelled = end.crash_state(&mut Pick::All)?;
    let real = snapshot(&ran.base, &[])?;
    if modelled != real {
        return Err(format!(
            "{}: the model of the trace does not end as the real run did:\n{}",
            sc.name,
            diff(&real, &modelled)
        )
        .into());
    }
    if std::env::var_os("TURNBACK_PL_DEBUG").is_some() {
        let mut m = trace.initial.clone();
        for s in &trace.steps {
            let what = match &s.op {
                FsOp::Write { ino, off, bytes } => {
                    format!("write {} at {off}, {} bytes", m.path_of(*ino), bytes.len())
                }
                FsOp::Fsync { ino } => format!("fsync {}", m.path_of(*ino)),
                FsOp::Fdatasync { ino } => format!("fdatasync {}", m.path_of(*ino)),
                FsOp::Trunc { ino, len } => format!("truncate {} to {len}", m.path_of(*ino)),
                FsOp::Chmod { ino, mode } => format!("chmod {} {mode:o}", m.path_of(*ino)),
                other => format!("{other:?}"),
            };
            println!("  line {}: {what}", s.line);
            m.apply(&s.op)?;
        }
    }
    let mut rng = Rng::from_env(&format!("powerloss {}", sc.name));
    let mut stats = SimStats::default();
    let mut audit = Audit::default();
    // The ordering monitor first (a replay without crash states).
    let violations = simulate(
        &sc,
        &trace,
        &trace.steps,
        None,
        &mut rng,
        &mut stats,
        &mut audit,
    )?;
    if !violations.is_empty() {
        return Err(format!("{}: ordering monitor: {violations:#?}", sc.name).into());
    }
    if sc.name == "snapshot-unchanged" && audit.renames_unsynced_cache == 0 {
        // A scan that found a racily clean file rewrites the tree: the
        // case meant to write only the head would not be tested.
        return Err(format!(
            "{}: the trace holds no rename of the tree head (the tree was rewritten)",
            sc.name
        )
        .into());
    }
    simulate(
        &sc,
        &trace,
        &trace.steps,
        Some(k_random()),
        &mut rng,
        &mut stats,
        &mut Audit::default(),
    )?;
    println!(
        "powerloss {}: {} operations on the lab from the trace, {} crash points, {} crash states ({} durable only, {} everything, {} random, K={}), {} distinct checked, {} refused at open for a damaged unanswered final record ({} of them with a zero-filled block){}, {} with a torn final line, {} with stray temporary files, {} rolled back to the folder before the command by the next mutation, {} with a record of the command, {} blob reads verified, {} rewinds checked, {} recoveries checked twice, {} next snapshots succeeded ({} rebuilt a damaged tree); ordering monitor: 0 violations; {:.1} s",
        sc.name,
        trace.steps.len(),
        stats.points,
        stats.states,
        stats.durable,
        stats.all,
        stats.random,
        k_random(),
        stats.distinct,
        stats.refused_torn_tail,
        stats.refused_with_zeros,
        stats
            .first_refusal
            .as_ref()
            .map_or(String::new(), |r| format!(" (first: {r})")),
        stats.torn_tails,
        stats.stray_temps,
        stats.rolled_back,
        stats.new_record_present,
        stats.blobs_verified,
        stats.rewinds_checked,
        stats.recoveries,
        stats.next_snapshots,
        stats.trees_rebuilt,
        started.elapsed().as_secs_f64()
    );
    print_audit(sc.name, &trace, &audit);
    if stats.distinct == 0 || stats.points == 0 {
        return Err(format!("{}: no crash state was checked", sc.name).into());
    }
    Ok(())
}

#[test]
fn powerloss_capture() -> Res {
    powerloss(scenarios::capture()?)
}

#[test]
fn powerloss_first_capture_makes_the_store() -> Res {
    powerloss(scenarios::capture_first()?)
}

/// Long mode only: every crash state re-reads 600 blobs and a 256 KiB log
/// (about 3 s a state in a debug build).
#[test]
fn powerloss_capture_writing_the_index_checkpoint() -> Res {
    if !long_mode() {
        println!("powerloss capture-long-log: runs with TURNBACK_LONG=1 only");
        return Ok(());
    }
    powerloss(scenarios::capture_after_long_log()?)
}

#[test]
fn powerloss_write() -> Res {
    powerloss(scenarios::write()?)
}

#[test]
fn powerloss_write_new_file_in_new_directories() -> Res {
    powerloss(scenarios::write_new()?)
}

#[test]
fn powerloss_rewind() -> Res {
    powerloss(scenarios::rewind()?)
}

#[test]
fn powerloss_undo() -> Res {
    powerloss(scenarios::undo()?)
}

#[test]
fn powerloss_rewind_per_file_fsync() -> Res {
    powerloss(scenarios::rewind_per_file()?)
}

#[test]
fn powerloss_undo_per_file_fsync() -> Res {
    powerloss(scenarios::undo_per_file()?)
}

#[test]
fn powerloss_gc() -> Res {
    powerloss(scenarios::gc()?)
}

#[test]
fn powerloss_snapshot_after() -> Res {
    powerloss(scenarios::snapshot_after()?)
}

#[test]
fn powerloss_snapshot_before() -> Res {
    powerloss(scenarios::snapshot_before()?)
}

#[test]
fn powerloss_snapshot_unchanged() -> Res {
    powerloss(scenarios::snapshot_unchanged()?)
}

/// Which recorded operation a negative control removes.
type Remove = Box<dyn Fn(&FsOp) -> bool>;

/// The simulator and the monitor can fail: a capture's trace with the
/// pack's `fdatasync` removed, and then with the fsync of `packs/` removed,
/// must each give a monitor violation and a crash state that breaks I2.
#[test]
fn powerloss_negative_control() -> Res {
    if let Some(why) = strace_problem() {
        return skip_or_fail("power-loss negative control", &why);
    }
    let sc = scenarios::capture()?;
    let (trace, _ran) = record(&sc)?;
    // The pack: the inode renamed into packs/.
    let mut model = trace.initial.clone();
    let mut pack_ino = None;
    let mut packs_dir = None;
    for s in &trace.steps {
        if let FsOp::Rename {
            from_dir,
            from,
            to_dir,
            ..
        } = &s.op
            && model.path_of(*to_dir) == format!("{STORE}/packs")
        {
            pack_ino = model.inodes[*from_dir].entries.get(from).copied();
            packs_dir = Some(*to_dir);
        }
        model.apply(&s.op)?;
    }
    let pack_ino = pack_ino.ok_or("no pack renamed into packs/ in the trace")?;
    let packs_dir = packs_dir.ok_or("no packs/ in the trace")?;
    let cases: [(&str, Remove, char); 2] = [
        (
            "without the pack's fdatasync",
            Box::new(
                move |op| matches!(op, FsOp::Fdatasync { ino } | FsOp::Fsync { ino } if *ino == pack_ino),
            ),
            'a',
        ),
        (
            "without the fsync of packs/",
            Box::new(
                move |op| matches!(op, FsOp::Fsync { ino } | FsOp::Fdatasync { ino } if *ino == packs_dir),
            ),
            'b',
        ),
    ];
    let mut rng = Rng::seeded(1);
    for (what, drop, rule) in cases {
        let steps: Vec<Step> = trace
            .steps
            .iter()
            .filter(|s| !drop(&s.op))
            .cloned()
            .collect();
        if steps.len() != trace.steps.len() - 1 {
            return Err(format!("{what}: expected to remove exactly one call").into());
        }
        let mut stats = SimStats::default();
        let mut audit = Audit::default();
        let violations = simulate(&sc, &trace, &steps, None, &mut rng, &mut stats, &mut audit)?;
        if !violations.iter().any(|v| v.rule == rule) {
            return Err(
                format!("{what}: the monitor did not flag rule ({rule}): {violations:#?}").into(),
            );
        }
        let sim = simulate(
            &sc,
            &trace,
            &steps,
            Some(0),
            &mut rng,
            &mut stats,
            &mut audit,
        );
        let err = match sim {
            Ok(_) => return Err(format!("{what}: no crash state broke an invariant").into()),
            Err(e) => e.to_string(),
        };
        if !err.contains("I2") && !err.contains("I3") && !err.contains("ack-implies") {
            return Err(format!("{what}: failed for another reason: {err}").into());
        }
        println!(
            "powerloss negative control {what}: monitor: {} violation(s), first ({}) at trace line {}: {}; simulator: {}",
            violations.len(),
            violations[0].rule,
            violations[0].line,
            violations[0].what,
            err.lines().next().unwrap_or("")
        );
    }
    Ok(())
}
