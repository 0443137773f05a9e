"""The listen stream through the stdio bridge: list changes, subscriptions, ordering."""

from __future__ import annotations

from harness import Bridge, bridge_command, fixture_command, text_of
from schema import validate_legacy_frame

LIST_CHANGES = {
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
}
NOTES = "file:///fixture/notes.txt"
LIST_CHANGED_TOOLS = "notifications/tools/list_changed"


OPEN = "the listen stream is open"


def started_bridge() -> Bridge:
    """A bridge after initialize and the lists that VS Code fetches then, once its listen stream is open.

    (A change of a list that the client has not asked for yet does not reach it.)
    """
    bridge = Bridge(bridge_command("--log-level", "debug", upstream=fixture_command()))
    bridge.initialize()
    for method in ("tools/list", "prompts/list", "resources/list"):
        assert "result" in bridge.request(method)
    bridge.wait_stderr(OPEN)
    return bridge


def test_the_first_listen_stream_writes_no_list_change() -> None:
    with started_bridge() as bridge:
        assert bridge.request("ping")["result"] == {}
        bridge.close_stdin()
        bridge.wait_exit()
        assert not [f for f in bridge.seen + bridge.drain() if f.get("method") in LIST_CHANGES]


def test_a_new_stream_after_a_loss_writes_one_change_per_list() -> None:
    with started_bridge() as bridge:
        assert text_of(bridge.request("tools/call", {"name": "end_listen", "arguments": {}})) == (
            "the server ended its listen streams"
        )
        bridge.wait_stderr(f"{OPEN} again")
        seen: list[str] = []
        while len(seen) < len(LIST_CHANGES):
            frame = bridge.wait_frame(lambda f: f.get("method") in LIST_CHANGES)
            assert "params" not in frame
            validate_legacy_frame(frame)
            seen.append(frame["method"])
        assert set(seen) == LIST_CHANGES
        bridge.close_stdin()
        bridge.wait_exit()
        assert not [f for f in bridge.drain() if f.get("method") in LIST_CHANGES]


def test_a_list_change_during_a_call_arrives_before_its_result_every_time() -> None:
    with started_bridge() as bridge:
        bridge.request("tools/call", {"name": "toggle", "arguments": {"enabled": True, "target": "tool"}})
        for i in range(200):
            enabled = i % 2 == 1
            call = bridge.request_async(
                "tools/call", {"name": "toggle", "arguments": {"enabled": enabled, "target": "tool"}}
            )
            change = bridge.wait_frame(
                lambda f, call=call: f.get("method") == LIST_CHANGED_TOOLS or f.get("id") == call
            )
            assert change.get("method") == LIST_CHANGED_TOOLS, f"round {i}: result first"
            response = bridge.wait_response(call)
            assert "toggled" in text_of(response)


def test_subscribe_then_updates_then_unsubscribe() -> None:
    with started_bridge() as bridge:
        response = bridge.request("resources/subscribe", {"uri": NOTES})
        assert response["result"] == {}
        validate_legacy_frame(response)
        touch = bridge.request_async("tools/call", {"name": "touch", "arguments": {"uri": NOTES}})
        update = bridge.wait_frame(lambda f: f.get("method") == "notifications/resources/updated")
        assert update["params"] == {"uri": NOTES}
        validate_legacy_frame(update)
        bridge.wait_response(touch)
        assert bridge.request("resources/subscribe", {"uri": NOTES})["result"] == {}
        assert bridge.request("resources/unsubscribe", {"uri": "file:///not/subscribed"})["result"] == {}
        assert bridge.request("resources/unsubscribe", {"uri": NOTES})["result"] == {}
        seen_before = len(bridge.seen)
        bridge.request("tools/call", {"name": "touch", "arguments": {"uri": NOTES}})
        assert not [
            f for f in bridge.seen[seen_before:] if f.get("method") == "notifications/resources/updated"
        ]


def test_subscribe_with_bad_params_is_invalid_params() -> None:
    with started_bridge() as bridge:
        error = bridge.request("resources/subscribe", {"uri": 5})["error"]
        assert error["code"] == -32602 and error["data"]["cause"] == "invalid_params"


def test_concurrent_subscribes_are_applied_one_at_a_time() -> None:
    with started_bridge() as bridge:
        a = bridge.request_async("resources/subscribe", {"uri": "file:///a"})
        b = bridge.request_async("resources/subscribe", {"uri": "file:///b"})
        assert bridge.wait_response(a)["result"] == {}
        assert bridge.wait_response(b)["result"] == {}
        for uri in ("file:///a", "file:///b"):
            call = bridge.request_async("tools/call", {"name": "touch", "arguments": {"uri": uri}})
            update = bridge.wait_frame(lambda f: f.get("method") == "notifications/resources/updated")
            assert update["params"] == {"uri": uri}
            bridge.wait_response(call)


def test_the_end_of_stdin_with_an_open_stream_stops_in_bounded_time() -> None:
    with started_bridge() as bridge:
        bridge.request("resources/subscribe", {"uri": NOTES})
        bridge.close_stdin()
        assert bridge.wait_exit(6.0) == 0


def test_an_upstream_that_ends_its_streams_is_never_forwarded_as_cancelled() -> None:
    with started_bridge() as bridge:
        bridge.request("tools/call", {"name": "shutdown", "arguments": {"after_ms": 200}})
        assert bridge.wait_exit(10.0) == 1
        frames = bridge.seen + bridge.drain()
        assert not [f for f in frames if f.get("method") == "notifications/cancelled"]
