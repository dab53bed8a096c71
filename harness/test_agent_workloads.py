"""The everyday work of a coding agent runs in the cage as it runs bare and
under bubblewrap: each workload below, as root and as uid 65534, three
times (bare, `bwrap --unshare-all` in the shape coding-agent CLIs give it,
and `oarbank-agent cage --worktree WT --writable --scratch S`), each judged
by what it printed. A workload that fails bare is a broken test, not a
pass, so bare and bubblewrap are asserted first.

Not here: what needs a unix socket of the job's own (tmux, Python's
multiprocessing manager and forkserver, a server on a unix socket). Landlock
confines a connect by path only from ABI 9 (Linux 7.1), so on an older
kernel the cage refuses `socket(AF_UNIX)` by design; the kernel matrix runs
those in its 7.1 guest (scripts/guest-workloads.sh). LeakSanitizer, gdb and
strace need `--debug` (test_job_debug.py)."""
import base64
import hashlib
import io
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from testlib import AGENT, NOBODY, as_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs each workload as root and as uid 65534: needs root")

CONFIGURE_AC = """AC_INIT([hello], [1.0])
AM_INIT_AUTOMAKE([foreign])
AC_PROG_CC
AC_CONFIG_FILES([Makefile])
AC_OUTPUT
"""
MAKEFILE_AM = """bin_PROGRAMS = hello
hello_SOURCES = hello.c
TESTS = hello
"""
HELLO_C = '#include <stdio.h>\nint main(void) { puts("hello autotools"); return 0; }\n'
CMAKELISTS = """cmake_minimum_required(VERSION 3.13)
project(hello C)
enable_testing()
add_executable(hello hello.c)
add_test(NAME hello COMMAND hello)
"""
MAKE_J = """SRCS := $(wildcard part*.c)
all: prog
prog: $(SRCS:.c=.o) main.o
\t$(CC) -o $@ $^
"""
OVERFLOW_C = """#include <stdlib.h>
int main(int argc, char **argv) { char *p = malloc(8); p[argc + 8] = 1; free(p); return 0; }
"""
LOOPBACK_PY = """import http.server, threading, urllib.request
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"loopback-ok")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=s.handle_request, daemon=True).start()
print(urllib.request.urlopen(f"http://127.0.0.1:{s.server_port}/", timeout=10).read().decode())
"""
POOLS_PY = """import multiprocessing as mp
if __name__ == "__main__":
    for method in ("fork", "spawn"):
        with mp.get_context(method).Pool(2) as p:
            print(method, sum(p.map(abs, [-1, -2, -3])))
"""
TEST_PY = "def test_one():\n    assert 1 + 1 == 2\n"
NODE_TEST = "require('fs').writeFileSync('out.txt', 'x'.repeat(6)); console.log('node', require('fs').statSync('out.txt').size)\n"


def wheel():
    """A pure-Python wheel built here, so pip installs it with no index and
    no build backend (offline, as a fleet's mirror would serve it)."""
    name, files = "hello_pkg-1.0", {"hello_pkg/__init__.py": b'def greet():\n    return "hello from a wheel"\n'}
    files[f"{name}.dist-info/METADATA"] = b"Metadata-Version: 2.1\nName: hello-pkg\nVersion: 1.0\n"
    files[f"{name}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    files[f"{name}.dist-info/RECORD"] = (record + f"{name}.dist-info/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return {f"{name}-py3-none-any.whl": buf.getvalue()}


# name: (files in the worktree, the script (sh, in the worktree, HOME and
# TMPDIR the scratch), what its output must hold).
WORKLOADS = {
    "autotools": (
        {"configure.ac": CONFIGURE_AC, "Makefile.am": MAKEFILE_AM, "hello.c": HELLO_C},
        "autoreconf -i >/dev/null 2>&1 && ./configure -q && make -s >/dev/null && make -s check >/dev/null "
        "&& ./hello",
        ["hello autotools"],
    ),
    "cmake_ctest": (
        {"CMakeLists.txt": CMAKELISTS, "hello.c": HELLO_C},
        "cmake -S . -B b >/dev/null && cmake --build b -j2 >/dev/null && cd b && ctest 2>&1 | grep 'tests passed'",
        ["100% tests passed"],
    ),
    "make_j": (
        {"Makefile": MAKE_J, "main.c": "int main(void) { return 0; }\n",
         **{f"part{i}.c": f"int part{i}(void) {{ return {i}; }}\n" for i in range(16)}},
        "make -s -j4 && ./prog && echo built",
        ["built"],
    ),
    "sanitizers": (
        {"overflow.c": OVERFLOW_C},
        "gcc -g -fsanitize=address,undefined overflow.c -o overflow && ASAN_OPTIONS=detect_leaks=0 ./overflow; "
        "echo exit $?",
        ["ERROR: AddressSanitizer: heap-buffer-overflow", "exit 1"],
    ),
    "git_own_repo": (
        {},
        "git init -q repo && cd repo && echo a >a && git add a && git -c user.name=j -c user.email=j@example.org "
        "commit -qm first && git log --format=%s",
        ["first"],
    ),
    "venv_offline_pip_pytest": (
        wheel(),
        "python3 -m venv venv && venv/bin/pip install -q --no-index --disable-pip-version-check "
        "hello_pkg-1.0-py3-none-any.whl && venv/bin/python -c 'import hello_pkg; print(hello_pkg.greet())' "
        "&& python3 -m pytest -q -p no:cacheprovider test_one.py 2>&1 | tail -1",
        ["hello from a wheel", "1 passed"],
    ),
    "node_npm": (
        {"t.js": NODE_TEST},
        "npm init -y >/dev/null && npm pkg set scripts.test='node t.js' && npm test --silent",
        ["node 6"],
    ),
    "sqlite_wal": (
        {},
        "sqlite3 db 'PRAGMA journal_mode=WAL; CREATE TABLE t(a); INSERT INTO t VALUES (42); SELECT a FROM t;'",
        ["wal", "42"],
    ),
    "tar_zstd": (
        {},
        "mkdir d && seq 1 100000 >d/numbers && tar cf - d | zstd -q | zstd -dq | tar xOf - d/numbers | tail -1",
        ["100000"],
    ),
    "pty_script": ({}, "script -qec 'tty; echo on-a-terminal' /dev/null", ["/dev/pts/", "on-a-terminal"]),
    "python_fork_spawn": ({"pools.py": POOLS_PY}, "python3 -I pools.py", ["fork 6", "spawn 6"]),
    "loopback_server": ({"loopback.py": LOOPBACK_PY}, "python3 -I loopback.py", ["loopback-ok"]),
    "write_200mb": (
        {},
        "dd if=/dev/zero of=\"$TMPDIR/big\" bs=1M count=200 status=none && stat -c %s \"$TMPDIR/big\" "
        "&& rm \"$TMPDIR/big\"",
        ["209715200"],
    ),
    "verbose_log": ({}, "seq 1 600000 && echo log-done", ["\n600000\nlog-done"]),
}
TEST_FILES = {"venv_offline_pip_pytest": {"test_one.py": TEST_PY}}


def argv(mode, wt, scratch, script):
    if mode == "bare":
        return ["sh", "-c", f'cd "{wt}" && {script}']
    if mode == "bwrap":
        return ["bwrap", "--ro-bind", "/", "/", "--bind", wt, wt, "--bind", scratch, scratch, "--dev", "/dev",
                "--proc", "/proc", "--unshare-all", "--new-session", "--die-with-parent", "--chdir", wt,
                "--setenv", "HOME", scratch, "--setenv", "TMPDIR", scratch, "sh", "-c", script]
    return [AGENT, "cage", "--unproven", "--timeout", "240", "--worktree", wt, "--writable", "--scratch", scratch,
            "--", "sh", "-c", script]


def run_workload(name, mode, uid):
    files, script, _ = WORKLOADS[name]
    root = Path(tempfile.mkdtemp(prefix=f"oarbank-workload-{name}-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        wt, scratch = root / "wt", root / "scratch"
        for d in (wt, scratch):
            d.mkdir()
        for path, data in {**files, **TEST_FILES.get(name, {})}.items():
            (wt / path).write_bytes(data if isinstance(data, bytes) else data.encode())
        for p in (root, *root.rglob("*")):
            os.chown(p, uid, uid)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch),
               "LANG": "C.UTF-8", "NO_UPDATE_NOTIFIER": "1"}
        r = subprocess.run([*as_user(uid), *argv(mode, str(wt), str(scratch), script)], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
        return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_the_workload_runs_in_the_cage_as_bare_and_under_bubblewrap(name, uid):
    want = WORKLOADS[name][2]
    for mode in ("bare", "bwrap", "cage"):
        out = run_workload(name, mode, uid)
        missing = [w for w in want if w not in out]
        assert not missing, f"{name} {mode} as uid {uid}: {missing} not in output:\n{out[-3000:]}"
