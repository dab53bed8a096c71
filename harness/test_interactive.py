"""Interactive use of a supervised job (`oarbank-agent run`): output that
streams as it comes, stdin relayed with --stdin, a terminal of the job's own
with --pty, and the job's private devpts and /dev/shm (multiprocessing
works; nothing of the host's or another job's is there). Every check runs
with the agent as root and as uid 65534. And both entry points build the
same environment."""
import os
import select
import subprocess
import time
from pathlib import Path

import pytest

from job_tree import make_tree, remove_tree, write_policy

from testlib import AGENT, NOBODY, as_user, read_line
UIDS = pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the agent as root and as uid 65534: needs root")


def agent(uid, *args):
    return [*as_user(uid), AGENT, *args]


def run(uid, *args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 60)
    return subprocess.run(agent(uid, "run", "--unproven", *args), **kw)


@pytest.fixture
def tree():
    root = make_tree("oarbank-tty-")
    yield root
    remove_tree(root)


@UIDS
def test_output_streams_before_the_job_ends(tree, uid):
    """A line printed at once arrives while the job still waits for a file
    that only this test makes after reading it."""
    gate = tree / "work" / "go"
    script = f"echo first; echo early >&2; while [ ! -e {gate} ]; do sleep 0.02; done; echo second"
    p = subprocess.Popen(agent(uid, "run", "--unproven", "--timeout", "30", write_policy(tree), "--", "/bin/sh", "-c",
                               script), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert read_line(p.stdout, 20) == b"first\n"
        assert read_line(p.stderr, 20) == b"early\n"
        assert p.poll() is None  # still waiting for the file
        gate.touch()
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert out == b"second\n" and err == b""


@UIDS
def test_the_stream_is_whole_and_the_json_copy_keeps_its_cap(tree, uid):
    r = run(uid, "--stdout-max", "3", write_policy(tree), "--", "/bin/echo", "abcdef")
    assert r.returncode == 0 and r.stdout == b"abcdef\n" and r.stderr == b"", r
    r = run(uid, "--json", "--stdout-max", "3", write_policy(tree), "--", "/bin/echo", "abcdef", text=True)
    assert r.returncode == 0, r.stderr
    assert '"stdout": "abc"' in r.stdout and '"stdout_truncated": true' in r.stdout


@UIDS
def test_stdin_is_relayed_only_when_asked(tree, uid):
    r = run(uid, "--stdin", write_policy(tree), "--", "/bin/cat", input=b"hi\n")
    assert r.returncode == 0 and r.stdout == b"hi\n", r
    # Without --stdin the job's stdin is /dev/null, whatever the caller's is.
    r = run(uid, write_policy(tree), "--", "/bin/cat", input=b"hi\n")
    assert r.returncode == 0 and r.stdout == b"", r
    r = run(uid, write_policy(tree), "--", "/bin/readlink", "/proc/self/fd/0", input=b"hi\n")
    assert r.stdout == b"/dev/null\n", r
    # Relayed through a pipe of the job's own: never the caller's fd.
    r = run(uid, "--stdin", write_policy(tree), "--", "/bin/sh", "-c", "readlink /proc/self/fd/0; wc -c",
            input=b"x" * 300000)
    lines = r.stdout.decode().split()
    assert r.returncode == 0 and lines[0].startswith("pipe:") and lines[1] == "300000", r


@UIDS
def test_a_job_that_stops_reading_does_not_stop_the_supervisor(tree, uid):
    r = run(uid, "--stdin", write_policy(tree), "--", "/bin/sh", "-c", "head -c 10 >/dev/null; echo done",
            input=b"y" * (4 << 20))
    assert r.returncode == 0 and r.stdout == b"done\n", r


@UIDS
def test_pty_gives_the_job_a_terminal_of_its_own(tree, uid):
    check = ("import os, sys\n"
             "print(os.isatty(0), os.isatty(1), os.isatty(2), os.ttyname(0), os.ttyname(1))\n"
             "print(sorted(os.listdir('/dev/pts')))\n"
             "print(os.tcgetpgrp(0) == os.getpgrp())\n")
    r = run(uid, "--pty", write_policy(tree), "--", "/usr/bin/python3", "-c", check, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r
    lines = r.stdout.decode().replace("\r\n", "\n").splitlines()
    assert lines[0] == "True True True /dev/pts/0 /dev/pts/0", r.stdout
    assert lines[1] == "['0', 'ptmx']", r.stdout
    assert lines[2] == "True", r.stdout  # it is the job's controlling terminal
    r = run(uid, write_policy(tree), "--", "/usr/bin/python3", "-c", "import os; print(os.isatty(0), os.isatty(1))")
    assert r.stdout == b"False False\n", r


@UIDS
def test_script_runs_on_a_pty(tree, uid):
    r = run(uid, "--pty", write_policy(tree), "--", "/usr/bin/script", "-qc", "tty; echo ok", "/dev/null",
            stdin=subprocess.DEVNULL)
    out = r.stdout.decode().replace("\r\n", "\n")
    assert r.returncode == 0, r
    assert "/dev/pts/1\nok\n" in out, out
    # And without --pty: script makes its own pty in the job's devpts.
    r = run(uid, write_policy(tree), "--", "/usr/bin/script", "-qc", "tty; echo ok", "/dev/null")
    out = r.stdout.decode().replace("\r\n", "\n")
    assert r.returncode == 0 and "/dev/pts/0\nok\n" in out, r


@UIDS
def test_pty_relays_input_and_tiocsti_stays_refused(tree, uid):
    r = run(uid, "--pty", write_policy(tree), "--", "/bin/sh", "-c", "read line; echo got:$line", input=b"typed\n")
    assert r.returncode == 0 and b"got:typed" in r.stdout, r
    sti = ("import fcntl, termios\n"
           "try:\n"
           "    fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('typed')\n"
           "except OSError as e:\n"
           "    print('refused', e.errno)\n")
    r = run(uid, "--pty", write_policy(tree), "--", "/usr/bin/python3", "-c", sti, stdin=subprocess.DEVNULL)
    assert b"refused 1" in r.stdout, r  # EPERM: seccomp refuses TIOCSTI on any terminal, the job's own too


@UIDS
def test_the_window_size_follows_the_callers_terminal(tree, uid):
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    try:
        p = subprocess.Popen(agent(uid, "run", "--unproven", "--pty", write_policy(tree), "--", "/bin/stty", "size"),
                             stdin=slave, stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        out = b""
        deadline = time.monotonic() + 30
        while p.poll() is None or select.select([master], [], [], 0)[0]:
            if time.monotonic() > deadline:
                break
            if select.select([master], [], [], 0.1)[0]:
                try:
                    out += os.read(master, 4096)
                except OSError:
                    break
        p.wait(timeout=10)
    finally:
        os.close(master)
    assert p.returncode == 0, p.stderr.read()
    assert b"33 111" in out, out


MULTIPROCESSING = """
import multiprocessing as mp
from multiprocessing import shared_memory
from multiprocessing.pool import ThreadPool

def square(x):
    return x * x

def put(q, lock, name):
    with lock:
        shm = shared_memory.SharedMemory(name=name)
        shm.buf[0] = 42
        shm.close()
    q.put("from child")

if __name__ == "__main__":
    with mp.Pool(2) as pool:
        assert pool.map(square, range(5)) == [0, 1, 4, 9, 16]
    with ThreadPool(2) as pool:
        assert pool.map(square, range(3)) == [0, 1, 4]
    shm = shared_memory.SharedMemory(create=True, size=16)
    q, lock = mp.Queue(), mp.Lock()
    p = mp.Process(target=put, args=(q, lock, shm.name))
    p.start()
    assert q.get(timeout=20) == "from child"
    p.join()
    assert shm.buf[0] == 42
    shm.close()
    shm.unlink()
    print("multiprocessing ok")
"""


@UIDS
def test_python_multiprocessing_works_in_a_job(tree, uid):
    (tree / "bundle" / "mp.py").write_text(MULTIPROCESSING)
    r = run(uid, write_policy(tree), "--", "/usr/bin/python3", str(tree / "bundle" / "mp.py"), text=True)
    assert r.returncode == 0 and r.stdout == "multiprocessing ok\n", r.stderr


@UIDS
def test_dev_shm_is_private_to_each_job(tree, uid):
    """A file one job writes in /dev/shm is seen by neither the host nor a
    job running at the same time; the host's file is seen by no job."""
    name = f"oarbank-tty-{os.getpid()}-{uid}"
    host_file = Path("/dev/shm") / (name + "-host")
    host_file.write_text("host")
    gate = tree / "work" / "go"
    writer = subprocess.Popen(
        agent(uid, "run", "--unproven", "--timeout", "30", write_policy(tree), "--", "/bin/sh", "-c",
              f"echo job > /dev/shm/{name}; ls /dev/shm; while [ ! -e {gate} ]; do sleep 0.02; done; cat /dev/shm/{name}"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert read_line(writer.stdout, 20) == (name + "\n").encode()  # its own file, and only that
        assert not (Path("/dev/shm") / name).exists()
        other = run(uid, write_policy(tree), "--", "/bin/ls", "-A", "/dev/shm", text=True)
        assert other.returncode == 0 and other.stdout == "", other
        gate.touch()
        out, err = writer.communicate(timeout=30)
    finally:
        writer.kill()
        host_file.unlink()
    assert writer.returncode == 0 and out == b"job\n", err


@UIDS
def test_dev_shm_is_sized_and_noexec(tree, uid):
    size = ("import os; s = os.statvfs('/dev/shm'); print(s.f_blocks * s.f_frsize, bool(s.f_flag & os.ST_NOEXEC))")
    r = run(uid, write_policy(tree), "--", "/usr/bin/python3", "-c", size, text=True)
    assert r.stdout == f"{64 << 20} True\n", r
    r = run(uid, "--shm-size", "1M", write_policy(tree), "--", "/bin/sh", "-c",
            "head -c 2097152 /dev/zero > /dev/shm/big; echo $?; wc -c < /dev/shm/big", text=True)
    status, written = r.stdout.split()
    assert status != "0" and int(written) <= 1 << 20, r
    r = run(uid, "--shm-size", "1K", write_policy(tree), "--", "/bin/true", text=True)
    assert r.returncode == 64 and r.stderr == "usage: --shm-size: at least 4K\n", r
    r = run(uid, "--shm-size", "17G", write_policy(tree), "--", "/bin/true", text=True)
    assert r.returncode == 64 and r.stderr.startswith("usage: --shm-size: "), r


@UIDS
def test_the_jobs_devpts_shows_no_host_pty(tree, uid):
    import pty
    master, slave = pty.openpty()
    try:
        host_pty = os.ttyname(slave)
        os.chmod(host_pty, 0o666)
        r = run(uid, write_policy(tree), "--", "/bin/sh", "-c", f"ls -A /dev/pts; cat {host_pty}", text=True)
    finally:
        os.close(master)
        os.close(slave)
    assert r.stdout == "ptmx\n", r
    assert "No such file or directory" in r.stderr, r


def test_sandbox_exec_and_run_build_the_same_environment(tree):
    """Neither passes the caller's through: a root caller's PATH into /root,
    a token."""
    caller = dict(os.environ, PATH="/root/bin:/usr/bin:/bin", OARBANK_TEST_TOKEN="oarbank-secret-x")
    policy = write_policy(tree)
    for uid in (0, NOBODY):
        exec_env = subprocess.run(agent(uid, "sandbox-exec", "--env", "MINE=1", policy, "--", "/usr/bin/env"),
                                  capture_output=True, text=True, env=caller, timeout=30)
        run_env = run(uid, "--env", "MINE=1", policy, "--", "/usr/bin/env", text=True, env=caller)
        assert exec_env.returncode == 0 and run_env.returncode == 0, (exec_env, run_env)
        assert sorted(exec_env.stdout.splitlines()) == sorted(run_env.stdout.splitlines())
        lines = exec_env.stdout.splitlines()
        assert "PATH=/usr/local/bin:/usr/bin:/bin" in lines and "MINE=1" in lines, lines
        assert not any("oarbank-secret" in line for line in lines), lines
    r = subprocess.run([AGENT, "sandbox-exec", policy, "--", "/usr/bin/python3", "-c", "print('py')"],
                       capture_output=True, text=True, env=caller, timeout=30)
    assert r.returncode == 0 and r.stdout == "py\n", r.stderr
    r = subprocess.run([AGENT, "sandbox-exec", "--env", "NOEQUALS", policy, "--", "/bin/true"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 64 and r.stderr == "usage: --env: expected NAME=VALUE, got NOEQUALS\n"


def read_until(fd, needle, seconds):
    out, deadline = b"", time.monotonic() + seconds
    while needle not in out and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return out


@UIDS
@pytest.mark.parametrize("end", ["exit", "SIGTERM", "SIGHUP"])
def test_the_callers_terminal_is_raw_while_the_job_runs_and_restored_after(tree, uid, end):
    import pty
    import signal
    import termios
    master, slave = pty.openpty()
    before = termios.tcgetattr(slave)
    gate = tree / "work" / "go"
    script = f"echo started; while [ ! -e {gate} ]; do sleep 0.02; done; echo done"
    try:
        p = subprocess.Popen(agent(uid, "run", "--unproven", "--timeout", "30", "--pty", write_policy(tree), "--",
                                   "/bin/sh", "-c", script), stdin=slave, stdout=slave, stderr=subprocess.PIPE)
        assert b"started" in read_until(master, b"started", 20)
        during = termios.tcgetattr(slave)
        assert not during[3] & termios.ICANON and not during[3] & termios.ECHO  # raw
        if end == "exit":
            gate.touch()
            assert b"done" in read_until(master, b"done", 20)
        else:
            p.send_signal(getattr(signal, end))
        p.wait(timeout=20)
        after = termios.tcgetattr(slave)
    finally:
        os.close(master)
        os.close(slave)
    assert after == before
    assert p.returncode == (0 if end == "exit" else -getattr(signal, end)), p.stderr.read()
