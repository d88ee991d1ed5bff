#!/usr/bin/env bash
# Installs the coding agents pinned in package-lock.json with `npm ci`, into
# a cache outside the clone: ${TURNBACK_AGENT_CACHE:-$HOME/.cache/turnback-agents}/<lockfiles' hash>.
# Prints that directory's node_modules on stdout. An existing complete
# install is reused. Install scripts are not run: the tests start each
# agent's native binary (or Gemini CLI's JavaScript bundle) directly.
#
# Beside node_modules, opencode-plugin/ holds the plugin API pinned in
# opencode-plugin/package-lock.json, installed the same way: opencode
# installs it from the registry into a project's .opencode/ when a project
# has plugins (over a minute), unless it is there already, so the tests
# copy it in.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
hash="$(cat "$here/package.json" "$here/package-lock.json" \
    "$here/opencode-plugin/package.json" "$here/opencode-plugin/package-lock.json" | sha256sum | cut -c1-16)"
cache="${TURNBACK_AGENT_CACHE:-$HOME/.cache/turnback-agents}"
dir="$cache/$hash"
if [[ ! -f "$dir/.complete" ]]; then
    command -v npm >/dev/null || { echo "npm is needed to install the agents (apt-get install npm)" >&2; exit 1; }
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp/opencode-plugin"
    cp "$here/package.json" "$here/package-lock.json" "$dir.tmp/"
    cp "$here/opencode-plugin/package.json" "$here/opencode-plugin/package-lock.json" "$dir.tmp/opencode-plugin/"
    for d in "$dir.tmp" "$dir.tmp/opencode-plugin"; do
        (cd "$d" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
    done
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    touch "$dir/.complete"
fi
echo "$dir/node_modules"
