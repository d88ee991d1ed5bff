use super::covered::WINDOW;
use super::*;
use crate::id::{BlobId, TurnId};
use crate::log::LOG_FILE;
use crate::log::Pre;
use crate::pack::BlobLoc;
use crate::path::RelPath;
use crate::{NoProgress, RevertOptions, RewindOptions, Store};
use std::path::{Path, PathBuf};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn t(id: &str) -> TurnId {
    TurnId::new(id).expect("valid turn id")
}

/// A store whose log has every kind of record: captures of files,
/// symlinks and absent paths, seals, post-images, saved records, a
/// rewind, an undo, a redo, a revert, snapshots and a delta.
fn rich_store() -> std::result::Result<(tempfile::TempDir, Store), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    std::fs::write(root.join("a.txt"), "a1\n")?;
    std::fs::write(root.join("big.txt"), "line\n".repeat(2000))?;
    #[cfg(unix)]
    std::os::unix::fs::symlink("a.txt", root.join("link"))?;
    std::fs::write(root.join("h1"), "one file, two names\n")?;
    std::fs::hard_link(root.join("h1"), root.join("h2"))?;
    let mut store = Store::open(root)?;
    store.snapshot(&t("s0"), Some("before"), false, &NoProgress)?;
    store.write(&t("t1"), Some("first"), "a.txt", b"a2\n")?;
    store.write(&t("t1"), None, "new/deep.txt", b"created\n")?;
    store.capture(&t("t1"), None, "link")?;
    store.write(&t("t1"), None, "h1", b"both names\n")?;
    store.write(
        &t("t2"),
        Some("second"),
        "big.txt",
        "line\n".repeat(2001).as_bytes(),
    )?;
    store.seal(&t("t2"))?;
    // Its pre-image now is the bytes t2 wrote: stored as a delta.
    store.write(&t("t2b"), None, "big.txt", b"short\n")?;
    store.create_dir(&t("t3"), None, "made/here")?;
    store.remove_file(&t("t3"), None, "a.txt")?;
    store.rewind(&t("t3"), &RewindOptions::default())?;
    store.undo()?;
    store.redo()?;
    store.write(&t("t4"), None, "b.txt", b"b\n")?;
    store.revert(&t("t1"), &RevertOptions::default())?;
    store.undo()?;
    std::fs::write(root.join("c.txt"), "by a command\n")?;
    store.snapshot(&t("s0"), None, true, &NoProgress)?;
    Ok((dir, store))
}

fn log_path(store: &Store) -> PathBuf {
    store.place.store_path.join(LOG_FILE)
}

fn index_path(store: &Store) -> PathBuf {
    store.place.store_path.join(INDEX_FILE)
}

fn ident_of(path: &Path) -> std::io::Result<(u64, u64)> {
    let st = crate::sys::fs::fstat(&std::fs::File::open(path)?)?;
    Ok((crate::sys::dev(&st), st.st_ino))
}

/// The index's bytes, to compare two indexes (equal indexes give equal
/// bytes).
fn bytes_of(index: &Index) -> Vec<u8> {
    encode(index, &Covered::none(index.consumed)).expect("every base is a known blob")
}

/// The checkpoint of `index` covering `covered`.
fn bytes_of_at(index: &Index, covered: &Covered) -> Vec<u8> {
    encode(index, covered).expect("every base is a known blob")
}

/// The index the whole log gives, with no checkpoint.
fn from_log_alone(root: &Path, store: &Store) -> std::result::Result<Index, crate::Error> {
    let _ = std::fs::remove_file(index_path(store));
    let mut fresh = Store::open(root)?;
    let _ = std::fs::remove_file(index_path(store));
    // Taken, so that dropping the store leaves no checkpoint either.
    Ok(std::mem::take(&mut fresh.index))
}

/// Writes a checkpoint of `store`'s whole log as it is now.
fn checkpoint_now(store: &Store) -> std::result::Result<Covered, Box<dyn std::error::Error>> {
    let path = log_path(store);
    let log = File::open(&path)?;
    let ident = ident_of(&path)?;
    let full = Store::open(store.root())?;
    write(&store.place.dirs().store, &full.index, &log, ident);
    Ok(Covered::of(&log, ident, full.index.consumed).ok_or("read the log")?)
}

/// The checkpoint `load` finds for the store's log as it is now.
fn load_now(store: &Store) -> std::io::Result<Option<Index>> {
    let path = log_path(store);
    let log = File::open(&path)?;
    let size = log.metadata()?.len();
    Ok(load(
        &store.place.dirs().store,
        &log,
        ident_of(&path)?,
        size,
    ))
}

#[test]
fn a_checkpoint_gives_back_the_index_the_whole_log_gives() -> TestResult {
    let (_dir, store) = rich_store()?;
    let full = Store::open(store.root())?;
    let covered = Covered {
        dev: 1,
        ino: 2,
        len: full.index.consumed,
        head: [3; 32],
        tail: [4; 32],
    };
    let bytes = encode(&full.index, &covered).ok_or("encodes")?;
    let (back_covered, back) = decode(&bytes).ok_or("a fresh checkpoint decodes")?;
    assert_eq!(back_covered, covered);
    assert_eq!(
        encode(&back, &covered),
        Some(bytes),
        "decode is the inverse of encode"
    );
    assert_eq!(back.turns.len(), full.index.turns.len());
    assert!(
        back.turns
            .iter()
            .collect::<crate::Result<Vec<_>>>()?
            .iter()
            .flat_map(|t| &t.files)
            .any(|c| matches!(c.entry.pre, Pre::File { link: Some(_), .. })),
        "a hard link's key is kept"
    );
    assert!(!back.saved.is_empty() && !back.ops.is_empty() && !back.undone.is_empty());
    assert_eq!(
        back.reversed, full.index.reversed,
        "the undone applications are kept"
    );
    assert!(!back.reversed.is_empty());
    assert!(
        back.blobs.iter().any(|(_, l)| l.base.is_some()),
        "a delta is kept"
    );
    Ok(())
}

#[test]
fn opening_from_a_checkpoint_then_the_rest_of_the_log_equals_reading_it_all() -> TestResult {
    let (dir, mut store) = rich_store()?;
    // Compacted first, so the gc after the rewind below has nothing to
    // drop and only appends.
    store.gc(&crate::GcOptions::default())?;
    // A checkpoint of the log as it is now, then more records after it.
    let covered = checkpoint_now(&store)?;
    store.write(&t("t5"), None, "d.txt", b"d\n")?;
    store.rewind(&t("t4"), &RewindOptions::default())?;
    let loaded = load_now(&store)?.ok_or("the checkpoint matches")?;
    assert_eq!(loaded.consumed, covered.len);
    let from_checkpoint = Store::open(dir.path())?;
    assert!(index_path(&store).exists());
    let from_log = from_log_alone(dir.path(), &store)?;
    assert_eq!(bytes_of(&from_checkpoint.index), bytes_of(&from_log));
    // The counters automatic gc reads, recounted after the decode.
    let counters = |x: &Index| (x.live_count, x.stored_bytes);
    assert_eq!(counters(&from_checkpoint.index), counters(&from_log));
    assert_eq!(from_log.live_count, from_log.live()?.len());
    Ok(())
}

#[test]
fn a_new_checkpoint_merges_the_old_rows_with_later_blobs_and_their_bases() -> TestResult {
    let (dir, mut store) = rich_store()?;
    let a = "one line of a file stored whole\n".repeat(400);
    let b = format!("{a}and one more\n");
    store.write(&t("t5"), None, "delta.txt", a.as_bytes())?;
    store.write(&t("t6"), None, "delta.txt", b.as_bytes())?;
    checkpoint_now(&store)?;
    // Blobs whose ids fall among the table's rows, and a pre-image stored
    // as a delta against a blob of the table.
    for n in 0..300 {
        store.write(
            &t("t7"),
            None,
            format!("m/{n}.txt"),
            format!("{n}\n").as_bytes(),
        )?;
    }
    store.write(&t("t7"), None, "delta.txt", b"short\n")?;
    let from_checkpoint = Store::open(dir.path())?;
    let x = &from_checkpoint.index;
    assert!(x.blobs.table().is_some(), "opened from the checkpoint");
    let hash = |s: &str| crate::pack::hash_bytes(s.as_bytes());
    let (id_a, id_b) = (hash(&a), hash(&b));
    assert!(x.blobs.table().and_then(|t| t.find(&id_a)).is_some());
    assert_eq!(x.blobs.get(&id_b).and_then(|l| l.base), Some(id_a));
    let from_log = from_log_alone(dir.path(), &store)?;
    assert_eq!(bytes_of(x), bytes_of(&from_log));
    let (_, back) = decode(&bytes_of(x)).ok_or("decodes")?;
    assert_eq!(back.blobs.get(&id_b).and_then(|l| l.base), Some(id_a));
    Ok(())
}

#[test]
fn a_store_that_appended_much_leaves_a_checkpoint_of_it_when_dropped() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut store = Store::open(dir.path())?;
    // One mutation appends more than a checkpoint is written after.
    let names: Vec<String> = (0..2000).map(|i| format!("d/file-{i:05}.txt")).collect();
    for n in &names {
        std::fs::create_dir_all(dir.path().join("d"))?;
        std::fs::write(dir.path().join(n), n)?;
    }
    let rels: Vec<&str> = names.iter().map(String::as_str).collect();
    store.capture_many(&t("many"), None, &rels)?;
    let log_len = std::fs::metadata(log_path(&store))?.len();
    assert!(log_len > WRITE_AFTER);
    let index_file = index_path(&store);
    assert!(!index_file.exists(), "none while the store is open");
    drop(store);
    assert!(index_file.exists(), "written when the store was dropped");
    let covered = load_now(&Store::open(dir.path())?)?.ok_or("a checkpoint")?;
    assert_eq!(covered.consumed, log_len, "it covers the whole log");
    Ok(())
}

/// A store of its own in `data`, deferring its checkpoint or not, that
/// captured `files` new files in one record.
fn captured(
    data: &Path,
    defer_checkpoint: bool,
    files: usize,
) -> std::result::Result<(tempfile::TempDir, Store), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let options = crate::Options {
        defer_checkpoint,
        data_dir: Some(data.to_path_buf()),
        ..crate::Options::default()
    };
    let mut store = Store::open_with(dir.path(), options)?;
    std::fs::create_dir_all(dir.path().join("d"))?;
    let names: Vec<String> = (0..files).map(|i| format!("d/file-{i:05}.txt")).collect();
    for n in &names {
        std::fs::write(dir.path().join(n), n)?;
    }
    let rels: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(!store.maintenance_due(), "nothing appended yet");
    store.capture_many(&t("many"), None, &rels)?;
    Ok((dir, store))
}

/// A store that leaves its checkpoint for after the answer
/// (`Options::defer_checkpoint`, as the command line's) does not write the
/// checkpoint when dropped: it says maintenance is due, and `maintain`
/// writes it.
#[test]
fn a_store_that_defers_its_checkpoint_leaves_it_to_maintain() -> TestResult {
    let data = tempfile::tempdir()?;
    let (_dir, store) = captured(data.path(), true, 2000)?;
    assert!(std::fs::metadata(log_path(&store))?.len() > WRITE_AFTER);
    assert!(
        store.maintenance_due(),
        "the checkpoint is left for maintain"
    );
    let index_file = index_path(&store);
    drop(store);
    assert!(
        !index_file.exists(),
        "not written when the store was dropped"
    );
    let (_dir, mut store) = captured(data.path(), true, 2000)?;
    let index_file = index_path(&store);
    store.maintain()?;
    assert!(index_file.exists(), "written by maintain");
    assert!(!store.maintenance_due());
    let covered = load_now(&store)?.ok_or("a checkpoint")?;
    assert_eq!(covered.consumed, std::fs::metadata(log_path(&store))?.len());
    Ok(())
}

/// Left to the background, a checkpoint is written sooner: `maintain`
/// writes one once the store is `WRITE_AFTER_DEFERRED` behind, where a
/// store dropped in the foreground waits for `WRITE_AFTER`.
#[test]
fn a_checkpoint_left_to_maintain_is_written_sooner() -> TestResult {
    let data = tempfile::tempdir()?;
    for deferred in [false, true] {
        let (_dir, mut store) = captured(data.path(), deferred, 200)?;
        let len = std::fs::metadata(log_path(&store))?.len();
        assert!(
            (WRITE_AFTER_DEFERRED..WRITE_AFTER).contains(&len),
            "{len} bytes of log"
        );
        assert_eq!(store.maintenance_due(), deferred);
        let index_file = index_path(&store);
        if deferred {
            store.maintain()?;
            assert!(index_file.exists(), "written by maintain");
        } else {
            drop(store);
            assert!(!index_file.exists(), "not written below WRITE_AFTER");
        }
    }
    Ok(())
}

/// Where a checkpoint's tables are: `(at, width, rows)` of the turn, id,
/// record and blob tables, and where the head's block checks and its
/// own check are.
struct Layout {
    tables: [(usize, usize, usize); 4],
    /// Bytes of each table's key (its fences).
    kinds: [usize; 4],
    checks_at: usize,
    head_len: usize,
    bodies_at: usize,
}

fn layout(bytes: &[u8]) -> std::result::Result<Layout, Box<dyn std::error::Error>> {
    let (_, index) = decode(bytes).ok_or("a whole head")?;
    let turns = index.turns.frozen().ok_or("a turn table")?.len();
    let records = index
        .record_turn
        .table()
        .ok_or("a record table")?
        .rows
        .len();
    let blobs = index.blobs.table().ok_or("a blob table")?.len();
    let head_len = u64_at(bytes, MAGIC.len()) as usize;
    let mut at = head_len;
    let tables = [
        (TURN_ROW, turns),
        (16, turns),
        (16, records),
        (BLOB_ROW, blobs),
    ]
    .map(|(width, n)| {
        let t = (at, width, n);
        at += width * n;
        t
    });
    let kinds = [8, 8, 8, 32];
    let heads: usize = tables
        .iter()
        .zip(kinds)
        .map(|(t, key)| blocks(t.2) * (4 + key))
        .sum();
    Ok(Layout {
        tables,
        kinds,
        checks_at: head_len - 4 - heads,
        head_len,
        bodies_at: at,
    })
}

/// `bytes` with every block check and the head's check recomputed (a
/// checkpoint changed on purpose, still whole by its CRCs), its tables
/// where `l` says.
fn rechecked(l: &Layout, mut bytes: Vec<u8>) -> Vec<u8> {
    let mut at = l.checks_at;
    for ((start, width, n), key) in l.tables.into_iter().zip(l.kinds) {
        let rows = bytes[start..start + width * n].to_vec();
        for block in rows.chunks(table::BLOCK * width) {
            bytes[at..at + 4].copy_from_slice(&crc32fast::hash(block).to_le_bytes());
            bytes[at + 4..at + 4 + key].copy_from_slice(&block[..key]);
            at += 4 + key;
        }
    }
    let check = crc32fast::hash(&bytes[..l.head_len - 4]);
    bytes[l.head_len - 4..l.head_len].copy_from_slice(&check.to_le_bytes());
    bytes
}

/// Opens `bytes` as the store's checkpoint: the open trusts it (its head
/// is whole), answers as the log does, and verify names it as damaged.
fn answered_from_the_log(
    dir: &Path,
    store: &Store,
    bytes: &[u8],
    whole: &Index,
    what: &str,
) -> TestResult {
    let (_, alone) = decode(bytes).ok_or(format!("{what}: the head is whole"))?;
    assert!(!tables_whole(&alone), "{what}: found by the whole check");
    std::fs::write(index_path(store), bytes)?;
    let opened = Store::open(dir)?;
    assert!(
        opened.index.turns.frozen().is_some(),
        "{what}: the checkpoint is used"
    );
    assert_eq!(bytes_of(&opened.index), bytes_of(whole), "{what}");
    let ids: Vec<TurnId> = whole
        .turns
        .iter()
        .map(|t| t.map(|t| t.id.clone()))
        .collect::<crate::Result<_>>()?;
    let by_id = |x: &Index| -> crate::Result<Vec<_>> {
        ids.iter()
            .map(|id| Ok((x.turn(id)?.map(|t| t.first_seq), x.ended(id)?)))
            .collect()
    };
    let (found, expected) = (by_id(&opened.index)?, by_id(whole)?);
    assert_eq!(found, expected, "{what}: each turn found by its id");
    drop(opened);
    let report = crate::verify_root(dir)?;
    assert!(
        report.damage.iter().any(|d| matches!(
            d,
            crate::verify::Damage::Store { path, .. } if path.ends_with(INDEX_FILE)
        )),
        "{what}: verify names the checkpoint: {:?}",
        report.damage
    );
    Ok(())
}

/// How many of the checkpoint's turns `index` has decoded.
fn decoded(index: &Index) -> usize {
    index
        .turns
        .frozen()
        .map_or(0, |f| (0..f.len()).filter(|&i| f.decoded(i)).count())
}

#[test]
fn a_checkpoint_read_in_place_answers_as_the_whole_index() -> TestResult {
    let (dir, mut store) = rich_store()?;
    checkpoint_now(&store)?;
    // Records after the checkpoint: the tables and what was added since
    // are searched together.
    store.write(&t("t6"), None, "e.txt", b"e\n")?;
    store.write(&t("t1"), None, "a.txt", b"a3\n")?;
    // The index from the log alone first, the checkpoint put back
    // after: on Windows an open store holds its checkpoint open, and
    // Wine cannot delete a file another handle holds.
    let saved = std::fs::read(index_path(&store))?;
    let full = from_log_alone(dir.path(), &store)?;
    assert!(full.turns.frozen().is_none());
    std::fs::write(index_path(&store), saved)?;
    let lazy = std::mem::take(&mut Store::open(dir.path())?.index);
    assert!(lazy.turns.frozen().is_some(), "opened from the checkpoint");
    assert!(full.blobs.len() > 5 && lazy.blobs.len() == full.blobs.len());
    for (id, loc) in full.blobs.iter() {
        assert_eq!(lazy.blobs.get(&id), Some(loc.clone()), "{id}");
        assert_eq!(lazy.blobs.size_of(&id), Some(loc.size));
        assert_eq!(lazy.blobs.base_of(&id), loc.base);
        assert_eq!(lazy.delta_depth(&id), full.delta_depth(&id));
    }
    let absent = BlobId([0xab; 32]);
    assert!(!lazy.blobs.contains_key(&absent) && lazy.blobs.get(&absent).is_none());
    for seq in 0..=full.last_seq + 1 {
        assert_eq!(lazy.record_turn.get(&seq)?, full.record_turn.get(&seq)?);
    }
    assert_eq!(
        decoded(&lazy),
        1,
        "only t1, which a record after it changed"
    );
    for name in ["s0", "t1", "t2", "t2b", "t3", "t4", "t5", "t6", "nope"] {
        let id = t(name);
        let first = |x: &Index| x.turn(&id).map(|t| t.map(|t| t.first_seq));
        assert_eq!(first(&lazy)?, first(&full)?, "{name}");
        assert_eq!(lazy.ended(&id)?, full.ended(&id)?, "{name}");
    }
    for turn in &full.turns {
        let turn = turn?;
        let at = lazy
            .turn_at(turn.first_seq)?
            .ok_or("a turn by its first_seq")?;
        assert_eq!(at.id, turn.id);
        assert_eq!(at.files, turn.files);
    }
    assert!(lazy.turn_at(full.last_seq + 1)?.is_none());
    assert_eq!(lazy.live()?.len(), full.live()?.len());
    assert_eq!(lazy.live_count, full.live_count);
    assert_eq!(lazy.stored_bytes, full.stored_bytes);
    assert_eq!(bytes_of(&lazy), bytes_of(&full));
    Ok(())
}

#[test]
fn a_checkpoint_is_written_again_from_its_own_tables() -> TestResult {
    let (dir, store) = rich_store()?;
    checkpoint_now(&store)?;
    let bytes = std::fs::read(index_path(&store))?;
    let (covered, lazy) = decode(&bytes).ok_or("decodes")?;
    // Nothing decoded: the turns' bytes and the rows are copied.
    assert_eq!(bytes_of_at(&lazy, &covered), bytes);
    assert_eq!(decoded(&lazy), 0);
    // Every turn decoded, one changed: written from the decoded turns.
    let (_, mut changed) = decode(&bytes).ok_or("decodes")?;
    changed.turns.last_mut()?.ok_or("a turn")?.label = Some("changed".into());
    assert_ne!(bytes_of_at(&changed, &covered), bytes);
    let whole = from_log_alone(dir.path(), &store)?;
    for x in [&lazy, &whole] {
        let (_, back) = decode(&bytes_of_at(x, &covered)).ok_or("decodes")?;
        assert_eq!(bytes_of(&back), bytes_of(&whole));
    }
    Ok(())
}

#[test]
fn a_write_into_a_checkpointed_store_decodes_only_the_newest_turns() -> TestResult {
    let (dir, _store) = large_store()?;
    let mut store = Store::open(dir.path())?;
    assert_eq!(store.index.turns.frozen().map(FrozenTurns::len), Some(400));
    store.write(&t("new"), None, "f1.txt", b"new\n")?;
    store.write(&t("new"), None, "f2.txt", b"new\n")?;
    assert!(
        decoded(&store.index) <= 2,
        "{} decoded",
        decoded(&store.index)
    );
    assert_eq!(store.turns()?.len(), 401);
    let whole = from_log_alone(dir.path(), &store)?;
    assert_eq!(bytes_of(&store.index), bytes_of(&whole));
    Ok(())
}

#[test]
fn a_rewind_of_the_newest_turn_decodes_no_older_turn() -> TestResult {
    let (dir, store) = large_store()?;
    // The automatic gc check after the rewind runs (no limit reached).
    std::fs::write(
        store.store_dir().join(crate::config::CONFIG_FILE),
        "[retention]\nkeep_turns = 1000000\n",
    )?;
    let mut store = Store::open(dir.path())?;
    store.write(&t("new"), None, "f1.txt", b"new\n")?;
    let report = store.rewind(&t("new"), &crate::RewindOptions::default())?;
    assert_eq!(report.turns, vec![t("new")]);
    // f1.txt as t393 (the last of i % 7 == 1) left it.
    assert_eq!(std::fs::read(dir.path().join("f1.txt"))?, b"393\n");
    // The write sealed the turn before it (decoded); the plan, the
    // record and the gc check decoded none of the 399 older ones.
    assert!(
        decoded(&store.index) <= 1,
        "{} decoded",
        decoded(&store.index)
    );
    // Reopened: applying the rewind record decodes none either.
    let again = Store::open(dir.path())?;
    assert!(decoded(&again.index) <= 1, "{}", decoded(&again.index));
    assert_eq!(again.index.live_count, 400);
    // The oldest live turn's start is read without decoding it.
    assert!(again.gc_due(&again.config()?, u64::MAX)?, "t0 is too old");
    assert!(decoded(&again.index) <= 1, "{}", decoded(&again.index));
    assert_eq!(again.turns()?.len(), 400);
    let whole = from_log_alone(dir.path(), &again)?;
    assert_eq!(bytes_of(&again.index), bytes_of(&whole));
    Ok(())
}

#[test]
fn a_write_after_a_sealed_turn_decodes_no_turn_and_finds_bases_in_place() -> TestResult {
    let (dir, mut store) = large_store()?;
    // A capture turn the agent then wrote itself (no post-images), sealed
    // by the next turn, which is rewound: the newest live turn is sealed.
    store.capture_many(&t("big"), None, &["f1.txt", "f2.txt"])?;
    std::fs::write(dir.path().join("f1.txt"), "by the agent\n")?;
    store.write(&t("next"), None, "f3.txt", b"next\n")?;
    store.rewind(&t("next"), &crate::RewindOptions::default())?;
    // The checkpoint again, now holding "big" sealed.
    drop(from_log_alone(dir.path(), &store)?);
    let first = Store::open(dir.path())?;
    assert!(index_path(&first).exists());
    let mut store = Store::open(dir.path())?;
    store.write(&t("new"), None, "f5.txt", b"new\n")?;
    assert_eq!(decoded(&store.index), 0, "\"big\" is sealed: not decoded");
    let whole = from_log_alone(dir.path(), &store)?;
    let mut bases = Vec::new();
    let n = whole.path_blob.each_sorted(|path, blob| {
        bases.push((RelPath::from_bytes(path).expect("a valid path"), *blob));
    });
    assert_eq!((n, bases.len()), (7, 7));
    for (path, blob) in &bases {
        assert_eq!(store.index.path_blob.get(path), Some(*blob), "{path}");
    }
    let absent = RelPath::parse("f7.txt")?;
    assert_eq!(store.index.path_blob.get(&absent), None);
    assert_eq!(bytes_of(&store.index), bytes_of(&whole));
    Ok(())
}

/// A rewind's saved states are stored but are no path's delta base: the
/// path holds the pre-image it put back, the base it already had.
#[test]
fn a_rewind_leaves_each_delta_base_at_what_it_put_back() -> TestResult {
    use sha2::Digest;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("a.txt"), "before\n")?;
    let mut store = Store::open(dir.path())?;
    store.write(&t("t1"), None, "a.txt", b"by the agent\n")?;
    let a = RelPath::parse("a.txt")?;
    let pre = BlobId(sha2::Sha256::digest(b"before\n").into());
    assert_eq!(store.index.path_blob.get(&a), Some(pre));
    store.rewind(&t("t1"), &RewindOptions::default())?;
    let saved = BlobId(sha2::Sha256::digest(b"by the agent\n").into());
    assert!(
        store.index.blobs.get(&saved).is_some(),
        "the saved state is stored"
    );
    assert_eq!(store.index.path_blob.get(&a), Some(pre));
    // A replay of the log agrees.
    let whole = from_log_alone(dir.path(), &store)?;
    assert_eq!(whole.path_blob.get(&a), Some(pre));
    Ok(())
}

/// The blobs of a record of many are looked up in the table block by
/// block: those it has are left out (the first record of a blob wins),
/// those before, between and after its rows kept, and no block stays in
/// memory (listing every row neither).
#[test]
fn a_run_of_blobs_is_checked_against_the_table_without_keeping_it() -> TestResult {
    let (_dir, store) = large_store()?;
    let bytes = std::fs::read(index_path(&store))?;
    let (_, index) = decode(&bytes).ok_or("decodes")?;
    let table = index.blobs.table().ok_or("a blob table")?;
    let all = table.all();
    assert!(all.len() > 2 * table::BLOCK, "{} blobs", all.len());
    assert_eq!(table.rows.kept(), 0, "listing every row keeps no block");
    let fresh = |b: u8| (BlobId([b; 32]), all[0].1.clone());
    let mut run: Vec<(BlobId, BlobLoc)> = all.iter().step_by(3).cloned().collect();
    run.extend([fresh(0x00), fresh(0x7f), fresh(0xff)]);
    run.sort_unstable_by_key(|(id, _)| *id);
    table.retain_unknown(&mut run);
    let left: Vec<BlobId> = run.iter().map(|(id, _)| *id).collect();
    assert_eq!(left, [fresh(0x00).0, fresh(0x7f).0, fresh(0xff).0]);
    assert_eq!(table.rows.kept(), 0, "no block kept");
    Ok(())
}

/// Rows out of order or out of range, in a checkpoint whose CRCs match
/// (written wrong, not damaged): the block holding them is answered by the
/// log when it is read, and verify, which checks the tables whole, names
/// the checkpoint.
#[test]
fn a_checkpoint_whose_tables_are_out_of_order_or_range_is_answered_from_the_log() -> TestResult {
    let (dir, store) = large_store()?;
    let bytes = std::fs::read(index_path(&store))?;
    let l = layout(&bytes)?;
    let [(tt, _, n), (ids, ..), _, (b, _, blobs)] = l.tables;
    assert!(blobs > 2 && n > 2);
    let mut bad: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut swap = bytes.clone();
    swap[b..b + 2 * BLOB_ROW].rotate_left(BLOB_ROW);
    bad.push(("blob rows swapped", swap));
    let mut pack = bytes.clone();
    pack[b + 32] = b'/';
    bad.push(("a pack name of another form", pack));
    let mut base = bytes.clone();
    base[b + 90..b + 94].copy_from_slice(&1u32.to_le_bytes());
    bad.push(("a blob its own base", base));
    let mut end = bytes.clone();
    end[tt + 8..tt + 16].copy_from_slice(&0u64.to_le_bytes());
    bad.push(("a turn of no bytes", end));
    let mut order = bytes.clone();
    order[tt..tt + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    bad.push(("turns out of order", order));
    let mut ids_swapped = bytes.clone();
    ids_swapped[ids..ids + 32].rotate_left(16);
    bad.push(("id rows swapped", ids_swapped));
    let mut beyond = bytes.clone();
    beyond[ids + 8..ids + 16].copy_from_slice(&(n as u64).to_le_bytes());
    bad.push(("an id row naming no turn", beyond));
    let whole = from_log_alone(dir.path(), &store)?;
    for (what, b) in bad {
        answered_from_the_log(dir.path(), &store, &rechecked(&l, b), &whole, what)?;
    }
    // Each turn named once is checked across the whole id table, by
    // verify alone.
    let mut twice = bytes.clone();
    let first = u64_at(&bytes, ids + 8);
    twice[ids + 24..ids + 32].copy_from_slice(&first.to_le_bytes());
    let (_, alone) = decode(&rechecked(&l, twice)).ok_or("the head is whole")?;
    assert!(!tables_whole(&alone), "a turn named twice by the id table");
    // A head that does not end where it says: ignored, and the store opens
    // from its log.
    let mut long = bytes.clone();
    long[MAGIC.len()..MAGIC.len() + 8].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    let long = rechecked(&l, long);
    assert!(decode(&long).is_none());
    std::fs::write(index_path(&store), &long)?;
    assert!(load_now(&store)?.is_none());
    let opened = Store::open(dir.path())?;
    assert_eq!(bytes_of(&opened.index), bytes_of(&whole));
    drop(opened);
    // Cut short: ignored, and the store opens from its log.
    std::fs::write(index_path(&store), &bytes[..bytes.len() / 3])?;
    assert!(load_now(&store)?.is_none());
    let opened = Store::open(dir.path())?;
    assert_eq!(bytes_of(&opened.index), bytes_of(&whole));
    Ok(())
}

/// Damage in the head makes the checkpoint ignored; damage in a table
/// block or a turn's bytes is found when that part is read and answered
/// by the log, and verify names it.
#[test]
fn a_damaged_checkpoint_is_ignored_or_answered_from_the_log() -> TestResult {
    let (dir, store) = rich_store()?;
    checkpoint_now(&store)?;
    let bytes = std::fs::read(index_path(&store))?;
    let l = layout(&bytes)?;
    for i in 0..l.head_len {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        assert!(decode(&bad).is_none(), "byte {i} flipped");
    }
    let whole = from_log_alone(dir.path(), &store)?;
    // The first, a middle and the last byte of each table and of the
    // turns' bytes.
    let mut parts: Vec<(usize, usize)> = l.tables.iter().map(|t| (t.0, t.1 * t.2)).collect();
    parts.push((l.bodies_at, bytes.len() - l.bodies_at));
    for (start, len) in parts {
        assert!(len > 0);
        for at in [start, start + len / 2, start + len - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            answered_from_the_log(dir.path(), &store, &bad, &whole, &format!("byte {at}"))?;
        }
    }
    for cut in [0, 1, MAGIC.len(), bytes.len() / 2, bytes.len() - 1] {
        assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
    }
    // The version 2 checkpoint, whatever it holds, is ignored.
    let mut old = bytes.clone();
    old[MAGIC.len() - 2] = b'2';
    std::fs::write(index_path(&store), &old)?;
    assert!(load_now(&store)?.is_none());
    Ok(())
}

/// A changed log is caught by its identity, its length or the bytes at
/// either end of the covered prefix; only a change in the middle that
/// keeps the file, its length and both ends is not (`verify` reads
/// every line).
#[test]
// Replaces the log this store holds open by rename, which Windows allows
// (std renames with POSIX semantics) but Wine 8 refuses.
#[cfg(unix)]
fn a_checkpoint_of_another_log_or_prefix_is_ignored() -> TestResult {
    let (_dir, store) = large_store()?;
    let path = log_path(&store);
    let log = std::fs::read(&path)?;
    assert!(log.len() as u64 > 2 * WINDOW, "both windows apart");
    let covered = checkpoint_now(&store)?;
    assert!(load_now(&store)?.is_some());
    let checkpoint = std::fs::read(index_path(&store))?;
    let restore = || -> std::io::Result<()> {
        std::fs::write(&path, &log)?;
        std::fs::write(index_path(&store), &checkpoint)
    };
    // Written in place (same inode), a byte changed at either end.
    for i in [
        0,
        WINDOW as usize - 1,
        log.len() - WINDOW as usize,
        log.len() - 2,
    ] {
        let mut other = log.clone();
        other[i] ^= 0x20;
        std::fs::write(&path, &other)?;
        assert!(load_now(&store)?.is_none(), "log byte {i} changed");
    }
    restore()?;
    // Cut shorter by one byte, or by a line.
    let f = std::fs::OpenOptions::new().write(true).open(&path)?;
    f.set_len(log.len() as u64 - 1)?;
    assert!(load_now(&store)?.is_none(), "a shorter log");
    restore()?;
    // The same bytes in another file (a copy, or a log replaced by
    // rename): another identity.
    let copy = path.with_extension("copy");
    std::fs::write(&copy, &log)?;
    std::fs::rename(&copy, &path)?;
    assert!(load_now(&store)?.is_none(), "another inode");
    // A checkpoint that names this inode but another log's prefix of
    // the same length (an inode number reused): its ends differ.
    let ident = ident_of(&path)?;
    let mut other = log.clone();
    let at = log.len() - 3;
    other[at] ^= 0x20;
    std::fs::write(&path, &other)?;
    let mut stale = decode(&checkpoint).ok_or("decodes")?;
    stale.1.ident = None;
    let reused = Covered {
        dev: ident.0,
        ino: ident.1,
        ..covered
    };
    std::fs::write(index_path(&store), bytes_of_at(&stale.1, &reused))?;
    assert!(load_now(&store)?.is_none(), "an inode reused");
    // A change in the middle of the prefix, same file, same length:
    // the checkpoint still stands.
    std::fs::write(&path, &log)?;
    let ident = ident_of(&path)?;
    std::fs::write(
        index_path(&store),
        bytes_of_at(
            &stale.1,
            &Covered {
                dev: ident.0,
                ino: ident.1,
                ..covered
            },
        ),
    )?;
    let mut middle = log.clone();
    middle[log.len() / 2] ^= 0x20;
    std::fs::write(&path, &middle)?;
    assert!(load_now(&store)?.is_some(), "only the ends are compared");
    Ok(())
}

/// A store big enough that opening it writes a checkpoint, with gc and
/// automatic gc off.
fn large_store() -> std::result::Result<(tempfile::TempDir, Store), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut store = Store::open(dir.path())?;
    store.write(&t("t0"), None, "f0.txt", b"0\n")?;
    std::fs::write(
        store.store_dir().join(crate::config::CONFIG_FILE),
        "[retention]\nkeep_turns = 1000000\n[gc]\nauto_every_captures = 0\n",
    )?;
    for i in 1..400 {
        let name = format!("f{}.txt", i % 7);
        store.write(
            &t(&format!("t{i}")),
            Some("a turn"),
            &name,
            format!("{i}\n").as_bytes(),
        )?;
    }
    assert!(std::fs::metadata(log_path(&store))?.len() > WRITE_AFTER);
    assert!(
        !index_path(&store).exists(),
        "written by a reader, or when the writer is dropped, not by appends"
    );
    let first = Store::open(dir.path())?;
    assert!(
        index_path(&store).exists(),
        "{} bytes of log read",
        first.index.consumed
    );
    assert!(load_now(&store)?.is_some());
    Ok((dir, store))
}

#[test]
fn a_checkpoint_over_a_log_gc_replaced_is_ignored() -> TestResult {
    let (dir, mut store) = large_store()?;
    let checkpoint = std::fs::read(index_path(&store))?;
    let (covered, _) = decode(&checkpoint).ok_or("decodes")?;
    let report = store.gc(&crate::GcOptions {
        keep_turns: Some(300),
        ..Default::default()
    })?;
    assert_eq!(report.dropped_turns.len(), 100);
    // gc removed the checkpoint before the new log took its place; its
    // reload may have written one of the new log.
    if let Ok(now) = std::fs::read(index_path(&store)) {
        let (c, _) = decode(&now).ok_or("decodes")?;
        assert_ne!((c.dev, c.ino), (covered.dev, covered.ino));
    }
    // The old checkpoint put back, as if gc had not removed it, even
    // naming the new log's inode (a reused inode number).
    let (_, old) = decode(&checkpoint).ok_or("decodes")?;
    let ident = ident_of(&log_path(&store))?;
    for c in [
        covered,
        Covered {
            dev: ident.0,
            ino: ident.1,
            ..covered
        },
    ] {
        std::fs::write(index_path(&store), bytes_of_at(&old, &c))?;
        let opened = Store::open(dir.path())?;
        assert_eq!(opened.turns()?.len(), 300);
        let whole = from_log_alone(dir.path(), &store)?;
        assert_eq!(bytes_of(&opened.index), bytes_of(&whole));
    }
    Ok(())
}

#[test]
fn a_checkpoint_over_a_log_cut_or_rewritten_at_the_same_length_is_ignored() -> TestResult {
    let (dir, store) = large_store()?;
    let path = log_path(&store);
    let log = std::fs::read(&path)?;
    let checkpoint = std::fs::read(index_path(&store))?;
    let lines: Vec<&[u8]> = log.split_inclusive(|&b| b == b'\n').collect();
    // Cut: the last 50 records gone (the file cut in place).
    let keep: usize = lines[..lines.len() - 50].iter().map(|l| l.len()).sum();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)?
        .set_len(keep as u64)?;
    let opened = Store::open(dir.path())?;
    assert_eq!(opened.index.lines, lines.len() - 50);
    assert_eq!(
        bytes_of(&opened.index),
        bytes_of(&from_log_alone(dir.path(), &store)?)
    );
    // Rewritten in place at the same length: the last record's time
    // changed by one nanosecond (a valid log of other records).
    std::fs::write(&path, &log)?;
    std::fs::write(index_path(&store), &checkpoint)?;
    assert!(load_now(&store)?.is_some());
    let last = lines[lines.len() - 1];
    let mut rec = crate::log::decode(&last[..last.len() - 1])?;
    rec.at ^= 1;
    let new_last = crate::log::encode(&rec);
    assert_eq!(new_last.len(), last.len());
    let mut other = log[..log.len() - last.len()].to_vec();
    other.extend_from_slice(&new_last);
    std::fs::write(&path, &other)?;
    let opened = Store::open(dir.path())?;
    let whole = from_log_alone(dir.path(), &store)?;
    assert_eq!(bytes_of(&opened.index), bytes_of(&whole));
    assert_eq!(
        opened
            .index
            .turns
            .iter()
            .next_back()
            .transpose()?
            .map(|t| t.started_at),
        Some(rec.at),
        "the new record's time, not the checkpoint's"
    );
    Ok(())
}

#[test]
fn verify_names_a_checkpoint_that_names_the_log_but_holds_another_index() -> TestResult {
    let (dir, store) = large_store()?;
    assert!(crate::verify_root(dir.path())?.whole);
    let path = log_path(&store);
    let log = File::open(&path)?;
    // Built from the log alone: an index read from the checkpoint
    // holds it open, and Wine cannot rename over an open file.
    let mut index = from_log_alone(dir.path(), &store)?;
    // Another index for the same prefix: the newest turn's label.
    index.turns.last_mut()?.ok_or("a turn")?.label = Some("not what the log says".into());
    write(&store.place.dirs().store, &index, &log, ident_of(&path)?);
    assert!(load_now(&store)?.is_some(), "an open trusts it");
    let report = crate::verify_root(dir.path())?;
    assert!(!report.whole);
    assert!(
        report.damage.iter().any(|d| matches!(
            d,
            crate::verify::Damage::Store { path, .. } if path.ends_with(INDEX_FILE)
        )),
        "{:?}",
        report.damage
    );
    // Deleted, as the message says: whole again.
    std::fs::remove_file(index_path(&store))?;
    assert!(crate::verify_root(dir.path())?.whole);
    Ok(())
}

#[test]
fn damage_at_the_start_of_the_log_is_still_refused_and_verify_finds_any() -> TestResult {
    let (dir, store) = large_store()?;
    let path = log_path(&store);
    let log = std::fs::read(&path)?;
    let checkpoint = std::fs::read(index_path(&store))?;
    // A byte changed in the first line: the checkpoint no longer
    // matches, the whole log is read and the damage reported.
    let mut damaged = log.clone();
    damaged[10] ^= 0x01;
    std::fs::write(&path, &damaged)?;
    match Store::open(dir.path()) {
        Err(crate::Error::LogDamaged { line, .. }) => assert_eq!(line, 1),
        other => return Err(format!("expected LogDamaged, got {:?}", other.err()).into()),
    }
    // In the middle, the file and its ends unchanged: the open trusts
    // the checkpoint; verify reads every line and names it.
    let mut damaged = log.clone();
    let mid = log.len() / 2;
    damaged[mid] ^= 0x01;
    std::fs::write(&path, &damaged)?;
    std::fs::write(index_path(&store), &checkpoint)?;
    Store::open(dir.path())?;
    let line = 1 + log[..mid].iter().filter(|&&b| b == b'\n').count();
    let report = crate::verify_root(dir.path())?;
    assert!(!report.whole);
    assert!(
        report
            .damage
            .iter()
            .any(|d| matches!(d, crate::verify::Damage::LogLine { line: l, .. } if *l == line)),
        "{:?}",
        report.damage
    );
    Ok(())
}

/// A turn whose bytes in the checkpoint are damaged and whose log line is
/// damaged too, in the middle of the log where the open trusts the
/// checkpoint: two faults at once. Asking for the turn is an error that
/// names it and says to run `turnback verify`, then `turnback repair`
/// (the process went on; it used to stop on an `expect`); a rewind
/// through it changes nothing; a turn that does not need it answers.
#[test]
fn a_turn_damaged_in_the_checkpoint_and_in_the_log_is_an_error_naming_it() -> TestResult {
    let (dir, store) = large_store()?;
    let bytes = std::fs::read(index_path(&store))?;
    let l = layout(&bytes)?;
    // t200 is the 201st turn: its bytes run from the end of the turn
    // before it to its own end (each row's second field).
    let end_of = |i: usize| u64_at(&bytes, l.tables[0].0 + i * TURN_ROW + 8) as usize;
    let (start, end) = (end_of(199), end_of(200));
    let mut bad = bytes.clone();
    bad[l.bodies_at + (start + end) / 2] ^= 0x01;
    std::fs::write(index_path(&store), &bad)?;
    // Its capture's line: "t200" made "t201", which the line's CRC refuses.
    let path = log_path(&store);
    let mut log = std::fs::read(&path)?;
    let needle = br#""turn":"t200""#;
    let at = log
        .windows(needle.len())
        .position(|w| w == needle)
        .ok_or("t200's capture")?;
    log[at + needle.len() - 2] ^= 0x01;
    std::fs::write(&path, &log)?;
    let line = 1 + log[..at].iter().filter(|&&b| b == b'\n').count();
    let (from, to) = (at as u64, log.len() as u64 - at as u64);
    assert!(
        from > WINDOW && to > WINDOW,
        "between the windows an open compares"
    );

    let opened = Store::open(dir.path())?;
    assert!(
        opened.index.turns.frozen().is_some(),
        "the checkpoint is used"
    );
    let err = opened
        .turn(&t("t200"))
        .err()
        .ok_or("t200 is not answered")?;
    match &err {
        crate::Error::TurnUnreadable { turn, reason } => {
            assert_eq!(turn, r#"turn "t200""#);
            assert!(reason.contains(&format!("line {line} ")), "{reason}");
        }
        other => return Err(format!("expected TurnUnreadable, got {other:?}").into()),
    }
    let text = err.to_string();
    assert!(
        text.contains("`turnback verify`") && text.contains("`turnback repair`"),
        "{text}"
    );
    // Reached by its place, not its id: the same error, naming the place.
    match opened.turns() {
        Err(crate::Error::TurnUnreadable { turn, .. }) => {
            assert!(turn.starts_with("turn 201 of the 400"), "{turn}");
        }
        other => return Err(format!("expected TurnUnreadable, got {other:?}").into()),
    }
    assert_eq!(opened.turn(&t("t300"))?.id, t("t300"));
    drop(opened);

    let files = || -> std::io::Result<Vec<Vec<u8>>> {
        (0..7)
            .map(|i| std::fs::read(dir.path().join(format!("f{i}.txt"))))
            .collect()
    };
    let before = files()?;
    let mut again = Store::open(dir.path())?;
    let rewound = again.rewind(&t("t100"), &RewindOptions::default());
    assert!(
        matches!(rewound, Err(crate::Error::TurnUnreadable { .. })),
        "{:?}",
        rewound.map(|r| r.turns)
    );
    drop(again);
    assert_eq!(files()?, before, "the failed rewind changed nothing");
    assert!(!crate::verify_root(dir.path())?.whole);
    drop(store);
    Ok(())
}
