"""bench/launch_timeline.py turns perf's process events into a launch's
stages: each process named by its line of descent from the launched
program, medians over the launches, events of unrelated processes left
out. Fed perf-script text written here."""
import subprocess
import sys

from testlib import ROOT

PROGRAM = "/opt/x/agent"


def launch(lines, t0, top, keeper, init, stray):
    """One launch at t0 ms: top forks a keeper (+1), which forks init (+2),
    which execs /bin/true (+3); a stray process forks and exits meanwhile."""
    def at(ms):
        return f"{(t0 + ms) / 1000:.6f}"
    lines += [
        f"  agent {top} [000] {at(0)}: sched:sched_process_exec: filename={PROGRAM} pid={top} old_pid={top}",
        f"  agent {top} [000] {at(1)}: sched:sched_process_fork: comm=agent pid={top} child_comm=agent child_pid={keeper}",
        f"  bash {stray} [001] {at(1.5)}: sched:sched_process_fork: comm=bash pid={stray} child_comm=bash child_pid={stray + 1}",
        f"  agent {keeper} [001] {at(2)}: sched:sched_process_fork: comm=agent pid={keeper} child_comm=agent child_pid={init}",
        f"  true {init} [000] {at(3)}: sched:sched_process_exec: filename=/bin/true pid={init} old_pid={init}",
        f"  true {init} [000] {at(3.5)}: sched:sched_process_exit: comm=true pid={init} prio=120 group_dead=true",
        f"  bash {stray + 1} [001] {at(3.6)}: sched:sched_process_exit: comm=bash pid={stray + 1} prio=120 group_dead=true",
        f"  agent {keeper} [001] {at(4)}: sched:sched_process_exit: comm=agent pid={keeper} prio=120 group_dead=true",
        f"  agent {top} [000] {at(5)}: sched:sched_process_exit: comm=agent pid={top} prio=120 group_dead=true",
    ]


def timeline(tmp_path, lines):
    text = tmp_path / "perf.txt"
    text.write_text("\n".join(lines) + "\n")
    return subprocess.run([sys.executable, f"{ROOT}/bench/launch_timeline.py", str(text), PROGRAM],
                          capture_output=True, text=True, timeout=60)


FAULTS_HEADER = "page faults (user)"


def tables(stdout):
    """The event table's lines and the fault table's (empty without one)."""
    lines = stdout.splitlines()[2:]
    cut = next((i for i, line in enumerate(lines) if line.startswith(FAULTS_HEADER)), len(lines))
    return lines[:cut], lines[cut + 1:]


def rows(stdout):
    out = {}
    for line in tables(stdout)[0]:
        name, kind, step, total = line.split()
        out[f"{name} {kind}"] = (float(step), float(total))
    return out


def test_each_process_is_named_by_descent_and_timed_from_the_launch(tmp_path):
    lines = []
    for i in range(3):
        launch(lines, 100.0 * i, top=1000 + 10 * i, keeper=1001 + 10 * i, init=1002 + 10 * i, stray=5000 + 10 * i)
    r = timeline(tmp_path, lines)
    assert r.returncode == 0, r.stderr
    assert "3 launches, 3 in the commonest sequence" in r.stdout
    got = rows(r.stdout)
    assert list(got) == ["top.1 forked", "top.1.1 forked", "top.1.1 exec", "top.1.1 exit", "top.1 exit", "top exit"]
    assert got["top.1.1 exec"] == (1.0, 3.0)
    assert got["top exit"] == (1.0, 5.0)


def test_the_commonest_sequence_wins_and_its_medians_are_reported(tmp_path):
    lines = []
    launch(lines, 0.0, top=10, keeper=11, init=12, stray=900)
    launch(lines, 100.0, top=20, keeper=21, init=22, stray=910)
    # A third launch whose init execs late (+3 ms more): the median ignores it.
    late = []
    launch(late, 200.0, top=30, keeper=31, init=32, stray=920)
    late = [line.replace("0.203000: sched:sched_process_exec: filename=/bin/true",
                         "0.206000: sched:sched_process_exec: filename=/bin/true") for line in late]
    assert any("0.206000" in line for line in late)
    # A fourth whose keeper never forks init: another sequence, left out.
    short = []
    launch(short, 300.0, top=40, keeper=41, init=42, stray=930)
    short = [line for line in short if "child_pid=42" not in line and " 42 " not in line]
    r = timeline(tmp_path, lines + late + short)
    assert r.returncode == 0, r.stderr
    assert "4 launches, 3 in the commonest sequence" in r.stdout
    assert rows(r.stdout)["top.1.1 exec"] == (1.0, 3.0)


def test_a_pid_reused_by_a_later_launch_starts_it_afresh(tmp_path):
    lines = []
    launch(lines, 0.0, top=10, keeper=11, init=12, stray=900)
    launch(lines, 100.0, top=12, keeper=13, init=14, stray=910)  # the first launch's init pid, now a new agent
    r = timeline(tmp_path, lines)
    assert r.returncode == 0, r.stderr
    assert "2 launches, 2 in the commonest sequence" in r.stdout


def test_no_launch_of_the_program_is_an_error(tmp_path):
    r = timeline(tmp_path, ["  bash 1 [000] 1.000000: sched:sched_process_exit: comm=bash pid=1 prio=120 group_dead=true"])
    assert r.returncode != 0 and "no launch of /opt/x/agent" in r.stderr


def faults(stdout):
    return {line.split()[0]: float(line.split()[1]) for line in tables(stdout)[1]}


def test_page_faults_are_counted_per_process_and_the_exec_apart(tmp_path):
    """Faults of each process of a launch, the exec'd program's apart from
    the process before its exec; a stray process's faults are not the
    launch's."""
    lines = []
    for i, n in enumerate((3, 5, 3)):
        one = []
        top, keeper, init, stray = 100 + 10 * i, 101 + 10 * i, 102 + 10 * i, 900 + 10 * i
        launch(one, 100.0 * i, top=top, keeper=keeper, init=init, stray=stray)
        fault = lambda comm, pid, ms: (f"  {comm} {pid} [000] {(100.0 * i + ms) / 1000:.6f}: "
                                       f"exceptions:page_fault_user: address=0x1000 ip=0x2000 error_code=0x6")
        extra = ([fault("agent", top, 0.5)] * n + [fault("agent", keeper, 1.5)] * 2 + [fault("agent", init, 2.5)]
                 + [fault("true", init, 3.2)] * 4 + [fault("bash", stray, 2.0)] * 7)
        lines += sorted(one + extra, key=lambda line: float(line.split()[3].rstrip(":")))
    r = timeline(tmp_path, lines)
    assert r.returncode == 0, r.stderr
    assert list(rows(r.stdout)) == ["top.1 forked", "top.1.1 forked", "top.1.1 exec", "top.1.1 exit", "top.1 exit",
                                   "top exit"]
    assert faults(r.stdout) == {"top": 3.0, "top.1": 2.0, "top.1.1": 1.0, "top.1.1+exec": 4.0, "all": 10.0}


def test_without_fault_events_no_fault_table_is_printed(tmp_path):
    lines = []
    launch(lines, 0.0, top=10, keeper=11, init=12, stray=900)
    r = timeline(tmp_path, lines)
    assert r.returncode == 0, r.stderr
    assert FAULTS_HEADER not in r.stdout and tables(r.stdout)[1] == []
