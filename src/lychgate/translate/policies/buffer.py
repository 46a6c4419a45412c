"""buffer: wait for whole request bodies up to a size; larger ones get 413.

`filterStage` chooses where the listener's buffer filter sits; see
xds/translator/buffer.py.
"""

from __future__ import annotations

from typing import Any

from lychgate.translate.policies.fields import PolicyField, register
from lychgate.translate.values import CompileContext, Invalid, quantity_bytes


class BufferField(PolicyField):
    name, attr = "buffer", "buffer"

    def compile(self, ctx: CompileContext, value: dict[str, Any], path: str) -> dict[str, Any]:
        if ("maxRequestSize" in value) == ("disable" in value):
            raise Invalid(path, "exactly one of maxRequestSize or disable must be set")
        stage = value.get("filterStage")
        where = {"buffer_stage": (stage["stage"], stage.get("predicate", "During"))} if stage else {}
        if "disable" in value:
            return {"buffer_max_bytes": None, **where}
        return {"buffer_max_bytes": quantity_bytes(value["maxRequestSize"], f"{path}.maxRequestSize"), **where}


register(BufferField())
