//! Which names a file system can hold, and when two names are one file.
//!
//! Pure rules, tested on every platform; `crate::path` applies them where
//! the platform needs them:
//! - [`windows_problem`]: a name Windows cannot hold or that aliases
//!   another there: not valid Unicode; a control character or one of
//!   `< > : " \ | ? *` (`:` opens an alternate data stream, `\` is the
//!   separator); a trailing dot or space (Windows drops it, so `a.` is
//!   `a`); a reserved device name (`CON`, `PRN`, `AUX`, `NUL`, `CONIN$`,
//!   `CONOUT$`, `COM0`–`COM9`, `LPT0`–`LPT9`, `COM¹`–`COM³`, `LPT¹`–`LPT³`,
//!   also with an extension or trailing spaces, in any case: `nul.txt` is
//!   the null device). On Windows such a name is refused at capture with
//!   this reason, and a stored path holding one is reported as not
//!   restored. Any name is looked at char by char, never cut at a byte
//!   index: `crème.txt` or `a中.txt` is a name like any other.
//! - [`identity_key`]: the key under which a case-insensitive,
//!   normalization-insensitive file system (APFS by default, NTFS, ext4
//!   casefold directories) files a name: Unicode NFC, then lower case.
//!   `Foo.txt` and `foo.txt`, or `é` as one code point and as `e` plus a
//!   combining accent, have one key there.

use unicode_normalization::UnicodeNormalization;

/// Why Windows cannot hold the file name `name` (one path component), or
/// `None` when it can.
pub fn windows_problem(name: &[u8]) -> Option<&'static str> {
    let Ok(text) = std::str::from_utf8(name) else {
        return Some("it is not valid Unicode, which a Windows name must be");
    };
    if text
        .chars()
        .any(|c| c < ' ' || matches!(c, '<' | '>' | ':' | '"' | '\\' | '|' | '?' | '*'))
    {
        return Some(
            "it holds a character Windows does not allow in a name (< > : \" \\ | ? * or a control character; : would name an alternate data stream)",
        );
    }
    if text.ends_with('.') || text.ends_with(' ') {
        return Some(
            "it ends with a dot or a space, which Windows drops, so it would name another file",
        );
    }
    if is_reserved_device(text) {
        return Some(
            "it is a reserved device name on Windows (CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM0-9, LPT0-9, with any extension)",
        );
    }
    None
}

/// Whether `name` (with any extension) names a DOS device on Windows: its
/// part before the first dot, trailing spaces dropped, compared without
/// regard to ASCII case (Windows 10 and earlier; Windows 11 no longer
/// counts an extension, so this is the stricter rule).
fn is_reserved_device(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
    const DEVICES: [&str; 6] = ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"];
    if DEVICES.iter().any(|d| stem.eq_ignore_ascii_case(d)) {
        return true;
    }
    // COM or LPT and one digit (Windows counts ¹ ² ³ as digits). Split only
    // where a char ends: `crème`, `señal` or `a中` have no third byte that
    // ends one, and are no port.
    stem.split_at_checked(3).is_some_and(|(head, port)| {
        (head.eq_ignore_ascii_case("COM") || head.eq_ignore_ascii_case("LPT"))
            && matches!(
                port,
                "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³"
            )
    })
}

/// The key a case- and normalization-insensitive file system files the
/// path or name `text` under: NFC, then lower case (full Unicode mapping).
pub fn identity_key(text: &str) -> String {
    text.nfc()
        .collect::<String>()
        .to_lowercase()
        .nfc()
        .collect()
}

/// Whether two names are one file on a case- and normalization-insensitive
/// file system.
pub fn same_identity(a: &str, b: &str) -> bool {
    a == b || identity_key(a) == identity_key(b)
}

/// What the file system a project lives on does not tell apart in names:
/// case (APFS and NTFS by default), Unicode normalization (APFS and HFS+:
/// `é` as one code point and as `e` plus a combining accent are one name).
/// Two spellings with one [`Folding::key`] are one file there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Folding {
    /// Case is not told apart.
    pub case: bool,
    /// Unicode normalization is not told apart.
    pub normalization: bool,
}

impl Folding {
    /// Whether it folds anything.
    pub fn any(self) -> bool {
        self.case || self.normalization
    }

    /// The key a file system with this folding files the path (raw bytes)
    /// under. Bytes that are not UTF-8 are their own key: they are never
    /// taken for another spelling.
    pub fn key(self, path: &[u8]) -> std::borrow::Cow<'_, [u8]> {
        use std::borrow::Cow;
        let Some(text) = std::str::from_utf8(path).ok().filter(|_| self.any()) else {
            return Cow::Borrowed(path);
        };
        if text.is_ascii() {
            return match self.case && text.bytes().any(|b| b.is_ascii_uppercase()) {
                true => Cow::Owned(text.to_ascii_lowercase().into_bytes()),
                false => Cow::Borrowed(path),
            };
        }
        let text: String = match (self.case, self.normalization) {
            (true, true) => identity_key(text),
            (true, false) => text.to_lowercase(),
            (false, _) => text.nfc().collect(),
        };
        Cow::Owned(text.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folding_keys_case_and_normalization_only_as_it_says() {
        let nfc = "caf\u{e9}/Readme.md".as_bytes();
        let nfd = "cafe\u{301}/readme.md".as_bytes();
        let both = Folding {
            case: true,
            normalization: true,
        };
        let case = Folding {
            case: true,
            normalization: false,
        };
        let norm = Folding {
            case: false,
            normalization: true,
        };
        assert_eq!(both.key(nfc), both.key(nfd));
        assert_ne!(case.key(nfc), case.key(nfd), "NTFS keeps é and e + ◌́ apart");
        assert_eq!(case.key(b"Readme.md"), case.key(b"README.MD"));
        assert_ne!(norm.key(nfc), norm.key(nfd), "case is told apart");
        assert_eq!(
            norm.key("caf\u{e9}".as_bytes()),
            norm.key("cafe\u{301}".as_bytes())
        );
        assert_eq!(Folding::default().key(b"A"), &b"A"[..]);
        assert_ne!(Folding::default().key(nfc), Folding::default().key(nfd));
        // Bytes that are not UTF-8 are only ever themselves.
        assert_eq!(both.key(b"A\xff"), &b"A\xff"[..]);
    }

    #[test]
    fn names_windows_cannot_hold_are_named_with_the_reason() {
        for ok in [
            "a.txt",
            "README.md",
            ".env",
            "console.d",
            "COMX",
            "com10",
            "LPT",
            "x y",
            "é",
        ] {
            assert_eq!(windows_problem(ok.as_bytes()), None, "{ok}");
        }
        let cases: &[(&[u8], &str)] = &[
            (b"CON", "reserved"),
            (b"nul.txt", "reserved"),
            (b"Aux.tar.gz", "reserved"),
            (b"COM1", "reserved"),
            (b"lpt9.log", "reserved"),
            ("COM\u{b9}".as_bytes(), "reserved"),
            (b"con .txt", "reserved"),
            (b"a.", "dot or a space"),
            (b"a ", "dot or a space"),
            (b"a:b", "alternate data stream"),
            (b"file.txt:stream", "alternate data stream"),
            (b"a\\b", "character"),
            (b"a*b", "character"),
            (b"q?", "character"),
            (b"tab\there", "character"),
            (b"\xff", "Unicode"),
        ];
        for (name, why) in cases {
            let got = windows_problem(name).unwrap_or("");
            assert!(
                got.contains(why),
                "{:?}: {got:?}",
                String::from_utf8_lossy(name)
            );
        }
    }

    /// Device names as Windows matches them, and names that are not, many
    /// of them with a char across the third byte (they panicked: the name
    /// was cut at byte 3).
    #[test]
    fn device_names_are_matched_by_chars_never_cut_inside_one() {
        for device in [
            "CON",
            "con",
            "aux.txt",
            "AUX.txt",
            "com1.log",
            "COM9",
            "LPT9",
            "lpt0.tar",
            "con.tar.gz",
            "CON .txt",
            "nul ",
            "Prn.x",
            "CONIN$",
            "conin$.txt",
            "CONOUT$",
            "COM\u{b9}",
            "lpt\u{b3}.log",
        ] {
            assert!(is_reserved_device(device), "{device:?} is a device");
        }
        for name in [
            "cr\u{e8}me.txt",
            "se\u{f1}al",
            "a\u{4e2d}.txt",
            "\u{1f600}.txt",
            "\u{1f600}",
            "\u{e9}",
            "\u{e9}\u{e9}",
            "CO\u{d1}1",
            "COM\u{b9}\u{b9}",
            "COM\u{2074}",
            "COM10",
            "COM",
            "CONIN",
            "CONIN$$",
            "console.log",
            "nul-device",
            "xcon",
            "",
            ".con",
        ] {
            assert!(!is_reserved_device(name), "{name:?} is no device");
            assert_eq!(windows_problem(name.as_bytes()), None, "{name:?}");
        }
    }

    #[test]
    fn case_and_normalization_give_one_identity() {
        assert!(same_identity("Foo.txt", "foo.txt"));
        assert!(same_identity("README.md", "Readme.md"));
        // NFC (one code point) and NFD (e + combining acute accent).
        assert!(same_identity("caf\u{e9}", "cafe\u{301}"));
        assert!(same_identity("CAF\u{c9}", "cafe\u{301}"));
        assert!(same_identity("STRASSE", "strasse"));
        assert!(!same_identity("a.txt", "b.txt"));
        assert!(!same_identity("a.txt", "a.txt "));
        assert_eq!(identity_key("Ä/B"), identity_key("a\u{308}/b"));
    }
}
