"""The fault campaign (scripts/faults.sh): each external part a job relies on,
and each resource, made to fail at each step of a job, from outside; then
what happened, judged.

A cell runs one `oarbank-agent run` in a mount and network namespace of its
own (so a part can be replaced by a wrapper bound over it, and nothing of
the job's network reaches the host's), with a job that writes what
/proc/self/status says of its confinement to a file and sleeps a moment.
A cell passes when the agent either

- refused: exit 70, one line on stderr, and the job never ran; or
- contained: the job ran confined (NoNewPrivs 1, a seccomp filter) and the
  agent ended, whatever its exit status;

and, either way, ended within its deadline and left nothing behind: no
process carrying the cell's marker or started by the part's wrapper, no
slirp4netns of its own, no cgroup leaf, no entry in its temporary directory.
Anything else (the job ran unconfined, the agent hung, crashed without its
one line, or left something) fails the campaign, and so does a cell whose
fault never happened (its wrapper was not reached, no child was there to
kill): it would prove nothing. The table is printed:
part x step x outcome.

The spool directory filling while the job writes (`--stdout-file` on a full
tmpfs) must end in exit 74: the job ran, but its output file is short.

The broker's runtime (podman and runc failing at run, rm, create, start and
delete, by wrappers first on the broker's PATH) is judged the same way in
harness/test_broker.py (test_the_runtime_failing_at_a_step_answers_and_leaves_nothing),
which has the image store those cells need.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import AGENT, BUILD, NOBODY  # noqa: E402

HELPER = os.path.join(BUILD, "sandbox", "oarbank-netfilter")
STACK = "/usr/bin/slirp4netns"
DEADLINE_S = 60


class Cell:
    """One fault: `part` made to fail at `step`, described by `fault`."""

    def __init__(self, part, step, fault, net="none", uid=0, wrap=None, shell="", kill_child=None, limits=(),
                 args=(), job="exec /bin/sleep 1.5", expect_exit=None):
        self.part, self.step, self.fault = part, step, fault
        self.net, self.uid = net, uid
        self.wrap = wrap  # (path bound over, wrapper text with @REAL@ and @MARK@)
        self.shell = shell  # run in the cell's namespaces before the agent (sh)
        self.kill_child = kill_child  # a child of the agent's to SIGKILL mid-job, by its comm
        self.limits = limits  # prlimit options for the agent
        self.args = args  # more options for `run` (@CELL@: the cell's directory)
        self.job = job  # what the job does once it has recorded its confinement
        self.expect_exit = expect_exit  # a contained job's required exit status (None: any)


def cells():
    egress = "egress-any"
    # Each wrapper touches @INJECTED@ where it fails: a cell whose fault never
    # happened proves nothing and fails.
    fail_at_start = "#!/bin/sh\ntouch @INJECTED@\necho 'fault: @WHAT@ fails' >&2\nexit 1\n"
    hang = "#!/bin/bash\ntouch @INJECTED@\nexec -a fault-@MARK@ /bin/sleep 600\n"
    # oarbank-netfilter answers one job's requests over its stdin and stdout
    # (netfilter_main.cc), the namespaces first: failing or hanging at once
    # is failing or never answering before the stack starts. At the
    # install's answer (apply) or at the gate's read-back (generation) the
    # wrapper is a proxy that hands the namespaces to the real helper and
    # passes what comes before to it, then fails, answers another
    # generation than the kernel's (the real helper's answer plus one) or
    # answers something that is no answer.
    helper_script = (
        "#!/bin/bash\nexec -a fault-@MARK@ /usr/bin/python3 -c '\n"
        "import os, socket, subprocess, sys\n"
        "real, injected, action = sys.argv[1:4]\n"
        "ours, theirs = socket.socketpair()\n"
        "helper = subprocess.Popen([real], stdin=theirs, stdout=theirs)\n"
        "theirs.close()\n"
        "def end(code):\n"
        "    helper.kill(); helper.wait(); sys.exit(code)\n"
        "agent = socket.socket(fileno=0)\n"
        "first, fds, _, _ = socket.recv_fds(agent, 11, 2)\n"
        "agent.detach()\n"
        "if not first: end(0)\n"
        "socket.send_fds(ours, [first], fds)\n"
        "src, dst = os.fdopen(0, \"rb\"), os.fdopen(1, \"wb\")\n"
        "to_helper, from_helper = ours.makefile(\"wb\"), ours.makefile(\"rb\")\n"
        "def relay(hit):\n"
        "    head = from_helper.readline()\n"
        "    if not head: end(1)\n"
        "    answer = from_helper.read(int(head.split()[1]))\n"
        "    if hit:\n"
        "        answer = b\"%d\\n\" % (int(answer) + 1)\n"
        "        head = b\"ok %d\\n\" % len(answer)\n"
        "    dst.write(head + answer); dst.flush()\n"
        "relay(False)\n"
        "for line in src:\n"
        "    body = src.read(int(line.split()[1])) if line.startswith(b\"apply \") else b\"\"\n"
        "    hit = line.split()[0] == b\"@WORD@\"\n"
        "    if hit:\n"
        "        open(injected, \"w\").close()\n"
        "        if action == \"fail\":\n"
        "            sys.stderr.write(\"fault: netfilter @WORD@ fails\\n\"); sys.stderr.flush(); end(1)\n"
        "        if action == \"garble\":\n"
        "            dst.write(b\"nonsense\\n\"); dst.flush(); continue\n"
        "    to_helper.write(line + body); to_helper.flush()\n"
        "    relay(hit)\n"
        "end(0)\n"
        "' @REAL@ @INJECTED@ @ACTION@\n")

    def helper_at(word, action):
        return helper_script.replace("@WORD@", word).replace("@ACTION@", action)

    out = [
        Cell("slirp4netns", "start", "exits 1 at once", egress, wrap=(STACK, fail_at_start.replace("@WHAT@", "stack"))),
        Cell("slirp4netns", "ready", "never says ready", egress, wrap=(STACK, hang)),
        Cell("slirp4netns", "job", "SIGKILLed mid-job", egress, kill_child="slirp4netns"),
        Cell("oarbank-netfilter", "start", "exits 1 at once", egress,
             wrap=(HELPER, fail_at_start.replace("@WHAT@", "netfilter"))),
        Cell("oarbank-netfilter", "start", "never answers", egress, wrap=(HELPER, hang)),
        Cell("oarbank-netfilter", "apply", "answers another generation", egress,
             wrap=(HELPER, helper_at("apply", "lie"))),
        Cell("oarbank-netfilter", "apply", "answers nonsense", egress, wrap=(HELPER, helper_at("apply", "garble"))),
        Cell("oarbank-netfilter", "gate", "exits 1", egress, wrap=(HELPER, helper_at("generation", "fail"))),
        Cell("oarbank-netfilter", "gate", "answers another generation", egress,
             wrap=(HELPER, helper_at("generation", "lie"))),
        Cell("oarbank-netfilter", "gate", "answers nonsense", egress, wrap=(HELPER, helper_at("generation", "garble"))),
        Cell("oarbank-netfilter", "job", "SIGKILLed mid-job", egress, kill_child="oarbank-netfilt"),
        Cell("/proc", "start", "an empty tmpfs over /proc", shell="mount -t tmpfs oarbank-fault /proc"),
        Cell("/proc", "start", "egress-any, /proc hidden", egress, shell="mount -t tmpfs oarbank-fault /proc"),
        Cell("tmpdir", "start", "TMPDIR on a full tmpfs", shell=(
            'mount -t tmpfs -o size=8k oarbank-fault "$TMPDIR" && '
            'head -c 1M /dev/zero > "$TMPDIR/fill" 2>/dev/null; true')),
        Cell("tmpdir", "start", "TMPDIR absent", shell='rmdir "$TMPDIR"'),
        Cell("cgroupfs", "start", "an empty tmpfs over /sys/fs/cgroup",
             shell="mount -t tmpfs oarbank-fault /sys/fs/cgroup"),
    ]
    out.append(Cell("tmpdir", "start", "TMPDIR on a full tmpfs (uid 65534)", uid=NOBODY, shell=(
        'mount -t tmpfs -o size=8k,mode=1777 oarbank-fault "$TMPDIR" && '
        'head -c 1M /dev/zero > "$TMPDIR/fill" 2>/dev/null; true')))
    for n in (6, 10, 16, 24, 40):
        out.append(Cell("fds", "start", f"RLIMIT_NOFILE {n}", limits=(f"--nofile={n}:{n}",)))
    for n in (8, 12, 16):
        out.append(Cell("fds", "start", f"RLIMIT_NOFILE {n} (uid 65534)", uid=NOBODY, limits=(f"--nofile={n}:{n}",)))
    for n in (16, 24, 40):
        out.append(Cell("fds", "start", f"RLIMIT_NOFILE {n}, egress-any", egress, limits=(f"--nofile={n}:{n}",)))
    for n in (1, 2, 3, 5, 8):
        out.append(Cell("pids", "start", f"RLIMIT_NPROC {n} (uid 65534)", uid=NOBODY, limits=(f"--nproc={n}:{n}",)))
    # The spool directory filling while the job writes: the job ran, but its
    # output file is short, so the agent must answer 74, not the job's 0.
    for uid, who in ((0, ""), (NOBODY, " (uid 65534)")):
        out.append(Cell("spool", "job", "--stdout-file on a full tmpfs" + who, uid=uid,
                        shell='mount -t tmpfs -o size=8k,mode=1777 oarbank-fault "@CELL@/spool"',
                        args=("--stdout-file", "@CELL@/spool/out"), job="head -c 65536 /dev/zero; exit 0",
                        expect_exit=74))
    return out


def marked_processes(mark):
    found = []
    for d in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if mark.encode() in (d / "cmdline").read_bytes():
                found.append(int(d.name))
        except (OSError, IndexError):
            continue
    return found


def children_named(pid, comm):
    out = []
    for d in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and (d / "comm").read_text().strip() == comm:
                out.append(int(d.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def stacks():
    out = set()
    for d in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            if (d / "comm").read_text().strip() == "slirp4netns":
                out.add(int(d.name))
        except OSError:
            continue
    return out


def cgroup_leaves():
    report = json.loads(subprocess.run([AGENT, "sandbox-report"], capture_output=True, text=True,
                                       timeout=60).stdout)
    base = report.get("cgroup_v2", {}).get("own_cgroup") or ""
    if not base or not os.path.isdir(base):
        return set()
    # os.walk skips a directory removed while it walks (a job ending as it is
    # read); what is left after the cell is all that counts.
    return {os.path.join(parent, d) for parent, dirs, _ in os.walk(base) for d in dirs if d.startswith("oarbank-job-")}


def run_cell(cell, root, index):
    mark = f"fault{index}.{os.getpid()}.{time.monotonic_ns() % 10**6}"
    cell_dir = pathlib.Path(tempfile.mkdtemp(prefix=f"cell{index}-", dir=root))
    os.chmod(cell_dir, 0o755)
    for sub in ("bundle", "runtime", "work", "work/tmp", "data", "agent-tmp", "spool"):
        (cell_dir / sub).mkdir()
        os.chmod(cell_dir / sub, 0o777)
    policy = cell_dir / "policy.json"
    policy.write_text(json.dumps({
        "contract": 1, "role": "runner", "bundle": str(cell_dir / "bundle"), "runtime": str(cell_dir / "runtime"),
        "work": str(cell_dir / "work"), "data": str(cell_dir / "data"), "tmp": str(cell_dir / "work/tmp"),
        "net": {"mode": cell.net}, "exec_writable": False}))
    os.chmod(policy, 0o644)
    ran = cell_dir / "work" / "ran"
    job = f"grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status > {ran}; {cell.job} # {mark}"
    prelude = []
    if cell.wrap:
        target, text = cell.wrap
        real = cell_dir / "real"
        shutil.copy2(target, real)
        wrapper = cell_dir / "wrapper"
        wrapper.write_text(text.replace("@REAL@", str(real)).replace("@MARK@", mark)
                           .replace("@INJECTED@", str(cell_dir / "injected")))
        os.chmod(wrapper, 0o755)
        prelude.append(f"mount --bind {wrapper} {target}")
    if cell.shell:
        prelude.append(cell.shell.replace("@CELL@", str(cell_dir)))
    args = [a.replace("@CELL@", str(cell_dir)) for a in cell.args]
    agent = [AGENT, "run", "--unproven", "--timeout", "20", *args, str(policy), "--", "/bin/sh", "-c", job]
    if cell.uid:
        agent = ["setpriv", f"--reuid={cell.uid}", f"--regid={cell.uid}", "--clear-groups", *agent]
    if cell.limits:
        agent = ["prlimit", *cell.limits, "--", *agent]
    script = " && ".join(["ip link set lo up", *prelude]) + ' && exec "$@"'
    cmd = ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c", script, "fault", *agent]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": str(cell_dir / "agent-tmp")}
    stacks_before, leaves_before = stacks(), cgroup_leaves()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    killer = None
    if cell.kill_child:
        def kill_mid_job():
            # The agent is the last exec of the chain: unshare, sh, then it.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not ran.exists():
                time.sleep(0.02)
            for pid in children_named(proc.pid, cell.kill_child):
                os.kill(pid, signal.SIGKILL)
                (cell_dir / "injected").touch()
        killer = threading.Thread(target=kill_mid_job)
        killer.start()
    try:
        out, err = proc.communicate(timeout=DEADLINE_S)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        hung = True
    if killer:
        killer.join()
    seconds = time.monotonic() - start
    # What the agent left: given a moment, as its clean-up is its own.
    left = []
    deadline = time.monotonic() + 5
    while True:
        left = [f"process {p}" for p in marked_processes(mark)]
        left += [f"slirp4netns {p}" for p in stacks() - stacks_before]
        left += [f"cgroup leaf {p}" for p in cgroup_leaves() - leaves_before]
        tmp = cell_dir / "agent-tmp"
        if tmp.is_dir() and not os.path.ismount(tmp):
            left += [f"temp entry {p.name}" for p in tmp.iterdir()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for p in marked_processes(mark):
        os.kill(p, signal.SIGKILL)
    confinement = ran.read_text() if ran.exists() else ""
    lines = [line for line in err.splitlines() if line.strip()]
    if hung:
        outcome, ok = f"hung past {DEADLINE_S} s", False
    elif confinement:
        confined = "NoNewPrivs:\t1" in confinement and "Seccomp:\t2" in confinement
        outcome = "contained" if confined else "ALLOWED: the job ran unconfined: " + confinement.replace("\n", " ")
        ok = confined
        outcome += f" (exit {proc.returncode})"
        if cell.expect_exit is not None and proc.returncode != cell.expect_exit:
            ok = False
            outcome += f"; EXPECTED EXIT {cell.expect_exit}: " + " | ".join(lines)[:150]
    elif proc.returncode == 70 and len(lines) == 1:
        outcome, ok = "refused (70): " + lines[0][:150], True
    else:
        outcome, ok = f"exit {proc.returncode}, job never ran, stderr: " + " | ".join(lines)[:200], False
    if left:
        ok = False
        outcome += "; LEFT BEHIND: " + ", ".join(left[:5])
    if (cell.wrap or cell.kill_child) and not (cell_dir / "injected").exists():
        ok = False
        outcome += "; THE FAULT NEVER HAPPENED"
    shutil.rmtree(cell_dir, ignore_errors=True)
    return ok, outcome, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="run only cells whose part contains this")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("faults: needs root (namespaces, bind mounts, uid switching)")
    root = pathlib.Path(tempfile.mkdtemp(prefix="oarbank-faults-", dir="/tmp"))
    os.chmod(root, 0o755)
    bad = 0
    rows = []
    try:
        for i, cell in enumerate(c for c in cells() if args.only in c.part):
            ok, outcome, seconds = run_cell(cell, root, i)
            bad += not ok
            rows.append((cell.part, cell.step, cell.fault, outcome, ok, seconds))
            print(f"{'ok ' if ok else 'BAD'} {cell.part:<18} {cell.step:<6} {cell.fault:<38} {outcome}",
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    refused = sum(1 for r in rows if r[3].startswith("refused"))
    contained = sum(1 for r in rows if r[3].startswith("contained"))
    print(f"faults: {len(rows)} cells: {refused} refused, {contained} contained, {bad} failed "
          "(allowed, hung, unexplained or left behind)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
