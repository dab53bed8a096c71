#!/usr/bin/env bash
# bench/battery.sh: the battery's time against its floor, measured in the
# same run.
#
#   bench/battery.sh [--strict] [--quick]
#
# The floor is what the battery cannot do without: every cell is a job of
# its own (the isolation between cells is what the battery proves), so each
# cell costs at least one launch of /bin/true through the same entry point
# under the same policy: `oarbank-agent sandbox-exec POLICY -- /bin/true`
# for a bare-launcher cell, `oarbank-agent run POLICY -- /bin/true` for a
# supervised one (under egress-any that includes starting the job's own
# network stack and reading its ruleset back), and bare /bin/true for each
# probe's unconfined run. The floor is the sum over the battery's cells
# (counted from its own battery.json) of that cost, divided by the probes it
# runs at once (its --jobs, the number of CPUs).
#
# 1. The whole battery (`oarbank-conform`), RUNS_BATTERY times; the median.
# 2. hyperfine, every launch in one invocation: bare /bin/true, and each
#    battery policy (the same fixtures, in a world of the same shape) under
#    each entry point the battery uses for it.
# 3. The same launches run as the battery runs its cells, $(nproc) at once
#    (bench/replay_launches.py: one launch of /bin/true per cell of the last
#    battery run, in its order): the floor measured spread over the CPUs,
#    which on a small machine costs more than the sum above divided by the
#    CPUs (two launches at once share the kernel's work), twice; the
#    faster.
# 4. The ratio battery / measured floor, target <= 1.3: PASS or MISS, with
#    the ratio to the sum / CPUs beside it. The slowest cells of the last
#    battery run are listed (a cell that waits on a timer stands out
#    there).
#
# --quick: fewer runs (CI's budget check, bench/budgets.sh). A MISS fails
# the script only with --strict. Runs as root (the battery needs it).
# Environment: BUILD_DIR (default <repo>/build), RUNS (default 30, launches
# per command), RUNS_BATTERY (default 3), KEEP_TMP=1. Prints a last line
# `ratio battery_floor R` for bench/budgets.sh.
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent" CONFORM="$BUILD_DIR/harness/oarbank-conform"
readonly TARGET=1.3 PUBLIC_RANGE=198.18.0.0/15

STRICT=0 QUICK=0
for arg in "$@"; do
  case "$arg" in
    --strict) STRICT=1 ;;
    --quick) QUICK=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--strict] [--quick]" >&2; exit 64 ;;
  esac
done
RUNS="${RUNS:-$([[ $QUICK == 1 ]] && echo 10 || echo 30)}"
RUNS_BATTERY="${RUNS_BATTERY:-$([[ $QUICK == 1 ]] && echo 1 || echo 3)}"

die() { echo "bench: $*" >&2; exit 1; }
for tool in hyperfine jq python3; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
[[ "$(id -u)" == 0 ]] || die "the battery needs root"
[[ -x "$AGENT" && -x "$CONFORM" ]] || die "build first: cmake -S . -B build -G Ninja && ninja -C build"

TMP=$(mktemp -d /tmp/oarbank-bench-XXXXXX)
chmod 755 "$TMP"
BROKER_PID=""
cleanup() {
  [[ -n "$BROKER_PID" ]] && kill "$BROKER_PID" 2>/dev/null
  [[ "${KEEP_TMP:-0}" == 1 ]] || rm -rf "$TMP"
}
trap cleanup EXIT

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. The battery.
times=()
for ((i = 0; i < RUNS_BATTERY; i++)); do
  start=$(date +%s.%N)
  "$CONFORM" --out "$TMP/battery" >"$TMP/conform.txt" 2>&1 || { tail -5 "$TMP/conform.txt"; die "the battery failed"; }
  times+=("$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')")
done
battery=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
jobs=$(nproc)

# 2. The floor: the battery's policies in a world of the same shape.
W="$TMP/world"
mkdir -p "$W"/{bundle,runtime,work/tmp,work/agent/state,work/carved,data/tmp,data/carved}
chmod 777 "$W"/{work,work/tmp,work/agent/state,data,data/tmp}
python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); os.chmod(sys.argv[1], 0o666)
while True:
    s.accept()[0].close()' "$W/broker.sock" &
BROKER_PID=$!
for _ in $(seq 50); do [[ -S "$W/broker.sock" ]] && break; sleep 0.02; done
commands=(-n bare /bin/true)
while read -r policy entry; do
  sed "s#@ROOT@#$W#g; s#@PROXY_PORT@#3128#g" "$ROOT/fixtures/policies/battery/$policy.json" >"$W/$policy.json"
  extra=""
  [[ "$entry" == run ]] && extra="--unproven"
  [[ "$policy" == runner_egress_any ]] && extra="$extra --egress-test-public-range $PUBLIC_RANGE"
  commands+=(-n "$policy $entry" "$AGENT $entry $extra $W/$policy.json -- /bin/true")
done < <(jq -r '[.confined[] | [.policy, (if .entry == "sandbox-exec" then "sandbox-exec" else "run" end)]
                 | join(" ")] | unique[]' "$TMP/battery/battery.json")
hyperfine -N --style none --warmup 3 --runs "$RUNS" --export-json "$TMP/floor.json" "${commands[@]}" >/dev/null

# 3. The floor measured: the cells' launches, $jobs at once.
printf '%s\n' "${commands[@]}" >"$TMP/commands.txt"
replayed=()
for _ in 1 2; do
  replayed+=("$(python3 "$ROOT/bench/replay_launches.py" "$TMP/battery/battery.json" "$TMP/commands.txt" "$jobs")")
done
replay=$(printf '%s\n' "${replayed[@]}" | sort -n | head -1)

# 4. The ratio, from the cells of the last battery run.
rc=0
python3 - "$TMP/battery/battery.json" "$TMP/floor.json" "$battery" "$jobs" "$TARGET" "$replay" <<'PY' || rc=$?
import collections, json, statistics, sys
battery, floor, seconds, jobs, target = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), \
    float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
replay = float(sys.argv[6])
median = {r["command"]: statistics.median(r["times"]) for r in floor["results"]}
cells = collections.Counter()
for c in battery["confined"]:
    cells[f'{c["policy"]} {"sandbox-exec" if c["entry"] == "sandbox-exec" else "run"}'] += 1
cells["bare"] = len(battery["unconfined"])
total = sum(n * median[k] for k, n in cells.items())
floor_s = total / jobs
print(f"battery: {seconds:.1f} s (median of the runs), {sum(cells.values())} cells, {jobs} at once")
print(f"floor: {floor_s:.1f} s = the cells' launches of /bin/true ({total:.1f} s) / {jobs}; "
      f"measured {jobs} at once: {replay:.1f} s")
for k, n in sorted(cells.items(), key=lambda kv: -kv[1] * median[kv[0]]):
    print(f"  {k:34} {n:5} cells x {median[k] * 1000:7.2f} ms = {n * median[k]:6.2f} s")
slow = sorted(battery["confined"], key=lambda c: -c.get("ms", 0))[:5]
print("slowest cells: " + ", ".join(f'{c["probe"]} [{c["policy"]} {c["entry"]}] {c["ms"]:.0f} ms' for c in slow))
ratio = seconds / replay
print(f"battery / floor: {ratio:.2f}x (target <= {target}): {'PASS' if ratio <= target else 'MISS'}; "
      f"{seconds / floor_s:.2f}x the launches' sum / {jobs}")
print(f"ratio battery_floor {ratio:.3f}")
sys.exit(0 if ratio <= target else 3)
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ $rc == 3 && $STRICT == 0 ]] && exit 0
exit $rc
