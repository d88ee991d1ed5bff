//! `cargo xtask dist`: every file a release publishes, in `target/dist/`.
//!
//! ```text
//! target/dist/
//!   turnback-<version>-<target>.tar.gz   per target (.zip for Windows): turnback-<version>-<target>/
//!                                        with the binary, README.md, LICENSE-MIT, LICENSE-APACHE,
//!                                        complete/ (bash, zsh, fish, PowerShell, elvish), doc/turnback.1
//!   install.sh, install.ps1              pick the archive, check it against SHA256SUMS, install it
//!   SHA256SUMS                           `<sha256>  <file>` for each file above and each npm tarball
//!   npm/turnback-<version>.tgz           the `turnback` package: a launcher, optionalDependencies
//!   npm/turnback-<os>-<cpu>-<version>.tgz  one per target, selected by `os` and `cpu`
//!   homebrew/turnback.rb                 the formula (macOS and Linux archives)
//!   winget/manifests/t/turnback/turnback/<version>/  the three winget manifests
//! ```
//!
//! The binaries are built with cargo-zigbuild (zig as C compiler and
//! linker: static musl binaries for Linux, macOS binaries without an
//! Apple SDK) and with cargo and mingw-w64 for Windows. The completions
//! and the manual page come from running a binary built here that runs on
//! this machine (the host's musl build, else a host build). Archives are
//! reproducible: sorted, owned by 0, dated by `SOURCE_DATE_EPOCH` or the
//! last commit.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::Digest;

use crate::archive::{self, Entry};

/// A release target: its Rust triple and npm's names for its platform.
#[derive(Debug)]
pub struct Target {
    pub triple: &'static str,
    /// `process.platform` (and npm's `os`).
    pub npm_os: &'static str,
    /// `process.arch` (and npm's `cpu`).
    pub npm_cpu: &'static str,
}

/// Every target a release ships (the platforms the README names).
pub const TARGETS: &[Target] = &[
    Target {
        triple: "x86_64-unknown-linux-musl",
        npm_os: "linux",
        npm_cpu: "x64",
    },
    Target {
        triple: "aarch64-unknown-linux-musl",
        npm_os: "linux",
        npm_cpu: "arm64",
    },
    Target {
        triple: "x86_64-apple-darwin",
        npm_os: "darwin",
        npm_cpu: "x64",
    },
    Target {
        triple: "aarch64-apple-darwin",
        npm_os: "darwin",
        npm_cpu: "arm64",
    },
    Target {
        triple: "x86_64-pc-windows-gnu",
        npm_os: "win32",
        npm_cpu: "x64",
    },
];

impl Target {
    pub fn is_windows(&self) -> bool {
        self.npm_os == "win32"
    }

    pub fn exe(&self) -> &'static str {
        if self.is_windows() {
            "turnback.exe"
        } else {
            "turnback"
        }
    }

    /// `turnback-<version>-<triple>`: the archive's name without its
    /// extension, and its top folder.
    pub fn stem(&self, version: &str) -> String {
        format!("turnback-{version}-{}", self.triple)
    }

    pub fn archive_name(&self, version: &str) -> String {
        let ext = if self.is_windows() { "zip" } else { "tar.gz" };
        format!("{}.{ext}", self.stem(version))
    }

    /// The npm package that carries this target's binary.
    pub fn npm_package(&self) -> String {
        format!("turnback-{}-{}", self.npm_os, self.npm_cpu)
    }
}

/// The oldest macOS the binaries start on (`LC_BUILD_VERSION`'s minos).
pub const MACOS_DEPLOYMENT_TARGET: &str = "11.0";

/// Build the binaries and write the release's files
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this target (repeat for several) [default: every release
    /// target]
    #[arg(long = "target", value_name = "TRIPLE")]
    targets: Vec<String>,
    /// The cargo profile to build with (`dist-ci`: CI's quicker build)
    #[arg(long, default_value = "release")]
    profile: String,
    /// Where to write [default: target/dist in the workspace]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Where the release's files are downloaded from, written into the
    /// installers, the formula and the manifests [default: the GitHub
    /// release of this version]
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
}

/// What the release is made of.
pub struct Release {
    pub version: String,
    pub description: String,
    pub repository: String,
    /// Where the published files can be downloaded, without a trailing `/`.
    pub base_url: String,
    /// The date of every archived file (seconds since the epoch).
    pub mtime: u64,
    /// README.md and the licenses, which every archive and package holds.
    pub common_files: Vec<Entry>,
}

/// One built binary.
pub struct Built {
    pub target: &'static Target,
    pub binary: Vec<u8>,
}

/// One archive written.
pub struct Archive {
    pub target: &'static Target,
    pub path: PathBuf,
    pub sha256: String,
}

impl Archive {
    pub fn name(&self) -> String {
        file_name(&self.path)
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let meta = Metadata::read()?;
    let targets = select(&args.targets)?;
    let out = args
        .out
        .unwrap_or_else(|| meta.workspace_root.join("target").join("dist"));
    let base_url = args
        .base_url
        .unwrap_or_else(|| {
            format!(
                "{}/releases/download/v{}",
                meta.repository.trim_end_matches('/'),
                meta.version
            )
        })
        .trim_end_matches('/')
        .to_owned();
    let release = Release {
        common_files: common_files(&meta.workspace_root)?,
        mtime: source_date(&meta.workspace_root),
        version: meta.version.clone(),
        description: meta.description.clone(),
        repository: meta.repository.clone(),
        base_url,
    };

    build(&meta, &targets, &args.profile)?;
    let built: Vec<Built> = targets
        .iter()
        .map(|t| {
            let path = meta.binary(Some(t.triple), &args.profile, t.exe());
            read(&path).map(|binary| Built { target: t, binary })
        })
        .collect::<anyhow::Result<_>>()?;
    let docs = docs(&meta, &targets, &args.profile)?;

    match std::fs::remove_dir_all(&out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", out.display())),
    }
    create_dir(&out)?;

    let mut archives = Vec::new();
    for b in &built {
        let stem = b.target.stem(&release.version);
        let mut entries = vec![Entry::new(
            format!("{stem}/{}", b.target.exe()),
            b.binary.clone(),
            true,
        )];
        for f in release.common_files.iter().chain(&docs) {
            entries.push(Entry::new(
                format!("{stem}/{}", f.path),
                f.bytes.clone(),
                false,
            ));
        }
        let path = out.join(b.target.archive_name(&release.version));
        if b.target.is_windows() {
            archive::zip(&path, &entries, release.mtime)?;
        } else {
            archive::tar_gz(&path, &entries, release.mtime)?;
        }
        let sha256 = sha256_file(&path)?;
        archives.push(Archive {
            target: b.target,
            path,
            sha256,
        });
    }

    let mut published: Vec<PathBuf> = archives.iter().map(|a| a.path.clone()).collect();
    for (name, template) in [
        ("install.sh", include_str!("../assets/install.sh")),
        ("install.ps1", include_str!("../assets/install.ps1")),
    ] {
        let path = out.join(name);
        let text = template
            .replace("@VERSION@", &release.version)
            .replace("@BASE_URL@", &release.base_url);
        write(&path, text.as_bytes())?;
        published.push(path);
    }
    published.extend(crate::npm::write(
        &out.join("npm"),
        &release,
        &built,
        &docs,
    )?);

    let mut sums = String::new();
    for path in &published {
        let rel = path
            .strip_prefix(&out)
            .expect("every published file is in the output folder");
        let rel = rel.to_string_lossy().replace('\\', "/");
        sums.push_str(&format!("{}  {rel}\n", sha256_file(path)?));
    }
    write(&out.join("SHA256SUMS"), sums.as_bytes())?;

    if let Some(formula) = crate::homebrew::formula(&release, &archives) {
        let dir = out.join("homebrew");
        create_dir(&dir)?;
        write(&dir.join("turnback.rb"), formula.as_bytes())?;
    }
    if let Some(windows) = archives.iter().find(|a| a.target.is_windows()) {
        crate::winget::write_manifests(&out.join("winget"), &release, windows)?;
    }
    println!(
        "xtask: turnback {} for {} in {}",
        release.version,
        targets
            .iter()
            .map(|t| t.triple)
            .collect::<Vec<_>>()
            .join(", "),
        out.display()
    );
    Ok(())
}

/// The targets named, in the order of [`TARGETS`]; all of them when none
/// is.
fn select(names: &[String]) -> anyhow::Result<Vec<&'static Target>> {
    for n in names {
        if !TARGETS.iter().any(|t| t.triple == n) {
            bail!(
                "{n} is not a release target; the targets are {}",
                TARGETS
                    .iter()
                    .map(|t| t.triple)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(TARGETS
        .iter()
        .filter(|t| names.is_empty() || names.iter().any(|n| n == t.triple))
        .collect())
}

/// What `cargo metadata` says about the workspace and the CLI package.
struct Metadata {
    workspace_root: PathBuf,
    target_directory: PathBuf,
    version: String,
    description: String,
    repository: String,
}

impl Metadata {
    fn read() -> anyhow::Result<Metadata> {
        let out = Command::new(cargo())
            .args(["metadata", "--locked", "--no-deps", "--format-version", "1"])
            .output()
            .context("cannot run cargo metadata")?;
        if !out.status.success() {
            bail!(
                "cargo metadata failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("cannot read cargo metadata's output")?;
        let cli = v["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "turnback-cli")
            .context("cargo metadata lists no package turnback-cli")?;
        let text = |v: &serde_json::Value, what: &str| {
            v.as_str()
                .map(str::to_owned)
                .with_context(|| format!("cargo metadata gives no {what}"))
        };
        Ok(Metadata {
            workspace_root: text(&v["workspace_root"], "workspace_root")?.into(),
            target_directory: text(&v["target_directory"], "target_directory")?.into(),
            version: text(&cli["version"], "version of turnback-cli")?,
            description: text(&cli["description"], "description of turnback-cli")?,
            repository: text(&cli["repository"], "repository of turnback-cli")?,
        })
    }

    /// Where cargo puts `exe` built for `triple` (None: the host) with
    /// `profile`.
    fn binary(&self, triple: Option<&str>, profile: &str, exe: &str) -> PathBuf {
        let dir = if profile == "dev" { "debug" } else { profile };
        let mut p = self.target_directory.clone();
        if let Some(t) = triple {
            p.push(t);
        }
        p.join(dir).join(exe)
    }
}

fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Builds the CLI for `targets`: zig links the Linux and macOS ones,
/// mingw-w64 the Windows one.
fn build(meta: &Metadata, targets: &[&Target], profile: &str) -> anyhow::Result<()> {
    let (windows, zig): (Vec<&Target>, Vec<&Target>) =
        targets.iter().copied().partition(|t| t.is_windows());
    if !zig.is_empty() {
        let probe = Command::new("cargo-zigbuild").arg("--version").output();
        if !probe.is_ok_and(|o| o.status.success()) {
            bail!(
                "cargo-zigbuild is not installed, and the Linux and macOS targets need it (with zig); `bash tests/dist/tools.sh` installs both into a cache and prints the folder to put first on PATH"
            );
        }
        let mut cmd = Command::new(cargo());
        // zig targets macOS 13 unless told otherwise; 11.0 (Big Sur, the
        // first for Apple silicon) is the oldest its libSystem stubs
        // cover, and docs/PLATFORMS.md says what runs there.
        cmd.env("MACOSX_DEPLOYMENT_TARGET", MACOS_DEPLOYMENT_TARGET);
        cmd.args([
            "zigbuild",
            "--locked",
            "-p",
            "turnback-cli",
            "--profile",
            profile,
        ]);
        for t in &zig {
            cmd.args(["--target", t.triple]);
        }
        run_cmd(cmd.current_dir(&meta.workspace_root))?;
    }
    for t in windows {
        let mut cmd = Command::new(cargo());
        cmd.args([
            "build",
            "--locked",
            "-p",
            "turnback-cli",
            "--profile",
            profile,
        ])
        .args(["--target", t.triple]);
        run_cmd(cmd.current_dir(&meta.workspace_root))?;
    }
    Ok(())
}

fn run_cmd(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// The host's target triple (`rustc -vV`).
fn host_triple() -> anyhow::Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .context("cannot run rustc -vV")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV names no host")
}

/// The completions and the manual page, from a binary that runs here.
fn docs(meta: &Metadata, targets: &[&Target], profile: &str) -> anyhow::Result<Vec<Entry>> {
    let host = host_triple()?;
    // A Linux host runs the static musl binary of its architecture.
    let runs_here = |t: &&&Target| {
        t.triple == host
            || host.ends_with("-unknown-linux-gnu")
                && t.triple == host.replace("-unknown-linux-gnu", "-unknown-linux-musl")
    };
    let binary = match targets.iter().find(runs_here) {
        Some(t) => meta.binary(Some(t.triple), profile, t.exe()),
        None => {
            let mut cmd = Command::new(cargo());
            cmd.args([
                "build",
                "--locked",
                "-p",
                "turnback-cli",
                "--profile",
                profile,
            ]);
            run_cmd(cmd.current_dir(&meta.workspace_root))?;
            meta.binary(
                None,
                profile,
                &format!("turnback{}", std::env::consts::EXE_SUFFIX),
            )
        }
    };
    let scratch = std::env::temp_dir().join(format!("turnback-xtask-{}", std::process::id()));
    let mut docs = Vec::new();
    for (path, args) in [
        ("complete/turnback.bash", &["completions", "bash"][..]),
        ("complete/_turnback", &["completions", "zsh"]),
        ("complete/turnback.fish", &["completions", "fish"]),
        ("complete/_turnback.ps1", &["completions", "powershell"]),
        ("complete/turnback.elv", &["completions", "elvish"]),
        ("doc/turnback.1", &["man"]),
    ] {
        // Nothing here reads a store; the data directory and home are
        // empty ones all the same.
        let out = Command::new(&binary)
            .args(args)
            .env_clear()
            .env("HOME", &scratch)
            .env("TURNBACK_DATA_DIR", scratch.join("data"))
            .env("TURNBACK_NO_BACKGROUND", "1")
            .output()
            .with_context(|| format!("cannot run {}", binary.display()))?;
        if !out.status.success() || out.stdout.is_empty() {
            bail!(
                "{} {} failed: {}",
                binary.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        docs.push(Entry::new(path.to_owned(), out.stdout, false));
    }
    match std::fs::remove_dir_all(&scratch) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", scratch.display())),
    }
    Ok(docs)
}

/// README.md, LICENSE-MIT and LICENSE-APACHE.
fn common_files(root: &Path) -> anyhow::Result<Vec<Entry>> {
    ["README.md", "LICENSE-MIT", "LICENSE-APACHE"]
        .iter()
        .map(|name| read(&root.join(name)).map(|b| Entry::new((*name).to_owned(), b, false)))
        .collect()
}

/// `SOURCE_DATE_EPOCH`, else the time of the last commit, else 0.
fn source_date(root: &Path) -> u64 {
    if let Some(t) = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return t;
    }
    Command::new("git")
        .args(["log", "-1", "--format=%ct"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0)
}

pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

pub fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

pub fn create_dir(path: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))
}
