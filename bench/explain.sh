#!/usr/bin/env bash
# bench/explain.sh: what `--explain` costs a build-like job under `cage`,
# against the same job without it and bare, in one hyperfine run.
#
#   bench/explain.sh              as the calling user (root is fine)
#   AS_NOBODY=1 bench/explain.sh  everything as uid/gid 65534
#
# The job walks /usr/include and reads up to FILES headers (default 2000)
# through cat and sh, as a compiler's preprocessor and a build's shell
# steps open files. The commands, timed together:
#   bare     the job itself
#   cage     oarbank-agent cage --worktree WT --writable --scratch S -- job
#   explain  the same with --explain: every process traced by strace from
#            outside the cage, and the refusals explained at the end
# and prints the medians and the ratios explain/cage and cage/bare.
# Environment: BUILD_DIR (default <repo>/build), RUNS (default 10), FILES.
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
readonly AGENT="$BUILD_DIR/sandbox/oarbank-agent"
readonly RUNS="${RUNS:-10}" FILES="${FILES:-2000}" NOBODY_ID=65534

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0" >&2; exit 64 ;;
esac

die() { echo "bench: $*" >&2; exit 1; }
for tool in hyperfine jq bc strace; do
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

TMP=$(mktemp -d /tmp/oarbank-bench-explain-XXXXXX)
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT
readonly WT="$TMP/wt" SCRATCH="$TMP/scratch"
mkdir -p "$WT" "$SCRATCH" "$TMP/out"
cat >"$WT/job.sh" <<JOB
#!/bin/sh
find /usr/include -name '*.h' | head -n $FILES | while read -r f; do cat "\$f"; done >/dev/null
JOB
chmod 755 "$WT/job.sh"
chown -R "$OWNER:$OWNER" "$WT" "$SCRATCH" "$TMP/out"

readonly JOB="/bin/sh $WT/job.sh"
readonly CAGE="$AGENT cage --unproven --worktree $WT --writable --scratch $SCRATCH -- $JOB"
readonly EXPLAIN="$AGENT cage --unproven --explain --worktree $WT --writable --scratch $SCRATCH -- $JOB"

# Every command must work, and --explain must explain, before anything is timed.
"${RUN_AS[@]}" $CAGE || die "oarbank-agent cage failed (exit $?)"
"${RUN_AS[@]}" $EXPLAIN 2>"$TMP/out/explain.txt" || die "cage --explain failed (exit $?)"
grep -q "explain: the cage refused nothing" "$TMP/out/explain.txt" || { cat "$TMP/out/explain.txt"; die "no explanation"; }

echo "bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $FILES files; as uid $([[ ${#RUN_AS[@]} -gt 0 ]] && echo $NOBODY_ID || id -u)"
names=(bare cage explain)
"${RUN_AS[@]}" hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$TMP/out/explain.json" \
  "$JOB" "$CAGE" "$EXPLAIN" >"$TMP/out/hyperfine.txt" 2>&1 || { cat "$TMP/out/hyperfine.txt"; die "hyperfine failed"; }

median() { jq -r ".results[$1].median * 1000" "$TMP/out/explain.json"; }
echo
printf '%-8s %10s\n' command "median ms"
for i in "${!names[@]}"; do printf '%-8s %10.1f\n' "${names[$i]}" "$(median "$i")"; done
echo
printf 'explain / cage = %.2fx (median)\n' "$(echo "$(median 2) / $(median 1)" | bc -l)"
printf 'cage / bare    = %.2fx (median)\n' "$(echo "$(median 1) / $(median 0)" | bc -l)"
