"""A 2025-era upstream of the conformance runs: an MCP 2025-11-25 server on stdio, made with ``mcp==1.30.0``.

Usage (``make legacy-venv`` makes ``.venv-legacy``)::

    .venv-legacy/bin/python tests/conformance/legacy_server.py

It offers what the 2025-11-25 server scenarios of the MCP conformance suite
call, with the answers they expect, as ``tests/conformance/server.py`` does for
2026-07-28: the same tools, resources, resource template, prompts and
completion, plus logging (``logging/setLevel`` filters the log messages),
resource subscriptions and progress. The tools ``test_sampling``,
``test_elicitation``, ``test_elicitation_sep1034_defaults`` and
``test_elicitation_sep1330_enums`` send their request to the client in the
middle of the call, as a 2025-era server does.

It is written with the SDK's low-level ``Server``, so that every schema goes to
the client exactly as written here (the SEP-1330 enum forms, the JSON Schema
2020-12 keywords). It knows nothing of 2026-07-28: the SDK answers
``server/discover`` with an error, which tells the bridge to pass the 2025
protocol through.

The process ends at the end of its stdin. Its log lines (stderr) start with
``conformance-legacy-server: ``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl
from scenario_data import (
    ELICITATION_SCHEMA,
    JSON_SCHEMA_2020_12_INPUT_SCHEMA,
    NO_ARGUMENTS,
    SEP1034_SCHEMA,
    SEP1330_SCHEMA,
    SERVER_NAME,
    SERVER_VERSION,
    TEST_AUDIO_BASE64,
    TEST_IMAGE_BASE64,
)

LOG_TAG = "conformance-legacy-server: "

#: The tools: name -> (description, input schema). Their answers are in ``call_tool``.
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "test_simple_text": ("Tests simple text content response", NO_ARGUMENTS),
    "test_image_content": ("Tests image content response", NO_ARGUMENTS),
    "test_audio_content": ("Tests audio content response", NO_ARGUMENTS),
    "test_embedded_resource": ("Tests embedded resource content response", NO_ARGUMENTS),
    "test_multiple_content_types": (
        "Tests response with multiple content types (text, image, resource)",
        NO_ARGUMENTS,
    ),
    "test_tool_with_logging": ("Tests tool that emits log messages during execution", NO_ARGUMENTS),
    "test_tool_with_progress": ("Tests tool that reports progress notifications", NO_ARGUMENTS),
    "test_error_handling": ("Tests error response handling", NO_ARGUMENTS),
    "test_reconnection": ("Tests SSE stream disconnection and client reconnection (SEP-1699)", NO_ARGUMENTS),
    "test_sampling": (
        "Tests server-initiated sampling (LLM completion request)",
        {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
            "required": ["prompt"],
        },
    ),
    "test_elicitation": (
        "Tests server-initiated elicitation (user input request)",
        {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The message to show the user"}},
            "required": ["message"],
        },
    ),
    "test_elicitation_sep1034_defaults": ("Tests elicitation with default values per SEP-1034", NO_ARGUMENTS),
    "test_elicitation_sep1330_enums": (
        "Tests elicitation with enum schema improvements per SEP-1330",
        NO_ARGUMENTS,
    ),
    "json_schema_2020_12_tool": (
        "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        JSON_SCHEMA_2020_12_INPUT_SCHEMA,
    ),
}

STATIC_TEXT = "test://static-text"
STATIC_BINARY = "test://static-binary"
WATCHED = "test://watched-resource"
TEMPLATE = re.compile(r"^test://template/(?P<id>[^/]+)/data$")

#: The severity order of the log levels: a message goes out when it is at least the level set.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

server: Server[Any, Any] = Server(
    SERVER_NAME, SERVER_VERSION, instructions="A 2025-era upstream of the conformance runs."
)
#: One process serves one session (supergateway starts one per session): plain module state will do.
_log_level = "debug"
_subscribed: set[str] = set()


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _image() -> types.ImageContent:
    return types.ImageContent(type="image", data=TEST_IMAGE_BASE64, mimeType="image/png")


def _request_id() -> types.RequestId:
    return server.request_context.request_id


def _session() -> ServerSession:
    return server.request_context.session


async def _log(level: types.LoggingLevel, message: str) -> None:
    if LOG_LEVELS.index(level) >= LOG_LEVELS.index(_log_level):
        await _session().send_log_message(level, message, related_request_id=_request_id())


async def _progress(progress: float, total: float, message: str) -> None:
    meta = server.request_context.meta
    token = meta.progressToken if meta is not None else None
    if token is not None:
        await _session().send_progress_notification(
            token, progress, total, message, related_request_id=str(_request_id())
        )


async def _elicit(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    result = await _session().elicit_form(message, schema, related_request_id=_request_id())
    return result.model_dump(exclude_none=True)


def _elicitation_text(prefix: str, answer: dict[str, Any]) -> str:
    content = json.dumps(answer.get("content") or {}, separators=(",", ":"))
    return f"{prefix}: action={answer.get('action')}, content={content}"


# ------------------------------------------------------------------------ tools


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(name=name, description=description, inputSchema=schema)
        for name, (description, schema) in TOOLS.items()
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.ContentBlock] | types.CallToolResult:
    if name == "test_simple_text":
        return [_text("This is a simple text response for testing.")]
    if name == "test_image_content":
        return [_image()]
    if name == "test_audio_content":
        return [types.AudioContent(type="audio", data=TEST_AUDIO_BASE64, mimeType="audio/wav")]
    if name == "test_embedded_resource":
        resource = types.TextResourceContents(
            uri=AnyUrl("test://embedded-resource"),
            mimeType="text/plain",
            text="This is an embedded resource content.",
        )
        return [types.EmbeddedResource(type="resource", resource=resource)]
    if name == "test_multiple_content_types":
        mixed = types.TextResourceContents(
            uri=AnyUrl("test://mixed-content-resource"),
            mimeType="application/json",
            text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
        )
        return [
            _text("Multiple content types test:"),
            _image(),
            types.EmbeddedResource(type="resource", resource=mixed),
        ]
    if name == "test_tool_with_logging":
        await _log("info", "Tool execution started")
        await anyio.sleep(0.05)
        await _log("info", "Tool processing data")
        await anyio.sleep(0.05)
        await _log("info", "Tool execution completed")
        return [_text("Tool with logging executed successfully")]
    if name == "test_tool_with_progress":
        for step in (0, 50, 100):
            if step:
                await anyio.sleep(0.05)
            await _progress(step, 100, f"Completed step {step} of 100")
        return [_text("Tool with progress executed successfully")]
    if name == "test_error_handling":
        return types.CallToolResult(
            content=[_text("This tool intentionally returns an error for testing")], isError=True
        )
    if name == "test_reconnection":
        return [
            _text(
                "Reconnection test completed successfully. If you received this, the client properly"
                " reconnected after stream closure."
            )
        ]
    if name == "test_sampling":
        message = types.SamplingMessage(role="user", content=_text(str(arguments.get("prompt", ""))))
        sampled = await _session().create_message([message], max_tokens=100, related_request_id=_request_id())
        text = sampled.content.text if isinstance(sampled.content, types.TextContent) else "No response"
        return [_text(f"LLM response: {text}")]
    if name == "test_elicitation":
        answer = await _elicit(str(arguments.get("message", "")), ELICITATION_SCHEMA)
        return [_text(_elicitation_text("User response", answer))]
    if name == "test_elicitation_sep1034_defaults":
        answer = await _elicit("Please review and update the form fields with defaults", SEP1034_SCHEMA)
        return [_text(_elicitation_text("Elicitation completed", answer))]
    if name == "test_elicitation_sep1330_enums":
        answer = await _elicit("Please select options from the enum fields", SEP1330_SCHEMA)
        return [_text(_elicitation_text("Elicitation completed", answer))]
    if name == "json_schema_2020_12_tool":
        called = json.dumps(arguments, separators=(",", ":"))
        return [_text(f"JSON Schema 2020-12 tool called with: {called}")]
    raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}"))


# -------------------------------------------------------------------- resources


@server.list_resources()
async def list_resources() -> list[types.Resource]:
    return [
        types.Resource(
            uri=AnyUrl(STATIC_TEXT),
            name="static-text",
            title="Static Text Resource",
            description="A static text resource for testing",
            mimeType="text/plain",
        ),
        types.Resource(
            uri=AnyUrl(STATIC_BINARY),
            name="static-binary",
            title="Static Binary Resource",
            description="A static binary resource (image) for testing",
            mimeType="image/png",
        ),
        types.Resource(
            uri=AnyUrl(WATCHED),
            name="watched-resource",
            title="Watched Resource",
            description="A resource that the subscription scenarios watch",
            mimeType="text/plain",
        ),
    ]


@server.list_resource_templates()
async def list_resource_templates() -> list[types.ResourceTemplate]:
    return [
        types.ResourceTemplate(
            uriTemplate="test://template/{id}/data",
            name="template",
            title="Resource Template",
            description="A resource template with parameter substitution",
            mimeType="application/json",
        )
    ]


@server.read_resource()
async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
    target = str(uri)
    if target == STATIC_TEXT:
        return [ReadResourceContents("This is the content of the static text resource.", "text/plain")]
    if target == STATIC_BINARY:
        return [ReadResourceContents(base64.b64decode(TEST_IMAGE_BASE64), "image/png")]
    if target == WATCHED:
        return [ReadResourceContents("Watched resource content", "text/plain")]
    match = TEMPLATE.match(target)
    if match is not None:
        ident = match["id"]
        text = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
        return [ReadResourceContents(text, "application/json")]
    raise McpError(types.ErrorData(code=-32002, message="Resource not found", data={"uri": target}))


@server.subscribe_resource()
async def subscribe(uri: AnyUrl) -> None:
    _subscribed.add(str(uri))


@server.unsubscribe_resource()
async def unsubscribe(uri: AnyUrl) -> None:
    _subscribed.discard(str(uri))


# ---------------------------------------------------------------------- prompts

PROMPTS: list[types.Prompt] = [
    types.Prompt(
        name="test_simple_prompt", title="Simple Test Prompt", description="A simple prompt without arguments"
    ),
    types.Prompt(
        name="test_prompt_with_arguments",
        title="Prompt With Arguments",
        description="A prompt with required arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        title="Prompt With Embedded Resource",
        description="A prompt that includes an embedded resource",
        arguments=[
            types.PromptArgument(
                name="resourceUri", description="URI of the resource to embed", required=True
            )
        ],
    ),
    types.Prompt(
        name="test_prompt_with_image",
        title="Prompt With Image",
        description="A prompt that includes image content",
    ),
]


@server.list_prompts()
async def list_prompts() -> list[types.Prompt]:
    return PROMPTS


def _user(content: types.ContentBlock) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


@server.get_prompt()
async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
    args = arguments or {}
    if name == "test_simple_prompt":
        messages = [_user(_text("This is a simple prompt for testing."))]
    elif name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"
        messages = [_user(_text(text))]
    elif name == "test_prompt_with_embedded_resource":
        resource = types.TextResourceContents(
            uri=AnyUrl(args.get("resourceUri", "test://example-resource")),
            mimeType="text/plain",
            text="Embedded resource content for testing.",
        )
        messages = [
            _user(types.EmbeddedResource(type="resource", resource=resource)),
            _user(_text("Please process the embedded resource above.")),
        ]
    elif name == "test_prompt_with_image":
        messages = [_user(_image()), _user(_text("Please analyze the image above."))]
    else:
        raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}"))
    description = next((p.description for p in PROMPTS if p.name == name), None)
    return types.GetPromptResult(description=description, messages=messages)


# ------------------------------------------------------------ completion, logging


@server.completion()
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion:
    return types.Completion(values=[], total=0, hasMore=False)


@server.set_logging_level()
async def set_logging_level(level: types.LoggingLevel) -> None:
    global _log_level
    _log_level = level


# ------------------------------------------------------------------------- main


async def serve() -> None:
    options = server.create_initialization_options(NotificationOptions())
    # The SDK declares resources without subscriptions; this server handles them.
    assert options.capabilities.resources is not None
    options.capabilities.resources.subscribe = True
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main() -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_TAG + "%(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    # The SDK logs a warning with a long trace for every server/discover probe: only errors by default.
    root.setLevel(logging.DEBUG if os.environ.get("CONFORMANCE_SERVER_DEBUG") else logging.ERROR)
    anyio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
