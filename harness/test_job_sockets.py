"""The job's own sockets (the policy's ipc "job", on by default for `cage`):
TCP and UDP on the loopback of the job's own network namespace, bind and
listen included, work inside the job; nothing outside reaches in (the host,
another job) and nothing leads out (the host's loopback, its unix sockets),
the egress proxy's port stays the proxy's, and where the namespace cannot
be had (`sandbox-exec` alone) or the combination makes no sense (egress-any)
it is refused. As root and as uid 65534, through `run` and `cage`."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from testlib import AGENT, NOBODY, as_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the agent as root and as uid 65534: needs root")

ENTRIES = pytest.mark.parametrize("entry", ["run", "cage"])


class Tree:
    """A job's directories owned by `uid`, and a runner policy over them with
    the job's own sockets (`run`), or the same directories for `cage`."""

    def __init__(self, uid):
        self.uid = uid
        self.root = Path(tempfile.mkdtemp(prefix="oarbank-ipc-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.work, self.scratch, self.bundle = self.root / "work", self.root / "scratch", self.root / "bundle"
        for d in (self.work, self.work / "tmp", self.scratch, self.bundle):
            d.mkdir()
            os.chown(d, uid, uid)

    def policy(self, **fields):
        doc = {"contract": 1, "role": "runner", "bundle": str(self.bundle), "work": str(self.work),
               "tmp": str(self.work / "tmp"), "data": str(self.scratch), "ipc": "job", **fields}
        path = self.root / f"policy-{len(list(self.root.glob('policy-*')))}.json"
        path.write_text(json.dumps(doc))
        return str(path)

    def argv(self, entry, *args, policy=None, options=()):
        if entry == "run":
            return [*as_user(self.uid), AGENT, "run", "--unproven", *options, policy or self.policy(), "--", *args]
        return [*as_user(self.uid), AGENT, "cage", "--unproven", "--worktree", str(self.work), "--writable",
                "--scratch", str(self.scratch), *options, "--", *args]

    def job(self, entry, *args, **kw):
        return subprocess.run(self.argv(entry, *args, **kw), capture_output=True, text=True, timeout=60)

    def start(self, entry, *args, **kw):
        return subprocess.Popen(self.argv(entry, *args, **kw), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)


@pytest.fixture(params=[0, NOBODY], ids=["root", "nobody"])
def t(request):
    tree = Tree(request.param)
    yield tree
    shutil.rmtree(tree.root, ignore_errors=True)


def python(code):
    return ["/usr/bin/python3", "-c", code]


def wait_for(path, proc, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        if proc.poll() is not None:
            raise AssertionError(f"the job ended early: {proc.communicate()}")
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


# A server in the job: listens on 127.0.0.1 (and ::1), writes its ports where
# the test reads them, accepts until the go file exists, then prints how
# many connections it accepted.
SERVER = r"""
import os, socket, sys, time
work = sys.argv[1]
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(); tcp.setblocking(False)
tcp6 = socket.socket(socket.AF_INET6); tcp6.bind(("::1", 0)); tcp6.listen(); tcp6.setblocking(False)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0)); udp.setblocking(False)
ports = f"{tcp.getsockname()[1]} {tcp6.getsockname()[1]} {udp.getsockname()[1]}"
open(work + "/ports.tmp", "w").write(ports); os.rename(work + "/ports.tmp", work + "/ports")
accepted = 0
while not os.path.exists(work + "/go"):
    for s in (tcp, tcp6):
        try: s.accept(); accepted += 1
        except BlockingIOError: pass
    try: udp.recv(100); accepted += 1
    except BlockingIOError: pass
    time.sleep(0.01)
print("accepted", accepted)
"""


@ENTRIES
def test_a_server_in_the_job_is_reached_from_inside_the_job(t, entry):
    code = r"""
import socket, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
def serve():
    c, _ = s.accept(); c.sendall(c.recv(100).upper()); c.close()
threading.Thread(target=serve).start()
c = socket.create_connection(s.getsockname()); c.sendall(b"tcp"); print(c.recv(100).decode())
s6 = socket.socket(socket.AF_INET6); s6.bind(("::1", 0)); s6.listen()
c6 = socket.create_connection(s6.getsockname()[:2]); a, _ = s6.accept(); a.sendall(b"tcp6"); print(c6.recv(100).decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"udp", u.getsockname()); print(u.recv(100).decode())
"""
    r = t.job(entry, *python(code))
    assert r.returncode == 0 and r.stdout.split() == ["TCP", "tcp6", "udp"], r


@ENTRIES
def test_a_job_listener_cannot_be_reached_from_the_host_or_another_job(t, entry):
    server = t.start(entry, *python(SERVER), str(t.work))
    try:
        tcp, tcp6, udp = (int(p) for p in wait_for(t.work / "ports", server).split())
        # From the host: the job's ports are not the host's.
        for family, address in ((socket.AF_INET, ("127.0.0.1", tcp)), (socket.AF_INET6, ("::1", tcp6))):
            with socket.socket(family) as c:
                c.settimeout(5)
                assert c.connect_ex(address) != 0, f"the host reached the job's listener at {address}"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.sendto(b"from the host", ("127.0.0.1", udp))
        # From another job, of the same policy, at the same time.
        probe = (f"import socket\nfor f, a in ((socket.AF_INET, ('127.0.0.1', {tcp})), (socket.AF_INET6, ('::1', {tcp6}))):\n"
                 "    s = socket.socket(f); print(s.connect_ex(a))\n"
                 f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp}))\n")
        other = t.job(entry, *python(probe))
        assert other.returncode == 0, other
        assert [int(x) for x in other.stdout.split()] == [111, 111], other.stdout  # ECONNREFUSED both
        (t.work / "go").touch()
        out, err = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert out.split() == ["accepted", "0"], out


@ENTRIES
def test_the_hosts_loopback_and_unix_sockets_stay_out_of_reach(t, entry):
    with socket.socket() as host:
        host.bind(("127.0.0.1", 0))
        host.listen()
        host.setblocking(False)
        port = host.getsockname()[1]
        sock_dir = Path(tempfile.mkdtemp(prefix="oarbank-ipc-sock-", dir="/tmp"))
        os.chmod(sock_dir, 0o755)
        path = str(sock_dir / "host.sock")
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(path)
        os.chmod(path, 0o777)
        unix.listen()
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind(b"\0oarbank-ipc-test-host")
        abstract.listen()
        try:
            code = (f"import socket\ns = socket.socket(); print(s.connect_ex(('127.0.0.1', {port})))\n"
                    "for name in (" + repr(path) + ", b'\\0oarbank-ipc-test-host'):\n"
                    "    try: socket.socket(socket.AF_UNIX).connect(name); print('connected')\n"
                    "    except OSError as e: print(e.errno)\n")
            r = t.job(entry, *python(code))
            assert r.returncode == 0, r
            # ECONNREFUSED (the job's own loopback has nothing there); EPERM for each unix socket.
            assert r.stdout.split() == ["111", "1", "1"], r.stdout
            with pytest.raises(BlockingIOError):
                host.accept()
        finally:
            unix.close()
            abstract.close()
            shutil.rmtree(sock_dir, ignore_errors=True)


def test_the_proxy_port_stays_the_proxys(t):
    """With an allow list the job's loopback holds the egress proxy's
    listener: the job may listen beside it, never on its address and port."""
    code = r"""
import os, socket
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1].strip("/"))
for address in ("127.0.0.1", "0.0.0.0"):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try: s.bind((address, port)); print("bound", address)
    except OSError as e: print(e.errno)
free = socket.socket(); free.bind(("127.0.0.1", 0)); free.listen(); print("own", free.getsockname()[1] != port)
c = socket.create_connection(("127.0.0.1", port)); c.sendall(b"CONNECT other.example:443 HTTP/1.1\r\nHost: other.example:443\r\n\r\n")
print(c.recv(100).split(b"\r\n")[0].decode())
"""
    r = t.job("cage", *python(code), options=("--allow", "api.example.org"))
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[:3] == ["98", "98", "own True"], lines  # EADDRINUSE both
    assert lines[3].startswith("HTTP/1.1 403"), lines  # the proxy answered, and refused the host


def test_sandbox_exec_refuses_the_jobs_own_sockets(t):
    r = subprocess.run([*as_user(t.uid), AGENT, "sandbox-exec", t.policy(), "--", "/bin/true"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 70 and "ipc.job-loopback" in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("value,line", [
    ("all", 'policy: ipc: expected "none" or "job"\n'),
    (1, 'policy: ipc: expected "none" or "job"\n'),
])
def test_a_bad_ipc_value_is_one_line_and_64(t, value, line):
    r = t.job("run", "/bin/true", policy=t.policy(ipc=value))
    assert r.returncode == 64 and r.stderr == line, r.stderr


def test_ipc_job_with_egress_any_is_refused(t):
    r = t.job("run", "/bin/true", policy=t.policy(net={"mode": "egress-any"}))
    assert r.returncode == 64 and r.stderr.startswith('policy: ipc: "job" cannot be combined with net.mode egress-any'), r


def test_cage_without_job_sockets_has_none_and_json_says_what_it_gave(t):
    code = "import socket\ntry: socket.socket(); print('made')\nexcept OSError as e: print(e.errno)\n"
    r = t.job("cage", *python(code), options=("--no-job-sockets",))
    assert r.returncode == 0 and r.stdout == "1\n", r  # EPERM: net none, no socket of its own
    r = t.job("cage", *python(code))
    assert r.returncode == 0 and r.stdout == "made\n", r
    for options, ipc in (((), "job"), (("--no-job-sockets",), "none")):
        r = t.job("cage", "/bin/true", options=("--json", *options))
        sockets = json.loads(r.stdout)["cage"]["job_sockets"]
        assert sockets["ipc"] == ipc and sockets["loopback_tcp_udp"] == (ipc == "job"), sockets
        assert sockets["unix"].startswith("refused"), sockets
        # This host's Landlock is below ABI 9: no unix socket of the job's own
        # (from ABI 9 the battery's unix_pathname_own shows one in the guests).
        assert sockets["unix_sockets"] is False, sockets
        if ipc == "job":
            assert "from ABI 9" in sockets["unix"], sockets


@ENTRIES
def test_a_listener_one_job_leaves_behind_is_gone_for_the_next(t, entry):
    """The first job starts a daemon (its own session, reparented) that
    listens and would answer the next job on the same port; the job's end
    takes its network namespace and every process in it, so the next job,
    of the same policy, finds nothing there."""
    daemon = ("import os, socket, time\n"
              "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
              f"open('{t.work}/port', 'w').write(str(s.getsockname()[1]))\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              "        while True: c, _ = s.accept(); c.sendall(b'left behind'); c.close()\n"
              "    os._exit(0)\n"
              "time.sleep(0.2)\n")
    r = t.job(entry, *python(daemon))
    assert r.returncode == 0, r
    port = int((t.work / "port").read_text())
    r = t.job(entry, *python(f"import socket; print(socket.socket().connect_ex(('127.0.0.1', {port})))"))
    assert r.returncode == 0 and r.stdout == "111\n", r  # ECONNREFUSED
