"""bench/minilaunch -J, the floor bench/supervise.sh and bench/launch_profile.sh
hold `run` to: it must do what a supervised job's least work is, or the
distance above it says nothing. The command runs as pid 2 of the fresh
user, mount, pid, net, ipc and uts namespaces a job gets, with that pid
namespace's /proc, under no_new_privs and a seccomp filter, with /
read-only (a write there fails with EROFS) and the one writable directory
bound back noexec; its exit status comes back; -E returns the same status
without waiting for the namespaces to go. As root and as uid 65534. -N
(sandbox-exec's floor, bench/run.sh) and -J take as many writable
directories as the policy they are compared with has grants, each its own
noexec bind, a nested one reached through the bind around it."""
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from testlib import BUILD, NOBODY, as_user

FLOOR = os.path.join(BUILD, "bench", "minilaunch")
NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts")

# What the command sees, one line each: its pid, NoNewPrivs and Seccomp,
# each namespace link, the mount options of / and of the writable directory,
# then whether a write under / fails with EROFS and one under the directory
# succeeds.
REPORT = r"""
echo "pid $$"
read -r stat < /proc/self/stat; echo "proc self ${stat%% *}"
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t'
for ns in NAMESPACES; do echo "$ns $(readlink /proc/self/ns/$ns)"; done
awk -v w="$1" '$5 == "/" || $5 == w { print "mount " $5 " " $6 }' /proc/self/mountinfo
touch /floor-probe 2>&1 | grep -q "Read-only file system" && echo "root EROFS" || echo "root not EROFS"
touch "$1/f" && echo "dir writable"
exit 7
""".replace("NAMESPACES", " ".join(NAMESPACES))


@pytest.fixture
def floor():
    if not os.path.exists(FLOOR):
        pytest.skip(f"no built floor at {FLOOR}")
    return FLOOR


@pytest.fixture
def open_tmp():
    # Under /tmp itself: pytest's own tmp_path is not traversable by 65534.
    path = pathlib.Path(tempfile.mkdtemp(prefix="oarbank-floor-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("uid", [0, NOBODY])
def test_the_floor_confines_the_command_in_fresh_namespaces(floor, open_tmp, uid):
    work = open_tmp / "work"
    work.mkdir()
    os.chown(work, uid, uid)
    proc = subprocess.run(as_user(uid) + [floor, "-J", str(work), "--", "/bin/sh", "-c", REPORT, "floor", str(work)],
                          capture_output=True, text=True, timeout=30, cwd=work)
    assert proc.returncode == 7, proc.stderr
    lines = proc.stdout.splitlines()
    assert "pid 2" in lines and "proc self 2" in lines, proc.stdout  # the job's own /proc
    assert "NoNewPrivs:1" in lines and "Seccomp:2" in lines, proc.stdout
    for ns in NAMESPACES:
        theirs = next(line.split()[1] for line in lines if line.startswith(ns + " "))
        assert theirs != os.readlink(f"/proc/self/ns/{ns}"), f"{ns} is the caller's: {proc.stdout}"
    mounts = {line.split()[1]: line.split()[2].split(",") for line in lines if line.startswith("mount ")}
    assert "ro" in mounts["/"], proc.stdout
    assert "rw" in mounts[str(work)] and "noexec" in mounts[str(work)], proc.stdout
    assert "root EROFS" in lines and "dir writable" in lines, proc.stdout
    assert (work / "f").exists()
    assert not os.path.exists("/floor-probe")


def test_the_status_comes_back_with_and_without_waiting_for_the_namespaces(floor, tmp_path):
    for extra in ([], ["-E"]):
        for argv, status in ((["/bin/true"], 0), (["/bin/false"], 1), (["/bin/sh", "-c", "kill -KILL $$"], 128 + 9)):
            proc = subprocess.run([floor, "-J", str(tmp_path)] + extra + ["--"] + argv, capture_output=True,
                                  timeout=30, cwd=tmp_path)
            assert proc.returncode == status, (extra, argv, proc.stderr)


def test_bad_arguments_are_refused_with_the_usage(floor, tmp_path):
    for args in (["-E", "--", "/bin/true"], ["-J", str(tmp_path), "-N", str(tmp_path), "--", "/bin/true"],
                 ["-N", str(tmp_path), "-J", str(tmp_path), "--", "/bin/true"], ["-N", str(tmp_path), "-E", "--", "/bin/true"],
                 ["-N", str(tmp_path)] * 9 + ["--", "/bin/true"], ["-J", str(tmp_path), "--"]):
        proc = subprocess.run([floor] + args, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 64 and proc.stderr.startswith("usage: minilaunch"), (args, proc.stderr)


@pytest.mark.parametrize("mode", ["-N", "-J"])
@pytest.mark.parametrize("uid", [0, NOBODY])
def test_each_writable_directory_is_its_own_noexec_bind(floor, open_tmp, mode, uid):
    dirs = [open_tmp / "work", open_tmp / "data", open_tmp / "work" / "tmp"]  # tmp nested in work, bound after it
    for d in dirs:
        d.mkdir()
        os.chown(d, uid, uid)
    report = ('awk \'$5 ~ "^' + str(open_tmp) + '/" { print "mount " $5 " " $6 }\' /proc/self/mountinfo; '
              'touch /floor-probe 2>&1 | grep -q "Read-only file system" && echo "root EROFS"; '
              'for d in "$@"; do touch "$d/f" && echo "writable $d"; done')
    args = [a for d in dirs for a in (mode, str(d))]
    proc = subprocess.run(as_user(uid) + [floor] + args + ["--", "/bin/sh", "-c", report, "floor"] + [str(d) for d in dirs],
                          capture_output=True, text=True, timeout=30, cwd=open_tmp)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    mounts = {line.split()[1]: line.split()[2].split(",") for line in lines if line.startswith("mount ")}
    assert sorted(mounts) == sorted(str(d) for d in dirs), proc.stdout
    for d in dirs:
        assert "rw" in mounts[str(d)] and "noexec" in mounts[str(d)], proc.stdout
        assert f"writable {d}" in lines and (d / "f").exists(), proc.stdout
    assert "root EROFS" in lines, proc.stdout
