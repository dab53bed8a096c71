#!/usr/bin/env bash
# Fuzzes the manifest parser and the approval digest (sandbox/manifest_fuzz.cc)
# for a bounded time.
#
#   scripts/fuzz-manifest.sh [SECONDS]     (default 60)
#
# Configures build-fuzz/ exactly as scripts/fuzz-policy.sh does (so that in
# scripts/test.sh the instrumented library is built once for both targets;
# OARBANK_FUZZ_BUILD names another directory), builds manifest_fuzz, seeds a
# corpus from fixtures/manifests and runs libFuzzer. Exits non-zero if the
# fuzzer finds a crash, a sanitizer report, a leak, a timeout or an
# out-of-memory; the input is kept in BUILD/artifacts-manifest/.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
  echo "usage: $0 [SECONDS]  (a positive number of seconds, default 60)" >&2
  exit 64
fi

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OARBANK_FUZZ_BUILD:-$src/build-fuzz}"
artifacts="$build/artifacts-manifest"

# Instrument the library too (fuzzer-no-link), or libFuzzer would get no
# coverage from the parser it is meant to explore.
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOARBANK_FUZZ=ON -DOARBANK_TESTS=OFF \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" >/dev/null
ninja -C "$build" manifest_fuzz

scratch="$(mktemp -d "${TMPDIR:-/tmp}/oarbank-fuzz-manifest.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
corpus="$scratch/corpus"
mkdir -p "$corpus"
for kind in valid invalid; do
  for f in "$src/fixtures/manifests/$kind"/*.toml; do
    [[ -e "$f" ]] || continue
    cp "$f" "$corpus/$kind-$(basename "$f")"
  done
done
for f in "$src/fixtures/modules"/*/manifest.toml; do
  [[ -e "$f" ]] && cp "$f" "$corpus/module-$(basename "$(dirname "$f")").toml"
done
if [[ -z "$(ls -A "$corpus")" ]]; then echo "fuzz-manifest: no fixtures under $src/fixtures/manifests" >&2; exit 1; fi

# Words the parser knows, so mutations reach the key checks.
dict="$scratch/manifest.dict"
{
  for word in module name version platforms sandbox contract net mode allow tools id trust devices gpu \
              containers image platform exec_writable none egress-allowlist egress-any code-exec compute \
              linux macos windows linux/amd64 linux/arm64; do
    printf '"%s"\n' "$word"
  done
  printf '"%s"\n' '[sandbox]' '[module]' '[[sandbox.tools]]' '[sandbox.net]' '*.' ':443' ':65536' '@sha256:' \
    '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef' '= {' '= [' 'true' 'false' '\\u0000'
} >"$dict"

mkdir -p "$artifacts"
echo "fuzz-manifest: $(ls "$corpus" | wc -l) seeds, ${seconds}s"
status=0
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
  "$build/sandbox/manifest_fuzz" "$corpus" \
  -dict="$dict" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=8192 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?

if (( status != 0 )); then
  echo "fuzz-manifest: FAILED (exit $status); inputs in $artifacts:" >&2
  ls -t "$artifacts" | head -5 >&2
  exit "$status"
fi
echo "fuzz-manifest: no crash in ${seconds}s"
