#!/usr/bin/env bash
# Builds the workloads archive a kernel-matrix guest row with "workloads":
# true boots with, appended to the common initramfs (the kernel unpacks
# concatenated archives in order):
#
#   scripts/initramfs-workloads.sh [OUT]   (default build-static/kernel-matrix/workloads.cpio.zst)
#
# Contents: this system's Python 3 (/usr/bin/python3) with its standard library (without its
# tests and GUI), tmux, the terminfo entries and the C.UTF-8 locale, each program's shared
# libraries as the dynamic loader resolves them here, and
# /oarbank/workloads/run (scripts/guest-workloads.sh), which /init runs:
# the everyday programs that need unix sockets of the job's own (Python's
# multiprocessing manager and forkserver, tmux), run in the cage and judged
# by what they print. x86-64 only: the programs are this system's.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OARBANK_STATIC_BUILD:-$src/build-static}/kernel-matrix/workloads.cpio.zst}"
say() { printf 'initramfs-workloads: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
[[ -x /usr/bin/python3 ]] || die "needs /usr/bin/python3 (apt-get install python3)"
python=$(readlink -f /usr/bin/python3)  # /usr/bin/python3.N
pyver=$(basename "$python")             # python3.N
tmux=/usr/bin/tmux
for f in "$python" "$tmux" "/usr/lib/$pyver/os.py"; do [[ -e "$f" ]] || die "needs $f (apt-get install python3 tmux)"; done
for tool in cpio zstd ldd; do command -v "$tool" >/dev/null || die "needs $tool"; done

stage=$(mktemp -d "${TMPDIR:-/tmp}/oarbank-workloads.XXXXXX")
trap 'rm -rf "$stage"' EXIT
r="$stage/root"
mkdir -p "$r/usr/bin" "$r/oarbank/workloads"
cp "$python" "$r/usr/bin/$pyver"
ln -s "$pyver" "$r/usr/bin/python3"
cp "$tmux" "$r/usr/bin/tmux"
# The standard library, without what a workload never imports.
mkdir -p "$r/usr/lib"
tar -C /usr/lib --exclude="$pyver/test" --exclude="$pyver/idlelib" --exclude="$pyver/tkinter" \
  --exclude="$pyver/turtledemo" --exclude="$pyver/ensurepip" --exclude="$pyver/lib2to3" \
  --exclude="$pyver/config-*" -cf - "$pyver" | tar -C "$r/usr/lib" -xf -
# Every shared library the programs and the standard library's extension
# modules load, at the path the loader resolves here.
{
  ldd "$python" "$tmux"
  find "/usr/lib/$pyver/lib-dynload" -name '*.so' -exec ldd {} +
} 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  mkdir -p "$r$(dirname "$lib")"
  cp -L "$lib" "$r$lib"
done
# The job's LANG is C.UTF-8, which tmux refuses to start without.
[[ -d /usr/lib/locale/C.utf8 ]] || die "needs /usr/lib/locale/C.utf8 (libc-bin)"
mkdir -p "$r/usr/lib/locale" && cp -r /usr/lib/locale/C.utf8 "$r/usr/lib/locale/"
for t in /lib/terminfo /usr/share/terminfo; do
  [[ -d "$t" ]] && mkdir -p "$r$t" && cp -r "$t/." "$r$t/"
done
install -m 0755 "$src/scripts/guest-workloads.sh" "$r/oarbank/workloads/run"
mkdir -p "$(dirname "$out")"
(cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | zstd -q -9 -T0 -c >"$out.tmp"
mv "$out.tmp" "$out"
say "$out: $(du -k "$out" | cut -f1) KiB ($(du -sk "$r" | cut -f1) KiB unpacked)"
echo "$out"
