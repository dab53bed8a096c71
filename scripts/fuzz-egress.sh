#!/usr/bin/env bash
# Fuzzes the egress proxy's request parser and host checks
# (sandbox/egress/request_fuzz.cc) for a bounded time.
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

source "$(dirname "${BASH_SOURCE[0]}")/fuzz-common.sh"
fuzz_setup egress egress_request_fuzz "$@"

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

fuzz_run "$corpus" "$dict" 20000
