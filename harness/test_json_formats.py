"""Every JSON document the tools print or write, produced for real by the
built binaries, against its page in docs/json/ (read by json_docs.py): its
`format`, every member the page marks `always`, no member or object the
page does not describe, each value of its documented type. Each test also
requires that its documents, together, held every object and member the
page describes (the few exceptions named), so a page cannot keep a member
the tools no longer write.

- report: sandbox-report without a policy and with each valid fixture
  policy, as root and as uid 65534;
- run: run --json of a job that exits, one whose exec fails and one that is
  refused (no attestation), as root and as uid 65534;
- battery: a partial oarbank-conform run (two probes under runner_strict,
  which writes no attestation); the attestation itself, which only a
  complete run writes, is checked in test_proof_gate.py;
- matrix: matrix_report.py over that battery.json as a capped row, and a
  guest row from the faked guest results test_kernel_matrix.py uses (a
  real guest needs the kernel matrix's QEMU run);
- module: oarbank-conform module of a sample module that fails, with
  denials explained;
- manifest-check, approvals, tools: manifest-check --json, approve and
  manifest-policy --tools-file on a sample module;
- broker-reply: a status, a pull, refusals and a container run over a real
  broker's socket (needs Podman: skipped where test_broker.py skips).

The readers the project has ignore members they do not know: the
attestation (test_proof_gate.py), the approval store and matrix_report.py
are given documents with members no page describes."""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile

import pytest

import json_docs
import matrix_report
import test_broker as broker_tests
import test_kernel_matrix as matrix_tests
import test_module_conform as module_tests
from job_tree import make_tree, remove_tree, write_policy

import testlib
from testlib import AGENT, CONFORM, NOBODY

ROOT, BUILD = pathlib.Path(testlib.ROOT), pathlib.Path(testlib.BUILD)
UIDS = [0, NOBODY]
KINDS = ["report", "run", "battery", "attestation", "matrix", "module", "manifest-check", "approvals", "tools",
         "broker-reply", "mutation"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the tools as root and as uid 65534: needs root")

# Fixtures of the suites whose documents these are (imported by name so that
# pytest finds them here).
store = broker_tests.store
job = broker_tests.job
world = module_tests.world


def as_nobody():
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)


def agent(*args, uid=0, **kw):
    return subprocess.run([AGENT, *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=as_nobody if uid == NOBODY else None, **kw)


@pytest.fixture
def tree():
    root = make_tree("oarbank-json-")
    yield root
    remove_tree(root)


def test_every_kind_has_its_page_and_the_index_names_it():
    index = (ROOT / "docs" / "json" / "README.md").read_text()
    assert "[json/](json/README.md)" in (ROOT / "docs" / "README.md").read_text()
    pages = sorted(p.stem for p in (ROOT / "docs" / "json").glob("*.md") if p.name != "README.md")
    assert pages == sorted(KINDS)
    for kind in KINDS:
        page = json_docs.Page(kind)
        assert page.format == f"oarbank.{kind}/1", page.format
        assert f"[{kind}.md]({kind}.md)" in index and f"`{page.format}`" in index
        assert "Readers ignore members they do not know" in page.path.read_text()


def test_the_checker_catches_what_a_page_does_not_say():
    """The check itself: each kind of drift is named."""
    page = json_docs.Page("approvals")
    good = {"format": "oarbank.approvals/1",
            "approvals": [{"module": "m", "version": "1", "digest": "sha256:0", "who": "a", "when": "t"}]}
    assert page.check(good) == []
    assert page.check(dict(good, format="oarbank.approvals/2")) == [
        "$.format is 'oarbank.approvals/2', documented 'oarbank.approvals/1'"]
    assert page.check(dict(good, extra=1)) == ["$.extra: not documented"]
    missing = {"format": good["format"], "approvals": [{k: v for k, v in good["approvals"][0].items() if k != "who"}]}
    assert page.check(missing) == ["$.approvals[].who: documented as always there, missing"]
    assert page.check(dict(good, approvals=[dict(good["approvals"][0], version=1)])) == [
        "$.approvals[].version: int '1' is not string"]
    report = json_docs.Page("report")
    assert report.check({"format": "oarbank.report/1"})[0] == "$.kernel: documented as always there, missing"


@pytest.fixture
def fixture_root(tree):
    """What @ROOT@ stands for in fixtures/policies/valid (as policy_test.cc
    makes it): bundle/, runtime/, runtime-file, tool/, work/, work/tmp/,
    data/, data/tmp/, a listening broker.sock and link-to-bundle."""
    for d in ("runtime", "tool", "data/tmp"):
        (tree / d).mkdir()
        os.chmod(tree / d, 0o755)
    (tree / "runtime-file").write_text("#!/bin/sh\n")
    os.symlink("bundle", tree / "link-to-bundle")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tree / "broker.sock"))
    listener.listen(1)
    os.chmod(tree / "broker.sock", 0o777)
    yield tree
    listener.close()


@pytest.mark.parametrize("uid", UIDS, ids=["root", "nobody"])
def test_sandbox_report(fixture_root, uid):
    """Without a policy, and with each valid policy fixture (every role, net
    mode, tools, broker, GPU, limits)."""
    page = json_docs.Page("report")
    r = agent("sandbox-report", uid=uid)
    assert r.returncode == 0, r.stderr
    json_docs.check("report", json.loads(r.stdout), page)
    fixtures = sorted((ROOT / "fixtures" / "policies" / "valid").glob("*.json"))
    assert len(fixtures) >= 5
    for fixture in fixtures:
        policy = fixture_root / fixture.name
        policy.write_text(fixture.read_text().replace("@ROOT@", str(fixture_root)))
        os.chmod(policy, 0o644)
        r = agent("sandbox-report", str(policy), uid=uid)
        assert r.returncode == 0, (fixture.name, r.stderr)
        doc = json.loads(r.stdout)
        json_docs.check("report", doc, page)
        assert {"placement", "plan", "grant"} <= doc.keys()
    # Every object and member the page describes was in some document.
    # Allowed unseen: root_etc.detail for nobody (root's view only),
    # supervisor.placement.at_fault[] where `run` can place every fixture
    # (egress-any included) here, and plan.seccomp.dropped[] on x86_64,
    # which has a syscall for every row (arm64 drops uselib).
    allowed = {"$.root_etc.detail"} if uid == NOBODY else set()
    allowed.add("$.supervisor.placement.at_fault[]")
    if os.uname().machine == "x86_64":
        allowed.add("$.plan.seccomp.dropped[]")
    assert set(page.unseen()) <= allowed, page.unseen()


@pytest.mark.parametrize("uid", UIDS, ids=["root", "nobody"])
def test_run_json(tree, uid):
    page = json_docs.Page("run")
    policy = write_policy(tree)
    ran = agent("run", "--unproven", "--json", policy, "--", "/bin/sh", "-c", "echo out; printf '\\377' >&2; exit 3",
                uid=uid)
    assert ran.returncode == 3, ran.stderr
    doc = json.loads(ran.stdout)
    json_docs.check("run", doc, page)
    assert doc["stdout"] == "out\n" and doc["stderr_encoding"] == "base64" and doc["container"]["verified"]["Seccomp"]
    not_exec = agent("run", "--unproven", "--json", policy, "--", str(tree / "bundle" / "missing"), uid=uid)
    assert not_exec.returncode == 71, not_exec.stderr
    json_docs.check("run", json.loads(not_exec.stdout), page)
    # Refused: no attestation proves the class (battery.proven).
    refused = agent("run", "--json", policy, "--", "/bin/true", uid=uid,
                    env=dict(os.environ, OARBANK_BATTERY_ATTESTATION=str(tree / "none.json")))
    assert refused.returncode == 70, refused.stderr
    doc = json.loads(refused.stdout)
    json_docs.check("run", doc, page)
    assert doc["refused"] is True and "battery.proven" in doc["reason"]
    # cage --json: the same document with what the cage was made of.
    caged = agent("cage", "--unproven", "--json", "--worktree", str(tree / "bundle"), "--", "/bin/true", uid=uid)
    assert caged.returncode == 0, caged.stderr
    doc = json.loads(caged.stdout)
    json_docs.check("run", doc, page)
    assert doc["format"] == "oarbank.run/1" and str(tree / "bundle") in doc["cage"]["read"], doc["cage"]
    # --explain: each refusal, explained.
    explained = agent("run", "--unproven", "--json", "--explain", policy, "--", "/bin/cat", "/var/lib/dpkg/status",
                      uid=uid)
    doc = json.loads(explained.stdout)
    json_docs.check("run", doc, page)
    assert doc["explain"]["refusals"][0]["target"] == "/var/lib/dpkg/status", doc["explain"]
    # A worktree inside a checkout says so (cage.history).
    os.makedirs(tree / "checkout" / ".git" / "objects", exist_ok=True)
    os.makedirs(tree / "checkout" / "sub", exist_ok=True)
    os.chmod(tree / "checkout", 0o755)
    os.chmod(tree / "checkout" / "sub", 0o755)
    caged = agent("cage", "--unproven", "--json", "--worktree", str(tree / "checkout" / "sub"), "--", "/bin/true",
                  uid=uid)
    assert caged.returncode == 0, caged.stderr
    doc = json.loads(caged.stdout)
    json_docs.check("run", doc, page)
    assert doc["cage"]["history"]["checkout"] == str(tree / "checkout"), doc["cage"]
    assert page.unseen() == [], page.unseen()


@pytest.fixture(scope="module")
def battery_dir():
    """A partial battery run: two probes under the strict runner policy."""
    out = pathlib.Path(tempfile.mkdtemp(prefix="oarbank-json-battery-"))
    r = subprocess.run([CONFORM, "--probe", "read_outside_grants,signal_outside", "--policy", "runner_strict",
                        "--out", str(out / "reports"), "--attest", str(out / "attestation.json")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "attestation: not written" in r.stdout and not (out / "attestation.json").exists()
    yield out
    shutil.rmtree(out, ignore_errors=True)


def test_battery_json(battery_dir):
    page = json_docs.Page("battery")
    doc = json.loads((battery_dir / "reports" / "battery.json").read_text())
    json_docs.check("battery", doc, page)
    assert doc["confined"] and doc["unconfined"]
    # `stderr` is there only for a probe that wrote to it (none of these two).
    assert page.unseen() == ["$.unconfined[].stderr", "$.confined[].stderr"], page.unseen()


def test_matrix_json(battery_dir, tmp_path):
    battery = json.loads((battery_dir / "reports" / "battery.json").read_text())
    abi = battery["landlock_abi"]
    (tmp_path / "capped" / str(abi)).mkdir(parents=True)
    # matrix_report reads battery.json with a member it does not know.
    battery["a_member_no_page_describes"] = {"x": 1}
    (tmp_path / "capped" / str(abi) / "battery.json").write_text(json.dumps(battery))
    guest = "6.12"
    e = matrix_tests.ROWS[guest]["expect"]
    matrix_tests._fake_guest(tmp_path / "guests" / guest, e["landlock_abi"], e["verdict"], e.get("at_fault", []),
                             refused=e["battery"] == "refused", cgroup=e.get("cgroup"))
    # A run whose agent reported a feature of its ABI missing (its row's
    # checks are test_kernel_matrix's; here only its members).
    missing = json.loads(json.dumps(battery))
    missing["landlock_abi"] = 5
    missing["host"]["landlock"]["missing"] = "scope_signal (ABI 6)"
    (tmp_path / "missing" / "scope_signal").mkdir(parents=True)
    (tmp_path / "missing" / "scope_signal" / "battery.json").write_text(json.dumps(missing))
    m = matrix_report.build(matrix_tests.KERNELS_JSON, str(tmp_path), guests=[guest], capped=[abi],
                            expectations=matrix_tests.EXPECTATIONS, missing=["scope_signal"])
    matrix_report.write(m, str(tmp_path / "out"))
    doc = json.loads((tmp_path / "out" / "matrix.json").read_text())
    page = json_docs.Page("matrix")
    json_docs.check("matrix", doc, page)
    assert page.unseen() == [], page.unseen()
    assert [r["kind"] for r in doc["rows"]] == ["guest", "capped", "missing"]
    capped = doc["rows"][1]
    assert capped["ok"], capped["checks"]


@pytest.mark.parametrize("uid", UIDS, ids=["root", "nobody"])
def test_module_json(world, uid):
    """A suite the cage refuses a write outside its directories
    (`denials`) and that file permissions refuse a read in its bundle
    (`not_the_cage`)."""
    module = world["modules"] / "writes-outside"
    private = module / "private"
    private.write_text("not the module's\n")
    os.chown(private, 12345, 12345)
    os.chmod(private, 0o600)
    suite = module / "json-suite.sh"
    suite.write_text(f"#!/bin/sh\ncat {private}\necho leaked > {world['subst']['@OUTSIDE@']}/escaped.txt\n")
    os.chmod(suite, 0o755)
    out = world["base"] / f"module-{uid}"
    r = subprocess.run([CONFORM, "module", str(module / "manifest.toml"), "--registry", str(world["registry"]),
                        "--uid", str(uid), "--out", str(out), "--", str(suite)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads((out / "module.json").read_text())
    page = json_docs.Page("module")
    json_docs.check("module", report, page)
    assert report["verdict"] == "FAIL" and report["denials"] and report["not_the_cage"], report
    assert page.unseen() == [], page.unseen()


def test_manifest_check_approvals_and_tools(world):
    base = world["base"]
    for d in ("job/bundle", "job/work/tmp", "job/data"):
        (base / d).mkdir(parents=True)
    manifest = world["modules"] / "unrequested-tool" / "manifest.toml"
    requesting = base / "requesting.toml"
    requesting.write_text((world["modules"] / "well-behaved" / "manifest.toml").read_text())
    page = json_docs.Page("manifest-check")
    containers = ROOT / "fixtures" / "manifests" / "valid" / "container-variant.toml"
    for m in (manifest, requesting, containers):
        r = agent("manifest-check", "--json", str(m))
        assert r.returncode == 0, r.stderr
        json_docs.check("manifest-check", json.loads(r.stdout), page)
    assert page.unseen() == [], page.unseen()
    store_path = base / "approvals.json"
    for who in ("alice", "bob"):
        r = agent("approve", str(requesting), "--by", who, "--approvals", str(store_path))
        assert r.returncode == 0, r.stderr
    doc = json.loads(store_path.read_text())
    json_docs.check("approvals", doc)
    assert [a["who"] for a in doc["approvals"]] == ["alice", "bob"]
    tools_file = base / "tools.json"
    r = agent("manifest-policy", str(requesting), "--bundle", str(base / "job/bundle"), "--work",
              str(base / "job/work"), "--data", str(base / "job/data"), "--tmp", str(base / "job/work/tmp"),
              "--registry", str(world["registry"]), "--approvals", str(store_path), "--tools-file", str(tools_file))
    assert r.returncode == 0, r.stderr
    doc = json.loads(tools_file.read_text())
    json_docs.check("tools", doc)
    assert doc["tools"]


def test_the_approval_store_reader_ignores_members_it_does_not_know(world):
    """A store with members no page describes (at the top and in a record)
    is read as before: the approved manifest gets its policy."""
    base = world["base"]
    for d in ("job/bundle", "job/work/tmp", "job/data"):
        (base / d).mkdir(parents=True)
    manifest = world["modules"] / "well-behaved" / "manifest.toml"
    store_path = base / "approvals.json"
    assert agent("approve", str(manifest), "--by", "alice", "--approvals", str(store_path)).returncode == 0
    doc = json.loads(store_path.read_text())
    doc["a_later_member"] = [1, 2]
    doc["approvals"][0]["a_later_member"] = {"x": True}
    store_path.write_text(json.dumps(doc))
    job = ["--bundle", str(base / "job/bundle"), "--work", str(base / "job/work"), "--data", str(base / "job/data"),
           "--tmp", str(base / "job/work/tmp"), "--registry", str(world["registry"]), "--approvals", str(store_path)]
    r = agent("manifest-policy", str(manifest), *job)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["contract"] == 1
    # A module never has sockets of its own (never listening): no ipc "job".
    assert "ipc" not in json.loads(r.stdout), r.stdout
    # Without the record, the same store refuses: the record is what was read.
    doc["approvals"][0]["digest"] = "sha256:" + "0" * 64
    store_path.write_text(json.dumps(doc))
    assert agent("manifest-policy", str(manifest), *job).returncode == 77


def test_broker_replies(store, job):
    b = broker_tests.Broker(store, job, "json-formats")
    try:
        replies = {
            "status": b.request({"op": "status"}),
            "pull": b.request({"op": "container.pull", "image": store.ref, "platform": broker_tests.PLATFORM}),
            "not approved": b.request(broker_tests.run_request(store, ["true"], image="x@sha256:" + "0" * 64)),
            "malformed": b.request(None, raw=b"{not json\n"),
            "run": b.request(broker_tests.run_request(store, ["sh", "-c", "echo hi; exit 4"])),
        }
    finally:
        b.stop()
    page = json_docs.Page("broker-reply")
    for what, reply in replies.items():
        problems = page.check(reply)
        assert not problems, (what, reply, problems)
    assert page.unseen() == ["$.work_check"], page.unseen()  # only when the work walk could not finish
    assert replies["status"]["ok"] and replies["status"]["images"]
    assert replies["not approved"]["error"] == "image_not_approved"
    assert replies["malformed"]["error"] == "bad_request"
    assert replies["run"]["exit_code"] == 4 and replies["run"]["stdout_tail"] == "hi\n", replies["run"]
