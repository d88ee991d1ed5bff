//! The paths a patch in the `*** Begin Patch` format names: the format of
//! Codex's `apply_patch` tool (`tool_input.command`), which opencode and
//! Cline also offer. A patch is a list of file operations, each opened by a
//! header line:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: docs/new.md
//! +text
//! *** Update File: src/app.js
//! *** Move to: src/main.js
//! @@
//! -old
//! +new
//! *** Delete File: old.txt
//! *** End Patch
//! ```
//!
//! Every path a header names is returned (an update's source and its
//! `Move to` destination both), in order, each once, as written: relative
//! paths are relative to the agent's working directory. Content lines start
//! with `+`, `-`, a space or `@@`, so they are never read as headers (a
//! header starts at the beginning of its line). The
//! text around the patch (a shell heredoc, say) is ignored.

/// The header prefixes that name a path.
const HEADERS: [&str; 4] = [
    "*** Add File:",
    "*** Update File:",
    "*** Delete File:",
    "*** Move to:",
];

/// The paths `patch` names, in order, each once.
pub fn paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let Some(rest) = HEADERS.iter().find_map(|h| line.strip_prefix(h)) else {
            continue;
        };
        let path = rest.trim();
        if !path.is_empty() && !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_names_its_paths() {
        let patch = "*** Begin Patch\n\
                     *** Add File: docs/new.md\n\
                     +# New\n\
                     *** Update File: src/app.js\n\
                     *** Move to: src/main.js\n\
                     @@ fn main\n\
                     -old\n\
                     +new\n\
                     *** Delete File: old.txt\n\
                     *** End Patch\n";
        assert_eq!(
            paths(patch),
            ["docs/new.md", "src/app.js", "src/main.js", "old.txt"]
        );
    }

    #[test]
    fn content_lines_are_not_headers() {
        let patch = "*** Begin Patch\n\
                     *** Add File: notes.md\n\
                     +*** Delete File: not-a-header.txt\n\
                     *** Update File: a.txt\n\
                     @@\n\
                     -*** Add File: nor-this.txt\n\
                     + *** Move to: nor-that.txt\n\
                     \x20*** Delete File: a context line.txt\n\
                     *** End Patch";
        assert_eq!(paths(patch), ["notes.md", "a.txt"]);
    }

    #[test]
    fn crlf_spaces_repeats_and_heredocs() {
        let patch = "apply_patch <<'EOF'\r\n*** Begin Patch\r\n\
                     *** Update File:   dir with space/a b.txt  \r\n\
                     @@\r\n-x\r\n+y\r\n\
                     *** Update File: dir with space/a b.txt\r\n\
                     *** Add File: /abs/path.txt\r\n+z\r\n\
                     *** End Patch\r\nEOF\r\n";
        assert_eq!(paths(patch), ["dir with space/a b.txt", "/abs/path.txt"]);
    }

    #[test]
    fn no_headers_no_paths() {
        assert!(paths("").is_empty());
        assert!(paths("echo hi").is_empty());
        assert!(paths("*** Begin Patch\n*** Add File:\n*** End Patch").is_empty());
    }
}
