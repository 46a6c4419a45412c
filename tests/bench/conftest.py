"""The benchmarks are scripts run by `python -m tests.bench`, never by pytest."""

collect_ignore_glob = ["*"]
