"""ReferenceGrants: may an object in one namespace refer to one in another?"""

from __future__ import annotations

from lychgate.api.gateway import ReferenceGrant
from lychgate.store import Store


def grant_allows(
    store: Store,
    from_group: str,
    from_kind: str,
    from_namespace: str,
    to_group: str,
    to_kind: str,
    to_namespace: str,
    to_name: str,
) -> bool:
    """Is a reference from (group, kind, namespace) to an object in another
    namespace allowed by a ReferenceGrant living in the target namespace?"""
    if from_namespace == to_namespace:
        return True
    for grant in store.list(ReferenceGrant, to_namespace):
        if not any(
            f.group == from_group and f.kind == from_kind and f.namespace == from_namespace
            for f in grant.spec.from_
        ):
            continue
        if any(
            t.group == to_group and t.kind == to_kind and (t.name in (None, "", to_name))
            for t in grant.spec.to
        ):
            return True
    return False
