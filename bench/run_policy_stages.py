#!/usr/bin/env python3
"""The stages of a job started by cage::RunPolicy, and of bubblewrap's
same job, for bench/run_policy_stages.sh.

  run_policy_stages.py MARKS PERF_TEXT

MARKS is what bench/run_policy_driver writes with OARBANK_DRIVER_MARKS (per
round, the CLOCK_MONOTONIC ns at which RunPolicy, the bare /bin/true and
bwrap began and ended); PERF_TEXT is `perf script --ns` of the kernel's
sched_process_fork, _exec and _exit events, recorded on the same clock
(`perf record -k CLOCK_MONOTONIC`), read as bench/launch_timeline.py reads
them.
Each round's processes are found by who forked whom inside its window: the
driver forks the keeper, the keeper clones init into the job's namespaces,
init forks the launcher, which execs the module; bwrap forks its namespaced
child, which forks the command. A stage runs from one event to the next;
the table prints each stage's median over the rounds where every event of
it was seen, and the medians of the whole windows. The kernel records an
exit as it begins: what a process's exit tears down (its memory, the last
reference to the job's namespaces) falls in the stage after it.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launch_timeline import EVENT, FORK  # noqa: E402  (perf's event lines)

KINDS = {"sched_process_fork": "fork", "sched_process_exec": "exec", "sched_process_exit": "exit"}

# (name, what runs in it): the events that bound them are listed in order by
# run_stages and bwrap_stages.
RUN_STAGES = [
    ("the agent, before the fork", "the host probe, plan, proof, the job's channels, the keeper's fork"),
    ("keeper to init", "the keeper's set-up, the /etc view, the cgroup leaf, the clone of six namespaces"),
    ("init to launcher", "init's id maps, released; its /proc and hostname; the launcher's fork"),
    ("launcher to module", "the launcher confines itself, the gate reads it back, the exec"),
    ("the module", "/bin/true, from its exec to the start of its exit"),
    ("module exit to init exit", "the module's exit; init reaps it and reports"),
    ("init exit to keeper exit", "init's exit (the job's namespaces go); the keeper reaps it, removes the leaf"),
    ("keeper exit to return", "the keeper's exit; the agent reads the last report, reaps the keeper"),
]
BWRAP_STAGES = [
    ("bwrap's start", "the fork and exec of bwrap"),
    ("bwrap to command", "its dynamic loader, its clone of the namespaces, mounts, the command's fork and exec"),
    ("the command", "/bin/true, from its exec to the start of its exit"),
    ("command exit to return", "the command's exit, bwrap's children exit and are reaped"),
]


def load_events(path):
    """[(time_ns, pid, kind, detail)] in time order."""
    events = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = EVENT.match(line)
            if m and m.group(4) in KINDS:
                seconds, frac = m.group(3).split(".")
                t = int(seconds) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])
                events.append((t, int(m.group(2)), KINDS[m.group(4)], m.group(5)))
    events.sort()
    return events


def window(events, begin, end):
    return [e for e in events if begin <= e[0] <= end]


def first(evs, kind, pid):
    return next((e for e in evs if e[2] == kind and e[1] == pid), None)


def child_of(evs, parent):
    """The first fork by `parent`, and the child's pid."""
    e = first(evs, "fork", parent)
    return (e, int(FORK.search(e[3]).group(2))) if e else (None, None)


def times(marks):
    """The marks' times (an event's or a driver's stamp), or None if one is missing."""
    return None if any(m is None for m in marks) else [m if isinstance(m, int) else m[0] for m in marks]


def run_stages(evs, driver, begin, end):
    """The stage boundaries of one RunPolicy, or None where one is missing."""
    fork_keeper, keeper = child_of(evs, driver)
    if keeper is None:
        return None
    clone_init, init = child_of(evs, keeper)
    if init is None:
        return None
    fork_launcher, launcher = child_of(evs, init)
    if launcher is None:
        return None
    return times([
        begin,
        fork_keeper,
        clone_init,
        fork_launcher,
        first(evs, "exec", launcher),
        first(evs, "exit", launcher),
        first(evs, "exit", init),
        first(evs, "exit", keeper),
        end,
    ])


def bwrap_stages(evs, driver, begin, end):
    """The stage boundaries of one bwrap run, or None where one is missing."""
    _, bwrap = child_of(evs, driver)
    if bwrap is None:
        return None
    command = next((e for e in evs if e[2] == "exec" and e[1] != bwrap), None)  # the first exec by another process
    if command is None:
        return None
    return times([begin, first(evs, "exec", bwrap), command, first(evs, "exit", command[1]), end])


def table(title, stages, rows):
    out = [title, f"{'stage':28} {'ms':>7}  what runs in it"]
    for i, (name, what) in enumerate(stages):
        step = statistics.median(r[i + 1] - r[i] for r in rows) / 1e6
        out.append(f"{name:28} {step:7.3f}  {what}")
    whole = statistics.median(r[-1] - r[0] for r in rows) / 1e6
    out.append(f"{'the whole':28} {whole:7.3f}  ({len(rows)} rounds; the stages' medians need not add up to it)")
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    events = load_events(sys.argv[2])
    driver_exec = next((e for e in events if e[2] == "exec" and e[3].split()[0].endswith("/run_policy_driver")), None)
    if driver_exec is None:
        sys.exit("run_policy_stages: no exec of run_policy_driver in the trace")
    driver = driver_exec[1]
    run_rows, bwrap_rows, rounds = [], [], 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            t = [int(x) for x in line.split()]
            if len(t) != 6:
                continue
            rounds += 1
            run = run_stages(window(events, t[0], t[1]), driver, t[0], t[1])
            bwrap = bwrap_stages(window(events, t[4], t[5]), driver, t[4], t[5])
            if run:
                run_rows.append(run)
            if bwrap:
                bwrap_rows.append(bwrap)
    if not run_rows or not bwrap_rows:
        sys.exit(f"run_policy_stages: of {rounds} rounds, {len(run_rows)} RunPolicy and {len(bwrap_rows)} bwrap "
                 "windows had every event (a lost event, or another process layout)")
    print(table("cage::RunPolicy(/bin/true), in ms:", RUN_STAGES, run_rows))
    print()
    print(table("bwrap (fork+exec+wait), in ms:", BWRAP_STAGES, bwrap_rows))


if __name__ == "__main__":
    main()
