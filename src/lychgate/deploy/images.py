"""Container images of the proxy Pod: a default reference, overridden part by part (kgateway's Image)."""

from __future__ import annotations

from lychgate.api.lychgate import Image


def split_image(ref: str) -> Image:
    """'ghcr.io/lychgate/envoy:1.40.0' -> registry ghcr.io/lychgate, repository envoy, tag 1.40.0."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    registry, _, repository = name.rpartition("/")
    return Image(registry=registry or None, repository=repository, tag=tag, digest=digest or None)


def image_ref(default: str, override: Image | None) -> tuple[str, str | None]:
    """The image of the Envoy container and its pull policy: the override part by part."""
    base = split_image(default)
    o = override or Image()
    registry = o.registry if o.registry is not None else base.registry
    repository = o.repository or base.repository or "envoy"
    # A digest pins the image: an overriding tag drops the default's digest and vice versa.
    if o.digest or o.tag:
        tag, digest = o.tag, o.digest
    else:
        tag, digest = base.tag, base.digest
    ref = f"{registry.rstrip('/')}/{repository}" if registry else repository
    if digest:
        ref += f"@{digest}"
    elif tag:
        ref += f":{tag}"
    return ref, o.pull_policy
