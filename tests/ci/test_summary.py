"""``.ci/run`` ends with one line counting what ran: ``N passed, M failed``
from the JUnit reports of both pytest runs and schemathesis, "failed" when
anything failed, and a non-zero exit code then. The summariser is run as CI
runs it; ``.ci/run`` itself with a stand-in ``make`` that writes reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = ROOT / ".ci" / "summary.py"

PYTEST_REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="2" tests="6">
<testcase classname="tests.a" name="test_ok" time="0.1" />
<testcase classname="tests.a" name="test_ok_too" time="0.1"><system-out>noise</system-out></testcase>
<testcase classname="tests.a" name="test_broken" time="0.1"><failure message="assert 1 == 2">trace</failure></testcase>
<testcase classname="tests.a" name="test_setup" time="0.1"><error message="fixture failed">trace</error></testcase>
<testcase classname="tests.a" name="test_skip" time="0"><skipped type="pytest.skip" message="no" /></testcase>
<testcase classname="tests.a" name="test_xfail" time="0"><skipped type="pytest.xfail" message="known" /></testcase>
</testsuite></testsuites>
"""
# What schemathesis 4 writes with --report junit: one case per operation.
SCHEMATHESIS_REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites errors="0" failures="1" skipped="0" tests="3" time="1.0">
  <testsuite name="schemathesis" errors="0" failures="1" skipped="0" tests="3" time="1.0">
    <testcase name="GET /api/health" time="0.2" />
    <testcase name="POST /api/transactions" time="0.5" />
    <testcase name="POST /api/withdrawals" time="0.3"><failure type="failure" message="Server error" /></testcase>
  </testsuite>
</testsuites>
"""
PASSING_REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="2"><testcase name="a" /><testcase name="b" /></testsuite></testsuites>
"""


def summarise(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SUMMARY), *map(str, args)], capture_output=True, text=True, timeout=30, check=False
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_counts_every_report_and_says_failed(tmp_path: Path) -> None:
    result = summarise(write(tmp_path / "p.xml", PYTEST_REPORT), write(tmp_path / "s.xml", SCHEMATHESIS_REPORT))
    assert result.stdout.splitlines()[-1] == "4 passed, 3 failed, 2 skipped"
    assert result.returncode == 1


def test_all_passing_is_exit_0_and_omits_skipped(tmp_path: Path) -> None:
    result = summarise(write(tmp_path / "a.xml", PASSING_REPORT), write(tmp_path / "b.xml", PASSING_REPORT))
    assert result.stdout == "4 passed, 0 failed\n"
    assert result.returncode == 0


def test_a_stage_that_failed_without_a_failing_test_counts_as_one_failure(tmp_path: Path) -> None:
    result = summarise("--failed-stage", "make lint", write(tmp_path / "a.xml", PASSING_REPORT))
    assert result.stdout.splitlines() == ["make lint failed", "2 passed, 1 failed"]
    assert result.returncode == 1


def test_a_stage_whose_tests_failed_is_not_counted_twice(tmp_path: Path) -> None:
    result = summarise("--failed-stage", "make fuzz", write(tmp_path / "s.xml", SCHEMATHESIS_REPORT))
    assert result.stdout.splitlines()[-1] == "2 passed, 1 failed"


def test_an_unreadable_report_is_a_failure(tmp_path: Path) -> None:
    result = summarise(write(tmp_path / "cut.xml", PYTEST_REPORT[:200]), tmp_path / "missing.xml")
    assert result.stdout.splitlines()[-1] == "0 passed, 2 failed"
    assert result.returncode == 1


FAKE_MAKE = r"""#!/usr/bin/env bash
# Stands in for make: "test", "fuzz" and "soak" write a report where .ci/run asks.
target="$1"; shift
for arg in "$@"; do
  case "$arg" in
    PYTEST_ARGS=*|FUZZ_ARGS=*|SOAK_ARGS=*)
      for word in ${arg#*=}; do
        case "$word" in --junitxml=*) report="${word#--junitxml=}";; esac
        if [ "${take:-}" = 1 ]; then report="$word"; take=0; fi
        if [ "$word" = "--report-junit-path" ] || [ "$word" = "--junit" ]; then take=1; fi
      done;;
  esac
done
if [ -n "${report:-}" ]; then cp "$FAKE_REPORT" "$report"; fi
echo "ran $target" >> "$FAKE_LOG"
if [ "$target" = "${FAIL_TARGET:-none}" ]; then exit 2; fi
exit 0
"""


def run_ci(tmp_path: Path, fail_target: str = "none") -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write(bin_dir / "make", FAKE_MAKE).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_REPORT": str(write(tmp_path / "report.xml", PASSING_REPORT)),
        "FAKE_LOG": str(tmp_path / "make.log"),
        "FAIL_TARGET": fail_target,
        "PYTHON": sys.executable,
    }
    return subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_ci_run_ends_with_the_count_of_every_run(tmp_path: Path) -> None:
    result = run_ci(tmp_path)
    ran = (tmp_path / "make.log").read_text().split()
    reports = 4 if ran.count("test") == 2 else 3  # the second pytest run needs the machine's servers
    assert result.stdout.splitlines()[-1] == f"{2 * reports} passed, 0 failed", result.stdout + result.stderr
    assert result.returncode == 0


@pytest.mark.parametrize("target", ["lint", "test", "fuzz", "soak"])
def test_ci_run_says_failed_and_exits_non_zero_when_a_stage_fails(tmp_path: Path, target: str) -> None:
    result = run_ci(tmp_path, fail_target=target)
    lines = result.stdout.splitlines()
    assert lines[-2] == f"make {target}" + (" (embedded engines)" if target == "test" else "") + " failed"
    assert lines[-1].endswith(" passed, 1 failed"), result.stdout
    assert result.returncode == 2
