"""A client that stops reading the bridge's stdout: the reader goes on, and the bridge ends in time.

The bridge runs as a real process with the wiring of ``mcp-bridge-vscode -- <command>``
(only the stall timeout lowered through its option). The upstream is
``tests/peers/bad_upstream.py``, which writes ``bad_upstream: cancelled`` to stderr
(the bridge passes it on to its own stderr) when a ``silent`` call is canceled.
"""

from __future__ import annotations

import contextlib
import json
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

from harness import WAIT
from mcpbridge.bridge.options import OUTPUT_STALL_TIMEOUT
from mcpbridge.bridge.output import Output

BAD_UPSTREAM = Path(__file__).resolve().parents[1] / "peers" / "bad_upstream.py"
#: The stall timeout of the runs here, in place of 60 s.
STALL = 3.0
#: A request id this long makes each answer of a ping about 64 KiB: a few fill any pipe.
LONG_ID = "p" * 65536
#: The pings: more answers than the pipe of stdout (1 MiB at most) and its buffers hold.
PINGS = 64

#: The bridge of ``mcp-bridge-vscode -- <command>`` with ``output_stall_timeout`` from argv[1].
BRIDGE = """
import sys
from mcpbridge import __version__, log
from mcpbridge.bridge.frontend import Frontend
from mcpbridge.bridge.options import Options
from mcpbridge.bridge.passthrough import StdioUpstream
from mcpbridge.vscode.serving import exit_now, serve

log.configure("debug")
stall = float(sys.argv[1])
options = Options(fallback_name="t", version=__version__, forward_on_reader=True, output_stall_timeout=stall)
upstream = StdioUpstream(sys.argv[2:], max_line_bytes=64 * 1024 * 1024)
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
def initialized_bridge(stall: float) -> Iterator[tuple[subprocess.Popen[bytes], Lines]]:
    """A bridge past ``initialize`` and its stderr lines; its stdout is the test's to read."""
    process = subprocess.Popen(
        [sys.executable, "-c", BRIDGE, str(stall), sys.executable, str(BAD_UPSTREAM)],
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
        assert json.loads(process.stdout.readline())["id"] == 1
        send.write(frame(None, "notifications/initialized"))
        send.flush()
        yield process, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(WAIT)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        try:
            process.stdin.close()
        except OSError:
            pass
    assert not [text for text in stderr.lines if "Traceback" in text]


def test_a_client_that_stops_reading_does_not_stop_the_reader_and_the_bridge_ends_after_the_stall() -> None:
    assert OUTPUT_STALL_TIMEOUT == 60.0
    with initialized_bridge(STALL) as (process, stderr):
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


def test_the_output_keeps_the_order_of_its_frames_and_only_the_reader_never_waits() -> None:
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
    lines = [reader_end.readline() for _ in range(3)]
    slot_thread.join(WAIT)
    assert written.is_set()
    assert [json.loads(line)["n"] for line in lines] == [1, 2, 3]
    output.close(WAIT)
    assert output.waiting() == 0.0 and not output.write_frame(b"{}\n")
    writer_end.close()
    reader_end.close()
