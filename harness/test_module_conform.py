"""oarbank-conform module as a module author runs it: each sample module in
fixtures/modules gives its expected verdict, and each failure is explained
with the path it reached and the grant that would have allowed it (or that
none can), with the suite run as root and as uid 65534. Evidence from
outside the cage: a file the module tried to write outside its directories
does not exist afterwards. Positive controls: the unrequested tool runs once
the manifest requests it, so the grant the explanation names is the right
one; and the manager commands (approve, manifest-policy) refuse an
unapproved manifest and accept an approved one."""
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest

import testlib

ROOT, BUILD = pathlib.Path(testlib.ROOT), pathlib.Path(testlib.BUILD)
CONFORM, AGENT = pathlib.Path(testlib.CONFORM), pathlib.Path(testlib.AGENT)
MODULES = ROOT / "fixtures" / "modules"
SAMPLES = ["well-behaved", "writes-outside", "reads-home", "unrequested-tool"]
UIDS = [0, 65534]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the suites as root and as uid 65534: needs root")


@pytest.fixture
def world():
    """Directories the samples reach for, all readable by uid 65534 so that
    only the cage can refuse them: a copy of the modules, the registry's
    tools, a world-writable directory outside every grant, a fake home under
    /home with a readable key."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="oarbank-manifest-conform-"))
    home = pathlib.Path(tempfile.mkdtemp(prefix="oarbank-manifest-home-", dir="/home"))
    try:
        os.chmod(base, 0o755)
        shutil.copytree(MODULES, base / "modules")
        for tool in ("faketool", "othertool"):
            (base / "tools" / tool / "bin").mkdir(parents=True)
            script = base / "tools" / tool / "bin" / tool
            script.write_text(f"#!/bin/sh\necho {tool} ran\n")
        outside = base / "outside"
        outside.mkdir()
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_test").write_text("not a real key\n")
        for path in [base, *base.rglob("*"), home, *home.rglob("*")]:
            mode = os.stat(path).st_mode
            os.chmod(path, 0o755 if stat.S_ISDIR(mode) or os.access(path, os.X_OK) else 0o644)
        os.chmod(outside, 0o777)
        for tool in ("faketool", "othertool"):
            os.chmod(base / "tools" / tool / "bin" / tool, 0o755)
        registry = base / "registry.toml"
        registry.write_text((MODULES / "registry.toml").read_text().replace("@TOOLS@", str(base / "tools")))
        yield {"base": base, "modules": base / "modules", "registry": registry,
               "subst": {"@OUTSIDE@": str(outside), "@HOME@": str(home), "@TOOLS@": str(base / "tools")}}
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


def substitute(value, subst):
    for key, real in subst.items():
        value = value.replace(key, real)
    return value


def run_module(world, name, uid, manifest=None, out=None):
    module = world["modules"] / name
    expected = json.loads((module / "expected.json").read_text())
    args = [substitute(a, world["subst"]) for a in expected["args"]]
    out = out or world["base"] / f"report-{name}-{uid}"
    r = subprocess.run([str(CONFORM), "module", str(manifest or module / "manifest.toml"),
                        "--registry", str(world["registry"]), "--uid", str(uid), "--out", str(out),
                        "--", str(module / "suite.sh"), *args],
                       capture_output=True, text=True, timeout=300)
    report = json.loads((out / "module.json").read_text()) if (out / "module.json").exists() else None
    return r, report, expected


@pytest.mark.parametrize("uid", UIDS)
@pytest.mark.parametrize("name", SAMPLES)
def test_each_sample_module_gets_its_verdict_and_explanation(world, name, uid):
    r, report, expected = run_module(world, name, uid)
    assert report is not None, r.stdout + r.stderr
    assert report["verdict"] == expected["verdict"], r.stdout + json.dumps(report, indent=1)
    assert r.returncode == (0 if expected["verdict"] == "PASS" else 1), r.stdout + r.stderr
    assert report["uid"] == uid
    if expected["verdict"] == "PASS":
        # Nothing the cage refused, and the suite's own words made it out.
        assert report["denials"] == [], report["denials"]
        assert "suite passed" in report["stdout_tail"]
        return
    assert "suite passed" not in report["stdout_tail"]
    for want in expected["denials"]:
        target = substitute(want["target"], world["subst"])
        found = [d for d in report["denials"] if d["target"] == target]
        assert found, f"no denial of {target} in {json.dumps(report['denials'], indent=1)}"
        d = found[0]
        assert d["access"] == want["access"], d
        assert d["denied_by"] == want["denied_by"], d
        assert d["errno"] == want.get("errno", "EACCES"), d
        assert d["grant"] == want["grant"], d
        assert want["explanation"] in d["explanation"], d
        # The readable explanation names the path and the grant too.
        assert target in r.stdout, r.stdout
        if want["grant"]:
            assert "grant that would allow it: " + want["grant"] in r.stdout, r.stdout
        else:
            assert "grant: none can allow it" in r.stdout, r.stdout
    for absent in expected.get("absent", []):
        assert not os.path.exists(substitute(absent, world["subst"])), absent


def test_the_grant_named_for_the_unrequested_tool_is_the_one_that_allows_it(world):
    module = world["modules"] / "unrequested-tool"
    fixed = module / "manifest-fixed.toml"
    fixed.write_text((module / "manifest.toml").read_text().replace(
        'tools = [{ id = "faketool" }]', 'tools = [{ id = "faketool" }, { id = "othertool" }]'))
    for uid in UIDS:
        r, report, _ = run_module(world, "unrequested-tool", uid, manifest=fixed,
                                  out=world["base"] / f"fixed-{uid}")
        assert r.returncode == 0, r.stdout + r.stderr
        assert report["verdict"] == "PASS"
        assert report["denials"] == []


def test_writing_outside_is_refused_only_by_the_cage(world):
    # Positive control: unconfined, the same suite writes the file, so the
    # FAIL above is the cage's doing and not a broken suite.
    module = world["modules"] / "writes-outside"
    outside = world["subst"]["@OUTSIDE@"]
    r = subprocess.run([str(module / "suite.sh"), outside], cwd=world["base"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert pathlib.Path(outside, "escaped.txt").read_text() == "leaked\n"


def test_the_report_carries_the_portability_lint_for_every_declared_platform(world):
    _, report, _ = run_module(world, "well-behaved", 0)
    platforms = {p["platform"]: p for p in report["portability"]}
    assert set(platforms) == {"linux", "windows"}
    windows = {g["grant"]: g for g in platforms["windows"]["grants"]}
    assert windows["exec_writable = false"]["status"] == "unavailable"
    assert platforms["windows"]["placement"] == "CAPABILITY_NOT_ENFORCED"
    assert platforms["linux"]["placement"] == "ok"


def test_a_bad_manifest_is_one_line_and_64(world):
    bad = world["base"] / "bad.toml"
    bad.write_text('[module]\nname = "m"\nversion = "1"\n[sandbox]\ncontract = 1\n'
                   'net = { mode = "egress-allowlist", allow = ["10.0.0.1"] }\n')
    r = subprocess.run([str(CONFORM), "module", str(bad), "--", "/bin/true"], capture_output=True, text=True)
    assert r.returncode == 64
    assert r.stderr == "manifest: sandbox.net.allow[0]: IP addresses are not allowed, only host names\n"


def test_an_unknown_tool_id_is_named(world):
    m = world["base"] / "unknown-tool.toml"
    m.write_text('[module]\nname = "m"\nversion = "1"\n[sandbox]\ncontract = 1\ntools = [{ id = "java18" }]\n')
    r = subprocess.run([str(CONFORM), "module", str(m), "--registry", str(world["registry"]), "--", "/bin/true"],
                       capture_output=True, text=True)
    assert r.returncode == 64
    assert r.stderr == (f"manifest: sandbox.tools[0].id: no tool \"java18\" in the operator's tool registry "
                        f"({world['registry']})\n")


def test_the_agent_refuses_an_unapproved_manifest_and_accepts_it_once_approved(world):
    base = world["base"]
    for d in ("job/bundle", "job/work/tmp", "job/data"):
        (base / d).mkdir(parents=True)
    manifest = world["modules"] / "well-behaved" / "manifest.toml"
    store = base / "approvals.json"
    job = ["--bundle", str(base / "job/bundle"), "--work", str(base / "job/work"), "--data", str(base / "job/data"),
           "--tmp", str(base / "job/work/tmp"), "--registry", str(world["registry"]), "--approvals", str(store)]
    r = subprocess.run([str(AGENT), "manifest-policy", str(manifest), *job], capture_output=True, text=True)
    assert r.returncode == 77, r.stderr
    assert r.stderr.startswith("manifest-policy: approval: sample-well-behaved 1.0.0 requests grants that no "
                               "operator has approved (sha256:")
    assert r.stdout == ""
    a = subprocess.run([str(AGENT), "approve", str(manifest), "--by", "alice", "--approvals", str(store)],
                       capture_output=True, text=True)
    assert a.returncode == 0, a.stderr
    record = json.loads(store.read_text())["approvals"][0]
    assert record["who"] == "alice" and record["module"] == "sample-well-behaved"
    check = json.loads(subprocess.run([str(AGENT), "manifest-check", "--json", str(manifest)],
                                      capture_output=True, text=True).stdout)
    assert record["digest"] == check["digest"]
    tools_file = base / "tools.json"
    r = subprocess.run([str(AGENT), "manifest-policy", str(manifest), *job, "--tools-file", str(tools_file)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    policy = json.loads(r.stdout)
    assert policy["tools"] == [{"id": "faketool", "paths": [str(base / "tools" / "faketool")]}]
    assert json.loads(tools_file.read_text()) == {"format": "oarbank.tools/1",
                                               "tools": {"faketool": [str(base / "tools" / "faketool")]}}
    # The Policy is one the launcher takes: run something under it.
    (base / "policy.json").write_text(r.stdout)
    run = subprocess.run([str(AGENT), "sandbox-exec", str(base / "policy.json"), "--",
                          str(base / "tools" / "faketool" / "bin" / "faketool")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "faketool ran\n"
    # A new version of the module needs its own approval.
    v2 = base / "v2.toml"
    v2.write_text(manifest.read_text().replace('version = "1.0.0"', 'version = "1.1.0"'))
    r = subprocess.run([str(AGENT), "manifest-policy", str(v2), *job], capture_output=True, text=True)
    assert r.returncode == 77
    assert "a new version needs its own approval" in r.stderr


def test_a_grant_this_host_cannot_enforce_is_refused_not_run(world):
    # egress-any is unavailable on Linux (Landlock filters ports, not
    # addresses): the launcher refuses it, the suite never runs, and the
    # report says which capability.
    m = world["base"] / "egress-any.toml"
    m.write_text('[module]\nname = "m"\nversion = "1"\n[sandbox]\ncontract = 1\nnet = { mode = "egress-any" }\n')
    marker = world["base"] / "ran"
    out = world["base"] / "refused"
    r = subprocess.run([str(CONFORM), "module", str(m), "--bundle", str(world["modules"]), "--out", str(out),
                        "--", "/bin/sh", "-c", f"touch {marker}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 70, r.stdout + r.stderr
    report = json.loads((out / "module.json").read_text())
    assert report["verdict"] == "REFUSED"
    assert "CAPABILITY_NOT_ENFORCED: net.egress-any" in r.stdout, r.stdout
    assert not marker.exists()
    linux = [p for p in report["portability"] if p["platform"] == "linux"][0]
    assert linux["placement"] == "CAPABILITY_NOT_ENFORCED"
