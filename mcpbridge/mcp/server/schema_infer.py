"""A JSON schema for a handler's parameters, read from its signature, and the check of its arguments.

A tool handler is ``fn(ctx, a: int, b: str = "x")``: :meth:`Signature.of` reads
the parameters after the context, :meth:`Signature.input_schema` makes the
tool's ``inputSchema`` of them, and :meth:`Signature.problem` says why the
arguments of a call do not fit.

Pure: no I/O, no threads, no clock.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["PY_TO_JSON", "Signature", "schema_of", "type_matches"]


PY_TO_JSON: Final[dict[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def schema_of(annotation: Any) -> tuple[dict[str, Any], type | None]:
    """A JSON schema for a parameter annotation, and the Python type to check (or None)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return schema_of(members[0])
        return {}, None
    if origin is list:
        args = typing.get_args(annotation)
        item_schema = schema_of(args[0])[0] if args else {}
        return {"type": "array", "items": item_schema}, list
    if origin is dict:
        return {"type": "object"}, dict
    if annotation in PY_TO_JSON:
        schema: dict[str, Any] = {"type": PY_TO_JSON[annotation]}
        if annotation is list:
            schema["items"] = {}
        return schema, annotation
    return {}, None


def type_matches(value: Any, expected: type) -> bool:
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, expected)


@dataclass
class Signature:
    """How to call a handler with keyword arguments taken from a request."""

    context_name: str
    names: list[str]
    required: list[str]
    accepts_any: bool
    types: dict[str, type]
    nullable: set[str]
    schemas: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Signature:
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        if not params or params[0].kind not in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            raise TypeError(f"{getattr(fn, '__name__', fn)!r} must take the Context as its first parameter")
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # an annotation that does not resolve: no inference
            hints = {}
        names: list[str] = []
        required: list[str] = []
        kinds: dict[str, type] = {}
        nullable: set[str] = set()
        schemas: dict[str, dict[str, Any]] = {}
        accepts_any = False
        for param in params[1:]:
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                accepts_any = True
                continue
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
                raise TypeError(f"{param.name!r}: handler parameters must be keyword arguments")
            names.append(param.name)
            if param.default is inspect.Parameter.empty:
                required.append(param.name)
            hint = hints.get(param.name, inspect.Parameter.empty)
            schema, kind = schema_of(hint)
            schemas[param.name] = schema
            if kind is not None:
                kinds[param.name] = kind
            if type(None) in typing.get_args(hint) or param.default is None:
                nullable.add(param.name)
        return cls(params[0].name, names, required, accepts_any, kinds, nullable, schemas)

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "properties": dict(self.schemas)}
        if self.required:
            schema["required"] = list(self.required)
        if not self.accepts_any:
            schema["additionalProperties"] = False
        return schema

    def problem(self, arguments: Mapping[str, Any], *, check_types: bool) -> str | None:
        """Why ``arguments`` do not fit the handler, or ``None``."""
        for name in self.required:
            if name not in arguments:
                return f"the argument {name!r} is missing"
        for name, value in arguments.items():
            if name == self.context_name or (name not in self.names and not self.accepts_any):
                return f"the argument {name!r} is unknown"
            expected = self.types.get(name) if check_types else None
            if expected is None or (value is None and name in self.nullable):
                continue
            if not type_matches(value, expected):
                return f"the argument {name!r} must be of type {PY_TO_JSON[expected]}"
        return None
