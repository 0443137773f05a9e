"""A logging HTTP proxy on loopback: it forwards each request to one MCP server and records the exchange.

:class:`RecordingProxy` listens on 127.0.0.1, forwards each ``POST``, ``GET`` and ``DELETE``
to the server's URL as it came (its headers but the hop-by-hop ones, its body), and passes
the answer back as the server writes it: an SSE stream event by event, at once, so the
client sees the server's own timing. It records each exchange as an :class:`Exchange`: the
request's message, its session id, the status and each SSE event as the server wrote it
(its id and its message), or the JSON body. A test compares what the server wrote to a
session with what the client of that session got.

Every wait is bounded: a read of the server or of the client times out after
``read_timeout`` seconds; :meth:`RecordingProxy.close` shuts the open connections to the
server down, so a stream that the server keeps open ends at once, and joins the threads.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.conftest import WAIT

#: Headers that belong to one connection, not to the exchange: the proxy does not pass them on.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host"}
)


@dataclass
class Event:
    """One SSE event as the server wrote it: its ``id`` (or ``None``) and its message (``None``: no data)."""

    id: str | None
    message: Any


@dataclass
class Exchange:
    """One request through the proxy and the server's answer."""

    verb: str
    session: str | None
    request: Any
    status: int = 0
    content_type: str = ""
    events: list[Event] = field(default_factory=list)
    body: Any = None
    #: True once the server's answer ended (or failed) and the proxy passed all of it on.
    done: bool = False

    def messages(self) -> Iterator[Any]:
        """The messages that the server wrote in this exchange: its SSE events' or its body's."""
        for event in self.events:
            if event.message is not None:
                yield event.message
        if isinstance(self.body, list):
            yield from self.body
        elif self.body is not None:
            yield self.body


class RecordingProxy:
    """Forward to ``upstream`` (an ``http://`` URL) and record; a context manager.

    ``url`` is the proxy's own URL, with the path of ``upstream``.
    """

    def __init__(self, upstream: str, *, read_timeout: float = WAIT * 6) -> None:
        parts = urlsplit(upstream)
        assert parts.scheme == "http" and parts.hostname is not None and parts.port is not None
        self._host, self._port = parts.hostname, parts.port
        self._read_timeout = read_timeout
        self._lock = threading.Lock()
        self._exchanges: list[Exchange] = []
        self._upstreams: set[http.client.HTTPConnection] = set()
        self._closed = False
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            # One exchange a connection: a streamed answer ends with the connection.
            protocol_version = "HTTP/1.0"
            timeout = read_timeout

            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                proxy._forward(self)

            def do_GET(self) -> None:  # noqa: N802
                proxy._forward(self)

            def do_DELETE(self) -> None:  # noqa: N802
                proxy._forward(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="recording-proxy"
        )
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{parts.path}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End every open exchange, stop listening and join the threads (each wait bounded)."""
        with self._lock:
            self._closed = True
            upstreams = list(self._upstreams)
        for connection in upstreams:
            if connection.sock is not None:
                try:
                    connection.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._server.shutdown()
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "the proxy's server thread did not end"
        # ThreadingHTTPServer joins the threads of its exchanges here; each ends with its upstream.
        self._server.server_close()

    @property
    def exchanges(self) -> list[Exchange]:
        """A copy of the exchanges so far, in the order of their requests."""
        with self._lock:
            return list(self._exchanges)

    def session_exchanges(self, session: str) -> list[Exchange]:
        """The exchanges of ``session`` (that of the ``initialize`` that started it included)."""
        return [exchange for exchange in self.exchanges if exchange.session == session]

    def sessions(self) -> list[str]:
        """The session ids that the server gave, in order."""
        found: list[str] = []
        for exchange in self.exchanges:
            if exchange.session is not None and exchange.session not in found:
                found.append(exchange.session)
        return found

    # ------------------------------------------------------------------ forwarding

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        threading.current_thread().name = "recording-proxy-exchange"
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
        exchange = Exchange(
            verb=handler.command,
            session=handler.headers.get("Mcp-Session-Id"),
            request=json.loads(body) if body else None,
        )
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self._read_timeout)
        with self._lock:
            if self._closed:
                handler.send_error(503)
                return
            self._exchanges.append(exchange)
            self._upstreams.add(connection)
        try:
            connection.request(handler.command, handler.path, body=body or None, headers=headers)
            response = connection.getresponse()
            exchange.status = response.status
            exchange.content_type = (response.getheader("Content-Type") or "").split(";")[0].strip()
            if exchange.session is None:
                exchange.session = response.getheader("Mcp-Session-Id")
            handler.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    handler.send_header(name, value)
            if exchange.content_type == "text/event-stream":
                handler.end_headers()
                handler.wfile.flush()
                self._pass_events(response, handler, exchange)
            else:
                data = response.read()
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
                if data and exchange.content_type == "application/json":
                    exchange.body = json.loads(data)
        except OSError:
            pass  # the server or the client ended the exchange; what came so far is recorded
        finally:
            exchange.done = True
            with self._lock:
                self._upstreams.discard(connection)
            connection.close()

    @staticmethod
    def _pass_events(
        response: http.client.HTTPResponse, handler: BaseHTTPRequestHandler, exchange: Exchange
    ) -> None:
        """Pass the SSE stream on line by line, and record each event as it ends."""
        event_id: str | None = None
        data: list[str] = []
        while True:
            line = response.readline()
            if not line:
                return
            handler.wfile.write(line)
            text = line.decode("utf-8").rstrip("\r\n")
            if text == "":
                handler.wfile.flush()
                if data or event_id is not None:
                    joined = "\n".join(data)
                    exchange.events.append(Event(event_id, json.loads(joined) if joined.strip() else None))
                event_id, data = None, []
            elif text.startswith("id:"):
                event_id = text[3:].lstrip(" ")
            elif text.startswith("data:"):
                data.append(text[5:].removeprefix(" "))
