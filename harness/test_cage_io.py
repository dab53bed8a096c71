"""`cage` takes a job's input and output as `run` does: output streams as it
comes, --stdin, --pty, --stdout-file and --stderr-file (spooled, bounded by
a cap), --shm-size. And a spool file, which the agent writes with whatever
the job prints (as root, when the agent is root), is never opened through a
link a job planted, never inside a directory the job may write, never
through a hard link: for `cage` and for `run`. Every check runs with the
agent as root and as uid 65534, and the job of one run is the adversary of
the next."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from job_tree import make_tree, remove_tree, write_policy
from testlib import AGENT, NOBODY, as_user, read_line

UIDS = pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the agent as root and as uid 65534: needs root")


class CageTree:
    """A worktree and a scratch directory owned by `uid`, an `out` directory
    outside them for spool files, and a `victim` directory no job is
    granted."""

    def __init__(self, uid):
        self.uid = uid
        self.root = Path(tempfile.mkdtemp(prefix="oarbank-cage-io-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.wt, self.scratch, self.out, self.victim = (self.root / d for d in ("wt", "scratch", "out", "victim"))
        for d in (self.wt, self.scratch, self.out, self.victim):
            d.mkdir()
            os.chown(d, uid, uid)
        (self.victim / "precious").write_text("keep me\n")
        os.chown(self.victim / "precious", uid, uid)

    def argv(self, *args):
        return [*as_user(self.uid), AGENT, "cage", "--unproven", "--worktree", str(self.wt), "--writable",
                "--scratch", str(self.scratch), *args]

    def cage(self, *args, timeout=60, **kw):
        kw.setdefault("capture_output", True)
        return subprocess.run(self.argv(*args), timeout=timeout, **kw)


@pytest.fixture(params=[0, NOBODY], ids=["root", "nobody"])
def t(request):
    tree = CageTree(request.param)
    yield tree
    shutil.rmtree(tree.root, ignore_errors=True)


# ---- streaming, stdin, a terminal ------------------------------------------------

def test_cage_output_streams_before_the_job_ends(t):
    """A line printed at once arrives while the job still waits for a file
    that only this test makes after reading it."""
    gate = t.wt / "go"
    script = f"echo first; echo early >&2; while [ ! -e {gate} ]; do sleep 0.02; done; echo second"
    p = subprocess.Popen(t.argv("--timeout", "30", "--", "/bin/sh", "-c", script), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
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


def test_cage_relays_stdin_only_when_asked(t):
    r = t.cage("--stdin", "--", "/bin/cat", input=b"data\n")
    assert r.returncode == 0 and r.stdout == b"data\n", r
    r = t.cage("--", "/bin/cat", input=b"data\n")
    assert r.returncode == 0 and r.stdout == b"", r
    r = t.cage("--stdin", "--", "/bin/sh", "-c", "readlink /proc/self/fd/0; wc -c", input=b"x" * 300000)
    lines = r.stdout.decode().split()
    assert r.returncode == 0 and lines[0].startswith("pipe:") and lines[1] == "300000", r


def test_cage_pty_is_the_jobs_own_terminal(t):
    check = ("import os\n"
             "print(os.isatty(0), os.isatty(1), os.isatty(2), os.ttyname(0))\n"
             "print(os.tcgetpgrp(0) == os.getpgrp())\n")
    r = t.cage("--pty", "--", "/usr/bin/python3", "-c", check, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r
    lines = r.stdout.decode().replace("\r\n", "\n").splitlines()
    assert lines == ["True True True /dev/pts/0", "True"], r.stdout
    r = t.cage("--", "/usr/bin/python3", "-c", "import os; print(os.isatty(0), os.isatty(1))")
    assert r.stdout == b"False False\n", r


# ---- large output -------------------------------------------------------------

FIVE_MB = 5_000_000


def test_five_megabytes_of_output_arrive_whole(t):
    r = t.cage("--", "/bin/sh", "-c", f"head -c {FIVE_MB} /dev/zero | tr '\\0' x")
    assert r.returncode == 0 and len(r.stdout) == FIVE_MB and r.stderr == b"", (r.returncode, r.stderr)
    # Spooled: the file's default cap holds it all, and --json names the file and counts its bytes.
    spool = t.out / "stdout.txt"
    r = t.cage("--json", "--stdout-file", str(spool), "--", "/bin/sh", "-c", f"head -c {FIVE_MB} /dev/zero | tr '\\0' x")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["stdout_file"] == str(spool) and result["stdout_bytes"] == FIVE_MB
    assert not result["stdout_truncated"] and spool.stat().st_size == FIVE_MB
    assert "cage" in result and result["cage"]["writable"]  # what the cage was made of, as before
    # In memory the cap stays: --json without a file keeps 1 MiB and says what it dropped.
    r = t.cage("--json", "--", "/bin/sh", "-c", f"head -c {FIVE_MB} /dev/zero")
    result = json.loads(r.stdout)
    assert result["stdout_truncated"] and result["stdout_dropped"] == FIVE_MB - (1 << 20)


def test_a_spooled_stream_is_bounded_by_its_cap(t):
    spool = t.out / "capped.txt"
    r = t.cage("--stdout-file", str(spool), "--stdout-max", "1K", "--", "/bin/sh", "-c", "head -c 5000 /dev/zero")
    assert r.returncode == 0 and spool.stat().st_size == 1024, r
    assert b"stdout cut at the cap: 3976 bytes dropped" in r.stderr, r.stderr


# ---- /dev/shm -------------------------------------------------------------------

def test_a_hundred_megabytes_in_dev_shm_with_shm_size(t):
    write = "dd if=/dev/zero of=/dev/shm/big bs=1M count=100 2>&1 && stat -c %s /dev/shm/big"
    r = t.cage("--shm-size", "128M", "--", "/bin/sh", "-c", write)
    assert r.returncode == 0 and r.stdout.split()[-1] == b"104857600", r
    r = t.cage("--", "/bin/sh", "-c", write)  # the default, 64M
    assert r.returncode != 0 and b"No space left on device" in r.stdout, r
    script = ("from multiprocessing import shared_memory\n"
              "m = shared_memory.SharedMemory(create=True, size=100 << 20)\n"
              "m.buf[-1] = 7; print(m.buf[-1]); m.close(); m.unlink()\n")
    r = t.cage("--shm-size", "128M", "--", "/usr/bin/python3", "-c", script)
    assert r.returncode == 0 and r.stdout == b"7\n", r


@pytest.mark.parametrize("value,why", [("1K", "at least 4K"), ("17G", "--shm-size"), ("-1", "--shm-size"),
                                       ("lots", "--shm-size")])
def test_shm_size_out_of_range_is_one_line_and_64(t, value, why):
    r = t.cage("--shm-size", value, "--", "/bin/true", text=True)
    assert r.returncode == 64 and r.stderr.count("\n") == 1 and why in r.stderr, r.stderr


# ---- spool files are the caller's, never the job's --------------------------------

def entry_argv(t, entry, *args):
    """`cage` over t's directories, or `run` with a policy granting the same."""
    if entry == "cage":
        return t.argv(*args)
    policy = t.root / "policy.json"
    policy.write_text(json.dumps({"contract": 1, "role": "runner", "bundle": str(t.root / "bundle"),
                                  "work": str(t.wt), "tmp": str(t.wt / "tmp"), "data": str(t.scratch)}))
    for d in (t.root / "bundle", t.wt / "tmp"):
        d.mkdir(exist_ok=True)
        os.chown(d, t.uid, t.uid)
    return [*as_user(t.uid), AGENT, "run", "--unproven", *args[:-1], str(policy), *args[-1:]]


def spool_run(t, entry, option, path, command="echo job-output"):
    argv = entry_argv(t, entry, option, str(path), "--")
    return subprocess.run([*argv, "/bin/sh", "-c", command], capture_output=True, text=True, timeout=60)


ENTRIES = pytest.mark.parametrize("entry", ["cage", "run"])
STREAMS = pytest.mark.parametrize("option", ["--stdout-file", "--stderr-file"])


@ENTRIES
@STREAMS
def test_a_link_an_earlier_job_planted_is_not_followed_by_the_next_runs_spool_file(t, entry, option):
    """The job of one run makes wt/link point at a directory it was never
    granted; the next run is told to spool into wt/link/f. Following the
    link would have the agent write (as root: create or truncate) a file
    there."""
    r = t.cage("--", "/bin/ln", "-s", str(t.victim), str(t.wt / "link"))
    assert r.returncode == 0 and (t.wt / "link").is_symlink(), r
    r = spool_run(t, entry, option, t.wt / "link" / "precious")
    assert r.returncode == 64 and r.stderr.startswith(f"usage: {option} ") and r.stderr.count("\n") == 1, r.stderr
    assert "link" in r.stderr
    assert (t.victim / "precious").read_text() == "keep me\n"
    assert "job-output" not in r.stdout


@ENTRIES
@STREAMS
def test_a_spool_file_inside_a_writable_directory_is_refused(t, entry, option):
    (t.scratch / "deep").mkdir()
    for path in (t.wt / "out.txt", t.scratch / "deep" / "out.txt", t.wt):
        r = spool_run(t, entry, option, path)
        assert r.returncode == 64 and "which the job may write" in r.stderr, (path, r.stderr)
    assert not (t.wt / "out.txt").exists()


@ENTRIES
@STREAMS
def test_a_spool_file_that_fills_its_disk_is_74_not_the_jobs_success(t, entry, option):
    """The job ran and exited 0, but its spool file's filesystem filled: the
    file is short, so the agent answers 74 with one line naming the stream
    and the error, never the job's 0; --json keeps the job's own status."""
    full = t.out / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=8k,uid={t.uid}", "oarbank-test-full", str(full)], check=True)
    try:
        stream = "stdout" if option == "--stdout-file" else "stderr"
        redirect = "" if stream == "stdout" else " >&2"
        r = spool_run(t, entry, option, full / "out", f"head -c 65536 /dev/zero{redirect}; exit 0")
        line = f"sandbox: {stream} spool file: write: No space left on device"
        assert r.returncode == 74 and r.stderr.count(line) == 1, r
        assert (full / "out").stat().st_size <= 8192
        argv = entry_argv(t, entry, "--json", option, str(full / "again"), "--")
        r = subprocess.run([*argv, "/bin/sh", "-c", f"head -c 65536 /dev/zero{redirect}; exit 3"],
                           capture_output=True, text=True, timeout=60)
        result = json.loads(r.stdout)
        assert r.returncode == 74 and result["exit_code"] == 3, r
        assert "No space left on device" in result["spool_error"], result
        # Where the file takes it all, the job's status stands.
        r = spool_run(t, entry, option, t.out / "roomy", f"head -c 65536 /dev/zero{redirect}; exit 3")
        assert r.returncode == 3 and (t.out / "roomy").stat().st_size == 65536, r
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)


@ENTRIES
def test_a_hard_link_is_not_truncated(t, entry):
    """A second name for a file (another name's content) is refused before
    anything is truncated."""
    os.link(t.victim / "precious", t.out / "spool")
    r = spool_run(t, entry, "--stdout-file", t.out / "spool")
    assert r.returncode == 64 and "2 hard links" in r.stderr, r.stderr
    assert (t.victim / "precious").read_text() == "keep me\n"


@ENTRIES
def test_a_fifo_a_link_or_a_directory_at_the_name_is_one_line(t, entry):
    os.mkfifo(t.out / "fifo")
    os.chown(t.out / "fifo", t.uid, t.uid)
    os.symlink(t.victim / "precious", t.out / "link")
    (t.out / "dir").mkdir()
    for name, why in [("fifo", "not a regular file (a FIFO)"), ("link", "a symbolic link"), ("dir", "Is a directory")]:
        start = time.monotonic()
        r = spool_run(t, entry, "--stdout-file", t.out / name)
        assert r.returncode == 64 and why in r.stderr and r.stderr.count("\n") == 1, (name, r.stderr)
        assert time.monotonic() - start < 20
    assert (t.victim / "precious").read_text() == "keep me\n"


@ENTRIES
def test_a_spool_file_outside_the_grants_is_written_and_replaces_what_was_there(t, entry):
    spool = t.out / "log.txt"
    spool.write_text("an older, longer run's output\n")
    os.chown(spool, t.uid, t.uid)
    r = spool_run(t, entry, "--stdout-file", spool)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert spool.read_text() == "job-output\n"
