#!/usr/bin/env bash
# The user-mode network stacks an egress-any job could use, side by side in
# one run: slirp4netns (the one the agent runs) and pasta (Debian's passt),
# each started for a fresh user and network namespace as the agent would
# start it (fixed addresses, no port forwarding, no route to the host), and
# measured against direct from the same namespace:
# - start: from exec to ready (slirp4netns's ready fd; pasta returns once
#   ready), median of --starts;
# - throughput: one TCP transfer (best of three) to a server in another
#   network namespace, through the stack and direct;
# - first byte over a fresh connection (median of --samples).
# pasta runs with -t none -u none -T none -U none --no-map-gw: its defaults
# would forward the job's listeners to the host and the host's loopback
# ports into the job.
#
#   bench/stacks.sh [--bytes N] [--samples N] [--starts N] [--profile]
#
# --profile (needs perf) says where each stack's time goes, so a miss can be
# told from a floor: the CPU time and page faults of one start (its exec to
# ready, and its exit), and over the transfers how busy the stack's process
# is (CPU time over wall time: 1.00 is one CPU, all a single-threaded stack
# can use) and how much CPU the whole machine spends per MiB moved.
#
# Needs root and Debian's slirp4netns and passt (scripts/setup.sh installs
# both): two network namespaces joined by a veth pair, addresses in
# 198.18.0.0/15 only, removed afterwards. Ratios only; nothing is judged.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/stacks.sh: needs root (network namespaces)" >&2; exit 64; fi
bytes=$((128 << 20))
samples=100
starts=10
profile=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bytes) bytes="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --starts) starts="$2"; shift 2 ;;
    --profile) profile=1; shift ;;
    *) echo "bench/stacks.sh: unknown option $1" >&2; exit 64 ;;
  esac
done
for tool in slirp4netns pasta; do
  command -v "$tool" >/dev/null || { echo "bench/stacks.sh: $tool is missing (scripts/setup.sh installs it)" >&2; exit 64; }
done
if [ "$profile" = 1 ] && ! command -v perf >/dev/null; then
  echo "bench/stacks.sh: --profile needs perf (Debian's linux-perf)" >&2
  exit 64
fi
up="ostk-up-$$" pub="ostk-pub-$$" work="$(mktemp -d /tmp/ostk-XXXXXX)"
holder=""
. bench/upstream_world.sh
cleanup() {
  if [ -n "$holder" ]; then kill "$holder" 2>/dev/null || true; fi
  if [ -f "$work/stack.pid" ]; then kill "$(cat "$work/stack.pid")" 2>/dev/null || true; fi
  upstream_world_remove "$up" "$pub"
  rm -rf "$work"
}
trap cleanup EXIT
upstream_world_make "$up" "$pub" 251 "$work"
client=(/usr/bin/python3 bench/egress_any_client.py 198.19.251.2 5001 5002 "$bytes" "$samples")

# A fresh user and network namespace, held by a sleeping process in `up`:
# its pid in $holder.
new_holder() {
  ip netns exec "$up" unshare --user --map-root-user --net sleep 600 </dev/null >/dev/null 2>&1 &
  holder=$!
  # ip netns exec changes only the network namespace: the user namespace
  # differs once unshare has made both.
  local outer
  outer=$(readlink /proc/self/ns/user)
  for _ in $(seq 200); do
    local inner
    inner=$(readlink "/proc/$holder/ns/user" 2>/dev/null || true)
    [ -n "$inner" ] && [ "$inner" != "$outer" ] && return 0
    sleep 0.01
  done
  echo "bench/stacks.sh: the holder namespace did not appear" >&2
  exit 1
}
end_holder() { kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true; }
# Starts `stack` for the holder `pid`, run through WRAPPER... if given (a
# command that runs its arguments, such as perf stat); prints the
# microseconds to ready and leaves the pid it started in $work/stack.pid
# (the wrapper's, for slirp4netns under a wrapper).
start_stack() {
  local stack=$1 pid=$2 t0 t1
  shift 2
  t0=$(date +%s%N)
  case "$stack" in
    slirp4netns)
      rm -f "$work/ready.fifo" && mkfifo "$work/ready.fifo"
      ip netns exec "$up" "$@" slirp4netns --configure --mtu=65520 --disable-host-loopback --ready-fd=3 \
        "$pid" tap0 3>"$work/ready.fifo" </dev/null >/dev/null 2>&1 &
      echo $! >"$work/stack.pid"
      head -c 1 "$work/ready.fifo" >/dev/null
      ;;
    pasta)
      ip netns exec "$up" "$@" pasta --config-net -t none -u none -T none -U none --no-map-gw --runas 0 \
        -P "$work/stack.pid" "$pid" </dev/null >"$work/pasta.log" 2>&1 ||
        { echo "bench/stacks.sh: pasta: $(tail -3 "$work/pasta.log")" >&2; exit 1; }
      ;;
  esac
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
stop_stack() { kill "$(cat "$work/stack.pid")" 2>/dev/null || true; }

# --profile: where each stack's time goes, apart from the timed runs so the
# counting costs them nothing. `direct` has no stack.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }

# One more start of `stack` under perf stat (from its exec to ready, and its
# exit); prints its CPU time and page faults.
profile_start() {
  local stack=$1 wrapper
  new_holder
  start_stack "$stack" "$holder" perf stat -x, -o "$work/start.stat" -e task-clock,page-faults -- >/dev/null
  if [ "$stack" = slirp4netns ]; then # perf's child: perf writes the counts once it ends
    wrapper=$(cat "$work/stack.pid")
    pkill -P "$wrapper" -x slirp4netns
    wait "$wrapper" || true
  else # pasta's daemon, left running once perf's child returned
    stop_stack
  fi
  end_holder
  awk -F, '$3 ~ /^task-clock/ {cpu = $1} $3 ~ /^page-faults/ {pf = $1}
    END {printf "one start %.1f ms of CPU and %d page faults; ", cpu, pf}' "$work/start.stat"
}

# One more client run (three transfers, five connections) through `stack`,
# with the stack's own CPU time (/proc/PID/stat) and the machine's
# (/proc/stat: every process and the kernel's own work) read around it;
# prints one line, after the start's from profile_start.
profile_stack() {
  local stack=$1 start="" run=(ip netns exec "$up") stack_ticks=0 before after t0 t1 sp=""
  if [ "$stack" != direct ]; then
    start=$(profile_start "$stack")
    new_holder
    start_stack "$stack" "$holder" >/dev/null
    run=(nsenter -t "$holder" -U -n --preserve-credentials)
    sp=$(cat "$work/stack.pid")
    stack_ticks=$(ticks "$sp")
  fi
  before=$(machine_ticks)
  t0=$(date +%s%N)
  if ! "${run[@]}" /usr/bin/python3 bench/egress_any_client.py 198.19.251.2 5001 5002 "$bytes" 5 >/dev/null 2>&1; then
    echo "profile $stack: ${start}the client failed through it"
    [ -z "$sp" ] || { stop_stack; end_holder; }
    return 0
  fi
  t1=$(date +%s%N)
  after=$(machine_ticks)
  if [ -n "$sp" ]; then
    stack_ticks=$(($(ticks "$sp") - stack_ticks))
    stop_stack
    end_holder
  fi
  python3 - "$stack" "$start" "$stack_ticks" $((after - before)) $((t1 - t0)) "$bytes" <<'PY'
import os, sys
name, start, stack_ticks, machine_ticks, wall_ns, size = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
tick_ms, wall_ms, mib = 1000 / os.sysconf("SC_CLK_TCK"), wall_ns / 1e6, 3 * size / 2**20
own = "" if name == "direct" else f"its process {stack_ticks * tick_ms / wall_ms:.2f} CPUs, "
print(f"profile {name}: {start}over the transfers {own}the machine {machine_ticks * tick_ms / wall_ms:.2f} "
      f"of {os.cpu_count()} CPUs busy, {machine_ticks * tick_ms / mib:.2f} ms of CPU per MiB moved")
PY
}

direct="$(ip netns exec "$up" "${client[@]}")"
declare -A through start_ms
for stack in slirp4netns pasta; do
  micros=()
  for _ in $(seq "$starts"); do
    new_holder
    micros+=("$(start_stack "$stack" "$holder")")
    stop_stack
    end_holder
  done
  start_ms[$stack]=$(printf '%s\n' "${micros[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}')
  new_holder
  start_stack "$stack" "$holder" >/dev/null
  through[$stack]="$(nsenter -t "$holder" -U -n --preserve-credentials "${client[@]}")"
  stop_stack
  end_holder
done
if [ "$profile" = 1 ]; then
  for stack in direct slirp4netns pasta; do profile_stack "$stack"; done
fi
python3 - "$direct" "${through[slirp4netns]}" "${through[pasta]}" "${start_ms[slirp4netns]}" "${start_ms[pasta]}" <<'PY'
import json, sys
direct, slirp, pasta = (json.loads(a) for a in sys.argv[1:4])
start = {"slirp4netns": float(sys.argv[4]), "pasta": float(sys.argv[5])}
print(f"direct: {direct['mib_per_s']} MiB/s, first byte {direct['connect_ms_median']} ms")
for name, r in (("slirp4netns", slirp), ("pasta", pasta)):
    print(f"{name:<12} start {start[name]:6.1f} ms (median)  throughput {r['mib_per_s']:7.1f} MiB/s = "
          f"{r['mib_per_s'] / direct['mib_per_s']:.2f}x direct  first byte {r['connect_ms_median']} ms "
          f"(+{r['connect_ms_median'] - direct['connect_ms_median']:.3f})")
print(f"pasta over slirp4netns: throughput {pasta['mib_per_s'] / slirp['mib_per_s']:.2f}x, "
      f"start {start['pasta'] / start['slirp4netns']:.2f}x")
PY
