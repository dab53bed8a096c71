"""bench/budgets.sh holds each benchmark ratio to its checked-in budget with
room for noise: past 1.5x its budget, or missing, a ratio fails the run.
The benchmarks themselves are stood in for by scripts that print ratios."""
import pathlib
import shutil
import subprocess

from testlib import ROOT

BUDGETS = ("name\tratio\tscript\twhat\nfast\t1.00\tbattery.sh\tone\nslow\t2.00\trun.sh\ttwo\n"
           "steady\t1.20\tsupervise.sh\tthree\nwide\t3.00\tegress_any.sh\tfour\n")


def bench(tmp_path, battery_ratio, run_ratio, supervise_ratio=1.0, egress_any_ratio=2.5):
    d = tmp_path / "bench"
    d.mkdir(parents=True)
    shutil.copy(pathlib.Path(ROOT) / "bench" / "budgets.sh", d / "budgets.sh")
    (d / "budgets.tsv").write_text(BUDGETS)
    for name, line in (("battery.sh", f"ratio fast {battery_ratio}"), ("run.sh", run_ratio and f"ratio slow {run_ratio}"),
                       ("supervise.sh", supervise_ratio and f"ratio steady {supervise_ratio}"),
                       ("egress_any.sh", egress_any_ratio and f"ratio wide {egress_any_ratio}")):
        (d / name).write_text(f"#!/bin/sh\necho 'PASS  a goal'\n{'echo ' + repr(line) if line else ':'}\n")
        (d / name).chmod(0o755)
    return subprocess.run([str(d / "budgets.sh")], capture_output=True, text=True, timeout=60)


def test_ratios_within_their_budgets_pass(tmp_path):
    r = bench(tmp_path, 1.49, 2.9, 1.79)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok    fast: 1.49" in r.stdout and "ok    slow: 2.90" in r.stdout and "ok    steady: 1.79" in r.stdout
    assert "ok    wide: 2.50" in r.stdout


def test_a_ratio_past_one_and_a_half_its_budget_fails(tmp_path):
    r = bench(tmp_path, 1.51, 2.0)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL  fast: 1.51" in r.stdout
    r = bench(tmp_path / "supervise", 1.0, 2.0, 1.81)
    assert r.returncode == 1 and "FAIL  steady: 1.81" in r.stdout, r.stdout + r.stderr
    r = bench(tmp_path / "egress_any", 1.0, 2.0, 1.0, 4.51)
    assert r.returncode == 1 and "FAIL  wide: 4.51" in r.stdout, r.stdout + r.stderr


def test_a_ratio_a_benchmark_did_not_print_fails(tmp_path):
    r = bench(tmp_path, 1.0, None)
    assert r.returncode == 1 and "FAIL  slow: run.sh printed no ratio" in r.stdout, r.stdout
    r = bench(tmp_path / "supervise", 1.0, 2.0, None)
    assert r.returncode == 1 and "FAIL  steady: supervise.sh printed no ratio" in r.stdout, r.stdout


def test_every_budget_names_a_ratio_its_script_prints():
    for line in (pathlib.Path(ROOT) / "bench" / "budgets.tsv").read_text().splitlines()[1:]:
        name, ratio, script, what = line.split("\t")
        assert float(ratio) > 0 and what
        assert f"ratio {name} " in (pathlib.Path(ROOT) / "bench" / script).read_text(), (name, script)
