#!/usr/bin/env bash
# The fault campaign: each external part a job relies on (the user-mode
# stack, the nftables helper, /proc, cgroupfs, the temporary directory, the
# spool directory) and
# each resource (descriptors, processes) made to fail at each step of a
# job, from outside, as root and with the agent as uid 65534; prints the
# table (part x step x outcome) and fails unless every cell was refused
# with 70 and one line or contained, and left nothing behind
# (harness/faults.py says how each is judged). Needs root and build/.
# Memory is the kernel-matrix guests' (this host has no memory controller):
# there memory.max kills a job past limits.mem_gb, and starves the agent
# itself from 64 KiB to 2 MiB, each row judged the same way
# (scripts/guest-init.sh, the cgroup check of docs/kernel-matrix.md).
#   scripts/faults.sh [--only PART]
set -euo pipefail
cd "$(dirname "$0")/.."
exec timeout 900 /usr/bin/python3 harness/faults.py "$@"
