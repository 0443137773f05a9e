"""The revisions of MCP that the bridge serves to its client, and the profiles of the hosts.

This module is pure: it does no I/O, starts no thread and reads no clock. It takes JSON
values in and gives JSON values out, and never changes its input.

Revisions
---------

The client asks for a revision in ``initialize``. The bridge answers with that revision
when it serves it (:data:`REVISIONS`: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05),
else with :data:`LATEST`, as the version negotiation of MCP says: a client that does not
know the answered revision disconnects. :mod:`.translate` makes every frame for 2025-11-25;
this module narrows it to the revision of the client:

* The capabilities of the client are read in the terms of its revision
  (:func:`client_capabilities`): a kind of input request, or the tasks, that the revision
  does not have are not declared, so the upstream server is never told that the client
  takes them and the client is never asked for them.
* What the revision does not define is left out where its schema forbids it: a content
  block of a kind that it does not have leaves a ``tools/call`` result, and a prompt
  message of such a kind leaves a ``prompts/get`` result; a listed tool, prompt, resource
  or template keeps only the members that the revision defines of it, and a
  ``structuredContent`` that the revision does not have reaches the client as the text
  of the content (:func:`shape_result`). The initialize result keeps only the capabilities and the
  members of ``serverInfo`` that the revision defines (:func:`shape_initialize_result`),
  and a progress notification only its params (:func:`shape_notification`).
* An input request that the capabilities cannot rule out but the revision cannot carry
  (a multi-select field of a form, a sampling message of several blocks) is refused
  (:func:`adapt_input_request` raises :class:`NotCarried`): the upstream server gets the
  answer of a refused request, and the log says why.

Profiles
--------

A :class:`Profile` keeps what is particular to a host: the ``_meta`` keys of the client
that go upstream, and how strictly a result follows the schema. :data:`VSCODE` is the
profile of VS Code and the default; :data:`GENERIC` serves every other host.
:func:`choose_profile` picks one from the client's ``initialize``, unless the user forced
one. The revision is not part of a profile: every host gets the revision it asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, Final

from ...mcp.errorbase import PeerFault
from ...mcp.protocol import ELICITATION_CREATE, LEGACY, SAMPLING_CREATE_MESSAGE

__all__ = [
    "GENERIC",
    "HOST_PROFILES",
    "LATEST",
    "OTHER_HOSTS",
    "REVISIONS",
    "VSCODE",
    "NotCarried",
    "Profile",
    "Revision",
    "adapt_input_request",
    "choose_profile",
    "client_capabilities",
    "negotiate",
    "shape_initialize_result",
    "shape_notification",
    "shape_result",
]


# --------------------------------------------------------------------------- revisions


@dataclass(frozen=True, slots=True)
class Revision:
    """What one revision of MCP defines of the frames that the bridge sends to its client."""

    #: The revision, for example ``2025-06-18``.
    version: str
    #: ``elicitation/create`` in form mode (from 2025-06-18).
    form_elicitation: bool = False
    #: URL mode, ``elicitationId`` and ``notifications/elicitation/complete`` (2025-11-25).
    url_elicitation: bool = False
    #: The titled single-select and the multi-select fields of a form (2025-11-25).
    choice_fields: bool = False
    #: Sampling with tools: ``tools``, ``toolChoice``, tool blocks, and a message of
    #: several blocks (2025-11-25).
    sampling_tools: bool = False
    #: Tasks of the client: ``capabilities.tasks`` and the ``tasks/*`` requests (2025-11-25).
    tasks: bool = False
    #: ``resource_link`` content blocks (from 2025-06-18).
    resource_links: bool = False
    #: ``audio`` content blocks (from 2025-03-26).
    audio: bool = False
    #: ``capabilities.completions`` of the initialize result (from 2025-03-26).
    completions: bool = False
    #: ``message`` in the params of ``notifications/progress`` (from 2025-03-26).
    progress_message: bool = False
    #: ``structuredContent`` of a ``tools/call`` result (from 2025-06-18).
    structured_content: bool = False
    #: The members of ``serverInfo`` (an ``Implementation``); ``None``: every member.
    server_info_keys: frozenset[str] | None = frozenset({"name", "version"})
    #: The members of each item of a list result, by the name of the list in the result
    #: (``tools``, ``prompts``, ``resources``, ``resourceTemplates``), and of each argument
    #: of a prompt (``arguments``); ``None``: every member.
    members: Mapping[str, frozenset[str]] | None = field(default=None, hash=False)

    def __str__(self) -> str:
        return self.version


#: The members of the listed items that every served revision defines.
_BASE_MEMBERS: Final = {
    "tools": {"name", "description", "inputSchema"},
    "prompts": {"name", "description", "arguments"},
    "arguments": {"name", "description", "required"},
    "resources": {"uri", "name", "description", "mimeType", "size", "annotations"},
    "resourceTemplates": {"uriTemplate", "name", "description", "mimeType", "annotations"},
    # The content blocks, by their type, the contents of a resource, and the annotations.
    "text": {"type", "text", "annotations"},
    "image": {"type", "data", "mimeType", "annotations"},
    "audio": {"type", "data", "mimeType", "annotations"},
    "resource": {"type", "resource", "annotations"},
    "resource_link": {"type", "uri", "name", "description", "mimeType", "size", "annotations"},
    "contents": {"uri", "mimeType", "text", "blob"},
    "annotations": {"audience", "priority"},
}
#: The items that have a ``_meta`` from 2025-06-18.
_META_FROM_2025_06_18: Final = frozenset(_BASE_MEMBERS) - {"tools", "arguments", "annotations"}


def _members(
    tools: set[str] | None = None, *, titles: bool = False, meta: bool = False
) -> Mapping[str, frozenset[str]]:
    """The members of :attr:`Revision.members` for a revision before 2025-11-25.

    ``tools``: the members of a tool beside those of every revision; ``titles``: a
    ``title`` for prompts, their arguments, resources, templates and resource links;
    ``meta``: the ``_meta`` of those and of content blocks and resource contents, and the
    ``lastModified`` of annotations (2025-06-18).
    """
    out = {name: set(keys) for name, keys in _BASE_MEMBERS.items()}
    out["tools"] |= tools or set()
    for name in ("prompts", "arguments", "resources", "resourceTemplates", "resource_link"):
        out[name] |= {"title"} if titles else set()
    for name in _META_FROM_2025_06_18:
        out[name] |= {"_meta"} if meta else set()
    out["annotations"] |= {"lastModified"} if meta else set()
    return MappingProxyType({name: frozenset(keys) for name, keys in out.items()})


#: The revisions that the bridge serves, newest first.
REVISIONS: Final[Mapping[str, Revision]] = MappingProxyType(
    {
        revision.version: revision
        for revision in (
            Revision(
                LEGACY,
                form_elicitation=True,
                url_elicitation=True,
                choice_fields=True,
                sampling_tools=True,
                tasks=True,
                resource_links=True,
                audio=True,
                completions=True,
                progress_message=True,
                structured_content=True,
                server_info_keys=None,
            ),
            Revision(
                "2025-06-18",
                form_elicitation=True,
                resource_links=True,
                audio=True,
                completions=True,
                progress_message=True,
                structured_content=True,
                server_info_keys=frozenset({"name", "title", "version"}),
                members=_members(
                    tools={"title", "outputSchema", "annotations", "_meta"}, titles=True, meta=True
                ),
            ),
            Revision(
                "2025-03-26",
                audio=True,
                completions=True,
                progress_message=True,
                members=_members(tools={"annotations"}),
            ),
            Revision("2024-11-05", members=_members()),
        )
    }
)
#: The newest revision: the answer to a client that asks for one the bridge does not serve.
LATEST: Final = REVISIONS[LEGACY]


def negotiate(asked: str) -> Revision:
    """The revision of the ``initialize`` answer for a client that asked for ``asked``."""
    return REVISIONS.get(asked, LATEST)


def client_capabilities(revision: Revision, capabilities: dict[str, Any]) -> dict[str, Any]:
    """The capabilities of a client's ``initialize``, read in the terms of its revision.

    A revision without tasks drops ``tasks``; one without elicitation drops
    ``elicitation``; one without URL elicitation drops ``elicitation.url`` (its
    ``elicitation: {}`` means the form, its only mode); one without sampling tools drops
    ``sampling.tools``. Returns ``capabilities`` itself when nothing changes.
    """
    out = capabilities
    if not revision.tasks and "tasks" in out:
        out = _without(out, "tasks")
    if not revision.form_elicitation and "elicitation" in out:
        out = _without(out, "elicitation")
    elicitation = out.get("elicitation")
    if not revision.url_elicitation and isinstance(elicitation, dict) and "url" in elicitation:
        out = {**out, "elicitation": _without(elicitation, "url")}
    sampling = out.get("sampling")
    if not revision.sampling_tools and isinstance(sampling, dict) and "tools" in sampling:
        out = {**out, "sampling": _without(sampling, "tools")}
    return out


def _without(value: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: item for name, item in value.items() if name != key}


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True, slots=True)
class Profile:
    """What the bridge does for one kind of host beyond the protocol."""

    #: ``vscode`` or ``generic``: the value of ``--host-profile`` and of the log line.
    name: str
    #: The ``_meta`` keys of the client that go upstream (beside the grammar and the keys
    #: of the protocol, which :func:`~.translate.pass_meta` checks for every profile).
    passes_meta: Callable[[str], bool]
    #: A ``tools/call`` result keeps a ``structuredContent`` that is not an object: the
    #: schema wants an object, but the MCP Apps of VS Code read other values too.
    any_structured_content: bool

    def __str__(self) -> str:
        return self.name


def _vscode_meta(key: str) -> bool:
    """W3C trace context, and VS Code's own keys."""
    return key in ("traceparent", "tracestate") or key.startswith("vscode.")


#: The profile of VS Code, and of every host that :func:`choose_profile` does not know.
VSCODE: Final = Profile("vscode", _vscode_meta, any_structured_content=True)
#: The profile of the other hosts: each ``_meta`` key that the grammar allows and the
#: protocol does not own goes upstream (another host's keys, an MCP App's), and a result
#: follows the schema.
GENERIC: Final = Profile("generic", lambda key: True, any_structured_content=False)

#: The values of ``--host-profile``.
HOST_PROFILES: Final = ("auto", VSCODE.name, GENERIC.name)

#: The ``clientInfo.name`` of the hosts that are not VS Code, as they name themselves:
#: Codex CLI, Cursor, Claude Desktop and Zed.
OTHER_HOSTS: Final = frozenset({"codex-mcp-client", "cursor-vscode", "claude-ai", "Zed"})


def choose_profile(setting: str, client_name: str, revision: Revision) -> Profile:
    """The profile for a client named ``client_name`` of ``revision``, under ``--host-profile``.

    ``auto``: :data:`GENERIC` for a client of an older revision than VS Code speaks, or
    one that names itself as another host (:data:`OTHER_HOSTS`); else :data:`VSCODE`.
    """
    if setting == VSCODE.name:
        return VSCODE
    if setting == GENERIC.name or revision.version != LATEST.version or client_name in OTHER_HOSTS:
        return GENERIC
    return VSCODE


# --------------------------------------------------------------------------- results

#: The content blocks that a revision may not define, and the flag that says it does.
_BLOCK_KINDS: Final[Mapping[str, Callable[[Revision], bool]]] = MappingProxyType(
    {"resource_link": lambda r: r.resource_links, "audio": lambda r: r.audio}
)


def _carried_block(revision: Revision, block: Any) -> bool:
    kind = block.get("type") if isinstance(block, dict) else None
    defined = _BLOCK_KINDS.get(kind) if isinstance(kind, str) else None
    return defined is None or defined(revision)


def shape_initialize_result(revision: Revision, result: dict[str, Any]) -> dict[str, Any]:
    """A 2025-11-25 result of ``initialize``, for a client of ``revision``.

    ``capabilities.completions`` goes away for a revision without completions, and
    ``serverInfo`` keeps only the members of an ``Implementation`` of the revision
    (2025-06-18: ``name``, ``title``, ``version``; before it: ``name``, ``version``).
    Returns ``result`` itself when nothing changes.
    """
    out = result
    caps = result.get("capabilities")
    if not revision.completions and isinstance(caps, dict) and "completions" in caps:
        out = {**out, "capabilities": _without(caps, "completions")}
    info = result.get("serverInfo")
    keys = revision.server_info_keys
    if keys is not None and isinstance(info, dict) and not info.keys() <= keys:
        out = {**out, "serverInfo": {key: value for key, value in info.items() if key in keys}}
    return out


def shape_notification(revision: Revision, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The params of a notification of the bridge's own making, for a client of ``revision``.

    ``notifications/progress``: without ``message`` for a revision that does not define it
    (2024-11-05). Returns ``params`` itself when nothing changes.
    """
    if method == "notifications/progress" and not revision.progress_message and "message" in params:
        return _without(params, "message")
    return params


def shape_result(
    revision: Revision, profile: Profile, method: str, result: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """A complete 2025-11-25 result of ``method``, for a client of ``revision`` under ``profile``.

    * ``tools/call``: each content block of a kind the revision does not define goes
      away. A revision without structured output (before 2025-06-18) gets no
      ``structuredContent``: when no text block of the content already holds its JSON,
      as a tool should give it, a text block with its JSON is added after the content,
      so the client still gets the data. Else a ``structuredContent`` that is not an
      object goes away, unless the profile keeps it.
    * ``tools/list``: each tool keeps only the members that the revision defines
      (2025-06-18: no ``icons`` or ``execution``; 2025-03-26: also no ``title``,
      ``outputSchema`` or ``_meta``; 2024-11-05: also no ``annotations``).
    * ``prompts/list``, ``resources/list``, ``resources/templates/list``: likewise for
      each item (2025-06-18: no ``icons``; before it also no ``title`` or ``_meta``, and
      no ``title`` of a prompt's argument).
    * ``prompts/get``: each message whose content is of such a kind goes away (a message
      has exactly one block).
    * Each content block that stays, of either result, keeps only the members that the
      revision defines of it, of its annotations and of an embedded resource (before
      2025-06-18: no ``_meta`` and no ``lastModified``; before 2025-11-25: no ``icons``
      of a resource link); so do the contents of ``resources/read`` and the annotations of
      a listed resource or template.

    Returns the result (``result`` itself when nothing changes) and one line for each kind
    of thing that went away, without content, for example ``tools/call: left out content
    blocks that MCP 2025-03-26 does not define (1 of 3)``. The members of a listed item and a
    ``structuredContent`` get no line: the client loses nothing that its revision can show.
    """
    notes: list[str] = []
    out = result
    if method == "tools/call":
        left_out = f"tools/call: left out content blocks that MCP {revision} does not define"
        carried, shape = partial(_carried_block, revision), partial(_shape_block, revision)
        out = _kept_and_shaped(out, "content", carried, shape, left_out, notes)
        if not revision.structured_content and "structuredContent" in result:
            out = _structured_as_text(out)
        elif (
            not profile.any_structured_content
            and "structuredContent" in result
            and not isinstance(result["structuredContent"], dict)
        ):
            out = _without(out, "structuredContent")
            notes.append("tools/call: left out a structuredContent that is not an object")
    elif method == "tools/list":
        out = _shape_list(revision, result, "tools")
    elif method in _LISTS:
        out = _shape_list(revision, result, _LISTS[method])
    elif method == "prompts/get":
        left_out = f"prompts/get: left out messages whose content MCP {revision} does not define"
        carried, shape = partial(_carried_message, revision), partial(_shape_message, revision)
        out = _kept_and_shaped(out, "messages", carried, shape, left_out, notes)
    elif method == "resources/read":
        contents = result.get("contents")
        members = revision.members
        if members is not None and isinstance(contents, list):
            shaped = [_only(members["contents"], item) for item in contents]
            if _changed(shaped, contents):
                out = {**out, "contents": shaped}
    return out, notes


def _holds_json(block: Any, value: Any) -> bool:
    """True when ``block`` is a text block whose text is the JSON of ``value``."""
    if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
        return False
    try:
        return bool(json.loads(block["text"]) == value)
    except (ValueError, RecursionError):
        return False


def _structured_as_text(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without its ``structuredContent``, which a text block of the content holds."""
    structured = result["structuredContent"]
    out = _without(result, "structuredContent")
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    if not any(_holds_json(block, structured) for block in blocks):
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        out["content"] = [*blocks, {"type": "text", "text": text}]
    return out


#: The list results whose items the revision shapes, and the name of the list in them.
_LISTS: Final = MappingProxyType(
    {
        "prompts/list": "prompts",
        "resources/list": "resources",
        "resources/templates/list": "resourceTemplates",
    }
)


def _only(keys: frozenset[str], item: Any) -> Any:
    if not isinstance(item, dict) or item.keys() <= keys:
        return item
    return {key: value for key, value in item.items() if key in keys}


def _carried_message(revision: Revision, message: Any) -> bool:
    """Whether a message of ``prompts/get`` stays: its content is of a kind that ``revision`` defines."""
    return not isinstance(message, dict) or _carried_block(revision, message.get("content"))


def _kept_and_shaped(
    out: dict[str, Any],
    member: str,
    carried: Callable[[Any], bool],
    shape: Callable[[Any], Any],
    left_out: str,
    notes: list[str],
) -> dict[str, Any]:
    """``out`` with the items of its list ``member`` that ``carried`` keeps, each shaped (``out``
    itself when nothing changes); the note ``left_out`` counts the items that went away."""
    items = out.get(member)
    if not isinstance(items, list):
        return out
    kept = [item for item in items if carried(item)]
    if len(kept) < len(items):
        notes.append(f"{left_out} ({len(items) - len(kept)} of {len(items)})")
    shaped = [shape(item) for item in kept]
    if len(kept) < len(items) or _changed(shaped, kept):
        return {**out, member: shaped}
    return out


def _changed(shaped: list[Any], items: list[Any]) -> bool:
    return any(new is not old for new, old in zip(shaped, items, strict=True))


def _shape_block(revision: Revision, block: Any) -> Any:
    """A content block with the members, annotations and resource contents of the revision."""
    members = revision.members
    kind = block.get("type") if isinstance(block, dict) else None
    if members is None or not isinstance(kind, str) or kind not in members:
        return block
    out = _with_annotations(members, _only(members[kind], block))
    resource = out.get("resource")
    if kind == "resource" and isinstance(resource, dict):
        contents = _only(members["contents"], resource)
        if contents is not resource:
            out = {**out, "resource": contents}
    return out


def _shape_message(revision: Revision, message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    content = _shape_block(revision, message.get("content"))
    return message if content is message.get("content") else {**message, "content": content}


def _with_annotations(members: Mapping[str, frozenset[str]], item: Any) -> Any:
    """``item`` with only the members of ``annotations`` that the revision defines."""
    annotations = item.get("annotations") if isinstance(item, dict) else None
    if not isinstance(annotations, dict):
        return item
    shaped = _only(members["annotations"], annotations)
    return item if shaped is annotations else {**item, "annotations": shaped}


def _shape_list(revision: Revision, result: dict[str, Any], name: str) -> dict[str, Any]:
    """``result`` with each item of its list ``name`` in the members of the revision."""
    members = revision.members
    items = result.get(name)
    if members is None or not isinstance(items, list):
        return result
    keys = members[name]
    shaped = [_only(keys, item) for item in items]
    if name in ("resources", "resourceTemplates"):  # a tool's annotations are of another kind
        shaped = [_with_annotations(members, item) for item in shaped]
    if name == "prompts":
        shaped = [_shape_arguments(members["arguments"], prompt) for prompt in shaped]
    if all(new is old for new, old in zip(shaped, items, strict=True)):
        return result
    return {**result, name: shaped}


def _shape_arguments(keys: frozenset[str], prompt: Any) -> Any:
    arguments = prompt.get("arguments") if isinstance(prompt, dict) else None
    if not isinstance(arguments, list):
        return prompt
    shaped = [_only(keys, argument) for argument in arguments]
    if all(new is old for new, old in zip(shaped, arguments, strict=True)):
        return prompt
    return {**prompt, "arguments": shaped}


# --------------------------------------------------------------------------- input requests


class NotCarried(PeerFault):
    """An input request that the revision of the client cannot carry.

    ``what`` names it for the log line, for example ``a multi-select field``. The front
    end refuses the request: the upstream server gets ``decline`` for an elicitation, and
    no answer for a sampling (the protocol's way to refuse one).
    """

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def adapt_input_request(revision: Revision, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The params of one of the bridge's requests to the client, for ``revision``.

    ``params`` are the 2025-11-25 params of the request, of a kind the client declared.

    * A form: without ``mode``, which the revision does not define; a titled
      single-select field becomes the ``enum`` and ``enumNames`` of 2025-06-18.
    * A sampling: a message of one block in an array gets the block itself.

    Returns ``params`` itself when nothing changes (always for 2025-11-25).

    Raises:
        NotCarried: a multi-select field, a message of several blocks, an audio block.
    """
    if method == ELICITATION_CREATE and not revision.choice_fields and "requestedSchema" in params:
        return _adapt_form(params)
    if method == SAMPLING_CREATE_MESSAGE and not revision.sampling_tools:
        return _adapt_sampling(revision, params)
    return params


def _adapt_form(params: dict[str, Any]) -> dict[str, Any]:
    schema = params["requestedSchema"]
    properties = {name: _adapt_field(field) for name, field in schema["properties"].items()}
    return {
        **_without(params, "mode"),
        "requestedSchema": {**schema, "properties": properties},
    }


def _adapt_field(field: dict[str, Any]) -> dict[str, Any]:
    """One field of a form in the terms of 2025-06-18 (the compiled form checks the answer)."""
    if field.get("type") == "array":
        raise NotCarried("a multi-select field")
    choices = field.get("oneOf")
    if not isinstance(choices, list):
        return field
    return {
        **_without(field, "oneOf"),
        "enum": [choice["const"] for choice in choices],
        "enumNames": [str(choice.get("title", choice["const"])) for choice in choices],
    }


def _adapt_sampling(revision: Revision, params: dict[str, Any]) -> dict[str, Any]:
    messages = [_adapt_message(revision, message) for message in params["messages"]]
    if all(new is old for new, old in zip(messages, params["messages"], strict=True)):
        return params
    return {**params, "messages": messages}


def _adapt_message(revision: Revision, message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, list):
        if len(content) != 1:
            raise NotCarried("a sampling message of several content blocks")
        content = content[0]
    if not _carried_block(revision, content):
        raise NotCarried(f"a sampling message with {content['type']} content")
    return message if content is message["content"] else {**message, "content": content}
