#!/usr/bin/env python3
"""The kernel matrix report: one kernel x probe matrix over every guest of
fixtures/kernels.json (a Debian kernel booted in QEMU, the battery run
inside) and every capped host run (oarbank-conform --landlock-abi-max N on
this host, marked capped: not a real kernel), written as JSON, JUnit XML and
HTML.

    matrix_report.py --kernels fixtures/kernels.json --results DIR [--out DIR]

DIR is what scripts/kernel-matrix.sh writes: guests/ID/ (qemu-run.sh) and
capped/N/ (battery.json). A row is green only when every check holds, in
this order: the Landlock ABI the kernel reports is the row's (a guest that
reports another ABI fails, it is never skipped), the placement verdict for
the strict runner policy, the cgroup v2 leaf, then the battery. The checks
are the ones harness/test_kernel_matrix.py asserts.
"""
from __future__ import annotations

import argparse
import datetime
import html
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from xml.sax.saxutils import escape as xml_escape

FORMAT = "oarbank.matrix/1"  # docs/json/matrix.md
FAILURES = {"BROKEN", "ESCAPED", "UNEXPECTED"}
REFUSED = "refused (exit 70)"


@dataclass
class Check:
    name: str
    ok: bool
    expected: str
    actual: str
    detail: str = ""

    def message(self) -> str:
        return f"{self.name}: expected {self.expected}, got {self.actual}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Row:
    id: str
    kind: str  # "guest" (a Debian kernel in QEMU), "capped" (this host, launcher capped) or "missing"
    label: str
    checks: list[Check] = field(default_factory=list)
    cells: dict = field(default_factory=dict)  # probe -> {status, text, details}
    facts: dict = field(default_factory=dict)
    catalogue: dict = field(default_factory=dict)  # entry id -> {sandbox_exec, run}

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def policy_floor(expectations_tsv: str) -> int:
    """The Landlock ABI every battery policy needs (the `(policy) *` row)."""
    floor = 0
    try:
        with open(expectations_tsv) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) >= 5 and cols[0] == "(policy)" and cols[1] == "*" and cols[4] == "runs":
                    floor = int(cols[3])
    except OSError:
        pass
    return floor


def probe_cells(battery: dict | None) -> dict:
    """probe -> its aggregate over the unconfined proof and every confined cell."""
    if not battery:
        return {}
    by_probe: dict[str, list] = {}
    for c in battery.get("unconfined", []) + battery.get("confined", []):
        by_probe.setdefault(c["probe"], []).append(c)
    cells = {}
    for probe, cs in by_probe.items():
        confined = [c for c in cs if c["policy"] != "unconfined"]
        fails = [c for c in cs if c["outcome"] in FAILURES]
        details = [f'{c["policy"]}/{"root" if c["uid"] == 0 else "uid " + str(c["uid"])}: {c["outcome"]}: '
                   f'expected {c["expected"] or "escaped"}, got {c["actual"]}' + (f': {c["why"]}' if c.get("why") else "")
                   for c in fails]
        if fails:
            status, text = "fail", f"{len(fails)}✗"
        elif confined and all(c["actual"] == REFUSED for c in confined):
            status, text = "refused", "70"
        elif any(c["outcome"] == "GAP" for c in cs):
            status, text = "gap", "gap"
            details = [f'{c["policy"]}/{c["uid"]}: GAP: {c["why"]}' for c in cs if c["outcome"] == "GAP"][:3]
        elif any(c["outcome"] == "UNSUPPORTED" for c in cs):
            status, text = "unsupported", "n/a"
            details = [f'{c["policy"]}/{c["uid"]}: UNSUPPORTED: {c["why"] or c["detail"]}' for c in cs
                       if c["outcome"] == "UNSUPPORTED"][:3]
        else:
            status, text = "pass", "✓"
        cells[probe] = {"status": status, "text": text, "cells": len(cs), "details": details}
    return cells


def battery_check(battery: dict | None, expect: str) -> Check:
    """expect 'refused': every confined cell refused with exit 70 (nothing ran
    confined); 'pass': the battery passed. The unconfined proofs run
    unconfined by design in both cases, and none may be BROKEN."""
    if not battery:
        return Check("battery", False, expect, "no battery report")
    confined = battery.get("confined", [])
    broken = [c for c in battery.get("unconfined", []) if c["outcome"] in FAILURES]
    if expect == "refused":
        ran = [c for c in confined if c["actual"] != REFUSED]
        ok = bool(confined) and not ran and not broken
        detail = "; ".join(
            [f'{c["probe"]} [{c["policy"]}, uid {c["uid"]}] ran: {c["actual"]}' for c in ran[:8]] +
            [f'{c["probe"]} unconfined: {c["outcome"]} {c["actual"]}' for c in broken[:8]])
        actual = (f"all {len(confined)} confined cells refused 70" if not ran
                  else f"{len(ran)} of {len(confined)} confined cells not refused")
        if broken:
            actual += f", {len(broken)} unconfined proofs broken"
        return Check("battery", ok, f"every confined cell refused 70 ({len(confined)} cells)", actual,
                     detail + (f" (+{len(ran) - 8} more)" if len(ran) > 8 else ""))
    fails = [c for c in battery.get("unconfined", []) + confined if c["outcome"] in FAILURES]
    ok = battery.get("verdict") == "PASS" and not fails
    counts = ", ".join(f"{v} {k}" for k, v in battery.get("counts", {}).items())
    detail = "; ".join(f'{c["outcome"]} {c["probe"]} [{c["policy"]}, uid {c["uid"]}]: expected '
                       f'{c["expected"] or "escaped"}, got {c["actual"]}: {c["why"]}' for c in fails[:10])
    if len(fails) > 10:
        detail += f" (+{len(fails) - 10} more)"
    return Check("battery", ok, "PASS", f'{battery.get("verdict")} ({counts})', detail)


SIGNAL_PROBES = ("signal_outside", "pidfd_signal_outside")
ABSTRACT_PROBE = "unix_abstract_host"


def scoping_check(battery: dict | None, abi) -> Check:
    """Landlock scoping (ABI 6+), named on its own: every signal probe blocked
    in every confined cell; the abstract-socket probe blocked wherever it ran
    (seccomp refuses socket(AF_UNIX) first unless the broker is reached by
    path, so Landlock's abstract scope is what stops it only under
    runner_broker from ABI 9; below it the broker is an inherited fd)."""
    if not battery:
        return Check("scoping", False, "signal and abstract-unix scoping", "no battery report")
    cells = [c for c in battery.get("confined", []) if c["probe"] in SIGNAL_PROBES + (ABSTRACT_PROBE,)]
    # A policy the launcher refuses on this ABI ran nothing: not a hole.
    bad = [c for c in cells if c["outcome"] != "PASS" or not (c["actual"].startswith("blocked")
                                                                or c["actual"].startswith("killed")
                                                                or c["actual"] == REFUSED)]
    sig = [c for c in cells if c["probe"] in SIGNAL_PROBES and c["actual"] != REFUSED]
    by_landlock = [c for c in cells if c["probe"] == ABSTRACT_PROBE and c["policy"] == "runner_broker"
                   and c["actual"] != REFUSED]
    actual = (f'{len(sig)} signal cells blocked, abstract unix: '
              + (f'{len(by_landlock)} runner_broker cells blocked by the Landlock scope' if by_landlock
                 else "blocked by seccomp (runner_broker connects by path from ABI 9)"))
    if not sig:
        bad.append({"probe": "signal_outside", "policy": "-", "uid": "-", "actual": "not in the battery"})
    return Check("scoping", not bad, "signal and abstract-unix scoping enforced",
                 actual if not bad else f"{len(bad)} cells not blocked",
                 "; ".join(f'{c["probe"]} [{c["policy"]}, uid {c["uid"]}]: {c["actual"]}' for c in bad[:6]))


def routes_check(battery: dict | None, probes: list) -> Check:
    """The probes whose route this kernel has: unconfined, each must escape
    (an `unsupported` there would mean the battery never tried the route)."""
    got = {c["probe"]: c for c in (battery or {}).get("unconfined", [])}
    bad = [p for p in probes if got.get(p, {}).get("outcome") != "PASS"]
    return Check("routes", not bad, "unconfined, " + ", ".join(probes) + " escaped",
                 "all escaped" if not bad else "; ".join(
                     f'{p}: {got[p]["actual"]} ({got[p].get("why", "")})' if p in got else f"{p}: not run"
                     for p in bad),
                 "routes this kernel has, proven to exist before the cage is judged on them")


def catalogue_verdicts(battery: dict | None) -> dict:
    """Each published escape's verdicts in a battery report, by its id."""
    return {str(c["id"]): {"sandbox_exec": c["sandbox_exec"], "run": c["run"]}
            for c in (battery or {}).get("catalogue", [])}


def catalogue_check(row: Row) -> Check:
    """The catalogue table is there and no entry escaped or failed."""
    bad = [f'{i}: {v["sandbox_exec"]}/{v["run"]}' for i, v in row.catalogue.items()
           if {v["sandbox_exec"], v["run"]} & {"ESCAPED", "FAIL"}]
    return Check("catalogue", bool(row.catalogue) and not bad, "every published escape held, a gap or n/a",
                 f"{len(row.catalogue)} entries" + (f", {len(bad)} escaped or failed" if bad else ""),
                 "; ".join(bad[:5]))


MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}  # a row's arch -> uname -m in its guest


def broken_filter_check(d: str, probe: str) -> Check:
    """The arm64 guests run `probe` once more under the test-only agent with
    its seccomp row dropped: some cell must escape, or the battery could not
    tell a broken filter for this architecture from a sound one."""
    battery = load_json(os.path.join(d, "results", "broken-filter", "battery.json"))
    if battery is None:
        return Check("broken_filter", False, f"{probe} escaped with its row dropped", "no report",
                     os.path.join(d, "results", "broken-filter.log"))
    cells = [c for c in battery.get("confined", []) if c["probe"] == probe]
    escaped = [c for c in cells if c["outcome"] == "ESCAPED"]
    return Check("broken_filter", bool(escaped), f"{probe} escaped with its row dropped",
                 f"{len(escaped)} of {len(cells)} cells escaped",
                 "; ".join(f'{c["policy"]}/uid {c["uid"]}: {c["actual"]}' for c in cells[:4]))


def workloads_check(d: str, want: dict) -> Check:
    """The everyday programs that need unix sockets of the job's own (a row's
    `expect.workloads`), run in the cage inside the guest as root and as
    uid 65534 (scripts/guest-workloads.sh): each must print what it must."""
    got = load_json(os.path.join(d, "results", "workloads.json"))
    if got is None:
        return Check("workloads", False, json.dumps(want, sort_keys=True), "no workloads report",
                     os.path.join(d, "results", "workloads.log"))
    actual = {user: {k: (got.get(user) or {}).get(k) for k in want} for user in ("root", "nobody")}
    ok = all(actual[user] == want for user in actual)
    return Check("workloads", ok, json.dumps(want, sort_keys=True) + " as root and uid 65534",
                 json.dumps(actual, sort_keys=True), "python's multiprocessing manager and forkserver, tmux, in the cage; another job's socket refused")


EGRESS_ANY_POLICY = "runner_egress_any"


def egress_any_check(d: str, battery: dict | None) -> Check:
    """A row's `egress_any`: its guest boots with the job network's stack,
    helper and kernel modules (scripts/initramfs-egress-any.sh), and the
    battery must prove the class there: its network world built (every
    egress probe escaped unconfined) and every egress probe's egress-any
    cell run and passed as root and as uid 65534; no egress-any cell
    refused."""
    try:
        loaded = open(os.path.join(d, "results", "modules-loaded")).read().split()
    except OSError:
        loaded = []
    if not battery:
        return Check("egress_any", False, "egress-any proven", "no battery report")
    world = [c for c in battery.get("unconfined", []) if c["probe"].startswith("egress_")]
    cells = [c for c in battery.get("confined", []) if c["policy"] == EGRESS_ANY_POLICY]
    egress = [c for c in cells if c["probe"].startswith("egress_")]
    bad = ([c for c in world if c["outcome"] != "PASS"] + [c for c in egress if c["outcome"] != "PASS"] +
           [c for c in cells if c["actual"] == REFUSED])
    uids = sorted({c["uid"] for c in egress})
    ok = bool(world) and bool(egress) and not bad and uids == [0, 65534]
    actual = (f"{len(world)} egress probes escaped unconfined, {len(egress)} egress-any cells passed (uids "
              f"{', '.join(map(str, uids))})" if not bad else f"{len(bad)} cells not proven")
    detail = "; ".join(f'{c["probe"]} [{c["policy"]}, uid {c["uid"]}]: {c["outcome"]} {c["actual"]} {c.get("why", "")}'
                       for c in bad[:6])
    return Check("egress_any", ok, "egress-any proven as root and uid 65534", actual,
                 detail or f"modules loaded: {' '.join(loaded) or 'none'}")


def mutants_check(d: str, mutants: list) -> Check:
    """A row's `mutants`, run in its guest under the test-only agent, each
    point removed alone: some cell of each must escape, or the battery
    could not tell the cage without that point from the cage."""
    caught, detail = [], []
    for i, m in enumerate(mutants, 1):
        point = m.split(":")[0]
        battery = load_json(os.path.join(d, "results", "mutants", str(i), "battery.json"))
        cells = (battery or {}).get("confined", [])
        escaped = [c for c in cells if c["outcome"] == "ESCAPED"]
        if escaped:
            caught.append(point)
        detail.append(f"{point}: " + ("no report" if battery is None else f"{len(escaped)} of {len(cells)} cells escaped"))
    return Check("mutants", len(caught) == len(mutants), "each point removed alone: an escape",
                 f"{len(caught)} of {len(mutants)} caught", "; ".join(detail))


def judge_guest(g: dict, d: str) -> Row:
    """The checks of one guest, from its results directory, ABI first."""
    e = g["expect"]
    gj = load_json(os.path.join(d, "guest.json")) or {}
    res = os.path.join(d, "results")
    report = load_json(os.path.join(res, "sandbox-report.json"))
    verdict = load_json(os.path.join(res, "verdict.json"))
    cgroup = load_json(os.path.join(res, "cgroup.json"))
    battery = load_json(os.path.join(res, "battery", "battery.json"))
    k = gj.get("kernel", {})
    row = Row(g["id"], "guest", f'{g["id"]} ({k.get("package", g["package"])} {k.get("version", g["version"])})')
    up = gj.get("guest_uptime") or {}
    arch = g.get("arch", "amd64")
    try:
        machine = open(os.path.join(res, "machine")).read().strip()
    except OSError:
        machine = None
    row.facts = {"arch": arch, "machine": machine, "package": k.get("package", g["package"]), "version": k.get("version", g["version"]),
                 "pinned": {"package": g["package"], "version": g["version"]}, "source": k.get("source"),
                 "suite": k.get("suite", g["suite"]), "release": k.get("release"), "accel": gj.get("accel"),
                 "boot": gj.get("boot"), "wall_s": gj.get("wall_s"), "timed_out": gj.get("timed_out"),
                 "boot_to_init_s": up.get("init"),
                 "battery_s": battery.get("seconds") if battery else None, "error": gj.get("error")}
    if report is None:
        why = gj.get("error") or "the guest delivered no sandbox-report"
        row.checks.append(Check("landlock_abi", False, str(e["landlock_abi"]), "nothing reported", why))
        return row
    abi = report.get("landlock", {}).get("kernel_abi")
    row.facts["landlock_abi"] = abi
    row.facts["kernel"] = report.get("kernel", {}).get("release")
    row.checks.append(Check("landlock_abi", abi == e["landlock_abi"], str(e["landlock_abi"]), str(abi),
                            f'Linux {report.get("kernel", {}).get("release")}'))
    row.checks.append(Check("machine", machine == MACHINE.get(arch), str(MACHINE.get(arch)), str(machine),
                            f"uname -m in the {arch} guest: the binaries that ran there were built for it"))
    placement = (verdict or {}).get("placement", {})
    at_fault = [x["id"] for x in placement.get("at_fault", [])]
    row.facts["verdict"] = placement.get("verdict")
    row.facts["at_fault"] = at_fault
    missing = [x for x in e.get("at_fault", []) if x not in at_fault]
    row.checks.append(Check(
        "verdict", placement.get("verdict") == e["verdict"] and not missing,
        e["verdict"] + (f' naming {", ".join(e["at_fault"])}' if e.get("at_fault") else ""),
        f'{placement.get("verdict")}' + (f' naming {", ".join(at_fault)}' if at_fault else ""),
        "runner_strict; " + "; ".join(x.get("detail", "") for x in placement.get("at_fault", [])[:2])))
    want_cg = e.get("cgroup", {})
    got_cg = {key: (cgroup or {}).get(key) for key in want_cg}
    row.facts["cgroup"] = cgroup
    row.checks.append(Check("cgroup", cgroup is not None and got_cg == want_cg,
                            json.dumps(want_cg, sort_keys=True), json.dumps(got_cg, sort_keys=True),
                            "memory.max -> oom, cpu.max throttles, cgroup.kill leaves nothing, pids.max refuses a fork; the agent writes limits.pids and "
                            "limits.mem_gb (a job past it killed), runs from a child cgroup, and starved by memory.max never runs a job unconfined nor leaves one"))
    row.checks.append(battery_check(battery, e["battery"]))
    if e["battery"] == "pass":
        row.checks.append(scoping_check(battery, abi))
    if e.get("routes"):
        row.checks.append(routes_check(battery, e["routes"]))
    if e.get("broken_filter"):
        row.checks.append(broken_filter_check(d, e["broken_filter"]))
    if g.get("capped"):
        row.checks.append(guest_capped_check(d, g["capped"]))
    if e.get("workloads"):
        row.checks.append(workloads_check(d, e["workloads"]))
    if g.get("mutants"):
        row.checks.append(mutants_check(d, g["mutants"]))
    if g.get("egress_any"):
        row.checks.append(egress_any_check(d, battery))
    if battery is not None and battery.get("landlock_abi") != abi:
        row.checks.append(Check("battery_abi", False, str(abi), str(battery.get("landlock_abi")),
                                "oarbank-conform used another ABI than sandbox-report saw"))
    row.cells = probe_cells(battery)
    row.catalogue = catalogue_verdicts(battery)
    if battery is not None:
        row.checks.append(catalogue_check(row))
    if battery:
        row.facts["battery_summary"] = battery.get("summary")
    return row


def guest_capped_check(d: str, abis: list) -> Check:
    """The battery run again inside the guest with the launcher capped at
    each of `abis` (a row's `capped`: where the host's capped runs cannot
    go, another architecture): each judged as a host's capped run is."""
    floor = policy_floor(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "escapes", "expectations.tsv"))
    bad = []
    for n in abis:
        r = judge_capped(int(n), os.path.join(d, "results", "capped", str(n)), floor)
        bad += [f"ABI {n}: {c.message()}" for c in r.checks if not c.ok]
    return Check("capped", not bad, "capped at " + ", ".join(str(n) for n in abis) + ": each as its ABI expects",
                 f"{len(abis)} capped runs" + (f", {len(bad)} failed checks" if bad else " as expected"),
                 "; ".join(bad[:4]))


def judge_capped(n: int, d: str, floor: int) -> Row:
    battery = load_json(os.path.join(d, "battery.json"))
    row = Row(str(n), "capped", f"ABI {n} (host, capped)")
    if battery is None:
        row.checks.append(Check("landlock_abi", False, str(n), "no battery report", d))
        return row
    host = battery.get("host", {}).get("landlock", {})
    row.facts = {"landlock_abi": battery.get("landlock_abi"), "kernel_abi": host.get("kernel_abi"),
                 "kernel": battery.get("host", {}).get("kernel", {}).get("release"),
                 "capped": battery.get("capped"), "battery_s": battery.get("seconds"),
                 "battery_summary": battery.get("summary")}
    # The launcher marks a run capped when the cap lowered the ABI; a cap at
    # the host's own ABI lowers nothing and is the host's uncapped battery.
    at_host = n == host.get("kernel_abi")
    row.label = f"ABI {n} (host, {'the host ABI: not lowered' if at_host else 'capped'})"
    row.checks.append(Check("landlock_abi",
                            battery.get("landlock_abi") == n and (battery.get("capped") is True or at_host),
                            f"{n}, capped" if not at_host else f"{n} (the host's)",
                            f'{battery.get("landlock_abi")}, capped={battery.get("capped")}',
                            f'the host kernel offers ABI {host.get("kernel_abi")}'))
    row.checks.append(battery_check(battery, "refused" if n < floor else "pass"))
    row.cells = probe_cells(battery)
    row.catalogue = catalogue_verdicts(battery)
    row.checks.append(catalogue_check(row))
    return row


def catalogue_entries(results: str, rows: list) -> list:
    """The catalogue's entries (id, technique, where, source), from the
    first battery report that has them."""
    dirs = [os.path.join(results, "guests", r.id, "results", "battery") if r.kind == "guest"
            else os.path.join(results, r.kind, r.id) for r in rows]
    for d in dirs:
        entries = (load_json(os.path.join(d, "battery.json")) or {}).get("catalogue")
        if entries:
            return [{k: c[k] for k in ("id", "technique", "where", "source", "status")} for c in entries]
    return []


def judge_missing(feature: str, d: str, floor: int) -> Row:
    """The battery on this host with the test-only agent taking `feature` as
    missing: it must run at the ABI below the feature's (which the agent
    names with it, "scope_signal (ABI 6)": its feature table is the one
    source), name the feature, and refuse every policy below the floor."""
    battery = load_json(os.path.join(d, "battery.json"))
    row = Row(feature, "missing", f"without {feature} (host, test-only agent)")
    if battery is None:
        row.checks.append(Check("landlock_abi", False, f"missing {feature}", "no battery report", d))
        return row
    missing = battery.get("host", {}).get("landlock", {}).get("missing", "")
    named = re.fullmatch(re.escape(feature) + r" \(ABI (\d+)\)", missing)
    abi = int(named.group(1)) - 1 if named else -1
    row.label = f"ABI {abi + 1} without {feature} (host, test-only agent)"
    row.facts = {"landlock_abi": battery.get("landlock_abi"), "missing": missing,
                 "kernel": battery.get("host", {}).get("kernel", {}).get("release"),
                 "battery_s": battery.get("seconds"), "battery_summary": battery.get("summary")}
    row.checks.append(Check("landlock_abi", named is not None and battery.get("landlock_abi") == abi,
                            f"{abi}, missing {feature}", f'{battery.get("landlock_abi")}, missing {missing!r}',
                            "a kernel that reports an ABI without one of its features is used at the ABI below"))
    row.checks.append(battery_check(battery, "refused" if abi < floor else "pass"))
    row.cells = probe_cells(battery)
    row.catalogue = catalogue_verdicts(battery)
    row.checks.append(catalogue_check(row))
    return row


def build(kernels_json: str, results: str, guests=None, capped=None, expectations=None, missing=None) -> dict:
    with open(kernels_json) as f:
        spec = json.load(f)
    rows: list[Row] = []
    for g in spec["guests"]:
        if guests is not None and g["id"] not in guests:
            continue
        rows.append(judge_guest(g, os.path.join(results, "guests", g["id"])))
    capped_dir = os.path.join(results, "capped")
    if capped is None:
        capped = sorted(int(n) for n in os.listdir(capped_dir) if n.isdigit()) if os.path.isdir(capped_dir) else []
    expectations = expectations or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "escapes",
                                                "expectations.tsv")
    floor = policy_floor(expectations)
    for n in capped:
        rows.append(judge_capped(int(n), os.path.join(capped_dir, str(n)), floor))
    missing_dir = os.path.join(results, "missing")
    if missing is None:
        missing = sorted(os.listdir(missing_dir)) if os.path.isdir(missing_dir) else []
    for feature in missing:
        rows.append(judge_missing(feature, os.path.join(missing_dir, feature), floor))
    probes = sorted({p for r in rows for p in r.cells})
    return {
        "catalogue": catalogue_entries(results, rows),
        "format": FORMAT,
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "kernels_json": os.path.abspath(kernels_json),
        "results": os.path.abspath(results),
        "policy_floor_abi": floor,
        "passed": bool(rows) and all(r.ok for r in rows),
        "probes": probes,
        "rows": [dict(asdict(r), ok=r.ok) for r in rows],
    }


def to_junit(m: dict) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    total = sum(len(r["checks"]) + len(r["cells"]) for r in m["rows"])
    failures = sum(sum(not c["ok"] for c in r["checks"]) + sum(v["status"] == "fail" for v in r["cells"].values())
                   for r in m["rows"])
    out.append(f'<testsuites name="oarbank-kernel-matrix" tests="{total}" failures="{failures}">')
    for r in m["rows"]:
        cls = f'kernel_matrix.{r["kind"]}.{r["id"].replace(".", "_")}'
        n_fail = sum(not c["ok"] for c in r["checks"]) + sum(v["status"] == "fail" for v in r["cells"].values())
        n_skip = sum(v["status"] in ("gap", "unsupported") for v in r["cells"].values())
        out.append(f'  <testsuite name="{xml_escape(r["kind"] + " " + r["label"])}" '
                   f'tests="{len(r["checks"]) + len(r["cells"])}" failures="{n_fail}" errors="0" skipped="{n_skip}" '
                   f'time="{r["facts"].get("wall_s") or r["facts"].get("battery_s") or 0}">')
        for c in r["checks"]:
            msg = Check(**c).message()
            if c["ok"]:
                out.append(f'    <testcase classname="{cls}" name="{xml_escape(c["name"])}"/>')
            else:
                out.append(f'    <testcase classname="{cls}" name="{xml_escape(c["name"])}">'
                           f'<failure message="{xml_escape(msg, {chr(34): "&quot;"})}" type="{c["name"]}">'
                           f'{xml_escape(msg)}</failure></testcase>')
        for probe, v in sorted(r["cells"].items()):
            name = xml_escape(probe)
            if v["status"] == "fail":
                text = "\n".join(v["details"])
                out.append(f'    <testcase classname="{cls}.probes" name="{name}"><failure message="'
                           f'{xml_escape(v["details"][0] if v["details"] else "failed", {chr(34): "&quot;"})}" '
                           f'type="FAIL">{xml_escape(text)}</failure></testcase>')
            elif v["status"] in ("gap", "unsupported"):
                out.append(f'    <testcase classname="{cls}.probes" name="{name}"><skipped message="'
                           f'{xml_escape(v["status"] + ": " + "; ".join(v["details"])[:300], {chr(34): "&quot;"})}"/>'
                           f'</testcase>')
            else:
                out.append(f'    <testcase classname="{cls}.probes" name="{name}"/>')
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def catalogue_html(m: dict) -> list:
    """Published escapes per kernel: one row per entry, one column per
    matrix row; a cell shows the verdict under sandbox-exec, and under run
    where it differs."""
    e = html.escape
    if not m.get("catalogue"):
        return []
    klass = {"held": "pass", "gap": "gap", "unsupported": "unsupported", "ESCAPED": "fail", "FAIL": "fail"}
    h = ['<h2 id="catalogue">Published escapes per kernel</h2>',
         '<table id="catalogue-table"><thead><tr><th>#</th><th class="k">technique</th>']
    for r in m["rows"]:
        h.append(f'<th class="p">{e(r["label"])}</th>')
    h.append("</tr></thead><tbody>")
    for c in m["catalogue"]:
        h.append(f'<tr><td>{c["id"]}</td><td class="k"><a href="{e(c["source"])}">{e(c["technique"])}</a>'
                 f'<br><small>{e(c["where"])}</small></td>')
        for r in m["rows"]:
            v = r["catalogue"].get(str(c["id"]))
            if not v:
                h.append('<td class="none"></td>')
                continue
            se, run = v["sandbox_exec"], v["run"]
            worst = "fail" if {se, run} & {"ESCAPED", "FAIL"} else klass.get(se, "refused")
            h.append(f'<td class="{worst}" title="sandbox-exec: {e(se)}; run: {e(run)}">'
                     f'{e(se if se == run else se + " / " + run)}</td>')
        h.append("</tr>")
    h.append("</tbody></table>")
    return h


def series_of(r: dict) -> str:
    """A guest's kernel series (major.minor of the release it booted)."""
    for text in (r["facts"].get("kernel"), r["facts"].get("release"), r["id"]):
        found = re.search(r"(\d+)\.(\d+)", str(text or ""))
        if found:
            return found.group(0)
    return r["id"]


def arch_html(m: dict) -> list:
    """The guests side by side: one row per kernel series, one column per
    architecture, each cell the guest's ABI and battery, red or green."""
    e = html.escape
    guests = [r for r in m["rows"] if r["kind"] == "guest"]
    arches = sorted({r["facts"].get("arch", "amd64") for r in guests})
    if not guests:
        return []
    series = sorted({series_of(r) for r in guests}, key=lambda v: [int(x) if x.isdigit() else -1 for x in v.split(".")])
    h = ['<h2 id="arches">Architectures side by side</h2>', '<table id="arch-table"><thead><tr><th class="k">series</th>']
    h += [f"<th>{e(a)}</th>" for a in arches]
    h.append("</tr></thead><tbody>")
    for v in series:
        h.append(f'<tr><td class="k">{e(v)}</td>')
        for a in arches:
            here = [r for r in guests if series_of(r) == v and r["facts"].get("arch", "amd64") == a]
            if not here:
                h.append('<td class="none"></td>')
                continue
            ok = all(r["ok"] for r in here)
            text = "<br>".join(
                f'{e(r["id"])}: ABI {e(str(r["facts"].get("landlock_abi")))}, '
                + e(next((c["actual"].split(" (")[0] for c in r["checks"] if c["name"] == "battery"), "no battery"))
                for r in here)
            h.append(f'<td class="{"pass" if ok else "fail"}" id="arch-{e(v)}-{e(a)}">{text}</td>')
        h.append("</tr>")
    h.append("</tbody></table>")
    return h


def to_html(m: dict) -> str:
    e = html.escape
    h = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>oarbank kernel matrix</title>',
         "<style>body{font:13px system-ui,sans-serif;margin:20px;color:#1b1b1b}"
         "table{border-collapse:collapse}th,td{border:1px solid #bbb;padding:2px 4px;text-align:center}"
         "th.p{writing-mode:vertical-rl;transform:rotate(180deg);font:11px monospace;white-space:nowrap;padding:4px 1px}"
         "td.k,th.k{text-align:left;white-space:nowrap}"
         "tr.ok td.k{background:#b7e4b0}tr.red td.k{background:#f08a80;font-weight:bold}"
         "td.chk.ok{background:#dff3da}td.chk.bad{background:#f08a80;font-weight:bold}"
         "td.pass{background:#b7e4b0}td.refused{background:#d9d9d9}td.gap,td.unsupported{background:#f7dc8c}"
         "td.fail{background:#f08a80;font-weight:bold}td.none{background:#fff}"
         "tr.capped td.k{font-style:italic}.verdict{font-size:18px;font-weight:bold;padding:8px;display:inline-block}"
         ".PASS{background:#b7e4b0}.FAIL{background:#f08a80}.legend span{padding:2px 8px;margin-right:6px}"
         "</style></head><body>",
         "<h1>oarbank kernel matrix</h1>",
         f'<p class="verdict {"PASS" if m["passed"] else "FAIL"}" id="verdict">'
         f'{"PASS" if m["passed"] else "FAIL"}: {sum(r["ok"] for r in m["rows"])} of {len(m["rows"])} rows green '
         f'({sum(r["kind"] == "guest" for r in m["rows"])} Debian kernels in QEMU: '
         + ", ".join(f'{sum(r["facts"].get("arch") == a for r in m["rows"])} {a}' for a in ("amd64", "arm64")) + '; '
         f'{sum(r["kind"] == "capped" for r in m["rows"])} capped ABIs on this host, '
         f'{sum(r["kind"] == "missing" for r in m["rows"])} with a feature of its ABI missing)</p>',
         f'<p>Generated {e(m["generated"])} from {e(m["kernels_json"])}. Rows: a guest is a Debian kernel booted '
         "in QEMU with the battery run inside; <i>capped</i> rows run on this host with the launcher's Landlock ABI "
         "capped (<code>--landlock-abi-max</code>): they cover ABIs no Debian kernel offers and are not real kernels. "
         "A row is red when any check fails; the Landlock ABI is checked first.</p>",
         '<p class="legend"><span style="background:#b7e4b0">✓ every cell as expected</span>'
         '<span style="background:#d9d9d9">70: every confined run refused (exit 70)</span>'
         '<span style="background:#f7dc8c">gap / n/a: a declared gap, or the route is absent on this kernel</span>'
         '<span style="background:#f08a80">n✗: cells that escaped, broke or were unexpected</span></p>',
         '<table id="matrix"><thead><tr><th class="k">kernel</th><th>arch</th><th>Landlock ABI<br>expected / got</th>'
         "<th>runner_strict verdict</th><th>cgroup leaf</th><th>battery</th><th>time s</th>"]
    for p in m["probes"]:
        h.append(f'<th class="p">{e(p)}</th>')
    h.append("</tr></thead><tbody>")
    for r in m["rows"]:
        checks = {c["name"]: c for c in r["checks"]}
        klass = ("ok" if r["ok"] else "red") + (" capped" if r["kind"] in ("capped", "missing") else "")
        f = r["facts"]
        title = "; ".join(Check(**c).message() for c in r["checks"])
        h.append(f'<tr class="{klass}" id="row-{e(r["kind"])}-{e(r["id"])}" data-ok="{str(r["ok"]).lower()}">'
                 f'<td class="k" title="{e(title)}">{e(r["label"])}'
                 + (f'<br><small>{e(str(f.get("kernel") or ""))}, {e(str(f.get("accel") or ""))}</small>'
                    if r["kind"] == "guest" else f'<br><small>host {e(str(f.get("kernel") or ""))}</small>') + "</td>")

        def chk(name, text):
            c = checks.get(name)
            if not c:
                return '<td class="chk">–</td>'
            return (f'<td class="chk {"ok" if c["ok"] else "bad"}" title="{e(Check(**c).message())}">'
                    f"{e(text(c))}</td>")
        h.append(f'<td>{e(str(f.get("arch") or "host"))}</td>')
        h.append(chk("landlock_abi", lambda c: f'{c["expected"].split(",")[0].split(" ")[0]} / '
                                               f'{c["actual"].split(",")[0]}'))
        h.append(chk("verdict", lambda c: c["actual"].split(" naming ")[0]))
        h.append(chk("cgroup", lambda c: "ok" if c["ok"] else "differs"))
        h.append(chk("battery", lambda c: ("refused 70" if "refused 70" in c["actual"] and c["ok"]
                                           else c["actual"].split(" (")[0])))
        t = f.get("wall_s") or f.get("battery_s")
        h.append(f'<td>{"" if t is None else f"{t:.0f}"}</td>')
        for p in m["probes"]:
            v = r["cells"].get(p)
            if not v:
                h.append('<td class="none"></td>')
            else:
                h.append(f'<td class="{v["status"]}" title="{e(p + ": " + ("; ".join(v["details"]) or v["status"]))}">'
                         f'{e(v["text"])}</td>')
        h.append("</tr>")
    h.append("</tbody></table>")
    h.extend(arch_html(m))
    h.extend(catalogue_html(m))
    h.append("<h2>Checks</h2><ul>")
    for r in m["rows"]:
        h.append(f'<li><b>{e(r["kind"])} {e(r["label"])}</b>: ' + "; ".join(
            ("✓ " if c["ok"] else "✗ ") + e(Check(**c).message()) for c in r["checks"]) + "</li>")
    h.append("</ul></body></html>")
    return "\n".join(h) + "\n"


def write(m: dict, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "matrix.json"), "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "matrix.xml"), "w") as f:
        f.write(to_junit(m))
    with open(os.path.join(out, "matrix.html"), "w") as f:
        f.write(to_html(m))


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default=os.path.join(here, "..", "fixtures", "kernels.json"))
    ap.add_argument("--results", required=True, help="what scripts/kernel-matrix.sh wrote")
    ap.add_argument("--out", help="where matrix.{json,xml,html} go (default: --results)")
    ap.add_argument("--guests", help="only these guest ids, comma-separated")
    ap.add_argument("--expectations", default=os.path.join(here, "..", "escapes", "expectations.tsv"))
    a = ap.parse_args(argv)
    guests = [g for g in a.guests.replace(" ", ",").split(",") if g] if a.guests is not None else None
    m = build(a.kernels, a.results, guests=guests, expectations=a.expectations)
    write(m, a.out or a.results)
    for r in m["rows"]:
        bad = [c for c in r["checks"] if not c["ok"]]
        print(f'{"ok  " if r["ok"] else "RED "} {r["kind"]:6} {r["label"]}' +
              ("" if not bad else ": " + Check(**bad[0]).message()[:300]))
    print(f'matrix: {os.path.join(a.out or a.results, "matrix.html")} ({"PASS" if m["passed"] else "FAIL"})')
    return 0 if m["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
