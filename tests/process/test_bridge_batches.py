"""JSON-RPC batches of a client of 2025-03-26, on the real executable over real pipes.

Revision 2025-03-26 lets a client send an array of requests and notifications; the
bridge answers the array with one array of the responses, on one line, once all of
them are in (JSON-RPC 2.0, section 6). The client here is written by hand: the SDKs
do not send batches. Each frame is checked against the schema of 2025-03-26.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness import Bridge, bridge_command, fixture_command
from peers.legacy import legacy_command
from schema import validate, validate_frame

REVISION = "2025-03-26"


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    with Bridge(bridge_command(upstream=fixture_command())) as started:
        assert "result" in started.initialize(capabilities={}, protocol_version=REVISION)
        yield started


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        frame["params"] = params
    return frame


def send_batch(bridge: Bridge, batch: list[Any]) -> None:
    bridge.send(json.dumps(batch).encode() + b"\n")


def next_batch(bridge: Bridge, methods: dict[Any, str]) -> dict[Any, dict[str, Any]]:
    """The next frame, which must be a batch response valid in 2025-03-26; its responses by id."""
    frame: Any = bridge.next_frame()
    assert isinstance(frame, list), frame
    validate(REVISION, frame, "JSONRPCBatchResponse")
    responses = {}
    for response in frame:
        validate_frame(REVISION, response, request_method=methods[response["id"]])
        assert response["id"] not in responses, f"two responses to {response['id']!r}"
        responses[response["id"]] = response
    return responses


def test_a_batch_gets_one_array_with_a_response_to_each_request(bridge: Bridge) -> None:
    batch = [
        request(10, "tools/list"),
        request(11, "tools/call", {"name": "echo", "arguments": {"text": "in a batch"}}),
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        request(12, "ping"),
        request(13, "no/such/method"),
    ]
    validate(REVISION, batch, "JSONRPCBatchRequest")
    send_batch(bridge, batch)
    methods = {frame["id"]: frame["method"] for frame in batch if "id" in frame}
    responses = next_batch(bridge, methods)
    assert sorted(responses) == [10, 11, 12, 13]
    assert "echo" in {tool["name"] for tool in responses[10]["result"]["tools"]}
    assert responses[11]["result"]["content"][0]["text"] == "in a batch"
    assert responses[12]["result"] == {}
    assert responses[13]["error"]["code"] == -32601
    assert bridge.raw_lines[-1].count(b"\n") == 1  # the array is one line


def test_the_array_waits_for_the_slowest_response_of_the_batch(bridge: Bridge) -> None:
    batch = [request(20, "tools/call", {"name": "slow", "arguments": {"ms": 300}}), request(21, "ping")]
    send_batch(bridge, batch)
    responses = next_batch(bridge, {20: "tools/call", 21: "ping"})
    assert responses[20]["result"]["content"][0]["text"] == "slept 300 ms"
    assert responses[21]["result"] == {}


def test_responses_that_would_take_a_batch_over_the_bound_of_the_output_become_errors(bridge: Bridge) -> None:
    # Two results of 40 MiB: the array may hold 64 MiB (and one response), not both.
    size = 40 * 1024 * 1024
    big = {"name": "big", "arguments": {"bytes": size}}
    batch = [request(40, "tools/call", big), request(41, "tools/call", big), request(42, "ping")]
    send_batch(bridge, batch)
    responses = next_batch(bridge, {40: "tools/call", 41: "tools/call", 42: "ping"})
    assert sorted(responses) == [40, 41, 42]
    assert responses[42]["result"] == {}
    kept = [i for i in (40, 41) if "result" in responses[i]]
    refused = [i for i in (40, 41) if "error" in responses[i]]
    assert len(kept) == 1 and len(refused) == 1, responses.keys()
    assert responses[kept[0]]["result"]["content"][0]["text"] == "x" * size
    error = responses[refused[0]]["error"]
    assert (error["code"], error["data"]["cause"]) == (-32603, "batch_too_large")
    assert error["message"].endswith("Send this request alone or in a smaller batch.")
    line = bridge.stderr_lines[bridge.wait_stderr("gets the error batch_too_large")]
    assert f"request {refused[0]} of the batch" in line and "65536 KiB" in line
    # The bridge goes on serving.
    send_batch(bridge, [request(43, "ping")])
    assert next_batch(bridge, {43: "ping"})[43]["result"] == {}


def test_a_canceled_request_of_a_batch_has_no_response_in_the_array(bridge: Bridge) -> None:
    batch = [request(30, "tools/call", {"name": "slow", "arguments": {"ms": 60000}}), request(31, "ping")]
    send_batch(bridge, batch)
    bridge.notify("notifications/cancelled", {"requestId": 30})
    responses = next_batch(bridge, {31: "ping"})
    assert sorted(responses) == [31]


def test_each_element_has_the_rules_of_a_message_alone(bridge: Bridge) -> None:
    batch: list[Any] = [
        request(40, "tools/call", {"name": "slow", "arguments": {"ms": 200}}),
        request(40, "tools/list"),  # the id of a request in flight
        {"jsonrpc": "2.0", "id": 41},  # neither a request nor a response
        request(42, "initialize", {"protocolVersion": REVISION, "capabilities": {}, "clientInfo": {}}),
    ]
    send_batch(bridge, batch)
    frame: Any = bridge.next_frame()
    assert isinstance(frame, list), frame
    by_cause = sorted(
        (response.get("id"), response["error"]["data"]["cause"]) for response in frame if "error" in response
    )
    assert by_cause == [
        (40, "invalid_request_shape"),
        (41, "invalid_request_shape"),
        (42, "already_initialized"),
    ]
    assert [response["result"]["content"][0]["text"] for response in frame if "result" in response] == [
        "slept 200 ms"
    ]


def test_an_empty_batch_is_an_invalid_request_and_a_batch_of_notifications_gets_nothing(
    bridge: Bridge,
) -> None:
    send_batch(bridge, [])
    error = bridge.next_frame()
    assert isinstance(error, dict) and error["error"]["data"]["cause"] == "invalid_request_shape"
    send_batch(bridge, [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}])
    bridge.send(request(50, "ping"))
    assert bridge.next_frame() == {"jsonrpc": "2.0", "id": 50, "result": {}}


def test_a_client_of_2025_11_25_gets_one_error_for_a_batch() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        send_batch(bridge, [request(60, "ping")])
        error = bridge.next_frame()
        assert isinstance(error, dict) and error["error"]["data"]["cause"] == "invalid_request_shape"


def test_a_batch_passes_through_to_a_2025_era_server_one_request_at_a_time() -> None:
    with Bridge(bridge_command(upstream=legacy_command())) as bridge:
        assert "result" in bridge.initialize(capabilities={}, protocol_version=REVISION)
        batch = [
            request(70, "tools/call", {"name": "echo", "arguments": {"text": "passed"}}),
            request(71, "ping"),
        ]
        send_batch(bridge, batch)
        responses = next_batch(bridge, {70: "tools/call", 71: "ping"})
        assert responses[70]["result"]["content"][0]["text"] == "passed"
        assert responses[71]["result"] == {}
