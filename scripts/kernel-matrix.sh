#!/usr/bin/env bash
# The kernel matrix, from a clean clone, in one command:
#
#   scripts/kernel-matrix.sh [--kernels 5.10,6.12,...|--no-guests] [--capped 1,2,...|--no-capped]
#                            [--jobs N] [--out DIR]
#
# 1. installs what it needs (qemu-system-x86, cpio, busybox-static, the build
#    dependencies; for arm64 guests qemu-system-arm and the cross compilers)
#    when missing, as root through the system's apt;
# 2. fetches the kernels of fixtures/kernels.json into the cache
#    (scripts/kernels-fetch.sh; $OARBANK_KERNEL_CACHE, default /var/cache/oarbank-kernels);
# 3. builds the static harness and the initramfs (scripts/initramfs-build.sh)
#    (and the workloads archive where a chosen row asks: initramfs-workloads.sh;
#    a row with egress_any its own egress-any archive: initramfs-egress-any.sh),
#    and for arm64 guests the cross build (scripts/cross-arm64.sh) and its
#    initramfs (OARBANK_ARCH=arm64);
# 4. boots every guest (scripts/qemu-run.sh), --jobs at a time (default 2),
#    longest first, and prints the time per guest; each guest runs
#    oarbank-conform once, inside;
# 5. runs the battery on this host with the launcher capped at every
#    Landlock ABI from 1 to the host's (oarbank-conform --landlock-abi-max N),
#    so ABIs no Debian kernel offers are covered too; the report marks them capped;
#    and once with the test-only agent taking signal scoping as missing (a
#    kernel that reports ABI 6 without it), which must refuse every policy;
# 6. writes the kernel x probe matrix (harness/matrix_report.py:
#    matrix.json, matrix.xml, matrix.html in DIR) and runs the pytest driver
#    (harness/test_kernel_matrix.py) on the results. Its exit status is this
#    script's.
# DIR defaults to $OARBANK_KERNEL_MATRIX_OUT or build-static/kernel-matrix/out.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$src"
py="${PYTHON:-/usr/bin/python3}"
kernels_json="${OARBANK_KERNELS_JSON:-$src/fixtures/kernels.json}"
out="${OARBANK_KERNEL_MATRIX_OUT:-$src/build-static/kernel-matrix/out}"
jobs="${OARBANK_KERNEL_MATRIX_JOBS:-2}"
kernels=""
capped="auto"
say() { printf 'kernel-matrix: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

while (($#)); do
  case "$1" in
    --kernels) kernels="${2//,/ }"; shift 2 ;;
    --kernels=*) kernels="${1#*=}"; kernels="${kernels//,/ }"; shift ;;
    --capped) capped="${2//,/ }"; shift 2 ;;
    --capped=*) capped="${1#*=}"; capped="${capped//,/ }"; shift ;;
    --no-capped) capped=""; shift ;;
    --no-guests) kernels="none"; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    --jobs=*) jobs="${1#*=}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--kernels ID,...|--no-guests] [--capped N,...|--no-capped] [--jobs N] [--out DIR]" >&2; exit 64 ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number"
all_ids=$("$py" -c 'import json,sys; print(" ".join(g["id"] for g in json.load(open(sys.argv[1]))["guests"]))' "$kernels_json")
kernels="${kernels:-$all_ids}"
[[ "$kernels" == none ]] && kernels=""
for k in $kernels; do [[ " $all_ids " == *" $k "* ]] || die "no guest $k in $kernels_json (have: $all_ids)"; done
# The chosen guests whose row has KEY set to VALUE (JSON: "arm64", true).
rows_where() {  # KEY VALUE
  # shellcheck disable=SC2086
  "$py" -c '
import json, sys
rows = {g["id"]: g for g in json.load(open(sys.argv[1]))["guests"]}
key, value = sys.argv[2], json.loads(sys.argv[3])
print(" ".join(i for i in sys.argv[4:] if rows[i].get(key) == value))' "$kernels_json" "$1" "$2" $kernels
}
arm64_guests=$(rows_where arch '"arm64"')
workload_guests=$(rows_where workloads true)
egress_any_guests=$(rows_where egress_any true)
t0=$SECONDS

# 1. Tools.
need=(qemu-system-x86 cpio busybox-static zstd lz4 xz-utils binutils musl-tools
      cmake ninja-build g++ pkg-config libseccomp-dev nlohmann-json3-dev libcli11-dev python3-pytest)
[[ -n "$arm64_guests" ]] && need+=(qemu-system-arm gcc-aarch64-linux-gnu g++-aarch64-linux-gnu file)
[[ -n "$workload_guests" ]] && need+=(python3 tmux)
[[ -n "$egress_any_guests" ]] && need+=(slirp4netns iproute2 kmod libnftables-dev libmnl-dev)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  [[ $(id -u) == 0 ]] || die "missing packages (${missing[*]}); run as root to install them"
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ $(id -u) == 0 ]] || die "needs root (the host runs of the battery switch uids)"

static="${OARBANK_STATIC_BUILD:-$src/build-static}"
if [[ -n "$kernels" ]]; then
  # 2. Kernels.
  say "== kernels ($kernels)"
  # shellcheck disable=SC2086
  OARBANK_KERNELS_JSON="$kernels_json" scripts/kernels-fetch.sh $kernels >/dev/null
  # 3. Static harness and initramfs.
  say "== initramfs"
  initramfs=$(scripts/initramfs-build.sh)
  export OARBANK_INITRAMFS="$initramfs"
  if [[ -n "$workload_guests" ]]; then
    OARBANK_WORKLOADS=$(scripts/initramfs-workloads.sh)
    export OARBANK_WORKLOADS
  fi
  # A row with egress_any: the job network's stack, helper and that
  # kernel's modules, in an archive of its own.
  export OARBANK_EGRESS_ANY_DIR="$static/kernel-matrix"
  for id in $egress_any_guests; do
    scripts/initramfs-egress-any.sh "$id" "$OARBANK_EGRESS_ANY_DIR/egress-any-$id.cpio.zst" >/dev/null
  done
  if [[ -n "$arm64_guests" ]]; then
    say "== arm64 cross build and initramfs ($arm64_guests)"
    t_cross=$SECONDS
    OARBANK_INITRAMFS_ARM64=$(OARBANK_ARCH=arm64 scripts/initramfs-build.sh)
    export OARBANK_INITRAMFS_ARM64
    say "arm64 build and initramfs: $((SECONDS - t_cross)) s"
  fi
else
  say "== static build (no guests)"
  scripts/static-configure.sh "$static"
  ninja -C "$static" oarbank-agent oarbank-agent-faulty oarbank-conform probes >/dev/null
fi

# 4 and 5: one pool, guests first (full batteries before refusals), then capped runs.
accel=tcg
[[ -n "$kernels" ]] && accel=$(scripts/qemu-run.sh --detect-accel)
export OARBANK_ACCEL_RESOLVED="$accel"
host_abi=$("$static/sandbox/oarbank-agent" sandbox-report | "$py" -c 'import json,sys; print(json.load(sys.stdin)["landlock"]["kernel_abi"])')
if [[ "$capped" == auto ]]; then
  capped=""
  for ((n = 1; n <= host_abi; n++)); do capped+="$n "; done
fi
for n in $capped; do
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= host_abi)) || die "--capped $n: the host offers Landlock ABI 1..$host_abi (a cap can only lower it)"
done
# shellcheck disable=SC2086
ordered=$("$py" - "$kernels_json" $kernels <<'PY'
import json, sys
rows = {g["id"]: g for g in json.load(open(sys.argv[1]))["guests"]}
ids = sys.argv[2:]
# Longest first: a battery in an arm64 guest takes ~4 min under TCG, in an
# x86-64 one ~1 min, a guest that refuses everything under a minute.
print(" ".join(sorted(ids, key=lambda i: (rows[i]["expect"]["battery"] != "pass", rows[i].get("arch") != "arm64",
                                         ids.index(i)))))
PY
)
rm -rf "$out"
mkdir -p "$out/guests" "$out/capped" "$out/missing"
cp "$kernels_json" "$out/kernels.json"
say "== guests: ${ordered:-none} ($accel, $jobs at a time); capped host runs: ${capped:-none} (host Landlock ABI $host_abi)"

declare -A name_of=()
guests_left=$(wc -w <<<"$ordered")
((guests_left)) || guests_wall=0
guests_t0=$SECONDS
guests_wall=""
status_file="$out/times.tsv"
: >"$status_file"
run_item() {  # KIND ID
  local kind="$1" id="$2" t=$SECONDS rc=0
  if [[ "$kind" == guest ]]; then
    OARBANK_KERNELS_JSON="$kernels_json" scripts/qemu-run.sh "$id" "$out/guests" >"$out/guests/$id.log" 2>&1 || rc=$?
  elif [[ "$kind" == missing ]]; then
    # The test-only agent of the main build (build/), told a feature of its
    # ABI is missing: not a real kernel, like the capped runs.
    mkdir -p "$out/missing/$id"
    "$src/build/harness/oarbank-conform" --agent "$src/build/sandbox/oarbank-agent-faulty" \
      --agent-env "OARBANK_FAULT_LANDLOCK_MISSING=$id" --out "$out/missing/$id" \
      >"$out/missing/$id/conform.log" 2>&1 || rc=$?
    echo "$rc" >"$out/missing/$id/conform.rc"
    rc=0
    [[ -f "$out/missing/$id/battery.json" ]] || rc=1
  else
    mkdir -p "$out/capped/$id"
    "$static/harness/oarbank-conform" --agent "$static/sandbox/oarbank-agent" --probes "$static/probes" \
      --policies "$src/fixtures/policies/battery" --expectations "$src/escapes/expectations.tsv" \
      --catalogue-table "$src/escapes/catalogue.tsv" \
      --landlock-abi-max "$id" --out "$out/capped/$id" >"$out/capped/$id/conform.log" 2>&1 || rc=$?
    echo "$rc" >"$out/capped/$id/conform.rc"
    rc=0
    [[ -f "$out/capped/$id/battery.json" ]] || rc=1
  fi
  printf '%s\t%s\t%s\t%s\n' "$kind" "$id" "$((SECONDS - t))" "$rc" >>"$status_file"
  return "$rc"
}
report_done() {  # PID
  local pid="$1" line kind id secs rc
  line=$(grep -P "^${name_of[$pid]%%:*}\t${name_of[$pid]#*:}\t" "$status_file" | tail -1)
  IFS=$'\t' read -r kind id secs rc <<<"$line"
  if [[ "$kind" == guest ]]; then
    local facts
    facts=$("$py" - "$out/guests/$id" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(name):
    try: return json.load(open(os.path.join(d, "results", name)))
    except Exception: return None
g = json.load(open(os.path.join(d, "guest.json"))) if os.path.exists(os.path.join(d, "guest.json")) else {}
r, v, b = load("sandbox-report.json"), load("verdict.json"), load("battery/battery.json")
abi = r["landlock"]["kernel_abi"] if r else "?"
verdict = v["placement"]["verdict"] if v else "?"
battery = b["summary"].split(": ", 2)[-1] if b else "no battery report"
up = g.get("guest_uptime", {})
bt = (up.get("battery-end") or 0) - (up.get("battery-start") or 0)
print(f"ABI {abi}, {verdict}, battery {b['verdict'] if b else '-'} ({battery}); boot to /init {up.get('init')} s, battery {bt:.0f} s")
PY
)
    say "guest $id: ${secs} s$( ((rc)) && echo ' FAILED (see '"$out/guests/$id.log"')'): $facts"
    guests_left=$((guests_left - 1))
    if ((guests_left == 0)); then
      guests_wall=$((SECONDS - guests_t0))
      say "guests: all finished in ${guests_wall} s"
    fi
  elif [[ "$kind" == missing ]]; then
    say "without $id (host, test-only agent): ${secs} s: $(tail -2 "$out/missing/$id/conform.log" | head -1)"
  else
    say "capped ABI $id (host): ${secs} s: $(tail -2 "$out/capped/$id/conform.log" | head -1)"
  fi
}

items=()
for k in $ordered; do items+=("guest:$k"); done
for n in $capped; do items+=("capped:$n"); done
missing=""
if [[ -n "$capped" ]] && ((host_abi >= 6)); then
  if [[ -f "$src/build/build.ninja" ]] && ninja -C "$src/build" oarbank-agent-faulty oarbank-conform probes >/dev/null; then
    missing="scope_signal"
    items+=("missing:scope_signal")
  else
    say "no main build (build/, scripts/setup.sh): the run without signal scoping is left out"
  fi
fi
running=0
for item in "${items[@]}"; do
  while ((running >= jobs)); do
    wait -n -p done_pid || true
    report_done "$done_pid"
    running=$((running - 1))
  done
  run_item "${item%%:*}" "${item#*:}" &
  name_of[$!]="$item"
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n -p done_pid || true
  report_done "$done_pid"
  running=$((running - 1))
done

# 6. The matrix and the pytest driver.
say "== report"
"$py" harness/matrix_report.py --kernels "$out/kernels.json" --results "$out" --out "$out" \
  --guests "${kernels// /,}" || true
rc=0
OARBANK_KERNEL_MATRIX_RESULTS="$out" OARBANK_KERNEL_MATRIX_GUESTS="$kernels" OARBANK_KERNEL_MATRIX_CAPPED="$capped" \
  OARBANK_KERNEL_MATRIX_MISSING="$missing" \
  "$py" -m pytest -q -p no:cacheprovider harness/test_kernel_matrix.py --junitxml="$out/pytest.xml" || rc=$?
say "times (s):"
sort -t$'\t' -k1,1r -k2,2V "$status_file" | while IFS=$'\t' read -r kind id secs r; do
  printf '  %-7s %-5s %5s%s\n' "$kind" "$id" "$secs" "$( ((r)) && echo '  (failed)')"
done
say "guests ${guests_wall:-?} s; whole run $((SECONDS - t0)) s; matrix: $out/matrix.html"
exit "$rc"
