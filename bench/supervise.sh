#!/usr/bin/env bash
# bench/supervise.sh: the cost of a supervised job, against a bare process
# and bubblewrap, measured in the same run.
#
#   bench/supervise.sh [--strict]              as the calling user (root is fine)
#   AS_NOBODY=1 bench/supervise.sh [--strict]  everything as uid/gid 65534 (rootless)
#
# 1. hyperfine, every command in one invocation (they share the machine's
#    state): bare /bin/true; `oarbank-agent run POLICY -- /bin/true` (user,
#    pid, ipc, uts, mnt and an empty net namespace, init, the cgroup leaf
#    where delegated, Landlock + seccomp, verification at the gate, exec);
#    `bwrap --ro-bind / / --unshare-all --die-with-parent /bin/true`; and as
#    references `unshare -Urnpf --mount-proc /bin/true`, the launcher alone,
#    `oarbank-agent sandbox-exec POLICY -- /bin/true`, and the floor of a
#    supervised job, `bench/minilaunch -J` (the same six fresh namespaces,
#    the id maps written from outside, an init that mounts its /proc and
#    waits for the command, the read-only mounts with the writable grant
#    noexec, no_new_privs, Landlock, seccomp, and the return only once init
#    is reaped, as `run` waits for the job's namespaces to go; no policy,
#    host probe, keeper, cgroup leaf or gate), with and without that wait
#    (`-E` returns when init reports the command's status, as bubblewrap
#    does). bwrap needs the --ro-bind: with --unshare-all alone its root is
#    empty and it fails with "execvp /bin/true: No such file or directory".
#    Targets on the medians: run <= 4x bare, and run < bwrap. Each `run`
#    here also starts a new agent process (CLI11, the policy file, the host
#    probe) before the job; its distance above the floor is printed.
# 2. In-process, as a long-lived agent pays it: cage::RunPolicy(/bin/true)
#    against fork+exec+wait of /bin/true and of the bwrap command above from
#    the same process (bench/run_policy_driver, built with the tree and
#    static, as oarbank-agent is), interleaved. Targets on these medians:
#    RunPolicy <= 4x bare and below 0.8x bwrap (an agent already running
#    pays no process start of its own, where bwrap's fork+exec does). Then,
#    for information, the same rounds from the same driver linked
#    dynamically (bench/run_policy_driver_dynamic), bound at load
#    (LD_BIND_NOW=1, as the library's link option binds a program that
#    links it) and lazily.
#
# The policy is a strict runner (net none, exec_writable false: the
# writable grants bound noexec in a private mount namespace). For root the
# job's /etc is an idmapped copy (sandbox/host/root_etc.h).
# A MISS is reported but fails the script only with --strict (a small,
# shared VM varies by 20% and more; the load is printed). Any other failure
# (a build, a run that does not exit 0) exits non-zero. Its lines `ratio
# NAME VALUE` are what bench/budgets.sh compares with the checked-in
# budgets.
# Environment: BUILD_DIR (default <repo>/build), RUNS (default 200),
# KEEP_TMP=1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent" FLOOR="$BUILD_DIR/bench/minilaunch"
readonly DRIVER="$BUILD_DIR/bench/run_policy_driver" DYNAMIC_DRIVER="$BUILD_DIR/bench/run_policy_driver_dynamic"
readonly RUNS="${RUNS:-200}" WARMUP=20
readonly TARGET_BARE=4 TARGET_INPROC_BWRAP=0.8 NOBODY_ID=65534

STRICT=0
for arg in "$@"; do
  case "$arg" in
    --strict) STRICT=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--strict]" >&2; exit 64 ;;
  esac
done

die() { echo "bench: $*" >&2; exit 1; }
for tool in hyperfine bwrap unshare jq awk; do
  command -v "$tool" >/dev/null || die "$tool is not installed"
done
for built in "$AGENT" "$FLOOR" "$DRIVER" "$DYNAMIC_DRIVER"; do
  [[ -x "$built" ]] || die "no $built (build first: cmake -S . -B build -G Ninja && ninja -C build)"
done

RUN_AS=()
if [[ "${AS_NOBODY:-0}" == 1 ]]; then
  command -v setpriv >/dev/null || die "setpriv is not installed (util-linux)"
  [[ "$(id -u)" == 0 ]] || die "AS_NOBODY=1 needs root (setpriv --reuid)"
  RUN_AS=(setpriv --reuid="$NOBODY_ID" --regid="$NOBODY_ID" --clear-groups)
fi

TMP=$(mktemp -d /tmp/oarbank-bench-XXXXXX)
chmod 755 "$TMP"
[[ "${KEEP_TMP:-0}" == 1 ]] || trap 'rm -rf "$TMP"' EXIT
# shellcheck source=bench/strict_job.sh
. "$ROOT/bench/strict_job.sh"
strict_job "$TMP"
mkdir -m 777 "$TMP/out"

# `run` refuses a policy class the battery has not proven here with this
# launcher (cage-before-capability): the battery runs first and its
# attestation is what every `run` below checks, as an agent's would.
"$BUILD_DIR/harness/oarbank-conform" --out "$TMP/battery" --attest "$TMP/attestation.json" >"$TMP/out/conform.txt" 2>&1 ||
  { tail -5 "$TMP/out/conform.txt"; die "the battery did not pass: nothing to time"; }
export OARBANK_BATTERY_ATTESTATION="$TMP/attestation.json"

# Every command must work before it is timed.
"${RUN_AS[@]}" "$AGENT" run "$TMP/policy.json" -- /bin/true || die "oarbank-agent run failed (exit $?)"
# One bwrap command for both hyperfine and the in-process driver.
readonly BWRAP=(bwrap --ro-bind / / --unshare-all --die-with-parent /bin/true)
"${RUN_AS[@]}" "${BWRAP[@]}" || die "bwrap failed"
"${RUN_AS[@]}" unshare -Urnpf --mount-proc /bin/true || die "unshare failed"
# The floor confines as the job does: read-only /, the policy's three
# writable grants bound back noexec (one -J each, as run binds them).
readonly FLOOR_DIRS=(-J "$TMP/work" -J "$TMP/data" -J "$TMP/work/tmp")
floor_says=$("${RUN_AS[@]}" "$FLOOR" "${FLOOR_DIRS[@]}" -- /bin/sh -c \
  'grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status | tr -d "\t\n"; awk -v w="$1" "\$5 == \"/\" || \$5 == w {printf \" %s=%s\", \$5, \$6}" /proc/self/mountinfo' \
  floor "$TMP/work") || die "minilaunch -J failed (exit $?)"
[[ "$floor_says" == "NoNewPrivs:1Seccomp:2 /=ro,"*" $TMP/work=rw,"*noexec* ]] || die "minilaunch -J does not confine: $floor_says"
"${RUN_AS[@]}" "$FLOOR" "${FLOOR_DIRS[@]}" -E -- /bin/true || die "minilaunch -J -E failed (exit $?)"
verified=$("${RUN_AS[@]}" "$AGENT" run --json "$TMP/policy.json" -- /bin/true |
  jq -r '"\(.container.namespaces) cgroup=\(.container.cgroup // "" | if . == "" then "none" else "leaf" end) NoNewPrivs=\(.container.verified.NoNewPrivs) Seccomp=\(.container.verified.Seccomp)"')

echo "bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), cpu pressure: $(head -1 /proc/pressure/cpu 2>/dev/null || echo n/a)"
echo "bench: as $([[ ${#RUN_AS[@]} -gt 0 ]] && echo "uid $NOBODY_ID" || echo "uid $(id -u)"); supervised job: $verified"

names=(bare run bwrap unshare sandbox-exec floor floor-early)
cmds=(
  "/bin/true"
  "$AGENT run $TMP/policy.json -- /bin/true"
  "${BWRAP[*]}"
  "unshare -Urnpf --mount-proc /bin/true"
  "$AGENT sandbox-exec $TMP/policy.json -- /bin/true"
  "$FLOOR ${FLOOR_DIRS[*]} -- /bin/true"
  "$FLOOR ${FLOOR_DIRS[*]} -E -- /bin/true"
)
"${RUN_AS[@]}" hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$TMP/out/launch.json" "${cmds[@]}" \
  >"$TMP/out/hyperfine.txt" 2>&1 || { cat "$TMP/out/hyperfine.txt"; die "hyperfine failed"; }

median() { jq -r ".results[$1].median * 1000" "$TMP/out/launch.json"; }
minimum() { jq -r ".results[$1].min * 1000" "$TMP/out/launch.json"; }
echo
printf '%-14s %10s %10s %12s %12s\n' command "median ms" "min ms" "x bare (med)" "x bare (min)"
for i in "${!names[@]}"; do
  printf '%-14s %10.2f %10.2f %12.2f %12.2f\n' "${names[$i]}" "$(median "$i")" "$(minimum "$i")" \
    "$(echo "$(median "$i") / $(median 0)" | bc -l)" "$(echo "$(minimum "$i") / $(minimum 0)" | bc -l)"
done
run_bare=$(echo "$(median 1) / $(median 0)" | bc -l)
run_bwrap=$(echo "$(median 1) / $(median 2)" | bc -l)
echo
verdict() { if (( $(echo "$1" | bc -l) )); then echo ok; else echo MISS; fi; }
v1=$(verdict "$run_bare <= $TARGET_BARE")
v2=$(verdict "$run_bwrap < 1")
printf 'run / bare  = %.2fx  (target <= %sx)  %s\n' "$run_bare" "$TARGET_BARE" "$v1"
printf 'run / bwrap = %.2fx  (target < 1x)    %s\n' "$run_bwrap" "$v2"
printf 'info  the floor (minilaunch -J) / bwrap = %.2fx; without waiting for the namespaces (-E) %.2fx; run above the floor: +%.2f ms\n' \
  "$(echo "$(median 5) / $(median 2)" | bc -l)" "$(echo "$(median 6) / $(median 2)" | bc -l)" \
  "$(echo "$(median 1) - $(median 5)" | bc -l)"

# ---- in-process: what a long-lived agent pays per job -------------------
# The same three jobs as a long-lived agent starts them, interleaved in one
# process: cage::RunPolicy, and fork+exec+wait of bare /bin/true and of the
# bwrap command above. This is the form the targets are about for the
# library API (Run/RunPolicy); the hyperfine rows above add the agent's own
# process start to every run.
"$DRIVER" --attest "$TMP/policy.json" "$TMP/inproc-attestation.json" || die "the in-process driver cannot attest itself"
export OARBANK_INPROC_ATTESTATION="$TMP/inproc-attestation.json"
read -r in_run in_bare in_bwrap in_run_min in_bare_min in_bwrap_min < \
  <("${RUN_AS[@]}" "$DRIVER" "$TMP/policy.json" "$((RUNS / 2))" "${BWRAP[@]}") ||
  die "the in-process driver failed"
echo
printf 'in-process (agent already running), %d interleaved triples:\n' "$((RUNS / 2))"
printf '  cage::RunPolicy(/bin/true)   median %6.2f ms  min %6.2f ms\n' "$in_run" "$in_run_min"
printf '  fork+exec+wait /bin/true     median %6.2f ms  min %6.2f ms\n' "$in_bare" "$in_bare_min"
printf '  fork+exec+wait bwrap (above) median %6.2f ms  min %6.2f ms\n' "$in_bwrap" "$in_bwrap_min"
in_run_bare=$(echo "$in_run / $in_bare" | bc -l)
in_run_bwrap=$(echo "$in_run / $in_bwrap" | bc -l)
v3=$(verdict "$in_run_bare <= $TARGET_BARE")
v4=$(verdict "$in_run_bwrap < $TARGET_INPROC_BWRAP")
printf 'RunPolicy / bare  = %.2fx  (target <= %sx)  %s\n' "$in_run_bare" "$TARGET_BARE" "$v3"
printf 'RunPolicy / bwrap = %.2fx  (target < %sx)  %s\n' "$in_run_bwrap" "$TARGET_INPROC_BWRAP" "$v4"

# The same rounds from a dynamically linked driver: what a program that
# links the library pays per job, bound at load as the library's link
# option makes it, and lazily (each job's forks resolving symbols anew).
"$DYNAMIC_DRIVER" --attest "$TMP/policy.json" "$TMP/dynamic-attestation.json" ||
  die "the dynamic driver cannot attest itself"
dynamic_rounds() {  # env...: RunPolicy / bwrap of one run of the dynamic driver
  local run bwrap
  read -r run _ bwrap _ < <("${RUN_AS[@]}" env "$@" OARBANK_INPROC_ATTESTATION="$TMP/dynamic-attestation.json" \
    "$DYNAMIC_DRIVER" "$TMP/policy.json" "$((RUNS / 2))" "${BWRAP[@]}") || die "the dynamic driver failed"
  echo "$run / $bwrap" | bc -l
}
dynamic_now=$(dynamic_rounds LD_BIND_NOW=1)
dynamic_lazy=$(dynamic_rounds -u LD_BIND_NOW)
printf 'info  linked dynamically: RunPolicy / bwrap = %.2fx bound at load, %.2fx bound lazily\n' \
  "$dynamic_now" "$dynamic_lazy"

printf 'ratio run_bwrap %.4f\nratio run_floor %.4f\nratio run_policy_bwrap %.4f\n' "$run_bwrap" \
  "$(echo "$(median 1) / $(median 5)" | bc -l)" "$in_run_bwrap"

if [[ "$STRICT" == 1 && " $v1 $v2 $v3 $v4 " == *" MISS "* ]]; then exit 1; fi
exit 0
