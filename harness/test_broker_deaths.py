"""A job with a container broker is three processes on the host: the broker,
its watchdog (the owner of the job's subordinate-id lease) and the agent
running the module (`broker -- oarbank-agent run ...`). Whichever of them
SIGKILL takes, in whichever order, the job's container must not outlive
them: while one of them lives, it stops the container (the broker when
its module's connection closes, the watchdog when the broker dies, the
broker when its watchdog dies); once all three are dead nothing may run,
and the lease is gone. In each order, each kill comes once the last
victim is dead and its survivors have had up to SETTLE_S to act, so each
death is met by whoever is left. Killed back to back, with no time for
anyone to act, the container must end all the same: its first process
(oarbank-container-init) holds a pipe whose only write end is the
broker's, and ends the container when the kernel closes it."""
import itertools
import json
import os
import signal

import pytest

from test_broker import MODULE_ASK, PLATFORM, Broker, job, leases, running, store, watchdog_of  # noqa: F401
from testlib import AGENT, NOBODY, eventually

HOLDING_MODULE = MODULE_ASK + """
ask({"op": "container.run", "image": sys.argv[1], "platform": sys.argv[2], "timeout_s": 120,
     "args": ["sleep", "600"]})
"""
SETTLE_S = 15  # the most a survivor may take to stop the container
LAST_S = 5  # after the last death: nothing of the job may run


def alive(pid):
    """A process that exists and is not a zombie."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # gone before the open (ENOENT) or between it and the read (ESRCH)
        return False


def agent_of(policy_path):
    """The pid of the `oarbank-agent run` the broker started for the job."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [AGENT.encode(), b"run"] and policy_path.encode() in argv:
            return int(pid)
    raise AssertionError("no agent runs the job")


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root-job", "nobody-job"])
@pytest.mark.parametrize("order", list(itertools.permutations(["agent", "broker", "watchdog"])), ids="-then-".join)
@pytest.mark.parametrize("spacing", ["spaced", "at-once"])
def test_the_broker_its_watchdog_and_the_agent_killed_in_any_order_leave_no_container(store, job, order, uid,
                                                                                       spacing):
    job_id = "broker-deaths"
    (job / "bundle" / "module.py").write_text(HOLDING_MODULE)
    policy = {"contract": 1, "role": "runner", "bundle": str(job / "bundle"), "work": str(job / "work"),
              "data": str(job / "data"), "tmp": str(job / "work" / "tmp"), "broker": str(job / "broker.sock")}
    (job / "policy.json").write_text(json.dumps(policy))
    b = Broker(store, job, job_id, uid=uid,
               argv=[AGENT, "run", "--unproven", "--timeout", "120", str(job / "policy.json"), "--", "python3",
                     str(job / "bundle" / "module.py"), store.ref, PLATFORM])
    try:
        _, container = running(store, job_id, timeout=60)
        pids = {"broker": b.proc.pid, "watchdog": watchdog_of(job_id), "agent": agent_of(str(job / "policy.json"))}
        for name in order:
            if alive(pids[name]):  # an earlier death may have taken it already
                os.kill(pids[name], signal.SIGKILL)
            if spacing == "spaced":
                assert eventually(lambda: not alive(pids[name]), timeout=10), f"{name} outlived its SIGKILL"
                eventually(lambda: not alive(container) or not any(alive(p) for p in pids.values()),
                           timeout=SETTLE_S)
        for name in order:
            assert eventually(lambda: not alive(pids[name]), timeout=10), f"{name} outlived its SIGKILL"
        b.proc.communicate(timeout=30)
        assert eventually(lambda: not alive(container), timeout=LAST_S), \
            f"the container ran {LAST_S} s after {', '.join(order)} died"
        assert eventually(lambda: store.job_containers(job_id) == [], timeout=30), store.job_containers(job_id)
        assert leases(job_id) == []
    finally:
        if b.proc.poll() is None:
            b.proc.kill()
            b.proc.communicate(timeout=30)
