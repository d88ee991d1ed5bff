#!/usr/bin/env bash
# Runs the MCP client test: the official MCP Python SDK (pinned in
# requirements.txt, installed into a virtual environment) drives
# `turnback mcp` over stdio. The binary is $TURNBACK_BIN, else a debug build
# made here. The venv is $TURNBACK_MCP_VENV, else <target dir>/mcp-venv; it is
# rebuilt when requirements.txt changes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"

if [ -z "${TURNBACK_BIN:-}" ]; then
    cargo build --quiet --manifest-path "$repo/Cargo.toml" -p turnback-cli --bin turnback
    TURNBACK_BIN="$target/debug/turnback"
fi
if [ ! -x "$TURNBACK_BIN" ]; then
    echo "tests/mcp/run.sh: $TURNBACK_BIN is not an executable turnback binary" >&2
    exit 1
fi

venv="${TURNBACK_MCP_VENV:-$target/mcp-venv}"
stamp="$venv/.turnback-requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$stamp"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$stamp"
fi

exec "$venv/bin/python" "$here/test_mcp_client.py" "$TURNBACK_BIN"
