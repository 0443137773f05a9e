"""A raw upstream server for the client tests: it answers what each request's method asks for.

Usage::

    python tests/peers/scripted_upstream.py [--ignore-eof] [--ignore-term] [--stderr TEXT]

It reads JSON-RPC lines on stdin and writes lines on stdout, with no MCP
library: so it can also write what a correct server never would. The method
of each request says what to do:

``test/echo``
    The result ``{"resultType": "complete", "method": ..., "params": ...}``.
``test/result``
    ``params["result"]`` as the result, unchanged (any JSON value).
``test/error``
    The error ``params["error"]`` (``{code, message, data?}``).
``test/raw``
    Each string of ``params["lines"]`` as one raw line (``{id}`` becomes the
    request id), then no answer unless ``params["answer"]`` is true (then a
    small result with the method).
``test/notify``
    Each object of ``params["notifications"]`` as a notification, then the echo
    result. ``{"progress": n}`` stands for a progress notification with the
    request's progress token.
``test/silent``
    No answer at all.
``test/cancels``
    The result ``{"cancels": [params of each notifications/cancelled seen]}``.
``test/listens``
    The result ``{"listens": [params of each subscriptions/listen seen]}``.
``test/exit``
    Exit at once with ``params["code"]``, without an answer.
``test/kill-self``
    Kill this process with ``SIGKILL``.
``test/stop-reading``
    Answer, then never read stdin again (the process stays alive).
``test/spawn-grandchild``
    Start a process that sleeps in the same process group; the result has its ``pid``.
    With ``"holds_stdout": true`` the process keeps this one's stdout open.
``test/close-stdout``
    Answer, then close stdout and keep reading stdin.
``subscriptions/listen``
    The acknowledgment with the requested filter (minus ``"unsupported"``
    keys), unless the filter has ``"noAck": true``.
``test/end-listen``
    End the listen stream ``params["id"]``: ``params["how"]`` is ``"result"``,
    ``"cancelled"`` or ``"error"``; then the echo result.

``--ignore-eof`` keeps the process alive after the end of stdin, and
``--ignore-term`` ignores ``SIGTERM``: a test of the shutdown's escalation.
``--stderr TEXT`` writes TEXT to stderr, one line per ``|``-separated part, at the start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

out_lock = threading.Lock()
cancels: list[Any] = []
listens: list[Any] = []
forever = threading.Event()


def write_line(text: str) -> None:
    with out_lock:
        sys.stdout.buffer.write(text.encode("utf-8") + b"\n")
        sys.stdout.buffer.flush()


def send(obj: dict[str, Any]) -> None:
    write_line(json.dumps(obj, separators=(",", ":")))


def result(request_id: Any, value: Any) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def echo(request_id: Any, method: str, params: Any) -> None:
    result(request_id, {"resultType": "complete", "method": method, "params": params})


def handle(message: dict[str, Any]) -> bool:
    """Answer one message; False stops reading stdin."""
    method = message.get("method")
    params = message.get("params") or {}
    if "id" not in message:
        if method == "notifications/cancelled":
            cancels.append(params)
        return True
    request_id = message["id"]
    meta = params.get("_meta") or {}
    if method == "test/echo":
        echo(request_id, method, params)
    elif method == "test/result":
        result(request_id, params["result"])
    elif method == "test/error":
        send({"jsonrpc": "2.0", "id": request_id, "error": params["error"]})
    elif method == "test/raw":
        for line in params["lines"]:
            write_line(line.replace("{id}", json.dumps(request_id)))
        if params.get("answer"):
            result(request_id, {"resultType": "complete", "method": method})
    elif method == "test/notify":
        for note in params["notifications"]:
            if "progress" in note:
                note = {
                    "method": "notifications/progress",
                    "params": {"progressToken": meta.get("progressToken"), "progress": note["progress"]},
                }
            send({"jsonrpc": "2.0", **note})
        echo(request_id, method, params)
    elif method == "test/silent":
        pass
    elif method == "test/cancels":
        result(request_id, {"resultType": "complete", "cancels": cancels})
    elif method == "test/exit":
        sys.stdout.flush()
        os._exit(params.get("code", 0))
    elif method == "test/kill-self":
        os.kill(os.getpid(), signal.SIGKILL)
    elif method == "test/stop-reading":
        echo(request_id, method, params)
        return False
    elif method == "test/spawn-grandchild":
        child = subprocess.Popen(
            [sys.executable, "-c", "import time\nwhile True: time.sleep(60)"],
            stdin=subprocess.DEVNULL,
            stdout=None if params.get("holds_stdout") else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        result(request_id, {"resultType": "complete", "pid": child.pid})
    elif method == "test/close-stdout":
        echo(request_id, method, params)
        sys.stdout.flush()
        os.close(1)
    elif method == "test/listens":
        result(request_id, {"resultType": "complete", "listens": listens})
    elif method == "subscriptions/listen":
        listens.append(params)
        wanted = dict(params.get("notifications") or {})
        if not wanted.pop("noAck", False):
            honored = {key: value for key, value in wanted.items() if key != "unsupported"}
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": {"_meta": {SUBSCRIPTION_ID: request_id}, "notifications": honored},
                }
            )
    elif method == "test/end-listen":
        stream = params["id"]
        how = params["how"]
        if how == "result":
            result(stream, {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: stream}})
        elif how == "cancelled":
            send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": stream}})
        else:
            send({"jsonrpc": "2.0", "id": stream, "error": {"code": -32603, "message": "stream failed"}})
        echo(request_id, method, params)
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
    return True


def main() -> None:
    args = sys.argv[1:]
    if "--ignore-term" in args:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--stderr" in args:
        for part in args[args.index("--stderr") + 1].split("|"):
            sys.stderr.write(part + "\n")
        sys.stderr.flush()
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not handle(message):
            forever.wait()
    if "--ignore-eof" in args:
        forever.wait()


if __name__ == "__main__":
    main()
