#!/bin/sh
# Installs turnback @VERSION@: downloads the archive for this machine
# (Linux or macOS, x86_64 or arm64) and SHA256SUMS from the release,
# refuses the archive unless its SHA-256 is the one SHA256SUMS gives, and
# puts the binary in the install folder. It asks nothing.
#
#   curl -fsSL @BASE_URL@/install.sh | sh
#   sh install.sh [--base-url URL] [--install-dir DIR]
#
# --base-url URL     where the archives and SHA256SUMS are
#                    (default @BASE_URL@)
# --install-dir DIR  where `turnback` goes (default ~/.local/bin)
#
# Written by `cargo xtask dist`.
set -eu

version='@VERSION@'
base_url='@BASE_URL@'
install_dir=''

say() { printf 'turnback-install: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --base-url) [ $# -ge 2 ] || die "--base-url needs a URL"; base_url=$2; shift 2 ;;
        --base-url=*) base_url=${1#*=}; shift ;;
        --install-dir) [ $# -ge 2 ] || die "--install-dir needs a folder"; install_dir=$2; shift 2 ;;
        --install-dir=*) install_dir=${1#*=}; shift ;;
        -h | --help) sed -n '2,13p' "$0" 2>/dev/null | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
base_url=${base_url%/}
if [ -z "$install_dir" ]; then
    [ -n "${HOME:-}" ] || die "HOME is not set; name the folder with --install-dir"
    install_dir="$HOME/.local/bin"
fi

case "$(uname -s)" in
    Linux) os=unknown-linux-musl ;;
    Darwin) os=apple-darwin ;;
    *) die "no prebuilt turnback for $(uname -s); on Windows run install.ps1, elsewhere \`cargo install --locked turnback-cli\`" ;;
esac
case "$(uname -m)" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) die "no prebuilt turnback for $(uname -m); build it with \`cargo install --locked turnback-cli\`" ;;
esac
# A shell translated by Rosetta says x86_64 on Apple silicon.
if [ "$os" = apple-darwin ] && [ "$arch" = x86_64 ] &&
    [ "$(sysctl -n hw.optional.arm64 2>/dev/null || true)" = 1 ]; then
    arch=aarch64
fi
target="$arch-$os"
stem="turnback-$version-$target"
archive="$stem.tar.gz"

download() { # URL FILE
    if command -v curl >/dev/null 2>&1; then
        curl --fail --silent --show-error --location --retry 2 --output "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget --quiet --output-document="$2" "$1"
    else
        die "neither curl nor wget is installed"
    fi || die "cannot download $1"
}

sha256() { # FILE
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d ' ' -f 1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d ' ' -f 1
    elif command -v openssl >/dev/null 2>&1; then
        openssl dgst -sha256 -r "$1" | cut -d ' ' -f 1
    else
        die "no sha256sum, shasum or openssl to check the download with"
    fi
}

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t turnback-install)
trap 'rm -rf "$tmp"' EXIT INT TERM

download "$base_url/SHA256SUMS" "$tmp/SHA256SUMS"
download "$base_url/$archive" "$tmp/$archive"
expected=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/SHA256SUMS")
[ -n "$expected" ] || die "$base_url/SHA256SUMS has no line for $archive; nothing was installed"
actual=$(sha256 "$tmp/$archive")
[ "$actual" = "$expected" ] ||
    die "checksum mismatch for $archive: SHA256SUMS says $expected, the download is $actual; nothing was installed"

tar -xzf "$tmp/$archive" -C "$tmp" || die "cannot unpack $archive"
[ -f "$tmp/$stem/turnback" ] || die "$archive holds no $stem/turnback"
mkdir -p "$install_dir" || die "cannot create $install_dir"
# Copied beside its final name, then renamed over it: a running turnback
# keeps its file, and no half-copied binary is ever on PATH.
part="$install_dir/.turnback.$$.part"
cp "$tmp/$stem/turnback" "$part" && chmod 755 "$part" && mv -f "$part" "$install_dir/turnback" ||
    { rm -f "$part"; die "cannot install into $install_dir"; }
say "installed turnback $version ($target) as $install_dir/turnback"
case ":${PATH:-}:" in
    *":$install_dir:"*) ;;
    *) say "$install_dir is not on PATH; add it (export PATH=\"$install_dir:\$PATH\" in your shell's profile)" ;;
esac
