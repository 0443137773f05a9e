"""The differences between the systems, behind one interface; the bottom layer, beside ``mcp``.

* :func:`spawn` starts an upstream command as a :class:`ProcessTree`: POSIX puts
  it in its own process group with a guardian that ends the group when the
  bridge ends; Windows puts it in a new process group inside a job object that
  ends with the bridge. :meth:`ProcessTree.terminate`, :meth:`ProcessTree.kill`
  and :meth:`ProcessTree.release` stop it.
* :func:`pipe_writer` writes to the child's stdin: with ``poll`` on POSIX, with
  blocking writes on the writer thread on Windows (and on POSIX on request).
* :func:`widen_pipe`, :func:`binary_stdio`: the pipes and our own stdio.
* :func:`on_terminate`: ``SIGTERM`` on POSIX; Ctrl-Break and the close of the
  console on Windows.
* :func:`on_dump`: the trigger of a thread dump, ``SIGUSR1`` on POSIX and a named
  event on Windows, served by the ``mcpbridge-dump`` thread (:class:`DumpTrigger`).
* :func:`browser_command`: the program that opens a URL on each system.
* :func:`file_lock`: a lock file shared by the processes of the user.
* :func:`process_age`: how long this process has run (Linux only).

Nothing here imports a module of one system on another: :mod:`.posix` is loaded
on POSIX, :mod:`.windows` on Windows.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection
from pathlib import Path

from .common import (
    SHELL_EXECUTE,
    DumpTrigger,
    FileLock,
    LockTimeout,
    PipeWriter,
    ProcessTree,
    ThreadPipeWriter,
    browser_command,
)

if sys.platform == "win32":
    from .windows import binary_stdio, on_dump, on_terminate, pipe_writer, spawn, try_lock, unlock, widen_pipe
else:
    from .posix import binary_stdio, on_dump, on_terminate, pipe_writer, spawn, try_lock, unlock, widen_pipe

__all__ = [
    "SHELL_EXECUTE",
    "DumpTrigger",
    "FileLock",
    "LockTimeout",
    "PipeWriter",
    "ProcessTree",
    "ThreadPipeWriter",
    "binary_stdio",
    "browser_command",
    "file_lock",
    "on_dump",
    "on_terminate",
    "pipe_writer",
    "process_age",
    "protect_directory",
    "shell_open",
    "spawn",
    "widen_pipe",
]


def shell_open(url: str, *, forget: Collection[str] = ()) -> None:
    """Windows: open ``url`` with ``ShellExecuteW`` (see :func:`.windows.shell_open`).

    Raises:
        OSError: the URL did not open, or this is not Windows.
    """
    if sys.platform == "win32":
        from .windows import shell_open as windows_shell_open

        windows_shell_open(url, forget=forget)
    else:
        raise OSError("ShellExecuteW exists on Windows only")


def protect_directory(path: Path) -> None:
    """Make ``path`` private to the user: mode 0700 on POSIX; on Windows a protected ACL.

    Raises:
        OSError: the permissions did not change.
    """
    if sys.platform == "win32":
        from .windows import protect_directory as windows_protect_directory

        windows_protect_directory(path)
    else:
        os.chmod(path, 0o700)


def file_lock(path: Path, timeout: float) -> FileLock:
    """An exclusive lock on ``path`` between processes, waiting at most ``timeout`` seconds."""
    return FileLock(path, timeout, try_lock, unlock)


def process_age() -> float | None:
    """The seconds since this process started, where the system tells (Linux: ``/proc``), else ``None``.

    A program with one time limit for its whole run counts its own start-up in with it
    (``check``: the import of Python and of the command line, which a busy machine makes slow).
    """
    age: float | None = None
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/stat", "rb") as stat:
                # The fields after the command name in parentheses; the 22nd field of the
                # line is the start in clock ticks after the boot.
                fields = stat.read().rpartition(b")")[2].split()
            started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None
        age = max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    return age
