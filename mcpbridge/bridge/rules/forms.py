"""The forms of form elicitation: the compiled ``requestedSchema``, and the forms the bridge makes.

A form elicitation of the upstream server goes to the client only when its
``requestedSchema`` compiles (:func:`compile_form_schema`): a flat object of primitive
properties, each a ``PrimitiveSchemaDefinition`` of the schema. The compiled form then
checks the content of the client's answer. The bridge makes two forms of its own: the
choice form, for a form without a property, and the "Continue" form, for a URL that the
user accepted in an earlier round.

This module is pure: it does no I/O and reads no clock.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from ...mcp.errorbase import PeerFault
from .jsonshape import is_number, is_type
from .legacyshapes import conforms

__all__ = [
    "CONTINUE_MESSAGE",
    "CONTINUE_PROPERTY",
    "CONTINUE_VALUE",
    "MAX_FORM_SUBSCHEMAS",
    "FormSchema",
    "SchemaError",
    "choice_form",
    "compile_form_schema",
    "continue_form",
]

#: The one property of the choice form and the "Continue" form, and its one value.
CONTINUE_PROPERTY: Final = "continue"
CONTINUE_VALUE: Final = "Continue"
#: The message of the "Continue" form; the user sees it instead of the URL again.
CONTINUE_MESSAGE: Final = "Complete the step in the web browser. Then select Continue."

#: The limit of subschemas in one ``requestedSchema`` (zig-sdk ``schema.max_subschemas``).
MAX_FORM_SUBSCHEMAS: Final = 4096


class SchemaError(PeerFault):
    """A ``requestedSchema`` does not compile."""


@dataclass(frozen=True, slots=True)
class _Field:
    """One compiled property of a form: its type and the keywords of its type."""

    type: str
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    enum: tuple[str, ...] | None = None
    one_of: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_items: int | None = None
    max_items: int | None = None
    item_enum: tuple[str, ...] | None = None
    item_any_of: tuple[str, ...] | None = None

    def accepts(self, value: Any) -> bool:
        if not is_type(value, self.type):
            return False
        if isinstance(value, str):
            return self._accepts_string(value)
        if isinstance(value, list):
            return self._accepts_choices(value)
        if is_number(value):
            if self.minimum is not None and value < self.minimum:
                return False
            if self.maximum is not None and value > self.maximum:
                return False
        return True

    def _accepts_string(self, value: str) -> bool:
        if self.min_length is not None and len(value) < self.min_length:
            return False
        if self.max_length is not None and len(value) > self.max_length:
            return False
        if self.format is not None and not _FORMATS[self.format](value):
            return False
        if self.enum is not None and value not in self.enum:
            return False
        # oneOf: exactly one choice matches, so a value listed twice matches none.
        return self.one_of is None or self.one_of.count(value) == 1

    def _accepts_choices(self, value: list[Any]) -> bool:
        if self.min_items is not None and len(value) < self.min_items:
            return False
        if self.max_items is not None and len(value) > self.max_items:
            return False
        for item in value:
            if self.item_enum is not None and item not in self.item_enum:
                return False
            if self.item_any_of is not None and item not in self.item_any_of:
                return False
        return True


@dataclass(frozen=True, slots=True)
class FormSchema:
    """A compiled ``requestedSchema``: a flat object of primitive properties."""

    fields: Mapping[str, _Field]
    required: tuple[str, ...]

    def accepts(self, content: Any) -> bool:
        """True when ``content`` is valid against the schema.

        The content is an object that has each required member; each member that is a
        property of the schema is valid against that property. Other members are allowed,
        as JSON Schema allows them without ``additionalProperties``.
        """
        if not isinstance(content, dict):
            return False
        if any(name not in content for name in self.required):
            return False
        return all(field.accepts(content[name]) for name, field in self.fields.items() if name in content)


def compile_form_schema(schema: Any) -> FormSchema:
    """Compile the ``requestedSchema`` of a form elicitation.

    The schema is the flat subset of revision 2026-07-28 §A9: an object with primitive
    properties (string with ``minLength``, ``maxLength``, ``format`` email|uri|date|date-time,
    ``enum`` or ``oneOf`` const+title; number or integer with ``minimum`` and ``maximum``;
    boolean; a multi-select array of strings with ``items.enum`` or ``items.anyOf`` and
    ``minItems``, ``maxItems``) and a ``required`` list. ``$schema`` is ignored, and so are
    keywords outside the subset. Each property must be a ``PrimitiveSchemaDefinition`` of
    the schema, thus a property such as ``{"type": "object"}`` does not compile.

    Raises:
        SchemaError: the schema does not compile.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise SchemaError("the schema is not an object schema")
    properties = schema.get("properties")
    required = schema.get("required", [])
    if not isinstance(properties, dict):
        raise SchemaError("properties is not an object")
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise SchemaError("required is not a list of names")
    fields: dict[str, _Field] = {}
    subschemas = 1
    for name, prop in properties.items():
        if not conforms(prop, "PrimitiveSchemaDefinition"):
            raise SchemaError(f"property {name!r} is not a primitive schema")
        fields[name] = _compile_field(prop)
        subschemas += 1 + _subschema_count(prop)
        if subschemas > MAX_FORM_SUBSCHEMAS:
            raise SchemaError("too many subschemas")
    return FormSchema(fields=MappingProxyType(fields), required=tuple(required))


def _compile_field(prop: dict[str, Any]) -> _Field:
    kind = prop["type"]
    if kind == "string":
        return _Field(
            type=kind,
            min_length=_count(prop, "minLength"),
            max_length=_count(prop, "maxLength"),
            format=prop.get("format"),
            enum=_names(prop, "enum"),
            one_of=_choices(prop, "oneOf"),
        )
    if kind in ("number", "integer"):
        return _Field(type=kind, minimum=prop.get("minimum"), maximum=prop.get("maximum"))
    if kind == "boolean":
        return _Field(type=kind)
    # A multi-select: the items list their choices by enum, anyOf, or both.
    items = prop["items"]
    item_enum = _names(items, "enum")
    item_any_of = _choices(items, "anyOf")
    if item_enum is None and item_any_of is None:
        raise SchemaError("the items have no choices")
    return _Field(
        type=kind,
        min_items=_count(prop, "minItems"),
        max_items=_count(prop, "maxItems"),
        item_enum=item_enum,
        item_any_of=item_any_of,
    )


def _keyword(schema: Mapping[str, Any], keyword: str, valid: Callable[[Any], bool], what: str) -> Any:
    """The value of ``keyword`` in ``schema`` (``None`` when it is absent), which must be ``valid``.

    Raises:
        SchemaError: ``{keyword} is {what}``, for a value that is not valid.
    """
    if keyword not in schema:
        return None
    value = schema[keyword]
    if not valid(value):
        raise SchemaError(f"{keyword} is {what}")
    return value


def _count(schema: Mapping[str, Any], keyword: str) -> int | None:
    """A non-negative integer keyword such as ``minLength``, or ``None`` (also for ``null``)."""
    value = _keyword(
        schema,
        keyword,
        lambda v: v is None or (is_type(v, "integer") and v >= 0),
        "not a non-negative integer",
    )
    return None if value is None else int(value)


def _names(schema: Mapping[str, Any], keyword: str) -> tuple[str, ...] | None:
    """An ``enum`` of strings, or ``None``."""
    values = _keyword(
        schema,
        keyword,
        lambda v: isinstance(v, list) and all(isinstance(name, str) for name in v),
        "not a list of strings",
    )
    return None if values is None else tuple(values)


def _choices(schema: Mapping[str, Any], keyword: str) -> tuple[str, ...] | None:
    """The ``const`` strings of a ``oneOf`` or ``anyOf`` of choices, or ``None``."""
    options = _keyword(schema, keyword, lambda v: isinstance(v, list) and bool(v), "not a non-empty list")
    if options is None:
        return None
    consts: list[str] = []
    for option in options:
        if not isinstance(option, dict) or not isinstance(option.get("const"), str):
            raise SchemaError(f"a choice of {keyword} has no string const")
        consts.append(option["const"])
    return tuple(consts)


def _subschema_count(prop: Mapping[str, Any]) -> int:
    """The subschemas inside one property: its ``oneOf`` choices, its items and their choices."""

    def length(value: Any) -> int:
        return len(value) if isinstance(value, list) else 0

    count = length(prop.get("oneOf"))
    items = prop.get("items")
    if isinstance(items, dict):
        count += 1 + length(items.get("anyOf"))
    return count


_EMAIL = re.compile(r"[^\s@]+@[^\s@]+", re.ASCII)
_URI_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|\\^`]*", re.ASCII)
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATE_TIME = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+\-]([0-9]{2}):([0-9]{2}))"
)


def _is_date(text: str) -> bool:
    match = _DATE.fullmatch(text)
    if match is None:
        return False
    try:
        datetime.date(*(int(part) for part in match.groups()))
    except ValueError:
        return False
    return True


def _is_date_time(text: str) -> bool:
    """RFC 3339 ``date-time``: a date, ``T``, a time with seconds, and an offset."""
    match = _DATE_TIME.fullmatch(text)
    if match is None or not _is_date(match.group(1)):
        return False
    hour, minute, second = (int(match.group(i)) for i in (2, 3, 4))
    if hour > 23 or minute > 59 or second > 60:  # 60: a leap second
        return False
    if match.group(7) is not None and (int(match.group(7)) > 23 or int(match.group(8)) > 59):
        return False
    return True


_FORMATS: Final[Mapping[str, Callable[[str], bool]]] = MappingProxyType(
    {
        "email": lambda text: _EMAIL.fullmatch(text) is not None,
        "uri": lambda text: _URI_TEXT.fullmatch(text) is not None,
        "date": _is_date,
        "date-time": _is_date_time,
    }
)


def choice_form(message: str) -> dict[str, Any]:
    """The params of a form with ``message`` and one required choice, "Continue".

    VS Code reads the first property of a form without a check, thus the client never
    gets a form without a property: it gets this one instead.
    """
    return {
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                CONTINUE_PROPERTY: {
                    "type": "string",
                    "title": CONTINUE_VALUE,
                    "enum": [CONTINUE_VALUE],
                    "default": CONTINUE_VALUE,
                }
            },
            "required": [CONTINUE_PROPERTY],
        },
    }


def continue_form() -> dict[str, Any]:
    """The params of the "Continue" form, shown instead of a URL that the user accepted."""
    return choice_form(CONTINUE_MESSAGE)
