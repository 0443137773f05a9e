"""The Streamable HTTP client transport of revision 2025-11-25, for a 2025-era upstream URL.

Theory of operation
-------------------

The bridge uses this transport only when the upstream server at a URL turned
out to be of the 2025 era (:mod:`mcpbridge.bridge.sessions.passthrough`). The messages
are raw JSON-RPC: the transport adds nothing to them, it only carries them.

* A **request** is a ``POST`` on the thread that calls :meth:`send`, as in
  :class:`~.http.HttpTransport`: the answer is one JSON body or an SSE stream,
  and each message of it (notifications, requests of the server, the response)
  goes to ``on_message`` before :meth:`send` returns. The cancel token of the
  request shuts the socket of its exchange at once.
* A **notification** or an **answer** to a request of the server goes into a
  queue; the thread ``mcpbridge-legacy-http-poster`` posts them in order, so
  :meth:`send` never waits for the network for them. A request waits until the
  messages queued before it went out, so that ``notifications/initialized``
  reaches the server before the first request that follows it.
* The response to ``initialize`` brings the session id (``Mcp-Session-Id``); every
  later message carries it and the negotiated ``MCP-Protocol-Version``.
* Before ``notifications/initialized`` goes out, the thread
  ``mcpbridge-legacy-http-stream`` opens a ``GET`` stream for the messages that
  the server sends on its own (list changes, resource updates, requests), and the
  notification waits for its answer: a server drops what it sends while no such
  stream is open, also what it sends while it handles that very notification.
  The first GET carries no ``Last-Event-ID``. When the stream ends it opens it
  again with the id of the last event of that same stream (never the id of an
  event of a POST answer), after the ``retry`` time of the server or one second;
  failures back off up to 30 seconds. A server without such a stream answers
  405, and the thread ends.
* A 404 on a message that carried a session id means that the session expired:
  the transport sends ``initialize`` again with the first parameters, then
  ``notifications/initialized``, and repeats the message once. When the new
  session expires at once too (a 404 for its ``notifications/initialized`` or for
  the message repeated in it), the server forgets every session: the transport
  starts no more sessions, says so in one warning line, and fails that message and
  each later one with :class:`SessionExpired`, without sending it.
* The server may end the event stream of a ``POST`` before the response (the
  polling of 2025-11-25, "Resumability and Redelivery"): when the stream gave an
  event id, the transport waits the ``retry`` time of the stream (one second
  without it, at most :data:`MAX_RESUME_WAIT`), then resumes that stream with a
  ``GET`` that carries ``Last-Event-ID``, and reads the rest of the answer there;
  at most :data:`MAX_RESUMES` times for one request, and the cancel of the request
  ends the wait. A stream without an event id cannot be resumed: the request fails
  as before (``the response stream ended before the response``).
* A 429 or 503 of a request with a ``Retry-After`` of at most 30 s is waited
  for once, as in :mod:`.http`.
* :meth:`close` posts what is queued (for at most its grace), then ends the
  session with ``DELETE``, as a polite client does.

The wire is that of :mod:`.http` (:mod:`.httpwire`: urllib3, the TLS context,
the proxy rules, a request sent at most once, the error texts); this transport
sends nothing again by itself. No log line and no error holds the URL, a header
value or a token.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Generator
from contextlib import closing
from typing import TYPE_CHECKING, Any, Final

from ..cancel import CancelToken
from ..errorbase import PeerFault
from ..errors import InvalidResponse, McpError, TransportFailed
from ..jsonrpc import ErrorResponse, Message, Notification, Request, Response
from . import OnMessage
from .httpbase import json_body
from .httpwire import ACCEPT, Exchange, HttpStatusError, media_type
from .queued import QueuedTransportBase, logged_name
from .sse import SseParser

if TYPE_CHECKING:
    from .httppool import WireResponse

__all__ = ["LegacyHttpTransport", "SessionExpired"]

log = logging.getLogger("mcpbridge.http")

#: The header of the session of a 2025-11-25 server.
SESSION_HEADER: Final = "Mcp-Session-Id"
#: The first wait before a new GET stream after a failure, and the longest.
STREAM_BACKOFF: Final = 1.0
MAX_STREAM_BACKOFF: Final = 30.0
#: The longest wait of ``notifications/initialized`` (and what follows it) for the GET stream.
STREAM_READY_WAIT: Final = 10.0
#: The most resumptions of the event stream of one request, and the longest wait before one.
MAX_RESUMES: Final = 32
MAX_RESUME_WAIT: Final = 30.0
#: The wait before a resumption when the stream named no ``retry`` time.
RESUME_WAIT: Final = 1.0

_init_ids = itertools.count(1)
#: The detail of :class:`SessionExpired`.
_SESSIONS_ENDED: Final = "the upstream server ended a new session at once too"


def _visible_ascii(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(char) <= 0x7E for char in value)


class SessionExpired(McpError, PeerFault):
    """The server ended the session, and a new one at once too: the transport starts no more."""

    cause = "session_expired"


class _Expired(PeerFault):
    """A 404 for a message that carried the session id ``session``; the transport handles it."""

    def __init__(self, session: str) -> None:
        super().__init__("the session expired")
        self.session = session


class LegacyHttpTransport(QueuedTransportBase):
    """A client transport to one 2025-11-25 Streamable HTTP URL; see the module docstring.

    The parameters are those of :class:`~.httpbase.HttpTransportBase`.

    Raises:
        ConnectFailed: the URL is not http or https, or a proxy variable has a scheme
            other than http and https.
        CaFileError: ``ca_file`` cannot be used.
    """

    #: The messages are carried raw: an answer to another request on a stream goes on too.
    PASS_OTHER_ANSWERS = True
    POSTER = "mcpbridge-legacy-http-poster"

    def _own_state(self) -> None:
        super()._own_state()
        self._session_id: str | None = None
        self._version: str | None = None
        self._init_params: dict[str, Any] | None = None
        self._renew_lock = threading.Lock()
        #: Set once a new session expired at once too; guarded by ``_lock``.
        self._sessions_ended = False
        #: Set once the GET stream got its answer (or cannot get one).
        self._stream_ready = threading.Event()

    # ------------------------------------------------------------------ seam

    @property
    def session_id_known(self) -> bool:
        """True once the server gave a session id."""
        return self._session_id is not None

    def _end_waits(self) -> None:
        self._stream_ready.set()

    # -------------------------------------------------------------- requests

    def _send_request(self, request: Request, cancel: CancelToken | None, deliver: OnMessage) -> None:
        """Post ``request`` and deliver its answer; a new session after a 404, a wait after a
        short 429 or 503 (see the module docstring)."""
        if request.method == "initialize" and isinstance(request.params, dict):
            self._init_params = request.params
        renewed = False
        waited = False
        while True:
            try:
                self._post(request, cancel, deliver)
                return
            except HttpStatusError as exc:
                if not self._wait_busy(request.method, exc, cancel, waited=waited):
                    raise
                waited = True
            except _Expired as expired:
                if request.method == "initialize":
                    raise HttpStatusError(404) from expired
                if renewed:
                    raise self._end_sessions() from expired
                renewed = True
                self._renew(expired.session, cancel)

    def _post(self, message: Message, cancel: CancelToken | None, deliver: OnMessage) -> None:
        """One message, with one more try after a 401 or 403 that the authorizer handled.

        Raises:
            SessionExpired: the transport starts no more sessions; nothing was sent.
        """
        if self._sessions_ended:
            raise SessionExpired(_SESSIONS_ENDED)
        challenged = False
        while True:
            session = self._session_id
            with (
                self._tracked(cancel) as exchange,
                closing(self._http_call("POST", message, exchange, cancel, session)) as response,
            ):
                if self._challenged(response, challenged):
                    challenged = True
                    continue
                if response.status == 404 and session is not None:
                    raise _Expired(session)
                self._answer(message, response, exchange, cancel, deliver)
                return

    def _answer(
        self,
        message: Message,
        response: WireResponse,
        exchange: Exchange,
        cancel: CancelToken | None,
        deliver: OnMessage,
    ) -> None:
        status = response.status
        media = media_type(response)
        method = logged_name(message)
        log.debug("%s: HTTP status %d (%s)", method[:128], status, media or "no body")
        if not isinstance(message, Request):
            if 200 <= status < 300:
                return
            raise HttpStatusError(status)
        if 200 <= status < 300 and message.method == "initialize":
            self._remember_session(response)
        if 200 <= status < 300 and media == "text/event-stream":
            answer = self._resumable_answer(message, response, exchange, cancel, deliver)
            deliver(self._passing(message, answer))
            return
        deliver(self._read_answer(message, response, exchange, cancel, deliver))

    def _resumable_answer(
        self,
        request: Request,
        response: WireResponse,
        exchange: Exchange,
        cancel: CancelToken | None,
        deliver: OnMessage,
    ) -> Response | ErrorResponse:
        """The response of ``request`` on its event stream, resumed with ``GET`` when the server
        ends the stream early (see the module docstring).

        Raises:
            TransportFailed: the stream ended before the response and cannot be resumed.
            Cancelled: the request was canceled while it waited to resume.
        """
        last_id = [""]
        parser = SseParser(self._max_bytes)
        messages = self._stream_events(response, exchange, cancel, parser, last_id)
        resumes = 0
        while True:
            try:
                return self._stream_answer(request, messages, deliver)
            except TransportFailed:
                if not last_id[0] or self._closed or resumes == MAX_RESUMES:
                    raise
            finally:
                messages.close()  # a resumed GET ends here, answered or not
            resumes += 1
            self._wait_to_resume(parser, cancel)
            log.debug("%s: the server ended the stream early; the bridge resumes it", request.method[:128])
            parser = SseParser(self._max_bytes)
            messages = self._resumed_events(cancel, parser, last_id)

    def _wait_to_resume(self, parser: SseParser, cancel: CancelToken | None) -> None:
        wait = RESUME_WAIT if parser.retry is None else min(parser.retry / 1000, MAX_RESUME_WAIT)
        self._pause(wait, cancel)

    def _stream_events(
        self,
        response: WireResponse,
        exchange: Exchange,
        cancel: CancelToken | None,
        parser: SseParser,
        last_id: list[str],
    ) -> Generator[Message, None, None]:
        yield from self._events(response, exchange, cancel, parser, strict=True, last_id=last_id)

    def _resumed_events(
        self, cancel: CancelToken | None, parser: SseParser, last_id: list[str]
    ) -> Generator[Message, None, None]:
        """The events of the stream of ``request`` after ``last_id[0]``, from a ``GET``."""
        session = self._session_id
        with self._tracked(cancel) as exchange, closing(
            self._http_call("GET", None, exchange, cancel, session, resume=last_id[0])
        ) as response:
            if response.status != 200 or media_type(response) != "text/event-stream":
                raise TransportFailed(
                    f"the resumption of the response stream got HTTP status {response.status}",
                    http_status=response.status,
                )
            yield from self._stream_events(response, exchange, cancel, parser, last_id)

    def _remember_session(self, response: WireResponse) -> None:
        session = response.header(SESSION_HEADER)
        if session is not None and _visible_ascii(session):
            self._session_id = session
        elif session is not None:
            self._drops(
                logging.WARNING,
                "dropped session ids that are not visible ASCII",
                "the upstream server sent a session id that is not visible ASCII, thus the bridge drops it",
            )

    def _passing(self, request: Request, answer: Response | ErrorResponse) -> Response | ErrorResponse:
        """The answer unchanged; the answer to ``initialize`` gives the version of later messages."""
        if (
            request.method == "initialize"
            and isinstance(answer, Response)
            and isinstance(answer.result, dict)
        ):
            version = answer.result.get("protocolVersion")
            if isinstance(version, str) and _visible_ascii(version):
                self._version = version
        return answer

    # ------------------------------------------------------------- sessions

    def _renew(self, stale: str, cancel: CancelToken | None) -> None:
        """Start a new session after a 404 of ``stale``; one thread does it, the others wait."""
        with self._renew_lock:
            if self._session_id != stale:
                return
            params = self._init_params
            if params is None:
                raise HttpStatusError(404)
            self._session_id = None
            answers: list[Message] = []
            request = Request(f"mcpbridge-initialize-{next(_init_ids)}", "initialize", params)
            self._post(request, cancel, answers.append)
            answer = next((m for m in answers if isinstance(m, (Response, ErrorResponse))), None)
            if not isinstance(answer, Response):
                raise InvalidResponse("initialize of a new session failed")
            self._open_stream()
            try:
                self._post(Notification("notifications/initialized"), cancel, answers.append)
            except _Expired as expired:
                raise self._end_sessions() from expired
        self._drops(
            logging.INFO,
            "new sessions after an expired one",
            "the session of the upstream server expired, thus the bridge started a new session",
        )

    def _end_sessions(self) -> SessionExpired:
        """Start no more sessions (a new one expired at once too); the error of the message at hand."""
        with self._lock:
            first, self._sessions_ended = not self._sessions_ended, True
        if first:
            log.warning(
                "the upstream server ended a new session at once too, thus the bridge starts no more "
                "sessions: restart the server"
            )
        return SessionExpired(_SESSIONS_ENDED)

    def _close_wires(self, grace: float) -> None:
        """End the session (``DELETE``), then close the wire."""
        self._delete_session(grace)
        super()._close_wires(grace)

    def _delete_session(self, grace: float) -> None:
        session = self._session_id
        if session is None:
            return
        try:
            response = self._wire.request(
                "DELETE",
                self._headers_for(session, accept=None).items(),
                None,
                connect_timeout=min(self._connect_timeout, grace),
                read_timeout=grace,
            )
            response.close()
            log.debug("the end of the session: HTTP status %d", response.status)
        except Exception as exc:  # noqa: BLE001 - the end of a session is a courtesy
            log.debug("the end of the session failed: %s", type(exc).__name__)

    # ---------------------------------------------------------------- queue

    def _post_queued(self, message: Message) -> None:
        """Post a queued message on the poster thread; the GET stream opens before
        ``notifications/initialized`` goes out (see :meth:`_open_stream`)."""
        if isinstance(message, Notification) and message.method == "notifications/initialized":
            self._open_stream()
        self._post_or_drop(message)

    def _post_or_drop(self, message: Message) -> None:
        what = logged_name(message)
        try:
            try:
                self._post(message, None, lambda _m: None)
            except _Expired as expired:
                self._renew(expired.session, None)
                try:
                    self._post(message, None, lambda _m: None)
                except _Expired as again:
                    raise self._end_sessions() from again
        except SessionExpired:
            self._drops(
                logging.WARNING,
                "dropped messages without a session",
                "%s was not sent to the upstream server: the bridge starts no more sessions",
                what[:128],
            )
        except McpError as exc:
            self._unsent(what, exc)

    # --------------------------------------------------------------- stream

    def _open_stream(self) -> None:
        """Open the GET stream and wait for its answer (at most :data:`STREAM_READY_WAIT`).

        Called before ``notifications/initialized`` goes out: what the server sends on its
        own while it handles that notification (a list change, a request) goes on the GET
        stream, and a server without an open one drops it. The messages queued after the
        notification wait too.
        """
        self._ensure_listener()
        # A stream that is not open in time is not an error: the notification goes out
        # without it, as it would to a server that opens no stream.
        self._stream_ready.wait(STREAM_READY_WAIT)

    def _ensure_listener(self) -> None:
        with self._lock:
            if self._closed or (self._listener is not None and self._listener.is_alive()):
                return
            self._stream_ready.clear()
            self._listener = threading.Thread(
                target=self._listen, name="mcpbridge-legacy-http-stream", daemon=True
            )
            self._listener.start()

    def _listen(self) -> None:
        delay = STREAM_BACKOFF
        # The id of the last event of this GET stream: sent as Last-Event-ID only to resume
        # this same stream of this same session (2025-11-25, "Resumability and Redelivery").
        last_id = [""]
        stream_session: str | None = None
        while not self._stopped.is_set():
            session = self._session_id
            if session != stream_session:
                stream_session, last_id[0] = session, ""
            parser = SseParser(self._max_bytes)
            outcome = self._listen_once(session, parser, last_id)
            if outcome in ("unsupported", "expired", "closed"):
                if outcome == "unsupported":
                    log.debug("the upstream server has no stream for the messages it sends on its own")
                return
            if outcome == "ended":
                wait = parser.retry / 1000 if parser.retry is not None else STREAM_BACKOFF
                delay = STREAM_BACKOFF
            else:
                wait = delay
                delay = min(delay * 2, MAX_STREAM_BACKOFF)
            if self._stopped.wait(wait):
                return

    def _listen_once(self, session: str | None, parser: SseParser, last_id: list[str]) -> str:
        try:
            with self._tracked(None) as exchange:
                response = self._http_call("GET", None, exchange, None, session, resume=last_id[0])
                self._stream_ready.set()
                with closing(response):
                    return self._listen_stream(session, response, exchange, parser, last_id)
        except McpError as exc:
            if self._closed:
                return "closed"
            log.debug("the stream of the upstream server failed: %s", exc.detail or exc.cause, exc_info=exc)
            return "failed"
        finally:
            self._stream_ready.set()  # also when the stream did not open

    def _listen_stream(
        self,
        session: str | None,
        response: WireResponse,
        exchange: Exchange,
        parser: SseParser,
        last_id: list[str],
    ) -> str:
        status = response.status
        if status == 405:
            return "unsupported"
        if status == 404 and session is not None:
            return "expired"
        if status != 200 or media_type(response) != "text/event-stream":
            log.debug("the stream of the upstream server got HTTP status %d", status)
            return "failed"
        deliver = self._on_message
        assert deliver is not None
        try:
            for message in self._events(response, exchange, None, parser, strict=False, last_id=last_id):
                deliver(message)
        except McpError as exc:
            if self._closed:
                return "closed"
            log.debug("the stream of the upstream server ended: %s", exc.detail or exc.cause, exc_info=exc)
            return "failed"
        return "ended"

    # ------------------------------------------------------------- plumbing

    def _headers_for(self, session: str | None, *, accept: str | None) -> dict[str, str | bytes]:
        headers = self._base_headers()
        if accept is not None:
            headers["Accept"] = accept
        if session is not None:
            headers[SESSION_HEADER] = session
        if self._version is not None:
            headers["MCP-Protocol-Version"] = self._version
        return headers

    def _http_call(
        self,
        verb: str,
        message: Message | None,
        exchange: Exchange,
        cancel: CancelToken | None,
        session: str | None,
        *,
        resume: str = "",
    ) -> WireResponse:
        if message is None:
            headers = self._headers_for(session, accept="text/event-stream")
            if resume:
                headers["Last-Event-ID"] = resume
            return self._send(verb, headers, None, exchange, cancel, method="")
        headers = self._headers_for(session, accept=ACCEPT)
        headers["Content-Type"] = "application/json"
        body = json_body(message)
        method = message.method if isinstance(message, (Request, Notification)) else ""
        return self._send(verb, headers, body, exchange, cancel, method=method)
