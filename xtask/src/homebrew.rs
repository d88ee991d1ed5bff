//! The Homebrew formula: the release's archives for macOS (Apple silicon
//! and Intel) and Linux (arm64 and x86_64, the static musl builds), with
//! the completions and the manual page. For a tap (`brew install
//! turnback/tap/turnback`) or homebrew-core.

use crate::dist::{Archive, Release};

/// The formula for the archives there are; None when none is for macOS
/// or Linux.
pub fn formula(release: &Release, archives: &[Archive]) -> Option<String> {
    let find = |triple: &str| archives.iter().find(|a| a.target.triple == triple);
    let mut blocks = String::new();
    for (os, intel, arm) in [
        ("on_macos", "x86_64-apple-darwin", "aarch64-apple-darwin"),
        (
            "on_linux",
            "x86_64-unknown-linux-musl",
            "aarch64-unknown-linux-musl",
        ),
    ] {
        let mut inner = String::new();
        for (cpu, triple) in [("on_intel", intel), ("on_arm", arm)] {
            if let Some(a) = find(triple) {
                inner.push_str(&format!(
                    "    {cpu} do\n      url \"{}/{}\"\n      sha256 \"{}\"\n    end\n",
                    release.base_url,
                    a.name(),
                    a.sha256
                ));
            }
        }
        if !inner.is_empty() {
            blocks.push_str(&format!("  {os} do\n{inner}  end\n\n"));
        }
    }
    if blocks.is_empty() {
        return None;
    }
    let desc = "Exact, crash-safe rewinds of a project folder for AI coding agents";
    Some(format!(
        r##"# The turnback formula, written by `cargo xtask dist` for release {version}.
class Turnback < Formula
  desc "{desc}"
  homepage "{homepage}"
  version "{version}"
  license any_of: ["MIT", "Apache-2.0"]

{blocks}  def install
    bin.install "turnback"
    man1.install "doc/turnback.1"
    bash_completion.install "complete/turnback.bash" => "turnback"
    zsh_completion.install "complete/_turnback"
    fish_completion.install "complete/turnback.fish"
  end

  test do
    assert_match version.to_s, shell_output("#{{bin}}/turnback --version")
    system bin/"turnback", "--root", testpath, "list"
  end
end
"##,
        version = release.version,
        homepage = release.repository,
    ))
}
