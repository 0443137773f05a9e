"""An upstream server of the Tasks extension (``io.modelcontextprotocol/tasks``), on stdio or HTTP.

Usage::

    python tests/peers/task_server.py [--http] [--no-listen]

The server is the project's own :class:`mcpbridge.mcp.server.Server`. A layer in front
of it (:class:`TaskLayer`, a server transport around the real one) adds the extension
as its text says: ``server/discover`` declares it, a ``tools/call`` of a task tool
makes a task (or answers -32021 to a client that did not declare the extension),
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` read and change the tasks, and a
``subscriptions/listen`` with ``notifications.taskIds`` gets ``notifications/tasks``
for each change of those tasks. ``--no-listen`` acknowledges no task ids, so the
client must poll.

The task tools (each task polls at ``poll_ms``, 100 by default):

``report(steps, gate)``
    A tool that only runs as a task (-32021 without the extension; its entry in the tool
    list says ``execution.taskSupport: required``): a status message
    for each step, then the result ``reported <steps> steps``. With ``gate`` each step
    waits until a ``tasks/get`` saw the one before.
``ask(kind, times)``
    ``input_required`` with one input request (``kind``: ``form``, ``url``,
    ``sample`` or ``roots``) at a time, ``times`` times, each under a new key; then the
    answers as the text of the result.
``fail``
    Fails with the error -32050 ``the job broke`` and ``data: {"job": 7}``.
``tool_error``
    Completes with a result that has ``isError: true``.
``until_cancelled``
    Works until ``tasks/cancel``.
``hold(group, size)``
    Works until ``size`` tasks of ``group`` exist, then completes with ``held <group>``.
``lose``
    Forgets the task at once: ``tasks/get`` answers -32602.
``never(ttl_ms)``
    Works for ever with the time to live ``ttl_ms``.
``quick``
    Answers at once, without a task.

The fixtures that the tasks scenarios of the MCP conformance suite call by name
(tests/conformance/run.py runs them against this server, ``--only task-peer``):

``greet(name)``
    A plain tool: ``Hello, <name>!``.
``slow_compute(seconds, label)``
    Sleeps ``seconds`` then completes with ``computed <label>``; ``tasks/cancel`` ends it
    cancelled. A client without the extension gets the result at once, without a task.
``failing_job``
    A tool that only runs as a task (-32021 without the extension): completes with
    ``isError: true``.
``protocol_error_job``
    Fails as ``fail`` does.
``confirm_delete(filename)``
    ``input_required`` with one form (``confirm``), then completes.
``multi_input``
    ``input_required`` with two forms at once (``name``, ``confirm``); each answer
    leaves only the other pending; completes once both are answered.
``test_tool_with_task``
    A tool that only runs as a task: the first call answers ``input_required`` for
    ``user_name`` (no task yet); the retry with the answer makes the task, whose result
    greets the name.

The plain tools: ``echo(text)``, ``greet(name)``, and ``events(name, count)``, which waits (at most
10 s) until the layer saw ``count`` events whose text starts with ``name`` and gives
all events: ``created <tool> <id>`` (once the answer went out), ``get <id>``, ``update <id> <keys>``,
``cancel <id>``, ``cancel-terminal <id>``, ``listen <ids>``, ``done <id> <status>``,
``polled <id> <seconds>`` (beside each ``get``: the moment it arrived, on the monotonic clock
of the server) and, over HTTP, ``header <method> <Mcp-Name>`` for each request of the extension. So a
test waits for what the server saw instead of sleeping.

With ``--http`` the process writes ``port=<n>`` as its first stdout line and serves
``POST /mcp`` until the end of its stdin. A request of the extension whose ``Mcp-Name``
header is not its ``taskId`` gets HTTP 400 with the error -32020 (header mismatch), as a
server behind a load balancer that routes by the header would.
"""

from __future__ import annotations

import argparse
import http.server
import itertools
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcpbridge.mcp import protocol  # noqa: E402
from mcpbridge.mcp.jsonrpc import (  # noqa: E402
    MISSING_CLIENT_CAPABILITY,
    ErrorObject,
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    Response,
    parse,
    serialize,
)
from mcpbridge.mcp.server import (  # noqa: E402
    Context,
    Server,
    ToolResult,
    create_message,
    elicit_form,
    elicit_url,
    list_roots,
)
from mcpbridge.mcp.transports import OnFrameError, OnMessage, OnServerClosed, ServerTransport  # noqa: E402

EXTENSION = protocol.TASKS_EXTENSION
#: The longest wait of the tool ``events``.
EVENTS_WAIT = 10.0
#: The longest wait a test may ask of ``events``.
MAX_EVENTS_WAIT = 60.0
DEFAULT_POLL_MS = 100
DEFAULT_TTL_MS = 600_000
FAILURE = {"code": -32050, "message": "the job broke", "data": {"job": 7}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
#: The fixtures of the tasks scenarios of the conformance suite that run as tasks.
FIXTURE_TASK_TOOLS = (
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
)
TASK_TOOLS = (
    "report",
    "ask",
    "fail",
    "tool_error",
    "until_cancelled",
    "hold",
    "lose",
    "never",
    "quick",
    *FIXTURE_TASK_TOOLS,
)
#: The task tools that only run as tasks: -32021 without the extension, ``taskSupport: required``.
REQUIRED_TASK_TOOLS = frozenset({"report", "failing_job", "test_tool_with_task"})
#: The input request of the first round of ``test_tool_with_task``.
USER_NAME_KEY = "user_name"
CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
MISSING_EXTENSION = ErrorObject(
    MISSING_CLIENT_CAPABILITY,
    "Missing required client capability",
    {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
)


def now_text() -> str:
    moment = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment * 1000) % 1000:03d}Z"


def declares_extension(params: Any) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    caps = meta.get(protocol.META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def slow_compute_result(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"computed {arguments.get('label', '')}")


def user_name_round() -> dict[str, Any]:
    """The first round of ``test_tool_with_task``: an input request for the user's name."""
    return {
        "resultType": "input_required",
        "inputRequests": {USER_NAME_KEY: elicit_form("Your name?", NAME_SCHEMA)},
    }


# ------------------------------------------------------------------------------------ tasks


@dataclass
class TaskState:
    task_id: str
    tool: str
    ttl_ms: int | None
    poll_ms: int
    status: str = "working"
    status_message: str | None = None
    created_at: str = field(default_factory=now_text)
    updated_at: str = ""
    input_requests: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    #: The number of changes, and the number that the last ``tasks/get`` showed.
    version: int = 0
    served: int = 0

    def detailed(self) -> dict[str, Any]:
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at or self.created_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        }
        if self.status_message is not None:
            task["statusMessage"] = self.status_message
        if self.status == "input_required":
            task["inputRequests"] = dict(self.input_requests)
        elif self.status == "completed":
            task["result"] = self.result
        elif self.status == "failed":
            task["error"] = self.error
        return task


class TaskStore:
    """The tasks, the event log and the listen streams that want their changes."""

    def __init__(self, send: Callable[[Message], None], *, listen: bool) -> None:
        self._send = send
        self._listen = listen
        self._cond = threading.Condition()
        self._tasks: dict[str, TaskState] = {}
        self._events: list[str] = []
        self._groups: dict[str, int] = {}
        #: listen request id -> the task ids it carries (once acknowledged).
        self._streams: dict[Any, frozenset[str]] = {}
        #: listen request id -> the task ids that its acknowledgment will name.
        self._asked: dict[Any, frozenset[str]] = {}
        self._stream_locks: dict[Any, threading.Lock] = {}

    # -- events --------------------------------------------------------------------------

    def event(self, text: str) -> None:
        with self._cond:
            self._events.append(text)
            self._cond.notify_all()

    def wait_events(self, name: str, count: int, wait: float = EVENTS_WAIT) -> list[str]:
        with self._cond:
            self._cond.wait_for(lambda: sum(e.startswith(name) for e in self._events) >= count, wait)
            return list(self._events)

    # -- the tasks -----------------------------------------------------------------------

    def create(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Make a task and start its script; give the ``CreateTaskResult``."""
        ttl = arguments.get("ttl_ms", DEFAULT_TTL_MS)
        task = TaskState(uuid.uuid4().hex, tool, ttl, int(arguments.get("poll_ms", DEFAULT_POLL_MS)))
        with self._cond:
            if tool != "lose":
                self._tasks[task.task_id] = task
            created = {**task.detailed(), "resultType": "task"}
        script = getattr(self, f"_script_{tool}")
        threading.Thread(target=script, args=(task, arguments), name=f"task-{tool}", daemon=True).start()
        return created

    def get(self, task_id: str) -> dict[str, Any] | None:
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return None
            task.served = task.version
            self._cond.notify_all()
            return task.detailed()

    def change(self, task: TaskState, **changes: Any) -> None:
        """Change a task that is not terminal yet; tell the listen streams that want it."""
        with self._cond:
            if task.status in ("completed", "failed", "cancelled"):
                return
            if all(getattr(task, name) == value for name, value in changes.items()):
                return
            for name, value in changes.items():
                setattr(task, name, value)
            task.version += 1
            task.updated_at = now_text()
            snapshot = task.detailed()
            self._cond.notify_all()
        if snapshot["status"] in ("completed", "failed", "cancelled"):
            self.event(f"done {task.task_id} {snapshot['status']}")
        self._publish(snapshot)

    def update(self, task_id: str, responses: dict[str, Any]) -> bool:
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return False
            fresh = {k: v for k, v in responses.items() if k in task.input_requests and k not in task.answers}
            task.answers.update(fresh)
            pending = {k: v for k, v in task.input_requests.items() if k not in task.answers}
            self._cond.notify_all()
        if fresh:
            # An answered request leaves the task at once; the last one puts it back to work.
            status = "input_required" if pending else "working"
            self.change(task, status=status, input_requests=pending)
        self.event(f"update {task_id} {','.join(sorted(fresh))}")
        return True

    def cancel(self, task_id: str) -> bool:
        with self._cond:
            task = self._tasks.get(task_id)
        if task is None:
            return False
        if task.status in ("completed", "failed", "cancelled"):
            self.event(f"cancel-terminal {task_id}")
        else:
            # The event once the task is cancelled: a test that waits for it then sees the task so.
            self.change(task, status="cancelled", status_message="canceled by the client")
            self.event(f"cancel {task_id}")
        return True

    def sleep(self, task: TaskState, seconds: float) -> bool:
        """Wait ``seconds`` unless the task ends first; tell whether it is still running."""
        end = time.monotonic() + seconds
        with self._cond:
            while task.status not in ("completed", "failed", "cancelled"):
                left = end - time.monotonic()
                if left <= 0:
                    return True
                self._cond.wait(min(left, 1.0))
            return False

    def wait(self, task: TaskState, predicate: Callable[[], bool]) -> bool:
        """Wait until ``predicate`` holds or the task ends; tell whether it holds."""
        with self._cond:
            while not predicate():
                if task.status in ("completed", "failed", "cancelled"):
                    return False
                self._cond.wait(1.0)
            return True

    # -- the scripts of the task tools -----------------------------------------------------

    def _script_report(self, task: TaskState, arguments: dict[str, Any]) -> None:
        steps = int(arguments.get("steps", 3))
        for step in range(1, steps + 1):
            self.change(task, status_message=f"step {step} of {steps}")
            if arguments.get("gate") and not self.wait(task, lambda: task.served >= task.version):
                return
        self.change(task, status="completed", result=text_result(f"reported {steps} steps"))

    def _script_ask(self, task: TaskState, arguments: dict[str, Any]) -> None:
        kind = arguments.get("kind", "form")
        times = int(arguments.get("times", 1))
        requests = {
            "form": lambda: elicit_form("Your name?", NAME_SCHEMA),
            "url": lambda: elicit_url("Sign in to continue.", "https://example.com/auth"),
            "sample": lambda: create_message(["Say hello."], max_tokens=20),
            "roots": list_roots,
        }
        for number in range(1, times + 1):
            key = f"{kind}-{number}"
            self.change(task, status="input_required", input_requests={key: requests[kind]()})
            if not self.wait(task, lambda key=key: key in task.answers):
                return
            self.change(task, status="working", input_requests={})
        texts = [json.dumps(task.answers[key], sort_keys=True) for key in sorted(task.answers)]
        self.change(task, status="completed", result=text_result("answers: " + " | ".join(texts)))

    def _script_fail(self, task: TaskState, arguments: dict[str, Any]) -> None:
        self.change(task, status="failed", status_message="the job broke", error=dict(FAILURE))

    def _script_tool_error(self, task: TaskState, arguments: dict[str, Any]) -> None:
        self.change(task, status="completed", result=text_result("the input was bad", is_error=True))

    def _script_until_cancelled(self, task: TaskState, arguments: dict[str, Any]) -> None:
        self.change(task, status_message="working until canceled")

    def _script_hold(self, task: TaskState, arguments: dict[str, Any]) -> None:
        group = str(arguments.get("group", "g"))
        size = int(arguments.get("size", 1))
        with self._cond:
            self._groups[group] = self._groups.get(group, 0) + 1
            self._cond.notify_all()
        if self.wait(task, lambda: self._groups[group] >= size):
            self.change(task, status="completed", result=text_result(f"held {group}"))

    def _script_lose(self, task: TaskState, arguments: dict[str, Any]) -> None:
        pass

    def _script_never(self, task: TaskState, arguments: dict[str, Any]) -> None:
        self.change(task, status_message="working for ever")

    # -- the fixtures of the conformance suite --------------------------------------------

    def _script_slow_compute(self, task: TaskState, arguments: dict[str, Any]) -> None:
        if self.sleep(task, float(arguments.get("seconds", 0))):
            self.change(task, status="completed", result=slow_compute_result(arguments))

    def _script_failing_job(self, task: TaskState, arguments: dict[str, Any]) -> None:
        self.change(task, status="completed", result=text_result("the job could not run", is_error=True))

    def _script_protocol_error_job(self, task: TaskState, arguments: dict[str, Any]) -> None:
        self._script_fail(task, arguments)

    def _ask_all(self, task: TaskState, requests: dict[str, Any]) -> bool:
        self.change(task, status="input_required", input_requests=requests)
        return self.wait(task, lambda: all(key in task.answers for key in requests))

    def _script_confirm_delete(self, task: TaskState, arguments: dict[str, Any]) -> None:
        filename = str(arguments.get("filename", ""))
        if self._ask_all(task, {"confirm": elicit_form(f"Delete {filename}?", CONFIRM_SCHEMA)}):
            answer = json.dumps(task.answers["confirm"], sort_keys=True)
            self.change(task, status="completed", result=text_result(f"delete {filename}: {answer}"))

    def _script_multi_input(self, task: TaskState, arguments: dict[str, Any]) -> None:
        requests = {
            "name": elicit_form("Your name?", NAME_SCHEMA),
            "confirm": elicit_form("Sure?", CONFIRM_SCHEMA),
        }
        if self._ask_all(task, requests):
            texts = [json.dumps(task.answers[key], sort_keys=True) for key in sorted(requests)]
            self.change(task, status="completed", result=text_result("answers: " + " | ".join(texts)))

    def _script_test_tool_with_task(self, task: TaskState, arguments: dict[str, Any]) -> None:
        name = arguments.get(USER_NAME_KEY)
        self.change(task, status="completed", result=text_result(f"Hello, {name}!"))

    # -- listen streams ----------------------------------------------------------------------

    def listen_requested(self, request_id: Any, task_ids: list[str]) -> None:
        with self._cond:
            self._stream_locks[request_id] = threading.Lock()
            self._streams[request_id] = frozenset()
            self._asked[request_id] = frozenset(task_ids) if self._listen else frozenset()
        self.event(f"listen {','.join(sorted(task_ids))}")

    def acknowledge(self, message: Notification, inner_send: Callable[[Message], None]) -> None:
        """Add the task ids to the acknowledgment of a listen stream that asked for them."""
        params = dict(message.params or {})
        request_id = params["_meta"][protocol.META_SUBSCRIPTION_ID]
        with self._cond:
            lock = self._stream_locks.get(request_id)
            ids = self._asked.pop(request_id, None)
        if lock is None or ids is None:
            inner_send(message)
            return
        with lock:
            params["notifications"] = {**params.get("notifications", {}), "taskIds": sorted(ids)}
            inner_send(Notification(message.method, params))
            with self._cond:
                if request_id in self._streams:
                    self._streams[request_id] = ids

    def listen_ended(self, request_id: Any) -> None:
        with self._cond:
            self._streams.pop(request_id, None)
            self._stream_locks.pop(request_id, None)

    def _publish(self, snapshot: dict[str, Any]) -> None:
        with self._cond:
            targets = [
                (request_id, self._stream_locks[request_id])
                for request_id, ids in self._streams.items()
                if snapshot["taskId"] in ids
            ]
        for request_id, lock in targets:
            params = {**snapshot, "_meta": {protocol.META_SUBSCRIPTION_ID: request_id}}
            with lock:
                with self._cond:
                    live = request_id in self._streams
                if live:
                    self._send(Notification(protocol.TASK_NOTIFICATION, params))


class TaskLayer(ServerTransport):
    """The extension in front of the server: see the module docstring."""

    def __init__(self, inner: ServerTransport, *, listen: bool) -> None:
        self._inner = inner
        self.store = TaskStore(self._send_quietly, listen=listen)
        self._on_message: OnMessage | None = None

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnServerClosed) -> None:
        self._on_message = on_message
        self._inner.start(self._deliver, on_frame_error, on_closed)

    def send(self, message: Message) -> None:
        if isinstance(message, Notification) and message.method == protocol.LISTEN_ACKNOWLEDGED:
            self.store.acknowledge(message, self._inner.send)
            return
        if isinstance(message, Response) and isinstance(message.result, dict):
            message = Response(message.id, self._with_tasks(message.result))
        self._inner.send(message)

    @staticmethod
    def _with_tasks(result: dict[str, Any]) -> dict[str, Any]:
        """The discover result declares the extension; ``report`` says in the tool list that it
        needs it, as a server for both eras keeps ``execution`` in its tools."""
        if "supportedVersions" in result:
            caps = dict(result.get("capabilities") or {})
            caps["extensions"] = {**caps.get("extensions", {}), EXTENSION: {}}
            return {**result, "capabilities": caps}
        tools = result.get("tools")
        if isinstance(tools, list):
            marked = [
                {**tool, "execution": {"taskSupport": "required"}}
                if tool.get("name") in REQUIRED_TASK_TOOLS
                else tool
                for tool in tools
            ]
            return {**result, "tools": marked}
        return result

    def close(self) -> None:
        self._inner.close()

    def _send_quietly(self, message: Message) -> None:
        try:
            self._inner.send(message)
        except Exception:  # noqa: BLE001 - a closed connection drops the message
            pass

    def _answer(self, request: Request, result: dict[str, Any]) -> None:
        result = {"resultType": "complete", **result}
        self._send_quietly(Response(request.id, result))

    def _refuse(self, request: Request, code: int, message: str) -> None:
        self._send_quietly(ErrorResponse(request.id, ErrorObject(code, message)))

    def _deliver(self, message: Message) -> None:
        assert self._on_message is not None
        if isinstance(message, Notification) and message.method == "notifications/cancelled":
            self.store.listen_ended((message.params or {}).get("requestId"))
        if isinstance(message, Request) and self._intercept(message):
            return
        self._on_message(message)

    def _intercept(self, request: Request) -> bool:
        """Serve a request of the extension; False: the server serves it."""
        params = request.params or {}
        method = request.method
        if method == "subscriptions/listen":
            ids = (params.get("notifications") or {}).get("taskIds")
            if ids is None:
                return False
            if not declares_extension(params):
                self._send_quietly(ErrorResponse(request.id, MISSING_EXTENSION))
                return True
            self.store.listen_requested(request.id, [i for i in ids if isinstance(i, str)])
            return False
        if method == "tools/call" and params.get("name") in TASK_TOOLS:
            self._call(request, params)
            return True
        if method not in protocol.TASK_METHODS:
            return False
        if not declares_extension(params):
            self._send_quietly(ErrorResponse(request.id, MISSING_EXTENSION))
            return True
        task_id = params.get("taskId")
        if method == "tasks/get":
            self.store.event(f"get {task_id}")
            self.store.event(f"polled {task_id} {time.monotonic():.6f}")
            task = self.store.get(task_id) if isinstance(task_id, str) else None
            if task is None:
                self._refuse(request, -32602, "Failed to retrieve task: Task not found")
            else:
                self._answer(request, task)
        elif method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(task_id, str) or not isinstance(responses, dict):
                self._refuse(request, -32602, "Invalid params")
            elif self.store.update(task_id, responses):
                self._answer(request, {})
            else:
                self._refuse(request, -32602, "Task not found")
        elif isinstance(task_id, str) and self.store.cancel(task_id):
            self._answer(request, {})
        else:
            self._refuse(request, -32602, "Task not found")
        return True

    def _call(self, request: Request, params: dict[str, Any]) -> None:
        name = params["name"]
        arguments = params.get("arguments") or {}
        if name == "quick":
            self._answer(request, text_result("quick answer"))
            return
        if not declares_extension(params):
            if name in REQUIRED_TASK_TOOLS:
                self._send_quietly(ErrorResponse(request.id, MISSING_EXTENSION))
            elif name == "slow_compute":
                self._answer(request, slow_compute_result(arguments))
            else:
                self._answer(request, text_result(f"{name} needs the tasks extension to run"))
            return
        if name == "test_tool_with_task":
            # The first round gathers the name (no task yet); the retry that answers it makes the task.
            answer = (params.get("inputResponses") or {}).get(USER_NAME_KEY)
            content = answer.get("content") if isinstance(answer, dict) else None
            if not isinstance(content, dict) or not isinstance(content.get("name"), str):
                self._send_quietly(Response(request.id, user_name_round()))
                return
            arguments = {**arguments, USER_NAME_KEY: content["name"]}
        created = self.store.create(name, arguments)
        self._send_quietly(Response(request.id, created))
        self.store.event(f"created {name} {created['taskId']}")


def build(store: Callable[[], TaskStore]) -> Server:
    server = Server("task-peer", "1.0.0", instructions="A server of the Tasks extension for the tests.")

    @server.tool(description="Send the text back")
    def echo(ctx: Context, text: str) -> str:
        return text

    @server.tool(description="Greet by name")
    def greet(ctx: Context, name: str) -> str:
        return f"Hello, {name}!"

    @server.tool(description="Wait for events of the tasks and give them all")
    def events(ctx: Context, name: str = "", count: int = 0, wait: float = EVENTS_WAIT) -> ToolResult:
        seen = store().wait_events(name, count, min(float(wait), MAX_EVENTS_WAIT))
        return ToolResult(json.dumps(seen), structured={"events": seen})

    def task_tool(ctx: Context, **arguments: Any) -> str:
        raise AssertionError("the task layer serves the task tools")

    for name in TASK_TOOLS:
        server.add_tool(
            task_tool,
            name=name,
            description=f"The task tool {name}",
            input_schema={"type": "object", "additionalProperties": True},
        )
    return server


# ------------------------------------------------------------------------------------- HTTP


class _Waiter:
    def __init__(self, original_id: Any) -> None:
        self.original_id = original_id
        self.cond = threading.Condition()
        self.items: list[Message] = []
        self.done = False


class HttpFront(ServerTransport):
    """The POSTs of the HTTP connections as one server transport (ids made unique here)."""

    def __init__(self) -> None:
        self._on_message: OnMessage | None = None
        self._lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnServerClosed) -> None:
        self._on_message = on_message

    def close(self) -> None:
        pass

    def send(self, message: Message) -> None:
        if isinstance(message, (Response, ErrorResponse)):
            key: Any = message.id
        elif isinstance(message, Notification):
            params = message.params or {}
            meta = params.get("_meta")
            key = meta.get(protocol.META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
            if key is None:
                key = params.get("progressToken")
        else:
            return
        with self._lock:
            waiter = self._waiters.get(key) if isinstance(key, int) else None
        if waiter is None:
            return
        if isinstance(message, Response):
            message = Response(waiter.original_id, message.result)
        elif isinstance(message, ErrorResponse):
            message = ErrorResponse(waiter.original_id, message.error)
        else:
            params = dict(message.params or {})
            if "progressToken" in params:
                params["progressToken"] = waiter.original_id
            else:
                params["_meta"] = {**params["_meta"], protocol.META_SUBSCRIPTION_ID: waiter.original_id}
            message = Notification(message.method, params)
        with waiter.cond:
            waiter.items.append(message)
            waiter.done = waiter.done or not isinstance(message, Notification)
            waiter.cond.notify_all()

    def submit(self, request: Request) -> tuple[int, _Waiter]:
        assert self._on_message is not None
        internal = next(self._ids)
        waiter = _Waiter(request.id)
        with self._lock:
            self._waiters[internal] = waiter
        params = dict(request.params or {})
        meta = params.get("_meta")
        if isinstance(meta, dict) and "progressToken" in meta:
            params["_meta"] = {**meta, "progressToken": internal}
        self._on_message(Request(internal, request.method, params))
        return internal, waiter

    def forget(self, internal: int) -> None:
        with self._lock:
            self._waiters.pop(internal, None)

    def cancel(self, internal: int) -> None:
        assert self._on_message is not None
        self._on_message(Notification("notifications/cancelled", {"requestId": internal}))


def serve_http(front: HttpFront, store: Callable[[], TaskStore]) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                message = parse(body, max_depth=200)
            except FrameError:
                self._json(
                    400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
                )
                return
            if not isinstance(message, Request):
                self._json(202, None)
                return
            method_header = self.headers.get("Mcp-Method")
            if method_header is not None and method_header != message.method:
                error = {"code": -32020, "message": "Header mismatch: Mcp-Method must be the method"}
                self._json(400, {"jsonrpc": "2.0", "id": message.id, "error": error})
                return
            if message.method in protocol.TASK_METHODS:
                name = self.headers.get("Mcp-Name")
                store().event(f"header {self.headers.get('Mcp-Method')} {name}")
                if (
                    name != (message.params or {}).get("taskId")
                    or self.headers.get("Mcp-Method") != message.method
                ):
                    error = {"code": -32020, "message": "Header mismatch: Mcp-Name must be the taskId"}
                    self._json(400, {"jsonrpc": "2.0", "id": message.id, "error": error})
                    return
            internal, waiter = front.submit(message)
            try:
                if message.method == "subscriptions/listen" or "progressToken" in (
                    (message.params or {}).get("_meta") or {}
                ):
                    self._stream(internal, waiter)
                    return
                with waiter.cond:
                    waiter.cond.wait_for(lambda: waiter.done, 3600.0)
                    final = waiter.items[-1]
                self._json(200, json.loads(serialize(final)))
            finally:
                front.forget(internal)

        def _json(self, status: int, value: Any) -> None:
            data = b"" if value is None else json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            if data:
                self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, internal: int, waiter: _Waiter) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            sent = 0
            try:
                while True:
                    with waiter.cond:
                        waiter.cond.wait_for(lambda: len(waiter.items) > sent, 1.0)  # noqa: B023
                        items = waiter.items[sent:]
                        done = waiter.done
                    for item in items:
                        self.wfile.write(b"event: message\ndata: " + serialize(item)[:-1] + b"\n\n")
                    self.wfile.flush()
                    sent += len(items)
                    if done:
                        return
                    self.connection.settimeout(0.0)
                    try:
                        if self.connection.recv(1) == b"":
                            raise ConnectionError
                    except BlockingIOError:
                        pass
                    finally:
                        self.connection.settimeout(None)
            except OSError:
                front.cancel(internal)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, name="task-peer-http", daemon=True).start()
    sys.stdout.write(f"port={httpd.server_address[1]}\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the end of stdin
    httpd.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP on 127.0.0.1")
    parser.add_argument("--no-listen", action="store_true", help="acknowledge no task ids on listen streams")
    options = parser.parse_args(argv)
    layers: list[TaskLayer] = []
    server = build(lambda: layers[0].store)
    if options.http:
        front = HttpFront()
        layers.append(TaskLayer(front, listen=not options.no_listen))
        server.start(layers[0])
        serve_http(front, lambda: layers[0].store)
        return 0
    from mcpbridge.mcp.transports.stdio import StdioServerTransport

    layers.append(
        TaskLayer(StdioServerTransport(sys.stdin.buffer, sys.stdout.buffer), listen=not options.no_listen)
    )
    server.serve(layers[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
