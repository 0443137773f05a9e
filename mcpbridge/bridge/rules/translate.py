"""The translation between revision 2025-11-25 of the client and 2026-07-28 of the upstream server.

This module is pure: it does no I/O, starts no thread and reads no clock. It takes JSON
values in and gives JSON values out.

Rules:

* No function changes its input. A result can be 16 MiB, so nothing is deep-copied:
  a function copies only the objects and arrays on the path to a change, and shares
  everything else with its input.
* Capabilities go through masks (:func:`client_capabilities_for_upstream`,
  :func:`initialize_result`). A member with a shape that the schema does not allow is
  dropped, never repaired. The masks drop tasks and the Tasks extension: the bridge
  declares them itself where it carries tasks (modules ``tasks`` and ``taskdriver``).
* A complete result is shaped for 2025-11-25 by :func:`shape_result`. An input
  required result is never shaped: it drives the input rounds. A result of a 2025-era
  server keeps its shape but for VS Code's needs (:func:`shape_legacy_result`).
* Whatever the upstream server sends is checked before the client sees it: icons of a
  remote server (:class:`IconRule`), log messages, progress and listen events. A value
  that does not have its shape is dropped.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, TypeGuard

from ...mcp.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND_2025
from ...mcp.protocol import (
    LEGACY,
    LOG_LEVELS,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    RESERVED_META_PREFIXES,
    SDK_OWNED_META_KEYS,
    TASKS_EXTENSION,
)
from .legacy import LIST_METHODS
from .revisions import VSCODE, Profile, negotiate, shape_initialize_result

#: A progress token of the client: each JSON scalar except ``null``.
ProgressToken = str | int | float | bool

#: The name of the profile: the last fallback of ``serverInfo.name``.
PROFILE_NAME: Final = "mcp-bridge-vscode"


class IconRule(enum.Enum):
    """Which icons of the upstream server reach the client.

    VS Code ignores the http(s) icons of a stdio server and trusts its ``file:`` icons.
    A remote server must not gain that local trust, so its icons are limited to
    ``data:`` URIs.
    """

    #: Keep every icon (a stdio upstream server).
    ALL = "all"
    #: Keep only icons whose ``src`` starts with ``data:`` (an upstream server at a URL).
    DATA_ONLY = "data_only"


# --------------------------------------------------------------------------- capabilities


def _objects_only(value: Any, drop: str | None = None) -> dict[str, Any] | None:
    """The members of ``value`` whose values are objects, without ``drop``; ``None`` if none."""
    if not isinstance(value, dict):
        return None
    out = {key: item for key, item in value.items() if isinstance(item, dict) and key != drop}
    return out or None


def _settings(value: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The members ``keys`` of ``value`` whose values are objects (settings objects)."""
    return {key: value[key] for key in keys if isinstance(value.get(key), dict)}


def client_capabilities_for_upstream(caps: Any) -> dict[str, Any]:
    """The client capabilities of 2026-07-28 for the capabilities of the client's ``initialize``.

    - ``experimental``: only the members whose values are objects; omitted when empty.
    - ``roots``: ``{}`` (2026-07-28 has no ``listChanged``); dropped when not an object.
    - ``sampling``: ``context`` and ``tools`` only when the client declared them as objects.
    - ``elicitation``: the modes ``form`` and ``url`` that are objects; ``{}`` stays
      ``{}`` (form only).
    - ``extensions``: the members that are objects, without the Tasks extension.
    - ``tasks`` and every other member: dropped.
    """
    out: dict[str, Any] = {}
    if not isinstance(caps, dict):
        return out
    experimental = _objects_only(caps.get("experimental"))
    if experimental is not None:
        out["experimental"] = experimental
    if isinstance(caps.get("roots"), dict):
        out["roots"] = {}
    sampling = caps.get("sampling")
    if isinstance(sampling, dict):
        out["sampling"] = _settings(sampling, ("context", "tools"))
    elicitation = caps.get("elicitation")
    if isinstance(elicitation, dict):
        out["elicitation"] = _settings(elicitation, ("form", "url"))
    extensions = _objects_only(caps.get("extensions"), drop=TASKS_EXTENSION)
    if extensions is not None:
        out["extensions"] = extensions
    return out


# --------------------------------------------------------------------------- initialize


@dataclass(frozen=True, slots=True)
class Declared:
    """The notifications that the initialize result declares to the client.

    A flag counts only when its value is JSON ``true``; ``logging`` counts when it is an
    object.
    """

    tools: bool = False
    prompts: bool = False
    resources: bool = False
    subscribe: bool = False
    logging: bool = False

    @property
    def listens(self) -> bool:
        """True when the client can get a list change or a resource update."""
        return self.tools or self.prompts or self.resources or self.subscribe


_SERVER_INFO_KEYS = ("name", "title", "version", "icons", "description", "websiteUrl")


def _flag(capability: Any, key: str) -> bool:
    return isinstance(capability, dict) and capability.get(key) is True


def declared_notifications(init_result: Any) -> Declared:
    """The notifications that an initialize result (or a discover result) declares."""
    caps = init_result.get("capabilities") if isinstance(init_result, dict) else None
    if not isinstance(caps, dict):
        return Declared()
    return Declared(
        tools=_flag(caps.get("tools"), "listChanged"),
        prompts=_flag(caps.get("prompts"), "listChanged"),
        resources=_flag(caps.get("resources"), "listChanged"),
        subscribe=_flag(caps.get("resources"), "subscribe"),
        logging=isinstance(caps.get("logging"), dict),
    )


def _server_capabilities(caps: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(caps, dict):
        return out
    for key in ("experimental", "logging", "completions", "prompts", "resources", "tools"):
        if isinstance(caps.get(key), dict):
            out[key] = caps[key]
    extensions = _objects_only(caps.get("extensions"), drop=TASKS_EXTENSION)
    if extensions is not None:
        out["extensions"] = extensions
    return out


def _valid_implementation(info: Any) -> TypeGuard[dict[str, Any]]:
    """True when ``info`` has the shape of an ``Implementation`` with a name that is not empty."""
    if not isinstance(info, dict):
        return False
    name = info.get("name")
    if not isinstance(name, str) or not name or not isinstance(info.get("version"), str):
        return False
    if any(key in info and not isinstance(info[key], str) for key in ("title", "description", "websiteUrl")):
        return False
    icons = info.get("icons")
    return icons is None or (
        isinstance(icons, list) and all(isinstance(i, dict) and isinstance(i.get("src"), str) for i in icons)
    )


def _server_info(
    discover_result: dict[str, Any], fallback_name: str, version: str, icon_rule: IconRule
) -> dict[str, Any]:
    meta = discover_result.get("_meta")
    candidates = (
        meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None,
        discover_result.get("serverInfo"),
    )
    for info in candidates:
        if _valid_implementation(info):
            out = {key: info[key] for key in _SERVER_INFO_KEYS if key in info}
            return _filter_icons(out, icon_rule)
    return {"name": fallback_name or PROFILE_NAME, "version": version}


def initialize_result(
    discover_result: Any,
    *,
    fallback_name: str,
    version: str,
    icon_rule: IconRule,
    protocol_version: str = LEGACY,
) -> dict[str, Any]:
    """The 2025-11-25 result of ``initialize`` for the upstream ``server/discover`` result.

    - ``protocolVersion``: ``protocol_version``, the revision negotiated with the client
      (:func:`~.revisions.negotiate`).
    - ``capabilities``: ``experimental``, ``logging``, ``completions``, ``prompts``,
      ``resources``, ``tools`` when they are objects, and ``extensions`` without the
      Tasks extension. Never ``tasks``.
    - ``serverInfo``: from ``_meta["io.modelcontextprotocol/serverInfo"]`` (else a
      body-level ``serverInfo``) when it is a valid ``Implementation`` with a name, with
      only ``name``, ``title``, ``version``, ``icons``, ``description`` and
      ``websiteUrl``; else ``{"name": fallback_name, "version": version}``, with the
      profile name when ``fallback_name`` is empty.
    - ``instructions``: when it is a string.

    A client of an older revision gets only what its revision defines
    (:func:`~.revisions.shape_initialize_result`).

    Never ``resultType``, ``ttlMs``, ``cacheScope``, ``supportedVersions`` or ``_meta``.
    """
    discover = discover_result if isinstance(discover_result, dict) else {}
    result: dict[str, Any] = {
        "protocolVersion": protocol_version,
        "capabilities": _server_capabilities(discover.get("capabilities")),
        "serverInfo": _server_info(discover, fallback_name, version, icon_rule),
    }
    if isinstance(discover.get("instructions"), str):
        result["instructions"] = discover["instructions"]
    return shape_initialize_result(negotiate(protocol_version), result)


# --------------------------------------------------------------------------- forwarded requests

def _spelled(word: str, first: Callable[[str], bool], inner: str) -> bool:
    """True when ``word`` is not empty, starts with a ``first`` character, ends with a letter or digit.

    Every character is ASCII: a letter, a digit or one of ``inner``.
    """
    return (
        bool(word)
        and word[0].isascii()
        and first(word[0])
        and word[-1].isascii()
        and word[-1].isalnum()
        and all(c.isascii() and (c.isalnum() or c in inner) for c in word)
    )


def valid_meta_key(key: str) -> bool:
    """True when ``key`` follows the ``_meta`` key grammar of MCP.

    An optional prefix of dot-separated labels and ``/`` (each label starts with a
    letter, ends with a letter or digit, and has letters, digits and ``-``), then a name
    that starts and ends with a letter or digit and has letters, digits, ``-``, ``_``
    and ``.``.
    """
    prefix, slash, name = key.partition("/")
    if not slash:
        prefix, name = "", key
    elif not prefix or not all(_spelled(label, str.isalpha, "-") for label in prefix.split(".")):
        return False
    return _spelled(name, str.isalnum, "-_.")


def reserved_meta_key(key: str) -> bool:
    """True when ``key`` belongs to the protocol: ``progressToken``, or a prefix whose
    second label is ``modelcontextprotocol`` or ``mcp`` (for example ``vscode.mcp/x``)."""
    if key in SDK_OWNED_META_KEYS or key.startswith(RESERVED_META_PREFIXES):
        return True
    prefix, slash, _ = key.partition("/")
    labels = prefix.split(".")
    return bool(slash) and len(labels) >= 2 and labels[1] in ("modelcontextprotocol", "mcp")


def pass_meta(meta: Any, profile: Profile = VSCODE) -> dict[str, Any]:
    """The ``_meta`` entries of the client that go to the upstream server.

    A key passes when the host profile allows it (VS Code's: ``traceparent``,
    ``tracestate``, or the prefix ``vscode.``; the generic one: each key), it follows the
    key grammar, and the protocol does not own it. One key that is not valid is dropped,
    so it does not fail the whole request. The values stay as they are.
    """
    if not isinstance(meta, dict):
        return {}
    return {
        key: value
        for key, value in meta.items()
        if profile.passes_meta(key) and valid_meta_key(key) and not reserved_meta_key(key)
    }


def progress_token(meta: Any) -> ProgressToken | None:
    """The ``progressToken`` of the client's ``_meta``: each JSON scalar except ``null``.

    The integer 0 and the booleans are tokens too: the client gets its token back as it
    sent it.
    """
    if not isinstance(meta, dict):
        return None
    token = meta.get("progressToken")
    return token if isinstance(token, (str, int, float)) else None


def forward_params(
    params: Any, profile: Profile = VSCODE
) -> tuple[dict[str, Any], ProgressToken | None, dict[str, Any]]:
    """The params of a forwarded request, the client's progress token and the ``_meta`` to pass.

    The params lose ``_meta`` (the upstream client writes its own; :func:`pass_meta` under
    ``profile`` picks the keys that go on) and ``task`` (the bridge declares no tasks).
    Missing params give ``{}``.
    """
    if not isinstance(params, dict):
        return {}, None, {}
    meta = params.get("_meta")
    out = {key: value for key, value in params.items() if key not in ("_meta", "task")}
    if meta is None:
        return out, None, {}
    return out, progress_token(meta), pass_meta(meta, profile)


# --------------------------------------------------------------------------- results

#: The deepest schema that the walk of the input schemas examines (the root is 0).
MAX_SCHEMA_DEPTH: Final = 64

#: The keywords whose value is one schema, in the order of the walk.
SCHEMA_KEYWORDS: Final = ("additionalProperties", "not", "if", "then", "else", "contains")
#: The keywords whose value is an object of schemas. The members of ``dependencies`` can
#: also be arrays of names; the walk skips them.
SCHEMA_MAP_KEYWORDS: Final = (
    "properties",
    "patternProperties",
    "dependencies",
    "dependentSchemas",
    "$defs",
    "definitions",
)
#: The keywords whose value is an array of schemas.
SCHEMA_ARRAY_KEYWORDS: Final = ("anyOf", "allOf", "oneOf", "prefixItems")

_DROPPED_RESULT_KEYS: Final = frozenset({"resultType", "ttlMs", "cacheScope"})

#: Where each list result keeps its items (for the icon rule).
_LIST_ITEMS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "tools/list": "tools",
        "prompts/list": "prompts",
        "resources/list": "resources",
        "resources/templates/list": "resourceTemplates",
    }
)


def _pointer_token(token: str) -> str:
    """One reference token of an RFC 6901 JSON pointer."""
    return "/" + token.replace("~", "~0").replace("/", "~1")


def _falsy_in_javascript(value: Any) -> bool:
    """True for ``null``, ``0``, ``-0``, ``NaN`` and ``""``: no schema, and false in JavaScript.

    ``false`` is a schema (one that accepts nothing) and has its own rule.
    """
    if value is None or value == "":
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value == 0 or math.isnan(value)
    return False


class _ArrayItemsWalk:
    """Give each array schema of one input schema a truthy ``items`` (the quirk R6).

    The Copilot extension of VS Code stops every chat request when a tool schema has
    ``type: "array"`` without a truthy ``items``. Only a node whose ``type`` is exactly
    the string ``"array"`` changes:

    - no ``items``, or ``items`` false in JavaScript but not ``false``: add ``items: {}``;
    - ``items: false``: set ``items: {}``, and without ``maxItems`` add ``maxItems`` = the
      length of ``prefixItems`` (0 without it; none when it is not an array), so that
      the schema accepts the same arrays as before.

    The walk copies each node on the path to a change and returns the input unchanged
    when there is nothing to fix, so a second walk finds nothing.
    """

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.notes: list[str] = []

    def walk(self, node: Any, depth: int, pointer: str) -> Any:
        # A boolean schema, an empty schema or a value that is not a schema has nothing
        # to change; this also skips the `items: {}` that the walk adds.
        if not isinstance(node, dict) or not node:
            return node
        if depth > MAX_SCHEMA_DEPTH:
            self.notes.append(f"tool '{self.tool}': the input schema at '{pointer}' is too deep to examine")
            return node
        out = self._fix_items(node, pointer)
        changes: dict[str, Any] = {}
        for key in SCHEMA_KEYWORDS:
            if key in out:
                changes[key] = self.walk(out[key], depth + 1, pointer + _pointer_token(key))
        for key in SCHEMA_MAP_KEYWORDS:
            if isinstance(out.get(key), dict):
                changes[key] = self._walk_map(out[key], depth, pointer + _pointer_token(key))
        for key in SCHEMA_ARRAY_KEYWORDS:
            if isinstance(out.get(key), list):
                changes[key] = self._walk_list(out[key], depth, pointer + _pointer_token(key))
        items = out.get("items")
        if isinstance(items, dict):
            changes["items"] = self.walk(items, depth + 1, pointer + "/items")
        elif isinstance(items, list):  # the tuple form of draft-07: one schema per position
            changes["items"] = self._walk_list(items, depth, pointer + "/items")
        changes = {key: value for key, value in changes.items() if value is not out[key]}
        if not changes:
            return out
        return {**out, **changes}

    def _walk_map(self, schemas: dict[str, Any], depth: int, pointer: str) -> dict[str, Any]:
        out = schemas
        for name, child in schemas.items():
            new = self.walk(child, depth + 1, pointer + _pointer_token(name))
            if new is not child:
                if out is schemas:
                    out = dict(schemas)
                out[name] = new
        return out

    def _walk_list(self, schemas: list[Any], depth: int, pointer: str) -> list[Any]:
        out = schemas
        for index, child in enumerate(schemas):
            new = self.walk(child, depth + 1, f"{pointer}/{index}")
            if new is not child:
                if out is schemas:
                    out = list(schemas)
                out[index] = new
        return out

    def _fix_items(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        if node.get("type") != "array":
            return node
        items = node.get("items", None)
        if "items" in node and items is False:
            out = dict(node)
            out["items"] = {}
            if "maxItems" not in node:
                prefix = node.get("prefixItems")
                if "prefixItems" not in node:
                    out["maxItems"] = 0
                elif isinstance(prefix, list):
                    out["maxItems"] = len(prefix)
        elif "items" not in node or _falsy_in_javascript(items):
            out = dict(node)
            out["items"] = {}
        else:
            return node
        self.notes.append(f"tool '{self.tool}': added an items schema at '{pointer}' of the input schema")
        return out


def _shape_tools(tools: list[Any]) -> tuple[list[Any], list[str]]:
    """The tools of a ``tools/list`` page with the quirk R6 and without non-object output schemas.

    ``drop_non_object_output_schema``: the TypeScript SDK 1.x refuses a whole
    ``tools/list`` when one ``outputSchema`` is not an object schema, so an output schema
    whose ``type`` is not the string ``"object"`` goes away.
    """
    notes: list[str] = []
    out = tools
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            continue
        new = tool
        if "inputSchema" in tool:
            name = tool.get("name")
            walk = _ArrayItemsWalk(name if isinstance(name, str) else "")
            schema = walk.walk(tool["inputSchema"], 0, "")
            notes.extend(walk.notes)
            if schema is not tool["inputSchema"]:
                new = dict(tool)
                new["inputSchema"] = schema
        if "outputSchema" in new:
            output = new["outputSchema"]
            if not (isinstance(output, dict) and output.get("type") == "object"):
                new = {key: value for key, value in new.items() if key != "outputSchema"}
        if new is not tool:
            if out is tools:
                out = list(tools)
            out[index] = new
    return out, notes


def _dumps(value: Any) -> str:
    """The compact JSON text of ``value``, as a JSON writer of the upstream side writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _shape_call(result: dict[str, Any]) -> None:
    """Give a ``tools/call`` result a ``content`` array and a text mirror of ``structuredContent``.

    2025-11-25 requires ``content``. A tool that returns structured content should also
    return it as text, and clients of 2025-11-25 show only ``content``: without a text
    block, the serialized ``structuredContent`` (any JSON type; ``null`` counts as none)
    is appended. ``structuredContent`` itself stays as it is. Changes ``result`` (a copy).
    """
    content = result.get("content")
    if not isinstance(content, list):
        content = []
        result["content"] = content
    structured = result.get("structuredContent")
    if structured is None:
        return
    if any(isinstance(block, dict) and block.get("type") == "text" for block in content):
        return
    result["content"] = [*content, {"type": "text", "text": _dumps(structured)}]


def _data_icon(icon: Any) -> bool:
    if not isinstance(icon, dict):
        return False
    src = icon.get("src")
    return isinstance(src, str) and src[:5].lower() == "data:"


def _filter_icons(item: dict[str, Any], icon_rule: IconRule) -> dict[str, Any]:
    """``item`` with only its ``data:`` icons under :attr:`IconRule.DATA_ONLY`.

    An ``icons`` member that is not an array, or that has no ``data:`` icon left, goes
    away. Returns ``item`` itself when nothing changes.
    """
    if icon_rule is IconRule.ALL or "icons" not in item:
        return item
    icons = item["icons"]
    if isinstance(icons, list):
        kept = [icon for icon in icons if _data_icon(icon)]
        if len(kept) == len(icons) and kept:
            return item
        if kept:
            return {**item, "icons": kept}
    return {key: value for key, value in item.items() if key != "icons"}


def _map_list(values: list[Any], change: Callable[[Any], Any]) -> list[Any]:
    """``values`` with ``change`` applied to each element; the same list when nothing changes."""
    out = values
    for index, value in enumerate(values):
        new = change(value)
        if new is not value:
            if out is values:
                out = list(values)
            out[index] = new
    return out


def _filter_link_icons(block: Any, icon_rule: IconRule) -> Any:
    if isinstance(block, dict) and block.get("type") == "resource_link":
        return _filter_icons(block, icon_rule)
    return block


def _filter_message_icons(message: Any, icon_rule: IconRule) -> Any:
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    if isinstance(content, list):
        new: Any = _map_list(content, lambda block: _filter_link_icons(block, icon_rule))
    else:
        new = _filter_link_icons(content, icon_rule)
    return message if new is content else {**message, "content": new}


def _apply_icon_rule(method: str, result: dict[str, Any], icon_rule: IconRule) -> None:
    """Filter the icons of the items, links and messages of ``result`` (a copy) in place."""
    if icon_rule is IconRule.ALL:
        return
    key = _LIST_ITEMS.get(method)
    if key is not None and isinstance(result.get(key), list):
        result[key] = _map_list(
            result[key], lambda item: _filter_icons(item, icon_rule) if isinstance(item, dict) else item
        )
    elif method == "tools/call" and isinstance(result.get("content"), list):
        result["content"] = _map_list(result["content"], lambda block: _filter_link_icons(block, icon_rule))
    elif method == "prompts/get" and isinstance(result.get("messages"), list):
        result["messages"] = _map_list(result["messages"], lambda msg: _filter_message_icons(msg, icon_rule))


def _is_object(value: object) -> bool:
    return isinstance(value, dict)


def shape_result(
    method: str, result: dict[str, Any], *, icon_rule: IconRule
) -> tuple[dict[str, Any], list[str]]:
    """The 2025-11-25 result for the client from a complete upstream result of ``method``.

    1. ``resultType``, ``ttlMs``, ``cacheScope`` and ``_meta["io.modelcontextprotocol/serverInfo"]``
       go away; so does a ``_meta`` that becomes empty or is not an object.
    2. A list result loses a ``nextCursor`` that is not a string: VS Code keeps asking for
       pages while ``nextCursor`` is present, even when it is ``null``.
    3. ``tools/list``: the quirk R6 on each ``inputSchema`` (see :class:`_ArrayItemsWalk`),
       then each ``outputSchema`` that is not an object schema goes away.
    4. ``tools/call``: ``content`` is always an array, and it gets a text mirror of
       ``structuredContent`` when it has no text block.
    5. The icon rule (:class:`IconRule`) on the items of the lists, the ``resource_link``
       blocks of ``tools/call`` and the ``resource_link`` content of ``prompts/get``.

    Returns the shaped result and one info line for each change to a tool schema, for
    example ``tool 'bare_array': added an items schema at '/properties/values' of the
    input schema``. ``result`` does not change; the shaped result shares every part that
    did not change with it.
    """
    if not _is_object(result):  # the upstream client refuses such results; stay total anyway
        return result, []
    out = {key: value for key, value in result.items() if key not in _DROPPED_RESULT_KEYS}
    _drop_meta_key(out, META_SERVER_INFO)
    if "nextCursor" in out and method in LIST_METHODS and not isinstance(out["nextCursor"], str):
        del out["nextCursor"]
    notes: list[str] = []
    if method == "tools/call":
        _shape_call(out)
    elif method == "tools/list" and isinstance(out.get("tools"), list):
        out["tools"], notes = _shape_tools(out["tools"])
    if icon_rule is not IconRule.ALL:
        _apply_icon_rule(method, out, icon_rule)
    return out, notes


def shape_legacy_result(
    method: str, result: dict[str, Any], *, icon_rule: IconRule
) -> tuple[dict[str, Any], list[str]]:
    """The result of a 2025-era upstream server for the client: as the server wrote it,
    but for the rules of :func:`shape_result` that VS Code needs of every server:

    * rule 2: a list result loses a ``nextCursor`` that is not a string;
    * rule 3: the schema repairs of ``tools/list``;
    * rule 5: the icon rule.

    Rules 1 and 4 translate 2026-07-28 and stay out: no member goes away, and a
    ``tools/call`` result gets neither a ``content`` array nor a text copy of its
    ``structuredContent`` (a 2025-era server wrote it for a client of its own era).
    Returns ``result`` itself when nothing changes, and the notes of the schema repairs.
    """
    if not _is_object(result):
        return result, []
    out = dict(result)
    if "nextCursor" in out and method in LIST_METHODS and not isinstance(out["nextCursor"], str):
        del out["nextCursor"]
    notes: list[str] = []
    if method == "tools/list" and isinstance(out.get("tools"), list):
        out["tools"], notes = _shape_tools(out["tools"])
    if icon_rule is not IconRule.ALL:
        _apply_icon_rule(method, out, icon_rule)
    if out.keys() == result.keys() and all(out[key] is result[key] for key in out):
        return result, notes
    return out, notes


# --------------------------------------------------------------------------- notifications and errors

#: The rank of each log level: a message passes when its rank is at least the client's.
LOG_LEVEL_ORDER: Final[Mapping[str, int]] = MappingProxyType(
    {level: rank for rank, level in enumerate(LOG_LEVELS)}
)


def log_passes(level: str, threshold: str | None) -> bool:
    """True when a message at ``level`` reaches a client whose last ``logging/setLevel`` was ``threshold``.

    Without a threshold every valid level passes; an unknown level never does.
    """
    rank = LOG_LEVEL_ORDER.get(level)
    if rank is None:
        return False
    return threshold is None or rank >= LOG_LEVEL_ORDER.get(threshold, 0)


def log_params(upstream_params: Any) -> dict[str, Any] | None:
    """The params of ``notifications/message`` for the client, or ``None`` to drop it.

    Exactly ``level``, ``logger`` (when present) and ``data``; the upstream ``_meta`` goes
    away. ``level`` must be a log level, ``logger`` a string and ``data`` present.
    """
    if not isinstance(upstream_params, dict) or "data" not in upstream_params:
        return None
    level = upstream_params.get("level")
    if not isinstance(level, str) or level not in LOG_LEVEL_ORDER:
        return None
    out: dict[str, Any] = {"level": level}
    if "logger" in upstream_params:
        logger = upstream_params["logger"]
        if not isinstance(logger, str):
            return None
        out["logger"] = logger
    out["data"] = upstream_params["data"]
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def progress_params(client_token: ProgressToken, upstream_params: Any) -> dict[str, Any] | None:
    """The params of ``notifications/progress`` for the client, or ``None`` to drop it.

    The upstream token (the upstream request id) becomes the client's token. ``progress``
    must be a number; ``total`` (a number) and ``message`` (a string) pass when they have
    their type. ``_meta`` goes away.
    """
    if not isinstance(upstream_params, dict) or not _is_number(upstream_params.get("progress")):
        return None
    out: dict[str, Any] = {"progressToken": client_token, "progress": upstream_params["progress"]}
    if _is_number(upstream_params.get("total")):
        out["total"] = upstream_params["total"]
    if isinstance(upstream_params.get("message"), str):
        out["message"] = upstream_params["message"]
    return out


#: The notifications of a listen stream that reach the client.
LISTEN_EVENTS: Final = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


def _drop_meta_key(out: dict[str, Any], key: str) -> None:
    """Take ``key`` out of the ``_meta`` of ``out``; a ``_meta`` that becomes empty or is not an object goes.

    A ``_meta`` with ``key`` is replaced by a copy: the object of the upstream does not change.
    """
    if "_meta" in out:
        meta = out["_meta"]
        if isinstance(meta, dict) and key in meta:
            meta = {name: value for name, value in meta.items() if name != key}
            out["_meta"] = meta
        if not isinstance(meta, dict) or not meta:
            del out["_meta"]


def listen_event(notification_method: str, params: Any) -> tuple[str, dict[str, Any] | None] | None:
    """The notification for the client from an event of a listen stream, or ``None`` to drop it.

    Only the three list changes and ``notifications/resources/updated`` pass; the
    acknowledgment, ``notifications/cancelled`` (its ids can equal the client's),
    progress, log messages and everything else stay in the bridge. The subscription id
    leaves ``_meta``; an empty ``_meta`` and empty params go away, so a list change goes
    out without ``params``. ``resources/updated`` needs a string ``uri``. Params that
    are not an object drop the event.
    """
    if notification_method not in LISTEN_EVENTS:
        return None
    if params is None:
        out: dict[str, Any] = {}
    elif isinstance(params, dict):
        out = dict(params)
    else:
        return None
    _drop_meta_key(out, META_SUBSCRIPTION_ID)
    if notification_method == "notifications/resources/updated" and not isinstance(out.get("uri"), str):
        return None
    return notification_method, (out or None)


def refused_state_text(method: str, upstream_message: str) -> str:
    """The text for the client when the upstream server refused the ``requestState`` of a round.

    ``tools/call`` gets it in an ``isError`` result; other methods get it as the error
    message.
    """
    message = upstream_message.rstrip()
    if message.endswith("."):
        message = message[:-1]
    again = "Run the tool again." if method == "tools/call" else "Send the request again."
    return (
        "The upstream server did not accept the saved state of the request. The answer possibly came "
        "after the time limit of the state, or the server started again. "
        f"Upstream message: {message}. {again}"
    )


def legacy_error(method: str, error_obj: dict[str, Any]) -> dict[str, Any]:
    """An upstream error object in the terms of 2025-11-25.

    2026-07-28 reports a missing resource of ``resources/read`` as -32602 with the
    ``uri`` in ``data``; 2025-11-25 uses -32002. Message and data stay. Each other error
    passes unchanged (also an upstream -32002).
    """
    data = error_obj.get("data")
    if (
        method == "resources/read"
        and error_obj.get("code") == INVALID_PARAMS
        and isinstance(data, dict)
        and isinstance(data.get("uri"), str)
    ):
        return {**error_obj, "code": RESOURCE_NOT_FOUND_2025}
    return error_obj


def initialize_icons(result: dict[str, Any], icon_rule: IconRule) -> dict[str, Any]:
    """The ``initialize`` result of a 2025-era upstream with the icon rule on its ``serverInfo``.

    Everything else passes as the server sent it. ``result`` does not change.
    """
    info = result.get("serverInfo")
    if icon_rule is IconRule.ALL or not isinstance(info, dict) or "icons" not in info:
        return result
    return {**result, "serverInfo": _filter_icons(info, icon_rule)}
