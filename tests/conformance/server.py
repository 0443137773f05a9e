"""The upstream server of the conformance runs: an MCP 2026-07-28 server on stdio, made with our server core.

Usage::

    python tests/conformance/server.py

It offers every tool, resource and prompt that the server scenarios of the MCP
conformance suite call (``test_simple_text``, ``test_image_content``, ...,
``test://static-text``, ``test_simple_prompt``, ...), with the answers those
scenarios expect; they follow the suite's reference "everything" server.

In 2025-11-25 the tools ``test_sampling``, ``test_elicitation``,
``test_elicitation_sep1034_defaults`` and ``test_elicitation_sep1330_enums``
send a request to the client in the middle of the call. A 2026-07-28 server
cannot do that: these tools answer with an ``input_required`` result instead,
and the bridge turns each input request into the 2025-11-25 request the
scenario waits for.

The ``test_input_required_result_*`` tools and the other 2026-07-28 fixtures
(``test_missing_capability``, ``test_custom_header``, ``test_trigger_tool_change``,
...) serve the scenarios of revision 2026-07-28, when the suite talks to this
server without the bridge.

The process ends at the end of its stdin. Its log lines start with
``conformance-server: ``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scenario_data import (  # noqa: E402
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

from mcpbridge.mcp.jsonrpc import MISSING_CLIENT_CAPABILITY, dumps  # noqa: E402
from mcpbridge.mcp.server import (  # noqa: E402
    Context,
    InputRequired,
    RequestError,
    Server,
    ToolError,
    create_message,
    elicit_form,
    list_roots,
)

LOG_TAG = "conformance-server: "


CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}


def _string_schema(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _answer(ctx: Context, key: str) -> dict[str, Any] | None:
    answer = ctx.input_responses.get(key)
    return answer if isinstance(answer, dict) else None


def _elicitation_text(prefix: str, answer: dict[str, Any]) -> str:
    content = answer.get("content") or {}
    return f"{prefix}: action={answer.get('action')}, content={dumps(content).decode('utf-8')}"


def _field(answer: dict[str, Any] | None, name: str, default: str) -> str:
    content = (answer or {}).get("content")
    value = content.get(name) if isinstance(content, dict) else None
    return value if isinstance(value, str) else default


def _sampled_text(answer: dict[str, Any]) -> str:
    content = answer.get("content")
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            return str(block["text"])
    return "No response"


def build() -> Server:
    """Make the conformance server."""
    server = Server(SERVER_NAME, SERVER_VERSION, instructions="The upstream server of the conformance runs.")

    # ------------------------------------------------------------- content tools

    @server.tool(description="Tests simple text content response", input_schema=NO_ARGUMENTS)
    def test_simple_text(ctx: Context) -> dict[str, Any]:
        return {"content": [_text("This is a simple text response for testing.")]}

    @server.tool(description="Tests image content response", input_schema=NO_ARGUMENTS)
    def test_image_content(ctx: Context) -> dict[str, Any]:
        return {"content": [{"type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png"}]}

    @server.tool(description="Tests audio content response", input_schema=NO_ARGUMENTS)
    def test_audio_content(ctx: Context) -> dict[str, Any]:
        return {"content": [{"type": "audio", "data": TEST_AUDIO_BASE64, "mimeType": "audio/wav"}]}

    @server.tool(description="Tests embedded resource content response", input_schema=NO_ARGUMENTS)
    def test_embedded_resource(ctx: Context) -> dict[str, Any]:
        resource = {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        }
        return {"content": [{"type": "resource", "resource": resource}]}

    @server.tool(
        description="Tests response with multiple content types (text, image, resource)",
        input_schema=NO_ARGUMENTS,
    )
    def test_multiple_content_types(ctx: Context) -> dict[str, Any]:
        resource = {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
        }
        return {
            "content": [
                _text("Multiple content types test:"),
                {"type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png"},
                {"type": "resource", "resource": resource},
            ]
        }

    # ----------------------------------------------------- logging, progress, errors

    @server.tool(description="Tests tool that emits log messages during execution", input_schema=NO_ARGUMENTS)
    def test_tool_with_logging(ctx: Context) -> str:
        ctx.log("info", "Tool execution started")
        ctx.sleep(0.05)
        ctx.log("info", "Tool processing data")
        ctx.sleep(0.05)
        ctx.log("info", "Tool execution completed")
        return "Tool with logging executed successfully"

    @server.tool(description="Tests tool that reports progress notifications", input_schema=NO_ARGUMENTS)
    def test_tool_with_progress(ctx: Context) -> str:
        for step in (0, 50, 100):
            if step:
                ctx.sleep(0.05)
            ctx.progress(step, 100, f"Completed step {step} of 100")
        return "Tool with progress executed successfully"

    @server.tool(description="Tests error response handling", input_schema=NO_ARGUMENTS)
    def test_error_handling(ctx: Context) -> str:
        raise ToolError("This tool intentionally returns an error for testing")

    @server.tool(
        description="Tests SSE stream disconnection and client reconnection (SEP-1699)",
        input_schema=NO_ARGUMENTS,
    )
    def test_reconnection(ctx: Context) -> str:
        return (
            "Reconnection test completed successfully. If you received this, the client properly"
            " reconnected after stream closure."
        )

    # ---------------------------------------- requests to the client (input_required)

    @server.tool(
        description="Tests server-initiated sampling (LLM completion request)",
        input_schema={
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
            "required": ["prompt"],
        },
    )
    def test_sampling(ctx: Context, prompt: str) -> str:
        answer = _answer(ctx, "sampling")
        if answer is None:
            raise InputRequired({"sampling": create_message([prompt], max_tokens=100)})
        return f"LLM response: {_sampled_text(answer)}"

    @server.tool(
        description="Tests server-initiated elicitation (user input request)",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The message to show the user"}},
            "required": ["message"],
        },
    )
    def test_elicitation(ctx: Context, message: str) -> str:
        answer = _answer(ctx, "elicitation")
        if answer is None:
            raise InputRequired({"elicitation": elicit_form(message, ELICITATION_SCHEMA)})
        return _elicitation_text("User response", answer)

    @server.tool(description="Tests elicitation with default values per SEP-1034", input_schema=NO_ARGUMENTS)
    def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        answer = _answer(ctx, "elicitation")
        if answer is None:
            message = "Please review and update the form fields with defaults"
            raise InputRequired({"elicitation": elicit_form(message, SEP1034_SCHEMA)})
        return _elicitation_text("Elicitation completed", answer)

    @server.tool(
        description="Tests elicitation with enum schema improvements per SEP-1330", input_schema=NO_ARGUMENTS
    )
    def test_elicitation_sep1330_enums(ctx: Context) -> str:
        answer = _answer(ctx, "elicitation")
        if answer is None:
            message = "Please select options from the enum fields"
            raise InputRequired({"elicitation": elicit_form(message, SEP1330_SCHEMA)})
        return _elicitation_text("Elicitation completed", answer)

    @server.tool(
        description="Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        input_schema=JSON_SCHEMA_2020_12_INPUT_SCHEMA,
    )
    def json_schema_2020_12_tool(ctx: Context, **arguments: Any) -> str:
        return f"JSON Schema 2020-12 tool called with: {dumps(arguments).decode('utf-8')}"

    # -------------------------------------------------------- 2026-07-28 fixtures

    @server.tool(description="Test tool requiring sampling", input_schema=NO_ARGUMENTS)
    def test_missing_capability(ctx: Context) -> str:
        if not isinstance(ctx.client_capabilities.get("sampling"), dict):
            raise RequestError(
                MISSING_CLIENT_CAPABILITY,
                "Missing required client capability",
                {"requiredCapabilities": {"sampling": {}}},
            )
        return "Success"

    @server.tool(
        description="MRTR: returns InputRequiredResult with elicitation request", input_schema=NO_ARGUMENTS
    )
    def test_input_required_result_elicitation(ctx: Context) -> str:
        answer = _answer(ctx, "user_name")
        if answer is None:
            raise InputRequired({"user_name": elicit_form("What is your name?", _string_schema("name"))})
        return f"Hello, {_field(answer, 'name', 'friend')}!"

    @server.tool(
        description="MRTR: returns InputRequiredResult with sampling request", input_schema=NO_ARGUMENTS
    )
    def test_input_required_result_sampling(ctx: Context) -> str:
        answer = _answer(ctx, "sample_request")
        if answer is None:
            request = create_message(["What is the capital of France?"], max_tokens=100)
            raise InputRequired({"sample_request": request})
        return f"Sampling result: {_sampled_text(answer)}"

    @server.tool(
        description="MRTR: returns InputRequiredResult with roots/list request", input_schema=NO_ARGUMENTS
    )
    def test_input_required_result_list_roots(ctx: Context) -> str:
        answer = _answer(ctx, "roots_request")
        if answer is None:
            raise InputRequired({"roots_request": list_roots()})
        roots = answer.get("roots")
        return f"Found {len(roots) if isinstance(roots, list) else 0} root(s)"

    @server.tool(description="MRTR: returns InputRequiredResult with requestState", input_schema=NO_ARGUMENTS)
    def test_input_required_result_request_state(ctx: Context) -> str:
        answer = _answer(ctx, "confirm")
        content = (answer or {}).get("content")
        if ctx.state == {"kind": "request-state"} and isinstance(content, dict) and content.get("ok") is True:
            return "state-ok: requestState validated"
        confirm = elicit_form("Please confirm", CONFIRM_SCHEMA)
        raise InputRequired({"confirm": confirm}, state={"kind": "request-state"})

    @server.tool(
        description="MRTR: returns InputRequiredResult with multiple input requests",
        input_schema=NO_ARGUMENTS,
    )
    def test_input_required_result_multiple_inputs(ctx: Context) -> str:
        name, greeting, roots = (_answer(ctx, k) for k in ("user_name", "greeting", "client_roots"))
        if ctx.state == {"kind": "multiple-inputs"} and name and greeting and roots:
            root_list = roots.get("roots")
            count = len(root_list) if isinstance(root_list, list) else 0
            greeting_text = _sampled_text(greeting)
            return f"Name: {_field(name, 'name', 'friend')}; Greeting: {greeting_text}; Roots: {count}"
        raise InputRequired(
            {
                "user_name": elicit_form("What is your name?", _string_schema("name")),
                "greeting": create_message(["Generate a greeting"], max_tokens=50),
                "client_roots": list_roots(),
            },
            state={"kind": "multiple-inputs"},
        )

    @server.tool(description="MRTR: multi-round InputRequiredResult workflow", input_schema=NO_ARGUMENTS)
    def test_input_required_result_multi_round(ctx: Context) -> str:
        state = ctx.state if isinstance(ctx.state, dict) else {}
        if state.get("round") == 1 and _answer(ctx, "step1"):
            name = _field(_answer(ctx, "step1"), "name", "friend")
            step2 = elicit_form("Step 2: What is your favorite color?", _string_schema("color"))
            raise InputRequired({"step2": step2}, state={"round": 2, "name": name})
        if state.get("round") == 2 and _answer(ctx, "step2"):
            color = _field(_answer(ctx, "step2"), "color", "no color")
            return f"Multi-round complete for {state.get('name', 'friend')} who likes {color}"
        step1 = elicit_form("Step 1: What is your name?", _string_schema("name"))
        raise InputRequired({"step1": step1}, state={"round": 1})

    @server.tool(description="MRTR: HMAC-signed requestState integrity test", input_schema=NO_ARGUMENTS)
    def test_input_required_result_tampered_state(ctx: Context) -> str:
        # The server core refuses a requestState whose signature does not hold (-32602).
        if ctx.state == {"kind": "tamper-test"} and _answer(ctx, "confirm"):
            return "integrity-ok: state verified"
        confirm = elicit_form("Please confirm", CONFIRM_SCHEMA)
        raise InputRequired({"confirm": confirm}, state={"kind": "tamper-test"})

    @server.tool(description="MRTR: respects client capabilities in inputRequests", input_schema=NO_ARGUMENTS)
    def test_input_required_result_capabilities(ctx: Context) -> str:
        if ctx.input_responses:
            return f"capabilities-ok: received {','.join(ctx.input_responses)}"
        requests: dict[str, dict[str, Any]] = {}
        if isinstance(ctx.client_capabilities.get("elicitation"), dict):
            requests["elicit_input"] = elicit_form("Elicitation input", _string_schema("value"))
        if isinstance(ctx.client_capabilities.get("sampling"), dict):
            requests["sample_input"] = create_message(["Sample request"], max_tokens=50)
        if not requests:
            return "No supported capabilities declared"
        raise InputRequired(requests, state={"kind": "capabilities-test"})

    @server.tool(description="Diagnostic logging validator tool", input_schema=NO_ARGUMENTS)
    def test_logging_tool(ctx: Context) -> str:
        ctx.log("info", "Diagnostic trace logging activated")
        return "Logging evaluated"

    @server.tool(
        description="Diagnostic tool validating response progress streams", input_schema=NO_ARGUMENTS
    )
    def test_streaming_elicitation(ctx: Context) -> str:
        ctx.progress(50, 100)
        return "Streaming complete"

    @server.tool(
        description="Echo a region that is also sent as the HTTP header Mcp-Param-Region (SEP-2243)",
        input_schema={
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    )
    def test_custom_header(ctx: Context, region: str) -> str:
        return f"region: {region}"

    @server.tool(description="Publish a tools list change", input_schema=NO_ARGUMENTS)
    def test_trigger_tool_change(ctx: Context) -> str:
        server.notify_list_changed("tools")
        return "Mutation triggered"

    @server.tool(description="Publish a prompts list change", input_schema=NO_ARGUMENTS)
    def test_trigger_prompt_change(ctx: Context) -> str:
        server.notify_list_changed("prompts")
        return "Mutation triggered"

    # ------------------------------------------------------------------ resources

    @server.resource(
        "test://static-text",
        name="static-text",
        title="Static Text Resource",
        description="A static text resource for testing",
        mime_type="text/plain",
    )
    def static_text(ctx: Context) -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary",
        name="static-binary",
        title="Static Binary Resource",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
    )
    def static_binary(ctx: Context) -> dict[str, Any]:
        contents = {"uri": "test://static-binary", "mimeType": "image/png", "blob": TEST_IMAGE_BASE64}
        return {"contents": [contents]}

    @server.resource_template(
        "test://template/{id}/data",
        name="template",
        title="Resource Template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
    def template(ctx: Context, id: str) -> dict[str, Any]:
        text = json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})
        return {"contents": [{"uri": ctx.target, "mimeType": "application/json", "text": text}]}

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        title="Watched Resource",
        description="A resource that the subscription scenarios watch",
        mime_type="text/plain",
    )
    def watched_resource(ctx: Context) -> str:
        return "Watched resource content"

    # -------------------------------------------------------------------- prompts

    @server.prompt(title="Simple Test Prompt", description="A simple prompt without arguments")
    def test_simple_prompt(ctx: Context) -> str:
        return "This is a simple prompt for testing."

    @server.prompt(
        title="Prompt With Arguments",
        description="A prompt with required arguments",
        arguments=[
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    )
    def test_prompt_with_arguments(ctx: Context, arg1: str, arg2: str) -> str:
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt(
        title="Prompt With Embedded Resource",
        description="A prompt that includes an embedded resource",
        arguments=[{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    )
    def test_prompt_with_embedded_resource(ctx: Context, resourceUri: str) -> list[dict[str, Any]]:
        resource = {
            "uri": resourceUri,
            "mimeType": "text/plain",
            "text": "Embedded resource content for testing.",
        }
        return [
            {"role": "user", "content": {"type": "resource", "resource": resource}},
            {"role": "user", "content": _text("Please process the embedded resource above.")},
        ]

    @server.prompt(title="Prompt With Image", description="A prompt that includes image content")
    def test_prompt_with_image(ctx: Context) -> list[dict[str, Any]]:
        image = {"type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png"}
        return [
            {"role": "user", "content": image},
            {"role": "user", "content": _text("Please analyze the image above.")},
        ]

    @server.prompt(description="MRTR: prompt that requires elicitation input")
    def test_input_required_result_prompt(ctx: Context) -> str:
        answer = _answer(ctx, "user_context")
        if answer is None:
            ask = elicit_form("What context should the prompt use?", _string_schema("context"))
            raise InputRequired({"user_context": ask})
        return f"Prompt with context: {_field(answer, 'context', 'none')}"

    # ----------------------------------------------------------------- completion

    @server.completion()
    def complete(ctx: Context, ref: Any, argument: Any, context: Any) -> dict[str, Any]:
        return {"values": [], "total": 0, "hasMore": False}

    return server


def main() -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_TAG + "%(levelname)s: %(message)s"))
    root = logging.getLogger("mcpbridge")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if os.environ.get("CONFORMANCE_SERVER_DEBUG") else logging.INFO)
    if "--embedded" in sys.argv[1:]:
        # Both eras on one stdio: the bridge runs inside the server's process.
        from mcpbridge.embed import serve_stdio_auto

        serve_stdio_auto(build())
    else:
        build().serve_stdio()
    return 0


if __name__ == "__main__":
    sys.exit(main())
