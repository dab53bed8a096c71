"""`oarbank-agent run` and the other commands given bad input, as root and as
uid 65534: every file the agent reads is refused at once unless it is a
regular file, every numeric option is range-checked (exit 64, one line
naming it), output that is not UTF-8 comes back byte for byte, a large cap
is spooled to the caller's file, limits.pids is parsed and reported, and a
grant replaced while the launcher starts refuses the job (exit 70: nothing
ran)."""
import base64
import json
import os
import shutil
import socket
import subprocess

import pytest

from job_tree import make_tree, remove_tree, write_policy

from testlib import AGENT, FAULTY, NOBODY, ROOT, as_user, kernel_has_syscall

MANIFEST = os.path.join(ROOT, "fixtures", "manifests", "valid", "full.toml")
# The command that starts a job, and its flags: every job these tests start goes through it.
RUN = ("run", "--unproven")  # these test the cage and the agent, not the proof gate
UIDS = pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])


def agent(uid, *args, binary=AGENT, timeout=30, env=None, text=False):
    return subprocess.run([*as_user(uid), binary, *args], capture_output=True, timeout=timeout, env=env, text=text)


@pytest.fixture
def tree():
    root = make_tree("oarbank-input-", extra_writable=("out",))
    yield root
    remove_tree(root)


def decoded(result, stream):
    if result[f"{stream}_encoding"] == "base64":
        return base64.b64decode(result[stream])
    assert result[f"{stream}_encoding"] == "utf-8"
    return result[stream].encode()


# ---- output that is not UTF-8 ------------------------------------------------

@UIDS
def test_run_json_reports_a_job_whose_output_is_not_utf8(tree, uid):
    policy = write_policy(tree)
    work = tree / "work"
    r = agent(uid, *RUN, "--json", policy, "--", "/bin/sh", "-c",
              f"printf 'a\\377b\\n'; printf '\\001\\376\\n' >&2; echo ran > {work}/f; exit 5")
    assert r.returncode == 5, r.stderr
    result = json.loads(r.stdout)
    assert result["exit_code"] == 5 and result["fault"] == "none"
    assert result["stdout_encoding"] == "base64" and decoded(result, "stdout") == b"a\xffb\n"
    assert result["stderr_encoding"] == "base64" and decoded(result, "stderr") == b"\x01\xfe\n"
    assert (work / "f").read_text() == "ran\n"


@UIDS
def test_a_cap_that_cuts_a_character_keeps_every_kept_byte(tree, uid):
    r = agent(uid, *RUN, "--json", "--stdout-max", "3", write_policy(tree), "--",
              "/bin/sh", "-c", "printf '\\303\\251\\303\\251'")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert decoded(result, "stdout") == b"\xc3\xa9\xc3"
    assert result["stdout_truncated"] and result["stdout_dropped"] == 1 and result["stdout_bytes"] == 3


@UIDS
def test_utf8_output_stays_text_and_plain_run_passes_bytes_through(tree, uid):
    r = agent(uid, *RUN, "--json", write_policy(tree), "--", "/bin/sh", "-c", "printf 'caf\\303\\251\\n'")
    result = json.loads(r.stdout)
    assert result["stdout_encoding"] == "utf-8" and result["stdout"] == "caf\u00e9\n"
    plain = agent(uid, *RUN, write_policy(tree), "--", "/bin/sh", "-c", "head -c 256 /dev/urandom; exit 3")
    assert plain.returncode == 3 and len(plain.stdout) == 256


# ---- files that are not regular files --------------------------------------

def special_files(tree):
    fifo = tree / "fifo"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tree / "sock"))
    for p in (fifo, tree / "sock"):
        os.chmod(p, 0o666)
    return sock, {"a FIFO": str(fifo), "a socket": str(tree / "sock"), "a character device": "/dev/zero",
                  "a directory": str(tree / "bundle")}


@UIDS
@pytest.mark.parametrize("command", ["run", "sandbox-exec", "sandbox-report", "manifest-check", "manifest-policy",
                                     "approve", "approvals", "egress-proxy"])
def test_a_file_that_is_not_regular_is_refused_at_once(tree, uid, command):
    sock, files = special_files(tree)
    try:
        for kind, path in files.items():
            args = {
                "run": [*RUN, path, "--", "/bin/true"],
                "sandbox-exec": ["sandbox-exec", path, "--", "/bin/true"],
                "sandbox-report": ["sandbox-report", path],
                "manifest-check": ["manifest-check", path],
                "manifest-policy": ["manifest-policy", path, "--role", "runner", "--bundle", str(tree / "bundle")],
                "approve": ["approve", path, "--by", "tester", "--approvals", str(tree / "out" / "a.json")],
                "approvals": ["manifest-policy", str(tree / "m.toml"), "--role", "runner", "--bundle",
                              str(tree / "bundle"), "--approvals", path],
                "egress-proxy": ["egress-proxy", "--policy", path],
            }[command]
            if command == "approvals":
                shutil.copy(MANIFEST, tree / "m.toml")
                os.chmod(tree / "m.toml", 0o644)
            r = agent(uid, *args, timeout=10, text=True)
            assert r.returncode == 64, (kind, r.stdout, r.stderr)
            assert f"not a regular file ({kind})" in r.stderr, (kind, r.stderr)
            assert r.stderr.count("\n") == 1, r.stderr
    finally:
        sock.close()


# ---- numeric options ----------------------------------------------------------

@UIDS
@pytest.mark.parametrize("option,value", [
    ("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "-1"), ("--timeout", "0.0004"),
    ("--timeout", "1e-9"), ("--timeout", "1e400"), ("--timeout", "1e8"), ("--timeout", "5s"),
    ("--stdout-max", "-1"), ("--stdout-max", "18446744073709551616"), ("--stdout-max", "1e23"),
    ("--stdout-max", "1.5"), ("--stdout-max", "17M"), ("--stdout-max", "2T"), ("--stderr-max", "-1"),
    ("--stderr-max", "nan"), ("--landlock-abi-max", "1e3"), ("--landlock-abi-max", "-1"),
])
def test_a_bad_number_is_refused_naming_its_option(tree, uid, option, value):
    marker = tree / "work" / "ran"
    r = agent(uid, *RUN, f"{option}={value}", write_policy(tree), "--", "/bin/sh", "-c", f"touch {marker}",
              text=True)
    assert r.returncode == 64, (r.stdout, r.stderr)
    assert r.stderr.startswith("usage: ") and option in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not marker.exists()


@pytest.mark.parametrize("args", [
    ["egress-proxy", "--idle-timeout", "nan", "--allow", "a.example", "--listen", "127.0.0.1:1"],
    ["egress-proxy", "--header-timeout", "inf", "--allow", "a.example", "--listen", "127.0.0.1:1"],
    ["broker", "--socket", "/nonexistent/s", "--work", "/tmp", "--job", "j", "--cpus", "nan"],
    ["broker", "--socket", "/nonexistent/s", "--work", "/tmp", "--job", "j", "--job-uid", "-5"],
    ["manifest-policy", "/nonexistent.toml", "--role", "runner", "--bundle", "/usr", "--mem-gb", "nan"],
    ["manifest-policy", "/nonexistent.toml", "--role", "runner", "--bundle", "/usr", "--proxy-port", "70000"],
])
def test_every_numeric_option_is_range_checked(args):
    r = agent(0, *args, timeout=10, text=True)
    assert r.returncode == 64, (r.stdout, r.stderr)
    assert r.stderr.startswith("usage: ") and r.stderr.count("\n") == 1, r.stderr


@UIDS
def test_the_bounds_themselves_are_accepted(tree, uid):
    r = agent(uid, *RUN, "--json", "--timeout", "0.01", "--stdout-max", "16M", "--stderr-max", "0",
              write_policy(tree), "--", "/bin/sleep", "5", timeout=20)
    result = json.loads(r.stdout)
    assert result["fault"] == "timeout", result
    assert "0.01 s" in result["reason"]


# ---- spooling a large cap -------------------------------------------------------

@UIDS
def test_a_large_cap_is_spooled_to_the_callers_file(tree, uid):
    spool = tree / "out" / "stdout.bin"
    # In a fresh interpreter, so its children's peak RSS is the agent's (and its job's).
    measure = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
               "sys.stdout.buffer.write(r.stdout); "
               "sys.stderr.write(f'{r.returncode} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}')")
    r = subprocess.run(["/usr/bin/python3", "-c", measure, *as_user(uid), AGENT, *RUN, "--json", "--stdout-max", "48M",
                        "--stdout-file", str(spool), write_policy(tree), "--",
                        "/bin/sh", "-c", "head -c 67108864 /dev/zero | tr '\\0' x; exit 4"],
                       capture_output=True, timeout=120)
    returncode, peak_kib = (int(x) for x in r.stderr.split())
    assert returncode == 4, r.stdout
    result = json.loads(r.stdout)
    assert result["stdout_file"] == str(spool)
    assert result["stdout_bytes"] == 48 << 20 and result["stdout_truncated"] and result["stdout_dropped"] == 16 << 20
    assert len(result["stdout"]) == 64 << 10  # the in-memory window
    assert spool.stat().st_size == 48 << 20
    with open(spool, "rb") as f:
        assert f.read(4096) == b"x" * 4096
    # The agent kept a window, not the 48 MiB it wrote.
    assert peak_kib < 32 << 10, f"peak RSS {peak_kib} KiB"


@UIDS
def test_a_spool_file_must_be_a_writable_regular_file(tree, uid):
    for path, why in [(tree / "bundle", "Is a directory"), ("/dev/null", "not a regular file (a character device)"),
                      (tree / "nonexistent" / "f", "no such file or directory")]:
        r = agent(uid, *RUN, "--stdout-file", str(path), write_policy(tree), "--", "/bin/true", text=True)
        assert r.returncode == 64 and "--stdout-file" in r.stderr and why in r.stderr, r.stderr
    os.symlink(tree / "out" / "target", tree / "out" / "link")
    r = agent(uid, *RUN, "--stdout-file", str(tree / "out" / "link"), write_policy(tree), "--", "/bin/true", text=True)
    assert r.returncode == 64 and "--stdout-file" in r.stderr, r.stderr
    assert not (tree / "out" / "target").exists()


# ---- limits.pids -------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -1, 1.5, "64", 4194305, None])
def test_limits_pids_out_of_range_is_one_line_and_64(tree, value):
    r = agent(0, *RUN, write_policy(tree, limits={"pids": value}), "--", "/bin/true", text=True)
    assert r.returncode == 64
    assert r.stderr == "policy: limits.pids: expected an integer 1..4194304\n"


@UIDS
def test_limits_pids_is_reported(tree, uid):
    report = json.loads(agent(uid, "sandbox-report", text=True).stdout)
    pids = report["supervisor"]["process_container"]["pids_max"]
    r = agent(uid, *RUN, "--json", write_policy(tree, limits={"pids": 64}), "--", "/bin/true", text=True)
    limits = json.loads(r.stdout)["container"]["limits"]
    if pids["status"] == "enforced":
        assert "pids.max=64" in limits
    else:
        assert pids["status"] == "unavailable" and pids["detail"]
        assert limits == "pids.max unavailable"


# ---- a grant replaced while the launcher starts -------------------------------------

def start_paused(tree, uid, point, env, command):
    """`run` through the test-only launcher, paused at `point`: returns the
    process and the pause file once it waits there. The pause file lies in
    data, a writable grant: after the binds every other mount is read-only
    to the launcher."""
    pause_dir = tree / "data" / "pause"
    pause_dir.mkdir(exist_ok=True)
    os.chmod(pause_dir, 0o777)
    pause = pause_dir / "at"
    env = dict(os.environ, OARBANK_FAULT_PAUSE=point, OARBANK_FAULT_PAUSE_FILE=str(pause), **env)
    proc = subprocess.Popen([*as_user(uid), FAULTY, *RUN, "--json", write_policy(tree), "--", "/bin/sh", "-c",
                             command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    for _ in range(1000):
        if pause.exists():
            return proc, pause
        assert proc.poll() is None, proc.communicate()
        subprocess.run(["sleep", "0.01"])
    proc.kill()
    raise AssertionError("never reached the pause point " + point)


def replace_work_then_go(tree, proc, pause):
    """Renames work away and makes a new one (with tmp) at its path, releases
    the paused launcher, and returns its exit status and JSON result; the
    job must not have written in either directory."""
    work = tree / "work"
    try:
        os.rename(work, tree / "work.old")
        for d in (work, work / "tmp"):
            d.mkdir()
            os.chmod(d, 0o777)
        pause.with_name("at.go").touch()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (work / "f").exists() and not (tree / "work.old" / "f").exists()
    assert proc.returncode == 70, (out, err)
    return json.loads(out)


@UIDS
@pytest.mark.parametrize("point", ["launcher-grant-opened", "launcher-grants-bound", "launcher-before-gate",
                                   "launcher-after-gate"])
def test_a_work_dir_replaced_during_start_up_refuses_the_job(tree, uid, point):
    if not os.path.exists(FAULTY):
        pytest.skip("no oarbank-agent-faulty (OARBANK_TEST_HOOKS=OFF)")
    work = tree / "work"
    proc, pause = start_paused(tree, uid, point, {}, f"echo ran > {work}/f")
    result = replace_work_then_go(tree, proc, pause)
    assert result["fault"] == "refused" and str(work) in result["reason"], result
    # Caught at the next grant opened (its inode is not the one the policy was read with) or at the
    # witness check of the replaced one.
    assert ("no longer the directory the launch bound" in result["reason"]
            or "leads to another directory or file than when the policy was read" in result["reason"]), result


@UIDS
@pytest.mark.parametrize("launcher_checks", [True, False])
def test_a_work_dir_replaced_before_the_launcher_is_caught_inside_and_at_the_gate(tree, uid, launcher_checks):
    """The work directory swapped after the policy was read and before the
    launcher exists: the launcher refuses it (its inode is not the policy's);
    a launcher that skipped that check is caught by the gate, which opens
    each grant from the job's root, from outside, and compares the inode."""
    if not os.path.exists(FAULTY):
        pytest.skip("no oarbank-agent-faulty (OARBANK_TEST_HOOKS=OFF)")
    work = tree / "work"
    proc, pause = start_paused(tree, uid, "supervisor-before-keeper",
                               {} if launcher_checks else {"OARBANK_FAULT_SKIP_STEP": "grant-inodes"},
                               f"echo ran > {work}/f")
    reason = replace_work_then_go(tree, proc, pause)["reason"]
    if launcher_checks:
        assert "leads to another directory or file than when the policy was read" in reason, reason
    else:
        assert reason.startswith("gate: the launcher is not confined: ") and str(work) in reason, reason
        assert "in the job's view is another directory or file than the policy named" in reason, reason


@UIDS
def test_a_cap_in_gib_needs_a_spool_file(tree, uid):
    policy = write_policy(tree)
    r = agent(uid, *RUN, "--stdout-max", "1GiB", policy, "--", "/bin/echo", "hi", text=True)
    assert r.returncode == 64 and r.stderr.startswith("usage: --stdout-max: ") and "--stdout-file" in r.stderr, r.stderr
    spool = tree / "out" / "gib.txt"
    r = agent(uid, *RUN, "--json", "--stdout-max", "1GiB", "--stdout-file", str(spool), policy, "--",
              "/bin/echo", "hi", text=True)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["stdout"] == "hi\n" and result["stdout_bytes"] == 3 and spool.read_text() == "hi\n"
    same = agent(uid, *RUN, "--stdout-file", str(spool), "--stderr-file", str(spool), policy, "--", "/bin/true",
                 text=True)
    assert same.returncode == 64 and "the same file" in same.stderr


# ---- a kernel newer than the build's syscall table ----------------------------------

PROBE_ABOVE = os.path.join(os.path.dirname(AGENT), "..", "probes", "syscall_above_table")


@UIDS
@pytest.mark.parametrize("entry", ["run", "cage"])
def test_run_and_cage_answer_enosys_above_the_table(tree, uid, entry):
    """The test-only build with its syscall table cut at 450: cachestat and
    fchmodat2 (451, 452), which this kernel has, answer ENOSYS to a job of
    `run` and of `cage`; without the ENOSYS filter they reach the kernel."""
    if not kernel_has_syscall(451) or not kernel_has_syscall(452):
        pytest.skip("this kernel has no cachestat or fchmodat2 (Linux 6.5, 6.6)")
    probe_env = ["--env=OARBANK_PROBE_SYSCALL_TABLE_END=450", "--env=OARBANK_PROBE_SYSCALLS_ABOVE_TABLE=451,452"]
    probes = os.path.realpath(os.path.dirname(PROBE_ABOVE))
    if entry == "run":
        args = [*RUN, *probe_env, write_policy(tree, bundle=probes), "--", PROBE_ABOVE]
    else:
        args = ["cage", "--unproven", "--read", probes, *probe_env, "--", PROBE_ABOVE]
    for skip, verdict in [("", "blocked"), ("seccomp-above-table", "escaped")]:
        env = {"PATH": "/usr/bin:/bin", "OARBANK_FAULT_SYSCALL_TABLE_END": "450", "OARBANK_FAULT_SKIP_STEP": skip}
        r = subprocess.run([*as_user(uid), FAULTY, *args], capture_output=True, text=True, timeout=60, env=env,
                           cwd=str(tree / "work"))
        assert r.returncode == 0, r.stderr
        line = json.loads(r.stdout)
        assert line["verdict"] == verdict, line
        if verdict == "blocked":
            assert line["errno"] == "ENOSYS", line
