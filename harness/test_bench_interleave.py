"""bench/interleave, which bench/run.sh uses to time launches in turns: one
line per command with its median and fastest launch, each command run
once a round (as many runs as rounds, whatever the order), a command that
does not exit 0 is an error, and bad arguments get the usage."""
import os
import subprocess

import pytest

from testlib import BUILD

INTERLEAVE = os.path.join(BUILD, "bench", "interleave")


@pytest.fixture
def interleave():
    if not os.path.exists(INTERLEAVE):
        pytest.skip(f"no built benchmark at {INTERLEAVE}")
    return INTERLEAVE


def test_each_command_runs_once_a_round_and_gets_its_line(interleave, tmp_path):
    log = tmp_path / "log"
    proc = subprocess.run([interleave, "5", "a", f"/bin/sh -c echo>>{log}", "b", "/bin/sleep 0.01"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().count("\n") == 5  # the output went to /dev/null, the command ran five times
    lines = [line.split() for line in proc.stdout.splitlines()]
    assert [line[0] for line in lines] == ["a", "b"], proc.stdout
    median_b, fastest_b = float(lines[1][1]), float(lines[1][2])
    assert 10 <= fastest_b <= median_b < 1000, proc.stdout  # sleep 0.01: at least 10 ms


def test_a_command_that_fails_is_an_error(interleave):
    proc = subprocess.run([interleave, "3", "ok", "/bin/true", "bad", "/bin/false"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "bad did not exit 0" in proc.stderr, proc.stderr
    proc = subprocess.run([interleave, "3", "missing", "/no/such/program"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "/no/such/program" in proc.stderr, proc.stderr


def test_bad_arguments_are_refused_with_the_usage(interleave):
    for args in ([], ["3"], ["3", "a"], ["0", "a", "/bin/true"], ["x", "a", "/bin/true"], ["3x", "a", "/bin/true"],
                 ["3", "a", " "]):
        proc = subprocess.run([interleave] + args, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 64 and proc.stderr.startswith("usage: interleave"), (args, proc.stderr)
