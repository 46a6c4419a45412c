"""lychgate benchmarks (issue 9): `python -m tests.bench [--quick] [--only NAME]`.

Not part of the test run (see conftest.py). Each `bench_*.py` module has a
`run(opts) -> dict` returning figures, tables, target checks and plots; the
runner in `__main__.py` prints them and writes docs/benchmarks.md and
docs/benchmarks/results.json.
"""
