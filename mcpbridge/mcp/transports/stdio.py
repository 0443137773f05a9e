"""Newline-delimited JSON-RPC over pipes: an upstream child process, and our own stdio.

Theory of operation
-------------------

:class:`StdioChildTransport` starts the upstream server as a child process and
owns it until :meth:`~StdioChildTransport.close` has reaped it. Four threads
work for one child, each with one job:

* ``mcpbridge-upstream-reaper`` starts the child and waits for its exit. On
  Linux the child gets ``SIGKILL`` when the bridge dies (the parent-death
  signal), and Linux sends that signal when the *thread* that started the child ends.
  So the thread that starts the child is the one that lives exactly as long as
  the child: it records the exit status and ends after the child.
* ``mcpbridge-upstream-reader`` reads the lines of the child's stdout, parses
  them and hands them to the consumer in arrival order. At the end of the
  output the child is *gone*: the reader waits a moment for the exit status,
  then reports the close.
* ``mcpbridge-upstream-writer`` writes the frames that :meth:`send` queued.
  A child that stops reading its stdin blocks this thread, never the caller:
  :meth:`send` only waits for room in a bounded queue, at most
  ``write_timeout`` seconds, then raises :class:`~.errors.TransportFailed`.
  The queue holds whole frames, so a frame is never half written by a caller
  that gave up. When the queue is empty, :meth:`send` writes the frame itself
  to the pipe, which does not block: it takes what it has room for, and the
  rest goes to the queue (the thread writer of Windows queues it all). A
  small request thus costs no wake-up of the writer.
  A caller that must never wait (a reader thread) sends with
  :data:`~.cancel.NO_WAIT`: a frame that finds no room raises
  :class:`~.cancel.WouldBlock` at once instead.
* ``mcpbridge-upstream-stderr`` passes each stderr line of the child to the
  ``stderr_sink`` (it reads them even without a sink, so that a chatty child
  never blocks on a full stderr pipe).

The child's stdout ends when every process that holds the pipe has closed it,
and a process that the child started holds it too (``sh -c 'helper & exec
server'``): then the output goes on after the exit of the child. So the exit
counts on its own: when the output has not ended :data:`OUTPUT_END_WAIT` seconds
after the exit (the lines the child wrote before it arrive in that time), the
reaper makes the child gone and reports the close itself. Whichever of the two
threads sees the end first reports it, once; the close of the transport then ends
the process tree (its group; on Windows its job object), and with it the pipe.

The child is started, stopped and written to through :mod:`mcpbridge.platform`:
on POSIX it runs in its own process group, on Windows in a new process group
inside a job object. The shutdown closes its stdin, waits ``grace``, asks the
tree to stop (``SIGTERM`` to the group; Ctrl-Break on Windows), waits ``grace``,
kills the tree (``SIGKILL`` to the group; the end of the job) and reaps the
child. Then it kills the tree once more, for the processes that the server
started and left behind. No zombie and no orphan survive a close. What ends the
tree when the bridge itself is killed is told in :mod:`mcpbridge.platform.posix`
and :mod:`mcpbridge.platform.windows`.

The writer writes with ``poll`` on a non-blocking pipe on POSIX; on Windows,
which has no ``poll`` for pipes, with blocking writes on its own thread
(``threaded_writer``). Either way a sender waits at most ``write_timeout``.

:class:`StdioServerTransport` is the other side: our own server on this
process's stdin and stdout, with a reader thread (``mcpbridge-server-reader``)
and an output lock that covers one frame and its flush.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import IO, BinaryIO, Final, cast

from ... import platform
from .. import jsonrpc
from ..cancel import NO_WAIT, CancelToken, WouldBlock
from ..deadline import Deadline
from ..droplog import DROP_LOG_INTERVAL, DropLog
from ..errors import Cancelled, Closed, InvalidRequest, McpError, NotConnected, SpawnFailed, TransportFailed
from ..ids import recover_id, shows_response
from ..jsonrpc import FrameError, Message
from . import (
    OnClosed,
    OnFrameError,
    OnMessage,
    OnServerClosed,
    PeerForm,
    ServerTransport,
    Transport,
    run_callback,
)
from .framing import KEEP_BYTES, LineReader, TooLong

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "StdioChildTransport",
    "StdioServerTransport",
]

log = logging.getLogger("mcpbridge.upstream")
server_log = logging.getLogger("mcpbridge.server")

#: The longest line, on either side: a tool call or a result may carry a large file.
DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024 * 1024
#: Nesting of a message of the upstream server: deep tool schemas must survive.
DEFAULT_CHILD_MAX_DEPTH: Final = 200
#: Nesting of a message that our own stdio server accepts (the limit of the client side of VS Code).
DEFAULT_SERVER_MAX_DEPTH: Final = 64
#: The longest wait of :meth:`StdioChildTransport.send` for room in the queue.
WRITE_TIMEOUT: Final = 10.0
#: The bytes of frames that may wait for the child to read them. A larger
#: frame still goes when the queue is empty.
MAX_QUEUED_BYTES: Final = 16 * 1024 * 1024
#: At the end of the child's stdout, the wait for its exit status.
EXIT_STATUS_WAIT: Final = 1.0
#: After the exit of the child, the wait for the end of its stdout (a process that the
#: child started may hold the pipe open): then the child is gone all the same.
OUTPUT_END_WAIT: Final = 1.0
#: The buffer of the pipes of the child. A large line is read in pieces of this
#: size; the default (8 KiB) makes a 16 MiB line cost thousands of reads.
READ_BUFFER_BYTES: Final = 1024 * 1024
#: The longest stderr line passed on whole; a longer one is cut.
STDERR_MAX_LINE_BYTES: Final = 64 * 1024
#: The writer's wait for room in the pipe before it checks for a close again.
POLL_SLICE: Final = 0.25
#: The writer's idle wait for a frame (it wakes at once for a frame or a close).
IDLE_WAIT: Final = 10.0
#: The longest wait for the thread that starts the child (``fork`` + ``exec``).
SPAWN_TIMEOUT: Final = 30.0
#: The wait for the exit of the child after ``SIGKILL``.
KILL_WAIT: Final = 5.0
#: The wait for each thread at the end of a close.
JOIN_TIMEOUT: Final = 2.0
#: The longest wait of :meth:`StdioServerTransport.send` for a frame of another thread.
OUTPUT_LOCK_TIMEOUT: Final = 30.0


def _describe_status(returncode: int) -> str:
    return f"signal {-returncode}" if returncode < 0 else f"code {returncode}"


def _deliver_line(
    line: bytes | TooLong,
    max_depth: int,
    on_message: OnMessage,
    on_frame_error: OnFrameError,
    logger: logging.Logger,
    *,
    recover_ids: bool = False,
    control_free: bool = False,
    on_anonymous: Callable[[FrameError, int], None] | None = None,
) -> None:
    """Parse one line and hand it on: a message, a frame error, or (``on_anonymous``)
    a frame error that names no request, with the length of its line."""
    if isinstance(line, TooLong):
        run_callback("a line that is too long", lambda: on_frame_error(line), logger)
        return
    try:
        message = jsonrpc.parse(line, max_depth=max_depth, control_free=control_free)
    except FrameError as exc:
        error = exc
        if recover_ids and exc.id is None and exc.cause in ("parse_error", "too_deep"):
            # An answer with NaN, a lone surrogate or nesting past the parser's stack:
            # its request must fail now, not at its time limit.
            recovered = recover_id(line[:KEEP_BYTES], line[-KEEP_BYTES:])
            if recovered is not None:
                is_response = shows_response(line[:KEEP_BYTES])
                error = FrameError(exc.cause, id=recovered, detail=exc.detail, is_response=is_response)
        if error.id is None and on_anonymous is not None:
            anonymous = on_anonymous
            size = len(line)
            run_callback("a line that is not a message", lambda: anonymous(error, size), logger)
            return
        run_callback("a line that is not a message", lambda: on_frame_error(error), logger)
        return
    run_callback("a message", lambda: on_message(message), logger)


def _deliver_lines(
    reader: LineReader,
    max_depth: int,
    on_message: OnMessage,
    on_frame_error: OnFrameError,
    logger: logging.Logger,
    *,
    stopped: Callable[[], bool] | None = None,
    recover_ids: bool = False,
    on_anonymous: Callable[[FrameError, int], None] | None = None,
) -> None:
    """Hand on each line of ``reader`` (see :func:`_deliver_line`) until its end or ``stopped()``.

    Raises:
        OSError, ValueError: reading failed.
    """
    while stopped is None or not stopped():
        line = reader.next()
        if line is None or (stopped is not None and stopped()):
            return
        _deliver_line(
            line,
            max_depth,
            on_message,
            on_frame_error,
            logger,
            recover_ids=recover_ids,
            control_free=reader.control_free,
            on_anonymous=on_anonymous,
        )
        # Not held while the next line is awaited: a large line would stay
        # in memory beside the copies that the consumer makes of it.
        line = None


def _spawn_failure(argv0: str, exc: OSError, *, env: Mapping[str, str] | None, cwd: str | None) -> str:
    """Why ``argv0`` did not start, and where the system looked for it.

    The file name and the reason of the system, then the path that was tried (a name
    without a folder is looked up in the ``PATH`` of the child, which the text then
    shows) and the working directory: what a user needs to fix a command that works in
    a terminal but not from VS Code, whose ``PATH`` and folder differ. No argument of the
    command: one can be a secret.
    """
    name = os.path.basename(argv0) or "the upstream command"
    reason = exc.strerror or type(exc).__name__
    try:
        folder = os.path.abspath(cwd or os.getcwd())
    except OSError:
        folder = "unknown"
    if os.path.dirname(argv0):
        where = f"the path {os.path.normpath(os.path.join(folder, argv0))}"
    else:
        search = os.pathsep.join(os.get_exec_path(env))
        found = shutil.which(argv0, path=search)
        where = f"the path {found}, found in the PATH" if found else f"not found in the PATH {search}"
    return f"{name}: {reason} ({where}; the working directory {folder})"


class StdioChildTransport(Transport):
    """The upstream server as a child process on stdio; see the module docstring.

    :param argv: the command and its arguments (no shell).
    :param env: the environment of the child (this process's environment by default).
    :param cwd: the working folder of the child.
    :param max_line_bytes: the longest line read from the child; a longer one
        goes to ``on_frame_error`` as a :class:`~.framing.TooLong`.
        A line that is not a message and names no request (a debug print of the
        server, most often) goes nowhere: the transport logs it, by its problem
        and its length, at most once every ``drop_log_interval`` seconds (a count
        of the others follows).
    :param max_depth: the deepest nesting of a message of the child.
    :param stderr_sink: gets each stderr line of the child, without its newline,
        on the stderr thread. ``None`` drops them.
    :param write_timeout: the longest wait of :meth:`send` for room in the queue.
    :param max_queued_bytes: the bytes of frames that may wait for the child.
    :param threaded_writer: write with blocking writes on the writer thread (the
        way of Windows) instead of ``poll``; ``None``: the way of the system.
    :param on_stray_line: called (on the reader thread; it must not block) for each
        line of stdout that goes nowhere, after its log line, so that a caller can
        count them: a log level can hide the line, a count cannot.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_depth: int = DEFAULT_CHILD_MAX_DEPTH,
        stderr_sink: Callable[[str], None] | None = None,
        write_timeout: float = WRITE_TIMEOUT,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        drop_log_interval: float = DROP_LOG_INTERVAL,
        threaded_writer: bool | None = None,
        on_stray_line: Callable[[], None] | None = None,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self._argv = list(argv)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._max_line = max_line_bytes
        self._max_depth = max_depth
        self._stderr_sink = stderr_sink
        self._write_timeout = write_timeout
        self._max_queued = max_queued_bytes
        self._drops = DropLog(log, interval=drop_log_interval)
        self._threaded_writer = threaded_writer
        self._on_stray_line = on_stray_line

        self._proc: subprocess.Popen[bytes] | None = None
        self._tree: platform.ProcessTree | None = None
        self._spawn_error: McpError | None = None
        self._spawned = threading.Event()
        self._exited = threading.Event()
        #: The reader reached the end of the child's stdout.
        self._output_ended = threading.Event()
        self._returncode: int | None = None
        #: Set once, with the report of the close (under _queue_ready's lock).
        self._gone = False
        self._closing = False
        self._close_lock = threading.Lock()
        self._close_started = False
        self._close_done = threading.Event()
        self._threads: list[threading.Thread] = []

        # The queue of frames; guarded by _queue_lock (the lock of _queue_ready).
        self._queue_lock = threading.Lock()
        self._queue_ready = threading.Condition(self._queue_lock)
        self._queue: deque[memoryview] = deque()
        self._queued_bytes = 0
        self._stopping = False
        self._write_error: McpError | None = None
        #: The writer of the child's stdin while the writer thread owns it open (guarded by
        #: _queue_ready's lock).
        self._stdin_writer: platform.PipeWriter | None = None

    # ------------------------------------------------------------------ seam

    @property
    def pid(self) -> int | None:
        """The process id of the child (also its process group id), once started."""
        proc = self._proc
        return proc.pid if proc is not None else None

    @property
    def gone(self) -> bool:
        """True once the child closed its stdout or exited: it will not answer again."""
        return self._gone

    @property
    def form(self) -> PeerForm:
        return PeerForm.COMMAND

    @property
    def exit_status(self) -> str | None:
        """``"code N"`` or ``"signal N"`` once the child has exited, else ``None``."""
        returncode = self._returncode
        return _describe_status(returncode) if returncode is not None else None

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnClosed) -> None:
        """Start the child and the threads that serve it.

        Raises:
            SpawnFailed: the command did not start (not found, not executable, no command).
        """
        if self._threads:
            raise RuntimeError("the transport is already started")
        if self._closing:
            raise Closed("the transport is closed")
        if not self._argv:
            raise SpawnFailed("no upstream command")
        reaper = threading.Thread(
            target=lambda: self._reap(on_closed), name="mcpbridge-upstream-reaper", daemon=True
        )
        self._threads.append(reaper)
        reaper.start()
        if not self._spawned.wait(SPAWN_TIMEOUT):
            # The thread still owns the attempt; a child that starts late is killed at once.
            with self._close_lock:
                self._closing = True
            raise SpawnFailed(f"the upstream command did not start in {SPAWN_TIMEOUT:g} s")
        if self._spawn_error is not None:
            # The reaper ends once it has reported the failed start; a join that runs out
            # changes nothing (the thread is a daemon, and the error is the same).
            reaper.join(JOIN_TIMEOUT)
            raise self._spawn_error
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        for name, target in (
            ("mcpbridge-upstream-stderr", lambda: self._read_stderr(proc)),
            ("mcpbridge-upstream-writer", lambda: self._write_frames(proc)),
            (
                "mcpbridge-upstream-reader",
                lambda: self._read_stdout(proc, on_message, on_frame_error, on_closed),
            ),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        """Write one frame for the child, or queue it for the writer thread, and return.

        ``cancel`` ends only the wait for room in the queue: a frame is queued
        whole or not at all, and a queued frame is written. With
        :data:`~.cancel.NO_WAIT` the send never waits: a frame that finds no
        room raises :class:`~.cancel.WouldBlock` and is not sent.

        Raises:
            Closed: the transport is closed, or the child exited or closed its stdin.
            TransportFailed: the queue stayed full for ``write_timeout`` seconds.
            WouldBlock: no room at once for a send with ``NO_WAIT``.
            Cancelled: ``cancel`` fired before the frame was queued.
            InvalidRequest: the message cannot be written as JSON.
            NotConnected: the transport is not started.
        """
        try:
            data = jsonrpc.serialize(message)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest("the message cannot be written as JSON") from exc
        if self._proc is None:
            raise NotConnected("the upstream server is not started")
        if cancel is NO_WAIT:
            with self._queue_lock:
                self._check_open_locked()
                if self._queue and self._queued_bytes + len(data) > self._max_queued:
                    raise WouldBlock("the upstream server does not read its input fast enough")
                self._enqueue_locked(data)
            return
        remove = cancel.add_callback(self._wake_senders) if cancel is not None else None
        try:
            deadline = Deadline(self._write_timeout)
            with self._queue_ready:
                while True:
                    self._check_open_locked()
                    if cancel is not None and cancel.cancelled:
                        raise Cancelled(cancel.reason or None)
                    if not self._queue or self._queued_bytes + len(data) <= self._max_queued:
                        break
                    if not deadline.wait(self._queue_ready):
                        raise TransportFailed("the upstream server does not read its input")
                self._enqueue_locked(data)
        finally:
            if remove is not None:
                remove()

    def _check_open_locked(self) -> None:
        if self._write_error is not None:
            raise Closed(self._write_error.detail)
        if self._stopping or self._closing:
            raise Closed("the connection to the upstream server is closed")
        if self._gone:
            raise self._exit_error()  # with the exit status, which the reader waited for

    def _enqueue_locked(self, data: bytes) -> None:
        """Queue a frame that has room (under the queue lock)."""
        if not self._queue:
            # The writer is idle: write at once from this thread, without waking
            # it. The pipe does not block (it takes what it has room for); the
            # writer thread writes what is left.
            rest = self._write_now(data)
            if rest is None:
                return
        else:
            rest = memoryview(data)
        self._queue.append(rest)
        self._queued_bytes += len(rest)
        self._queue_ready.notify_all()

    def _write_now(self, data: bytes) -> memoryview | None:
        """Write what the pipe takes at once, under the queue lock; return the rest (``None``: all)."""
        writer = self._stdin_writer
        if writer is None:
            return memoryview(data)
        try:
            written = writer.write_some(memoryview(data))
        except OSError as exc:
            # As in the writer thread: the child closed its stdin or exited.
            log.debug("writing to the upstream server failed: %s", type(exc).__name__)
            self._write_error = Closed("the upstream server does not take input any more")
            self._queue_ready.notify_all()
            return None
        return memoryview(data)[written:] if written < len(data) else None

    def kill(self) -> None:
        """Send ``SIGKILL`` to the child's process group at once; wait for nothing.

        For a watchdog: it does not reap the child or join a thread (the reaper
        thread reaps the child as soon as it dies).
        """
        with self._close_lock:
            self._closing = True
        self._kill_tree()

    def close(self, grace: float = 2.0) -> None:
        """Stop the child and the threads; see the module docstring.

        Frames that wait in the queue are dropped. Returns after at most about
        ``2 * grace + 10`` seconds; a second call waits for the first.
        """
        with self._close_lock:
            first = not self._close_started
            self._close_started = True
            self._closing = True
        if not first:
            limit = 2 * grace + KILL_WAIT + 4 * JOIN_TIMEOUT
            if not self._close_done.wait(limit):
                log.debug("the first close of the upstream server did not end in %g s", limit)
            return
        try:
            self._shut_down(grace)
        finally:
            self._close_done.set()

    # --------------------------------------------------------------- threads

    def _reap(self, on_closed: OnClosed) -> None:
        """Start the child, then wait for its exit (the thread of the parent-death signal)."""
        try:
            tree = platform.spawn(self._argv, env=self._env, cwd=self._cwd, bufsize=READ_BUFFER_BYTES)
        except OSError as exc:
            self._spawn_error = SpawnFailed(_spawn_failure(self._argv[0], exc, env=self._env, cwd=self._cwd))
            self._spawned.set()
            return
        except (ValueError, TypeError, subprocess.SubprocessError) as exc:
            self._spawn_error = SpawnFailed(f"the upstream command is not valid ({type(exc).__name__})")
            self._spawned.set()
            return
        proc = tree.proc
        self._tree = tree
        self._proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        platform.widen_pipe(proc.stdout.fileno())
        writer = platform.pipe_writer(proc.stdin.fileno(), threaded=self._threaded_writer)
        with self._queue_ready:
            self._stdin_writer = writer
        self._spawned.set()
        if self._closing:  # start() gave up waiting, or kill() came first
            self._kill_tree()
        # A blocking wait: the close escalates to SIGKILL, so the child ends and
        # so does this wait. Popen.wait(timeout) would poll with sleeps.
        returncode = proc.wait()
        self._returncode = returncode
        self._exited.set()
        log.debug("the upstream server exited with %s", _describe_status(returncode))
        if not self._output_ended.wait(OUTPUT_END_WAIT) and not self._closing:
            log.debug("a process that the upstream server started keeps its output open")
            self._report_close(self._exit_error(), on_closed)

    def _read_stdout(
        self,
        proc: subprocess.Popen[bytes],
        on_message: OnMessage,
        on_frame_error: OnFrameError,
        on_closed: OnClosed,
    ) -> None:
        assert proc.stdout is not None
        reader = LineReader(cast(BinaryIO, proc.stdout), self._max_line)
        error: McpError | None = None
        try:
            _deliver_lines(
                reader,
                self._max_depth,
                on_message,
                on_frame_error,
                log,
                # After close() the lines left in the pipe (up to 1 MiB) go unread: a
                # child that floods stdout must not hold the close for their parse.
                stopped=lambda: self._stopping,
                recover_ids=True,
                on_anonymous=self._dropped_line,
            )
        except (OSError, ValueError) as exc:
            error = TransportFailed(f"reading from the upstream server failed ({type(exc).__name__})")
        self._output_ended.set()
        self._drops.flush()
        # The output ends when the child exits; its exit status follows a moment later. Past
        # the wait, the error of the end says that the child closed its output, without a status.
        self._exited.wait(EXIT_STATUS_WAIT)
        if error is None and not self._closing:
            error = self._exit_error()
        self._report_close(error, on_closed)

    def _exit_error(self) -> Closed:
        """The end of the child, with its exit status when it has one."""
        status = self.exit_status
        return Closed(
            f"the upstream server exited ({status})" if status else "the upstream server closed its output"
        )

    def _report_close(self, error: McpError | None, on_closed: OnClosed) -> None:
        """Make the child gone and tell the consumer, once (see the module docstring)."""
        with self._queue_ready:
            if self._gone:
                return
            self._gone = True
            self._queue_ready.notify_all()
        run_callback("the end of the connection", lambda: on_closed(error), log)

    def _dropped_line(self, error: FrameError, size: int) -> None:
        """Log (and tell ``on_stray_line`` of) a line of the child's stdout that is not a message
        and names no request."""
        if error.cause == "parse_error":
            self._drops(
                logging.WARNING,
                "dropped lines that are not JSON",
                "the upstream server wrote a line of %d bytes that is %s on stdout, and the bridge "
                "dropped it: the output of a server other than its messages belongs on stderr",
                size,
                error.words,
            )
        else:
            self._drops(
                logging.WARNING,
                "dropped messages that are not valid",
                "the upstream server wrote a message of %d bytes that is %s, and the bridge dropped it",
                size,
                error.words,
            )
        if self._on_stray_line is not None:
            run_callback("a stray line of the upstream server", self._on_stray_line, log)

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        reader = LineReader(cast(BinaryIO, proc.stderr), STDERR_MAX_LINE_BYTES)
        sink = self._stderr_sink
        try:
            while True:
                line = reader.next()
                if line is None:
                    return
                if sink is None:
                    continue
                if isinstance(line, TooLong):
                    text = line.head.decode("utf-8", "replace") + f" [... {line.size} bytes]"
                else:
                    text = line.decode("utf-8", "replace")
                run_callback("a stderr line of the upstream server", functools.partial(sink, text), log)
        except (OSError, ValueError):
            return

    def _write_frames(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        stdin = proc.stdin
        writer = self._stdin_writer
        try:
            while True:
                with self._queue_ready:
                    while not self._queue and not self._stopping:
                        self._queue_ready.wait(IDLE_WAIT)  # an idle slice: the loop looks again
                    if self._stopping:
                        return
                    frame = self._queue[0]
                try:
                    if writer is None or not writer.write_all(frame, lambda: self._stopping):
                        return
                except OSError as exc:
                    # EPIPE: the child closed its stdin or exited. Its output ends
                    # soon too, and the reader reports the close.
                    log.debug("writing to the upstream server failed: %s", type(exc).__name__)
                    with self._queue_ready:
                        self._write_error = Closed("the upstream server does not take input any more")
                        self._queue.clear()
                        self._queued_bytes = 0
                        self._queue_ready.notify_all()
                    return
                with self._queue_ready:
                    if self._queue and self._queue[0] is frame:
                        self._queue.popleft()
                        self._queued_bytes -= len(frame)
                    self._queue_ready.notify_all()
        finally:
            with self._queue_ready:
                self._stdin_writer = None
            try:
                stdin.close()
            except OSError:
                pass

    def _wake_senders(self) -> None:
        with self._queue_ready:
            self._queue_ready.notify_all()

    # -------------------------------------------------------------- shutdown

    def _terminate_tree(self) -> None:
        tree = self._tree
        if tree is not None:
            tree.terminate()

    def _kill_tree(self) -> None:
        tree = self._tree
        if tree is not None:
            tree.kill()

    def _shut_down(self, grace: float) -> None:
        if not self._spawned.is_set() and not self._threads:
            return
        # A start still under way after this wait sees the close and kills its child at once.
        self._spawned.wait(SPAWN_TIMEOUT)
        with self._queue_ready:
            self._stopping = True
            self._queue.clear()
            self._queued_bytes = 0
            self._queue_ready.notify_all()
        current = threading.current_thread()
        # The writer closes the child's stdin when it stops.
        for thread in self._threads:
            if thread.name == "mcpbridge-upstream-writer" and thread is not current:
                # A writer still running is joined and reported with the other threads below.
                thread.join(POLL_SLICE * 4 + JOIN_TIMEOUT)
        if self._proc is not None:
            if not self._exited.wait(grace):
                log.debug("the upstream server did not exit in %g s: it is asked to stop", grace)
                self._terminate_tree()
                if not self._exited.wait(grace):
                    log.debug("the upstream server did not stop when asked: it is killed")
                    self._kill_tree()
                    if not self._exited.wait(KILL_WAIT):
                        log.warning("the upstream server did not exit after it was killed")
            # The processes that the server started and left behind.
            self._kill_tree()
            tree = self._tree
            if tree is not None:
                tree.release()
        stuck = []
        for thread in self._threads:
            if thread is current:
                continue
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                stuck.append(thread.name)
        if stuck:
            log.warning("threads still running after the close of the upstream server: %s", ", ".join(stuck))
        proc = self._proc
        if proc is not None:
            for stream, owner in (
                (proc.stdout, "mcpbridge-upstream-reader"),
                (proc.stderr, "mcpbridge-upstream-stderr"),
            ):
                if stream is not None and owner not in stuck and owner != current.name:
                    _close_quietly(stream)


def _close_quietly(stream: IO[bytes]) -> None:
    try:
        stream.close()
    except (OSError, ValueError):
        pass


class StdioServerTransport(ServerTransport):
    """Our own server on a pair of byte streams (this process's stdin and stdout).

    The reader thread ``mcpbridge-server-reader`` reads lines of ``stdin``
    (at most ``max_line_bytes``, nesting at most ``max_depth``) and delivers
    them in order. At the end of ``stdin`` it calls ``on_closed``. :meth:`send`
    writes each frame whole, with its flush, under the output lock.

    The transport does not own the streams and does not close them.
    """

    def __init__(
        self,
        stdin: BinaryIO,
        stdout: BinaryIO,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_depth: int = DEFAULT_SERVER_MAX_DEPTH,
    ) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._max_line = max_line_bytes
        self._max_depth = max_depth
        self._output_lock = threading.Lock()
        self._closed = False
        self._eof = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnServerClosed) -> None:
        if self._thread is not None:
            raise RuntimeError("the transport is already started")
        self._thread = threading.Thread(
            target=self._read,
            args=(on_message, on_frame_error, on_closed),
            name="mcpbridge-server-reader",
            daemon=True,
        )
        self._thread.start()

    def send(self, message: Message) -> None:
        """Write one frame and flush it; safe from any thread.

        Raises:
            Closed: the transport is closed, or the output failed.
            TransportFailed: another frame held the output for ``OUTPUT_LOCK_TIMEOUT`` seconds.
            InvalidRequest: the message cannot be written as JSON.
        """
        try:
            parts = jsonrpc.serialize_parts(message)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest("the message cannot be written as JSON") from exc
        if not self._output_lock.acquire(timeout=OUTPUT_LOCK_TIMEOUT):
            raise TransportFailed("the output is blocked: the client does not read")
        try:
            if self._closed:
                raise Closed("the connection is closed")
            try:
                for part in parts:
                    self._stdout.write(part)
                self._stdout.flush()
            except (OSError, ValueError) as exc:
                self._closed = True
                raise Closed("the output is closed") from exc
        finally:
            self._output_lock.release()

    def close(self) -> None:
        """Stop sending and delivering. A reader that waits for input stops at the end of it."""
        self._closed = True
        thread = self._thread
        # A reader that still waits for input cannot be woken (the streams are
        # not ours to close); one past the end of the input is joined.
        if thread is not None and thread is not threading.current_thread() and self._eof.is_set():
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                server_log.debug("the reader of the input did not end in %g s", JOIN_TIMEOUT)

    def _read(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnServerClosed) -> None:
        reader = LineReader(self._stdin, self._max_line)
        try:
            _deliver_lines(
                reader, self._max_depth, on_message, on_frame_error, server_log, stopped=lambda: self._closed
            )
        except (OSError, ValueError) as exc:
            server_log.debug("reading the input failed: %s", type(exc).__name__)
        self._eof.set()
        run_callback("the end of the input", on_closed, server_log)
