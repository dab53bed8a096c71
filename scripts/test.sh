#!/usr/bin/env bash
# Every test: installs and builds (scripts/setup.sh), the C++ sources against
# the house style (scripts/check-format.sh), a bounded fuzz run of
# each parser (policy, egress request, broker request, manifest), the GoogleTest and rapidcheck suites under CTest
# (confinement tests run the confined side as root and as uid 65534), the
# stub library for other systems (built and tested on its own), and the
# pytest suites (the CLI end to end, the escape battery with its
# reports, every JSON document against its page in docs/json/), bounded
# soaks of the supervisor (as root and as uid 65534) and of the broker that
# print what was left and fail unless it is nothing, the fault campaign
# (scripts/faults.sh: each part and resource failing at each step), the
# mutation analysis against its checked-in report (each enforcement point
# of runner_strict removed alone, its earlier killers first: a point the
# battery no longer notices fails; escapes/mutation.json), the Debian
# package (scripts/package-test.sh: built, installed, used from the installed
# paths only, purged; it leaves nothing installed, whatever its end), then the
# kernel matrix: the battery inside nine Debian kernels booted in QEMU and
# at every capped Landlock ABI of this host. Needs root (packages, uid
# switching).
#
# --quick: the inner loop (CONTRIBUTING.md): build, format, the GoogleTest
# and rapidcheck suites and the battery on this host; no fuzzers, pytest,
# package or kernel matrix.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 64 ;;
esac
scripts/setup.sh

echo "== format (.clang-format)"
scripts/check-format.sh

if [ "$quick" = 1 ]; then
  echo "== ctest"
  ctest --test-dir build --output-on-failure -j2
  echo "== battery (this host)"
  build/harness/oarbank-conform --out build/quick-battery
  exit 0
fi

for parser in policy egress broker manifest; do  # scripts/fuzz-<parser>.sh
  echo "== fuzz ($parser parser, ${OARBANK_FUZZ_SECONDS:-60} s)"
  scripts/fuzz-$parser.sh "${OARBANK_FUZZ_SECONDS:-60}" > build/fuzz-$parser.log 2>&1 || { tail -40 build/fuzz-$parser.log; exit 1; }
  tail -1 build/fuzz-$parser.log
done

echo "== ctest"
ctest --test-dir build --output-on-failure -j2

echo "== stub build (-DOARBANK_STUB=ON: the library for systems other than Linux)"
cmake -S . -B build-stub -G Ninja -DOARBANK_STUB=ON >/dev/null
ninja -C build-stub
ctest --test-dir build-stub --output-on-failure

echo "== pytest"
/usr/bin/python3 -m pytest -q -rs harness  # -rs: every skipped test says why

echo "== soaks (bounded: what ran and what was left, 0 expected)"
scripts/soak.sh 50 200 90
AS_NOBODY=1 scripts/soak.sh 20 100 60
scripts/soak-broker.sh 120 16

echo "== fault campaign (each part and resource failing at each step: refused or contained, nothing left)"
scripts/faults.sh

echo "== mutation analysis (every battery policy, against escapes/mutation.json)"
build/harness/oarbank-conform --out build/mutation --agent build/sandbox/oarbank-agent-faulty \
  mutants --killers escapes/mutation.json

echo "== benchmark budgets (ratios against baselines of the same run, 1.5x slack)"
bench/budgets.sh

echo "== package test"
./scripts/package-test.sh

echo "== kernel matrix"
./scripts/kernel-matrix.sh
