#!/usr/bin/env bash
# Fuzzes the policy parser (sandbox/policy/policy_fuzz.cc) for a bounded time.
#
#   scripts/fuzz-policy.sh [SECONDS]     (default 60)
#
# Builds policy_fuzz in build-fuzz/ (scripts/fuzz-common.sh),
# seeds a corpus from fixtures/policies with @ROOT@ replaced by a temporary
# directory laid out as the tests lay it out, and runs libFuzzer. Exits
# non-zero if the fuzzer finds a crash, a sanitizer report, a leak, a
# timeout or an out-of-memory; the input is kept in build-fuzz/artifacts-policy/.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/fuzz-common.sh"
fuzz_setup policy policy_fuzz "$@"

# The tree @ROOT@ stands for (see sandbox/policy/policy_test.cc, PolicyRoot).
scratch="$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/oarbank-fuzz.XXXXXX")")"
listener=""
cleanup() {
  if [[ -n "$listener" ]]; then kill "$listener" 2>/dev/null || true; wait "$listener" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT

root="$scratch/root"
mkdir -p "$root/bundle" "$root/runtime" "$root/tool" "$root/work/tmp" "$root/data/tmp"
printf '#!/bin/sh\n' >"$root/runtime-file"
ln -s bundle "$root/link-to-bundle"
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(1)
while True:
    time.sleep(3600)
' "$root/broker.sock" &
listener=$!
for _ in $(seq 50); do [[ -S "$root/broker.sock" ]] && break; sleep 0.1; done
if ! [[ -S "$root/broker.sock" ]]; then echo "fuzz-policy: could not create $root/broker.sock" >&2; exit 1; fi

corpus="$scratch/corpus"
mkdir -p "$corpus"
for kind in valid invalid; do
  for f in "$src/fixtures/policies/$kind"/*.json; do
    [[ -e "$f" ]] || continue
    sed "s|@ROOT@|$root|g" "$f" >"$corpus/$kind-$(basename "$f")"
  done
done
if [[ -z "$(ls -A "$corpus")" ]]; then echo "fuzz-policy: no fixtures under $src/fixtures/policies" >&2; exit 1; fi

# Words the parser knows, so mutations reach the field checks.
dict="$scratch/policy.dict"
{
  for word in contract role bundle runtime tools work data tmp net broker devices exec_writable limits \
              mode allow proxy_port id paths trust gpu mem_gb cpus coordinator runner service probe \
              none egress-allowlist egress-any compute code-exec; do
    printf '"\\"%s\\""\n' "$word"
  done
  for rel in bundle runtime runtime-file tool work work/tmp data data/tmp broker.sock link-to-bundle; do
    printf '"\\"%s/%s\\""\n' "$root" "$rel"
  done
  printf '"%s"\n' '*.' ':443' '::1' '/usr' '/' '..' 'true' 'false' 'null' '65535' '\\u0000'
} >"$dict"

fuzz_run "$corpus" "$dict" 8192
