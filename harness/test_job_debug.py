"""Debugging inside the job (`cage --debug`, the policy's debug): gdb,
strace and LeakSanitizer on the job's own processes work; the job's init
and anything outside the job stay out of reach; without it ptrace is
refused; `sandbox-exec` alone refuses a debug policy. As root and as uid
65534."""
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from testlib import AGENT, NOBODY, as_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the agent as root and as uid 65534: needs root")


class Tree:
    def __init__(self, uid):
        self.uid = uid
        self.root = Path(tempfile.mkdtemp(prefix="oarbank-debug-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.wt, self.scratch = self.root / "wt", self.root / "scratch"
        for d in (self.wt, self.scratch):
            d.mkdir()
            os.chown(d, uid, uid)

    def cage(self, *args, options=("--debug",), timeout=120):
        argv = [*as_user(self.uid), AGENT, "cage", "--unproven", "--worktree", str(self.wt), "--writable",
                "--scratch", str(self.scratch), *options, "--", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(params=[0, NOBODY], ids=["root", "nobody"])
def t(request):
    tree = Tree(request.param)
    yield tree
    shutil.rmtree(tree.root, ignore_errors=True)


def test_strace_follows_the_jobs_own_processes(t):
    r = t.cage("/usr/bin/strace", "-f", "-e", "trace=execve", "/bin/sh", "-c", "/bin/true; echo done")
    assert r.returncode == 0, r
    assert "done" in r.stdout and 'execve("/bin/true"' in r.stderr, r.stderr
    # Without --debug the same is refused.
    r = t.cage("/usr/bin/strace", "-f", "/bin/true", options=())
    assert r.returncode != 0 and "Operation not permitted" in r.stderr, r


def test_leak_sanitizer_finds_a_leak(t):
    (t.wt / "leak.c").write_text("#include <stdlib.h>\nvoid *keep;\nint main(void) { keep = malloc(7); keep = 0; return 0; }\n")
    os.chown(t.wt / "leak.c", t.uid, t.uid)
    r = t.cage("/bin/sh", "-c", f"cd {t.wt} && gcc -fsanitize=address -g leak.c -o leak && ./leak")
    assert r.returncode != 0, r
    assert "ERROR: LeakSanitizer: detected memory leaks" in r.stderr, r.stderr[-2000:]
    assert "does not work under ptrace" not in r.stderr


def test_gdb_runs_a_program_of_the_job(t):
    r = t.cage("/usr/bin/gdb", "-batch", "-nx", "-ex", "run", "-ex", "info inferiors", "--args", "/bin/sh", "-c",
               "exit 3")
    assert "exited with code 03" in r.stdout, r


def test_the_jobs_init_and_the_host_stay_out_of_reach(t):
    # pid 1 is the job's init: not traceable, its memory and environment unreadable.
    r = t.cage("/usr/bin/strace", "-p", "1")
    assert r.returncode != 0 and "Operation not permitted" in r.stderr, r
    r = t.cage("/bin/sh", "-c", "cat /proc/1/environ; cat /proc/1/mem")
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
    # Only the job's processes have pids there: the agent and the host's init are not among them.
    r = t.cage("/bin/sh", "-c", "ls /proc | grep -c '^[0-9]'")
    assert r.returncode == 0 and int(r.stdout) <= 4, r.stdout


def test_sandbox_exec_and_a_bad_value_refuse_debug(t):
    policy = t.root / "debug.json"
    policy.write_text(json.dumps({"contract": 1, "role": "runner", "bundle": str(t.wt), "debug": True}))
    r = subprocess.run([*as_user(t.uid), AGENT, "sandbox-exec", str(policy), "--", "/bin/true"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 70 and "debug.job-ptrace" in r.stderr, r.stderr
    policy.write_text(json.dumps({"contract": 1, "role": "runner", "bundle": str(t.wt), "debug": "yes"}))
    r = subprocess.run([*as_user(t.uid), AGENT, "run", "--unproven", str(policy), "--", "/bin/true"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 64 and r.stderr == "policy: debug: expected true or false\n", r.stderr
