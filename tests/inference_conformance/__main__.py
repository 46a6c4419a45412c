"""`python -m tests.inference_conformance [--only NAME ...]`: run the Inference Extension
v1.6.0 conformance cases against one lychgate and write docs/inference-conformance-report.yaml."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.conformance.manifests import REPO
from tests.inference_conformance import report
from tests.inference_conformance.cases import CASES
from tests.inference_conformance.manifests import UPSTREAM
from tests.inference_conformance.runner import Result, execute
from tests.inference_conformance.suite import InferenceSuite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.inference_conformance", description=__doc__)
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this upstream ShortName (repeatable); the report is not rewritten")
    parser.add_argument("--report", type=Path, default=REPO / "docs" / "inference-conformance-report.yaml")
    args = parser.parse_args(argv)
    if not UPSTREAM.is_dir():
        print(f"upstream conformance data not found at {UPSTREAM}", file=sys.stderr)
        return 2
    unknown = set(args.only) - {c.short_name for c in CASES}
    if unknown:
        print(f"unknown test(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    from lychgate import __version__

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="lychgate-inference-conformance-") as tmp:
        suite = InferenceSuite(Path(tmp)).start()
        try:
            for case in CASES:
                if args.only and case.short_name not in args.only:
                    continue
                result = execute(suite, case)
                results.append(result)
                note = f" ({result.reason})" if result.reason else ""
                print(f"{result.outcome.upper():5} {case.short_name} {result.seconds:.1f}s{note}", flush=True)
        finally:
            suite.close()
    if not args.only:
        report.write(results, __version__, args.report)
        print(f"wrote {args.report}")
    return 1 if any(r.outcome == "fail" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
