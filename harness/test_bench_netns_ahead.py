"""bench/netns_ahead, which measures making a job's network namespace (or
the five namespaces that can be made ahead) while the supervisor still
works against the one clone of all six: every way must reach an init in a
user, network and mount namespace of its own (the program checks each
round and exits 1 otherwise), and the table must have its four rows (three
amounts of work, then "idle": made between two jobs), each ahead way with
its ratio to the one clone, as root and as uid 65534. Bad arguments get
the usage."""
import os
import subprocess

import pytest

from testlib import BUILD, NOBODY, as_user

AHEAD = os.path.join(BUILD, "bench", "netns_ahead")


@pytest.fixture
def ahead():
    if not os.path.exists(AHEAD):
        pytest.skip(f"no built benchmark at {AHEAD}")
    return AHEAD


@pytest.mark.parametrize("uid", [0, NOBODY])
def test_every_way_reaches_an_init_in_fresh_namespaces_and_the_table_has_its_rows(ahead, uid):
    proc = subprocess.run(as_user(uid) + [ahead, "3"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[2:]]
    assert [row[0] for row in rows] == ["0.0", "0.5", "1.0", "idle"], proc.stdout
    for row in rows:
        assert len(row) == 6, proc.stdout
        one = float(row[1])
        for early, ratio in ((float(row[2]), float(row[3].rstrip("x"))), (float(row[4]), float(row[5].rstrip("x")))):
            assert one > 0 and early > 0 and abs(ratio - early / one) < 0.01, proc.stdout


def test_bad_arguments_are_refused_with_the_usage(ahead):
    for args in (["0"], ["x"], ["2001"], ["3", "4"]):
        proc = subprocess.run([ahead] + args, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 64 and proc.stderr.startswith("usage: netns_ahead"), (args, proc.stderr)
