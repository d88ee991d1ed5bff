//! Parsing of sizes given on the command line (`1G`, `512M`, `4096`).

/// Parses a byte count with an optional K/M/G/T suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
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

/// A byte count for people: `512 B`, `1.5 KiB`, `2.0 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

#[cfg(test)]
mod tests {
    use super::parse_size;

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
    fn sizes_print_for_people() {
        assert_eq!(super::human(512), "512 B");
        assert_eq!(super::human(1536), "1.5 KiB");
        assert_eq!(super::human(3 << 30), "3.0 GiB");
    }
}
