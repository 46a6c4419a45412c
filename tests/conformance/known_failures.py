"""Upstream tests of features lychgate claims that do not pass yet: ShortName -> why.

pytest runs these as strict xfail, so a case that starts passing fails the run
until its entry is removed here.
"""

from __future__ import annotations

KNOWN_FAILURES: dict[str, str] = {
    "BackendTLSPolicyConflictResolution": (
        "a Service-wide BackendTLSPolicy (no sectionName) is Accepted=False/Conflicted when another policy "
        "targets one port of the Service by sectionName (not-conflicted-without-section-name: 'https-1 is "
        "targeted by older policy not-conflicted-with-section-name'); upstream wants both Accepted: only "
        "policies with the same target and the same sectionName (or both none) conflict, and a sectionName "
        "policy wins its port over a Service-wide one whatever their age. Traffic is right here; the status is "
        "not (translate/backendtls.py write_status/policy_for compare every policy on each port by age only)"),
}
