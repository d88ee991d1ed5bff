//! Codex's sandbox and turnback's store: `init codex` adds turnback's data
//! directory to `[sandbox_workspace_write] writable_roots` in the project's
//! `.codex/config.toml`.
//!
//! Why: under Codex's usual sandbox (`workspace-write`, what a trusted
//! project gets) a command the model runs may write only the workspace, the
//! temporary directories and these roots; the `$turnback` skill's command
//! (`turnback rewind TURN`) writes the store, which lives in the data
//! directory, and failed with `Read-only file system` (issue 27). The hooks
//! run outside the sandbox and need nothing. Codex 0.171 reads a project's
//! `.codex/config.toml` only in a trusted project (as it loads the
//! project's hooks), merges it over the user's `config.toml`, and resolves
//! each writable root as a path: `~/` is the home folder, a relative path
//! is taken from `.codex/` (codex-rs `config/src/loader/mod.rs`,
//! `utils/absolute-path`).
//!
//! The file is edited, not rewritten: every other setting, comment and
//! root stays where it was. turnback's entry is the array element preceded
//! by a comment holding ``Installed by `turnback init codex` ``: a later
//! `init` updates it in place (the data directory moved) or removes it (the
//! user lists the same directory themselves); nothing else is touched. A
//! data directory under the home folder is written `~/…`, so the file, if
//! committed, works for every user whose data directory is in the usual
//! place.

use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, Item, Value};

/// The file, relative to the project root.
pub const FILE: &str = ".codex/config.toml";

const MARKER: &str = "Installed by `turnback init codex`";
const INDENT: &str = "    ";

/// The comment line above turnback's entry.
fn comment() -> String {
    format!(
        "# turnback's data directory, where `$turnback rewind` writes the project's store. {MARKER}."
    )
}

/// How `data_dir` is written: `~/…` when it lies under `home` (on Unix,
/// where Codex's `~` and turnback's home are both `$HOME`), else whole.
pub fn root_entry(data_dir: &Path, home: Option<&Path>) -> String {
    if cfg!(unix)
        && let Some(rel) = home.and_then(|h| data_dir.strip_prefix(h).ok())
        && !rel.as_os_str().is_empty()
    {
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        return format!("~/{}", rel.join("/"));
    }
    data_dir.to_string_lossy().into_owned()
}

/// A root as Codex reads it: `~` and `~/…` under `home`, a relative path
/// from the `.codex/` folder `dot_codex`.
fn resolve(entry: &str, home: Option<&Path>, dot_codex: &Path) -> PathBuf {
    if let Some(home) = home {
        if entry == "~" {
            return home.to_owned();
        }
        if let Some(rest) = entry.strip_prefix("~/") {
            return home.join(rest.trim_start_matches('/'));
        }
    }
    dot_codex.join(entry)
}

/// Whether an array element is turnback's: the comment before it carries
/// the marker.
fn is_ours(v: &Value) -> bool {
    v.decor()
        .prefix()
        .and_then(|p| p.as_str())
        .is_some_and(|p| p.contains(MARKER))
}

/// `old` (the file's text, if it exists) with `entry` among the sandbox's
/// writable roots; `dot_codex` is the `.codex/` folder, `home` the home
/// folder (for comparing the user's roots with turnback's).
pub fn merge(
    old: Option<&str>,
    entry: &str,
    home: Option<&Path>,
    dot_codex: &Path,
) -> anyhow::Result<String> {
    let mut doc: DocumentMut = old.unwrap_or_default().parse()?;
    const KEY: &str = "sandbox_workspace_write";
    // An inline table cannot hold the commented, one-per-line list: it
    // becomes a table of its own, its keys and values kept.
    if doc.get(KEY).is_some_and(Item::is_inline_table)
        && let Some(Item::Value(Value::InlineTable(t))) = doc.remove(KEY)
    {
        let mut table = t.into_table();
        table.fmt();
        doc.insert(KEY, Item::Table(table));
    }
    let item = doc.entry(KEY).or_insert_with(toml_edit::table);
    let Some(table) = item.as_table_like_mut() else {
        anyhow::bail!("its sandbox_workspace_write is not a table");
    };
    let roots = table
        .entry("writable_roots")
        .or_insert(Item::Value(Value::Array(Array::new())));
    let Some(roots) = roots.as_array_mut() else {
        anyhow::bail!("its sandbox_workspace_write.writable_roots is not an array");
    };
    let want = resolve(entry, home, dot_codex);
    let listed_by_user = roots
        .iter()
        .filter(|v| !is_ours(v))
        .filter_map(Value::as_str)
        .any(|s| resolve(s, home, dot_codex) == want);
    let ours: Vec<usize> = (0..roots.len())
        .filter(|i| roots.get(*i).is_some_and(is_ours))
        .collect();
    // Keep the first of turnback's entries (updated) unless the user lists
    // the directory; drop any other.
    let keep = if listed_by_user {
        None
    } else {
        ours.first().copied()
    };
    for i in ours.iter().rev().copied().filter(|i| Some(*i) != keep) {
        roots.remove(i);
    }
    if listed_by_user {
        return Ok(doc.to_string());
    }
    match keep {
        Some(i) => {
            if roots.get(i).and_then(Value::as_str) != Some(entry) {
                let mut v = Value::from(entry);
                if let Some(old) = roots.get(i) {
                    *v.decor_mut() = old.decor().clone();
                }
                roots.replace_formatted(i, v);
            }
        }
        None => push_ours(roots, entry),
    }
    Ok(doc.to_string())
}

/// Appends turnback's entry, one element per line with its comment above;
/// a list written on one line is laid out the same way first.
fn push_ours(roots: &mut Array, entry: &str) {
    let multiline = roots.trailing().as_str().is_some_and(|t| t.contains('\n'))
        || roots.iter().any(|v| {
            [v.decor().prefix(), v.decor().suffix()]
                .into_iter()
                .flatten()
                .any(|s| s.as_str().is_some_and(|s| s.contains('\n')))
        });
    if !multiline {
        for v in roots.iter_mut() {
            v.decor_mut().set_prefix(format!("\n{INDENT}"));
            v.decor_mut().set_suffix("");
        }
        roots.set_trailing("\n");
    } else if let Some(last) = roots.len().checked_sub(1).and_then(|i| roots.get_mut(i)) {
        // The line break before `]` after a last element without a comma
        // is that element's: it moves after the comma that now follows it.
        let suffix = last
            .decor()
            .suffix()
            .and_then(|s| s.as_str())
            .map(str::to_owned)
            .unwrap_or_default();
        if suffix.trim().is_empty() && suffix.contains('\n') {
            last.decor_mut().set_suffix("");
            if roots
                .trailing()
                .as_str()
                .is_none_or(|t| t.trim().is_empty())
            {
                roots.set_trailing(suffix);
            }
        }
    }
    roots.set_trailing_comma(true);
    let mut v = Value::from(entry);
    v.decor_mut()
        .set_prefix(format!("\n{INDENT}{}\n{INDENT}", comment()));
    v.decor_mut().set_suffix("");
    roots.push_formatted(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOT: &str = "/p/.codex";

    fn merged(old: Option<&str>, entry: &str) -> anyhow::Result<String> {
        merge(old, entry, Some(Path::new("/home/u")), Path::new(DOT))
    }

    fn roots(text: &str) -> anyhow::Result<Vec<String>> {
        let doc: DocumentMut = text.parse()?;
        Ok(doc["sandbox_workspace_write"]["writable_roots"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }

    #[test]
    fn the_data_directory_is_written_from_home_when_it_lies_there() {
        let home = Some(Path::new("/home/u"));
        let under = Path::new("/home/u/.local/share/turnback");
        let want = if cfg!(unix) {
            "~/.local/share/turnback"
        } else {
            "/home/u/.local/share/turnback"
        };
        assert_eq!(root_entry(under, home), want);
        assert_eq!(
            root_entry(Path::new("/srv/turnback"), home),
            "/srv/turnback"
        );
        assert_eq!(root_entry(under, None), "/home/u/.local/share/turnback");
    }

    #[test]
    fn a_new_file_gets_the_table_and_a_second_merge_changes_nothing() -> anyhow::Result<()> {
        let once = merged(None, "~/.local/share/turnback")?;
        assert_eq!(
            once,
            format!(
                "[sandbox_workspace_write]\nwritable_roots = [\n    {}\n    \"~/.local/share/turnback\",\n]\n",
                comment()
            )
        );
        assert_eq!(merged(Some(&once), "~/.local/share/turnback")?, once);
        Ok(())
    }

    #[test]
    fn the_users_settings_comments_and_roots_stay() -> anyhow::Result<()> {
        let user = "# my Codex settings\nmodel = \"o3\" # the model\n\n[sandbox_workspace_write]\nnetwork_access = true\nwritable_roots = [\"/srv/cache\"] # for the build\n\n[features]\nhooks = true\n";
        let once = merged(Some(user), "~/.local/share/turnback")?;
        assert!(once.starts_with("# my Codex settings\nmodel = \"o3\" # the model\n"));
        assert!(once.contains("network_access = true\n"), "{once}");
        assert!(once.contains("] # for the build\n"), "{once}");
        assert!(once.ends_with("[features]\nhooks = true\n"), "{once}");
        assert_eq!(roots(&once)?, ["/srv/cache", "~/.local/share/turnback"]);
        assert_eq!(merged(Some(&once), "~/.local/share/turnback")?, once);
        // A list already laid out one per line keeps its comments.
        let user =
            "[sandbox_workspace_write]\nwritable_roots = [\n  # the cache\n  \"/srv/cache\"\n]\n";
        let once = merged(Some(user), "/data/turnback")?;
        assert!(
            once.contains("  # the cache\n  \"/srv/cache\",\n"),
            "{once}"
        );
        assert_eq!(roots(&once)?, ["/srv/cache", "/data/turnback"]);
        assert_eq!(merged(Some(&once), "/data/turnback")?, once);
        Ok(())
    }

    #[test]
    fn a_moved_data_directory_updates_turnbacks_entry_alone() -> anyhow::Result<()> {
        let once = merged(
            Some("[sandbox_workspace_write]\nwritable_roots = [\"/a\"]\n"),
            "/old/turnback",
        )?;
        let moved = merged(Some(&once), "/new/turnback")?;
        assert_eq!(roots(&moved)?, ["/a", "/new/turnback"]);
        assert_eq!(moved, once.replace("/old/turnback", "/new/turnback"));
        Ok(())
    }

    #[test]
    fn a_directory_the_user_lists_is_not_listed_twice() -> anyhow::Result<()> {
        // Listed by the user, as `~/…` or whole: turnback adds nothing.
        for user in ["~/.local/share/turnback", "/home/u/.local/share/turnback"] {
            let text = format!("[sandbox_workspace_write]\nwritable_roots = [\"{user}\"]\n");
            assert_eq!(merged(Some(&text), "~/.local/share/turnback")?, text);
        }
        // Listed after turnback's entry was: turnback's goes.
        let once = merged(None, "/data/turnback")?;
        let doc = once.replace(
            "writable_roots = [\n",
            "writable_roots = [\n    \"/data/turnback\",\n",
        );
        let again = merged(Some(&doc), "/data/turnback")?;
        assert_eq!(roots(&again)?, ["/data/turnback"]);
        assert!(!again.contains(MARKER), "{again}");
        Ok(())
    }

    #[test]
    fn inline_and_dotted_tables_are_merged_too() -> anyhow::Result<()> {
        let once = merged(
            Some("sandbox_workspace_write = { network_access = true }\n"),
            "/data/turnback",
        )?;
        assert_eq!(roots(&once)?, ["/data/turnback"]);
        assert!(once.contains("network_access = true"), "{once}");
        assert_eq!(merged(Some(&once), "/data/turnback")?, once);
        let once = merged(
            Some("sandbox_workspace_write.network_access = true\n"),
            "/data/turnback",
        )?;
        assert_eq!(roots(&once)?, ["/data/turnback"]);
        assert_eq!(merged(Some(&once), "/data/turnback")?, once);
        Ok(())
    }

    #[test]
    fn settings_of_the_wrong_shape_are_refused() {
        for bad in [
            "sandbox_workspace_write = 3\n",
            "[sandbox_workspace_write]\nwritable_roots = \"/a\"\n",
            "not toml at all [\n",
        ] {
            assert!(merged(Some(bad), "/data/turnback").is_err(), "{bad}");
        }
    }
}
