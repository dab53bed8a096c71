#!/usr/bin/env python3
"""Clock marks inside a launch, for bench/launch_marks.sh.

  launch_marks.py probes BINARY GROUP   uprobe_events lines, one per mark
  launch_marks.py report PERF_TEXT      the table, from `perf script -F comm,pid,time,event`

A mark is the entry of one of the agent's functions (MARKS), caught by a
uprobe, plus three of the kernel's process events: the agent's exec (where
each launch starts), the module's exec and exit, and the agent's exit.
Each mark is reported once per launch (its first hit), as the median time
since the agent's exec over the launches where it fired, in the order of
those medians, with the step from the mark before it. Marks in different
processes of one launch (the keeper, init, the launcher) interleave, so the
table is read as a timeline, not as a call tree.
"""
import re
import statistics
import subprocess
import sys

# Each mark: its name in the table, the demangled name of the function
# whose entry it is (exact, up to the argument list), and what it starts.
MARKS = [
    ("main", "main", "the C library's start-up is done"),
    ("policy", "oarbank::LoadPolicyFile", "the command line is parsed (CLI11)"),
    ("start", "oarbank::cage::Start", "the policy is read"),
    ("probe", "oarbank::ProbeSupervisedHost", "the host probe (supervised)"),
    ("probe-host", "oarbank::ProbeHost", "the host probe"),
    ("plan", "oarbank::PlanSupervisedJob", "the job's plan"),
    ("plan-confinement", "oarbank::PlanConfinement", "the launcher's plan"),
    ("keeper", "oarbank::cage::KeeperMain", "the keeper runs (forked from the agent)"),
    ("leaf", "oarbank::CgroupLeaf::Make", "the keeper makes the cgroup leaf"),
    ("clone", "oarbank::CloneIntoNamespaces", "the keeper clones init into the job's namespaces"),
    ("init", "oarbank::cage::(anonymous namespace)::InitMain", "init runs"),
    ("init-reported", "oarbank::cage::Job::State::OnInitReported", "the agent hears of init"),
    ("id-maps", "oarbank::WriteIdMapsFromParent", "the keeper writes init's id maps"),
    ("net-prepare", "oarbank::JobNetwork::Prepare", "egress-any: trust checks, the helper is started"),
    ("network", "oarbank::JobNetwork::Start", "egress-any: the job's network (init's namespaces)"),
    ("tap", "oarbank::JobNetwork::MakeTap", "egress-any: the helper joins the namespaces, makes tap0"),
    ("stack", "oarbank::JobNetwork::StartStack", "egress-any: the stack is started"),
    ("rules", "oarbank::JobNetwork::StartRules", "egress-any: the ruleset is sent"),
    ("await-stack", "oarbank::JobNetwork::AwaitStack", "egress-any: the agent waits for the stack's ready"),
    ("await-rules", "oarbank::JobNetwork::AwaitRules", "egress-any: the stack is ready; the agent waits for the install"),
    ("read-back", "oarbank::JobNetwork::Verify[abi:cxx11]", "egress-any: the gate reads the ruleset's generation back"),
    ("net-end", "oarbank::JobNetwork::End", "egress-any: the drop counter is read, the stack told to exit"),
    ("confine", "oarbank::ConfineSelf", "the launcher confines itself"),
    ("mount-namespace", "oarbank::EnterMountNamespace", "the launcher's mount namespace"),
    ("gate", "oarbank::VerifyConfined", "the agent's gate reads the launcher back"),
    ("finish", "oarbank::cage::Job::State::Finish", "the agent waits for the job's end"),
    ("leaf-removed", "oarbank::CgroupLeaf::Remove", "the keeper removes the leaf"),
]
KERNEL_MARKS = ["agent-exec", "stack-exec", "helper-exec", "module-exec", "module-exit", "agent-exit"]
# An egress-any job's two programs, by the name the kernel gives their
# process at exec (15 characters at most); any other exec is the module's.
EXEC_MARKS = {"slirp4netns": "stack-exec", "oarbank-netfilter"[:15]: "helper-exec"}


def load_segments(binary):
    """(vaddr, offset, size) of each executable LOAD segment."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout
    segments = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[0] == "LOAD" and "E" in fields[6:-1]:
            segments.append((int(fields[2], 16), int(fields[1], 16), int(fields[5], 16)))
    return segments


def probe_lines(binary, group):
    """One uprobe_events line per mark the binary defines; the rest are left out."""
    symbols = {}
    nm = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "Tt" and not parts[2].endswith("[clone .cold]"):
            # The name without its argument list: the first "(" that does
            # not open "(anonymous namespace)".
            name = re.split(r"\((?!anonymous namespace\))", parts[2], maxsplit=1)[0]
            symbols.setdefault(name, int(parts[0], 16))
    segments = load_segments(binary)
    lines = []
    for mark, function, _ in MARKS:
        vaddr = symbols.get(function)
        if vaddr is None:
            continue
        for seg_vaddr, seg_offset, size in segments:
            if seg_vaddr <= vaddr < seg_vaddr + size:
                lines.append(f"p:{group}/{mark.replace('-', '_')} {binary}:{vaddr - seg_vaddr + seg_offset:#x}")
                break
    return lines


EVENT = re.compile(r"^\s*(\S+)\s+(\d+)\s+([\d.]+):\s+(\S+):")


def launches(text, agent_comm="oarbank-agent"):
    """Each launch as {mark: seconds since the agent's exec}, first hits only."""
    runs = []
    current = None
    for line in text.splitlines():
        m = EVENT.match(line)
        if not m:
            continue
        comm, pid, when, event = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4)
        if event == "sched:sched_process_exec" and comm == agent_comm:
            current = {"pid": pid, "start": when, "marks": {"agent-exec": 0.0}}
            runs.append(current)
            continue
        if current is None:
            continue
        if event == "sched:sched_process_exec":
            mark = EXEC_MARKS.get(comm, "module-exec")
            if mark == "module-exec":
                current.setdefault("module", pid)
        elif event == "sched:sched_process_exit" and pid == current.get("module") and pid != current["pid"]:
            mark = "module-exit"
        elif event == "sched:sched_process_exit" and pid == current["pid"]:
            mark = "agent-exit"
        elif ":" in event and not event.startswith("sched:"):
            mark = event.split(":", 1)[1].replace("_", "-")
        else:
            continue
        current["marks"].setdefault(mark, when - current["start"])
    return [r["marks"] for r in runs]


def report(text):
    runs = launches(text)
    if not runs:
        return "no launch found (no exec of the agent in the trace)\n"
    seen = {}
    for marks in runs:
        for mark, at in marks.items():
            seen.setdefault(mark, []).append(at * 1000)
    rows = [(statistics.median(v), mark, len(v)) for mark, v in seen.items() if len(v) * 2 >= len(runs)]
    rows.sort()
    what = {mark: text for mark, _, text in MARKS}
    what.update({"agent-exec": "the agent's exec", "stack-exec": "egress-any: the stack's exec",
                 "helper-exec": "egress-any: the helper's exec", "module-exec": "the module's exec",
                 "module-exit": "the module's exit", "agent-exit": "the agent's exit"})
    out = [f"{len(runs)} launches; each mark: the median ms since the agent's exec (launches where it fired)",
           f"{'mark':<17} {'since exec':>10} {'step':>7} {'n':>5}  what starts there"]
    previous = 0.0
    for median, mark, n in rows:
        out.append(f"{mark:<17} {median:10.3f} {median - previous:7.3f} {n:5d}  {what.get(mark, '')}")
        previous = median
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) == 4 and argv[1] == "probes":
        print("\n".join(probe_lines(argv[2], argv[3])))
        return 0
    if len(argv) == 3 and argv[1] == "report":
        with open(argv[2], encoding="utf-8", errors="replace") as f:
            sys.stdout.write(report(f.read()))
        return 0
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
