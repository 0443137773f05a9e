"""What ``mcp-bridge-vscode check`` tells beside the steps: the sign-in state, the sign-in
flows and the problem of a failed step with the option that fixes it.

The sign-in parts read the token store and the metadata of the servers (never a browser,
never a sign-in); each failure there gives ``"not checked"`` with the reason, so a change
of the sign-in modules cannot break the rest of the check.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ..bridge.rules.errortable import connect_fix
from ..mcp.errors import Closed, McpError, RequestTimeout, RpcError, SpawnFailed
from ..mcp.jsonrpc import ErrorObject
from ..mcp.protocol import LEGACY, MODERN
from ..mcp.text import format_duration
from ..mcp.transports.httpwire import ConnectError
from ..oauth.config import SignInFlow
from ..oauth.errors import SIGN_IN_PROBLEMS, problem_words
from . import settings as args

__all__ = [
    "CHECK_PROBLEMS",
    "check_problem",
    "diagnose",
    "failure_text",
    "legacy_refused",
    "predicted_renewal",
    "sign_in_flows",
    "sign_in_not_asked",
    "sign_in_problem_fix",
    "sign_in_state",
    "stored_renewal",
]


def sign_in_state(upstream: args.UrlUpstream, env: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    """The stored sign-in of the URL (where the tokens are, when they expire) and its access token.

    It reads the token store of the sign-in module (never the network, never a
    browser): the check sends a stored token that has not expired, as the bridge
    would, but it never signs in. Any failure there gives ``"not checked"`` with
    the reason, so a change of that module cannot break the rest of the check.
    """
    sign_in = upstream.sign_in
    if sign_in is None:
        return {"state": "not used", "note": "a static authorization header; the bridge never signs in"}, None
    record = None
    try:
        found, record = _stored_sign_in(upstream, env)
    except Exception as exc:  # noqa: BLE001 - the sign-in part of the report is best effort
        detail = getattr(exc, "detail", None) or type(exc).__name__
        found = {"state": "not checked", "note": f"the token store was not read ({detail})"}
    found["resourceIndicator"] = _resource_indicator(sign_in, record)
    if record is not None:
        found["renewal"] = stored_renewal(sign_in, record)
    token = record.access_token if record is not None and found["state"] == "stored" else None
    return found, token


def sign_in_not_asked(found: dict[str, Any], *, reached: bool, asked: bool) -> dict[str, Any]:
    """The sign-in part of the report after the run: ``found`` of :func:`sign_in_state`, or,
    for a server that answered (``reached``) without asking for a sign-in (``asked``) while
    none is stored, that no sign-in is needed.

    That part names no token store: as the bridge, which names its store only once a sign-in
    is needed, the check does not tell where tokens would stay that nobody needs.
    """
    if asked or not reached or found.get("state") != "none":
        return found
    kept = {key: value for key, value in found.items() if key not in ("note", "store")}
    return {**kept, "state": "not needed", "note": "the server did not ask for a sign-in"}


_BY_CLIENT_CREDENTIALS: Final = {
    "silent": True,
    "why": "the client credentials get a new token before it ends",
}


def stored_renewal(sign_in: args.SignIn, record: Any) -> dict[str, Any]:
    """Whether the stored sign-in is renewed without a person, and why."""
    if sign_in.flow is SignInFlow.CLIENT_CREDENTIALS:
        return dict(_BY_CLIENT_CREDENTIALS)
    if record.refresh_token:
        return {"silent": True, "why": "the stored sign-in has a refresh token"}
    return {
        "silent": False,
        "why": "the authorization server gave no refresh token: each end of the access token needs a new "
        "sign-in",
    }


def predicted_renewal(sign_in: args.SignIn, server: Any) -> dict[str, Any]:
    """Whether a sign-in at ``server`` will be renewed without a person (``None``: the server decides)."""
    from ..oauth import flow

    if sign_in.flow is SignInFlow.CLIENT_CREDENTIALS:
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


def _resource_indicator(sign_in: args.SignIn, record: Any) -> dict[str, str]:
    """What the sign-in sends as ``resource`` (RFC 8707), and why; never the value itself."""
    setting = sign_in.resource_indicator
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


def sign_in_flows(
    url: str,
    sign_in: args.SignIn,
    env: dict[str, str],
    context: Any,
    *,
    deadline: float,
    challenge: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """Which sign-in flows the authorization server offers, which one the bridge would use, and why;
    and the metadata of the authorization server (``None`` when it was not found).

    It reads the metadata of the upstream server and of its authorization server until
    ``deadline`` (best effort: a failure gives ``"not checked"`` with the reason in
    words); it never signs in. ``challenge``: the ``WWW-Authenticate`` header of the server's
    401 or 403, whose ``resource_metadata`` comes first, as for the bridge.
    """
    from ..oauth import config, discovery, grants, urls
    from ..oauth.challenge import parse_challenge
    from ..oauth.web import WebClient

    web = WebClient(context, env, deadline=deadline)
    try:
        parsed = parse_challenge(challenge)
        from_challenge = parsed.resource_metadata if parsed is not None else None
        resource = discovery.discover_resource(web, url, from_challenge)
        server = discovery.discover_server(web, resource.issuer, local=urls.local_upstream(url))
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
        choice = grants.choose_flow(sign_in.flow, remote=remote, server=server)
    except grants.DeviceUnavailable as exc:
        found["uses"] = None
        found["why"] = (
            f"--sign-in device, but the server offers no device sign-in ({exc}): use --sign-in browser"
        )
        return found, server
    found["uses"] = choice.flow
    found["why"] = choice.reason
    if config.in_sandbox(env):
        _sandbox_flows(found, url, server.issuer)
    return found, server


def sign_in_problem_fix(flows: dict[str, Any]) -> str | None:
    """The fix of the problem of the sign-in's metadata that ``flows`` notes (the sign-in cannot
    work), or ``None`` when the flows were checked or the note is of no such problem."""
    if flows.get("state") != "not checked":
        return None
    for words, fix in SIGN_IN_PROBLEMS.values():
        if flows.get("note") == words:
            return fix[:1].upper() + fix[1:] + "."
    return None


def _sandbox_flows(found: dict[str, Any], url: str, issuer: str) -> None:
    """In the sandbox of VS Code: no browser sign-in, and the hosts that the sandbox must allow."""
    from urllib.parse import urlsplit

    hosts = (
        f"the sandbox must allow the hosts {urlsplit(url).hostname} (the upstream server) and "
        f"{urlsplit(issuer).hostname} (the authorization server)"
    )
    if found["uses"] == "browser":
        found["uses"] = None
        found["why"] = (
            "the sandbox of VS Code blocks the browser sign-in: use --sign-in device where the server "
            f"offers it, or remove sandboxEnabled from the entry; {hosts}"
        )
    else:
        found["why"] = f"{found['why']}; {hosts}"


def _stored_sign_in(upstream: args.UrlUpstream, env: dict[str, str]) -> tuple[dict[str, Any], Any]:
    """The stored sign-in of the URL for the report, and its record (``None`` when there is none)."""
    from ..oauth.authorizer import OAuthConfig
    from ..oauth.errors import StoreOpenError
    from ..oauth.store import IndexedStore, open_store

    assert upstream.sign_in is not None
    kept = upstream.store
    try:
        opened = open_store(kept.token_store, key=kept.token_key, key_file=kept.token_key_file, env=env)
    except StoreOpenError as exc:
        return {"state": "not checked", "note": f"the token store did not open: {exc.detail}"}, None
    config = OAuthConfig.of(upstream.sign_in_options(), env)
    store = IndexedStore(opened.store)
    for entry in reversed(store.entries()):
        if entry.url != upstream.url or entry.client != config.identity:
            continue
        record = store.load(entry.key)
        if record is None or not record.access_token:
            continue
        found: dict[str, Any] = {"state": "stored", "store": opened.line, "account": kept.account}
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


#: The start of the fix of a step that did not answer in time.
_MORE_TIME: Final = (
    "Give the server more time with --discover-timeout (now {seconds}): it bounds the whole check."
)

#: The problems that ``check`` names, each with its fix: key -> (problem, fix). Their
#: placeholders (``{step}``, ``{detail}``, ``{seconds}``, ...) take what the run found; the
#: troubleshooting page lists each problem with the same words.
CHECK_PROBLEMS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        # A failed step (:func:`diagnose`).
        "spawn_failed": (
            "the command did not start: {detail}",
            'Examine the command after "--": the program must exist and be executable.',
        ),
        "timeout": (
            "the server did not answer {step} within the {seconds} of --discover-timeout",
            _MORE_TIME,
        ),
        "timeout_modern": (
            "the server did not answer {step} within the {seconds} of --discover-timeout",
            f"{_MORE_TIME} A 2025-era server needs --protocol auto or legacy.",
        ),
        "timeout_discover_command": (
            "the server did not answer {step} within the {seconds} of --discover-timeout",
            f"{_MORE_TIME} A 2025-era server that never answers server/discover needs --protocol legacy.",
        ),
        "stopped": (
            "the server stopped during {step}: {detail}",
            "Run the command in a terminal to see why it stops; its stderr lines are above.",
        ),
        "rpc": (
            "the server answered {step} with {failure}",
            "Examine the server and its log; with --protocol, choose the revision it speaks.",
        ),
        "not_trusted": (
            "the certificate of the server is not trusted",
            "Give the CA certificate that signed it with --ca-file <PEM file>.",
        ),
        "wrong_host_name": (
            "the certificate of the server is not for the host name of the URL",
            "Use the host name of the certificate in the URL.",
        ),
        "proxy_failed": (
            "the proxy failed: {detail}",
            "Examine HTTPS_PROXY, ALL_PROXY and NO_PROXY (the user and the password go into the proxy URL).",
        ),
        "tls_failed": (
            "the TLS connection failed: {detail}",
            "Examine the URL: the server must speak https.",
        ),
        "no_connection": ("no connection to the server: {detail}", "{fix}"),
        "sign_in_needed": (
            "the server needs a sign-in (HTTP status 401)",
            "Start the server in VS Code: the bridge opens the sign-in in a browser. Or send a token "
            "with --header-env Authorization=<variable>.",
        ),
        "access_refused": (
            "the server refused the access (HTTP status 403)",
            "Examine the token or the account of the sign-in (--account, --header-env).",
        ),
        "not_streamable_http": (
            "the URL refused the POST of Streamable HTTP (HTTP status {status}): it is not a Streamable "
            "HTTP endpoint, and may be one of the older HTTP+SSE transport (2024-11-05)",
            "Remove --transport streamable-http: with --transport auto (the default) the bridge falls back "
            "to HTTP+SSE (--transport sse forces it; its URL often ends in /sse). Else examine the path of "
            "the URL (often /mcp).",
        ),
        "not_mcp_endpoint": (
            "the URL is not an MCP endpoint (HTTP status {status})",
            "Examine the path of the URL (often /mcp).",
        ),
        "step_failed": (
            "{step} failed: {detail}",
            "Examine the server and its log; run with --log-level debug for more.",
        ),
        # The options, the era and the answers of the server.
        "ca_file_unusable": (
            "the check did not contact the server: the CA certificates of --ca-file cannot be used: {detail}",
            "Give a readable PEM file of CA certificates with --ca-file, or leave the option out "
            "(the bridge always trusts the CA certificates of the system); see "
            f'"{args.PROGRAM} check --help".',
        ),
        "not_modern": (
            f"the server is not a server of revision {MODERN}: it answered server/discover with {{failure}}",
            f"Remove --protocol {MODERN}: with --protocol auto (the default) the bridge passes a 2025-era "
            "server through.",
        ),
        "legacy_refused": (
            "the server speaks only MCP {versions}, thus --protocol legacy, which passes servers of the 2025 "
            "era through, cannot work with it: it answered initialize with {failure}",
            "Remove --protocol legacy from the arguments of the server, or use --protocol auto.",
        ),
        "invalid_initialize": (
            "the server answered initialize with a result that is not valid",
            f"Examine the server: it is neither of revision {MODERN} nor of {LEGACY}.",
        ),
        "tasks_off": (
            "the server runs tools as tasks (the Tasks extension), and --tasks off declares none: "
            "a tool that needs them fails with -32021 (missing client capability)",
            "Remove --tasks off: with --tasks auto (the default) the bridge carries the tasks.",
        ),
        "allow_matches_nothing": (
            "--allow-tool {pattern} matches no tool of the server, so it lets no tool through "
            "(a pattern is case-sensitive and matches the whole name)",
            "Give a pattern that matches the name of a tool (the Tools line lists them).",
        ),
        "allow_matches_nothing_close": (
            "--allow-tool {pattern} matches no tool of the server, so it lets no tool through "
            "(a pattern is case-sensitive and matches the whole name)",
            "Did you mean --allow-tool {better}? It matches the tool {tool}.",
        ),
        "deny_matches_nothing": (
            "--deny-tool {pattern} matches no tool of the server, so it hides nothing "
            "(a pattern is case-sensitive and matches the whole name)",
            "Give a pattern that matches the name of the tool to hide (the Tools line lists them).",
        ),
        "deny_matches_nothing_close": (
            "--deny-tool {pattern} matches no tool of the server, so it hides nothing "
            "(a pattern is case-sensitive and matches the whole name)",
            "Did you mean --deny-tool {better}? It matches the tool {tool}.",
        ),
        "filter_hides_all": (
            "VS Code sees none of the {count} tools of the server: the tool filter hides each of them",
            "Give --allow-tool patterns that match the names of the tools (the Tools line lists "
            "them), or remove the --deny-tool pattern that hides them all.",
        ),
        "tool_error_result": (
            "the tool {tool} answered with an error result: {text}",
            "Examine the arguments of --call-arguments and the log of the server.",
        ),
        "unknown_tool": (
            "the server has no tool {tool}: its tool list does not name it, and the call failed",
            "Give --call-tool the name of a tool of the server (the Tools line lists them).",
        ),
        "unknown_tool_close": (
            "the server has no tool {tool}: its tool list does not name it, and the call failed",
            "Did you mean {names}? Give --call-tool the name of a tool of the server.",
        ),
        # The eras of the server and a --call-tool call that needs the 2025 era (notes when
        # the bridge passes the server through, problems when it translates).
        "needs_2025_era_modern_only": (
            f"the tool {{tool}} sends a request of the 2025 era in the middle of its call, which a "
            f"{MODERN} connection does not carry (the server answered: {{failed}})",
            f"The server speaks only {MODERN} to the bridge: its tool must ask for input with an "
            "input_required result instead.",
        ),
        "needs_2025_era_translated": (
            f"the tool {{tool}} sends a request of the 2025 era in the middle of its call, which a "
            f"{MODERN} connection does not carry (the server answered: {{failed}})",
            f"Remove --protocol {MODERN}: the server speaks {{both}} too, and the bridge then passes it "
            "through, requests in the middle of a call included.",
        ),
        "needs_2025_era_passed": (
            f"the tool {{tool}} sends a request of the 2025 era in the middle of its call, which a "
            f"{MODERN} connection does not carry (the server answered: {{failed}})",
            f"Nothing: with --protocol auto (the default) the bridge reaches the server in {{both}} and "
            f"passes it through, where the tool works; --protocol {MODERN} would make it fail so.",
        ),
        "both_eras_translated": (
            f"the server speaks both eras ({MODERN} and {{both}}); the bridge translates. A tool written "
            "for the requests of the 2025 era in the middle of a call (such as FastMCP's ctx.elicit()) "
            f"works only in {{both}}, one that asks with an input_required result only in {MODERN}",
            f"Remove --protocol {MODERN} to pass it through. check --call-tool <name> tells.",
        ),
        "both_eras_passed": (
            f"the server speaks both eras ({MODERN} and {{both}}); the bridge reaches it in {{both}}, the "
            "revision of VS Code. A tool written for the requests of the 2025 era in the middle of a "
            f"call (such as FastMCP's ctx.elicit()) works only in {{both}}, one that asks with an "
            f"input_required result only in {MODERN}",
            f"--protocol {MODERN} forces the translation. check --call-tool <name> tells.",
        ),
        "stray_lines": (
            "the server wrote {lines} JSON-RPC to stdout: log to stderr instead",
            "Write the log lines and debug prints of the server to stderr: its stdout carries "
            "the messages of the protocol only, and the bridge drops every other line.",
        ),
    }
)


def check_problem(key: str, **values: object) -> tuple[str, str]:
    """The problem ``key`` of :data:`CHECK_PROBLEMS` and its fix, with ``values`` in their placeholders."""
    problem, fix = CHECK_PROBLEMS[key]
    return problem.format(**values), fix.format(**values)


def legacy_refused(error: ErrorObject, protocol: str) -> tuple[str, str] | None:
    """The problem of an ``initialize`` of ``--protocol legacy`` that a server of revision
    2026-07-28 only refused, naming the revisions it speaks (the error's ``data.supported``),
    as the bridge does; ``None`` for any other error."""
    from ..bridge.sessions.era import refused_legacy, supported_revisions

    if refused_legacy(error, protocol=protocol) is None:
        return None
    failure = failure_text(RpcError(error))
    return check_problem("legacy_refused", versions=supported_revisions(error), failure=failure)


def diagnose(step: str, exc: McpError, upstream: args.CommandUpstream | args.UrlUpstream) -> tuple[str, str]:
    """The problem of a failed step, and the option that fixes it."""
    seconds = format_duration(upstream.discover_timeout)
    if isinstance(exc, SpawnFailed):
        return check_problem("spawn_failed", detail=exc.detail or exc.cause)
    if isinstance(exc, RequestTimeout):
        key = "timeout"
        if upstream.protocol == MODERN:
            key = "timeout_modern"
        elif step == "server/discover" and isinstance(upstream, args.CommandUpstream):
            key = "timeout_discover_command"
        return check_problem(key, step=step, seconds=seconds)
    if isinstance(exc, Closed):
        return check_problem("stopped", step=step, detail=exc.detail or "the connection closed")
    if isinstance(exc, RpcError):
        return check_problem("rpc", step=step, failure=failure_text(exc))
    detail = exc.detail or exc.cause
    status = exc.http_status
    if "not trusted" in detail:
        return check_problem("not_trusted")
    if "host name" in detail and "certificate" in detail:
        return check_problem("wrong_host_name")
    if detail.startswith("proxy"):
        return check_problem("proxy_failed", detail=detail)
    if detail.startswith("TLS"):
        return check_problem("tls_failed", detail=detail)
    if detail.startswith("connect"):
        refused, loopback = (exc.refused, exc.loopback) if isinstance(exc, ConnectError) else (False, False)
        fix = connect_fix(refused=refused, loopback=loopback)
        return check_problem("no_connection", detail=detail, fix=fix)
    if status == 401:
        return check_problem("sign_in_needed")
    if status == 403:
        return check_problem("access_refused")
    streamable_only = isinstance(upstream, args.UrlUpstream) and upstream.transport == "streamable-http"
    if status in (400, 404, 405) and streamable_only:
        # What --transport auto takes for the sign of the HTTP+SSE transport of 2024-11-05.
        return check_problem("not_streamable_http", status=status)
    from ..bridge.sessions.session import NOT_MCP_STATUSES

    if status in NOT_MCP_STATUSES:
        # A web server without an MCP server there: no such path, or no POST (the bridge's rule).
        return check_problem("not_mcp_endpoint", status=status)
    return check_problem("step_failed", step=step, detail=detail)


def failure_text(exc: McpError) -> str:
    if isinstance(exc, RpcError):
        return f"error {exc.error.code} ({exc.error.message[:80]})"
    text = exc.detail or exc.cause
    if exc.http_status is not None and str(exc.http_status) not in text:
        text += f" (HTTP status {exc.http_status})"
    return text


# ---------------------------------------------------------------------------------------------
# Names that are close
# ---------------------------------------------------------------------------------------------

#: How alike a pattern or a tool name must be to a tool name for "did you mean" (difflib's ratio).
_CLOSE_NAME_RATIO: Final = 0.6
#: The most names that a "did you mean" lists.
_MAX_CLOSE_NAMES: Final = 3


def closest_pattern(pattern: str, names: list[str]) -> tuple[str, str] | None:
    """A pattern close to ``pattern`` that matches a tool of ``names``, and the first tool it
    matches; ``None`` when none is close.

    It tries the pattern with ``_`` and ``-`` swapped, then in other case, then the tool
    name most like the pattern (difflib).
    """
    import difflib
    from fnmatch import fnmatchcase

    swapped = pattern.translate(str.maketrans("_-", "-_"))
    variants = [
        pattern.replace("_", "-"),
        pattern.replace("-", "_"),
        swapped,
        pattern.lower(),
        pattern.upper(),
        pattern.lower().replace("_", "-"),
        pattern.lower().replace("-", "_"),
    ]
    for variant in variants:
        if variant == pattern:
            continue
        for name in names:
            if fnmatchcase(name, variant):
                return variant, name
    close = difflib.get_close_matches(pattern, names, n=1, cutoff=_CLOSE_NAME_RATIO)
    return (close[0], close[0]) if close else None


def closest_names(name: str, names: list[str]) -> list[str]:
    """Up to three of ``names`` that are most like ``name`` (also in other case)."""
    import difflib

    by_lower = {candidate.lower(): candidate for candidate in reversed(names)}
    close = difflib.get_close_matches(
        name.lower(), list(by_lower), n=_MAX_CLOSE_NAMES, cutoff=_CLOSE_NAME_RATIO
    )
    return [by_lower[found] for found in close]
