"""The wiring that both serve forms share: the first line, the options, the watchdog, SIGTERM, the
thread dump, the pipes, the heap, the exit.

:func:`announce` writes the line that starts a bug report; :func:`frontend_options` reads
the options of the front end from the command line; :func:`serve` runs a
:class:`~mcpbridge.bridge.front.frontend.Frontend` until VS Code closes stdin (exit code 0) or
the upstream command stops (exit code 1).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .. import __version__, platform

if TYPE_CHECKING:
    from ..bridge.front.frontend import Options
    from .forms import CommandUpstream, Serving, Upstream, UrlUpstream

#: The watchdog stops the bridge this long after the end of stdin. VS Code sends
#: SIGTERM 10 s after it closes stdin and kills the tree after 20 s.
WATCHDOG_SECONDS = 8.0

logger = logging.getLogger("mcpbridge.vscode")


def announce(upstream: CommandUpstream | UrlUpstream, serving: Serving, log_level: str) -> None:
    """Log the first line of a serve form, the start of a bug report: the version, the process id
    (the one to signal for a thread dump), the upstream server, its era, the log level and the
    host profile, each with the option that sets it.

    The upstream server is the file name of the command (its arguments can be secrets), or
    the scheme, the host and the port of the URL (its path and its query can be secrets).
    """
    from ..mcp.protocol import MODERN
    from .forms import CommandUpstream, UrlUpstream
    from .settings import DEFAULT_HOST_PROFILE, DEFAULT_LOG_LEVEL, DEFAULT_PROTOCOL, default_name_for_url

    if isinstance(upstream, CommandUpstream):
        where = f"the command {os.path.basename(upstream.command[0])} over stdio"
    else:
        parts = urlsplit(upstream.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = default_name_for_url(upstream.url)
        kind = "HTTP+SSE" if upstream.transport == "sse" else "Streamable HTTP"
        where = f"{kind} ({parts.scheme}) to the host {host}, port {port}"
    if isinstance(upstream, UrlUpstream) and upstream.transport == "sse":
        era = "2024-11-05, passed through (--transport sse)"
    elif upstream.protocol == DEFAULT_PROTOCOL:
        era = f"found at the first initialize (--protocol {DEFAULT_PROTOCOL}, the default)"
    elif upstream.protocol == MODERN:
        era = f"{MODERN} (--protocol)"
    else:
        era = "the 2025 era, passed through (--protocol legacy)"
    if log_level == DEFAULT_LOG_LEVEL:
        level = f"{DEFAULT_LOG_LEVEL} (the default; --log-level sets it)"
    else:
        level = f"{log_level} (--log-level)"
    if serving.host_profile == DEFAULT_HOST_PROFILE:
        profile = f"picked at the first initialize (--host-profile {DEFAULT_HOST_PROFILE}, the default)"
    else:
        profile = f"{serving.host_profile} (--host-profile)"
    logger.info(
        "version %s; pid %d; upstream: %s; era: %s; log level: %s; host profile: %s",
        __version__,
        os.getpid(),
        where,
        era,
        level,
        profile,
    )


def frontend_options(upstream: Upstream, serving: Serving) -> Options:
    """The options of the front end that the command line sets, the same in both forms."""
    from ..bridge.front.frontend import Options, Timeouts
    from ..bridge.front.options import HostChoice, TaskMode, UpstreamRevision
    from ..bridge.rules.lists import ToolFilter

    return Options(
        fallback_name=serving.name,
        version=__version__,
        max_line_bytes=upstream.max_line_bytes,
        timeouts=Timeouts(discover=upstream.discover_timeout),
        protocol=UpstreamRevision(upstream.protocol),
        tasks=TaskMode(serving.tasks),
        tool_filter=ToolFilter(serving.allow_tools, serving.deny_tools),
        host_profile=HostChoice(serving.host_profile),
    )


def serve(frontend: object) -> int:
    """Run the front end with the watchdog, SIGTERM and the thread dump; the exit code.

    A freed large block stays in the one heap of the process for the next large
    frame, and goes back to the system once they stop (:func:`_keep_large_blocks`).
    ``SIGUSR1`` (Windows: an event, see :mod:`mcpbridge.bridge.front.dump`) writes a thread
    dump to stderr while the front end serves.
    """
    from ..bridge.front import dump
    from ..bridge.front.frontend import Ended, Frontend

    assert isinstance(frontend, Frontend)
    watchdog = Watchdog(frontend)
    frontend.on_eof = watchdog.arm
    _stop_on_sigterm(frontend)
    platform.binary_stdio()
    _keep_large_blocks()
    frontend.release_memory = _trim_heap
    _widen_stdio_pipes()
    # What exists now (the modules, the settings) lives as long as the process: out of
    # the collector's sight, a full collection walks only what the connection made.
    gc.freeze()
    gc.enable()  # off while the bridge started (see cli.main)
    with dump.enabled(frontend.describe):
        ended = frontend.run()
    return 1 if ended is Ended.UPSTREAM_LOST else 0


#: The heap tuning below speaks to glibc (a plain bool: the other systems type-check the calls too).
_GLIBC_LINUX: bool = sys.platform.startswith("linux")


def _widen_stdio_pipes() -> None:
    """Let the pipes of stdin and stdout hold 1 MiB (Linux; 64 KiB by default).

    A large result then goes to VS Code in 16 writes for 16 MiB, not 256 with a
    wake-up of each side for each. Not a pipe, or over the system's limit: no change.
    """
    for stream in (sys.stdin, sys.stdout):
        try:
            platform.widen_pipe(stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass


def _keep_large_blocks() -> None:
    """Serve blocks up to 32 MiB from the heap and keep them when freed, for the next large frame.

    Fresh pages cost a page fault each (4 KiB): a 16 MiB frame in fresh memory costs
    more than its parse. The watcher gives the memory back once the large frames stop
    (:func:`_trim_heap`).
    """
    if not _GLIBC_LINUX:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        # One heap for all threads: malloc_trim gives back the free top of the main
        # heap only (the threads take turns under the interpreter's lock anyway).
        libc.mallopt(-8, 1)  # M_ARENA_MAX
        libc.mallopt(-3, 32 * 1024 * 1024)  # M_MMAP_THRESHOLD: glibc's largest
        libc.mallopt(-1, 128 * 1024 * 1024)  # M_TRIM_THRESHOLD: the heap keeps what it freed
    except (OSError, AttributeError):
        pass


def _trim_heap() -> None:
    """Give the free memory of every heap back to the system (glibc's ``malloc_trim``).

    glibc keeps a freed large block for the next one, which then costs no fresh
    pages (a page fault for each 4 KiB); the watcher calls this once the large
    frames stopped.
    """
    if not _GLIBC_LINUX:
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _stop_on_sigterm(frontend: object) -> None:
    """SIGTERM (POSIX), Ctrl-Break and the close of the console (Windows) stop the front end."""
    from ..bridge.front.frontend import Frontend

    assert isinstance(frontend, Frontend)
    platform.on_terminate(frontend.close)


class Watchdog:
    """A plain thread, armed at the end of stdin, that stops the process in bounded time."""

    def __init__(self, frontend: object, seconds: float = WATCHDOG_SECONDS) -> None:
        self._frontend = frontend
        self._seconds = seconds
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mcpbridge-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        threading.Event().wait(self._seconds)  # nothing sets it: the watchdog's time limit
        logger.warning(
            "the bridge did not stop in %d s after the end of stdin, thus it stops now", int(self._seconds)
        )
        kill = getattr(self._frontend, "kill_upstream", None)
        if kill is not None:
            kill()
        exit_now(0)


def exit_now(code: int) -> None:
    """Flush and leave at once: a stuck worker thread must not keep the process alive."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
