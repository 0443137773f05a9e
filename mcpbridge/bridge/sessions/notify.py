"""The listen stream: the upstream's ``subscriptions/listen`` becomes VS Code's notifications.

Theory of operation
-------------------

One :class:`Listener` serves a connection. Its **owner** thread holds the
streams, the subscribed URIs and the back-off; every change goes through its
queue, one at a time. Each stream has a thread that waits for its end and
tells the owner.

The events of a stream arrive on the upstream client's reader thread. Their
callback only translates the event and writes it under the output lock,
comparing the stream's generation with the active one in the same step: it
takes no other lock and waits for nothing. So on stdio a list change that the
upstream writes before the result of a call reaches VS Code before that result.

Rules:

* A stream becomes active at its first acknowledgment; a newer generation
  wins, and an older stream never becomes active again.
* The first acknowledgment of a stream after a loss, and every later
  acknowledgment of the active stream, end a *gap*: VS Code then gets one list
  change for each declared list and one update for each subscribed URI, so it
  fetches again what it may have missed. The first stream of the connection
  ends no gap: VS Code fetches the lists after ``initialize`` in any case, and
  a list change then would make it fetch each list twice. A change of the URIs
  alone writes no such events either.
* A subscription change opens a new stream; its first acknowledgment writes the
  ``{}`` response, then the old stream is canceled. When the new stream fails
  before its acknowledgment, the old stream and URIs stay and VS Code gets the
  error.
* After a loss a new stream follows after 0.5 s, doubling up to 30 s; a stream
  that lived 10 s after its acknowledgment resets the wait. A cancellation, a
  JSON-RPC error or the loss of the upstream server stops the new attempts.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...mcp.client import Client
from ...mcp.client.subscription import Subscription
from ...mcp.deadline import Deadline
from ...mcp.droplog import DropLog
from ...mcp.errors import Cancelled, Closed, McpError, RpcError
from ...mcp.jsonrpc import Notification
from ...mcp.text import format_duration, printable
from ..front.listrules import ListRules
from ..front.output import Host, Slot, notification_frame, response_frame_locked
from ..rules import errortable, translate

log = logging.getLogger("mcpbridge.bridge")
#: The events of the listen streams that the bridge drops (one process serves one connection).
_drops = DropLog(log)


FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: A stream that lived this long after its acknowledgment resets the back-off.
HEALTHY_AFTER = 10.0
#: The wait for the acknowledgment of a new stream.
ACK_TIMEOUT = 10.0
#: A subscription change waits for the owner this much longer than for the acknowledgment.
CHANGE_MARGIN = 5.0


@dataclass
class _Stream:
    generation: int
    uris: tuple[str, ...]
    after_loss: bool
    change: _Change | None = None
    subscription: Subscription | None = None
    acked_at: float | None = None
    canceled_by_us: bool = False


@dataclass
class _Change:
    slot: Slot
    uri: str
    subscribe: bool
    done: threading.Event = field(default_factory=threading.Event)


# The commands of the owner's queue.


@dataclass(frozen=True)
class _Stop:
    """End the owner."""


@dataclass(frozen=True)
class _Apply:
    """Apply a subscription change of the client."""

    change: _Change


@dataclass(frozen=True)
class _Ended:
    """A stream ended (``error``: how, ``None`` when the server ended it)."""

    stream: _Stream
    error: McpError | None


_Command = _Stop | _Apply | _Ended


class Listener:
    """The listen stream of one connection; see the module docstring."""

    def __init__(
        self,
        host: Host,
        client: Client,
        declared: translate.Declared,
        *,
        capabilities: dict[str, Any],
        log_level: Callable[[], str | None],
        shutdown_grace: float,
        lists: ListRules | None = None,
    ) -> None:
        """``capabilities``: the client's, for the upstream; ``log_level``: the client's level now;
        ``lists``: the list cache that a list change and a gap drop."""
        self._host = host
        self._lists = lists if lists is not None else ListRules()
        self._client = client
        self._capabilities = capabilities
        self._log_level = log_level
        self._shutdown_grace = shutdown_grace
        self._declared = declared
        self._commands: queue.Queue[_Command] = queue.Queue()
        self._stop = threading.Event()
        self._owner = threading.Thread(target=self._run, name="mcpbridge-listen-owner", daemon=True)
        self._stream_threads: list[threading.Thread] = []
        # Owned by the owner thread:
        self._uris: tuple[str, ...] = ()
        self._current: _Stream | None = None
        self._generation = 0
        self._backoff = FIRST_BACKOFF
        #: When the next stream opens after a loss; None while none is due.
        self._reopen: Deadline | None = None
        self._stopped_reopening = False
        # Read and written only under the output lock:
        self._active = 0

    @property
    def accepts_subscriptions(self) -> bool:
        return self._declared.subscribe

    @property
    def lists(self) -> bool:
        d = self._declared
        return d.tools or d.prompts or d.resources

    def start(self) -> None:
        self._owner.start()

    def stop(self) -> None:
        """Cancel every stream and end the owner; waits at most the grace."""
        self._stop.set()
        self._commands.put(_Stop())
        self._owner.join(timeout=self._shutdown_grace)
        if self._owner.is_alive():
            log.debug("the owner of the listen stream did not end in %g s", self._shutdown_grace)
        for thread in self._stream_threads:
            thread.join(timeout=0.5)
        alive = sum(thread.is_alive() for thread in self._stream_threads)
        if alive:
            log.debug("%d listen stream threads did not end in 0.5 s", alive)

    def change(self, slot: Slot, uri: str, *, subscribe: bool) -> None:
        """Run on a slot: queue the change, wait for the owner to finish it.

        When the owner takes longer than it may (its wait for the acknowledgment and a
        margin), the slot answers with ``timeout`` before it is released; the owner's
        later answer then writes nothing, since a slot is answered once.
        """
        change = _Change(slot, uri, subscribe)
        self._commands.put(_Apply(change))
        remove = slot.cancel.add_callback(change.done.set)
        try:
            finished = change.done.wait(ACK_TIMEOUT + CHANGE_MARGIN)
        finally:
            remove()
        if not finished:
            self._host.respond_error(slot, errortable.error_object("timeout", "subscriptions/listen"))

    # ------------------------------------------------------------- owner

    def _run(self) -> None:
        if self.lists:
            self._open(self._uris, after_loss=False)
        while not self._stop.is_set():
            timeout = self._reopen.remaining if self._reopen is not None else 3600.0
            try:
                command = self._commands.get(timeout=timeout)
            except queue.Empty:
                if self._reopen is not None and self._reopen.expired:
                    self._reopen = None
                    self._open(self._uris, after_loss=True)
                continue
            if isinstance(command, _Stop):
                break
            if isinstance(command, _Apply):
                self._apply_change(command.change)
            else:
                self._stream_ended(command.stream, command.error)
        self._cancel_all("the client closed the connection")

    def _filter(self, uris: tuple[str, ...]) -> dict[str, Any]:
        d = self._declared
        notifications: dict[str, Any] = {}
        if d.tools:
            notifications["toolsListChanged"] = True
        if d.prompts:
            notifications["promptsListChanged"] = True
        if d.resources:
            notifications["resourcesListChanged"] = True
        if uris:
            notifications["resourceSubscriptions"] = list(uris)
        return notifications

    def _open(
        self, uris: tuple[str, ...], *, after_loss: bool, change: _Change | None = None
    ) -> _Stream | None:
        self._generation += 1
        stream = _Stream(self._generation, uris, after_loss, change)
        try:
            stream.subscription = self._client.listen(
                self._filter(uris),
                on_event=functools.partial(self._on_event, stream),
                on_ack=functools.partial(self._on_ack, stream),
                capabilities=self._capabilities,
                log_level=self._log_level(),
            )
        except McpError as exc:
            self._report_failure(stream, exc)
            return None
        thread = threading.Thread(
            target=self._watch_stream,
            args=(stream,),
            name=f"mcpbridge-listen-{stream.generation}",
            daemon=True,
        )
        self._stream_threads = [t for t in self._stream_threads if t.is_alive()] + [thread]
        thread.start()
        if change is None:
            self._current = stream
        return stream

    def _watch_stream(self, stream: _Stream) -> None:
        assert stream.subscription is not None
        error: McpError | None = None
        try:
            stream.subscription.wait_ended(None)
        except McpError as exc:
            error = exc
        self._commands.put(_Ended(stream, error))

    def _apply_change(self, change: _Change) -> None:
        uris = self._uris
        if change.subscribe:
            if change.uri in uris:
                self._host.respond(change.slot, {})
                change.done.set()
                return
            new = (*uris, change.uri)
        else:
            if change.uri not in uris:
                self._host.respond(change.slot, {})
                change.done.set()
                return
            new = tuple(u for u in uris if u != change.uri)
        if not new and not self.lists:
            old = self._current
            self._current = None
            self._uris = ()
            self._reopen = None
            generation = self._generation = self._generation + 1

            def activate() -> list[bytes]:
                self._active = generation
                return []

            self._host.write_locked(activate)
            self._host.respond(change.slot, {})
            if old is not None:
                self._cancel(old, "the bridge replaced the listen stream")
            change.done.set()
            return
        stream = self._open(new, after_loss=False, change=change)
        if stream is None or stream.subscription is None:
            change.done.set()
            return
        try:
            stream.subscription.wait_acknowledged(ACK_TIMEOUT)
        except McpError as exc:
            self._cancel(stream, "the bridge replaced the listen stream")
            if not isinstance(exc, Cancelled):
                self._report_failure(stream, exc)
            change.done.set()
            return
        old = self._current
        self._current = stream
        self._uris = new
        self._stopped_reopening = False
        self._reopen = None
        if old is not None:
            self._cancel(old, "the bridge replaced the listen stream")
        change.done.set()

    def _report_failure(self, stream: _Stream, exc: McpError) -> None:
        change = stream.change
        if change is None:
            log.info("the listen stream did not open: %s", exc.detail or exc.cause, exc_info=exc)
            return
        if isinstance(exc, RpcError):
            error = exc.error.to_obj()
        else:
            error = errortable.error_object(exc.cause, "subscriptions/listen")
        self._host.respond_error(change.slot, error)

    def _stream_ended(self, stream: _Stream, error: McpError | None) -> None:
        if stream is not self._current or stream.canceled_by_us or self._stop.is_set():
            return
        lived = time.monotonic() - stream.acked_at if stream.acked_at is not None else 0.0
        if lived >= HEALTHY_AFTER:
            self._backoff = FIRST_BACKOFF
        wait = self._backoff
        if isinstance(error, RpcError):
            log.warning(
                "the upstream server refused the listen stream with the error %d: %s. "
                "The bridge sends no more list changes.",
                error.error.code,
                error.error.message,
            )
            self._stopped_reopening = True
            return
        if isinstance(error, Cancelled) or (isinstance(error, Closed) and self._client.gone):
            self._stopped_reopening = True
            return
        if error is None:
            log.info(
                "the upstream server ended the listen stream. A new stream follows in %s.",
                format_duration(wait),
            )
        else:
            log.info(
                "the listen stream ended: %s. A new stream follows in %s.",
                error.detail or error.cause,
                format_duration(wait),
            )
        self._current = None
        self._backoff = min(self._backoff * 2, MAX_BACKOFF)
        self._reopen = Deadline(wait)

    def _cancel(self, stream: _Stream, reason: str) -> None:
        stream.canceled_by_us = True
        if stream.subscription is not None:
            stream.subscription.cancel(reason)

    def _cancel_all(self, reason: str) -> None:
        if self._current is not None:
            self._cancel(self._current, reason)

    # ----------------------------------------------- callbacks (reader thread)

    def _on_ack(self, stream: _Stream, honored: dict[str, Any]) -> None:
        first = stream.acked_at is None
        if first:
            stream.acked_at = time.monotonic()
            if stream.change is None:  # not one per subscription change: the client makes those
                log.debug("the listen stream is open%s", " again" if stream.after_loss else "")
        told: tuple[str, ...] = ()
        if not first or stream.after_loss:
            # A gap: the lists may have changed unseen. Dropped before the client learns of it.
            self._lists.clear("a gap of the listen stream")
            told = self._gap_kinds()

        def frames() -> list[bytes]:
            out: list[bytes] = []
            if stream.generation < self._active:
                return out
            gap = (not first) or stream.after_loss
            self._active = stream.generation
            if first and stream.change is not None:
                out.append(response_frame_locked(stream.change.slot, {}))
            if gap:
                out.extend(self._gap_frames(stream.uris, told))
            return out

        self._host.write_locked(frames)

    def _gap_kinds(self) -> tuple[str, ...]:
        """The lists that a gap tells the client of: those declared that it asked for."""
        d = self._declared
        declared = ((d.tools, "tools"), (d.prompts, "prompts"), (d.resources, "resources"))
        return tuple(
            kind
            for listed, kind in declared
            if listed and self._lists.asked.tells(f"notifications/{kind}/list_changed")
        )

    def _gap_frames(self, uris: tuple[str, ...], kinds: tuple[str, ...]) -> list[bytes]:
        out = []
        for kind in kinds:
            out.append(notification_frame(f"notifications/{kind}/list_changed", None))
        for uri in uris:
            out.append(notification_frame("notifications/resources/updated", {"uri": uri}))
        return out

    def _on_event(self, stream: _Stream, event: Notification) -> None:
        translated = translate.listen_event(event.method, event.params)
        if translated is None:
            if event.method in translate.LISTEN_EVENTS:
                _drops(
                    logging.WARNING,
                    "dropped listen events that are not valid",
                    "dropped a %s of the upstream server that is not valid (its params)",
                    printable(event.method),
                )
            else:
                _drops(
                    logging.DEBUG,
                    "dropped other notifications of listen streams",
                    "dropped the notification %s of a listen stream: not one for the client",
                    printable(event.method),
                )
            return
        method, params = translated
        self._lists.list_changed(method)  # before the client can ask for the list again
        if not self._lists.asked.tells(method):
            return
        data = notification_frame(method, params)

        def frames() -> list[bytes]:
            return [data] if stream.generation == self._active else []

        self._host.write_locked(frames)
