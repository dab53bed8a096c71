#!/usr/bin/env bash
# bench/run_policy_stages.sh: where a job's time goes when a running agent
# starts it with cage::RunPolicy, stage by stage, next to bubblewrap's same
# job measured in the same rounds.
#
#   bench/run_policy_stages.sh [ROUNDS]            (default 200)
#   AS_NOBODY=1 bench/run_policy_stages.sh [ROUNDS]  the driver as uid/gid 65534
#
# bench/run_policy_driver runs ROUNDS interleaved triples, as in
# bench/supervise.sh (RunPolicy of /bin/true on the strict runner, with the
# gate's attestation check; fork+exec+wait of /bin/true; of `bwrap --ro-bind
# / / --unshare-all --die-with-parent /bin/true`), and writes when each
# began and ended. Meanwhile `perf record` keeps the kernel's fork, exec and
# exit events of its processes, on the same clock; bench/run_policy_stages.py
# finds each job's keeper, init, launcher and module by who forked whom, and
# prints the median of each stage between two of those events. Tracepoints,
# not uprobes: nothing stops inside the processes. The recording still
# makes each fork dearer (perf follows every child), so the times here run
# above bench/supervise.sh's untraced ones, bwrap's as much as RunPolicy's;
# compare the stages with each other and with bwrap's, in this run only.
#
# Root (perf's tracepoints). Environment: BUILD_DIR (default <repo>/build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly DRIVER="$BUILD_DIR/bench/run_policy_driver"
readonly ROUNDS="${1:-200}"

die() { echo "bench: $*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "run as root (perf's tracepoints)"
[[ "$ROUNDS" =~ ^[1-9][0-9]{0,3}$ ]] || die "ROUNDS must be a number from 1 to 9999, not '$ROUNDS'"
for tool in perf bwrap python3; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
cmake --build "$BUILD_DIR" --target run_policy_driver >/dev/null
[[ -x "$DRIVER" ]] || die "no $DRIVER"
RUN_AS=()
if [[ "${AS_NOBODY:-0}" == 1 ]]; then
  command -v setpriv >/dev/null || die "setpriv is not installed (util-linux)"
  RUN_AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/oarbank-stages.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
chmod 755 "$TMP"
# shellcheck source=bench/strict_job.sh
. "$ROOT/bench/strict_job.sh"
strict_job "$TMP"
mkdir -m 777 "$TMP/out"

"$DRIVER" --attest "$TMP/policy.json" "$TMP/attestation.json" || die "the driver cannot attest itself"
export OARBANK_INPROC_ATTESTATION="$TMP/attestation.json" OARBANK_DRIVER_MARKS="$TMP/out/marks.txt"
readonly BWRAP=(bwrap --ro-bind / / --unshare-all --die-with-parent /bin/true)
echo "bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), as uid $([[ ${#RUN_AS[@]} -gt 0 ]] && echo 65534 || id -u), $ROUNDS rounds"
perf record -q -k CLOCK_MONOTONIC -e sched:sched_process_fork,sched:sched_process_exec,sched:sched_process_exit \
  -o "$TMP/stages.data" -- "${RUN_AS[@]}" "$DRIVER" "$TMP/policy.json" "$ROUNDS" "${BWRAP[@]}" \
  >"$TMP/driver.txt" 2>"$TMP/perf.txt" || { cat "$TMP/perf.txt"; die "the driver failed under perf"; }
perf script --ns -i "$TMP/stages.data" >"$TMP/stages.txt" 2>/dev/null
read -r run bare bwrap _ <"$TMP/driver.txt"
echo "bench: traced medians: RunPolicy $run ms, bare /bin/true $bare ms, bwrap $bwrap ms"
echo
python3 "$ROOT/bench/run_policy_stages.py" "$TMP/out/marks.txt" "$TMP/stages.txt"
