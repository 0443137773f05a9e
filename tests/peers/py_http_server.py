"""A 2026-07-28 server written with the official Python SDK (``mcp==2.3.0``), on Streamable HTTP.

Run it as ``python tests/peers/py_http_server.py``. It listens on 127.0.0.1 with a port
the system picks and writes ``port=<n>`` as its first stdout line; the MCP endpoint is
``/mcp``. It stops at the end of its stdin, so a test that dies cannot leave it behind.

Tools:

* ``echo(text)``: answers at once, as one JSON body.
* ``steps(count)``: a progress notification and a log message per step, then the
  result: the answer is an SSE stream.
* ``wait_for_cancel()``: blocks until the client closes the stream; ``cancelled(at_least)``
  tells how many such calls the server saw canceled, and ``waiting(at_least)`` how many
  started, each once the count is at least ``at_least`` (it waits for that, at most
  ``seconds``, 5, then fails).
* ``located(region, count, flag)``: ``region``, ``count`` and ``flag`` carry
  ``x-mcp-header`` markings, so the server checks the ``Mcp-Param-*`` headers.
* ``ask_name()``: asks for a name with an input request (``input_required``), and
  greets it on the retry.
* ``ask_name_2025()``: asks for the name the 2025 way (``ctx.elicit()``, a request to the
  client in the middle of the call, which only a connection opened with ``initialize``
  carries): "Hello, <name>." or "No name: <action>.".
* ``change_tools()``: publishes a tool list change to the listen streams.
* ``big(size)``: a text of ``size`` characters.
"""

from __future__ import annotations

import socket
import sys
import threading
from typing import Annotated, Any

import anyio
import uvicorn
from counts import Count
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    Icon,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel, Field

#: One icon that a remote server may show (``data:``) and one it may not (``https:``).
ICONS = [Icon(src="https://icons.example/peer.png"), Icon(src="data:image/png;base64,iVBORw0KGgo=")]

server = MCPServer("py-http-peer", version="2.3.0", icons=ICONS)
#: The calls of wait_for_cancel that started, and those that were canceled.
_waiting = Count()
_cancelled = Count()


@server.tool(icons=ICONS)
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Report progress ``count`` times, with a log message each time."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"step {step}")
        await ctx.info(f"log {step}")
    return f"done {count}"


@server.tool()
async def wait_for_cancel(ctx: Context) -> str:
    """Block until the client goes away."""
    _waiting.add()
    await ctx.report_progress(0, 1, "waiting")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        _cancelled.add()
        raise
    return "never"


@server.tool()
async def waiting(at_least: int = 0, seconds: float = 5) -> int:
    """How many calls of wait_for_cancel started, once at least ``at_least`` did."""
    return await _waiting.reach(at_least, seconds)


@server.tool()
async def cancelled(at_least: int = 0, seconds: float = 5) -> int:
    """How many calls of wait_for_cancel were canceled, once at least ``at_least`` were."""
    return await _cancelled.reach(at_least, seconds)


@server.tool()
def located(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    count: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})] = 0,
    flag: Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Flag"})] = False,
) -> str:
    """Echo the routed arguments."""
    return f"{region}|{count}|{flag}"


@server.tool()
def ask_name(ctx: Context) -> CallToolResult | InputRequiredResult:
    """Ask for a name through an input request, then greet it."""
    answers = ctx.input_responses or {}
    answer: Any = answers.get("name")
    content = getattr(answer, "content", None) or (
        answer.get("content") if isinstance(answer, dict) else None
    )
    if content:
        return CallToolResult(content=[TextContent(type="text", text=f"hello {content['name']}")])
    request = ElicitRequest(
        params=ElicitRequestFormParams(
            message="Your name?",
            requested_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        )
    )
    return InputRequiredResult(input_requests={"name": request}, request_state="round-1")


class Name(BaseModel):
    name: str


@server.tool()
async def ask_name_2025(ctx: Context) -> str:
    """Ask for a name in the middle of the call (2025 era), then greet the person."""
    answer = await ctx.elicit("Your name?", Name)
    if answer.action == "accept":
        return f"Hello, {answer.data.name}."
    return f"No name: {answer.action}."


@server.tool()
async def change_tools(ctx: Context) -> str:
    """Publish a tool list change."""
    await ctx.notify_tools_changed()
    return "changed"


@server.tool()
def big(size: int) -> str:
    """A text of ``size`` characters."""
    return "x" * size


def main() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    app = server.streamable_http_app(streamable_http_path="/mcp")
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
    main()
