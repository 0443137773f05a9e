"""The steps of ``mcp-bridge-vscode check`` that read what a server offers: every page of
each list, the tool filter, the tasks, the one call of ``--call-tool``, the requests of a
2025-era server in the middle of it, and the lines of a command's stdout that are not messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from ..bridge.rules.errortable import no_back_channel
from ..bridge.rules.lists import app_only, shown_tools
from ..mcp.errors import McpError, RpcError
from ..mcp.jsonrpc import METHOD_NOT_FOUND
from ..mcp.protocol import MODERN
from .check_advice import check_problem, closest_names, closest_pattern, failure_text
from .check_report import (
    FAILED,
    LISTS,
    MAX_ANSWER_CHARS,
    OK,
    Problem,
    asked_methods,
    first_text,
    item_name,
    printable,
)
from .check_run import CheckRun

__all__ = ["MAX_PAGES", "SERVER_REQUESTS", "ToolSteps"]


#: The most pages of one list that the check reads.
MAX_PAGES: Final = 100
#: The server's requests that the check tells apart in the middle of a call.
SERVER_REQUESTS: Final = ("elicitation/create", "sampling/createMessage", "roots/list", "ping")


class ToolSteps(CheckRun):
    """The steps of a check that read the lists of a server and call its tool."""

    def _count_lists(
        self,
        capabilities: dict[str, Any],
        fetch: Callable[[str, dict[str, Any] | None], dict[str, Any]],
        *,
        modern: bool = False,
    ) -> None:
        from ..bridge.rules.lists import ttl_ms

        for listing in LISTS:
            if listing.capability not in capabilities:
                continue
            key, method = listing.key, listing.method
            if self._out_of_time(method):
                continue
            started = time.monotonic()
            count = 0
            names: list[Any] = []
            tools: list[Any] = []
            cursor: str | None = None
            try:
                for _page in range(MAX_PAGES):
                    page = fetch(method, {"cursor": cursor} if cursor is not None else None)
                    if modern and cursor is None:
                        self.report.list_ttl_ms[key] = ttl_ms(page)
                    items = page.get(key)
                    count += len(items) if isinstance(items, list) else 0
                    if isinstance(items, list):
                        names.extend(item.get("name") if isinstance(item, dict) else None for item in items)
                        if key == "tools":
                            tools.extend(items)
                            self._needs_tasks(items)
                    next_cursor = page.get("nextCursor")
                    if not isinstance(next_cursor, str):
                        break
                    cursor = next_cursor
            except RpcError as exc:
                if method == "resources/templates/list" and exc.error.code == METHOD_NOT_FOUND:
                    # Resource templates are optional within the resources capability.
                    self._step(method, started, OK, "the server has no resource templates")
                    continue
                self._failure(method, exc, started)
                continue
            except McpError as exc:
                self._failure(method, exc, started)
                continue
            self.report.counts[key] = count
            self.report.names[key] = [item_name(name) for name in names]
            outcome = f"{key}: {count}"
            if key == "tools":
                outcome = self._tools_outcome(tools)
            self._step(method, started, OK, outcome)

    def _tasks(self, offered: bool) -> None:
        self.report.tasks = {"mode": self.settings.serving.tasks, "offered": offered, "required": []}

    def _needs_tasks(self, tools: list[Any]) -> None:
        """Note the tools whose entry says that they only run as tasks (``execution.taskSupport``)."""
        assert self.report.tasks is not None
        for tool in tools:
            execution = tool.get("execution") if isinstance(tool, dict) else None
            if isinstance(execution, dict) and execution.get("taskSupport") == "required":
                self.report.tasks["required"].append(printable(str(tool.get("name"))))

    def _tasks_note(self) -> None:
        """A 2026-07-28 server whose tools need tasks, and ``--tasks off``: they fail."""
        tasks = self.report.tasks
        if tasks is None or tasks["mode"] != "off" or not (tasks["offered"] or tasks["required"]):
            return
        self.report.notes.append(Problem(*check_problem("tasks_off")))

    def _tools_outcome(self, tools: list[Any]) -> str:
        """Note the full tool list ``tools`` (its app-only tools and what the tool filter does to
        it); the outcome of the ``tools/list`` step."""
        names = [tool.get("name") if isinstance(tool, dict) else None for tool in tools]
        self.tool_names = [name for name in names if isinstance(name, str)]
        self.report.app_only_tools = [item_name(tool.get("name")) for tool in tools if app_only(tool)]
        apps = len(self.report.app_only_tools)
        outcome = f"tools: {len(tools)}" + (f" ({apps} for apps only)" if apps else "")
        if not self.tool_filter.active:
            return outcome
        shown = self._filter_tools(tools)
        outcome += f", {shown['after']} after the tool filter"
        if shown["appOnlyAfter"]:
            outcome += f" (and {shown['appOnlyAfter']} for apps only)"
        return outcome

    def _filter_tools(self, tools: list[Any]) -> dict[str, Any]:
        """Report what the tool filter does to the full tool list ``tools``, as the bridge does it.

        VS Code gives the model the tools that the bridge lists, but for the app-only tools
        (``_meta.ui.visibility: ["app"]``), which only the view of an app calls: they count
        apart. The bridge keeps those of the apps whose entry tool it keeps.
        """
        tool_filter = self.tool_filter
        names = [tool.get("name") if isinstance(tool, dict) else None for tool in tools]
        listed = shown_tools(tools, tool_filter)
        kept_apps = [tool for tool in listed if app_only(tool)]
        self.kept_app_tools = {tool["name"] for tool in kept_apps if isinstance(tool.get("name"), str)}
        apps_before = sum(1 for tool in tools if app_only(tool))
        apps_after = len(kept_apps)
        before, after = len(tools) - apps_before, len(listed) - apps_after
        self.report.tool_filter = {
            "allow": list(tool_filter.allow),
            "deny": list(tool_filter.deny),
            "before": before,
            "after": after,
            "appOnlyBefore": apps_before,
            "appOnlyAfter": apps_after,
            "unmatched": list(tool_filter.unmatched(names)),
        }
        strings = [name for name in names if isinstance(name, str)]
        for pattern in self.report.tool_filter["unmatched"]:
            self._problem(*_unmatched(pattern, strings, deny=pattern not in tool_filter.allow))
        if after == 0 and before:
            self._problem(*check_problem("filter_hides_all", count=before))
        return self.report.tool_filter

    def _call_tool(self, fetch: Callable[[str, dict[str, Any] | None], dict[str, Any]]) -> None:
        """Call the tool of ``--call-tool`` once, as VS Code would, and report what it answered."""
        name = self.settings.call_tool
        if name is None:
            return
        step = "tools/call"
        shown = printable(name)
        if self.tool_filter.hides(name) and name not in self.kept_app_tools:
            self._skip(step, f"{shown}: the tool filter hides it from VS Code")
            return
        if self._out_of_time(step):
            return
        self.server_asked.clear()
        started = time.monotonic()
        try:
            result = fetch(step, {"name": name, "arguments": dict(self.settings.call_arguments)})
        except RpcError as exc:
            if self._needs_2025_era(exc.error.message, started):
                return
            if self._unknown_tool(started, failure_text(exc)):
                return
            self._failure(step, exc, started)
            return
        except McpError as exc:
            self._failure(step, exc, started)
            return
        if result.get("resultType") == "input_required":
            requests = result.get("inputRequests")
            asked = asked_methods(requests.values() if isinstance(requests, dict) else ())
            self._step(step, started, OK, f"{shown}: the tool asks for input ({asked}); the check gives none")
            return
        if result.get("isError") is True:
            text = first_text(result)
            if self._needs_2025_era(text, started) or self._unknown_tool(started, f"an error result: {text}"):
                return
            self._step(step, started, FAILED, f"{shown}: an error result: {text}")
            self._problem(*check_problem("tool_error_result", tool=shown, text=text))
            return
        outcome = f"{shown}: a result ({first_text(result)})"
        if self.server_asked:
            outcome += (
                f"; in the middle of the call the server asked for {', '.join(sorted(self.server_asked))}, "
                "which the check answered as a client without a user"
            )
        self._step(step, started, OK, outcome)

    def _unknown_tool(self, started: float, answer: str) -> bool:
        """Whether the failed call was of a tool that the tool list of the server does not name;
        then the step failed, with the closest names of the list."""
        name = self.settings.call_tool or ""
        if self.tool_names is None or name in self.tool_names:
            return False
        shown = printable(name)
        self._step("tools/call", started, FAILED, f"{shown}: {answer}")
        close = closest_names(name, self.tool_names)
        if close:
            self._problem(*check_problem("unknown_tool_close", tool=shown, names=_names(close)))
        else:
            self._problem(*check_problem("unknown_tool", tool=shown))
        return True

    def _needs_2025_era(self, answer: str, started: float) -> bool:
        """Whether the answer of a 2026-07-28 call says that the tool needs the requests of the
        2025 era; then the step failed, and :meth:`.check._Check._era_advice` tells what to do."""
        if self.report.era != MODERN or not no_back_channel({"message": answer}):
            return False
        self.needs_2025_era = printable(answer, MAX_ANSWER_CHARS)
        self._step(
            "tools/call",
            started,
            FAILED,
            f"{printable(self.settings.call_tool or '')}: it needs a request of the 2025 era: "
            f"{self.needs_2025_era}",
        )
        return True

    def _answer_server(self, peer: Any, request: Any) -> None:
        """Answer a request of a 2025-era server as a client with no user and no workspace.

        ``ping`` gets ``{}``, ``roots/list`` no roots, an elicitation a decline and
        every other request an error. A server asks at ``notifications/initialized``
        (roots, as some do) or in the middle of the call of ``--call-tool``.
        """
        from ..mcp.jsonrpc import ErrorObject, ErrorResponse, Response

        method = request.method
        self.server_asked.add(method if method in SERVER_REQUESTS else "another request")
        if method == "ping":
            peer.answer(Response(request.id, {}))
        elif method == "roots/list":
            peer.answer(Response(request.id, {"roots": []}))
        elif method == "elicitation/create":
            peer.answer(Response(request.id, {"action": "decline"}))
        elif method == "sampling/createMessage":
            peer.answer(ErrorResponse(request.id, ErrorObject(-1, "The check answers no sampling request.")))
        else:
            peer.answer(
                ErrorResponse(request.id, ErrorObject(METHOD_NOT_FOUND, "The check has no such method."))
            )

    def _stray_lines(self, count: int) -> None:
        self.report.stray_lines = count
        if count:
            lines = "1 line that is not" if count == 1 else f"{count} lines that are not"
            self._problem(*check_problem("stray_lines", lines=lines))


def _names(names: list[str]) -> str:
    """``names`` quoted for the text of a problem: ``a``, ``a or b``, ``a, b or c``."""
    quoted = [repr(printable(name)) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _unmatched(pattern: str, names: list[str], *, deny: bool) -> tuple[str, str]:
    """The problem of an ``--allow-tool`` or ``--deny-tool`` pattern that matches no tool, and its fix."""
    option = "deny" if deny else "allow"
    shown = repr(printable(pattern))
    close = closest_pattern(pattern, names)
    if close is None:
        return check_problem(f"{option}_matches_nothing", pattern=shown)
    better, tool = close
    return check_problem(
        f"{option}_matches_nothing_close",
        pattern=shown,
        better=repr(printable(better)),
        tool=repr(printable(tool)),
    )
