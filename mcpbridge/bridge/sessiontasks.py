"""The tasks of one modern session: what the session does with the tasks of the Tasks extension.

A :class:`SessionTasks` belongs to a :class:`~.session.ModernSession` of ``--tasks auto``.
Each upstream ``tools/call`` declares the extension with its capabilities; a task that
the server makes instead of a result is driven to its end on the slot of the request
(:class:`~.taskdriver.TaskDriver`), and the client gets the result. The tool list loses
``execution.taskSupport``: the client calls every tool plainly.
"""

from __future__ import annotations

import logging
from typing import Any

from ..mcp.client import Client
from ..mcp.text import printable
from . import errortable, tasks
from .output import Slot
from .rounds import ProgressForwarder
from .taskdriver import DriverHost, TaskDriver, TaskEnded, TaskWatch, created_task

__all__ = ["SessionTasks"]

log = logging.getLogger("mcpbridge.bridge")


class SessionTasks:
    """The tasks of one modern session: a ``tools/call`` declares the extension, and a task
    that the server makes instead of a result is driven to its end on the request's slot.

    :param discover_result: the upstream's ``server/discover`` result: a server that
        declares the extension gets a :class:`TaskWatch` for the status of its tasks.
    """

    def __init__(self, client: Client, host: DriverHost, discover_result: Any) -> None:
        self._client = client
        self._host = host
        #: The client capabilities of an upstream request that may make a task.
        self.capabilities = tasks.with_extension(host.upstream_capabilities)
        self._watch = (
            TaskWatch(client, self.capabilities, lambda: host.log_level)
            if tasks.offers_extension(discover_result)
            else None
        )

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
        driver = TaskDriver(
            self._client, self._host, slot, capabilities=self.capabilities, watch=self._watch, on_task=on_task
        )
        try:
            task = driver.run(created_task(created))
        except TaskEnded as ended:
            log.warning("request %s (tools/call): %s", printable(slot.id), ended.detail or ended.cause)
            self._host.output.respond_error(slot, errortable.error_object(ended.cause, ended.detail))
            return None
        if task.status == "completed":
            assert task.result is not None
            return task.result
        if task.status == "failed":
            log.info("request %s (tools/call): the task of the upstream server failed", printable(slot.id))
            self._host.output.respond_error(slot, tasks.failure_error(task))
        else:
            self._host.output.respond_error(
                slot, errortable.error_object("task_cancelled", task.status_message)
            )
        return None

    def shape(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """A result for the client: the tools of ``tools/list`` lose their ``taskSupport``, since
        the client calls them plainly and the bridge carries their tasks."""
        tools = result.get("tools")
        if method != "tools/list" or not isinstance(tools, list):
            return result
        marked = tasks.mark_tools(tools, native=False)
        return result if marked is tools else {**result, "tools": marked}
