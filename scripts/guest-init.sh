#!/bin/sh
# /init of a kernel-matrix guest (busybox sh, PID 1). Built into the
# initramfs by scripts/initramfs-build.sh; never run on a host.
#
# It makes the world the battery expects (a tmpfs root, proc, sysfs, securityfs,
# devtmpfs, a pure cgroup2 with +memory +cpu +pids in the root's subtree,
# tmpfs on /tmp, loopback up, a `nobody` user, ptrace_scope 0, and an
# egress-any row's kernel modules), records what
# the kernel offers (oarbank-agent sandbox-report, and its verdict for the
# strict runner policy), checks the cgroup v2 leaf features the supervisor
# relies on, runs oarbank-conform as root (the confined side as root and
# uid 65534), then writes everything as base64 of a tar.gz between markers on
# the result port and powers off: the second serial port (/dev/ttyS1) on
# x86-64, where the console is ttyS0; on arm64 (-M virt, console ttyAMA0)
# a PCI 16550 that the guest sees as /dev/ttyS0 (oarbank.results=ttyS0).
#
# Kernel command line: oarbank.conform="ARGS" adds options to oarbank-conform
# (for example --probe=a,b or --policy=runner_strict), oarbank.battery=0 skips it,
# oarbank.probe=1 powers off as soon as /init runs (the accelerator probe),
# oarbank.results=ttyS0 names the result port (default ttyS1),
# oarbank.capped=5,6,9 runs the battery again capped at those Landlock ABIs.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
# The arm64 initramfs holds busybox and /bin/sh only: the build machine
# cannot run an arm64 busybox to list its applets, so it links them here.
[ -e /bin/mount ] || { /bin/busybox mount -t proc proc /proc; /bin/busybox --install -s; /bin/busybox umount /proc; }
export HOME=/root LANG=C

# The guest runs from a tmpfs root, as a booted system runs from a root
# mount: the initramfs's own root (rootfs) is the one mount nothing can
# pivot_root away from (EINVAL), which a job network's user-mode stack does
# when it confines itself (slirp4netns --enable-sandbox). So the first /init
# copies the tree into a tmpfs and switch_root runs this script again there.
if [ -z "${OARBANK_TMPFS_ROOT:-}" ]; then
  mkdir -p /newroot
  mount -t tmpfs -o mode=0755 root /newroot
  for f in /* /.[!.]*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    [ "$f" = /newroot ] || cp -a "$f" /newroot/
  done
  export OARBANK_TMPFS_ROOT=1
  exec switch_root /newroot /init
fi

O=/oarbank
OUT=/out
say() { echo "oarbank-guest: $*"; }
now() { cut -d' ' -f1 /proc/uptime; }

finish() {
  port=$(sed -n 's/.*oarbank\.results=ttyS\([0-9]\).*/\1/p' /proc/cmdline)
  port=${port:-1}
  tty=/dev/ttyS$port
  [ -e $tty ] || mknod $tty c 4 $((64 + port))
  stty -F $tty raw -echo 2>/dev/null
  echo "$(now)" >"$OUT/uptime-end"
  say "writing results ($(du -sk "$OUT" | cut -f1) KiB) to $tty"
  # Each write closes the port, which waits until the UART has sent it all.
  echo "OARBANK-RESULTS-BEGIN" >$tty
  tar czf - -C "$OUT" . | base64 >$tty
  echo "OARBANK-RESULTS-END" >$tty
  say "done at $(now) s; powering off"
  sync
  poweroff -f
  reboot -f
  sleep 5
}

mount -t proc proc /proc
# oarbank.probe=1: only prove the guest reaches /init (qemu-run.sh --detect-accel).
case " $(cat /proc/cmdline) " in
  *" oarbank.probe=1 "*) echo "OARBANK-GUEST-ALIVE"; poweroff -f; reboot -f ;;
esac
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /tmp /run "$OUT"
mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
# Quiet the console: OOM reports from the cgroup checks would otherwise
# interleave with our lines.
echo 1 >/proc/sys/kernel/printk
say "init at $(now) s on $(uname -r)"
echo "$(now)" >"$OUT/uptime-init"
uname -r >"$OUT/uname"
uname -m >"$OUT/machine"

cmdline=$(cat /proc/cmdline)
conform_args=$(sed -n 's/.*oarbank\.conform="\([^"]*\)".*/\1/p' /proc/cmdline)
run_battery=1
case " $cmdline " in *" oarbank.battery=0 "*) run_battery=0 ;; esac

# A pure cgroup2 hierarchy, controllers delegated to the root's children.
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>"$OUT/cgroup-mount.err" && rm -f "$OUT/cgroup-mount.err"
for c in memory cpu pids; do
  echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>>"$OUT/cgroup-subtree.err"
done
[ -s "$OUT/cgroup-subtree.err" ] || rm -f "$OUT/cgroup-subtree.err"

# Loopback: the battery's host listeners are on 127.0.0.1 and ::1.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
hostname oarbank-guest

# A row with egress_any: its kernel's modules for the job network and the
# battery's veth pair (scripts/initramfs-egress-any.sh), loaded before the
# agent looks for them; the names it loaded go to modules-loaded.
if [ -f $O/egress-any/modules ]; then
  for m in $(cat $O/egress-any/modules); do
    modprobe "$m" 2>>"$OUT/modprobe.err" && echo "$m" >>"$OUT/modules-loaded"
  done
  [ -s "$OUT/modprobe.err" ] || rm -f "$OUT/modprobe.err"
fi

# Unconfined ptrace probes must be able to prove their escape as root.
[ -w /proc/sys/kernel/yama/ptrace_scope ] && echo 0 >/proc/sys/kernel/yama/ptrace_scope
cat /proc/sys/kernel/yama/ptrace_scope >"$OUT/ptrace_scope" 2>/dev/null
cat /sys/kernel/security/lsm >"$OUT/lsm" 2>/dev/null

# ---- what the kernel offers -------------------------------------------
$O/sandbox/oarbank-agent sandbox-report >"$OUT/sandbox-report.json" 2>"$OUT/sandbox-report.err"
echo $? >"$OUT/sandbox-report.rc"
V=/run/oarbank-verdict
mkdir -p $V/bundle $V/runtime $V/work/tmp $V/data
sed "s|@ROOT@|$V|g" $O/fixtures/policies/battery/runner_strict.json >$V/runner_strict.json
$O/sandbox/oarbank-agent sandbox-report $V/runner_strict.json >"$OUT/verdict.json" 2>"$OUT/verdict.err"
echo $? >"$OUT/verdict.rc"
say "sandbox-report: $(grep -o '"abi": [0-9]*' "$OUT/sandbox-report.json" | head -1); runner_strict: $(grep -o '"verdict": "[A-Z_a-z]*"' "$OUT/verdict.json" | head -1)"

# ---- the cgroup v2 leaf: memory.max -> oom, cpu.max throttles, cgroup.kill
CG=/sys/fs/cgroup
leaf_mem=false leaf_cpu=false leaf_kill=false kill_file=false
oom_kills=0 throttled=0 usage=0 left=-1
if [ -d $CG/kmx-mem ] || mkdir $CG/kmx-mem 2>/dev/null; then
  if echo 16M >$CG/kmx-mem/memory.max 2>/dev/null; then
    echo 0 >$CG/kmx-mem/memory.swap.max 2>/dev/null
    # busybox dd allocates its 64 MiB block: over the limit, so the leaf's OOM killer runs.
    sh -c "echo \$\$ >$CG/kmx-mem/cgroup.procs && exec dd if=/dev/zero of=/dev/null bs=64M count=2" 2>/dev/null
    oom_kills=$(sed -n 's/^oom_kill //p' $CG/kmx-mem/memory.events)
    [ "${oom_kills:-0}" -gt 0 ] && leaf_mem=true
  fi
  rmdir $CG/kmx-mem 2>/dev/null
fi
if mkdir $CG/kmx-cpu 2>/dev/null; then
  if echo "10000 100000" >$CG/kmx-cpu/cpu.max 2>/dev/null; then
    sh -c "echo \$\$ >$CG/kmx-cpu/cgroup.procs && while :; do :; done" 2>/dev/null &
    sleep 0.5
    kill -9 $! 2>/dev/null
    wait $! 2>/dev/null
    throttled=$(sed -n 's/^nr_throttled //p' $CG/kmx-cpu/cpu.stat)
    usage=$(sed -n 's/^usage_usec //p' $CG/kmx-cpu/cpu.stat)
    # 10% of a CPU for 0.5 s: throttled, and far below the 0.5 s it would burn.
    [ "${throttled:-0}" -gt 0 ] && [ "${usage:-0}" -lt 250000 ] && leaf_cpu=true
  fi
  rmdir $CG/kmx-cpu 2>/dev/null
fi
if mkdir $CG/kmx-kill 2>/dev/null; then
  if [ -e $CG/kmx-kill/cgroup.kill ]; then
    kill_file=true
    sh -c "echo \$\$ >$CG/kmx-kill/cgroup.procs && { sleep 300 & sleep 300 & (sleep 300 &) ; exec sleep 300; }" &
    sleep 0.3
    echo 1 >$CG/kmx-kill/cgroup.kill
    wait
    sleep 0.2
    left=$(wc -l <$CG/kmx-kill/cgroup.procs)
    grep -q '^populated 0' $CG/kmx-kill/cgroup.events && [ "$left" -eq 0 ] && leaf_kill=true
  fi
  rmdir $CG/kmx-kill 2>/dev/null
fi
# pids.max: a leaf of 8 refuses the 9th fork (pids.events "max" counts the
# refusals); and the agent writes limits.pids into its job's leaf, where a
# job forking 16 sleeps is refused past it. That job runs --unproven: this
# row checks the cgroup, and the guest's battery writes no attestation.
leaf_pids=false pids_current=-1 pids_refused=0 agent_pids=false agent_pids_limits=""
if mkdir $CG/kmx-pids 2>/dev/null; then
  if echo 8 >$CG/kmx-pids/pids.max 2>/dev/null; then
    sh -c "echo \$\$ >$CG/kmx-pids/cgroup.procs && for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do sleep 30 & done; wait" \
      >/dev/null 2>&1 &
    sleep 0.5
    pids_current=$(cat $CG/kmx-pids/pids.current)
    pids_refused=$(sed -n 's/^max //p' $CG/kmx-pids/pids.events)
    echo 1 >$CG/kmx-pids/cgroup.kill 2>/dev/null || kill -9 $(cat $CG/kmx-pids/cgroup.procs) 2>/dev/null
    wait
    sleep 0.2
    [ "${pids_refused:-0}" -gt 0 ] && [ "$pids_current" -le 8 ] && leaf_pids=true
  fi
  rmdir $CG/kmx-pids 2>/dev/null
fi
sed 's|^{|{"limits": {"pids": 8},|' $V/runner_strict.json >$V/runner_pids.json
$O/sandbox/oarbank-agent run --unproven --json --timeout 20 $V/runner_pids.json -- /bin/sh -c \
  'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do /bin/sleep 1 & done; wait; echo forked' \
  >"$OUT/pids-run.json" 2>"$OUT/pids-run.err"
agent_pids_limits=$(sed -n 's/.*"limits": "\([^"]*\)".*/\1/p' "$OUT/pids-run.json" | head -1)
case "$agent_pids_limits" in *pids.max=8*)
  grep -q -i 'fork\|resource temporarily' "$OUT/pids-run.json" && agent_pids=true ;;
esac
# memory.max, through the agent: --hard-limits writes limits.mem_gb (32 MiB)
# into the job's leaf, where a job allocating 64 MiB is killed by the kernel
# and the run says so; nothing of the job is left. Then the agent itself
# starved: run inside a leaf whose memory.max (64 KiB to 2 MiB) leaves it
# too little to start a job (ENOMEM, the leaf's OOM killer). Whatever it
# does (refuses with 70, dies, or runs the job), the job never runs
# unconfined: its write outside its grants ($V itself) must not land, no
# job process may outlive it, and a job leaf a killed agent could not remove
# is reaped by the next agent's start in the same cgroup (its limit lifted
# for that start). The same leaf with no limit
# (max) is the control: there the agent, which starts in a child cgroup as
# under a service manager's delegation, must run the job (agent_in_child).
agent_memory=false agent_memory_reason="" starved="" agent_in_child=false
sed 's|^{|{"limits": {"mem_gb": 0.03125},|' $V/runner_strict.json >$V/runner_mem.json
$O/sandbox/oarbank-agent run --unproven --hard-limits --json --timeout 20 $V/runner_mem.json -- \
  /bin/dd if=/dev/zero of=/dev/null bs=64M count=1 >"$OUT/memory-run.json" 2>"$OUT/memory-run.err"
agent_memory_reason=$(sed -n 's/.*"reason": "\([^"]*\)".*/\1/p' "$OUT/memory-run.json" | head -1)
case "$agent_memory_reason" in *memory.max*)
  ls -d $CG/oarbank-job-* >/dev/null 2>&1 || agent_memory=true ;;
esac
starved_ok=true
for max in max 64K 256K 512K 1M 2M; do
  marker=$V/escaped-$max
  starved_cg=$CG/kmx-starved-$max
  mkdir $starved_cg
  echo "$max" >$starved_cg/memory.max 2>/dev/null
  echo 0 >$starved_cg/memory.swap.max 2>/dev/null
  sh -c "echo \$\$ >$starved_cg/cgroup.procs && exec $O/sandbox/oarbank-agent run --unproven --json --timeout 20 \
    $V/runner_strict.json -- /bin/sh -c 'echo x >$marker; echo ran'" >"$OUT/starved-$max.json" 2>"$OUT/starved-$max.err"
  rc=$?
  sleep 0.5
  left_procs=$(find $starved_cg -name cgroup.procs -exec cat {} + 2>/dev/null | wc -l)
  killed_left=$(ls -d $starved_cg/oarbank-job-* 2>/dev/null | wc -l)
  if [ "$killed_left" -gt 0 ]; then
    echo max >$starved_cg/memory.max
    sh -c "echo \$\$ >$starved_cg/cgroup.procs && exec $O/sandbox/oarbank-agent run --unproven --json --timeout 20 \
      $V/runner_strict.json -- /bin/true" >/dev/null 2>&1
  fi
  left_leaves=$(ls -d $CG/oarbank-job-* $starved_cg/oarbank-job-* 2>/dev/null | wc -l)
  escaped=false
  [ -e "$marker" ] && escaped=true
  case "$rc" in 0 | 70 | 137) ;; *) starved_ok=false ;; esac
  [ "$max" = max ] && [ "$rc" = 0 ] && grep -q '"stdout": "ran' "$OUT/starved-$max.json" && agent_in_child=true
  [ "$escaped" = false ] && [ "$left_leaves" -eq 0 ] && [ "$left_procs" -eq 0 ] || starved_ok=false
  starved="$starved${starved:+, }{\"memory_max\": \"$max\", \"rc\": $rc, \"escaped\": $escaped, \"left_by_it\": $killed_left, \"left_after_next\": $left_leaves, \"left_procs\": $left_procs}"
  rmdir $starved_cg/oarbank-supervisor $starved_cg 2>/dev/null
done
cat >"$OUT/cgroup.json" <<EOF
{"mounted": $(grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts && echo true || echo false),
 "controllers": "$(cat $CG/cgroup.controllers 2>/dev/null)",
 "subtree_control": "$(cat $CG/cgroup.subtree_control 2>/dev/null)",
 "memory_oom": $leaf_mem, "oom_kills": ${oom_kills:-0},
 "cpu_throttle": $leaf_cpu, "nr_throttled": ${throttled:-0}, "usage_usec": ${usage:-0},
 "kill_file": $kill_file, "kill": $leaf_kill, "left_after_kill": $left,
 "pids": $leaf_pids, "pids_current": $pids_current, "pids_refused": ${pids_refused:-0},
 "agent_pids": $agent_pids, "agent_limits": "$agent_pids_limits",
 "agent_memory": $agent_memory, "agent_memory_reason": "$agent_memory_reason",
 "agent_starved": $starved_ok, "starved": [$starved], "agent_in_child": $agent_in_child}
EOF
say "cgroup leaf: memory.max oom=$leaf_mem cpu.max throttle=$leaf_cpu cgroup.kill=$leaf_kill pids.max=$leaf_pids (agent's leaf: pids $agent_pids, memory $agent_memory; starved agent: $starved_ok; agent in a child cgroup: $agent_in_child)"

# ---- the battery ------------------------------------------------------
# oarbank-conform over the guest's battery (the bare launcher's cells under
# sandbox-exec only), with AGENT, its reports in DIR, its output in LOG and
# its status beside LOG (.rc); more options follow.
conform() {  # AGENT DIR LOG [OPTION...]
  agent=$1 dir=$2 log=$3
  shift 3
  $O/harness/oarbank-conform --agent "$agent" --probes $O/probes --policies $O/fixtures/policies/battery \
    --expectations $O/escapes/expectations.tsv --catalogue-table $O/escapes/catalogue.tsv --single-entry \
    --out "$dir" "$@" >"$log" 2>&1
  echo $? >"${log%.log}.rc"
}
if [ "$run_battery" = 1 ]; then
  say "battery: oarbank-conform $conform_args (started at $(now) s)"
  echo "$(now)" >"$OUT/uptime-battery-start"
  # shellcheck disable=SC2086 # conform_args is a list of options
  conform $O/sandbox/oarbank-agent "$OUT/battery" "$OUT/conform.log" $conform_args
  [ -d /var/lib/oarbank ] && cp -r /var/lib/oarbank "$OUT/var-lib-oarbank"
  echo "$(now)" >"$OUT/uptime-battery-end"
  say "battery: exit $(cat "$OUT/conform.rc") at $(now) s: $(tail -2 "$OUT/conform.log" | head -1)"
  # oarbank.capped=N,M: the battery again with the launcher capped at each
  # ABI (the strict runner and broker policies): the capped runs of an
  # architecture the host is not.
  for n in $(sed -n 's/.*oarbank\.capped=\([0-9,]*\).*/\1/p' /proc/cmdline | tr ',' ' '); do
    mkdir -p "$OUT/capped/$n"
    conform $O/sandbox/oarbank-agent "$OUT/capped/$n" "$OUT/capped/$n/conform.log" --landlock-abi-max "$n" \
      --policy runner_strict --policy runner_broker
    say "capped at ABI $n: exit $(cat "$OUT/capped/$n/conform.rc"): $(tail -2 "$OUT/capped/$n/conform.log" | head -1)"
  done
  # A row with workloads: Python's multiprocessing manager and forkserver
  # and tmux in the cage (scripts/guest-workloads.sh), judged by their output.
  if [ -x $O/workloads/run ]; then
    $O/workloads/run "$OUT/workloads.json"
    say "workloads: $(cat "$OUT/workloads.json")"
  fi
  # oarbank.broken_filter=bpf_syscall: with the seccomp row for bpf dropped
  # from the test-only agent's filter, bpf_syscall must escape (the battery
  # is seen to catch a broken filter for this architecture, not only to pass).
  if grep -q 'oarbank\.broken_filter=bpf_syscall' /proc/cmdline; then
    conform $O/sandbox/oarbank-agent-faulty "$OUT/broken-filter" "$OUT/broken-filter.log" \
      --agent-env OARBANK_FAULT_DROP_SECCOMP=bpf --probe bpf_syscall --policy runner_strict
    say "broken filter (bpf row dropped): exit $(cat "$OUT/broken-filter.rc"): $(tail -2 "$OUT/broken-filter.log" | head -1)"
  fi
  # oarbank.mutants=POINT:POLICY:PROBE+PROBE,...: each enforcement point
  # (oarbank-conform mutants' ids) removed from the test-only agent's plan
  # alone, those probes run under that policy: one must escape. The points
  # this host's kernel lacks (its mutation run cannot remove them) are
  # proven here instead.
  i=0
  for m in $(sed -n 's/.*oarbank\.mutants=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' '); do
    i=$((i + 1))
    point=${m%%:*} rest=${m#*:}
    policy=${rest%%:*} probes=$(echo "${rest#*:}" | tr '+' ',')
    mkdir -p "$OUT/mutants/$i"
    echo "$point" >"$OUT/mutants/$i/point"
    conform $O/sandbox/oarbank-agent-faulty "$OUT/mutants/$i" "$OUT/mutants/$i/conform.log" \
      --agent-env "OARBANK_FAULT_MUTANT=$point" --probe "$probes" --policy "$policy"
    say "mutant $point ($policy): exit $(cat "$OUT/mutants/$i/conform.rc"): $(tail -2 "$OUT/mutants/$i/conform.log" | head -1)"
  done
fi
finish
