"""The official Python SDK (``mcp==2.3.0``) against our code, and our client against the SDK's server.

* The SDK's client in legacy (2025-11-25) mode drives the real bridge over stdio,
  in front of our fixture server: it sees what VS Code sees.
* The SDK's client in 2026-07-28 mode drives our server core (the fixture server
  over stdio) without the bridge.
* Our client (:mod:`mcpbridge.mcp.client`) drives a server written with the SDK
  (``tests/peers/py_modern_stdio_server.py``) over stdio.

Each exercise covers discovery, a tool call, an input round and a stream of
change notifications. The SDK is asynchronous (anyio); the tests run it with
``anyio.run`` inside each test, with a time limit on each wait.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning

from conftest import REPO_ROOT, WAIT

pytestmark = [pytest.mark.interop, pytest.mark.slow]

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "fixture_server.py"
PEER = REPO_ROOT / "tests" / "peers" / "py_modern_stdio_server.py"
FIXTURE_NOTES = "file:///fixture/notes.txt"
PEER_NOTES = "file:///peer/notes.txt"
#: The time limit of one whole exercise with the SDK.
EXERCISE_LIMIT = 6 * WAIT


def stdio_parameters(*args: str) -> StdioServerParameters:
    # The SDK passes only a few variables to the child by default; the child needs ours.
    return StdioServerParameters(command=sys.executable, args=list(args), env=dict(os.environ), cwd=REPO_ROOT)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def answer_form(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Fill a form as a person would: the first choice, "Ada", 36, yes."""
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    content: dict[str, Any] = {}
    for name, schema in params.requested_schema.get("properties", {}).items():
        if "enum" in schema:
            content[name] = schema["enum"][0]
        elif schema.get("type") == "string":
            content[name] = "Ada"
        elif schema.get("type") in ("integer", "number"):
            content[name] = 36
        elif schema.get("type") == "boolean":
            content[name] = True
    return types.ElicitResult(action="accept", content=content)


async def answer_sampling(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="hello"),
        model="interop-model",
        stop_reason="endTurn",
    )


async def answer_roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri=REPO_ROOT.as_uri(), name="workspace")])  # type: ignore[arg-type]


# --------------------------------------------------- the SDK's legacy client -> bridge


def test_the_python_sdk_legacy_client_uses_tools_forms_and_list_changes_through_the_bridge() -> None:
    seen: dict[str, Any] = {}

    async def exercise() -> None:
        tools_changed = anyio.Event()
        updated: list[str] = []
        resource_updated = anyio.Event()

        async def on_message(message: Any) -> None:
            method = getattr(message, "method", None)
            if method == "notifications/tools/list_changed":
                tools_changed.set()
            elif method == "notifications/resources/updated":
                updated.append(str(message.params.uri))
                resource_updated.set()

        parameters = stdio_parameters("-m", "mcpbridge", "--", sys.executable, str(FIXTURE))
        with anyio.fail_after(EXERCISE_LIMIT):
            async with Client(
                parameters,
                mode="legacy",
                elicitation_callback=answer_form,
                sampling_callback=answer_sampling,
                list_roots_callback=answer_roots,
                message_handler=on_message,
                client_info=types.Implementation(name="python-sdk-interop", version="2.3.0"),
            ) as client:
                seen["version"] = client.protocol_version
                seen["server"] = client.server_info.name if client.server_info else None
                seen["capabilities"] = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                seen["add"] = text_of(await client.call_tool("add", {"a": 2, "b": 3}))
                seen["ask_form"] = text_of(await client.call_tool("ask_form", {}))
                seen["sample"] = text_of(await client.call_tool("sample", {}))
                seen["list_roots"] = text_of(await client.call_tool("list_roots", {}))
                seen["toggle"] = text_of(await client.call_tool("toggle", {"enabled": False}))
                with anyio.fail_after(WAIT):
                    await tools_changed.wait()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.subscribe_resource(FIXTURE_NOTES)
                await client.call_tool("touch", {"uri": FIXTURE_NOTES})
                with anyio.fail_after(WAIT):
                    await resource_updated.wait()
                seen["updated"] = updated

    anyio.run(exercise)
    assert seen["version"] == "2025-11-25"
    assert seen["server"] == "bridge-fixture-server"
    assert seen["capabilities"]["tools"] == {"listChanged": True}
    assert {"add", "ask_form", "toggle", "toggled"} <= set(seen["tools"])
    assert seen["add"] == "5"
    prefix = "form: accept "
    assert seen["ask_form"].startswith(prefix)
    assert json.loads(seen["ask_form"][len(prefix) :]) == {
        "name": "Ada",
        "age": 36,
        "subscribe": True,
        "color": "red",
    }
    assert seen["sample"] == "model: hello"
    assert seen["list_roots"] == "roots: " + REPO_ROOT.as_uri()
    assert seen["toggle"] == "tool toggled: disabled"
    assert seen["updated"] == [FIXTURE_NOTES]


def test_the_python_sdk_client_in_auto_mode_falls_back_to_2025_11_25_on_the_bridge() -> None:
    seen: dict[str, Any] = {}

    async def exercise() -> None:
        parameters = stdio_parameters("-m", "mcpbridge", "--", sys.executable, str(FIXTURE))
        with anyio.fail_after(EXERCISE_LIMIT):
            # "auto" probes server/discover first; the bridge must refuse it so that the client initializes.
            async with Client(parameters, mode="auto", elicitation_callback=answer_form) as client:
                seen["version"] = client.protocol_version
                seen["echo"] = text_of(await client.call_tool("echo", {"text": "hi"}))

    anyio.run(exercise)
    assert seen == {"version": "2025-11-25", "echo": "hi"}


# ------------------------------------------- the SDK's 2026 client -> our server core


def test_the_python_sdk_2026_client_discovers_calls_answers_an_input_round_and_listens_to_our_server() -> (
    None
):
    seen: dict[str, Any] = {}

    async def exercise() -> None:
        with anyio.fail_after(EXERCISE_LIMIT):
            async with Client(
                stdio_parameters(str(FIXTURE)),
                mode="auto",
                elicitation_callback=answer_form,
                sampling_callback=answer_sampling,
                client_info=types.Implementation(name="python-sdk-interop", version="2.3.0"),
            ) as client:
                seen["version"] = client.protocol_version
                seen["server"] = client.server_info.name if client.server_info else None
                seen["instructions"] = client.instructions
                seen["capabilities"] = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                seen["add"] = text_of(await client.call_tool("add", {"a": 2, "b": 3}))
                seen["ask_form"] = text_of(await client.call_tool("ask_form", {}))
                seen["sample"] = text_of(await client.call_tool("sample", {}))
                prompt = await client.get_prompt("ask_name", {})
                seen["ask_name"] = [
                    m.content.text for m in prompt.messages if isinstance(m.content, types.TextContent)
                ]
                async with client.listen(
                    tools_list_changed=True, resource_subscriptions=[FIXTURE_NOTES]
                ) as stream:
                    seen["honored"] = stream.honored.model_dump(by_alias=True, exclude_none=True)
                    await client.call_tool("toggle", {"enabled": False})
                    await client.call_tool("touch", {"uri": FIXTURE_NOTES})
                    events: list[Any] = []
                    with anyio.fail_after(WAIT):
                        async for event in stream:
                            events.append(event)
                            if len(events) == 2:
                                break
                    seen["events"] = events

    anyio.run(exercise)
    assert seen["version"] == "2026-07-28"
    assert seen["server"] == "bridge-fixture-server"
    assert seen["instructions"] == "The upstream server of the mcpbridge tests."
    assert seen["capabilities"]["tools"] == {"listChanged": True}
    assert {"add", "ask_form", "toggle"} <= set(seen["tools"])
    assert seen["add"] == "5"
    assert seen["ask_form"].startswith("form: accept ")
    assert seen["sample"] == "model: hello"
    assert seen["ask_name"] == ["Hello, Ada."]
    assert seen["honored"] == {"toolsListChanged": True, "resourceSubscriptions": [FIXTURE_NOTES]}
    assert seen["events"] == [ToolsListChanged(), ResourceUpdated(uri=FIXTURE_NOTES)]


def test_the_python_sdk_2026_client_accepts_the_structured_output_progress_and_forms_of_the_demo() -> None:
    seen: dict[str, Any] = {}

    async def exercise() -> None:
        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        with anyio.fail_after(EXERCISE_LIMIT):
            async with Client(
                stdio_parameters("-m", "mcpbridge.demo"),
                mode="auto",
                elicitation_callback=answer_form,
                client_info=types.Implementation(name="python-sdk-interop", version="2.3.0"),
            ) as client:
                seen["version"] = client.protocol_version
                seen["server"] = client.server_info.name if client.server_info else None
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                # The SDK checks structuredContent against the tool's output schema.
                dice = await client.call_tool("roll_dice", {"sides": 6, "count": 3})
                seen["dice"] = dice.structured_content
                seen["ask_name"] = text_of(await client.call_tool("ask_name", {}))
                countdown = await client.call_tool("countdown", {"seconds": 1}, progress_callback=on_progress)
                seen["countdown"] = text_of(countdown)
                seen["progress"] = progress
                seen["readme"] = (await client.read_resource("demo://readme")).contents[0].mime_type

    anyio.run(exercise)
    assert seen["version"] == "2026-07-28"
    assert seen["server"] == "mcpbridge-demo"
    assert {"echo", "add", "roll_dice", "countdown", "ask_name"} <= set(seen["tools"])
    assert len(seen["dice"]["rolls"]) == 3 and seen["dice"]["total"] == sum(seen["dice"]["rolls"])
    assert seen["ask_name"] == "Hello, Ada!"
    assert seen["countdown"] == "Liftoff!"
    assert seen["progress"] == [0, 1]
    assert seen["readme"] == "text/markdown"


# ------------------------------------------------- our client -> the SDK's server


def test_our_client_discovers_calls_answers_an_input_round_and_listens_to_the_python_sdk_server() -> None:
    from mcpbridge.mcp.client import Client as OurClient
    from mcpbridge.mcp.transports.stdio import StdioChildTransport

    transport = StdioChildTransport([sys.executable, str(PEER)], max_line_bytes=1024 * 1024)
    client = OurClient(transport, client_info={"name": "mcpbridge-interop", "version": "0.1.0"})
    client.start()
    capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
    events: list[tuple[str, dict[str, Any] | None]] = []
    got_events = threading.Event()

    def on_event(notification: Any) -> None:
        events.append((notification.method, notification.params))
        if len(events) >= 2:
            got_events.set()

    try:
        discovered = client.discover(timeout=WAIT)
        assert discovered["supportedVersions"] == ["2026-07-28"]
        assert discovered["capabilities"]["tools"] == {"listChanged": True}
        assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "py-modern-peer"

        listed = client.request("tools/list", {}, timeout=WAIT)
        assert {"add", "ask_name", "toggle", "touch"} <= {tool["name"] for tool in listed["tools"]}

        added = client.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, timeout=WAIT)
        assert added["content"] == [{"type": "text", "text": "5"}]

        call = {"name": "ask_name", "arguments": {}}
        first = client.request(
            "tools/call", call, timeout=WAIT, capabilities=capabilities, allow_input_required=True
        )
        assert first["resultType"] == "input_required"
        request = first["inputRequests"]["name"]
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Your name?"
        retry = dict(call, inputResponses={"name": {"action": "accept", "content": {"name": "Ada"}}})
        if "requestState" in first:
            retry["requestState"] = first["requestState"]
        second = client.request("tools/call", retry, timeout=WAIT, capabilities=capabilities)
        assert second["content"] == [{"type": "text", "text": "Hello, Ada."}]

        subscription = client.listen(
            {"toolsListChanged": True, "resourceSubscriptions": [PEER_NOTES]}, on_event=on_event
        )
        honored = subscription.wait_acknowledged(WAIT)
        assert honored == {"toolsListChanged": True, "resourceSubscriptions": [PEER_NOTES]}
        client.request("tools/call", {"name": "toggle", "arguments": {"enabled": True}}, timeout=WAIT)
        client.request("tools/call", {"name": "touch", "arguments": {"uri": PEER_NOTES}}, timeout=WAIT)
        assert got_events.wait(WAIT), f"events so far: {events}"
        methods = sorted(method for method, _ in events)
        assert methods == ["notifications/resources/updated", "notifications/tools/list_changed"]
        updated = next(params for method, params in events if method == "notifications/resources/updated")
        assert updated is not None and updated["uri"] == PEER_NOTES
        subscription.cancel()
    finally:
        client.close()
