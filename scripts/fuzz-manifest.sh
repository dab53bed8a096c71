#!/usr/bin/env bash
# Fuzzes the manifest parser and the approval digest (sandbox/manifest/manifest_fuzz.cc)
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

source "$(dirname "${BASH_SOURCE[0]}")/fuzz-common.sh"
fuzz_setup manifest manifest_fuzz "$@"

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

fuzz_run "$corpus" "$dict" 8192
