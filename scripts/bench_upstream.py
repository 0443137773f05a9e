"""The upstream server of the benchmark: the project's own server, answering both revisions.

Usage::

    python scripts/bench_upstream.py            # JSON lines on stdin and stdout
    python scripts/bench_upstream.py --http     # Streamable HTTP on 127.0.0.1

It offers the tool ``echo {text}``, the tool ``big {bytes}`` (a text of that many
bytes) and the resource template ``file:///bench/blob/{bytes}`` (that many bytes,
base64 in the result).

The server is :class:`mcpbridge.mcp.server.Server`, which speaks 2026-07-28 only. The
benchmark also talks to it *directly*, as VS Code would talk to a server of revision
2025-11-25, so a thin layer in front of the server answers that revision too:
``initialize`` and ``ping`` get their answers here, ``notifications/initialized`` is
dropped, and every other request of a connection that began with ``initialize`` gets the
``_meta`` that 2026-07-28 wants (protocol version, empty client capabilities) before it
reaches the server. The results go back unchanged: a 2025-11-25 client ignores the
members it does not know. Thus a direct request costs the server the same work as one
that comes through the bridge.

With ``--http`` the process writes ``port=<n>`` as its first stdout line and serves
``POST /mcp`` until the end of its stdin. The HTTP layer is small and fast on purpose:
one thread per connection, keep-alive, ``Content-Length`` bodies; a request's answer is
one JSON body, and ``subscriptions/listen`` gets an SSE stream that lasts until the client
closes it. It is a benchmark peer, not a general server.
"""

from __future__ import annotations

import argparse
import itertools
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcpbridge.mcp import protocol  # noqa: E402
from mcpbridge.mcp.jsonrpc import (  # noqa: E402
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    Response,
    parse,
    serialize,
)
from mcpbridge.mcp.server import Context, Server  # noqa: E402
from mcpbridge.mcp.transports import OnFrameError, OnMessage, ServerTransport  # noqa: E402

NAME = "bench-upstream"
VERSION = "0.0.0"
BLOB_TEMPLATE = "file:///bench/blob/{bytes}"
MAX_BYTES = 256 * 1024 * 1024
LEGACY = "2025-11-25"
#: What a 2025-11-25 client learns at ``initialize``.
LEGACY_INIT_RESULT = {
    "protocolVersion": LEGACY,
    "capabilities": {"tools": {}, "resources": {}},
    "serverInfo": {"name": NAME, "version": VERSION},
}
#: The ``_meta`` that a request of a 2025-11-25 client gets on its way to the server.
MODERN_META = {
    protocol.META_PROTOCOL_VERSION: protocol.MODERN,
    protocol.META_CLIENT_CAPABILITIES: {},
}


def build() -> Server:
    server = Server(NAME, VERSION, instructions="The upstream server of the benchmark.")

    @server.tool(description="Send the text back")
    def echo(ctx: Context, text: str) -> str:
        return text

    @server.tool(description="Send a text of the given size in bytes")
    def big(ctx: Context, bytes: int) -> str:
        return "x" * max(0, min(bytes, MAX_BYTES))

    @server.resource_template(BLOB_TEMPLATE, name="blob", mime_type="application/octet-stream")
    def blob(ctx: Context, **variables: str) -> bytes:
        size = min(int(variables["bytes"]), MAX_BYTES)
        return (bytes(range(256)) * (size // 256 + 1))[:size]

    return server


def as_modern(request: Request) -> Request:
    """A request of a 2025-11-25 client, with the ``_meta`` of 2026-07-28."""
    params = dict(request.params or {})
    meta = params.get("_meta")
    params["_meta"] = {**meta, **MODERN_META} if isinstance(meta, dict) else dict(MODERN_META)
    return Request(request.id, request.method, params)


class DualEra(ServerTransport):
    """A transport in front of another: answers 2025-11-25 ``initialize`` and ``ping`` itself."""

    def __init__(self, inner: ServerTransport) -> None:
        self._inner = inner
        self._legacy = False

    def start(
        self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: Callable[[], None]
    ) -> None:
        def deliver(message: Message) -> None:
            if isinstance(message, Request):
                if message.method == "initialize":
                    self._legacy = True
                    self._inner.send(Response(message.id, LEGACY_INIT_RESULT))
                    return
                if message.method == "ping":
                    self._inner.send(Response(message.id, {}))
                    return
                if self._legacy:
                    message = as_modern(message)
            elif isinstance(message, Notification) and message.method == "notifications/initialized":
                return
            on_message(message)

        self._inner.start(deliver, on_frame_error, on_closed)

    def send(self, message: Message) -> None:
        self._inner.send(message)

    def close(self) -> None:
        self._inner.close()


# ---------------------------------------------------------------------------------------- HTTP


class _Waiter:
    """One POST waiting for the messages of its request."""

    def __init__(self, original_id: Any, stream: bool) -> None:
        self.original_id = original_id
        self.stream = stream
        self.cond = threading.Condition()
        self.items: list[Message] = []
        self.done = False

    def wait_done(self, timeout: float) -> list[Message]:
        with self.cond:
            self.cond.wait_for(lambda: self.done, timeout)
            return list(self.items)


class HttpServerTransport(ServerTransport):
    """The server side of the POSTs of all HTTP connections.

    Each request gets a fresh internal id (clients on different connections may use
    the same ids); the answer is routed back to its POST by that id, with the id of
    the client restored.
    """

    def __init__(self) -> None:
        self._on_message: OnMessage | None = None
        self._lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)

    def start(
        self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: Callable[[], None]
    ) -> None:
        self._on_message = on_message

    def close(self) -> None:
        pass

    def send(self, message: Message) -> None:
        if isinstance(message, (Response, ErrorResponse)):
            key = message.id
            final = True
        elif isinstance(message, Notification):
            meta = (message.params or {}).get("_meta")
            key = meta.get(protocol.META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
            final = False
        else:
            return
        with self._lock:
            waiter = self._waiters.get(key) if isinstance(key, int) else None
        if waiter is None:
            return
        if isinstance(message, Response):
            message = Response(waiter.original_id, message.result)
        elif isinstance(message, ErrorResponse):
            message = ErrorResponse(waiter.original_id, message.error)
        else:
            params = dict(message.params or {})
            params["_meta"] = {**params["_meta"], protocol.META_SUBSCRIPTION_ID: waiter.original_id}
            message = Notification(message.method, params)
        with waiter.cond:
            waiter.items.append(message)
            waiter.done = waiter.done or final
            waiter.cond.notify_all()

    def submit(self, request: Request, *, stream: bool) -> tuple[int, _Waiter]:
        assert self._on_message is not None
        internal = next(self._ids)
        waiter = _Waiter(request.id, stream)
        with self._lock:
            self._waiters[internal] = waiter
        self._on_message(Request(internal, request.method, request.params))
        return internal, waiter

    def forget(self, internal: int) -> None:
        with self._lock:
            self._waiters.pop(internal, None)

    def cancel(self, internal: int) -> None:
        assert self._on_message is not None
        self._on_message(Notification("notifications/cancelled", {"requestId": internal}))


def _read_request(sock: socket.socket, buffer: bytearray) -> tuple[str, dict[str, str], bytes] | None:
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    end = buffer.index(b"\r\n\r\n")
    head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    method = head[0].split(" ", 1)[0]
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or "0")
    while len(buffer) < length:
        chunk = sock.recv(max(65536, length - len(buffer)))
        if not chunk:
            return None
        buffer += chunk
    body = bytes(buffer[:length])
    del buffer[:length]
    return method, headers, body


def _answer(
    sock: socket.socket, status: str, body: bytes = b"", content_type: str = "application/json"
) -> None:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n"
    if body:
        head += f"Content-Type: {content_type}\r\n"
    sock.sendall(head.encode("ascii") + b"\r\n" + body)


def _serve_connection(sock: socket.socket, transport: HttpServerTransport, legacy: list[bool]) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = bytearray()
    try:
        while True:
            got = _read_request(sock, buffer)
            if got is None:
                return
            method, headers, body = got
            if method != "POST":
                _answer(sock, "405 Method Not Allowed")
                continue
            try:
                message = parse(body, max_depth=200)
            except FrameError:
                _answer(
                    sock,
                    "400 Bad Request",
                    serialize({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}),
                )
                continue
            if not isinstance(message, Request):
                _answer(sock, "202 Accepted")
                continue
            if message.method == "initialize":
                _answer(sock, "200 OK", serialize(Response(message.id, LEGACY_INIT_RESULT)))
                continue
            if message.method == "ping":
                _answer(sock, "200 OK", serialize(Response(message.id, {})))
                continue
            params = message.params or {}
            meta = params.get("_meta")
            if not (isinstance(meta, dict) and protocol.META_PROTOCOL_VERSION in meta):
                message = as_modern(message)
            if message.method == "subscriptions/listen":
                _stream(sock, transport, message)
                return
            internal, waiter = transport.submit(message, stream=False)
            try:
                items = waiter.wait_done(3600.0)
            finally:
                transport.forget(internal)
            if items:
                _answer(sock, "200 OK", serialize(items[-1]))
            else:
                _answer(sock, "500 Internal Server Error")
    except OSError:
        return
    finally:
        sock.close()


def _stream(sock: socket.socket, transport: HttpServerTransport, request: Request) -> None:
    """A listen stream: SSE events until the client closes the connection."""
    internal, waiter = transport.submit(request, stream=True)
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n")
    closed = threading.Event()

    def watch() -> None:
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
        closed.set()
        with waiter.cond:
            waiter.cond.notify_all()

    threading.Thread(target=watch, name="bench-upstream-watch", daemon=True).start()
    sent = 0
    try:
        while True:
            with waiter.cond:
                waiter.cond.wait_for(lambda: len(waiter.items) > sent or closed.is_set(), 3600.0)  # noqa: B023
                items = waiter.items[sent:]
            for item in items:
                sock.sendall(b"event: message\ndata: " + serialize(item)[:-1] + b"\n\n")
            sent += len(items)
            if closed.is_set() or waiter.done:
                break
    except OSError:
        pass
    finally:
        if not waiter.done:
            transport.cancel(internal)
        transport.forget(internal)
        sock.close()


def serve_http(server: Server) -> None:
    transport = HttpServerTransport()
    server.start(transport)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    legacy = [False]

    def accept() -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            threading.Thread(
                target=_serve_connection,
                args=(sock, transport, legacy),
                name="bench-upstream-conn",
                daemon=True,
            ).start()

    threading.Thread(target=accept, name="bench-upstream-accept", daemon=True).start()
    sys.stdout.write(f"port={listener.getsockname()[1]}\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the end of stdin
    listener.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP on 127.0.0.1")
    options = parser.parse_args(argv)
    server = build()
    if options.http:
        serve_http(server)
        return 0
    from mcpbridge.mcp.transports.stdio import StdioServerTransport

    server.serve(DualEra(StdioServerTransport(sys.stdin.buffer, sys.stdout.buffer)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
