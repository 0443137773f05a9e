"""The stdio transports on real pipes: the upstream child process, and our own server's stdio."""

from __future__ import annotations

import logging
import os
import queue
import select
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import WAIT, bounded, read_line
from fixtures.fixture_server import NOTES_URI
from mcpbridge.mcp import jsonrpc
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.client import Client
from mcpbridge.mcp.errors import (
    Cancelled,
    Closed,
    InvalidRequest,
    McpError,
    NotConnected,
    SpawnFailed,
    TransportFailed,
)
from mcpbridge.mcp.jsonrpc import FrameError, Message, Notification, Request, Response
from mcpbridge.mcp.transports.framing import TooLong
from mcpbridge.mcp.transports.stdio import StdioChildTransport, StdioServerTransport

PEER = Path(__file__).parents[1] / "peers" / "scripted_upstream.py"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "fixture_server.py"
REPO = Path(__file__).resolve().parents[2]
CLIENT_INFO = {"name": "mcpbridge-tests", "version": "0.0.0"}


class Inbox:
    """The callbacks of a client transport, as queues and events."""

    def __init__(self) -> None:
        self.messages: queue.Queue[Message] = queue.Queue()
        self.frame_errors: queue.Queue[FrameError | TooLong] = queue.Queue()
        self.closed = threading.Event()
        self.close_error: McpError | None = None
        self.closes = 0

    def on_closed(self, error: McpError | None) -> None:
        self.close_error = error
        self.closes += 1
        self.closed.set()

    def start(self, transport: StdioChildTransport) -> None:
        transport.start(self.messages.put, self.frame_errors.put, self.on_closed)

    def next(self) -> Message:
        return self.messages.get(timeout=WAIT)


def request(method: str, id: int = 1, **params: Any) -> Request:
    return Request(id, method, {"_meta": {}, **params})


def peer(*args: str, **kwargs: Any) -> StdioChildTransport:
    return StdioChildTransport([sys.executable, str(PEER), *args], **kwargs)


@pytest.fixture
def transports() -> Iterator[list[StdioChildTransport]]:
    made: list[StdioChildTransport] = []
    yield made
    for transport in made:
        transport.close(grace=1.0)


def started(
    transports: list[StdioChildTransport], *args: str, **kwargs: Any
) -> tuple[StdioChildTransport, Inbox]:
    transport = peer(*args, **kwargs)
    inbox = Inbox()
    inbox.start(transport)
    transports.append(transport)
    return transport, inbox


def wait_dead(pidfd: int) -> bool:
    """Wait until the process of ``pidfd`` ended (a readable pidfd); tell whether it did."""
    readable, _, _ = select.select([pidfd], [], [], WAIT)
    return bool(readable)


def is_reaped(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs os.pidfd_open (Linux)")


# -------------------------------------------------------------- the child


def test_messages_arrive_in_order_and_frame_errors_apart(
    transports: list[StdioChildTransport], caplog: pytest.LogCaptureFixture
) -> None:
    transport, inbox = started(transports, max_line_bytes=512)
    lines = ["garbage", '{"jsonrpc":"2.0","id":{id},"result":{"n":1}}', "x" * 600, "[]", '{"id":{id},"x":']
    with caplog.at_level(logging.WARNING, "mcpbridge.upstream"):
        transport.send(request("test/raw", lines=lines, answer=True))
        assert inbox.next() == Response(1, {"n": 1})
        assert inbox.next() == Response(1, {"resultType": "complete", "method": "test/raw"})
    # A line over the limit, and one that names a request, go to the consumer.
    errors = [inbox.frame_errors.get(timeout=WAIT) for _ in range(2)]
    assert isinstance(errors[0], TooLong) and errors[0].size == 600
    assert isinstance(errors[1], FrameError) and errors[1].id == 1
    # The lines that name no request are logged by the transport, without their content.
    warnings = [record.getMessage() for record in caplog.records if record.name == "mcpbridge.upstream"]
    assert warnings == [
        "the upstream server wrote a line of 7 bytes that is not valid JSON on stdout, and the bridge "
        "dropped it: the output of a server other than its messages belongs on stderr",
        "the upstream server wrote a message of 2 bytes that is not a valid JSON-RPC 2.0 message (the "
        "message is not an object), and the bridge dropped it",
    ]
    assert inbox.frame_errors.empty()
    assert not transport.gone


def test_the_nesting_limit_of_the_upstream_is_200_levels(transports: list[StdioChildTransport]) -> None:
    transport, inbox = started(transports)
    deep = "[" * 199 + "]" * 199
    too_deep = "[" * 200 + "]" * 200
    lines = [
        '{"jsonrpc":"2.0","id":7,"result":' + deep + "}",
        '{"jsonrpc":"2.0","id":8,"result":' + too_deep + "}",
    ]
    transport.send(request("test/raw", lines=lines))
    assert isinstance(inbox.next(), Response)
    error = inbox.frame_errors.get(timeout=WAIT)
    assert isinstance(error, FrameError) and error.cause == "too_deep" and error.id == 8


def spawn_failure(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """The detail of the SpawnFailed of ``argv``."""
    transport = StdioChildTransport(argv, env=env, cwd=None if cwd is None else str(cwd))
    with pytest.raises(SpawnFailed) as caught:
        Inbox().start(transport)
    transport.close()
    assert caught.value.detail is not None
    return caught.value.detail


def test_a_command_that_does_not_exist_fails_with_spawn_failed_naming_the_path_and_the_folder() -> None:
    detail = spawn_failure(["/nonexistent/mcp-server-for-tests", "--token=secret-3f1a"])
    assert detail == (
        "mcp-server-for-tests: No such file or directory (the path /nonexistent/mcp-server-for-tests; "
        f"the working directory {os.getcwd()})"
    )


def test_a_name_that_is_not_in_the_path_names_the_path_that_was_searched(tmp_path: Path) -> None:
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{tmp_path / 'tools'}"}
    detail = spawn_failure(["mcp-server-for-tests", "secret-3f1a"], env=env, cwd=tmp_path)
    assert detail == (
        f"mcp-server-for-tests: No such file or directory (not found in the PATH {env['PATH']}; "
        f"the working directory {tmp_path})"
    )


def test_a_relative_path_is_named_from_the_working_directory_and_a_file_that_cannot_run_too(
    tmp_path: Path,
) -> None:
    script = tmp_path / "server.py"
    script.write_text("print('never runs')\n", encoding="utf-8")
    script.chmod(0o644)
    detail = spawn_failure(["./server.py", "secret-3f1a"], cwd=tmp_path)
    assert detail == f"server.py: Permission denied (the path {script}; the working directory {tmp_path})"
    (tmp_path / "bin").mkdir()
    found = tmp_path / "bin" / "mcp-server-for-tests"
    found.write_text("no shebang, no program\n", encoding="utf-8")
    found.chmod(0o755)
    detail = spawn_failure(["mcp-server-for-tests"], env={"PATH": str(tmp_path / "bin")}, cwd=tmp_path)
    assert detail == (
        f"mcp-server-for-tests: Exec format error (the path {found}, found in the PATH; "
        f"the working directory {tmp_path})"
    )


def test_an_empty_command_fails_with_spawn_failed() -> None:
    with pytest.raises(SpawnFailed):
        Inbox().start(StdioChildTransport([]))


def test_the_exit_code_is_recorded_before_the_close_is_reported(
    transports: list[StdioChildTransport],
) -> None:
    transport, inbox = started(transports)
    transport.send(request("test/exit", code=3))
    assert inbox.closed.wait(WAIT)
    assert transport.gone
    assert transport.exit_status == "code 3"
    assert isinstance(inbox.close_error, Closed)
    assert inbox.close_error.detail == "the upstream server exited (code 3)"
    with pytest.raises(Closed):
        transport.send(request("test/echo"))


def test_a_child_killed_by_a_signal_reports_the_signal(transports: list[StdioChildTransport]) -> None:
    transport, inbox = started(transports)
    transport.send(request("test/kill-self"))
    assert inbox.closed.wait(WAIT)
    assert transport.exit_status == "signal 9"


def test_close_ends_a_well_behaved_child_through_the_end_of_its_stdin() -> None:
    transport = peer()
    inbox = Inbox()
    inbox.start(transport)
    pid = transport.pid
    assert pid is not None
    transport.close(grace=WAIT)
    assert transport.exit_status == "code 0"
    assert is_reaped(pid)
    assert inbox.closed.wait(WAIT)
    with pytest.raises(Closed):
        transport.send(request("test/echo"))
    transport.close()


def test_close_sends_sigterm_to_a_child_that_ignores_the_end_of_stdin() -> None:
    transport = peer("--ignore-eof")
    Inbox().start(transport)
    transport.close(grace=0.2)
    assert transport.exit_status == "signal 15"


def test_close_kills_a_child_that_ignores_sigterm_in_bounded_time() -> None:
    transport = peer("--ignore-eof", "--ignore-term")
    inbox = Inbox()
    inbox.start(transport)
    # The handler of SIGTERM is set before the peer reads its first line.
    transport.send(request("test/echo"))
    inbox.next()
    pid = transport.pid
    assert pid is not None
    # SIGTERM after the grace, SIGKILL after another.
    bounded(lambda: transport.close(grace=0.2), "the close", 0.4 + WAIT)
    assert transport.exit_status == "signal 9"
    assert is_reaped(pid)


@needs_pidfd
def test_close_kills_the_process_group_with_a_grandchild_left_behind(
    transports: list[StdioChildTransport],
) -> None:
    transport, inbox = started(transports)
    transport.send(request("test/spawn-grandchild"))
    reply = inbox.next()
    assert isinstance(reply, Response)
    grandchild = reply.result["pid"]
    pidfd = os.pidfd_open(grandchild)
    try:
        transport.close(grace=WAIT)
        # The server itself exited at the end of its stdin; its grandchild did not.
        assert transport.exit_status == "code 0"
        assert wait_dead(pidfd), "the grandchild survived the close"
    finally:
        os.close(pidfd)


@needs_pidfd
def test_the_exit_of_the_child_ends_the_connection_while_a_grandchild_holds_its_stdout(
    transports: list[StdioChildTransport],
) -> None:
    """The pipe of the child's stdout stays open in the grandchild: no end of the output comes,
    so the exit of the child itself ends the connection, after the lines it wrote."""
    transport, inbox = started(transports)
    transport.send(request("test/spawn-grandchild", holds_stdout=True))
    reply = inbox.next()
    assert isinstance(reply, Response)
    pidfd = os.pidfd_open(reply.result["pid"])
    try:
        transport.send(request("test/echo", id=2))
        transport.send(request("test/kill-self", id=3))
        answer = inbox.next()
        assert isinstance(answer, Response) and answer.id == 2
        assert inbox.closed.wait(WAIT), "the exit of the child did not end the connection"
        assert transport.gone
        assert transport.exit_status == "signal 9"
        assert isinstance(inbox.close_error, Closed)
        assert inbox.close_error.detail == "the upstream server exited (signal 9)"
        with pytest.raises(Closed):
            transport.send(request("test/echo", id=4))
        # The close ends the process group: the grandchild, and with it the output.
        transport.close(grace=WAIT)
        assert wait_dead(pidfd), "the grandchild survived the close"
        assert inbox.closes == 1
    finally:
        os.close(pidfd)


def test_kill_stops_the_child_at_once(transports: list[StdioChildTransport]) -> None:
    transport, inbox = started(transports, "--ignore-eof", "--ignore-term")
    transport.kill()
    assert inbox.closed.wait(WAIT)
    assert transport.exit_status == "signal 9"
    transport.close(grace=0.1)


def test_a_child_that_closes_its_stdout_is_gone_while_it_still_runs(
    transports: list[StdioChildTransport],
) -> None:
    transport, inbox = started(transports)
    transport.send(request("test/close-stdout"))
    assert isinstance(inbox.next(), Response)
    assert inbox.closed.wait(WAIT)
    assert transport.gone
    assert transport.exit_status is None
    assert isinstance(inbox.close_error, Closed)
    transport.close(grace=WAIT)
    assert transport.exit_status == "code 0"


#: The writers of the child's stdin: the system's (``poll`` here) and the thread writer of Windows.
WRITERS = pytest.mark.parametrize("threaded_writer", [None, True], ids=["system-writer", "thread-writer"])


@WRITERS
def test_a_child_that_stops_reading_its_stdin_fails_a_send_in_bounded_time(
    transports: list[StdioChildTransport], threaded_writer: bool | None
) -> None:
    transport, inbox = started(
        transports, write_timeout=0.3, max_queued_bytes=1024, threaded_writer=threaded_writer
    )
    transport.send(request("test/stop-reading"))
    assert isinstance(inbox.next(), Response)
    blob = "x" * (256 * 1024)

    def send_until_full() -> None:
        # The first frame fills the pipe and stays in the queue; the next one finds no room.
        for n in range(10):
            transport.send(request("test/echo", id=n + 2, blob=blob))

    with pytest.raises(TransportFailed) as caught:
        bounded(send_until_full, "the sends to a child that does not read")
    assert caught.value.detail == "the upstream server does not read its input"
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        transport.send(request("test/echo", id=99, blob=blob), cancel=token)
    # The close does not wait for the stuck writer.
    bounded(lambda: transport.close(grace=0.2), "the close")
    assert transport.exit_status == "signal 15"  # it never reads the end of its input


@WRITERS
def test_frames_of_every_size_reach_the_child_whole_and_in_order(
    transports: list[StdioChildTransport], threaded_writer: bool | None
) -> None:
    transport, inbox = started(transports, threaded_writer=threaded_writer)
    sizes = [0, 1, 70_000, 3 * 1024 * 1024, 5]
    for n, size in enumerate(sizes):
        transport.send(request("test/echo", id=n + 1, blob="y" * size))
    for n, size in enumerate(sizes):
        reply = inbox.next()
        assert isinstance(reply, Response) and reply.id == n + 1
        assert len(reply.result["params"]["blob"]) == size
    transport.close(grace=WAIT)
    assert transport.exit_status == "code 0"


def test_the_thread_writer_is_the_one_of_windows() -> None:
    from mcpbridge.platform import ThreadPipeWriter, windows

    read_end, write_end = os.pipe()
    try:
        assert isinstance(windows.pipe_writer(write_end), ThreadPipeWriter)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_stderr_lines_go_to_the_sink_in_order(transports: list[StdioChildTransport]) -> None:
    lines: queue.Queue[str] = queue.Queue()
    transport, inbox = started(transports, "--stderr", "first|second \u00e9|third", stderr_sink=lines.put)
    assert [lines.get(timeout=WAIT) for _ in range(3)] == ["first", "second \u00e9", "third"]
    assert [t.name for t in threading.enumerate() if t.name == "mcpbridge-upstream-stderr"]


def test_a_send_before_start_fails_and_an_unserializable_message_is_refused() -> None:
    transport = peer()
    with pytest.raises(NotConnected):
        transport.send(request("test/echo"))
    with pytest.raises(InvalidRequest):
        transport.send(request("test/echo", bad=object()))
    transport.close()


def test_the_threads_are_named_and_all_gone_after_close() -> None:
    transport = peer()
    Inbox().start(transport)
    names = {t.name for t in threading.enumerate() if t.name.startswith("mcpbridge-upstream-")}
    assert names == {
        "mcpbridge-upstream-reaper",
        "mcpbridge-upstream-reader",
        "mcpbridge-upstream-writer",
        "mcpbridge-upstream-stderr",
    }
    transport.close(grace=WAIT)
    assert not [t for t in threading.enumerate() if t.name.startswith("mcpbridge-upstream-")]


ORPHAN_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    sys.path.insert(0, sys.argv[1])
    from mcpbridge.mcp.transports.stdio import StdioChildTransport
    t = StdioChildTransport([sys.executable, sys.argv[2], "--ignore-eof", "--ignore-term"])
    t.start(lambda m: None, lambda e: None, lambda e: None)
    print(t.pid, flush=True)
    threading.Event().wait(60)
    """
)


@needs_pidfd
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux only")
def test_the_child_dies_with_a_bridge_that_was_killed() -> None:
    bridge = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_SCRIPT, str(REPO), str(PEER)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        assert bridge.stdout is not None
        child = int(read_line(bridge.stdout, "the pid of the child"))
        pidfd = os.pidfd_open(child)
        try:
            bridge.kill()
            assert wait_dead(pidfd), "the child outlived its killed parent"
        finally:
            os.close(pidfd)
    finally:
        bridge.kill()
        bridge.wait(WAIT)
        if bridge.stdout is not None:
            bridge.stdout.close()


# ------------------------------------------------ our client, our server, stdio


def test_our_client_talks_to_our_fixture_server_over_stdio() -> None:
    transport = StdioChildTransport([sys.executable, str(FIXTURE)])
    client = Client(transport, client_info=CLIENT_INFO)
    client.start()
    events: list[str] = []
    try:
        discovered = client.discover(timeout=WAIT)
        assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bridge-fixture-server"
        added = client.request("tools/call", {"name": "add", "arguments": {"a": 40, "b": 2}}, timeout=WAIT)
        assert added["content"] == [{"type": "text", "text": "42"}]
        progress: list[Any] = []
        client.request(
            "tools/call",
            {"name": "progress", "arguments": {"count": 3}},
            timeout=WAIT,
            on_progress=lambda p: progress.append(p["progress"]),
        )
        assert progress == [1, 2, 3]
        subscription = client.listen(
            {"toolsListChanged": True, "resourceSubscriptions": [NOTES_URI]},
            on_event=lambda note: events.append(note.method),
        )
        assert subscription.wait_acknowledged(WAIT) == {
            "toolsListChanged": True,
            "resourceSubscriptions": [NOTES_URI],
        }
        client.request("tools/call", {"name": "toggle", "arguments": {"enabled": False}}, timeout=WAIT)
        assert events == ["notifications/tools/list_changed"]
        client.request("tools/call", {"name": "touch", "arguments": {"uri": NOTES_URI}}, timeout=WAIT)
        assert events == ["notifications/tools/list_changed", "notifications/resources/updated"]
        subscription.cancel("done")
        with pytest.raises(Cancelled):
            subscription.wait_ended(WAIT)
    finally:
        client.close(grace=WAIT)
    assert transport.exit_status == "code 0"


def test_our_client_asks_the_demo_server_for_a_form_and_gets_the_greeting() -> None:
    client = Client(
        StdioChildTransport([sys.executable, "-m", "mcpbridge.demo"], cwd=str(REPO)), client_info=CLIENT_INFO
    )
    client.start()
    capabilities = {"elicitation": {"form": {}}}
    try:
        assert client.discover(timeout=WAIT)["capabilities"]["tools"]
        echoed = client.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, timeout=WAIT)
        assert echoed["content"] == [{"type": "text", "text": "hi"}]
        call = {"name": "ask_name", "arguments": {}}
        first = client.request(
            "tools/call", call, timeout=WAIT, capabilities=capabilities, allow_input_required=True
        )
        assert first["resultType"] == "input_required"
        [key] = first["inputRequests"]
        retry = {**call, "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}}
        if "requestState" in first:
            retry["requestState"] = first["requestState"]
        final = client.request("tools/call", retry, timeout=WAIT, capabilities=capabilities)
        assert "Ada" in final["content"][0]["text"]
    finally:
        client.close(grace=WAIT)
    assert client.exit_status == "code 0"


# ------------------------------------------------------------ our own stdio


class Pipes:
    """Two OS pipes standing in for the stdin and stdout of a server process."""

    def __init__(self) -> None:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        self.server_in = os.fdopen(in_r, "rb")
        self.client_out = os.fdopen(in_w, "wb", buffering=0)
        self.server_out = os.fdopen(out_w, "wb")
        self.client_in = os.fdopen(out_r, "rb")
        self.messages: queue.Queue[Message] = queue.Queue()
        self.errors: queue.Queue[FrameError | TooLong] = queue.Queue()
        self.closed = threading.Event()

    def transport(self, **kwargs: Any) -> StdioServerTransport:
        transport = StdioServerTransport(self.server_in, self.server_out, **kwargs)
        transport.start(self.messages.put, self.errors.put, self.closed.set)
        return transport

    def close(self) -> None:
        for stream in (self.server_in, self.client_out, self.server_out, self.client_in):
            try:
                stream.close()
            except OSError:
                pass


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    p = Pipes()
    yield p
    p.close()


def test_the_server_transport_delivers_lines_in_order_and_reports_the_end(pipes: Pipes) -> None:
    transport = pipes.transport(max_line_bytes=190)
    pipes.client_out.write(b'{"jsonrpc":"2.0","id":1,"method":"a"}\n\n')
    pipes.client_out.write(b'{"jsonrpc":"2.0","method":"b"}\r\nnot json\n' + b"y" * 300 + b"\n")
    deep = b"[" * 65 + b"]" * 65
    pipes.client_out.write(b'{"jsonrpc":"2.0","id":2,"method":"c","params":{"x":' + deep + b"}}\n")
    pipes.client_out.close()
    assert pipes.messages.get(timeout=WAIT) == Request(1, "a")
    assert pipes.messages.get(timeout=WAIT) == Notification("b")
    errors = [pipes.errors.get(timeout=WAIT) for _ in range(2)]
    assert isinstance(errors[0], FrameError) and errors[0].cause == "parse_error"
    assert isinstance(errors[1], TooLong)
    assert pipes.closed.wait(WAIT)
    # The depth limit of the server side is 64 levels.
    error = pipes.errors.get_nowait()
    assert isinstance(error, FrameError) and error.cause == "too_deep" and error.id == 2
    transport.close()


def test_windows_input_a_bom_at_the_start_and_crlf_lines_is_read_and_a_later_bom_is_not(
    pipes: Pipes,
) -> None:
    transport = pipes.transport()
    pipes.client_out.write(b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"a"}\r\n')
    pipes.client_out.write(b'{"jsonrpc":"2.0","id":2,"method":"b"}\r\n\r\n')
    pipes.client_out.write(b'\xef\xbb\xbf{"jsonrpc":"2.0","id":3,"method":"c"}\r\n')
    pipes.client_out.close()
    assert pipes.messages.get(timeout=WAIT) == Request(1, "a")
    assert pipes.messages.get(timeout=WAIT) == Request(2, "b")
    error = pipes.errors.get(timeout=WAIT)
    assert isinstance(error, FrameError) and error.cause == "parse_error"
    assert pipes.closed.wait(WAIT)
    assert pipes.messages.empty()
    transport.close()


def test_a_bom_alone_on_the_first_line_is_a_blank_line(pipes: Pipes) -> None:
    transport = pipes.transport()
    pipes.client_out.write(b'\xef\xbb\xbf\r\n{"jsonrpc":"2.0","id":1,"method":"a"}\n')
    pipes.client_out.close()
    assert pipes.messages.get(timeout=WAIT) == Request(1, "a")
    assert pipes.closed.wait(WAIT)
    assert pipes.errors.empty()
    transport.close()


def test_concurrent_sends_of_the_server_transport_never_mix_their_lines(pipes: Pipes) -> None:
    transport = pipes.transport()
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(pipes.client_in), name="test-pipe-reader")
    reader.start()
    text = "z" * 20_000

    def write(n: int) -> None:
        for k in range(20):
            transport.send(Notification("notifications/message", {"n": n, "k": k, "data": text}))

    writers = [threading.Thread(target=write, args=(n,), name=f"test-writer-{n}") for n in range(10)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(WAIT)
    pipes.server_out.close()
    reader.join(WAIT)
    parsed = [jsonrpc.parse(line, max_depth=10) for line in lines]
    assert len(parsed) == 200
    assert all(isinstance(m, Notification) and m.params and m.params["data"] == text for m in parsed)
    pipes.client_out.close()
    assert pipes.closed.wait(WAIT)
    transport.close()


def test_a_send_after_close_or_to_a_closed_output_raises_closed(pipes: Pipes) -> None:
    transport = pipes.transport()
    pipes.client_in.close()
    with pytest.raises(Closed):
        for _ in range(100):
            transport.send(Notification("notifications/message", {"data": "x" * 10_000}))
    transport.close()
    with pytest.raises(Closed):
        transport.send(Notification("x"))
    pipes.client_out.close()
    assert pipes.closed.wait(WAIT)


def test_the_server_transport_refuses_an_unserializable_message_and_its_reader_ends_with_the_input(
    pipes: Pipes,
) -> None:
    transport = pipes.transport()
    with pytest.raises(InvalidRequest):
        transport.send(Notification("x", {"bad": object()}))
    pipes.client_out.close()
    assert pipes.closed.wait(WAIT)
    transport.close()
    assert not [t for t in threading.enumerate() if t.name == "mcpbridge-server-reader"]
