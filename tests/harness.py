"""Drive the real ``mcp-bridge-vscode`` executable over real pipes, as VS Code does."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from conftest import REPO_ROOT, WAIT
from schema import ClientFrames

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "fixture_server.py"

#: Every captured stderr text of the suite, for the secret scans.
CAPTURED: list[str] = []

VSCODE_CAPABILITIES: dict[str, Any] = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
}
VSCODE_INFO: dict[str, Any] = {"name": "Visual Studio Code", "version": "1.140.0"}


def fixture_command(*args: str) -> list[str]:
    return [sys.executable, str(FIXTURE), *args]


def bridge_command(*options: str, upstream: list[str] | None = None) -> list[str]:
    command = [sys.executable, "-m", "mcpbridge", *options]
    if upstream is not None:
        command += ["--", *upstream]
    return command


class Bridge:
    """A bridge process with a reader thread that collects its stdout frames.

    With ``revision``, each frame that the test sends is the frame of a client of that
    revision, and each frame that it takes is checked against that revision's schema
    (:class:`~schema.ClientFrames`, strict): a frame that is not valid fails the test where it
    is read. At the end of the ``with`` block every frame that the bridge wrote and the test
    did not read is checked too, so none goes unchecked.
    """

    def __init__(
        self, command: list[str], env: dict[str, str] | None = None, revision: str | None = None
    ) -> None:
        full_env = dict(os.environ)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        if env:
            full_env.update(env)
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=full_env,
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.raw_lines: list[bytes] = []
        self.stderr_lines: list[str] = []
        self._stderr_done = threading.Event()
        #: Notified at each stderr line and at the end of stderr.
        self._stderr_changed = threading.Condition()
        #: Notified at each stdout line.
        self._stdout_changed = threading.Condition()
        self._stdout_thread = threading.Thread(
            target=self._read_stdout, name="test-bridge-stdout", daemon=True
        )
        self._stderr_thread = threading.Thread(
            target=self._read_stderr, name="test-bridge-stderr", daemon=True
        )
        self._stdout_thread.start()
        self._stderr_thread.start()
        self._next_id = 0
        self.seen: list[dict[str, Any]] = []
        self.schema = ClientFrames(revision) if revision is not None else None

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.frames.put(json.loads(line))
            except ValueError:
                self.frames.put({"__invalid__": line.decode("utf-8", "replace")})
            with self._stdout_changed:
                self.raw_lines.append(line)
                self._stdout_changed.notify_all()
        self.frames.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = line.decode("utf-8", "replace")
            with self._stderr_changed:
                self.stderr_lines.append(text)
                self._stderr_changed.notify_all()
            CAPTURED.append(text)
        with self._stderr_changed:
            self._stderr_done.set()
            self._stderr_changed.notify_all()

    # -------------------------------------------------------------- sending

    def send(self, frame: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        if self.schema is not None and isinstance(frame, dict):
            self.schema.sent(frame)
        data = frame if isinstance(frame, bytes) else json.dumps(frame).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request_async(self, method: str, params: dict[str, Any] | None = None, id: Any = None) -> Any:
        request_id = self.new_id() if id is None else id
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)
        return request_id

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = WAIT
    ) -> dict[str, Any]:
        request_id = self.request_async(method, params)
        return self.wait_response(request_id, timeout)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)

    def initialize(
        self,
        capabilities: dict[str, Any] | None = None,
        initialized: bool = True,
        *,
        protocol_version: str | None = None,
        client_info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``initialize`` as VS Code sends it; a client of ``revision`` asks for its own revision."""
        if protocol_version is None:
            protocol_version = self.schema.revision if self.schema is not None else "2025-11-25"
        response = self.request(
            "initialize",
            {
                "protocolVersion": protocol_version,
                "capabilities": VSCODE_CAPABILITIES if capabilities is None else capabilities,
                "clientInfo": VSCODE_INFO if client_info is None else client_info,
            },
            timeout=30.0,
        )
        if initialized and "result" in response:
            self.notify("notifications/initialized")
        return response

    # ------------------------------------------------------------ receiving

    def next_frame(self, timeout: float = WAIT) -> dict[str, Any]:
        frame = self.frames.get(timeout=timeout)
        if frame is None:
            self.frames.put(None)
            raise EOFError("the bridge closed its stdout")
        self.seen.append(frame)
        if self.schema is not None:
            self.schema.received(frame)
        return frame

    def wait_response(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        """Wait for the response to ``request_id``; other frames are kept in ``seen``."""
        deadline = time.monotonic() + timeout
        for frame in self.seen:
            if frame.get("id") == request_id and "method" not in frame:
                return frame
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no response to {request_id!r}")
            frame = self.next_frame(remaining)
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    def wait_frame(self, predicate: Any, timeout: float = WAIT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no such frame")
            frame = self.next_frame(remaining)
            if predicate(frame):
                return frame

    def seen_or_next(self, predicate: Any, timeout: float = WAIT) -> dict[str, Any]:
        """The first frame that matches, among those seen already or the next ones."""
        for frame in self.seen:
            if predicate(frame):
                return frame
        return self.wait_frame(predicate, timeout)

    def wait_written(self, count: int, timeout: float = WAIT) -> None:
        """Wait until the bridge wrote ``count`` lines to stdout in all, without taking any frame."""
        with self._stdout_changed:
            if not self._stdout_changed.wait_for(lambda: len(self.raw_lines) >= count, timeout):
                raise TimeoutError(f"the bridge wrote {len(self.raw_lines)} lines, not {count}")

    def drain(self, timeout: float = WAIT) -> list[dict[str, Any]]:
        """All frames up to the end of stdout."""
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                out.append(self.next_frame(max(0.0, deadline - time.monotonic())))
            except EOFError:
                return out

    # -------------------------------------------------------------- ending

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def wait_exit(self, timeout: float = WAIT) -> int:
        code = self.proc.wait(timeout=timeout)
        self._stdout_thread.join(timeout)
        self._stderr_done.wait(timeout)
        return code

    def stop(self) -> None:
        self.close_stdin()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=WAIT)
        self._stdout_thread.join(WAIT)  # every frame that the bridge wrote is in self.frames
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def wait_stderr(self, text: str, timeout: float = WAIT) -> int:
        """The index of the first stderr line that holds ``text``, waiting at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._stderr_changed:
            while True:
                for index, line in enumerate(self.stderr_lines):
                    if text in line:
                        return index
                remaining = deadline - time.monotonic()
                if self._stderr_done.is_set() or remaining <= 0:
                    raise TimeoutError(f"no {text!r} on stderr: {self.stderr_lines[-20:]}")
                self._stderr_changed.wait(remaining)

    @property
    def stderr_text(self) -> str:
        return "".join(self.stderr_lines)

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if exc[0] is None and self.schema is not None:
            self.check_unread()

    def check_unread(self) -> None:
        """Check each frame that the bridge wrote and the test did not read (the bridge ended).

        Raises:
            FrameInvalid: a frame is not valid in the client's revision.
        """
        assert not self._stdout_thread.is_alive(), "the bridge's stdout is still open"
        while True:
            try:
                self.next_frame(0)
            except (EOFError, queue.Empty):
                return


def reachable(table: Mapping[T, Iterable[T]], start: T) -> set[T]:
    """The states that follow ``start`` after zero or more steps of the transition ``table``."""
    seen, todo = {start}, [start]
    while todo:
        for following in table[todo.pop()]:
            if following not in seen:
                seen.add(following)
                todo.append(following)
    return seen


def text_of(response: dict[str, Any]) -> str:
    """The text of the first text block of a tools/call response."""
    for block in response["result"]["content"]:
        if block.get("type") == "text":
            return str(block["text"])
    raise AssertionError(f"no text block in {response}")


class FrontendPair:
    """A :class:`~mcpbridge.bridge.front.frontend.Frontend` in this process, between the test and a server.

    As h11's ``ConnectionPair``: the test plays VS Code on a real pair of pipes,
    and the front end reaches ``server`` (an in-process
    :class:`~mcpbridge.mcp.server.Server`) over the memory link, so its handlers
    run on the threads of this process. A handler that waits on an Event of the
    test holds a request at a known point: the test forces the interleaving of
    the threads (a cancellation while the upstream works, one answer before
    another) instead of hoping for it. Every read has a deadline.
    """

    def __init__(self, server: Any, wrap_connect: Any = None, **options: Any) -> None:
        from mcpbridge.bridge.front.frontend import Frontend, Options
        from mcpbridge.bridge.sessions.upstream import transport_connector
        from mcpbridge.mcp.transports.memory import memory_pair

        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        self._to_frontend = os.fdopen(in_write, "wb", buffering=0)
        self._from_frontend = os.fdopen(out_read, "rb")
        self._frontend_in = os.fdopen(in_read, "rb", buffering=0)
        self._frontend_out = os.fdopen(out_write, "wb")
        self.connections: list[Any] = []

        def make_transport() -> Any:
            client_end, server_end = memory_pair()
            self.connections.append(server.start(server_end))
            return client_end

        settings = {"fallback_name": "in-process", "version": "0.0.0", "shutdown_grace": 0.5, **options}
        connect = transport_connector(make_transport)
        if wrap_connect is not None:  # a test that breaks the start of the upstream
            connect = wrap_connect(connect)
        self.frontend = Frontend(self._frontend_in, self._frontend_out, connect, Options(**settings))
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.ended: Any = None
        self._runner = threading.Thread(target=self._run, name="test-frontend-run", daemon=True)
        self._reader = threading.Thread(target=self._read, name="test-frontend-stdout", daemon=True)
        self._runner.start()
        self._reader.start()

    def _run(self) -> None:
        try:
            self.ended = self.frontend.run()
        finally:
            self._frontend_out.close()

    def _read(self) -> None:
        for line in self._from_frontend:
            self.frames.put(json.loads(line))
        self.frames.put(None)

    def send(self, frame: dict[str, Any]) -> None:
        self._to_frontend.write(json.dumps(frame).encode() + b"\n")

    def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)

    def next_frame(self, timeout: float = WAIT) -> dict[str, Any]:
        try:
            frame = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no frame in {timeout} s; seen: {self.seen}") from None
        if frame is None:
            self.frames.put(None)
            raise EOFError("the front end closed its output")
        self.seen.append(frame)
        return frame

    def response(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        """The response to ``request_id`` (one seen before, or the next that comes)."""
        deadline = time.monotonic() + timeout
        while True:
            for frame in self.seen:
                if frame.get("id") == request_id and "method" not in frame:
                    return frame
            self.next_frame(max(0.0, deadline - time.monotonic()))

    def initialize(
        self, *, protocol_version: str = "2025-11-25", client_info: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``initialize`` as VS Code sends it, or as another host of ``protocol_version`` does."""
        self.request(
            0,
            "initialize",
            {
                "protocolVersion": protocol_version,
                "capabilities": VSCODE_CAPABILITIES,
                "clientInfo": VSCODE_INFO if client_info is None else client_info,
            },
        )
        result = self.response(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def close(self, timeout: float = WAIT) -> list[dict[str, Any]]:
        """End the input; return every frame up to the end of the output."""
        self._to_frontend.close()
        self._runner.join(timeout)
        assert not self._runner.is_alive(), "the front end did not end"
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.next_frame(max(0.0, deadline - time.monotonic()))
            except EOFError:
                break
        self._reader.join(timeout)
        self._from_frontend.close()
        self._frontend_in.close()
        return self.seen


#: The longest run of a Node.js client script of the interop tests.
NODE_RUN_TIMEOUT = 150.0


def run_node_client(node: Any, script: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """Run the Node.js client ``script`` with ``plan`` (``node``: the NodePeers of conftest); its
    summary, the last line it printed, which must say ``ok`` with the exit code 0."""
    returncode, summary = run_client_script(node.command(script), plan, NODE_RUN_TIMEOUT)
    assert summary.get("ok") is True and returncode == 0, summary.get("error") or summary
    return summary


def run_client_script(command: list[str], plan: dict[str, Any], timeout: float) -> tuple[int, dict[str, Any]]:
    """Run a client script, ``command`` with ``plan`` (as JSON) as its last argument, from the root of
    the repository, to its end within ``timeout`` seconds; its exit code and its summary, the last
    line it printed, which must be there."""
    completed = subprocess.run(
        [*command, json.dumps(plan)],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    lines = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    stderr = completed.stderr.decode("utf-8", "replace")[-2000:]
    assert lines, f"the script printed nothing (exit {completed.returncode}): {stderr}"
    summary: dict[str, Any] = json.loads(lines[-1])
    return completed.returncode, summary
