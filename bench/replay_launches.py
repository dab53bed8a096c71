#!/usr/bin/python3
"""The battery's floor, measured: one launch of /bin/true per cell of a
battery run, through the same entry point and policy as the cell, JOBS at
once, as the battery runs its cells. Prints the wall-clock seconds.

    replay_launches.py BATTERY_JSON COMMANDS JOBS

COMMANDS is bench/battery.sh's hyperfine list, one argument a line, in
triples `-n NAME COMMAND`: NAME is "bare" for a probe's unconfined run and
"POLICY ENTRY" for a confined cell. Every launch must exit 0 (a refused
launch would make the floor a measure of refusals); a launch that does not
is an error (exit 1)."""
import json
import os
import shlex
import sys
import time


def main():
    battery, commands_file, jobs = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
    lines = open(commands_file).read().splitlines()
    argv = {lines[i + 1]: shlex.split(lines[i + 2]) for i in range(0, len(lines) - 2, 3) if lines[i] == "-n"}
    launches = [argv["bare"] for _ in battery["unconfined"]]
    for c in battery["confined"]:
        launches.append(argv[f'{c["policy"]} {"sandbox-exec" if c["entry"] == "sandbox-exec" else "run"}'])
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)]
    running, failed = set(), 0
    start = time.monotonic()
    for args in launches:
        while len(running) >= jobs:
            pid, status = os.wait()
            running.discard(pid)
            failed += os.waitstatus_to_exitcode(status) != 0
        running.add(os.posix_spawn(args[0], args, os.environ, file_actions=actions))
    for pid in running:
        _, status = os.waitpid(pid, 0)
        failed += os.waitstatus_to_exitcode(status) != 0
    seconds = time.monotonic() - start
    if failed:
        sys.exit(f"replay_launches: {failed} of {len(launches)} launches failed")
    print(f"{seconds:.3f}")


if __name__ == "__main__":
    main()
