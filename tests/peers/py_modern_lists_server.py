"""An MCP 2026-07-28 server of the Python SDK (``mcp==2.3.0``) for the tool filters and the list cache.

Usage::

    python tests/peers/py_modern_lists_server.py [--ttl-ms N]

``--ttl-ms N`` gives the results of the four lists the ``ttlMs`` N (scope
``private``) through the SDK's cache hints; by default 0.

What it offers:

* the tools ``git_status``, ``git_push``, ``delete_repo`` and ``read_file``
  (each answers with its own name);
* ``toggle {enabled}``: adds or removes the tool ``toggled`` and publishes a
  tools list change ("toggled: enabled/disabled");
* ``requests``: the number of requests that reached the server, as JSON, keyed
  by the method (a ``tools/call`` as ``tools/call <name>``), counted by a
  middleware of the SDK before anything else runs;
* the prompt ``greet {name}``.

The process ends at the end of its stdin.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections import Counter
from typing import Any

from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer

SERVER_NAME = "py-modern-lists-peer"
SERVER_VERSION = "2.3.0-peer"
LIST_METHODS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
NAMED_TOOLS = ("git_status", "git_push", "delete_repo", "read_file")


class CountRequests(ServerMiddleware[Any]):
    """Count each request that reaches the server."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is not None:
            key = ctx.method
            name = ctx.params.get("name") if ctx.params else None
            if ctx.method == "tools/call":
                key = f"tools/call {name}"
            with self.lock:
                self.counts[key] += 1
        return await call_next(ctx)


def build(ttl_ms: int) -> MCPServer:
    counter = CountRequests()
    hints = {method: CacheHint(ttl_ms=ttl_ms, scope="private") for method in LIST_METHODS}
    server = MCPServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        cache_hints=hints,
        middleware=[counter],
    )

    for tool_name in NAMED_TOOLS:

        def named(name: str = tool_name) -> str:
            return name

        server.add_tool(named, name=tool_name, description=f"The tool {tool_name}")

    def toggled() -> str:
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

    @server.tool(description="The number of requests that reached the server")
    def requests() -> str:
        with counter.lock:
            return json.dumps(dict(counter.counts), sort_keys=True)

    @server.prompt(description="Greet a person")
    def greet(name: str) -> str:
        return f"Hello, {name}."

    return server


def main() -> None:
    parser = argparse.ArgumentParser(prog="py_modern_lists_server.py")
    parser.add_argument("--ttl-ms", type=int, default=0, metavar="N")
    options = parser.parse_args()
    build(options.ttl_ms).run("stdio")


if __name__ == "__main__":
    main()
