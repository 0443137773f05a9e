"""The text of a thread dump: what each thread runs, and what the connection waits for.

The owners of the state describe themselves as the plain data of this module
(:meth:`Frontend.describe <mcpbridge.bridge.front.frontend.Frontend.describe>` gathers
it): the requests in flight with their method, id and start, the bridge's own
requests to the client, the bytes that wait for the client, the form and era of
the upstream. None of it holds the content of a message, a header or the upstream
URL. :func:`format_dump` turns that and the stacks of the threads into the lines
of one dump.

Pure: no I/O, no clock (each age is computed from the ``now`` given, on the clock
of :func:`time.monotonic`).

The bridge loads this module at the first dump, not at its start (Python makes each data
class at import, about 0.8 ms apiece): the owners import it inside their ``describe``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ...mcp.jsonrpc import RequestId
from ...mcp.text import printable

__all__ = [
    "FrontendState",
    "OutputState",
    "PendingState",
    "RequestState",
    "SlotsState",
    "StackFrame",
    "ThreadStack",
    "UpstreamState",
    "format_dump",
]

#: The text of a part whose lock stayed held: the stacks show which thread holds it.
HELD: Final = "not read: its lock stays held (the threads below show by whom)"


@dataclass(frozen=True, slots=True)
class RequestState:
    """A request of the client in flight."""

    id: RequestId
    method: str
    started: float
    #: What it waits for: ``upstream`` or ``client`` (the value of :class:`~.output.Waiting`).
    waiting_for: str


@dataclass(frozen=True, slots=True)
class SlotsState:
    """The slots of the connection: their number and the requests that hold one."""

    limit: int
    requests: tuple[RequestState, ...]


@dataclass(frozen=True, slots=True)
class OutputState:
    """The frames that wait for the client to read them."""

    frames: int
    bytes: int
    #: Since when the writer has written nothing while it has something to write; ``None``: idle.
    stalled_since: float | None
    closed: bool


@dataclass(frozen=True, slots=True)
class PendingState:
    """The bridge's own requests to the client (``b-`` ids): id, when asked, whether answered."""

    entries: tuple[tuple[str, float, bool], ...]


@dataclass(frozen=True, slots=True)
class UpstreamState:
    """How the upstream server is reached and whether it is there: never its address."""

    #: ``"command"``, ``"url"``, ``"in-process"`` (the transport's form).
    form: str
    #: The revision it speaks, for example ``"MCP 2026-07-28"``.
    era: str
    gone: bool
    exit_status: str | None
    closed: bool
    #: The upstream server's own requests that the bridge carried to the client and that wait
    #: for its answer (the ``u-`` ids of a 2025-era server), as :attr:`PendingState.entries`.
    client_requests: tuple[tuple[str, float, bool], ...] = ()


@dataclass(frozen=True, slots=True)
class FrontendState:
    """One connection; a part is ``None`` when its lock stayed held (upstream: not connected)."""

    state: str
    slots: SlotsState | None
    output: OutputState | None
    pending: PendingState | None
    upstream: UpstreamState | None


@dataclass(frozen=True, slots=True)
class StackFrame:
    file: str
    line: int
    function: str
    #: The line of source, stripped; ``""`` when unknown.
    source: str


@dataclass(frozen=True, slots=True)
class ThreadStack:
    name: str
    #: The thread id of the system (what ``top -H`` and ``py-spy`` show), if known.
    native_id: int | None
    main: bool
    daemon: bool
    #: The innermost frames, outermost first.
    frames: tuple[StackFrame, ...]
    #: The outer frames left out.
    skipped: int = 0


def format_dump(
    threads: Sequence[ThreadStack], state: FrontendState | None, *, now: float, pid: int
) -> list[str]:
    """The lines of one dump: a head, the connection's ``state`` (if any), every thread, an end."""
    lines = [f"thread dump of process {pid}: {len(threads)} threads"]
    if state is not None:
        lines += _connection(state, now)
    ordered = sorted(threads, key=lambda thread: (not thread.main, thread.name))
    for thread in ordered:
        lines += _thread(thread)
    lines.append("end of the thread dump")
    return lines


def _age(since: float, now: float) -> str:
    return f"{max(0.0, now - since):.1f} s"


def _connection(state: FrontendState, now: float) -> list[str]:
    lines = [f"connection: {state.state}"]
    lines += _slots(state.slots, now)
    lines += _pending(state.pending, state.upstream.client_requests if state.upstream else (), now)
    lines.append(_output(state.output, now))
    lines.append(_upstream(state.upstream))
    return lines


def _slots(slots: SlotsState | None, now: float) -> list[str]:
    if slots is None:
        return [f"requests in flight: {HELD}"]
    busy = len(slots.requests)
    lines = [f"requests in flight: {busy} of {slots.limit} slots busy, {max(0, slots.limit - busy)} free"]
    for request in sorted(slots.requests, key=lambda request: request.started):
        lines.append(
            f"  request {printable(request.id)} ({printable(request.method)}) for "
            f"{_age(request.started, now)}: waits for the {request.waiting_for}"
        )
    return lines


def _pending(
    pending: PendingState | None, carried: Sequence[tuple[str, float, bool]], now: float
) -> list[str]:
    """The bridge's own requests to the client and the server's that it carried (``u-`` ids)."""
    if pending is None:
        return [f"requests of the bridge to the client: {HELD}"]
    entries = [*pending.entries, *carried]
    lines = [f"requests of the bridge to the client: {len(entries)}"]
    for request_id, asked, answered in sorted(entries, key=lambda entry: entry[1]):
        outcome = "answered" if answered else "no answer yet"
        lines.append(f"  {printable(request_id)}: asked {_age(asked, now)} ago, {outcome}")
    return lines


def _output(output: OutputState | None, now: float) -> str:
    if output is None:
        return f"output: {HELD}"
    if output.closed:
        return "output: closed"
    text = f"output: {output.frames} frames, {output.bytes} bytes wait for the client"
    if output.stalled_since is not None:
        text += f"; nothing written for {_age(output.stalled_since, now)}"
    return text


def _upstream(upstream: UpstreamState | None) -> str:
    if upstream is None:
        return "upstream: not connected"
    if upstream.gone:
        status = f"lost ({upstream.exit_status})" if upstream.exit_status else "lost"
    else:
        status = "closed" if upstream.closed else "alive"
    return f"upstream: {upstream.form}, {upstream.era}, {status}"


#: The frames with which :mod:`threading` starts every thread: the same in each stack, so left out.
_THREAD_START: Final = frozenset({"_bootstrap", "_bootstrap_inner", "run"})


def _own_frames(frames: Sequence[StackFrame]) -> Sequence[StackFrame]:
    """``frames`` without the outer frames of :mod:`threading` that start the thread."""
    start = 0
    while (
        start < len(frames)
        and frames[start].function in _THREAD_START
        and frames[start].file.replace("\\", "/").rsplit("/", 1)[-1] == "threading.py"
    ):
        start += 1
    return frames[start:]


def _thread(thread: ThreadStack) -> list[str]:
    marks = [f"tid {thread.native_id}" if thread.native_id is not None else "tid unknown"]
    if thread.main:
        marks.append("main")
    if thread.daemon:
        marks.append("daemon")
    lines = [f'thread "{thread.name}" ({", ".join(marks)}), most recent call last:']
    if thread.skipped:
        lines.append(f"  ... {thread.skipped} outer frames left out")
    for frame in _own_frames(thread.frames):
        lines.append(f'  File "{frame.file}", line {frame.line}, in {frame.function}')
        if frame.source:
            lines.append(f"    {frame.source}")
    return lines
