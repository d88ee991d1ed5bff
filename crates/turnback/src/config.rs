//! The store's settings: `config.toml` in the store directory, written with
//! the defaults below when the store is created and read by every gc. A
//! missing file means the defaults; a damaged one is an error naming the
//! file.
//!
//! ```toml
//! fsmonitor = "auto"  # the change source of snapshots: "auto", "watchman" or "off"
//!
//! [retention]
//! keep_turns = 1000    # newest live turns kept: 1 to 1000000000
//! keep_days = 30       # live turns older than this are dropped: 1 to 1000000
//! max_size = "2G"      # oldest turns dropped until the packs fit: 1M to 1024P
//!
//! [gc]
//! auto_every_captures = 500   # check the limits after every N captures (0: never): 0 to 1000000000
//! ```
//!
//! Every value is checked when the file is read; one outside its range is
//! an error naming the key, the file and the range, never silently taken:
//! - `keep_turns = 0` would mean "keep no turn", but gc always keeps the
//!   newest turn (the one just captured), so 0 is refused; 1 keeps only it.
//! - `keep_days = 0` reads both as "drop everything but the newest" and as
//!   "no age limit", so it is refused; the largest value (about 2,700
//!   years) is the way to say "no age limit".
//! - `max_size` below 1M would drop every turn but the newest on each gc;
//!   0 is refused for the same reason as `keep_days`.
//! - `auto_every_captures = 0` means "never" (gc then runs only when
//!   asked). Otherwise the limits are checked after every N captures and
//!   after each rewind, at no cost, and gc runs when one is exceeded by a
//!   tenth (see [`crate::gc`]).
//! - Negative numbers and values past the upper bounds are typos.
//!
//! - `fsmonitor`: whether snapshots ask Watchman what changed instead of
//!   stat-walking the whole tree (see [`crate::fsmonitor`]); the
//!   environment variable `TURNBACK_FSMONITOR` overrides it.
//!
//! Every command reads the whole file with the same rules: a key one
//! command takes, every command takes, and a file one command refuses,
//! every command that reads settings refuses.
//!
//! Whatever the file says, gc never drops the newest live turn.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The config file's name inside the store.
pub const CONFIG_FILE: &str = "config.toml";

/// What a new store's config file says.
pub const DEFAULT_CONFIG: &str = "\
# turnback store settings (see `turnback gc --help`)
# where snapshots learn what changed: \"auto\" asks Watchman when its server
# runs, else stats the whole tree; \"watchman\" also warns when it cannot;
# \"off\" always stats the whole tree (TURNBACK_FSMONITOR overrides this)
fsmonitor = \"auto\"

[retention]
# newest live turns kept (1 to 1000000000; the newest turn is always kept)
keep_turns = 1000
# live turns older than this many days are dropped, never the newest
# (1 to 1000000; 1000000 means no age limit)
keep_days = 30
# when the store is larger than this, the oldest turns are dropped until it
# fits, never the newest (1M to 1024P)
max_size = \"2G\"

[gc]
# check the limits above after every N capture records and after each
# rewind; gc runs when one is exceeded by a tenth (0: never; at most
# 1000000000)
auto_every_captures = 500
";

/// Retention limits.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retention {
    /// Newest live turns kept.
    #[serde(deserialize_with = "de_count")]
    pub keep_turns: usize,
    /// Live turns older than this are dropped (never the newest).
    #[serde(deserialize_with = "de_count")]
    pub keep_days: u64,
    /// Size limit of the packs, in bytes (`"2G"` or a number in the file).
    #[serde(deserialize_with = "de_size")]
    pub max_size: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_turns: 1000,
            keep_days: 30,
            max_size: 2 << 30,
        }
    }
}

/// Automatic gc.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoGc {
    /// Check the limits after every N capture records (0: never), and after
    /// rewinds; gc runs when one is exceeded by a tenth.
    #[serde(deserialize_with = "de_count")]
    pub auto_every_captures: u64,
}

impl Default for AutoGc {
    fn default() -> Self {
        AutoGc {
            auto_every_captures: 500,
        }
    }
}

/// Where snapshots learn what changed (see [`crate::fsmonitor`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FsMonitor {
    /// Watchman when its server runs, else the scan.
    #[default]
    Auto,
    /// Watchman, with a warning on every snapshot that cannot use it.
    Watchman,
    /// Always the scan.
    Off,
}

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The change source of snapshots.
    pub fsmonitor: FsMonitor,
    /// Retention limits.
    pub retention: Retention,
    /// Automatic gc.
    pub gc: AutoGc,
}

/// The accepted range of each key (inclusive), and what to write instead.
const LIMITS: [(&str, u64, u64, &str); 4] = [
    (
        "retention.keep_turns",
        1,
        1_000_000_000,
        "the newest turn is always kept; use 1 to keep only it",
    ),
    (
        "retention.keep_days",
        1,
        1_000_000,
        "use 1000000 for no age limit",
    ),
    (
        "retention.max_size",
        1 << 20,
        1 << 60,
        "use a size such as \"500M\" or \"2G\"",
    ),
    (
        "gc.auto_every_captures",
        0,
        1_000_000_000,
        "0 turns automatic gc off",
    ),
];

impl Config {
    /// Parses a config file's text and checks every value against its
    /// range; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let bad = |reason: String| Error::Config {
            path: path.to_path_buf(),
            reason,
        };
        let config: Config = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        config.validate().map_err(bad)?;
        Ok(config)
    }

    /// Checks every value against its range (see the module doc).
    pub fn validate(&self) -> std::result::Result<(), String> {
        let values = [
            u64::try_from(self.retention.keep_turns).unwrap_or(u64::MAX),
            self.retention.keep_days,
            self.retention.max_size,
            self.gc.auto_every_captures,
        ];
        for ((key, min, max, hint), value) in LIMITS.iter().zip(values) {
            if value < *min || value > *max {
                return Err(format!(
                    "{key} = {value} is out of range: it must be from {min} to {max} ({hint})"
                ));
            }
        }
        Ok(())
    }
}

/// A whole number that must not be negative (TOML integers are signed).
fn de_count<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    let n = i64::deserialize(d)?;
    let n = u64::try_from(n).map_err(|_| {
        serde::de::Error::custom(format!(
            "{n} is negative; it must be a whole number of 0 or more"
        ))
    })?;
    T::try_from(n).map_err(|_| serde::de::Error::custom(format!("{n} is too large")))
}

fn de_size<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(i64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(n) => u64::try_from(n).map_err(|_| {
            serde::de::Error::custom(format!(
                "{n} is negative; use e.g. 1048576, \"512M\" or \"1G\""
            ))
        }),
        Size::Text(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Parses a byte count with an optional K/M/G/T/P suffix (powers of 1024):
/// `4096`, `512M`, `1GiB`, `1P`.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (digits, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, 1u64),
        Some((i, _)) => {
            let unit = t[i..].trim().to_ascii_uppercase();
            let unit = unit.trim_end_matches("IB").trim_end_matches('B');
            let m = match unit {
                "" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                "T" => 1 << 40,
                "P" => 1 << 50,
                _ => {
                    return Err(format!(
                        "{s:?}: unknown unit; use a byte count or K, M, G, T, P"
                    ));
                }
            };
            (&t[..i], m)
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size; use e.g. 1048576, 512M or 1G"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_file_parses_to_the_defaults() {
        let c = Config::parse(DEFAULT_CONFIG, Path::new("config.toml")).expect("default parses");
        assert_eq!(c, Config::default());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("1Q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn every_meaningless_value_is_refused_naming_key_and_file() {
        let file = Path::new("/p/store/config.toml");
        for (text, key) in [
            ("[retention]\nkeep_turns = 0\n", "keep_turns"),
            ("[retention]\nkeep_turns = -3\n", "keep_turns"),
            ("[retention]\nkeep_turns = 5000000000\n", "keep_turns"),
            ("[retention]\nkeep_days = 0\n", "keep_days"),
            ("[retention]\nkeep_days = -1\n", "keep_days"),
            ("[retention]\nkeep_days = 99999999999\n", "keep_days"),
            ("[retention]\nmax_size = 0\n", "max_size"),
            ("[retention]\nmax_size = \"10K\"\n", "max_size"),
            ("[retention]\nmax_size = -5\n", "max_size"),
            ("[retention]\nmax_size = \"9999P\"\n", "max_size"),
            ("[gc]\nauto_every_captures = -1\n", "auto_every_captures"),
            (
                "[gc]\nauto_every_captures = 2000000000\n",
                "auto_every_captures",
            ),
        ] {
            let err = Config::parse(text, file).expect_err(text);
            let msg = err.to_string();
            assert!(msg.contains(key), "{text}: {msg}");
            assert!(msg.contains("/p/store/config.toml"), "{text}: {msg}");
            assert!(msg.contains("fix or delete"), "{text}: {msg}");
        }
    }

    #[test]
    fn meaningful_edge_values_are_taken() {
        let c = Config::parse(
            "[retention]\nkeep_turns = 1\nkeep_days = 1000000\nmax_size = \"1M\"\n[gc]\nauto_every_captures = 0\n",
            Path::new("c.toml"),
        )
        .expect("valid");
        assert_eq!(c.retention.keep_turns, 1);
        assert_eq!(c.retention.keep_days, 1_000_000);
        assert_eq!(c.retention.max_size, 1 << 20);
        assert_eq!(c.gc.auto_every_captures, 0);
    }

    #[test]
    fn a_damaged_config_names_the_file() {
        let err = Config::parse(
            "[retention]\nkeep_turns = \"many\"\n",
            Path::new("/p/.turnback/config.toml"),
        )
        .expect_err("invalid");
        let msg = err.to_string();
        assert!(msg.contains("/p/.turnback/config.toml"), "{msg}");
        let err = Config::parse("[retention]\nkeep_turnz = 3\n", Path::new("c.toml"))
            .expect_err("unknown key");
        assert!(err.to_string().contains("keep_turnz"), "{err}");
    }
}
