#!/usr/bin/env bash
# The cross-linking tools `cargo xtask dist` needs, installed once into a
# cache outside the clone (TURNBACK_DIST_CACHE, default ~/.cache/turnback-dist)
# and reused while the pins below are unchanged:
# cargo-zigbuild and zig (both from PyPI, the `ziglang` wheel carries zig),
# and the Rust standard libraries of the release targets.
# Prints the directory to put first on PATH.
set -euo pipefail

cache="${TURNBACK_DIST_CACHE:-$HOME/.cache/turnback-dist}"
pins="cargo-zigbuild==0.24.1 ziglang==0.15.2"
venv="$cache/venv"
stamp="$venv/.pins"

if [ ! -x "$venv/bin/cargo-zigbuild" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$pins" ]; then
    rm -rf "$venv"
    mkdir -p "$cache"
    python3 -m venv "$venv" >&2
    # shellcheck disable=SC2086 # the pins are separate words
    "$venv/bin/pip" install --quiet --disable-pip-version-check $pins >&2
    echo "$pins" >"$stamp"
fi
# cargo-zigbuild runs `python3 -m ziglang`; the venv's python3 has it.
"$venv/bin/python3" -m ziglang version >/dev/null

rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl \
    x86_64-pc-windows-gnu x86_64-apple-darwin aarch64-apple-darwin >/dev/null 2>&1 ||
    rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl \
        x86_64-pc-windows-gnu x86_64-apple-darwin aarch64-apple-darwin >&2

echo "$venv/bin"
