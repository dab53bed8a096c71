#!/usr/bin/env bash
# Cross-builds the static arm64 (aarch64) oarbank-agent, oarbank-conform and
# every probe of the battery.
#
#   scripts/cross-arm64.sh [BUILD_DIR]   (default: build-arm64)
#
# 1. installs Debian's cross compilers (gcc-aarch64-linux-gnu,
#    g++-aarch64-linux-gnu, and gcc-arm-linux-gnueabihf for the AArch32
#    program of the aarch32_syscall probe) when missing;
# 2. makes an arm64 sysroot from Debian arm64 packages (the static archives
#    of libseccomp, nettle and c-ares), fetched through an apt
#    configuration of its own: the system's sources and architectures are
#    never changed. The architecture-independent header-only libraries
#    (nlohmann-json, CLI11, Asio, toml++) are linked in from this system;
# 3. compiles the seccomp row sets for every architecture with this
#    system's build (build/, or the kernel matrix's build-static, made if
#    neither exists), since the cross build cannot run its own compiler here;
# 4. configures with cmake/aarch64-linux-gnu.cmake and builds;
# 5. checks that the binaries and every probe are static aarch64
#    executables, and runs `oarbank-agent --version` under
#    qemu-aarch64-static when it is there.
# A probe of a route only x86-64 has (int 0x80, x32) answers "unsupported"
# on arm64, saying so.
#
# The sysroot and the apt state live in $OARBANK_KERNEL_CACHE/arm64
# (default /var/cache/oarbank-kernels/arm64); OARBANK_APT_UPDATE=1 forces a
# fresh index (kept a day otherwise).
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$src/build-arm64}"
host_build="${OARBANK_HOST_BUILD:-$src/build}"
cache="${OARBANK_KERNEL_CACHE:-/var/cache/oarbank-kernels}/arm64"
sysroot="$cache/sysroot"
say() { printf 'cross-arm64: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac

# 1. the cross compilers
if ! command -v aarch64-linux-gnu-g++ >/dev/null || [[ ! -f /usr/arm-linux-gnueabihf/lib/libc.a ]]; then
  [[ "$(id -u)" == 0 ]] || die "needs g++-aarch64-linux-gnu and gcc-arm-linux-gnueabihf: run as root to install them"
  apt-get install -y -qq gcc-aarch64-linux-gnu g++-aarch64-linux-gnu gcc-arm-linux-gnueabihf libc6-dev-armhf-cross >/dev/null
fi

# 2. the arm64 sysroot, through a private apt configuration
mkdir -p "$cache/lists/partial" "$cache/archives/partial" "$cache/debs"
mirror="${OARBANK_APT_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)}"
mirror="${mirror:-http://deb.debian.org/debian}"
keyring="${OARBANK_APT_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
# Debian 12's libraries, whatever this system is (a CI runner may be Ubuntu).
suite="$(. /etc/os-release && [[ "${ID:-}" == debian ]] && echo "${VERSION_CODENAME:-bookworm}" || echo bookworm)"
echo "deb [arch=arm64 signed-by=$keyring] $mirror $suite main" >"$cache/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$cache/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$cache/lists" -o "Dir::Cache=$cache" -o APT::Architecture=arm64
  -o APT::Architectures=arm64 -o APT::Sandbox::User=root)
if [[ "${OARBANK_APT_UPDATE:-0}" == 1 ]] || [[ -z "$(find "$cache/lists" -name '*Packages*' -mtime -1 2>/dev/null)" ]]; then
  apt-get "${apt_opts[@]}" update -qq || die "apt-get update (arm64 index) failed"
fi
packages=(libseccomp-dev libseccomp2 nettle-dev libnettle8 libhogweed6 libc-ares-dev libc-ares2)
(cd "$cache/debs" && apt-get "${apt_opts[@]}" download -qq "${packages[@]}") || die "cannot download ${packages[*]} (arm64)"
rm -rf "$sysroot"
mkdir -p "$sysroot/usr/include" "$sysroot/usr/share/cmake"
for p in "${packages[@]}"; do
  deb=$(ls -t "$cache/debs/${p}"_*_arm64.deb | head -1)
  dpkg-deb -x "$deb" "$sysroot"
done
for h in asio asio.hpp nlohmann CLI toml++; do
  [[ -e "/usr/include/$h" ]] || die "/usr/include/$h is missing (scripts/setup.sh installs it)"
  ln -s "/usr/include/$h" "$sysroot/usr/include/$h"
done
for c in nlohmann_json CLI11; do ln -s "/usr/share/cmake/$c" "$sysroot/usr/share/cmake/$c"; done
for a in libseccomp.a libnettle.a libhogweed.a libcares.a; do
  [[ -f "$sysroot/usr/lib/aarch64-linux-gnu/$a" ]] || die "the arm64 packages hold no $a"
done

# 3. the seccomp row sets, compiled by this system's build for every architecture
if [[ ! -f "$host_build/build.ninja" ]]; then
  # No main build: the kernel matrix's static one (no test dependencies).
  host_build="${OARBANK_STATIC_BUILD:-$src/build-static}"
  [[ -f "$host_build/build.ninja" ]] || "$src/scripts/static-configure.sh" "$host_build"
fi
precompiled="$host_build/generated/sandbox/seccomp/precompiled.inc"
ninja -C "$host_build" generated/sandbox/seccomp/precompiled.inc >/dev/null

# 4. the cross build
export PKG_CONFIG_LIBDIR="$sysroot/usr/lib/aarch64-linux-gnu/pkgconfig:$sysroot/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$sysroot"
"$src/scripts/static-configure.sh" "$out" \
  -DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" -DOARBANK_ARM64_SYSROOT="$sysroot" \
  -DOARBANK_SECCOMP_PRECOMPILED="$precompiled"
ninja -C "$out" oarbank-agent oarbank-agent-faulty oarbank-conform probes >/dev/null

# 5. what was built
probes=("$out"/probes/*)
[[ ${#probes[@]} -gt 100 ]] || die "only ${#probes[@]} probes in $out/probes"
for bin in "$out/sandbox/oarbank-agent" "$out/sandbox/oarbank-agent-faulty" "$out/harness/oarbank-conform" "${probes[@]}"; do
  [[ -f "$bin" ]] || continue  # helpers' directories
  kind=$(file -b "$bin")
  [[ "$kind" == *"ARM aarch64"* && "$kind" == *"statically linked"* ]] || die "$bin is not a static aarch64 executable: $kind"
done
kind=$(file -b "$out/probes/helpers/aarch32_getuid" 2>/dev/null || true)
[[ "$kind" == *"32-bit LSB"*"ARM"* && "$kind" == *"statically linked"* ]] ||
  die "$out/probes/helpers/aarch32_getuid is not a static 32-bit ARM executable: ${kind:-missing}"
say "oarbank-agent, oarbank-conform and ${#probes[@]} probes: static aarch64, in $out"
if command -v qemu-aarch64-static >/dev/null; then
  qemu-aarch64-static "$out/sandbox/oarbank-agent" --version | head -1 | sed 's/^/cross-arm64: under qemu-aarch64-static: /' >&2
fi
