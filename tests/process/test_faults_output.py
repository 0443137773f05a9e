"""A client that reads the bridge's stdout slowly or not at all: the reader goes on up to the
bound of the output, waits there for the client, and the bridge ends in time.

The bridge runs as a real process with the wiring of ``mcp-bridge-vscode -- <command>``
(only the stall timeout and the bound of the output set through their options). The
upstream is ``tests/peers/bad_upstream.py``, which writes ``bad_upstream: cancelled`` to
stderr (the bridge passes it on to its own stderr) when a ``silent`` call is canceled.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from conftest import read_line
from harness import WAIT
from mcpbridge.bridge.front.options import OUTPUT_STALL_TIMEOUT
from mcpbridge.bridge.front.output import MAX_QUEUED_BYTES, Output

BAD_UPSTREAM = Path(__file__).resolve().parents[1] / "peers" / "bad_upstream.py"
#: The stall timeout of the runs here, in place of 60 s.
STALL = 3.0
#: A request id this long makes each answer of a ping about 64 KiB: a few fill any pipe.
LONG_ID = "p" * 65536
#: The pings: more answers than the pipe of stdout (1 MiB at most) and its buffers hold.
PINGS = 64

#: The bound of the output in the runs that meet it: a few hundred pings fill it.
BOUND = 256 * 1024
#: The id of a ping there: each line and each answer is about 1 KiB.
KIB_ID = "k" * 1000
#: What the client of those runs writes at most: many times what the bridge may take in.
BUDGET = 16 * 1024 * 1024

#: The bridge of ``mcp-bridge-vscode -- <command>`` with ``output_stall_timeout`` from argv[1]
#: and ``max_output_bytes`` from argv[2].
BRIDGE = """
import sys
from mcpbridge import __version__, log
from mcpbridge.bridge.front.frontend import Frontend
from mcpbridge.bridge.front.options import Options
from mcpbridge.bridge.sessions.childshare import StdioUpstream
from mcpbridge.vscode.serving import exit_now, serve

log.configure("debug")
stall, bound = float(sys.argv[1]), int(sys.argv[2])
options = Options(
    fallback_name="t",
    version=__version__,
    forward_on_reader=True,
    output_stall_timeout=stall,
    max_output_bytes=bound,
)
upstream = StdioUpstream(sys.argv[3:], max_line_bytes=64 * 1024 * 1024)
frontend = Frontend(sys.stdin.buffer, sys.stdout.buffer, upstream.connect, options, legacy=upstream)
exit_now(serve(frontend))
"""


def frame(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


class Pour:
    """Write lines to a pipe on a thread, as fast as it takes them, and count the bytes it took.

    The thread ends when every line is written or the pipe breaks (the process ended).
    """

    def __init__(self, stream: Any, lines: Iterable[bytes]) -> None:
        self.written = 0
        self._fd = stream.fileno()
        self._thread = threading.Thread(target=self._pour, args=(lines,), name="test-stdin", daemon=True)
        self._thread.start()

    def _pour(self, lines: Iterable[bytes]) -> None:
        try:
            for line in lines:
                view = memoryview(line)
                while view:
                    written = os.write(self._fd, view)
                    self.written += written
                    view = view[written:]
        except OSError:  # the process ended
            pass

    def join(self) -> None:
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "the lines are still being written"


class Lines:
    """The lines of a stream, read on a thread; each wait has a deadline."""

    def __init__(self, stream: Any, name: str) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), name=name, daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            self._queue.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self._queue.put(None)

    def next(self, timeout: float = WAIT) -> str | None:
        """The next line, or ``None`` at the end of the stream."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout} s after: {self.lines[-20:]}") from None
        if line is not None:
            self.lines.append(line)
        return line

    def wait_for(self, text: str, timeout: float = WAIT) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(max(0.0, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"the stream ended without {text!r}: {self.lines[-20:]}")
            if text in line:
                return line


@contextlib.contextmanager
def initialized_bridge(stall: float, bound: int) -> Iterator[tuple[subprocess.Popen[bytes], Lines]]:
    """A bridge past ``initialize`` and its stderr lines; its stdout is the test's to read."""
    process = subprocess.Popen(
        [sys.executable, "-c", BRIDGE, str(stall), str(bound), sys.executable, str(BAD_UPSTREAM)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    stderr = Lines(process.stderr, "test-stderr")
    try:
        send = process.stdin
        client = {"name": "t", "version": "1"}
        send.write(
            frame(
                1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
            )
        )
        send.flush()
        assert json.loads(read_line(process.stdout, "the answer to initialize"))["id"] == 1
        send.write(frame(None, "notifications/initialized"))
        send.flush()
        yield process, stderr
    finally:
        end_bridge(process)
    assert not [text for text in stderr.lines if "Traceback" in text]


def end_bridge(process: subprocess.Popen[bytes]) -> None:
    """Kill the bridge if it still runs and close its pipes: the end of a test's bridge."""
    if process.poll() is None:
        process.kill()
        process.wait(WAIT)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    try:
        if process.stdin is not None:
            process.stdin.close()
    except OSError:
        pass


def pings(count: int) -> Iterator[bytes]:
    """``count`` pings of about 1 KiB each, numbered in their ids."""
    return (frame(f"{KIB_ID}-{n}", "ping") for n in range(count))


def intake(process: subprocess.Popen[bytes]) -> int:
    """The most bytes of input the bridge may take in while its client reads nothing: the bound,
    the pipes of stdin and stdout, and a line with its answer in its hands (and buffers)."""
    streams = (process.stdin, process.stdout)
    pipes = sum(fcntl.fcntl(stream.fileno(), fcntl.F_GETPIPE_SZ) for stream in streams if stream is not None)
    return BOUND + pipes + 256 * 1024


def test_a_client_that_stops_reading_does_not_stop_the_reader_and_the_bridge_ends_after_the_stall() -> None:
    assert OUTPUT_STALL_TIMEOUT == 60.0
    with initialized_bridge(STALL, MAX_QUEUED_BYTES) as (process, stderr):
        assert process.stdin is not None
        send = process.stdin
        send.write(frame(2, "tools/call", {"name": "silent", "arguments": {}}))
        send.flush()
        stderr.wait_for("bad_upstream: silent")  # the call is with the upstream
        # Answers that the reader writes itself, more than the pipe holds: nobody reads them.
        # Then the cancellation. A reader that stopped would stop these writes too: they run
        # on a thread of their own, and the test waits for their effect with a deadline.
        lines = [frame(LONG_ID, "ping")] * PINGS + [b"not json\n"]
        lines.append(frame(None, "notifications/cancelled", {"requestId": 2, "reason": "test"}))
        writer = Pour(send, lines)
        # The reader still reads: the cancellation reaches the upstream.
        stderr.wait_for("bad_upstream: cancelled")
        writer.join()
        # The client read nothing while output waited: the bridge ends as at the end of its input.
        line = stderr.wait_for("the client has read nothing for", timeout=STALL + WAIT)
        assert line == (
            "mcp-bridge-vscode: bridge: error: the client has read nothing for 3 s while output waits "
            "for it, thus the bridge ends the connection"
        )
        assert process.wait(WAIT) == 0


def test_at_the_bound_of_the_output_the_reader_stops_reading_and_a_silent_client_is_ended() -> None:
    assert MAX_QUEUED_BYTES == 64 * 1024 * 1024  # the bound that docs/how-it-works.rst tells
    with initialized_bridge(STALL, BOUND) as (process, stderr):
        assert process.stdin is not None
        # Many times the bound in pings, as fast as the bridge takes them, and nothing read.
        writer = Pour(process.stdin, pings(BUDGET // 1024))
        # A reader that waits for room does not keep the stall rule from ending the bridge.
        stderr.wait_for("the client has read nothing for", timeout=STALL + WAIT)
        assert process.wait(WAIT) == 0
        writer.join()  # the pipe broke at the exit
        assert writer.written <= intake(process), f"the bridge took in {writer.written} bytes"


def test_a_reader_that_waits_at_the_bound_reads_on_when_the_client_reads() -> None:
    with initialized_bridge(OUTPUT_STALL_TIMEOUT, BOUND) as (process, stderr):
        assert process.stdin is not None and process.stdout is not None
        send = process.stdin
        send.write(frame("call", "tools/call", {"name": "silent", "arguments": {}}))
        send.flush()
        stderr.wait_for("bad_upstream: silent")
        # More pings than the bridge takes in while nobody reads, then the call's cancellation.
        count = 2 * intake(process) // 1024
        lines = itertools.chain(
            pings(count),
            [frame(None, "notifications/cancelled", {"requestId": "call"}), frame("last", "ping")],
        )
        writer = Pour(send, lines)
        stderr.wait_for("so the bridge stops reading the client until it reads")
        # The client reads again: each ping gets its answer once, in order; the reader reads on
        # to the cancellation, and the canceled call gets no response.
        stdout = Lines(process.stdout, "test-stdout")
        ids = [json.loads(stdout.next() or "{}").get("id") for _ in range(count + 1)]
        assert ids == [f"{KIB_ID}-{n}" for n in range(count)] + ["last"]
        stderr.wait_for("bad_upstream: cancelled")
        writer.join()
        send.close()
        assert process.wait(WAIT) == 0
        assert stdout.next() is None, "a response after the last ping"


def test_the_output_keeps_the_order_of_its_frames_and_only_the_reader_does_not_wait_for_its_writes() -> None:
    """The :class:`Output` over a real pipe that nobody reads for a while."""
    read_fd, write_fd = os.pipe()
    reader_end = os.fdopen(read_fd, "rb")
    writer_end = os.fdopen(write_fd, "wb")
    output = Output(writer_end)
    big = b"x" * (2 * 1024 * 1024)  # more than any pipe holds
    written = threading.Event()

    def slot() -> None:
        assert output.write_frame(b'{"n":1,"pad":"' + big + b'"}\n')
        written.set()

    def reader() -> None:
        assert output.write_frame(b'{"n":2}\n') and output.write_frame(b'{"n":3}\n')

    # A slot thread writes a frame larger than the pipe: it waits until the frame is read.
    slot_thread = threading.Thread(target=slot, name="test-slot")
    slot_thread.start()
    poller = select.poll()
    poller.register(read_fd, select.POLLIN)
    assert poller.poll(WAIT * 1000), "the slot did not start to write"
    # The reader's frames queue behind it and return at once, while nobody reads.
    reader_thread = threading.Thread(target=reader, name="test-reader")
    output.set_reader(reader_thread)
    reader_thread.start()
    reader_thread.join(WAIT)
    assert not reader_thread.is_alive() and not written.is_set()
    # The client reads: every frame arrives once, in the order of the queue.
    lines = [read_line(reader_end, f"frame {n} of the queue") for n in (1, 2, 3)]
    slot_thread.join(WAIT)
    assert written.is_set()
    assert [json.loads(line)["n"] for line in lines] == [1, 2, 3]
    output.close(WAIT)
    assert output.waiting() == 0.0 and not output.write_frame(b"{}\n")
    writer_end.close()
    reader_end.close()


class _LogEvent(logging.Handler):
    """Set an event when the log has a line with ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


def test_at_its_bound_the_output_makes_the_reader_wait_until_the_client_reads() -> None:
    """The bound counts a frame until it is written: behind a frame larger than the bound the
    reader waits for room, and goes on when the client has read."""
    logger = logging.getLogger("mcpbridge.bridge")
    paused = _LogEvent("so the bridge stops reading the client until it reads")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(paused)
    read_fd, write_fd = os.pipe()
    reader_end = os.fdopen(read_fd, "rb")
    writer_end = os.fdopen(write_fd, "wb")
    output = Output(writer_end, max_queued=64 * 1024)
    try:
        big = b"x" * (2 * 1024 * 1024)  # more than the bound and than any pipe holds
        slot_thread = threading.Thread(
            target=lambda: output.write_frame(b'{"n":1,"pad":"' + big + b'"}\n'), name="test-slot"
        )
        slot_thread.start()
        poller = select.poll()
        poller.register(read_fd, select.POLLIN)
        assert poller.poll(WAIT * 1000), "the slot did not start to write"
        returned: list[bool] = []
        reader_thread = threading.Thread(
            target=lambda: returned.append(output.write_frame(b'{"n":2}\n')), name="test-reader"
        )
        output.set_reader(reader_thread)
        reader_thread.start()
        assert paused.seen.wait(WAIT), "the reader did not wait for room"
        assert not returned
        # The client reads: the reader's frame joins the queue and follows the first one.
        lines = [read_line(reader_end, f"frame {n} of the queue") for n in (1, 2)]
        reader_thread.join(WAIT)
        slot_thread.join(WAIT)
        assert returned == [True]
        assert [json.loads(line)["n"] for line in lines] == [1, 2]
    finally:
        logger.removeHandler(paused)
        logger.setLevel(level)
        output.close(WAIT)
        writer_end.close()
        reader_end.close()


def test_an_upstream_that_exits_while_the_client_reads_nothing_still_ends_the_bridge() -> None:
    # The stall rule is far away: only the exit of the upstream can end this bridge. The
    # watcher that sees it answers the calls in flight with errors; with nobody reading, those
    # errors wait in the queue for the grace of the close, and the watcher does not wait for them.
    with initialized_bridge(OUTPUT_STALL_TIMEOUT, MAX_QUEUED_BYTES) as (process, stderr):
        assert process.stdin is not None
        send = process.stdin
        send.write(frame(2, "tools/call", {"name": "silent", "arguments": {}}))
        send.flush()
        stderr.wait_for("bad_upstream: silent")
        # More answers than the pipe of stdout holds, then the call that ends the upstream.
        lines = [frame(LONG_ID, "ping")] * PINGS
        lines.append(frame(3, "tools/call", {"name": "exit", "arguments": {"code": 5}}))
        writer = Pour(send, lines)
        writer.join()
        stderr.wait_for("the upstream server exited with")
        assert process.wait(WAIT) == 1


def test_a_client_that_reads_a_large_answer_slowly_is_reading_and_not_stalled() -> None:
    # An answer of 512 KiB read at about 100 KiB/s takes five seconds, longer than the stall
    # time here; each piece the client takes counts as progress, so the bridge goes on.
    with initialized_bridge(STALL, MAX_QUEUED_BYTES) as (process, stderr):
        assert process.stdin is not None and process.stdout is not None
        # The default size of a pipe: some systems are set to give more.
        fcntl.fcntl(process.stdout.fileno(), fcntl.F_SETPIPE_SZ, 64 * 1024)
        long_id = "q" * (512 * 1024)
        process.stdin.write(frame(long_id, "ping"))
        process.stdin.write(frame(7, "ping"))
        process.stdin.flush()
        received = bytearray()
        fd = process.stdout.fileno()
        deadline = time.monotonic() + 6 * STALL + WAIT
        while received.count(b"\n") < 2:
            assert time.monotonic() < deadline, f"{len(received)} bytes of the answers in time"
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                chunk = os.read(fd, 4096)
                assert chunk, f"the bridge closed its output after {len(received)} bytes"
                received += chunk
            time.sleep(0.04)  # the pace of a slow client, not a synchronization
        first, second = bytes(received).splitlines()
        assert json.loads(first) == {"jsonrpc": "2.0", "id": long_id, "result": {}}
        assert json.loads(second) == {"jsonrpc": "2.0", "id": 7, "result": {}}
        assert not [line for line in stderr.lines if "has read nothing" in line]
        process.stdin.close()
        assert process.wait(WAIT) == 0
