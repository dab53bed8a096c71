#!/usr/bin/env bash
# bench/launch_profile.sh: where a launch's time goes, stage by stage, for
# `oarbank-agent run`, `oarbank-agent sandbox-exec`, bubblewrap and the
# floor of a supervised job (bench/minilaunch -J) on the same job.
#
#   bench/launch_profile.sh
#
# Each command launches /bin/true RUNS times, one after another, under
# `perf record` of the kernel's process events (fork, exec, exit of every
# process, and each page fault it takes in user mode);
# bench/launch_timeline.py names each process by its line of descent and
# prints the median time between consecutive events and the median count of
# faults per process. For `run`:
# top.1 is the short-lived holder of root's idmapped /etc (as root), top.2
# the keeper, top.2.1 the job's init (its fork includes the clone of the
# job's namespaces), top.2.1.1 the launcher, whose exec is the module's (the
# time before it is the launcher's confinement and the gate's round trip).
# For the floor: top.1 is its init (the clone of the same namespaces),
# top.1.1 the command, confined before its exec.
# `run` runs --unproven (the proof gate's read of the attestation costs
# about 0.1 ms; bench/supervise.sh times it). The figures are the kernel's
# clock between events, not hyperfine's: they exclude the parent's fork and
# wait, and perf's own tracing adds a little to every event.
#
# Root (perf's tracepoints). Environment: BUILD_DIR (default <repo>/build),
# RUNS (default 200).
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent" FLOOR="$BUILD_DIR/bench/minilaunch"
readonly RUNS="${RUNS:-200}"

die() { echo "bench: $*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "run as root (perf's tracepoints)"
command -v perf >/dev/null || die "perf is not installed (Debian: apt-get install linux-perf)"
for tool in bwrap python3; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
for built in "$AGENT" "$FLOOR"; do
  [[ -x "$built" ]] || die "no $built (build first: cmake -S . -B build -G Ninja && ninja -C build)"
done
BWRAP="$(command -v bwrap)"

TMP=$(mktemp -d /tmp/oarbank-bench-XXXXXX)
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=bench/strict_job.sh
. "$ROOT/bench/strict_job.sh"
strict_job "$TMP"

profile() {  # NAME PROGRAM ARGV...
  local name=$1 program=$2
  shift 2
  "$@" >/dev/null || die "$name: $* failed (exit $?)"
  perf record -q -e sched:sched_process_fork,sched:sched_process_exec,sched:sched_process_exit \
    -e exceptions:page_fault_user -a \
    -o "$TMP/$name.data" -- bash -c 'for ((i = 0; i < '"$RUNS"'; i++)); do "$@" >/dev/null || exit 1; done' \
    profile "$@" 2>"$TMP/$name.err" || { cat "$TMP/$name.err"; die "$name: perf record failed"; }
  perf script -i "$TMP/$name.data" >"$TMP/$name.txt" 2>/dev/null
  echo
  echo "== $name: $*"
  python3 "$ROOT/bench/launch_timeline.py" "$TMP/$name.txt" "$program"
}

echo "bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $RUNS launches each"
profile run "$AGENT" "$AGENT" run --unproven "$TMP/policy.json" -- /bin/true
profile sandbox-exec "$AGENT" "$AGENT" sandbox-exec "$TMP/policy.json" -- /bin/true
profile bwrap "$BWRAP" "$BWRAP" --ro-bind / / --unshare-all --die-with-parent /bin/true
profile floor "$FLOOR" "$FLOOR" -J "$TMP/work" -J "$TMP/data" -J "$TMP/work/tmp" -- /bin/true
