"""``mcp-bridge-vscode check [options] (-- <command> | <url>)``: diagnose an upstream server.

The check does one time what the bridge does when VS Code starts it, and tells
a person in a terminal what it found:

* the upstream: the command, or the URL with its path (never its query, which can
  carry a secret) and the transport that reached it (Streamable HTTP, or the HTTP+SSE
  transport of 2024-11-05 of an old server, ``--transport``);
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
  sends a request of the 2025 era in the middle of it is a problem, unless the server
  speaks both eras and the bridge passes it through (then a note), and removing
  ``--protocol 2026-07-28`` fixes it for such a server;
* for a 2026-07-28 server, whether it speaks the 2025 era too (an ``initialize``
  on a second connection): the bridge then reaches it in 2025-11-25 and passes it
  through, unless ``--protocol 2026-07-28`` forces the translation;
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

This module runs the steps; :mod:`.check_report` holds the report and writes its text,
:mod:`.check_advice` tells the sign-in state, the sign-in flows and the problem of a
failed step.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from .. import __version__
from ..bridge.revisions import LATEST as LATEST_REVISION
from ..bridge.revisions import OTHER_HOSTS, choose_profile
from ..bridge.tasks import offers_extension
from ..bridge.translate import client_capabilities_for_upstream
from ..mcp.errorbase import BridgeError, UsageFault
from ..mcp.errors import McpError, RequestTimeout, RpcError
from ..mcp.jsonrpc import METHOD_NOT_FOUND
from ..mcp.protocol import LEGACY, META_SERVER_INFO, MODERN
from ..mcp.text import format_duration
from . import settings as args
from .check_advice import (
    closest_names,
    closest_pattern,
    diagnose,
    failure_text,
    predicted_renewal,
    sign_in_flows,
    sign_in_problem_fix,
    sign_in_state,
)
from .check_report import (
    FAILED,
    LISTS,
    MAX_ANSWER_CHARS,
    OK,
    SKIPPED,
    TIMED_OUT,
    Problem,
    Report,
    Step,
    asked_methods,
    colors,
    first_text,
    item_name,
    printable,
    render_text,
    url_upstream,
)

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


#: What a server answers when a tool sends a request of the 2025 era in the middle of a
#: call on a 2026-07-28 connection (lower case): the Python SDK's ``NoBackChannelError``
#: ("... has no back-channel for server-initiated requests") and FastMCP's ``ctx.elicit()``
#: ("... is unavailable on 2026-07-28 connections").
ERA_2025_ONLY_MARKERS: Final = ("back-channel", "server-initiated request", f"unavailable on {MODERN}")
#: The server's requests that the check tells apart in the middle of a call.
SERVER_REQUESTS: Final = ("elicitation/create", "sampling/createMessage", "roots/list", "ping")


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
        sys.stdout.write(render_text(report, color=colors(sys.stdout), width=width))
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
    try:
        code = run.url() if settings.url is not None else run.command()
    except CheckStopped as exc:  # the report already holds the problem
        code = exc.exit_code
    return run.report, code


class CheckStopped(BridgeError):
    """A failure that ends the check before it reaches the server; the report holds the problem,
    and :attr:`exit_code` is the exit code of the check."""

    exit_code: ClassVar[int] = EXIT_FAILS


class CaFileUnusable(CheckStopped, UsageFault):
    """The CA certificates of ``--ca-file`` cannot be used: as an argument that is not valid."""

    exit_code: ClassVar[int] = EXIT_BAD_CA_FILE


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
        self.report = Report(
            upstream={}, host_profile=_host_profile(settings.host_profile), protocol=str(settings.protocol)
        )
        #: The server answered 401 or 403: the sign-in flows matter.
        self.asked_sign_in = False
        #: The ``WWW-Authenticate`` header of that answer (it may name the metadata's address).
        self.challenge: str | None = None
        #: The requests of a 2025-era server since the last clear (see :data:`SERVER_REQUESTS`).
        self.server_asked: set[str] = set()
        #: What the server answered the ``--call-tool`` call on a 2026-07-28 connection, when
        #: that says that the tool needs the requests of the 2025 era.
        self.needs_2025_era: str | None = None
        #: The names of the tools of the full tool list, once the check read it.
        self.tool_names: list[str] | None = None

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
        self.report.upstream = url_upstream(url)
        self.report.sign_in, token = sign_in_state(settings, self.env)
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
            # Nothing reached the server: the report judges the option, not the server.
            self.report.ca = {"state": "not used", "note": f"the --ca-file cannot be used ({exc.detail})"}
            self.report.not_checked = "the CA certificates of --ca-file cannot be used"
            self._problem(
                "the check did not contact the server: the CA certificates of --ca-file cannot be "
                f"used: {exc.detail}",
                "Give a readable PEM file of CA certificates with --ca-file, or leave the option out "
                "(the bridge always trusts the CA certificates of the system); see "
                f'"{args.PROGRAM} check --help".',
            )
            raise CaFileUnusable(exc.detail) from exc
        headers = [(header.name, header.value) for header in settings.headers]
        if token is not None:
            headers.append(("Authorization", f"Bearer {token}"))

        modern, legacy = url_transports(
            url,
            headers=headers,
            max_response_bytes=settings.max_response_bytes,
            ssl_context=context,
            env=self.env,
            transport=settings.transport,
        )
        started = time.monotonic()
        try:
            connect = transport_connector(modern)
            self._run(connect, LegacyTransports(legacy), over_http=True)
        except McpError as exc:  # the transport could not be made (a proxy variable)
            self._failure("connect", exc, started)
        if self.report.era is not None:
            self.report.upstream["transport"] = (
                legacy.found if self.report.era == LEGACY else "streamable-http"
            )
        if not settings.static_authorization:
            flows, server = self._sign_in_flows(context, stored=token is not None)
            self.report.sign_in["flows"] = flows
            if server is not None and "renewal" not in self.report.sign_in:
                self.report.sign_in["renewal"] = predicted_renewal(settings, server)
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
            outcome = f"{failure_text(exc)}: not a {MODERN} server"
            if not forced:
                self._step(step, started, OK, outcome)
                return _LEGACY_ERA
            self._step(step, started, FAILED, outcome)
            self._problem(
                f"the server is not a server of revision {MODERN}: it answered "
                f"server/discover with {failure_text(exc)}",
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
            self._step(name, started, OK, f"{failure_text(exc)}: {MODERN} only")
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
                self._step(name, started, OK, f"{failure_text(exc)}: {MODERN} only")
                return
            if isinstance(answer, ErrorResponse):
                self._step(name, started, OK, f"{failure_text(RpcError(answer.error))}: {MODERN} only")
                return
            result = answer.result if isinstance(answer.result, dict) else {}
            version = result.get("protocolVersion")
            if not isinstance(version, str) or version >= MODERN:
                self._step(name, started, OK, f"no 2025-era result: {MODERN} only")
                return
            self._step(name, started, OK, f"MCP {printable(version)}: the server speaks both eras")
            self.report.also_speaks = printable(version)
        finally:
            peer.close(self._grace())

    def _era_advice(self) -> None:
        """What the eras that the server speaks, and the ``--call-tool`` call, mean for ``--protocol``.

        The bridge reaches a server of both eras in the 2025 era and passes it through, unless
        ``--protocol 2026-07-28`` forces the translation. A tool that needs the requests of the
        2025 era in the middle of a call is a problem on a translated connection (removing that
        option fixes it for a server of both eras); a server of both eras gets a note.
        """
        both = self.report.also_speaks
        failed = self.needs_2025_era
        translated = both is None or self.settings.protocol == MODERN
        if failed is not None:
            problem = (
                f"the tool {printable(self.settings.call_tool or '')} sends a request of the 2025 era "
                "in the middle of "
                f"its call, which a {MODERN} connection does not carry (the server answered: {failed})"
            )
            if both is None:
                fix = (
                    f"The server speaks only {MODERN} to the bridge: its tool must ask for input with "
                    "an input_required result instead."
                )
            elif translated:
                fix = (
                    f"Remove --protocol {MODERN}: the server speaks {both} too, and the bridge then "
                    "passes it through, requests in the middle of a call included."
                )
            else:
                fix = (
                    f"Nothing: with --protocol auto (the default) the bridge reaches the server in {both} "
                    f"and passes it through, where the tool works; --protocol {MODERN} would make it fail so."
                )
            (self._problem if translated else self._note)(problem, fix)
        elif both is not None:
            words = "translates" if translated else f"reaches it in {both}, the revision of VS Code"
            self._note(
                f"the server speaks both eras ({MODERN} and {both}); the bridge {words}. A tool written "
                "for the requests of the 2025 era in the middle of a call (such as FastMCP's ctx.elicit()) "
                f"works only in {both}, one that asks with an input_required result only in {MODERN}",
                f"Remove --protocol {MODERN} to pass it through. check --call-tool <name> tells."
                if translated
                else f"--protocol {MODERN} forces the translation. check --call-tool <name> tells.",
            )

    def _note(self, note: str, fix: str) -> None:
        self.report.notes.append(Problem(note, fix))

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
            self.report.names[key] = [item_name(name) for name in names]
            if key == "tools":
                self.tool_names = [name for name in names if isinstance(name, str)]
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
                self.report.tasks["required"].append(printable(str(tool.get("name"))))

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
        strings = [name for name in names if isinstance(name, str)]
        for pattern in self.report.tool_filter["unmatched"]:
            if pattern in tool_filter.allow:
                self._problem(*_unmatched_allow(pattern, strings))
        if shown == 0 and names:
            self._problem(
                f"VS Code sees none of the {len(names)} tools of the server: the tool filter hides "
                "each of them",
                "Give --allow-tool patterns that match the names of the tools (the Tools line lists "
                "them), or remove the --deny-tool pattern that hides them all.",
            )
        return shown

    def _call_tool(self, fetch: Callable[[str, dict[str, Any] | None], dict[str, Any]]) -> None:
        """Call the tool of ``--call-tool`` once, as VS Code would, and report what it answered."""
        name = self.settings.call_tool
        if name is None:
            return
        step = "tools/call"
        shown = printable(name)
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
            self._problem(
                f"the tool {shown} answered with an error result: {text}",
                "Examine the arguments of --call-arguments and the log of the server.",
            )
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
            fix = f"Did you mean {_names(close)}? Give --call-tool the name of a tool of the server."
        else:
            fix = "Give --call-tool the name of a tool of the server (the Tools line lists them)."
        self._problem(
            f"the server has no tool {shown}: its tool list does not name it, and the call failed", fix
        )
        return True

    def _needs_2025_era(self, answer: str, started: float) -> bool:
        """Whether the answer of a 2026-07-28 call says that the tool needs the requests of the
        2025 era; then the step failed, and :meth:`_era_advice` tells what to do."""
        if self.report.era != MODERN or not any(m in answer.lower() for m in ERA_2025_ONLY_MARKERS):
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
        flows, server = sign_in_flows(
            self.settings, self.env, context, deadline=self.deadline, challenge=self.challenge
        )
        self._sign_in_cannot_work(flows)
        return flows, server

    def _sign_in_cannot_work(self, flows: dict[str, Any]) -> None:
        """When the sign-in cannot work (its metadata has a problem), the problem of the 401 or
        403 says so with the fix of that problem, not the advice to start a sign-in."""
        fix = sign_in_problem_fix(flows)
        if fix is None:
            return
        for i, found in enumerate(self.report.problems):
            if found.problem.startswith("the server needs a sign-in"):
                self.report.problems[i] = Problem(
                    f"{found.problem}, and the sign-in cannot work: {flows['note']}", fix
                )

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
            self.challenge = getattr(exc, "www_authenticate", None) or self.challenge
        if isinstance(exc, RequestTimeout):
            status, outcome = TIMED_OUT, failure_text(exc)
            if self._left() <= 0:
                outcome = (
                    f"no answer before the end of the {format_duration(self.settings.discover_timeout)} "
                    "of --discover-timeout"
                )
        else:
            status, outcome = FAILED, failure_text(exc)
        self._step(step, started, status, outcome)
        problem, fix = diagnose(step, exc, self.settings)
        self._problem(problem, fix)


def _names(names: list[str]) -> str:
    """``names`` quoted for the text of a problem: ``a``, ``a or b``, ``a, b or c``."""
    quoted = [repr(printable(name)) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _unmatched_allow(pattern: str, names: list[str]) -> tuple[str, str]:
    """The problem of an ``--allow-tool`` pattern that matches no tool, and its fix."""
    shown = printable(pattern)
    problem = (
        f"--allow-tool {shown!r} matches no tool of the server, so it lets no tool through "
        "(a pattern is case-sensitive and matches the whole name)"
    )
    close = closest_pattern(pattern, names)
    if close is None:
        return problem, "Give a pattern that matches the name of a tool (the Tools line lists them)."
    better, tool = close
    return (
        problem,
        f"Did you mean --allow-tool {printable(better)!r}? It matches the tool {printable(tool)!r}.",
    )


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


def _host_profile(setting: str) -> dict[str, Any]:
    """The profile that VS Code and the other hosts get under ``--host-profile setting``."""
    vscode = choose_profile(setting, "Visual Studio Code", LATEST_REVISION).name
    others = choose_profile(setting, next(iter(sorted(OTHER_HOSTS))), LATEST_REVISION).name
    return {"setting": setting, "vscode": vscode, "otherHosts": others}


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------
