#!/usr/bin/env bash
# Egress proxy benchmark: throughput of a large transfer and the added
# latency of one CONNECT through `oarbank-agent egress-proxy`, as ratios to
# direct, and 200 concurrent tunnels, in one run (bench/egress_bench.py).
# The same run also moves the transfer through bench/splice_relay (a bare
# splice(2) relay): the proxy against it is the proxy's own cost, it against
# direct is what the extra hop costs on this machine. It also times
# tinyproxy and squid (Debian packages; scripts/setup.sh installs them with
# their services kept from starting), which it starts on loopback with their
# configuration in its temporary directory and stops by pid, and the first
# byte of a fast name through the real resolver while 50 slow lookups are
# pending (a name server of its own in the namespace).
#
#   bench/egress.sh [--bytes N] [--tunnels N] [--slow-lookups N] [--no-others] [--strict]
#
# Needs root (a network namespace with a veth pair, addresses in
# 198.19.0.0/16 only). Builds oarbank-agent and splice_relay in build/.
# Prints PASS/MISS per target; --strict exits 1 on a miss.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "bench/egress.sh: needs root (network namespace)" >&2; exit 64; fi
for tool in tinyproxy squid; do
  if ! command -v "$tool" >/dev/null && [ ! -x "/usr/sbin/$tool" ]; then
    echo "bench/egress.sh: $tool is missing (scripts/setup.sh installs it; --no-others skips it)" >&2
    case " $* " in *" --no-others "*) ;; *) exit 64 ;; esac
  fi
done
build="${OARBANK_BUILD:-build}"
ninja -C "$build" oarbank-agent splice_relay >/dev/null
exec python3 bench/egress_bench.py --agent "$build/sandbox/oarbank-agent" --relay "$build/bench/splice_relay" "$@"
