"""A scripted raw HTTP/1.1 server on loopback, for the failures a real server rarely shows.

:class:`ScriptedServer` accepts connections on 127.0.0.1 (plain or TLS), reads each
request by hand and passes it to a *handler*: a function that writes the answer byte by
byte with the helpers of :class:`Exchange`. Connections stay open for the next request
unless the handler closes them, so keep-alive reuse is real.

:func:`default_script` answers by the tool name of a ``tools/call`` (the ``Mcp-Name``
header), one behaviour per name:

=====================  ==================================================================
``ok``                 a JSON result with the text ``ok``
``sse``                an SSE stream: comments, a progress notification, then the result
``status``             the HTTP status of ``arguments.status``, with a text body
``retry_after``        429 (or ``status``) with ``Retry-After: 120`` (or ``seconds``)
``rpc_error``          500 with a JSON-RPC error body (code -32603)
``rpc_error_no_id``    400 with a JSON-RPC error body whose id is null
``bad_json``           200 ``application/json`` with a body that is not JSON
``html``               200 ``text/html``
``big_json``           a JSON result with a text of ``arguments.size`` characters
``big_event``          an SSE event with a text of ``arguments.size`` characters
``many_events``        ``arguments.count`` progress events of ``arguments.size`` characters
``stall_head``         reads the request and answers nothing until released
``stall_body``         sends the SSE head and one comment, then nothing until released
``drop``               closes the connection without an answer
``drop_stream``        sends the SSE head and a progress event, then closes
``redirect``           307 to another path
=====================  ==================================================================

Run it as a program (``python tests/peers/scripted_http.py``) to serve
:func:`default_script`; it writes ``port=<n>`` on its first stdout line and stops at the
end of its stdin.
"""

from __future__ import annotations

import itertools
import json
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.conftest import WAIT

MAX_HEAD = 64 * 1024


@dataclass
class Received:
    """One request as the server read it."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    json: Any = None

    def header(self, name: str) -> str | None:
        """The value of the first header ``name`` (any case), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def header_names(self) -> set[str]:
        return {key.lower() for key, _ in self.headers}

    @property
    def rpc_method(self) -> str | None:
        return self.json.get("method") if isinstance(self.json, dict) else None

    @property
    def rpc_id(self) -> Any:
        return self.json.get("id") if isinstance(self.json, dict) else None

    @property
    def params(self) -> dict[str, Any]:
        params = self.json.get("params") if isinstance(self.json, dict) else None
        return params if isinstance(params, dict) else {}


class Exchange:
    """One request and the tools to answer it."""

    def __init__(self, server: ScriptedServer, sock: socket.socket, request: Received) -> None:
        self.server = server
        self.sock = sock
        self.request = request
        self.keep_alive = True

    # ------------------------------------------------------------ answers

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def head(self, status: int, headers: list[tuple[str, str]], *, reason: str = "Status") -> None:
        if not self.keep_alive and not any(k.lower() == "connection" for k, _ in headers):
            # A handler that closed the exchange before its answer says so (RFC 9112, 9.6):
            # a client must not send another request on a connection that ends.
            headers = [*headers, ("Connection", "close")]
        lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def body(
        self, status: int, body: bytes, content_type: str, extra: list[tuple[str, str]] | None = None
    ) -> None:
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))] + (extra or [])
        self.head(status, headers)
        self.send(body)

    def json(self, obj: Any, status: int = 200, extra: list[tuple[str, str]] | None = None) -> None:
        self.body(status, json.dumps(obj).encode(), "application/json", extra)

    def result(self, result: dict[str, Any], status: int = 200) -> None:
        self.json({"jsonrpc": "2.0", "id": self.request.rpc_id, "result": result}, status)

    def text_result(self, text: str) -> None:
        self.result({"resultType": "complete", "content": [{"type": "text", "text": text}]})

    def error(self, code: int, message: str, status: int = 200, id: Any = ...) -> None:
        rpc_id = self.request.rpc_id if id is ... else id
        self.json({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}, status)

    def start_sse(self) -> None:
        """The head of an SSE answer; the stream ends when the connection closes."""
        self.head(200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])
        self.keep_alive = False

    def event(self, obj: Any, *, line_end: str = "\n") -> None:
        data = json.dumps(obj)
        self.send(f"event: message{line_end}data: {data}{line_end}{line_end}".encode())

    def progress(self, progress: int, message: str = "") -> None:
        token = self.request.params.get("_meta", {}).get("progressToken", 0)
        params = {"progressToken": token, "progress": progress, "message": message}
        self.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    def close(self) -> None:
        self.keep_alive = False

    def wait_released(self) -> None:
        """Block until the test releases the stall, or the server closes (bounded).

        The stall counts in :attr:`ScriptedServer.stalls` first, so that a test can wait for it.
        """
        self.server._stalled()
        self.server.release.wait(WAIT * 3)


Handler = Callable[[Exchange], None]


class ScriptedServer:
    """A loopback HTTP/1.1 server whose answers a handler writes by hand."""

    def __init__(self, handler: Handler, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.received: list[Received] = []
        self.connections = 0
        #: Connections that ended (the client closed them, or an exchange did).
        self.ended = 0
        #: Exchanges that wrote what they write before the stall and now wait for :attr:`release`.
        self.stalls = 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._request_seen = threading.Condition(self._lock)
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        self._accepter = threading.Thread(target=self._accept, name="scripted-http-accept", daemon=True)
        self._accepter.start()

    def url(self, host: str = "127.0.0.1", path: str = "/mcp") -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def wait_requests(self, count: int, timeout: float = WAIT) -> list[Received]:
        """Wait until ``count`` requests arrived; return all of them."""
        self._wait_count(lambda: len(self.received), count, "requests arrived", timeout)
        with self._lock:
            return list(self.received)

    def wait_ended(self, count: int, timeout: float = WAIT) -> None:
        """Wait until ``count`` connections ended."""
        self._wait_count(lambda: self.ended, count, "connections ended", timeout)

    def wait_stalls(self, count: int, timeout: float = WAIT) -> None:
        """Wait until ``count`` exchanges stall (``stall_head``, ``stall_body``), their request in flight."""
        self._wait_count(lambda: self.stalls, count, "exchanges stalled", timeout)

    def _wait_count(self, count: Callable[[], int], at_least: int, what: str, timeout: float) -> None:
        with self._request_seen:
            if not self._request_seen.wait_for(lambda: count() >= at_least, timeout):
                raise TimeoutError(f"{count()} {what}, not {at_least}")

    def _stalled(self) -> None:
        with self._request_seen:
            self.stalls += 1
            self._request_seen.notify_all()

    def close(self) -> None:
        self._closed = True
        self.release.set()
        _stop_listening(self._listener)
        with self._lock:
            socks = list(self._socks)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._accepter.join(WAIT)
        for thread in list(self._threads):
            thread.join(WAIT)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ serving

    def _accept(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._socks.append(sock)
            thread = threading.Thread(
                target=self._serve, args=(sock,), name="scripted-http-conn", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(WAIT * 3)
        try:
            if self.ssl_context is not None:
                try:
                    sock = self.ssl_context.wrap_socket(sock, server_side=True)
                except (ssl.SSLError, OSError):
                    return
                with self._lock:
                    self._socks.append(sock)
            buffer = b""
            while not self._closed:
                request, buffer = _read_request(sock, buffer)
                if request is None:
                    return
                with self._request_seen:
                    self.received.append(request)
                    self._request_seen.notify_all()
                exchange = Exchange(self, sock, request)
                self.handler(exchange)
                if not exchange.keep_alive:
                    return
        except OSError:
            return
        finally:
            try:
                sock.close()
            except OSError:
                pass
            with self._request_seen:
                self.ended += 1
                self._request_seen.notify_all()


def _stop_listening(listener: socket.socket) -> None:
    """Close a listener and wake its blocked ``accept`` (a close alone does not, on Linux)."""
    try:
        listener.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    listener.close()


def _read_request(sock: socket.socket, buffer: bytes) -> tuple[Received | None, bytes]:
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD:
            return None, b""
        data = sock.recv(65536)
        if not data:
            return None, b""
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
    while len(rest) < length:
        data = sock.recv(65536)
        if not data:
            return None, b""
        rest += data
    body, rest = rest[:length], rest[length:]
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    return Received(method, target, headers, body, parsed), rest


# ---------------------------------------------------------------------------------------------
# The default script
# ---------------------------------------------------------------------------------------------


@dataclass
class Script:
    """:func:`default_script` with a tool list that a test may change."""

    tools: list[dict[str, Any]] = field(
        default_factory=lambda: [{"name": "ok", "inputSchema": {"type": "object"}}]
    )

    def __call__(self, ex: Exchange) -> None:
        default_script(ex, self.tools)


def default_script(ex: Exchange, tools: list[dict[str, Any]] | None = None) -> None:
    """Answer one request by its method and, for ``tools/call``, by the tool name."""
    request = ex.request
    method = request.rpc_method
    if request.method != "POST" or method is None:
        ex.body(405, b"", "text/plain")
        return
    if "id" not in (request.json or {}):
        ex.body(202, b"", "text/plain")
        return
    if method == "server/discover":
        ex.result(
            {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1.0"}},
            }
        )
        return
    if method == "tools/list":
        listed = tools if tools is not None else [{"name": "ok", "inputSchema": {"type": "object"}}]
        ex.result({"resultType": "complete", "tools": listed, "ttlMs": 0, "cacheScope": "public"})
        return
    if method != "tools/call":
        ex.error(-32601, "Method not found", 404)
        return
    name = request.params.get("name")
    arguments = request.params.get("arguments") or {}
    behaviour = _BEHAVIOURS.get(str(name))
    if behaviour is None:
        ex.error(-32602, "Unknown tool", 400)
        return
    behaviour(ex, arguments)


def _sse(ex: Exchange, _args: dict[str, Any]) -> None:
    ex.start_sse()
    ex.send(b": keep-alive\r\n\r\n")
    ex.progress(1, "half")
    ex.send(b":\n\n")
    ex.event(
        {"jsonrpc": "2.0", "id": ex.request.rpc_id, "result": {"content": [{"type": "text", "text": "ok"}]}},
        line_end="\r\n",
    )


def _big_event(ex: Exchange, args: dict[str, Any]) -> None:
    ex.start_sse()
    ex.progress(1, "x" * int(args.get("size", 0)))
    ex.event({"jsonrpc": "2.0", "id": ex.request.rpc_id, "result": {"content": []}})


def _many_events(ex: Exchange, args: dict[str, Any]) -> None:
    ex.start_sse()
    for step in range(int(args.get("count", 1))):
        ex.progress(step + 1, "y" * int(args.get("size", 0)))
    ex.event({"jsonrpc": "2.0", "id": ex.request.rpc_id, "result": {"content": []}})


def _stall_head(ex: Exchange, _args: dict[str, Any]) -> None:
    ex.wait_released()
    ex.close()


def _stall_body(ex: Exchange, _args: dict[str, Any]) -> None:
    ex.start_sse()
    ex.send(b": waiting\n\n")
    ex.wait_released()


def _drop_stream(ex: Exchange, _args: dict[str, Any]) -> None:
    ex.start_sse()
    ex.progress(1, "then nothing")


_BEHAVIOURS: dict[str, Callable[[Exchange, dict[str, Any]], None]] = {
    "ok": lambda ex, _a: ex.text_result("ok"),
    "sse": _sse,
    "status": lambda ex, a: ex.body(int(a.get("status", 500)), b"upstream trouble\n", "text/plain"),
    "retry_after": lambda ex, a: ex.body(
        int(a.get("status", 429)), b"slow down\n", "text/plain", [("Retry-After", str(a.get("seconds", 120)))]
    ),
    "rpc_error": lambda ex, _a: ex.error(-32603, "Internal trouble", 500),
    "rpc_error_no_id": lambda ex, _a: ex.error(-32700, "Parse error", 400, id=None),
    "bad_json": lambda ex, _a: ex.body(200, b'{"jsonrpc": "2.0", "id": ', "application/json"),
    "html": lambda ex, _a: ex.body(200, b"<html></html>", "text/html"),
    "big_json": lambda ex, a: ex.text_result("z" * int(a.get("size", 0))),
    "big_event": _big_event,
    "many_events": _many_events,
    "stall_head": _stall_head,
    "stall_body": _stall_body,
    "drop": lambda ex, _a: ex.close(),
    "drop_stream": _drop_stream,
    "redirect": lambda ex, _a: ex.body(307, b"", "text/plain", [("Location", "/elsewhere")]),
}


# ---------------------------------------------------------------------------------------------
# A 2025-era endpoint
# ---------------------------------------------------------------------------------------------


@dataclass
class LegacyScript:
    """A scripted 2025-era (2025-06-18) endpoint, for the passthrough over HTTP.

    ``initialize`` opens the session ``s1``, the next one ``s2``, and so on; a notification
    or an answer gets 202, a GET 405 (no stream of the server's own). ``tools/call`` of
    ``result`` answers ``arguments.value`` as the result, as it is; of ``ok`` the text
    ``ok``. Every other request gets -32601. With ``forget_sessions``, every message of a
    session gets 404: a server that forgets each session at once.
    """

    forget_sessions: bool = False
    _sessions: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def __call__(self, ex: Exchange) -> None:
        request = ex.request
        if request.method != "POST":
            ex.body(405, b"", "text/plain")
            return
        if self.forget_sessions and request.header("Mcp-Session-Id") is not None:
            ex.body(404, b"", "text/plain")
            return
        if request.rpc_method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted-legacy", "version": "1"},
            }
            answer = {"jsonrpc": "2.0", "id": request.rpc_id, "result": result}
            ex.json(answer, extra=[("Mcp-Session-Id", f"s{next(self._sessions)}")])
            return
        if "id" not in (request.json or {}) or request.rpc_method is None:
            ex.body(202, b"", "text/plain")
            return
        name = request.params.get("name") if request.rpc_method == "tools/call" else None
        if name == "result":
            value = (request.params.get("arguments") or {}).get("value")
            ex.json({"jsonrpc": "2.0", "id": request.rpc_id, "result": value})
        elif name == "ok":
            ex.result({"content": [{"type": "text", "text": "ok"}]})
        else:
            ex.error(-32601, "Method not found")


def main() -> None:
    server = ScriptedServer(Script())
    sys.stdout.write(f"port={server.port}\n")
    sys.stdout.flush()
    sys.stdin.read()
    server.close()


if __name__ == "__main__":
    main()
