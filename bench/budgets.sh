#!/usr/bin/env bash
# bench/budgets.sh: the benchmarks in a quick mode, each ratio held to its
# checked-in budget (bench/budgets.tsv) with room for noise.
#
#   bench/budgets.sh
#
# Runs bench/battery.sh --quick, bench/run.sh and bench/supervise.sh with
# fewer launches and bench/egress_any.sh with a smaller transfer, reads their `ratio NAME VALUE` lines and fails (exit 1)
# when a ratio is more than 1.5 times its budget: a regression, never an
# absolute time (every ratio is against a baseline measured in the same
# run). A ratio the scripts did not print fails too. The goals themselves
# (PASS/MISS) are the scripts' own, printed as they run. Refresh a budget
# by copying the ratio of a quiet run into bench/budgets.tsv. Runs as root
# (the battery).
set -euo pipefail

readonly BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SLACK=1.5

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "== bench/battery.sh --quick"
"$BENCH/battery.sh" --quick | tee -a "$out"
echo "== bench/run.sh (RUNS=50)"
RUNS=50 WARMUP=5 "$BENCH/run.sh" | tee -a "$out"
echo "== bench/supervise.sh (RUNS=50)"
RUNS=50 "$BENCH/supervise.sh" | tee -a "$out"
echo "== bench/egress_any.sh (16 MiB, 20 connections)"
"$BENCH/egress_any.sh" --bytes 16777216 --samples 20 | tee -a "$out"

echo "== budgets (a ratio fails past ${SLACK}x its budget)"
failed=0
while IFS=$'\t' read -r name budget script what; do
  [[ "$name" == name ]] && continue
  value=$(awk -v n="$name" '$1 == "ratio" && $2 == n { v = $3 } END { print v }' "$out")
  if [[ -z "$value" ]]; then
    echo "FAIL  $name: $script printed no ratio"
    failed=1
    continue
  fi
  verdict=$(awk -v v="$value" -v b="$budget" -v s="$SLACK" 'BEGIN { print (v <= b * s ? "ok" : "FAIL") }')
  printf '%-4s  %s: %.2f (budget %s, fails past %.2f): %s\n' "$verdict" "$name" "$value" "$budget" \
    "$(awk -v b="$budget" -v s="$SLACK" 'BEGIN { print b * s }')" "$what"
  [[ "$verdict" == ok ]] || failed=1
done <"$BENCH/budgets.tsv"
exit "$failed"
