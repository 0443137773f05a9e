"""The Streamable HTTP client of the Python SDK ``mcp==1.30.0`` straight to a server; it answers elicitations.

It runs in ``.venv-legacy``: a client of revision 2025-11-25, as VS Code is. It opens the
connection with ``initialize``, calls one tool, answers each ``elicitation/create`` of the
server in the middle of the call by accepting ``{"name": <name>}``, and prints what it saw
as one JSON object on stdout; the test that runs it compares that with what a client sees
through the bridge.

Usage: ``.venv-legacy/bin/python elicit_py_client.py '<plan as JSON>'`` with the plan
``{"url": "...", "tool": "ask_name_2025", "name": "Ada"}``. The summary: ``{"ok": true,
"protocolVersion", "asked": [...messages], "text": "...", "isError": false}``, or
``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.context import RequestContext
from mcp.types import ElicitRequestParams, ElicitResult, TextContent
from py_client_main import WHOLE_RUN, main


async def run(plan: dict[str, Any], summary: dict[str, Any]) -> None:
    asked: list[str] = []
    summary["asked"] = asked

    async def elicit(_context: RequestContext[Any, Any], params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": plan["name"]})

    with anyio.fail_after(WHOLE_RUN):
        async with (
            streamablehttp_client(plan["url"]) as (read, write, _session_id),
            ClientSession(read, write, elicitation_callback=elicit) as session,
        ):
            init = await session.initialize()
            summary["protocolVersion"] = init.protocolVersion
            result = await session.call_tool(plan["tool"], {})
            summary["text"] = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
            summary["isError"] = result.isError


if __name__ == "__main__":
    sys.exit(main(run))
