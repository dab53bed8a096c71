"""Cage-before-capability, end to end: `oarbank-agent run` runs only a policy
class that a real, complete `oarbank-conform` run proved on this kernel with
this launcher and this battery; the attestation and the approvals store are
trust files that nobody but root can have written; concurrent approvals all
land; and an unprivileged user cannot make root's `approve` write anywhere
but the store."""
import hashlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

import json_docs
from job_tree import make_tree, remove_tree, write_policy

import testlib
from testlib import AGENT, CONFORM, NOBODY

ROOT, BUILD = pathlib.Path(testlib.ROOT), pathlib.Path(testlib.BUILD)
PROVEN = "runner net=none exec_writable=false gpu=none broker=no"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the battery and the uid switches")


def as_nobody():
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def open_tmpdir():
    """A directory uid 65534 can reach (pytest's own are 0700)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="oarbank-gate-", dir="/tmp"))
    os.chmod(path, 0o755)
    return path


@pytest.fixture(scope="module")
def attestation():
    """A complete battery run, as an operator runs it after an update."""
    out = open_tmpdir()
    path = out / "attestation.json"
    r = subprocess.run([CONFORM, "--out", str(out / "reports"), "--attest", str(path)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert f"attestation: {path}" in r.stdout
    yield path
    shutil.rmtree(out)


@pytest.fixture
def job():
    root = make_tree("oarbank-gate-")
    yield root
    remove_tree(root)


def policy(job, **fields):
    return write_policy(job, f"policy-{len(fields)}.json", **fields)


def run(attestation_path, *args, uid=0):
    env = dict(os.environ, OARBANK_BATTERY_ATTESTATION=str(attestation_path))
    return subprocess.run([AGENT, "run", *args], capture_output=True, text=True, timeout=60, env=env,
                          preexec_fn=as_nobody if uid == NOBODY else None)


def test_the_attestation_binds_kernel_launcher_and_battery(attestation):
    a = json.loads(attestation.read_text())
    assert a["format"] == "oarbank.attestation/1"
    assert a["kernel"]["release"] == os.uname().release
    assert a["kernel"]["version"] == pathlib.Path("/proc/version").read_text().strip()
    assert a["launcher"]["sha256"] == hashlib.sha256(pathlib.Path(AGENT).read_bytes()).hexdigest()
    # The battery: sha256sum's lines over its files, sorted by path, hashed.
    files = sorted(str(p.relative_to(ROOT)) for p in [*ROOT.glob("escapes/**/*.c"), *ROOT.glob("escapes/**/*.h"),
                                                       *ROOT.glob("fixtures/policies/battery/*.json"),
                                                       ROOT / "escapes/expectations.tsv"])
    lines = "".join(f"{hashlib.sha256((ROOT / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
    assert a["battery"]["sha256"] == hashlib.sha256(lines.encode()).hexdigest()
    assert PROVEN in a["proven_classes"]
    st = attestation.stat()
    assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_uid == 0


def test_the_attestation_and_the_full_battery_report_are_what_their_pages_document(attestation):
    json_docs.check("attestation", json.loads(attestation.read_text()))
    json_docs.check("battery", json.loads((attestation.parent / "reports" / "battery.json").read_text()))


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
def test_an_attestation_with_members_its_reader_does_not_know_still_proves(attestation, job, uid):
    a = json.loads(attestation.read_text())
    a["a_later_member"] = {"x": 1}
    for part in ("kernel", "launcher", "battery"):
        a[part]["a_later_member"] = [1]
    later = job / "later-attestation.json"
    later.write_text(json.dumps(a))
    os.chmod(later, 0o644)
    r = run(later, "--json", policy(job), "--", "/bin/true", uid=uid)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["container"]["proof"] == f"proven ({later})"


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
def test_run_refuses_before_the_battery_and_runs_after_it(attestation, job, uid):
    marker = job / "work" / "ran"
    cmd = [policy(job), "--", "/bin/sh", "-c", f"touch {marker}"]
    r = run(job / "no-attestation.json", *cmd, uid=uid)
    assert r.returncode == 70, r.stderr
    assert "battery.proven" in r.stderr and PROVEN in r.stderr and "run oarbank-conform" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not marker.exists(), "no module instruction may run"
    r = run(attestation, "--json", *cmd, uid=uid)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["container"]["proof"] == f"proven ({attestation})"
    assert marker.exists()


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "nobody"])
def test_a_class_the_battery_did_not_prove_is_refused(attestation, job, uid):
    r = run(attestation, policy(job, exec_writable=True, devices={"gpu": "compute"}), "--", "/bin/true", uid=uid)
    assert r.returncode == 70
    assert "the battery has not passed for the class" in r.stderr, r.stderr


EGRESS_ANY = "runner net=egress-any exec_writable=false gpu=none broker=no"


def test_the_battery_proves_egress_any_and_run_takes_it_without_the_override(attestation, job):
    """This host runs slirp4netns and oarbank-netfilter: the battery's
    runner_egress_any policy proves the class, and run takes an egress-any
    job without --unproven; an attestation without the class refuses it."""
    a = json.loads(attestation.read_text())
    assert EGRESS_ANY in a["proven_classes"], a["proven_classes"]
    egress_any = policy(job, net={"mode": "egress-any"})
    r = run(attestation, "--json", egress_any, "--", "/bin/true")
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["container"]["proof"] == f"proven ({attestation})"
    assert "net" in result["container"]["namespaces"], result["container"]
    a["proven_classes"].remove(EGRESS_ANY)
    narrower = job / "without-egress-any.json"
    narrower.write_text(json.dumps(a))
    os.chmod(narrower, 0o644)
    r = run(narrower, egress_any, "--", "/bin/true")
    assert r.returncode == 70, r.stdout + r.stderr
    assert "battery.proven" in r.stderr and EGRESS_ANY in r.stderr, r.stderr


@pytest.mark.parametrize("part", ["stack_sha256", "helper_sha256"])
def test_an_egress_any_class_is_proven_only_with_the_job_network_it_ran(attestation, job, part):
    """The attestation binds the slirp4netns and oarbank-netfilter the
    battery's egress-any jobs ran: another one (here a forged digest, of
    files at other versions, so that each is hashed) proves no egress-any
    job, and nothing else changes."""
    a = json.loads(attestation.read_text())
    assert len(a["job_network"][part]) == 64, a["job_network"]
    a["job_network"][part] = "0" * 64
    assert a["job_network"]["file_versions"], a["job_network"]
    a["job_network"]["file_versions"] = {path: "0:0:0:0:0" for path in a["job_network"]["file_versions"]}
    other = job / f"other-{part}.json"
    other.write_text(json.dumps(a))
    os.chmod(other, 0o644)
    r = run(other, policy(job, net={"mode": "egress-any"}), "--", "/bin/true")
    assert r.returncode == 70, r.stdout + r.stderr
    assert f"was proven with another job network: job_network.{part}" in r.stderr, r.stderr
    r = run(other, policy(job), "--", "/bin/true")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("part,forge", [
    # Another binary: another file (its stat) with another digest.
    ("launcher.sha256", lambda a: a["launcher"].update(sha256="0" * 64, stat="0:0:0:0:0")),
    ("kernel.version", lambda a: a["kernel"].update(version=a["kernel"]["version"] + " (another build)")),
    ("kernel.release", lambda a: a["kernel"].update(release="6.1.0-99-amd64")),
    ("battery.sha256", lambda a: a["battery"].update(sha256="f" * 64)),
])
def test_a_forged_attestation_for_another_binary_kernel_or_battery_is_refused(attestation, job, part, forge):
    a = json.loads(attestation.read_text())
    forge(a)
    forged = job / "forged.json"
    forged.write_text(json.dumps(a))
    os.chmod(forged, 0o644)
    r = run(forged, policy(job), "--", "/bin/true")
    assert r.returncode == 70
    assert f"{part} differs" in r.stderr, r.stderr


def test_an_attestation_another_user_could_write_is_refused(attestation, job):
    copy = job / "copy.json"
    shutil.copy(attestation, copy)
    os.chmod(copy, 0o644)
    assert run(copy, policy(job), "--", "/bin/true").returncode == 0
    os.chown(copy, NOBODY, NOBODY)
    r = run(copy, policy(job), "--", "/bin/true")
    assert r.returncode == 70 and "is owned by uid 65534" in r.stderr, r.stderr
    os.chown(copy, 0, 0)
    os.chmod(copy, 0o666)
    r = run(copy, policy(job), "--", "/bin/true")
    assert r.returncode == 70 and "writable by others" in r.stderr, r.stderr
    link = job / "link.json"
    link.symlink_to(attestation)
    r = run(link, policy(job), "--", "/bin/true")
    assert r.returncode == 70 and "is a symbolic link" in r.stderr, r.stderr


def test_the_override_runs_and_says_so(job):
    r = run(job / "no-attestation.json", "--unproven", "--json", policy(job), "--", "/bin/echo", "hi")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["stdout"] == "hi\n"
    assert result["container"]["proof"] == "unproven (operator override)"


def test_the_report_and_the_gate_agree(attestation, job):
    env = dict(os.environ, OARBANK_BATTERY_ATTESTATION=str(attestation))
    report = json.loads(subprocess.run([AGENT, "sandbox-report", policy(job)], capture_output=True, text=True,
                                       env=env, timeout=60).stdout)
    assert report["grant"]["verdict"] == "ok"
    assert report["supervisor"]["proof"]["attested"] is True
    assert PROVEN in report["supervisor"]["proof"]["proven_classes"]
    env["OARBANK_BATTERY_ATTESTATION"] = str(job / "none.json")
    report = json.loads(subprocess.run([AGENT, "sandbox-report", policy(job)], capture_output=True, text=True,
                                       env=env, timeout=60).stdout)
    assert report["grant"]["verdict"] == "CAPABILITY_NOT_ENFORCED"
    assert report["supervisor"]["proof"]["attested"] is False


def test_a_partial_battery_run_says_it_wrote_nothing(tmp_path):
    for args, why in [(["--probe", "bpf_syscall"], "a partial run (--probe)"),
                      (["--policy", "probe_role"], "a partial run (--policy)")]:
        path = tmp_path / "attestation.json"
        r = subprocess.run([CONFORM, "--out", str(tmp_path / "out"), "--attest", str(path), *args],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:]
        assert f"attestation: not written: {why} proves nothing" in r.stdout
        assert not path.exists()


MANIFEST = """[module]
name = "{name}"
version = "1.0.{i}"

[sandbox]
contract = 1
exec_writable = true
"""


def approve(store, manifest, uid=0):
    env = dict(os.environ, OARBANK_APPROVALS=str(store))
    return subprocess.run([AGENT, "approve", str(manifest), "--by", "op"], capture_output=True, text=True,
                          timeout=30, env=env, preexec_fn=as_nobody if uid == NOBODY else None)


def test_concurrent_approvals_lose_no_record(job):
    tmp_path = job
    store = tmp_path / "store" / "approvals.json"
    manifests = []
    for w in range(8):
        loop = []
        for i in range(50):
            m = tmp_path / f"m{w}-{i}.toml"
            m.write_text(MANIFEST.format(name=f"mod-{w}", i=i))
            loop.append(m)
        manifests.append(loop)

    def approve_all(loop):
        return [approve(store, m).returncode for m in loop]

    with ThreadPoolExecutor(8) as pool:
        codes = [c for loop in pool.map(approve_all, manifests) for c in loop]
    assert codes == [0] * 400
    records = json.loads(store.read_text())["approvals"]
    assert len(records) == 400
    assert len({(r["module"], r["version"]) for r in records}) == 400
    assert stat.S_IMODE(store.stat().st_mode) == 0o644
    assert sorted(p.name for p in store.parent.iterdir()) == ["approvals.json", "approvals.json.lock"]


def test_nobody_cannot_make_roots_approve_write_elsewhere(job):
    """uid 65534 plants what it can in a shared sticky directory: a symlink,
    a hard link or a FIFO at the store's name, a symlink at the lock's name;
    and a directory of its own. Root's approve refuses each and the file the
    link names is unchanged."""
    tmp_path = job
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    os.chmod(victim, 0o644)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    manifest = tmp_path / "m.toml"
    manifest.write_text(MANIFEST.format(name="mod", i=0))

    def plant(code):
        r = subprocess.run(["python3", "-c", code], preexec_fn=as_nobody, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr

    plant(f"import os; os.symlink({str(victim)!r}, {str(shared / 'a.json')!r})")
    plant(f"import os; os.mkfifo({str(shared / 'b.json')!r})")
    plant(f"import os; os.symlink({str(victim)!r}, {str(shared / 'c.json.lock')!r})")
    plant(f"import os; os.mkdir({str(shared / 'theirs')!r})")
    for store in [shared / "a.json", shared / "b.json", shared / "c.json", shared / "theirs" / "approvals.json"]:
        r = approve(store, manifest)
        assert r.returncode == 64, (store, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "not trusted" in r.stderr, r.stderr
    assert victim.read_text() == "untouched"
    assert not (shared / "theirs" / "approvals.json").exists()
    # And nobody's own approve cannot write root's store at all.
    root_store = tmp_path / "root-store" / "approvals.json"
    assert approve(root_store, manifest).returncode == 0
    before = root_store.read_text()
    r = approve(root_store, manifest, uid=NOBODY)
    assert r.returncode == 64 and r.stderr.count("\n") == 1, r.stderr
    assert "cannot open the lock: Permission denied" in r.stderr, r.stderr
    assert root_store.read_text() == before


def test_version_names_what_an_attestation_binds(attestation):
    a = json.loads(attestation.read_text())
    for program in (AGENT, CONFORM):
        r = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].split()[0] == os.path.basename(program) and lines[0].split()[1][0].isdigit()
        assert lines[1].startswith(f"launcher sha256 {a['launcher']['sha256']} ")
        assert lines[2] == f"battery sha256 {a['battery']['sha256']}"
