"""An in-process stand-in for the Kubernetes API server, for lychgate's tests.

    from tests.kubefake import KubeFake

    async with KubeFake() as kube:       # real HTTP on 127.0.0.1:<ephemeral>
        client = kube.client()          # a real lightkube.AsyncClient
        ...                             # or kube.kubeconfig() / kube.write_kubeconfig(path)

Test hooks live on KubeFake: compact, drop_watches, bookmark, wait_for_watches,
writes/changes, requests/requests_for, history, fail_next/conflict_next,
update_status, install_crd, add_validator. Fixtures: tests.kubefake.fixtures.
"""

from .api import RequestRecord
from .errors import ApiError
from .resources import ResourceType
from .server import KubeFake

__all__ = ["ApiError", "KubeFake", "RequestRecord", "ResourceType"]
