"""Drive a task of the upstream server to its end, on the slot of the request that made it.

Theory of operation
-------------------

A 2026-07-28 server of the Tasks extension may answer a ``tools/call`` with a task
instead of a result (module ``tasks``). The session hands the task to a
:class:`TaskDriver` on the slot thread of that request; the driver runs until the
task ends and gives the session the terminal task:

* It reads the task again with ``tasks/get``, no sooner than the task's poll
  interval after the last read, or takes the task that a ``notifications/tasks``
  of the :class:`TaskWatch` brings first. The read that catches up after a stream
  acknowledged the task waits that interval too.
* Each new key of ``inputRequests`` becomes a request to the client, once: the
  input rounds of module ``rounds`` plan, check and ask them, and the answers go
  upstream with ``tasks/update``. While the client answers, the task is read at
  its poll interval; a task that no longer asks for them (it ended, it moved on,
  its time to live passed) has the client's requests canceled.
* Each snapshot goes to ``on_task`` (the session's progress, or the record of a
  task the client reads itself).
* The end of the slot (the client canceled, the connection ends) and every
  failure of the driver send ``tasks/cancel`` once: the server stops work that
  nobody waits for. A task that the server no longer knows (-32602) ends as
  ``task_lost``, one that passes ``createdAt + ttlMs`` without a terminal status as
  ``task_expired``.

The driver waits on one condition, for at most the next poll: a notification of
the task, the cancellation of the slot and the time limit wake it. It starts no
thread: the slot that made the task drives it.

A :class:`TaskWatch` keeps at most one ``subscriptions/listen`` stream of the
tasks in flight (``notifications.taskIds``) open, and one more while a stream
for a new set of tasks waits for its acknowledgment. The drivers ask it to catch
up with the set of tasks between their polls; a task whose id the server
acknowledged is polled only every :data:`~.rules.tasks.WATCHED_POLL_MS`, in case a
gap in the stream lost its notification. A stream that ends leaves the tasks to
the polls; one that the server refuses ends the watch for the connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ...mcp.client import Client
from ...mcp.client.subscription import Subscription
from ...mcp.deadline import Deadline
from ...mcp.droplog import DropLog
from ...mcp.errorbase import BridgeError
from ...mcp.errors import Cancelled, McpError, RequestTimeout, RpcError
from ...mcp.jsonrpc import INVALID_PARAMS, Notification
from ...mcp.protocol import TASK_NOTIFICATION
from ...mcp.text import format_duration, printable
from ..front.output import Slot
from ..rules import tasks
from ..rules.tasks import InvalidTask, Task
from .rounds import Obsolete, Rounds, RoundsHost

__all__ = ["MAX_TASK_ROUNDS", "DriverHost", "TaskDriver", "TaskEnded", "TaskWatch", "created_task"]

log = logging.getLogger("mcpbridge.bridge")
#: The lines of the tasks that the server can make repeat.
_drops = DropLog(log)

#: The most batches of new input requests one task may bring.
MAX_TASK_ROUNDS: Final = 100


class TaskEnded(BridgeError):
    """The task ended without a result for the client; ``cause`` is a row of the error table."""

    def __init__(self, cause: str, detail: str | None = None) -> None:
        super().__init__(detail or cause)
        self.cause = cause
        self.detail = detail


class DriverHost(RoundsHost, Protocol):
    """What a driver needs of the front end: what the input rounds need, the level of the
    client's log messages and the client capabilities for the upstream requests."""

    @property
    def log_level(self) -> str | None: ...

    @property
    def upstream_capabilities(self) -> dict[str, Any]: ...


class TaskDriver:
    """Drive one task to its end; see the module docstring.

    :param capabilities: the client capabilities of the upstream requests, the
        extension declared.
    :param on_task: gets each snapshot of the task, the first one included.
    :param related: tag each request to the client with the task (the client
        knows the task: it made it).
    """

    def __init__(
        self,
        client: Client,
        host: DriverHost,
        slot: Slot,
        *,
        capabilities: dict[str, Any],
        watch: TaskWatch | None = None,
        on_task: Callable[[Task], None] | None = None,
        related: bool = False,
    ) -> None:
        self._client = client
        self._host = host
        self._slot = slot
        self._capabilities = capabilities
        self._watch = watch
        self._on_task = on_task
        self._related = related
        self._cond = threading.Condition()
        #: The latest task of a notification, taken by the next turn of the loop.
        self._pushed: Task | None = None
        #: Set once the task was read after a stream acknowledged it.
        self._caught_up = False
        #: The moment (monotonic) of the last ``tasks/get``: the next one waits its poll interval.
        self._last_get: float | None = None

    def run(self, created: Task, on_stopped: Callable[[BaseException], None] | None = None) -> Task:
        """Drive ``created`` until it ends; return the terminal task.

        ``on_stopped`` hears why the driver stopped before the task ended, before the
        server is told (``tasks/cancel``): the client that asks at once finds the task
        ended, never still working.

        Raises:
            Cancelled: the slot was canceled (the client canceled, the connection ends).
            TaskEnded: ``task_lost``, ``task_expired`` or ``invalid_response``.
            InputError, ClientFailed, Silent: the input rounds failed.
            McpError: a request of the driver failed.
        """
        task_id = created.task_id
        # The local moment of the creation, from the age the server gave the task.
        created_at = time.monotonic() - tasks.age_seconds(created)
        rounds = Rounds(
            self._host,
            self._slot,
            {},
            max_rounds=MAX_TASK_ROUNDS,
            related_task=task_id if self._related else None,
        )
        asked: set[str] = set()
        remove_wake = self._slot.cancel.add_callback(self._wake)
        if self._watch is not None:
            self._watch.watch(task_id, self._on_notification)
        ended = False
        task = created
        try:
            while True:
                self._tell(task)
                rounds.after_result(tasks.as_input_required(task.input_requests))
                if task.terminal:
                    ended = True
                    return task
                if task.status == "input_required":
                    newer = self._answer(task, rounds, asked, created_at)
                    if newer is not None:
                        task = newer
                        continue
                task = self._next(task, created_at)
        except BaseException as exc:
            # The server no longer knows a lost task: nothing to cancel.
            ended = isinstance(exc, TaskEnded) and exc.cause == "task_lost"
            rounds.failed()
            if on_stopped is not None:
                on_stopped(exc)
            raise
        finally:
            remove_wake()
            if self._watch is not None:
                self._watch.unwatch(task_id)
            if not ended:
                self._cancel(task_id)

    # ------------------------------------------------------------------ steps

    def _tell(self, task: Task) -> None:
        if self._on_task is not None:
            self._on_task(task)

    def _answer(self, task: Task, rounds: Rounds, asked: set[str], created_at: float) -> Task | None:
        """Ask the client the input requests of ``task`` that it was not asked yet; send the answers.

        While the client answers, the task is read at its poll interval: when it no longer
        asks for them (it ended, it moved on, its time to live passed), the client's
        requests are canceled and the newer snapshot is returned.
        """
        new = {key: request for key, request in task.input_requests.items() if key not in asked}
        if not new:
            return None
        asked.update(new)
        check = _StillAsked(self, task, frozenset(new), created_at)
        watched = self._watch is not None and self._watch.honored(task.task_id)
        try:
            responses, _ = rounds.answer(
                tasks.as_input_required(new), still=(tasks.poll_seconds(task, watched=watched), check)
            )
        except Obsolete:
            return check.newer()
        if responses:
            self._request("tasks/update", {"taskId": task.task_id, "inputResponses": responses})
        return None

    def _next(self, task: Task, created_at: float) -> Task:
        """The next snapshot of ``task``: the one a notification brings, or the next poll's.

        The first time a stream carries the task, the task is read at once: a change
        between the last read and the acknowledgment of the stream came on no stream.
        """
        watch = self._watch
        if watch is not None:
            watch.refresh()
        watched = watch is not None and watch.honored(task.task_id)
        if watched and not self._caught_up:
            # At once, but no sooner than the poll interval of the task after the last read:
            # the acknowledgment often comes just after a poll.
            self._caught_up = True
            wake_at = time.monotonic()
            if self._last_get is not None:
                wake_at = max(wake_at, self._last_get + tasks.poll_seconds(task))
        else:
            wake_at = time.monotonic() + tasks.poll_seconds(task, watched=watched)
        ttl = task.ttl_ms / 1000 if task.ttl_ms is not None else None
        if ttl is not None:
            wake_at = min(wake_at, created_at + ttl)
        pushed = self._wait(wake_at)
        if pushed is not None:
            return pushed
        if ttl is not None and time.monotonic() >= created_at + ttl:
            raise TaskEnded(
                "task_expired",
                f"task {printable(task.task_id)}: no end {format_duration(ttl)} after its creation",
            )
        return self._get(task.task_id)

    def _take_pushed(self) -> Task | None:
        with self._cond:
            pushed, self._pushed = self._pushed, None
        return pushed

    def _wait(self, until: float) -> Task | None:
        """Wait until ``until``; the task of a notification that came first, if any.

        Raises:
            Cancelled: the slot was canceled.
        """
        cancel = self._slot.cancel
        deadline = Deadline(None, until=until)
        with self._cond:
            deadline.wait_for(self._cond, lambda: self._pushed is not None or cancel.cancelled)
            pushed, self._pushed = self._pushed, None
        if cancel.cancelled:
            raise Cancelled(cancel.reason or None)
        return pushed

    def _get(self, task_id: str) -> Task:
        self._last_get = time.monotonic()
        try:
            result = self._request("tasks/get", {"taskId": task_id})
        except RpcError as exc:
            if exc.error.code == INVALID_PARAMS:
                raise TaskEnded("task_lost", f"task {printable(task_id)}: {exc.error.message}") from exc
            raise
        return self._parsed(result)

    def _request(self, method: str, params: dict[str, Any], *, cancel: bool = True) -> dict[str, Any]:
        return self._client.request(
            method,
            params,
            timeout=self._host.options.timeouts.list,
            cancel=self._slot.cancel if cancel else None,
            capabilities=self._capabilities,
            log_level=self._host.log_level,
        )

    def _cancel(self, task_id: str) -> None:
        """Tell the server that nobody waits for the task any more (once; a failure only logs)."""
        try:
            self._request("tasks/cancel", {"taskId": task_id}, cancel=False)
        except McpError as exc:
            log.debug("tasks/cancel of a task of request %s failed: %s", printable(self._slot.id), exc.cause)

    @staticmethod
    def _parsed(value: Any) -> Task:
        try:
            return tasks.parse_detailed(value)
        except InvalidTask as exc:
            raise TaskEnded("invalid_response", f"tasks/get: {exc.detail}") from exc

    # ------------------------------------------------------- other threads

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _on_notification(self, params: Any) -> None:
        """A ``notifications/tasks`` of the task, on the delivering thread: it never waits."""
        try:
            task = tasks.parse_detailed(params)
        except InvalidTask as exc:
            _drops(
                logging.WARNING,
                "dropped task notifications that are not valid",
                "dropped a %s of the upstream server that is not valid: %s",
                TASK_NOTIFICATION,
                exc.detail,
            )
            return
        with self._cond:
            self._pushed = task
            self._cond.notify_all()


class _StillAsked:
    """The check of a round of input requests while the client answers it: does the task still
    ask for them? It reads the task (a notification's, or a poll's) and never raises: a
    failure ends the round, and :meth:`newer` raises it on the driver's way on."""

    def __init__(self, driver: TaskDriver, task: Task, keys: frozenset[str], created_at: float) -> None:
        self._driver = driver
        self._task = task
        self._keys = keys
        self._created_at = created_at
        self._error: BaseException | None = None

    def __call__(self) -> bool:
        task = self._task
        if task.ttl_ms is not None and time.monotonic() >= self._created_at + task.ttl_ms / 1000:
            return False
        try:
            latest = self._driver._take_pushed() or self._driver._get(task.task_id)
        except (McpError, TaskEnded) as exc:
            self._error = exc
            return False
        self._task = latest
        return latest.status == "input_required" and self._keys <= latest.input_requests.keys()

    def newer(self) -> Task:
        """The latest snapshot of the task; raises the failure that ended the round."""
        if self._error is not None:
            raise self._error
        return self._task


@dataclass(eq=False)
class _Stream:
    ids: frozenset[str]
    subscription: Subscription | None = None
    #: The ids that the server acknowledged (``None`` before the acknowledgment).
    honored: frozenset[str] | None = None


class TaskWatch:
    """The ``notifications/tasks`` of the tasks in flight on one listen stream; see the module docstring.

    :param capabilities: the client capabilities of the listen request, the extension declared.
    :param log_level: the level of the client's log messages now.
    """

    def __init__(
        self, client: Client, capabilities: dict[str, Any], log_level: Callable[[], str | None]
    ) -> None:
        self._client = client
        self._capabilities = capabilities
        self._log_level = log_level
        self._lock = threading.Lock()
        self._wanted: dict[str, Callable[[Any], None]] = {}
        self._current: _Stream | None = None
        self._opening: _Stream | None = None
        #: Set when the server refused a stream: the tasks of the connection are polled.
        self._refused = False

    def watch(self, task_id: str, on_task: Callable[[Any], None]) -> None:
        """Give the params of each ``notifications/tasks`` of ``task_id`` to ``on_task`` (any thread)."""
        with self._lock:
            self._wanted[task_id] = on_task
        self.refresh()

    def unwatch(self, task_id: str) -> None:
        with self._lock:
            self._wanted.pop(task_id, None)
        self.refresh()

    def honored(self, task_id: str) -> bool:
        """True when the open stream has the server's word that it carries ``task_id``."""
        with self._lock:
            current = self._current
        return (
            current is not None
            and current.honored is not None
            and task_id in current.honored
            and current.subscription is not None
            and not current.subscription.ended
        )

    def refresh(self) -> None:
        """Open a stream for the tasks in flight when the open one is not for them; never waits.

        A stream that waits for its acknowledgment defers the next one, so that a flood of
        new tasks opens a few streams, not one for each task.
        """
        with self._lock:
            if self._refused or not self._settle_opening_locked():
                return
            wanted = frozenset(self._wanted)
            current = self._current
            if current is not None and current.subscription is not None and current.subscription.ended:
                current = self._current = None
            if current is not None and current.ids == wanted:
                return
            stream = _Stream(wanted) if wanted else None
            self._opening = stream
            if stream is None:
                self._current = None
        if stream is None:
            self._close(current)
            return
        try:
            subscription = self._client.listen(
                {"taskIds": sorted(stream.ids)},
                on_event=lambda message: self._on_event(message),
                on_ack=lambda honored: self._on_ack(stream, honored),
                capabilities=self._capabilities,
                log_level=self._log_level(),
            )
        except McpError as exc:
            log.debug("the listen stream of the tasks did not open: %s", exc.cause)
            with self._lock:
                if self._opening is stream:
                    self._opening = None
            return
        with self._lock:
            stream.subscription = subscription
            superseded = self._opening is not stream and self._current is not stream
        if superseded:
            subscription.cancel("the bridge watches other tasks")

    def _settle_opening_locked(self) -> bool:
        """True when no stream waits for its acknowledgment any more (a failed one is dropped)."""
        opening = self._opening
        if opening is None:
            return True
        subscription = opening.subscription
        if subscription is None or not subscription.ended:
            return False
        self._opening = None
        try:
            subscription.wait_acknowledged(0)
        except RpcError as exc:
            _drops(
                logging.INFO,
                "refused listen streams for tasks",
                "the upstream server refused a listen stream for its tasks (error %d): the bridge polls them",
                exc.error.code,
            )
            self._refused = True
            return False
        except (McpError, RequestTimeout):
            pass
        return True

    def _on_ack(self, stream: _Stream, honored: dict[str, Any]) -> None:
        """The acknowledgment of a stream, on the delivering thread: it becomes the open one."""
        ids = honored.get("taskIds")
        agreed = frozenset(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else frozenset()
        with self._lock:
            if stream.honored is not None:
                return  # a later acknowledgment of the same stream changes nothing
            stream.honored = agreed & stream.ids
            if self._opening is not stream:
                return
            self._opening = None
            old, self._current = self._current, stream
        self._close(old)

    def _on_event(self, message: Notification) -> None:
        if message.method != TASK_NOTIFICATION:
            return
        params = message.params
        task_id = params.get("taskId") if isinstance(params, dict) else None
        with self._lock:
            on_task = self._wanted.get(task_id) if isinstance(task_id, str) else None
        if on_task is not None:
            on_task(params)

    @staticmethod
    def _close(stream: _Stream | None) -> None:
        if stream is not None and stream.subscription is not None:
            stream.subscription.cancel("the bridge watches other tasks")


def created_task(result: dict[str, Any]) -> Task:
    """The task of a ``CreateTaskResult``; one that is not valid ends as ``invalid_response``."""
    try:
        return tasks.parse_created(result)
    except InvalidTask as exc:
        raise TaskEnded("invalid_response", f"tools/call: {exc.detail}") from exc
