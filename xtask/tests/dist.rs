//! The release's files, made by `cargo xtask dist` and checked as far as
//! this Linux machine allows, offline (docs/RELEASING.md says what this
//! proves and what only a release proves).
//!
//! One dist is built for all the tests here (profile `dist-ci`, in the
//! cache `~/.cache/turnback-dist/target`, reused between runs), for the
//! targets in `TURNBACK_DIST_TARGETS` (default: all five: both Linux
//! musl, Windows, both macOS). Each test then checks one channel: the checksums,
//! the archives, the binaries (run here, under Wine, or read as Mach-O),
//! the npm packages installed offline into a fresh prefix, an upgrade
//! through npm and through a Homebrew Cellar with the hooks `init` wrote,
//! `install.sh` against a server of the test's own, the formula and the
//! winget manifests.
//!
//! A missing tool (zig and cargo-zigbuild, which `tests/dist/tools.sh`
//! installs; npm and node; wine; ruby; curl) fails the test, never skips
//! it. Every command run here gets its own HOME and TURNBACK_DATA_DIR.
//!
//! Linux only: the release is made on Linux, and the checks run its tools.
#![cfg(target_os = "linux")]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Res<T> = Result<T, Box<dyn std::error::Error>>;

const DEFAULT_TARGETS: &[&str] = &[
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "x86_64-pc-windows-gnu",
    "x86_64-apple-darwin",
    "aarch64-apple-darwin",
];

/// The host target whose musl binary runs here.
const HOST_MUSL: &str = "x86_64-unknown-linux-musl";

struct Dist {
    out: PathBuf,
    version: String,
    targets: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Dist {
    fn archive(&self, target: &str) -> PathBuf {
        let ext = if target.contains("windows") {
            "zip"
        } else {
            "tar.gz"
        };
        self.out
            .join(format!("turnback-{}-{target}.{ext}", self.version))
    }

    fn stem(&self, target: &str) -> String {
        format!("turnback-{}-{target}", self.version)
    }

    fn require(&self, target: &str) -> Res<()> {
        if self.targets.iter().any(|t| t == target) {
            Ok(())
        } else {
            Err(format!("this test needs {target} in TURNBACK_DIST_TARGETS").into())
        }
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is in the workspace")
        .to_owned()
}

fn cache_dir() -> Res<PathBuf> {
    if let Some(d) = std::env::var_os("TURNBACK_DIST_CACHE") {
        return Ok(d.into());
    }
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    Ok(Path::new(&home).join(".cache/turnback-dist"))
}

fn dist() -> Res<&'static Dist> {
    static DIST: OnceLock<Result<Dist, String>> = OnceLock::new();
    DIST.get_or_init(|| make_dist().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| format!("cargo xtask dist: {e}").into())
}

fn make_dist() -> Res<Dist> {
    let root = workspace();
    let tools = Command::new("bash")
        .arg(root.join("tests/dist/tools.sh"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run tests/dist/tools.sh: {e}"))?;
    if !tools.status.success() {
        return Err("tests/dist/tools.sh failed (above)".into());
    }
    let tool_dir = String::from_utf8(tools.stdout)?.trim().to_owned();
    let path = prepend_path(Path::new(&tool_dir))?;
    let targets: Vec<String> = match std::env::var("TURNBACK_DIST_TARGETS") {
        Ok(list) => list.split_whitespace().map(str::to_owned).collect(),
        Err(_) => DEFAULT_TARGETS.iter().map(|t| (*t).to_owned()).collect(),
    };
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("dist");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["xtask", "dist", "--profile", "dist-ci", "--out"])
        .arg(&out)
        .current_dir(&root)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", cache_dir()?.join("target"));
    for t in &targets {
        cmd.args(["--target", t]);
    }
    let status = cmd.status()?;
    if !status.success() {
        return Err(format!("{cmd:?} failed ({status})").into());
    }
    Ok(Dist {
        out,
        version: workspace_version()?,
        targets,
        _dir: dir,
    })
}

/// `[workspace.package] version` of the root Cargo.toml.
fn workspace_version() -> Res<String> {
    let text = read_text(&workspace().join("Cargo.toml"))?;
    let section = text
        .split("[workspace.package]")
        .nth(1)
        .ok_or("Cargo.toml has no [workspace.package]")?;
    let line = section
        .lines()
        .find(|l| l.starts_with("version"))
        .ok_or("[workspace.package] has no version")?;
    Ok(line
        .split('"')
        .nth(1)
        .ok_or("the version is not a string")?
        .to_owned())
}

fn prepend_path(dir: &Path) -> Res<std::ffi::OsString> {
    let mut dirs = vec![dir.to_owned()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    Ok(std::env::join_paths(dirs)?)
}

/// The first `name` on PATH; an error naming what installs it if none.
fn tool(name: &str, installed_by: &str) -> Res<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{name} is not on PATH ({installed_by}); this test needs it").into())
}

fn read_text(path: &Path) -> Res<String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()).into())
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn sha256_of(path: &Path) -> Res<String> {
    Ok(sha256(&std::fs::read(path).map_err(|e| {
        format!("cannot read {}: {e}", path.display())
    })?))
}

/// Every file of an archive: path, bytes, mode.
fn archive_files(path: &Path) -> Res<Vec<(String, Vec<u8>, u32)>> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut files = Vec::new();
    if path.extension().is_some_and(|e| e == "zip") {
        let mut zip = zip::ZipArchive::new(file)?;
        for i in 0..zip.len() {
            let mut f = zip.by_index(i)?;
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            let name = f.name()?.into_owned();
            files.push((name, bytes, f.unix_mode().unwrap_or(0)));
        }
    } else {
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for e in tar.entries()? {
            let mut e = e?;
            let name = e.path()?.to_string_lossy().into_owned();
            let mode = e.header().mode()?;
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes)?;
            files.push((name, bytes, mode));
        }
    }
    Ok(files)
}

fn file_in(files: &[(String, Vec<u8>, u32)], name: &str) -> Res<Vec<u8>> {
    files
        .iter()
        .find(|(n, _, _)| n == name)
        .map(|(_, b, _)| b.clone())
        .ok_or_else(|| format!("no {name} in the archive").into())
}

fn write_exe(path: &Path, bytes: &[u8]) -> Res<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn check(out: &Output, what: &str) -> Res<String> {
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A user's session: its own home and data directory, PATH as given.
struct Session {
    home: PathBuf,
    data: PathBuf,
}

impl Session {
    fn new(dir: &Path) -> Res<Session> {
        let s = Session {
            home: dir.join("home"),
            data: dir.join("data"),
        };
        std::fs::create_dir_all(&s.home)?;
        Ok(s)
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>, path: &std::ffi::OsStr) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &self.home)
            .env("TURNBACK_DATA_DIR", &self.data)
            .env("TURNBACK_NO_BACKGROUND", "1")
            .env("PATH", path);
        c
    }
}

/// The command `init claude-code` wrote for PreToolUse.
fn claude_hook(project: &Path) -> Res<String> {
    let path = project.join(".claude/settings.json");
    let v: serde_json::Value = serde_json::from_str(&read_text(&path)?)?;
    for g in v["hooks"]["PreToolUse"].as_array().into_iter().flatten() {
        for h in g["hooks"].as_array().into_iter().flatten() {
            if let Some(c) = h["command"].as_str()
                && c.ends_with("hook claude-code")
            {
                return Ok(c.to_owned());
            }
        }
    }
    Err(format!("{} has no PreToolUse hook of turnback", path.display()).into())
}

/// Runs `hook` as Claude Code does (through `sh -c`, the event on stdin)
/// for a prompt and a Write, then checks the turn is in the store.
fn run_claude_hook(s: &Session, path: &std::ffi::OsStr, project: &Path, hook: &str) -> Res<()> {
    let event = |name: &str| {
        let mut e = serde_json::json!({
            "session_id": "8c35adc1-4f1e-4c9a-9a51-0f6b7e2d1c3a",
            "prompt_id": "550e8400-e29b-41d4-a716-446655440000",
            "transcript_path": project.join("transcript.jsonl"),
            "cwd": project,
            "permission_mode": "default",
            "hook_event_name": name,
        });
        if name == "UserPromptSubmit" {
            e["prompt"] = "write a".into();
        } else {
            e["tool_name"] = "Write".into();
            e["tool_input"] =
                serde_json::json!({ "file_path": project.join("a.txt"), "content": "new\n" });
            e["tool_use_id"] = "toolu_01".into();
        }
        e
    };
    for name in ["UserPromptSubmit", "PreToolUse"] {
        let mut child = s
            .command("sh", path)
            .arg("-c")
            .arg(hook)
            .current_dir(project)
            .env("CLAUDE_PROJECT_DIR", project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .ok_or("no stdin")?
            .write_all(event(name).to_string().as_bytes())?;
        check(
            &child.wait_with_output()?,
            &format!("the hook {hook:?} for {name}"),
        )?;
    }
    let list = s
        .command("sh", path)
        .arg("-c")
        .arg(format!(
            "{} list",
            hook.trim_end_matches(" hook claude-code")
        ))
        .current_dir(project)
        .output()?;
    let list = check(&list, "turnback list")?;
    assert!(list.contains("claude-8c35adc1-1"), "{list}");
    Ok(())
}

#[test]
fn sha256sums_match_every_published_file() -> TestResult {
    let d = dist()?;
    let sums = read_text(&d.out.join("SHA256SUMS"))?;
    let mut listed = BTreeSet::new();
    for line in sums.lines() {
        let (hash, name) = line
            .split_once("  ")
            .ok_or_else(|| format!("bad line {line:?}"))?;
        assert_eq!(sha256_of(&d.out.join(name))?, hash, "{name}");
        listed.insert(name.to_owned());
    }
    for t in &d.targets {
        let name = d
            .archive(t)
            .file_name()
            .ok_or("no name")?
            .to_string_lossy()
            .into_owned();
        assert!(listed.contains(&name), "SHA256SUMS lists no {name}: {sums}");
    }
    for name in ["install.sh", "install.ps1"] {
        assert!(listed.contains(name), "SHA256SUMS lists no {name}");
    }
    assert!(listed.contains(&format!("npm/turnback-{}.tgz", d.version)));
    Ok(())
}

#[test]
fn each_archive_holds_the_binary_completions_manual_and_licenses() -> TestResult {
    let d = dist()?;
    for t in &d.targets {
        let files = archive_files(&d.archive(t))?;
        let stem = d.stem(t);
        let exe = if t.contains("windows") {
            "turnback.exe"
        } else {
            "turnback"
        };
        let names: BTreeSet<&str> = files.iter().map(|(n, _, _)| n.as_str()).collect();
        let want: BTreeSet<String> = [
            exe,
            "README.md",
            "LICENSE-MIT",
            "LICENSE-APACHE",
            "complete/turnback.bash",
            "complete/_turnback",
            "complete/turnback.fish",
            "complete/_turnback.ps1",
            "complete/turnback.elv",
            "doc/turnback.1",
        ]
        .iter()
        .map(|f| format!("{stem}/{f}"))
        .collect();
        assert_eq!(
            names,
            want.iter().map(String::as_str).collect::<BTreeSet<_>>(),
            "{t}"
        );
        for (name, bytes, mode) in &files {
            assert!(!bytes.is_empty(), "{name} is empty");
            let want = if *name == format!("{stem}/{exe}") {
                0o755
            } else {
                0o644
            };
            assert_eq!(mode & 0o777, want, "{name}");
        }
        let license = file_in(&files, &format!("{stem}/LICENSE-MIT"))?;
        assert_eq!(license, std::fs::read(workspace().join("LICENSE-MIT"))?);
        let man = String::from_utf8(file_in(&files, &format!("{stem}/doc/turnback.1"))?)?;
        assert!(man.contains(".TH turnback 1"), "{man}");
        let bash = String::from_utf8(file_in(&files, &format!("{stem}/complete/turnback.bash"))?)?;
        assert!(bash.contains("complete -F"), "{bash}");
    }
    Ok(())
}

/// Linux: a static ELF of the right machine (the host's runs here);
/// macOS: a Mach-O executable of the right CPU.
#[test]
fn unix_binaries_are_of_their_platform_and_architecture() -> TestResult {
    let d = dist()?;
    for t in d.targets.iter().filter(|t| !t.contains("windows")) {
        let files = archive_files(&d.archive(t))?;
        let bin = file_in(&files, &format!("{}/turnback", d.stem(t)))?;
        let u16_at = |o: usize| u16::from_le_bytes([bin[o], bin[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([bin[o], bin[o + 1], bin[o + 2], bin[o + 3]]);
        if t.contains("apple-darwin") {
            // mach_header_64: magic, cputype, cpusubtype, filetype.
            assert_eq!(u32_at(0), 0xfeed_facf, "{t}: not a 64-bit Mach-O");
            let cpu = if t.starts_with("aarch64") {
                0x0100_000c // CPU_TYPE_ARM64
            } else {
                0x0100_0007 // CPU_TYPE_X86_64
            };
            assert_eq!(u32_at(4), cpu, "{t}: CPU type");
            assert_eq!(u32_at(12), 2, "{t}: not an executable (MH_EXECUTE)");
            // Load commands: LC_BUILD_VERSION (0x32) names macOS (1) and
            // the oldest version, 11.0 (0x000b0000: Big Sur); Apple
            // silicon runs only signed code, so the arm64 binary carries
            // the linker's ad-hoc signature (LC_CODE_SIGNATURE, 0x1d).
            let (mut at, mut cmds) = (32, Vec::new());
            for _ in 0..u32_at(16) {
                cmds.push(u32_at(at));
                if u32_at(at) == 0x32 {
                    assert_eq!(u32_at(at + 8), 1, "{t}: platform");
                    assert_eq!(u32_at(at + 12), 0x000b_0000, "{t}: minos");
                }
                at += u32_at(at + 4) as usize;
            }
            assert!(cmds.contains(&0x32), "{t}: no LC_BUILD_VERSION");
            if t.starts_with("aarch64") {
                assert!(cmds.contains(&0x1d), "{t}: not signed");
            }
        } else {
            assert_eq!(&bin[..4], b"\x7fELF", "{t}");
            let machine = if t.starts_with("aarch64") { 0xb7 } else { 0x3e };
            assert_eq!(u16_at(18), machine, "{t}: e_machine");
            // Static: no program header asks for an interpreter.
            let phoff = u64::from_le_bytes(bin[0x20..0x28].try_into()?) as usize;
            let (size, count) = (u16_at(0x36) as usize, u16_at(0x38) as usize);
            for i in 0..count {
                assert_ne!(u32_at(phoff + i * size), 3, "{t}: has PT_INTERP");
            }
        }
    }
    d.require(HOST_MUSL)?;
    let dir = tempfile::tempdir()?;
    let files = archive_files(&d.archive(HOST_MUSL))?;
    let exe = dir.path().join("turnback");
    write_exe(
        &exe,
        &file_in(&files, &format!("{}/turnback", d.stem(HOST_MUSL)))?,
    )?;
    let s = Session::new(dir.path())?;
    let out = check(
        &s.command(&exe, "/usr/bin:/bin".as_ref())
            .arg("--version")
            .output()?,
        "turnback --version",
    )?;
    assert_eq!(out.trim(), format!("turnback {}", d.version));
    Ok(())
}

/// The Windows archive's turnback.exe under Wine: its version, then a
/// write and the rewind of it.
#[test]
fn the_windows_binary_runs_a_session_under_wine() -> TestResult {
    let d = dist()?;
    let t = "x86_64-pc-windows-gnu";
    d.require(t)?;
    tool("wine", "apt-get install wine64")?;
    let dir = tempfile::tempdir()?;
    let files = archive_files(&d.archive(t))?;
    let exe = dir.path().join("turnback.exe");
    write_exe(
        &exe,
        &file_in(&files, &format!("{}/turnback.exe", d.stem(t)))?,
    )?;
    let project = dir.path().join("proj");
    std::fs::create_dir_all(&project)?;
    std::fs::write(project.join("a.txt"), "old\n")?;
    let win = |p: &Path| format!("Z:{}", p.display()).replace('/', "\\");
    // Wine's prefix stays in the user's cache, where the other Windows
    // tests keep it.
    let wine_dir = match std::env::var_os("TURNBACK_WINE_DIR") {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(c) => Path::new(&c).join("turnback-wine"),
            None => cache_dir()?
                .parent()
                .ok_or("no cache")?
                .join("turnback-wine"),
        },
    };
    let run = |args: &[&str], stdin: &[u8]| -> Res<String> {
        let mut child = Command::new("sh")
            .arg(workspace().join("tests/wine/runner.sh"))
            .arg(&exe)
            .args(args)
            .env("TURNBACK_WINE_DIR", &wine_dir)
            .env("TURNBACK_DATA_DIR", win(&dir.path().join("data")))
            .env("TURNBACK_NO_BACKGROUND", "1")
            .current_dir(&project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child.stdin.take().ok_or("no stdin")?.write_all(stdin)?;
        check(
            &child.wait_with_output()?,
            &format!("turnback.exe {args:?} under Wine"),
        )
    };
    assert_eq!(
        run(&["--version"], b"")?.trim(),
        format!("turnback {}", d.version)
    );
    let root = win(&project);
    run(
        &["--root", &root, "write", "--turn", "t1", "a.txt"],
        b"new\n",
    )?;
    assert_eq!(read_text(&project.join("a.txt"))?, "new\n");
    run(&["--root", &root, "rewind", "t1"], b"")?;
    assert_eq!(read_text(&project.join("a.txt"))?, "old\n");
    Ok(())
}

/// Both npm tarballs of a version, with `version` as the version.
fn npm_tarballs(d: &Dist, into: &Path, version: &str) -> Res<Vec<PathBuf>> {
    let mut made = Vec::new();
    for name in ["turnback-linux-x64", "turnback"] {
        let src = d.out.join("npm").join(format!("{name}-{}.tgz", d.version));
        let mut files = archive_files(&src)?;
        for (path, bytes, _) in &mut files {
            if path == "package/package.json" {
                let text = String::from_utf8(bytes.clone())?;
                *bytes = text
                    .replace(&format!("\"{}\"", d.version), &format!("\"{version}\""))
                    .into_bytes();
            }
        }
        let dest = into.join(format!("{name}-{version}.tgz"));
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&dest)?,
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        for (path, bytes, mode) in &files {
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(*mode);
            tar.append_data(&mut h, path, bytes.as_slice())?;
        }
        tar.into_inner()?.finish()?;
        made.push(dest);
    }
    Ok(made)
}

fn npm_install(s: &Session, dir: &Path, prefix: &Path, tarballs: &[PathBuf]) -> Res<()> {
    let npm = tool("npm", "apt-get install npm")?;
    let out = Command::new(npm)
        .args([
            "install",
            "--global",
            "--offline",
            "--no-audit",
            "--no-fund",
        ])
        .arg("--prefix")
        .arg(prefix)
        .arg("--cache")
        .arg(dir.join("npm-cache"))
        .args(tarballs)
        .env("HOME", &s.home)
        .env("npm_config_userconfig", dir.join("npmrc"))
        .output()?;
    check(&out, "npm install --global --offline")?;
    Ok(())
}

/// `npm install -g` of the platform tarball and the main one, offline,
/// into a fresh prefix; `turnback --version`, `init claude-code` and the
/// hook it wrote through npm's shim; then version B over it, and the
/// written hooks still run. One project has the prefix's bin on PATH
/// (the hook says `turnback`), one not (the hook names the shim).
#[test]
fn npm_packages_install_offline_and_their_hooks_survive_an_upgrade() -> TestResult {
    let d = dist()?;
    d.require(HOST_MUSL)?;
    let node = tool("node", "apt-get install nodejs")?;
    let dir = tempfile::tempdir()?;
    let base = std::fs::canonicalize(dir.path())?;
    let s = Session::new(&base)?;
    let prefix = base.join("prefix");
    let node_dir = node.parent().ok_or("node has no folder")?;
    let with_bin = std::env::join_paths([
        prefix.join("bin").as_path(),
        node_dir,
        "/usr/bin".as_ref(),
        "/bin".as_ref(),
    ])?;
    let without = std::env::join_paths([node_dir, "/usr/bin".as_ref(), "/bin".as_ref()])?;

    let a = npm_tarballs(d, &base, &d.version)?;
    npm_install(&s, &base, &prefix, &a)?;
    let version = check(
        &s.command("turnback", &with_bin).arg("--version").output()?,
        "turnback --version through npm's shim",
    )?;
    assert_eq!(version.trim(), format!("turnback {}", d.version));
    for package in ["turnback", "turnback-linux-x64"] {
        for file in ["LICENSE-MIT", "LICENSE-APACHE", "README.md"] {
            let path = prefix.join("lib/node_modules").join(package).join(file);
            assert!(path.is_file(), "{} is not installed", path.display());
        }
    }

    let on_path = base.join("on-path");
    let off_path = base.join("off-path");
    for p in [&on_path, &off_path] {
        std::fs::create_dir_all(p)?;
        std::fs::write(p.join("a.txt"), "old\n")?;
    }
    check(
        &s.command("turnback", &with_bin)
            .args(["init", "claude-code"])
            .current_dir(&on_path)
            .output()?,
        "turnback init claude-code",
    )?;
    let shim = prefix.join("bin/turnback");
    check(
        &s.command(&shim, &without)
            .args(["init", "claude-code"])
            .current_dir(&off_path)
            .output()?,
        "<prefix>/bin/turnback init claude-code",
    )?;
    let hook_on = claude_hook(&on_path)?;
    let hook_off = claude_hook(&off_path)?;
    assert_eq!(hook_on, "turnback hook claude-code");
    assert_eq!(hook_off, format!("{} hook claude-code", shim.display()));
    run_claude_hook(&s, &with_bin, &on_path, &hook_on)?;

    // Version B over A, as `npm update -g` or a reinstall does.
    let b_version = format!("{}-upgrade.1", d.version);
    let b = npm_tarballs(d, &base, &b_version)?;
    npm_install(&s, &base, &prefix, &b)?;
    let installed = read_text(&prefix.join("lib/node_modules/turnback/package.json"))?;
    assert!(installed.contains(&b_version), "{installed}");
    std::fs::write(on_path.join("a.txt"), "old\n")?;
    run_claude_hook(&s, &with_bin, &on_path, &hook_on)?;
    run_claude_hook(&s, &without, &off_path, &hook_off)?;
    Ok(())
}

/// A Homebrew install (the binary in `Cellar/turnback/<version>/bin`,
/// linked from `<prefix>/bin`): `init` names the link, never the Cellar,
/// and the hook runs after `brew upgrade` replaced the Cellar's folder.
#[test]
fn hooks_written_from_a_homebrew_cellar_survive_an_upgrade() -> TestResult {
    let d = dist()?;
    d.require(HOST_MUSL)?;
    let dir = tempfile::tempdir()?;
    let base = std::fs::canonicalize(dir.path())?;
    let s = Session::new(&base)?;
    let prefix = base.join("homebrew");
    let files = archive_files(&d.archive(HOST_MUSL))?;
    let binary = file_in(&files, &format!("{}/turnback", d.stem(HOST_MUSL)))?;
    let install = |version: &str| -> Res<()> {
        let cellar = prefix.join("Cellar/turnback").join(version);
        write_exe(&cellar.join("bin/turnback"), &binary)?;
        std::fs::create_dir_all(prefix.join("bin"))?;
        let link = prefix.join("bin/turnback");
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link)?;
        }
        std::os::unix::fs::symlink(format!("../Cellar/turnback/{version}/bin/turnback"), link)?;
        Ok(())
    };
    install(&d.version)?;
    let link = prefix.join("bin/turnback");
    let with_bin = std::env::join_paths([
        prefix.join("bin").as_path(),
        "/usr/bin".as_ref(),
        "/bin".as_ref(),
    ])?;
    let without: std::ffi::OsString = "/usr/bin:/bin".into();
    let on_path = base.join("on-path");
    let off_path = base.join("off-path");
    for (project, path) in [(&on_path, &with_bin), (&off_path, &without)] {
        std::fs::create_dir_all(project)?;
        std::fs::write(project.join("a.txt"), "old\n")?;
        check(
            &s.command(&link, path)
                .args(["init", "claude-code"])
                .current_dir(project)
                .output()?,
            "turnback init claude-code",
        )?;
    }
    let hook_on = claude_hook(&on_path)?;
    let hook_off = claude_hook(&off_path)?;
    assert_eq!(hook_on, "turnback hook claude-code");
    assert_eq!(hook_off, format!("{} hook claude-code", link.display()));
    // `brew upgrade`: the new version's folder, the link moved, the old
    // folder removed.
    install(&format!("{}_1", d.version))?;
    std::fs::remove_dir_all(prefix.join("Cellar/turnback").join(&d.version))?;
    run_claude_hook(&s, &with_bin, &on_path, &hook_on)?;
    run_claude_hook(&s, &without, &off_path, &hook_off)?;
    Ok(())
}

/// A file server on 127.0.0.1 for `dir` (GET only); gives its URL.
fn serve(dir: PathBuf) -> Res<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&request);
            let path = line.split_whitespace().nth(1).unwrap_or("/");
            let file = dir.join(path.trim_start_matches('/'));
            let reply = match std::fs::read(&file) {
                Ok(body) if !path.contains("..") => {
                    let mut r = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    r.extend(body);
                    r
                }
                _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_vec(),
            };
            let _ = stream.write_all(&reply);
        }
    });
    Ok(url)
}

#[test]
fn install_sh_installs_a_checked_binary_and_refuses_a_mismatch() -> TestResult {
    let d = dist()?;
    d.require(HOST_MUSL)?;
    tool("curl", "apt-get install curl")?;
    let dir = tempfile::tempdir()?;
    let s = Session::new(dir.path())?;
    let path: std::ffi::OsString = "/usr/bin:/bin".into();
    let url = serve(d.out.clone())?;
    let bin = dir.path().join("bin");
    let out = s
        .command("sh", &path)
        .arg(d.out.join("install.sh"))
        .args(["--base-url", &url, "--install-dir"])
        .arg(&bin)
        .output()?;
    check(&out, "install.sh")?;
    let version = check(
        &s.command(bin.join("turnback"), &path)
            .arg("--version")
            .output()?,
        "the installed turnback --version",
    )?;
    assert_eq!(version.trim(), format!("turnback {}", d.version));

    // The same SHA256SUMS, an archive one byte longer.
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad)?;
    std::fs::copy(d.out.join("SHA256SUMS"), bad.join("SHA256SUMS"))?;
    let name = d
        .archive(HOST_MUSL)
        .file_name()
        .ok_or("no name")?
        .to_owned();
    let mut bytes = std::fs::read(d.archive(HOST_MUSL))?;
    bytes.push(0);
    std::fs::write(bad.join(&name), bytes)?;
    let url = serve(bad)?;
    let bin2 = dir.path().join("bin2");
    let out = s
        .command("sh", &path)
        .arg(d.out.join("install.sh"))
        .args(["--base-url", &url, "--install-dir"])
        .arg(&bin2)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "install.sh took a bad archive: {stderr}"
    );
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    assert!(!bin2.join("turnback").exists());
    Ok(())
}

/// `url`/`sha256` pairs of the formula, each an archive of this dist.
#[test]
fn the_homebrew_formula_is_ruby_and_names_the_archives() -> TestResult {
    let d = dist()?;
    let formula = d.out.join("homebrew/turnback.rb");
    let ruby = tool("ruby", "apt-get install ruby")?;
    let out = Command::new(ruby).arg("-c").arg(&formula).output()?;
    assert_eq!(check(&out, "ruby -c")?.trim(), "Syntax OK");
    let text = read_text(&formula)?;
    let quoted = |line: &str| line.split('"').nth(1).map(str::to_owned);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut seen = BTreeSet::new();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("url ") {
            let url = quoted(l).ok_or("url")?;
            let sha = lines
                .get(i + 1)
                .filter(|n| n.starts_with("sha256 "))
                .and_then(|n| quoted(n))
                .ok_or_else(|| format!("no sha256 after {l}"))?;
            let name = url.rsplit('/').next().ok_or("url")?;
            assert_eq!(sha256_of(&d.out.join(name))?, sha, "{name}");
            seen.insert(name.to_owned());
        }
    }
    let want: BTreeSet<String> = d
        .targets
        .iter()
        .filter(|t| !t.contains("windows"))
        .map(|t| format!("{}.tar.gz", d.stem(t)))
        .collect();
    assert_eq!(seen, want);
    Ok(())
}

fn yaml_to_json(y: &yaml_rust2::Yaml) -> Res<serde_json::Value> {
    use yaml_rust2::Yaml;
    Ok(match y {
        Yaml::String(s) => s.clone().into(),
        Yaml::Integer(i) => (*i).into(),
        Yaml::Real(r) => r.parse::<f64>()?.into(),
        Yaml::Boolean(b) => (*b).into(),
        Yaml::Null => serde_json::Value::Null,
        Yaml::Array(a) => a.iter().map(yaml_to_json).collect::<Res<Vec<_>>>()?.into(),
        Yaml::Hash(h) => {
            let mut m = serde_json::Map::new();
            for (k, v) in h {
                let k = k.as_str().ok_or("a key that is not a string")?;
                m.insert(k.to_owned(), yaml_to_json(v)?);
            }
            m.into()
        }
        other => return Err(format!("unexpected YAML {other:?}").into()),
    })
}

/// The keywords of the vendored schema: type, const, enum, pattern,
/// minLength, maxLength, required, properties, additionalProperties,
/// items, minItems, maxItems, $ref (to a definition).
fn validate(
    v: &serde_json::Value,
    schema: &serde_json::Value,
    defs: &serde_json::Value,
    at: &str,
    errors: &mut Vec<String>,
) {
    use serde_json::Value;
    if let Some(r) = schema["$ref"].as_str() {
        return validate(v, &defs[r], defs, at, errors);
    }
    let ty = schema["type"].as_str().unwrap_or("");
    let ok = match ty {
        "string" => v.is_string(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        _ => true,
    };
    if !ok {
        errors.push(format!("{at}: not a {ty}: {v}"));
        return;
    }
    if let Some(c) = schema.get("const")
        && v != c
    {
        errors.push(format!("{at}: {v} is not {c}"));
    }
    if let Some(e) = schema["enum"].as_array()
        && !e.contains(v)
    {
        errors.push(format!("{at}: {v} is not one of {e:?}"));
    }
    if let Value::String(s) = v {
        let len = s.chars().count() as u64;
        if schema["minLength"].as_u64().is_some_and(|m| len < m) {
            errors.push(format!("{at}: {s:?} is too short"));
        }
        if schema["maxLength"].as_u64().is_some_and(|m| len > m) {
            errors.push(format!("{at}: {s:?} is too long"));
        }
        if let Some(p) = schema["pattern"].as_str() {
            match regex::Regex::new(p) {
                Ok(re) if re.is_match(s) => {}
                Ok(_) => errors.push(format!("{at}: {s:?} does not match {p}")),
                Err(e) => errors.push(format!("{at}: the schema's pattern {p}: {e}")),
            }
        }
    }
    if let Value::Array(items) = v {
        let n = items.len() as u64;
        if schema["minItems"].as_u64().is_some_and(|m| n < m)
            || schema["maxItems"].as_u64().is_some_and(|m| n > m)
        {
            errors.push(format!("{at}: {n} items"));
        }
        for (i, item) in items.iter().enumerate() {
            validate(item, &schema["items"], defs, &format!("{at}[{i}]"), errors);
        }
    }
    if let Value::Object(map) = v {
        for r in schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap_or("");
            if !map.contains_key(r) {
                errors.push(format!("{at}: {r} is missing"));
            }
        }
        for (k, val) in map {
            match schema["properties"].get(k) {
                Some(s) => validate(val, s, defs, &format!("{at}.{k}"), errors),
                None if schema["additionalProperties"] == false => {
                    errors.push(format!("{at}: {k} is not a field of the schema"));
                }
                None => {}
            }
        }
    }
}

#[test]
fn the_winget_manifests_match_the_schema_and_the_archive() -> TestResult {
    let d = dist()?;
    let t = "x86_64-pc-windows-gnu";
    d.require(t)?;
    let schema: serde_json::Value = serde_json::from_str(&read_text(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dist/winget-1.9.0.schema.json"),
    )?)?;
    let dir = d
        .out
        .join("winget/manifests/t/turnback/turnback")
        .join(&d.version);
    let mut manifests = Vec::new();
    for (file, kind) in [
        ("turnback.turnback.yaml", "version"),
        ("turnback.turnback.installer.yaml", "installer"),
        ("turnback.turnback.locale.en-US.yaml", "defaultLocale"),
    ] {
        let docs = yaml_rust2::YamlLoader::load_from_str(&read_text(&dir.join(file))?)?;
        let [doc] = docs.as_slice() else {
            return Err(format!("{file}: not one YAML document").into());
        };
        let v = yaml_to_json(doc)?;
        let mut errors = Vec::new();
        validate(&v, &schema[kind], &schema["definitions"], file, &mut errors);
        assert!(errors.is_empty(), "{}", errors.join("\n"));
        assert_eq!(v["PackageVersion"], d.version.as_str(), "{file}");
        manifests.push(v);
    }
    let installer = &manifests[1];
    let zip = d.archive(t);
    let name = zip
        .file_name()
        .ok_or("no name")?
        .to_string_lossy()
        .into_owned();
    let i = &installer["Installers"][0];
    assert!(
        i["InstallerUrl"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!("/{name}")))
    );
    assert_eq!(
        i["InstallerSha256"].as_str().map(str::to_ascii_lowercase),
        Some(sha256_of(&zip)?)
    );
    let nested = installer["NestedInstallerFiles"][0]["RelativeFilePath"]
        .as_str()
        .ok_or("no RelativeFilePath")?
        .replace('\\', "/");
    file_in(&archive_files(&zip)?, &nested)?;
    Ok(())
}

/// `[package.metadata.binstall]` of the CLI, filled in as binstall does,
/// names each archive and the binary in it.
#[test]
fn the_binstall_metadata_names_the_archives() -> TestResult {
    let d = dist()?;
    let text = read_text(&workspace().join("crates/turnback-cli/Cargo.toml"))?;
    let section = |name: &str| -> Res<String> {
        let start = text
            .find(&format!("[{name}]\n"))
            .ok_or_else(|| format!("no [{name}]"))?;
        let rest = &text[start + name.len() + 3..];
        Ok(rest[..rest.find("\n[").unwrap_or(rest.len())].to_owned())
    };
    let field = |section: &str, key: &str| -> Option<String> {
        section
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .and_then(|l| l.split('"').nth(1))
            .map(str::to_owned)
    };
    let main = section("package.metadata.binstall")?;
    let repo = "https://github.com/turnback/turnback";
    for t in &d.targets {
        let over = section(&format!("package.metadata.binstall.overrides.{t}")).unwrap_or_default();
        let get = |k: &str| {
            field(&over, k)
                .or_else(|| field(&main, k))
                .ok_or(format!("no {k}"))
        };
        let (fmt, suffix, ext) = match get("pkg-fmt")?.as_str() {
            "zip" => ("zip", ".zip", ".exe"),
            "tgz" => ("tgz", ".tar.gz", ""),
            other => return Err(format!("pkg-fmt {other}").into()),
        };
        let fill = |s: String| {
            s.replace("{ repo }", repo)
                .replace("{ version }", &d.version)
                .replace("{ target }", t)
                .replace("{ archive-suffix }", suffix)
                .replace("{ bin }", "turnback")
                .replace("{ binary-ext }", ext)
        };
        let url = fill(get("pkg-url")?);
        let name = d
            .archive(t)
            .file_name()
            .ok_or("no name")?
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            url,
            format!("{repo}/releases/download/v{}/{name}", d.version),
            "{t} ({fmt})"
        );
        file_in(&archive_files(&d.archive(t))?, &fill(get("bin-dir")?))?;
    }
    Ok(())
}
