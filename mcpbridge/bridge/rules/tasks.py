"""Tasks between revision 2025-11-25 of the client and the Tasks extension of the upstream server.

This module is pure: it does no I/O, starts no thread and reads no clock. The task
driver (module ``taskdriver``) owns the waits and the requests; this module reads the
tasks of the upstream server and writes the shapes of both sides.

A 2026-07-28 server that declares the extension ``io.modelcontextprotocol/tasks`` may
answer a ``tools/call`` of a client that declared it too with a task instead of a
result: a ``CreateTaskResult``, the fields of the task *flat* in the result with
``resultType: "task"``. The client then reads the task with ``tasks/get`` (a *detailed*
task: ``result`` when ``completed``, ``error`` when ``failed``, ``inputRequests`` when
``input_required``), answers its input requests with ``tasks/update`` and ends it with
``tasks/cancel``. 2025-11-25 has tasks of its own, which the client asks for: a
``CreateTaskResult`` nests the task (``{"task": {...}}``), its durations are ``ttl`` and
``pollInterval``, and the final result comes from ``tasks/result``.

Rules:

* A task of the upstream server is checked against the extension's schema before
  anything reads it (:func:`parse_created`, :func:`parse_detailed`); a task that is not
  valid is an :class:`InvalidTask`, never repaired.
* The 2025-11-25 task (:func:`legacy_task`) has exactly the members of the schema:
  ``ttlMs`` becomes ``ttl``, ``pollIntervalMs`` becomes ``pollInterval``, and the inline
  payload (``result``, ``error``, ``inputRequests``) stays in the bridge.
* Time is the server's: the age of a task at a snapshot is ``lastUpdatedAt`` minus
  ``createdAt`` on the server's clock (:func:`age_seconds`), so the end of its time to
  live does not depend on how the two clocks differ.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from ...mcp.errorbase import PeerFault
from ...mcp.jsonrpc import MISSING_CLIENT_CAPABILITY
from ...mcp.protocol import META_RELATED_TASK, RESULT_INPUT_REQUIRED, RESULT_TASK, TASKS_EXTENSION
from .legacy import InvalidParams

__all__ = [
    "DEFAULT_POLL_MS",
    "MIN_POLL_MS",
    "STATUSES",
    "TERMINAL",
    "WATCHED_POLL_MS",
    "InvalidTask",
    "Task",
    "age_seconds",
    "as_input_required",
    "create_task_result",
    "declares_tasks",
    "failure_error",
    "legacy_task",
    "list_page",
    "mark_tools",
    "offers_extension",
    "parse_created",
    "parse_detailed",
    "parse_timestamp",
    "poll_seconds",
    "related",
    "requires_extension",
    "server_capability",
    "task_id_of",
    "timestamp",
    "with_extension",
]

#: The statuses of a task, the same in both models.
STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
#: The statuses after which a task does not change any more.
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: The poll interval when the task gives none.
DEFAULT_POLL_MS: Final = 1000
#: The shortest poll interval: a task that asks for less is polled this often.
MIN_POLL_MS: Final = 100
#: The poll interval of a task whose status comes on a listen stream: the polls only
#: catch a notification that a gap in the stream lost.
WATCHED_POLL_MS: Final = 30_000
#: The members of a 2025-11-25 task (``Task`` of its schema).
_LEGACY_MEMBERS: Final = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt")
#: The values of ``execution.taskSupport`` in 2025-11-25.
_TASK_SUPPORT: Final = frozenset({"forbidden", "optional", "required"})
#: An RFC 3339 timestamp, as ISO 8601 timestamps on the wire are.
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)
_CURSOR_PREFIX: Final = "tasks:"


class InvalidTask(PeerFault):
    """A task of the upstream server does not have the shape of the extension's schema."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Task:
    """One task of the upstream server, as a snapshot of ``tasks/get`` or a notification shows it."""

    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    #: Milliseconds from the creation; ``None``: no limit.
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    #: The outstanding input requests (``input_required`` only), key -> ``{method, params}``.
    input_requests: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    #: The final result (``completed`` only).
    result: dict[str, Any] | None = None
    #: The JSON-RPC error (``failed`` only).
    error: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


# --------------------------------------------------------------------------- reading a task


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _task_fields(value: Any) -> Task:
    """The fields that every task has (``Task`` of the extension's schema)."""
    if not isinstance(value, dict):
        raise InvalidTask("the task is not an object")
    task_id = value.get("taskId")
    if not isinstance(task_id, str):
        raise InvalidTask("the taskId is not a string")
    status = value.get("status")
    if status not in STATUSES:
        raise InvalidTask("the status is not a status of a task")
    for name in ("createdAt", "lastUpdatedAt"):
        if not isinstance(value.get(name), str):
            raise InvalidTask(f"the {name} is not a string")
    if "ttlMs" not in value or not (value["ttlMs"] is None or _integer(value["ttlMs"])):
        raise InvalidTask("the ttlMs is not an integer or null")
    poll = value.get("pollIntervalMs")
    if "pollIntervalMs" in value and not _integer(poll):
        raise InvalidTask("the pollIntervalMs is not an integer")
    message = value.get("statusMessage")
    if "statusMessage" in value and not isinstance(message, str):
        raise InvalidTask("the statusMessage is not a string")
    return Task(
        task_id=task_id,
        status=status,
        created_at=value["createdAt"],
        last_updated_at=value["lastUpdatedAt"],
        ttl_ms=value["ttlMs"],
        poll_interval_ms=poll,
        status_message=message,
    )


def parse_created(result: Any) -> Task:
    """The task of a ``CreateTaskResult`` (``resultType: "task"``).

    Raises:
        InvalidTask: the result is not a valid ``CreateTaskResult``.
    """
    if isinstance(result, dict) and result.get("resultType") != RESULT_TASK:
        raise InvalidTask("the result is not a CreateTaskResult")
    return _task_fields(result)


def parse_detailed(value: Any) -> Task:
    """The task of a ``tasks/get`` result or of the params of ``notifications/tasks``.

    The payload of the status must be there: ``inputRequests`` (an object of objects)
    for ``input_required``, ``result`` (an object) for ``completed``, ``error`` (a
    JSON-RPC error object) for ``failed``.

    Raises:
        InvalidTask: the value is not a valid ``DetailedTask``.
    """
    task = _task_fields(value)
    if task.status == "input_required":
        requests = value.get("inputRequests")
        if not isinstance(requests, dict) or not all(isinstance(item, dict) for item in requests.values()):
            raise InvalidTask("the inputRequests of an input_required task are not an object of requests")
        return dataclasses.replace(task, input_requests=MappingProxyType(dict(requests)))
    if task.status == "completed":
        result = value.get("result")
        if not isinstance(result, dict):
            raise InvalidTask("the result of a completed task is not an object")
        return dataclasses.replace(task, result=result)
    if task.status == "failed":
        error = value.get("error")
        if not (
            isinstance(error, dict) and _integer(error.get("code")) and isinstance(error.get("message"), str)
        ):
            raise InvalidTask("the error of a failed task is not a JSON-RPC error")
        return dataclasses.replace(task, error=error)
    return task


def failure_error(task: Task) -> dict[str, Any]:
    """The JSON-RPC error of a ``failed`` task for the client: its code, message and data, kept."""
    assert task.error is not None
    error = {"code": task.error["code"], "message": task.error["message"]}
    if "data" in task.error:
        error["data"] = task.error["data"]
    return error


def as_input_required(requests: Mapping[str, Any]) -> dict[str, Any]:
    """The input requests of a task as an InputRequiredResult, the shape the input rounds plan."""
    return {"resultType": RESULT_INPUT_REQUIRED, "inputRequests": dict(requests)}


# --------------------------------------------------------------------------- time


def parse_timestamp(text: str) -> float | None:
    """The seconds since the epoch of an RFC 3339 timestamp, or ``None`` when it is not one."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    try:
        # A leap second (60) counts as the second after 59.
        moment = datetime.datetime(
            year, month, day, hour, minute, min(second, 59), tzinfo=datetime.timezone.utc
        )
    except ValueError:
        return None
    seconds = moment.timestamp() + max(0, second - 59)
    if match.group(7):
        seconds += float(match.group(7))
    if not match.group(8):
        sign = 1 if match.group(9) == "+" else -1
        seconds -= sign * (int(match.group(10)) * 3600 + int(match.group(11)) * 60)
    return seconds


def timestamp(seconds: float) -> str:
    """The RFC 3339 timestamp (UTC, milliseconds) of ``seconds`` since the epoch."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def age_seconds(task: Task) -> float:
    """How old the task was at this snapshot: ``lastUpdatedAt`` minus ``createdAt``, on the
    server's clock. 0 when either is not a timestamp or the difference is negative."""
    created = parse_timestamp(task.created_at)
    updated = parse_timestamp(task.last_updated_at)
    if created is None or updated is None:
        return 0.0
    return max(0.0, updated - created)


def poll_seconds(task: Task, *, watched: bool = False) -> float:
    """The time until the next ``tasks/get`` of ``task``: its ``pollIntervalMs``
    (:data:`DEFAULT_POLL_MS` without one, at least :data:`MIN_POLL_MS`), and at least
    :data:`WATCHED_POLL_MS` when its status comes on a listen stream."""
    interval = task.poll_interval_ms if task.poll_interval_ms is not None else DEFAULT_POLL_MS
    interval = max(interval, MIN_POLL_MS)
    if watched:
        interval = max(interval, WATCHED_POLL_MS)
    return interval / 1000


# --------------------------------------------------------------------------- capabilities


def with_extension(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The client capabilities of an upstream request, with the Tasks extension declared."""
    out = dict(capabilities)
    extensions = out.get("extensions")
    out["extensions"] = {**(extensions if isinstance(extensions, dict) else {}), TASKS_EXTENSION: {}}
    return out


def offers_extension(discover_result: Any) -> bool:
    """True when a ``server/discover`` result declares the Tasks extension (an object)."""
    caps = discover_result.get("capabilities") if isinstance(discover_result, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def requires_extension(error: Any) -> bool:
    """True for a -32021 error of the upstream that names the Tasks extension as missing."""
    if not isinstance(error, dict) or error.get("code") != MISSING_CLIENT_CAPABILITY:
        return False
    data = error.get("data")
    required = data.get("requiredCapabilities") if isinstance(data, dict) else None
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def declares_tasks(client_capabilities: Any) -> bool:
    """True when the 2025-11-25 client declared ``capabilities.tasks`` (an object)."""
    return isinstance(client_capabilities, dict) and isinstance(client_capabilities.get("tasks"), dict)


def server_capability() -> dict[str, Any]:
    """The ``capabilities.tasks`` of the bridge toward a client that uses tasks itself."""
    return {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def mark_tools(tools: list[Any], *, native: bool) -> list[Any]:
    """The tools of a ``tools/list`` page with the ``execution.taskSupport`` that the client may use.

    ``native``: the client uses tasks itself. A server of the extension decides for
    each call whether it makes a task, so each tool may be called as a task: it keeps a
    valid ``taskSupport`` of the server and gets ``optional`` otherwise. Else the bridge
    carries the tasks for the client, which calls every tool plainly: ``taskSupport``
    goes away (and an ``execution`` that becomes empty). Returns ``tools`` itself when
    nothing changes.
    """
    out = tools
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            continue
        execution = tool.get("execution")
        support = execution.get("taskSupport") if isinstance(execution, dict) else None
        if native:
            if support in _TASK_SUPPORT:
                continue
            base = execution if isinstance(execution, dict) else {}
            new = {**tool, "execution": {**base, "taskSupport": "optional"}}
        else:
            if "execution" not in tool:
                continue
            rest = (
                {k: v for k, v in execution.items() if k != "taskSupport"}
                if isinstance(execution, dict)
                else {}
            )
            new = {k: v for k, v in tool.items() if k != "execution"}
            if rest:
                new["execution"] = rest
        if out is tools:
            out = list(tools)
        out[index] = new
    return out


# --------------------------------------------------------------------------- 2025-11-25 shapes


def legacy_task(task: Task) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` of an upstream task: ``ttl`` and ``pollInterval``, no payload."""
    out: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttl": task.ttl_ms,
    }
    if task.status_message is not None:
        out["statusMessage"] = task.status_message
    if task.poll_interval_ms is not None:
        out["pollInterval"] = task.poll_interval_ms
    return {name: out[name] for name in (*_LEGACY_MEMBERS, "ttl", "pollInterval") if name in out}


def create_task_result(task: Task) -> dict[str, Any]:
    """The 2025-11-25 ``CreateTaskResult``: the task nested under ``task``."""
    return {"task": legacy_task(task)}


def related(params: dict[str, Any] | None, task_id: str) -> dict[str, Any]:
    """``params`` (``None``: none) with ``_meta["io.modelcontextprotocol/related-task"]``."""
    out = dict(params or {})
    meta = out.get("_meta")
    out["_meta"] = {**(meta if isinstance(meta, dict) else {}), META_RELATED_TASK: {"taskId": task_id}}
    return out


def task_id_of(params: Any) -> str:
    """The ``taskId`` of the params of ``tasks/get``, ``tasks/result`` or ``tasks/cancel``.

    Raises:
        InvalidParams: no string ``taskId``.
    """
    task_id = params.get("taskId") if isinstance(params, dict) else None
    if not isinstance(task_id, str):
        raise InvalidParams("taskId must be a string")
    return task_id


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{offset}".encode("ascii")).decode("ascii")


def _offset(cursor: Any, length: int) -> int:
    if not isinstance(cursor, str):
        raise InvalidParams("the cursor is not a string")
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
    except (UnicodeError, ValueError, binascii.Error) as exc:
        raise InvalidParams("the cursor is not a cursor of tasks/list") from exc
    number = text.removeprefix(_CURSOR_PREFIX)
    if number == text or not number.isdigit() or int(number) > length:
        raise InvalidParams("the cursor is not a cursor of tasks/list")
    return int(number)


def list_page(tasks: Sequence[dict[str, Any]], params: Any, page_size: int) -> dict[str, Any]:
    """One page of a 2025-11-25 ``tasks/list`` result over ``tasks`` (oldest first).

    Raises:
        InvalidParams: a cursor that this function did not make for a list this long.
    """
    start = 0
    if isinstance(params, dict) and "cursor" in params:
        start = _offset(params["cursor"], len(tasks))
    end = start + page_size
    page: dict[str, Any] = {"tasks": list(tasks[start:end])}
    if end < len(tasks):
        page["nextCursor"] = _cursor(end)
    return page
