"""A client of MCP 2025-06-18 made with the Python SDK ``mcp==1.23.0``, in front of the bridge.

``mcp==1.23.0`` is the newest release of the Python SDK whose latest revision is 2025-06-18.
It runs in its own virtual environment (``make old-venv`` makes ``.venv-old``). It spawns the
bridge over stdio, lists the tools, calls one and prints what it saw as one JSON object on
stdout; the test that runs it makes the assertions.

Usage: ``.venv-old/bin/python old_py_client.py '<plan as JSON>'`` with the plan
``{"command": "...", "args": [...], "cwd": "...", "tool": "echo", "arguments": {...}}``.
The summary: ``{"ok": true, "latestProtocolVersion", "protocolVersion", "serverInfo",
"tools": [...names], "text": "..."}``, or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import LATEST_PROTOCOL_VERSION, TextContent

#: The whole run, in seconds.
WHOLE_RUN = 60.0


async def run(plan: dict[str, Any], summary: dict[str, Any]) -> None:
    parameters = StdioServerParameters(
        command=plan["command"], args=plan["args"], cwd=plan["cwd"], env=dict(os.environ)
    )
    with anyio.fail_after(WHOLE_RUN):
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            summary["protocolVersion"] = init.protocolVersion
            summary["serverInfo"] = init.serverInfo.model_dump(exclude_none=True)
            summary["tools"] = [tool.name for tool in (await session.list_tools()).tools]
            result = await session.call_tool(plan["tool"], plan["arguments"])
            summary["text"] = "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The errors inside the exception groups of anyio's task groups (a backport before 3.11)."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, tuple):
        for each in inner:
            yield from _leaves(each)
    else:
        yield exc


def main() -> int:
    plan = json.loads(sys.argv[1])
    summary: dict[str, Any] = {"ok": False, "latestProtocolVersion": LATEST_PROTOCOL_VERSION}
    try:
        anyio.run(run, plan, summary)
        summary["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the summary names every failure
        summary["error"] = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in _leaves(exc))
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
