#!/usr/bin/env bash
# Egress proxy benchmark: throughput of a large transfer and the added
# latency of one CONNECT through `oarbank-agent egress-proxy`, as ratios to
# direct, and 200 concurrent tunnels, in one run (bench/egress_bench.py).
#
#   bench/egress.sh [--bytes N] [--tunnels N] [--strict]
#
# Needs root (a network namespace with a veth pair, addresses in
# 198.19.0.0/16 only). Builds oarbank-agent in build/ if it is missing.
# Prints PASS/MISS per target; --strict exits 1 on a miss.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/egress.sh: needs root (network namespace)" >&2; exit 64; fi
agent="${OARBANK_BUILD:-build}/sandbox/oarbank-agent"
[ -x "$agent" ] || ninja -C "${OARBANK_BUILD:-build}" oarbank-agent
exec python3 bench/egress_bench.py --agent "$agent" "$@"
