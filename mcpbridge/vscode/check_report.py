"""The report of ``mcp-bridge-vscode check``: what it holds, and its text for a person.

:class:`Report` is what the check found; :meth:`Report.to_json` gives it as one JSON object
(``check --json``) and :func:`render_text` as lines for a terminal.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from ..mcp.protocol import MODERN
from . import settings as args

__all__ = [
    "LISTS",
    "MAX_ANSWER_CHARS",
    "MAX_NAME_CHARS",
    "Listing",
    "Problem",
    "Report",
    "Step",
    "asked_methods",
    "colors",
    "first_text",
    "item_name",
    "printable",
    "render_text",
    "url_upstream",
]


@dataclass(frozen=True)
class Listing:
    """A list that the check reads: its key (in the result and the report), method,
    the server capability that announces it, and its label in the text report."""

    key: str
    method: str
    capability: str
    label: str


#: The lists that the check reads.
LISTS: Final = (
    Listing("tools", "tools/list", "tools", "Tools"),
    Listing("prompts", "prompts/list", "prompts", "Prompts"),
    Listing("resources", "resources/list", "resources", "Resources"),
    Listing("resourceTemplates", "resources/templates/list", "resources", "Templates"),
)


#: The narrowest text report, whatever the terminal says.
MIN_WIDTH: Final = 40


#: The status of a step.
OK: Final = "ok"


FAILED: Final = "failed"


TIMED_OUT: Final = "timed out"


SKIPPED: Final = "skipped"


STATUS_WIDTH: Final = len(TIMED_OUT)


@dataclass
class Step:
    """One step of the check: its name, its time, its status (``ok``, ``failed``,
    ``timed out`` or ``skipped``) and what came of it, or why."""

    name: str
    ms: int
    status: str
    outcome: str

    @property
    def ok(self) -> bool:
        return self.status == OK


@dataclass
class Problem:
    """A problem the check found, and what fixes it."""

    problem: str
    fix: str


@dataclass
class Report:
    """What the check found; :func:`render_text` and :meth:`to_json` show it."""

    upstream: dict[str, Any]
    era: str | None = None
    protocol_version: str | None = None
    server: dict[str, Any] | None = None
    steps: list[Step] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    #: The names of the items of each list, in the order of the server.
    names: dict[str, list[str]] = field(default_factory=dict)
    #: The names of the tools that only the view of an app calls (``_meta.ui.visibility: ["app"]``):
    #: VS Code does not give them to the model.
    app_only_tools: list[str] = field(default_factory=list)
    #: With ``--allow-tool`` or ``--deny-tool``: the patterns, the tools for the model before and
    #: after the filter (``before``, ``after``), the app-only tools before and after it
    #: (``appOnlyBefore``, ``appOnlyAfter``), and the patterns that match no tool.
    tool_filter: dict[str, Any] | None = None
    #: The ``ttlMs`` of the first page of each list (2026-07-28 only): how long the bridge keeps it.
    list_ttl_ms: dict[str, int] = field(default_factory=dict)
    #: ``--tasks`` (``mode``), whether the server offers tasks (``offered``) and the tools
    #: whose entry says that they need them (``required``).
    tasks: dict[str, Any] | None = None
    #: ``--host-profile`` (``setting``) and the profile each kind of host gets under it.
    host_profile: dict[str, Any] = field(default_factory=dict)
    sign_in: dict[str, Any] = field(default_factory=dict)
    proxy: dict[str, Any] = field(default_factory=dict)
    ca: dict[str, Any] = field(default_factory=dict)
    #: The lines of a command's stdout that were not messages; ``None`` for a URL.
    stray_lines: int | None = None
    problems: list[Problem] = field(default_factory=list)
    #: The 2025-era revision that a 2026-07-28 server speaks too, if it does.
    also_speaks: str | None = None
    #: ``--protocol``: with ``auto`` or ``legacy`` the bridge reaches a server of both eras in
    #: the 2025 era and passes it through; ``2026-07-28`` translates.
    protocol: str = "auto"
    #: What a user should know although nothing failed, each with what to do.
    notes: list[Problem] = field(default_factory=list)
    #: Why the check did not contact the server at all (then it judges the options only),
    #: or ``None`` when it tried.
    not_checked: str | None = None

    @property
    def reached_in(self) -> str | None:
        """The revision that the bridge speaks to the server: that of a 2025-era server, the
        2025-era one of a server of both eras unless ``--protocol 2026-07-28``, else 2026-07-28."""
        if self.era == MODERN and self.also_speaks is not None and self.protocol != MODERN:
            return self.also_speaks
        return self.protocol_version

    @property
    def ok(self) -> bool:
        """The server works: the check found its era and no problem."""
        return self.era is not None and not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "upstream": self.upstream,
            "era": self.era,
            "protocolVersion": self.protocol_version,
            "server": self.server,
            "steps": [
                {"step": s.name, "ms": s.ms, "status": s.status, "ok": s.ok, "outcome": s.outcome}
                for s in self.steps
            ],
            "counts": self.counts,
            "names": self.names,
            "appOnlyTools": self.app_only_tools,
            "toolFilter": self.tool_filter,
            "listTtlMs": self.list_ttl_ms if self.era == MODERN else None,
            "tasks": self.tasks,
            "hostProfile": self.host_profile,
            "signIn": self.sign_in,
            "proxy": self.proxy,
            "ca": self.ca,
            "strayStdoutLines": self.stray_lines,
            "problems": [{"problem": p.problem, "fix": p.fix} for p in self.problems],
            "alsoSpeaks": self.also_speaks,
            "reachedIn": self.reached_in,
            "notChecked": self.not_checked,
            "notes": [{"note": n.problem, "fix": n.fix} for n in self.notes],
        }


def colors(stream: TextIO) -> Callable[[str, str], str] | None:
    """Color the words of the report on a terminal (with typer's styles), else nothing: a pipe,
    a file and ``--json`` get plain text."""
    if not getattr(stream, "isatty", lambda: False)() or os.environ.get("NO_COLOR"):
        return None
    import typer

    def color(text: str, name: str) -> str:
        return typer.style(text, fg=name, bold=name == "red")

    return color


#: The column of the values of the text report.
VALUE_COLUMN: Final = 12


#: The color of each status of a step.
STATUS_COLORS: Final = {OK: "green", FAILED: "red", TIMED_OUT: "red", SKIPPED: "yellow"}


def render_text(report: Report, color: Callable[[str, str], str] | None = None, width: int = 80) -> str:
    """The report as lines for a person; the names of the lists are wrapped to ``width``."""
    paint = color or (lambda text, _name: text)
    lines: list[str] = []

    def row(label: str, value: str) -> None:
        lines.append(_labeled(label, value))

    row("Upstream", _describe_upstream(report.upstream))
    row("Era", _describe_era(report))
    if report.server is not None:
        row("Server", f"{report.server['name']} {report.server.get('version', '')}".rstrip())
    if report.steps:
        lines.append("Steps:")
        name_width = max(len(step.name) for step in report.steps)
        for step in report.steps:
            mark = paint(f"{step.status:<{STATUS_WIDTH}}", STATUS_COLORS[step.status])
            lines.append(f"  {step.name:<{name_width}}  {step.ms:>6} ms  {mark}  {step.outcome}")
    for listing in LISTS:
        if listing.key in report.counts:
            count = str(report.counts[listing.key])
            if listing.key == "tools" and report.app_only_tools:
                count += f" ({len(report.app_only_tools)} for apps only)"
            head = _labeled(listing.label, count)
            lines.extend(_name_lines(head, report.names.get(listing.key, []), width))
    if report.tool_filter is not None:
        row("Filter", _describe_filter(report.tool_filter))  # a pattern that matches nothing: Problems
    if report.era == MODERN:
        if report.list_ttl_ms:
            row("List cache", _list_cache(report.list_ttl_ms))
    elif report.era is not None:
        row("List cache", "none: a 2025-era server gives no ttlMs")
    if report.tasks is not None:
        row("Tasks", _describe_tasks(report.tasks, modern=report.era == MODERN))
    if report.host_profile:
        row("Profile", describe_host_profile(report.host_profile))
    row("Sign-in", _describe(report.sign_in))
    if "flows" in report.sign_in and report.sign_in.get("state") != "not needed":
        lines.append(f"{'':{VALUE_COLUMN}}sign-in flows: {describe_flows(report.sign_in['flows'])}")
    if "renewal" in report.sign_in:
        renewal = report.sign_in["renewal"]
        silent = {True: "silent", False: "not silent", None: "up to the server"}[renewal["silent"]]
        row("Renewal", f"{silent}: {renewal['why']}")
    if "resourceIndicator" in report.sign_in:
        indicator = report.sign_in["resourceIndicator"]
        sends = {"none": "not sent", "option": "sent", "metadata": "sent"}[indicator["sends"]]
        row("Resource", f"{sends}: {indicator['why']}")
    row("Proxy", _describe_proxy(report.proxy))
    row("CA", _describe(report.ca))
    if report.notes:
        lines.append("Notes:")
        for note in report.notes:
            lines.append(f"  - {note.problem}")
            lines.append(f"    {note.fix}")
    if report.problems:
        lines.append("Problems:")
        for problem in report.problems:
            lines.append(f"  - {problem.problem}")
            lines.append(f"    fix: {problem.fix}")
    row("Result", _result(report, paint))
    return "\n".join(lines) + "\n"


def _describe_filter(tool_filter: dict[str, Any]) -> str:
    """How many tools VS Code gives the model under the filter, and how many the apps keep."""
    text = f"VS Code sees {tool_filter['after']} of {tool_filter['before']} tools (--allow-tool, --deny-tool)"
    apps = tool_filter["appOnlyAfter"]
    if apps:
        more = "1 more is" if apps == 1 else f"{apps} more are"
        text += f"; {more} for apps only: the bridge keeps them for the views of the apps it keeps"
    return text


def _describe_upstream(upstream: dict[str, Any]) -> str:
    if upstream.get("kind") == "command":
        return f'the command "{upstream.get("name", "")}" over stdio'
    hidden = " (its query is not shown)" if upstream.get("queryHidden") else ""
    over = _TRANSPORT_TEXT.get(str(upstream.get("transport")), "Streamable HTTP")
    return f"{upstream.get('url', '')} over {over}{hidden}"


#: How the text report names the transport of a URL upstream.
_TRANSPORT_TEXT: Final = {"streamable-http": "Streamable HTTP", "sse": "HTTP+SSE (2024-11-05)"}


def _describe_era(report: Report) -> str:
    if report.era == MODERN and report.also_speaks is not None:
        see = " (see the notes)" if report.notes else ""
        if report.reached_in == MODERN:
            return (
                f"MCP {MODERN} and {report.also_speaks}: the bridge translates {MODERN} for VS Code, "
                f"as --protocol {MODERN} forces{see}"
            )
        return (
            f"MCP {report.also_speaks} and {MODERN}: the bridge reaches it in {report.also_speaks}, the "
            f"revision of VS Code, and passes it through; --protocol {MODERN} forces the translation{see}"
        )
    if report.era == MODERN:
        return f"MCP {MODERN}: the bridge translates it for VS Code"
    if report.era is not None:
        return f"MCP {report.protocol_version} (2025 era): the bridge passes it through"
    return "not checked" if report.not_checked is not None else "not found"


def _labeled(label: str, value: str) -> str:
    """A row of the text report: the label, then the value in its column."""
    return f"{label + ':':<{VALUE_COLUMN - 1}} {value}"


def _name_lines(head: str, names: list[str], width: int) -> list[str]:
    """``head``, then the names, wrapped to ``width`` under the column of the values."""
    if not names:
        return [head]
    return textwrap.wrap(
        ", ".join(names),
        width=max(width, MIN_WIDTH),
        initial_indent=f"{head}: ",
        subsequent_indent=" " * VALUE_COLUMN,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _result(report: Report, paint: Callable[[str, str], str]) -> str:
    """The last line: the server works only when the check found no problem."""
    if report.ok:
        return paint("the server works", "green")
    if report.not_checked is not None:
        return paint(f"not checked: {report.not_checked} (see Problems)", "red")
    if report.era is None:
        return paint("the server does not work", "red")
    count = len(report.problems)
    found = "1 problem" if count == 1 else f"{count} problems"
    return paint(f"the server answers, but the check found {found} (see Problems)", "red")


def _list_cache(ttls: dict[str, int]) -> str:
    """How long the bridge keeps each list, from the ``ttlMs`` of its first page."""
    from ..bridge.rules.errortable import format_duration

    parts = [
        f"{key} {format_duration(ttl / 1000)}" if ttl > 0 else f"{key} not kept (ttlMs 0)"
        for key, ttl in ttls.items()
    ]
    return ", ".join(parts)


def _describe_tasks(tasks: dict[str, Any], *, modern: bool) -> str:
    """Whether the server offers tasks, what the bridge does with them, and the tools that need them."""
    required = tasks["required"]
    needs = f"; tools that need them: {', '.join(required)}" if required else ""
    if not modern:
        offered = "the server offers 2025-11-25 tasks" if tasks["offered"] else "the server offers no tasks"
        return f"{offered}; the bridge passes them through{needs}"
    if tasks["mode"] == "off":
        offered = (
            "the server offers the Tasks extension" if tasks["offered"] else "the server offers no tasks"
        )
        return f"off: the bridge declares no tasks ({offered}){needs}"
    if tasks["offered"]:
        return f"the server offers the Tasks extension; the bridge carries its tasks{needs}"
    return f"the server does not offer the Tasks extension{needs}"


def _describe_proxy(part: dict[str, Any]) -> str:
    state = str(part.get("state", ""))
    if state == "none":  # not the sign-in's "none" of _describe
        return f"none: {part.get('note', 'a direct connection')}"
    return _describe(part)


def _describe(part: dict[str, Any]) -> str:
    state = str(part.get("state", ""))
    if state in ("stored", "expired"):
        text = "a stored sign-in" if state == "stored" else "an expired sign-in"
        if "expires" in part:
            text += f" (it expires {part['expires']})" if state == "stored" else f" ({part['expires']})"
        return f"{text}; {part.get('store', '')}".rstrip("; ")
    if state == "none":
        return f"no stored sign-in; {part.get('store', '')}".rstrip("; ")
    if state == "in use" and "variable" in part:
        return f"{part['proxy']} (from {part['variable']})"
    if state == "system":
        return "the trust store of the system"
    if state == "system and file":
        return f"the trust store of the system and {part['file']}"
    note = part.get("note")
    return f"{state}: {note}" if note else state


def describe_flows(part: dict[str, Any]) -> str:
    if part.get("state") != "checked":
        return f"{part.get('state', '')} ({part.get('note', '')})"
    offered = ", ".join(part["offered"]) or "none"
    unknown = (
        f" (its metadata does not say whether it offers {', '.join(part['unknown'])})"
        if part["unknown"]
        else ""
    )
    uses = part.get("uses")
    chosen = f"the bridge uses {uses}: {part['why']}" if uses else f"no flow: {part['why']}"
    return f"the server offers {offered}{unknown}; {chosen}"


def describe_host_profile(profile: dict[str, Any]) -> str:
    if profile["setting"] != "auto":
        return f"{profile['setting']} for every host (--host-profile)"
    return (
        f"{profile['vscode']} for VS Code, {profile['otherHosts']} for Codex CLI, Cursor, Claude Desktop, "
        "Zed and hosts of older revisions (--host-profile auto, chosen at the host's initialize)"
    )


# ---------------------------------------------------------------------------------------------
# The words of the report
# ---------------------------------------------------------------------------------------------


#: The longest name of a tool, prompt or resource in the report (the tool names of the
#: protocol have at most 128 characters).
MAX_NAME_CHARS: Final = 128


#: The longest text of an answer of the server in the report.
MAX_ANSWER_CHARS: Final = 200


def printable(text: str, limit: int = 40) -> str:
    """A value of the server for the report: at most ``limit`` characters, no control character."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def item_name(value: Any) -> str:
    """The name of a list item for the report."""
    return printable(value, MAX_NAME_CHARS) if isinstance(value, str) else "(no name)"


def first_text(result: dict[str, Any]) -> str:
    """The first text of the content of a tool result, for the report."""
    content = result.get("content")
    for item in content if isinstance(content, list) else ():
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            return printable(item["text"], MAX_ANSWER_CHARS)
    return "no text"


def asked_methods(requests: Any) -> str:
    """The methods of the input requests of an ``input_required`` result, for the report."""
    methods = {
        printable(request["method"])
        for request in requests
        if isinstance(request, dict) and isinstance(request.get("method"), str)
    }
    return ", ".join(sorted(methods)) or "no request"


def url_upstream(url: str) -> dict[str, Any]:
    """The upstream part of the report of a URL: the URL with its path, without its query and
    fragment (a query can carry a secret), never with a user or a password."""
    parts = urlsplit(url)
    host_port = parts.netloc.rpartition("@")[2]
    return {
        "kind": "url",
        "url": f"{parts.scheme}://{host_port}{parts.path}",
        "queryHidden": bool(parts.query or parts.fragment),
        "scheme": parts.scheme,
        "host": args.default_name_for_url(url),
        "port": parts.port,
    }
