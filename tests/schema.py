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
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
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


@functools.cache
def _validator(revision: str, definition: str) -> Any:
    schema = _schema(revision)
    if definition not in schema.definitions:
        raise KeyError(f"schema {revision} has no definition named {definition!r}")
    cls = jsonschema.validators.validator_for(schema.root)
    # The root plus a $ref: every internal "#/$defs/..." reference resolves against it.
    wrapped = {**schema.root, "$ref": f"#/{schema.definitions_key}/{definition}"}
    return cls(wrapped)


def _where(error: jsonschema.exceptions.ValidationError) -> str:
    return "/" + "/".join(str(part) for part in error.absolute_path)


def validate(revision: str, value: Any, definition: str | None = None) -> None:
    """Check ``value`` against one definition of a revision's schema (``JSONRPCMessage`` by default).

    Raises:
        FrameInvalid: the value does not match.
        KeyError: the schema has no such definition.
    """
    name = definition or "JSONRPCMessage"
    validator = _validator(revision, name)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        raise FrameInvalid(f"not a valid {revision} {name}: {error.message} (at {_where(error)})")


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

    Raises:
        FrameInvalid: the frame does not match, or its method is not in the schema.
    """
    if not isinstance(frame, dict):
        raise FrameInvalid(f"a {revision} frame is a JSON object, not {type(frame).__name__}")
    checked: list[str] = []

    def check(value: Any, name: str) -> None:
        validate(revision, value, name)
        checked.append(name)

    if "method" in frame:
        is_request = "id" in frame
        check(frame, "JSONRPCRequest" if is_request else "JSONRPCNotification")
        try:
            name = definition_for_method(revision, frame["method"], notification=not is_request)
        except KeyError as exc:
            raise FrameInvalid(str(exc.args[0])) from None
        check(frame, name)
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
