"""bench/launch_marks.py: every mark it lists is a function of the built
agent (a renamed function would drop its mark without a word), and its
report turns perf's events into one timeline per launch: first hits only,
medians since the agent's exec, an egress-any job's stack and helper execs
told from the module's, events before the first launch and marks
seen in fewer than half the launches left out. Fed perf-script text
written here."""
import importlib.util
import os
import subprocess
import sys

import pytest

from testlib import AGENT, ROOT

SCRIPT = f"{ROOT}/bench/launch_marks.py"


def marks_module():
    spec = importlib.util.spec_from_file_location("launch_marks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_mark_is_a_function_of_the_built_agent():
    if not os.path.exists(AGENT):
        pytest.skip(f"no built agent at {AGENT}")
    out = subprocess.run([sys.executable, SCRIPT, "probes", AGENT, "g"], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split("\n")
    names = sorted(line.split()[0].split("/")[1] for line in out if line)
    assert names == sorted(mark.replace("-", "_") for mark, _, _ in marks_module().MARKS)
    for line in out:
        if line:
            # Each at a file offset inside the binary, as the kernel's uprobes take it.
            path, offset = line.split()[1].rsplit(":", 1)
            assert path == AGENT and 0 < int(offset, 16) < os.path.getsize(AGENT), line


def launch(lines, t0, agent, keeper, module, stray):
    def at(ms):
        return f"{(t0 + ms) / 1000:.6f}"
    lines += [
        f"   oarbank-agent {agent} {at(0)}: sched:sched_process_exec: ",
        f"   oarbank-agent {agent} {at(0.3)}: g:main: ",
        f"   oarbank-agent {agent} {at(1.0)}: g:probe_host: ",
        f"   oarbank-agent {keeper} {at(2.0)}: g:keeper: ",
        f"   slirp4netns {module + 1} {at(2.2)}: sched:sched_process_exec: ",  # egress-any's two programs,
        f"   oarbank-netfilt {module + 2} {at(2.3)}: sched:sched_process_exec: ",  # not the module
        f"   oarbank-agent {agent} {at(2.5)}: g:gate: ",
        f"   oarbank-agent {agent} {at(2.7)}: g:gate: ",  # a second hit: not a mark of its own
        f"   true {module} {at(3.0)}: sched:sched_process_exec: ",
        f"   bash {stray} {at(3.1)}: sched:sched_process_exit: ",
        f"   true {module} {at(3.5)}: sched:sched_process_exit: ",
        f"   oarbank-agent {agent} {at(4.0)}: sched:sched_process_exit: ",
    ]


def test_the_report_is_one_timeline_of_first_hits(tmp_path):
    lines = ["   bash 10 0.000100: g:main: "]  # before any launch: left out
    for i in range(3):
        launch(lines, 100.0 * i, agent=1000 + 10 * i, keeper=1001 + 10 * i, module=1002 + 10 * i, stray=5000 + i)
    lines.append("   oarbank-agent 1020 0.201500: g:leaf: ")  # in one launch of three: left out
    text = tmp_path / "perf.txt"
    text.write_text("\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, SCRIPT, "report", str(text)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("3 launches")
    rows = [line.split()[:4] for line in out[2:]]
    assert rows == [
        ["agent-exec", "0.000", "0.000", "3"],
        ["main", "0.300", "0.300", "3"],
        ["probe-host", "1.000", "0.700", "3"],
        ["keeper", "2.000", "1.000", "3"],
        ["stack-exec", "2.200", "0.200", "3"],
        ["helper-exec", "2.300", "0.100", "3"],
        ["gate", "2.500", "0.200", "3"],
        ["module-exec", "3.000", "0.500", "3"],
        ["module-exit", "3.500", "0.500", "3"],
        ["agent-exit", "4.000", "0.500", "3"],
    ], r.stdout


def test_a_trace_without_a_launch_says_so(tmp_path):
    text = tmp_path / "perf.txt"
    text.write_text("   bash 10 0.000100: sched:sched_process_exit: \n")
    r = subprocess.run([sys.executable, SCRIPT, "report", str(text)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("no launch found"), r.stdout
