"""A 2025-era server of 2025-11-25 tasks, written with the official Python SDK ``mcp==1.30.0``.

It runs in ``.venv-legacy`` on stdio (``.venv-legacy/bin/python
tests/peers/py_legacy_task_server.py``) and knows nothing of 2026-07-28. It declares
``capabilities.tasks`` (the SDK's task store in memory) and two tools:

* ``work {text}`` (``execution.taskSupport: optional``): as a task it sets the status
  message ``working on <text>`` and completes with ``done: <text>``; as a plain call it
  answers ``done at once: <text>``;
* ``confirm`` (``execution.taskSupport: required``): as a task it asks the client to
  confirm (an ``elicitation/create`` of the task, which reaches the client while it
  waits in ``tasks/result``), then completes with ``confirmed: <action>``.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, TextContent, Tool, ToolExecution

server: Server[Any, Any] = Server("py-legacy-task-peer")
server.experimental.enable_tasks()

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def text_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


@server.list_tools()
async def list_tools() -> list[Tool]:
    return [
        Tool(name="work", inputSchema=SCHEMA, execution=ToolExecution(taskSupport="optional")),
        Tool(name="confirm", inputSchema={"type": "object"}, execution=ToolExecution(taskSupport="required")),
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
    ctx = server.request_context
    text = str(arguments.get("text", ""))
    if not ctx.experimental.is_task:
        return text_result(f"done at once: {text}")

    async def work(task: ServerTaskContext) -> CallToolResult:
        if name == "confirm":
            answer = await task.elicit("Go on?", CONFIRM)
            return text_result(f"confirmed: {answer.action}")
        await task.update_status(f"working on {text}")
        return text_result(f"done: {text}")

    return await ctx.experimental.run_task(work)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
