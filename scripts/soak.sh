#!/usr/bin/env bash
# scripts/soak.sh: the supervisor under load and faults, then a count of
# everything that could leak.
#
#   scripts/soak.sh [CONCURRENT [SEQUENTIAL [KILLS]]]   default 100, 1000 and 300
#   AS_NOBODY=1 scripts/soak.sh                   supervisors as uid 65534 (rootless)
#
# 1. CONCURRENT `oarbank-agent run --json` at once, then SEQUENTIAL one
#    after another. Each job is one of: exit 0, exit 3, output past the cap,
#    a double-forked setsid daemon, a sleep past its timeout; about one in
#    eight has its supervisor SIGKILLed at a random point (setup, gate,
#    running). Every result must be a real exit or a stated fault, exactly
#    the one its kind expects; a killed supervisor leaves no result.
# 2. KILLS supervisors killed at a random moment, 0 to 99 ms after they
#    start (start-up, the gate, the running job), by SIGKILL, SIGTERM and
#    SIGINT in turn: the windows where a supervisor's death could leave its
#    idmap holder, its keeper or an empty cgroup leaf behind. The job never
#    ends on its own, so each signal must find its supervisor running: one
#    that had ended first is counted unexpected.
# 3. In-process: SupervisorLeakTest (supervisor_test) with
#    OARBANK_SOAK_RUNS sequential runs and 4 threads in one long-lived
#    supervisor: its fd count and children before and after.
# 4. Afterwards, counted from outside and printed: processes of the jobs
#    (their marker in /proc/*/cmdline), zombies (ours, and orphaned keepers),
#    fds on the soak's files, cgroup leaves (oarbank-job-*), temporary
#    entries (the supervisors' TMPDIR, /tmp names with the marker). All must
#    be zero; the script exits 1 otherwise.
#
# This host's pid 1 does not reap orphans; an agent's service manager
# (systemd) does. The soak therefore runs as a child subreaper, so the
# keeper of a SIGKILLed supervisor is reaped as it would be under systemd.
# Environment: BUILD_DIR (default <repo>/build), OARBANK_SOAK_RUNS (2),
# KEEP=1 keeps the soak directory.
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent"
readonly CONCURRENT="${1:-100}" SEQUENTIAL="${2:-1000}" KILLS="${3:-300}"
readonly NOBODY=65534

if [[ "${OARBANK_SOAK_SUBREAPER:-}" != 1 ]]; then
  # Become a child subreaper (prctl PR_SET_CHILD_SUBREAPER = 36; kept across exec).
  exec /usr/bin/python3 -c '
import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
    sys.exit("soak: prctl(PR_SET_CHILD_SUBREAPER) failed")
os.environ["OARBANK_SOAK_SUBREAPER"] = "1"
os.execv("/bin/bash", ["bash"] + sys.argv[1:])' "$0" "$@"
fi

die() { echo "soak: $*" >&2; exit 2; }
[[ -x "$AGENT" ]] || die "no $AGENT (build first: cmake -S . -B build -G Ninja && ninja -C build)"
command -v jq >/dev/null || die "jq is not installed"

RUN_AS=()
if [[ "${AS_NOBODY:-0}" == 1 ]]; then
  [[ "$(id -u)" == 0 ]] || die "AS_NOBODY=1 needs root (setpriv)"
  RUN_AS=(setpriv --reuid="$NOBODY" --regid="$NOBODY" --clear-groups)
fi

# A marker no other process has: every job's command line carries it.
readonly MARK="$((7000 + RANDOM % 2000)).$$"
SOAK=$(mktemp -d /tmp/oarbank-soak-XXXXXX)
chmod 755 "$SOAK"
cleanup() { [[ "${KEEP:-0}" == 1 ]] || rm -rf "$SOAK"; }
trap cleanup EXIT
mkdir -p "$SOAK"/{bundle,work/tmp,data,results,agent-tmp}
chmod 777 "$SOAK"/{work,work/tmp,data,results,agent-tmp}
cat >"$SOAK/policy.json" <<JSON
{"contract": 1, "role": "runner", "bundle": "$SOAK/bundle", "work": "$SOAK/work", "data": "$SOAK/data",
 "tmp": "$SOAK/work/tmp", "net": {"mode": "none"}, "exec_writable": false}
JSON
chmod 644 "$SOAK/policy.json"

cgroup_base=$("$AGENT" sandbox-report | jq -r '.cgroup_v2.own_cgroup // empty')
count_leaves() { [[ -n "$cgroup_base" && -d "$cgroup_base" ]] && find "$cgroup_base" -maxdepth 2 -name 'oarbank-job-*' -type d | wc -l || echo 0; }
leaves_before=$(count_leaves)
zombies_of_init_before=$(ps -eo stat=,ppid=,comm= | awk '$1 ~ /^Z/ && $2 == 1 && $3 ~ /oarbank/' | wc -l)

KINDS=(exit0 exit3 flood daemon timeout)
# One job: runs the supervisor with the kind's command; writes N.json and N.rc.
job() {
  local n=$1 kind=$2 kill_ms=$3
  local args=(run --unproven --json --stdout-max 1000)
  local cmd
  case "$kind" in
    exit0) cmd="exit 0 # $MARK" ;;
    exit3) cmd="exit 3 # $MARK" ;;
    flood) cmd="head -c 200000 /dev/zero # $MARK" ;;
    daemon) cmd="(setsid /bin/sleep $MARK </dev/null >/dev/null 2>&1 &); echo started" ;;
    timeout) args+=(--timeout 0.2); cmd="/bin/sleep $MARK" ;;
    long) cmd="/bin/sleep $MARK" ;;
  esac
  TMPDIR="$SOAK/agent-tmp" "${RUN_AS[@]}" "$AGENT" "${args[@]}" "$SOAK/policy.json" -- /bin/sh -c "$cmd" \
    >"$SOAK/results/$n.json" 2>"$SOAK/results/$n.err" &
  local pid=$!
  if [[ "$kill_ms" -ge 0 ]]; then
    sleep "$(printf '0.%03d' "$kill_ms")"
    kill -KILL "$pid" 2>/dev/null || true
    echo killed >"$SOAK/results/$n.kind"
  else
    echo "$kind" >"$SOAK/results/$n.kind"
  fi
  wait "$pid" 2>/dev/null && echo 0 >"$SOAK/results/$n.rc" || echo $? >"$SOAK/results/$n.rc"
}
pick() {  # n -> "kind kill_ms": 1 in 8 killed (a long job), at 0..299 ms
  if (( RANDOM % 8 == 0 )); then echo "long $((RANDOM % 300))"; else echo "${KINDS[RANDOM % ${#KINDS[@]}]} -1"; fi
}

start=$(date +%s.%N)
who=root; [[ ${#RUN_AS[@]} -gt 0 ]] && who="uid $NOBODY"
echo "soak: $CONCURRENT concurrent, then $SEQUENTIAL sequential (marker $MARK, $who)"
for ((i = 0; i < CONCURRENT; i++)); do
  read -r kind kill_ms < <(pick)
  job "c$i" "$kind" "$kill_ms" &
done
wait
t1=$(date +%s.%N)
printf 'soak: concurrent phase done in %.1f s\n' "$(echo "$t1 - $start" | bc)"
for ((i = 0; i < SEQUENTIAL; i++)); do
  read -r kind kill_ms < <(pick)
  job "s$i" "$kind" "$kill_ms"
  (( (i + 1) % 200 == 0 )) && echo "soak: $((i + 1))/$SEQUENTIAL sequential"
done
t2=$(date +%s.%N)
printf 'soak: sequential phase done in %.1f s (%.1f ms per job)\n' "$(echo "$t2 - $t1" | bc)" \
  "$(echo "($t2 - $t1) * 1000 / $SEQUENTIAL" | bc -l)"

# ---- random kills: SIGKILL, SIGTERM, SIGINT at 0..99 ms -------------------
bad=0
kill_signals=(KILL TERM INT)
killed_early=0 finished_first=0
for ((i = 0; i < KILLS; i++)); do
  sig=${kill_signals[i % 3]}
  # A background job of a script starts with SIGINT ignored: give it back.
  TMPDIR="$SOAK/agent-tmp" env --default-signal=INT,TERM "${RUN_AS[@]}" "$AGENT" run --unproven --json "$SOAK/policy.json" -- \
    /bin/sh -c "exec /bin/sleep $MARK" >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf '0.%03d' $((RANDOM % 100)))"
  if kill -"$sig" "$pid" 2>/dev/null; then killed_early=$((killed_early + 1)); else finished_first=$((finished_first + 1)); fi
  # Bounded: a supervisor the signal did not end within 10 s is a failure.
  for ((w = 0; w < 100; w++)); do
    [[ "$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)" =~ ^(Z|)$ ]] && break
    sleep 0.1
  done
  if kill -KILL "$pid" 2>/dev/null && [[ "$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)" != Z ]]; then
    echo "soak: random kill $i: SIG$sig did not end the supervisor within 10 s"
    bad=$((bad + 1))
  fi
  wait "$pid" 2>/dev/null || true
done
t3=$(date +%s.%N)
if ((finished_first > 0)); then
  echo "soak: $finished_first supervisors of a job that never ends had ended before their signal"
  bad=$((bad + finished_first))
fi
printf 'soak: %d random kills done in %.1f s (%d killed, %d had ended first)\n' "$KILLS" "$(echo "$t3 - $t2" | bc)" \
  "$killed_early" "$finished_first"

# The keepers of killed supervisors finish their clean-up on their own.
sleep 1
wait

# ---- every result: a real exit or the stated fault its kind expects -----
declare -A tally=()
for kindfile in "$SOAK"/results/*.kind; do
  n=$(basename "$kindfile" .kind)
  kind=$(cat "$kindfile")
  if [[ "$kind" == killed ]]; then tally[supervisor-killed]=$((${tally[supervisor-killed]:-0} + 1)); continue; fi
  r="$SOAK/results/$n.json"
  if ! got=$(jq -r '"\(.fault) \(.exit_code) \(.signal) \(.refused) \(.stdout_truncated)"' "$r" 2>/dev/null); then
    echo "soak: $n ($kind): no JSON result: $(head -c 300 "$r") $(head -c 300 "$SOAK/results/$n.err")"
    bad=$((bad + 1)); continue
  fi
  case "$kind" in
    exit0) want="none 0 0 false false" ;;
    exit3) want="none 3 0 false false" ;;
    flood) want="none 0 0 false true" ;;
    daemon) want="none 0 0 false false" ;;
    timeout) want="timeout -1 9 false false" ;;
  esac
  if [[ "$got" != "$want" ]]; then
    echo "soak: $n ($kind): got '$got', want '$want': $(jq -r .reason "$r")"
    bad=$((bad + 1))
  elif [[ "$kind" == timeout ]]; then
    tally[fault-timeout]=$((${tally[fault-timeout]:-0} + 1))
  else
    tally[exit]=$((${tally[exit]:-0} + 1))
  fi
done

# ---- in-process: one long-lived supervisor ------------------------------
leak_test="$BUILD_DIR/sandbox/supervisor_test"
inproc="skipped (no $leak_test)"
if [[ -x "$leak_test" ]]; then
  if OARBANK_SOAK_RUNS="${OARBANK_SOAK_RUNS:-200}" "${RUN_AS[@]}" "$leak_test" \
      --gtest_filter='SupervisorLeakTest.*' >"$SOAK/inproc.log" 2>&1; then
    inproc="passed (${OARBANK_SOAK_RUNS:-200} sequential + 20 threaded runs: fds and children unchanged)"
  else
    inproc="FAILED (see below)"; bad=$((bad + 1)); tail -30 "$SOAK/inproc.log"
  fi
fi

# ---- leftovers, counted from outside -------------------------------------
procs=0
for d in /proc/[0-9]*; do
  [[ "$(sed 's/^.*) //' "$d/stat" 2>/dev/null | cut -c1)" == Z ]] && continue
  # The keeper and root's idmap holder carry the supervisor's command line (the marker).
  { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null | grep -q -- "$MARK" || continue
  procs=$((procs + 1))
  echo "soak: left: $({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null)"
done
zombies_ours=$(ps -eo stat=,ppid= | awk -v me=$$ '$1 ~ /^Z/ && $2 == me' | wc -l)
zombies_of_init=$(( $(ps -eo stat=,ppid=,comm= | awk '$1 ~ /^Z/ && $2 == 1 && $3 ~ /oarbank/' | wc -l) - zombies_of_init_before ))
fds=0
for f in /proc/[0-9]*/fd/*; do
  [[ "$(readlink "$f" 2>/dev/null)" == "$SOAK"/* && "$f" != /proc/$$/* ]] && fds=$((fds + 1))
done
fds_self=$(ls /proc/$$/fd | wc -l)
leaves=$(( $(count_leaves) - leaves_before ))
tmp_left=$(( $(find "$SOAK/agent-tmp" "$SOAK/work/tmp" -mindepth 1 | wc -l) + $(find /tmp -maxdepth 1 -name "*$MARK*" | wc -l) ))

echo
printf '== soak results (%.1f s)\n' "$(echo "$t3 - $start" | bc)"
for k in exit fault-timeout supervisor-killed; do printf '  %-22s %s\n' "$k" "${tally[$k]:-0}"; done
printf '  %-22s %s\n' "random kills" "$KILLS ($killed_early killed, $finished_first ended first)"
printf '  %-22s %s\n' "unexpected results" "$bad"
printf '  %-22s %s\n' "in-process supervisor" "$inproc"
echo "== left over (all must be 0)"
printf '  %-22s %s\n' "processes" "$procs" "zombies (ours)" "$zombies_ours" "zombies (pid 1's)" "$zombies_of_init" \
  "fds on soak files" "$fds" "cgroup leaves" "$leaves" "temp entries" "$tmp_left"
printf '  %-22s %s\n' "(fds of this shell)" "$fds_self"
if (( bad + procs + zombies_ours + zombies_of_init + fds + leaves + tmp_left > 0 )); then
  KEEP=1
  echo "soak: FAILED (kept $SOAK)"
  exit 1
fi
echo "soak: ok"
