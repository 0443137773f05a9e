"""The thread dump: every thread with its stack, and what the connection waits for, on stderr.

At ``SIGUSR1`` (POSIX), or when the event ``Local\\mcpbridge-dump-<pid>`` is
signaled (Windows), the ``mcpbridge-dump`` thread writes one block to stderr
(:func:`write_dump`): every thread by name with its stack, then the state of the
connection (:meth:`Frontend.describe <mcpbridge.bridge.front.frontend.Frontend.describe>`):
the requests in flight with their method, id and age, the bridge's requests to the
client, the bytes that wait for the client, the form, era and state of the upstream.
No content of a message and no secret; the serving goes on.

The handler of the signal only wakes the dump thread (:func:`mcpbridge.platform.on_dump`),
so the dump takes no lock inside the code that the signal interrupted, and each
lock of the state is waited for at most :data:`LOCK_WAIT`: a connection stuck on
a lock still gets its dump, with that part marked as held.

Why not :mod:`faulthandler`: ``faulthandler.register`` writes the stacks from the
C handler of the signal, so it works even while a thread holds the interpreter
lock for ever, but it names no thread, cannot add the state of the connection and
writes between the log's lines rather than as one block. That hard hang is the
case of ``py-spy dump --pid``, which reads the process from outside.

Each line of the block has the form of a log line (``mcp-bridge-vscode: dump:
info: ...``), the secrets of :mod:`mcpbridge.log` replaced, and the block goes out
in one write.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO, Final, TypeAlias

from ... import platform
from ...log import format_line

if TYPE_CHECKING:
    # The text of a dump is loaded at the first dump, not at the start (see dumptext).
    from .dumptext import FrontendState, ThreadStack

__all__ = ["LOCK_WAIT", "Describe", "enabled", "thread_stacks", "write_dump"]

log = logging.getLogger("mcpbridge.dump")

#: The longest wait for each lock of the state of the connection.
LOCK_WAIT: Final = 0.5
#: The innermost frames shown of each thread.
MAX_FRAMES: Final = 40

#: The state of the connection for a dump, given the longest wait for each lock; ``None``: none.
Describe: TypeAlias = "Callable[[float], FrontendState | None]"


@contextlib.contextmanager
def enabled(describe: Describe, *, take_over: bool = True) -> Iterator[platform.DumpTrigger | None]:
    """Write a thread dump at each request of the system's trigger inside the ``with`` block.

    Yields the trigger, or ``None`` when there is none: not on the main thread, or,
    without ``take_over``, the program has its own handler for the signal. At the end
    of the block the dump thread stops and the former handler of the signal is back.
    """
    trigger = platform.on_dump(functools.partial(write_dump, describe), take_over=take_over)
    if trigger is not None:
        log.debug("%s writes a thread dump of process %d to stderr", trigger.how, os.getpid())
    try:
        yield trigger
    finally:
        if trigger is not None:
            trigger.close()


def write_dump(describe: Describe, stream: BinaryIO | None = None) -> None:
    """Write one dump to ``stream`` (stderr by default) in one write.

    Raises:
        OSError: the stream failed.
    """
    from .dumptext import format_dump  # loaded at the first dump

    state = describe(LOCK_WAIT)
    lines = format_dump(thread_stacks(), state, now=time.monotonic(), pid=os.getpid())
    block = b"".join(format_line("dump", "info", line) for line in lines)
    out = stream if stream is not None else sys.stderr.buffer
    out.write(block)
    out.flush()


def thread_stacks(limit: int = MAX_FRAMES) -> list[ThreadStack]:
    """The stack of every thread of the process now, at most its ``limit`` innermost frames.

    A thread that :mod:`threading` does not know (started by C code) has no name but its id.
    """
    from .dumptext import StackFrame, ThreadStack  # loaded at the first dump

    known = {thread.ident: thread for thread in threading.enumerate()}
    main = threading.main_thread().ident
    stacks: list[ThreadStack] = []
    for ident, top in sys._current_frames().items():
        depth = sum(1 for _ in traceback.walk_stack(top))
        frames = tuple(
            StackFrame(item.filename, item.lineno or 0, item.name, (item.line or "").strip())
            for item in traceback.extract_stack(top, limit=limit)
        )
        thread = known.get(ident)
        stacks.append(
            ThreadStack(
                name=thread.name if thread is not None else f"thread {ident:#x}",
                native_id=thread.native_id if thread is not None else None,
                main=ident == main,
                daemon=thread.daemon if thread is not None else False,
                frames=frames,
                skipped=max(0, depth - limit),
            )
        )
    return stacks
