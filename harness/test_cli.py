"""End-to-end checks of oarbank-agent as a user runs it: exit codes (64 bad
input, 70 not enforceable, 71 exec failed, else the module's own status),
one-line errors, and the enforcement report."""
import json
import os
import re
import subprocess

import pytest

from job_tree import write_policy

from testlib import AGENT, FAULTY


def run(*args, **kw):
    return subprocess.run([AGENT, *args], capture_output=True, text=True, timeout=30, **kw)


@pytest.fixture
def tree(tmp_path):
    for d in ("bundle", "work", "work/tmp", "data"):
        (tmp_path / d).mkdir()
    os.chmod(tmp_path, 0o755)
    return tmp_path


def test_the_module_status_passes_through(tree):
    r = run("sandbox-exec", write_policy(tree), "--", "/bin/sh", "-c", "exit 7")
    assert r.returncode == 7, r.stderr
    assert r.stderr == ""


def test_run_hides_the_host_processes_that_sandbox_exec_shows(tree):
    # /proc/<pid>/cmdline needs no ptrace access: sandbox-exec alone, in the
    # host's pid namespace, shows a process outside (the battery's gap row
    # for proc_outside_cmdline); run's job has a /proc of its own pid namespace.
    outside = subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(60)", "oarbank-outside-marker"])
    try:
        cmdline = f"/proc/{outside.pid}/cmdline"
        shown = run("sandbox-exec", write_policy(tree), "--", "/bin/cat", cmdline)
        assert shown.returncode == 0 and "oarbank-outside-marker" in shown.stdout, shown
        hidden = run("run", "--unproven", write_policy(tree), "--", "/bin/sh", "-c", f"cat {cmdline}; ls /proc | grep -c '^[0-9]'")
        assert "oarbank-outside-marker" not in hidden.stdout, hidden
        assert "No such file" in hidden.stderr, hidden
        assert int(hidden.stdout.split()[-1]) <= 4, hidden.stdout  # the job's own processes only
    finally:
        outside.kill()
        outside.wait()


def test_the_module_runs_confined(tree):
    r = run("sandbox-exec", write_policy(tree), "--", "/bin/sh", "-c", "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"]


def test_a_bad_policy_is_one_line_and_64(tree):
    path = write_policy(tree, net={"mode": "egress-allowlist", "allow": ["a.example"], "proxy_port": 0})
    r = run("sandbox-exec", path, "--", "/bin/true")
    assert r.returncode == 64
    assert r.stderr == "policy: net.proxy_port: expected integer 1..65535\n"


def launch_with_descriptors(tree, command, nofile, policy):
    """`command` of `policy` touching a marker, under RLIMIT_NOFILE `nofile`:
    the result, and whether the module ran."""
    marker = tree / "work" / "ran"
    args = ["--unproven"] if command == "run" else []
    r = subprocess.run(["prlimit", f"--nofile={nofile}:{nofile}", "--", AGENT, command, *args, policy,
                        "--", "/usr/bin/touch", str(marker)], capture_output=True, text=True, timeout=30)
    return r, marker.exists()


@pytest.mark.parametrize("command", ["sandbox-exec", "run"])
@pytest.mark.parametrize("nofile", [3, 4, 5, 6])
def test_descriptors_running_out_while_the_policy_is_read_refuse_with_70_not_64(tree, command, nofile):
    """Too many open files is the host's shortage, not a bad policy: refused
    with 70 and one line saying so, whichever open ran out (the policy file,
    a grant being resolved), and nothing of the module runs. The work grant
    is named through "..", so it is resolved a component at a time, holding
    a descriptor per directory (a path with no link and no ".." is opened
    whole, with one)."""
    through_dotdot = write_policy(tree, work=str(tree / "bundle" / ".." / "work"))
    r, ran = launch_with_descriptors(tree, command, nofile, through_dotdot)
    assert r.returncode == 70, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("sandbox: refused: "), r.stderr
    assert "Too many open files" in r.stderr, r.stderr
    assert not ran


@pytest.mark.parametrize("command", ["sandbox-exec", "run"])
@pytest.mark.parametrize("nofile", range(3, 11))
def test_descriptors_running_out_anywhere_in_a_launch_refuse_with_70(tree, command, nofile):
    """The neighbour of the test above, at each limit from none free to a
    few short of what a launch needs (more than 10): whichever step of the
    launch runs out of descriptors (the policy, the job's channels, the
    launcher's mounts), it is refused with 70 and one line naming the
    shortage, and the module never runs."""
    r, ran = launch_with_descriptors(tree, command, nofile, write_policy(tree))
    assert r.returncode == 70, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("sandbox: "), r.stderr
    assert "Too many open files" in r.stderr, r.stderr
    assert not ran


def test_an_unknown_field_is_named(tree):
    r = run("sandbox-exec", write_policy(tree, colour="red"), "--", "/bin/true")
    assert r.returncode == 64
    assert r.stderr.startswith("policy: colour: unknown field")
    assert r.stderr.count("\n") == 1


def test_an_unknown_command_is_64_and_lists_the_commands():
    r = run("sandbox-exce", "policy.json", "--", "/bin/true")
    assert r.returncode == 64
    assert r.stderr.startswith("usage: unknown command sandbox-exce (one of: sandbox-exec, sandbox-report, run, ")
    assert r.stderr.count("\n") == 1, r.stderr


def test_a_missing_policy_file_is_64(tree):
    r = run("sandbox-exec", str(tree / "nope.json"), "--", "/bin/true")
    assert r.returncode == 64
    assert r.stderr == f"policy: {tree / 'nope.json'}: cannot read the policy file: No such file or directory\n"


def test_usage_errors_are_64():
    assert run("sandbox-exec").returncode == 64
    assert run("no-such-command").returncode == 64


def test_exec_failure_is_71(tree):
    r = run("sandbox-exec", write_policy(tree), "--", "/no/such/program")
    assert r.returncode == 71
    assert r.stderr == "sandbox: exec: /no/such/program: No such file or directory\n"


def test_exec_outside_the_grants_is_71_with_eacces(tree):
    (tree / "work" / "x").write_text("#!/bin/sh\nexit 0\n")
    os.chmod(tree / "work" / "x", 0o755)
    r = run("sandbox-exec", write_policy(tree), "--", str(tree / "work" / "x"))
    assert r.returncode == 71
    assert r.stderr.endswith(": Permission denied\n")


@pytest.mark.parametrize("abi,verdict,capability", [
    (0, "SANDBOX_BACKEND_MISSING", "filesystem"),
    (2, "CAPABILITY_NOT_ENFORCED", "filesystem"),
    (5, "CAPABILITY_NOT_ENFORCED", "ipc.scoping"),
])
def test_a_kernel_that_cannot_enforce_refuses_with_70(tree, abi, verdict, capability):
    marker = tree / "work" / "ran"
    r = run("sandbox-exec", "--landlock-abi-max", str(abi), write_policy(tree), "--", "/bin/sh", "-c", f"touch {marker}")
    assert r.returncode == 70
    assert r.stderr.startswith(f"sandbox: {verdict}: {capability} (")
    assert r.stderr.count("\n") == 1
    assert not marker.exists(), "nothing may run unconfined"


# A kernel that reports an ABI without one of its features (a backport
# reporting ABI 6 without signal scoping): each feature the plan relies on
# is tried, and the test-only agent takes one as missing. The policy that
# needs it is refused with the feature named, through both entry points.
@pytest.mark.parametrize("feature,abi,capability", [
    ("scope_signal", 6, "ipc.scoping"),
    ("scope_abstract_unix", 6, "ipc.scoping"),
    ("ioctl_dev", 5, "ipc.scoping"),
    ("truncate", 3, "filesystem"),
])
@pytest.mark.parametrize("entry", ["sandbox-exec", "run"])
def test_a_kernel_missing_a_feature_of_its_abi_refuses_with_70(tree, feature, abi, capability, entry):
    marker = tree / "work" / "ran"
    env = {**os.environ, "OARBANK_FAULT_LANDLOCK_MISSING": feature}
    extra = ["--unproven"] if entry == "run" else []
    r = subprocess.run([FAULTY, entry, *extra, write_policy(tree), "--", "/bin/sh", "-c", f"touch {marker}"],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 70, r.stdout + r.stderr
    assert f"{capability} (" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert f"refuses a ruleset with {feature} (ABI {abi})" in r.stderr, r.stderr
    assert not marker.exists(), "nothing may run unconfined"
    report = json.loads(subprocess.run([FAULTY, "sandbox-report"], capture_output=True, text=True, timeout=30,
                                       env=env).stdout)["landlock"]
    assert report["abi"] == abi - 1 and report["missing"] == f"{feature} (ABI {abi})", report
    assert report["kernel_abi"] >= abi


def test_every_feature_of_this_kernels_abi_is_there_and_the_whiteout_right_is_tried():
    report = json.loads(run("sandbox-report").stdout)["landlock"]
    assert report["missing"] == "" and report["abi"] == report["kernel_abi"], report
    assert re.fullmatch(r"rename make_(reg|char), mknod make_(reg|char)", report["whiteout_needs"]), report
    erratum4 = [e for e in report["errata_detail"] if e["erratum"] == 4]
    assert erratum4 and "RENAME_WHITEOUT" in erratum4[0]["without_the_fix"], report


def test_egress_any_is_never_enforced(tree):
    r = run("sandbox-exec", write_policy(tree, net={"mode": "egress-any"}), "--", "/bin/true")
    assert r.returncode == 70
    assert r.stderr.startswith("sandbox: CAPABILITY_NOT_ENFORCED: net.egress-any (")


def test_report_lists_every_capability():
    r = run("sandbox-report")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    ids = [c["id"] for c in report["capabilities"]]
    for expected in ("filesystem", "exec_writable.deny", "net.none", "net.egress-allowlist", "ipc.scoping",
                     "ipc.unix-sockets", "process.container", "limits.memory", "net.egress-any"):
        assert expected in ids
    assert all(c["status"] in ("enforced", "cooperative", "unavailable") for c in report["capabilities"])
    assert report["landlock"]["abi"] == report["landlock"]["kernel_abi"]


def test_report_with_a_policy_has_the_verdict_and_plan(tree):
    r = run("sandbox-report", "--landlock-abi-max", "2", write_policy(tree))
    report = json.loads(r.stdout)
    assert report["placement"]["verdict"] == "CAPABILITY_NOT_ENFORCED"
    assert "filesystem" in [c["id"] for c in report["placement"]["at_fault"]]
    assert report["landlock"]["capped"] is True
    r = run("sandbox-report", write_policy(tree))
    report = json.loads(r.stdout)
    syscalls = {rule["syscall"] for rule in report["plan"]["seccomp"]["rules"]}
    assert {"io_uring_setup", "clone3", "memfd_create", "ptrace"} <= syscalls
    assert report["plan"]["seccomp"]["program"] == "built"


def test_the_abi_cap_can_only_lower():
    real = json.loads(run("sandbox-report").stdout)["landlock"]["abi"]
    capped = json.loads(run("sandbox-report", "--landlock-abi-max", "99").stdout)["landlock"]
    assert capped["abi"] == real
    assert capped["capped"] is False


def test_the_launcher_keeps_no_fd_open(tree):
    # An fd the caller leaks into the launcher never reaches the module.
    r = subprocess.run(f"exec 9<{tree / 'policy.json'}; {AGENT} sandbox-exec {write_policy(tree)} -- /bin/sh -c '[ -e /proc/self/fd/9 ] && echo leaked || echo closed'",
                       shell=True, capture_output=True, text=True, timeout=30)
    assert r.stdout == "closed\n", r.stderr


def test_the_launch_path_is_laid_out_together():
    """With lld (scripts/setup.sh installs it) the build lays out the functions
    of sandbox/cli/launch-order.txt first and together: a launch then touches a
    few dozen contiguous pages of code, not pages spread over the binary."""
    import shutil
    if shutil.which("ld.lld") is None:
        pytest.skip("no lld here: the launcher is linked by GNU ld, without the launch order")
    order = open(os.path.join(os.path.dirname(__file__), "..", "sandbox", "cli", "launch-order.txt")).read().split()
    listed = set(order)
    nm = subprocess.run(["nm", "-S", "--defined-only", AGENT], capture_output=True, text=True, check=True).stdout
    placed = {}
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTwW" and f[3] in listed:
            placed[f[3]] = (int(f[0], 16), int(f[1], 16))
    # Most names are in the binary (a stale list only loses some), ...
    assert len(placed) > 0.9 * len(order), f"only {len(placed)} of {len(order)} listed functions are in {AGENT}"
    # ... and they span little more than their own size: without the order
    # they are scattered over the whole text, some megabytes.
    start = min(a for a, _ in placed.values())
    end = max(a + s for a, s in placed.values())
    size = sum(s for _, s in placed.values())
    assert end - start < 1.25 * size + 65536, f"{len(placed)} functions of {size} bytes span {end - start} bytes"
