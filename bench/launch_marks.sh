#!/usr/bin/env bash
# bench/launch_marks.sh: clock marks inside a launch of `oarbank-agent run`
# and `oarbank-agent sandbox-exec` on /bin/true: where the agent's start-up,
# its host probe and plan, the keeper, init, the launcher, the gate and the
# teardown each begin; then `run` of the same job under egress-any, where
# the job's network's steps (tap0, the stack, the helper's install, the
# gate's read-back, the drop counter) and the two programs' execs are
# marked too (left out, saying so, where slirp4netns is not installed).
#
#   bench/launch_marks.sh
#
# A uprobe on the entry of each function bench/launch_marks.py lists (one
# table: MARKS), plus the kernel's exec and exit events, recorded with
# `perf record` (the launches' processes only) over RUNS launches one after
# another; each mark is printed as the median time since the agent's exec,
# with the step from the mark before it. bench/launch_profile.sh gives the same launches by
# process and page faults; this one looks inside the processes. Each
# uprobe hit costs a few microseconds of its own (a trap), so a step here
# is a little longer than the same step untraced.
#
# Root (uprobes and perf's tracepoints); the agent must keep its symbol
# table (the build's does). Environment: BUILD_DIR (default <repo>/build),
# RUNS (default 200).
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent"
readonly RUNS="${RUNS:-200}"
readonly GROUP="oarbank_marks_$$"

die() { echo "bench: $*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "run as root (uprobes and perf's tracepoints)"
for tool in perf python3 readelf nm; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
[[ -x "$AGENT" ]] || die "no $AGENT (build first: cmake -S . -B build -G Ninja && ninja -C build)"
TRACEFS=/sys/kernel/tracing
[[ -w "$TRACEFS/uprobe_events" ]] || TRACEFS=/sys/kernel/debug/tracing
[[ -w "$TRACEFS/uprobe_events" ]] || die "no writable uprobe_events under /sys/kernel/tracing or /sys/kernel/debug/tracing"

TMP=$(mktemp -d /tmp/oarbank-bench-XXXXXX)
chmod 755 "$TMP"
remove_probes() {  # each of this run's uprobes, by name
  [[ -f "$TMP/probes.txt" ]] || return 0
  local event
  while read -r event _; do echo "-:${event#p:}" >>"$TRACEFS/uprobe_events" 2>/dev/null || true; done <"$TMP/probes.txt"
}
trap 'remove_probes; rm -rf "$TMP"' EXIT
# shellcheck source=bench/strict_job.sh
. "$ROOT/bench/strict_job.sh"
strict_job "$TMP"

python3 "$ROOT/bench/launch_marks.py" probes "$(readlink -f "$AGENT")" "$GROUP" >"$TMP/probes.txt" ||
  die "cannot read the agent's symbols"
[[ -s "$TMP/probes.txt" ]] || die "none of the marked functions is in $AGENT (a stripped binary?)"
while read -r line; do
  echo "$line" >>"$TRACEFS/uprobe_events" || die "the kernel refused the uprobe: $line"
done <"$TMP/probes.txt"

marks() {  # NAME ARGV...
  local name=$1
  shift
  "$@" >/dev/null || die "$name: $* failed (exit $?)"
  perf record -q -e "$GROUP:*" -e sched:sched_process_exec,sched:sched_process_exit \
    -o "$TMP/$name.data" -- bash -c 'for ((i = 0; i < '"$RUNS"'; i++)); do "$@" >/dev/null || exit 1; done' \
    marks "$@" 2>"$TMP/$name.err" || { cat "$TMP/$name.err"; die "$name: perf record failed"; }
  perf script -F comm,pid,time,event -i "$TMP/$name.data" >"$TMP/$name.txt" 2>/dev/null
  echo
  echo "== $name: $*"
  python3 "$ROOT/bench/launch_marks.py" report "$TMP/$name.txt"
}

echo "bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), as uid $(id -u), $RUNS launches each"
marks run "$AGENT" run --unproven "$TMP/policy.json" -- /bin/true
marks sandbox-exec "$AGENT" sandbox-exec "$TMP/policy.json" -- /bin/true
if [[ -x /usr/bin/slirp4netns ]]; then
  sed 's/"mode": "none"/"mode": "egress-any"/' "$TMP/policy.json" >"$TMP/egress-any.json"
  marks run-egress-any "$AGENT" run --unproven "$TMP/egress-any.json" -- /bin/true
else
  echo
  echo "== run-egress-any: left out (no /usr/bin/slirp4netns)"
fi
