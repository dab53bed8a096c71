#!/usr/bin/env bash
# egress-any benchmark: what the job's network (slirp4netns and the nftables
# ruleset, sandbox/supervise/job_network.h) costs against direct, in one run: the
# throughput of one large TCP transfer (best of three) and the median time
# to a server's first byte over a fresh connection, from the supervisor's
# own network namespace (direct) and from inside an egress-any job (through
# the stack), to the same server (harness/egress_upstream.py).
#
#   bench/egress_any.sh [--bytes N] [--samples N] [--starts N]
#
# Needs root: it builds two network namespaces joined by a veth pair, with
# addresses in 198.18.0.0/15 only (198.19.250.2 is declared public to the
# job with run's test-only --egress-test-public-range), and removes them.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/egress_any.sh: needs root (network namespaces)" >&2; exit 64; fi
bytes=$((256 << 20))
samples=200
starts=21
while [ $# -gt 0 ]; do
  case "$1" in
    --bytes) bytes="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --starts) starts="$2"; shift 2 ;;
    *) echo "bench/egress_any.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
build="${OARBANK_BUILD:-build}"
ninja -C "$build" oarbank-agent oarbank-netfilter >/dev/null
agent="$(realpath "$build/sandbox/oarbank-agent")"
up="oeab-up-$$" pub="oeab-pub-$$" work="$(mktemp -d /tmp/oeab-XXXXXX)"
. bench/upstream_world.sh
cleanup() {
  upstream_world_remove "$up" "$pub"
  rm -rf "$work"
}
trap cleanup EXIT
upstream_world_make "$up" "$pub" 250 "$work"
chmod 755 "$work"
cp bench/egress_any_client.py "$work/client.py"
printf '{"contract": 1, "role": "runner", "bundle": "%s", "net": {"mode": "egress-any"}}\n' "$work" >"$work/policy.json"
client=(/usr/bin/python3 "$work/client.py" 198.19.250.2 5001 5002 "$bytes" "$samples")
direct="$(ip netns exec "$up" "${client[@]}")"
job="$(ip netns exec "$up" "$agent" run --json --unproven --egress-test-public-range 198.19.250.0/24 \
  "$work/policy.json" -- "${client[@]}")"
# The start-up cost: /bin/true as an egress-any job against a net-none job,
# in turns (one of each per round, so drift falls on both alike), the
# median of each over --starts rounds.
printf '{"contract": 1, "role": "runner", "bundle": "%s", "net": {"mode": "none"}}\n' "$work" >"$work/none.json"
for _ in $(seq "$starts"); do
  for policy in policy none; do
    printf '%s ' "$policy"
    ip netns exec "$up" "$agent" run --json --unproven --egress-test-public-range 198.19.250.0/24 \
      "$work/$policy.json" -- /bin/true | tr -d '\n'
    echo
  done
done >"$work/starts"
read -r start_any start_none < <(python3 - "$work/starts" <<'PY'
import json, statistics, sys
seconds = {"policy": [], "none": []}
for line in open(sys.argv[1]):
    which, _, text = line.partition(" ")
    obj = json.loads(text)
    assert obj["exit_code"] == 0, obj
    seconds[which].append(obj["seconds"])
print(*(round(1000 * statistics.median(seconds[w]), 1) for w in ("policy", "none")))
PY
)
python3 - "$direct" "$job" "$start_any" "$start_none" "$starts" <<'PY'
import json, sys
direct = json.loads(sys.argv[1])
result = json.loads(sys.argv[2])
assert result["exit_code"] == 0, result
job = json.loads(result["stdout"])
any_ms, none_ms, starts = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
throughput = job["mib_per_s"] / direct["mib_per_s"]
start = any_ms / none_ms
print(f"throughput, one TCP transfer (best of 3): direct {direct['mib_per_s']} MiB/s, "
      f"egress-any {job['mib_per_s']} MiB/s: {throughput:.2f}x direct")
print(f"first byte over a fresh connection (median of {job['samples']}): direct {direct['connect_ms_median']} ms, "
      f"egress-any {job['connect_ms_median']} ms: +{job['connect_ms_median'] - direct['connect_ms_median']:.3f} ms")
print(f"a job of /bin/true (the job's seconds in run's report, median of {starts} in turns): egress-any {any_ms} ms, "
      f"net none {none_ms} ms: +{any_ms - none_ms:.1f} ms for the stack and the ruleset, {start:.1f}x net none")
print(f"ratio egress_any_start {start:.2f}")
for ok, what in ((throughput >= 0.5, f"throughput {throughput:.2f}x direct (target >= 0.5x)"),
                 (start <= 3, f"a job's start {start:.1f}x net none (target <= 3x)")):
    print(f"{'PASS' if ok else 'MISS'}  {what}")
PY
