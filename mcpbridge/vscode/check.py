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
for is "skipped"; the servers then get :data:`.check_run.LATE_CLOSE_GRACE` to stop.

The report goes to stdout, as text or (``--json``) as one JSON object. The log
lines of the bridge and the stderr lines of an upstream command go to stderr.
The exit code is 0 when the server works (the check found no problem), 1 when it
does not, and 2 for a ``--ca-file`` that cannot be used. The report never holds a
secret: no header value, no token, no query of the URL and no password of a proxy.

This module runs the steps: :mod:`.check_run` holds the time limit and adds the steps and
problems to the report, :mod:`.check_tools` reads the lists and calls the tool;
:mod:`.check_report` holds the report and writes its text; :mod:`.check_advice` tells the
sign-in state, the sign-in flows and the problem of a failed step.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from .. import __version__
from ..bridge.rules.tasks import offers_extension
from ..bridge.rules.translate import client_capabilities_for_upstream
from ..mcp.errorbase import BridgeError, UsageFault
from ..mcp.errors import McpError, RequestTimeout, RpcError
from ..mcp.protocol import LEGACY, META_SERVER_INFO, MODERN
from ..mcp.text import format_duration
from . import settings as args
from .check_advice import (
    CHECK_PROBLEMS,
    check_problem,
    failure_text,
    legacy_refused,
    predicted_renewal,
    sign_in_flows,
    sign_in_not_asked,
    sign_in_problem_fix,
    sign_in_state,
)
from .check_report import (
    FAILED,
    OK,
    TIMED_OUT,
    Problem,
    Report,
    colors,
    printable,
    render_text,
    url_upstream,
)
from .check_tools import ToolSteps

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


def check(settings: args.CheckSettings) -> int:
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
    settings: args.CheckSettings, env: dict[str, str] | None = None, *, started: float | None = None
) -> tuple[Report, int]:
    """Check the upstream server of ``settings``; return the report and the exit code.

    ``--discover-timeout`` bounds the run from ``started`` (a :func:`time.monotonic` time;
    by default now).
    """
    environ = dict(os.environ) if env is None else env
    run = _Check(settings, environ, time.monotonic() if started is None else started)
    try:
        upstream = settings.upstream
        code = run.url(upstream) if isinstance(upstream, args.UrlUpstream) else run.command(upstream)
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


class _Check(ToolSteps):
    # ----------------------------------------------------------------- forms

    def command(self, upstream: args.CommandUpstream) -> int:
        from ..bridge.sessions.childshare import StdioUpstream

        name = args.default_name_for_command(upstream.command[0]) if upstream.command else ""
        self.report.upstream = {"kind": "command", "name": name}
        self.report.sign_in = {"state": "not used", "note": "a command has no sign-in"}
        self.report.proxy = {"state": "not used", "note": "the bridge speaks to a command over stdio"}
        self.report.ca = {"state": "not used", "note": "the bridge speaks to a command over stdio"}
        child = StdioUpstream(upstream.command, max_line_bytes=upstream.max_line_bytes)
        self._run(child.connect, child, over_http=False)
        self._stray_lines(child.stray_lines)
        return self._exit_code()

    def url(self, upstream: args.UrlUpstream) -> int:
        from ..bridge.sessions.era import LegacyTransports
        from ..bridge.sessions.upstream import UrlTransport, transport_connector, url_transports
        from ..mcp.transports.http import CaFileError, proxy_for, tls_context

        url = upstream.url
        self.report.upstream = url_upstream(url)
        self.report.sign_in, token = sign_in_state(upstream, self.env)
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
        if upstream.ca_file is not None:
            self.report.ca = {"state": "system and file", "file": upstream.ca_file}
        try:
            context = tls_context(upstream.ca_file)
        except CaFileError as exc:
            # Nothing reached the server: the report judges the option, not the server.
            self.report.ca = {"state": "not used", "note": f"the --ca-file cannot be used ({exc.detail})"}
            self.report.not_checked = "the CA certificates of --ca-file cannot be used"
            self._problem(*check_problem("ca_file_unusable", detail=exc.detail))
            raise CaFileUnusable(exc.detail) from exc
        headers = [(header.name, header.value) for header in upstream.headers]
        if token is not None:
            headers.append(("Authorization", f"Bearer {token}"))

        modern, legacy = url_transports(
            url,
            headers=headers,
            max_response_bytes=upstream.max_response_bytes,
            ssl_context=context,
            env=self.env,
            transport=UrlTransport(upstream.transport),
        )
        started = time.monotonic()
        try:
            connect = transport_connector(modern)
            self._run(connect, LegacyTransports(legacy), over_http=True)
        except McpError as exc:  # the transport could not be made (a proxy variable)
            self._failure("connect", exc, started)
        if self.report.era is not None:
            found = legacy.found if self.report.era == LEGACY else UrlTransport.STREAMABLE_HTTP
            self.report.upstream["transport"] = None if found is None else found.value
        if upstream.sign_in is not None:
            flows, server = self._sign_in_flows(url, upstream.sign_in, context, stored=token is not None)
            self.report.sign_in["flows"] = flows
            if server is not None and "renewal" not in self.report.sign_in:
                self.report.sign_in["renewal"] = predicted_renewal(upstream.sign_in, server)
        reached, asked = self.report.era is not None, self.asked_sign_in
        self.report.sign_in = sign_in_not_asked(self.report.sign_in, reached=reached, asked=asked)
        return self._exit_code()

    def _exit_code(self) -> int:
        return EXIT_WORKS if self.report.ok else EXIT_FAILS

    # ------------------------------------------------------------------ run

    def _run(self, connect: Any, legacy_upstream: Any, *, over_http: bool) -> None:
        from ..bridge.sessions.era import LEGACY as FORCED_LEGACY

        if self.settings.upstream.protocol == FORCED_LEGACY:
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
        from ..bridge.sessions.era import means_legacy

        step = "server/discover"
        if self._out_of_time(step):
            return None
        started = time.monotonic()
        try:
            result: dict[str, Any] = probe.discover(timeout=self._left(), capabilities=UPSTREAM_CAPABILITIES)
        except McpError as exc:
            legacy = means_legacy(exc, protocol="auto", over_http=over_http)
            forced = self.settings.upstream.protocol == MODERN
            if isinstance(exc, RequestTimeout) or not legacy:
                self._failure(step, exc, started)
                # As the bridge: no answer from a command may be a 2025-era server.
                return _LEGACY_ERA if legacy and not forced else None
            outcome = f"{failure_text(exc)}: not a {MODERN} server"
            if not forced:
                self._step(step, started, OK, outcome)
                return _LEGACY_ERA
            self._step(step, started, FAILED, outcome)
            self._problem(*check_problem("not_modern", failure=failure_text(exc)))
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
        from ..mcp.client.call import object_result
        from ..mcp.client.legacypeer import LegacyPeer
        from ..mcp.jsonrpc import ErrorResponse

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
                refused = legacy_refused(answer.error, self.settings.upstream.protocol)
                if refused is None:
                    self._failure("initialize", RpcError(answer.error), started)
                    return
                self._step("initialize", started, FAILED, failure_text(RpcError(answer.error)))
                self._problem(*refused)
                return
            result = answer.result if isinstance(answer.result, dict) else {}
            version = result.get("protocolVersion")
            if not isinstance(version, str):
                self._step("initialize", started, FAILED, "a result that is not valid")
                self._problem(*check_problem("invalid_initialize"))
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
        from ..mcp.client.legacypeer import LegacyPeer
        from ..mcp.jsonrpc import ErrorResponse

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
        translated = both is None or self.settings.upstream.protocol == MODERN
        if failed is not None:
            key = "modern_only" if both is None else "translated" if translated else "passed"
            problem, fix = check_problem(
                f"needs_2025_era_{key}",
                tool=printable(self.settings.call_tool or ""),
                failed=failed,
                both=both,
            )
            (self._problem if translated else self._note)(problem, fix)
        elif both is not None:
            key = "translated" if translated else "passed"
            self._note(*check_problem(f"both_eras_{key}", both=both))

    def _note(self, note: str, fix: str) -> None:
        self.report.notes.append(Problem(note, fix))

    def _sign_in_flows(
        self, url: str, sign_in: args.SignIn, context: Any, *, stored: bool
    ) -> tuple[dict[str, Any], Any]:
        """The sign-in flows when they matter (the server asked for a sign-in, or one is stored),
        and the metadata of the authorization server when it was found."""
        if not (self.asked_sign_in or stored):
            return {"state": "not checked", "note": "the server did not ask for sign-in"}, None
        if self._left() <= 0:
            return {"state": "not checked", "note": "no time left of --discover-timeout"}, None
        flows, server = sign_in_flows(
            url, sign_in, self.env, context, deadline=self.deadline, challenge=self.challenge
        )
        self._sign_in_cannot_work(flows)
        return flows, server

    def _sign_in_cannot_work(self, flows: dict[str, Any]) -> None:
        """When the sign-in cannot work (its metadata has a problem), the problem of the 401
        says so with the fix of that problem, not the advice to start a sign-in."""
        fix = sign_in_problem_fix(flows)
        if fix is None:
            return
        needed = CHECK_PROBLEMS["sign_in_needed"][0]
        for i, found in enumerate(self.report.problems):
            if found.problem == needed:
                self.report.problems[i] = Problem(
                    f"{found.problem}, and the sign-in cannot work: {flows['note']}", fix
                )


def _server(info: Any) -> dict[str, Any] | None:
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return None
    server = {"name": info["name"]}
    for key in ("version", "title"):
        if isinstance(info.get(key), str):
            server[key] = info[key]
    return server


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------
