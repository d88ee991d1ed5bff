//! `turnback init <agent>`: set a project up for an agent.
//!
//! Each agent's hooks go into its own project-level configuration:
//!
//! | agent | file | how |
//! | --- | --- | --- |
//! | `claude-code` | `.claude/settings.json` | merged |
//! | `gemini-cli` | `.gemini/settings.json` | merged |
//! | `codex` | `.codex/hooks.json` | merged |
//! | `copilot` | `.github/hooks/turnback.json` | merged |
//! | `cursor` | `.cursor/hooks.json` | merged |
//! | `cline` | `.clinerules/hooks/<Event>` | one script per event |
//! | `opencode` | `.opencode/plugin/turnback.js` | a plugin |
//!
//! A merged file is created if missing; every other setting and every other
//! hook in it is kept, in its order; handlers that run `… hook <agent>` are
//! replaced (see [`merge`]). A file turnback owns (a hook script, the
//! plugin, a chat command) carries the line `Installed by `turnback init
//! <agent>``; an existing file of that name without it is the user's, and
//! `init` stops before writing anything. Running `init` twice changes
//! nothing the second time. Each file is replaced atomically (temporary
//! file beside it, fsync, rename, directory fsync). `init` also creates the
//! store, so hooks run from a subdirectory find the project root, and
//! installs the agent's chat commands (see [`chat`]). A file an earlier
//! `init` owned and this one no longer installs (Codex's custom prompts in
//! `$CODEX_HOME/prompts/`, which Codex 0.171 no longer reads) is removed if
//! it still carries the marker. `--print` prints the configuration for a
//! user-level install instead and writes nothing.
//!
//! Two agents need more for their chat commands to run as users run them:
//! `init codex` adds turnback's data directory to the sandbox's writable
//! roots in `.codex/config.toml` (see [`codex_config`]), and `init
//! gemini-cli` writes the user-level policy `~/.gemini/policies/turnback.toml`
//! that lets the commands' turnback command run (see
//! [`chat::gemini_policy`]).

mod chat;
mod codex_config;
mod merge;
mod program;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value};
use turnback::Options;

use super::hook::engine::Dialect;
use super::hook::{claude_code, cline, codex, copilot, cursor, gemini_cli, opencode};
use crate::{Ctx, Outcome};

/// Set a project up for an agent (install its hooks and chat commands)
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    agent: Agent,
}

#[derive(clap::Subcommand, Debug)]
enum Agent {
    /// Merge turnback's hooks into .claude/settings.json; add
    /// .claude/commands/turnback-{list,rewind,undo}.md
    ClaudeCode(AgentArgs),
    /// Merge turnback's hooks into .gemini/settings.json; add
    /// .gemini/commands/turnback/{list,rewind,undo}.toml and the policy
    /// ~/.gemini/policies/turnback.toml that lets them run turnback
    GeminiCli(AgentArgs),
    /// Merge turnback's hooks into .codex/hooks.json; add the skill
    /// .agents/skills/turnback/SKILL.md ($turnback list, rewind TURN, undo)
    /// and the data directory to the sandbox's writable roots in
    /// .codex/config.toml
    Codex(AgentArgs),
    /// Write .github/hooks/turnback.json; add the skill
    /// .github/skills/turnback/SKILL.md (/turnback list, rewind TURN, undo)
    Copilot(AgentArgs),
    /// Write one hook script per event in .clinerules/hooks/; add the
    /// workflows .clinerules/workflows/turnback-{list,rewind,undo}.md
    Cline(AgentArgs),
    /// Write the plugin .opencode/plugin/turnback.js; add
    /// .opencode/command/turnback-{list,rewind,undo}.md
    Opencode(AgentArgs),
    /// Merge turnback's hooks into .cursor/hooks.json
    Cursor(AgentArgs),
}

#[derive(clap::Args, Debug)]
struct AgentArgs {
    /// Print the configuration (for the agent's user-level settings)
    /// instead of writing the project's
    #[arg(long)]
    print: bool,

    /// The turnback program the hooks run [default: `turnback` when it is
    /// this program (or the npm shim that started it) on PATH, else a path
    /// that survives upgrades: npm's shim, Homebrew's link, or this
    /// program's absolute path outside a versioned folder]
    #[arg(long, value_name = "PROGRAM")]
    program: Option<String>,
}

/// A file `init` writes whole and owns.
#[derive(Debug)]
pub struct OwnedFile {
    /// Relative to the project root, or absolute.
    pub path: PathBuf,
    pub text: String,
    pub executable: bool,
}

impl OwnedFile {
    fn project(rel: String, text: String) -> Self {
        OwnedFile {
            path: PathBuf::from(rel),
            text,
            executable: false,
        }
    }
}

/// What `init` installs for one agent.
struct Plan {
    dialect: &'static Dialect,
    /// A settings file (relative to the root) and the hooks merged into it.
    settings: Option<(&'static str, Value)>,
    /// Files turnback owns.
    files: Vec<OwnedFile>,
    /// Files an earlier `init` wrote and this one no longer installs
    /// (absolute): removed if they still carry turnback's marker; a file of
    /// that name without it is the user's and stays.
    stale: Vec<PathBuf>,
    /// For `--print`: where the files go in a user-level install (named on
    /// stderr).
    user_level: Option<&'static str>,
    /// A folder the agent's sandbox must let its commands write for the
    /// chat commands to work (turnback's data directory, as Codex's
    /// `writable_roots` entry; see [`codex_config`]).
    writable_root: Option<String>,
}

/// The program the hooks run: as the start of a command line for each
/// kind of shell an agent runs its hooks through, and as a plain path.
struct Program {
    /// For a POSIX shell: `sh` on Linux and macOS; Git Bash, Claude Code's
    /// hook shell on Windows (and cmd there too: a double-quoted path).
    shell: String,
    /// For PowerShell and cmd alike: what Gemini CLI, Codex, Copilot's
    /// `powershell` key and Cursor run on Windows (see
    /// [`Program::for_powershell`]).
    powershell: String,
    raw: String,
}

impl Program {
    /// `turnback`, found on PATH by any shell.
    fn on_path() -> Program {
        Program {
            shell: "turnback".into(),
            powershell: "turnback".into(),
            raw: "turnback".into(),
        }
    }

    /// The program at `path`, its spelling left as it is (`--program`).
    fn given(path: String) -> Program {
        Program {
            shell: path.clone(),
            powershell: path.clone(),
            raw: path,
        }
    }

    /// The start of the hook command for an agent that runs it through
    /// this platform's own shell: `sh` on Linux and macOS; PowerShell (or
    /// cmd) on Windows, where a command line that begins with a quoted
    /// path is a string to PowerShell, not a command (`"C:\…\turnback.exe"
    /// hook gemini-cli` fails there with "Unexpected token 'hook'").
    fn native(&self) -> &str {
        if cfg!(windows) {
            &self.powershell
        } else {
            &self.shell
        }
    }

    /// The program as the start of a command line both PowerShell and cmd
    /// run: on Windows `cmd /c "C:\…\turnback.exe"` (PowerShell runs `cmd`
    /// with the quoted path as one argument, cmd runs it: the one spelling
    /// of a path with spaces that works in both); elsewhere, for pwsh,
    /// `& 'path'` (single quotes keep every character but `'`, doubled).
    fn for_powershell(raw: &str) -> String {
        if cfg!(windows) {
            format!("cmd /c \"{raw}\"")
        } else {
            format!("& '{}'", raw.replace('\'', "''"))
        }
    }
}

pub fn run(ctx: &Ctx, args: Args) -> Outcome {
    let (a, plan): (AgentArgs, fn(&Program) -> anyhow::Result<Plan>) = match args.agent {
        Agent::ClaudeCode(a) => (a, plan_claude_code),
        Agent::GeminiCli(a) => (a, plan_gemini_cli),
        Agent::Codex(a) => (a, plan_codex),
        Agent::Copilot(a) => (a, plan_copilot),
        Agent::Cline(a) => (a, plan_cline),
        Agent::Opencode(a) => (a, plan_opencode),
        Agent::Cursor(a) => (a, plan_cursor),
    };
    let program = match a.program {
        Some(p) => Program::given(p),
        None => default_program()?,
    };
    let plan = plan(&program)?;
    if a.print {
        print_plan(&plan)?;
        return Ok(0);
    }
    install(ctx, plan)
}

fn hooks_doc(hooks: Value) -> Value {
    serde_json::json!({ "hooks": hooks })
}

fn plan_claude_code(p: &Program) -> anyhow::Result<Plan> {
    let d = &claude_code::DIALECT;
    let hooks = claude_code::settings_hooks(&format!("{} hook {}", p.shell, d.name));
    Ok(Plan {
        dialect: d,
        settings: Some((d.settings_file, hooks_doc(hooks))),
        files: chat::claude_code(&p.shell),
        stale: Vec::new(),
        user_level: None,
        writable_root: None,
    })
}

fn plan_gemini_cli(p: &Program) -> anyhow::Result<Plan> {
    let d = &gemini_cli::DIALECT;
    // Gemini CLI runs hooks and `!{…}` through its platform shell:
    // PowerShell on Windows.
    let hooks = gemini_cli::settings_hooks(&format!("{} hook {}", p.native(), d.name));
    let mut files = chat::gemini_cli(p.native());
    // Without an allow rule, Gemini CLI refuses the commands' turnback
    // command outside yolo mode; only a user-level policy can allow it.
    // Its prefixes are the commands' own spelling of the program.
    files.push(chat::gemini_policy(p.native(), &gemini_dir()?));
    Ok(Plan {
        dialect: d,
        settings: Some((d.settings_file, hooks_doc(hooks))),
        files,
        stale: Vec::new(),
        user_level: None,
        writable_root: None,
    })
}

fn plan_codex(p: &Program) -> anyhow::Result<Plan> {
    let d = &codex::DIALECT;
    // Codex runs hooks through the session's shell: PowerShell on Windows
    // (cmd when it finds none).
    let hooks = codex::settings_hooks(&format!("{} hook {}", p.native(), d.name));
    // The prompts earlier releases wrote, where they wrote them; with no
    // CODEX_HOME and no HOME there is nothing to look for.
    let stale = match std::env::var_os("CODEX_HOME") {
        Some(h) => Some(PathBuf::from(h)),
        None => home_dir().map(|h| h.join(".codex")),
    }
    .map(|h| chat::codex_stale_prompts(&h))
    .unwrap_or_default();
    // The skill's `turnback rewind` writes the store, in the data
    // directory, which Codex's workspace-write sandbox keeps read-only.
    let data_dir = turnback::location::data_dir()?;
    Ok(Plan {
        dialect: d,
        settings: Some((d.settings_file, hooks_doc(hooks))),
        files: vec![chat::codex(&p.shell)],
        stale,
        user_level: Some("~/.agents/skills/turnback/SKILL.md"),
        writable_root: Some(codex_config::root_entry(&data_dir, home_dir().as_deref())),
    })
}

fn plan_copilot(p: &Program) -> anyhow::Result<Plan> {
    let d = &copilot::DIALECT;
    Ok(Plan {
        dialect: d,
        settings: Some((
            d.settings_file,
            copilot::hooks_file(&p.shell, &p.powershell),
        )),
        files: vec![chat::copilot(&p.shell)],
        stale: Vec::new(),
        user_level: Some("~/.copilot/skills/turnback/SKILL.md"),
        writable_root: None,
    })
}

fn plan_cursor(p: &Program) -> anyhow::Result<Plan> {
    let d = &cursor::DIALECT;
    // Cursor on Windows has been seen running hooks through PowerShell and
    // through cmd: the native line runs in both.
    let command = format!("{} hook {}", p.native(), d.name);
    Ok(Plan {
        dialect: d,
        settings: Some((d.settings_file, cursor::hooks_file(&command))),
        files: Vec::new(),
        stale: Vec::new(),
        user_level: None,
        writable_root: None,
    })
}

fn plan_cline(p: &Program) -> anyhow::Result<Plan> {
    let mut files: Vec<OwnedFile> = cline::EVENTS
        .iter()
        .map(|e| OwnedFile {
            path: PathBuf::from(format!("{}{e}", cline::DIALECT.settings_file)),
            text: cline::hook_script(&p.shell),
            executable: true,
        })
        .collect();
    files.extend(chat::cline(&p.shell));
    Ok(Plan {
        dialect: &cline::DIALECT,
        settings: None,
        files,
        stale: Vec::new(),
        user_level: Some(
            "~/Documents/Cline/Hooks/ (the hook scripts) and ~/Documents/Cline/Workflows/ (the workflows)",
        ),
        writable_root: None,
    })
}

fn plan_opencode(p: &Program) -> anyhow::Result<Plan> {
    let d = &opencode::DIALECT;
    let mut files = vec![OwnedFile::project(
        d.settings_file.to_owned(),
        opencode::plugin_source(&p.raw),
    )];
    files.extend(chat::opencode(&p.shell));
    Ok(Plan {
        dialect: d,
        settings: None,
        files,
        stale: Vec::new(),
        user_level: None,
        writable_root: None,
    })
}

/// Gemini CLI's user folder: `$GEMINI_CLI_HOME/.gemini`, else the home
/// folder's `.gemini` (Gemini CLI's `homedir()`: `os.homedir()`, which is
/// `$HOME` on Unix and the profile folder on Windows).
fn gemini_dir() -> anyhow::Result<PathBuf> {
    std::env::var_os("GEMINI_CLI_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(std::env::home_dir)
        .filter(|h| h.is_absolute())
        .map(|h| h.join(".gemini"))
        .context("cannot find the home folder, whose .gemini/policies/ Gemini CLI reads; set HOME (or GEMINI_CLI_HOME)")
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
}

/// `--print`: the settings to merge (JSON on stdout), or, for agents
/// configured by files alone, each file after a `# PATH` line. Chat
/// commands beside settings are named on stderr.
fn print_plan(plan: &Plan) -> std::io::Result<()> {
    if let Some((_, doc)) = &plan.settings {
        outln!(
            "{}",
            serde_json::to_string_pretty(doc).expect("JSON values serialize")
        )?;
        for f in &plan.files {
            let what = if f.path.is_absolute() {
                "the policy"
            } else {
                "the chat command"
            };
            errln!(
                "turnback: `turnback init {}` also writes {what} {}",
                plan.dialect.name,
                f.path.display()
            );
        }
        if let Some(entry) = &plan.writable_root {
            errln!(
                "turnback: for the chat commands under Codex's sandbox, `turnback init {}` also adds {entry:?} to [sandbox_workspace_write] writable_roots in {} (for every project: in ~/.codex/config.toml)",
                plan.dialect.name,
                codex_config::FILE
            );
        }
        if let Some(user) = plan.user_level {
            errln!(
                "turnback: for every project, put the same file in {user} (`turnback init {}` in a project writes it; copy it from there)",
                plan.dialect.name
            );
        }
        return Ok(());
    }
    for f in &plan.files {
        outln!("# {}\n{}", f.path.display(), f.text)?;
    }
    if let Some(user) = plan.user_level {
        errln!("turnback: for every project, put them in {user}");
    }
    Ok(())
}

fn install(ctx: &Ctx, plan: Plan) -> Outcome {
    let root = ctx.root()?;
    let d = plan.dialect;
    // Check every file before writing any.
    let settings = match &plan.settings {
        Some((rel, ours)) => Some(merged_settings(&root.join(rel), ours, d)?),
        None => None,
    };
    let sandbox = match &plan.writable_root {
        Some(entry) => Some(merged_codex_config(&root, entry, d)?),
        None => None,
    };
    let files: Vec<(PathBuf, &OwnedFile, bool)> = plan
        .files
        .iter()
        .map(|f| {
            let path = root.join(&f.path);
            owned_file_changed(&path, f, d).map(|changed| (path, f, changed))
        })
        .collect::<anyhow::Result<_>>()?;
    let stale: Vec<&PathBuf> = plan
        .stale
        .iter()
        .filter_map(|p| is_ours(p, d).transpose())
        .collect::<anyhow::Result<_>>()?;
    let mut store = ctx.open(Options::default())?;
    store.ensure_created()?;
    let mut written = Vec::new();
    for (path, bytes, changed) in settings.into_iter().chain(sandbox) {
        if changed {
            write_atomically(&path, &bytes, false)?;
            written.push(path);
        }
    }
    for (path, f, changed) in files {
        if changed {
            write_atomically(&path, f.text.as_bytes(), f.executable)?;
            written.push(path);
        }
    }
    let mut removed = Vec::new();
    for path in stale {
        remove_durably(path)?;
        removed.push(path.clone());
    }
    report(ctx, d, &written, &removed)
}

/// `Some(path)` if `path` exists and carries turnback's marker for `d`.
fn is_ours<'a>(path: &'a PathBuf, d: &Dialect) -> anyhow::Result<Option<&'a PathBuf>> {
    let marker = format!("turnback init {}`", d.name);
    Ok(read_if_exists(path)?
        .filter(|old| String::from_utf8_lossy(old).contains(&marker))
        .map(|_| path))
}

fn remove_durably(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot remove {}", path.display())));
        }
    }
    let dir = path.parent().expect("a removed file has a parent");
    turnback::sync_dir(dir).with_context(|| format!("cannot fsync {}", dir.display()))
}

fn report(ctx: &Ctx, d: &Dialect, written: &[PathBuf], removed: &[PathBuf]) -> Outcome {
    let changed = !written.is_empty() || !removed.is_empty();
    if ctx.json() {
        ctx.print_json(&serde_json::json!({
            "agent": d.name,
            "written": written,
            "removed": removed,
            "changed": changed,
        }))?;
    } else if !changed {
        outln!("turnback is already installed for {}", d.agent)?;
    } else {
        for p in written {
            outln!("wrote {}", p.display())?;
        }
        for p in removed {
            outln!("removed {} (no longer used)", p.display())?;
        }
        outln!("{} picks them up in its next session.", d.agent)?;
    }
    Ok(0)
}

/// The settings file's new bytes, and whether they differ from the old.
fn merged_settings(
    path: &Path,
    ours: &Value,
    d: &Dialect,
) -> anyhow::Result<(PathBuf, Vec<u8>, bool)> {
    let old = read_if_exists(path)?;
    let settings: Value = match &old {
        Some(b) if b.iter().all(u8::is_ascii_whitespace) => Value::Object(Map::new()),
        Some(b) => serde_json::from_slice(b).with_context(|| {
            format!(
                "{} is not valid JSON; fix it (or move it away) and run `turnback init {}` again; it was left unchanged",
                path.display(),
                d.name
            )
        })?,
        None => Value::Object(Map::new()),
    };
    let merged = merge::merge(settings, ours, d)
        .with_context(|| format!("cannot merge into {}", path.display()))?;
    let mut bytes = serde_json::to_vec_pretty(&merged)?;
    bytes.push(b'\n');
    let changed = old.as_deref() != Some(bytes.as_slice());
    Ok((path.to_owned(), bytes, changed))
}

/// `.codex/config.toml` with `entry` among the sandbox's writable roots:
/// its new bytes, and whether they differ from the old.
fn merged_codex_config(
    root: &Path,
    entry: &str,
    d: &Dialect,
) -> anyhow::Result<(PathBuf, Vec<u8>, bool)> {
    let path = root.join(codex_config::FILE);
    let old = read_if_exists(&path)?;
    let unreadable = || {
        format!(
            "cannot add turnback's data directory to the sandbox's writable roots in {}; fix it (or move it away) and run `turnback init {}` again; it was left unchanged",
            path.display(),
            d.name
        )
    };
    let old_text = old
        .as_deref()
        .map(std::str::from_utf8)
        .transpose()
        .with_context(unreadable)?;
    let dot_codex = path.parent().expect("the config file has a parent");
    let text = codex_config::merge(old_text, entry, home_dir().as_deref(), dot_codex)
        .with_context(unreadable)?;
    let changed = old.as_deref() != Some(text.as_bytes());
    Ok((path, text.into_bytes(), changed))
}

/// Whether an owned file needs writing; an existing file that is not
/// turnback's is an error.
fn owned_file_changed(path: &Path, f: &OwnedFile, d: &Dialect) -> anyhow::Result<bool> {
    let Some(old) = read_if_exists(path)? else {
        return Ok(true);
    };
    let marker = format!("turnback init {}`", d.name);
    if !String::from_utf8_lossy(&old).contains(&marker) {
        bail!(
            "{} exists and was not written by turnback; move it away (or make it run `turnback hook {}` itself) and run `turnback init {}` again; nothing was changed",
            path.display(),
            d.name,
            d.name
        );
    }
    let mode_ok =
        !f.executable || std::fs::metadata(path).is_ok_and(|m| crate::platform::is_executable(&m));
    Ok(old != f.text.as_bytes() || !mode_ok)
}

fn read_if_exists(path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display()))),
    }
}

fn write_atomically(path: &Path, bytes: &[u8], executable: bool) -> anyhow::Result<()> {
    let dir = path.parent().expect("an installed file has a parent");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".turnback-init.")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let mode = if executable { 0o755 } else { 0o644 };
    tmp.write_all(bytes)
        .and_then(|()| crate::platform::set_mode(tmp.as_file(), mode))
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    turnback::sync_dir(dir).with_context(|| format!("cannot fsync {}", dir.display()))?;
    Ok(())
}

/// How the hooks name this program: a name that survives an upgrade (see
/// [`program`]), its path quoted for the shell where the hooks run through
/// one.
fn default_program() -> anyhow::Result<Program> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let shim = std::env::var_os(program::SHIM_ENV)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let path_var = std::env::var_os("PATH");
    Ok(
        match program::choose(&exe, shim.as_deref(), path_var.as_deref()) {
            program::Choice::OnPath => Program::on_path(),
            program::Choice::At(path) => program_at(&path),
            program::Choice::OnPathUnverified { exe } => {
                errln!(
                    "turnback: warning: this program is {}, in a folder an upgrade replaces; the hooks run `turnback` from PATH instead, so put turnback on PATH (or pass --program)",
                    exe.display()
                );
                Program::on_path()
            }
        },
    )
}

/// The program at `exe` as the hooks name it, its path spelled as shells
/// read it: without Windows' verbatim prefix, which `canonicalize` adds
/// (cmd.exe cannot run `"\\?\Z:\…\turnback.exe"`, and Git Bash reads it
/// as `\?\Z:\…`).
fn program_at(exe: &Path) -> Program {
    let raw = turnback::path::strip_verbatim(exe)
        .to_string_lossy()
        .into_owned();
    Program {
        shell: crate::platform::quote_program(&raw),
        powershell: Program::for_powershell(&raw),
        raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command text of a program found by its path, on every platform:
    /// a verbatim path (what `canonicalize` gives on Windows when
    /// `turnback.exe` is not on PATH) is spelled without its prefix.
    #[test]
    fn a_program_path_is_written_without_the_verbatim_prefix() {
        for (exe, plain) in [
            (r"\\?\Z:\tools\turnback.exe", r"Z:\tools\turnback.exe"),
            (
                r"\\?\UNC\server\share\bin\turnback.exe",
                r"\\server\share\bin\turnback.exe",
            ),
            (
                r"C:\Program Files\turnback.exe",
                r"C:\Program Files\turnback.exe",
            ),
            ("/usr/local/bin/turnback", "/usr/local/bin/turnback"),
        ] {
            let p = program_at(Path::new(exe));
            assert_eq!(p.raw, plain, "{exe}");
            assert_eq!(p.shell, crate::platform::quote_program(plain), "{exe}");
            assert!(!p.shell.contains(r"\?\"), "{}", p.shell);
        }
    }

    /// The line for an agent that runs hooks through this platform's own
    /// shell: on Windows one that PowerShell and cmd both run (a command
    /// line that starts with a quoted path is a string to PowerShell), on
    /// Linux and macOS the POSIX word; Copilot gets both keys.
    #[test]
    fn agents_on_powershell_get_a_line_powershell_and_cmd_run() -> anyhow::Result<()> {
        let exe = if cfg!(windows) {
            r"C:\Program Files\turnback\turnback.exe"
        } else {
            "/opt/it's here/turnback"
        };
        let p = program_at(Path::new(exe));
        let want = if cfg!(windows) {
            format!("cmd /c \"{exe}\" hook gemini-cli")
        } else {
            r#"'/opt/it'\''s here/turnback' hook gemini-cli"#.to_owned()
        };
        let plan = plan_gemini_cli(&p)?;
        let (_, settings) = plan.settings.context("gemini-cli has settings")?;
        assert!(
            settings
                .to_string()
                .contains(&serde_json::to_string(&want)?),
            "{settings}"
        );
        let plan = plan_copilot(&p)?;
        let (_, hooks) = plan.settings.context("copilot has settings")?;
        let pre = &hooks["hooks"]["preToolUse"][0];
        assert_eq!(pre["bash"], format!("{} hook copilot preToolUse", p.shell));
        let ps = if cfg!(windows) {
            format!("cmd /c \"{exe}\" hook copilot preToolUse")
        } else {
            "& '/opt/it''s here/turnback' hook copilot preToolUse".to_owned()
        };
        assert_eq!(pre["powershell"], ps);
        let on_path = Program::on_path();
        assert_eq!(on_path.native(), "turnback");
        Ok(())
    }

    /// The hook command `turnback init claude-code` writes names it so.
    #[test]
    fn the_written_hook_command_names_the_program_without_the_prefix() -> anyhow::Result<()> {
        let exe = Path::new(r"\\?\Z:\tools\turnback.exe");
        let plan = plan_claude_code(&program_at(exe))?;
        let (_, settings) = plan.settings.context("claude-code has settings")?;
        let text = settings.to_string();
        let word = crate::platform::quote_program(r"Z:\tools\turnback.exe");
        let command = serde_json::to_string(&format!("{word} hook claude-code"))?;
        assert!(text.contains(&command), "{text}");
        assert!(!text.contains(r"?\\"), "{text}");
        Ok(())
    }
}
