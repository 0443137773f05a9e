"""Input requests through the stdio bridge: the upstream's rounds become requests to VS Code."""

from __future__ import annotations

from typing import Any

import pytest

from harness import Bridge, bridge_command, fixture_command, text_of
from schema import validate_legacy_frame

FORM_ONLY = {"elicitation": {"form": {}}}


def bridge_with(capabilities: dict[str, Any] | None = None, *options: str) -> Bridge:
    bridge = Bridge(bridge_command(*options, upstream=fixture_command()))
    bridge.initialize(capabilities)
    return bridge


def is_request(frame: dict[str, Any]) -> bool:
    return "method" in frame and "id" in frame


def next_request(bridge: Bridge) -> dict[str, Any]:
    frame = bridge.wait_frame(is_request)
    validate_legacy_frame(frame)
    return frame


def answer(bridge: Bridge, request: dict[str, Any], result: dict[str, Any]) -> None:
    bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def test_a_form_round_goes_to_the_client_and_its_answer_upstream() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = next_request(bridge)
        assert request["id"] == "b-1" and request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Tell us about you."
        assert "task" not in request["params"]
        answer(bridge, request, {"action": "accept", "content": {"name": "Ada", "age": 36}})
        text = text_of(bridge.wait_response(call))
        assert text.startswith("form: accept") and '"name":"Ada"' in text
        second = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = next_request(bridge)
        assert request["id"] == "b-2"
        answer(bridge, request, {"action": "decline", "content": {"name": "x"}})
        assert text_of(bridge.wait_response(second)) == "form: decline"


def test_an_error_answer_to_a_form_becomes_cancel() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = next_request(bridge)
        bridge.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "no"}})
        assert text_of(bridge.wait_response(call)) == "form: cancel"


@pytest.mark.parametrize(
    "content",
    [{"age": 36}, {"name": ""}, {"name": 5}, {"name": "Ada", "age": 200}, {"name": "Ada", "color": "pink"}],
)
def test_invalid_accepted_content_fails_the_call(content: dict[str, Any]) -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        answer(bridge, next_request(bridge), {"action": "accept", "content": content})
        error = bridge.wait_response(call)["error"]
        assert error["code"] == -32603 and error["data"]["cause"] == "invalid_client_answer"
        assert error["data"]["detail"] == (
            "input request 'profile': the accepted content is not valid against the requestedSchema"
        )


def test_a_url_elicitation_has_an_id_and_is_completed_before_the_result() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "ask_url", "arguments": {}})
        request = next_request(bridge)
        params = request["params"]
        assert params["mode"] == "url" and params["elicitationId"] == "elicitation-1"
        answer(bridge, request, {"action": "accept", "content": {"x": 1}})
        response = bridge.wait_response(call)
        assert text_of(response) == "url: accept"
        complete = [f for f in bridge.seen if f.get("method") == "notifications/elicitation/complete"]
        assert len(complete) == 1 and complete[0]["params"] == {"elicitationId": "elicitation-1"}
        validate_legacy_frame(complete[0])
        assert bridge.seen.index(complete[0]) < bridge.seen.index(response)


def test_a_refused_url_is_declined_and_never_reaches_the_client() -> None:
    with bridge_with() as bridge:
        response = bridge.request("tools/call", {"name": "ask_bad_url", "arguments": {}})
        assert text_of(response) == "url: decline"
        assert not [f for f in bridge.seen if is_request(f)]


def test_sampling_passes_verbatim_and_a_client_refusal_fails_the_call() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        request = next_request(bridge)
        assert request["method"] == "sampling/createMessage" and request["params"]["maxTokens"] == 50
        answer(
            bridge,
            request,
            {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"},
        )
        assert text_of(bridge.wait_response(call)) == "model: hello"
        call = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        request = next_request(bridge)
        refusal = {"code": -32000, "message": "The user refused.", "data": {"why": "no"}}
        bridge.send({"jsonrpc": "2.0", "id": request["id"], "error": refusal})
        assert bridge.wait_response(call)["error"] == refusal


def test_sampling_with_tools_is_undeclared_without_sampling_tools() -> None:
    with bridge_with() as bridge:
        error = bridge.request("tools/call", {"name": "sample_tools", "arguments": {}})["error"]
        # The upstream sees no sampling.tools in the capabilities and refuses by itself.
        assert error["code"] == -32021


def test_roots_keep_only_file_uris_and_multi_asks_both_at_once() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "list_roots", "arguments": {}})
        request = next_request(bridge)
        assert request["method"] == "roots/list"
        answer(bridge, request, {"roots": [{"uri": "file:///work"}, {"uri": "https://example.com"}]})
        assert text_of(bridge.wait_response(call)) == "roots: file:///work"
        call = bridge.request_async("tools/call", {"name": "multi", "arguments": {}})
        first, second = next_request(bridge), next_request(bridge)
        by_method = {first["method"]: first, second["method"]: second}
        answer(bridge, by_method["roots/list"], {"roots": [{"uri": "file:///a"}]})
        answer(bridge, by_method["elicitation/create"], {"action": "accept", "content": {"name": "Ada"}})
        assert text_of(bridge.wait_response(call)) == "name: Ada (accept); roots: 1"


def test_seventeen_input_requests_are_too_many_and_none_is_sent() -> None:
    with bridge_with() as bridge:
        error = bridge.request("tools/call", {"name": "many_inputs", "arguments": {}})["error"]
        assert error["data"] == {
            "cause": "too_many_input_requests",
            "detail": "17 input requests in one round, limit: 16",
        }
        assert not [f for f in bridge.seen if is_request(f)]


def test_an_undeclared_kind_is_refused_before_anything_is_sent() -> None:
    with bridge_with(FORM_ONLY) as bridge:
        error = bridge.request("tools/call", {"name": "list_roots", "arguments": {}})["error"]
        assert error["code"] == -32021
        assert not [f for f in bridge.seen if is_request(f)]


def test_cancel_while_waiting_cancels_the_bridge_request_and_drops_late_answers() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = next_request(bridge)
        bridge.notify("notifications/cancelled", {"requestId": call})
        cancelled = bridge.wait_frame(lambda f: f.get("method") == "notifications/cancelled")
        assert cancelled["params"] == {"requestId": "b-1", "reason": "the client canceled the request"}
        validate_legacy_frame(cancelled)
        answer(bridge, request, {"action": "accept", "content": {"name": "late"}})
        assert bridge.request("ping")["result"] == {}
        assert not [f for f in bridge.seen if f.get("id") == call]


def test_the_end_of_stdin_while_waiting_cancels_and_exits_0() -> None:
    with bridge_with() as bridge:
        bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        next_request(bridge)
        bridge.close_stdin()
        assert bridge.wait_exit(6.0) == 0
        frames = bridge.seen + bridge.drain()
        cancelled = [f for f in frames if f.get("method") == "notifications/cancelled"]
        assert cancelled and cancelled[0]["params"]["reason"] == "the client closed the connection"


def test_answers_with_unknown_or_repeated_ids_are_dropped() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = next_request(bridge)
        for bad_id in (1, None, "b-999", "x-1"):
            bridge.send({"jsonrpc": "2.0", "id": bad_id, "result": {"action": "accept"}})
        answer(bridge, request, {"action": "decline"})
        answer(bridge, request, {"action": "accept", "content": {"name": "twice"}})
        assert text_of(bridge.wait_response(call)) == "form: decline"
        assert bridge.request("ping")["result"] == {}


def test_a_bad_line_with_a_pending_id_resolves_it_without_an_error_frame() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        request = next_request(bridge)
        bridge.send(b'{"jsonrpc":"2.0","id":"' + request["id"].encode() + b'","result":{"t":"\\ud800"}}\n')
        error = bridge.wait_response(call)["error"]
        assert error["data"]["cause"] == "invalid_client_answer"
        assert not [f for f in bridge.seen if "error" in f and f.get("id") != call]


def test_prompts_get_asks_for_input_too() -> None:
    with bridge_with() as bridge:
        call = bridge.request_async("prompts/get", {"name": "ask_name", "arguments": {}})
        answer(bridge, next_request(bridge), {"action": "accept", "content": {"name": "Bo"}})
        response = bridge.wait_response(call)
        assert response["result"]["messages"][0]["content"]["text"] == "Hello, Bo."


#: Lines of the client that reuse the id (``{id}``) of a request of the bridge, and the
#: response each must get: a request or a notification is never an answer, valid or not.
COLLIDING_LINES = {
    "ping": (b'{"jsonrpc":"2.0","id":"{id}","method":"ping"}', None),
    "method-not-a-string": (b'{"jsonrpc":"2.0","id":"{id}","method":5}', "invalid_request_shape"),
    "null-method-with-a-result": (
        b'{"jsonrpc":"2.0","id":"{id}","method":null,"result":{"action":"accept"}}',
        "invalid_request_shape",
    ),
    "request-with-a-result": (
        b'{"jsonrpc":"2.0","id":"{id}","method":"ping","result":{"action":"accept"}}',
        "invalid_request_shape",
    ),
    "params-not-an-object": (
        b'{"jsonrpc":"2.0","id":"{id}","method":"ping","params":[1]}',
        "invalid_request_shape",
    ),
    "old-jsonrpc": (b'{"jsonrpc":"1.0","id":"{id}","method":"ping"}', "invalid_request_shape"),
    "not-json": (b'{"jsonrpc":"2.0","id":"{id}","method":"ping","params":{"n":NaN}}', "parse_error"),
    "too-deep": (
        b'{"jsonrpc":"2.0","id":"{id}","method":"ping","params":' + b'{"a":' * 70 + b"1" + b"}" * 71,
        "too_deep",
    ),
    "too-long": (
        b'{"jsonrpc":"2.0","id":"{id}","method":"ping","params":{"x":"' + b"y" * 5000 + b'"}}',
        "line_too_long",
    ),
}


@pytest.mark.parametrize("name", list(COLLIDING_LINES))
def test_a_request_of_the_client_with_the_id_of_a_bridge_request_answers_nothing(name: str) -> None:
    line, cause = COLLIDING_LINES[name]
    with bridge_with(None, "--max-line-bytes", "4096") as bridge:
        call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = next_request(bridge)
        bridge.send(line.replace(b"{id}", request["id"].encode()) + b"\n")
        reply = bridge.wait_response(request["id"])
        if cause is None:
            assert reply["result"] == {}
        else:
            assert reply["error"]["data"]["cause"] == cause
        # The request of the bridge still waits, and takes the real answer.
        answer(bridge, request, {"action": "accept", "content": {"name": "Ada"}})
        assert text_of(bridge.wait_response(call)) == 'form: accept {"name":"Ada"}'
        assert [f for f in bridge.seen if f.get("id") == request["id"] and "method" not in f] == [reply]
