#!/usr/bin/env bash
# Installs the coding agents pinned in package-lock.json with `npm ci`, into
# a cache outside the clone: ${TURNBACK_AGENT_CACHE:-$HOME/.cache/turnback-agents}/<lockfile hash>.
# Prints that directory's node_modules on stdout. An existing complete
# install is reused. Install scripts are not run: the tests start each
# agent's native binary (or Gemini CLI's JavaScript bundle) directly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
hash="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)"
cache="${TURNBACK_AGENT_CACHE:-$HOME/.cache/turnback-agents}"
dir="$cache/$hash"
if [[ ! -f "$dir/.complete" ]]; then
    command -v npm >/dev/null || { echo "npm is needed to install the agents (apt-get install npm)" >&2; exit 1; }
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    cp "$here/package.json" "$here/package-lock.json" "$dir.tmp/"
    (cd "$dir.tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    touch "$dir/.complete"
fi
echo "$dir/node_modules"
