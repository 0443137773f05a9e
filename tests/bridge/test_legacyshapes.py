"""The table of 2025-11-25 shapes against the schema file it transcribes."""

from __future__ import annotations

import copy
import json
from typing import Any

from mcpbridge.bridge.rules.legacyshapes import LEGACY_SHAPES
from schema import schema_path


def normalized(value: Any) -> Any:
    """A definition without descriptions, with sorted ``required`` lists."""
    if isinstance(value, dict):
        out = {k: normalized(v) for k, v in value.items() if not (k == "description" and isinstance(v, str))}
        if isinstance(out.get("required"), list):
            out["required"] = sorted(out["required"])
        return out
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def test_the_shape_table_is_the_legacy_schema_but_for_two_documented_differences() -> None:
    from schema import LEGACY

    official = json.loads(schema_path(LEGACY).read_text(encoding="utf-8"))["$defs"]
    expected = {name: normalized(copy.deepcopy(official[name])) for name in LEGACY_SHAPES}
    form_schema = expected["ElicitRequestFormParams"]["properties"]["requestedSchema"]
    form_schema["properties"]["properties"]["additionalProperties"] = {}
    content = expected["ElicitResult"]["properties"]["content"]["additionalProperties"]
    content["anyOf"][1]["type"] = ["string", "number", "boolean"]
    assert {name: normalized(shape) for name, shape in LEGACY_SHAPES.items()} == expected


def test_every_reference_of_the_table_is_in_the_table() -> None:
    text = json.dumps(dict(LEGACY_SHAPES))
    for name in set(__import__("re").findall(r'"#/\$defs/([A-Za-z]+)"', text)):
        assert name in LEGACY_SHAPES
