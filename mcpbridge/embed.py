"""The embedded bridge: one stdio connection for a client of either revision.

A server written with :mod:`mcpbridge.mcp.server` usually calls
:meth:`~mcpbridge.mcp.server.Server.serve_stdio`, which speaks MCP 2026-07-28
only. Call :func:`serve_stdio_auto` instead, and the same process also serves a
client of MCP 2025-11-25, such as VS Code: the bridge runs inside the process
and needs no second program::

    from mcpbridge.embed import serve_stdio_auto

    serve_stdio_auto(server)

Theory of operation
-------------------

The function reads the first lines of the input with the line framer of
:mod:`mcpbridge.mcp.transports.framing`, the line limit and the depth limit of the server,
and picks a *path* for the whole connection:

* A request with the method exactly ``initialize`` selects the **legacy path**.
  A :class:`~mcpbridge.bridge.front.frontend.Frontend`, as in ``mcp-bridge-vscode``,
  serves the client; its upstream server is the same ``server``, reached through
  the in-memory link (:func:`~mcpbridge.mcp.transports.memory.memory_pair`).
* A ``server/discover`` request before any other request selects no path. The
  server answers it (``discover="answer"``), or the function answers -32601
  (``discover="refuse"``); then the function reads the next line.
* Blank lines select nothing. A line over the limit is dropped with a warning.
* Every other line selects the **modern path**: the server's own stdio
  serving (:class:`~mcpbridge.mcp.transports.stdio.StdioServerTransport`). That includes a
  notification, a response, another request, and a line that is not valid
  JSON-RPC, which the server then answers with -32700 or -32600.

The line that selects the path is read again by that path: a small reader
(:class:`_Replay`) gives it first, then the rest of the input. The function
reads with ``readline`` only, so it keeps no byte of the input to itself: two
lines that arrive in one chunk both reach the path.

Both paths use the limits of the server: the line length, the depth, the
requests in flight and the shutdown grace. On both paths the reader never waits
for a free slot; a request over the limit gets an error at once, so the reader
always reads the cancellations and the end of the input.

On the legacy path the memory link obeys no time limit, so the time limits of
the front end for the upstream server (``server/discover``, the list requests,
each round of a call) are very long: the cancellation of the client and the end
of the input are what stop a request. The wait for the client's answers to an
input request keeps its limit of one hour. The server publishes a list change on
the thread that changes it, and the memory link delivers it on that thread: it
reaches the client before the result of the call that caused it.

At the end of the input the function stops in a bounded time:

* The legacy path stops as the front end does: it cancels the requests in
  flight and the listen stream, waits at most the grace for them, and closes
  the memory link; then the function waits for the server's side of the link
  to shut down (at most about twice the grace).
* The modern path ends the server's listen streams, gives the other requests at
  most the grace (a request that ends in time still writes its result), then
  cancels the rest and waits at most the grace again.

Only a handler that ignores its cancellation can make the stop take longer than
that, and then it is not waited for. The function arms no watchdog and changes no
signal handler but one: while a path serves, on the main thread, ``SIGUSR1``
(Windows: a named event) writes a thread dump to stderr (:mod:`mcpbridge.bridge.front.dump`;
the legacy path adds the state of its front end), unless the program has a handler
of its own for it; the former handler is back when the function returns.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from typing import BinaryIO, Final, Literal, cast

from . import __version__
from .bridge.front import dump
from .bridge.front.frontend import Frontend, Options, Timeouts
from .bridge.rules import errortable
from .bridge.sessions.upstream import transport_connector
from .mcp import jsonrpc
from .mcp.deadline import Deadline
from .mcp.droplog import DropLog
from .mcp.errors import Closed, InvalidRequest, RequestTimeout
from .mcp.jsonrpc import ErrorResponse, FrameError, Message, Request, RequestId, Response
from .mcp.server import Server, ServerConnection
from .mcp.text import format_duration
from .mcp.transports import OnFrameError, OnMessage, OnServerClosed, ServerTransport, Transport
from .mcp.transports.framing import LineReader, TooLong
from .mcp.transports.memory import MemoryClientTransport, memory_pair
from .mcp.transports.stdio import StdioServerTransport

__all__ = ["Discover", "IN_PROCESS_TIMEOUT", "serve_stdio_auto"]

log = logging.getLogger("mcpbridge.embed")

#: How a ``server/discover`` before the first other request is answered.
Discover = Literal["answer", "refuse"]

#: The time limit of a request of the front end to the server in the same
#: process (30 days): in effect none, but every wait stays finite.
IN_PROCESS_TIMEOUT: Final = 30 * 24 * 3600.0

#: The longest wait for the server's answer to a ``server/discover`` before a
#: path is chosen; the server answers it without waiting for anything.
DISCOVER_ANSWER_WAIT: Final = 30.0


def serve_stdio_auto(
    server: Server,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    discover: Discover = "answer",
    fallback_name: str | None = None,
) -> None:
    """Serve ``server`` on stdio to a client of MCP 2025-11-25 or 2026-07-28, until the input ends.

    The first request of the client selects the revision of the connection; see
    the module docstring. Use it in place of ``server.serve_stdio()``.

    Args:
        server: the server to serve.
        stdin, stdout: the byte streams of the connection; this process's stdin
            and stdout by default. The function closes neither.
        discover: the answer to a ``server/discover`` request that comes before
            any other request. ``"answer"`` (the default): the server answers it,
            and a 2026-07-28 client then uses the modern path. ``"refuse"``: the
            answer is the error -32601, so a client that speaks both revisions
            (the Copilot harness of VS Code) sends ``initialize`` and gets the
            legacy path, where the bridge carries out the input requests of the
            server for it.
        fallback_name: the server name that a 2025-11-25 client sees when the
            server's result carries no ``serverInfo``; the server's name by default.

    Raises:
        ValueError: ``discover`` is neither ``"answer"`` nor ``"refuse"``.
    """
    if discover not in ("answer", "refuse"):
        raise ValueError(f"discover must be 'answer' or 'refuse', not {discover!r}")
    source = stdin if stdin is not None else sys.stdin.buffer
    sink = stdout if stdout is not None else sys.stdout.buffer
    first = _FirstLines(server, source, sink, discover)
    try:
        chosen = first.read_until_chosen()
    finally:
        first.close()
    if chosen is None:
        log.debug("the input ended before a request chose a revision")
        return
    path, line = chosen
    rest = cast(BinaryIO, _Replay(line + b"\n", source))
    if path == "legacy":
        log.debug("the first request is initialize: the connection uses revision 2025-11-25")
        _serve_legacy(server, rest, sink, fallback_name)
    else:
        log.debug("the first message is not initialize: the connection uses revision 2026-07-28")
        _serve_modern(server, rest, sink)


# ------------------------------------------------------------------ the paths


def _serve_legacy(server: Server, stdin: BinaryIO, stdout: BinaryIO, fallback_name: str | None) -> None:
    """A front end over the memory link to ``server``, until the end of the input."""
    links: list[tuple[MemoryClientTransport, ServerConnection]] = []
    links_lock = threading.Lock()

    def make_transport() -> Transport:
        # The front end connects at the initialize that starts the upstream, and
        # again after a failed server/discover: each connect gets its own link.
        client_end, server_end = memory_pair()
        connection = server.start(server_end)
        with links_lock:
            links.append((client_end, connection))
        return client_end

    name = fallback_name if fallback_name is not None else str(server.info.get("name", ""))
    options = Options(
        fallback_name=name,
        version=__version__,
        max_line_bytes=server.max_line_bytes,
        max_depth=server.max_depth,
        max_in_flight=server.max_in_flight,
        shutdown_grace=server.shutdown_grace,
        # Timeouts.input, the wait for the client's answers, keeps its limit (1 h).
        timeouts=Timeouts(
            discover=IN_PROCESS_TIMEOUT,
            list=IN_PROCESS_TIMEOUT,
            read=IN_PROCESS_TIMEOUT,
            call=IN_PROCESS_TIMEOUT,
        ),
    )
    frontend = Frontend(stdin, stdout, transport_connector(make_transport), options)
    try:
        with dump.enabled(frontend.describe, take_over=False):
            frontend.run()
    finally:
        # The front end closed its client, which closes the link; close each
        # link again in case a connect raced with the end, then wait for the
        # server's side of each link to finish its shutdown.
        with links_lock:
            ended = list(links)
        for client_end, _ in ended:
            client_end.close()
        deadline = Deadline(2 * server.shutdown_grace + 1.0)
        for _, connection in ended:
            if not connection.wait_shutdown(deadline.remaining):
                log.warning("the server did not stop its requests in time after the end of the input")


def _serve_modern(server: Server, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The server's own stdio serving, until the end of the input and a bounded shutdown."""
    transport = StdioServerTransport(
        stdin, stdout, max_line_bytes=server.max_line_bytes, max_depth=server.max_depth
    )
    # serve() ends the listen streams at the end of the input, gives the other
    # requests the grace, then cancels them (ServerConnection.shutdown).
    with dump.enabled(lambda _wait: None, take_over=False):
        server.serve(transport)


# ---------------------------------------------------------- the first lines


class _FirstLines:
    """Read lines until one chooses a path; answer ``server/discover`` on the way."""

    def __init__(self, server: Server, stdin: BinaryIO, stdout: BinaryIO, discover: Discover) -> None:
        self._server = server
        self._stdin = stdin
        self._stdout = stdout
        self._discover = discover
        self._answerer: _Answerer | None = None
        self._connection: ServerConnection | None = None
        #: What the client makes it drop before it chooses a path, one line a kind every 10 s.
        self._drops = DropLog(log)

    def read_until_chosen(self) -> tuple[Literal["legacy", "modern"], bytes] | None:
        """The path and the line that chose it, or ``None`` at the end of the input."""
        server = self._server
        lines = LineReader(self._stdin, server.max_line_bytes)
        while True:
            try:
                item = lines.next()
            except (OSError, ValueError) as exc:
                log.debug("reading the input failed: %s", type(exc).__name__)
                return None
            if item is None:
                return None
            if isinstance(item, TooLong):
                self._drops(
                    logging.WARNING,
                    "dropped frames over the limit",
                    "dropped a frame longer than %d bytes",
                    server.max_line_bytes,
                )
                continue
            try:
                message = jsonrpc.parse(item, max_depth=server.max_depth)
            except FrameError:
                return "modern", item  # the server answers it with -32700 or -32600
            if isinstance(message, Request) and message.method == "initialize":
                return "legacy", item
            if isinstance(message, Request) and message.method == "server/discover":
                self._answer_discover(message)
                continue
            return "modern", item

    def _answer_discover(self, request: Request) -> None:
        if self._discover == "refuse":
            log.debug("answered server/discover with -32601: discover='refuse'")
            error = errortable.error_object("method_not_found")
            frame = {"jsonrpc": "2.0", "id": request.id, "error": error}
            _write_line(self._stdout, jsonrpc.serialize(frame))
            return
        if self._answerer is None:
            self._answerer = _Answerer(self._stdout)
            self._connection = self._server.start(self._answerer)
        try:
            self._answerer.ask(request, DISCOVER_ANSWER_WAIT)
        except RequestTimeout as exc:
            # The answer is still written when it comes; the next line is read now.
            self._drops(logging.WARNING, "late answers to server/discover", "%s", exc.detail)

    def close(self) -> None:
        """Stop the connection that answered ``server/discover``, if there is one; tell the drops."""
        if self._connection is not None:
            self._connection.close()  # idle: returns at once
        self._drops.flush()


class _Answerer(ServerTransport):
    """The server's transport before a path is chosen: it writes each frame as one line.

    :meth:`ask` gives one request to the server and waits for its answer, so the
    answer is written before the function reads the next line.
    """

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._cond = threading.Condition(threading.Lock())
        self._answered: set[RequestId] = set()
        self._closed = False
        self._on_message: OnMessage | None = None

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnServerClosed) -> None:
        # Only whole requests reach this transport (ask), so there are no frame
        # errors to report, and the function closes it itself.
        self._on_message = on_message

    def send(self, message: Message) -> None:
        try:
            data = jsonrpc.serialize(message)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest("the message cannot be written as JSON") from exc
        with self._cond:
            if self._closed:
                raise Closed("the connection is closed")
            if not _write_line(self._stdout, data):
                self._closed = True
            if isinstance(message, (Response, ErrorResponse)) and message.id is not None:
                self._answered.add(message.id)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def ask(self, request: Request, timeout: float) -> None:
        """Give ``request`` to the server and wait for its answer to be written.

        Raises:
            RequestTimeout: no answer in ``timeout`` seconds.
        """
        assert self._on_message is not None, "the connection is not started"
        with self._cond:
            self._answered.discard(request.id)
        self._on_message(request)
        with self._cond:
            if not self._cond.wait_for(lambda: request.id in self._answered or self._closed, timeout):
                raise RequestTimeout(f"server/discover: no answer in {format_duration(timeout)}")


def _write_line(stream: BinaryIO, data: bytes) -> bool:
    """Write one frame and flush it; tell whether it worked (a closed output is only logged)."""
    try:
        stream.write(data)
        stream.flush()
    except (OSError, ValueError) as exc:
        log.debug("cannot write a frame: %s", type(exc).__name__)
        return False
    return True


class _Replay(io.BufferedIOBase):
    """A reader that gives ``first`` and then the rest of ``stream``.

    It has the two methods the line reader uses, ``readline`` and ``read``. It
    does not own ``stream``: closing it leaves ``stream`` open.
    """

    def __init__(self, first: bytes, stream: BinaryIO) -> None:
        super().__init__()
        self._first = first
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1, /) -> bytes:
        if not self._first:
            return self._stream.readline(-1 if size is None else size)
        limit = len(self._first) if size is None or size < 0 else min(size, len(self._first))
        end = self._first.find(b"\n", 0, limit)
        count = limit if end < 0 else end + 1
        chunk, self._first = self._first[:count], self._first[count:]
        return chunk

    def read(self, size: int | None = -1, /) -> bytes:
        if not self._first:
            return self._stream.read(-1 if size is None else size)
        if size is None or size < 0:
            chunk, self._first = self._first, b""
            return chunk + self._stream.read()
        chunk, self._first = self._first[:size], self._first[size:]
        return chunk
