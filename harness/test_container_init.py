"""oarbank-container-init, the first process of every broker container: the
container lives while the broker's end of the pipe on its descriptor 3 is
open, and not a moment longer; otherwise it is a plain init (the command's
status, signals passed on). Each case runs it as the first process of a new
pid namespace (unshare), as root and as uid 65534 (in a user namespace of
its own)."""
import os
import signal
import subprocess
import time

import pytest

from testlib import BUILD, NOBODY, as_user, eventually

INIT = os.path.join(BUILD, "sandbox", "oarbank-container-init")


def start(uid, command, lifeline=True, fd3=None):
    """The init as pid 1 of a new pid namespace running `command`; its
    descriptor 3 the read end of a fresh pipe (returned: the write end), or
    `fd3` (a path opened there), or nothing."""
    unshare = ["unshare", "--pid", "--fork"] if uid == 0 else ["unshare", "--user", "--map-root-user", "--pid", "--fork"]
    pass_fds, w, redirect = (), None, ""
    if lifeline:
        r, w = os.pipe()
        pass_fds, redirect = (r,), f"exec 3<&{r} {r}<&-; "
    elif fd3:
        redirect = f"exec 3<{fd3}; "
    proc = subprocess.Popen([*as_user(uid), "bash", "-c", redirect + 'exec "$@"', "init", *unshare, INIT, "--", *command],
                            pass_fds=pass_fds, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if lifeline:
        os.close(pass_fds[0])
    return proc, w


def pids_of(mark):
    """The host pids of every `sleep MARK` (not the init, whose own command
    line holds `mark` too)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", mark.encode()]:
            found.append(int(pid))
    return found


def pid_of(mark):
    found = pids_of(mark)
    return found[0] if found else None


def parent_of(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


def gone(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
def test_the_container_ends_when_the_brokers_end_closes(uid):
    mark = f"600.{os.getpid()}{uid}"
    proc, w = start(uid, ["sh", "-c", f"sleep {mark} & exec sleep {mark}"])
    try:
        assert eventually(lambda: len(pids_of(mark)) == 2), "the command never ran"
        time.sleep(0.2)
        assert proc.poll() is None, "the init ended while the broker's end was open"
        os.close(w)
        w = None
        assert proc.wait(timeout=5) == 137
        assert eventually(lambda: all(gone(p) for p in pids_of(mark)), timeout=5), "a process outlived it"
    finally:
        if w is not None:
            os.close(w)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
def test_it_exits_with_the_commands_status_and_keeps_its_descriptor_from_it(uid):
    # `[` is the shell's own: /proc/self is the shell the init started.
    proc, w = start(uid, ["sh", "-c", "if [ -e /proc/self/fd/3 ]; then echo inherited; else echo none; fi; exit 3"])
    out, err = proc.communicate(timeout=10)
    os.close(w)
    assert proc.returncode == 3, err
    assert out == "none\n", "the command inherited the lifeline"


def test_it_passes_on_a_termination_signal():
    mark = f"601.{os.getpid()}"
    proc, w = start(0, ["sleep", mark])
    try:
        assert eventually(lambda: pid_of(mark) is not None)
        init = parent_of(pid_of(mark))
        assert open(f"/proc/{init}/cmdline", "rb").read().startswith(INIT.encode())
        os.kill(init, signal.SIGTERM)
        assert proc.wait(timeout=5) == 128 + signal.SIGTERM
    finally:
        os.close(w)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("case", ["no-descriptor", "a-file", "not-pid-1", "no-command"])
def test_without_its_lifeline_or_its_place_it_runs_nothing(case, tmp_path):
    marker = tmp_path / "ran"
    command = ["sh", "-c", f"touch {marker}"]
    if case == "not-pid-1":
        r, w = os.pipe()
        proc = subprocess.run(["bash", "-c", f'exec 3<&{r}; exec "$@"', "init", INIT, "--", *command], pass_fds=(r,),
                              capture_output=True, text=True, timeout=10)
        os.close(r)
        os.close(w)
    else:
        proc, w = start(0, [] if case == "no-command" else command, lifeline=case == "no-command",
                        fd3="/etc/hostname" if case == "a-file" else None)
        out, err = proc.communicate(timeout=10)
        proc = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if w is not None:
            os.close(w)
    assert proc.returncode == 70, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("oarbank-container-init: "), proc.stderr
    assert not marker.exists(), "the command ran"
