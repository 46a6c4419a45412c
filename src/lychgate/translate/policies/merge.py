"""policyMerge settings: which TrafficPolicy fields deep-merge instead of the oldest winning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lychgate.log import component_logger
from lychgate.translate.policies.fields import FIELDS

log = component_logger("translate")

DEEP_MERGE = "DeepMerge"


def deep_merge_fields(policy_merge: Mapping[str, Any] | None) -> frozenset[str]:
    """`{"trafficPolicy": {"extAuth": "DeepMerge"}}` -> {"extAuth"}.

    Unknown keys and values are logged and ignored: a typo in a Helm value
    must not stop the control plane, and `ShallowMerge` (or anything else)
    means the default, oldest-wins behaviour.
    """
    if not policy_merge:
        return frozenset()
    mergeable = {f.name for f in FIELDS if f.deep_mergeable}
    out: set[str] = set()
    for kind, fields in policy_merge.items():
        if kind != "trafficPolicy" or not isinstance(fields, Mapping):
            log.warning("policyMerge.%s is not understood; only policyMerge.trafficPolicy is", kind)
            continue
        for name, mode in fields.items():
            if name not in mergeable:
                log.warning("policyMerge.trafficPolicy.%s: only %s can be deep-merged",
                            name, ", ".join(sorted(mergeable)))
            elif mode == DEEP_MERGE:
                out.add(name)
            elif mode not in ("ShallowMerge", "", None):
                log.warning("policyMerge.trafficPolicy.%s: %r is not DeepMerge; using the default", name, mode)
    return frozenset(out)
