#!/usr/bin/env python3
"""Fail unless a pytest JUnit report shows that the named tests really ran.

    check_junit.py REPORT --name test_seatbelt_macos --min-run 40

A test module that skips itself everywhere but one platform passes silently wherever
that platform is missing; a CI job meant to prove it must then fail instead. Counted:
the test cases whose class name (``tests.<module>``) contains ``--name``; those that
were neither skipped nor failed must number at least ``--min-run``, and none may fail.
Exit 0 when so, 1 (with the reason) otherwise, 2 for an unreadable report.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from typing import NamedTuple


class Tally(NamedTuple):
    ran: int
    skipped: int
    failed: int


def tally(report: str, name: str) -> Tally:
    """Ran, skipped and failed test cases of ``report`` whose class name holds ``name``."""
    ran = skipped = failed = 0
    for case in ET.parse(report).getroot().iter("testcase"):
        if name not in case.get("classname", ""):
            continue
        if case.find("skipped") is not None:
            skipped += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        else:
            ran += 1
    return Tally(ran, skipped, failed)


def verdict(t: Tally, name: str, min_run: int) -> str | None:
    """None when the tally proves the tests ran; else why not."""
    if t.failed:
        return f"{t.failed} {name} tests failed"
    if t.ran < min_run:
        return (f"only {t.ran} {name} tests ran ({t.skipped} skipped); at least {min_run} "
                "must run here, so this job proves nothing")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--name", required=True)
    parser.add_argument("--min-run", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        t = tally(args.report, args.name)
    except (OSError, ET.ParseError) as err:
        print(f"check_junit: cannot read {args.report}: {err}", file=sys.stderr)
        return 2
    why = verdict(t, args.name, args.min_run)
    if why is not None:
        print(f"check_junit: {why}", file=sys.stderr)
        return 1
    print(f"check_junit: {t.ran} {args.name} tests ran, {t.skipped} skipped, none failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
