"""What a :class:`~mcpbridge.mcp.server.Server` keeps of each registration, and the options of each.

A tool or prompt is a :class:`Named` entry (its definition, handler and
signature); a resource and a template have their own records. The option
TypedDicts name the keyword arguments of ``Server.tool`` and the others;
:func:`make_definition` turns them into the definition a list result shows.

Pure: no I/O, no threads, no clock.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict, TypeVar

from .schema_infer import Signature

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass
class Named:
    """A prompt (and the base of a tool): its handler takes named arguments, and it can be hidden."""

    definition: dict[str, Any]
    fn: Callable[..., Any]
    signature: Signature
    enabled: bool = True


@dataclass
class Tool(Named):
    #: Whether the input schema was inferred from the handler (then the argument types are checked).
    inferred: bool = False


Prompt = Named


@dataclass
class Resource:
    definition: dict[str, Any]
    fn: Callable[..., Any]


@dataclass
class Template:
    definition: dict[str, Any]
    fn: Callable[..., Any]
    pattern: re.Pattern[str]


class Described(TypedDict, total=False):
    """The options of every registration but a resource's ``name``."""

    title: str | None
    description: str | None
    icons: list[dict[str, Any]] | None


class PromptOptions(Described, total=False):
    """The options of :meth:`~.server.Server.prompt` and :meth:`~.server.Server.add_prompt`."""

    name: str | None
    arguments: list[dict[str, Any]] | None


class ToolOptions(Described, total=False):
    """The options of :meth:`~.server.Server.tool` and :meth:`~.server.Server.add_tool`."""

    name: str | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    meta: dict[str, Any] | None


class ResourceName(TypedDict):
    name: str


class TemplateOptions(ResourceName, Described, total=False):
    """The options of :meth:`~.server.Server.resource_template`."""

    mime_type: str | None


class ResourceOptions(TemplateOptions, total=False):
    """The options of :meth:`~.server.Server.resource`."""

    size: int | None


#: The JSON name of each option of a registration, in the order of a definition's members.
MEMBERS: Final = {
    "uri": "uri",
    "uri_template": "uriTemplate",
    "name": "name",
    "title": "title",
    "description": "description",
    "input_schema": "inputSchema",
    "output_schema": "outputSchema",
    "mime_type": "mimeType",
    "size": "size",
    "arguments": "arguments",
    "annotations": "annotations",
    "icons": "icons",
    "meta": "_meta",
}


def check_options(spec: Any, options: Mapping[str, Any]) -> None:
    """Raises: TypeError: ``options`` has a key that the TypedDict ``spec`` lacks, or lacks a required one."""
    unknown = sorted(set(options) - spec.__required_keys__ - spec.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected option {unknown[0]!r}")
    missing = sorted(spec.__required_keys__ - set(options))
    if missing:
        raise TypeError(f"missing the option {missing[0]!r}")


def make_definition(spec: Any, options: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
    """The definition of a tool, prompt, resource or template: its members that are not None.

    ``options`` are the caller's, of the TypedDict ``spec``; ``fixed`` are the
    members that are no option (a URI) or that replace one (a default).

    Raises:
        TypeError: ``options`` do not fit ``spec``.
    """
    check_options(spec, options)
    members = {**options, **fixed}
    return {member: members[key] for key, member in MEMBERS.items() if members.get(key) is not None}


def named_definition(
    spec: Any, fn: Callable[..., Any], options: Mapping[str, Any], **derived: Any
) -> dict[str, Any]:
    """The definition of a tool or prompt; its name and description default to those of ``fn``."""
    description = options.get("description")
    return make_definition(
        spec,
        options,
        **derived,
        name=options.get("name") or fn.__name__,
        description=description if description is not None else inspect.getdoc(fn),
    )


def decorator(
    add: Callable[..., None], spec: Any, name: str | Callable[..., Any] | None, options: Any
) -> Any:
    """What ``@server.tool`` and ``@server.prompt`` return: bare, or called with a name and options."""
    if callable(name):
        add(name)
        return name
    check_options(spec, options)
    if name is not None:
        if "name" in options:
            raise TypeError("the name is given twice")
        options = {**options, "name": name}

    def register(fn: _F) -> _F:
        add(fn, **options)
        return fn

    return register
