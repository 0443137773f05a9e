"""The platform layer on POSIX systems (Linux, macOS): process groups, signals, ``poll``.

The upstream command runs in its own process group (a new session). Stopping it
sends ``SIGTERM``, then ``SIGKILL``, to the whole group, so the processes that it
started (``npx``, ``uvx`` and ``sh -c`` start a server as a grandchild) end with it.

When the bridge itself is killed, two things end that group:

* Linux only: the parent-death signal (``PR_SET_PDEATHSIG``), set in a
  ``preexec_fn`` between ``fork`` and ``exec``, gives the direct child ``SIGKILL``
  when the thread that started it ends. ``prctl`` takes no lock and allocates
  nothing, so the ``preexec_fn`` is safe in a process with threads.
* Every POSIX system: the *guardian*, a ``/bin/sh`` in a session of its own,
  started beside each upstream command. It reads a pipe whose other end only the
  bridge holds. When the bridge ends, killed or not, the pipe reaches its end and
  the guardian sends ``SIGKILL`` to the group of the upstream command. A bridge
  that closes the transport first writes one line to the pipe (:meth:`~PosixTree.release`):
  the guardian then exits without a signal, so that it never signals a process
  group id that the system may give to another group later.

A process that leaves the group on purpose (``setsid``, a daemon) is out of reach
on every system.

``SIGUSR1`` asks for a thread dump (:func:`on_dump`); the upstream command, in its
own group, never gets it from a signal to the bridge.
"""

from __future__ import annotations

import sys

# ruff: noqa: E402 - the imports follow the assert that tells mypy this module is POSIX only
assert sys.platform != "win32"  # mypy skips the rest of the module on Windows

import ctypes
import fcntl
import logging
import os
import queue
import select
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from .common import DumpTrigger, DumpWaiter, PipeWriter, ProcessTree, ThreadPipeWriter, start_piped

if TYPE_CHECKING:
    import subprocess  # loaded by the first upstream command: the URL form never needs it

log = logging.getLogger("mcpbridge.upstream")

#: The guardian: at the end of its stdin without a line, it kills the group ``$1``.
GUARDIAN_SCRIPT: Final = 'read -r _ || kill -s KILL -- "-$1" 2>/dev/null'
GUARDIAN_SHELL: Final = "/bin/sh"
#: The wait for the guardian to exit after its release.
GUARDIAN_WAIT: Final = 2.0
#: The writer's wait for room in the pipe before it checks for a close again.
POLL_SLICE: Final = 0.25
#: The size asked for a pipe (Linux's default is 64 KiB).
PIPE_BYTES: Final = 1024 * 1024

_PR_SET_PDEATHSIG: Final = 1


if sys.platform.startswith("linux"):

    def parent_death_hook() -> Callable[[], None] | None:
        """A ``preexec_fn`` that makes Linux kill the child when its parent thread ends."""
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return None
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        prctl.restype = ctypes.c_int
        kill = int(signal.SIGKILL)

        def set_parent_death_signal() -> None:
            prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)

        return set_parent_death_signal

else:

    def parent_death_hook() -> Callable[[], None] | None:
        """No parent-death signal outside Linux: the guardian does that work alone."""
        return None


def widen_pipe(fd: int) -> None:
    """Let the pipe hold :data:`PIPE_BYTES` (Linux), so a large line needs fewer wake-ups."""
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except OSError:
        pass  # not Linux, or over the limit of the system: the pipe keeps its size


class Guardian:
    """The guardian of one process group; see the module docstring."""

    def __init__(self, proc: subprocess.Popen[bytes], pipe: int) -> None:
        self.proc = proc
        self._pipe: int | None = pipe
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def start(cls, pgid: int) -> Guardian | None:
        """A guardian of the group ``pgid``; ``None`` (with a debug line) when it did not start."""
        import subprocess

        read_end, write_end = os.pipe()
        try:
            proc = subprocess.Popen(
                [GUARDIAN_SHELL, "-c", GUARDIAN_SCRIPT, "mcpbridge-guardian", str(pgid)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={},
                cwd="/",
                close_fds=True,
                start_new_session=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            os.close(write_end)
            log.debug("the guardian of the upstream server did not start: %s", type(exc).__name__)
            return None
        finally:
            os.close(read_end)
        return cls(proc, write_end)

    def release(self) -> None:
        """Let the guardian exit without a signal, and reap it (bounded)."""
        import subprocess

        with self._lock:
            pipe, self._pipe = self._pipe, None
        if pipe is None:
            return
        try:
            os.write(pipe, b"\n")
        except OSError:
            pass  # the guardian is gone already
        finally:
            os.close(pipe)
        try:
            self.proc.wait(GUARDIAN_WAIT)
        except subprocess.TimeoutExpired:
            log.debug("the guardian of the upstream server did not exit: SIGKILL")
            self.proc.kill()
            try:
                self.proc.wait(GUARDIAN_WAIT)
            except subprocess.TimeoutExpired:
                log.warning("the guardian of the upstream server did not exit after SIGKILL")


class PosixTree(ProcessTree):
    """The upstream command in its own process group, with its guardian."""

    def __init__(self, proc: subprocess.Popen[bytes], guardian: Guardian | None) -> None:
        super().__init__(proc)
        self.guardian = guardian

    def _signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        except OSError as exc:
            log.debug("signal %s to the upstream process group failed: %s", sig.name, type(exc).__name__)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def release(self) -> None:
        if self.guardian is not None:
            self.guardian.release()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    bufsize: int,
    guardian: bool = True,
) -> PosixTree:
    """Start ``argv`` with pipes on its stdio in a new process group, and its guardian.

    Raises:
        OSError, ValueError, TypeError, subprocess.SubprocessError: as ``subprocess.Popen``.
    """
    proc = start_piped(
        argv, env=env, cwd=cwd, bufsize=bufsize, start_new_session=True, preexec_fn=parent_death_hook()
    )
    return PosixTree(proc, Guardian.start(proc.pid) if guardian else None)


class PollPipeWriter(PipeWriter):
    """A non-blocking pipe: ``write_some`` takes what fits; ``write_all`` waits with ``poll``."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        os.set_blocking(fd, False)
        self._poller = select.poll()
        self._poller.register(fd, select.POLLOUT)

    def write_some(self, data: memoryview) -> int:
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0

    def _write_waiting(self, view: memoryview) -> int:
        try:
            return os.write(self._fd, view)
        except BlockingIOError:
            self._poller.poll(POLL_SLICE * 1000)
            return 0


def pipe_writer(fd: int, *, threaded: bool | None = None) -> PipeWriter:
    """The writer of the child's stdin: ``poll`` by default, the portable thread writer on request."""
    return ThreadPipeWriter(fd) if threaded else PollPipeWriter(fd)


def on_terminate(callback: Callable[[], None]) -> bool:
    """Run ``callback`` on a new thread at ``SIGTERM``; False when not on the main thread."""

    def on_signal(signum: int, _frame: object) -> None:
        threading.Thread(target=callback, name="mcpbridge-sigterm", daemon=True).start()

    try:
        signal.signal(signal.SIGTERM, on_signal)
    except ValueError:  # not the main thread
        return False
    return True


class SignalWaiter(DumpWaiter):
    """``SIGUSR1`` asks for a thread dump.

    Python runs the handler on the main thread between two bytecodes, inside any
    code that thread runs, even inside a lock's method. So the handler only puts a
    mark into a :class:`queue.SimpleQueue`, whose ``put`` is reentrant and takes no
    lock of ours. At most one mark waits: signals that come during a dump make one
    more dump.

    Raises:
        ValueError: not on the main thread (only it may set a signal handler).
    """

    how = "SIGUSR1"

    def __init__(self) -> None:
        self._marks: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._previous = signal.signal(signal.SIGUSR1, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._marks.empty():
            self._marks.put(True)

    def wait(self, timeout: float) -> bool:
        try:
            return self._marks.get(timeout=timeout)
        except queue.Empty:
            return False

    def wake(self) -> None:
        self._marks.put(False)

    def close(self) -> None:
        previous = self._previous
        signal.signal(signal.SIGUSR1, previous if previous is not None else signal.SIG_DFL)


def on_dump(callback: Callable[[], None], *, take_over: bool = True) -> DumpTrigger | None:
    """Run ``callback`` on the ``mcpbridge-dump`` thread at each ``SIGUSR1``.

    ``None`` when not on the main thread, or, without ``take_over``, when the
    program has a handler of its own for ``SIGUSR1``. :meth:`DumpTrigger.close`
    puts the former handler back.
    """
    if not take_over and signal.getsignal(signal.SIGUSR1) != signal.SIG_DFL:
        return None
    try:
        waiter = SignalWaiter()
    except ValueError:  # not the main thread
        return None
    trigger = DumpTrigger(waiter, callback)
    trigger.start()
    return trigger


def binary_stdio() -> None:
    """POSIX streams carry bytes as they are: nothing to do."""


def try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
