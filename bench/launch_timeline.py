#!/usr/bin/python3
"""Where a launch's time goes, from the kernel's own process events: the
`perf script` text of a `perf record -e sched:sched_process_fork,
sched:sched_process_exec,sched:sched_process_exit` taken around repeated
launches of one command.

    launch_timeline.py PERF_SCRIPT_TEXT PROGRAM

Each exec of PROGRAM (a path) by a process not already part of a launch
starts one; every process it forks is named by its line of descent (`top`,
`top.1` its first child, `top.1.2` that child's second, ...), and the launch
ends when `top` exits. Launches are grouped by their sequence of events;
for the commonest sequence it prints, per event, the median time since the
one before and since the launch's exec. Where the recording also holds
`exceptions:page_fault_user` events, it prints the median count of page
faults each process took (the program it exec'd counted apart, as
`NAME+exec`): on a machine where a fault costs microseconds, a launch's
faults are a large part of its time."""
import re
import statistics
import sys

EVENT = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+(?:sched|exceptions):(\S+):\s*(.*)$")
FORK = re.compile(r" pid=(\d+) child_comm=.* child_pid=(\d+)")


def launches(lines, program):
    owner, done = {}, []
    for line in lines:
        m = EVENT.match(line)
        if not m:
            continue
        _, pid, stamp, name, rest = m.groups()
        pid, t = int(pid), float(stamp) * 1000
        if name == "sched_process_exec" and f"filename={program} " in rest and pid not in owner:
            owner[pid] = {"t0": t, "events": [], "role": {pid: "top"}, "children": {}, "execd": set(), "faults": {}}
        elif name == "sched_process_fork":
            parent, child = map(int, FORK.search(rest).groups())
            launch = owner.get(parent)
            if launch is None:
                continue
            n = launch["children"].get(parent, 0) + 1
            launch["children"][parent] = n
            launch["role"][child] = f'{launch["role"][parent]}.{n}'
            owner[child] = launch
            launch["events"].append((f'{launch["role"][child]} forked', t))
        elif name == "sched_process_exec" and pid in owner:
            launch = owner[pid]
            launch["events"].append((f'{launch["role"][pid]} exec', t))
            launch["execd"].add(pid)
        elif name == "page_fault_user" and pid in owner:
            launch = owner[pid]
            who = launch["role"][pid] + ("+exec" if pid in launch["execd"] else "")
            launch["faults"][who] = launch["faults"].get(who, 0) + 1
        elif name == "sched_process_exit":
            launch = owner.pop(pid, None)  # the pid may be reused by a later launch
            if launch is None:
                continue
            launch["events"].append((f'{launch["role"][pid]} exit', t))
            if launch["role"][pid] == "top":
                done.append(launch)
    return done


def main():
    program = sys.argv[2]
    done = launches(open(sys.argv[1]), program)
    if not done:
        sys.exit(f"launch_timeline: no launch of {program} in {sys.argv[1]}")
    groups = {}
    for launch in done:
        groups.setdefault(tuple(name for name, _ in launch["events"]), []).append(launch)
    sequence, group = max(groups.items(), key=lambda kv: len(kv[1]))
    print(f"{program}: {len(done)} launches, {len(group)} in the commonest sequence (medians, ms)")
    print(f'{"event":<24} {"since the last":>14} {"since exec":>11}')
    for i, name in enumerate(sequence):
        step = [g["events"][i][1] - (g["events"][i - 1][1] if i else g["t0"]) for g in group]
        total = [g["events"][i][1] - g["t0"] for g in group]
        print(f"{name:<24} {statistics.median(step):14.3f} {statistics.median(total):11.3f}")
    processes = sorted({who for g in group for who in g["faults"]})
    if processes:
        print(f'{"page faults (user)":<24} {"median":>14}')
        for who in processes:
            print(f'{who:<24} {statistics.median(g["faults"].get(who, 0) for g in group):14.1f}')
        print(f'{"all":<24} {statistics.median(sum(g["faults"].values()) for g in group):14.1f}')


if __name__ == "__main__":
    main()
