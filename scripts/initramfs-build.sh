#!/usr/bin/env bash
# Builds the one initramfs every kernel-matrix guest boots:
#
#   scripts/initramfs-build.sh [OUT]   (default build-static/kernel-matrix/initramfs.cpio.zst)
#   OARBANK_ARCH=arm64 scripts/initramfs-build.sh [OUT]
#                                      (default build-arm64/kernel-matrix/initramfs.cpio.zst)
#
# Contents: busybox-static and its applet links, /init (scripts/guest-init.sh),
# the static oarbank-agent and oarbank-conform, the static probes (with
# helpers/), the battery policies, escapes/expectations.tsv and
# escapes/catalogue.tsv, /etc/passwd
# with root and nobody (65534). The static binaries come from a second build
# directory, $OARBANK_STATIC_BUILD (default build-static), configured with
# -DOARBANK_STATIC=ON -DOARBANK_TESTS=OFF. It holds no kernel module: a row
# that needs some (egress_any) boots with an archive of its own kernel's
# (scripts/initramfs-egress-any.sh).
# OARBANK_INITRAMFS_COMPRESS=zstd (default) or gzip: every kernel of the
# matrix unpacks both (RD_ZSTD, RD_GZIP). The static binaries share most of
# their bytes, which zstd's window finds: 6.5 MB against gzip's 33 MB, and
# about 1-2 s less per boot under TCG.
#
# OARBANK_ARCH=arm64 builds the arm64 guests' initramfs instead: the
# binaries are cross-built by scripts/cross-arm64.sh into build-arm64 (with
# the test-only agent, whose broken filter the guest shows caught), busybox
# is Debian's arm64 busybox-static (its applet links are made by /init,
# since this machine cannot run it), and the dynamic loader and libc come
# from the cross toolchain.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="${OARBANK_ARCH:-amd64}"
case "$arch" in
  amd64) build="${OARBANK_STATIC_BUILD:-$src/build-static}"; tools="" ;;
  arm64) build="${OARBANK_ARM64_BUILD:-$src/build-arm64}"; tools="aarch64-linux-gnu-" ;;
  *) echo "initramfs-build: OARBANK_ARCH must be amd64 or arm64" >&2; exit 64 ;;
esac
compress="${OARBANK_INITRAMFS_COMPRESS:-zstd}"
case "$compress" in
  zstd) compressor=(zstd -q -9 -T0 -c) ;;
  gzip) compressor=(gzip -6 -n -c) ;;
  *) echo "initramfs-build: OARBANK_INITRAMFS_COMPRESS must be zstd or gzip" >&2; exit 64 ;;
esac
out="${1:-$build/kernel-matrix/initramfs.cpio.${compress/gzip/gz}}"
out="${out/%.cpio.zstd/.cpio.zst}"
say() { printf 'initramfs-build: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
for tool in cmake ninja cpio "${compressor[0]}" readelf; do command -v "$tool" >/dev/null || die "needs $tool"; done

# 1. The static build.
if [[ "$arch" == arm64 ]]; then
  say "cross-building for arm64 in $build"
  "$src/scripts/cross-arm64.sh" "$build" >&2 || die "the arm64 cross build failed"
else
  say "configuring $build (OARBANK_STATIC=ON, with the test-only agent)"
  "$src/scripts/static-configure.sh" "$build"
fi
say "building oarbank-agent, the test-only agent, oarbank-conform and the probes in $build"
ninja -C "$build" oarbank-agent oarbank-agent-faulty oarbank-conform probes | grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' >&2 || true
[[ ${PIPESTATUS[0]} -eq 0 ]] || die "the static build failed"
agent="$build/sandbox/oarbank-agent"
conform="$build/harness/oarbank-conform"
probes="$build/probes"
for f in "$agent" "$conform"; do [[ -x "$f" ]] || die "missing $f"; done

strip="${tools}strip"
command -v "$strip" >/dev/null || die "needs $strip"

# 2. busybox: the host's busybox-static if installed, else from the archive.
busybox="${OARBANK_BUSYBOX:-}"
if [[ -z "$busybox" && "$arch" == arm64 ]]; then
  deb=$("$src/scripts/kernels-fetch.sh" --package busybox-static:arm64) || die "cannot fetch busybox-static:arm64"
  bbdir="${OARBANK_KERNEL_CACHE:-/var/cache/oarbank-kernels}/arm64/busybox"
  rm -rf "$bbdir" && dpkg-deb -x "$deb" "$bbdir"
  busybox="$bbdir/usr/bin/busybox"
  [[ -x "$busybox" ]] || busybox="$bbdir/bin/busybox"
  [[ -x "$busybox" ]] || die "no busybox in $deb"
elif [[ -z "$busybox" ]]; then
  if dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' && [[ -x /bin/busybox ]]; then
    busybox=/bin/busybox
  else
    busybox=$("$src/scripts/kernels-fetch.sh" --busybox)
  fi
fi

static_or_die() {
  if readelf -lW "$1" 2>/dev/null | grep -q 'Requesting program interpreter'; then die "$1 is not static"; fi
}
static_or_die "$busybox"
static_or_die "$agent"
static_or_die "$conform"

# 3. The tree.
stage=$(mktemp -d "${TMPDIR:-/tmp}/oarbank-initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT
r="$stage/root"
mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc,opt,proc,sys,dev,tmp,run,root,out,mnt}
mkdir -p "$r/oarbank"/{sandbox,harness,probes/helpers,fixtures/policies/battery,escapes}
chmod 1777 "$r/tmp"
chmod 0700 "$r/root"
cp "$busybox" "$r/bin/busybox"
if [[ "$arch" == amd64 ]]; then
  for applet in $("$busybox" --list-full); do
    [[ -e "$r/$applet" ]] || ln -s /bin/busybox "$r/$applet"
  done
else
  ln -s busybox "$r/bin/sh"  # /init runs `busybox --install -s` for the rest
fi
install -m 0755 "$src/scripts/guest-init.sh" "$r/init"
# A base system has a dynamic loader and dynamic executables: exec_written_ldso
# runs `ld.so <a written copy of /bin/true>`, so the guest gets the host's
# loader, libc and a dynamic /bin/true (the rest stays busybox).
if [[ "$arch" == arm64 ]]; then
  # The cross toolchain's loader and libc, and a dynamic `true` built with it.
  cross_lib=/usr/aarch64-linux-gnu/lib
  [[ -f "$cross_lib/ld-linux-aarch64.so.1" && -f "$cross_lib/libc.so.6" ]] || die "no $cross_lib/ld-linux-aarch64.so.1 (libc6-arm64-cross)"
  mkdir -p "$r/lib/aarch64-linux-gnu"
  cp -L "$cross_lib/ld-linux-aarch64.so.1" "$r/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"
  cp -L "$cross_lib/libc.so.6" "$r/lib/aarch64-linux-gnu/libc.so.6"
  ln -s aarch64-linux-gnu/ld-linux-aarch64.so.1 "$r/lib/ld-linux-aarch64.so.1"
  printf 'int main(void) { return 0; }\n' | aarch64-linux-gnu-gcc -O2 -x c -o "$stage/true" - || die "cannot build the arm64 dynamic true"
  "$strip" -o "$r/usr/bin/true" "$stage/true"
  ln -s /usr/bin/true "$r/bin/true"
else
  ldso=$(readlink -f /lib64/ld-linux-x86-64.so.2 2>/dev/null || true)
  true_bin=$(readlink -f /usr/bin/true 2>/dev/null || true)
  libc=$( (ldd "$true_bin" 2>/dev/null || true) | awk '/libc\.so\.6/ {print $3}')
  if [[ -f "$ldso" && -f "$libc" && -f "$true_bin" ]]; then
    mkdir -p "$r/lib/x86_64-linux-gnu"
    cp "$ldso" "$r/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    cp "$libc" "$r/lib/x86_64-linux-gnu/libc.so.6"
    ln -sf /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$r/lib64/ld-linux-x86-64.so.2"
    rm -f "$r/bin/true" "$r/usr/bin/true"
    cp "$true_bin" "$r/usr/bin/true"
    ln -s /usr/bin/true "$r/bin/true"
  else
    say "warning: no host dynamic loader/libc: exec_written_ldso will say unsupported in the guests"
  fi
fi
"$strip" --strip-debug -o "$r/oarbank/sandbox/oarbank-agent" "$agent"
# The test-only agent, for the rows whose guest removes one enforcement
# point and must see the battery catch it (broken_filter, mutant).
faulty="$build/sandbox/oarbank-agent-faulty"
[[ -x "$faulty" ]] || die "missing $faulty (the test-only agent)"
static_or_die "$faulty"
"$strip" --strip-debug -o "$r/oarbank/sandbox/oarbank-agent-faulty" "$faulty"
"$strip" --strip-debug -o "$r/oarbank/harness/oarbank-conform" "$conform"
n=0
for p in "$probes"/*; do
  [[ -f "$p" && -x "$p" ]] || continue
  static_or_die "$p"
  "$strip" --strip-debug -o "$r/oarbank/probes/$(basename "$p")" "$p"
  n=$((n + 1))
done
for p in "$probes"/helpers/*; do
  [[ -f "$p" && -x "$p" ]] || continue
  static_or_die "$p"
  # The AArch32 helper is not the build's architecture: its strip cannot read it.
  "$strip" --strip-debug -o "$r/oarbank/probes/helpers/$(basename "$p")" "$p" 2>/dev/null ||
    cp "$p" "$r/oarbank/probes/helpers/$(basename "$p")"
done
chmod 0755 "$r"/oarbank/probes/* "$r"/oarbank/probes/helpers/* "$r"/oarbank/sandbox/* "$r"/oarbank/harness/*
cp "$src"/fixtures/policies/battery/*.json "$r/oarbank/fixtures/policies/battery/"
cp "$src/escapes/expectations.tsv" "$src/escapes/catalogue.tsv" "$r/oarbank/escapes/"
cat >"$r/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$r/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
# Root-only files of a base system (read_root_only_files needs one to exist).
printf 'root:*:20000:0:99999:7:::\nnobody:*:20000:0:99999:7:::\n' >"$r/etc/shadow"
printf 'root:*::\nnogroup:*::\n' >"$r/etc/gshadow"
chmod 0640 "$r/etc/shadow" "$r/etc/gshadow"
echo oarbank-guest >"$r/etc/hostname"
{
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "source $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet 2>/dev/null || echo -dirty)"
  echo "arch $arch"
  echo "probes $n"
  echo "busybox $("$busybox" 2>&1 | head -1)"
} >"$r/oarbank/BUILD"

# 4. The archive (newc, owned by root, deterministic order).
mkdir -p "$(dirname "$out")"
(cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | "${compressor[@]}" >"$out.tmp"
mv "$out.tmp" "$out"
say "$out: $n probes, $(du -k "$out" | cut -f1) KiB ($(du -sk "$r" | cut -f1) KiB unpacked)"
echo "$out"
