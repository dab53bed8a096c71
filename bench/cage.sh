#!/usr/bin/env bash
# bench/cage.sh: the cost of `oarbank-agent cage -- /bin/true` on a git
# worktree, against the equivalent bubblewrap command, in one hyperfine run.
#
#   bench/cage.sh              as the calling user (root is fine)
#   AS_NOBODY=1 bench/cage.sh  everything as uid/gid 65534 (rootless)
#
# The worktree is a real repository (`git init`, one commit) with a state
# directory and a scratch beside it. The commands, timed together (they
# share the machine's state):
#   bare   /bin/true
#   cage   oarbank-agent cage --worktree WT --writable --state STATE
#          --scratch SCRATCH -- /bin/true: the supervised job (user, pid,
#          ipc, uts, mnt and an empty net namespace, init, Landlock +
#          seccomp, the gate's check, exec), with WT/.git resolved and
#          bound read-only
#   bwrap  the shape a coding-agent CLI gives bubblewrap: --ro-bind / /,
#          the writable roots bound read-write, WT/.git re-bound read-only,
#          --dev /dev, --proc /proc, --unshare-all, --new-session,
#          --die-with-parent
# and prints the medians, minima and the ratios cage/bwrap and cage/bare.
# The cage runs --unproven unless ATTEST=1, which runs the battery first
# (minutes) and times the proof check against its attestation as well.
# Environment: BUILD_DIR (default <repo>/build), RUNS (default 100),
# KEEP_TMP=1.
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent"
readonly RUNS="${RUNS:-100}" WARMUP=10 NOBODY_ID=65534

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0" >&2; exit 64 ;;
esac

die() { echo "bench: $*" >&2; exit 1; }
for tool in hyperfine bwrap git jq bc; do
  command -v "$tool" >/dev/null || die "$tool is not installed"
done
[[ -x "$AGENT" ]] || die "no $AGENT (build first: cmake -S . -B build -G Ninja && ninja -C build)"

RUN_AS=()
OWNER="$(id -u)"
if [[ "${AS_NOBODY:-0}" == 1 ]]; then
  [[ "$(id -u)" == 0 ]] || die "AS_NOBODY=1 needs root (setpriv --reuid)"
  RUN_AS=(setpriv --reuid="$NOBODY_ID" --regid="$NOBODY_ID" --clear-groups)
  OWNER=$NOBODY_ID
fi

TMP=$(mktemp -d /tmp/oarbank-bench-cage-XXXXXX)
chmod 755 "$TMP"
[[ "${KEEP_TMP:-0}" == 1 ]] || trap 'rm -rf "$TMP"' EXIT
readonly WT="$TMP/repo" STATE="$TMP/state" SCRATCH="$TMP/scratch"
mkdir -p "$STATE" "$SCRATCH" "$TMP/out"
git init -q "$WT"
echo one >"$WT/file"
git -C "$WT" add file
git -C "$WT" -c user.name=bench -c user.email=bench@example.org commit -q -m one
chown -R "$OWNER:$OWNER" "$WT" "$STATE" "$SCRATCH" "$TMP/out"

PROOF=(--unproven)
if [[ "${ATTEST:-0}" == 1 ]]; then
  "$BUILD_DIR/harness/oarbank-conform" --out "$TMP/battery" --attest "$TMP/attestation.json" >"$TMP/out/conform.txt" 2>&1 ||
    { tail -5 "$TMP/out/conform.txt"; die "the battery did not pass: nothing to time"; }
  export OARBANK_BATTERY_ATTESTATION="$TMP/attestation.json"
  PROOF=()
fi

readonly CAGE="$AGENT cage ${PROOF[*]} --worktree $WT --writable --state $STATE --scratch $SCRATCH -- /bin/true"
readonly BWRAP="bwrap --new-session --die-with-parent --ro-bind / / --dev /dev --proc /proc \
--bind $WT $WT --bind $STATE $STATE --bind $SCRATCH $SCRATCH --ro-bind $WT/.git $WT/.git --unshare-all /bin/true"

# Every command must work, and the cage must hold .git read-only, before
# anything is timed.
"${RUN_AS[@]}" $CAGE || die "oarbank-agent cage failed (exit $?)"
"${RUN_AS[@]}" $BWRAP || die "bwrap failed (exit $?)"
if "${RUN_AS[@]}" $AGENT cage "${PROOF[@]}" --worktree "$WT" --writable -- /bin/sh -c "echo x >>$WT/.git/config" 2>/dev/null; then
  die "the cage let .git/config be written"
fi

echo "bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); as uid $([[ ${#RUN_AS[@]} -gt 0 ]] && echo $NOBODY_ID || id -u); proof: ${PROOF[*]:-attested}"
names=(bare cage bwrap)
"${RUN_AS[@]}" hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$TMP/out/cage.json" \
  /bin/true "$CAGE" "$BWRAP" >"$TMP/out/hyperfine.txt" 2>&1 || { cat "$TMP/out/hyperfine.txt"; die "hyperfine failed"; }

median() { jq -r ".results[$1].median * 1000" "$TMP/out/cage.json"; }
minimum() { jq -r ".results[$1].min * 1000" "$TMP/out/cage.json"; }
echo
printf '%-8s %10s %10s\n' command "median ms" "min ms"
for i in "${!names[@]}"; do
  printf '%-8s %10.2f %10.2f\n' "${names[$i]}" "$(median "$i")" "$(minimum "$i")"
done
echo
printf 'cage / bwrap = %.2fx (median), %.2fx (min)\n' "$(echo "$(median 1) / $(median 2)" | bc -l)" \
  "$(echo "$(minimum 1) / $(minimum 2)" | bc -l)"
printf 'cage / bare  = %.2fx (median), %.2fx (min)\n' "$(echo "$(median 1) / $(median 0)" | bc -l)" \
  "$(echo "$(minimum 1) / $(minimum 0)" | bc -l)"
