#!/usr/bin/env bash
# scripts/launch-order.sh: rewrites sandbox/cli/launch-order.txt, the functions a
# launch (`oarbank-agent sandbox-exec`) runs, in the order it first runs
# them. The build hands the list to lld (--symbol-ordering-file), which lays
# those functions out first and together: a launch then faults in a few dozen
# contiguous pages of code instead of pages scattered over three megabytes
# (about a tenth of a launch here; bench/run.sh measures it).
#
# Run it after a change to the launch path (policy, probe, plan, enforce,
# the CLI). A stale list costs launch time only: the layout never changes
# what the code does, and a name no longer in the binary is skipped.
#
# Method: scripts/steptrace.c single-steps the launcher from its exec to the
# exec of the module, as root and as uid 65534, with exec_writable false and
# true; each instruction address is mapped to its function with nm.
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent"
readonly OUT="$ROOT/sandbox/cli/launch-order.txt"
readonly NOBODY_ID=65534

die() { echo "launch-order: $*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "run it as root (it traces a launch as root and as uid $NOBODY_ID)"
for tool in cc nm python3 setpriv; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
cmake --build "$BUILD_DIR" --target oarbank-agent >/dev/null
[[ -x "$AGENT" ]] || die "no $AGENT"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/oarbank-order.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
chmod 755 "$TMP"
cc -O2 -Wall -o "$TMP/steptrace" "$ROOT/scripts/steptrace.c"
mkdir -p "$TMP"/{bundle,work/tmp,data}
for exec_writable in false true; do
  cat >"$TMP/policy-$exec_writable.json" <<JSON
{"contract": 1, "role": "runner", "bundle": "$TMP/bundle", "work": "$TMP/work", "data": "$TMP/data",
 "tmp": "$TMP/work/tmp", "net": {"mode": "none"}, "exec_writable": $exec_writable}
JSON
done
chown -R "$NOBODY_ID:$NOBODY_ID" "$TMP"

traces=()
for as in root nobody; do
  run=()
  [[ "$as" == nobody ]] && run=(setpriv --reuid="$NOBODY_ID" --regid="$NOBODY_ID" --clear-groups)
  for exec_writable in false true; do
    trace="$TMP/trace-$as-$exec_writable.txt"
    echo "== tracing a launch as $as, exec_writable $exec_writable"
    (cd "$TMP" && "${run[@]}" "$TMP/steptrace" "$trace" -- "$AGENT" sandbox-exec "$TMP/policy-$exec_writable.json" -- /bin/true)
    traces+=("$trace")
  done
done

nm -n -S --defined-only "$AGENT" >"$TMP/symbols.txt"
python3 - "$TMP/symbols.txt" "$OUT" "${traces[@]}" <<'PY'
import bisect, sys
symbols_file, out, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
functions = []  # (start, size, name) of every function symbol
for line in open(symbols_file):
    f = line.split()
    if len(f) == 4 and f[2] in "tTwWiI":
        functions.append((int(f[0], 16), int(f[1], 16), f[3]))
functions.sort()
starts = [f[0] for f in functions]
order, seen, unmapped = [], set(), 0
for trace in traces:
    for line in open(trace):
        ip = int(line, 16)
        i = bisect.bisect_right(starts, ip) - 1
        if i < 0 or ip >= functions[i][0] + max(functions[i][1], 1):
            unmapped += 1
            continue
        name = functions[i][2]
        if name not in seen:
            seen.add(name)
            order.append(name)
if len(order) < 100:
    sys.exit(f"launch-order: only {len(order)} functions traced; is this the launcher?")
with open(out, "w") as f:
    f.write("\n".join(order) + "\n")
size = sum(s for (_, s, n) in functions if n in seen)
print(f"launch-order: {len(order)} functions ({size // 1024} KiB) written to {out}; {unmapped} addresses in no function")
PY
