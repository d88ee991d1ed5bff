#!/bin/sh
# Build bcryptprimitives.dll (ProcessPrng -> advapi32!SystemFunction036).
# Usage: build.sh [OUTPUT_DIR]   (default: current directory)
# Env:   MINGW_CC  cross compiler (default: x86_64-w64-mingw32-gcc)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-.}
cc=${MINGW_CC:-x86_64-w64-mingw32-gcc}
mkdir -p "$out"
tmp="$out/.bcryptprimitives.dll.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# -nostdlib + own entry point: no CRT, imports only kernel32 + advapi32
"$cc" -shared -O2 -s -Wall -Wextra -ffreestanding -fno-stack-protector \
    -o "$tmp" \
    "$here/bcryptprimitives.c" "$here/bcryptprimitives.def" \
    -nostdlib -Wl,-e,DllMain -lkernel32 -ladvapi32
# atomic replace so concurrent users never see a half-written DLL
mv -f "$tmp" "$out/bcryptprimitives.dll"
trap - EXIT
echo "$out/bcryptprimitives.dll"
