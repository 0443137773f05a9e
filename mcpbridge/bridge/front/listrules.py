"""The tool filter and the list cache of one client connection, with their log lines.

The rules are in :mod:`.rules.lists` (pure); this module gives them the clock, the
log and what one connection learns of its lists. The front end calls
:meth:`ListRules.refuse_call` for each ``tools/call`` of both eras, and
:meth:`ListRules.page` for each list result. Only the path of a
2026-07-28 upstream uses the cache (:meth:`ListRules.lookup`, ``cache=True``): a
2025-era server has no ``ttlMs``, so nothing of it is cached.

MCP Apps (the extension ``io.modelcontextprotocol/ui``): a tool with a view
(``_meta.ui.resourceUri``, a ``ui://`` resource) is the entry tool of an app, and
a tool that only the app may call (``_meta.ui.visibility`` with ``"app"`` and
without ``"model"``) with the same view belongs to that app: the view calls it.
The filter keeps such an app-only tool, in the lists and for its calls, when it
keeps the entry tool of its app, unless a deny pattern names the app-only tool.
The rule learns the apps from the tool lists: an app-only tool listed on an
earlier page than its entry tool shows from the next listing on.

Log lines: one warning for each pattern that matches no tool of a full
listing; debug lines for each hit, miss and drop of the cache, and for the calls
of hidden tools (through the drop log of the connection: a client can repeat
them). None of them holds a cursor or a tool's content.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Final

from ...mcp.droplog import DropLog
from ...mcp.jsonrpc import dumps
from ..rules.lists import (
    CACHED_METHODS,
    LIST_CHANGES,
    ListCache,
    ListingWatch,
    Outcome,
    ToolFilter,
    app_only,
    app_tool_kept,
    app_view,
    entry_view,
    shown_tool,
    ttl_ms,
    unknown_tool_error,
)

log = logging.getLogger("mcpbridge.bridge")

#: The most app-only tools and views that one connection remembers.
MAX_APP_ENTRIES: Final = 10_000


def _page_name(params: Any) -> str:
    cursor = params.get("cursor") if isinstance(params, dict) else None
    return "first page" if cursor is None else "a later page"


class ListRules:
    """The tool filter, the pattern watch and the list cache of one connection.

    Safe to use from several threads at once: one lock serializes the watch and
    the cache (it is held for dict operations only, never for I/O or a log line).
    """

    def __init__(self, tool_filter: ToolFilter | None = None, drops: DropLog | None = None) -> None:
        """``drops``: the drop log of the connection (by default one of its own)."""
        self.filter = tool_filter if tool_filter is not None else ToolFilter()
        self._drops = drops if drops is not None else DropLog(log)
        self._lock = threading.Lock()
        self._watch = ListingWatch(self.filter)
        self._cache = ListCache()
        #: The app-only tools of the lists, each with its view, and the views of the entry
        #: tools that the filter keeps (see the module docstring); guarded by ``_lock``.
        self._app_tools: dict[str, str] = {}
        self._kept_views: set[str] = set()
        #: The lists that the client asked for: a change of another tells it nothing.
        self.asked = AskedLists(self._drops)

    def refuse_call(self, params: Any) -> dict[str, Any] | None:
        """The error for a ``tools/call`` with ``params`` of a hidden tool; ``None`` to forward it.

        An app-only tool of an app whose entry tool the filter keeps is not hidden.
        """
        name = self.filter.hidden_call(params)
        if name is None:
            return None
        with self._lock:
            kept = app_tool_kept(name, self._app_tools.get(name), self._kept_views, self.filter)
        if kept:
            return None
        self._drops(
            logging.DEBUG,
            "answered calls of hidden tools",
            "answered a call of a hidden tool as a call of an unknown tool",
        )
        return unknown_tool_error(name)

    def lookup(self, method: str, params: Any) -> dict[str, Any] | None:
        """A fresh cached page for the request, or ``None`` (a miss goes to the server)."""
        if method not in CACHED_METHODS:
            return None
        now = time.monotonic()
        with self._lock:
            found = self._cache.lookup(method, params, now)
        if found.outcome is Outcome.UNCACHEABLE:
            return None
        log.debug("list cache %s: %s (%s)", found.outcome.value, method, _page_name(params))
        return found.result

    def page(self, method: str, params: Any, result: Any, *, cache: bool) -> Any:
        """A list result of the server (or of the cache) as the client gets it: filtered.

        With ``cache`` a fresh result of the server is kept for its ``ttlMs``; a
        result from the cache is given with ``cache=False``. Another method's
        result passes unchanged.
        """
        if method not in CACHED_METHODS:
            return result
        if cache and ttl_ms(result) > 0:
            size = len(dumps(result))
            now = time.monotonic()
            with self._lock:
                kept = self._cache.store(method, params, result, now, size)
            if kept:
                log.debug("list cache keeps %s (%s) for its ttlMs", method, _page_name(params))
        if method != "tools/list" or not self.filter.active:
            return result
        cursor = params.get("cursor") if isinstance(params, dict) else None
        with self._lock:
            unmatched = self._watch.page(cursor, result)
        for pattern in unmatched:
            log.warning("%s", self.filter.unmatched_warning(pattern))
        with self._lock:
            filtered, hidden = self._filter_page_locked(result)
        if hidden:
            log.debug("the tool filter hid %d tools of a tools/list page", hidden)
        return filtered

    def _filter_page_locked(self, result: Any) -> tuple[Any, int]:
        """The page without its hidden tools, and how many went away; it learns its apps first."""
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return result, 0
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            view = app_view(tool)
            if not isinstance(name, str) or view is None:
                continue
            if app_only(tool):
                if name in self._app_tools or len(self._app_tools) < MAX_APP_ENTRIES:
                    self._app_tools[name] = view
            elif entry_view(tool, self.filter) is not None and len(self._kept_views) < MAX_APP_ENTRIES:
                self._kept_views.add(view)
        kept = [tool for tool in tools if shown_tool(tool, self.filter, self._kept_views)]
        if len(kept) == len(tools):
            return result, 0
        return {**result, "tools": kept}, len(tools) - len(kept)

    def failed(self, method: str, params: Any, error_code: Any) -> None:
        """A list request failed: an invalid cursor drops the pages of its list."""
        if method in CACHED_METHODS:
            with self._lock:
                dropped = self._cache.invalid_cursor(method, params, error_code)
            if dropped:
                log.debug("list cache dropped %d pages of %s: the server refused a cursor", dropped, method)

    def list_changed(self, notification_method: str) -> None:
        """A list change of the upstream server, before the client learns of it."""
        with self._lock:
            dropped = self._cache.list_changed(notification_method)
        if dropped:
            log.debug("list cache dropped %d pages: %s", dropped, notification_method)

    def clear(self, reason: str) -> None:
        """Drop every page: a gap of the listen stream, a new sign-in, the end of the connection."""
        with self._lock:
            dropped = self._cache.clear()
        if dropped:
            log.debug("list cache dropped %d pages: %s", dropped, reason)


class AskedLists:
    """The lists that the client of one connection asked for, and the list changes that tell it something.

    A ``notifications/<kind>/list_changed`` of a list that the client has not asked for
    yet tells it nothing: it fetches the list at its first need in any case (VS Code
    right after ``initialize``). Such a change is dropped, with one debug line of the drop
    log; a server that registers its tools while it starts would else make the client
    fetch them again for each. A list counts as asked for from the moment its first
    request goes to the server (:meth:`sent`), not from its answer: a change that the
    server sends before it reads that request is in the answer already. Safe from any thread.
    """

    def __init__(self, drops: DropLog) -> None:
        self._drops = drops
        self._lock = threading.Lock()
        self._asked: set[str] = set()

    def sent(self, method: str) -> None:
        """A request of the client with ``method`` goes to the server (any method; lists count)."""
        if method in CACHED_METHODS:
            with self._lock:
                self._asked.add(method)

    def tells(self, notification_method: str) -> bool:
        """Whether a notification of the server with ``notification_method`` goes to the client.

        Every notification but a list change does; a list change does once the client asked
        for one of the lists that it changes.
        """
        lists = LIST_CHANGES.get(notification_method)
        if lists is None:
            return True
        with self._lock:
            asked = any(method in self._asked for method in lists)
        if not asked:
            self._drops(
                logging.DEBUG,
                "dropped list changes of lists that the client has not asked for",
                "dropped a %s: the client has not asked for that list yet",
                notification_method,
            )
        return asked
