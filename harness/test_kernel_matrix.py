"""The kernel matrix, driven by pytest: one test per guest of
fixtures/kernels.json (a Debian kernel booted in QEMU, the battery run
inside it) and one per capped Landlock ABI (the battery on this host with the
launcher capped by --landlock-abi-max), each asserting its Landlock ABI
first, then the placement verdict for the strict runner policy, the cgroup
v2 leaf, and the battery.

The guests are booted by scripts/kernel-matrix.sh, which then runs this file
with OARBANK_KERNEL_MATRIX_RESULTS set to its output. Without it the guest
and capped tests are not collected (one skip says so); the tests of the
report itself always run. A guest whose results are missing, or that reports
another ABI than its row, fails: it never skips.

    OARBANK_KERNEL_MATRIX_RESULTS=DIR /usr/bin/python3 -m pytest harness/test_kernel_matrix.py
"""
import copy
import json
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import matrix_report  # noqa: E402

ROOT = os.path.dirname(HERE)
RESULTS = os.environ.get("OARBANK_KERNEL_MATRIX_RESULTS", "")
KERNELS_JSON = os.environ.get("OARBANK_KERNELS_JSON") or (
    os.path.join(RESULTS, "kernels.json") if RESULTS and os.path.exists(os.path.join(RESULTS, "kernels.json"))
    else os.path.join(ROOT, "fixtures", "kernels.json"))
EXPECTATIONS = os.path.join(ROOT, "escapes", "expectations.tsv")

with open(KERNELS_JSON) as _f:
    SPEC = json.load(_f)
ROWS = {g["id"]: g for g in SPEC["guests"]}


def _selected_guests():
    if "OARBANK_KERNEL_MATRIX_GUESTS" in os.environ:  # set and empty: no guest (a capped-only run)
        return os.environ["OARBANK_KERNEL_MATRIX_GUESTS"].replace(",", " ").split()
    return list(ROWS)


def _selected_capped():
    env = os.environ.get("OARBANK_KERNEL_MATRIX_CAPPED")
    if env is not None:
        return [int(n) for n in env.replace(",", " ").split()]
    d = os.path.join(RESULTS, "capped")
    return sorted(int(n) for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def _selected_missing():
    env = os.environ.get("OARBANK_KERNEL_MATRIX_MISSING")
    if env is not None:
        return env.replace(",", " ").split()
    d = os.path.join(RESULTS, "missing")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def _assert_row(row):
    """The row's checks in order (the ABI first): the first that fails fails the test."""
    assert row.checks, f"{row.label}: nothing to check"
    assert row.checks[0].name == "landlock_abi"
    for check in row.checks:
        assert check.ok, f"{row.kind} {row.label}: {check.message()}"


# ---- the matrix: one test per guest, one per capped ABI ------------------
if RESULTS:
    @pytest.mark.parametrize("guest_id", _selected_guests() or [pytest.param(None, marks=pytest.mark.skip(
        reason="no guest in these results (a capped-only run)"))])
    def test_guest(guest_id):
        assert guest_id in ROWS, f"{guest_id} is not a row of {KERNELS_JSON}"
        row = matrix_report.judge_guest(ROWS[guest_id], os.path.join(RESULTS, "guests", guest_id))
        _assert_row(row)

    @pytest.mark.parametrize("abi", _selected_capped() or [pytest.param(None, marks=pytest.mark.skip(
        reason="no capped ABI runs in these results"))])
    def test_capped_abi(abi):
        row = matrix_report.judge_capped(abi, os.path.join(RESULTS, "capped", str(abi)),
                                         matrix_report.policy_floor(EXPECTATIONS))
        _assert_row(row)

    @pytest.mark.parametrize("feature", _selected_missing() or [pytest.param(None, marks=pytest.mark.skip(
        reason="no run with a feature missing in these results"))])
    def test_missing_feature(feature):
        row = matrix_report.judge_missing(feature, os.path.join(RESULTS, "missing", feature),
                                          matrix_report.policy_floor(EXPECTATIONS))
        _assert_row(row)

    def test_matrix_report_shows_every_row(tmp_path):
        m = matrix_report.build(KERNELS_JSON, RESULTS, guests=_selected_guests(), capped=_selected_capped(),
                                expectations=EXPECTATIONS, missing=_selected_missing())
        matrix_report.write(m, str(tmp_path))
        page = (tmp_path / "matrix.html").read_text()
        for g in _selected_guests():
            assert f'id="row-guest-{g}"' in page
        for n in _selected_capped():
            assert f'id="row-capped-{n}"' in page
        junit = (tmp_path / "matrix.xml").read_text()
        for feature in _selected_missing():
            assert f'id="row-missing-{feature}"' in page
        assert junit.count("<testsuite ") == len(_selected_guests()) + len(_selected_capped()) + len(_selected_missing())
else:
    def test_kernel_matrix_results():
        pytest.skip("the kernel matrix was not run here: scripts/kernel-matrix.sh boots the guests and runs "
                    "this file with OARBANK_KERNEL_MATRIX_RESULTS")


# ---- the report itself: a wrong ABI in kernels.json turns its row red ----
def _fake_guest(d, abi, verdict="ok", at_fault=(), battery_verdict="PASS", refused=False, cgroup=None,
                catalogue_verdict="held", machine="x86_64", routes=(), egress_any=False):
    """A results directory as qemu-run.sh leaves it, for a guest that reported
    `abi` (with `egress_any`, its network world built and the egress-any
    cells passed)."""
    res = d / "results"
    (res / "battery").mkdir(parents=True)
    (res / "machine").write_text(machine + "\n")
    (d / "guest.json").write_text(json.dumps({"kernel": {"package": "linux-test", "version": "1"}, "wall_s": 1.0,
                                              "guest_uptime": {"init": 1.0}}))
    (res / "sandbox-report.json").write_text(json.dumps({"kernel": {"release": "test"},
                                                         "landlock": {"abi": abi, "kernel_abi": abi}}))
    (res / "verdict.json").write_text(json.dumps({"placement": {"verdict": verdict, "at_fault": [
        {"id": x, "status": "unavailable", "detail": x} for x in at_fault]}}))
    (res / "cgroup.json").write_text(json.dumps(cgroup or {"memory_oom": True, "cpu_throttle": True, "kill": True,
                                                           "pids": True, "agent_pids": True}))
    actual = "refused (exit 70)" if refused else None
    (res / "battery" / "battery.json").write_text(json.dumps({
        "verdict": battery_verdict, "landlock_abi": abi, "counts": {"PASS": 3}, "summary": "test",
        "catalogue": [{"id": 1, "technique": "TIOCSTI", "where": "bubblewrap", "source": "https://example.test/1",
                       "status": "probe", "sandbox_exec": catalogue_verdict, "run": "held"},
                      {"id": 2, "technique": "WSL interop", "where": "Codex", "source": "https://example.test/2",
                       "status": "n/a", "sandbox_exec": "n/a", "run": "n/a"}],
        "unconfined": [{"probe": p, "policy": "unconfined", "uid": 0, "expected": "escaped",
                        "actual": "escaped", "outcome": "PASS", "why": "", "detail": ""}
                       for p in ("read_outside_grants",) + tuple(routes)],
        "confined": [{"probe": probe, "policy": "runner_strict", "uid": uid,
                      "expected": "refused (exit 70)" if refused else blocked, "actual": actual or blocked,
                      "outcome": "PASS", "why": "", "detail": ""}
                     for probe, blocked in (("read_outside_grants", "blocked EACCES"), ("signal_outside", "blocked EPERM"))
                     for uid in (0, 65534)]}))
    if egress_any:
        b = json.loads((res / "battery" / "battery.json").read_text())
        b["unconfined"].append({"probe": "egress_public_tcp4", "policy": "unconfined", "uid": 0,
                                "expected": "escaped", "actual": "escaped", "outcome": "PASS", "why": "", "detail": ""})
        b["confined"] += [{"probe": "egress_public_tcp4", "policy": "runner_egress_any", "uid": uid,
                           "expected": "reached", "actual": "reached", "outcome": "PASS", "why": "", "detail": ""}
                          for uid in (0, 65534)]
        (res / "battery" / "battery.json").write_text(json.dumps(b))


def _real_or_fake_results(tmp_path, guest_id):
    """The real results of guest_id when the matrix ran, else a faithful fake."""
    if RESULTS and os.path.exists(os.path.join(RESULTS, "guests", guest_id, "results", "sandbox-report.json")):
        return RESULTS
    e = ROWS[guest_id]["expect"]
    _fake_guest(tmp_path / "guests" / guest_id, e["landlock_abi"], e["verdict"], e.get("at_fault", []),
                refused=e["battery"] == "refused", cgroup=e.get("cgroup"),
                machine=matrix_report.MACHINE[ROWS[guest_id].get("arch", "amd64")], routes=e.get("routes", ()),
                egress_any=bool(ROWS[guest_id].get("egress_any")))
    if e.get("broken_filter"):
        _fake_broken_filter(tmp_path / "guests" / guest_id, e["broken_filter"], "ESCAPED")
    return str(tmp_path)


def _fake_broken_filter(d, probe, outcome):
    """What the guest's run under the test-only agent (a seccomp row dropped) leaves."""
    (d / "results" / "broken-filter").mkdir(parents=True)
    (d / "results" / "broken-filter" / "battery.json").write_text(json.dumps({"confined": [
        {"probe": probe, "policy": "runner_strict", "uid": uid, "outcome": outcome if uid == 0 else "PASS",
         "actual": "escaped" if outcome == "ESCAPED" and uid == 0 else "blocked EPERM"} for uid in (0, 65534)]}))


@pytest.mark.parametrize("guest_id", ["6.12", "5.10", "arm64-6.12", "arm64-6.1"])
def test_a_wrong_abi_in_kernels_json_turns_its_row_red(tmp_path, guest_id):
    results = _real_or_fake_results(tmp_path, guest_id)
    spec = copy.deepcopy(SPEC)
    right = matrix_report.build(KERNELS_JSON, results, guests=[guest_id], capped=[], missing=[],
                                expectations=EXPECTATIONS)
    wrong_spec = tmp_path / "kernels-wrong.json"
    for g in spec["guests"]:
        if g["id"] == guest_id:
            g["expect"]["landlock_abi"] += 1  # deliberately wrong
    wrong_spec.write_text(json.dumps(spec))
    wrong = matrix_report.build(str(wrong_spec), results, guests=[guest_id], capped=[], missing=[],
                                expectations=EXPECTATIONS)
    (row,) = wrong["rows"]
    assert not row["ok"] and not wrong["passed"]
    assert row["checks"][0]["name"] == "landlock_abi" and not row["checks"][0]["ok"]
    matrix_report.write(wrong, str(tmp_path / "wrong"))
    page = (tmp_path / "wrong" / "matrix.html").read_text()
    assert f'<tr class="red" id="row-guest-{guest_id}"' in page
    assert "<failure" in (tmp_path / "wrong" / "matrix.xml").read_text()
    # The same check the guest test asserts fails, with the ABI named first.
    g = next(g for g in spec["guests"] if g["id"] == guest_id)
    with pytest.raises(AssertionError, match=r"landlock_abi: expected \d+, got \d+"):
        _assert_row(matrix_report.judge_guest(g, os.path.join(results, "guests", guest_id)))
    # The untouched row stays as it was (green on a faithful result).
    if results != RESULTS:
        assert right["rows"][0]["ok"], right["rows"][0]["checks"]


def test_a_missing_guest_fails_rather_than_skips(tmp_path):
    row = matrix_report.judge_guest(ROWS["6.12"], str(tmp_path / "guests" / "6.12"))
    assert not row.ok
    with pytest.raises(AssertionError, match="landlock_abi"):
        _assert_row(row)


def test_refusal_rows_need_every_confined_cell_refused(tmp_path):
    _fake_guest(tmp_path / "guests" / "6.1", 2, "CAPABILITY_NOT_ENFORCED", ["filesystem"], refused=False,
                cgroup=ROWS["6.1"]["expect"]["cgroup"])
    row = matrix_report.judge_guest(ROWS["6.1"], str(tmp_path / "guests" / "6.1"))
    assert [c.name for c in row.checks if not c.ok] == ["battery"]


def test_kernels_json_rows_are_complete():
    ids = [g["id"] for g in SPEC["guests"]]
    assert len(ids) == len(set(ids))
    for g in SPEC["guests"]:
        for key in ("suite", "package", "version", "resolve", "expect"):
            assert key in g, f"{g['id']}: {key}"
        assert g["suite"] in SPEC["apt_suites"], g["id"]
        e = g["expect"]
        assert (e["verdict"] == "ok") == (e["battery"] == "pass"), g["id"]
        assert e["verdict"] in ("ok", "SANDBOX_BACKEND_MISSING", "CAPABILITY_NOT_ENFORCED")


def test_a_route_the_kernel_has_must_be_taken_unconfined(tmp_path):
    """6.12-x32 boots with x32 syscalls on: its row fails unless x32_syscall
    escaped there unconfined (never `unsupported`, never missing)."""
    g = ROWS["6.12-x32"]
    assert g["expect"]["routes"] == ["x32_syscall"] and "syscall.x32=y" in g["append"]
    d = tmp_path / "guests" / "6.12-x32"
    _fake_guest(d, 6)
    battery_json = d / "results" / "battery" / "battery.json"

    def routes_with(cell):
        b = json.loads(battery_json.read_text())
        b["unconfined"] = [c for c in b["unconfined"] if c["probe"] != "x32_syscall"] + ([cell] if cell else [])
        battery_json.write_text(json.dumps(b))
        (check,) = [c for c in matrix_report.judge_guest(g, str(d)).checks if c.name == "routes"]
        return check

    assert not routes_with(None).ok
    unsupported = {"probe": "x32_syscall", "policy": "unconfined", "uid": 0, "expected": "escaped",
                   "actual": "unsupported", "outcome": "UNSUPPORTED", "why": "x32 socket answered ENOSYS"}
    check = routes_with(unsupported)
    assert not check.ok and "ENOSYS" in check.actual
    escaped = dict(unsupported, actual="escaped", outcome="PASS", why="")
    assert routes_with(escaped).ok


def test_routes_name_probes_of_the_battery():
    probes = {f[:-2] for f in os.listdir(os.path.join(ROOT, "escapes")) if f.endswith(".c")}
    for g in SPEC["guests"]:
        for p in g["expect"].get("routes", []):
            assert p in probes, f"{g['id']}: routes names {p}, which escapes/ has no probe for"


def test_an_escaped_published_escape_turns_its_row_red_and_the_page_shows_the_table(tmp_path):
    e = ROWS["6.12"]["expect"]
    for verdict, ok in (("held", True), ("ESCAPED", False), ("FAIL", False)):
        d = tmp_path / verdict
        _fake_guest(d / "guests" / "6.12", e["landlock_abi"], e["verdict"], e.get("at_fault", []),
                    refused=e["battery"] == "refused", cgroup=e.get("cgroup"), catalogue_verdict=verdict)
        row = matrix_report.judge_guest(ROWS["6.12"], str(d / "guests" / "6.12"))
        (check,) = [c for c in row.checks if c.name == "catalogue"]
        assert check.ok == ok, check
        assert row.catalogue["1"] == {"sandbox_exec": verdict, "run": "held"}
        m = matrix_report.build(KERNELS_JSON, str(d), guests=["6.12"], capped=[], missing=[],
                                expectations=EXPECTATIONS)
        assert [c["id"] for c in m["catalogue"]] == [1, 2]
        matrix_report.write(m, str(d / "out"))
        page = (d / "out" / "matrix.html").read_text()
        assert 'id="catalogue-table"' in page and "WSL interop" in page
        assert (f"{verdict} / held" in page) == (verdict != "held")


# ---- arm64 ---------------------------------------------------------------
ARM64 = [g for g in SPEC["guests"] if g.get("arch") == "arm64"]


def test_arm64_rows_cover_a_refusal_the_6_12_floor_and_the_newest():
    assert len(ARM64) >= 3
    refusing = [g for g in ARM64 if g["expect"]["battery"] == "refused"]
    assert refusing and all(g["expect"]["landlock_abi"] < 3 for g in refusing)
    assert any(g["expect"]["landlock_abi"] == 6 and g["id"].endswith("6.12") for g in ARM64)
    newest = max(g["expect"]["landlock_abi"] for g in SPEC["guests"] if g.get("arch", "amd64") == "amd64")
    assert max(g["expect"]["landlock_abi"] for g in ARM64) == newest
    for g in ARM64:
        assert "arm64" in g["package"], g["id"]
        if g["expect"]["battery"] == "pass":
            assert g["expect"].get("broken_filter") and g["expect"].get("routes"), g["id"]


def test_a_guest_that_ran_another_architecture_turns_its_row_red(tmp_path):
    g = ROWS["arm64-6.12"]
    d = tmp_path / "guests" / g["id"]
    _fake_guest(d, 6, cgroup=g["expect"]["cgroup"], machine="x86_64")
    _fake_broken_filter(d, "bpf_syscall", "ESCAPED")
    row = matrix_report.judge_guest(g, str(d))
    bad = [c.name for c in row.checks if not c.ok]
    assert "machine" in bad
    (d / "results" / "machine").write_text("aarch64\n")
    row = matrix_report.judge_guest(g, str(d))
    assert "machine" not in [c.name for c in row.checks if not c.ok]


@pytest.mark.parametrize("outcome,ok", [("ESCAPED", True), ("PASS", False), (None, False)])
def test_an_arm64_filter_with_a_row_dropped_must_be_caught(tmp_path, outcome, ok):
    g = ROWS["arm64-7.3"]
    d = tmp_path / "guests" / g["id"]
    _fake_guest(d, 11, cgroup=g["expect"]["cgroup"], machine="aarch64")
    if outcome:
        _fake_broken_filter(d, g["expect"]["broken_filter"], outcome)
    (check,) = [c for c in matrix_report.judge_guest(g, str(d)).checks if c.name == "broken_filter"]
    assert check.ok == ok, check


def test_the_page_shows_both_architectures_side_by_side(tmp_path):
    ids = ["6.12", "arm64-6.12"]
    for i in ids:
        g = ROWS[i]
        _fake_guest(tmp_path / "guests" / i, 6, cgroup=g["expect"]["cgroup"],
                    machine=matrix_report.MACHINE[g.get("arch", "amd64")], routes=g["expect"].get("routes", ()),
                    egress_any=bool(g.get("egress_any")))
        if g["expect"].get("broken_filter"):
            _fake_broken_filter(tmp_path / "guests" / i, g["expect"]["broken_filter"], "ESCAPED")
        # The fake reports release "test": name the series as a real guest would.
        rep = tmp_path / "guests" / i / "results" / "sandbox-report.json"
        r = json.loads(rep.read_text())
        r["kernel"]["release"] = "6.12.118+deb13-cloud-" + g.get("arch", "amd64")
        rep.write_text(json.dumps(r))
    m = matrix_report.build(KERNELS_JSON, str(tmp_path), guests=ids, capped=[], missing=[], expectations=EXPECTATIONS)
    assert m["passed"], [c for r in m["rows"] for c in r["checks"] if not c["ok"]]
    matrix_report.write(m, str(tmp_path / "out"))
    page = (tmp_path / "out" / "matrix.html").read_text()
    assert 'id="arch-table"' in page
    assert 'class="pass" id="arch-6.12-amd64"' in page and 'class="pass" id="arch-6.12-arm64"' in page


def _elf_machine_and_interp(path):
    """(e_machine, has PT_INTERP) of a 64-bit little-endian ELF file."""
    import struct
    with open(path, "rb") as f:
        head = f.read(64)
        assert head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1, f"{path}: not a 64-bit LE ELF"
        machine = struct.unpack_from("<H", head, 18)[0]
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    interp = any(struct.unpack_from("<I", table, i * phentsize)[0] == 3 for i in range(phnum))
    return machine, interp


ARM64_BUILD = os.environ.get("OARBANK_ARM64_BUILD", os.path.join(ROOT, "build-arm64"))
_ARM64_RAN = bool(RESULTS) and any(ROWS.get(i, {}).get("arch") == "arm64" for i in _selected_guests())


def test_the_arm64_build_is_static_aarch64():
    """EM_AARCH64 (183) in every ELF header, and no program interpreter: the
    guests boot nothing else. Required where the matrix ran arm64 guests."""
    agent = os.path.join(ARM64_BUILD, "sandbox", "oarbank-agent")
    if not os.path.exists(agent):
        if _ARM64_RAN:
            pytest.fail(f"arm64 guests ran, but {agent} is missing")
        pytest.skip(f"no arm64 build at {ARM64_BUILD} (scripts/cross-arm64.sh)")
    probes = os.path.join(ARM64_BUILD, "probes")
    paths = [agent, os.path.join(ARM64_BUILD, "sandbox", "oarbank-agent-faulty"),
             os.path.join(ARM64_BUILD, "harness", "oarbank-conform")]
    paths += [os.path.join(probes, p) for p in sorted(os.listdir(probes)) if os.path.isfile(os.path.join(probes, p))]
    assert len(paths) > 100
    for p in paths:
        assert _elf_machine_and_interp(p) == (183, False), p
    # And the x86-64 agent is not: the check can fail.
    host_agent = os.path.join(ROOT, "build", "sandbox", "oarbank-agent")
    if os.path.exists(host_agent):
        assert _elf_machine_and_interp(host_agent)[0] == 62


def test_the_capped_runs_a_guest_row_names_must_all_be_there_and_hold(tmp_path):
    """arm64-7.3 runs the battery again capped inside the guest (the host's
    capped runs are x86-64's): a missing or wrong capped run fails its row."""
    g = ROWS["arm64-7.3"]
    assert g.get("capped"), "the newest arm64 row runs capped ABIs in its guest"
    d = tmp_path / "guests" / g["id"]
    _fake_guest(d, 11, cgroup=g["expect"]["cgroup"], machine="aarch64")

    def check():
        (c,) = [c for c in matrix_report.judge_guest(g, str(d)).checks if c.name == "capped"]
        return c

    assert not check().ok  # none ran
    floor = matrix_report.policy_floor(EXPECTATIONS)
    for n in g["capped"]:
        refused = n < floor
        out = d / "results" / "capped" / str(n)
        out.mkdir(parents=True)
        cells = [{"probe": "read_outside_grants", "policy": "runner_strict", "uid": uid,
                  "expected": "refused (exit 70)" if refused else "blocked EACCES",
                  "actual": "refused (exit 70)" if refused else "blocked EACCES", "outcome": "PASS", "why": ""}
                 for uid in (0, 65534)]
        (out / "battery.json").write_text(json.dumps({
            "verdict": "PASS", "landlock_abi": n, "capped": True, "counts": {"PASS": 2},
            "host": {"landlock": {"kernel_abi": 11}, "kernel": {"release": "7.3.4+deb13-cloud-arm64"}},
            "catalogue": [{"id": 1, "sandbox_exec": "held", "run": "held"}],
            "unconfined": [], "confined": cells}))
    assert check().ok, check()
    # One capped run that reports another ABI than its cap fails the row.
    n = g["capped"][-1]
    b = json.loads((d / "results" / "capped" / str(n) / "battery.json").read_text())
    b["landlock_abi"] = 11
    (d / "results" / "capped" / str(n) / "battery.json").write_text(json.dumps(b))
    assert not check().ok


def _fake_guest_check(tmp_path, g, name):
    """A fake guest of row `g` (its ABI and cgroup as expected), and a
    function that judges it again and returns its check `name`."""
    d = tmp_path / "guests" / g["id"]
    _fake_guest(d, g["expect"]["landlock_abi"], cgroup=g["expect"]["cgroup"])

    def check():
        (c,) = [c for c in matrix_report.judge_guest(g, str(d)).checks if c.name == name]
        return c

    return d, check


def test_the_workloads_a_row_expects_must_each_have_printed_what_they_must(tmp_path):
    """7.1 (Landlock ABI 9) runs Python's multiprocessing manager and
    forkserver and tmux in the cage, as root and uid 65534, and shows one
    job's socket out of another's reach: one that failed,
    or a report that is missing, fails the row."""
    g = ROWS["7.1"]
    want = g["expect"]["workloads"]
    assert g.get("workloads") and want == {
        "python_manager": True,
        "python_forkserver": True,
        "tmux": True,
        "other_jobs_socket_refused": True,
    }
    d, check = _fake_guest_check(tmp_path, g, "workloads")

    assert not check().ok  # no report
    report = d / "results" / "workloads.json"
    report.write_text(json.dumps({"root": want, "nobody": want}))
    assert check().ok, check()
    report.write_text(json.dumps({"root": want, "nobody": dict(want, tmux=False)}))
    assert not check().ok


def test_a_rows_mutants_must_each_be_caught_in_its_guest(tmp_path):
    """7.1 removes RESOLVE_UNIX from the test-only agent's plan, and gives
    the tmp grant every right, each alone, inside its guest (this host's
    kernel lacks the right, so its own mutation run cannot): a point whose
    probes all stayed blocked, or a missing report, fails the row."""
    g = ROWS["7.1"]
    points = [m.split(":")[0] for m in g["mutants"]]
    assert points == ["landlock.fs.resolve_unix", "landlock.widen.tmp"]
    d, check = _fake_guest_check(tmp_path, g, "mutants")

    assert not check().ok  # no reports

    def report(i, outcome):
        (d / "results" / "mutants" / str(i)).mkdir(parents=True, exist_ok=True)
        (d / "results" / "mutants" / str(i) / "battery.json").write_text(json.dumps({"confined": [
            {"probe": "unix_pathname_scratch", "policy": "runner_job_ipc", "uid": 0, "outcome": outcome}]}))

    report(1, "ESCAPED")
    assert not check().ok  # the second is missing
    report(2, "PASS")
    assert not check().ok  # the second was not caught
    report(2, "ESCAPED")
    assert check().ok, check()


def test_a_rows_egress_any_must_be_proven_in_its_guest(tmp_path):
    """6.12 and 6.18 boot with the job network's stack, helper and their
    kernel's modules (scripts/initramfs-egress-any.sh): their network world
    must be built (each egress probe escaped unconfined) and each egress
    probe's egress-any cell passed as root and uid 65534. A world that was
    not built (the probes unsupported), an identity missing, or an
    egress-any cell refused fails the row."""
    assert sorted(i for i, g in ROWS.items() if g.get("egress_any")) == ["6.12", "6.18"]
    g = ROWS["6.12"]
    d, check = _fake_guest_check(tmp_path, g, "egress_any")
    path = d / "results" / "battery" / "battery.json"
    base = json.loads(path.read_text())

    def battery(world="PASS", cell="PASS", uids=(0, 65534), refused=False):
        b = json.loads(json.dumps(base))
        for probe in ("egress_public_tcp4", "egress_nonpublic_tcp4"):
            b["unconfined"].append({"probe": probe, "policy": "unconfined", "uid": 0, "expected": "escaped",
                                    "actual": "escaped" if world == "PASS" else "unsupported", "outcome": world,
                                    "why": "", "detail": ""})
            b["confined"] += [{"probe": probe, "policy": "runner_egress_any", "uid": uid, "expected": "blocked",
                               "actual": "blocked ECONNREFUSED", "outcome": cell, "why": "", "detail": ""}
                              for uid in uids]
        b["confined"].append({"probe": "read_outside_grants", "policy": "runner_egress_any", "uid": 0,
                              "expected": "blocked EACCES", "actual": "refused (exit 70)" if refused else "blocked EACCES",
                              "outcome": "PASS", "why": "", "detail": ""})
        path.write_text(json.dumps(b))
        return check()

    assert not check().ok  # no egress probe ran at all
    assert battery().ok, battery()
    assert not battery(world="UNSUPPORTED", cell="UNSUPPORTED").ok  # no network world
    assert not battery(cell="UNSUPPORTED").ok
    assert not battery(uids=(0,)).ok  # uid 65534 never ran
    assert not battery(refused=True).ok  # the policy was refused


def test_the_egress_any_archive_loads_every_module_the_attestation_binds():
    """scripts/initramfs-egress-any.sh copies and loads the modules the job
    network relies on; the attestation binds the same list (stack_parts.cc,
    StackKernelModules). A module added there and not here would leave the
    guests proving egress-any without it."""
    source = open(os.path.join(ROOT, "sandbox", "plan", "stack_parts.cc")).read()
    body = source[source.index("StackKernelModules() {"):]
    body = body[body.index("names = {") + len("names = {"):body.index("};")]
    bound = set(re.findall(r'"([a-z0-9_]+)"', body))
    script = open(os.path.join(ROOT, "scripts", "initramfs-egress-any.sh")).read()
    roots = script[script.index("roots=(") + len("roots=("):]
    roots = set(roots[:roots.index(")")].split())
    assert len(bound) >= 10, bound
    assert roots == bound | {"veth"}, (sorted(roots - bound), sorted(bound - roots))
