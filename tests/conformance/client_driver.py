"""Play VS Code in front of the bridge for the client scenarios of the conformance suite.

The suite's client mode runs this script with the URL of its mock server as the
last argument and the scenario's name in ``MCP_CONFORMANCE_SCENARIO``
(``MCP_CONFORMANCE_CONTEXT`` holds a JSON object for scenarios that name the
tool calls to make)::

    node <conformance>/dist/index.js client --command "python tests/conformance/client_driver.py" \\
        --scenario http-custom-headers --spec-version 2026-07-28

The script starts ``python -m mcpbridge --protocol 2026-07-28 <url>`` (the bridge is
the client under test, a client of 2026-07-28 by that option: by default it sends the
client's ``initialize`` of 2025-11-25 first, which these checks count as a request
without the version header and ``_meta`` of 2026-07-28) and speaks MCP 2025-11-25 to
it over its stdin and stdout the way VS Code does: ``initialize`` with VS Code's
capabilities, ``notifications/initialized``, ``tools/list``, then the calls the scenario
expects. It answers the bridge's ``elicitation/create`` requests like a user who accepts
the form. Then it closes the bridge's stdin and waits for the bridge to exit.

Exit status: 0 when every step got an answer and every call that should succeed
did; 1 otherwise (the reason is on stderr, which the suite saves).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

#: Upper bound, in seconds, for any single answer of the bridge.
WAIT = 20.0
#: How long the bridge gets to exit after its stdin is closed.
EXIT_WAIT = 10.0

#: The capabilities VS Code declares in ``initialize``.
VSCODE_CAPABILITIES: dict[str, Any] = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
}
VSCODE_INFO = {"name": "Visual Studio Code", "version": "1.108.0"}

Json = dict[str, Any]


class DriverError(Exception):
    """The bridge did not behave as a peer of VS Code can work with."""


def log(message: str) -> None:
    """Write one line to stderr (the suite saves it with the scenario's results)."""
    print(f"client_driver: {message}", file=sys.stderr, flush=True)


def fill_value(schema: Any) -> Any:
    """The value a user would enter for a field of a form or a tool argument."""
    if not isinstance(schema, dict):
        return "x"
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "object":
        return fill_object(schema)
    if kind == "array":
        return []
    if kind == "null":
        return None
    return "us-west1"


def fill_object(schema: Json) -> Json:
    """Values for the properties of an object schema (all of them, as an accepting user would)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {name: fill_value(sub) for name, sub in properties.items()}


class Bridge:
    """The bridge child process, spoken to as VS Code speaks to it."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpbridge", "--protocol", "2026-07-28", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the bridge's log goes to our stderr
        )
        self.inbox: queue.Queue[Json | None] = queue.Queue()
        self.responses: dict[int, Json] = {}
        self.next_id = 1
        self.reader = threading.Thread(target=self._read, name="client-driver-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.inbox.put(json.loads(line))
        self.inbox.put(None)

    def send(self, message: Json) -> None:
        """Write one message to the bridge's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.proc.stdin.flush()

    def request(
        self, method: str, params: Json | None = None, *, on_request: Callable[[Json], Json] | None = None
    ) -> Json:
        """Send a request and wait for its response, answering the bridge's requests meanwhile."""
        request_id = self.next_id
        self.next_id += 1
        message: Json = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.wait(request_id, on_request or self.answer)

    def wait(self, request_id: int, on_request: Callable[[Json], Json]) -> Json:
        """Pump the bridge's messages until the response to ``request_id`` arrives."""
        while request_id not in self.responses:
            try:
                message = self.inbox.get(timeout=WAIT)
            except queue.Empty:
                raise DriverError(f"no response to request {request_id} in {WAIT:.0f} s") from None
            if message is None:
                raise DriverError(f"the bridge closed its stdout before answering request {request_id}")
            if "method" in message and "id" in message:
                self.send({"id": message["id"], **on_request(message)})
            elif "method" in message:
                log(f"notification {message['method']}")
            else:
                self.responses[message["id"]] = message
        return self.responses.pop(request_id)

    def answer(self, message: Json) -> Json:
        """Answer a request of the bridge as VS Code with a consenting user would."""
        method = message["method"]
        params = message.get("params") or {}
        log(f"bridge request {method}")
        if method == "elicitation/create" and params.get("mode", "form") == "form":
            return {
                "result": {"action": "accept", "content": fill_object(params.get("requestedSchema") or {})}
            }
        if method == "elicitation/create":
            return {"result": {"action": "decline"}}
        if method == "roots/list":
            return {"result": {"roots": []}}
        if method == "ping":
            return {"result": {}}
        return {"error": {"code": -32601, "message": f"Method not found: {method}"}}

    def close(self) -> int:
        """Close the bridge's stdin (as VS Code does on shutdown) and wait for it to exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=EXIT_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=EXIT_WAIT)
            raise DriverError(
                f"the bridge did not exit in {EXIT_WAIT:.0f} s after its stdin closed"
            ) from None


class Session:
    """One VS Code session against the bridge: the handshake, then the scenario's calls."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.problems: list[str] = []
        self.tools: dict[str, Json] = {}

    def start(self) -> None:
        """initialize, notifications/initialized, tools/list."""
        reply = self.bridge.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": VSCODE_CAPABILITIES,
                "clientInfo": VSCODE_INFO,
            },
        )
        if "result" not in reply:
            raise DriverError(f"initialize failed: {reply.get('error')}")
        self.bridge.send({"method": "notifications/initialized"})
        self.capabilities: Json = reply["result"].get("capabilities", {})
        listed = self.ok("tools/list", {})
        self.tools = {tool["name"]: tool for tool in listed.get("tools", [])}
        log(f"tools: {sorted(self.tools)}")

    def ok(
        self, method: str, params: Json | None = None, *, on_request: Callable[[Json], Json] | None = None
    ) -> Json:
        """A request that should succeed; a failure is recorded as a problem."""
        reply = self.bridge.request(method, params, on_request=on_request)
        if "result" not in reply:
            self.problems.append(f"{method} {json.dumps(params)[:200]} failed: {reply.get('error')}")
            return {}
        result: Json = reply["result"]
        if method == "tools/call" and result.get("isError"):
            self.problems.append(f"tools/call {params and params.get('name')} returned isError: {result}")
        return result

    def call(self, name: str, arguments: Json | None = None, **kwargs: Any) -> Json:
        """tools/call of a listed tool; the arguments default to what a user would fill in."""
        if name not in self.tools:
            self.problems.append(f"tool {name} is not in tools/list")
            return {}
        if arguments is None:
            arguments = fill_object(self.tools[name].get("inputSchema") or {})
        return self.ok("tools/call", {"name": name, "arguments": arguments}, **kwargs)


def run_request_metadata(session: Session) -> None:
    """The checks look at the headers and _meta of every upstream request: listing tools is enough."""


def run_http_standard_headers(session: Session) -> None:
    """Every method with an Mcp-Method header, and the ones with an Mcp-Name header."""
    for name in session.tools:
        session.call(name)
    resources = session.ok("resources/list", {}).get("resources", [])
    for resource in resources:
        session.ok("resources/read", {"uri": resource["uri"]})
    prompts = session.ok("prompts/list", {}).get("prompts", [])
    for prompt in prompts:
        session.ok("prompts/get", {"name": prompt["name"]})


def run_http_custom_headers(session: Session) -> None:
    """The tool calls the scenario names in its context, with its arguments."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    for call in context.get("toolCalls", []):
        session.call(call["name"], call.get("arguments", {}))


def run_http_invalid_tool_headers(session: Session) -> None:
    """Call every tool the bridge lists: it must list only the valid one."""
    for name in sorted(session.tools):
        session.call(name)


def run_json_schema_ref_no_deref(session: Session) -> None:
    """Listing the tool whose schema holds a network $ref is the test (the mock server has no tools/call)."""


def run_json_schema_2020_12_preservation(session: Session) -> None:
    """Echo the focal tool's inputSchema, as VS Code received it, back to the server."""
    schema = session.tools.get("json_schema_2020_12_tool", {}).get("inputSchema")
    if not isinstance(schema, dict):
        session.problems.append("json_schema_2020_12_tool has no inputSchema object in tools/list")
        return
    session.call("json_schema_echo", {"schema": schema})


def run_sep_2322_client_request_state(session: Session) -> None:
    """Input-required rounds: with state (an unrelated call in between), without state, no resultType."""

    def confirm_after_unrelated_call(message: Json) -> Json:
        # While the first call waits for the user, another tool call goes through.
        session.call("test_mrtr_unrelated", {})
        return session.bridge.answer(message)

    session.call("test_mrtr_echo_state", {}, on_request=confirm_after_unrelated_call)
    session.call("test_mrtr_no_state", {})
    session.call("test_mrtr_no_result_type", {})


SCENARIOS: dict[str, Callable[[Session], None]] = {
    "request-metadata": run_request_metadata,
    "http-standard-headers": run_http_standard_headers,
    "http-custom-headers": run_http_custom_headers,
    "http-invalid-tool-headers": run_http_invalid_tool_headers,
    "json-schema-ref-no-deref": run_json_schema_ref_no_deref,
    "json-schema-2020-12-preservation": run_json_schema_2020_12_preservation,
    "sep-2322-client-request-state": run_sep_2322_client_request_state,
}

#: Scenarios whose tool calls may fail without the driver failing (the checks judge them).
CALLS_MAY_FAIL = {"http-invalid-tool-headers"}


def main(argv: list[str]) -> int:
    """Run the scenario named in the environment against the URL given last."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if len(argv) < 2 or scenario not in SCENARIOS:
        log(f"usage: MCP_CONFORMANCE_SCENARIO=<one of {sorted(SCENARIOS)}> client_driver.py <url>")
        return 2
    bridge = Bridge(argv[-1])
    session = Session(bridge)
    try:
        session.start()
        SCENARIOS[scenario](session)
    except DriverError as error:
        log(str(error))
        bridge.proc.kill()
        bridge.proc.wait(timeout=EXIT_WAIT)
        return 1
    finally:
        if bridge.proc.poll() is None:
            status = bridge.close()
            log(f"the bridge exited with status {status}")
    for problem in session.problems:
        log(problem)
    return 1 if session.problems and scenario not in CALLS_MAY_FAIL else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
