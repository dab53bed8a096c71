"""End to end checks of the container broker (oarbank-agent broker) with the
real Podman of this machine: every refusal over the socket, a run whose
output lands in the work directory with the job's ownership (root and uid
65534 jobs), a timeout, containers removed when the job ends, malformed and
oversized requests, no runtime on PATH, a confined module that runs a
container through the broker it inherited, and what the broker holds for
the job: limits read from the container's cgroup, time from
acceptance through hang-ups, one reservation for all connections, no
container after a SIGKILL of the broker, jobs kept apart, container root on
the job's own subordinate range, no host socket, no runtime destination,
and a short soak (scripts/soak-broker.sh runs the long one).

One busybox-static image is imported once per session into a throw-away
state directory (nothing is pulled from a registry) and referenced by its
digest. Each podman run costs about a second here, so the runs are few."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time

import pytest

from faults import marked_processes
from testlib import AGENT, NOBODY, eventually, landlock_abi

PLATFORM = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}.get(os.uname().machine, "linux/" + os.uname().machine)
OTHER_PLATFORM = "linux/s390x" if PLATFORM != "linux/s390x" else "linux/amd64"
BUSYBOX = "/bin/busybox"
REPLY = "oarbank.broker-reply/1"  # every answer's format (docs/json/broker-reply.md)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the broker maps container ids with --uidmap: needs root")


def podman_missing():
    return shutil.which("podman") is None or shutil.which("runc") is None


class Store:
    """The session's image store: the broker's state directory with the
    busybox image imported and its digest-pinned reference."""

    def __init__(self, root):
        self.state = os.path.join(root, "state")
        os.makedirs(self.state, mode=0o700)
        self.env = {"CONTAINERS_CONF": self.state + "/containers.conf",
                    "CONTAINERS_STORAGE_CONF": self.state + "/storage.conf", "PATH": os.environ["PATH"],
                    "HOME": self.state + "/home", "TMPDIR": self.state + "/tmp"}

    def podman(self, *args, check=True, root=None):
        """Podman on the agent's image store, or (root) on one job's own
        storage root <state>/j<slot>, which reads images from the store."""
        root = root or self.state
        extra = [] if root == self.state else [f"--storage-opt=vfs.imagestore={self.state}/storage"]
        cmd = ["podman", f"--root={root}/storage", f"--runroot={root}/run", f"--tmpdir={self.state}/tmp",
               f"--runtime={shutil.which('runc')}", "--storage-driver=vfs", "--cgroup-manager=cgroupfs",
               "--events-backend=file", *extra, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=self.env)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: {r.stderr}")
        return r

    def roots(self):
        return [self.state] + sorted(str(p) for p in pathlib.Path(self.state).glob("j[0-9]*"))

    def job_containers(self, job, running_only=False):
        ids = []
        for root in self.roots():
            args = ["ps", "--quiet", f"--filter=label=oarbank.job={job}"] + ([] if running_only else ["--all"])
            ids += self.podman(*args, root=root).stdout.split()
        return ids


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    if podman_missing():
        pytest.skip("podman or runc is not installed (scripts/setup.sh installs podman, runc, uidmap)")
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox-static is not installed (scripts/setup.sh installs it)")
    # Podman refuses a runroot longer than 50 bytes: a short state directory.
    root = pathlib.Path(tempfile.mkdtemp(prefix="obk-", dir="/tmp"))
    os.chmod(root, 0o755)
    s = Store(str(root))
    # The broker writes the configuration; a run with no request makes it.
    sock = str(root / "prepare.sock")
    (root / "prepare-work").mkdir()
    r = subprocess.run([AGENT, "broker", "--socket", sock, "--work", str(root / "prepare-work"), "--job", "broker-prepare",
                        "--state-dir", s.state, "--", "true"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    image = root / "image"
    (image / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, image / "bin" / "busybox")
    for applet in ("sh", "echo", "cat", "sleep", "id", "ls", "stat", "touch", "mkdir"):
        os.symlink("busybox", image / "bin" / applet)
    with tarfile.open(root / "image.tar", "w") as tar:
        tar.add(image, arcname=".")
    s.podman("import", "--quiet", str(root / "image.tar"), "localhost/oarbank-broker-test:1")
    digest = s.podman("image", "inspect", "--format", "{{.Digest}}", "localhost/oarbank-broker-test:1").stdout.strip()
    assert digest.startswith("sha256:") and len(digest) == 71, digest
    s.ref = "localhost/oarbank-broker-test@" + digest
    yield s
    for r in s.roots():
        leftovers = s.podman("ps", "--all", "--quiet", "--filter=label=oarbank.job", root=r).stdout.split()
        if leftovers:
            s.podman("rm", "--force", "--time=0", *leftovers, check=False, root=r)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def job():
    # Not under pytest's 0700 tmp root: uid 65534 must reach it.
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="obk-job-", dir="/tmp"))
    for d in ("bundle", "work", "work/out", "work/tmp", "data", "data/cache", "outside"):
        (tmp_path / d).mkdir()
        os.chmod(tmp_path / d, 0o755)
    os.chmod(tmp_path, 0o755)
    (tmp_path / "outside" / "secret").write_text("ssh private key\n")
    os.symlink(str(tmp_path / "outside"), tmp_path / "work" / "escape")
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


class Broker:
    def __init__(self, store, job, job_id, uid=0, extra=(), env=None, argv=(), cpus="1", mem_gb="0.5"):
        self.socket = str(job / "broker.sock")
        self.job_id = job_id
        if uid:
            for d in ("work", "work/out", "work/tmp", "data", "data/cache"):
                os.chown(job / d, uid, uid)
        cmd = [AGENT, "broker", "--socket", self.socket, "--work", str(job / "work"), "--data", str(job / "data"),
               "--job", job_id, "--state-dir", store.state, "--image", f"{store.ref}={PLATFORM}",
               "--cpus", cpus, "--mem-gb", mem_gb, "--max-timeout", "120", *extra]
        if argv:
            cmd += ["--", *argv]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env if env is not None else os.environ.copy())
        # The broker says so once it listens (or exits at once on bad input).
        self.banner = self.proc.stdout.readline()
        assert self.banner.startswith("broker: listening on "), (self.banner, self.proc.communicate())

    def request(self, obj, raw=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(120)
        s.connect(self.socket)
        try:
            s.sendall(raw if raw is not None else (json.dumps(obj) + "\n").encode())
        except BrokenPipeError:
            pass  # a broker refusing the connection (over its cap) answers and closes before reading: read the answer
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        assert data.endswith(b"\n") and data.count(b"\n") == 1, data
        return json.loads(data)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err


def run_request(store, args, **fields):
    r = {"op": "container.run", "image": store.ref, "platform": PLATFORM, "args": args, "timeout_s": 60}
    r.update(fields)
    return r


def test_every_refusal_over_the_socket(store, job):
    b = Broker(store, job, "broker-refusals")
    try:
        ok = b.request({"op": "status"})
        assert ok["ok"] is True and ok["running"] == 0
        assert ok["images"] == [{"image": store.ref, "platform": PLATFORM, "present": True}]
        cases = [
            (run_request(store, ["true"], image="localhost/oarbank-broker-test:1"), "image_not_approved"),
            (run_request(store, ["true"], image=store.ref.replace("sha256:", "sha256:0") [:-1]), "image_not_approved"),
            (run_request(store, ["true"], platform=OTHER_PLATFORM), "platform_unavailable"),
            (run_request(store, ["true"], mounts=[{"src": "../outside", "dst": "/m"}]), "bad_mount"),
            (run_request(store, ["true"], mounts=[{"src": "out/../../outside", "dst": "/m"}]), "bad_mount"),
            (run_request(store, ["true"], mounts=[{"src": str(job / "outside"), "dst": "/m"}]), "bad_mount"),
            (run_request(store, ["true"], mounts=[{"src": "escape", "dst": "/m"}]), "bad_mount"),
            (run_request(store, ["true"], mounts=[{"src": "out", "dst": "relative"}]), "bad_mount"),
            (run_request(store, ["true"], network="egress"), "network_not_granted"),
            (run_request(store, ["true"], network="host"), "network_not_granted"),
            (run_request(store, ["true"], cpus=2), "bad_request"),
            (run_request(store, ["true"], privileged=True), "bad_request"),
        ]
        for request, error in cases:
            answer = b.request(request)
            assert answer["ok"] is False, (request, answer)
            assert answer["error"] == error, (request, answer)
            assert answer["detail"], answer
        # Nothing ran for any of them.
        assert store.job_containers("broker-refusals") == []
        assert not os.path.exists(job / "work" / ".oarbank-broker")
    finally:
        b.stop()


def test_malformed_and_oversized_requests_are_refused_not_crashes(store, job):
    b = Broker(store, job, "broker-malformed")
    try:
        for raw in (b"not json\n", b"[1,2]\n", b"{\"op\": \"container.exec\"}\n", b"\xff\xfe\n", b"{\"op\":\n",
                    b"[" * 30000 + b"\n"):
            answer = b.request(None, raw=raw)
            assert answer["ok"] is False and answer["error"] == "bad_request", (raw[:40], answer)
        answer = b.request(None, raw=b"{\"op\": \"status\", \"pad\": \"" + b"a" * 70000)
        assert answer == {"format": REPLY, "ok": False, "error": "bad_request", "detail": "request: longer than 65536 bytes"}
        # Still serving.
        assert b.request({"op": "status"})["ok"] is True
        assert b.proc.poll() is None
    finally:
        b.stop()


def test_connections_beyond_the_cap_are_refused(store, job):
    b = Broker(store, job, "broker-cap")
    held = []
    try:
        for _ in range(32):
            c = socket.socket(socket.AF_UNIX)
            c.connect(b.socket)
            held.append(c)
        time.sleep(0.5)  # the broker has accepted them all
        answer = b.request(None, raw=b'{"op": "status"}\n')
        assert answer == {"format": REPLY, "ok": False, "error": "bad_request",
                          "detail": "broker: 32 connections already open"}
        for c in held:
            c.close()
        held = []
        deadline = time.time() + 10
        while time.time() < deadline:
            answer = b.request({"op": "status"})
            if answer["ok"]:
                break
            time.sleep(0.1)
        assert answer["ok"] is True, answer
    finally:
        for c in held:
            c.close()
        b.stop()


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root-job", "nobody-job"])
def test_a_run_writes_into_the_work_directory_as_the_job(store, job, uid):
    (job / "data" / "cache" / "input").write_text("from-data\n")
    b = Broker(store, job, f"broker-run-{uid}", uid=uid)
    try:
        answer = b.request(run_request(
            store, ["sh", "-c", "echo made > /out/made; cat /in/input; echo to-stderr >&2; exit 3"],
            mounts=[{"src": "out", "dst": "/out"}, {"src": "data:cache", "dst": "/in", "ro": True}],
            env={"GREETING": "hi"}))
        assert answer["ok"] is True, answer
        assert answer["exit_code"] == 3
        assert answer["timed_out"] is False
        assert answer["stderr_tail"] == "to-stderr\n"
        assert answer["stdout_tail"] == "from-data\n"
        made = job / "work" / "out" / "made"
        assert made.read_text() == "made\n"
        assert (os.stat(made).st_uid, os.stat(made).st_gid) == (uid, uid)
        for stream in ("stdout", "stderr"):
            path = answer[stream + "_path"]
            assert path.startswith(str(job / "work") + "/")
            assert os.stat(path).st_uid == uid
        with open(answer["stderr_path"]) as f:
            assert f.read() == "to-stderr\n"
        assert answer["duration_s"] > 0
        assert store.job_containers(f"broker-run-{uid}") == []  # --rm
    finally:
        b.stop()


def test_read_only_mounts_and_a_timeout(store, job):
    (job / "data" / "cache" / "input").write_text("kept\n")
    b = Broker(store, job, "broker-timeout")
    try:
        answer = b.request(run_request(store, ["sh", "-c", "echo x > /in/input; echo $?; cat /in/input; sleep 60"],
                                       mounts=[{"src": "data:cache", "dst": "/in", "ro": True}], timeout_s=3))
        assert answer["ok"] is True, answer
        assert answer["timed_out"] is True
        assert answer["exit_code"] != 0
        assert answer["duration_s"] < 30
        assert "Read-only file system" in answer["stderr_tail"]
        assert (job / "data" / "cache" / "input").read_text() == "kept\n"
        assert store.job_containers("broker-timeout") == []
    finally:
        b.stop()


def test_a_container_still_running_when_the_job_ends_is_gone(store, job):
    # The job asks for a long container, sees it running, and exits; the
    # broker (which ran the job) must leave no container behind.
    client = job / "client.py"
    client.write_text(f"""
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect({str(job / 'broker.sock')!r})
s.sendall((json.dumps({{"op": "container.run", "image": {store.ref!r}, "platform": {PLATFORM!r},
                        "args": ["sleep", "600"], "timeout_s": 120}}) + "\\n").encode())
for _ in range(100):
    t = socket.socket(socket.AF_UNIX)
    t.connect({str(job / 'broker.sock')!r})
    t.sendall(b'{{"op": "status"}}\\n')
    if json.loads(t.makefile().readline())["running"] == 1:
        print("running")
        sys.exit(0)
    time.sleep(0.2)
sys.exit(1)
""")
    b = Broker(store, job, "broker-job-end", argv=["python3", str(client)])
    code, out, err = b.proc.wait(timeout=120), *b.proc.communicate()
    assert code == 0, err
    assert "running" in out
    assert store.job_containers("broker-job-end") == []
    assert not os.path.exists(b.socket)


def test_a_client_that_hangs_up_takes_its_container_along(store, job):
    b = Broker(store, job, "broker-hangup")
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(b.socket)
        s.sendall((json.dumps(run_request(store, ["sleep", "600"], timeout_s=120)) + "\n").encode())
        deadline = time.time() + 30
        while not store.job_containers("broker-hangup") and time.time() < deadline:
            time.sleep(0.2)
        assert store.job_containers("broker-hangup"), "the container never started"
        s.close()
        deadline = time.time() + 30
        while store.job_containers("broker-hangup") and time.time() < deadline:
            time.sleep(0.2)
        assert store.job_containers("broker-hangup") == []
        assert b.proc.poll() is None  # the broker itself serves on
    finally:
        b.stop()


def test_no_runtime_on_path(store, job, tmp_path):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    b = Broker(store, job, "broker-no-runtime", env=env)
    try:
        for request in ({"op": "status"}, run_request(store, ["true"]),
                        {"op": "container.pull", "image": store.ref, "platform": PLATFORM}):
            answer = b.request(request)
            assert answer["ok"] is False and answer["error"] == "runtime_unavailable", answer
            assert "podman is not on PATH" in answer["detail"]
        assert b.request(None, raw=b"nonsense\n")["error"] == "bad_request"
    finally:
        b.stop()
    report = json.loads(subprocess.run([AGENT, "sandbox-report"], capture_output=True, text=True, env=env,
                                       timeout=60, check=True).stdout)
    assert report["containers"]["status"] == "runtime_unavailable"
    assert "podman is not on PATH" in report["containers"]["detail"]
    report = json.loads(subprocess.run([AGENT, "sandbox-report"], capture_output=True, text=True,
                                       timeout=60, check=True).stdout)
    assert report["containers"]["status"] == "available"


def test_pull_answers_for_present_images_only(store, job):
    b = Broker(store, job, "broker-pull")
    try:
        assert b.request({"op": "container.pull", "image": store.ref, "platform": PLATFORM}) == {"format": REPLY, "ok": True}
        absent = "localhost/oarbank-broker-absent@sha256:" + "0" * 64
        b.stop()
        b = Broker(store, job, "broker-pull", extra=["--image", f"{absent}={PLATFORM}"])
        answer = b.request({"op": "container.pull", "image": absent, "platform": PLATFORM})
        assert answer["ok"] is False and answer["error"] == "runtime_unavailable", answer
        assert "never pulls" in answer["detail"]
    finally:
        b.stop()


# A module's way to its broker: `ask(request)` -> the answer.
MODULE_ASK = r"""
import errno, json, os, socket, sys
endpoint = os.environ["OARBANK_BROKER"]
print("endpoint:", endpoint.split(":")[0])
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    print("unix-socket: allowed")
except OSError as e:
    print("unix-socket:", errno.errorcode[e.errno])
if endpoint.startswith("fd:"):  # below Landlock ABI 9: one inherited connection, requests in turn
    f = socket.socket(fileno=int(endpoint[3:])).makefile("rwb")
    def ask(request):
        f.write((json.dumps(request) + "\n").encode()); f.flush()
        return json.loads(f.readline())
else:  # unix:/path, one request per connection
    def ask(request):
        s = socket.socket(socket.AF_UNIX)
        s.connect(endpoint[5:])
        s.sendall((json.dumps(request) + "\n").encode())
        return json.loads(s.makefile("rb").readline())
"""
MODULE = MODULE_ASK + r"""
print("escape:", ask({"op": "container.run", "image": sys.argv[1], "platform": sys.argv[2], "args": ["true"],
                      "mounts": [{"src": "escape", "dst": "/m"}], "timeout_s": 30})["error"])
answer = ask({"op": "container.run", "image": sys.argv[1], "platform": sys.argv[2], "timeout_s": 60,
              "args": ["sh", "-c", "echo from-container > /out/result; id -u"],
              "mounts": [{"src": "out", "dst": "/out"}]})
print("exit:", answer["exit_code"], "stdout:", answer["stdout_tail"].strip())
print("result:", open(os.path.join(sys.argv[3], "out", "result")).read().strip())
print("log:", open(answer["stdout_path"]).read().strip())
"""


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root-module", "nobody-module"])
def test_a_confined_module_runs_a_container_through_its_broker(store, job, uid):
    (job / "bundle" / "module.py").write_text(MODULE)
    policy = {"contract": 1, "role": "runner", "bundle": str(job / "bundle"), "work": str(job / "work"),
              "data": str(job / "data"), "tmp": str(job / "work" / "tmp"), "broker": str(job / "broker.sock")}
    (job / "policy.json").write_text(json.dumps(policy))
    exec_argv = [AGENT, "sandbox-exec", str(job / "policy.json"), "--", "python3", str(job / "bundle" / "module.py"),
                 store.ref, PLATFORM, str(job / "work")]
    if uid:
        exec_argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *exec_argv]
    b = Broker(store, job, f"broker-module-{uid}", uid=uid, argv=exec_argv)
    code, out, err = b.proc.wait(timeout=180), *b.proc.communicate()
    assert code == 0, err + out
    lines = out.splitlines()
    # Below ABI 9 the inherited connection is the only unix socket.
    assert ("endpoint: fd" in lines and "unix-socket: EPERM" in lines) or \
        (landlock_abi() >= 9 and "endpoint: unix" in lines), out
    assert "escape: bad_mount" in lines, out
    assert "exit: 0 stdout: 0" in lines, out  # container root: the job's subordinate base on the host
    assert "result: from-container" in lines, out
    assert "log: 0" in lines, out
    assert os.stat(job / "work" / "out" / "result").st_uid == uid


def test_the_supervisor_hands_the_job_its_broker_connection(store, job):
    (job / "bundle" / "module.py").write_text(MODULE)
    policy = {"contract": 1, "role": "runner", "bundle": str(job / "bundle"), "work": str(job / "work"),
              "data": str(job / "data"), "tmp": str(job / "work" / "tmp"), "broker": str(job / "broker.sock")}
    (job / "policy.json").write_text(json.dumps(policy))
    b = Broker(store, job, "broker-supervised",
               argv=[AGENT, "run", "--unproven", "--timeout", "120", str(job / "policy.json"), "--", "python3",
                     str(job / "bundle" / "module.py"), store.ref, PLATFORM, str(job / "work")])
    code, out, err = b.proc.wait(timeout=180), *b.proc.communicate()
    assert code == 0, err + out
    lines = out.splitlines()
    assert ("endpoint: fd" in lines and "unix-socket: EPERM" in lines) or \
        (landlock_abi() >= 9 and "endpoint: unix" in lines), out
    assert "result: from-container" in lines, out


def test_a_launch_whose_broker_is_not_listening_is_refused(job):
    # The socket exists (the policy names it) but nothing listens: the
    # launcher cannot hand the module its connection, so nothing runs.
    if landlock_abi() >= 9:
        pytest.skip("from Landlock ABI 9 the module connects by path itself: the launcher makes no connection")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(job / "broker.sock"))
    policy = {"contract": 1, "role": "runner", "bundle": str(job / "bundle"), "work": str(job / "work"),
              "data": str(job / "data"), "tmp": str(job / "work" / "tmp"), "broker": str(job / "broker.sock")}
    (job / "policy.json").write_text(json.dumps(policy))
    r = subprocess.run([AGENT, "sandbox-exec", str(job / "policy.json"), "--", "/bin/sh", "-c", "echo ran"],
                       capture_output=True, text=True, timeout=30)
    dead.close()
    assert r.returncode == 70, r
    assert r.stdout == ""
    assert r.stderr.startswith(f"sandbox: broker: connect {job / 'broker.sock'}: Connection refused"), r.stderr


# What the broker holds for the job: its reservation, time and identity.
REGISTRY = "/run/oarbank/subid-ranges"


def leases(job_id=None):
    """The live subordinate id leases (slot, base, job) in the registry."""
    try:
        lines = open(REGISTRY).read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        slot, pid, start, job_id_ = line.split()
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:  # gone before the open (ENOENT) or between it and the read (ESRCH)
            continue
        if fields[19] != start or fields[0] == "Z":
            continue
        if job_id is None or job_id_ == job_id:
            out.append((int(slot), 100000000 + int(slot) * 65536, job_id_))
    return out


def running(store, job_id, timeout=30, conn=None):
    """(name, host pid) of the job's one running container, once it runs;
    fails at once when `conn` (the request's connection) answered first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if conn is not None:
            conn.setblocking(False)
            try:
                early = conn.recv(65536)
            except BlockingIOError:
                early = None
            conn.setblocking(True)
            if early is not None:
                import re
                m = re.search(r"(/tmp/obk-[^ :\\]*)", early.decode())
                info = ""
                if m:
                    parts = m.group(1).split("/")
                    for i in range(2, len(parts) + 1):
                        info += subprocess.run(["ls", "-ldn", "/".join(parts[:i])], capture_output=True,
                                               text=True).stdout
                assert early is None, "answered before running: " + repr(early) + "\n" + info
        for root in store.roots():
            out = store.podman("ps", "--format", "{{.Names}}", f"--filter=label=oarbank.job={job_id}",
                               check=False, root=root).stdout.split()
            if out:
                pid = store.podman("inspect", "--format", "{{.State.Pid}}", out[0], check=False,
                                   root=root).stdout.strip()
                if pid.isdigit() and int(pid) > 0:
                    return out[0], int(pid)
        time.sleep(0.1)
    raise AssertionError(f"no running container of {job_id}")


def cgroup_file(pid, controller, name):
    for line in open(f"/proc/{pid}/cgroup"):
        _, controllers, path = line.rstrip("\n").split(":", 2)
        if controller in controllers.split(","):
            return open(f"/sys/fs/cgroup/{controllers}{path}/{name}").read().strip()
    raise AssertionError(f"no {controller} cgroup for {pid}")


def send(b, obj):
    s = socket.socket(socket.AF_UNIX)
    s.connect(b.socket)
    s.sendall((json.dumps(obj) + "\n").encode())
    return s


def answer_of(s, timeout=120):
    s.settimeout(timeout)
    data = s.makefile("rb").readline()
    s.close()
    return json.loads(data)


def host_uid(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]


def test_limits_below_what_the_runtime_expresses_are_refused_and_the_rest_applied(store, job):
    b = Broker(store, job, "broker-limits")
    try:
        for field, value in (("cpus", 0.0001), ("cpus", 1e-300), ("mem_gb", 1e-6), ("timeout_s", 0.001)):
            a = b.request(run_request(store, ["true"], **{field: value}))
            assert a["ok"] is False and a["error"] == "bad_request", a
            assert a["detail"].startswith(field + ": ") and "smallest allowed value" in a["detail"], a
        # An accepted value is a real limit, no larger than asked, where the kernel applies it.
        s = send(b, run_request(store, ["sleep", "30"], cpus=0.0123, mem_gb=0.1, timeout_s=7.2))
        name, pid = running(store, "broker-limits", conn=s)
        # conmon's own bound backs up the broker's: whole seconds, never below what was asked.
        timeouts = [store.podman("inspect", "--format", "{{.Config.Timeout}}", name, root=r, check=False).stdout.strip()
                    for r in store.roots()]
        assert "9" in timeouts, timeouts
        assert cgroup_file(pid, "cpu", "cpu.cfs_period_us") == "100000"
        assert cgroup_file(pid, "cpu", "cpu.cfs_quota_us") == "1230"
        limit = int(cgroup_file(pid, "memory", "memory.limit_in_bytes"))
        assert 0 < limit <= 0.1 * 2**30
        assert int(cgroup_file(pid, "pids", "pids.max")) == 4096
        s.close()
    finally:
        b.stop()


def test_time_holds_from_acceptance_and_through_a_hang_up(store, job):
    b = Broker(store, job, "broker-time")
    try:
        t0 = time.time()
        a = b.request(run_request(store, ["sleep", "20"], timeout_s=1))
        assert a["ok"] is True and a["timed_out"] is True, a
        assert time.time() - t0 < 12
        assert store.job_containers("broker-time") == []
        # Hang up at once, and while the container is being created or has
        # just started: gone well before its 5 s timeout could have done it.
        for delay in (0, 0.3, 0.8):
            s = send(b, run_request(store, ["sleep", "40"], timeout_s=5))
            time.sleep(delay)
            s.close()
            closed = time.time()
            while time.time() < closed + 4.5:
                time.sleep(0.3)
                if not store.job_containers("broker-time") and b.request({"op": "status"})["reserved"]["cpus"] == 0:
                    break
            assert store.job_containers("broker-time") == [], delay
            assert b.request({"op": "status"})["reserved"]["cpus"] == 0, delay
        assert b.proc.poll() is None
    finally:
        b.stop()


def test_the_reservation_is_the_jobs_not_each_connections(store, job):
    b = Broker(store, job, "broker-reservation")  # --cpus 1 --mem-gb 0.5
    try:
        holder = send(b, run_request(store, ["sleep", "30"]))  # the whole reservation
        running(store, "broker-reservation", conn=holder)
        for extra in ({}, {"cpus": 0.5, "mem_gb": 0.1}, {"cpus": 0.01, "mem_gb": 0.01}):
            a = b.request(run_request(store, ["true"], **extra))
            assert a["ok"] is False and a["error"] == "reservation_exhausted", a
            assert a["detail"].startswith("cpus: "), a
        assert b.request({"op": "status"})["reserved"] == {"cpus": 1, "mem_gb": 0.5}
        holder.close()
        assert eventually(lambda: b.request({"op": "status"})["reserved"]["cpus"] == 0, timeout=30)
        assert store.job_containers("broker-reservation") == []
        # Halves fit side by side; a third half does not.
        halves = [send(b, run_request(store, ["sleep", "3"], cpus=0.5, mem_gb=0.25)) for _ in range(2)]
        # Both reservations are in before the third is asked for.
        assert eventually(lambda: b.request({"op": "status"})["reserved"] == {"cpus": 1, "mem_gb": 0.5})
        a = b.request(run_request(store, ["true"], cpus=0.5, mem_gb=0.25))
        assert a["ok"] is False and a["error"] == "reservation_exhausted", a
        for s in halves:
            a = answer_of(s)
            assert a["ok"] is True and a["exit_code"] == 0, a
        assert b.request(run_request(store, ["sh", "-c", "exit 0"]))["exit_code"] == 0
    finally:
        b.stop()


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root-job", "nobody-job"])
def test_a_broker_killed_by_sigkill_leaves_no_container_and_no_lease(store, job, uid):
    b = Broker(store, job, "broker-sigkill", uid=uid)
    s = send(b, run_request(store, ["sleep", "600"], timeout_s=120, mounts=[{"src": "out", "dst": "/out"}]))
    _, pid = running(store, "broker-sigkill", conn=s)
    assert leases("broker-sigkill")
    b.proc.kill()
    # However long Podman takes (bench/ measures it), nothing is left.
    eventually(lambda: not store.job_containers("broker-sigkill") and not os.path.exists(f"/proc/{pid}"), timeout=20)
    assert store.job_containers("broker-sigkill") == []
    assert not os.path.exists(f"/proc/{pid}")
    assert eventually(lambda: leases("broker-sigkill") == [], timeout=20), leases("broker-sigkill")
    s.close()
    b.proc.communicate(timeout=60)


def watchdog_of(job_id):
    """The pid of the job's broker watchdog: its lease's owner."""
    for line in open(REGISTRY).read().splitlines():
        slot, pid, start, job_id_ = line.split()
        if job_id_ == job_id:
            return int(pid)
    raise AssertionError(f"no lease of {job_id}")


def job_dir():
    d = pathlib.Path(tempfile.mkdtemp(prefix="obk-job-", dir="/tmp"))
    os.chmod(d, 0o755)
    for sub in ("work", "work/out", "work/tmp", "data", "data/cache"):
        (d / sub).mkdir()
    return d


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root-job", "nobody-job"])
def test_a_killed_watchdog_stops_its_broker_and_its_containers(store, job, uid):
    """The watchdog ignores every signal but SIGKILL; killed, the broker ends
    the job itself (70, one line), for it would otherwise run containers that
    nothing removes if it died too, under a range its dead lease no longer
    holds."""
    b = Broker(store, job, "broker-wdkill", uid=uid)
    s = send(b, run_request(store, ["sleep", "600"], timeout_s=120, mounts=[{"src": "out", "dst": "/out"}]))
    _, pid = running(store, "broker-wdkill", conn=s)
    os.kill(watchdog_of("broker-wdkill"), signal.SIGKILL)
    out, err = b.proc.communicate(timeout=60)
    assert b.proc.returncode == 70, (out, err)
    assert "broker: its watchdog died: the job is stopped and its containers removed" in err, err
    assert store.job_containers("broker-wdkill") == []
    assert not os.path.exists(f"/proc/{pid}")
    assert leases("broker-wdkill") == []
    s.close()


# A podman that drops the container's init and its lifeline, as a runtime
# that ignored them would: only the next start on the range is left to act.
NO_LIFELINE_PODMAN = """#!/bin/bash
args=()
for a in "$@"; do case "$a" in --init|--init-path=*|--preserve-fds=*) ;; *) args+=("$a") ;; esac; done
exec {real} "${{args[@]}}"
"""


@pytest.mark.parametrize("lifeline", ["kept", "dropped"])
@pytest.mark.parametrize("first", ["broker", "watchdog"])
def test_a_broker_and_its_watchdog_both_killed_end_their_containers_and_the_next_start_reaps_the_rest(
        store, first, lifeline):
    """Both killed at once, in either order, leave no one to remove the
    job's containers, and its range's lease dies with its owner. Each
    container's init still ends it within 5 s: the broker's end of its
    lifeline closed with the broker. Where a runtime dropped the init
    (a wrapper here), the container survives them, and the next job that
    leases that range removes it before it serves; another live job's
    containers, under their own range, are left alone either way."""
    dead_dir, other_dir, next_dir = job_dir(), job_dir(), job_dir()
    wrappers = pathlib.Path(tempfile.mkdtemp(prefix="obk-rt-", dir="/tmp"))
    env = os.environ.copy()
    if lifeline == "dropped":
        os.chmod(wrappers, 0o755)
        (wrappers / "podman").write_text(NO_LIFELINE_PODMAN.format(real=shutil.which("podman")))
        os.chmod(wrappers / "podman", 0o755)
        env["PATH"] = f"{wrappers}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    other = Broker(store, other_dir, "broker-other")
    try:
        t = send(other, run_request(store, ["sleep", "600"], timeout_s=120))
        _, other_pid = running(store, "broker-other", conn=t)
        dead = Broker(store, dead_dir, "broker-dead", env=env)
        s = send(dead, run_request(store, ["sleep", "600"], timeout_s=120))
        _, dead_pid = running(store, "broker-dead", conn=s)
        (dead_lease,) = leases("broker-dead")
        watchdog = watchdog_of("broker-dead")
        for victim in ((dead.proc.pid, watchdog) if first == "broker" else (watchdog, dead.proc.pid)):
            os.kill(victim, signal.SIGKILL)
        dead.proc.communicate(timeout=60)
        assert eventually(lambda: not os.path.exists(f"/proc/{watchdog}"), timeout=10)
        s.close()
        if lifeline == "kept":
            assert eventually(lambda: not os.path.exists(f"/proc/{dead_pid}"), timeout=5), \
                "the container ran 5 s after its broker and watchdog died"
        elif not os.path.exists(f"/proc/{dead_pid}"):
            pytest.skip("the broker removed the container before its SIGKILL landed: nothing left to reap")
        nxt = Broker(store, next_dir, "broker-next")
        try:
            assert leases("broker-next")[0][1] == dead_lease[1], "the next job leases the dead job's range"
            # Removed before the banner: the slot is prepared first.
            assert eventually(lambda: not os.path.exists(f"/proc/{dead_pid}"), timeout=10)
            assert store.job_containers("broker-dead") == []
            assert os.path.exists(f"/proc/{other_pid}"), "another job's container was touched"
            assert store.job_containers("broker-other") != []
        finally:
            nxt.stop()
        t.close()
    finally:
        other.stop()
        for d in (dead_dir, other_dir, next_dir, wrappers):
            shutil.rmtree(d, ignore_errors=True)


UNIX_CLIENT = r"""
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
static const char *name(int e) {
  return e == ENOSYS ? "ENOSYS" : e == EAFNOSUPPORT ? "EAFNOSUPPORT" : e == EACCES ? "EACCES" : e == EPERM ? "EPERM"
                                                                                               : strerror(e);
}
int main(int argc, char **argv) {
  int s = socket(AF_UNIX, argc > 2 ? SOCK_DGRAM : SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
  if (s < 0) printf("socket %s\n", name(errno));
  else if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) printf("connect %s\n", name(errno));
  else printf("connected\n");
  int pair[2];
  printf(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0 ? "socketpair ok\n" : "socketpair refused\n");
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("musl-gcc") is None, reason="musl-gcc (musl-tools) builds the container's client")
@pytest.mark.parametrize("kind", ["stream", "dgram"])
def test_a_socket_a_host_process_makes_in_a_mount_while_the_container_runs_is_out_of_its_reach(store, job, kind):
    """A host process (the job's user's own daemon, git's fsmonitor) that
    creates a unix socket in a directory mounted into a running container
    made it after the mount-time check. The container gets no unix socket
    of its own at all (its seccomp profile allows no socket(AF_UNIX) and no
    socketcall multiplexer), so no socket in any mount is reachable,
    whenever it was made; socketpair stays."""
    out = job / "work" / "out"
    subprocess.run(["musl-gcc", "-static", "-O2", "-o", str(out / "uclient"), "-x", "c", "-"],
                   input=UNIX_CLIENT, text=True, check=True, timeout=60)
    b = Broker(store, job, "broker-hostsock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if kind == "stream" else socket.SOCK_DGRAM)
    try:
        args = ["/out/uclient", "/out/host.sock"] + (["dgram"] if kind == "dgram" else [])
        s = send(b, run_request(store, ["sh", "-c", "while [ ! -S /out/host.sock ]; do sleep 0.1; done; " +
                                        " ".join(args) + "; echo pair; sh -c 'echo x | cat'"],
                                mounts=[{"src": "out", "dst": "/out"}]))
        running(store, "broker-hostsock", conn=s)
        listener.bind(str(out / "host.sock"))  # made mid-run, by a host process, reachable by anyone
        os.chmod(out / "host.sock", 0o777)
        if kind == "stream":
            listener.listen(4)
        listener.settimeout(0.5)
        a = answer_of(s)
        assert a["ok"] is True, a
        assert a["stdout_tail"].splitlines()[0] == "socket ENOSYS", a
        assert a["stdout_tail"].splitlines()[1:] == ["socketpair ok", "pair", "x"], a
        try:
            got = listener.accept() if kind == "stream" else listener.recv(16)
        except (socket.timeout, OSError):
            got = None
        assert got is None, "the host's socket was reached from the container"
    finally:
        listener.close()
        b.stop()


# The runtime failing at each step, by a wrapper first on the broker's PATH
# (podman and runc are Go: no LD_PRELOAD shim reaches their system calls).
# Each wrapper marks that it failed; the real program runs otherwise.
RUNTIME_FAULTS = {  # name: (program, step, what the wrapper does, whether the run must fail)
    "podman-run-exits": ("podman", "run", "echo 'fault: podman run fails' >&2; exit 125", True),
    "podman-run-hangs": ("podman", "run", "exec -a fault-$FAULT_MARK /bin/sleep 600", True),
    "podman-rm-exits": ("podman", "rm", "echo 'fault: podman rm fails' >&2; exit 125", True),
    "runc-create-exits": ("runc", "create", "echo 'fault: runc create fails' >&2; exit 1", True),
    "runc-create-killed": ("runc", "create", "kill -KILL $$", True),
    "runc-start-exits": ("runc", "start", "echo 'fault: runc start fails' >&2; exit 1", True),
    # After the container ran: its answer may be the run's; nothing may stay.
    "runc-delete-exits": ("runc", "delete", "echo 'fault: runc delete fails' >&2; exit 1", False),
}


@pytest.mark.parametrize("fault", sorted(RUNTIME_FAULTS))
def test_the_runtime_failing_at_a_step_answers_and_leaves_nothing(store, job, fault, tmp_path):
    """The request is answered (an error, a failed or timed-out run, never a
    hang past its deadline), the broker stops cleanly, and nothing of the job
    is left: no container, staging entry, id lease or wrapper process."""
    program, step, action, must_fail = RUNTIME_FAULTS[fault]
    real = shutil.which(program)
    marker = f"rt{os.getpid()}{fault}".replace("-", "")
    wrappers = pathlib.Path(tempfile.mkdtemp(prefix="obk-rt-", dir="/tmp"))
    os.chmod(wrappers, 0o755)
    injected = wrappers / "injected"
    (wrappers / program).write_text(
        "#!/bin/bash\n"
        f"for a in \"$@\"; do if [ \"$a\" = {step} ]; then touch {injected}; FAULT_MARK={marker}; {action}; fi; done\n"
        f"exec {real} \"$@\"\n")
    os.chmod(wrappers / program, 0o755)
    env = os.environ.copy()
    env["PATH"] = f"{wrappers}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    job_id = "broker-rt-" + fault
    b = Broker(store, job, job_id, env=env)
    try:
        start = time.time()
        a = b.request(run_request(store, ["sleep", "1"], timeout_s=4))
        assert time.time() - start < 60, "the request hung past its deadline"
        assert injected.exists(), "the fault never happened"
        assert not must_fail or not (a.get("ok") is True and a.get("exit_code") == 0 and not a.get("timed_out")), \
            f"a run whose runtime failed answered success: {a}"
    finally:
        code, _, err = b.stop()
    assert code == 0, err
    left = {"containers": store.job_containers(job_id), "leases": leases(job_id),
            "staging": list((pathlib.Path(store.state) / "mounts" / f"job-{job_id}").glob("*")),
            "processes": marked_processes(marker)}
    print(f"{fault}: {a.get('error') or a.get('exit_code')} {a.get('detail', a.get('stderr_tail', ''))[:100]!r}; "
          f"left {left}")
    assert left == {"containers": [], "leases": [], "staging": [], "processes": []}, left
    shutil.rmtree(wrappers, ignore_errors=True)


def test_jobs_sharing_a_state_directory_are_kept_apart(store, tmp_path):
    jobs = {}
    for job_id, uid in (("X", 0), ("X-y", NOBODY)):
        d = pathlib.Path(tempfile.mkdtemp(prefix="obk-job-", dir="/tmp"))
        os.chmod(d, 0o755)
        for sub in ("work", "work/out", "work/tmp", "data", "data/cache"):
            (d / sub).mkdir()
        jobs[job_id] = (d, Broker(store, d, job_id, uid=uid))
    try:
        bx, bxy = jobs["X"][1], jobs["X-y"][1]
        s = send(bxy, run_request(store, ["sh", "-c", "sleep 4; echo after > /out/after"],
                                  mounts=[{"src": "out", "dst": "/out"}]))
        _, pid_xy = running(store, "X-y", conn=s)
        t = send(bx, run_request(store, ["sleep", "30"]))
        _, pid_x = running(store, "X", conn=t)
        maps = {tuple(open(f"/proc/{p}/uid_map").read().split()) for p in (pid_x, pid_xy)}
        assert len(maps) == 2, maps  # container uid N differs between the jobs
        (lx,), (lxy,) = leases("X"), leases("X-y")
        assert lx[1] != lxy[1] and abs(lx[1] - lxy[1]) >= 65536
        for p, base in ((pid_x, lx[1]), (pid_xy, lxy[1])):
            assert open(f"/proc/{p}/uid_map").read().split() == ["0", str(base), "65536"]
        t.close()
        assert bx.stop()[0] == 0
        a = answer_of(s)
        assert a["ok"] is True and a["exit_code"] == 0, a  # X-y's mount outlived X's end
        assert (jobs["X-y"][0] / "work" / "out" / "after").read_text() == "after\n"
        assert os.stat(jobs["X-y"][0] / "work" / "out" / "after").st_uid == NOBODY
        assert leases("X") == [] and len(leases("X-y")) == 1
    finally:
        for d, b in jobs.values():
            b.stop()
            shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root-job", "nobody-job"])
def test_container_root_is_never_host_root(store, job, uid):
    b = Broker(store, job, f"broker-idmap-{uid}", uid=uid)
    try:
        s = send(b, run_request(store, ["sh", "-c",
                                        "echo x > /out/f; chmod 6755 /out/f; mkdir /out/d; chmod 2775 /out/d;"
                                        "touch /out/d/g; chmod 4755 /out/d/g; mknod /out/dev c 1 3; sleep 2; id -u"],
                                mounts=[{"src": "out", "dst": "/out"}]))
        _, pid = running(store, f"broker-idmap-{uid}", conn=s)
        (lease,) = leases(f"broker-idmap-{uid}")
        assert host_uid(pid) == [lease[1]] * 4  # container root on the host: the job's subordinate base
        assert open(f"/proc/{pid}/uid_map").read().split() == ["0", str(lease[1]), "65536"]
        a = answer_of(s)
        assert a["ok"] is True and a["stdout_tail"] == "0\n" and a["work_checked"] is True, a
        out = job / "work" / "out"
        for name in ("f", "d", "d/g"):
            st = os.lstat(out / name)
            assert (st.st_uid, st.st_gid) == (uid, uid), name
            assert not st.st_mode & 0o6000, (name, oct(st.st_mode))
        assert not os.path.exists(out / "dev")
    finally:
        b.stop()


def test_no_host_socket_reaches_a_container(store, job):
    (job / "work" / "sockets" / "deep").mkdir(parents=True)
    host = socket.socket(socket.AF_UNIX)
    host.bind(str(job / "work" / "sockets" / "deep" / "host.sock"))
    host.listen(1)
    b = Broker(store, job, "broker-sockets")
    try:
        for src in ("sockets", ".", "sockets/deep"):
            a = b.request(run_request(store, ["true"], mounts=[{"src": src, "dst": "/m"}]))
            assert a["ok"] is False and a["error"] == "bad_mount", a
            assert a["detail"].startswith("mounts[0].src: ") and "unix socket" in a["detail"], a
        assert store.job_containers("broker-sockets") == []
    finally:
        b.stop()
        host.close()
    r = subprocess.run([AGENT, "broker", "--socket", str(job / "work" / "b.sock"), "--work", str(job / "work"),
                        "--job", "broker-sock-in-work", "--state-dir", store.state], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 64 and "inside the work or data directory" in r.stderr, r


def test_runtime_paths_are_never_destinations(store, job):
    b = Broker(store, job, "broker-dst")
    try:
        for dst in ("/proc", "/proc/sys", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm", "/etc/hosts",
                    "/etc/resolv.conf", "/run/.containerenv", "/./proc"):
            a = b.request(run_request(store, ["true"], mounts=[{"src": "out", "dst": dst}]))
            assert a["ok"] is False and a["error"] == "bad_mount", (dst, a)
            assert a["detail"].startswith("mounts[0].dst: "), a
    finally:
        b.stop()


def test_soak_leaves_nothing_behind(store, job):
    """A short soak (scripts/soak-broker.sh runs the long one): 16 requests
    over 8 connections with random hang-ups and timeouts."""
    import random
    import threading
    rng = random.Random(20)
    requests = int(os.environ.get("OARBANK_SOAK_REQUESTS", "16"))
    connections = int(os.environ.get("OARBANK_SOAK_CONNECTIONS", "8"))
    b = Broker(store, job, "broker-soak", cpus="1", mem_gb="1")  # at most 8 requests run at once
    errors = []
    outcomes = {"ran": 0, "timed_out": 0, "hung_up": 0, "reservation_exhausted": 0}

    def client(n):
        for i in range(requests // connections + (1 if n < requests % connections else 0)):
            kind = rng.choice(["ok", "timeout", "hangup"])
            args = ["true"] if kind == "ok" else ["sleep", "20"]
            req = run_request(store, args, cpus=0.125, mem_gb=0.05, timeout_s=1 if kind == "timeout" else 30,
                              mounts=[{"src": "out", "dst": "/out"}])
            try:
                s = send(b, req)
                if kind == "hangup":
                    time.sleep(rng.random())
                    s.close()
                    outcomes["hung_up"] += 1
                    continue
                a = answer_of(s, timeout=300)
                if not a["ok"] and a["error"] == "reservation_exhausted":
                    outcomes["reservation_exhausted"] += 1
                    continue  # hung-up requests still being removed hold their share: refused, never granted
                outcomes["timed_out" if a.get("timed_out") else "ran"] += 1
                if not a["ok"] or (kind == "timeout") != a["timed_out"]:
                    errors.append(a)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
    threads = [threading.Thread(target=client, args=(n,)) for n in range(connections)]
    for t in threads:
        t.start()
    deadline = time.time() + 540
    for t in threads:
        t.join(timeout=max(1, deadline - time.time()))
    assert not any(t.is_alive() for t in threads), "the soak did not finish in 9 minutes"
    print(f"soak: {requests} requests over {connections} connections: {outcomes}")
    code, _, err = b.stop()
    assert code == 0, err
    assert errors == []
    # What was left, counted from outside and printed (all must be 0).
    containers = store.job_containers("broker-soak")
    staging = pathlib.Path(store.state) / "mounts" / "job-broker-soak"
    staged = list(staging.iterdir()) if staging.exists() else []
    mounted = []
    for mountinfo in pathlib.Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            text = mountinfo.read_text()
        except OSError:
            continue  # a process that ended meanwhile
        if "mounts/job-broker-soak/" in text:
            mounted.append(str(mountinfo))
    held = leases("broker-soak")
    print(f"soak: left: containers {len(containers)}, staging entries {len(staged)}, "
          f"mount tables holding a staging mount {len(mounted)}, id leases {len(held)}")
    assert outcomes["ran"] + outcomes["timed_out"] > 0, f"no request ran: {outcomes}"
    assert (containers, staged, mounted, held) == ([], [], [], []), (containers, staged, mounted, held)
