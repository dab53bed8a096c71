#!/usr/bin/env bash
# Installs the Debian packages the project builds and tests with (Debian 12),
# then configures and builds into build/. Safe to run again: apt is skipped
# when everything is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build g++ pkg-config clang libclang-rt-14-dev clang-format
  libseccomp-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev librapidcheck-dev python3-pytest
  hyperfine bubblewrap util-linux jq libxml2-utils chromium
  libasio-dev iproute2
  podman runc uidmap busybox-static
  libtomlplusplus-dev strace musl-tools lld nettle-dev
  libc-ares-dev tinyproxy squid
  scdoc man-db git bc
  build-essential debhelper dpkg-dev lintian fakeroot  # scripts/package-test.sh
  libnftables-dev libmnl-dev slirp4netns nftables
  passt  # bench/stacks.sh: pasta against slirp4netns
  autoconf automake nodejs sqlite3 zstd python3-venv tmux  # harness/test_agent_workloads.py
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  # tinyproxy and squid are for bench/egress.sh alone, which starts them on
  # loopback itself: their packages must not start the system services.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT  # ours: gone however the install ends
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for service in tinyproxy squid; do  # just installed and started anyway: stop it
    case " ${missing[*]} " in *" $service "*)
      if [ -x "/etc/init.d/$service" ]; then "/etc/init.d/$service" stop >/dev/null 2>&1 || true; fi ;;
    esac
  done
fi
# npm: Debian's own package where nodejs is Debian's; a nodejs that ships
# its own npm (NodeSource's) must not be replaced, so only when none is found.
if ! command -v npm >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "setup: npm is missing; run as root to install it" >&2; exit 1; }
  echo "setup: installing npm"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build
