"""bench/run_policy_stages.py: each round's job is found by who forked
whom inside its window (the driver's keeper, the keeper's init, init's
launcher and its exec; bwrap's child and the command it execs), each stage
is the median over the rounds, events outside a round's window or of
another round's processes do not count, and a trace in which no round has
every event fails with a line that says so. Fed perf-script text and
driver marks written here."""
import subprocess
import sys

from testlib import ROOT

SCRIPT = f"{ROOT}/bench/run_policy_stages.py"
DRIVER = 100
BASE = 5000 * 1_000_000_000  # ns


def event(comm, pid, t_us, kind, detail):
    t = BASE + t_us * 1000
    return f" {comm:>15} {pid:6} [001] {t // 1_000_000_000}.{t % 1_000_000_000:09d}: sched:sched_process_{kind}: {detail}\n"


def fork(parent, child, t_us, comm="run_policy_driv"):
    return event(comm, parent, t_us, "fork", f"comm={comm} pid={parent} child_comm={comm} child_pid={child}")


def exec_(pid, t_us, filename, comm="true"):
    return event(comm, pid, t_us, "exec", f"filename={filename} pid={pid} old_pid={pid}")


def exit_(pid, t_us, comm="true"):
    return event(comm, pid, t_us, "exit", f"comm={comm} pid={pid} prio=120 group_dead=true")


def round_events(n, start_us, slow):
    """One round: RunPolicy at start_us (stages of 100..800 us, the keeper's
    clone `slow` us longer), then bare /bin/true, then bwrap."""
    p = 1000 + 10 * n  # keeper, init, launcher, bare, bwrap, bwrap's child, command
    t = start_us
    text = fork(DRIVER, p, t + 100)                      # the agent, before the fork: 100
    text += fork(p, p + 1, t + 300 + slow)               # keeper to init: 200 + slow
    text += fork(p + 1, p + 2, t + 600 + slow)           # init to launcher: 300
    text += exec_(p + 2, t + 1000 + slow, "/bin/true")   # launcher to module: 400
    text += exit_(p + 2, t + 1500 + slow)                # the module: 500
    text += exit_(p + 1, t + 2100 + slow)                # module exit to init exit: 600
    text += exit_(p, t + 2800 + slow)                    # init exit to keeper exit: 700
    run_end = t + 3600 + slow                            # keeper exit to return: 800
    bare = run_end + 10
    text += fork(DRIVER, p + 3, bare + 10) + exec_(p + 3, bare + 20, "/bin/true") + exit_(p + 3, bare + 30)
    bw = bare + 100
    text += fork(DRIVER, p + 4, bw + 50)
    text += exec_(p + 4, bw + 100, "/usr/bin/bwrap", comm="bwrap")       # bwrap's start: 100
    text += fork(p + 4, p + 5, bw + 900, comm="bwrap")
    text += fork(p + 5, p + 6, bw + 1500, comm="bwrap")
    text += exec_(p + 6, bw + 2100, "/bin/true")                           # bwrap to command: 2000
    text += exit_(p + 6, bw + 2400)                                        # the command: 300
    text += exit_(p + 5, bw + 2450, comm="bwrap") + exit_(p + 4, bw + 2500, comm="bwrap")
    bw_end = bw + 2600                                                     # command exit to return: 200
    marks = [t, run_end, run_end, bare + 50, bw, bw_end]
    return text, " ".join(str(BASE + m * 1000) for m in marks) + "\n", bw_end


def write_trace(tmp_path, slows, drop=()):
    text = exec_(DRIVER, 0, "/x/build/bench/run_policy_driver", comm="run_policy_driv")
    marks = ""
    t = 1000
    for n, slow in enumerate(slows):
        events, line, t = round_events(n, t, slow)
        events = "".join(e for e in events.splitlines(True) if not any(d in e for d in drop))
        text += events
        marks += line
        t += 1000
    # A fork by the driver between rounds (its own, outside every window).
    text += fork(DRIVER, 9999, t + 10)
    (tmp_path / "trace.txt").write_text(text)
    (tmp_path / "marks.txt").write_text(marks)
    return [sys.executable, SCRIPT, str(tmp_path / "marks.txt"), str(tmp_path / "trace.txt")]


def stage_ms(out, name):
    line = next(l for l in out.splitlines() if l.startswith(name))
    return float(line[len(name):].split()[0])


def test_each_stage_is_the_median_over_the_rounds(tmp_path):
    r = subprocess.run(write_trace(tmp_path, [0, 90, 30]), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    run, bwrap = r.stdout.split("bwrap (fork+exec+wait)")
    for name, ms in [("the agent, before the fork", 0.1), ("keeper to init", 0.23), ("init to launcher", 0.3),
                     ("launcher to module", 0.4), ("the module", 0.5), ("module exit to init exit", 0.6),
                     ("init exit to keeper exit", 0.7), ("keeper exit to return", 0.8), ("the whole", 3.63)]:
        assert stage_ms(run, name) == ms, (name, run)
    assert "(3 rounds;" in run
    for name, ms in [("bwrap's start", 0.1), ("bwrap to command", 2.0), ("the command", 0.3),
                     ("command exit to return", 0.2), ("the whole", 2.6)]:
        assert stage_ms(bwrap, name) == ms, (name, bwrap)


def test_a_trace_without_a_whole_job_fails_saying_so(tmp_path):
    # Each round's clone of init lost: no round has keeper -> init -> launcher.
    r = subprocess.run(write_trace(tmp_path, [0, 0], drop=("child_pid=1001\n", "child_pid=1011\n")),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "of 2 rounds, 0 RunPolicy and 2 bwrap" in r.stderr, (r.stdout, r.stderr)


def test_a_trace_without_the_driver_fails_saying_so(tmp_path):
    cmd = write_trace(tmp_path, [0])
    trace = tmp_path / "trace.txt"
    trace.write_text("".join(l for l in trace.read_text().splitlines(True) if "run_policy_driver" not in l))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "no exec of run_policy_driver" in r.stderr, r.stderr
