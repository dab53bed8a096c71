#!/usr/bin/env bash
# Every test: installs and builds (scripts/setup.sh), then the GoogleTest and
# rapidcheck suites under CTest (confinement tests run the confined side as
# root and as uid 65534), the end-to-end pytest suite, and a bounded fuzz run
# of the policy parser. Needs root (packages, uid switching).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== ctest"
ctest --test-dir build --output-on-failure -j2

echo "== pytest"
/usr/bin/python3 -m pytest -q harness

echo "== fuzz (policy parser, ${OARBANK_FUZZ_SECONDS:-60} s)"
scripts/fuzz-policy.sh "${OARBANK_FUZZ_SECONDS:-60}"
