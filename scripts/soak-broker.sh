#!/usr/bin/env bash
# The broker soak: REQUESTS container.run requests over CONNECTIONS
# connections with random hang-ups and timeouts against a real Podman, then
# prints what was left (containers, staging entries and mounts, subordinate
# id leases of the job) and fails unless each is 0. scripts/test.sh runs a
# bounded one; run a longer one on demand. Bounded: at most 600 requests, 32 connections and 10
# minutes. Needs root and build/ (scripts/setup.sh).
#   scripts/soak-broker.sh [REQUESTS=200] [CONNECTIONS=20]
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-200}
connections=${2:-20}
if ! [[ $requests =~ ^[0-9]+$ && $connections =~ ^[0-9]+$ ]] || ((requests < 1 || requests > 600 ||
    connections < 1 || connections > 32)); then
  echo "soak-broker: expected REQUESTS in 1..600 and CONNECTIONS in 1..32" >&2
  exit 64
fi
OARBANK_SOAK_REQUESTS=$requests OARBANK_SOAK_CONNECTIONS=$connections \
  timeout 600 /usr/bin/python3 -m pytest -q -s harness/test_broker.py -k test_soak_leaves_nothing_behind
