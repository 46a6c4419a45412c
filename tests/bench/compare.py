"""Compare two results.json files target by target:
`python -m tests.bench.compare OLD.json [NEW.json]` (NEW defaults to docs/benchmarks/results.json).

Keep a copy of docs/benchmarks/results.json before a change (or take it from
git: `git show HEAD:docs/benchmarks/results.json > /tmp/before.json`), rerun
the benchmarks, then compare.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.bench.report import RESULTS, fmt


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    old = json.loads(Path(argv[0]).read_text())
    new = json.loads(Path(argv[1] if len(argv) > 1 else RESULTS).read_text())
    print(f"{'benchmark':<12} {'target':<78} {'before':>14} {'after':>14} {'change':>8}  verdict")
    for name, b in new.get("benchmarks", {}).items():
        before = {c["target"]: c for c in old.get("benchmarks", {}).get(name, {}).get("checks", [])}
        for c in b.get("checks", []):
            o = before.get(c["target"])
            was = o["measured"] if o else None
            change = ""
            if isinstance(was, int | float) and isinstance(c["measured"], int | float) and was:
                change = f"{c['measured'] / was:.2f}x"
            verdict = "pass" if c["pass"] else "MISS"
            if o is not None and o["pass"] != c["pass"]:
                verdict += " (was " + ("pass" if o["pass"] else "MISS") + ")"
            print(f"{name:<12} {c['target'][:78]:<78} {fmt(was, c['unit']):>14} "
                  f"{fmt(c['measured'], c['unit']):>14} {change:>8}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
