//! Helpers shared by the benchmark targets: the machine a run was measured
//! on, medians, and replacing one generated section of docs/BENCHMARKS.md.
//! Included with `#[path]` by each bench (they are separate crates).

#![allow(dead_code)]

use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

type Res<T> = Result<T, Box<dyn Error>>;

pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub parallelism: usize,
    pub kernel: String,
    pub mem_gib: f64,
    pub tmp: PathBuf,
    pub fs: String,
    pub device: String,
    pub load_start: String,
}

impl Machine {
    /// The machine and where the run's files were, as the first lines of
    /// a section: `where_more` follows the folder (`; generated trees`).
    pub fn lines(&self, where_more: &str) -> String {
        format!(
            "- **Machine:** {}, {} cores available, Linux {}, {:.0} GiB\n- **Where:** {} ({}){where_more}.\n",
            self.cpu,
            self.parallelism,
            self.kernel,
            self.mem_gib,
            self.tmp.display(),
            self.fs
        )
    }
}

pub fn fs_type(path: &Path) -> Res<(String, String)> {
    let path = fs::canonicalize(path)?;
    let info = fs::read_to_string("/proc/self/mountinfo")?;
    let mut best: Option<(usize, String, String)> = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(mount), Some(fstype), Some(source)) =
            (fields.get(4), fields.get(dash + 1), fields.get(dash + 2))
        else {
            continue;
        };
        let mount = mount.replace("\\040", " ");
        if path.starts_with(&mount) && best.as_ref().is_none_or(|b| mount.len() >= b.0) {
            best = Some((mount.len(), fstype.to_string(), source.to_string()));
        }
    }
    best.map(|(_, t, s)| (t, s))
        .ok_or_else(|| format!("no mount found for {}", path.display()).into())
}

pub fn machine(tmp: &Path) -> Res<Machine> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo")?;
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']))
        })
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let mem_kib: f64 = fs::read_to_string("/proc/meminfo")?
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let (mut fs, device) = fs_type(tmp)?;
    if fs == "ext4" {
        // A journalled ext4 has a jbd2 entry named after its device.
        let dev = device.rsplit('/').next().unwrap_or_default().to_string();
        let journalled = fs::read_dir("/proc/fs/jbd2").is_ok_and(|mut entries| {
            entries.any(|e| {
                e.is_ok_and(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{dev}-"))
                })
            })
        });
        if !journalled {
            fs.push_str(" without a journal");
        }
    }
    Ok(Machine {
        cpu,
        cores,
        parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")?
            .trim()
            .to_string(),
        mem_gib: mem_kib / (1024.0 * 1024.0),
        tmp: fs::canonicalize(tmp)?,
        fs,
        device,
        load_start: load_average(),
    })
}

pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

pub fn commit() -> String {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let run = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(&ws)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "HEAD"]) {
        Some(h) => {
            // The figures file itself does not make the measured code dirty.
            let dirty = run(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)docs/BENCHMARKS.md",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("`{h}` with uncommitted changes")
            } else {
                format!("`{h}`")
            }
        }
        None => "unknown (not a git checkout)".into(),
    }
}

pub fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The whole number in the environment variable `name`, else `default`.
pub fn env_usize(name: &str, default: usize) -> Res<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a whole number").into()),
        Err(_) => Ok(default),
    }
}

/// The settings every benchmark takes (a flag wins over the environment):
/// its repetitions (`--reps N` / `TURNBACK_BENCH_REPS`, else
/// `default_reps`; at least 1), and whether it writes its figures to the
/// docs (not with `--no-write` / `TURNBACK_BENCH_NO_WRITE=1`). The
/// `--bench` cargo bench passes to every bench target is taken and ignored.
pub fn reps_and_write(default_reps: usize) -> Res<(usize, bool)> {
    let mut reps = env_usize("TURNBACK_BENCH_REPS", default_reps)?;
    let mut write =
        std::env::var("TURNBACK_BENCH_NO_WRITE").map_or(true, |v| v.is_empty() || v == "0");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--no-write" => write = false,
            "--reps" => {
                let v = args.next().ok_or("--reps needs a number, e.g. --reps 7")?;
                reps = v
                    .parse()
                    .map_err(|_| format!("--reps {v:?}: not a whole number"))?;
            }
            _ if a.starts_with("--reps=") => {
                let v = &a["--reps=".len()..];
                reps = v
                    .parse()
                    .map_err(|_| format!("{a:?}: not a whole number"))?;
            }
            _ => {
                return Err(format!(
                    "unknown argument {a:?}; this benchmark takes --reps N and --no-write"
                )
                .into());
            }
        }
    }
    if reps == 0 {
        return Err("the repetition count must be at least 1".into());
    }
    Ok((reps, write))
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let (y, m, d) = turnback::time::civil_from_days(i128::from(days));
    format!("{y:04}-{m:02}-{d:02}")
}

pub fn ms(s: f64) -> String {
    if s >= 10.0 {
        format!("{s:.2} s")
    } else if s >= 0.01 {
        format!("{:.0} ms", s * 1e3)
    } else if s >= 0.001 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A time's median with its range over the repetitions.
pub fn time_cell(xs: &[f64]) -> String {
    let (lo, hi) = min_max(xs);
    format!("{} ({}–{})", ms(median(xs)), ms(lo), ms(hi))
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// Replaces this benchmark's marked section of `path`, keeping the rest.
pub fn write_section(path: &Path, section: &str, body: &str) -> Res<()> {
    let begin = format!("<!-- BEGIN benchmark:{section} (generated; do not edit by hand) -->");
    let end = format!("<!-- END benchmark:{section} -->");
    let text = format!("{begin}\n{body}{end}\n");
    let old = match fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            "# Benchmarks\n\nEach section below is written by the benchmark it names; \
             run that benchmark again to update it rather than editing it by hand.\n\n"
                .to_string()
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display()).into()),
    };
    let begin_key = format!("<!-- BEGIN benchmark:{section} ");
    let new = match (old.find(&begin_key), old.find(&end)) {
        (Some(b), Some(e)) if e > b => {
            let after = old[e + end.len()..]
                .strip_prefix('\n')
                .unwrap_or(&old[e + end.len()..]);
            format!("{}{text}{after}", &old[..b])
        }
        (None, None) => {
            let sep = if old.ends_with("\n\n") || old.is_empty() {
                ""
            } else if old.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            format!("{old}{sep}{text}")
        }
        _ => {
            return Err(format!(
                "{}: the markers of the {section:?} section are damaged; fix them by hand",
                path.display()
            )
            .into());
        }
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(path, new).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

/// Copies a directory recursively (a tree copy, a prebuilt project with
/// its store); symlinks are copied as the files they point at.
pub fn copy_dir(src: &Path, dst: &Path) -> Res<()> {
    fs::create_dir_all(dst).map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
    for entry in fs::read_dir(src).map_err(|e| format!("cannot list {}: {e}", src.display()))? {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", src.display()))?;
        let to = dst.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else {
            fs::copy(entry.path(), &to)
                .map_err(|e| format!("cannot copy {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Writes every dirty page of the file system holding `path` out before a
/// timed step, so no step pays for an earlier one's writes: `sync -f`
/// (`syncfs`) on Linux, `sync` where there is no `-f`.
pub fn sync_fs(path: &Path) -> Res<()> {
    let mut sync = Command::new("sync");
    if cfg!(target_os = "linux") {
        sync.arg("-f").arg(path);
    }
    let status = sync
        .status()
        .map_err(|e| format!("cannot run sync for {}: {e}", path.display()))?;
    if !status.success() {
        return Err(format!("sync of {} failed: {status}", path.display()).into());
    }
    Ok(())
}

/// Bytes allocated on disk for `m` (`st_blocks` × 512; on Windows, where
/// std does not give the allocation, the length).
pub fn disk_bytes(m: &fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        std::os::unix::fs::MetadataExt::blocks(m) * 512
    }
    #[cfg(not(unix))]
    {
        m.len()
    }
}

/// The permission bits of `m` (on Windows 0o444 read-only, else 0o644).
pub fn mode_of(m: &fs::Metadata) -> u32 {
    #[cfg(unix)]
    {
        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
    }
    #[cfg(not(unix))]
    {
        if m.permissions().readonly() {
            0o444
        } else {
            0o644
        }
    }
}

/// Sets the permission bits of `path` (on Windows the read-only attribute).
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let mut p = fs::metadata(path)?.permissions();
        p.set_readonly(mode & 0o200 == 0);
        fs::set_permissions(path, p)
    }
}

/// Generates `n` files under `root`: 100 per directory
/// (`dNNN/eNNN/fNN.txt`), each a line of text, a thousand distinct
/// contents (the Watchman and scan benchmarks' trees).
pub fn generate(root: &Path, n: usize) -> Res<()> {
    for i in 0..n {
        let dir = root.join(format!("d{:03}/e{:03}", i / 100_000, (i / 100) % 1000));
        if i % 100 == 0 {
            fs::create_dir_all(&dir)?;
        }
        fs::write(
            dir.join(format!("f{:02}.txt", i % 100)),
            format!("generated line of kind {}\n", i % 1000),
        )?;
    }
    Ok(())
}

/// The path of generated file `i`, relative to the root.
pub fn file_of(i: usize) -> String {
    format!(
        "d{:03}/e{:03}/f{:02}.txt",
        i / 100_000,
        (i / 100) % 1000,
        i % 100
    )
}

/// A list of tree sizes from the variable `name` (`100000,300000`), else
/// `default`.
pub fn env_sizes(name: &str, default: &str) -> Res<Vec<usize>> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| format!("{name}: {s:?} is not a number of files").into())
        })
        .collect()
}

/// Where a benchmark puts its trees: `TURNBACK_BENCH_TMP`, else the
/// system's temporary directory.
pub fn bench_tmp() -> PathBuf {
    std::env::var_os("TURNBACK_BENCH_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// git's version (`2.47.3`), or nothing when it cannot be run.
pub fn git_version() -> String {
    Command::new("git")
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .trim_start_matches("git version ")
                .to_owned()
        })
        .unwrap_or_default()
}

/// The options that give a benchmark's commits an author of their own.
pub const GIT_AS_BENCH: [&str; 4] = [
    "-c",
    "user.name=bench",
    "-c",
    "user.email=bench@example.com",
];

/// The regular files below `source`, as paths relative to it in byte
/// order (symlinks and special files skipped).
pub fn regular_files(source: &Path) -> Res<Vec<String>> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Res<()> {
        let entries =
            fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            let name = entry.file_name().into_string().map_err(|n| {
                format!(
                    "{}: a name that is not UTF-8 ({n:?}); choose another TURNBACK_BENCH_TREE",
                    dir.display()
                )
            })?;
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let ft = entry
                .file_type()
                .map_err(|e| format!("cannot look at {}: {e}", entry.path().display()))?;
            if ft.is_dir() {
                walk(&entry.path(), &rel, out)?;
            } else if ft.is_file() {
                out.push(rel);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(source, "", &mut out)?;
    out.sort();
    Ok(out)
}
