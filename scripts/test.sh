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
t0=$SECONDS
# Each stage's header says when it started, in seconds since this script did.
stage() { echo "== $* ($((SECONDS - t0)) s)"; }
scripts/setup.sh

stage "format (.clang-format)"
scripts/check-format.sh

if [ "$quick" = 1 ]; then
  stage "ctest"
  ctest --test-dir build --output-on-failure -j2
  stage "battery (this host)"
  build/harness/oarbank-conform --out build/quick-battery
  exit 0
fi

# scripts/fuzz-<parser>.sh, two at a time: a fuzzer is one process, so a
# pair keeps both cores busy and each still gets the whole of its seconds.
# They share one instrumented build, which each script takes in turn.
fuzz() {  # PARSER...
  local parser pids=() failed=0
  for parser in "$@"; do
    scripts/fuzz-"$parser".sh "${OARBANK_FUZZ_SECONDS:-60}" >build/fuzz-"$parser".log 2>&1 &
    pids+=($!)
  done
  for parser in "$@"; do
    if wait "${pids[0]}"; then tail -1 build/fuzz-"$parser".log; else tail -40 build/fuzz-"$parser".log; failed=1; fi
    pids=("${pids[@]:1}")
  done
  return "$failed"
}
stage "fuzz (the policy, egress request, broker request and manifest parsers, ${OARBANK_FUZZ_SECONDS:-60} s each)"
fuzz policy egress
fuzz broker manifest

stage "ctest"
ctest --test-dir build --output-on-failure -j2

stage "stub build (-DOARBANK_STUB=ON: the library for systems other than Linux)"
cmake -S . -B build-stub -G Ninja -DOARBANK_STUB=ON >/dev/null
ninja -C build-stub
ctest --test-dir build-stub --output-on-failure

stage "pytest"
/usr/bin/python3 -m pytest -q -rs --durations=15 harness  # -rs: every skipped test says why; the 15 slowest

stage "soaks (bounded: what ran and what was left, 0 expected)"
scripts/soak.sh 50 200 90
AS_NOBODY=1 scripts/soak.sh 20 100 60
scripts/soak-broker.sh 120 16

stage "fault campaign (each part and resource failing at each step: refused or contained, nothing left)"
scripts/faults.sh

stage "mutation analysis (every battery policy, against escapes/mutation.json)"
build/harness/oarbank-conform --out build/mutation --agent build/sandbox/oarbank-agent-faulty \
  mutants --killers escapes/mutation.json

stage "benchmark budgets (ratios against baselines of the same run, 1.5x slack)"
bench/budgets.sh

stage "package test"
./scripts/package-test.sh

stage "kernel matrix"
./scripts/kernel-matrix.sh
stage "done"
