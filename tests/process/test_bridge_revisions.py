"""Clients of each revision that the bridge serves, on the real executable.

Each bridge here has a client of one revision (2025-11-25, 2025-06-18, 2025-03-26 or
2024-11-05) in front of the fixture server (2026-07-28, with its content tools): every
frame that the client gets, result, notification or request of the bridge, is checked
against the schema of that revision as it is read (``Bridge(revision=...)``), and each
test says which definitions it saw, so that no check passes for want of frames.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_bridge_legacy import legacy_script

from harness import Bridge, bridge_command, fixture_command, text_of
from peers import task_server_command
from peers.legacy import legacy_command
from schema import CLIENT_REVISIONS, LEGACY, FrameInvalid

pytestmark = pytest.mark.slow

REVISION = pytest.mark.parametrize("revision", CLIENT_REVISIONS)
OLDER = CLIENT_REVISIONS[1:]
#: What a host that is not VS Code declares: sampling, roots, and elicitation in its own terms.
CAPABILITIES: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
CLIENT_INFO = {"name": "revision-client", "version": "1.0.0"}
NOTES = "file:///fixture/notes.txt"
#: The kinds of content block of the tool content_kinds that each revision defines.
BLOCKS_OF = {
    "2025-11-25": ["text", "image", "audio", "resource_link", "resource"],
    "2025-06-18": ["text", "image", "audio", "resource_link", "resource"],
    "2025-03-26": ["text", "image", "audio", "resource"],
    "2024-11-05": ["text", "image", "resource"],
}
MODEL_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}


def open_bridge(
    revision: str,
    *options: str,
    capabilities: dict[str, Any] = CAPABILITIES,
    info: dict[str, Any] = CLIENT_INFO,
) -> Bridge:
    """A bridge with an initialized client of ``revision`` whose frames are checked."""
    command = bridge_command(*options, upstream=fixture_command("--content-tools"))
    bridge = Bridge(command, revision=revision)
    response = bridge.initialize(capabilities, client_info=info)
    assert response["result"]["protocolVersion"] == revision, response
    return bridge


def call(bridge: Bridge, name: str, **arguments: Any) -> dict[str, Any]:
    return bridge.request("tools/call", {"name": name, "arguments": arguments})


def is_request(frame: dict[str, Any]) -> bool:
    return "method" in frame and "id" in frame


def answer(bridge: Bridge, request: dict[str, Any], result: dict[str, Any]) -> None:
    bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def requests_of(bridge: Bridge) -> list[dict[str, Any]]:
    return [frame for frame in bridge.seen if is_request(frame)]


def checked(bridge: Bridge) -> set[str]:
    assert bridge.schema is not None
    return set(bridge.schema.checked)


def stderr_after_exit(bridge: Bridge) -> str:
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    return bridge.stderr_text


# --------------------------------------------------------------------------- initialize


@REVISION
def test_initialize_is_answered_with_the_revision_the_client_asked_for(revision: str) -> None:
    with open_bridge(revision) as bridge:
        assert bridge.request("ping")["result"] == {}
        assert {"InitializeResult", "Result"} <= checked(bridge)
        profile = "vscode" if revision == LEGACY else "generic"
        assert (
            f"the upstream server speaks MCP 2026-07-28; the client MCP {revision}, with the host profile "
            f"{profile}" in stderr_after_exit(bridge)
        )


@pytest.mark.parametrize(("forced", "revision"), [("generic", LEGACY), ("vscode", "2025-06-18")])
def test_the_host_profile_option_forces_a_profile_and_the_start_up_line_names_it(
    forced: str, revision: str
) -> None:
    with open_bridge(revision, "--host-profile", forced) as bridge:
        assert text_of(call(bridge, "echo", text="hi")) == "hi"
        assert (
            f"the upstream server speaks MCP 2026-07-28; the client MCP {revision}, with the host profile "
            f"{forced}\n" in stderr_after_exit(bridge)
        )


@pytest.mark.parametrize("asked", ["2026-07-28", "2024-10-07", "9999-12-31"])
def test_a_revision_the_bridge_does_not_serve_is_answered_with_2025_11_25(asked: str) -> None:
    with Bridge(bridge_command(upstream=fixture_command()), revision=LEGACY) as bridge:
        response = bridge.initialize(CAPABILITIES, protocol_version=asked, client_info=CLIENT_INFO)
        assert response["result"]["protocolVersion"] == LEGACY
        assert checked(bridge) >= {"InitializeResult"}


# --------------------------------------------------------------------------- results


@REVISION
def test_every_result_has_the_shape_of_the_client_s_revision(revision: str) -> None:
    with open_bridge(revision) as bridge:
        tools = {tool["name"] for tool in bridge.request("tools/list")["result"]["tools"]}
        assert {"echo", "content_kinds", "ask_choice"} <= tools
        assert text_of(call(bridge, "echo", text="héllo")) == "héllo"
        kinds = call(bridge, "content_kinds")["result"]["content"]
        assert [block["type"] for block in kinds] == BLOCKS_OF[revision]
        structured = call(bridge, "structured", text="abcd")["result"]
        if revision in (LEGACY, "2025-06-18"):
            assert structured["structuredContent"] == {"text": "abcd", "length": 4}
        else:  # a revision without structured content gets its JSON as text after the content
            assert "structuredContent" not in structured
            assert [block["text"] for block in structured["content"]] == [
                "4 bytes",
                '{"text":"abcd","length":4}',
            ]
        prompts = {prompt["name"] for prompt in bridge.request("prompts/list")["result"]["prompts"]}
        assert {"greet", "linked"} <= prompts
        greeting = bridge.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
        assert greeting["result"]["messages"][0]["content"]["text"] == "Hello, Ada."
        linked = bridge.request("prompts/get", {"name": "linked"})["result"]["messages"]
        assert len(linked) == (2 if "resource_link" in BLOCKS_OF[revision] else 1)
        resources = bridge.request("resources/list")["result"]["resources"]
        assert [resource["uri"] for resource in resources] == [NOTES]
        templates = bridge.request("resources/templates/list")["result"]["resourceTemplates"]
        assert templates[0]["uriTemplate"] == "file:///fixture/blob/{bytes}"
        read = bridge.request("resources/read", {"uri": NOTES})["result"]["contents"]
        assert read[0]["text"] == "The notes of the fixture."
        completion = bridge.request(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "a"}},
        )
        assert completion["result"]["completion"]["values"] == ["alpha", "beta"]
        assert bridge.request("logging/setLevel", {"level": "error"})["result"] == {}
        assert "error" in bridge.request("tools/call", {"name": "no_such_tool", "arguments": {}})
        assert checked(bridge) >= {
            "ListToolsResult",
            "CallToolResult",
            "ListPromptsResult",
            "GetPromptResult",
            "ListResourcesResult",
            "ListResourceTemplatesResult",
            "ReadResourceResult",
            "CompleteResult",
            "Result",
            "JSONRPCErrorResponse" if revision == LEGACY else "JSONRPCError",
        }
        if len(BLOCKS_OF[revision]) < 5:
            assert (
                f"tools/call: left out content blocks that MCP {revision} does not define"
                in stderr_after_exit(bridge)
            )


# --------------------------------------------------------------------------- notifications


@REVISION
def test_every_notification_has_the_shape_of_the_client_s_revision(revision: str) -> None:
    with open_bridge(revision) as bridge:
        progress = bridge.request(
            "tools/call",
            {"name": "progress", "arguments": {"count": 2}, "_meta": {"progressToken": "p"}},
        )
        assert text_of(progress) == "sent 2 progress notifications"
        bridge.request("logging/setLevel", {"level": "warning"})
        assert text_of(call(bridge, "log")) == "logged 4 messages"
        assert "result" in bridge.request("tools/list")  # a change of a list not asked for is dropped
        assert text_of(call(bridge, "toggle", enabled=False)) == "tool toggled: disabled"
        bridge.seen_or_next(lambda f: f.get("method") == "notifications/tools/list_changed")
        assert bridge.request("resources/subscribe", {"uri": NOTES})["result"] == {}
        call(bridge, "touch", uri=NOTES)
        bridge.seen_or_next(lambda f: f.get("method") == "notifications/resources/updated")
        # A client that cancels its call while the bridge waits for its answer: the bridge
        # cancels its own request too.
        sample = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        asked = bridge.wait_frame(is_request)
        bridge.notify("notifications/cancelled", {"requestId": sample, "reason": "no"})
        cancelled = bridge.wait_frame(lambda f: f.get("method") == "notifications/cancelled")
        assert cancelled["params"]["requestId"] == asked["id"]
        messages = [f["params"] for f in bridge.seen if f.get("method") == "notifications/message"]
        assert [m["level"] for m in messages] == ["warning", "error"]
        assert checked(bridge) >= {
            "ProgressNotification",
            "LoggingMessageNotification",
            "ToolListChangedNotification",
            "ResourceUpdatedNotification",
            "CancelledNotification",
            "CreateMessageRequest",
        }


def test_a_2025_11_25_client_gets_the_completion_of_a_url_elicitation() -> None:
    capabilities = {**CAPABILITIES, "elicitation": {"form": {}, "url": {}}}
    with open_bridge(LEGACY, capabilities=capabilities) as bridge:
        call_id = bridge.request_async("tools/call", {"name": "ask_url", "arguments": {}})
        request = bridge.wait_frame(is_request)
        assert request["params"]["mode"] == "url" and request["params"]["elicitationId"] == "elicitation-1"
        answer(bridge, request, {"action": "accept"})
        assert text_of(bridge.wait_response(call_id)) == "url: accept"
        assert checked(bridge) >= {"ElicitRequest", "ElicitationCompleteNotification"}


@pytest.mark.parametrize("revision", OLDER)
def test_an_older_client_is_never_asked_to_open_a_url(revision: str) -> None:
    # Even when it declares the URL mode, which its revision does not have.
    capabilities = {**CAPABILITIES, "elicitation": {"form": {}, "url": {}}}
    with open_bridge(revision, capabilities=capabilities) as bridge:
        error = call(bridge, "ask_url")["error"]
        assert error["code"] == -32021  # the upstream server was told: no URL mode
        assert requests_of(bridge) == []


# --------------------------------------------------------------------------- the bridge's requests


@REVISION
def test_sampling_and_roots_reach_a_client_of_each_revision(revision: str) -> None:
    with open_bridge(revision) as bridge:
        sample = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        request = bridge.wait_frame(is_request)
        assert request["method"] == "sampling/createMessage" and "task" not in request["params"]
        answer(bridge, request, MODEL_ANSWER)
        assert text_of(bridge.wait_response(sample)) == "model: hello"
        roots = bridge.request_async("tools/call", {"name": "list_roots", "arguments": {}})
        request = bridge.wait_frame(is_request)
        assert request["method"] == "roots/list"
        answer(bridge, request, {"roots": [{"uri": "file:///work", "name": "work"}]})
        assert text_of(bridge.wait_response(roots)) == "roots: file:///work"
        one_block = bridge.request_async(
            "tools/call", {"name": "sample_blocks", "arguments": {"blocks": "one"}}
        )
        request = bridge.wait_frame(is_request)
        assert request["params"]["messages"][0]["content"] == (
            [{"type": "text", "text": "Say hello."}]
            if revision == LEGACY
            else {"type": "text", "text": "Say hello."}
        )
        answer(bridge, request, MODEL_ANSWER)
        assert text_of(bridge.wait_response(one_block)) == "model: hello"
        assert checked(bridge) >= {"CreateMessageRequest", "ListRootsRequest"}


@pytest.mark.parametrize("revision", OLDER)
def test_a_sampling_that_an_older_client_cannot_take_gets_no_answer_and_a_log_line(revision: str) -> None:
    with open_bridge(revision) as bridge:
        assert text_of(call(bridge, "sample_blocks", blocks="two")) == "model: no answer"
        assert requests_of(bridge) == []
        assert (
            f"bridge: warning: input request 'model': a client of MCP {revision} cannot take a sampling "
            "message of several content blocks, and the upstream server gets no answer for it"
            in stderr_after_exit(bridge)
        )


def test_audio_goes_to_the_model_of_each_client_but_one_of_2024_11_05() -> None:
    with open_bridge("2025-03-26") as bridge:
        audio = bridge.request_async(
            "tools/call", {"name": "sample_blocks", "arguments": {"blocks": "audio"}}
        )
        request = bridge.wait_frame(is_request)
        assert request["params"]["messages"][0]["content"]["type"] == "audio"
        answer(bridge, request, MODEL_ANSWER)
        assert text_of(bridge.wait_response(audio)) == "model: hello"
    with open_bridge("2024-11-05") as bridge:
        assert text_of(call(bridge, "sample_blocks", blocks="audio")) == "model: no answer"
        assert requests_of(bridge) == []
        assert "cannot take a sampling message with audio content" in stderr_after_exit(bridge)


@pytest.mark.parametrize("revision", [LEGACY, "2025-06-18"])
def test_a_form_reaches_a_client_of_a_revision_with_elicitation(revision: str) -> None:
    with open_bridge(revision) as bridge:
        form = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = bridge.wait_frame(is_request)
        assert request["params"]["message"] == "Tell us about you."
        assert ("mode" in request["params"]) is (revision == LEGACY)
        answer(bridge, request, {"action": "accept", "content": {"name": "Ada", "age": 36}})
        assert text_of(bridge.wait_response(form)).startswith("form: accept")
        choice = bridge.request_async("tools/call", {"name": "ask_choice", "arguments": {}})
        request = bridge.wait_frame(is_request)
        size = request["params"]["requestedSchema"]["properties"]["size"]
        if revision == LEGACY:
            assert size["oneOf"] == [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]
        else:
            assert (size["enum"], size["enumNames"]) == (["s", "l"], ["Small", "Large"])
            assert "oneOf" not in size
        answer(bridge, request, {"action": "accept", "content": {"size": "l"}})
        assert text_of(bridge.wait_response(choice)) == 'choice: accept {"size":"l"}'
        confirm = bridge.request_async("prompts/get", {"name": "ask_name"})
        request = bridge.wait_frame(is_request)
        answer(bridge, request, {"action": "accept", "content": {"name": "Grace"}})
        messages = bridge.wait_response(confirm)["result"]["messages"]
        assert messages[0]["content"]["text"] == "Hello, Grace."
        assert checked(bridge) >= {"ElicitRequest", "CallToolResult", "GetPromptResult"}


def test_a_multi_select_form_is_declined_for_a_2025_06_18_client_without_asking() -> None:
    with open_bridge("2025-06-18") as bridge:
        assert text_of(call(bridge, "ask_many")) == "many: decline"
        assert requests_of(bridge) == []
        assert (
            "bridge: warning: input request 'many': a client of MCP 2025-06-18 cannot take a multi-select "
            "field, and the upstream server gets decline" in stderr_after_exit(bridge)
        )


@pytest.mark.parametrize("revision", ["2025-03-26", "2024-11-05"])
def test_a_client_of_a_revision_without_elicitation_is_never_asked_a_form(revision: str) -> None:
    with open_bridge(revision) as bridge:
        for name in ("ask_form", "ask_choice"):
            error = call(bridge, name)["error"]
            assert error["code"] == -32021  # the upstream server was told: no elicitation
            assert error["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
        assert requests_of(bridge) == []


@pytest.mark.parametrize("revision", OLDER)
def test_an_older_client_that_declares_tasks_gets_none_and_its_calls_end_with_their_result(
    revision: str,
) -> None:
    # Tasks came with 2025-11-25: the bridge drives the server's task to its end itself.
    tasks = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    command = bridge_command(upstream=task_server_command())
    with Bridge(command, revision=revision) as bridge:
        init = bridge.initialize({**CAPABILITIES, "tasks": tasks}, client_info=CLIENT_INFO)["result"]
        assert init["protocolVersion"] == revision and "tasks" not in init["capabilities"]
        assert bridge.request("tasks/get", {"taskId": "t"})["error"]["code"] == -32601
        params = {"name": "report", "arguments": {"steps": 2}, "task": {"ttl": 60000}}
        assert text_of(bridge.request("tools/call", params)) == "reported 2 steps"
        assert checked(bridge) >= {"InitializeResult", "CallToolResult"}


# --------------------------------------------------------------------------- the 2025-era passthrough


@pytest.mark.interop
@REVISION
def test_a_2025_era_server_negotiates_the_revision_with_the_client_itself(revision: str) -> None:
    with Bridge(bridge_command(upstream=legacy_command()), revision=revision) as bridge:
        response = bridge.initialize(CAPABILITIES, client_info=CLIENT_INFO)
        assert response["result"]["protocolVersion"] == revision
        assert text_of(call(bridge, "add", a=2, b=3)) == "5"
        assert checked(bridge) >= {"InitializeResult", "CallToolResult"}
        assert f"the upstream server speaks MCP {revision}" in stderr_after_exit(bridge)


# --------------------------------------------------------------------------- the checks themselves


@REVISION
def test_a_frame_that_the_test_never_reads_is_checked_when_the_bridge_ends(revision: str) -> None:
    # A 2025-era server whose tool has a member that no revision defines; the bridge passes it on.
    upstream = legacy_script(
        """
elif m.get('method') == 'tools/list':
    tool = {'name': 'odd', 'inputSchema': {'type': 'object'}, 'unknownMember': 1}
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': {'tools': [tool]}})
"""
    )
    with pytest.raises(FrameInvalid, match=r"ListToolsResult \(strict\).*'unknownMember'"):
        with Bridge(bridge_command(upstream=upstream), revision=revision) as bridge:
            bridge.initialize(CAPABILITIES, client_info=CLIENT_INFO)
            written = len(bridge.raw_lines)
            bridge.request_async("tools/list")
            bridge.wait_written(written + 1)  # the response is written; the test never reads it
