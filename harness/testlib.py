"""What the pytest suites (harness/test_*.py) and the Python benchmarks
(bench/*.py, which put harness/ on sys.path) share: where the build is,
the agent, and small helpers for processes and ports."""
import ctypes
import errno
import json
import os
import select
import socket
import subprocess
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.abspath(os.environ.get("OARBANK_BUILD", os.path.join(ROOT, "build")))
AGENT = os.path.join(BUILD, "sandbox", "oarbank-agent")
# The test-only build: fault hooks, and the egress proxy's resolver file.
FAULTY = os.path.join(BUILD, "sandbox", "oarbank-agent-faulty")
CONFORM = os.path.join(BUILD, "harness", "oarbank-conform")
NOBODY = 65534


def as_user(uid):
    """The argv prefix that runs a command as `uid` (gid the same, no
    supplementary groups); nothing for root."""
    return [] if uid == 0 else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def sh(*args, check=True, timeout=30):
    """Runs a command (no shell), its output captured as text."""
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=timeout)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def landlock_abi():
    """The Landlock ABI the launcher would use on this host (sandbox-report)."""
    report = subprocess.run([AGENT, "sandbox-report"], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(report.stdout)["landlock"]["abi"]


def eventually(condition, timeout=10, interval=0.05):
    """Polls `condition` until it returns something true or `timeout`
    seconds pass, and returns its last value: a test waits for what it
    needs, never for a fixed time."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def kernel_has_syscall(nr):
    """Whether this kernel has syscall `nr`: called with bad arguments (fd
    -1, null pointers), it fails with something other than ENOSYS."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(nr, -1, 0, 0, 0, 0) != -1 or ctypes.get_errno() != errno.ENOSYS


def read_line(stream, seconds):
    """One line from a pipe within `seconds`, or None."""
    deadline = time.monotonic() + seconds
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            return None
        byte = os.read(stream.fileno(), 1)
        if not byte:
            return None
        line += byte
    return line
