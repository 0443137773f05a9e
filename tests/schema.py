"""Validate JSON-RPC frames against the official MCP JSON schemas.

The schemas are vendored in ``tests/data``: ``schema-2025-11-25.json`` (what VS Code
speaks with the bridge, called *legacy* here), ``schema-2026-07-28.json`` (what the bridge
speaks with the real server, called *modern*), and the older revisions that other hosts
speak with the bridge (``schema-2025-06-18.json``, ``schema-2025-03-26.json``,
``schema-2024-11-05.json``: draft-07 schemas, whose request definitions have no ``id``).
Beside them, ``ext-tasks-schema-draft.json`` is the schema of the Tasks extension of
2026-07-28 (``validate(TASKS, value, "GetTaskResult")``; Apache License 2.0, unchanged).

* ``validate_legacy(obj, "InitializeResult")`` checks any value against one named definition
  (``$defs`` entry); with no name the value must be a ``JSONRPCMessage``.
* ``validate_legacy_frame(frame)`` picks the definition from the frame itself: a request or a
  notification by its ``method``, a response as a result or an error response. Give
  ``request_method`` to also check a result against the result type of that method.
  ``validate_frame(revision, frame)`` does the same for any revision.
* :class:`ClientFrames` checks every frame that a client of one revision gets, with the
  result type of the request that each response answers.

A failure raises :class:`FrameInvalid`, an ``AssertionError`` that names the revision, the
definition, what is wrong and where.

The frame checks (``validate_frame`` and its variants, :class:`ClientFrames`) are strict: the
vendored schemas let an object carry members they do not name, so each revision also has a
strict variant, made when it loads, in which an object schema that lists its ``properties``
and says nothing of ``additionalProperties`` refuses any other member. Open objects stay
open: ``_meta`` and the others that set ``additionalProperties``, those without
``properties``, and the parts of an ``allOf`` (each of which names only some of the members).
``validate(..., strict=True)`` checks one value so.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

DATA_DIR = Path(__file__).resolve().parent / "data"

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
#: The revisions that a client of the bridge may speak, newest first.
CLIENT_REVISIONS = (LEGACY, "2025-06-18", "2025-03-26", "2024-11-05")
REVISIONS = (*CLIENT_REVISIONS, MODERN)
#: The schema of the Tasks extension (draft), a name beside the revisions.
TASKS = "ext-tasks-draft"
SCHEMAS = (*REVISIONS, TASKS)


#: The members of a JSON-RPC frame that its envelope definition checks.
ENVELOPE = frozenset({"jsonrpc", "id"})


class FrameInvalid(AssertionError):
    """A value does not match the schema definition it was checked against."""


def schema_path(revision: str) -> Path:
    """The vendored schema file of one protocol revision (or of the Tasks extension)."""
    if revision not in SCHEMAS:
        raise ValueError(f"unknown protocol revision {revision!r}; known: {', '.join(SCHEMAS)}")
    if revision == TASKS:
        return DATA_DIR / "ext-tasks-schema-draft.json"
    return DATA_DIR / f"schema-{revision}.json"


@dataclass(frozen=True)
class _Schema:
    revision: str
    root: Mapping[str, Any]
    definitions_key: str  # "$defs" (2020-12) or "definitions" (draft-07)
    requests: Mapping[str, str]  # method -> request definition name
    notifications: Mapping[str, str]  # method -> notification definition name
    result_response: str  # "JSONRPCResultResponse", or "JSONRPCResponse" before 2025-11-25
    error_response: str  # "JSONRPCErrorResponse", or "JSONRPCError" before 2025-11-25

    @property
    def definitions(self) -> Mapping[str, Any]:
        definitions: Mapping[str, Any] = self.root[self.definitions_key]
        return definitions


def _union_members(definitions: Mapping[str, Any], *names: str) -> set[str]:
    """The definitions that the unions ``names`` (such as ``ClientRequest``) refer to."""
    members: set[str] = set()
    for name in names:
        for option in definitions.get(name, {}).get("anyOf", []):
            if isinstance(option, dict) and "$ref" in option:
                members.add(option["$ref"].rsplit("/", 1)[-1])
    return members


def _method_tables(definitions: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """Map each method to the definition whose ``method`` property is that constant.

    A definition is a request when it requires an ``id`` (2025-11-25 and later) or when
    ``ClientRequest`` or ``ServerRequest`` names it (the older revisions define a request
    as its method and params only). Union wrappers such as ``ClientNotification`` may
    repeat a constant; the specific definition (not prefixed ``Client``/``Server``) wins.
    """
    request_members = _union_members(definitions, "ClientRequest", "ServerRequest")
    found: dict[tuple[str, str], list[str]] = {}
    for name, definition in definitions.items():
        if not isinstance(definition, dict):
            continue
        method = definition.get("properties", {}).get("method", {})
        if not isinstance(method, dict) or "const" not in method:
            continue
        is_request = "id" in definition.get("required", []) or name in request_members
        kind = "request" if is_request else "notification"
        found.setdefault((kind, method["const"]), []).append(name)
    requests: dict[str, str] = {}
    notifications: dict[str, str] = {}
    for (kind, method), names in found.items():
        specific = [n for n in names if not n.startswith(("Client", "Server"))] or names
        if len(specific) != 1:
            raise ValueError(f"method {method!r} is defined by several definitions: {sorted(specific)}")
        (requests if kind == "request" else notifications)[method] = specific[0]
    return requests, notifications


@functools.cache
def _schema(revision: str) -> _Schema:
    root = json.loads(schema_path(revision).read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(root).check_schema(root)
    key = "$defs" if "$defs" in root else "definitions"
    requests, notifications = _method_tables(root[key])
    modern_names = "JSONRPCResultResponse" in root[key]
    return _Schema(
        revision,
        root,
        key,
        requests,
        notifications,
        result_response="JSONRPCResultResponse" if modern_names else "JSONRPCResponse",
        error_response="JSONRPCErrorResponse" if modern_names else "JSONRPCError",
    )


#: The members whose value is a JSON Schema of the server's (a tool's input and output, a form):
#: documents of an open vocabulary, which the strict variant leaves open.
SCHEMA_DOCUMENTS = frozenset({"inputSchema", "outputSchema", "requestedSchema"})
#: Members that the bridge sends to a client of an older revision although that revision does not
#: define them: defects of the bridge, each let through by the strict checks (and only there) until
#: it is fixed. (revision, definition, member) -> what sends it.
KNOWN_EXTRA_MEMBERS: Mapping[tuple[str, str, str], str] = {
    ("2025-06-18", "Implementation", "icons"): "serverInfo of a 2025-era server, passed through",
    ("2025-03-26", "Implementation", "icons"): "serverInfo of a 2025-era server, passed through",
    ("2024-11-05", "Implementation", "icons"): "serverInfo of a 2025-era server, passed through",
    ("2025-03-26", "CallToolResult", "structuredContent"): "tools/call of a 2025-era server, passed through",
    ("2024-11-05", "CallToolResult", "structuredContent"): "tools/call of a 2025-era server, passed through",
}
#: The keywords whose value is a mapping of names to schemas.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
#: The keywords whose value is a schema or a list of schemas.
_SCHEMA_VALUES = frozenset(
    {"items", "prefixItems", "additionalItems", "contains", "anyOf", "oneOf", "not", "if", "then", "else"}
    | {"additionalProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems"}
)


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every object in ``node``: itself first, then those inside it, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def _allof_parts(root: Mapping[str, Any]) -> set[str]:
    """The definitions that some ``allOf`` refers to: each names only part of the members."""
    found: set[str] = set()
    for node in _objects(root):
        for part in node.get("allOf", []):
            if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                found.add(part["$ref"].rsplit("/", 1)[-1])
    return found


def _documents_definitions(root: Mapping[str, Any], definitions_key: str) -> set[str]:
    """The definitions that the :data:`SCHEMA_DOCUMENTS` refer to, directly or through others."""
    definitions = root[definitions_key]
    found: set[str] = set()

    def refs(schema: Any) -> None:
        for node in _objects(schema):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[-1]
                if name not in found and name in definitions:
                    found.add(name)
                    refs(definitions[name])

    for node in _objects(root):
        members = node.get("properties")
        if isinstance(members, dict):
            for name in SCHEMA_DOCUMENTS & members.keys():
                refs(members[name])
    return found


def _meta_definitions(root: Mapping[str, Any], definitions_key: str) -> set[str]:
    """The definitions of a ``_meta`` (``MetaObject`` and its kinds in 2026-07-28): each names some
    reserved keys, and any other key is allowed."""
    found = {name for name in root[definitions_key] if name.endswith("MetaObject")}
    for node in _objects(root):
        members = node.get("properties")
        meta = members.get("_meta") if isinstance(members, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("$ref"), str):
            found.add(meta["$ref"].rsplit("/", 1)[-1])
    return found


def _admit_meta(params: dict[str, Any]) -> None:
    """The ``params`` of every request and notification may carry ``_meta`` (the base ``Request`` and
    ``Notification`` name it), though the definitions before 2025-11-25 that list their params omit it."""
    members = params.get("properties")
    if isinstance(members, dict) and "_meta" not in members:
        members["_meta"] = {"additionalProperties": {}, "type": "object"}


def strict_root(
    root: Mapping[str, Any], definitions_key: str, extra: Mapping[str, set[str]] | None = None
) -> dict[str, Any]:
    """A copy of a schema in which the objects that name their members refuse any other member.

    An object schema with ``properties`` and without ``additionalProperties`` (and without
    ``patternProperties``) gets ``additionalProperties: false``; the parts of an ``allOf`` and the
    definitions that an ``allOf`` refers to stay as they are, and so does each ``_meta`` (its own
    members are checked, but any other key is allowed). Each ``params`` admits ``_meta``,
    the :data:`SCHEMA_DOCUMENTS` stay open, and each definition named in ``extra`` admits those
    members too.
    """
    strict: dict[str, Any] = copy.deepcopy(dict(root))
    open_definitions = _allof_parts(strict) | _meta_definitions(strict, definitions_key)
    for definition, members in (extra or {}).items():
        for member in members:  # "a.b": the member b of the member a
            *path, last = member.split(".")
            node = strict[definitions_key][definition]
            for step in path:
                node = node["properties"][step]
            node.setdefault("properties", {}).setdefault(last, {})
    skipped = _documents_definitions(strict, definitions_key)

    def close(node: Any, keep_open: bool) -> None:
        if isinstance(node, list):
            for value in node:
                close(value, keep_open)
            return
        if not isinstance(node, dict):
            return
        if (
            not keep_open
            and isinstance(node.get("properties"), dict)
            and "additionalProperties" not in node
            and "patternProperties" not in node
        ):
            node["additionalProperties"] = False
        for key, value in node.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                for name, schema in value.items():
                    if key == "properties" and name in SCHEMA_DOCUMENTS:
                        continue
                    if key == definitions_key and name in skipped:
                        continue
                    if key == "properties" and name == "params" and isinstance(schema, dict):
                        _admit_meta(schema)
                    keep = (key == definitions_key and name in open_definitions) or (
                        key == "properties" and name == "_meta"
                    )
                    close(schema, keep)
            elif key == "allOf":
                close(value, True)
            elif key in _SCHEMA_VALUES:
                close(value, False)

    close(strict, False)
    return strict


@functools.cache
def _strict_schema_root(revision: str) -> dict[str, Any]:
    schema = _schema(revision)
    extra: dict[str, set[str]] = {}
    for (known_revision, definition, member), _what in KNOWN_EXTRA_MEMBERS.items():
        if known_revision == revision:
            extra.setdefault(definition, set()).add(member)
    root = strict_root(schema.root, schema.definitions_key, extra)
    jsonschema.validators.validator_for(root).check_schema(root)
    return root


@functools.cache
def _validator(revision: str, definition: str, strict: bool = False) -> Any:
    schema = _schema(revision)
    if definition not in schema.definitions:
        raise KeyError(f"schema {revision} has no definition named {definition!r}")
    root = _strict_schema_root(revision) if strict else schema.root
    cls = jsonschema.validators.validator_for(root)
    # The root plus a $ref: every internal "#/$defs/..." reference resolves against it.
    wrapped = {**root, "$ref": f"#/{schema.definitions_key}/{definition}"}
    return cls(wrapped)


def _where(error: jsonschema.exceptions.ValidationError) -> str:
    return "/" + "/".join(str(part) for part in error.absolute_path)


def validate(revision: str, value: Any, definition: str | None = None, *, strict: bool = False) -> None:
    """Check ``value`` against one definition of a revision's schema (``JSONRPCMessage`` by default).

    ``strict``: against the strict variant of the schema (see the module's docstring).

    Raises:
        FrameInvalid: the value does not match.
        KeyError: the schema has no such definition.
    """
    name = definition or "JSONRPCMessage"
    validator = _validator(revision, name, strict)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        variant = " (strict)" if strict else ""
        raise FrameInvalid(f"not a valid {revision} {name}{variant}: {error.message} (at {_where(error)})")


def validate_legacy(frame: Any, definition: str | None = None) -> None:
    """Check a value against the 2025-11-25 schema; see :func:`validate`."""
    validate(LEGACY, frame, definition)


def validate_modern(frame: Any, definition: str | None = None) -> None:
    """Check a value against the 2026-07-28 schema; see :func:`validate`."""
    validate(MODERN, frame, definition)


def validate_task(value: Any, definition: str) -> None:
    """Check a value against one definition of the Tasks extension's schema; see :func:`validate`."""
    validate(TASKS, value, definition)


def definition_for_method(revision: str, method: str, *, notification: bool = False) -> str:
    """The name of the request (or notification) definition for ``method``.

    Raises:
        KeyError: the revision has no such method.
    """
    schema = _schema(revision)
    table = schema.notifications if notification else schema.requests
    try:
        return table[method]
    except KeyError:
        kind = "notification" if notification else "request"
        raise KeyError(f"schema {revision} defines no {kind} {method!r}") from None


def result_definition_for_method(revision: str, method: str) -> tuple[str, bool]:
    """The definition a response to ``method`` must match, and whether it covers the whole frame.

    A 2026-07-28 ``XResultResponse`` describes the whole response frame (it also admits an
    ``InputRequiredResult``); otherwise ``XResult`` (or the empty ``Result``) describes
    the ``result`` member.
    """
    schema = _schema(revision)
    request = definition_for_method(revision, method)
    stem = request.removesuffix("Request")
    if f"{stem}ResultResponse" in schema.definitions:
        return f"{stem}ResultResponse", True
    if f"{stem}Result" in schema.definitions:
        return f"{stem}Result", False
    return "Result", False


def validate_frame(revision: str, frame: Any, *, request_method: str | None = None) -> list[str]:
    """Check one frame against the definition its shape calls for; return the definitions checked.

    * A request (``method`` and ``id``) matches the request definition of its method.
    * A notification (``method``, no ``id``) matches the notification definition of its method.
    * A response with ``result`` is a ``JSONRPCResultResponse`` (``JSONRPCResponse`` before
      2025-11-25); with ``request_method`` its result must also match that method's result
      type.
    * A response with ``error`` is a ``JSONRPCErrorResponse`` (``JSONRPCError`` before
      2025-11-25).

    Each check is strict: a member that the definition does not name fails it.

    Raises:
        FrameInvalid: the frame does not match, or its method is not in the schema.
    """
    if not isinstance(frame, dict):
        raise FrameInvalid(f"a {revision} frame is a JSON object, not {type(frame).__name__}")
    checked: list[str] = []

    def check(value: Any, name: str) -> None:
        validate(revision, value, name, strict=True)
        checked.append(name)

    if "method" in frame:
        is_request = "id" in frame
        check(frame, "JSONRPCRequest" if is_request else "JSONRPCNotification")
        try:
            name = definition_for_method(revision, frame["method"], notification=not is_request)
        except KeyError as exc:
            raise FrameInvalid(str(exc.args[0])) from None
        # Before 2025-11-25 a request or notification definition names only its method and
        # params: the envelope, checked above, holds the rest.
        named = _schema(revision).definitions[name].get("properties", {})
        check({key: value for key, value in frame.items() if key in named or key not in ENVELOPE}, name)
    elif "result" in frame:
        check(frame, _schema(revision).result_response)
        if request_method is not None:
            name, whole_frame = result_definition_for_method(revision, request_method)
            check(frame if whole_frame else frame["result"], name)
    elif "error" in frame:
        check(frame, _schema(revision).error_response)
    else:
        raise FrameInvalid(f"a {revision} frame needs a method, a result or an error: {sorted(frame)}")
    return checked


def validate_legacy_frame(frame: Any, *, request_method: str | None = None) -> list[str]:
    """Check a 2025-11-25 frame by its shape; see :func:`validate_frame`."""
    return validate_frame(LEGACY, frame, request_method=request_method)


def validate_modern_frame(frame: Any, *, request_method: str | None = None) -> list[str]:
    """Check a 2026-07-28 frame by its shape; see :func:`validate_frame`."""
    return validate_frame(MODERN, frame, request_method=request_method)


def methods(revision: str) -> tuple[frozenset[str], frozenset[str]]:
    """The request methods and the notification methods a revision's schema defines."""
    schema = _schema(revision)
    return frozenset(schema.requests), frozenset(schema.notifications)


class ClientFrames:
    """Check each frame that a client of ``revision`` sends and gets against that revision's schema.

    :meth:`sent` keeps the method of each request the client sends, so that
    :meth:`received` checks a response to it against the result type of that method.
    """

    def __init__(self, revision: str) -> None:
        if revision not in CLIENT_REVISIONS:
            raise ValueError(f"no client speaks {revision!r}; known: {', '.join(CLIENT_REVISIONS)}")
        self.revision = revision
        self._methods: dict[Any, str] = {}
        #: How many frames were checked, by the definition that covered the frame.
        self.checked: dict[str, int] = {}

    def sent(self, frame: Mapping[str, Any]) -> None:
        """A frame of the client: a request, whose response comes later, or anything else."""
        if "method" in frame and "id" in frame:
            self._methods[frame["id"]] = frame["method"]

    def received(self, frame: Any) -> None:
        """A frame for the client.

        Raises:
            FrameInvalid: the frame is not valid in the revision of the client.
        """
        method = None
        if isinstance(frame, dict) and "method" not in frame:
            method = self._methods.get(frame.get("id"))
        names = validate_frame(self.revision, frame, request_method=method)
        self.checked[names[-1]] = self.checked.get(names[-1], 0) + 1
