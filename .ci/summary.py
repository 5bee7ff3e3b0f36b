"""The last line of ``.ci/run``: ``N passed, M failed[, K skipped]``, counted
from the JUnit XML reports of the runs (both pytest runs, schemathesis).

    python .ci/summary.py [--failed-stage NAME] REPORT.xml...

A stage that failed without reporting a failing test (lint, a crashed run)
counts as one failure, so the line never reads as a success when CI failed.
Exits 1 when anything failed. Standard library only: it must run even when
the environment it reports on is broken.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def add(self, other: Counts) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped

    def line(self) -> str:
        text = f"{self.passed} passed, {self.failed} failed"
        return f"{text}, {self.skipped} skipped" if self.skipped else text


def count(report: Path) -> Counts:
    """One test case is one result: failed if it holds a failure or an error,
    skipped if skipped (pytest's xfail included), else passed."""
    counts = Counts()
    root = ET.parse(report).getroot()  # noqa: S314 - a report this run wrote itself
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            counts.failed += 1
        elif "skipped" in tags:
            counts.skipped += 1
        else:
            counts.passed += 1
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--failed-stage", default="", help="the stage that stopped the run, if one did")
    parser.add_argument("reports", nargs="*", type=Path)
    args = parser.parse_args(argv)

    total = Counts()
    for report in args.reports:
        try:
            total.add(count(report))
        except (OSError, ET.ParseError) as exc:
            print(f"unreadable report {report}: {exc}")
            total.failed += 1
    if args.failed_stage and total.failed == 0:
        print(f"{args.failed_stage} failed")
        total.failed += 1
    print(total.line())
    return 1 if total.failed else 0


if __name__ == "__main__":
    sys.exit(main())
