#!/usr/bin/env bash
# Configures a build directory for the kernel matrix's guests: static
# binaries, the test-only agent, no tests.
#
#   scripts/static-configure.sh BUILD_DIR [CMAKE_ARG...]
#
# Optimized as the main build is (-O2), without debug information: these
# binaries run only inside the guests, where nothing reads it, and writing
# it is about a third of their compile time. Run again on a configured
# directory, it rebuilds nothing unless these flags changed.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 1 ]] || { echo "usage: $0 BUILD_DIR [CMAKE_ARG...]" >&2; exit 64; }
build="$1"
shift
exec cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DOARBANK_STATIC=ON -DOARBANK_TESTS=OFF -DOARBANK_TEST_HOOKS=ON "$@" >/dev/null
