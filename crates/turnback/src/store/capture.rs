//! Capturing: resolving the paths a caller names, looking at each without
//! following symlinks, storing the pre-images (and the states an operation
//! saves before it changes anything) as blobs, and `write`, which captures
//! then replaces a file.

use super::*;

/// Files up to this size are read whole and compressed in parallel; larger
/// ones are streamed (memory stays bounded).
const WHOLE_READ_LIMIT: u64 = 4 << 20;

/// At most this many files are open at once while a batch is read, so a
/// capture of any size fits a descriptor limit of 1,024 (or far less).
const OPEN_CHUNK: usize = 32;

/// What one capture call did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CaptureReport {
    /// The turn.
    pub turn: Option<TurnId>,
    /// Paths recorded now, with their pre-images.
    pub captured: Vec<FileEntry>,
    /// Paths this turn had captured already (the first capture wins).
    pub already_captured: Vec<RelPath>,
    /// Symlinks that point outside the root: recorded as links, but a write
    /// through them cannot be rewound.
    pub links_outside: Vec<RelPath>,
    /// Files with hard links (other names) outside the project: those names
    /// cannot be captured, and a write or rewind gives the names inside the
    /// project a new file, so they keep the old bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hard_links_outside: Vec<RelPath>,
    /// Blobs written by this call.
    #[serde(rename = "new_blob_count")]
    pub new_blobs: usize,
    /// Compressed bytes written by this call.
    pub stored_bytes: u64,
    /// What a write could not keep of the file it replaced (an extended
    /// attribute), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// How [`Store::collect`] treats what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collect {
    /// Before an agent's write: record missing directories, follow an
    /// in-root symlink's target, refuse directories, apply the size cap.
    Capture,
    /// Before a rewind/undo changes a path: its exact state, any size.
    State,
}

/// What an operation needs of a path's current file when it saves it
/// (see [`crate::aside`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    /// Nothing: it may be kept aside, unread.
    Nothing,
    /// Its hash, which a conflict check compares: it is read.
    Hash,
    /// Its hash, known to be this post-image's if the file still has this
    /// look: then it is kept aside, unread, with that hash; else read.
    Post(BlobId, StatKey),
}

/// Files kept aside instead of read while the states are collected (see
/// [`crate::aside`]).
pub(crate) struct Keeping<'a> {
    keeper: aside::Keeper,
    /// What the operation needs of each path.
    expect: &'a dyn Fn(&RelPath) -> Expect,
    /// No file can be kept (another file system).
    off: bool,
}

/// Files [`Store::collect`] keeps aside a run at a time: at most this
/// many, in at most [`KEEP_RUN_DIRS`] directories (their handles are held
/// until the run is kept).
const KEEP_RUN: usize = 4096;

const KEEP_RUN_DIRS: usize = 256;

/// A file [`Store::collect`] is to keep aside: its entry, the directory
/// holding it (`None`: the root), the hash and look it is kept with (see
/// [`Expect::Post`]) and its size.
struct Pending {
    at: usize,
    dir: Option<Arc<OwnedFd>>,
    blob: Option<BlobId>,
    look: Option<StatKey>,
    size: u64,
}

/// Whether two directories of [`Pending`] files are one handle.
fn same_dir(a: Option<&OwnedFd>, b: Option<&OwnedFd>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// What [`Store::collect`] found.
#[derive(Default)]
struct Collected {
    entries: Vec<FileEntry>,
    /// Regular files to read: (entry index, size). They are opened in
    /// chunks when read, so a batch of any size holds few descriptors.
    files: Vec<(usize, u64)>,
    already: Vec<RelPath>,
    links_outside: Vec<RelPath>,
    /// The regular files among them with more than one name.
    linked: crate::links::Linked,
}

/// The hash-only form of a state.
pub(crate) fn post_of(pre: &Pre) -> Post {
    match pre {
        Pre::File { blob, .. } => Post::File {
            sha256: *blob,
            stat: None,
        },
        Pre::Symlink { target } => Post::Symlink {
            target: target.clone(),
        },
        Pre::Absent => Post::Absent,
        Pre::Dir { .. } => Post::Dir,
        Pre::Aside {
            blob: Some(blob), ..
        } => Post::File {
            sha256: *blob,
            stat: None,
        },
        Pre::Fifo { .. } | Pre::Skipped { .. } | Pre::Aside { blob: None, .. } => Post::Other,
    }
}

/// A file hashed, with its stat key when it can be trusted later.
struct Looked {
    i: usize,
    id: BlobId,
    key: Option<StatKey>,
}

/// A small file read, hashed and (if new) compressed.
struct Hashed {
    i: usize,
    id: BlobId,
    len: u64,
    frame: Option<Vec<u8>>,
    base: Option<BlobId>,
}

impl Store {
    /// Turns a caller's path (absolute, or relative to the root) into a
    /// stored path, resolving symlinks in its directories (never outside the
    /// root). With `follow_final`, a symlink in the last component is
    /// resolved too.
    pub fn resolve(&self, input: impl AsRef<Path>, follow_final: bool) -> Result<RelPath> {
        self.resolve_with(input, follow_final, &mut HashSet::new())
    }

    /// [`Store::resolve`] for many paths: `real_dirs` remembers directories
    /// already seen to be real (not symlinks), so a batch stats each once.
    fn resolve_with(
        &self,
        input: impl AsRef<Path>,
        follow_final: bool,
        real_dirs: &mut HashSet<Vec<u8>>,
    ) -> Result<RelPath> {
        let input = input.as_ref();
        let shown = input.to_string_lossy().into_owned();
        let bad = |reason| Error::BadPath {
            path: shown.clone(),
            reason,
        };
        let mut comps = lexical_components(&self.place.root, input)?;
        let mut hops = 0;
        'restart: loop {
            for i in 0..comps.len() {
                if i + 1 == comps.len() && !follow_final {
                    break;
                }
                if i == 0 && (comps[i] == STORE_DIR.as_bytes() || comps[i] == b".git") {
                    break;
                }
                let prefix = comps[..=i].join(&b'/');
                if i + 1 < comps.len() && real_dirs.contains(&prefix) {
                    continue;
                }
                let p = self.place.root.join(crate::sys::os_str(&prefix));
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.file_type().is_symlink() => {
                        hops += 1;
                        if hops > 40 {
                            return Err(bad(PathProblem::SymlinkLoop));
                        }
                        let target = std::fs::read_link(&p).ctx("read symlink", &p)?;
                        let parent = comps[..i].join(&b'/');
                        let joined = self
                            .place
                            .root
                            .join(crate::sys::os_str(&parent))
                            .join(target);
                        let mut next = lexical_components(&self.place.root, &joined)
                            .map_err(|_| bad(PathProblem::OutsideRoot))?;
                        next.extend(comps[i + 1..].iter().cloned());
                        comps = next;
                        continue 'restart;
                    }
                    Ok(m) => {
                        if m.is_dir() {
                            real_dirs.insert(prefix);
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                        ) =>
                    {
                        break;
                    }
                    Err(e) => return Err(e).ctx("look at", &p),
                }
            }
            break;
        }
        let rel = RelPath::from_components(&comps).map_err(bad)?;
        if let Some(inside) = self.store_inside() {
            let inside = String::from_utf8_lossy(&inside).into_owned();
            if rel.as_str() == inside || rel.as_str().starts_with(&format!("{inside}/")) {
                return Err(bad(PathProblem::InsideStore));
            }
        }
        Ok(rel)
    }

    /// Captures one path in `turn` (see [`Store::capture_many`]).
    pub fn capture(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        path: impl AsRef<Path>,
    ) -> Result<CaptureReport> {
        self.capture_many(turn, label, &[path])
    }

    /// Saves the pre-images of `paths` in `turn`, as one durable record: one
    /// lock, one pack, three fsyncs however many paths. Returns only after the
    /// blobs and the record are on disk. The first capture of a path in a
    /// turn wins; later ones are no-ops. Any invalid path fails the whole call
    /// before anything is written. The first capture of a new turn seals the
    /// turn before it (see [`Store::seal`]).
    pub fn capture_many<P: AsRef<Path>>(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        paths: &[P],
    ) -> Result<CaptureReport> {
        let mut real_dirs = HashSet::new();
        let rels = paths
            .iter()
            .map(|p| self.resolve_with(p, false, &mut real_dirs))
            .collect::<Result<Vec<_>>>()?;
        let _guard = self.begin_mutation()?;
        if rels.len() > 1 {
            // Collecting and reading walk the same directories.
            self.holding_dirs(|s| s.capture_locked(turn, label, &rels, Vec::new()))
        } else {
            self.capture_locked(turn, label, &rels, Vec::new())
        }
    }

    /// Captures `rels` (and records `posts`) under the held lock.
    pub(crate) fn capture_locked(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        rels: &[RelPath],
        posts: Vec<PostEntry>,
    ) -> Result<CaptureReport> {
        // Read first: a config file in error fails the capture before it
        // records anything.
        let config = self.config()?;
        // A new turn ends the one before: seal it once this capture is
        // durable (a capture that fails appends nothing). Also when this
        // turn's first record is the last record of the log and the turn
        // before it is still unsealed: the process that wrote that record
        // was killed before the seal, and this is its rerun; nothing has
        // happened since that the seal would wrongly take in.
        let seal = {
            let mut live = self.index.live_places().rev();
            let before = match self.index.turn(turn)? {
                None => live.next(),
                Some(t) if t.first_seq == self.index.last_seq => {
                    live.next().transpose()?;
                    live.next()
                }
                Some(_) => None,
            };
            match before {
                Some(i) => self.index.to_seal(i?)?,
                None => None,
            }
        };
        let already: HashSet<RelPath> = self
            .index
            .turn(turn)?
            .map(|t| t.files.iter().map(|c| c.entry.path.clone()).collect())
            .unwrap_or_default();
        // `foo.txt` after `Foo.txt` on a case-insensitive file system is
        // the file the turn captured already: the first spelling stands.
        let spelled = self.first_spellings(&already, rels);
        let rels = spelled.as_slice();
        // Every name of a hard-linked file, so a rewind has the whole group.
        let names = crate::links::other_names(&self.place, rels)?;
        let all: Vec<RelPath> = rels.iter().chain(&names.found).cloned().collect();
        let collected = self.collect(&all, &already, Collect::Capture, None)?;
        let mut report = CaptureReport {
            turn: Some(turn.clone()),
            already_captured: collected.already,
            links_outside: collected.links_outside,
            hard_links_outside: names.outside,
            ..CaptureReport::default()
        };
        let mut entries = collected.entries;
        // A write of a path the turn captured already, while a command's
        // window is open (another session's Bash call): nothing in its
        // record would name the path, so that command's scan would take
        // the write for its own. A post-image of the path as it is now,
        // before the write, marks it the tool's (see
        // `snapshot::attribution::assign`); a path the caller gives a
        // post-image of keeps that one.
        let posts = if !report.already_captured.is_empty()
            && crate::tree::pending_turn(&self.place.dirs().store, &self.place.store_path)?
                .is_some()
        {
            let own: HashSet<&RelPath> = posts.iter().map(|p| &p.path).collect();
            let rest: Vec<RelPath> = report
                .already_captured
                .iter()
                .filter(|p| !own.contains(p))
                .cloned()
                .collect();
            let mut touched = self.hash_states(&rest, true)?;
            touched.extend(posts);
            touched
        } else {
            posts
        };
        if entries.is_empty() && posts.is_empty() {
            if let Some(first) = seal {
                self.seal_turn(first)?;
            }
            return Ok(report);
        }
        let seq = self.index.last_seq + 1;
        let pack_name = pack::pack_name(seq);
        let (blobs, stored) = self.store_blobs(&mut entries, collected.files, &pack_name)?;
        report.new_blobs = blobs.len();
        report.stored_bytes = stored;
        let op = Op::Capture {
            turn: turn.clone(),
            label: label.map(cut_label).filter(|l| !l.is_empty()),
            pack: (!blobs.is_empty()).then_some(pack_name),
            blobs,
            files: entries.clone(),
            posts,
            shared_with: Vec::new(),
        };
        self.append(op)?;
        if let Some(first) = seal {
            self.seal_turn(first)?;
        }
        self.maybe_auto_gc(false, &config)?;
        report.captured = entries;
        Ok(report)
    }

    /// Records the post-images of `paths` in `turn` (hashes of what is on
    /// disk now): what an agent's own write tool left, reported after the
    /// write (a hook's post-tool event), so a later rewind can tell its bytes
    /// from someone else's. Returns how many were recorded.
    pub fn record_post_images<P: AsRef<Path>>(
        &mut self,
        turn: &TurnId,
        paths: &[P],
    ) -> Result<usize> {
        let rels = paths
            .iter()
            .map(|p| self.resolve(p, true))
            .collect::<Result<Vec<_>>>()?;
        let _guard = self.begin_mutation()?;
        if self.index.turn(turn)?.is_none() {
            return Err(self.unknown_turn(turn));
        }
        let posts = self.hash_states(&rels, true)?;
        let n = posts.len();
        self.capture_locked(turn, None, &[], posts)?;
        Ok(n)
    }

    /// Records the post-images of every path `turn` touched (hashes of what
    /// is on disk now), so a later rewind can tell the agent's bytes from
    /// someone else's. Paths whose post-image a write through turnback
    /// already recorded keep it. Sealing twice is harmless.
    pub fn seal(&mut self, turn: &TurnId) -> Result<usize> {
        if !self.has_store() {
            self.turn(turn)?;
        }
        let _guard = self.begin_mutation()?;
        let first = self.turn(turn)?.first_seq;
        self.seal_turn(first)
    }

    fn seal_turn(&mut self, first_seq: u64) -> Result<usize> {
        let Some(t) = self.index.turn_at(first_seq)? else {
            return Ok(0);
        };
        let id = t.id.clone();
        let paths: Vec<RelPath> = t
            .files
            .iter()
            .map(|c| c.entry.path.clone())
            .filter(|p| !t.posts.contains_key(p))
            .collect();
        if paths.is_empty() {
            // Every path already has its post-image (writes through
            // turnback record them): nothing to hash, no record.
            return Ok(0);
        }
        let posts = self.hash_states(&paths, true)?;
        let n = posts.len();
        self.append(Op::Seal { turn: id, posts })?;
        Ok(n)
    }

    /// The current state of `rels` as hashes (nothing is stored). With
    /// `keyed` (post-images recorded under the store lock), each regular
    /// file's comes with its [`StatKey`] when that can be trusted later:
    /// its `ctime` before the file system's clock, read first (which sets
    /// the times of `tree-stamp`, so only under the lock), and its `fstat`
    /// the same before and after it was hashed.
    pub(crate) fn hash_states(&self, rels: &[RelPath], keyed: bool) -> Result<Vec<PostEntry>> {
        // No clock, no keys: the files are read again when compared.
        let clock = self
            .place
            .dirs
            .as_ref()
            .filter(|_| keyed)
            .and_then(|d| crate::tree::fs_clock(&d.store, &self.place.store_path).ok());
        let (entries, mut keys) = self.hash_entries(rels, clock)?;
        Ok(entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| PostEntry {
                post: match (post_of(&e.pre), keys.remove(&i)) {
                    (Post::File { sha256, .. }, Some(key)) => Post::File {
                        sha256,
                        stat: Some(key),
                    },
                    (post, _) => post,
                },
                path: e.path,
            })
            .collect())
    }

    /// The current state of `rels`, modes included, each file's blob id
    /// its bytes' hash (nothing is stored).
    pub(crate) fn current_entries(&self, rels: &[RelPath]) -> Result<Vec<FileEntry>> {
        Ok(self.hash_entries(rels, None)?.0)
    }

    /// [`Store::current_entries`], with the [`StatKey`] of each file (by
    /// its index) whose `ctime` is before `clock`.
    pub(crate) fn hash_entries(
        &self,
        rels: &[RelPath],
        clock: Option<i64>,
    ) -> Result<(Vec<FileEntry>, HashMap<usize, StatKey>)> {
        let collected = self.collect(rels, &HashSet::new(), Collect::State, None)?;
        let mut entries = collected.entries;
        let mut keys = HashMap::new();
        let mut walk = self.place.walk();
        for chunk in collected.files.chunks(OPEN_CHUNK) {
            let opened = self.open_files(&mut walk, &mut entries, chunk)?;
            let hashed: Vec<Result<Looked>> = crate::par::map(&opened, |(i, file)| {
                let look = || crate::sys::fs::fstat(file).ok().map(|st| StatKey::of(&st));
                let before = clock.and_then(|_| look());
                let mut h = pack::HashingReader::new(file);
                io::copy(&mut h, &mut io::sink())
                    .ctx("read", self.place.root.join(entries[*i].path.as_path()))?;
                let key = before
                    .filter(|k| clock.is_some_and(|c| k.ctime < c) && look().as_ref() == Some(k));
                Ok(Looked {
                    i: *i,
                    id: h.finish().0,
                    key,
                })
            });
            for r in hashed {
                let Looked { i, id, key } = r?;
                if let Pre::File { blob, .. } = &mut entries[i].pre {
                    *blob = id;
                }
                if let Some(k) = key {
                    keys.insert(i, k);
                }
            }
        }
        Ok((entries, keys))
    }

    /// Saves the current state of `rels` (bytes included, whatever their
    /// size) in a durable `saved` record before an operation changes them.
    /// A regular file with no other name is kept aside rather than read
    /// where the store's file system allows and `expect` says its bytes
    /// need no read (see [`crate::aside`]); `expect: None` reads every
    /// file. Returns the record's seq; the states are in the index
    /// (`index.saved`).
    pub(crate) fn save_states(
        &mut self,
        rels: &[RelPath],
        expect: Option<&dyn Fn(&RelPath) -> Expect>,
    ) -> Result<u64> {
        let seq = self.index.last_seq + 1;
        let store = match expect.filter(|_| crate::sys::KEEP_ASIDE) {
            Some(_) => Some(
                crate::sys::dup(&self.place.dirs().store)
                    .ctx("open", self.place.store_path.clone())?,
            ),
            None => None,
        };
        let mut keeping = expect.zip(store).map(|(expect, store)| Keeping {
            keeper: aside::Keeper::new(store, seq),
            expect,
            off: false,
        });
        let saved = self.save_keeping(rels, seq, keeping.as_mut());
        match (saved, keeping) {
            (Ok(s), _) => Ok(s),
            (Err(e), Some(k)) => {
                k.keeper.abandon();
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    fn save_keeping(
        &mut self,
        rels: &[RelPath],
        seq: u64,
        mut keeping: Option<&mut Keeping>,
    ) -> Result<u64> {
        let mut collected = self.collect(
            rels,
            &HashSet::new(),
            Collect::State,
            keeping.as_deref_mut(),
        )?;
        // The other names of a hard-linked file are saved too, so reversing
        // the operation makes them one file again (the files with more than
        // one name were noted as they were looked at).
        let linked = std::mem::take(&mut collected.linked);
        let names = crate::links::names_of(&self.place, linked, rels)?;
        if !names.found.is_empty() {
            let more = self.collect(&names.found, &HashSet::new(), Collect::State, None)?;
            let at = collected.entries.len();
            collected.entries.extend(more.entries);
            collected
                .files
                .extend(more.files.into_iter().map(|(i, size)| (at + i, size)));
        }
        if let Some(k) = keeping.filter(|k| k.keeper.any()) {
            k.keeper.sync().ctx(
                "flush the files kept in",
                self.place.store_path.join(aside::ASIDE_DIR),
            )?;
        }
        let mut entries = collected.entries;
        let pack_name = pack::pack_name(seq);
        let (blobs, _) = self.store_blobs(&mut entries, collected.files, &pack_name)?;
        // Moved into the record, then into the index: one copy of every
        // path's state (memory grows with the paths).
        let appended = self.append(Op::Saved {
            pack: (!blobs.is_empty()).then_some(pack_name),
            blobs,
            files: entries,
        })?;
        debug_assert_eq!(appended, seq);
        Ok(appended)
    }

    /// `rels`, each spelled as the turn first captured it when it names the
    /// same file under another spelling (another case or Unicode
    /// normalization, on a file system that does not tell them apart): the
    /// identity is the file (`st_dev`, `st_ino`), the key only finds the
    /// candidates (`crate::names::identity_key`).
    /// Only where such file systems are the default (macOS, Windows): on
    /// Linux (ext4's casefold directories aside) it costs nothing. It keys
    /// every path the turn captured, so a capture into a turn of n paths
    /// costs O(n) there.
    fn first_spellings(&self, already: &HashSet<RelPath>, rels: &[RelPath]) -> Vec<RelPath> {
        if !crate::sys::CASE_INSENSITIVE_DEFAULT || rels.iter().all(|r| already.contains(r)) {
            return rels.to_vec();
        }
        let keyed: HashMap<String, &RelPath> = already
            .iter()
            .map(|p| (crate::names::identity_key(&p.to_string()), p))
            .collect();
        let ident = |p: &RelPath| {
            crate::sys::fs::statat(
                &self.place.root_fd,
                p.as_path(),
                crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .ok()
            .map(|st| (crate::sys::dev(&st), st.st_ino))
        };
        rels.iter()
            .map(
                |r| match keyed.get(&crate::names::identity_key(&r.to_string())) {
                    Some(&first)
                        if first != r && ident(first).is_some() && ident(first) == ident(r) =>
                    {
                        first.clone()
                    }
                    _ => r.clone(),
                },
            )
            .collect()
    }

    /// Looks at each path without following symlinks and says what it is.
    /// Regular files are opened (their bytes are read by the caller).
    fn collect(
        &self,
        rels: &[RelPath],
        already: &HashSet<RelPath>,
        mode: Collect,
        mut keeping: Option<&mut Keeping>,
    ) -> Result<Collected> {
        let mut out = Collected::default();
        out.entries.reserve(rels.len());
        let mut seen: HashSet<RelPath> = HashSet::new();
        // Files to keep aside, with how many directories they are in: kept
        // a run at a time, which holds the runs' directories open.
        let mut to_keep: Vec<Pending> = Vec::new();
        let mut to_keep_dirs = 0;
        // Directory handles on the way to the current path, reached
        // without following symlinks.
        let mut walk = self.place.walk();
        // `rels`, then the paths links captured earlier lead to.
        let mut queue: Vec<RelPath> = Vec::new();
        let mut qi = 0;
        while qi < rels.len() + queue.len() {
            let rel = match rels.get(qi) {
                Some(r) => r.clone(),
                None => queue[qi - rels.len()].clone(),
            };
            qi += 1;
            if already.contains(&rel) {
                // A link captured earlier in the turn (as absent, or pointing
                // elsewhere) may now lead to a file the turn has not
                // captured: a write through it lands there.
                match self.resolve(rel.as_path(), true) {
                    Ok(t) if t != rel => queue.push(t),
                    Ok(_) | Err(Error::BadPath { .. }) => {}
                    Err(e) => return Err(e),
                }
                if !out.already.contains(&rel) {
                    out.already.push(rel);
                }
                continue;
            }
            if !seen.insert(rel.clone()) {
                continue;
            }
            // A name this file system cannot hold (a store made on Linux,
            // read on Windows) is never looked up: it would reach a device,
            // a stream or another file. Its state is unknown here.
            if let Some(reason) = rel.reason_not_here() {
                out.entries.push(FileEntry {
                    path: rel,
                    pre: Pre::Skipped { reason, size: 0 },
                });
                continue;
            }
            // Walk to the parent, from the directories held for the path
            // before (paths in order open each directory once). On capture,
            // directories the write would have to create are recorded as
            // absent, so a rewind removes them.
            let ancestors = rel.ancestors();
            let reach = walk.parent_of(&rel, false).ctx(
                "open directory",
                self.place.root.join(
                    rel.parent()
                        .map(|p| p.as_path().to_owned())
                        .unwrap_or_default(),
                ),
            )?;
            let dir = match reach {
                Reach::Open(d) => Some(d),
                Reach::Missing { at } => {
                    if mode == Collect::Capture {
                        for a in &ancestors[at..] {
                            if !already.contains(a) && seen.insert(a.clone()) {
                                out.entries.push(FileEntry {
                                    path: a.clone(),
                                    pre: Pre::Absent,
                                });
                            }
                        }
                    }
                    None
                }
                // A file or symlink where a directory would go: nothing can
                // be at the path.
                Reach::NotDir { .. } => None,
            };
            let Some(dir) = dir else {
                out.entries.push(FileEntry {
                    path: rel,
                    pre: Pre::Absent,
                });
                continue;
            };
            let shown = self.place.root.join(rel.as_path());
            let name = rel.file_name();
            let st = fsx::lstat_at(dir, name).ctx("look at", &shown)?;
            if let Some(st) = &st {
                out.linked.note(&rel, st);
            }
            let pre = match st.as_ref().map_or(Node::Missing, fsx::node_of) {
                Node::Missing => Pre::Absent,
                Node::Dir if mode == Collect::Capture => {
                    return Err(Error::IsDirectory {
                        path: rel.to_string(),
                    });
                }
                Node::Dir => {
                    let st = crate::sys::fs::statat(
                        dir,
                        name,
                        crate::sys::fs::AtFlags::SYMLINK_NOFOLLOW,
                    )
                    .ctx("look at", &shown)?;
                    Pre::Dir {
                        mode: crate::sys::mode(&st) & 0o7777,
                    }
                }
                Node::Other => {
                    let (st_mode, _) = fsx::mode_owner_at(dir, name).ctx("look at", &shown)?;
                    crate::special::pre_of_special(st_mode)
                }
                Node::Symlink => {
                    let target = fsx::read_link(dir, name).ctx("read symlink", &shown)?;
                    match target.into_string() {
                        Ok(target) => {
                            if mode == Collect::Capture {
                                // A write through the link changes its target:
                                // capture that too, when it is inside the root.
                                match self.resolve(rel.as_path(), true) {
                                    Ok(t) if t != rel => queue.push(t),
                                    Ok(_) => {}
                                    Err(Error::BadPath { .. }) => {
                                        out.links_outside.push(rel.clone())
                                    }
                                    Err(e) => return Err(e),
                                }
                            }
                            Pre::Symlink { target }
                        }
                        Err(_) => Pre::Skipped {
                            reason: "symlink target is not valid UTF-8".into(),
                            size: 0,
                        },
                    }
                }
                Node::File { size, .. }
                    if mode == Collect::Capture && size > self.options.max_file_size =>
                {
                    Pre::Skipped {
                        reason: format!(
                            "larger than the {}-byte cap (--max-file-size)",
                            self.options.max_file_size
                        ),
                        size,
                    }
                }
                Node::File { size, mode: bits } => {
                    let st = st.as_ref().filter(|st| crate::sys::nlink(st) == 1);
                    // The hash it would be kept with, if any: kept aside
                    // below, once a run of files is collected.
                    let keep = match (keeping.as_deref(), st) {
                        (Some(k), Some(st)) if mode == Collect::State && !k.off => {
                            match (k.expect)(&rel) {
                                Expect::Nothing => Some((None, None)),
                                Expect::Hash => None,
                                Expect::Post(blob, key) => {
                                    (StatKey::of(st) == key).then_some((Some(blob), Some(key)))
                                }
                            }
                        }
                        _ => None,
                    };
                    if let Some((blob, look)) = keep {
                        let dir = walk.shared();
                        if !to_keep
                            .last()
                            .is_some_and(|t: &Pending| same_dir(t.dir.as_deref(), dir.as_deref()))
                        {
                            to_keep_dirs += 1;
                        }
                        to_keep.push(Pending {
                            at: out.entries.len(),
                            dir,
                            blob,
                            look,
                            size,
                        });
                    } else {
                        out.files.push((out.entries.len(), size));
                    }
                    // Filled in once the blob is hashed.
                    Pre::File {
                        blob: BlobId([0; 32]),
                        size,
                        mode: bits,
                        link: None,
                    }
                }
            };
            out.entries.push(FileEntry { path: rel, pre });
            if let Some(k) = keeping.as_deref_mut()
                && (to_keep.len() >= KEEP_RUN || to_keep_dirs >= KEEP_RUN_DIRS)
            {
                self.keep_pending(k, &mut to_keep, &mut out);
                to_keep_dirs = 0;
            }
        }
        if let Some(k) = keeping {
            self.keep_pending(k, &mut to_keep, &mut out);
            out.files.sort_unstable_by_key(|&(at, _)| at);
        }
        Ok(out)
    }

    /// Keeps the files of `pending` aside, on every core (see
    /// [`aside::Keeper::keep_all`]): a file kept gets its entry's `aside`
    /// state, a file not kept is read.
    fn keep_pending(&self, k: &mut Keeping, pending: &mut Vec<Pending>, out: &mut Collected) {
        let seq = self.index.last_seq + 1;
        let files: Vec<aside::ToKeep> = pending
            .iter()
            .map(|p| aside::ToKeep {
                dir: p.dir.as_deref().unwrap_or(&self.place.root_fd),
                name: out.entries[p.at].path.file_name(),
                look: p.look,
            })
            .collect();
        let results = k.keeper.keep_all(&files);
        drop(files);
        for (p, kept) in pending.drain(..).zip(results) {
            match kept {
                Ok(kept) => {
                    out.entries[p.at].pre = Pre::Aside {
                        seq,
                        n: kept.n,
                        size: kept.size,
                        mode: kept.mode,
                        blob: p.blob,
                    }
                }
                Err(why) => {
                    k.off |= matches!(why, aside::NotKept::None);
                    out.files.push((p.at, p.size));
                }
            }
        }
    }

    /// Hashes and compresses `files` into one new pack (small files in
    /// parallel, large ones streamed), fills in their blob ids, and makes the
    /// pack durable. Blobs already stored are not written again.
    fn store_blobs(
        &self,
        entries: &mut [FileEntry],
        files: Vec<(usize, u64)>,
        pack_name: &str,
    ) -> Result<(Vec<StoredBlob>, u64)> {
        if files.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let packs = &self.place.dirs().packs;
        let mut writer = PackWriter::create(&self.place.dirs().store, &self.place.store_path)?;
        let result = self.fill_pack(&mut writer, entries, files);
        match result {
            Ok((blobs, stored)) if !blobs.is_empty() => {
                writer.commit(packs, pack_name)?;
                Ok((blobs, stored))
            }
            Ok(done) => {
                writer.abandon();
                Ok(done)
            }
            Err(e) => {
                writer.abandon();
                Err(e)
            }
        }
    }

    /// Opens the regular files of `chunk` for reading, never through a
    /// symlink, and updates their entries' size and mode from `fstat`.
    fn open_files(
        &self,
        walk: &mut DirStack,
        entries: &mut [FileEntry],
        chunk: &[(usize, u64)],
    ) -> Result<Vec<(usize, File)>> {
        let mut out = Vec::with_capacity(chunk.len());
        let changed = |shown: PathBuf| Error::Io {
            op: "capture",
            path: shown,
            source: io::Error::other("it changed while being captured; try again"),
        };
        for &(i, _) in chunk {
            let rel = &entries[i].path;
            let shown = self.place.root.join(rel.as_path());
            let dir = match walk.parent_of(rel, false).ctx("open directory", &shown)? {
                Reach::Open(d) => d,
                _ => return Err(changed(shown)),
            };
            let (file, st) = fsx::open_file_stat(dir, rel.file_name()).ctx("open", &shown)?;
            match (fsx::node_of(&st), &mut entries[i].pre) {
                (
                    Node::File { size, mode },
                    Pre::File {
                        size: s,
                        mode: m,
                        link,
                        ..
                    },
                ) => {
                    (*s, *m) = (size, mode);
                    *link = crate::links::link_of(&st);
                    out.push((i, file));
                }
                _ => return Err(changed(shown)),
            }
        }
        Ok(out)
    }

    fn fill_pack(
        &self,
        writer: &mut PackWriter,
        entries: &mut [FileEntry],
        files: Vec<(usize, u64)>,
    ) -> Result<(Vec<StoredBlob>, u64)> {
        let level = self.options.compression_level;
        let mut blobs: Vec<StoredBlob> = Vec::with_capacity(files.len());
        let mut fresh: HashSet<BlobId> = HashSet::new();
        let mut stored = 0u64;
        let (small, large): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|(_, size)| *size <= WHOLE_READ_LIMIT);
        let shown =
            |i: usize, entries: &[FileEntry]| self.place.root.join(entries[i].path.as_path());
        let set_blob = |entries: &mut [FileEntry], i: usize, id: BlobId, len: u64| {
            if let Pre::File { blob, size, .. } = &mut entries[i].pre {
                *blob = id;
                *size = len;
            }
        };
        // Bounded memory and descriptors: chunks of at most OPEN_CHUNK files
        // or 64 MiB.
        let mut chunks: Vec<&[(usize, u64)]> = Vec::new();
        let (mut start, mut bytes) = (0, 0u64);
        for (k, (_, size)) in small.iter().enumerate() {
            if k > start && (k - start >= OPEN_CHUNK || bytes + size > 64 << 20) {
                chunks.push(&small[start..k]);
                (start, bytes) = (k, 0);
            }
            bytes += size;
        }
        if start < small.len() {
            chunks.push(&small[start..]);
        }
        // Directories on the way to the files, each opened once.
        let mut walk = self.place.walk();
        // Packs holding the previous versions deltas are made against, each
        // opened once (a handful: the turns' packs).
        let mut base_packs: HashMap<String, File> = HashMap::new();
        for chunk in chunks {
            let opened = self.open_files(&mut walk, entries, chunk)?;
            for (i, _) in &opened {
                let size = match &entries[*i].pre {
                    Pre::File { size, .. } => *size,
                    _ => continue,
                };
                let Some((_, loc)) = self.delta_base_loc(&entries[*i].path, size) else {
                    continue;
                };
                if !base_packs.contains_key(&*loc.pack) {
                    if base_packs.len() >= 16 {
                        base_packs.clear();
                    }
                    // A pack that is missing or not a regular file only
                    // means no delta (as a damaged base does); any other
                    // error (out of descriptors, I/O) fails the command.
                    match self.open_pack(&loc.pack) {
                        Ok(f) => {
                            base_packs.insert(loc.pack.to_string(), f);
                        }
                        Err(Error::Io { source, .. })
                            if matches!(
                                source.kind(),
                                io::ErrorKind::NotFound | io::ErrorKind::Other
                            ) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            let base_packs = &base_packs;
            let known = &self.index.blobs;
            let entries_ro: &[FileEntry] = entries;
            let done: Vec<Result<Hashed, (usize, io::Error)>> =
                crate::par::map(&opened, |(i, file)| {
                    let size = match &entries_ro[*i].pre {
                        Pre::File { size, .. } => *size,
                        _ => 0,
                    };
                    let mut data = Vec::with_capacity(size.min(WHOLE_READ_LIMIT) as usize);
                    file.take(WHOLE_READ_LIMIT + 1)
                        .read_to_end(&mut data)
                        .map_err(|e| (*i, e))?;
                    let id = pack::hash_bytes(&data);
                    if known.contains_key(&id) {
                        return Ok(Hashed {
                            i: *i,
                            id,
                            len: data.len() as u64,
                            frame: None,
                            base: None,
                        });
                    }
                    let (frame, base) = match self.delta_base(
                        &entries_ro[*i].path,
                        data.len() as u64,
                        base_packs,
                    ) {
                        Some((base, base_bytes)) => (
                            pack::compress_delta(&data, &base_bytes, level).map_err(|e| (*i, e))?,
                            Some(base),
                        ),
                        None => (
                            pack::compress_whole(&data, level).map_err(|e| (*i, e))?,
                            None,
                        ),
                    };
                    Ok(Hashed {
                        i: *i,
                        id,
                        len: data.len() as u64,
                        frame: Some(frame),
                        base,
                    })
                });
            for r in done {
                let Hashed {
                    i,
                    id,
                    len,
                    frame,
                    base,
                } = r.map_err(|(i, e)| Error::Io {
                    op: "read",
                    path: shown(i, entries),
                    source: e,
                })?;
                set_blob(entries, i, id, len);
                if let Some(frame) = frame
                    && let Some(blob) = append_once(writer, &mut fresh, id, len, &frame, base)?
                {
                    stored += blob.len;
                    blobs.push(blob);
                }
            }
        }
        for one in large.chunks(1) {
            let Some((i, file)) = self.open_files(&mut walk, entries, one)?.pop() else {
                continue;
            };
            let (id, len, blob) =
                append_streamed(writer, &mut fresh, &self.index.blobs, &file, level)?;
            set_blob(entries, i, id, len);
            if let Some(blob) = blob {
                stored += blob.len;
                blobs.push(blob);
            }
        }
        Ok((blobs, stored))
    }

    /// Captures `path` in `turn`, then replaces its contents with `bytes`
    /// (temporary file and rename: the file is never seen half-written). A
    /// symlink inside the root is written through, like an editor does; one
    /// pointing outside is refused. A file with other names (hard links)
    /// keeps plain-write semantics inside the project: every name is
    /// captured, then re-linked to the new file, so all of them see the new
    /// bytes; names outside the project keep the old ones and are listed in
    /// [`CaptureReport::hard_links_outside`].
    pub fn write(
        &mut self,
        turn: &TurnId,
        label: Option<&str>,
        path: impl AsRef<Path>,
        bytes: &[u8],
    ) -> Result<CaptureReport> {
        let rel = self.resolve(path.as_ref(), false)?;
        let target = self.resolve(rel.as_path(), true)?;
        let _guard = self.begin_mutation()?;
        // The other names of a hard-linked file see the new bytes too: they
        // are captured with it and re-linked to the new file.
        let names = crate::links::other_names(&self.place, std::slice::from_ref(&target))?;
        // The post-image goes in the same record as the pre-image; should
        // the write below fail, the file keeps its pre-image, which a rewind
        // treats as a change since the turn and saves before replacing.
        // Directories the write will create are what the turn leaves there.
        let mut posts: Vec<PostEntry> = self
            .dirs_to_create(&target)?
            .into_iter()
            .map(|path| PostEntry {
                path,
                post: Post::Dir,
            })
            .collect();
        let sha256 = pack::hash_bytes(bytes);
        for path in std::iter::once(&target).chain(&names.found) {
            posts.push(PostEntry {
                path: path.clone(),
                // Written just now: its look could not be trusted later.
                post: Post::File { sha256, stat: None },
            });
        }
        let rels: Vec<RelPath> = std::iter::once(rel).chain(names.found.clone()).collect();
        let mut report = self.capture_locked(turn, label, &rels, posts)?;
        let lost = self.write_file(&target, bytes)?;
        report
            .warnings
            .extend(lost.into_iter().map(|w| format!("{target}: {w}")));
        crate::links::relink(&self.place, &target, &names.found)?;
        Ok(report)
    }

    /// The ancestors of `rel` that are not directories now (a write to
    /// `rel` creates them), shallowest first. Symlinks are not followed.
    pub(crate) fn dirs_to_create(&self, rel: &RelPath) -> Result<Vec<RelPath>> {
        let mut dir = crate::sys::dup(&self.place.root_fd).ctx("open", &self.place.root)?;
        let ancestors = rel.ancestors();
        for (k, anc) in ancestors.iter().enumerate() {
            match fsx::open_subdir(&dir, anc.file_name()) {
                Ok(Some(d)) => dir = d,
                Ok(None) => return Ok(ancestors[k..].to_vec()),
                // A file or symlink in the way: the write fails there.
                Err(e)
                    if e.kind() == io::ErrorKind::NotADirectory
                        || e.raw_os_error() == Some(crate::sys::Errno::NOTDIR.raw_os_error()) =>
                {
                    return Ok(Vec::new());
                }
                Err(e) => return Err(e).ctx("open directory", self.place.root.join(anc.as_str())),
            }
        }
        Ok(Vec::new())
    }

    /// Replaces `rel` by `bytes`, keeping the mode and extended attributes
    /// of the file there; returns what of those could not be kept.
    fn write_file(&self, rel: &RelPath, bytes: &[u8]) -> Result<Vec<String>> {
        let shown = self.place.root.join(rel.as_path());
        let mut dir = crate::sys::dup(&self.place.root_fd).ctx("open", &self.place.root)?;
        for anc in rel.ancestors() {
            let (d, created) = fsx::ensure_subdir(&dir, anc.file_name())
                .ctx("create directory", self.place.root.join(anc.as_path()))?;
            if created {
                // The new directory's entry in its parent must be durable
                // before anything in it is.
                let parent = self.place.root.join(anc.as_path());
                let parent = parent.parent().unwrap_or(&self.place.root);
                fsx::fsync(&dir).ctx("fsync", parent)?;
            }
            dir = d;
        }
        fsx::sweep_stale_temps(&dir);
        let name = rel.file_name();
        let mode = match fsx::node_at(&dir, name).ctx("look at", &shown)? {
            Node::File { mode, .. } => mode,
            Node::Dir => {
                return Err(Error::IsDirectory {
                    path: rel.to_string(),
                });
            }
            _ => 0o644,
        };
        let (file, temp, lost) = fsx::create_temp_replacing(&dir, name, mode)
            .ctx("create a temporary file beside", &shown)?;
        let tmp = temp.beside(name);
        let mut w = BufWriter::new(file);
        let res = w
            .write_all(bytes)
            .and_then(|()| w.flush())
            .ctx("write", &shown)
            .and_then(|()| {
                // fsync, not fdatasync: the mode set on the temporary file
                // is metadata, which fdatasync need not make durable.
                let f = w.get_ref();
                fsx::fsync(f).ctx("fsync", &shown)
            })
            .and_then(|()| fsx::rename(&dir, &tmp, name).ctx("replace", &shown));
        if let Err(e) = res {
            let _ = fsx::unlink(&dir, &tmp);
            return Err(e);
        }
        // The rename is durable only once its directory is: without this, a
        // power loss after the command answered could bring back the old
        // bytes.
        let parent = shown.parent().unwrap_or(&self.place.root);
        fsx::fsync(&dir).ctx("fsync", parent)?;
        Ok(lost)
    }
}
