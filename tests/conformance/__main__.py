"""`python -m tests.conformance [--only NAME ...]`: run the conformance cases against one
lychgate and write docs/conformance.md and docs/conformance-report.yaml."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.conformance import report
from tests.conformance.cases import all_cases
from tests.conformance.known_failures import KNOWN_FAILURES
from tests.conformance.manifests import REPO, UPSTREAM
from tests.conformance.runner import Result, execute
from tests.conformance.suite import Suite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this upstream ShortName (repeatable); the docs are not rewritten")
    parser.add_argument("--docs", type=Path, default=REPO / "docs", help="where to write the results")
    args = parser.parse_args(argv)
    if not UPSTREAM.is_dir():
        print(f"upstream conformance data not found at {UPSTREAM}", file=sys.stderr)
        return 2
    cases = all_cases()
    unknown = set(args.only) - {c.short_name for c in cases}
    if unknown:
        print(f"unknown test(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    selected = [c for c in cases if not args.only or c.short_name in args.only]
    from lychgate import __version__

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="lychgate-conformance-") as tmp:
        suite = Suite(Path(tmp)).start()
        try:
            for case in selected:
                result = execute(suite, case)
                results.append(result)
                note = f" ({result.reason})" if result.reason else ""
                print(f"{result.outcome.upper():5} {case.short_name} {result.seconds:.1f}s{note}", flush=True)
        finally:
            suite.close()
    unexpected = [r for r in results if r.outcome == "fail" and r.case.short_name not in KNOWN_FAILURES]
    fixed = [r for r in results if r.outcome == "pass" and r.case.short_name in KNOWN_FAILURES]
    if not args.only:
        report.write(results, suite.supported, __version__, args.docs)
        print(f"wrote {args.docs / 'conformance.md'} and {args.docs / 'conformance-report.yaml'}")
    for r in fixed:
        print(f"{r.case.short_name} passes now: remove it from tests/conformance/known_failures.py")
    return 1 if unexpected or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
