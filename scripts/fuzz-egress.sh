#!/usr/bin/env bash
# Fuzzes the egress proxy's request parser and host checks
# (sandbox/egress_request_fuzz.cc) for a bounded time.
#
#   scripts/fuzz-egress.sh [SECONDS]     (default 60)
#
# Configures build-fuzz/ (OARBANK_FUZZ_BUILD overrides it) with clang and
# -DOARBANK_FUZZ=ON, as scripts/fuzz-policy.sh does, builds
# egress_request_fuzz, seeds a corpus of well-formed and hostile request
# heads, and runs libFuzzer. Exits non-zero on a crash, a sanitizer report,
# a leak, a timeout or an out-of-memory; the input is kept in
# <build>/artifacts-egress/.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
  echo "usage: $0 [SECONDS]  (a positive number of seconds, default 60)" >&2
  exit 64
fi

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OARBANK_FUZZ_BUILD:-$src/build-fuzz}"
artifacts="$build/artifacts-egress"

sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOARBANK_FUZZ=ON -DOARBANK_TESTS=OFF \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" >/dev/null
ninja -C "$build" egress_request_fuzz

scratch="$(mktemp -d "${TMPDIR:-/tmp}/oeg-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
corpus="$scratch/corpus"
mkdir -p "$corpus"
i=0
while IFS= read -r seed; do
  printf '%b' "$seed" >"$corpus/seed-$((i++))"
done <<'SEEDS'
CONNECT api.example.org:443 HTTP/1.1\r\nHost: api.example.org:443\r\n\r\n
CONNECT [::1]:443 HTTP/1.1\r\n\r\n
CONNECT 127.1:443 HTTP/1.1\r\n\r\n
CONNECT 0x7f.0.0.1:443 HTTP/1.1\r\n\r\n
CONNECT user@api.example.org:443 HTTP/1.1\r\n\r\n
GET http://api.example.org/a?b=c HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: x\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\n\r\n
POST http://api.example.org:8080/x HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello
GET http://api.example.org/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n
GET http://api.example.org/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n
GET https://api.example.org/ HTTP/1.1\r\n\r\n
GET / HTTP/1.1\r\nHost: api.example.org\r\n\r\n
CONNECT api.example.org:443 HTTP/1.1\r\n folded: x\r\n\r\n
CONNECT api.example.org.:443 HTTP/1.1\r\n\r\n
CONNECT localhost:443 HTTP/1.1\r\n\r\n
*.files.example.org:8443
198.18.0.0/15
fc00::/7
SEEDS

dict="$scratch/egress.dict"
{
  for word in CONNECT GET POST HEAD HTTP/1.1 HTTP/1.0 http:// https:// Host: Content-Length: \
              Transfer-Encoding: Connection: Proxy-Authorization: localhost '*.' :443 :80 '[::1]' \
              '::ffff:' 0x7f 127.1 2130706433 /; do
    printf '"%s"\n' "$word"
  done
  printf '"\\x0d\\x0a"\n"\\x0d\\x0a\\x0d\\x0a"\n"\\x00"\n" "\n"@"\n"#"\n"?"\n'
} >"$dict"

mkdir -p "$artifacts"
echo "fuzz-egress: $(ls "$corpus" | wc -l) seeds, ${seconds}s"
status=0
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
  "$build/sandbox/egress_request_fuzz" "$corpus" \
  -dict="$dict" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=20000 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?

if (( status != 0 )); then
  echo "fuzz-egress: FAILED (exit $status); inputs in $artifacts:" >&2
  ls -t "$artifacts" | head -5 >&2
  exit "$status"
fi
echo "fuzz-egress: no crash in ${seconds}s"
