#!/usr/bin/env bash
# bench/cpu_profile.sh: where a launch's CPU time goes, by cause, against
# its floor, so what stands between a launcher and its floor is measured
# rather than guessed:
# - `oarbank-agent sandbox-exec` against bench/minilaunch -N, and
# - `oarbank-agent run --unproven` against bench/minilaunch -J,
# each on the strict runner policy (net none, exec_writable false: the
# three writable grants bound noexec, as the floors bind them), launching
# /bin/true.
#
#   bench/cpu_profile.sh [LAUNCHES]   (default 500)
#
# Each command is launched LAUNCHES times, one after another, under `perf
# record -g` sampling CPU time (one sample per 50 us of a CPU), and every
# sample of the launcher's processes (named oarbank-agent or minilaunch:
# the agent, its keeper, the job's init and launcher up to the exec of
# /bin/true) goes in one bucket: page faults, the seccomp program's load, a
# system call by name, user mode (bench/cpu_profile.py says how). It prints
# the CPU time per launch of each bucket for both and the difference, the
# largest first. CPU time is not wall time: on two CPUs part of it runs side
# by side (bench/run.sh and bench/supervise.sh time the launches).
#
# Root (the kernel's call chains). Environment: BUILD_DIR (default
# <repo>/build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent" FLOOR="$BUILD_DIR/bench/minilaunch"
readonly LAUNCHES="${1:-500}"
readonly PERIOD_US=50

die() { echo "bench: $*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "run as root (the kernel's call chains)"
[[ "$LAUNCHES" =~ ^[1-9][0-9]{0,4}$ ]] || die "LAUNCHES must be a number from 1 to 99999, not '$LAUNCHES'"
command -v perf >/dev/null || die "perf is not installed (Debian: apt-get install linux-perf)"
cmake --build "$BUILD_DIR" --target oarbank-agent minilaunch >/dev/null
for built in "$AGENT" "$FLOOR"; do [[ -x "$built" ]] || die "no $built"; done

TMP="$(mktemp -d "${TMPDIR:-/tmp}/oarbank-cpu.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
[[ "$TMP$AGENT$FLOOR" != *[[:space:]\'\"]* ]] || die "paths with spaces or quotes are not supported"
# shellcheck source=bench/strict_job.sh
. "$ROOT/bench/strict_job.sh"
strict_job "$TMP"

# profile NAME COMM COMMAND...: LAUNCHES launches of COMMAND under perf,
# the samples of the processes named COMM left in $TMP/NAME.txt.
profile() {
  local name=$1 comm=$2
  shift 2
  "$@" || die "$name does not launch (exit $?)"
  for _ in $(seq 20); do "$@"; done # warm the caches alike
  perf record -q -g -e cpu-clock -c $((PERIOD_US * 1000)) -o "$TMP/$name.data" -- \
    bash -c 'for _ in $(seq "$1"); do "${@:2}" || exit 1; done' launches "$LAUNCHES" "$@" >/dev/null 2>&1 ||
    die "$name failed under perf"
  perf script -i "$TMP/$name.data" --comm "$comm" -F ip,sym >"$TMP/$name.txt" 2>/dev/null
}

readonly GRANTS=("$TMP/work" "$TMP/data" "$TMP/work/tmp")
profile sandbox-exec oarbank-agent "$AGENT" sandbox-exec "$TMP/policy.json" -- /bin/true
profile floor-N minilaunch "$FLOOR" -N "${GRANTS[0]}" -N "${GRANTS[1]}" -N "${GRANTS[2]}" -- /bin/true
profile run oarbank-agent "$AGENT" run --unproven "$TMP/policy.json" -- /bin/true
profile floor-J minilaunch "$FLOOR" -J "${GRANTS[0]}" -J "${GRANTS[1]}" -J "${GRANTS[2]}" -- /bin/true

period_ms=$(awk -v u="$PERIOD_US" 'BEGIN {print u / 1000}')
echo "== sandbox-exec against its floor (minilaunch -N)"
python3 "$ROOT/bench/cpu_profile.py" "$LAUNCHES" "$period_ms" sandbox-exec "$TMP/sandbox-exec.txt" floor "$TMP/floor-N.txt"
echo "== run --unproven against its floor (minilaunch -J)"
python3 "$ROOT/bench/cpu_profile.py" "$LAUNCHES" "$period_ms" run "$TMP/run.txt" floor "$TMP/floor-J.txt"
