#!/usr/bin/env bash
# The C++ sources against the house style (.clang-format): lists every
# place that differs and exits non-zero if any does. `--fix` rewrites the
# files instead. The escape probes (escapes/*.c) are C and keep their own
# layout.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed" >&2; exit 1; }
mapfile -t files < <(git ls-files 'sandbox/*.cc' 'sandbox/*.h' 'harness/*.cc' 'harness/*.h' 'include/*.h' \
  'bench/*.cc' 'tests/*.cc')
if [[ "${1:-}" == --fix ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files follow .clang-format"
