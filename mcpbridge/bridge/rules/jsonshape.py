"""The check of a JSON value against a shape: the subset of JSON Schema that the bridge's tables use.

This module is pure: it does no I/O and reads no clock. The shapes themselves are in
:mod:`.legacyshapes`; the compiled forms of :mod:`.forms` use the type rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_number", "is_type", "json_equal", "matches"]


def matches(value: Any, shape: Mapping[str, Any], definitions: Mapping[str, Mapping[str, Any]]) -> bool:
    """True when ``value`` is valid against ``shape``; a ``$ref`` names a member of ``definitions``.

    The check follows JSON Schema for the keywords ``type``, ``const``, ``enum``,
    ``required``, ``properties``, ``additionalProperties``, ``items``, ``anyOf``, ``$ref``
    (``#/$defs/<name>``), ``minimum`` and ``maximum``; ``format`` is an annotation, as in
    the default mode of JSON Schema validators, and other keywords are ignored.

    Raises:
        KeyError: a ``$ref`` names no member of ``definitions``.
    """
    ref = shape.get("$ref")
    if ref is not None and not matches(value, definitions[ref.rsplit("/", 1)[-1]], definitions):
        return False
    kinds = shape.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not any(is_type(value, name) for name in names):
            return False
    if "const" in shape and not json_equal(value, shape["const"]):
        return False
    if "enum" in shape and not any(json_equal(value, option) for option in shape["enum"]):
        return False
    if is_number(value):
        if "minimum" in shape and value < shape["minimum"]:
            return False
        if "maximum" in shape and value > shape["maximum"]:
            return False
    if isinstance(value, dict):
        if any(name not in value for name in shape.get("required", ())):
            return False
        properties = shape.get("properties", {})
        extra = shape.get("additionalProperties", True)
        for name, member in value.items():
            if name in properties:
                if not matches(member, properties[name], definitions):
                    return False
            elif extra is False or (isinstance(extra, dict) and not matches(member, extra, definitions)):
                return False
    if isinstance(value, list) and "items" in shape:
        if not all(matches(item, shape["items"], definitions) for item in value):
            return False
    if "anyOf" in shape and not any(matches(value, option, definitions) for option in shape["anyOf"]):
        return False
    return True


def is_number(value: Any) -> bool:
    """A JSON number: an ``int`` or a ``float``, not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_type(value: Any, name: str) -> bool:
    """True when ``value`` has the JSON Schema type ``name`` (an integer may be ``2.0``)."""
    if name == "integer":
        return is_number(value) and (isinstance(value, int) or float(value).is_integer())
    if name == "number":
        return is_number(value)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    return name == "null" and value is None


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``true`` is not ``1``, and ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)
