"""An MCP server of the 2025 era, written with the official Python SDK ``mcp==1.30.0``.

It runs in its own virtual environment (``make legacy-venv`` makes ``.venv-legacy``),
because ``mcp==1.30.0`` and ``mcp==2.3.0`` cannot share one. It knows ``initialize``
and nothing of 2026-07-28: it answers ``server/discover`` with -32602 and keeps going.

Usage::

    .venv-legacy/bin/python tests/peers/py_legacy_server.py           # stdio
    .venv-legacy/bin/python tests/peers/py_legacy_server.py --http    # Streamable HTTP
    .venv-legacy/bin/python tests/peers/py_legacy_server.py --sse     # HTTP+SSE (2024-11-05)

With ``--http`` it listens on 127.0.0.1 with a port the system picks, writes
``port=<n>`` as its first stdout line (the endpoint is ``/mcp``), and stops at the
end of its stdin. With ``--polling`` too, it keeps its events in memory, names a
``retry`` of 100 ms, and offers the tool ``poll {steps}``: it ends the event stream of
its own call at once (the polling of 2025-11-25, ``ctx.close_sse_stream()``), then sends
``steps`` progress notifications and its result ("polled <steps>"), which a client
gets only by resuming the stream with ``Last-Event-ID``. ``--sse`` does the same as
``--http`` with the app of ``run("sse")``, the HTTP+SSE transport of 2024-11-05: its
stream is ``/sse`` and its messages go to ``/messages/``.

What it offers:

* tools ``add {a, b}`` ("<sum>"), ``echo {text}``, ``ask_name`` (an
  ``elicitation/create`` request to the client: "Hello, <name>." or "No name:
  <action>."), ``toggle {enabled}`` (adds or removes the tool ``toggled`` and
  sends ``notifications/tools/list_changed``: "toggled: enabled/disabled"),
  ``progress {count}`` (one progress notification per step, "Step i of n"; "sent n
  progress notifications"), ``slow {seconds}`` (a progress notification, then it
  waits; a cancellation of the client counts in ``cancelled``), ``cancelled {at_least}`` (how many
  ``slow`` calls were canceled, once at least ``at_least`` were: it waits for them, at most
  ``seconds`` (5), then fails), ``log {text}`` (an info log message; "logged at <the level of
  logging/setLevel>"), ``touch {uri}`` (sends
  ``notifications/resources/updated`` when the client subscribed the URI),
  ``roots`` (a ``roots/list`` request to the client: "roots: <uris>"),
  ``image {size}`` (an image block of ``size`` bytes and the same base64 data in
  ``structuredContent``, and no text block, as ``server-filesystem``'s
  ``read_media_file`` answers), and ``crash {code}`` (the process exits at once
  with ``code``);
* the resource ``file:///legacy/notes.txt`` (text/plain, "The notes of the legacy
  peer."), which can be subscribed;
* the prompt ``greet {name}`` ("Hello, <name>.");
* icons on the server and on the tool ``echo``: one ``data:`` icon (:data:`DATA_ICON`)
  and one ``https:`` icon (:data:`REMOTE_ICON`) each.

It writes ``py-legacy-peer: started`` to stderr when it starts.
"""

from __future__ import annotations

import base64
import os
import socket
import sys
import threading

import anyio
from counts import Count
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import CallToolResult, Icon, ImageContent, JSONRPCMessage
from pydantic import AnyUrl, BaseModel

SERVER_NAME = "py-legacy-peer"
INSTRUCTIONS = "A 2025-era peer server written with the MCP Python SDK 1.30.0."
NOTES = "file:///legacy/notes.txt"

DATA_ICON = "data:image/png;base64,iVBORw0KGgo="
REMOTE_ICON = "https://icons.invalid/peer.png"
ICONS = [Icon(src=DATA_ICON, mimeType="image/png"), Icon(src=REMOTE_ICON, mimeType="image/png")]

server = FastMCP(SERVER_NAME, instructions=INSTRUCTIONS, icons=ICONS)
#: The calls of ``slow`` that were canceled.
_cancelled = Count()
_subscribed: set[str] = set()
_level = "debug"


class Name(BaseModel):
    name: str


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(icons=ICONS)
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Ask the client for a name (a form elicitation), then greet it."""
    answer = await ctx.elicit("Your name?", Name)
    if answer.action == "accept":
        return f"Hello, {answer.data.name}."
    return f"No name: {answer.action}."


def toggled() -> str:
    """A tool that comes and goes."""
    return "here"


@server.tool()
async def toggle(enabled: bool, ctx: Context) -> str:
    """Add or remove the tool ``toggled`` and tell the client that the tool list changed."""
    if enabled:
        server.add_tool(toggled)
    else:
        server.remove_tool("toggled")
    await ctx.session.send_tool_list_changed()
    return f"toggled: {'enabled' if enabled else 'disabled'}"


@server.tool()
async def progress(count: int, ctx: Context) -> str:
    """Report progress ``count`` times."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"Step {step} of {count}")
    return f"sent {count} progress notifications"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Report progress 0 (the call runs), then wait ``seconds``; a cancellation counts in ``cancelled``."""
    await ctx.report_progress(0, 1, "waiting")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _cancelled.add()
        raise
    return f"slept {seconds}"


@server.tool()
async def cancelled(at_least: int = 0, seconds: float = 5) -> str:
    """How many calls of ``slow`` were canceled, once at least ``at_least`` were (at most ``seconds``).

    A cancellation reaches the server apart from the call that asks: this waits for it, not for a time.
    """
    return str(await _cancelled.reach(at_least, seconds))


@server.tool()
async def log(text: str, ctx: Context) -> str:
    """Send an info log message (and tell the level that ``logging/setLevel`` set)."""
    await ctx.info(text)
    return f"logged at {_level}"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tell a subscribed client that the resource changed."""
    if uri in _subscribed:
        await ctx.session.send_resource_updated(AnyUrl(uri))
    return f"touched {uri}"


@server.tool()
async def roots(ctx: Context) -> str:
    """Ask the client for its roots."""
    result = await ctx.session.list_roots()
    return "roots: " + " ".join(str(root.uri) for root in result.roots)


@server.tool()
def image(size: int) -> CallToolResult:
    """An image of ``size`` bytes, as an image block and as structured content, without text."""
    data = base64.b64encode(bytes(index % 251 for index in range(size))).decode("ascii")
    return CallToolResult(
        content=[ImageContent(type="image", data=data, mimeType="image/png")],
        structuredContent={"content": [{"type": "image", "data": data, "mimeType": "image/png"}]},
    )


@server.tool()
def crash(code: int) -> str:
    """Exit the process at once with ``code``."""
    os._exit(code)


@server.resource(NOTES, mime_type="text/plain")
def notes() -> str:
    """The notes."""
    return "The notes of the legacy peer."


@server.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}."


@server._mcp_server.subscribe_resource()
async def subscribe(uri: AnyUrl) -> None:
    _subscribed.add(str(uri))


@server._mcp_server.unsubscribe_resource()
async def unsubscribe(uri: AnyUrl) -> None:
    _subscribed.discard(str(uri))


@server._mcp_server.set_logging_level()
async def set_level(level: str) -> None:
    global _level
    _level = level


class MemoryEvents(EventStore):
    """Every event of every stream, in order, for the resumption of a stream."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(len(self._events) + 1)
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for e, s, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in list(self._events):
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


def add_polling() -> None:
    server._event_store = MemoryEvents()
    server._retry_interval = 100

    @server.tool()
    async def poll(steps: int, ctx: Context) -> str:
        """End the stream of this call, then report ``steps`` steps and answer."""
        await ctx.close_sse_stream()
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"Step {step} of {steps}")
        return f"polled {steps}"


def serve_http(sse: bool = False) -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    server.settings.streamable_http_path = "/mcp"
    app = server.sse_app() if sse else server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    runner = uvicorn.Server(config)

    def stop_at_eof() -> None:
        sys.stdin.read()
        runner.should_exit = True

    threading.Thread(target=stop_at_eof, name="peer-stdin", daemon=True).start()
    sys.stdout.write(f"port={port}\n")
    sys.stdout.flush()
    runner.run(sockets=[listener])


if __name__ == "__main__":
    sys.stderr.write(f"{SERVER_NAME}: started\n")
    sys.stderr.flush()
    if "--http" in sys.argv[1:] or "--sse" in sys.argv[1:]:
        if "--polling" in sys.argv[1:]:
            add_polling()
        serve_http(sse="--sse" in sys.argv[1:])
    else:
        server.run()
