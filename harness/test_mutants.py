"""The mutation analysis (oarbank-conform mutants, harness/mutants.h): each
enforcement point of the test-only agent removed alone, the battery run
against it. The analysis itself must be able to fail: a point the battery
cannot see is reported as a survivor and fails the run."""
import json
import os
import pathlib
import socket
import subprocess

import json_docs
from testlib import CONFORM, FAULTY, ROOT

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
    # No cover table: each point removed alone (the table would explain
    # no-new-privs and pair gate-noexec with the noexec mount).
    r = mutants(tmp_path / "full", "--point", ",".join(POINTS), "--covers", covers(tmp_path))
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
    none = covers(tmp_path)
    first = mutants(tmp_path / "first", "--point", ",".join(POINTS), "--covers", none)
    assert first.returncode == 1, first.stdout + first.stderr
    again = mutants(tmp_path / "again", "--point", ",".join(POINTS), "--covers", none, "--killers",
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


# ---- layers that cover each other: pairs, and survivors with a reason ------------

def covers(tmp_path, *rows):
    path = tmp_path / "covers.tsv"
    path.write_text("point\tcover\twhy\n" + "".join("\t".join(r) + "\n" for r in rows))
    return str(path)


def test_a_point_covered_by_another_layer_is_killed_in_its_pair_and_a_reason_explains_a_survivor(tmp_path):
    """Landlock's MAKE_DIR stands behind the read-only mounts: alone its
    removal changes nothing, removed with them make_outside_grants escapes.
    The read-only mounts removed alone already let xattr_outside_grants
    escape (Landlock has no xattr hook): those cells are the cover's, not
    the pair's. MAKE_BLOCK is covered by the kernel itself (no CAP_MKNOD in
    a user namespace), which no mutant removes: its reason explains it."""
    table = covers(tmp_path, ("landlock.fs.make_dir", "mount.read-only", "the read-only mounts answer first"),
                   ("landlock.fs.make_block", "-", "no capability to make a device node in a user namespace"))
    r = subprocess.run([CONFORM, "--out", str(tmp_path / "out"), "--agent", FAULTY, "--policy", "runner_strict",
                        "--probe", "make_outside_grants,xattr_outside_grants,mknod_device", "mutants", "--covers", table,
                        "--point", "landlock.fs.make_dir,landlock.fs.make_block"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((tmp_path / "out" / "mutation.json").read_text())
    json_docs.check("mutation", report)
    got = {p["id"]: p for p in report["points"]}
    make_dir = got["landlock.fs.make_dir"]
    assert make_dir["outcome"] == "killed in pair" and make_dir["paired_with"] == "mount.read-only", make_dir
    assert {c["probe"] for c in make_dir["killers"]} == {"make_outside_grants"}, make_dir
    assert got["landlock.fs.make_block"]["outcome"] == "explained"
    assert "user namespace" in got["landlock.fs.make_block"]["reason"]
    assert report["summary"]["killed_in_pair"] == 1 and report["summary"]["explained"] == 1
    assert report["summary"]["new_survivors"] == 0
    # Without the table the same point survives, and fails the run.
    r = subprocess.run([CONFORM, "--out", str(tmp_path / "bare"), "--agent", FAULTY, "--policy", "runner_strict",
                        "--probe", "make_outside_grants", "mutants", "--covers", covers(tmp_path), "--point",
                        "landlock.fs.make_dir"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 1 and "SURVIVED  landlock.fs.make_dir" in r.stdout, r.stdout + r.stderr


def test_a_point_three_layers_cover_is_killed_with_both_others_and_not_with_one(tmp_path):
    """ptrace of a process outside meets the seccomp row, Landlock's ptrace
    restriction and the cage's user namespace: with the row and one of the
    others removed ptrace_outside stays blocked under sandbox-exec, with
    the row and both it escapes there."""
    def analyse(out, cover):
        table = covers(tmp_path, ("seccomp.28.ptrace", cover, "three layers refuse ptrace"))
        r = subprocess.run([CONFORM, "--out", str(tmp_path / out), "--agent", FAULTY, "--policy", "runner_strict",
                            "--probe", "ptrace_outside", "mutants", "--covers", table, "--point", "seccomp.28.ptrace"],
                           capture_output=True, text=True, timeout=900)
        return r, json.loads((tmp_path / out / "mutation.json").read_text())["points"][0]
    r, point = analyse("one", "launch.landlock")
    # No escape: only run's pid namespace changes the answer (ESRCH).
    assert point["outcome"] == "changed" and not point["killers"], point
    assert {c["entry"] for c in point["changed"]} == {"run"}, point
    r, point = analyse("both", "launch.landlock+launch.mount-namespace")
    assert r.returncode == 0, r.stdout + r.stderr
    assert point["outcome"] == "killed in pair", point
    assert point["paired_with"] == "launch.landlock+launch.mount-namespace"
    assert {(c["probe"], c["entry"]) for c in point["killers"]} == {("ptrace_outside", "sandbox-exec")}, point


def test_a_malformed_cover_table_is_one_line_and_64(tmp_path):
    bad = tmp_path / "covers.tsv"
    for text, message in [("point\tcover\twhy\nlandlock.fs.make_dir\tmount.read-only\n", "expected 3 tab-separated"),
                          ("point\tcover\twhy\na\ta\twhy\n", "a: a cover names other points"),
                          ("point\tcover\twhy\na\tb+a\twhy\n", "a: a cover names other points"),
                          ("point\tcover\twhy\na\tb+\twhy\n", "a: a cover names other points"),
                          ("point\tcover\twhy\na\tb\twhy\na\tc\twhy\n", "a is listed twice")]:
        bad.write_text(text)
        r = subprocess.run([CONFORM, "--out", str(tmp_path / "out"), "--agent", FAULTY, "--policy", "runner_strict",
                            "mutants", "--covers", str(bad)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 64, r.stdout + r.stderr
        assert message in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_every_point_the_cover_table_names_is_a_point_of_a_battery_policy(tmp_path):
    """A row added to a seccomp table shifts the ids after it: a cover
    table naming an id no policy has would silently cover nothing."""
    root = tmp_path / "root"
    for d in ("bundle", "work/tmp", "work/agent/state", "work/carved", "data/tmp", "runtime"):
        (root / d).mkdir(parents=True)
    broker = socket.socket(socket.AF_UNIX)
    broker.bind(str(root / "broker.sock"))
    ids = set()
    policies = pathlib.Path(ROOT) / "fixtures" / "policies" / "battery"
    for policy in policies.glob("*.json"):
        text = policy.read_text().replace("@ROOT@", str(root)).replace("@PROXY_PORT@", "3128")
        path = tmp_path / policy.name
        path.write_text(text)
        r = subprocess.run([FAULTY, "mutation-points", str(path)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (policy.name, r.stderr)
        ids |= {p["id"] for p in json.loads(r.stdout)}
    with open(pathlib.Path(ROOT) / "escapes" / "mutation-cover.tsv") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    points = [r[0] for r in rows]
    assert len(points) == len(set(points)), "a point listed twice"
    for point, cover, why in rows:
        assert point in ids, f"{point}: no battery policy has this point"
        assert cover == "-" or all(c in ids for c in cover.split("+")), f"{point}: its cover {cover} is no point"
        assert why
