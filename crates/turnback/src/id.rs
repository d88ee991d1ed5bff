//! Typed, validated identifiers: [`BlobId`] (SHA-256 of a blob's original
//! bytes, 64 lowercase hex characters on disk) and [`TurnId`] (a caller-chosen
//! string naming one agent turn).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;

/// The SHA-256 of a blob's uncompressed bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlobId(pub [u8; 32]);

/// Hashes the first 8 bytes only: they are already uniformly distributed
/// (a SHA-256), and maps keyed by blob id (the index, every scan's lookups)
/// then hash a quarter of the bytes. Equal ids hash equally, as `Eq` needs.
impl std::hash::Hash for BlobId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(first));
    }
}

impl BlobId {
    /// Hex form, as written in the log.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobId({})", self.to_hex())
    }
}

/// A blob id that is not 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("blob id {0:?} is not 64 lowercase hex characters")]
pub struct BadBlobId(pub String);

impl FromStr for BlobId {
    type Err = BadBlobId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadBlobId(s.chars().take(80).collect());
        if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| bad())?;
        Ok(BlobId(out))
    }
}

impl Serialize for BlobId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for BlobId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A turn id chosen by the caller: an agent's message id, a counter.
///
/// Invariant: 1 to 200 characters, no control characters.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TurnId(String);

impl TurnId {
    /// Validates a turn id.
    pub fn new(id: impl Into<String>) -> Result<Self, Error> {
        let id = id.into();
        let reason = if id.is_empty() {
            Some("it is empty")
        } else if id.chars().count() > 200 {
            Some("it is longer than 200 characters")
        } else if id.chars().any(char::is_control) {
            Some("it contains a control character")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::BadTurnId { id, reason }),
            None => Ok(TurnId(id)),
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TurnId({:?})", self.0)
    }
}

impl<'de> Deserialize<'de> for TurnId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TurnId::new(s).map_err(serde::de::Error::custom)
    }
}

/// Cuts a label to at most 120 characters, on a character boundary.
pub fn cut_label(label: &str) -> String {
    label.chars().take(120).collect()
}

/// Nanoseconds since the Unix epoch (0 for a clock set before it): the
/// time of log records and part of every fresh name.
pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_id_round_trips_and_rejects_bad_lengths() {
        let hex = "ab".repeat(32);
        let id: BlobId = hex.parse().expect("valid id");
        assert_eq!(id.to_hex(), hex);
        assert!("ab".repeat(31).parse::<BlobId>().is_err());
        assert!(format!("{}g", "a".repeat(63)).parse::<BlobId>().is_err());
        assert!(
            "AB".repeat(32).parse::<BlobId>().is_err(),
            "uppercase is not the stored form"
        );
        assert!("../../etc/passwd".parse::<BlobId>().is_err());
    }

    #[test]
    fn turn_ids_are_validated() {
        assert!(TurnId::new("msg_01").is_ok());
        assert!(TurnId::new("").is_err());
        assert!(TurnId::new("a\nb").is_err());
        assert!(TurnId::new("x".repeat(201)).is_err());
    }

    #[test]
    fn labels_are_cut_to_120_characters() {
        assert_eq!(cut_label(&"é".repeat(300)).chars().count(), 120);
        assert_eq!(cut_label("short"), "short");
    }
}
