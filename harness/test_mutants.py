"""The mutation analysis (oarbank-conform mutants, harness/mutants.h): each
enforcement point of the test-only agent removed alone, the battery run
against it. The analysis itself must be able to fail: a point the battery
cannot see is reported as a survivor and fails the run."""
import json
import os
import subprocess

import json_docs
from testlib import CONFORM, FAULTY

# One point of each outcome, under one policy and the probes that judge them.
POINTS = {
    "seccomp.0.socket": "killed",       # socket(AF_UNIX) allowed: a host socket is reached
    "launch.no-new-privs": "changed",   # the seccomp step then fails closed: every launch refused
    "gate.gate-noexec": "survived",     # under sandbox-exec no gate runs, and run's launcher mounts noexec anyway
}
PROBES = "unix_dgram_sendto_host,bpf_syscall,exec_written_file"


def mutants(out, *args):
    return subprocess.run([CONFORM, "--out", str(out), "--agent", FAULTY, "--policy", "runner_strict", "--probe",
                           PROBES, "mutants", *args], capture_output=True, text=True, timeout=900)


def test_each_outcome_is_found_and_a_survivor_fails_the_run(tmp_path):
    r = mutants(tmp_path / "full", "--point", ",".join(POINTS))
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads((tmp_path / "full" / "mutation.json").read_text())
    json_docs.check("mutation", report)
    got = {p["id"]: p for p in report["points"]}
    assert {k: p["outcome"] for k, p in got.items()} == POINTS, got
    assert {c["probe"] for c in got["seccomp.0.socket"]["killers"]} == {"unix_dgram_sendto_host"}, got
    assert all(c["actual"] == "escaped" for c in got["seccomp.0.socket"]["killers"])
    assert got["launch.no-new-privs"]["changed"] and not got["launch.no-new-privs"]["killers"]
    assert got["gate.gate-noexec"]["env"] == {"OARBANK_FAULT_SKIP_STEP": "gate-noexec"}
    assert report["summary"]["new_survivors"] == 1
    assert "SURVIVED  gate.gate-noexec" in r.stdout
    for name in ("mutation.md", "mutation.html"):
        assert "gate.gate-noexec" in (tmp_path / "full" / name).read_text()


def test_an_earlier_report_runs_its_killers_first_and_skips_its_survivors(tmp_path):
    first = mutants(tmp_path / "first", "--point", ",".join(POINTS))
    assert first.returncode == 1, first.stdout + first.stderr
    again = mutants(tmp_path / "again", "--point", ",".join(POINTS), "--killers",
                    str(tmp_path / "first" / "mutation.json"))
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads((tmp_path / "again" / "mutation.json").read_text())
    got = {p["id"]: p["outcome"] for p in report["points"]}
    assert got == dict(POINTS, **{"gate.gate-noexec": "known survivor"}), got
    assert report["summary"]["new_survivors"] == 0


def test_without_the_test_only_build_the_analysis_is_refused(tmp_path):
    agent = os.path.join(os.path.dirname(FAULTY), "oarbank-agent")
    r = subprocess.run([CONFORM, "--out", str(tmp_path), "--agent", agent, "--policy", "runner_strict", "mutants",
                        "--point", "seccomp.0.socket"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 64, r.stdout + r.stderr
    assert "oarbank-agent-faulty" in r.stderr and r.stderr.count("\n") == 1, r.stderr
