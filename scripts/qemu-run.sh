#!/usr/bin/env bash
# Boots one kernel-matrix guest in QEMU and collects what it reports.
#
#   scripts/qemu-run.sh ID OUTDIR      boot guest ID (a row of fixtures/kernels.json)
#   scripts/qemu-run.sh --detect-accel prints kvm or tcg (a short test boot decides)
#   scripts/qemu-run.sh --probe-boot ACCEL [CPU]   that test boot alone (exit 0: /init ran)
#
# The kernel comes from the cache scripts/kernels-fetch.sh filled
# ($OARBANK_KERNEL_CACHE/kernels/ID.json), the initramfs from
# scripts/initramfs-build.sh ($OARBANK_INITRAMFS). Results go to OUTDIR/ID/:
#   console.log   the guest's console (ttyS0)
#   serial1.txt   the result channel (ttyS1): base64 of a tar.gz between markers
#   results/      that tar.gz unpacked: sandbox-report.json, verdict.json,
#                 cgroup.json, battery/battery.{json,xml,md,html}, conform.log, ...
#   guest.json    the package and version booted, accelerator, wall seconds
# Exit 0 when the guest delivered its results (whatever they say), 1 if not.
#
# A row with "workloads": true boots with the workloads archive
# ($OARBANK_WORKLOADS, scripts/initramfs-workloads.sh) appended to its initrd,
# one with "egress_any": true its egress-any archive (egress-any-ID.cpio.zst
# in $OARBANK_EGRESS_ANY_DIR, default build-static/kernel-matrix:
# scripts/initramfs-egress-any.sh ID).
# The guest's kernel command line gets its row's `append`, if it has one,
# its `capped` ABIs as oarbank.capped=N,M, its `expect.broken_filter` as
# oarbank.broken_filter=PROBE and its `mutants` as oarbank.mutants=M,M.
# A row with "arch": "arm64" boots in qemu-system-aarch64 -M virt -cpu max
# (pointer authentication with QEMU's own cheap algorithm: the
# architected one makes every function call slow under TCG), its console
# on the PL011 (ttyAMA0) and its result channel a PCI 16550 (the guest's
# ttyS0), with the arm64 initramfs ($OARBANK_INITRAMFS_ARM64, default
# build-arm64/kernel-matrix/initramfs.cpio.zst). Its accelerator is TCG.
#
# Environment: OARBANK_KERNELS_JSON (default fixtures/kernels.json),
# OARBANK_ACCEL (auto|kvm|tcg, default auto), OARBANK_KVM_CPU
# (default host), OARBANK_GUEST_TIMEOUT (seconds, default 600; 900 for arm64),
# OARBANK_GUEST_MEM (MiB, default 1024), OARBANK_BOOT (vmlinux: PVH boot of
# the decompressed kernel, the default when the cache has one; vmlinuz: the
# bzImage), OARBANK_GUEST_APPEND (more kernel command line, for example
# oarbank.conform="--policy=runner_strict" or oarbank.battery=0).
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${OARBANK_KERNEL_CACHE:-/var/cache/oarbank-kernels}"
initramfs="${OARBANK_INITRAMFS:-$src/build-static/kernel-matrix/initramfs.cpio.zst}"
py="${PYTHON:-/usr/bin/python3}"
kernels_json="${OARBANK_KERNELS_JSON:-$src/fixtures/kernels.json}"
qemu="${OARBANK_QEMU:-qemu-system-x86_64}"
timeout_s="${OARBANK_GUEST_TIMEOUT:-600}"
mem="${OARBANK_GUEST_MEM:-1024}"
say() { printf 'qemu-run: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

kernel_of() {  # ID -> the kernel image to boot
  local rec="$cache/kernels/$1.json"
  [[ -f "$rec" ]] || die "no kernel for $1 in $cache (run scripts/kernels-fetch.sh $1)"
  "$py" -c '
import json, os, sys
r = json.load(open(sys.argv[1]))
boot = sys.argv[2]
if boot == "vmlinux" and r.get("vmlinux") and os.path.exists(r["vmlinux"]):
    print("vmlinux", r["vmlinux"])
else:
    print("vmlinuz", r["vmlinuz"])' "$rec" "${OARBANK_BOOT:-vmlinux}"
}

row_of() {  # ID KEY -> the row's KEY (a.b: b of a): a list as N,M; true as 1; absent as nothing
  "$py" -c '
import json, sys
rows = {g["id"]: g for g in json.load(open(sys.argv[1]))["guests"]}
v = rows.get(sys.argv[2], {})
for k in sys.argv[3].split("."):
    v = v.get(k, "") if isinstance(v, dict) else ""
print(",".join(map(str, v)) if isinstance(v, list) else 1 if v is True else "" if v is False else v)' "$kernels_json" "$1" "$2"
}

arch_of() {  # ID -> amd64 or arm64
  local arch
  arch=$(row_of "$1" arch)
  echo "${arch:-amd64}"
}

# Boots the first cached kernel with ACCEL until /init runs (oarbank.probe=1).
probe_boot() {  # ACCEL [CPU]
  local rec spec kind image log ok=1
  command -v "$qemu" >/dev/null || return 1
  rec=""
  for r in "$cache"/kernels/*.json; do  # the first x86-64 kernel: KVM is for those only
    [[ -f "$r" && "$(arch_of "$(basename "$r" .json)")" == amd64 ]] && { rec="$r"; break; }
  done
  [[ -n "$rec" && -f "$initramfs" ]] || return 1
  spec=$(kernel_of "$(basename "$rec" .json)") || return 1
  read -r kind image <<<"$spec"
  local args=(-accel "$1")
  [[ -n "${2:-}" ]] && args+=(-cpu "$2")
  log=$(mktemp)
  timeout -k 2 "${OARBANK_ACCEL_PROBE_TIMEOUT:-20}" "$qemu" -nodefaults -no-reboot -display none -m 512 -smp 1 \
    "${args[@]}" -serial "file:$log" -kernel "$image" -initrd "$initramfs" \
    -append "console=ttyS0 quiet panic=-1 rdinit=/init oarbank.probe=1" </dev/null >/dev/null 2>&1 || true
  grep -q OARBANK-GUEST-ALIVE "$log" && ok=0
  rm -f "$log"
  return "$ok"
}

# Does KVM work here? /dev/kvm may exist and still abort or crawl (a nested,
# software hypervisor: QEMU aborts on an MSR, or boots at a fraction of TCG's
# speed). A guest that reaches /init within the probe's timeout decides.
detect_accel() {
  case "${OARBANK_ACCEL:-auto}" in
    kvm | tcg) echo "$OARBANK_ACCEL"; return ;;
  esac
  if [[ -r /dev/kvm && -w /dev/kvm ]] && probe_boot kvm "${OARBANK_KVM_CPU:-host}"; then echo kvm; else echo tcg; fi
}

if [[ "${1:-}" == --detect-accel ]]; then detect_accel; exit 0; fi
if [[ "${1:-}" == --probe-boot ]]; then probe_boot "${2:-tcg}" "${3:-}" && echo "boots under ${2:-tcg}"; exit; fi
[[ $# -eq 2 ]] || { echo "usage: $0 ID OUTDIR | --detect-accel" >&2; exit 64; }
id="$1"
dir="$2/$id"
spec=$(kernel_of "$id") || exit 1
read -r kind image <<<"$spec"
arch=$(arch_of "$id")
rm -rf "$dir"
mkdir -p "$dir"
if [[ "$arch" == arm64 ]]; then
  qemu="${OARBANK_QEMU_ARM64:-qemu-system-aarch64}"
  initramfs="${OARBANK_INITRAMFS_ARM64:-$src/build-arm64/kernel-matrix/initramfs.cpio.zst}"
  [[ -f "$initramfs" ]] || die "no arm64 initramfs at $initramfs (run OARBANK_ARCH=arm64 scripts/initramfs-build.sh)"
  accel=tcg
  # A whole battery under aarch64 TCG takes 3-7 minutes (9 on a busy machine).
  [[ -z "${OARBANK_GUEST_TIMEOUT:-}" ]] && timeout_s=900
  machine_args=(-M virt -accel tcg -cpu "${OARBANK_TCG_CPU_ARM64:-max,pauth-impdef=on}"
    -serial "file:$dir/console.log"
    -chardev "file,id=results,path=$dir/serial1.txt" -device pci-serial,chardev=results)
  console="console=ttyAMA0 oarbank.results=ttyS0"
else
  [[ -f "$initramfs" ]] || die "no initramfs at $initramfs (run scripts/initramfs-build.sh)"
  accel="${OARBANK_ACCEL_RESOLVED:-$(detect_accel)}"
  machine_args=(-accel tcg)
  [[ -n "${OARBANK_TCG_CPU:-}" ]] && machine_args+=(-cpu "$OARBANK_TCG_CPU")
  [[ "$accel" == kvm ]] && machine_args=(-accel kvm -cpu "${OARBANK_KVM_CPU:-host}")
  machine_args+=(-serial "file:$dir/console.log" -serial "file:$dir/serial1.txt")
  console="console=ttyS0"
fi
command -v "$qemu" >/dev/null || die "needs $qemu (apt-get install qemu-system-x86 qemu-system-arm)"
# The kernel unpacks concatenated archives in order: a row's extra archives
# after the common one (workloads: the everyday programs; egress_any: the
# job network's stack, helper and this kernel's modules).
extra=()
if [[ "$(row_of "$id" workloads)" == 1 ]]; then
  workloads="${OARBANK_WORKLOADS:-$src/build-static/kernel-matrix/workloads.cpio.zst}"
  [[ -f "$workloads" ]] || die "no workloads archive at $workloads (run scripts/initramfs-workloads.sh)"
  extra+=("$workloads")
fi
if [[ "$(row_of "$id" egress_any)" == 1 ]]; then
  egress_any="${OARBANK_EGRESS_ANY_DIR:-$src/build-static/kernel-matrix}/egress-any-$id.cpio.zst"
  [[ -f "$egress_any" ]] || die "no egress-any archive at $egress_any (run scripts/initramfs-egress-any.sh $id)"
  extra+=("$egress_any")
fi
if ((${#extra[@]})); then
  cat "$initramfs" "${extra[@]}" >"$dir/initrd"
  initramfs="$dir/initrd"
fi

capped=$(row_of "$id" capped)
broken=$(row_of "$id" expect.broken_filter)
mutants=$(row_of "$id" mutants)
append="$console quiet loglevel=1 panic=-1 rdinit=/init $(row_of "$id" append)${capped:+ oarbank.capped=$capped}"
append+="${broken:+ oarbank.broken_filter=$broken}${mutants:+ oarbank.mutants=$mutants} ${OARBANK_GUEST_APPEND:-}"
start=$(date +%s.%N)
started=$SECONDS
say "[$id] booting $(basename "$image") ($arch, $kind, $accel, ${mem} MiB, timeout ${timeout_s}s)"
timeout -k 5 "$timeout_s" "$qemu" -nodefaults -no-reboot -display none -m "$mem" -smp 1 "${machine_args[@]}" \
  -kernel "$image" -initrd "$initramfs" -append "$append" </dev/null >"$dir/qemu.log" 2>&1 &
qpid=$!
seen=0
last_note=$SECONDS
while kill -0 "$qpid" 2>/dev/null; do
  sleep 1
  if [[ -f "$dir/console.log" ]]; then
    n=$(grep -c '^oarbank-guest:' "$dir/console.log" 2>/dev/null || true)
    if (( n > seen )); then
      grep '^oarbank-guest:' "$dir/console.log" | tail -n "+$((seen + 1))" | head -n "$((n - seen))" |
        sed -u "s/^oarbank-guest: /qemu-run: [$id] /" >&2
      seen=$n
      last_note=$SECONDS
    fi
  fi
  if (( SECONDS - last_note >= 30 )); then
    say "[$id] running, $((SECONDS - started)) s"
    last_note=$SECONDS
  fi
done
rc=0
wait "$qpid" || rc=$?
rm -f "$dir/initrd"
end=$(date +%s.%N)

"$py" - "$dir" "$id" "$cache/kernels/$id.json" "$kind" "$accel" "$start" "$end" "$rc" "$timeout_s" "$arch" <<'PY'
import base64, io, json, os, sys, tarfile
d, id_, rec, kind, accel, start, end, rc, timeout_s, arch = sys.argv[1:]
rc = int(rc)
text = open(os.path.join(d, "serial1.txt"), "rb").read().decode("ascii", "replace") if os.path.exists(os.path.join(d, "serial1.txt")) else ""
results = False
error = ""
b, e = text.find("OARBANK-RESULTS-BEGIN"), text.find("OARBANK-RESULTS-END")
if b >= 0 and e > b:
    body = "".join(c for c in text[b + len("OARBANK-RESULTS-BEGIN"):e] if c.isalnum() or c in "+/=")
    try:
        tarfile.open(fileobj=io.BytesIO(base64.b64decode(body)), mode="r:gz").extractall(os.path.join(d, "results"))
        results = True
    except Exception as exc:  # a truncated channel: say so, the test fails on it
        error = f"cannot unpack the results: {exc}"
else:
    error = "no results on ttyS1 (the guest did not finish)"
guest = {"id": id_, "arch": arch, "kernel": json.load(open(rec)), "boot": kind, "accel": accel,
         "wall_s": round(float(end) - float(start), 2), "qemu_rc": rc,
         "timed_out": rc in (124, 137), "timeout_s": int(timeout_s), "results": results, "error": error}
def up(name):
    try:
        return float(open(os.path.join(d, "results", name)).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
guest["guest_uptime"] = {k: up("uptime-" + k) for k in ("init", "battery-start", "battery-end", "end")}
json.dump(guest, open(os.path.join(d, "guest.json"), "w"), indent=2)
PY
wall=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_s"])' "$dir/guest.json")
if [[ -d "$dir/results" ]]; then
  say "[$id] done in ${wall} s (qemu exit $rc)"
  exit 0
fi
(( rc == 124 || rc == 137 )) && say "[$id] TIMED OUT after ${timeout_s} s" || say "[$id] no results after ${wall} s (qemu exit $rc)"
tail -20 "$dir/console.log" 2>/dev/null | sed "s/^/qemu-run: [$id] console: /" >&2 || true
exit 1
