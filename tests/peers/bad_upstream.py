"""A misbehaving MCP 2026-07-28 upstream server on stdio, for the fault tests.

Usage::

    python tests/peers/bad_upstream.py [--discover MODE] [--exit-at-start CODE] [--stray-lines N] [--mute]

It reads JSON-RPC lines on stdin and writes raw lines on stdout, with no MCP
library, so it can write what a correct server never would. ``server/discover``
is answered as ``--discover`` says:

``answer`` (the default)
    A valid ``DiscoverResult`` that declares tools.
``silent``
    No answer at all.
``error``
    The error -32601 of a server of revision 2025-11-25.
``wrong-shape``
    The result ``[]``.
``exit``
    Exit with code 4 at once.

``--exit-at-start CODE`` exits before it reads anything. ``--stray-lines N`` writes N
lines that are not JSON on stdout before it reads anything, as a server with a debug
print does. With ``--mute`` the server answers nothing at all and keeps running after
the end of its stdin, until it is stopped: a server that hangs. ``--grandchild`` starts a
process that sleeps, in the server's process group, before it reads anything
(a helper process that a server leaves behind); the arguments from ``--grandchild``
on are its arguments too, so a test can find both processes by a tag. Arguments that
the server does not know are ignored.

``tools/call`` does what the tool's ``name`` says; ``arguments`` are its parameters:

``ok {text}``
    A text result, as a good server does.
``garbage``
    Lines that are not messages and carry no id (not JSON, invalid UTF-8, JSON
    that is not an object, an object without a method or a result), then the
    answer "garbage survived".
``unknown_id``
    Answers to ids that no request has (an integer, a string, no id), then the
    answer "unknown ids survived".
``result {value}``
    ``value`` as the result, unchanged: ``[]``, a string, an unknown ``resultType``.
``bad_error``
    An error response whose error object has the wrong member types.
``error {code, message, data}``
    This JSON-RPC error, unchanged.
``too_long {bytes, id_last}``
    An answer of about ``bytes`` bytes, with the id first (or last).
``too_long_anonymous {bytes}``
    A line of ``bytes`` bytes without an id, then the answer "long line survived".
``deep {depth}``
    A result whose ``structuredContent`` nests ``depth`` levels.
``unparsable {kind}``
    An answer with the request's id that is not valid JSON: ``nan`` (what
    Python's ``json.dumps`` writes for a NaN), ``surrogate`` (a lone surrogate
    escape, as ``JSON.stringify`` writes it), ``utf8`` (invalid UTF-8) or
    ``deep`` (5000 levels, past any parser's stack).
``notifications``
    Notifications that belong to nothing or are not valid (an unknown method,
    progress for an unknown token, a log message without a level, a
    cancellation of an unknown request), a request to the client, then the
    answer "notifications survived".
``double``
    Two answers to the same request: "first", then "second".
``silent``
    No answer, and the line ``bad_upstream: silent`` on stderr; when the request is
    canceled, the line ``bad_upstream: cancelled`` on stderr and the answer "late"
    comes anyway.
``stop_reading``
    The answer "stopped reading", then never a read of stdin again (the process
    stays alive until it is stopped).
``exit {code}``
    Exit at once with ``code``, without an answer.

Every other request gets -32601. The process ends at the end of its stdin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

SERVER_INFO = {"name": "bad-upstream", "version": "0.0.0"}
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

out_lock = threading.Lock()
forever = threading.Event()
#: Requests of the tool "silent" that wait for their cancellation: id -> True.
silent: dict[Any, bool] = {}


def write_raw(data: bytes) -> None:
    with out_lock:
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.buffer.flush()


def send(obj: Any) -> None:
    write_raw(json.dumps(obj, separators=(",", ":")).encode())


def result(request_id: Any, value: Any) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text_result(request_id: Any, text: str) -> None:
    result(request_id, {"resultType": "complete", "content": [{"type": "text", "text": text}]})


def discover(request_id: Any, mode: str) -> None:
    if mode == "answer":
        result(
            request_id,
            {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "_meta": {META_SERVER_INFO: SERVER_INFO},
            },
        )
    elif mode == "error":
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
    elif mode == "wrong-shape":
        result(request_id, [])
    elif mode == "exit":
        os._exit(4)
    # "silent": nothing


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> bool:
    """Run one tool; False stops reading stdin."""
    if name == "ok":
        text_result(request_id, str(arguments.get("text", "ok")))
    elif name == "garbage":
        for line in (
            b"not json",
            b"\xff\xfe\x00",
            b"[1,2,3]",
            b'"a string"',
            b"null",
            b'{"jsonrpc":"2.0"}',
            b"{",
        ):
            write_raw(line)
        text_result(request_id, "garbage survived")
    elif name == "unknown_id":
        result(424242, {"resultType": "complete", "content": []})
        result("nobody", {"resultType": "complete", "content": []})
        send({"jsonrpc": "2.0", "error": {"code": -32603, "message": "an error without an id"}})
        send({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "an error with a null id"}})
        text_result(request_id, "unknown ids survived")
    elif name == "result":
        result(request_id, arguments.get("value"))
    elif name == "bad_error":
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": "-32603", "message": 5}})
    elif name == "error":
        error = {"code": arguments["code"], "message": arguments["message"]}
        if "data" in arguments:
            error["data"] = arguments["data"]
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
    elif name == "too_long":
        filler = "x" * int(arguments["bytes"])
        body = {"resultType": "complete", "content": [{"type": "text", "text": filler}]}
        if arguments.get("id_last"):
            send({"jsonrpc": "2.0", "result": body, "id": request_id})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "result": body})
    elif name == "too_long_anonymous":
        write_raw(
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"'
            + b"y" * int(arguments["bytes"])
            + b'"}}'
        )
        text_result(request_id, "long line survived")
    elif name == "deep":
        # Written by hand: json.dumps itself stops at a few hundred levels.
        depth = int(arguments["depth"])
        value = b'{"a":' * depth + b"1" + b"}" * depth
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
        write_raw(
            head + b',"result":{"resultType":"complete","content":[],"structuredContent":' + value + b"}}"
        )
    elif name == "unparsable":
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'
        raw = {
            "nan": b'{"resultType":"complete","content":[],"structuredContent":{"x":NaN}}',
            "surrogate": b'{"resultType":"complete","content":[{"type":"text","text":"\\ud83d"}]}',
            "utf8": b'{"resultType":"complete","content":[{"type":"text","text":"\xc3("}]}',
            "deep": b"[" * 5000 + b"]" * 5000,
        }[str(arguments.get("kind"))]
        write_raw(head + raw + b"}")
    elif name == "notifications":
        for note in (
            {"method": "notifications/unknown", "params": {"x": 1}},
            {"method": "notifications/progress", "params": {"progressToken": 987654, "progress": 1}},
            {"method": "notifications/progress", "params": {"progressToken": request_id, "progress": "lots"}},
            {"method": "notifications/message", "params": {"data": "no level"}},
            {"method": "notifications/message", "params": {"level": "loud", "data": "bad level"}},
            {"method": "notifications/cancelled", "params": {"requestId": 31337}},
            {"method": "notifications/tools/list_changed", "params": "not an object"},
        ):
            send({"jsonrpc": "2.0", **note})
        send({"jsonrpc": "2.0", "id": "s-1", "method": "sampling/createMessage", "params": {}})
        text_result(request_id, "notifications survived")
    elif name == "double":
        text_result(request_id, "first")
        text_result(request_id, "second")
    elif name == "silent":
        silent[request_id] = True
        sys.stderr.write("bad_upstream: silent\n")
        sys.stderr.flush()
    elif name == "stop_reading":
        text_result(request_id, "stopped reading")
        return False
    elif name == "exit":
        sys.stdout.flush()
        os._exit(int(arguments.get("code", 5)))
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": "Unknown tool"}})
    return True


def handle(message: Any, discover_mode: str) -> bool:
    """Answer one message; False stops reading stdin."""
    if not isinstance(message, dict):
        return True
    method = message.get("method")
    params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
    if "id" not in message:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if silent.pop(request_id, False):
                sys.stderr.write("bad_upstream: cancelled\n")
                sys.stderr.flush()
                text_result(request_id, "late")
        return True
    request_id = message["id"]
    if method == "server/discover":
        discover(request_id, discover_mode)
    elif method == "tools/list":
        result(request_id, {"resultType": "complete", "tools": []})
    elif method == "tools/call":
        arguments: dict[str, Any] = params["arguments"] if isinstance(params.get("arguments"), dict) else {}
        return call(request_id, str(params.get("name")), arguments)
    elif method is not None:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
    return True


def main(argv: list[str]) -> None:
    discover_mode = "answer"
    if "--discover" in argv:
        discover_mode = argv[argv.index("--discover") + 1]
    if "--exit-at-start" in argv:
        os._exit(int(argv[argv.index("--exit-at-start") + 1]))
    if "--stray-lines" in argv:
        for number in range(int(argv[argv.index("--stray-lines") + 1])):
            write_raw(f"debug: starting, step {number + 1}".encode())
    if "--mute" in argv:
        for _line in sys.stdin.buffer:
            pass
        forever.wait()
    if "--grandchild" in argv:
        command = [sys.executable, "-c", "import time; time.sleep(1000)", *argv[argv.index("--grandchild") :]]
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not handle(message, discover_mode):
            forever.wait()  # alive, but never reads again; SIGTERM or SIGKILL ends it


if __name__ == "__main__":
    main(sys.argv[1:])
