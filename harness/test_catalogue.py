"""escapes/catalogue.tsv, the published escapes the battery answers: every
Linux technique has probes, host-side tests, a documented gap or the reason
it cannot apply; whatever it names exists; and the battery's reports carry
its table with a verdict per entry point."""
import csv
import json
import pathlib
import re
import subprocess

import pytest

from testlib import CONFORM, ROOT

ESCAPES = pathlib.Path(ROOT) / "escapes"
HEADER = ["id", "class", "technique", "where", "source", "status", "covered_by", "reason"]
STATUSES = {"probe", "test", "gap", "n/a"}
# Mirrors and redirectors are no primary source.
NOT_PRIMARY = re.compile(r"mirror|proxy_gol|gitea\.baiyapeng|git\.pchuan|gh\.022408|/redirect")


def catalogue():
    with open(ESCAPES / "catalogue.tsv", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == HEADER
    return [dict(zip(HEADER, r)) | {"fields": len(r)} for r in rows[1:] if r]


def expectation_rows():
    with open(ESCAPES / "expectations.tsv", newline="") as f:
        return [r for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]


def items(entry):
    named = [] if entry["covered_by"] == "-" else entry["covered_by"].split(",")
    return [n for n in named if "::" not in n], [n for n in named if "::" in n]


def test_every_row_is_well_formed_and_ids_ascend():
    entries = catalogue()
    assert len(entries) >= 70
    ids = [int(e["id"]) for e in entries]
    assert ids == sorted(set(ids)), "ids ascend, each once"
    for e in entries:
        assert e["fields"] == 8, e
        assert e["status"] in STATUSES, e
        assert e["technique"] and e["where"] and e["class"], e


def test_every_entry_has_one_primary_source():
    for e in catalogue():
        source = e["source"]
        assert re.fullmatch(r"https://\S+", source), e
        assert not NOT_PRIMARY.search(source), e


def test_every_linux_technique_has_a_probe_or_a_stated_reason():
    for e in catalogue():
        probes, tests = items(e)
        if e["status"] == "probe":
            assert probes, f"entry {e['id']}: status probe names no probe"
        elif e["status"] == "test":
            assert tests and e["reason"], f"entry {e['id']}: host-side tests and why no probe"
        elif e["status"] == "gap":
            assert e["reason"], f"entry {e['id']}: a gap says what is left open"
        else:
            assert e["covered_by"] == "-" and e["reason"], f"entry {e['id']}: n/a says why it cannot apply"


def test_every_probe_named_exists_and_has_expectations():
    probes_with_rows = {r[0] for r in expectation_rows()}
    for e in catalogue():
        for p in items(e)[0]:
            assert (ESCAPES / f"{p}.c").is_file(), f"entry {e['id']}: no probe escapes/{p}.c"
            assert p in probes_with_rows, f"entry {e['id']}: {p} has no row in expectations.tsv"


def test_every_test_named_exists():
    for e in catalogue():
        for t in items(e)[1]:
            path, name = t.split("::")
            text = (pathlib.Path(ROOT) / path).read_text()
            pattern = rf"^def {name}\(" if path.endswith(".py") else rf"^TEST(_F|_P)?\(\w+, {name}\)"
            assert re.search(pattern, text, re.M), f"entry {e['id']}: {t} not found"


def test_a_gap_is_a_gap_row_everywhere_and_documented():
    rows = expectation_rows()
    enforcement = (pathlib.Path(ROOT) / "docs" / "enforcement.md").read_text()
    for e in catalogue():
        if e["status"] != "gap":
            continue
        assert re.search(rf"\(catalogue [\d, ]*\b{e['id']}\b", enforcement), \
            f"entry {e['id']}: not in docs/enforcement.md's gaps"
        for p in items(e)[0]:
            expects = {r[4] for r in rows if r[0] == p}
            assert expects == {"gap"}, (p, expects)


def test_a_malformed_catalogue_is_one_line_and_64(tmp_path):
    good = (ESCAPES / "catalogue.tsv").read_text().splitlines()
    for lines, message in [
        (good[:1] + ["1\ttty\tx\ty\thttps://example.test\tprobe\t-\t"], "status probe names at least one probe"),
        (good[:1] + ["1\ttty\tx\ty\thttps://example.test\tn/a\t-\t"], "status n/a needs its reason"),
        (good[:1] + ["2\ttty\tx\ty\thttps://example.test\tn/a\t-\twhy", "1\ttty\tx\ty\tz\tn/a\t-\twhy"], "ids ascend"),
        (good[:1] + ["1\ttty\tx\ty\thttps://example.test\tmaybe\t-\twhy"], "status: one of"),
        (["id\tclass"] + good[1:], "expected the header"),
        (good[:1] + ["1\ttty\tx"], "expected 8 tab-separated fields, got 3"),
    ]:
        bad = tmp_path / "catalogue.tsv"
        bad.write_text("\n".join(lines) + "\n")
        r = subprocess.run([CONFORM, "--out", str(tmp_path / "out"), "--catalogue-table", str(bad), "--probe",
                            "bpf_syscall"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 64, r.stdout + r.stderr
        assert r.stderr.count("\n") == 1 and message in r.stderr and str(bad) in r.stderr, r.stderr


def test_catalogue_runs_its_probes_under_both_entry_points_and_prints_the_table(tmp_path):
    r = subprocess.run([CONFORM, "--out", str(tmp_path), "--catalogue"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    entries = catalogue()
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["#", "sandbox-exec", "run", "technique", "(where)"]
    assert len([line for line in lines if re.match(r"^\s*\d+  ", line)]) == len(entries)
    assert any(line.startswith("catalogue: PASS: ") for line in lines), r.stdout[-2000:]
    report = json.loads((tmp_path / "battery.json").read_text())
    assert report["both_entries"] is True
    by_id = {c["id"]: c for c in report["catalogue"]}
    assert sorted(by_id) == [int(e["id"]) for e in entries]
    for e in entries:
        c = by_id[int(e["id"])]
        for entry_point in ("sandbox_exec", "run"):
            verdict = c[entry_point]
            assert verdict not in ("ESCAPED", "FAIL", "not run"), c
            if e["status"] == "probe":
                # A probe entry held, or showed a documented gap (sandbox-exec's /proc), or its route is absent.
                assert verdict in ("held", "gap", "unsupported"), c
            elif e["status"] == "gap" and items(e)[0]:
                assert verdict == "gap", c
            else:
                assert verdict == e["status"], c
    # The probes it ran are the catalogue's, no other.
    named = {p for e in entries for p in items(e)[0]}
    assert set(report["probes"]) == named
    md = (tmp_path / "battery.md").read_text()
    assert "## Published escapes" in md and md.count("\n| ") >= len(entries)
    assert 'id="catalogue-table"' in (tmp_path / "battery.html").read_text()
