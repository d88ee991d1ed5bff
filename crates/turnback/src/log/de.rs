//! Reading a log line into a [`Record`] in one pass over its bytes.
//!
//! A record's kind is its `type` field, beside `seq` and `at` in one flat
//! object, and a pre-image's or post-image's kind is its `kind` field. The
//! derived form of such internally tagged enums buffers the whole object in
//! a generic tree before it knows which variant it holds: for a record that
//! names 100,000 paths, that tree is several times the size of the line.
//! Here every field name has one meaning and one type in all variants, so
//! each field is decoded straight into its typed slot as it comes, in any
//! order, and the variant is assembled at the end from its `type`.
//!
//! What is accepted is what the derived form accepted: fields in any order,
//! unknown fields (and fields of another variant) ignored, optional fields
//! absent or `null`, a missing required field or a repeated field an error
//! naming it.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::{FailedPath, FileEntry, Op, Post, PostEntry, Pre, Record, StoredBlob};
use crate::id::{BlobId, TurnId};
use crate::path::RelPath;

/// Stores a field's value, refusing a second one.
fn put<T, E: de::Error>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(value);
    Ok(())
}

/// A required field's value.
fn need<T, E: de::Error>(slot: Option<T>, name: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(name))
}

/// The fields of every record kind.
#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum RecordField {
    Seq,
    At,
    Type,
    Turn,
    Label,
    Pack,
    Blobs,
    Files,
    Posts,
    SharedWith,
    After,
    FromSeq,
    Saved,
    Conflicts,
    Failed,
    TurnSeq,
    Kept,
    Op,
    Paths,
    #[serde(other)]
    Other,
}

/// A record's `type`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum RecordType {
    Capture,
    Seal,
    Saved,
    Packed,
    Snapshot,
    Rewind,
    Revert,
    Undo,
    Redo,
    RolledBack,
}

/// Each field of a record as read, before its `type` says which it needs.
#[derive(Default)]
struct RecordSlots {
    seq: Option<u64>,
    at: Option<u64>,
    kind: Option<RecordType>,
    turn: Option<TurnId>,
    label: Option<Option<String>>,
    pack: Option<Option<String>>,
    blobs: Option<Vec<StoredBlob>>,
    files: Option<Vec<FileEntry>>,
    posts: Option<Vec<PostEntry>>,
    shared_with: Option<Vec<TurnId>>,
    after: Option<bool>,
    from_seq: Option<u64>,
    saved: Option<u64>,
    conflicts: Option<Vec<RelPath>>,
    failed: Option<Vec<FailedPath>>,
    turn_seq: Option<u64>,
    kept: Option<Vec<RelPath>>,
    op: Option<u64>,
    paths: Option<Vec<RelPath>>,
}

impl RecordSlots {
    fn into_record<E: de::Error>(self) -> Result<Record, E> {
        let seq = need(self.seq, "seq")?;
        let at = need(self.at, "at")?;
        let failed = self.failed.unwrap_or_default();
        let op = match need(self.kind, "type")? {
            RecordType::Capture => Op::Capture {
                turn: need(self.turn, "turn")?,
                label: self.label.flatten(),
                pack: self.pack.flatten(),
                blobs: self.blobs.unwrap_or_default(),
                files: need(self.files, "files")?,
                posts: self.posts.unwrap_or_default(),
                shared_with: self.shared_with.unwrap_or_default(),
            },
            RecordType::Seal => Op::Seal {
                turn: need(self.turn, "turn")?,
                posts: need(self.posts, "posts")?,
            },
            RecordType::Saved => Op::Saved {
                pack: self.pack.flatten(),
                blobs: self.blobs.unwrap_or_default(),
                files: need(self.files, "files")?,
            },
            RecordType::Packed => Op::Packed {
                saved: need(self.saved, "saved")?,
                pack: self.pack.flatten(),
                blobs: self.blobs.unwrap_or_default(),
                files: need(self.files, "files")?,
            },
            RecordType::Snapshot => Op::Snapshot {
                turn: need(self.turn, "turn")?,
                after: self.after.unwrap_or(false),
                pack: need(self.pack.flatten(), "pack")?,
                blobs: need(self.blobs, "blobs")?,
            },
            RecordType::Rewind => Op::Rewind {
                turn: need(self.turn, "turn")?,
                from_seq: need(self.from_seq, "from_seq")?,
                paths: self.paths.unwrap_or_default(),
                saved: need(self.saved, "saved")?,
                conflicts: self.conflicts.unwrap_or_default(),
                kept: self.kept.unwrap_or_default(),
                failed,
            },
            RecordType::Revert => Op::Revert {
                turn: need(self.turn, "turn")?,
                turn_seq: need(self.turn_seq, "turn_seq")?,
                paths: self.paths.unwrap_or_default(),
                saved: need(self.saved, "saved")?,
                kept: self.kept.unwrap_or_default(),
                failed,
            },
            RecordType::Undo => Op::Undo {
                op: need(self.op, "op")?,
                saved: need(self.saved, "saved")?,
                failed,
            },
            RecordType::Redo => Op::Redo {
                op: need(self.op, "op")?,
                saved: need(self.saved, "saved")?,
                failed,
            },
            RecordType::RolledBack => Op::RolledBack {
                saved: need(self.saved, "saved")?,
                failed,
            },
        };
        Ok(Record { seq, at, op })
    }
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Record;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a log record (an object with seq, at and type)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
                let mut s = RecordSlots::default();
                while let Some(key) = map.next_key::<RecordField>()? {
                    match key {
                        RecordField::Seq => put(&mut s.seq, map.next_value()?, "seq")?,
                        RecordField::At => put(&mut s.at, map.next_value()?, "at")?,
                        RecordField::Type => put(&mut s.kind, map.next_value()?, "type")?,
                        RecordField::Turn => put(&mut s.turn, map.next_value()?, "turn")?,
                        RecordField::Label => put(&mut s.label, map.next_value()?, "label")?,
                        RecordField::Pack => put(&mut s.pack, map.next_value()?, "pack")?,
                        RecordField::Blobs => put(&mut s.blobs, map.next_value()?, "blobs")?,
                        RecordField::Files => put(&mut s.files, map.next_value()?, "files")?,
                        RecordField::Posts => put(&mut s.posts, map.next_value()?, "posts")?,
                        RecordField::SharedWith => {
                            put(&mut s.shared_with, map.next_value()?, "shared_with")?
                        }
                        RecordField::After => put(&mut s.after, map.next_value()?, "after")?,
                        RecordField::FromSeq => {
                            put(&mut s.from_seq, map.next_value()?, "from_seq")?
                        }
                        RecordField::Saved => put(&mut s.saved, map.next_value()?, "saved")?,
                        RecordField::Conflicts => {
                            put(&mut s.conflicts, map.next_value()?, "conflicts")?
                        }
                        RecordField::Failed => put(&mut s.failed, map.next_value()?, "failed")?,
                        RecordField::TurnSeq => {
                            put(&mut s.turn_seq, map.next_value()?, "turn_seq")?
                        }
                        RecordField::Kept => put(&mut s.kept, map.next_value()?, "kept")?,
                        RecordField::Op => put(&mut s.op, map.next_value()?, "op")?,
                        RecordField::Paths => put(&mut s.paths, map.next_value()?, "paths")?,
                        RecordField::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                s.into_record()
            }
        }
        d.deserialize_map(V)
    }
}

/// The fields of every pre-image kind.
#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum PreField {
    Kind,
    Blob,
    Size,
    Mode,
    Link,
    Target,
    Reason,
    Seq,
    N,
    #[serde(other)]
    Other,
}

/// A pre-image's `kind`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum PreKind {
    File,
    Symlink,
    Absent,
    Dir,
    Fifo,
    Skipped,
    Aside,
}

impl<'de> Deserialize<'de> for Pre {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Pre;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a pre-image (an object with kind)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pre, A::Error> {
                let mut kind = None;
                let mut blob: Option<BlobId> = None;
                let mut size: Option<u64> = None;
                let mut mode: Option<u32> = None;
                let mut link: Option<Option<u64>> = None;
                let mut target: Option<String> = None;
                let mut reason: Option<String> = None;
                let mut seq: Option<u64> = None;
                let mut n: Option<u64> = None;
                while let Some(key) = map.next_key::<PreField>()? {
                    match key {
                        PreField::Kind => put(&mut kind, map.next_value::<PreKind>()?, "kind")?,
                        PreField::Blob => put(&mut blob, map.next_value()?, "blob")?,
                        PreField::Size => put(&mut size, map.next_value()?, "size")?,
                        PreField::Mode => put(&mut mode, map.next_value()?, "mode")?,
                        PreField::Link => put(&mut link, map.next_value()?, "link")?,
                        PreField::Target => put(&mut target, map.next_value()?, "target")?,
                        PreField::Reason => put(&mut reason, map.next_value()?, "reason")?,
                        PreField::Seq => put(&mut seq, map.next_value()?, "seq")?,
                        PreField::N => put(&mut n, map.next_value()?, "n")?,
                        PreField::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(match need(kind, "kind")? {
                    PreKind::File => Pre::File {
                        blob: need(blob, "blob")?,
                        size: need(size, "size")?,
                        mode: need(mode, "mode")?,
                        link: link.flatten(),
                    },
                    PreKind::Symlink => Pre::Symlink {
                        target: need(target, "target")?,
                    },
                    PreKind::Absent => Pre::Absent,
                    PreKind::Dir => Pre::Dir {
                        mode: need(mode, "mode")?,
                    },
                    PreKind::Fifo => Pre::Fifo {
                        mode: need(mode, "mode")?,
                    },
                    PreKind::Skipped => Pre::Skipped {
                        reason: need(reason, "reason")?,
                        size: need(size, "size")?,
                    },
                    PreKind::Aside => Pre::Aside {
                        seq: need(seq, "seq")?,
                        n: need(n, "n")?,
                        size: need(size, "size")?,
                        mode: need(mode, "mode")?,
                        blob,
                    },
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// The fields of every post-image kind.
#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum PostField {
    Kind,
    Sha256,
    Target,
    Stat,
    #[serde(other)]
    Other,
}

/// A post-image's `kind`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum PostKind {
    File,
    Symlink,
    Absent,
    Dir,
    Other,
}

impl<'de> Deserialize<'de> for Post {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Post;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a post-image (an object with kind)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Post, A::Error> {
                let mut kind = None;
                let mut sha256: Option<BlobId> = None;
                let mut target: Option<String> = None;
                let mut stat: Option<Option<crate::log::StatKey>> = None;
                while let Some(key) = map.next_key::<PostField>()? {
                    match key {
                        PostField::Kind => put(&mut kind, map.next_value::<PostKind>()?, "kind")?,
                        PostField::Sha256 => put(&mut sha256, map.next_value()?, "sha256")?,
                        PostField::Target => put(&mut target, map.next_value()?, "target")?,
                        PostField::Stat => put(&mut stat, map.next_value()?, "stat")?,
                        PostField::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(match need(kind, "kind")? {
                    PostKind::File => Post::File {
                        sha256: need(sha256, "sha256")?,
                        stat: stat.flatten(),
                    },
                    PostKind::Symlink => Post::Symlink {
                        target: need(target, "target")?,
                    },
                    PostKind::Absent => Post::Absent,
                    PostKind::Dir => Post::Dir,
                    PostKind::Other => Post::Other,
                })
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::super::decode;
    use super::*;

    /// A line as the log holds it: `body` with its check appended.
    fn line(body: &str) -> Vec<u8> {
        let crc = crc32fast::hash(body.as_bytes());
        let mut l = body.as_bytes()[..body.len() - 1].to_vec();
        l.extend_from_slice(format!(r#","crc":"{crc:08x}"}}"#).as_bytes());
        l
    }

    const ID: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn fields_are_read_in_any_order_and_unknown_ones_passed_over() {
        let body = format!(
            r#"{{"files":[{{"pre":{{"mode":420,"size":4,"blob":"{ID}","kind":"file","new":[1,{{"x":2}}]}},"path":"a"}}],"future":{{"deep":[1,2]}},"turn":"t","type":"capture","at":2,"seq":1,"op":9}}"#
        );
        let r = decode(&line(&body)).expect("decodes");
        assert_eq!(r.seq, 1);
        assert_eq!(r.at, 2);
        let Op::Capture {
            turn, files, label, ..
        } = r.op
        else {
            panic!("not a capture: {:?}", r.op);
        };
        assert_eq!(turn.as_str(), "t");
        assert_eq!(label, None);
        assert_eq!(files.len(), 1);
        assert_eq!(
            files[0].pre,
            Pre::File {
                blob: ID.parse().expect("valid"),
                size: 4,
                mode: 0o644,
                link: None
            }
        );
    }

    #[test]
    fn optional_fields_may_be_null() {
        let body = r#"{"seq":1,"at":2,"type":"saved","pack":null,"files":[{"path":"a","pre":{"kind":"file","blob":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":4,"mode":420,"link":null}}]}"#;
        let r = decode(&line(body)).expect("decodes");
        assert!(matches!(r.op, Op::Saved { pack: None, .. }), "{:?}", r.op);
    }

    #[test]
    fn a_missing_or_repeated_field_is_named() {
        let missing = r#"{"seq":1,"at":2,"type":"rewind","turn":"t","saved":3}"#;
        let err = decode(&line(missing)).expect_err("from_seq is required");
        assert!(err.contains("from_seq"), "{err}");
        let twice = r#"{"seq":1,"at":2,"type":"undo","op":4,"saved":3,"saved":5}"#;
        let err = decode(&line(twice)).expect_err("a repeated field");
        assert!(err.contains("duplicate field `saved`"), "{err}");
        let no_kind = r#"{"seq":1,"at":2,"type":"saved","files":[{"path":"a","pre":{"size":4}}]}"#;
        let err = decode(&line(no_kind)).expect_err("a pre-image without kind");
        assert!(err.contains("kind"), "{err}");
        let bad_type = r#"{"seq":1,"at":2,"type":"merge"}"#;
        let err = decode(&line(bad_type)).expect_err("an unknown type");
        assert!(err.contains("merge"), "{err}");
    }

    #[test]
    fn post_images_of_every_kind_decode() {
        let body = format!(
            r#"{{"seq":3,"at":4,"type":"seal","turn":"t","posts":[{{"path":"a","post":{{"kind":"file","sha256":"{ID}"}}}},{{"path":"b","post":{{"target":"a","kind":"symlink"}}}},{{"path":"c","post":{{"kind":"absent"}}}},{{"path":"d","post":{{"kind":"dir"}}}},{{"path":"e","post":{{"kind":"other"}}}}]}}"#
        );
        let r = decode(&line(&body)).expect("decodes");
        let Op::Seal { posts, .. } = r.op else {
            panic!("not a seal: {:?}", r.op);
        };
        let kinds: Vec<Post> = posts.into_iter().map(|p| p.post).collect();
        assert_eq!(
            kinds,
            vec![
                Post::File {
                    sha256: ID.parse().expect("valid"),
                    stat: None,
                },
                Post::Symlink { target: "a".into() },
                Post::Absent,
                Post::Dir,
                Post::Other
            ]
        );
        // A file's look, when recorded, reads back whole.
        let body = format!(
            r#"{{"seq":3,"at":4,"type":"seal","turn":"t","posts":[{{"path":"a","post":{{"kind":"file","sha256":"{ID}","stat":{{"dev":1,"ino":2,"size":3,"mtime":-4,"ctime":5}}}}}}]}}"#
        );
        let r = decode(&line(&body)).expect("decodes");
        let Op::Seal { posts, .. } = r.op else {
            panic!("not a seal: {:?}", r.op);
        };
        let Post::File { stat, .. } = &posts[0].post else {
            panic!("not a file: {:?}", posts[0].post);
        };
        let want = crate::log::StatKey {
            dev: 1,
            ino: 2,
            size: 3,
            mtime: -4,
            ctime: 5,
        };
        assert_eq!(*stat, Some(want));
    }
}
