"""Tool filters and the list cache of one connection.

This module is pure: it does no I/O, takes no lock and reads no clock. A caller
passes the time (``now``, in seconds of a monotonic clock) where a rule needs it,
and serializes the calls of one :class:`ListingWatch` or :class:`ListCache`
(:class:`~.front.listrules.ListRules` holds the lock).

Tool filters (:class:`ToolFilter`)
----------------------------------

``--allow-tool`` and ``--deny-tool`` give shell-style patterns (``git_*``,
``*delete*``, ``tool_[0-9]``), matched against the whole tool name with
:func:`fnmatch.fnmatchcase` (case-sensitive on every system):

* without allow patterns every tool remains, except the denied ones;
* with allow patterns only the tools that match one of them remain;
* a deny pattern wins over an allow pattern.

A hidden tool is absent from every page of ``tools/list``: the page keeps its
``nextCursor`` and may come back shorter, even empty. A ``tools/call`` of a
hidden tool gets the error of an unknown tool (-32602, as both revisions of
the protocol say) and never reaches the server.

A pattern that matches no tool of a full listing is most likely a typo: it
hides nothing, or with allow patterns it hides more than meant.
:class:`ListingWatch` follows the pages of a listing from the first page to
the last and names each such pattern once.

The list cache (:class:`ListCache`)
-----------------------------------

A complete 2026-07-28 result of ``tools/list``, ``prompts/list``,
``resources/list`` or ``resources/templates/list`` carries ``ttlMs``: it stays
fresh while ``now < received + ttlMs``. The cache keeps each page with a
``ttlMs`` above 0 under its method and cursor, and answers the same request
from it until it expires. ``ttlMs`` 0, missing, negative or not a number
caches nothing.

* Only a request with nothing but ``cursor`` (and ``_meta``) in its params is
  answered from the cache; anything else may change the result.
* A list change drops every page of that list (a change of the resources also
  drops the resource templates, which have no change of their own).
* An invalid cursor drops every page of that list, so the next listing starts
  again from the first page.
* A gap of the listen stream, a new sign-in and the end of the connection
  drop everything.
* A result that arrives after a drop of its list is not kept: it may have been
  made before the change. A missed lookup marks its key with the generation of
  its list, and :meth:`ListCache.store` keeps the result only when the
  generation did not change in the meantime. Two requests with one key in
  flight at once keep the first mark, so at worst a fresh result is not kept.
* The cache holds at most :data:`MAX_ENTRIES` pages and :data:`MAX_BYTES` bytes
  of their JSON text; the oldest page goes first. A page larger than a quarter
  of that is not kept.

``cacheScope`` needs no rule of its own: the cache belongs to one connection
and is dropped at each new sign-in, so a ``private`` result is never shared
across authorization contexts.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Any, Final

from ...mcp.jsonrpc import INVALID_PARAMS

__all__ = [
    "CACHED_METHODS",
    "LIST_CHANGES",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "ListCache",
    "ListingWatch",
    "Lookup",
    "Outcome",
    "ToolFilter",
    "app_only",
    "app_tool_kept",
    "app_view",
    "entry_view",
    "shown_tool",
    "shown_tools",
    "ttl_ms",
    "unknown_tool_error",
]

#: The list methods whose results the cache keeps.
CACHED_METHODS: Final = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)

#: The lists that each list change drops.
LIST_CHANGES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "notifications/tools/list_changed": ("tools/list",),
        "notifications/prompts/list_changed": ("prompts/list",),
        "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
    }
)

#: The most pages that the cache of one connection holds.
MAX_ENTRIES: Final = 256
#: The most bytes (of the pages' JSON text) that the cache of one connection holds.
MAX_BYTES: Final = 32 * 1024 * 1024

#: The params members that do not change a list result (the cursor is part of the key).
_NEUTRAL_PARAMS: Final = frozenset({"cursor", "_meta"})

#: The most listings that a :class:`ListingWatch` follows at a time.
_MAX_WALKS: Final = 8


def unknown_tool_error(name: str) -> dict[str, Any]:
    """The error of a ``tools/call`` of a tool that the server does not have.

    Both revisions report an unknown tool as -32602 (invalid params), with the
    message the servers give: ``Unknown tool: <name>``.
    """
    return {"code": INVALID_PARAMS, "message": f"Unknown tool: {name}"}


# --------------------------------------------------------------------------- tool filters


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Allow and deny patterns on the tool names; see the module docstring."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for pattern in (*self.allow, *self.deny):
            if not isinstance(pattern, str) or not pattern:
                raise ValueError("a tool pattern must be a text that is not empty")

    @property
    def active(self) -> bool:
        """True when the filter can hide a tool."""
        return bool(self.allow or self.deny)

    @property
    def patterns(self) -> tuple[str, ...]:
        """Every pattern, the allow patterns first, each once."""
        return tuple(dict.fromkeys((*self.allow, *self.deny)))

    def hides(self, name: Any) -> bool:
        """True when the tool ``name`` is hidden.

        A name that is not a string matches no pattern: it is hidden only when
        there are allow patterns.
        """
        if not isinstance(name, str):
            return bool(self.allow)
        if any(fnmatchcase(name, pattern) for pattern in self.deny):
            return True
        return bool(self.allow) and not any(fnmatchcase(name, pattern) for pattern in self.allow)

    def hidden_call(self, params: Any) -> str | None:
        """The name of the hidden tool that the params of a ``tools/call`` name, else ``None``.

        Params without a string ``name`` go to the server, which answers them.
        """
        if not self.active or not isinstance(params, dict):
            return None
        name = params.get("name")
        if isinstance(name, str) and self.hides(name):
            return name
        return None

    def filter_page(self, result: Any) -> tuple[Any, int]:
        """The ``tools/list`` result without its hidden tools, and how many went away.

        Everything else stays, ``nextCursor`` included. ``result`` does not change;
        it is returned itself when nothing is hidden.
        """
        if not self.active or not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return result, 0
        tools = result["tools"]
        kept = [tool for tool, name in zip(tools, tool_names(result), strict=True) if not self.hides(name)]
        if len(kept) == len(tools):
            return result, 0
        return {**result, "tools": kept}, len(tools) - len(kept)

    def unmatched_warning(self, pattern: str) -> str:
        """The warn line for a pattern that matched no tool of a full listing."""
        option, effect = (
            ("--deny-tool", "hides nothing") if pattern in self.deny else ("--allow-tool", "shows no tool")
        )
        return (
            f"{option} {pattern!r} matches no tool of the upstream server, so it {effect} "
            "(a pattern is case-sensitive and matches the whole name)"
        )

    def unmatched(self, names: Iterable[Any]) -> tuple[str, ...]:
        """The patterns that match none of ``names`` (the names of a full listing)."""
        strings = [name for name in names if isinstance(name, str)]
        return tuple(
            pattern for pattern in self.patterns if not any(fnmatchcase(name, pattern) for name in strings)
        )


def app_view(tool: Any) -> str | None:
    """The view of a tool of MCP Apps: ``_meta.ui.resourceUri`` (or the deprecated flat
    ``_meta["ui/resourceUri"]``), a string; else ``None``."""
    meta = tool.get("_meta") if isinstance(tool, dict) else None
    if not isinstance(meta, dict):
        return None
    ui = meta.get("ui")
    view = ui.get("resourceUri") if isinstance(ui, dict) else None
    if view is None:
        view = meta.get("ui/resourceUri")
    return view if isinstance(view, str) and view else None


def app_only(tool: Any) -> bool:
    """Whether only an app may call the tool: its ``_meta.ui.visibility`` has ``"app"``, not ``"model"``."""
    meta = tool.get("_meta") if isinstance(tool, dict) else None
    ui = meta.get("ui") if isinstance(meta, dict) else None
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return isinstance(visibility, list) and "app" in visibility and "model" not in visibility


def entry_view(tool: Any, tool_filter: ToolFilter) -> str | None:
    """The view of ``tool`` when it is the entry tool of an app that ``tool_filter`` keeps
    (it has a view, it is not app-only, the filter shows it); else ``None``."""
    name = tool.get("name") if isinstance(tool, dict) else None
    if not isinstance(name, str) or app_only(tool) or tool_filter.hides(name):
        return None
    return app_view(tool)


def app_tool_kept(name: Any, view: str | None, kept_views: Collection[str], tool_filter: ToolFilter) -> bool:
    """Whether the app-only tool ``name`` with ``view`` belongs to an app whose entry tool the
    filter keeps (its view is in ``kept_views``), and no deny pattern names it."""
    if view is None or view not in kept_views or not isinstance(name, str):
        return False
    return not any(fnmatchcase(name, pattern) for pattern in tool_filter.deny)


def shown_tool(tool: Any, tool_filter: ToolFilter, kept_views: Collection[str]) -> bool:
    """Whether the client sees ``tool`` in a tool list, given the views of the kept entry tools."""
    name = tool.get("name") if isinstance(tool, dict) else None
    if not tool_filter.hides(name):
        return True
    return app_only(tool) and app_tool_kept(name, app_view(tool), kept_views, tool_filter)


def shown_tools(tools: list[Any], tool_filter: ToolFilter) -> list[Any]:
    """The tools of the whole tool list ``tools`` that the client sees under ``tool_filter``: what
    :class:`~mcpbridge.bridge.front.listrules.ListRules` shows once it has seen the whole list."""
    kept_views = {view for tool in tools if (view := entry_view(tool, tool_filter)) is not None}
    return [tool for tool in tools if shown_tool(tool, tool_filter, kept_views)]


def tool_names(result: Any) -> list[Any]:
    """The ``name`` of each tool of a ``tools/list`` result (``None`` for an item without one)."""
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return []
    return [tool.get("name") if isinstance(tool, dict) else None for tool in tools]


class ListingWatch:
    """Follow the pages of ``tools/list`` and name the patterns that match no tool.

    A listing starts with a page without a cursor, goes on with the page whose
    cursor is the ``nextCursor`` of the one before, and is full at a page
    without ``nextCursor``. :meth:`page` returns the patterns of the filter that
    matched no tool of a full listing and were not named before: each pattern
    is named at most once for a connection.
    """

    def __init__(self, tool_filter: ToolFilter) -> None:
        self._filter = tool_filter
        #: The expected cursor of the next page of each listing -> the names seen so far.
        self._walks: OrderedDict[str, list[Any]] = OrderedDict()
        self._named: set[str] = set()

    @property
    def done(self) -> bool:
        """True when every pattern was named: nothing is left to watch."""
        return len(self._named) == len(self._filter.patterns)

    def page(self, cursor: Any, result: Any) -> tuple[str, ...]:
        """One page of the server (before the filter) for the request with ``cursor``."""
        if not self._filter.active or self.done or not isinstance(result, dict):
            return ()
        names = tool_names(result)
        following = result.get("nextCursor")
        if cursor is None:
            seen = names
        else:
            before = self._walks.pop(cursor, None) if isinstance(cursor, str) else None
            if before is None:
                return ()  # a page of a listing that started before the watch knew it
            seen = before + names
        if isinstance(following, str):
            self._walks[following] = seen
            while len(self._walks) > _MAX_WALKS:
                self._walks.popitem(last=False)
            return ()
        new = tuple(p for p in self._filter.unmatched(seen) if p not in self._named)
        self._named.update(new)
        return new


# --------------------------------------------------------------------------- the list cache


def ttl_ms(result: Any) -> int:
    """The ``ttlMs`` of a result in whole milliseconds; 0 when it is missing, negative or not a number."""
    value = result.get("ttlMs") if isinstance(result, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value))


class Outcome(enum.Enum):
    """What a lookup found."""

    #: A fresh page: the request needs no server.
    HIT = "hit"
    #: No page, or only an expired one (it is gone now).
    MISS = "miss"
    #: The request is not one the cache answers (another method, or params besides the cursor).
    UNCACHEABLE = "uncacheable"


@dataclass(frozen=True, slots=True)
class Lookup:
    """The outcome of :meth:`ListCache.lookup`, with the page on a hit."""

    outcome: Outcome
    result: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _Entry:
    result: dict[str, Any]
    expires: float
    size: int


class ListCache:
    """The pages of the lists of one connection; see the module docstring.

    Not safe for calls from several threads at once: the caller serializes them.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be positive")
        self._max = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[tuple[str, str | None], _Entry] = OrderedDict()
        self._generations = dict.fromkeys(CACHED_METHODS, 0)
        #: The key of each missed lookup whose result did not come yet -> the generation of its
        #: list at the first such lookup.
        self._pending: OrderedDict[tuple[str, str | None], int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The bytes of the pages held."""
        return self._bytes

    @staticmethod
    def key(method: str, params: Any) -> tuple[str, str | None] | None:
        """The key of a request, or ``None`` when the cache does not answer it."""
        if method not in CACHED_METHODS:
            return None
        if params is None:
            return method, None
        if not isinstance(params, dict) or any(name not in _NEUTRAL_PARAMS for name in params):
            return None
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            return None
        return method, cursor

    def lookup(self, method: str, params: Any, now: float) -> Lookup:
        """Find a fresh page for the request; an expired page goes away.

        A miss marks the request as on its way: :meth:`store` keeps its result
        only when its list was not dropped in the meantime.
        """
        key = self.key(method, params)
        if key is None:
            return Lookup(Outcome.UNCACHEABLE)
        entry = self._entries.get(key)
        if entry is not None:
            if now < entry.expires:
                return Lookup(Outcome.HIT, entry.result)
            del self._entries[key]
            self._bytes -= entry.size
        # The first mark stays: a result of a request from before a drop must not be kept.
        if key not in self._pending:
            self._pending[key] = self._generations[key[0]]
            while len(self._pending) > self._max:
                self._pending.popitem(last=False)
        return Lookup(Outcome.MISS)

    def store(self, method: str, params: Any, result: Any, now: float, size: int = 0) -> bool:
        """Keep a complete result of the server for its ``ttlMs``; True when it is kept.

        ``now`` is the time the result arrived, ``size`` the length of its JSON
        text. A result with ``ttlMs`` 0 (or none), of a request without a missed
        lookup, whose list was dropped after the lookup, or larger than a quarter
        of the byte limit, is not kept.
        """
        key = self.key(method, params)
        if key is None:
            return False
        generation = self._pending.pop(key, None)
        ttl = ttl_ms(result)
        if ttl <= 0 or not isinstance(result, dict) or generation != self._generations[key[0]]:
            return False
        if size > self._max_bytes // 4:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        self._entries[key] = _Entry(result, now + ttl / 1000.0, size)
        self._bytes += size
        while len(self._entries) > self._max or self._bytes > self._max_bytes:
            self._bytes -= self._entries.popitem(last=False)[1].size
        return True

    def drop(self, methods: Iterable[str]) -> int:
        """Drop every page of the lists ``methods``; the number of pages dropped."""
        targets = {method for method in methods if method in CACHED_METHODS}
        for method in targets:
            self._generations[method] += 1
        keys = [key for key in self._entries if key[0] in targets]
        for key in keys:
            self._bytes -= self._entries.pop(key).size
        return len(keys)

    def list_changed(self, notification_method: str) -> int:
        """Drop the lists of a list change (``notifications/tools/list_changed``...)."""
        return self.drop(LIST_CHANGES.get(notification_method, ()))

    def invalid_cursor(self, method: str, params: Any, error_code: Any) -> int:
        """After an error of a list request: -32602 for a request with a cursor drops that list."""
        if error_code != INVALID_PARAMS or not isinstance(params, dict) or params.get("cursor") is None:
            return 0
        return self.drop((method,))

    def clear(self) -> int:
        """Drop everything (a gap of the listen stream, a new sign-in, the end of the connection)."""
        return self.drop(CACHED_METHODS)
