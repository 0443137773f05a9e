"""An MCP 2026-07-28 server written with the official Python SDK (``mcp==2.3.0``), served on stdio.

It is a peer that nobody on this project wrote the protocol code of: the interop
tests put the bridge in front of it, and drive it with our own client.

Usage::

    python tests/peers/py_modern_stdio_server.py

What it offers:

* tools ``add {a, b}`` ("<sum>"), ``echo {text}``, ``progress {count}`` (one
  progress notification per step, "Step i of n"; "sent n progress
  notifications"), ``ask_name`` (a form elicitation through an input_required
  result; "Hello, <name>." or "Hello, nobody."), ``toggle {enabled}`` (adds or
  removes the tool ``toggled`` and publishes a tools list change: "toggled:
  enabled/disabled"), ``touch {uri}`` (publishes a resource update: "touched
  <uri>");
* the tool ``ask_name_2025`` (the same question the 2025 way: ``ctx.elicit()``, a
  request to the client in the middle of the call, which only a connection opened
  with ``initialize`` carries: "Hello, <name>." or "No name: <action>.");
* the resource ``file:///peer/notes.txt`` (text/plain, "The notes of the peer.");
* the prompt ``greet {name}`` ("Hello, <name>.").

List changes and resource updates reach clients through ``subscriptions/listen``
(2026-07-28). The process ends at the end of its stdin.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel

SERVER_NAME = "py-modern-peer"
SERVER_VERSION = "2.3.0-peer"
INSTRUCTIONS = "A peer server written with the MCP Python SDK."
NOTES_URI = "file:///peer/notes.txt"
NOTES_TEXT = "The notes of the peer."
NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Name", "minLength": 1}},
    "required": ["name"],
}

server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=SERVER_VERSION)


@server.tool(description="Add two integers")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="Send the text back")
def echo(text: str) -> str:
    return text


@server.tool(description="Send progress notifications, then a result")
async def progress(count: int, ctx: Context) -> str:
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"Step {step} of {count}")
    return f"sent {count} progress notifications"


@server.tool(description="Ask for a name in a form, then greet the person")
async def ask_name(ctx: Context) -> CallToolResult | InputRequiredResult:
    answer = (ctx.input_responses or {}).get("name")
    if answer is None:
        form = ElicitRequestFormParams(message="Your name?", requested_schema=NAME_SCHEMA)
        return InputRequiredResult(input_requests={"name": ElicitRequest(params=form)})
    name = "nobody"
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        given = answer.content.get("name")
        if isinstance(given, str):
            name = given
    return CallToolResult(content=[TextContent(text=f"Hello, {name}.")])


class Name(BaseModel):
    name: str


@server.tool(description="Ask for a name in the middle of the call (2025 era), then greet the person")
async def ask_name_2025(ctx: Context) -> str:
    answer = await ctx.elicit("Your name?", Name)
    if answer.action == "accept":
        return f"Hello, {answer.data.name}."
    return f"No name: {answer.action}."


def toggled() -> str:
    """A tool that the tool toggle adds and removes."""
    return "toggled"


@server.tool(description="Add or remove the tool toggled")
async def toggle(enabled: bool, ctx: Context) -> str:
    present = any(tool.name == "toggled" for tool in await server.list_tools())
    if enabled and not present:
        server.add_tool(toggled, description="A tool that the tool toggle adds and removes")
    elif not enabled and present:
        server.remove_tool("toggled")
    if enabled != present:
        await ctx.notify_tools_changed()
    return f"toggled: {'enabled' if enabled else 'disabled'}"


@server.tool(description="Tell the subscribers that a resource changed")
async def touch(uri: str, ctx: Context) -> str:
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@server.resource(NOTES_URI, name="notes", mime_type="text/plain")
def notes() -> str:
    return NOTES_TEXT


@server.prompt(description="Greet a person")
def greet(name: str) -> str:
    return f"Hello, {name}."


if __name__ == "__main__":
    server.run("stdio")
