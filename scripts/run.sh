#!/usr/bin/env bash
# The main job: installs and builds, prints what this kernel enforces
# (sandbox-report), then runs the escape battery on this host
# (oarbank-conform) and prints its summary. Reports land in conform-report/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null

echo "== sandbox-report (this host)"
build/sandbox/oarbank-agent sandbox-report
echo
echo "== escape battery (oarbank-conform)"
build/harness/oarbank-conform --out conform-report
