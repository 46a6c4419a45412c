"""Upstream tests of features lychgate claims that do not pass yet: ShortName -> why.

pytest runs these as strict xfail, so a case that starts passing fails the run
until its entry is removed here.
"""

from __future__ import annotations

KNOWN_FAILURES: dict[str, str] = {}
