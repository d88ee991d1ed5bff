#!/usr/bin/env bash
# Builds brush (crates.io `brush-shell`, a POSIX and bash-compatible shell in
# Rust) for x86_64-pc-windows-gnu, once, into the Wine cache outside the
# clone: ${TURNBACK_WINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/turnback-wine}/brush-<version>/.
# Prints the path of brush.exe on stdout. The Windows tests run the hook
# lines `turnback init` writes for agents that run hooks through bash on
# Windows (Claude Code through Git Bash, Cline through `sh`) with it, under
# Wine (docs/PLATFORMS.md: no Git Bash, MSYS2 or busybox-w32 build is
# served by a registry reachable here; brush is, as source). The first build
# takes about six minutes on two cores; later runs reuse it.
set -euo pipefail
version=0.4.0
cache="${TURNBACK_WINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/turnback-wine}"
dir="$cache/brush-$version"
exe="$dir/bin/brush.exe"
if [[ ! -f "$dir/.complete" ]]; then
    rm -rf "$dir"
    mkdir -p "$cache"
    cargo install brush-shell --locked --version "$version" \
        --no-default-features --features minimal \
        --target x86_64-pc-windows-gnu --root "$dir" \
        --target-dir "$cache/brush-build" >&2
    rm -rf "$cache/brush-build"
    [[ -f "$exe" ]] || { echo "posix-shell.sh: $exe was not built" >&2; exit 1; }
    touch "$dir/.complete"
fi
echo "$exe"
