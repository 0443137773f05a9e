"""The parts of the platform layer that are the same on every system.

* :class:`ProcessTree`: the interface of a started upstream command and the
  processes it starts (its process group on POSIX, its job object on Windows).
* :class:`PipeWriter` and :class:`ThreadPipeWriter`: writing to the child's
  stdin. The thread writer does plain blocking writes on the writer thread;
  the bound on the wait of a sender is the queue of the transport, which waits
  for room at most its write timeout, and a writer that stays blocked is freed
  when the close ends the child. It needs no ``poll``, so it runs on Windows,
  and the tests run it on Linux too.
* :func:`start_piped`: the start of an upstream command with pipes on its
  stdio, which each system's ``spawn`` completes with its own options.
* :func:`browser_command`: the program that opens a URL, per system; a pure
  function.
* :class:`FileLock`: a lock file shared by processes, with a bounded wait.
* :class:`DumpTrigger`: the ``mcpbridge-dump`` thread, which runs the thread dump
  each time the trigger of the system (a :class:`DumpWaiter`) fires.

Nothing here imports a module that exists on one system only.
"""

from __future__ import annotations

import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..mcp.deadline import Deadline
from ..mcp.errorbase import LocalFault
from ..mcp.text import format_duration

if TYPE_CHECKING:
    import subprocess  # loaded by the first upstream command: the URL form never needs it

__all__ = [
    "LOCK_RETRY",
    "DumpTrigger",
    "DumpWaiter",
    "FileLock",
    "LockTimeout",
    "PipeWriter",
    "SHELL_EXECUTE",
    "ProcessTree",
    "ThreadPipeWriter",
    "browser_command",
    "start_piped",
]

#: The largest piece that the thread writer writes at once: between pieces it
#: looks whether the transport stops.
WRITE_PIECE: Final = 64 * 1024
#: The wait between two attempts to take a lock that another process holds.
LOCK_RETRY: Final = 0.02
#: The longest sleep of the dump thread between two looks at its stop (it wakes at once for both).
DUMP_IDLE_WAIT: Final = 60.0
#: The wait of :meth:`DumpTrigger.close` for the dump thread.
DUMP_JOIN_TIMEOUT: Final = 2.0

_dump_log = logging.getLogger("mcpbridge.dump")


class ProcessTree(ABC):
    """A started upstream command and the processes that it starts."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    @abstractmethod
    def terminate(self) -> None:
        """Ask the tree to stop (POSIX: ``SIGTERM`` to the group; Windows: Ctrl-Break to the group)."""

    @abstractmethod
    def kill(self) -> None:
        """End every process of the tree at once (POSIX: ``SIGKILL`` to the group; Windows: the job)."""

    @abstractmethod
    def release(self) -> None:
        """After the last :meth:`kill`: free what guards the tree (the guardian, the job handle)."""


def start_piped(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    bufsize: int,
    popen: Callable[..., subprocess.Popen[bytes]] | None = None,
    **system: Any,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with pipes on its stdin, stdout and stderr and no other inherited file.

    ``system`` holds the options of one system (the new process group).

    Raises:
        OSError, ValueError, TypeError, subprocess.SubprocessError: as ``subprocess.Popen``.
    """
    import subprocess

    return (popen or subprocess.Popen)(
        list(argv),
        bufsize=bufsize,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        close_fds=True,
        **system,
    )


class PipeWriter(ABC):
    """Writes the frames of the transport to the child's stdin."""

    @abstractmethod
    def write_some(self, data: memoryview) -> int:
        """Write what the pipe takes without waiting; the bytes written (0: none).

        Raises:
            OSError: the child closed its stdin or exited.
        """

    def write_all(self, data: memoryview, stopped: Callable[[], bool]) -> bool:
        """Write all of ``data`` (on the writer thread); False when ``stopped()`` ended the write.

        Raises:
            OSError: the child closed its stdin or exited.
        """
        view = data
        while view:
            if stopped():
                return False
            view = view[self._write_waiting(view) :]
        return True

    @abstractmethod
    def _write_waiting(self, view: memoryview) -> int:
        """One write of :meth:`write_all`, which may wait a bounded time; the bytes written.

        Raises:
            OSError: the child closed its stdin or exited.
        """


class ThreadPipeWriter(PipeWriter):
    """Blocking writes on the writer thread; see the module docstring."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write_some(self, data: memoryview) -> int:
        # A blocking pipe cannot tell whether a write would wait: the writer thread writes.
        return 0

    def _write_waiting(self, view: memoryview) -> int:
        return os.write(self._fd, view[:WRITE_PIECE])


# ---------------------------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------------------------


#: The marker of :func:`browser_command` for Windows: ``os.startfile(url)`` (``ShellExecuteW``).
SHELL_EXECUTE: Final = "ShellExecuteW"


def browser_command(url: str, env: Mapping[str, str], system: str) -> list[str]:
    """The command that opens ``url`` in the browser on ``system`` (a ``sys.platform`` value).

    Windows: ``[SHELL_EXECUTE, url]``, which the opener passes to ``ShellExecuteW``
    (``os.startfile``) with the URL as one argument, never through ``cmd /c start``
    (which cuts a URL at its first ``&``). Elsewhere ``$BROWSER`` when it is set
    and not empty, else ``open`` on macOS and ``xdg-open`` on other systems, with
    the URL as the only argument; the caller starts it without a shell.
    """
    if system == "win32":
        return [SHELL_EXECUTE, url]
    program = env.get("BROWSER", "").strip()
    if not program:
        program = "open" if system == "darwin" else "xdg-open"
    return [program, url]


# ---------------------------------------------------------------------------------------------
# A lock file
# ---------------------------------------------------------------------------------------------


class LockTimeout(LocalFault, OSError):
    """Another process held the lock for the whole wait."""


class FileLock:
    """An exclusive lock on a file, shared by the processes of the user.

    ``try_lock(fd)`` takes the lock without waiting (True) or tells that another
    process holds it (False); ``unlock(fd)`` frees it. The system ends the lock
    with the process, so a killed holder never blocks the others.

    :param path: the lock file (created, mode 0600, with its folder, mode 0700).
    :param timeout: the longest wait for the lock; then :class:`LockTimeout`.
    """

    def __init__(
        self,
        path: Path,
        timeout: float,
        try_lock: Callable[[int], bool],
        unlock: Callable[[int], None],
    ) -> None:
        self.path = path
        self._timeout = timeout
        self._try_lock = try_lock
        self._unlock = unlock
        self._fd: int | None = None
        # Two threads of one process: the lock of the system would be shared by them.
        self._thread_lock = threading.Lock()

    def __enter__(self) -> FileLock:
        if not self._thread_lock.acquire(timeout=self._timeout):
            raise LockTimeout(f"the lock {self.path.name} stayed taken for {self._timeout:g} s")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                deadline = Deadline(self._timeout)
                waiter = threading.Event()
                while not self._try_lock(fd):
                    if deadline.expired:
                        raise LockTimeout(f"the lock {self.path.name} stayed taken for {self._timeout:g} s")
                    # Nothing sets the waiter: its wait is the pause before the next try of the lock.
                    waiter.wait(deadline.at_most(LOCK_RETRY))
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        except BaseException:
            self._thread_lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        try:
            if fd is not None:
                try:
                    self._unlock(fd)
                finally:
                    os.close(fd)
        finally:
            self._thread_lock.release()


# ---------------------------------------------------------------------------------------------
# The thread dump
# ---------------------------------------------------------------------------------------------


class DumpWaiter(ABC):
    """The trigger of a thread dump on one system, as the dump thread waits for it."""

    #: How a user fires the trigger, for a log line (``"SIGUSR1"``, the name of an event).
    how: str

    @abstractmethod
    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds; True when a dump was asked for.

        Raises:
            OSError: the trigger broke (its handle is closed).
        """

    @abstractmethod
    def wake(self) -> None:
        """End a :meth:`wait` at once (the dump thread then looks at its stop)."""

    @abstractmethod
    def close(self) -> None:
        """Put back what the trigger replaced (the former handler of the signal), free what it holds."""


class DumpTrigger:
    """The ``mcpbridge-dump`` thread: it runs ``callback`` each time ``waiter`` fires.

    The dump never runs in a signal handler: the handler only wakes this thread,
    so a dump takes no lock inside whatever code the signal interrupted.
    """

    def __init__(self, waiter: DumpWaiter, callback: Callable[[], None]) -> None:
        self._waiter = waiter
        self._callback = callback
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="mcpbridge-dump", daemon=True)

    @property
    def how(self) -> str:
        return self._waiter.how

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped:
            try:
                asked = self._waiter.wait(DUMP_IDLE_WAIT)
            except OSError as exc:  # the trigger broke: no dump can be asked for any more
                _dump_log.debug("the trigger of the thread dump failed: %s", exc.strerror)
                return
            if asked and not self._stopped:
                try:
                    self._callback()
                except Exception as exc:  # noqa: BLE001 - a failed dump must not end the next one
                    _dump_log.error("the thread dump failed: %s", type(exc).__name__)

    def close(self) -> None:
        """Stop the thread (bounded), then put back what the trigger replaced."""
        self._stopped = True
        self._waiter.wake()
        if self._thread is not threading.current_thread():
            self._thread.join(DUMP_JOIN_TIMEOUT)
            if self._thread.is_alive():
                _dump_log.warning("the dump thread did not stop in %s", format_duration(DUMP_JOIN_TIMEOUT))
        self._waiter.close()
