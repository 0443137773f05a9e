"""``mcp-bridge-vscode check [options] (-- <command> | <url>)``: diagnose an upstream server.

The check does one time what the bridge does when VS Code starts it, and tells
a person in a terminal what it found:

* the upstream: the command, or the URL with its path (never its query, which can
  carry a secret);
* the era of the server (``server/discover`` of 2026-07-28; after a failure that
  shows a 2025-era server, ``initialize`` of 2025-11-25, as the bridge does);
* the name and the version of the server, and each step with its time and its
  status: ok, failed, timed out or skipped, with the reason;
* the names of the tools, prompts, resources and resource templates (every page of
  each list), asked with the client capabilities that VS Code declares, so that a
  server offers the check what it offers VS Code; with ``--allow-tool`` or
  ``--deny-tool`` the number of tools that VS Code would see, and each pattern that
  matches no tool;
* how long the bridge would keep each list (the ``ttlMs`` of its first page; a
  2025-era server gives none);
* whether the server offers tasks (the Tasks extension of 2026-07-28, or the
  ``tasks`` of 2025-11-25), the tools whose entry says that they need them, and what
  ``--tasks`` makes of them;
* with ``--call-tool``, one call of that tool; a call that fails because the tool
  sends a request of the 2025 era in the middle of it is a problem, which
  ``--protocol legacy`` fixes for a server that speaks both eras;
* for a 2026-07-28 server, whether it speaks the 2025 era too (an ``initialize``
  on a second connection), and what that means for ``--protocol``;
* the lines that a command wrote to stdout that are not messages;
* the sign-in state, the sign-in flows (only when the server asked for a sign-in),
  the proxy and the CA certificates in use;
* each problem, with the option that fixes it.

The whole run has one time limit, ``--discover-timeout``: each wait gets what is
left of it, a step that the limit cuts is "timed out" and one that no time is left
for is "skipped"; the servers then get :data:`LATE_CLOSE_GRACE` to stop.

The report goes to stdout, as text or (``--json``) as one JSON object. The log
lines of the bridge and the stderr lines of an upstream command go to stderr.
The exit code is 0 when the server works (the check found no problem), 1 when it
does not, and 2 for a ``--ca-file`` that cannot be used. The report never holds a
secret: no header value, no token, no query of the URL and no password of a proxy.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from .. import __version__
from ..bridge.errortable import connect_fix
from ..bridge.revisions import LATEST as LATEST_REVISION
from ..bridge.revisions import OTHER_HOSTS, choose_profile
from ..bridge.tasks import offers_extension
from ..bridge.translate import client_capabilities_for_upstream
from ..mcp.errors import Closed, McpError, RequestTimeout, RpcError, SpawnFailed
from ..mcp.httpwire import ConnectError
from ..mcp.jsonrpc import METHOD_NOT_FOUND
from ..mcp.protocol import LEGACY, META_SERVER_INFO, MODERN
from ..mcp.text import format_duration
from ..oauth.errors import problem_words
from . import settings as args

__all__ = ["Report", "check", "run_check", "render_text"]

logger = logging.getLogger("mcpbridge.vscode")

#: The exit codes of check.
EXIT_WORKS: Final = 0
EXIT_FAILS: Final = 1
EXIT_BAD_CA_FILE: Final = 2
#: The client of the check, in ``clientInfo``.
CLIENT_INFO: Final = {"name": "mcp-bridge-vscode-check", "version": __version__}
#: The client capabilities that VS Code declares in ``initialize``. The check declares the
#: same (mapped to 2026-07-28 for a modern server): servers offer some tools only to a
#: client that can answer roots, sampling or elicitation requests.
CLIENT_CAPABILITIES: Final = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
}


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
#: The same capabilities in the ``_meta`` of each request to a 2026-07-28 server.
UPSTREAM_CAPABILITIES: Final = client_capabilities_for_upstream(CLIENT_CAPABILITIES)
#: The params of the check's ``initialize`` to a 2025-era server.
INITIALIZE_PARAMS: Final = {
    "protocolVersion": LEGACY,
    "capabilities": CLIENT_CAPABILITIES,
    "clientInfo": CLIENT_INFO,
}
#: The longest wait for the answer to ``initialize`` when the check asks a 2026-07-28
#: server whether it speaks the 2025 era too.
ERA_PROBE_TIMEOUT: Final = 10.0
#: The most pages of one list that the check reads.
MAX_PAGES: Final = 100
#: The wait for the close of an upstream server while the time limit has time left.
CLOSE_GRACE: Final = 2.0
#: The wait for the close once the time limit is (nearly) used up: a server that keeps
#: running after the end of its stdin is stopped at once, so the run ends in time.
LATE_CLOSE_GRACE: Final = 0.1
#: The longest name of a tool, prompt or resource in the report (the tool names of the
#: protocol have at most 128 characters).
MAX_NAME_CHARS: Final = 128
#: The longest text of an answer of the server in the report.
MAX_ANSWER_CHARS: Final = 200
#: The narrowest text report, whatever the terminal says.
MIN_WIDTH: Final = 40

#: The status of a step.
OK: Final = "ok"
FAILED: Final = "failed"
TIMED_OUT: Final = "timed out"
SKIPPED: Final = "skipped"
STATUS_WIDTH: Final = len(TIMED_OUT)

#: What a server answers when a tool sends a request of the 2025 era in the middle of a
#: call on a 2026-07-28 connection (lower case): the Python SDK's ``NoBackChannelError``
#: ("... has no back-channel for server-initiated requests") and FastMCP's ``ctx.elicit()``
#: ("... is unavailable on 2026-07-28 connections").
ERA_2025_ONLY_MARKERS: Final = ("back-channel", "server-initiated request", f"unavailable on {MODERN}")
#: The server's requests that the check tells apart in the middle of a call.
SERVER_REQUESTS: Final = ("elicitation/create", "sampling/createMessage", "roots/list", "ping")


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
    #: With ``--allow-tool`` or ``--deny-tool``: the patterns, the tools before and after
    #: the filter, and the patterns that match no tool.
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
    #: What a user should know although nothing failed, each with what to do.
    notes: list[Problem] = field(default_factory=list)

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
            "notes": [{"note": n.problem, "fix": n.fix} for n in self.notes],
        }


def check(settings: args.Settings) -> int:
    """Run the check of ``settings`` (the ``check`` form), write the report, return the exit code.

    The time limit counts from the start of the process, where the system tells it:
    the user waits for the start-up of Python too.
    """
    from .. import platform

    report, code = run_check(settings, started=time.monotonic() - (platform.process_age() or 0.0))
    if settings.json:
        sys.stdout.write(json.dumps(report.to_json(), ensure_ascii=False) + "\n")
    else:
        width = shutil.get_terminal_size().columns
        sys.stdout.write(render_text(report, color=_colors(sys.stdout), width=width))
    sys.stdout.flush()
    return code


def run_check(
    settings: args.Settings, env: dict[str, str] | None = None, *, started: float | None = None
) -> tuple[Report, int]:
    """Check the upstream server of ``settings``; return the report and the exit code.

    ``--discover-timeout`` bounds the run from ``started`` (a :func:`time.monotonic` time;
    by default now).
    """
    environ = dict(os.environ) if env is None else env
    run = _Check(settings, environ, time.monotonic() if started is None else started)
    code = run.url() if settings.url is not None else run.command()
    return run.report, code


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


class _Era:
    """What :meth:`_Check._discover` gives for a server of the 2025 era."""


_LEGACY_ERA: Final = _Era()


class _Check:
    def __init__(self, settings: args.Settings, env: dict[str, str], started: float) -> None:
        from ..bridge.lists import ToolFilter

        self.settings = settings
        self.env = env
        self.tool_filter = ToolFilter(settings.allow_tools, settings.deny_tools)
        #: The one time limit of the whole run (a :func:`time.monotonic` time).
        self.deadline = started + settings.discover_timeout
        self.report = Report(upstream={}, host_profile=_host_profile(settings.host_profile))
        #: The server answered 401 or 403: the sign-in flows matter.
        self.asked_sign_in = False
        #: The requests of a 2025-era server since the last clear (see :data:`SERVER_REQUESTS`).
        self.server_asked: set[str] = set()
        #: What the server answered the ``--call-tool`` call on a 2026-07-28 connection, when
        #: that says that the tool needs the requests of the 2025 era.
        self.needs_2025_era: str | None = None

    # ----------------------------------------------------------------- forms

    def command(self) -> int:
        from ..bridge.childshare import StdioUpstream

        settings = self.settings
        name = args.default_name_for_command(settings.command[0]) if settings.command else ""
        self.report.upstream = {"kind": "command", "name": name}
        self.report.sign_in = {"state": "not used", "note": "a command has no sign-in"}
        self.report.proxy = {"state": "not used", "note": "the bridge speaks to a command over stdio"}
        self.report.ca = {"state": "not used", "note": "the bridge speaks to a command over stdio"}
        upstream = StdioUpstream(settings.command, max_line_bytes=settings.max_line_bytes)
        self._run(upstream.connect, upstream, over_http=False)
        self._stray_lines(upstream.stray_lines)
        return self._exit_code()

    def url(self) -> int:
        from ..bridge.era import LegacyTransports
        from ..bridge.upstream import transport_connector, url_transports
        from ..mcp.http import CaFileError, proxy_for, tls_context

        settings = self.settings
        url = settings.url
        assert url is not None
        self.report.upstream = _url_upstream(url)
        self.report.sign_in, token = _sign_in_state(settings, self.env)
        proxy = proxy_for(url, self.env)
        if proxy is None:
            self.report.proxy = {"state": "none", "note": "a direct connection"}
        else:
            variable, proxy_url = proxy
            proxy_parts = urlsplit(proxy_url)
            self.report.proxy = {
                "state": "in use",
                "variable": variable.upper(),
                "proxy": f"{proxy_parts.scheme}://{proxy_parts.hostname or ''}"
                + (f":{proxy_parts.port}" if proxy_parts.port else ""),
            }
        self.report.ca = {"state": "system"}
        if settings.ca_file is not None:
            self.report.ca = {"state": "system and file", "file": settings.ca_file}
        try:
            context = tls_context(settings.ca_file)
        except CaFileError as exc:
            self._problem(
                f"the CA certificates of --ca-file cannot be used: {exc.detail}",
                "Give a readable PEM file of CA certificates with --ca-file.",
            )
            return EXIT_BAD_CA_FILE
        headers = [(header.name, header.value) for header in settings.headers]
        if token is not None:
            headers.append(("Authorization", f"Bearer {token}"))

        modern, legacy = url_transports(
            url,
            headers=headers,
            max_response_bytes=settings.max_response_bytes,
            ssl_context=context,
            env=self.env,
        )
        started = time.monotonic()
        try:
            connect = transport_connector(modern)
            self._run(connect, LegacyTransports(legacy), over_http=True)
        except McpError as exc:  # the transport could not be made (a proxy variable)
            self._failure("connect", exc, started)
        if not settings.static_authorization:
            flows, server = self._sign_in_flows(context, stored=token is not None)
            self.report.sign_in["flows"] = flows
            if server is not None and "renewal" not in self.report.sign_in:
                self.report.sign_in["renewal"] = _predicted_renewal(settings, server)
        return self._exit_code()

    def _exit_code(self) -> int:
        return EXIT_WORKS if self.report.ok else EXIT_FAILS

    # ------------------------------------------------------------ time limit

    def _left(self, limit: float | None = None) -> float:
        """The seconds left of the time limit of the run, at most ``limit``."""
        left = max(0.0, self.deadline - time.monotonic())
        return left if limit is None else min(left, limit)

    def _wait(self, method: str) -> float:
        """The time that a request of ``method`` may wait for its answer.

        Raises:
            RequestTimeout: no time is left.
        """
        left = self._left()
        if left <= 0:
            raise RequestTimeout(f"{method}: no time left")
        return left

    def _grace(self) -> float:
        """The wait for the close of a server: half of what is left of the time limit (a child
        gets it twice: after the end of its stdin, then after ``SIGTERM``), within bounds."""
        return min(CLOSE_GRACE, max(self._left() / 2, LATE_CLOSE_GRACE))

    def _out_of_time(self, step: str) -> bool:
        """Whether no time is left for ``step``; then it is skipped."""
        if self._left() > 0:
            return False
        limit = format_duration(self.settings.discover_timeout)
        self._skip(step, f"no time left (--discover-timeout {limit} bounds the whole check)")
        return True

    # ------------------------------------------------------------------ run

    def _run(self, connect: Any, legacy_upstream: Any, *, over_http: bool) -> None:
        from ..bridge.era import LEGACY as FORCED_LEGACY

        if self.settings.protocol == FORCED_LEGACY:
            self._skip("server/discover", "--protocol legacy")
            self._legacy(legacy_upstream, None)
            return
        probe = self._connect(connect, over_http=over_http)
        if probe is None:
            return
        handed_over = False
        try:
            found = self._discover(probe, over_http=over_http)
            if found is _LEGACY_ERA:
                handed_over = True
                self._legacy(legacy_upstream, probe)
                return
            if isinstance(found, dict):
                self._modern(probe, found)
        finally:
            if not handed_over:
                probe.close(self._grace())
        if self.report.era == MODERN and not self.report.problems:
            self._other_era(legacy_upstream)
        self._era_advice()

    def _connect(self, connect: Any, *, over_http: bool) -> Any:
        """The started client of the probe, or ``None`` after a failure."""
        step = "connect" if over_http else "start"
        if self._out_of_time(step):
            return None
        started = time.monotonic()
        try:
            probe = connect(CLIENT_INFO, lambda _n: None)
        except McpError as exc:
            self._failure(step, exc, started)
            return None
        if not over_http:
            self._step(step, started, OK, "the command runs")
        return probe

    def _discover(self, probe: Any, *, over_http: bool) -> dict[str, Any] | _Era | None:
        """The ``DiscoverResult``, :data:`_LEGACY_ERA` for a 2025-era server, or ``None``."""
        from ..bridge.era import means_legacy

        step = "server/discover"
        if self._out_of_time(step):
            return None
        started = time.monotonic()
        try:
            result: dict[str, Any] = probe.discover(timeout=self._left(), capabilities=UPSTREAM_CAPABILITIES)
        except McpError as exc:
            legacy = means_legacy(exc, protocol="auto", over_http=over_http)
            forced = self.settings.protocol == MODERN
            if isinstance(exc, RequestTimeout) or not legacy:
                self._failure(step, exc, started)
                # As the bridge: no answer from a command may be a 2025-era server.
                return _LEGACY_ERA if legacy and not forced else None
            outcome = f"{_outcome(exc)}: not a {MODERN} server"
            if not forced:
                self._step(step, started, OK, outcome)
                return _LEGACY_ERA
            self._step(step, started, FAILED, outcome)
            self._problem(
                f"the server is not a server of revision {MODERN}: it answered "
                f"server/discover with {_outcome(exc)}",
                "Remove --protocol 2026-07-28: with --protocol auto (the default) the "
                "bridge passes a 2025-era server through.",
            )
            return None
        self._step(step, started, OK, "a DiscoverResult")
        return result

    def _modern(self, client: Any, result: dict[str, Any]) -> None:
        self.report.era = MODERN
        self.report.protocol_version = MODERN
        meta = result.get("_meta")
        info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        if not isinstance(info, dict):
            info = result.get("serverInfo")
        self.report.server = _server(info)
        capabilities = result.get("capabilities")
        capabilities = capabilities if isinstance(capabilities, dict) else {}
        self._tasks(offers_extension(result))

        def fetch(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            answer: dict[str, Any] = client.request(
                method,
                params,
                timeout=self._wait(method),
                capabilities=UPSTREAM_CAPABILITIES,
                allow_input_required=method == "tools/call",
            )
            return answer

        self._count_lists(capabilities, fetch, modern=True)
        self._call_tool(fetch)
        self._tasks_note()

    def _legacy(self, legacy_upstream: Any, probe: Any) -> None:
        from ..mcp.call import object_result
        from ..mcp.jsonrpc import ErrorResponse
        from ..mcp.legacypeer import LegacyPeer

        if self._out_of_time("initialize"):
            if probe is not None:
                probe.close(self._grace())
            return
        transport = legacy_upstream.transport(probe)
        if probe is not None:
            probe.close(self._grace())
        peer = LegacyPeer(
            transport, on_request=lambda r: self._answer_server(peer, r), on_notification=lambda _n: None
        )
        started = time.monotonic()
        try:
            try:
                peer.start()
                answer = peer.request("initialize", INITIALIZE_PARAMS, timeout=self._wait("initialize"))
            except McpError as exc:
                self._failure("initialize", exc, started)
                return
            if isinstance(answer, ErrorResponse):
                self._failure("initialize", RpcError(answer.error), started)
                return
            result = answer.result if isinstance(answer.result, dict) else {}
            version = result.get("protocolVersion")
            if not isinstance(version, str):
                self._step("initialize", started, FAILED, "a result that is not valid")
                self._problem(
                    "the server answered initialize with a result that is not valid",
                    "Examine the server: it is neither of revision 2026-07-28 nor of 2025-11-25.",
                )
                return
            self._step("initialize", started, OK, f"MCP {version}")
            peer.notify("notifications/initialized")
            self.report.era = LEGACY
            self.report.protocol_version = version
            self.report.server = _server(result.get("serverInfo"))
            capabilities = result.get("capabilities")
            capabilities = capabilities if isinstance(capabilities, dict) else {}
            self._tasks(isinstance(capabilities.get("tasks"), dict))

            def fetch(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
                reply = peer.request(method, params, timeout=self._wait(method))
                if isinstance(reply, ErrorResponse):
                    raise RpcError(reply.error)
                return object_result(method, reply.result)

            self._count_lists(capabilities, fetch)
            self._call_tool(fetch)
        finally:
            peer.close(self._grace())

    def _other_era(self, legacy_upstream: Any) -> None:
        """Ask a working 2026-07-28 server on a new connection whether it speaks the 2025 era too.

        Nothing here is a problem: a server that refuses ``initialize``, answers
        late or stops speaks 2026-07-28 only (a wait that the time limit cut says
        "timed out": then the check does not know).
        """
        from ..mcp.jsonrpc import ErrorResponse
        from ..mcp.legacypeer import LegacyPeer

        name = "initialize (2025 era)"
        if self._out_of_time(name):
            return
        timeout = self._left(ERA_PROBE_TIMEOUT)
        started = time.monotonic()
        try:
            transport = legacy_upstream.transport(None)
        except McpError as exc:
            self._step(name, started, OK, f"{_outcome(exc)}: {MODERN} only")
            return
        peer = LegacyPeer(
            transport, on_request=lambda r: self._answer_server(peer, r), on_notification=lambda _n: None
        )
        try:
            try:
                peer.start()
                answer = peer.request("initialize", INITIALIZE_PARAMS, timeout=timeout)
            except RequestTimeout:
                self._step(
                    name,
                    started,
                    TIMED_OUT,
                    f"no answer in {format_duration(timeout)}: "
                    "whether it speaks the 2025 era too is not known",
                )
                return
            except McpError as exc:
                self._step(name, started, OK, f"{_outcome(exc)}: {MODERN} only")
                return
            if isinstance(answer, ErrorResponse):
                self._step(name, started, OK, f"{_outcome(RpcError(answer.error))}: {MODERN} only")
                return
            result = answer.result if isinstance(answer.result, dict) else {}
            version = result.get("protocolVersion")
            if not isinstance(version, str) or version >= MODERN:
                self._step(name, started, OK, f"no 2025-era result: {MODERN} only")
                return
            self._step(name, started, OK, f"MCP {_printable(version)}: the server speaks both eras")
            self.report.also_speaks = _printable(version)
        finally:
            peer.close(self._grace())

    def _era_advice(self) -> None:
        """What the eras that the server speaks, and the ``--call-tool`` call, mean for ``--protocol``.

        A tool that needs the requests of the 2025 era in the middle of a call is a
        problem, which ``--protocol legacy`` fixes when the server speaks that era
        too; a server of both eras without such evidence gets a note.
        """
        both = self.report.also_speaks
        failed = self.needs_2025_era
        if failed is not None:
            problem = (
                f"the tool {_printable(self.settings.call_tool or '')} sends a request of the 2025 era "
                "in the middle of "
                f"its call, which a {MODERN} connection does not carry (the server answered: {failed})"
            )
            if both is not None:
                fix = (
                    "Start the bridge with --protocol legacy: the server speaks the 2025 era too, and "
                    "the bridge then passes it through, requests in the middle of a call included."
                )
            else:
                fix = (
                    f"The server speaks only {MODERN} to the bridge: its tool must ask for input with "
                    "an input_required result instead."
                )
            self._problem(problem, fix)
        elif both is not None:
            self.report.notes.append(
                Problem(
                    f"the server speaks both eras ({MODERN} and {both}); with --protocol "
                    f"auto (the default) the bridge speaks {MODERN} to it, and a tool written for the "
                    "requests of the 2025 era in the middle of a call (such as FastMCP's ctx.elicit()) "
                    f"answers that they are unavailable on {MODERN} connections",
                    "If such a tool fails so, start the bridge with --protocol legacy: it then passes "
                    "the 2025 era through. check --call-tool <name> tells.",
                )
            )

    def _count_lists(
        self,
        capabilities: dict[str, Any],
        fetch: Callable[[str, dict[str, Any] | None], dict[str, Any]],
        *,
        modern: bool = False,
    ) -> None:
        from ..bridge.lists import ttl_ms

        for listing in LISTS:
            if listing.capability not in capabilities:
                continue
            key, method = listing.key, listing.method
            if self._out_of_time(method):
                continue
            started = time.monotonic()
            count = 0
            names: list[Any] = []
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
            self.report.names[key] = [_name(name) for name in names]
            outcome = f"{key}: {count}"
            if key == "tools" and self.tool_filter.active:
                shown = self._filter_tools(names)
                outcome += f", {shown} after the tool filter"
            self._step(method, started, OK, outcome)

    def _tasks(self, offered: bool) -> None:
        self.report.tasks = {"mode": self.settings.tasks, "offered": offered, "required": []}

    def _needs_tasks(self, tools: list[Any]) -> None:
        """Note the tools whose entry says that they only run as tasks (``execution.taskSupport``)."""
        assert self.report.tasks is not None
        for tool in tools:
            execution = tool.get("execution") if isinstance(tool, dict) else None
            if isinstance(execution, dict) and execution.get("taskSupport") == "required":
                self.report.tasks["required"].append(_printable(str(tool.get("name"))))

    def _tasks_note(self) -> None:
        """A 2026-07-28 server whose tools need tasks, and ``--tasks off``: they fail."""
        tasks = self.report.tasks
        if tasks is None or tasks["mode"] != "off" or not (tasks["offered"] or tasks["required"]):
            return
        self.report.notes.append(
            Problem(
                "the server runs tools as tasks (the Tasks extension), and --tasks off declares none: "
                "a tool that needs them fails with -32021 (missing client capability)",
                "Remove --tasks off: with --tasks auto (the default) the bridge carries the tasks.",
            )
        )

    def _filter_tools(self, names: list[Any]) -> int:
        """Report what the tool filter does to the full tool list ``names``; the tools it shows."""
        tool_filter = self.tool_filter
        shown = sum(1 for name in names if not tool_filter.hides(name))
        self.report.tool_filter = {
            "allow": list(tool_filter.allow),
            "deny": list(tool_filter.deny),
            "before": len(names),
            "after": shown,
            "unmatched": list(tool_filter.unmatched(names)),
        }
        return shown

    def _call_tool(self, fetch: Callable[[str, dict[str, Any] | None], dict[str, Any]]) -> None:
        """Call the tool of ``--call-tool`` once, as VS Code would, and report what it answered."""
        name = self.settings.call_tool
        if name is None:
            return
        step = "tools/call"
        shown = _printable(name)
        if self.tool_filter.hides(name):
            self._skip(step, f"{shown}: the tool filter hides it from VS Code")
            return
        if self._out_of_time(step):
            return
        self.server_asked.clear()
        started = time.monotonic()
        try:
            result = fetch(step, {"name": name, "arguments": dict(self.settings.call_arguments)})
        except RpcError as exc:
            if not self._needs_2025_era(exc.error.message, started):
                self._failure(step, exc, started)
            return
        except McpError as exc:
            self._failure(step, exc, started)
            return
        if result.get("resultType") == "input_required":
            requests = result.get("inputRequests")
            asked = _asked_methods(requests.values() if isinstance(requests, dict) else ())
            self._step(step, started, OK, f"{shown}: the tool asks for input ({asked}); the check gives none")
            return
        if result.get("isError") is True:
            text = _first_text(result)
            if not self._needs_2025_era(text, started):
                self._step(step, started, FAILED, f"{shown}: an error result: {text}")
                self._problem(
                    f"the tool {shown} answered with an error result: {text}",
                    "Examine the arguments of --call-arguments and the log of the server.",
                )
            return
        outcome = f"{shown}: a result ({_first_text(result)})"
        if self.server_asked:
            outcome += (
                f"; in the middle of the call the server asked for {', '.join(sorted(self.server_asked))}, "
                "which the check answered as a client without a user"
            )
        self._step(step, started, OK, outcome)

    def _needs_2025_era(self, answer: str, started: float) -> bool:
        """Whether the answer of a 2026-07-28 call says that the tool needs the requests of the
        2025 era; then the step failed, and :meth:`_era_advice` tells what to do."""
        if self.report.era != MODERN or not any(m in answer.lower() for m in ERA_2025_ONLY_MARKERS):
            return False
        self.needs_2025_era = _printable(answer, MAX_ANSWER_CHARS)
        self._step(
            "tools/call",
            started,
            FAILED,
            f"{_printable(self.settings.call_tool or '')}: it needs a request of the 2025 era: "
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
            self._problem(
                f"the server wrote {lines} JSON-RPC to stdout: log to stderr instead",
                "Write the log lines and debug prints of the server to stderr: its stdout carries "
                "the messages of the protocol only, and the bridge drops every other line.",
            )

    def _sign_in_flows(self, context: Any, *, stored: bool) -> tuple[dict[str, Any], Any]:
        """The sign-in flows when they matter (the server asked for a sign-in, or one is stored),
        and the metadata of the authorization server when it was found."""
        if not (self.asked_sign_in or stored):
            return {"state": "not checked", "note": "the server did not ask for sign-in"}, None
        if self._left() <= 0:
            return {"state": "not checked", "note": "no time left of --discover-timeout"}, None
        return _sign_in_flows(self.settings, self.env, context, deadline=self.deadline)

    # --------------------------------------------------------------- report

    def _step(self, name: str, started: float, status: str, outcome: str) -> None:
        self.report.steps.append(Step(name, _ms(started), status, outcome))

    def _skip(self, name: str, reason: str) -> None:
        self.report.steps.append(Step(name, 0, SKIPPED, reason))

    def _problem(self, problem: str, fix: str) -> None:
        self.report.problems.append(Problem(problem, fix))

    def _failure(self, step: str, exc: McpError, started: float) -> None:
        if exc.http_status in (401, 403):
            self.asked_sign_in = True
        if isinstance(exc, RequestTimeout):
            status, outcome = TIMED_OUT, _outcome(exc)
            if self._left() <= 0:
                outcome = (
                    f"no answer before the end of the {format_duration(self.settings.discover_timeout)} "
                    "of --discover-timeout"
                )
        else:
            status, outcome = FAILED, _outcome(exc)
        self._step(step, started, status, outcome)
        problem, fix = _diagnose(step, exc, self.settings)
        self._problem(problem, fix)


def _printable(text: str, limit: int = 40) -> str:
    """A value of the server for the report: at most ``limit`` characters, no control character."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def _name(value: Any) -> str:
    """The name of a list item for the report."""
    return _printable(value, MAX_NAME_CHARS) if isinstance(value, str) else "(no name)"


def _first_text(result: dict[str, Any]) -> str:
    """The first text of the content of a tool result, for the report."""
    content = result.get("content")
    for item in content if isinstance(content, list) else ():
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            return _printable(item["text"], MAX_ANSWER_CHARS)
    return "no text"


def _asked_methods(requests: Any) -> str:
    """The methods of the input requests of an ``input_required`` result, for the report."""
    methods = {
        _printable(request["method"])
        for request in requests
        if isinstance(request, dict) and isinstance(request.get("method"), str)
    }
    return ", ".join(sorted(methods)) or "no request"


def _url_upstream(url: str) -> dict[str, Any]:
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


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _server(info: Any) -> dict[str, Any] | None:
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return None
    server = {"name": info["name"]}
    for key in ("version", "title"):
        if isinstance(info.get(key), str):
            server[key] = info[key]
    return server


def _outcome(exc: McpError) -> str:
    if isinstance(exc, RpcError):
        return f"error {exc.error.code} ({exc.error.message[:80]})"
    text = exc.detail or exc.cause
    if exc.http_status is not None and str(exc.http_status) not in text:
        text += f" (HTTP status {exc.http_status})"
    return text


def _sign_in_state(settings: args.Settings, env: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    """The stored sign-in of the URL (where the tokens are, when they expire) and its access token.

    It reads the token store of the sign-in module (never the network, never a
    browser): the check sends a stored token that has not expired, as the bridge
    would, but it never signs in. Any failure there gives ``"not checked"`` with
    the reason, so a change of that module cannot break the rest of the check.
    """
    if settings.static_authorization:
        return {"state": "not used", "note": "a static authorization header; the bridge never signs in"}, None
    record = None
    try:
        found, record = _stored_sign_in(settings, env)
    except Exception as exc:  # noqa: BLE001 - the sign-in part of the report is best effort
        detail = getattr(exc, "detail", None) or type(exc).__name__
        found = {"state": "not checked", "note": f"the token store was not read ({detail})"}
    found["resourceIndicator"] = _resource_indicator(settings, record)
    if record is not None:
        found["renewal"] = _stored_renewal(settings, record)
    token = record.access_token if record is not None and found["state"] == "stored" else None
    return found, token


_BY_CLIENT_CREDENTIALS: Final = {
    "silent": True,
    "why": "the client credentials get a new token before it ends",
}


def _host_profile(setting: str) -> dict[str, Any]:
    """The profile that VS Code and the other hosts get under ``--host-profile setting``."""
    vscode = choose_profile(setting, "Visual Studio Code", LATEST_REVISION).name
    others = choose_profile(setting, next(iter(sorted(OTHER_HOSTS))), LATEST_REVISION).name
    return {"setting": setting, "vscode": vscode, "otherHosts": others}


def _describe_host_profile(profile: dict[str, Any]) -> str:
    if profile["setting"] != "auto":
        return f"{profile['setting']} for every host (--host-profile)"
    return (
        f"{profile['vscode']} for VS Code, {profile['otherHosts']} for Codex CLI, Cursor, Claude Desktop, "
        "Zed and hosts of older revisions (--host-profile auto, chosen at the host's initialize)"
    )


def _stored_renewal(settings: args.Settings, record: Any) -> dict[str, Any]:
    """Whether the stored sign-in is renewed without a person, and why."""
    if settings.sign_in == "client-credentials":
        return dict(_BY_CLIENT_CREDENTIALS)
    if record.refresh_token:
        return {"silent": True, "why": "the stored sign-in has a refresh token"}
    return {
        "silent": False,
        "why": "the authorization server gave no refresh token: each end of the access token needs a new "
        "sign-in",
    }


def _predicted_renewal(settings: args.Settings, server: Any) -> dict[str, Any]:
    """Whether a sign-in at ``server`` will be renewed without a person (``None``: the server decides)."""
    from ..oauth import flow

    if settings.sign_in == "client-credentials":
        return dict(_BY_CLIENT_CREDENTIALS)
    if "offline_access" in (server.scopes_supported or ()):
        if flow.consent_prompt(server, ("offline_access",)):
            return {
                "silent": True,
                "why": "the bridge asks this OpenID provider for offline_access with prompt=consent, which "
                "grants a refresh token",
            }
        return {
            "silent": None,
            "why": "the bridge asks for offline_access; the server decides on a refresh token",
        }
    grants = server.grant_types_supported
    if grants is not None and "refresh_token" not in grants:
        return {
            "silent": False,
            "why": "the authorization server offers no refresh token: each end of the access token needs a "
            "new sign-in",
        }
    return {"silent": None, "why": "the authorization server decides on a refresh token"}


def _resource_indicator(settings: args.Settings, record: Any) -> dict[str, str]:
    """What the sign-in sends as ``resource`` (RFC 8707), and why; never the value itself."""
    setting = settings.resource_indicator
    if setting == "off":
        return {"sends": "none", "why": "--resource-indicator off"}
    if setting != "auto":
        return {"sends": "option", "why": "the URI of --resource-indicator"}
    if record is not None and record.without_resource:
        return {
            "sends": "none",
            "why": "the authorization server refused it, as the stored sign-in remembers",
        }
    return {
        "sends": "metadata",
        "why": "the resource of the server's metadata, and once more without it when the authorization "
        "server refuses it",
    }


def _sign_in_flows(
    settings: args.Settings, env: dict[str, str], context: Any, *, deadline: float
) -> tuple[dict[str, Any], Any]:
    """Which sign-in flows the authorization server offers, which one the bridge would use, and why;
    and the metadata of the authorization server (``None`` when it was not found).

    It reads the metadata of the upstream server and of its authorization server until
    ``deadline`` (best effort: a failure gives ``"not checked"`` with the reason in
    words); it never signs in.
    """
    from ..oauth import config, discovery, grants
    from ..oauth.web import WebClient

    assert settings.url is not None
    web = WebClient(context, env, deadline=deadline)
    try:
        resource = discovery.discover_resource(web, settings.url, None)
        server = discovery.discover_server(web, resource.issuer)
    except Exception as exc:  # noqa: BLE001 - this part of the report is best effort
        detail = getattr(exc, "detail", None)
        if not isinstance(detail, str) or not detail:
            detail = "an unexpected error"
        return {"state": "not checked", "note": problem_words(detail)}, None
    finally:
        web.close()
    offered = grants.offered_flows(server)
    found: dict[str, Any] = {
        "state": "checked",
        "offered": [flow for flow, yes in offered.items() if yes],
        "unknown": [flow for flow, yes in offered.items() if yes is None],
    }
    remote = config.remote_session(env, platform=sys.platform)
    try:
        choice = grants.choose_flow(settings.sign_in, remote=remote, server=server)
    except grants.DeviceUnavailable as exc:
        found["uses"] = None
        found["why"] = (
            f"--sign-in device, but the server offers no device sign-in ({exc}): use --sign-in browser"
        )
        return found, server
    found["uses"] = choice.flow
    found["why"] = choice.reason
    return found, server


def _describe_flows(part: dict[str, Any]) -> str:
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


def _stored_sign_in(settings: args.Settings, env: dict[str, str]) -> tuple[dict[str, Any], Any]:
    """The stored sign-in of the URL for the report, and its record (``None`` when there is none)."""
    from ..oauth.authorizer import OAuthConfig
    from ..oauth.errors import StoreOpenError
    from ..oauth.store import IndexedStore, open_store

    assert settings.url is not None and settings.registration is not None
    try:
        opened = open_store(
            settings.token_store, key=settings.token_key, key_file=settings.token_key_file, env=env
        )
    except StoreOpenError as exc:
        return {"state": "not checked", "note": f"the token store did not open: {exc.detail}"}, None
    config = OAuthConfig.of(settings.sign_in_options(), env)
    store = IndexedStore(opened.store)
    for entry in reversed(store.entries()):
        if entry.url != settings.url or entry.client != config.identity:
            continue
        record = store.load(entry.key)
        if record is None or not record.access_token:
            continue
        found: dict[str, Any] = {"state": "stored", "store": opened.line, "account": settings.account}
        if record.expires_at is not None:
            expires = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.expires_at))
            found["expires"] = expires
            if record.expires_at <= time.time():
                found["state"] = "expired"
                found["note"] = (
                    "the next start refreshes it" if record.refresh_token else "the next start signs in"
                )
        return found, record
    return {"state": "none", "note": "no stored sign-in", "store": opened.line}, None


def _diagnose(step: str, exc: McpError, settings: args.Settings) -> tuple[str, str]:
    """The problem of a failed step, and the option that fixes it."""
    seconds = format_duration(settings.discover_timeout)
    if isinstance(exc, SpawnFailed):
        return (
            f"the command did not start: {exc.detail or exc.cause}",
            'Examine the command after "--": the program must exist and be executable.',
        )
    if isinstance(exc, RequestTimeout):
        fix = f"Give the server more time with --discover-timeout (now {seconds}): it bounds the whole check."
        if settings.protocol == MODERN:
            fix += " A 2025-era server needs --protocol auto or legacy."
        elif step == "server/discover" and settings.command:
            fix += " A 2025-era server that never answers server/discover needs --protocol legacy."
        return f"the server did not answer {step} within the {seconds} of --discover-timeout", fix
    if isinstance(exc, Closed):
        return (
            f"the server stopped during {step}: {exc.detail or 'the connection closed'}",
            "Run the command in a terminal to see why it stops; its stderr lines are above.",
        )
    if isinstance(exc, RpcError):
        return (
            f"the server answered {step} with {_outcome(exc)}",
            "Examine the server and its log; with --protocol, choose the revision it speaks.",
        )
    detail = exc.detail or exc.cause
    status = exc.http_status
    if "not trusted" in detail:
        return (
            "the certificate of the server is not trusted",
            "Give the CA certificate that signed it with --ca-file <PEM file>.",
        )
    if "host name" in detail and "certificate" in detail:
        return (
            "the certificate of the server is not for the host name of the URL",
            "Use the host name of the certificate in the URL.",
        )
    if detail.startswith("proxy"):
        return (
            f"the proxy failed: {detail}",
            "Examine HTTPS_PROXY, ALL_PROXY and NO_PROXY (the user and the password go into the proxy URL).",
        )
    if detail.startswith("TLS"):
        return f"the TLS connection failed: {detail}", "Examine the URL: the server must speak https."
    if detail.startswith("connect"):
        refused, loopback = (exc.refused, exc.loopback) if isinstance(exc, ConnectError) else (False, False)
        return (
            f"no connection to the server: {detail}",
            connect_fix(refused=refused, loopback=loopback),
        )
    if status == 401:
        return (
            "the server needs a sign-in (HTTP status 401)",
            "Start the server in VS Code: the bridge opens the sign-in in a browser. Or send a token "
            "with --header-env Authorization=<variable>.",
        )
    if status == 403:
        return (
            "the server refused the access (HTTP status 403)",
            "Examine the token or the account of the sign-in (--account, --header-env).",
        )
    if status in (404, 405):
        return (
            f"the URL is not an MCP endpoint (HTTP status {status})",
            "Examine the path of the URL (often /mcp).",
        )
    return f"{step} failed: {detail}", "Examine the server and its log; run with --log-level debug for more."


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def _colors(stream: TextIO) -> Callable[[str, str], str] | None:
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

    upstream = report.upstream
    if upstream.get("kind") == "command":
        row("Upstream", f'the command "{upstream.get("name", "")}" over stdio')
    else:
        hidden = " (its query is not shown)" if upstream.get("queryHidden") else ""
        row("Upstream", f"{upstream.get('url', '')} over Streamable HTTP{hidden}")
    if report.era == MODERN and report.also_speaks is not None:
        see = " (see the notes)" if report.notes else ""
        row("Era", f"MCP {MODERN} and {report.also_speaks}: the bridge translates {MODERN} for VS Code{see}")
    elif report.era == MODERN:
        row("Era", f"MCP {MODERN}: the bridge translates it for VS Code")
    elif report.era is not None:
        row("Era", f"MCP {report.protocol_version} (2025 era): the bridge passes it through")
    else:
        row("Era", "not found")
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
            head = _labeled(listing.label, str(report.counts[listing.key]))
            lines.extend(_name_lines(head, report.names.get(listing.key, []), width))
    if report.tool_filter is not None:
        tool_filter = report.tool_filter
        row(
            "Filter",
            f"VS Code sees {tool_filter['after']} of {tool_filter['before']} tools "
            "(--allow-tool, --deny-tool)",
        )
        from ..bridge.lists import ToolFilter

        rules = ToolFilter(tuple(tool_filter["allow"]), tuple(tool_filter["deny"]))
        for pattern in tool_filter["unmatched"]:
            lines.append(f"  {paint('warning', 'yellow')}: {rules.unmatched_warning(pattern)}")
    if report.era == MODERN:
        if report.list_ttl_ms:
            row("List cache", _list_cache(report.list_ttl_ms))
    elif report.era is not None:
        row("List cache", "none: a 2025-era server gives no ttlMs")
    if report.tasks is not None:
        row("Tasks", _describe_tasks(report.tasks, modern=report.era == MODERN))
    if report.host_profile:
        row("Profile", _describe_host_profile(report.host_profile))
    row("Sign-in", _describe(report.sign_in))
    if "flows" in report.sign_in:
        lines.append(f"{'':{VALUE_COLUMN}}sign-in flows: {_describe_flows(report.sign_in['flows'])}")
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
    if report.era is None:
        return paint("the server does not work", "red")
    count = len(report.problems)
    found = "1 problem" if count == 1 else f"{count} problems"
    return paint(f"the server answers, but the check found {found} (see Problems)", "red")


def _list_cache(ttls: dict[str, int]) -> str:
    """How long the bridge keeps each list, from the ``ttlMs`` of its first page."""
    from ..bridge.errortable import format_duration

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
