#!/usr/bin/env bash
# Every test: installs and builds (scripts/setup.sh), a bounded fuzz run of
# the policy parser, the GoogleTest and rapidcheck suites under CTest
# (confinement tests run the confined side as root and as uid 65534), and the
# pytest suites (the CLI end to end, and the escape battery with its
# reports), then the kernel matrix: the battery inside eight Debian kernels
# booted in QEMU and at every capped Landlock ABI of this host. Needs root
# (packages, uid switching).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== fuzz (policy parser, ${OARBANK_FUZZ_SECONDS:-60} s)"
scripts/fuzz-policy.sh "${OARBANK_FUZZ_SECONDS:-60}" > build/fuzz-policy.log 2>&1 || { tail -40 build/fuzz-policy.log; exit 1; }
tail -1 build/fuzz-policy.log
echo "== fuzz (egress request parser, ${OARBANK_FUZZ_SECONDS:-60} s)"
scripts/fuzz-egress.sh "${OARBANK_FUZZ_SECONDS:-60}" > build/fuzz-egress.log 2>&1 || { tail -40 build/fuzz-egress.log; exit 1; }
tail -1 build/fuzz-egress.log
echo "== fuzz (broker request parser, ${OARBANK_FUZZ_SECONDS:-60} s)"
scripts/fuzz-broker.sh "${OARBANK_FUZZ_SECONDS:-60}" > build/fuzz-broker.log 2>&1 || { tail -40 build/fuzz-broker.log; exit 1; }
tail -1 build/fuzz-broker.log
echo "== fuzz (manifest parser, ${OARBANK_FUZZ_SECONDS:-60} s)"
scripts/fuzz-manifest.sh "${OARBANK_FUZZ_SECONDS:-60}" > build/fuzz-manifest.log 2>&1 || { tail -40 build/fuzz-manifest.log; exit 1; }
tail -1 build/fuzz-manifest.log

echo "== ctest"
ctest --test-dir build --output-on-failure -j2

echo "== pytest"
/usr/bin/python3 -m pytest -q harness

echo "== kernel matrix"
./scripts/kernel-matrix.sh
