"""Nothing of a job is left behind whenever `oarbank-agent run` dies: no
process (keeper, init, module, root's idmap holder), no user namespace, no
cgroup leaf. Deterministically, by stopping the faulty build at each window
(OARBANK_FAULT_PAUSE, sandbox/common/fault_hooks.h) and killing it there with
SIGKILL, SIGTERM and SIGINT; and at random moments of the production
binary's run, counting leftovers.

This test process is a child subreaper while it runs (as systemd is for an
agent): this host's pid 1 reaps no orphans, and a zombie still holds its
user namespace."""
import ctypes
import glob
import os
import random
import signal
import subprocess
import time

import pytest

from job_tree import make_tree, remove_tree, write_policy

from testlib import AGENT, FAULTY, NOBODY, as_user

AGENT, FAULTY = os.path.realpath(AGENT), os.path.realpath(FAULTY)  # as /proc/PID/exe names them
# The command that starts a job, and its flags: every job these tests start goes through it.
RUN = ("run", "--unproven")  # these test the cage and the agent, not the proof gate
PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture(scope="module", autouse=True)
def subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture
def tree():
    root = make_tree("oarbank-death-", extra_writable=("pause",))
    write_policy(root)
    yield root
    remove_tree(root)


def cgroup_base():
    """The directory this process's cgroup v2 leaves go below (the agent's, by inheritance)."""
    mount = None
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        if fields[fields.index("-") + 1] == "cgroup2":
            mount = fields[4]
            break
    own = next((line.split(":", 2)[2].strip() for line in open("/proc/self/cgroup") if line.startswith("0::")), None)
    return None if mount is None or own is None else os.path.normpath(mount + own)


def leaves_of(agent_pid):
    base = cgroup_base()
    if base is None:
        return []
    return (glob.glob(f"{base}/oarbank-job-{agent_pid}-*") +
            glob.glob(f"{os.path.dirname(base)}/oarbank-job-{agent_pid}-*"))


def reap_orphans():
    """Zombies reparented to this subreaper: reaped here, as systemd would."""
    me = str(os.getpid())
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and fields[1] == me:
            try:
                os.waitpid(int(stat.split("/")[2]), os.WNOHANG)
            except ChildProcessError:
                pass


def processes(marker):
    """Live processes of ours: the agent's binaries (keeper, idmap holder) and anything carrying the marker."""
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            state = open(f"{d}/stat").read().rsplit(")", 1)[1].split()[0]
            cmdline = open(f"{d}/cmdline", "rb").read()
            try:
                exe = os.readlink(f"{d}/exe")
            except OSError:
                exe = ""
        except OSError:
            continue
        if state == "Z":
            continue
        if marker.encode() in cmdline or exe in (AGENT, FAULTY):
            found.append((int(d.split("/")[2]), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def user_namespaces():
    inodes = set()
    for link in glob.glob("/proc/[0-9]*/ns/user"):
        try:
            inodes.add(os.readlink(link))
        except OSError:
            pass
    return inodes


def leftovers(agent_pid, marker, extra_pids=(), namespaces=(), settle=5.0):
    """What is still there once the clean-up had `settle` seconds."""
    deadline = time.monotonic() + settle
    while True:
        reap_orphans()
        left = {
            "processes": processes(marker),
            "pids": [p for p in extra_pids if p > 0 and os.path.exists(f"/proc/{p}") and
                     open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"],
            "leaves": leaves_of(agent_pid),
            "namespaces": sorted(set(namespaces) & user_namespaces()),
        }
        if not any(left.values()) or time.monotonic() > deadline:
            return {k: v for k, v in left.items() if v}
        time.sleep(0.02)


POINTS = ["idmap-holder", "supervisor-before-keeper", "supervisor-after-keeper", "supervisor-init-reported"]
SIGNALS = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT]


@pytest.mark.skipif(not os.path.exists(FAULTY), reason="no oarbank-agent-faulty (OARBANK_TEST_HOOKS=OFF)")
@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
@pytest.mark.parametrize("point", POINTS)
def test_the_agent_killed_inside_a_window_leaves_nothing(tree, uid, sig, point):
    if point == "idmap-holder" and uid != 0:
        pytest.skip("only a root agent makes the idmap holder (root's /etc view)")
    marker = f"31.{os.getpid()}{random.randrange(10**6)}"
    pause = tree / "pause" / "at"
    env = dict(os.environ, OARBANK_FAULT_PAUSE=point, OARBANK_FAULT_PAUSE_FILE=str(pause))
    proc = subprocess.Popen([*as_user(uid), FAULTY, *RUN, "--json", str(tree / "policy.json"), "--",
                             "/bin/sleep", marker], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not pause.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the agent never reached " + point
            time.sleep(0.005)
        paused_pid, a, b = (int(x) for x in pause.read_text().split())
        agent_pid = proc.pid  # setpriv execs the agent: the same pid
        assert paused_pid == agent_pid
        namespaces = []
        if point == "idmap-holder":
            # The holder's own user namespace: nothing may hold it once the agent is gone.
            namespaces.append(os.readlink(f"/proc/{a}/ns/user"))
        if point == "supervisor-before-keeper" and uid == 0 and cgroup_base() and os.access(cgroup_base(), os.W_OK):
            assert leaves_of(agent_pid) == [], "the leaf is made only by the keeper"
        os.kill(agent_pid, sig)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = leftovers(agent_pid, marker, extra_pids=[a, b], namespaces=namespaces)
    assert left == {}, left


@pytest.mark.parametrize("uid,trials", [(0, 300), (NOBODY, 100)], ids=["root", "nobody"])
def test_random_sigkills_of_run_leave_nothing(tree, uid, trials):
    """SIGKILL at a random moment of a run's first 60 ms (its start-up, where
    the windows are, and the first of its job), then count what is left. Bounded: `trials` runs, 240 s.
    The job never ends on its own, so every kill must land while the agent
    runs: in its start-up (the job has not printed its marker yet) or in the
    job (it has); both must be hit, or the trials prove only one of them."""
    rng = random.Random(int(os.environ.get("OARBANK_KILL_SEED", "22")))
    marker = f"32.{os.getpid()}"
    counts = {"processes": 0, "pids": 0, "leaves": 0, "namespaces": 0}
    outcomes = {"start-up": 0, "job": 0, "agent had ended": 0}
    details = []
    start = time.monotonic()
    for i in range(trials):
        assert time.monotonic() - start < 240, f"only {i} of {trials} trials in 240 s"
        read_end, write_end = os.pipe()
        proc = subprocess.Popen([*as_user(uid), AGENT, *RUN, str(tree / "policy.json"), "--",
                                 "/bin/sh", "-c", f"echo {marker}; exec /bin/sleep {marker}"],
                                stdout=write_end, stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(write_end)
        time.sleep(rng.uniform(0, 0.06))
        if proc.poll() is not None:
            outcomes["agent had ended"] += 1
        else:
            os.set_blocking(read_end, False)
            try:
                said = os.read(read_end, 256)
            except BlockingIOError:
                said = b""
            outcomes["job" if marker.encode() in said else "start-up"] += 1
        proc.kill()
        proc.wait()
        os.close(read_end)
        # A user namespace of the job's or root's idmap holder lives only as
        # long as a process of ours (counted here: the agent's binary, or the
        # marker) holds it; the agent's own fds died with it.
        left = leftovers(proc.pid, marker, settle=5.0)
        for key, value in left.items():
            counts[key] += len(value)
            details.append((i, key, value))
    print(f"random kills: {trials} trials ({outcomes}), leftovers {counts}")
    assert sum(counts.values()) == 0, details[:10]
    assert outcomes["agent had ended"] == 0, f"a kill found the agent gone, not mid-run: {outcomes}"
    assert outcomes["start-up"] > 0 and outcomes["job"] > 0, f"the kills did not reach both phases: {outcomes}"


def test_the_production_binary_has_no_pause_points():
    with open(AGENT, "rb") as f:
        binary = f.read()
    assert b"OARBANK_FAULT_PAUSE" not in binary and b"OARBANK_FAULT_" not in binary
    if os.path.exists(FAULTY):
        with open(FAULTY, "rb") as f:
            assert b"OARBANK_FAULT_PAUSE" in f.read()
