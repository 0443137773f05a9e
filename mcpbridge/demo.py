"""A small MCP 2026-07-28 server to try mcpbridge with.

Run it on its own (it speaks JSON-RPC on stdin/stdout)::

    python -m mcpbridge.demo

or behind the bridge, the way VS Code would start it::

    mcp-bridge-vscode -- python -m mcpbridge.demo

It shows each feature of :mod:`mcpbridge.mcp.server` once:

* ``echo`` and ``add``: plain tools; the input schema comes from the type hints.
* ``roll_dice``: a tool with structured output (a dict) and an output schema.
* ``countdown``: a slow tool that reports progress and stops when canceled.
* ``ask_name``: a tool that asks the user to fill a form (a multi round-trip
  request): the first call answers "input required", the client shows the form
  and calls again with the answer.
* ``demo://readme``: a resource, and ``greet``: a prompt.

Copy this file to start your own server.
"""

from __future__ import annotations

import logging
import random
import sys
from typing import Any

from . import __version__
from .mcp.server import Context, InputRequired, Server, ToolError, elicit_form

server = Server(
    "mcpbridge-demo",
    __version__,
    title="mcpbridge demo",
    instructions="A demo server: echo text, add numbers, roll dice, count down, or greet the user by name.",
)


@server.tool(annotations={"readOnlyHint": True})
def echo(ctx: Context, text: str) -> str:
    """Send the text back."""
    return text


@server.tool(annotations={"readOnlyHint": True})
def add(ctx: Context, a: float, b: float) -> str:
    """Add two numbers."""
    total = a + b
    return str(int(total)) if total.is_integer() else str(total)


#: The output schema tells the client what ``structuredContent`` looks like.
DICE_SCHEMA = {
    "type": "object",
    "properties": {
        "rolls": {"type": "array", "items": {"type": "integer"}},
        "total": {"type": "integer"},
    },
    "required": ["rolls", "total"],
}


@server.tool(output_schema=DICE_SCHEMA)
def roll_dice(ctx: Context, sides: int = 6, count: int = 1) -> dict[str, Any]:
    """Roll `count` dice with `sides` sides each."""
    if not 2 <= sides <= 1000 or not 1 <= count <= 100:
        # The model sees this text and can try again with other numbers.
        raise ToolError("Use 2 to 1000 sides and 1 to 100 dice.")
    rolls = [random.randint(1, sides) for _ in range(count)]
    # A dict becomes structuredContent, with a text block of its JSON for older clients.
    return {"rolls": rolls, "total": sum(rolls)}


@server.tool()
def countdown(ctx: Context, seconds: int = 5) -> str:
    """Count down, one second at a time, with a progress notification for each second."""
    if not 1 <= seconds <= 60:
        raise ToolError("Count down from 1 to 60 seconds.")
    for done in range(seconds):
        # Sent only when the client asked for progress (a progressToken in _meta).
        ctx.progress(done, total=seconds, message=f"{seconds - done} s left")
        # Returns after one second, or raises Cancelled at once when the client
        # cancels the call; the server then sends no response.
        ctx.sleep(1.0)
    ctx.progress(seconds, total=seconds, message="done")
    return "Liftoff!"


NAME_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Your name", "minLength": 1}},
    "required": ["name"],
}


@server.tool()
def ask_name(ctx: Context) -> str:
    """Ask the user for their name in a form, then greet them."""
    answer = ctx.input_responses.get("name")
    if answer is None:
        # First round: ask. The client shows the form and calls the tool again with
        # the same arguments plus the answer under the same key, "name".
        raise InputRequired({"name": elicit_form("What is your name?", NAME_FORM)})
    if answer.get("action") != "accept":
        return "Hello, whoever you are."
    return f"Hello, {answer['content']['name']}!"


@server.resource("demo://readme", name="readme", title="About this server", mime_type="text/markdown")
def readme(ctx: Context) -> str:
    return (__doc__ or "").strip()


@server.prompt(description="Greet someone by name")
def greet(ctx: Context, name: str) -> str:
    return f"Please greet {name} warmly, in one sentence."


def main() -> None:
    """Serve on stdin/stdout until stdin ends. Diagnostics go to stderr."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="mcpbridge-demo: %(levelname)s: %(message)s"
    )
    server.serve_stdio()


if __name__ == "__main__":
    main()
