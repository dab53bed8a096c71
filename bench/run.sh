#!/usr/bin/env bash
# bench/run.sh: launch cost and hot-syscall cost of the cage, in one run.
#
#   bench/run.sh [--strict]              as the calling user (root is fine)
#   AS_NOBODY=1 bench/run.sh [--strict]  the measurements run as uid/gid 65534
#
# 1. Launch time (hyperfine, every command in one invocation, so they share
#    the machine's state): bare /bin/true; `oarbank-agent sandbox-exec` on
#    /bin/true with exec_writable true and false (both in a user+mount
#    namespace with every mount read-only but the writable grants, which are
#    noexec binds when false); `bwrap --unshare-all --ro-bind / / /bin/true`;
#    and bench/minilaunch, the floor (no_new_privs + Landlock + a 40-rule
#    seccomp filter + exec, nothing else, static like the launcher).
#    Targets on the medians: sandbox-exec <= 2.3x bare (a target set for a
#    launch without namespaces, which every launch now has) and <= 3.5x
#    bare with the user+mount namespace, both < 0.4x bwrap, and
#    exec_writable false within 0.3 ms of the floor: bench/minilaunch -N,
#    what one extra exec, the namespaces and read-only mounts sandbox-exec
#    needs (the policy's three writable grants, each bound noexec) and the
#    least confinement cost here.
# 1b. The same bare, sandbox-exec (exec_writable false), floor and bwrap
#    launches in turns (bench/interleave, RUNS rounds of one launch each):
#    the < 0.4x bwrap and 0.3 ms targets again, on its medians.
# 2. Hot-syscall cost of the seccomp filter (bench/syscall_cost.cc):
#    getppid() and read(/dev/zero, 1) under the planner's rows for a strict
#    runner policy; target filtered/unfiltered <= 1.4x.
#
# A MISS is reported but does not fail the script (timing on a small shared
# VM varies by +-20%) unless --strict is given. Any other failure (a build,
# a launch that does not confine, a control in syscall_cost) exits non-zero.
#
# Its lines `ratio NAME VALUE` are what bench/budgets.sh compares
# with the checked-in budgets.
#
# Environment: BUILD_DIR (default <repo>/build), RUNS (default 200),
# WARMUP (default 20), AS_NOBODY=1, KEEP_TMP=1
# (keep the temporary directory with the policies and hyperfine's JSON),
# BASELINE_AGENT=<another build's oarbank-agent>: its sandbox-exec runs in the
# same hyperfine invocation, and the report gives this build's time over
# the baseline's (a change must not make the launch slower).
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly WARMUP="${WARMUP:-20}" RUNS="${RUNS:-200}"
readonly TARGET_PLAIN=2.3 TARGET_NS=3.5 TARGET_VS_BWRAP=0.4 TARGET_ABOVE_FLOOR_MS=0.3 TARGET_SYSCALL=1.4
readonly NOBODY_ID=65534

STRICT=0
for arg in "$@"; do
  case "$arg" in
    --strict) STRICT=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--strict]" >&2; exit 64 ;;
  esac
done

die() { echo "bench: $*" >&2; exit 1; }
for tool in cmake hyperfine bwrap jq awk; do
  command -v "$tool" >/dev/null || die "$tool is not installed"
done

RUN_AS=()
if [[ "${AS_NOBODY:-0}" == 1 ]]; then
  command -v setpriv >/dev/null || die "setpriv is not installed (util-linux)"
  [[ "$(id -u)" == 0 ]] || die "AS_NOBODY=1 needs root (setpriv --reuid)"
  RUN_AS=(setpriv --reuid="$NOBODY_ID" --regid="$NOBODY_ID" --clear-groups)
fi

# --- Build -----------------------------------------------------------------
echo "== build (${BUILD_DIR})"
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja >/dev/null
fi
cmake --build "$BUILD_DIR" --target oarbank-agent syscall_cost minilaunch interleave
AGENT="$BUILD_DIR/sandbox/oarbank-agent"
SYSCALL_COST="$BUILD_DIR/bench/syscall_cost"
MINILAUNCH="$BUILD_DIR/bench/minilaunch"
INTERLEAVE="$BUILD_DIR/bench/interleave"
[[ -x "$AGENT" && -x "$SYSCALL_COST" && -x "$MINILAUNCH" && -x "$INTERLEAVE" ]] ||
  die "build did not produce $AGENT, $SYSCALL_COST, $MINILAUNCH and $INTERLEAVE"

# --- Temporary directories and policies ------------------------------------
TMP_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/oarbank-bench.XXXXXX")"
cleanup() {
  if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "bench: kept $TMP_ROOT"; else rm -rf "$TMP_ROOT"; fi
}
trap cleanup EXIT
[[ "$TMP_ROOT$AGENT$SYSCALL_COST$MINILAUNCH" != *[[:space:]\'\"]* ]] || die "paths with spaces or quotes are not supported"
mkdir -p "$TMP_ROOT"/{bundle,work/tmp,data,results}

write_policy() {  # exec_writable file
  cat >"$2" <<EOF
{
  "contract": 1,
  "role": "runner",
  "bundle": "$TMP_ROOT/bundle",
  "work": "$TMP_ROOT/work",
  "data": "$TMP_ROOT/data",
  "tmp": "$TMP_ROOT/work/tmp",
  "net": {"mode": "none"},
  "exec_writable": $1
}
EOF
}
POLICY_PLAIN="$TMP_ROOT/policy-exec-writable.json"
POLICY_NS="$TMP_ROOT/policy-noexec.json"
write_policy true "$POLICY_PLAIN"
write_policy false "$POLICY_NS"

if ((${#RUN_AS[@]})); then
  chown -R "$NOBODY_ID:$NOBODY_ID" "$TMP_ROOT"
  for f in "$AGENT" "$SYSCALL_COST" "$MINILAUNCH" /bin/true "$(command -v bwrap)"; do
    "${RUN_AS[@]}" test -x "$f" || die "uid $NOBODY_ID cannot execute $f"
  done
  "${RUN_AS[@]}" test -w "$TMP_ROOT/results" || die "uid $NOBODY_ID cannot write $TMP_ROOT (is ${TMPDIR:-/tmp} traversable?)"
fi
cd "$TMP_ROOT"

# --- Environment -----------------------------------------------------------
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then commit+="+dirty"; fi
echo "== environment"
echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ), kernel $(uname -r), $(nproc) CPUs," \
  "$(hyperfine --version), bubblewrap $(bwrap --version | awk '{print $2}'), commit $commit," \
  "measured as uid $("${RUN_AS[@]}" id -u)"

# --- Controls: each launch runs, and the sandboxed ones are really confined --
status_of() {  # policy: NoNewPrivs and Seccomp of /bin/grep under the cage
  "${RUN_AS[@]}" "$AGENT" sandbox-exec "$1" -- /bin/grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status |
    awk '{printf "%s%s", (NR > 1 ? " " : ""), $2}'
}
for policy in "$POLICY_PLAIN" "$POLICY_NS"; do
  got="$(status_of "$policy")" || die "sandbox-exec failed with $policy"
  [[ "$got" == "1 2" ]] || die "under $policy: NoNewPrivs/Seccomp = '$got', expected '1 2'"
done
mounts_of() {  # policy: the mount options of the work grant as the module sees them
  "${RUN_AS[@]}" "$AGENT" sandbox-exec "$1" -- /bin/cat /proc/self/mountinfo |
    awk -v p="$TMP_ROOT/work" '$5 == p {print $6}'
}
[[ "$(mounts_of "$POLICY_NS")" == rw,*noexec* ]] || die "exec_writable false: $TMP_ROOT/work is not mounted rw,noexec"
plain_mount="$(mounts_of "$POLICY_PLAIN")"
[[ "$plain_mount" == rw,* && "$plain_mount" != *noexec* ]] || die "exec_writable true: $TMP_ROOT/work is mounted '$plain_mount'"
root_mount="$("${RUN_AS[@]}" "$AGENT" sandbox-exec "$POLICY_PLAIN" -- /bin/cat /proc/self/mountinfo | awk '$5 == "/" {print $6}')"
[[ "$root_mount" == ro,* ]] || die "/ is mounted '$root_mount' in the cage, not read-only"
got="$("${RUN_AS[@]}" "$MINILAUNCH" -- /bin/grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | awk '{printf "%s ", $2}')"
[[ "$got" == "1 2 " ]] || die "minilaunch: NoNewPrivs/Seccomp = '$got', expected '1 2'"
"${RUN_AS[@]}" "$MINILAUNCH" -- /bin/cat "$MINILAUNCH" >/dev/null 2>&1 && die "minilaunch: Landlock let it read $MINILAUNCH, outside its rules"
"${RUN_AS[@]}" bwrap --unshare-all --ro-bind / / /bin/true || die "bwrap does not run here"

# --- 1. Launch time ----------------------------------------------------------
readonly N_BARE="bare /bin/true"
readonly N_PLAIN="sandbox-exec, exec_writable true (user+mount ns, read-only mounts)"
readonly N_NS="sandbox-exec, exec_writable false (the same, writable grants noexec)"
readonly N_BWRAP="bwrap --unshare-all --ro-bind / /"
readonly N_FLOOR="floor: bench/minilaunch -N (user+mount ns, read-only mounts, the policy's three noexec binds, nnp, Landlock, 40 seccomp rules, exec)"
readonly N_BASELINE="baseline: BASELINE_AGENT sandbox-exec, exec_writable false"
BASELINE_ROW=()
if [[ -n "${BASELINE_AGENT:-}" ]]; then
  [[ -x "$BASELINE_AGENT" && "$BASELINE_AGENT" != *[[:space:]\'\"]* ]] || die "BASELINE_AGENT $BASELINE_AGENT is not an executable"
  BASELINE_ROW=(-n "$N_BASELINE" "$BASELINE_AGENT sandbox-exec $POLICY_NS -- /bin/true")
fi
JSON="$TMP_ROOT/results/launch.json"
echo "== 1. launch time: hyperfine -N --warmup $WARMUP --runs $RUNS"
"${RUN_AS[@]}" hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$JSON" \
  -n "$N_BARE" "/bin/true" \
  -n "$N_PLAIN" "$AGENT sandbox-exec $POLICY_PLAIN -- /bin/true" \
  -n "$N_NS" "$AGENT sandbox-exec $POLICY_NS -- /bin/true" \
  -n "$N_BWRAP" "bwrap --unshare-all --ro-bind / / /bin/true" \
  -n "$N_FLOOR" "$MINILAUNCH -N $TMP_ROOT/work -N $TMP_ROOT/data -N $TMP_ROOT/work/tmp -- /bin/true" "${BASELINE_ROW[@]}"

ms() {  # name field -> milliseconds
  jq -r --arg n "$1" --arg f "$2" '.results[] | select(.command == $n) | .[$f] * 1000' "$JSON"
}
bare="$(ms "$N_BARE" median)" plain="$(ms "$N_PLAIN" median)" ns="$(ms "$N_NS" median)" bwrap="$(ms "$N_BWRAP" median)"
floor="$(ms "$N_FLOOR" median)"
echo
echo "| command | median ms | min ms | mean ms +- sd | x bare (median) | x bwrap (median) |"
echo "|---|---|---|---|---|---|"
for name in "$N_BARE" "$N_PLAIN" "$N_NS" "$N_BWRAP" "$N_FLOOR"; do
  awk -v n="$name" -v med="$(ms "$name" median)" -v min="$(ms "$name" min)" -v mean="$(ms "$name" mean)" \
    -v sd="$(ms "$name" stddev)" -v bare="$bare" -v bwrap="$bwrap" \
    'BEGIN { printf "| %s | %.3f | %.3f | %.3f +- %.3f | %.2fx | %.2fx |\n", n, med, min, mean, sd, med / bare, med / bwrap }'
done

MISSES=0
check() {  # label value target: PASS when value <= target (strictly below when $4 == lt)
  local verdict
  verdict="$(awk -v v="$2" -v t="$3" -v lt="${4:-}" 'BEGIN { print ((lt == "lt" ? v < t : v <= t) ? "PASS" : "MISS") }')"
  [[ "$verdict" == PASS ]] || MISSES=$((MISSES + 1))
  printf '%-4s  %s: %.2fx (target %s %sx)\n' "$verdict" "$1" "$2" "$([[ "${4:-}" == lt ]] && echo '<' || echo '<=')" "$3"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }
echo
# The 2.3x target was set for a launch without namespaces; every launch now
# has one (read-only mounts: Landlock has no right for chmod, chown, utimes
# or xattrs), and exec_writable true is held to it all the same.
check "sandbox-exec, exec_writable true / bare (target set for no namespace)" "$(ratio "$plain" "$bare")" "$TARGET_PLAIN"
check "sandbox-exec, exec_writable false / bare" "$(ratio "$ns" "$bare")" "$TARGET_NS"
check "sandbox-exec, exec_writable true / bwrap" "$(ratio "$plain" "$bwrap")" "$TARGET_VS_BWRAP" lt
check "sandbox-exec, exec_writable false / bwrap" "$(ratio "$ns" "$bwrap")" "$TARGET_VS_BWRAP" lt
above="$(awk -v n="$ns" -v f="$floor" 'BEGIN { printf "%.3f", n - f }')"
above_verdict="$(awk -v a="$above" -v t="$TARGET_ABOVE_FLOOR_MS" 'BEGIN { print (a <= t ? "PASS" : "MISS") }')"
[[ "$above_verdict" == PASS ]] || MISSES=$((MISSES + 1))
printf '%-4s  sandbox-exec, exec_writable false, above the floor: +%s ms (target <= %s ms)\n' "$above_verdict" "$above" \
  "$TARGET_ABOVE_FLOOR_MS"
awk -v f="$floor" -v b="$bare" -v p="$plain" 'BEGIN {
  printf "info  the floor (minilaunch -N) / bare: %.2fx; exec_writable true above it: +%.2f ms\n", f / b, p - f }'

# --- 1b. The same launches in turns ------------------------------------------
# hyperfine times each command in a block of its own, and this VM drifts
# between blocks by more than the 0.3 ms the floor's target is stated in:
# bench/interleave runs one launch of each command per round, so the drift
# falls on all alike (and no command runs with the caches its own previous
# launch left warm). The same targets, judged on its medians.
FLOOR_CMD="$MINILAUNCH -N $TMP_ROOT/work -N $TMP_ROOT/data -N $TMP_ROOT/work/tmp -- /bin/true"
echo
echo "== 1b. the same launches in turns: bench/interleave, $RUNS rounds"
"${RUN_AS[@]}" "$INTERLEAVE" "$RUNS" bare /bin/true sandbox-exec "$AGENT sandbox-exec $POLICY_NS -- /bin/true" \
  floor "$FLOOR_CMD" bwrap "$(command -v bwrap) --unshare-all --ro-bind / / /bin/true" >"$TMP_ROOT/results/interleaved.txt" ||
  die "bench/interleave failed"
turns() { awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$TMP_ROOT/results/interleaved.txt"; }  # name field(2 median, 3 min)
echo "| command | median ms | min ms | x bwrap (median) |"
echo "|---|---|---|---|"
for name in bare sandbox-exec floor bwrap; do
  awk -v n="$name" -v med="$(turns "$name" 2)" -v min="$(turns "$name" 3)" -v bwrap="$(turns bwrap 2)" \
    'BEGIN { printf "| %s | %.3f | %.3f | %.2fx |\n", n, med, min, med / bwrap }'
done
check "sandbox-exec, exec_writable false / bwrap, in turns" "$(ratio "$(turns sandbox-exec 2)" "$(turns bwrap 2)")" \
  "$TARGET_VS_BWRAP" lt
above_turns="$(awk -v n="$(turns sandbox-exec 2)" -v f="$(turns floor 2)" 'BEGIN { printf "%.3f", n - f }')"
above_verdict="$(awk -v a="$above_turns" -v t="$TARGET_ABOVE_FLOOR_MS" 'BEGIN { print (a <= t ? "PASS" : "MISS") }')"
[[ "$above_verdict" == PASS ]] || MISSES=$((MISSES + 1))
printf '%-4s  sandbox-exec, exec_writable false, above the floor, in turns: +%s ms (target <= %s ms)\n' "$above_verdict" \
  "$above_turns" "$TARGET_ABOVE_FLOOR_MS"

if ((${#BASELINE_ROW[@]})); then
  baseline="$(ms "$N_BASELINE" median)"
  printf 'info  this build / the baseline (sandbox-exec, exec_writable false, medians): %.2fx (%.3f vs %.3f ms)\n' \
    "$(ratio "$ns" "$baseline")" "$ns" "$baseline"
fi

# --- 2. Per-syscall cost of the seccomp filter ------------------------------
echo
echo "== 2. hot-syscall cost of the seccomp filter"
rc=0
"${RUN_AS[@]}" env TMPDIR="$TMP_ROOT" "$SYSCALL_COST" --target "$TARGET_SYSCALL" || rc=$?
case "$rc" in
  0) ;;
  3) MISSES=$((MISSES + 1)) ;;
  *) die "syscall_cost failed (exit $rc)" ;;
esac

echo
echo "ratio sandbox_exec_bwrap $(ratio "$ns" "$bwrap")"
echo "ratio sandbox_exec_bare $(ratio "$ns" "$bare")"
if ((MISSES == 0)); then
  echo "bench: every target PASS"
elif ((STRICT)); then
  echo "bench: $MISSES target(s) MISSED (--strict)"
  exit 1
else
  echo "bench: $MISSES target(s) MISSED (not fatal without --strict; timing here varies by +-20%)"
fi
