#!/bin/sh
# Cargo target runner: run x86_64-pc-windows-gnu executables under Wine.
#
#   export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=tests/wine/runner.sh
#   cargo test --target x86_64-pc-windows-gnu
#
# or directly:  runner.sh path/to/program.exe [args...]
#
# What it does:
#   * keeps a dedicated 64-bit Wine prefix in a cache dir (outside any git
#     clone), created on first use with `wineboot -i`, headless and quiet;
#   * builds bcryptprimitives.dll (ProcessPrng shim, see bcryptprimitives.c)
#     once and installs it into the prefix's C:\windows\system32, so every
#     Rust exe (incl. child processes spawned by tests) finds it;
#   * execs `wine <exe> args...`: stdin/stdout/stderr are the caller's, the
#     exit status is the Windows process exit code (low 8 bits, as for any
#     Unix process).
#
# Environment knobs (all optional):
#   TURNBACK_WINE_DIR    cache dir   (default ${XDG_CACHE_HOME:-$HOME/.cache}/turnback-wine)
#                        holds prefix/ (the WINEPREFIX), dll/, init logs, lock.
#   TURNBACK_WINE_DEBUG  if set, used as WINEDEBUG instead of -all (e.g. "err+all,fixme-all")
#   TURNBACK_WINE_KEEP_DISPLAY=1  do not unset DISPLAY/WAYLAND_DISPLAY
#   WINE / WINESERVER    explicit wine loader / wineserver binaries
#   MINGW_CC             cross compiler for the shim (default x86_64-w64-mingw32-gcc)
#   WINEDLLOVERRIDES     appended after the runner's own overrides
# An ambient WINEPREFIX is deliberately ignored (never touches ~/.wine).

set -u

die() { echo "wine-runner: $*" >&2; exit 125; }

kit_dir=$(CDPATH= cd -- "$(dirname -- "$(readlink -f -- "$0")")" && pwd) || die "cannot locate kit dir"

[ $# -ge 1 ] || die "usage: $0 program.exe [args...]"

# ---------------------------------------------------------------- locate wine
if [ -z "${WINE:-}" ]; then
    if command -v wine64 >/dev/null 2>&1; then WINE=$(command -v wine64)
    elif [ -x /usr/lib/wine/wine64 ]; then WINE=/usr/lib/wine/wine64      # Debian/Ubuntu
    elif [ -x /usr/lib64/wine/wine64 ]; then WINE=/usr/lib64/wine/wine64
    elif command -v wine >/dev/null 2>&1; then WINE=$(command -v wine)
    else die "wine not found (apt-get install wine64)"; fi
fi
if [ -z "${WINESERVER:-}" ]; then
    wdir=$(dirname -- "$WINE")
    if [ -x "$wdir/wineserver" ]; then WINESERVER=$wdir/wineserver
    elif command -v wineserver >/dev/null 2>&1; then WINESERVER=$(command -v wineserver)
    elif [ -x /usr/lib/wine/wineserver ]; then WINESERVER=/usr/lib/wine/wineserver
    else WINESERVER=; fi
fi
case "$WINE" in */wine64) export WINELOADER="$WINE" ;; esac
[ -n "$WINESERVER" ] && export WINESERVER

# ---------------------------------------------------------------- environment
if [ -n "${TURNBACK_WINE_DIR:-}" ]; then
    cache=$TURNBACK_WINE_DIR
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
    cache=$XDG_CACHE_HOME/turnback-wine
elif [ -n "${HOME:-}" ]; then
    cache=$HOME/.cache/turnback-wine
else
    cache=${TMPDIR:-/tmp}/turnback-wine-$(id -u)
fi
export WINEPREFIX="$cache/prefix"
export WINEARCH=win64
export WINEDEBUG="${TURNBACK_WINE_DEBUG:--all}"
# mscoree/mshtml disabled: no Mono/Gecko install prompts; no desktop menu entries.
ovr='mscoree,mshtml=;winemenubuilder.exe=d'
export WINEDLLOVERRIDES="$ovr${WINEDLLOVERRIDES:+;$WINEDLLOVERRIDES}"
if [ "${TURNBACK_WINE_KEEP_DISPLAY:-}" != 1 ]; then
    unset DISPLAY WAYLAND_DISPLAY
fi

dll_src="$kit_dir/bcryptprimitives.c"
dll_def="$kit_dir/bcryptprimitives.def"
dll_built="$cache/dll/bcryptprimitives.dll"
dll_inst="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
ready="$cache/.prefix-ready"
wine_inf=
for f in /usr/share/wine/wine.inf /usr/share/wine/wine/wine.inf /opt/wine*/share/wine/wine.inf; do
    [ -f "$f" ] && { wine_inf=$f; break; }
done

# Fast path: everything already in place -> no locking, no extra processes.
need_setup=0
[ -f "$ready" ] || need_setup=1
[ -f "$dll_inst" ] || need_setup=1
[ -f "$dll_built" ] || need_setup=1
[ "$need_setup" = 0 ] && { [ "$dll_src" -nt "$dll_built" ] || [ "$dll_def" -nt "$dll_built" ]; } && need_setup=1
# wine re-runs `wineboot -u` (noisily, on stderr) when the wine package changed
# (.update-timestamp != mtime of wine.inf); detect that and do it here quietly.
prefix_outdated() {
    [ -n "$wine_inf" ] && [ -f "$WINEPREFIX/.update-timestamp" ] || return 1
    stamp=$(head -n 1 "$WINEPREFIX/.update-timestamp" | tr -d '\r\n ')
    [ "$stamp" = disable ] && return 1
    [ "$stamp" != "$(stat -c %Y "$wine_inf")" ]
}
[ "$need_setup" = 0 ] && prefix_outdated && need_setup=1

setup() {
    # fd 9 holds the lock; it must never leak into wine/wineserver processes
    # (a long-lived wineserver would otherwise keep the lock forever).
    if [ ! -f "$ready" ] || [ ! -d "$WINEPREFIX/drive_c/windows/system32" ]; then
        echo "wine-runner: creating Wine prefix in $WINEPREFIX (one-time, ~15-60 s)..." >&2
        rm -rf "$WINEPREFIX" "$ready"
        t0=$(date +%s)
        if ! "$WINE" wineboot -i </dev/null >"$cache/wineboot.log" 2>&1 9>&-; then
            cat "$cache/wineboot.log" >&2
            die "wineboot -i failed (log: $cache/wineboot.log)"
        fi
        # wait for wineserver to exit so the registry is flushed to disk
        [ -n "$WINESERVER" ] && "$WINESERVER" -w 9>&-
        [ -d "$WINEPREFIX/drive_c/windows/system32" ] || die "prefix creation failed (log: $cache/wineboot.log)"
        echo "wine-runner: prefix ready after $(( $(date +%s) - t0 )) s" >&2
        : >"$ready"
    elif prefix_outdated; then
        echo "wine-runner: wine was upgraded, updating prefix..." >&2
        "$WINE" wineboot -u </dev/null >"$cache/wineboot-update.log" 2>&1 9>&-
        [ -n "$WINESERVER" ] && "$WINESERVER" -w 9>&-
    fi
    if [ ! -f "$dll_built" ] || [ "$dll_src" -nt "$dll_built" ] || [ "$dll_def" -nt "$dll_built" ]; then
        "$kit_dir/build.sh" "$cache/dll" >"$cache/build.log" 2>&1 9>&- || {
            cat "$cache/build.log" >&2
            die "building bcryptprimitives.dll failed (needs gcc-mingw-w64-x86-64)"
        }
    fi
    if ! cmp -s "$dll_built" "$dll_inst" 2>/dev/null; then
        cp -f "$dll_built" "$dll_inst.tmp.$$" && mv -f "$dll_inst.tmp.$$" "$dll_inst" ||
            die "cannot install $dll_inst"
    fi
}

if [ "$need_setup" = 1 ]; then
    mkdir -p "$cache" || die "cannot create $cache"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$cache/.lock" || die "cannot open $cache/.lock"
        flock 9 || die "flock failed"
        setup
        exec 9>&-
    else
        setup
    fi
fi

# ---------------------------------------------------------------- run
# Wine maps the Unix root to drive Z:, so a Unix path that Cargo's
# [env] (.cargo/config.toml) made absolute is given as the same place in
# Windows spelling (Z:\work\...), which is absolute there too.
case "${TURNBACK_DATA_DIR:-}" in
    /*) TURNBACK_DATA_DIR="Z:$(printf '%s' "$TURNBACK_DATA_DIR" | tr / '\\')"
        export TURNBACK_DATA_DIR ;;
esac
# The POSIX shell the Windows tests run bash hook lines with
# (tests/wine/posix-shell.sh builds it into the cache), named to them in
# Windows spelling; a test that needs it and finds it unnamed fails.
if [ -z "${TURNBACK_POSIX_SHELL:-}" ] && [ -f "$cache/brush-0.4.0/.complete" ]; then
    TURNBACK_POSIX_SHELL="$cache/brush-0.4.0/bin/brush.exe"
fi
case "${TURNBACK_POSIX_SHELL:-}" in
    /*) TURNBACK_POSIX_SHELL="Z:$(printf '%s' "$TURNBACK_POSIX_SHELL" | tr / '\\')"
        export TURNBACK_POSIX_SHELL ;;
esac
exec "$WINE" "$@"
