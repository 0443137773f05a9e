"""The benchmark's client: a minimal raw driver of MCP 2025-11-25 on threads.

It is what VS Code is to the bridge, without an SDK on the hot path:

* :class:`LinePeer` starts a process and speaks JSON lines on its stdin and stdout.
  One reader thread reads the lines; the id of a response is found with a regular
  expression in its first bytes (a large line is never parsed as a whole, so the
  driver's own cost does not grow with the payload), and the caller that waits for it
  is woken. The time of a response is taken on the reader thread, when its line is
  complete.
* :class:`HttpPeer` speaks Streamable HTTP to a URL directly, one keep-alive
  connection per thread (the *direct* target of the URL form).

Both give :meth:`call`, which sends one request and returns ``(line, seconds)``.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

LEGACY = "2025-11-25"
WAIT = 120.0
CLIENT_INFO = {"name": "mcpbridge-bench", "version": "0.0.0"}
INITIALIZE_PARAMS = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}

_HEAD_ID = re.compile(rb'^\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+)')
_TAIL_ID = re.compile(rb'"id"\s*:\s*(-?\d+)\s*\}\s*$')
_SMALL = 4096


class PeerError(Exception):
    """The peer did not answer as expected."""


def _line_id(line: bytes) -> int | None:
    """The integer id of a response line, or ``None`` for a notification or a request."""
    if len(line) > _SMALL:
        match = _HEAD_ID.match(line, 0, 256) or _TAIL_ID.search(line, len(line) - 256)
        if match is not None:
            return int(match.group(1))
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if isinstance(obj, dict) and "method" not in obj and isinstance(obj.get("id"), int):
        return int(obj["id"])
    return None


def _check(method: str, line: bytes) -> None:
    """Raise :class:`PeerError` for an error response (a large line is looked at only near its ends)."""
    if len(line) > _SMALL and b'"error":{' not in line[:128] and b'"error":{' not in line[-1024:]:
        return
    obj = json.loads(line)
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        error = obj["error"]
        raise PeerError(f"{method}: error {error.get('code')}: {str(error.get('message'))[:200]}")


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


class _Slot:
    __slots__ = ("event", "line", "at")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.line = b""
        self.at = 0.0


class LinePeer:
    """A process that speaks JSON lines on stdio; see the module docstring."""

    def __init__(
        self, argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            bufsize=0,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin_fd = self.proc.stdin.fileno()
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Slot] = {}
        self._ids = itertools.count(1)
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read, name="bench-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        reader = os.fdopen(os.dup(stdout.fileno()), "rb", buffering=1 << 20)
        try:
            for line in reader:
                at = time.perf_counter()
                request_id = _line_id(line)
                if request_id is None:
                    continue
                with self._lock:
                    slot = self._pending.pop(request_id, None)
                if slot is not None:
                    slot.line = line
                    slot.at = at
                    slot.event.set()
        except (OSError, ValueError):
            pass
        finally:
            reader.close()
            self.closed.set()
            with self._lock:
                slots = list(self._pending.values())
                self._pending.clear()
            for slot in slots:
                slot.event.set()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        with self._write_lock:
            while view:
                written = os.write(self._stdin_fd, view)
                view = view[written:]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        self._write(dumps(frame) + b"\n")

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float = WAIT, check: bool = True
    ) -> tuple[bytes, float]:
        """Send one request; return its response line and the seconds from the write to the line.

        With ``check`` an error response raises :class:`PeerError`.
        """
        request_id = next(self._ids)
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        data = dumps(frame) + b"\n"
        slot = _Slot()
        with self._lock:
            self._pending[request_id] = slot
        started = time.perf_counter()
        try:
            self._write(data)
        except OSError as exc:
            raise PeerError(f"{method}: the peer does not read its input ({exc})") from None
        if not slot.event.wait(timeout):
            with self._lock:
                self._pending.pop(request_id, None)
            raise PeerError(f"{method}: no response in {timeout:g} s")
        if not slot.line:
            raise PeerError(f"{method}: the peer closed its output")
        if check:
            _check(method, slot.line)
        return slot.line, slot.at - started

    def initialize(self, timeout: float = WAIT) -> float:
        """``initialize``, then ``notifications/initialized``; return the seconds since the spawn."""
        self.call("initialize", INITIALIZE_PARAMS, timeout=timeout)
        at = time.perf_counter()
        self.notify("notifications/initialized")
        return at - self.started

    def close(self, timeout: float = 10.0) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, 9)
            except OSError:
                pass
            self.proc.wait(timeout)
        self._reader.join(timeout)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


class HttpPeer:
    """A Streamable HTTP server spoken to directly, in revision 2025-11-25."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._path = parts.path or "/"
        self._local = threading.local()
        self._ids = itertools.count(1)
        self._session: str | None = None
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.pid: int | None = None
        self.started = time.perf_counter()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=WAIT)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LEGACY,
        }
        if self._session is not None:
            headers["Mcp-Session-Id"] = self._session
        return headers

    def _post(self, body: bytes) -> http.client.HTTPResponse:
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request("POST", self._path, body=body, headers=self._headers())
                return conn.getresponse()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        response = self._post(dumps(frame))
        response.read()

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float = WAIT, check: bool = True
    ) -> tuple[bytes, float]:
        request_id = next(self._ids)
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        body = dumps(frame)
        started = time.perf_counter()
        response = self._post(body)
        if method == "initialize":
            self._session = response.getheader("Mcp-Session-Id")
        media = (response.getheader("Content-Type") or "").split(";")[0].strip()
        if media == "text/event-stream":
            line = self._read_events(response, request_id)
        else:
            line = response.read()
        at = time.perf_counter()
        if response.status >= 400:
            raise PeerError(f"{method}: HTTP status {response.status}: {line[:200]!r}")
        if check:
            _check(method, line)
        return line, at - started

    @staticmethod
    def _read_events(response: http.client.HTTPResponse, request_id: int) -> bytes:
        data: list[bytes] = []
        while True:
            raw = response.readline()
            if not raw:
                raise PeerError("the event stream ended before the response")
            text = raw.rstrip(b"\r\n")
            if text.startswith(b"data:"):
                data.append(text[5:].lstrip(b" ") if not data else text[5:])
            elif not text and data:
                payload = b"\n".join(data)
                data = []
                if _line_id(payload) == request_id:
                    response.read()  # the end of the stream, so the connection is reused
                    return payload

    def initialize(self, timeout: float = WAIT) -> float:
        started = time.perf_counter()
        self.call("initialize", INITIALIZE_PARAMS, timeout=timeout)
        self.notify("notifications/initialized")
        return time.perf_counter() - started

    def close(self, timeout: float = 10.0) -> None:
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()
