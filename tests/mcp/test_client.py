"""The client: requests, routing, listen streams; against a scripted raw upstream on real pipes."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import WAIT
from mcpbridge.mcp import jsonrpc
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.client import Client
from mcpbridge.mcp.client.subscription import Subscription
from mcpbridge.mcp.errors import (
    Cancelled,
    Closed,
    InvalidMeta,
    InvalidRequest,
    InvalidResponse,
    McpError,
    NotConnected,
    RequestTimeout,
    RpcError,
)
from mcpbridge.mcp.jsonrpc import Message, Notification, Request, Response
from mcpbridge.mcp.transports import Transport
from mcpbridge.mcp.transports.stdio import StdioChildTransport

PEER = Path(__file__).parents[1] / "peers" / "scripted_upstream.py"
CLIENT_INFO = {"name": "mcpbridge-tests", "version": "0.0.0"}
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

MakeClient = Callable[..., Client]


class SignalingTransport(StdioChildTransport):
    """The stdio transport, telling when a request of a method went out (was queued whole)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: dict[str, threading.Event] = {}

    def went_out(self, method: str) -> threading.Event:
        return self.sent.setdefault(method, threading.Event())

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        super().send(message, cancel=cancel)
        if isinstance(message, Request):
            self.went_out(message.method).set()


def went_out(client: Client, method: str) -> None:
    transport = client._transport
    assert isinstance(transport, SignalingTransport)
    assert transport.went_out(method).wait(WAIT)


@pytest.fixture
def make_client() -> Iterator[MakeClient]:
    clients: list[Client] = []

    def make(*args: str, max_line_bytes: int = 1024 * 1024, **kwargs: Any) -> Client:
        transport = SignalingTransport([sys.executable, str(PEER), *args], max_line_bytes=max_line_bytes)
        client = Client(transport, client_info=CLIENT_INFO, **kwargs)
        client.start()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close(grace=WAIT / 4)


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client()


def cancels_seen(client: Client) -> list[dict[str, Any]]:
    return client.request("test/cancels", timeout=WAIT)["cancels"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------ requests


def test_a_request_carries_the_meta_of_the_revision_and_gets_its_result(client: Client) -> None:
    result = client.request(
        "test/echo",
        {"x": 1},
        timeout=WAIT,
        capabilities={"elicitation": {}},
        log_level="info",
        meta={"traceparent": "00-abc-def-01"},
    )
    assert result["method"] == "test/echo"
    params = result["params"]
    assert params["x"] == 1
    assert params["_meta"] == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/logLevel": "info",
        "traceparent": "00-abc-def-01",
    }


def test_a_request_hands_over_the_long_strings_of_its_answer_as_they_came(client: Client) -> None:
    text = "x" * (300 * 1024)
    long_strings: list[jsonrpc.RawStrings] = []
    result = client.request("test/echo", {"text": text}, timeout=WAIT, long_strings=long_strings)
    assert result["params"]["text"] == text
    assert len(long_strings) == 1
    view = long_strings[0].text_of(result["params"]["text"])
    assert view is not None and bytes(view) == text.encode()
    # The result is written on with that very view: the same bytes as the encoder's.
    parts = jsonrpc.serialize_parts({"jsonrpc": "2.0", "id": 1, "result": result}, raw=long_strings[0])
    assert any(part is view or (isinstance(part, memoryview) and part.obj is view.obj) for part in parts)
    assert b"".join(bytes(part) for part in parts) == jsonrpc.serialize(
        {"jsonrpc": "2.0", "id": 1, "result": result}
    )
    # A short answer has no long strings to hand over.
    short: list[jsonrpc.RawStrings] = []
    client.request("test/echo", {"text": "short"}, timeout=WAIT, long_strings=short)
    assert [len(record) for record in short] == [0]


def test_a_request_without_params_still_sends_the_required_meta(client: Client) -> None:
    params = client.request("test/echo", timeout=WAIT)["params"]
    assert set(params) == {"_meta"}
    assert params["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {}
    assert "io.modelcontextprotocol/logLevel" not in params["_meta"]


def test_discover_sends_server_discover(client: Client) -> None:
    with pytest.raises(RpcError) as caught:
        client.discover(timeout=WAIT)
    assert caught.value.error.code == jsonrpc.METHOD_NOT_FOUND


def test_ids_are_the_integers_one_two_three(client: Client) -> None:
    seen: list[Any] = []
    for _ in range(3):
        client.request(
            "test/echo", timeout=WAIT, trace=lambda rid, outcome, secs: seen.append((rid, outcome))
        )
    assert seen == [(1, "complete"), (2, "complete"), (3, "complete")]


@pytest.mark.parametrize(
    "meta",
    [
        {"io.modelcontextprotocol/logLevel": "debug"},
        {"io.modelcontextprotocol/anything": 1},
        {"progressToken": 5},
    ],
)
def test_a_meta_key_of_the_protocol_layer_is_refused_before_sending(
    client: Client, meta: dict[str, Any]
) -> None:
    with pytest.raises(InvalidMeta):
        client.request("test/echo", timeout=WAIT, meta=meta)
    with pytest.raises(InvalidMeta):
        client.request("test/echo", {"_meta": meta}, timeout=WAIT)
    # Nothing went out: the next request is still id 1.
    ids: list[Any] = []
    client.request("test/echo", timeout=WAIT, trace=lambda rid, outcome, secs: ids.append(rid))
    assert ids == [1]


def test_params_that_are_not_an_object_and_unknown_log_levels_are_invalid_requests(client: Client) -> None:
    with pytest.raises(InvalidRequest):
        client.request("test/echo", [1, 2], timeout=WAIT)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest):
        client.request("test/echo", timeout=WAIT, log_level="verbose")


def test_an_unknown_option_is_refused_before_sending(client: Client) -> None:
    with pytest.raises(TypeError, match="'cancle'"):
        client.request("test/echo", timeout=WAIT, cancle=None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'on_log'"):
        client.begin("test/echo", on_done=lambda call: None, timeout=WAIT, on_log=print)  # type: ignore[call-arg]
    # Nothing went out: the next request is still id 1.
    ids: list[Any] = []
    client.request("test/echo", timeout=WAIT, trace=lambda rid, outcome, secs: ids.append(rid))
    assert ids == [1]


def test_an_error_response_raises_rpc_error_with_code_message_and_data(client: Client) -> None:
    error = {"code": -32602, "message": "bad", "data": {"why": "x"}}
    outcomes: list[str] = []
    with pytest.raises(RpcError) as caught:
        client.request("test/error", {"error": error}, timeout=WAIT, trace=lambda r, o, s: outcomes.append(o))
    assert caught.value.error == jsonrpc.ErrorObject(-32602, "bad", {"why": "x"})
    assert outcomes == ["error -32602"]


TASK_RESULT = {"resultType": "task", "taskId": "t-1", "status": "working"}


@pytest.mark.parametrize(
    ("value", "allow", "ok"),
    [
        ({"content": []}, {}, True),
        ({"resultType": "complete"}, {}, True),
        ({"resultType": "input_required", "requestState": "s"}, {"allow_input_required": True}, True),
        ({"resultType": "input_required", "requestState": "s"}, {}, False),
        ({"resultType": "input_required", "requestState": "s"}, {"allow_task": True}, False),
        (TASK_RESULT, {"allow_input_required": True}, False),
        (TASK_RESULT, {"allow_task": True}, True),
        (TASK_RESULT, {"allow_task": True, "allow_input_required": True}, True),
        ({"resultType": None}, {}, False),
        ([1, 2], {}, False),
        ("text", {}, False),
    ],
)
def test_result_types_follow_the_rules_of_the_revision(
    client: Client, value: Any, allow: dict[str, bool], ok: bool
) -> None:
    if ok:
        assert client.request("test/result", {"result": value}, timeout=WAIT, **allow) == value
    else:
        with pytest.raises(InvalidResponse):
            client.request("test/result", {"result": value}, timeout=WAIT, **allow)


def test_a_hundred_concurrent_requests_each_get_their_own_result(client: Client) -> None:
    results: dict[int, Any] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(100, timeout=WAIT)

    def call(n: int) -> None:
        try:
            start.wait()
            results[n] = client.request("test/echo", {"n": n}, timeout=WAIT)["params"]["n"]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(n,), name=f"test-caller-{n}") for n in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert errors == []
    assert results == {n: n for n in range(100)}


# ------------------------------------------------------- progress and logs


def test_progress_goes_to_the_request_by_its_token_on_the_reader_thread(client: Client) -> None:
    progress: list[tuple[Any, str]] = []
    result = client.request(
        "test/notify",
        {"notifications": [{"progress": 1}, {"progress": 2}]},
        timeout=WAIT,
        on_progress=lambda params: progress.append((params["progress"], threading.current_thread().name)),
    )
    token = result["params"]["_meta"]["progressToken"]
    assert token == 1
    assert progress == [(1, "mcpbridge-upstream-reader"), (2, "mcpbridge-upstream-reader")]


def test_progress_for_no_request_in_flight_is_dropped(make_client: MakeClient) -> None:
    other: list[Notification] = []
    client = make_client(on_notification=other.append)
    stray = {"method": "notifications/progress", "params": {"progressToken": 99, "progress": 1}}
    client.request("test/notify", {"notifications": [stray]}, timeout=WAIT)
    assert other == []


def test_a_log_message_on_stdio_goes_to_on_notification(make_client: MakeClient) -> None:
    other: list[Notification] = []
    on_log: list[Any] = []
    client = make_client(on_notification=other.append)
    log = {"method": "notifications/message", "params": {"level": "info", "data": "hello"}}
    unknown = {"method": "notifications/tools/list_changed"}
    client.request("test/notify", {"notifications": [log, unknown]}, timeout=WAIT, on_log=on_log.append)
    assert other == [
        Notification("notifications/message", {"level": "info", "data": "hello"}),
        Notification("notifications/tools/list_changed"),
    ]
    assert on_log == []


# ------------------------------------------------------ timeouts and cancels


def test_a_timeout_raises_request_timeout_and_cancels_the_request_upstream(client: Client) -> None:
    outcomes: list[tuple[Any, str]] = []
    with pytest.raises(RequestTimeout) as caught:
        client.request(
            "test/silent", timeout=0.2, trace=lambda rid, outcome, secs: outcomes.append((rid, outcome))
        )
    assert caught.value.detail == "test/silent: no response in 200 ms"
    assert outcomes == [(1, "timeout")]
    assert cancels_seen(client) == [{"requestId": 1, "reason": "no response in 200 ms"}]


def test_a_timeout_in_whole_seconds_names_seconds(client: Client) -> None:
    with pytest.raises(RequestTimeout) as caught:
        client.request("test/silent", timeout=1.0)
    assert caught.value.detail == "test/silent: no response in 1 s"


def test_a_cancel_raises_cancelled_and_sends_notifications_cancelled_once(client: Client) -> None:
    token = CancelToken()
    errors: list[McpError] = []

    def call() -> None:
        try:
            client.request("test/silent", timeout=WAIT, cancel=token)
        except McpError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, name="test-caller")
    thread.start()
    went_out(client, "test/silent")
    token.cancel("the user stopped it")
    token.cancel("again")
    thread.join(WAIT)
    assert [type(e) for e in errors] == [Cancelled]
    assert errors[0].detail == "the user stopped it"
    seen = cancels_seen(client)
    assert seen == [{"requestId": 1, "reason": "the user stopped it"}]


def test_a_request_with_a_cancelled_token_is_not_sent(client: Client) -> None:
    token = CancelToken()
    token.cancel("before")
    with pytest.raises(Cancelled):
        client.request("test/echo", timeout=WAIT, cancel=token)
    assert cancels_seen(client) == []


def test_a_late_answer_after_a_timeout_is_dropped(client: Client) -> None:
    late = ['{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","late":true}}']
    with pytest.raises(RequestTimeout):
        client.request("test/silent", timeout=0.1)
    result = client.request("test/raw", {"lines": late, "answer": True}, timeout=WAIT)
    assert result["method"] == "test/raw"


# ---------------------------------------------------- what the router drops


def test_garbage_lines_unknown_ids_and_server_requests_are_dropped(make_client: MakeClient) -> None:
    other: list[Notification] = []
    client = make_client(on_notification=other.append)
    lines = [
        "not json at all",
        "{}",
        "[1,2,3]",
        '{"jsonrpc":"2.0","id":null,"result":{}}',
        '{"jsonrpc":"2.0","id":true,"result":{}}',
        '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}',
        '{"jsonrpc":"2.0","id":4242,"result":{"resultType":"complete"}}',
        '{"jsonrpc":"2.0","id":"x-1","method":"sampling/createMessage","params":{}}',
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}',
    ]
    result = client.request("test/raw", {"lines": lines, "answer": True}, timeout=WAIT)
    assert result["method"] == "test/raw"
    assert client.request("test/echo", timeout=WAIT)["method"] == "test/echo"
    assert other == []


def test_a_second_answer_to_the_same_id_is_dropped(client: Client) -> None:
    lines = [
        '{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","n":1}}',
        '{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","n":2}}',
        '{"jsonrpc":"2.0","id":{id},"error":{"code":-1,"message":"third"}}',
    ]
    assert client.request("test/raw", {"lines": lines}, timeout=WAIT)["n"] == 1
    assert client.request("test/echo", timeout=WAIT)["method"] == "test/echo"


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"1.0","id":{id},"result":{}}',
        '{"jsonrpc":"2.0","id":{id},"error":{"code":"x","message":"m"}}',
        '{"jsonrpc":"2.0","id":{id},"result":' + "[" * 250 + "]" * 250 + "}",
    ],
    ids=["wrong-version", "bad-error-object", "too-deep"],
)
def test_an_invalid_frame_with_the_id_of_a_request_fails_it_at_once(client: Client, line: str) -> None:
    outcomes: list[str] = []
    with pytest.raises(InvalidResponse) as caught:
        client.request(
            "test/raw", {"lines": [line]}, timeout=WAIT * 3, trace=lambda r, o, s: outcomes.append(o)
        )
    assert caught.value.detail is not None and caught.value.detail.startswith("test/raw: the response is")
    assert outcomes == ["invalid_response"]


@pytest.mark.parametrize("id_first", [True, False])
def test_a_too_long_response_with_a_readable_id_fails_its_request_at_once(
    make_client: MakeClient, id_first: bool
) -> None:
    client = make_client(max_line_bytes=2048)
    filler = "x" * 5000
    if id_first:
        line = '{"jsonrpc":"2.0","id":{id},"result":{"resultType":"complete","text":"' + filler + '"}}'
    else:
        line = '{"result":{"resultType":"complete","text":"' + filler + '"},"jsonrpc":"2.0","id":{id}}'
    with pytest.raises(InvalidResponse) as caught:
        client.request("test/raw", {"lines": [line]}, timeout=WAIT * 3)
    assert "over the limit" in (caught.value.detail or "")
    assert client.request("test/echo", timeout=WAIT)["method"] == "test/echo"


def test_a_too_long_line_whose_id_is_nested_fails_nothing(make_client: MakeClient) -> None:
    client = make_client(max_line_bytes=2048)
    line = '{"jsonrpc":"2.0","method":"x","params":{"a":"' + "y" * 5000 + '","b":{"id":{id}}}}'
    assert client.request("test/raw", {"lines": [line], "answer": True}, timeout=WAIT)["method"] == "test/raw"


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","id":{id},"method":5}',
        '{"jsonrpc":"2.0","id":{id},"method":null,"result":{"resultType":"complete"}}',
        '{"jsonrpc":"2.0","id":{id},"method":"ping","params":[1]}',
        '{"jsonrpc":"2.0","id":{id},"method":"ping","params":{"n":NaN}}',
        '{"jsonrpc":"2.0","id":{id},"method":"ping","params":{"x":"' + "y" * 5000 + '"}}',
    ],
    ids=["method-not-a-string", "null-method", "bad-params", "not-json", "too-long"],
)
def test_a_bad_request_of_the_server_with_the_id_of_a_request_fails_nothing(
    make_client: MakeClient, line: str
) -> None:
    client = make_client(max_line_bytes=2048)
    assert client.request("test/raw", {"lines": [line], "answer": True}, timeout=WAIT)["method"] == "test/raw"


# ------------------------------------------------------------ listen streams


class Stream:
    """Collects what a listen stream delivers."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, str]] = []
        self.acks: list[Any] = []

    def on_event(self, note: Notification) -> None:
        self.events.append((note.method, note.params, threading.current_thread().name))

    def on_ack(self, honored: dict[str, Any]) -> None:
        self.acks.append(honored)

    def open(self, client: Client, **filter: Any) -> Subscription:
        return client.listen(filter, on_event=self.on_event, on_ack=self.on_ack, log_level="debug")


def event(sid: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": {"_meta": {SUBSCRIPTION_ID: sid}, **params}}


def test_a_listen_stream_is_acknowledged_and_its_events_arrive_inline_before_a_later_result(
    client: Client,
) -> None:
    stream = Stream()
    subscription = stream.open(
        client, toolsListChanged=True, resourceSubscriptions=["file:///a"], unsupported=True
    )
    assert subscription.wait_acknowledged(WAIT) == {
        "toolsListChanged": True,
        "resourceSubscriptions": ["file:///a"],
    }
    assert stream.acks == [{"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}]
    sid = subscription.id
    notes = [
        event(sid, "notifications/tools/list_changed"),
        event(sid, "notifications/resources/updated", uri="file:///a"),
        event(sid, "notifications/tools/list_changed"),
    ]
    for _ in range(20):
        client.request("test/notify", {"notifications": notes}, timeout=WAIT)
        # The events came before the result, on the reader thread, in order.
        assert [(m, t) for m, _, t in stream.events[-3:]] == [
            ("notifications/tools/list_changed", "mcpbridge-upstream-reader"),
            ("notifications/resources/updated", "mcpbridge-upstream-reader"),
            ("notifications/tools/list_changed", "mcpbridge-upstream-reader"),
        ]
    assert len(stream.events) == 60
    assert stream.events[1][1] == {"_meta": {SUBSCRIPTION_ID: sid}, "uri": "file:///a"}
    assert not subscription.ended


def test_the_listen_request_carries_its_filter_and_meta(client: Client) -> None:
    subscription = client.listen(
        {"promptsListChanged": True},
        on_event=lambda note: None,
        capabilities={"roots": {}},
        log_level="warning",
    )
    assert subscription.wait_acknowledged(WAIT) == {"promptsListChanged": True}
    assert subscription.id == 1
    [params] = client.request("test/listens", timeout=WAIT)["listens"]
    assert params == {
        "notifications": {"promptsListChanged": True},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/logLevel": "warning",
        },
    }


def test_a_listen_result_ends_the_stream_gracefully(client: Client) -> None:
    subscription = Stream().open(client, toolsListChanged=True)
    subscription.wait_acknowledged(WAIT)
    client.request("test/end-listen", {"id": subscription.id, "how": "result"}, timeout=WAIT)
    assert subscription.ended
    subscription.wait_ended(WAIT)


def test_a_notifications_cancelled_for_the_listen_id_ends_the_stream(client: Client) -> None:
    stream = Stream()
    subscription = stream.open(client, toolsListChanged=True)
    subscription.wait_acknowledged(WAIT)
    client.request("test/end-listen", {"id": subscription.id, "how": "cancelled"}, timeout=WAIT)
    subscription.wait_ended(WAIT)
    late = [event(subscription.id, "notifications/tools/list_changed")]
    client.request("test/notify", {"notifications": late}, timeout=WAIT)
    assert stream.events == []


def test_a_listen_error_ends_the_stream_with_rpc_error(client: Client) -> None:
    subscription = Stream().open(client, toolsListChanged=True)
    subscription.wait_acknowledged(WAIT)
    client.request("test/end-listen", {"id": subscription.id, "how": "error"}, timeout=WAIT)
    with pytest.raises(RpcError) as caught:
        subscription.wait_ended(WAIT)
    assert caught.value.error.message == "stream failed"


def test_a_stream_that_ends_before_its_acknowledgment_is_an_invalid_response(client: Client) -> None:
    subscription = Stream().open(client, toolsListChanged=True, noAck=True)
    client.request("test/end-listen", {"id": subscription.id, "how": "result"}, timeout=WAIT)
    with pytest.raises(InvalidResponse):
        subscription.wait_acknowledged(WAIT)


def test_no_acknowledgment_in_time_raises_request_timeout(client: Client) -> None:
    subscription = Stream().open(client, toolsListChanged=True, noAck=True)
    with pytest.raises(RequestTimeout):
        subscription.wait_acknowledged(0.2)
    with pytest.raises(RequestTimeout):
        subscription.wait_ended(0.05)
    subscription.cancel("not acknowledged")


def test_cancel_sends_notifications_cancelled_for_the_listen_id_and_ends_it_locally(client: Client) -> None:
    stream = Stream()
    subscription = stream.open(client, toolsListChanged=True)
    subscription.wait_acknowledged(WAIT)
    subscription.cancel("replaced")
    subscription.cancel("twice")
    assert subscription.ended
    with pytest.raises(Cancelled):
        subscription.wait_ended(WAIT)
    client.request(
        "test/notify",
        {"notifications": [event(subscription.id, "notifications/tools/list_changed")]},
        timeout=WAIT,
    )
    assert stream.events == []
    assert cancels_seen(client) == [{"requestId": subscription.id, "reason": "replaced"}]


def test_a_stream_can_be_canceled_from_its_own_event_callback(client: Client) -> None:
    holder: list[Subscription] = []
    got: list[str] = []

    def on_event(note: Notification) -> None:
        got.append(note.method)
        holder[0].cancel("enough")

    holder.append(client.listen({"toolsListChanged": True}, on_event=on_event))
    holder[0].wait_acknowledged(WAIT)
    sid = holder[0].id
    notes = [event(sid, "notifications/tools/list_changed"), event(sid, "notifications/tools/list_changed")]
    client.request("test/notify", {"notifications": notes}, timeout=WAIT)
    assert got == ["notifications/tools/list_changed"]
    assert cancels_seen(client) == [{"requestId": sid, "reason": "enough"}]


def test_several_streams_are_routed_by_their_subscription_id(client: Client) -> None:
    first, second = Stream(), Stream()
    one = first.open(client, toolsListChanged=True)
    two = second.open(client, resourceSubscriptions=["file:///b"])
    one.wait_acknowledged(WAIT)
    two.wait_acknowledged(WAIT)
    notes = [
        event(two.id, "notifications/resources/updated", uri="file:///b"),
        event(one.id, "notifications/tools/list_changed"),
        event(12345, "notifications/tools/list_changed"),
    ]
    client.request("test/notify", {"notifications": notes}, timeout=WAIT)
    assert [m for m, _, _ in first.events] == ["notifications/tools/list_changed"]
    assert [m for m, _, _ in second.events] == ["notifications/resources/updated"]


def test_a_callback_that_raises_does_not_stop_the_reader(client: Client) -> None:
    def explode(note: Notification) -> None:
        raise RuntimeError("boom")

    subscription = client.listen({"toolsListChanged": True}, on_event=explode)
    subscription.wait_acknowledged(WAIT)
    notes = [event(subscription.id, "notifications/tools/list_changed")]
    assert client.request("test/notify", {"notifications": notes}, timeout=WAIT)["method"] == "test/notify"


# ------------------------------------------------------- loss of the server


def test_an_exit_fails_every_pending_request_and_stream_with_closed_and_names_the_code(
    client: Client,
) -> None:
    subscription = Stream().open(client, toolsListChanged=True)
    subscription.wait_acknowledged(WAIT)
    errors: list[McpError] = []
    started = threading.Barrier(6, timeout=WAIT)

    def call() -> None:
        started.wait()
        try:
            client.request("test/silent", timeout=WAIT * 3)
        except McpError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, name=f"test-caller-{n}") for n in range(5)]
    for thread in threads:
        thread.start()
    started.wait()
    with pytest.raises(Closed):
        client.request("test/exit", {"code": 3}, timeout=WAIT * 3)
    for thread in threads:
        thread.join(WAIT)
    # Requests that had not gone out yet fail the same way.
    assert {type(e) for e in errors} == {Closed}
    assert client.gone
    assert client.exit_status == "code 3"
    with pytest.raises(Closed):
        subscription.wait_ended(WAIT)
    with pytest.raises(Closed):
        client.request("test/echo", timeout=WAIT)
    with pytest.raises(Closed):
        client.listen({}, on_event=lambda note: None)


def test_a_server_killed_by_a_signal_reports_the_signal(client: Client) -> None:
    with pytest.raises(Closed) as caught:
        client.request("test/kill-self", timeout=WAIT)
    assert client.exit_status == "signal 9"
    assert caught.value.detail == "the upstream server exited (signal 9)"


def test_close_fails_pending_requests_with_closed(client: Client) -> None:
    errors: list[McpError] = []

    def call() -> None:
        try:
            client.request("test/silent", timeout=WAIT * 3)
        except McpError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, name="test-caller")
    thread.start()
    went_out(client, "test/silent")
    client.close(grace=WAIT / 4)
    thread.join(WAIT)
    assert [type(e) for e in errors] == [Closed]
    client.close()


def test_a_client_that_is_not_started_refuses_requests() -> None:
    transport = StdioChildTransport([sys.executable, str(PEER)])
    client = Client(transport, client_info=CLIENT_INFO)
    with pytest.raises(NotConnected):
        client.request("test/echo", timeout=WAIT)
    client.close()


# ------------------------------------------- a transport like HTTP (blocking send)


class BlockingTransport(Transport):
    """Delivers the answer on the sending thread, as HTTP does; a silent method blocks until canceled."""

    def __init__(self) -> None:
        self.on_message: Callable[[Message], None] | None = None
        self.sent: list[Message] = []

    def start(self, on_message: Any, on_frame_error: Any, on_closed: Any) -> None:
        self.on_message = on_message

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        self.sent.append(message)
        assert self.on_message is not None
        if not isinstance(message, Request):
            return
        if message.method == "test/silent":
            assert cancel is not None
            assert cancel.wait(WAIT), "the client never fired the token of the send"
            raise Cancelled("the stream was closed")
        self.on_message(Notification("notifications/message", {"level": "info", "data": "tied"}))
        self.on_message(Response(message.id, {"resultType": "complete"}))

    def close(self, grace: float = 2.0) -> None:
        pass


def test_a_blocking_send_is_cut_at_the_deadline_and_raises_request_timeout() -> None:
    transport = BlockingTransport()
    client = Client(transport, client_info=CLIENT_INFO)
    client.start()
    try:
        with pytest.raises(RequestTimeout):
            client.request("test/silent", timeout=0.2)
    finally:
        client.close()


def test_a_log_message_delivered_during_the_send_goes_to_that_request() -> None:
    transport = BlockingTransport()
    other: list[Notification] = []
    client = Client(transport, client_info=CLIENT_INFO, on_notification=other.append)
    client.start()
    logs: list[Any] = []
    try:
        assert client.request("test/echo", timeout=WAIT, on_log=logs.append) == {"resultType": "complete"}
        assert client.request("test/echo", timeout=WAIT) == {"resultType": "complete"}
    finally:
        client.close()
    assert logs == [{"level": "info", "data": "tied"}]
    assert other == [Notification("notifications/message", {"level": "info", "data": "tied"})]


def test_the_trace_gets_the_upstream_id_the_outcome_and_the_time(client: Client) -> None:
    seen: list[tuple[Any, str, float]] = []
    client.request("test/echo", timeout=WAIT, trace=lambda *args: seen.append(args))
    [(rid, outcome, seconds)] = seen
    assert (rid, outcome) == (1, "complete")
    assert 0 <= seconds < WAIT


def test_requests_are_serialized_as_one_compact_line(client: Client) -> None:
    params = {"text": "line one\nline two", "emoji": "\u2603"}
    echoed = client.request("test/echo", params, timeout=WAIT)["params"]
    assert echoed["text"] == "line one\nline two"
    assert echoed["emoji"] == "\u2603"
    assert json.loads(jsonrpc.serialize(Request(1, "x", params))) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "x",
        "params": params,
    }


# ------------------------------------------------------------ over HTTP


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    from peers import running_py_http_server

    with running_py_http_server() as url:
        yield url


@pytest.fixture
def http_client(sdk_url: str) -> Iterator[Client]:
    from mcpbridge.mcp.transports.http import HttpTransport

    client = Client(HttpTransport(sdk_url), client_info=CLIENT_INFO)
    client.start()
    yield client
    client.close()


def test_over_http_progress_and_tied_log_messages_reach_their_request(http_client: Client) -> None:
    progress: list[Any] = []
    logs: list[Any] = []
    result = http_client.request(
        "tools/call",
        {"name": "steps", "arguments": {"count": 2}},
        timeout=WAIT,
        log_level="info",
        on_progress=lambda p: progress.append(p["progress"]),
        on_log=lambda p: logs.append(p["data"]),
    )
    assert result["content"] == [{"type": "text", "text": "done 2"}]
    assert progress == [1, 2]
    assert logs == ["log 1", "log 2"]


def test_over_http_a_timeout_closes_the_stream_and_the_server_sees_the_cancel(http_client: Client) -> None:
    def cancelled(at_least: int) -> int:
        """The peer's count of canceled calls, once it is at least ``at_least`` (the peer waits for it)."""
        params = {"name": "cancelled", "arguments": {"at_least": at_least}}
        result = http_client.request("tools/call", params, timeout=WAIT)
        count: int = result["structuredContent"]["result"]
        return count

    before = cancelled(0)
    with pytest.raises(RequestTimeout) as caught:
        http_client.request("tools/call", {"name": "wait_for_cancel", "arguments": {}}, timeout=0.5)
    assert caught.value.detail == "tools/call: no response in 500 ms"
    # The server notices the closed stream a moment later.
    assert cancelled(before + 1) == before + 1


def test_over_http_a_listen_stream_runs_on_its_own_thread_until_canceled(http_client: Client) -> None:
    events: list[tuple[str, str]] = []
    got = threading.Event()

    def on_event(note: Notification) -> None:
        events.append((note.method, threading.current_thread().name))
        got.set()

    subscription = http_client.listen({"toolsListChanged": True}, on_event=on_event)
    assert subscription.wait_acknowledged(WAIT) == {"toolsListChanged": True}
    http_client.request("tools/call", {"name": "change_tools", "arguments": {}}, timeout=WAIT)
    # The event comes on the stream's own connection, so maybe after the call's result.
    assert got.wait(WAIT)
    assert events == [("notifications/tools/list_changed", f"mcpbridge-upstream-listen-{subscription.id}")]
    subscription.cancel("done")
    with pytest.raises(Cancelled):
        subscription.wait_ended(WAIT)
