"""Which era an upstream server speaks, and the seam between the front end and a 2025-era one.

Under ``--protocol auto`` an upstream server gets the client's own ``initialize``
first, in the client's revision, as when the client reaches it itself: a command
(:class:`~.childshare.StdioUpstream`) on its stdio, a URL (:class:`LegacyTransports`)
over the Streamable HTTP of 2025-11-25, within the sign-in when the server asks for
one. A server that answers it speaks that revision (a server of the 2025 era, or one
of both eras) and the :class:`~.passthrough.LegacyPassthrough` carries the
connection, as a direct connection would be; a refusal that shows a server of
revision 2026-07-28 only (:func:`refuses_as_modern`) sends the bridge on to
``server/discover`` and the translation, on the same child for a command, with the
token of that sign-in for a URL. No other failure of that ``initialize`` is followed
by ``server/discover``: a request that the server may have got is not sent again in
another form. ``--protocol 2026-07-28`` sends ``server/discover`` alone and
translates; ``--protocol legacy`` sends ``initialize`` alone. ``check``, which asks
``server/discover`` first, reads a server of the 2025 era from its failure
(:func:`means_legacy`).
The passthrough reaches the server through a :class:`LegacyUpstream`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Final, Protocol

from ...mcp.cancel import CancelToken
from ...mcp.client import Client, Connect
from ...mcp.droplog import DropLog
from ...mcp.errors import InvalidResponse, McpError, RequestTimeout, RpcError
from ...mcp.jsonrpc import (
    HEADER_MISMATCH,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorObject,
)
from ...mcp.protocol import MODERN
from ...mcp.text import printable
from ...mcp.transports import Transport
from ..front.options import UpstreamRevision
from ..rules import errortable, translate

__all__ = [
    "AUTO",
    "FAILED_STARTS",
    "LEGACY",
    "LegacyTransports",
    "LegacyUpstream",
    "SignInGuard",
    "log_spawn_failed",
    "means_legacy",
    "refused_legacy",
    "refuses_as_modern",
    "stopped_during",
    "supported_revisions",
    "stopped_error",
    "translated_error",
]

log = logging.getLogger("mcpbridge.bridge")
#: The warnings of errors that a server can repeat at every call.
_drops = DropLog(log)

#: A started client of revision 2026-07-28 (the one type of it: :data:`~mcpbridge.mcp.client.Connect`).
ModernConnect = Connect

#: The values of ``--protocol`` (``Options.protocol``) besides :data:`~mcpbridge.mcp.protocol.MODERN`.
AUTO: Final = UpstreamRevision.AUTO
LEGACY: Final = UpstreamRevision.LEGACY

#: The errors that only a server of revision 2026-07-28 sends: such a server is modern.
MODERN_ERROR_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
#: HTTP statuses that a 2025-era server gives a modern request (§A11 of the digest).
LEGACY_HTTP_STATUSES: Final = frozenset({400, 404, 405})
#: The kind of the log lines of a failed start of the upstream server in a connection's drop log:
#: the client may send ``initialize`` again after each.
FAILED_STARTS: Final = "failed starts of the upstream server"


def means_legacy(exc: McpError, *, protocol: str, over_http: bool) -> bool:
    """Tell whether a failed ``server/discover`` shows a server of the 2025 era.

    Only ``--protocol auto`` falls back. A JSON-RPC error is legacy unless its
    code is one that only a modern server sends. Over stdio, no answer in the
    time limit is legacy too; a child that exited without an answer is not.
    Over HTTP, status 400, 404 or 405 without a JSON-RPC error of the request
    is legacy.
    """
    if protocol != AUTO:
        return False
    if isinstance(exc, RpcError):
        return exc.error.code not in MODERN_ERROR_CODES
    if over_http:
        return isinstance(exc, InvalidResponse) and exc.http_status in LEGACY_HTTP_STATUSES
    return isinstance(exc, RequestTimeout)


def refuses_as_modern(error: ErrorObject) -> bool:
    """Tell whether an error to the client's ``initialize`` shows a server of revision 2026-07-28 only.

    Such a server answers ``initialize`` with an error of a code that only a modern
    server sends (-32022 and its kin), with "method not found", or with a ``data.supported``
    list that names no revision before 2026-07-28. Any other error is the refusal of a
    server of the 2025 era, which the client gets as it is.
    """
    if error.code in MODERN_ERROR_CODES or error.code == METHOD_NOT_FOUND:
        return True
    data = error.data
    supported = data.get("supported") if isinstance(data, dict) else None
    return (
        isinstance(supported, list)
        and bool(supported)
        and all(isinstance(version, str) and version >= MODERN for version in supported)
    )


#: What the log line of a server that stopped during the start says to do.
_STOPPED_ADVICE: Final = "its own lines above say why; to see more, run its command in a terminal"


def stopped_during(step: str, exit_status: str | None) -> str:
    """The log line of an upstream server that stopped during ``step``, with its exit code or
    signal, and where to look."""
    if exit_status is not None:
        return f"the upstream server exited during {step} ({exit_status}): {_STOPPED_ADVICE}"
    return f"the upstream server closed the connection during {step}: {_STOPPED_ADVICE}"


def stopped_error(step: str, exit_status: str | None) -> dict[str, Any]:
    """The error for the client of an upstream server that stopped during ``step`` of the start."""
    what = f"exited ({exit_status})" if exit_status is not None else "closed the connection"
    return errortable.error_object("stopped_at_start", f"{step}: the upstream server {what}")


def supported_revisions(error: ErrorObject) -> str:
    """The revisions that the error's ``data.supported`` names, shortened and printable (at most
    8), or 2026-07-28 when it names none."""
    supported = error.data.get("supported") if isinstance(error.data, dict) else None
    if not isinstance(supported, list):
        supported = []
    named = [printable(v[:32]) for v in supported[:8] if isinstance(v, str)]
    return ", ".join(named) or MODERN


def refused_legacy(error: ErrorObject, *, protocol: str) -> tuple[dict[str, Any], str] | None:
    """The words of an ``initialize`` of ``--protocol legacy`` that the upstream refused with an
    error that only a server of revision 2026-07-28 sends: the error for the client and the log
    line, with the revisions of the error's ``data.supported``. ``None`` for any other error,
    and for every error of ``--protocol auto``, which passes on as the server wrote it.
    """
    if protocol != LEGACY or error.code not in MODERN_ERROR_CODES:
        return None
    versions = supported_revisions(error)
    detail = f"initialize: error {error.code}; the server supports MCP {versions}"
    line = (
        f"initialize failed: the upstream server speaks only MCP {versions} (error {error.code}), thus "
        "--protocol legacy cannot work: remove it, or use --protocol auto"
    )
    return errortable.error_object("legacy_refused", detail, versions=versions), line


def log_spawn_failed(drops: DropLog, exc: McpError) -> None:
    """Log that the upstream command did not start, in ``drops``, the drop log of the connection."""
    drops(
        logging.ERROR,
        FAILED_STARTS,
        "the upstream server did not start: %s",
        exc.detail or exc.cause,
        exc_info=exc,
    )


def translated_error(method: str, error: dict[str, Any], *, protocol: str) -> dict[str, Any]:
    """The client's error for the JSON-RPC ``error`` of the upstream to ``method`` in the translation.

    The error in the terms of 2025-11-25 (:func:`~.rules.translate.legacy_error`). Under
    ``--protocol 2026-07-28``, the error of a server without a channel for its request in
    the middle of a call (:func:`~.rules.errortable.no_back_channel`) names the cause and the fix,
    in the error and in a warning line: a server of both eras gets the client's revision
    without that option.
    """
    error = translate.legacy_error(method, error)
    if protocol != MODERN or not errortable.no_back_channel(error):
        return error
    _drops(
        logging.WARNING,
        "errors of a server without a back-channel for its requests",
        "%s: the upstream server answered that it cannot send its request in the middle of the call "
        "(%s). %s",
        printable(method),
        printable(error.get("message", "")),
        errortable.BACK_CHANNEL_FIX,
    )
    return errortable.with_back_channel_fix(error)


class SignInGuard(Protocol):
    """The sign-in of a URL upstream, as the requests of the passthrough need it.

    :class:`~mcpbridge.oauth.authorizer.OAuthAuthorizer` is one.
    """

    @property
    def sign_in_timeout(self) -> float: ...

    def interactive(self) -> bool:
        """Whether the next request can need a sign-in in the browser."""
        ...

    def guard(self, *, cancel: CancelToken | None, timeout: float) -> AbstractContextManager[object]:
        """Let a sign-in start within the request that runs inside, bounded by ``cancel`` and ``timeout``."""
        ...


class LegacyUpstream(Protocol):
    """The seam between the front end and a 2025-era upstream server."""

    #: True for a URL: then only HTTP statuses and JSON-RPC errors mean legacy, not a time-out.
    over_http: bool
    #: The sign-in of a URL upstream, or ``None``.
    sign_in: SignInGuard | None
    def transport(self, probe: Client | None) -> Transport:
        """An unstarted transport to the upstream server.

        ``probe`` is the client of the failed ``server/discover``, or ``None``
        (``--protocol legacy``, or ``initialize`` first). The caller closes ``probe`` afterwards.
        """
        ...

    def modern_connect(self, refused: Transport, connect: ModernConnect) -> ModernConnect:
        """How to reach the server in revision 2026-07-28 after it refused ``initialize`` on ``refused``.

        ``connect`` is the front end's own; a command takes over the child of ``refused``
        while it runs instead of starting it again.
        """
        ...


class LegacyTransports:
    """A :class:`LegacyUpstream` that makes a new transport each time (a URL)."""

    def __init__(
        self, make: Callable[[], Transport], *, over_http: bool = True, sign_in: SignInGuard | None = None
    ) -> None:
        self._make = make
        self.over_http = over_http
        self.sign_in = sign_in

    def transport(self, probe: Client | None) -> Transport:
        return self._make()

    def modern_connect(self, refused: Transport, connect: ModernConnect) -> ModernConnect:
        return connect
