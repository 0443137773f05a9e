"""The tasks of one modern session: what the session does with the tasks of the Tasks extension.

A :class:`SessionTasks` belongs to a :class:`~.session.ModernSession` of ``--tasks auto``.
Each upstream ``tools/call`` declares the extension with its capabilities, and a task that
the server makes instead of a result is driven to its end on the slot of the request
(:class:`~.taskdriver.TaskDriver`). What the client sees of it depends on the client:

* **Transparent** (a client without ``capabilities.tasks``): the client calls every tool
  plainly (the tool list loses ``execution.taskSupport``) and gets the task's result or
  error as the answer of its call (:meth:`SessionTasks.carry`).
* **Native** (a client of 2025-11-25 tasks, before a server that offers the extension):
  the bridge declares ``capabilities.tasks``, marks the tools with ``taskSupport``, and
  answers a task-augmented ``tools/call`` (``params.task``) with a ``CreateTaskResult``
  at once. The task stays in a :class:`ClientTasks` record of the session, which the
  driver keeps up to date and which answers ``tasks/get``, ``tasks/result`` (held until
  the task ends), ``tasks/cancel`` and ``tasks/list``; a change of its status reaches
  the client as ``notifications/tasks/status``, and its input requests reach the client
  tagged with the task (``_meta["io.modelcontextprotocol/related-task"]``). A call that
  the server answers at once still gets a task, one that has already completed.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

from ...mcp.cancel import CancelToken
from ...mcp.client import Client
from ...mcp.droplog import DropLog
from ...mcp.errorbase import BridgeError
from ...mcp.errors import Cancelled, Closed, McpError
from ...mcp.jsonrpc import Request
from ...mcp.text import format_duration, printable
from ..front.output import Host, Slot
from ..rules import errortable, tasks
from ..rules.legacy import InvalidParams
from ..rules.roundfailures import ClientFailed, InputError
from ..rules.tasks import Task
from .rounds import ProgressForwarder, Silent
from .run import RequestRun, RunState
from .taskdriver import DriverHost, TaskDriver, TaskEnded, TaskWatch, created_task

__all__ = ["ClientTasks", "SessionTasks"]

log = logging.getLogger("mcpbridge.bridge")
#: The lines of the tasks that each call can repeat.
_drops = DropLog(log)

#: The most tasks of the client that the session keeps; beyond it the oldest ended ones go.
MAX_RECORDS: Final = 1000
#: The tasks on one page of ``tasks/list``.
PAGE_SIZE: Final = 50
#: The status notification of 2025-11-25.
STATUS_NOTIFICATION: Final = "notifications/tasks/status"


class SessionTasks:
    """The tasks of one modern session; see the module docstring.

    :param discover_result: the upstream's ``server/discover`` result: a server that
        declares the extension gets a :class:`~.taskdriver.TaskWatch` for the status of
        its tasks, and a client that declared tasks gets them natively.
    """

    def __init__(self, client: Client, host: DriverHost, discover_result: Any) -> None:
        self._client = client
        self._host = host
        #: The client capabilities of an upstream request that may make a task.
        self.capabilities = tasks.with_extension(host.upstream_capabilities)
        offered = tasks.offers_extension(discover_result)
        self._watch = TaskWatch(client, self.capabilities, lambda: host.log_level) if offered else None
        #: The client uses tasks itself: its task-augmented calls get tasks of their own.
        self.native = offered and tasks.declares_tasks(host.client_capabilities)
        self._client_tasks = ClientTasks(host.output, host.options.timeouts.call)

    # ------------------------------------------------------------ both kinds

    def shape(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """A result for the client: the tools of ``tools/list`` get the ``taskSupport`` the
        client may use (see :func:`~.rules.tasks.mark_tools`)."""
        tools = result.get("tools")
        if method != "tools/list" or not isinstance(tools, list):
            return result
        marked = tasks.mark_tools(tools, native=self.native)
        return result if marked is tools else {**result, "tools": marked}

    def _driver(self, slot: Slot, *, on_task: Any, related: bool = False) -> TaskDriver:
        return TaskDriver(
            self._client,
            self._host,
            slot,
            capabilities=self.capabilities,
            watch=self._watch,
            on_task=on_task,
            related=related,
        )

    # ------------------------------------------------------------ transparent

    def carry(
        self, slot: Slot, created: dict[str, Any], progress: ProgressForwarder | None
    ) -> dict[str, Any] | None:
        """Drive the task of the ``CreateTaskResult`` ``created`` to its end for a client that
        waits for the result of its request.

        Returns the result of the task; ``None`` when the task ended otherwise and the
        slot has its error. A new status message of the task is one more step of the
        client's progress. Raises what :meth:`TaskDriver.run` raises but
        :class:`TaskEnded`.
        """
        on_task = None if progress is None else lambda task: progress.status(task.status_message)
        try:
            task = self._driver(slot, on_task=on_task).run(created_task(created))
        except TaskEnded as ended:
            _drops(
                logging.WARNING,
                "calls whose task ended early",
                "request %s (tools/call): %s",
                printable(slot.id),
                ended.detail or ended.cause,
            )
            self._host.output.respond_error(slot, errortable.error_object(ended.cause, ended.detail))
            return None
        error = self._end_error(slot, task)
        if error is None:
            assert task.result is not None
            return task.result
        self._host.output.respond_error(slot, error)
        return None

    @staticmethod
    def _end_error(slot: Slot, task: Task) -> dict[str, Any] | None:
        """The error of a task that ended without a result, or ``None`` for a completed one."""
        if task.status == "completed":
            return None
        if task.status == "failed":
            _drops(
                logging.INFO,
                "failed tasks of the upstream server",
                "request %s (tools/call): the task of the upstream server failed",
                printable(slot.id),
            )
            return tasks.failure_error(task)
        return errortable.error_object("task_cancelled", task.status_message)

    # ------------------------------------------------------------ native

    def advertise(self, init: dict[str, Any]) -> dict[str, Any]:
        """The initialize result, with ``capabilities.tasks`` for a client of native tasks."""
        if not self.native:
            return init
        return {**init, "capabilities": {**init["capabilities"], "tasks": tasks.server_capability()}}

    def augmented(self, request: Request) -> bool:
        """True for a task-augmented ``tools/call`` (``params.task``) of a client of native tasks."""
        params = request.params
        return (
            self.native
            and request.method == "tools/call"
            and isinstance(params, dict)
            and (isinstance(params.get("task"), dict))
        )

    def adopt(self, run: RequestRun, created: dict[str, Any]) -> RunState:
        """A task-augmented call made a task upstream: answer the client's task at once, then
        drive the task on the run's slot and keep its record up to date until it ends.

        Returns how the run ends: ``RESPONDED`` when the record has the task's result,
        ``FAILED`` when it has an error, ``CANCELLED`` when the task was canceled.
        """
        slot, progress = run.slot, run.progress
        try:
            task = created_task(created)
        except TaskEnded as invalid:
            self._host.output.respond_error(slot, errortable.error_object(invalid.cause, invalid.detail))
            return RunState.FAILED
        records = self._client_tasks
        records.add(task, slot)
        self._host.output.respond(slot, tasks.create_task_result(task))

        def on_task(snapshot: Task) -> None:
            records.update(snapshot)
            if progress is not None:
                progress.status(snapshot.status_message)

        stopped: list[RunState] = []

        def on_stopped(exc: BaseException) -> None:
            # The record ends before the driver tells the server, so that the client finds it ended.
            failure = self._failure(slot, exc) if isinstance(exc, Exception) else None
            records.fail(task.task_id, failure)
            stopped.append(RunState.FAILED if failure is not None else RunState.CANCELLED)

        try:
            ended = self._driver(slot, on_task=on_task, related=True).run(task, on_stopped)
        except Exception as exc:  # noqa: BLE001 - each failure ends the task of the client
            if not stopped:  # the driver stopped before it drove the task
                on_stopped(exc)
            return stopped[0]
        error = self._end_error(slot, ended)
        if error is not None:
            records.fail(task.task_id, error, ended)
            return RunState.FAILED
        assert ended.result is not None
        records.complete(ended, run.shape_for_client(ended.result, task_record=True))
        return RunState.RESPONDED

    def complete(self, slot: Slot, result: dict[str, Any]) -> None:
        """A task-augmented call that the server answered at once: a task that has completed.

        ``result``: as :meth:`~.run.RequestRun.shape_for_client` shapes it for a task record.
        """
        now = tasks.timestamp(time.time())
        import uuid  # here: a server that answers a task-augmented call at once is rare

        task = Task(uuid.uuid4().hex, "completed", now, now, None)
        self._client_tasks.add(task, None, result)
        self._host.output.respond(slot, tasks.create_task_result(task))

    def _failure(self, slot: Slot, exc: Exception) -> dict[str, Any] | None:
        """The error of a task that the driver could not bring to its end; ``None``: canceled."""
        if isinstance(exc, (Cancelled, Silent)):
            return None
        if isinstance(exc, TaskEnded):
            return errortable.error_object(exc.cause, exc.detail)
        if isinstance(exc, InputError):
            return errortable.error_object(exc.cause, exc.detail)
        if isinstance(exc, ClientFailed):
            return exc.error
        if isinstance(exc, Closed) and self._client.gone:
            return errortable.error_object("upstream_exited")
        if isinstance(exc, McpError):
            return errortable.error_from_mcp(exc)
        _drops(
            logging.ERROR,
            "tasks that failed inside the bridge",
            "the task of request %s failed inside the bridge",
            printable(slot.id),
            exc_info=exc,
        )
        return errortable.internal_error()

    def answer(self, slot: Slot, request: Request) -> None:
        """The work of a slot for ``tasks/get``, ``tasks/result``, ``tasks/cancel`` or ``tasks/list``."""
        records = self._client_tasks
        try:
            if request.method == "tasks/list":
                result = records.list(request.params)
            elif request.method == "tasks/result":
                result = records.result(tasks.task_id_of(request.params), slot.cancel)
            elif request.method == "tasks/cancel":
                result = records.cancel(tasks.task_id_of(request.params))
            else:
                result = records.get(tasks.task_id_of(request.params))
        except InvalidParams as exc:
            self._host.output.respond_error(slot, errortable.error_object("invalid_params", exc.detail))
            return
        except _Failed as failed:
            if failed.error is not None:
                self._host.output.respond_error(slot, failed.error)
            return
        self._host.output.respond(slot, result)


class _Failed(BridgeError):
    """``tasks/result`` of a task that failed: ``error`` is its error (``None``: canceled, no answer)."""

    def __init__(self, error: dict[str, Any] | None) -> None:
        super().__init__("the task failed")
        self.error = error


@dataclass(eq=False)
class _Record:
    task: Task
    #: The slot that drives the task upstream; ``None`` once it ended.
    slot: Slot | None
    #: The ``tasks/result`` answer once the task ended: the result, or the error.
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class ClientTasks:
    """The tasks that the client made itself in this session, oldest first.

    The driver of each task calls :meth:`update` with each snapshot and :meth:`complete`
    or :meth:`fail` at its end; the requests of the client read the records. Every change
    of a record happens under one condition, which wakes a ``tasks/result`` that waits.
    """

    def __init__(self, output: Host, result_timeout: float) -> None:
        self._output = output
        self._result_timeout = result_timeout
        self._cond = threading.Condition()
        self._records: dict[str, _Record] = {}

    def add(self, task: Task, slot: Slot | None, result: dict[str, Any] | None = None) -> None:
        """A new task: one that ``slot`` drives, or one that has ended with ``result``."""
        with self._cond:
            self._records[task.task_id] = _Record(_without_payload(task), slot, result)
            self._evict_locked()

    def _evict_locked(self) -> None:
        """Keep at most :data:`MAX_RECORDS`: the oldest tasks that ended go first."""
        excess = len(self._records) - MAX_RECORDS
        for task_id in [i for i, r in self._records.items() if r.task.terminal][: max(excess, 0)]:
            del self._records[task_id]

    def update(self, task: Task) -> None:
        """A new snapshot of a task in flight; a change of its status goes to the client.

        The terminal snapshot waits for :meth:`complete` or :meth:`fail`, which end the record.
        """
        if task.terminal:
            return
        with self._cond:
            record = self._records.get(task.task_id)
            if record is None or record.task.terminal:
                return
            before = record.task
            record.task = _without_payload(task)
            changed = (before.status, before.status_message) != (task.status, task.status_message)
        if changed:
            self._output.write_notification(STATUS_NOTIFICATION, tasks.legacy_task(task))

    def complete(self, task: Task, result: dict[str, Any]) -> None:
        self._end(task.task_id, _without_payload(task), result=result)

    def fail(self, task_id: str, error: dict[str, Any] | None, task: Task | None = None) -> None:
        """The task ended without a result: ``error`` for ``tasks/result`` (``None``: canceled)."""
        with self._cond:
            record = self._records.get(task_id)
            if record is None or record.task.terminal:
                return
            if task is None:
                status = "failed" if error is not None else "cancelled"
                task = _ended(record.task, status, None if error is None else str(error.get("message", "")))
        self._end(task_id, _without_payload(task), error=error or errortable.error_object("canceled"))

    def _end(
        self,
        task_id: str,
        task: Task,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        with self._cond:
            record = self._records.get(task_id)
            if record is None or record.task.terminal:
                return
            record.task, record.slot, record.result, record.error = task, None, result, error
            self._cond.notify_all()
        self._output.write_notification(STATUS_NOTIFICATION, tasks.legacy_task(task))

    # -- the requests of the client ---------------------------------------------------------

    def _record_locked(self, task_id: str) -> _Record:
        record = self._records.get(task_id)
        if record is None:
            raise InvalidParams("no task of this session has the taskId")
        return record

    def get(self, task_id: str) -> dict[str, Any]:
        with self._cond:
            return tasks.legacy_task(self._record_locked(task_id).task)

    def list(self, params: Any) -> dict[str, Any]:
        with self._cond:
            every = [tasks.legacy_task(record.task) for record in self._records.values()]
        return tasks.list_page(every, params, PAGE_SIZE)

    def result(self, task_id: str, cancel: CancelToken) -> dict[str, Any]:
        """The result of the task's request once the task ended, tagged with the task.

        Raises:
            InvalidParams: no such task.
            _Failed: the task ended without a result, or the wait ended.
        """
        remove = cancel.add_callback(self._wake)
        try:
            with self._cond:
                record = self._record_locked(task_id)
                ended = self._cond.wait_for(
                    lambda: record.task.terminal or cancel.cancelled, self._result_timeout
                )
                if cancel.cancelled:
                    raise _Failed(None)
                if not ended:
                    detail = f"tasks/result: the task did not end in {format_duration(self._result_timeout)}"
                    raise _Failed(errortable.error_object("timeout", detail))
                if record.result is None:
                    raise _Failed(record.error)
                return tasks.related(record.result, task_id)
        finally:
            remove()

    def cancel(self, task_id: str) -> dict[str, Any]:
        """End a task in flight as canceled; its driver tells the server (``tasks/cancel``)."""
        with self._cond:
            record = self._record_locked(task_id)
            if record.task.terminal:
                raise InvalidParams("the task has ended already")
            slot = record.slot
            task = _ended(record.task, "cancelled", "The client canceled the task.")
        self._end(task_id, task, error=errortable.error_object("canceled"))
        if slot is not None:
            slot.cancel.cancel("the client canceled the task")
        return tasks.legacy_task(task)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


def _without_payload(task: Task) -> Task:
    """The task without its result, error or input requests: the records keep those apart."""
    return Task(
        task.task_id,
        task.status,
        task.created_at,
        task.last_updated_at,
        task.ttl_ms,
        task.poll_interval_ms,
        task.status_message,
    )


def _ended(task: Task, status: str, message: str | None) -> Task:
    """``task`` ended by the bridge with ``status`` now."""
    return Task(
        task.task_id,
        status,
        task.created_at,
        tasks.timestamp(time.time()),
        task.ttl_ms,
        task.poll_interval_ms,
        message,
    )
