"""The HTTP+SSE client of the Python SDK ``mcp==1.30.0`` (``mcp.client.sse``), straight to a server.

It runs in ``.venv-legacy``. It opens the stream of the server at the URL, lists the tools,
calls one and prints what it saw as one JSON object on stdout; the test that runs it compares
that with what a client sees through the bridge.

Usage: ``.venv-legacy/bin/python sse_py_client.py '<plan as JSON>'`` with the plan
``{"url": "...", "tool": "add", "arguments": {...}}``. The summary: ``{"ok": true,
"protocolVersion", "serverInfo", "tools": [...names], "text": "...", "isError": false}``, or
``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.types import TextContent
from py_client_main import WHOLE_RUN, main


async def run(plan: dict[str, Any], summary: dict[str, Any]) -> None:
    with anyio.fail_after(WHOLE_RUN):
        async with sse_client(plan["url"]) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            summary["protocolVersion"] = init.protocolVersion
            summary["serverInfo"] = init.serverInfo.model_dump(exclude_none=True)
            summary["tools"] = [tool.name for tool in (await session.list_tools()).tools]
            result = await session.call_tool(plan["tool"], plan["arguments"])
            summary["text"] = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
            summary["isError"] = result.isError


if __name__ == "__main__":
    sys.exit(main(run))
