"""The memory link: objects on the sending thread, the close of either end, and our client on our server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import WAIT
from fixtures.fixture_server import NOTES_URI, build
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.client import Client
from mcpbridge.mcp.errors import Cancelled, Closed, McpError, NotConnected
from mcpbridge.mcp.jsonrpc import Message, Notification, Request, Response
from mcpbridge.mcp.server.connection import ServerConnection
from mcpbridge.mcp.transports.memory import memory_pair

CLIENT_INFO = {"name": "mcpbridge-tests", "version": "0.0.0"}


class Ends:
    """Both ends of a link with recording callbacks."""

    def __init__(self) -> None:
        self.client, self.server = memory_pair()
        self.to_client: list[tuple[Message, str]] = []
        self.to_server: list[tuple[Message, str]] = []
        self.client_closed: list[McpError | None] = []
        self.server_closed = threading.Event()

    def start(self) -> None:
        self.client.start(
            lambda m: self.to_client.append((m, threading.current_thread().name)),
            lambda e: None,
            self.client_closed.append,
        )
        self.server.start(
            lambda m: self.to_server.append((m, threading.current_thread().name)),
            lambda e: None,
            self.server_closed.set,
        )


def test_messages_pass_as_the_same_objects_on_the_sending_thread() -> None:
    ends = Ends()
    ends.start()
    request = Request(1, "tools/list", {"_meta": {}})
    response = Response(1, {"resultType": "complete", "tools": []})
    ends.client.send(request)
    ends.server.send(response)
    here = threading.current_thread().name
    assert ends.to_server == [(request, here)]
    assert ends.to_server[0][0] is request
    assert ends.to_client == [(response, here)]
    assert ends.to_client[0][0] is response
    assert not ends.client.gone and ends.client.exit_status is None


def test_a_send_before_the_other_end_started_is_not_connected() -> None:
    client, server = memory_pair()
    with pytest.raises(NotConnected):
        client.send(Notification("notifications/cancelled", {"requestId": 1}))
    with pytest.raises(NotConnected):
        server.send(Notification("notifications/tools/list_changed"))


@pytest.mark.parametrize("closing", ["client", "server"])
def test_the_close_of_either_end_reaches_both_ends_once(closing: str) -> None:
    ends = Ends()
    ends.start()
    if closing == "client":
        ends.client.close()
    else:
        ends.server.close()
    ends.client.close()
    ends.server.close()
    assert ends.server_closed.is_set()
    assert [type(e) for e in ends.client_closed] == [Closed]
    with pytest.raises(Closed):
        ends.client.send(Notification("x"))
    with pytest.raises(Closed):
        ends.server.send(Notification("x"))


# ---------------------------------------------------- our client on our server


@pytest.fixture
def linked() -> Iterator[tuple[Client, ServerConnection]]:
    server = build()
    client_transport, server_transport = memory_pair()
    client = Client(client_transport, client_info=CLIENT_INFO)
    connection = server.start(server_transport)
    client.start()
    yield client, connection
    client.close()
    assert connection.wait_shutdown(WAIT)


def test_a_list_change_published_during_a_call_reaches_the_client_before_the_result(
    linked: tuple[Client, ServerConnection],
) -> None:
    client, _ = linked
    events: list[str] = []
    subscription = client.listen({"toolsListChanged": True}, on_event=lambda note: events.append(note.method))
    assert subscription.wait_acknowledged(WAIT) == {"toolsListChanged": True}
    for n in range(50):
        client.request("tools/call", {"name": "toggle", "arguments": {"enabled": n % 2 == 1}}, timeout=WAIT)
        assert len(events) == n + 1, "the list change came after the result"
    subscription.cancel("done")


def test_our_client_discovers_calls_reads_and_listens_over_the_memory_link(
    linked: tuple[Client, ServerConnection],
) -> None:
    client, _ = linked
    discovered = client.discover(timeout=WAIT)
    assert discovered["supportedVersions"] == ["2026-07-28"]
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bridge-fixture-server"
    progress: list[Any] = []
    result = client.request(
        "tools/call",
        {"name": "progress", "arguments": {"count": 2}},
        timeout=WAIT,
        on_progress=lambda p: progress.append(p["progress"]),
    )
    assert result["resultType"] == "complete"
    assert progress == [1, 2]
    read = client.request("resources/read", {"uri": NOTES_URI}, timeout=WAIT)
    assert read["contents"][0]["uri"] == NOTES_URI
    updates: list[Any] = []
    subscription = client.listen(
        {"resourceSubscriptions": [NOTES_URI]}, on_event=lambda note: updates.append(note.params)
    )
    subscription.wait_acknowledged(WAIT)
    client.request("tools/call", {"name": "touch", "arguments": {"uri": NOTES_URI}}, timeout=WAIT)
    assert [u["uri"] for u in updates] == [NOTES_URI]
    subscription.cancel()
    with pytest.raises(Cancelled):
        subscription.wait_ended(WAIT)


def test_a_canceled_call_on_the_memory_link_raises_cancelled(linked: tuple[Client, ServerConnection]) -> None:
    client, _ = linked
    token = CancelToken()
    errors: list[McpError] = []
    progressed = threading.Event()

    def call() -> None:
        try:
            client.request(
                "tools/call",
                {"name": "progress", "arguments": {"count": 1000, "ms": 20}},
                timeout=WAIT * 3,
                cancel=token,
                on_progress=lambda p: progressed.set(),
            )
        except McpError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, name="test-caller")
    thread.start()
    assert progressed.wait(WAIT)
    token.cancel("stop")
    thread.join(WAIT)
    assert [type(e) for e in errors] == [Cancelled]


def test_the_server_closing_the_link_fails_the_pending_requests_with_closed(
    linked: tuple[Client, ServerConnection],
) -> None:
    client, connection = linked
    errors: list[McpError] = []
    progressed = threading.Event()

    def call() -> None:
        try:
            client.request(
                "tools/call",
                {"name": "progress", "arguments": {"count": 1000, "ms": 20}},
                timeout=WAIT * 3,
                on_progress=lambda p: progressed.set(),
            )
        except McpError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, name="test-caller")
    thread.start()
    assert progressed.wait(WAIT)
    connection.close()
    thread.join(WAIT)
    assert [type(e) for e in errors] == [Closed]
    assert not client.gone
    with pytest.raises(Closed):
        client.request("tools/list", timeout=WAIT)
