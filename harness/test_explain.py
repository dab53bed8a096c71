"""`run --explain` and `cage --explain`: the job is traced from outside its
cage and each refusal is named with the layer that refused it and what
would allow it, in the words of the command (policy fields for `run`,
options for `cage`). One job per layer, each triggering one refusal, with
the agent as root and as uid 65534; a job with no refusal explains
nothing; the file's own permissions are never blamed on the cage; the job
cannot see or stop its tracer, and its own ptrace stays refused."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from job_tree import make_tree, remove_tree, write_policy
from testlib import AGENT, NOBODY, as_user

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="runs the agent as root and as uid 65534: needs root"),
    pytest.mark.skipif(not os.access("/usr/bin/strace", os.X_OK), reason="--explain needs strace (Debian: strace)"),
]

PYCONNECT = "import socket; s = socket.socket(); s.settimeout(5); s.connect(('198.18.0.1', 80))"


class Tree:
    """A worktree and scratch owned by `uid`, an `outside` directory no job
    is granted, and a runner policy over a job tree for `run`."""

    def __init__(self, uid):
        self.uid = uid
        self.root = Path(tempfile.mkdtemp(prefix="oarbank-explain-test-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.wt, self.scratch, self.outside = (self.root / d for d in ("wt", "scratch", "outside"))
        for d in (self.wt, self.scratch, self.outside):
            d.mkdir()
            os.chown(d, uid, uid)
        (self.outside / "notes").write_text("not granted\n")
        os.chmod(self.outside / "notes", 0o644)
        self.job = make_tree("oarbank-explain-job-")
        self.policy = write_policy(self.job)

    def cage(self, script, *args, writable=False, timeout=60):
        argv = [*as_user(self.uid), AGENT, "cage", "--unproven", "--json", "--explain", "--worktree", str(self.wt),
                *(["--writable"] if writable else []), "--scratch", str(self.scratch), *args, "--", "/bin/sh", "-c",
                script]
        return subprocess.run(argv, capture_output=True, timeout=timeout)

    def run(self, script, *args, policy=None, timeout=60):
        argv = [*as_user(self.uid), AGENT, "run", "--unproven", "--json", "--explain", *args, policy or self.policy,
                "--", "/bin/sh", "-c", script]
        return subprocess.run(argv, capture_output=True, timeout=timeout)


@pytest.fixture(params=[0, NOBODY], ids=["root", "nobody"])
def t(request):
    tree = Tree(request.param)
    yield tree
    shutil.rmtree(tree.root, ignore_errors=True)
    remove_tree(tree.job)


def explained(proc):
    assert proc.returncode != 70, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert "explain" in report, report
    return report["explain"]


def only(explain, **want):
    """The one refusal matching `want` (every other refusal is listed in the
    failure message)."""
    hits = [d for d in explain["refusals"] if all(d[k] == v for k, v in want.items())]
    assert len(hits) == 1, json.dumps(explain, indent=1)
    return hits[0]


def test_landlock_read_outside_every_grant(t):
    notes = str(t.outside / "notes")
    d = only(explained(t.cage(f"cat {notes}")), target=notes)
    assert (d["kind"], d["access"], d["denied_by"], d["errno"]) == ("file", "read", "landlock", "EACCES")
    assert d["grant"] == f"--read-file {notes}"
    d = only(explained(t.run(f"cat {notes}")), target=notes)
    assert d["denied_by"] == "landlock"
    assert d["grant"] == f'"tools": [{{"id": "<name>", "paths": ["{notes}"]}}]'


def test_read_only_mount_of_a_read_only_worktree(t):
    target = str(t.wt / "new")
    d = only(explained(t.cage(f"echo x > {target}")), target=target)
    assert (d["denied_by"], d["errno"], d["grant"]) == ("read-only mount", "EROFS", "--writable")
    bundle = str(t.job / "bundle" / "new")
    d = only(explained(t.run(f"echo x > {bundle}")), target=bundle)
    assert d["denied_by"] == "read-only mount"
    assert d["grant"] is None, "no policy field makes the bundle writable"


def test_seccomp_row_by_its_reason(t):
    for proc in (t.cage("unshare -U true"), t.run("unshare -U true")):
        d = only(explained(proc), kind="syscall", target="unshare")
        assert (d["denied_by"], d["errno"], d["grant"]) == ("seccomp", "EPERM", None)
        assert "namespace" in d["explanation"]


def test_network_namespace_has_no_route_out(t):
    d = only(explained(t.cage(f'python3 -c "{PYCONNECT}"')), kind="connect")
    assert (d["target"], d["denied_by"], d["errno"]) == ("198.18.0.1:80", "network namespace", "ENETUNREACH")
    assert d["grant"] == "--allow <host>"
    own = write_policy(t.job, name="ipc.json", ipc="job")
    d = only(explained(t.run(f'python3 -c "{PYCONNECT}"', policy=own)), kind="connect")
    assert (d["denied_by"], d["errno"]) == ("network namespace", "ENETUNREACH")
    assert d["grant"].startswith('"net": {"mode": "egress-allowlist"')


def test_no_network_socket_under_run_names_the_policy_fields(t):
    d = only(explained(t.run(f'python3 -c "{PYCONNECT}"')), kind="socket")
    assert d["denied_by"] == "seccomp"
    assert d["grant"].startswith('"net": {"mode": "egress-allowlist"')
    assert '"ipc": "job"' in d["explanation"]


def test_proxy_refusal_names_the_host_and_the_option(t):
    client = ("import os, socket; h, p = os.environ['HTTPS_PROXY'].split('//')[1].rstrip('/').split(':'); "
              "s = socket.create_connection((h, int(p))); s.sendall(b'CONNECT other.test:443 HTTP/1.1\\r\\n"
              "Host: other.test:443\\r\\n\\r\\n'); print(s.recv(200))")
    d = only(explained(t.cage(f'python3 -c "{client}"', "--allow", "allowed.test")), kind="proxy")
    assert (d["target"], d["denied_by"], d["errno"]) == ("other.test:443", "egress proxy", "403")
    assert "not in the allowlist" in d["explanation"]
    assert d["grant"] == "--allow other.test"
    allow = write_policy(t.job, name="allow.json",
                         net={"mode": "egress-allowlist", "allow": ["allowed.test"], "proxy_port": 3128})
    d = only(explained(t.run(f'python3 -c "{client}"', policy=allow)), kind="proxy")
    assert (d["target"], d["denied_by"]) == ("other.test:443", "egress proxy")
    assert d["grant"] == '"net": {"allow": [..., "other.test"]}'


def test_file_permissions_are_not_the_cage(t):
    locked = t.wt / "locked"
    locked.write_text("mode 000, another owner\n")
    os.chown(locked, 12345, 12345)
    os.chmod(locked, 0)
    explain = explained(t.cage(f"cat {locked}", writable=True))
    assert explain["refusals"] == [], json.dumps(explain, indent=1)
    [d] = explain["not_the_cage"]
    assert (d["target"], d["denied_by"]) == (str(locked), "file permissions")
    work_locked = t.job / "work" / "locked"
    shutil.copy(locked, work_locked)
    os.chown(work_locked, 12345, 12345)
    os.chmod(work_locked, 0)
    explain = explained(t.run(f"cat {work_locked}"))
    assert explain["refusals"] == [], json.dumps(explain, indent=1)
    assert [d["denied_by"] for d in explain["not_the_cage"]] == ["file permissions"]


def test_a_job_with_no_refusal_explains_nothing(t):
    for proc in (t.cage("echo hello > /dev/null"), t.run("echo hello > /dev/null")):
        explain = explained(proc)
        assert proc.returncode == 0
        assert (explain["refusals"], explain["not_the_cage"], explain["complete"]) == ([], [], True)
        assert explain["module_ran"] is True


def test_the_job_cannot_see_or_stop_its_tracer(t):
    # TracerPid shows 0 in the job's pid namespace; every process it can
    # signal is its own; its own ptrace (strace) stays refused.
    script = ("grep TracerPid /proc/self/status; kill -STOP -1 2>/dev/null; kill -KILL 1 2>/dev/null; "
              "strace -o /dev/null true; echo strace=$?")
    proc = t.cage(script)
    explain = explained(proc)
    out = json.loads(proc.stdout)["stdout"]
    assert "TracerPid:\t0" in out
    assert "strace=0" not in out
    assert explain["complete"] is True, explain
    only(explain, kind="syscall", target="ptrace")


def test_a_tracer_killed_from_outside_ends_the_job(t):
    argv = [*as_user(t.uid), AGENT, "cage", "--unproven", "--json", "--explain", "--worktree", str(t.wt), "--scratch",
            str(t.scratch), "--", "/bin/sleep", "30"]
    agent = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    strace = None
    deadline = time.monotonic() + 20
    while strace is None and time.monotonic() < deadline:
        for task in Path(f"/proc/{agent.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                if Path(f"/proc/{child}/comm").read_text().strip() == "strace":
                    strace = int(child)
        time.sleep(0.05)
    assert strace is not None, "the agent's tracer was not found"
    time.sleep(0.5)
    start = time.monotonic()
    os.kill(strace, signal.SIGKILL)
    out, err = agent.communicate(timeout=20)
    assert time.monotonic() - start < 10, "the job ran on untraced"
    report = json.loads(out)
    assert report["signal"] == signal.SIGKILL, report
    assert report["explain"]["complete"] is False
    assert "tracer ended before the job" in report["explain"]["incomplete"]


def test_explain_with_debug_is_refused(t):
    proc = t.cage("true", "--debug")
    assert proc.returncode == 64, proc.stderr
    assert b"not with --debug" in proc.stderr


def test_text_lines_escape_what_the_job_chose(t):
    name = t.outside / "esc\x1b[31mred"
    name.write_text("x")
    argv = [*as_user(t.uid), AGENT, "cage", "--unproven", "--explain", "--worktree", str(t.wt), "--scratch",
            str(t.scratch), "--", "/bin/cat", str(name)]
    proc = subprocess.run(argv, capture_output=True, timeout=60)
    lines = [line for line in proc.stderr.split(b"\n") if line.startswith(b"sandbox: refused")]
    assert len(lines) == 1, proc.stderr
    assert b"\x1b" not in lines[0]
    assert b"esc\\x1b[31mred" in lines[0]
    assert b"to allow it: --read-file " in lines[0]


def test_another_project_is_never_suggested(t):
    other = t.outside / "other-project"
    (other / ".git").mkdir(parents=True)
    (other / "src").mkdir()
    (other / "src" / "main.c").write_text("int main;\n")
    os.chmod(other / "src" / "main.c", 0o644)
    d = only(explained(t.cage(f"cat {other}/src/main.c")), target=f"{other}/src/main.c")
    assert d["grant"] is None, d
    assert f"another project ({other}" in d["explanation"], d


def test_homes_and_the_system_are_never_suggested(t):
    for path in ("/root/.ssh/id_ed25519", "/etc/ssh/ssh_host_ed25519_key", "/proc/1/environ"):
        proc = t.cage(f"cat {path}")
        for d in explained(proc)["refusals"]:
            assert d["grant"] is None, d


def test_the_jobs_own_loopback_is_not_a_refusal(t):
    # cage gives the job TCP and UDP on a loopback of its own (ipc "job"): a
    # connection refused there (nothing listens) is the job's, not the cage's.
    script = ("import socket; s = socket.socket(); s.settimeout(2)\n"
              "try: s.connect(('127.0.0.1', 9))\n"
              "except OSError as e: print(e.errno)")
    proc = t.cage(f'python3 -c "{script}"')
    explain = explained(proc)
    assert "111" in json.loads(proc.stdout)["stdout"], proc.stdout
    assert explain["refusals"] == [], json.dumps(explain, indent=1)


def test_a_call_the_cage_kills_is_named(t):
    # A kill ends the process with no SIGSYS stop for the tracer: the call
    # left without a result is the one named. getpid through the x32 ABI
    # (bit 30), which the cage kills outright (the shell reports 128+SIGSYS).
    script = "import ctypes; ctypes.CDLL(None).syscall(0x40000000 | 39)"
    for proc in (t.cage(f'python3 -c "{script}"'), t.run(f'python3 -c "{script}"')):
        report = json.loads(proc.stdout)
        assert report["exit_code"] == 128 + signal.SIGSYS, report
        d = only(report["explain"], kind="signal")
        assert (d["denied_by"], d["errno"], d["grant"]) == ("seccomp", "SIGSYS", None)
