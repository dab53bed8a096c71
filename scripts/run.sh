#!/usr/bin/env bash
# The main job: installs and builds, prints what this kernel enforces
# (sandbox-report), then runs a module confined under a strict runner policy
# and shows what it could and could not reach.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null

agent=build/sandbox/oarbank-agent
echo "== sandbox-report (this host)"
"$agent" sandbox-report

demo=$(mktemp -d /tmp/oarbank-demo-XXXXXX)
trap 'rm -rf "$demo"' EXIT
mkdir -p "$demo"/{bundle,work/tmp,data,home/.ssh}
echo "not for modules" > "$demo/home/.ssh/id_ed25519"
cat > "$demo/policy.json" <<JSON
{"contract": 1, "role": "runner", "bundle": "$demo/bundle", "work": "$demo/work",
 "data": "$demo/data", "tmp": "$demo/work/tmp", "net": {"mode": "none"}, "exec_writable": false}
JSON
echo
echo "== confined demo run (runner, net none, exec_writable false)"
"$agent" sandbox-exec "$demo/policy.json" -- /bin/sh -c "
  try() { if \"\$@\" >/dev/null 2>&1; then echo \"  allowed: \$*\"; else echo \"  refused: \$*\"; fi; }
  try cat $demo/home/.ssh/id_ed25519
  try touch $demo/bundle/planted
  try sh -c 'echo built > $demo/work/out.txt'
  try sh -c 'cp /bin/true $demo/work/t && $demo/work/t'
  try /lib64/ld-linux-x86-64.so.2 $demo/work/t
  grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status | sed 's/^/  /'
"
