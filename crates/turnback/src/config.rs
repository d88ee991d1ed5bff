//! The store's settings: `.turnback/config.toml`, written with the defaults
//! below when the store is created and read by every gc. A missing file
//! means the defaults; a damaged one is an error naming the file.
//!
//! ```toml
//! [retention]
//! keep_turns = 1000    # newest live turns kept
//! keep_days = 30       # live turns older than this are dropped (never the newest)
//! max_size = "2G"      # packs beyond this: oldest turns dropped until under it
//!
//! [gc]
//! auto_every_captures = 500   # gc after every N capture records, and after each rewind
//! ```

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The config file's name inside the store.
pub const CONFIG_FILE: &str = "config.toml";

/// What a new store's config file says.
pub const DEFAULT_CONFIG: &str = "\
# turnback store settings (see `turnback gc --help`)
[retention]
# newest live turns kept
keep_turns = 1000
# live turns older than this many days are dropped (the newest turn never is)
keep_days = 30
# when the store is larger than this, the oldest turns are dropped until it fits
max_size = \"2G\"

[gc]
# run gc after every N capture records, and after each rewind (0: never)
auto_every_captures = 500
";

/// Retention limits.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retention {
    /// Newest live turns kept.
    pub keep_turns: usize,
    /// Live turns older than this are dropped (never the newest).
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
    /// Run gc after every N capture records (0: never), and after rewinds.
    pub auto_every_captures: u64,
}

impl Default for AutoGc {
    fn default() -> Self {
        AutoGc {
            auto_every_captures: 500,
        }
    }
}

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Retention limits.
    pub retention: Retention,
    /// Automatic gc.
    pub gc: AutoGc,
}

impl Config {
    /// Parses a config file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }
}

fn de_size<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(n) => Ok(n),
        Size::Text(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Parses a byte count with an optional K/M/G/T suffix (powers of 1024):
/// `4096`, `512M`, `1GiB`.
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
                _ => {
                    return Err(format!(
                        "{s:?}: unknown unit; use a byte count or K, M, G, T"
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
