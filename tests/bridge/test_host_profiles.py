"""The host profiles in a front end of this process: what each one passes upstream and gives the host.

The fixture server runs behind the memory link, and its transport records the
``_meta`` of each ``tools/call`` that reaches it, so a test sees exactly what the
bridge sent upstream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.fixture_server import CountingTransport, build
from harness import FrontendPair, text_of
from mcpbridge.mcp.jsonrpc import Message, Request
from mcpbridge.mcp.transports import ServerTransport
from schema import validate_frame

#: The keys of VS Code, the keys of other hosts and MCP Apps, and keys that never go upstream.
VSCODE_META = {"traceparent": "00-ab-cd-01", "vscode.requestId": "r"}
OTHER_META = {"cursor.com/conversation": "c", "openai/outputTemplate": "ui://widget/a.html"}
NEVER_META = {"io.modelcontextprotocol/ui": {"x": 1}, "bad key": 1, "progressToken": 5}
VSCODE_INFO = {"name": "Visual Studio Code", "version": "1.140.0"}


class RecordingServer:
    """The fixture server, with the ``_meta`` of each ``tools/call`` it gets (what the bridge sent)."""

    def __init__(self) -> None:
        self.server = build()
        self.metas: list[dict[str, Any]] = []

    def count(self, message: Message) -> None:
        if isinstance(message, Request) and message.method == "tools/call":
            params = message.params if isinstance(message.params, dict) else {}
            self.metas.append(dict(params.get("_meta") or {}))

    def start(self, end: ServerTransport) -> Any:
        return self.server.start(CountingTransport(end, self))  # type: ignore[arg-type]


@pytest.fixture
def upstream() -> RecordingServer:
    return RecordingServer()


def open_pair(upstream: RecordingServer, version: str, info: dict[str, Any], **options: Any) -> FrontendPair:
    pair = FrontendPair(upstream, **options)
    response = pair.initialize(protocol_version=version, client_info=info)
    assert response["result"]["protocolVersion"] == version
    return pair


@pytest.fixture
def pairs() -> Iterator[list[FrontendPair]]:
    opened: list[FrontendPair] = []
    yield opened
    for pair in opened:
        if pair.ended is None:
            pair.close()


def passed_meta(pair: FrontendPair, upstream: RecordingServer) -> dict[str, Any]:
    """The ``_meta`` keys of the host that reached the upstream server with a call (not the protocol's)."""
    meta = {**NEVER_META, **VSCODE_META, **OTHER_META}
    pair.request(7, "tools/call", {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta})
    assert text_of(pair.response(7)) == "hi"
    sent = upstream.metas[-1]
    return {key: value for key, value in sent.items() if not key.startswith("io.modelcontextprotocol/")}


@pytest.mark.parametrize(
    ("version", "info", "options", "expected"),
    [
        ("2025-11-25", VSCODE_INFO, {}, VSCODE_META),
        ("2025-11-25", {"name": "some-host", "version": "1"}, {}, VSCODE_META),
        ("2025-11-25", {"name": "cursor-vscode", "version": "1.7"}, {}, {**VSCODE_META, **OTHER_META}),
        ("2025-06-18", {"name": "some-host", "version": "1"}, {}, {**VSCODE_META, **OTHER_META}),
        ("2025-11-25", VSCODE_INFO, {"host_profile": "generic"}, {**VSCODE_META, **OTHER_META}),
        ("2025-06-18", {"name": "codex-mcp-client", "version": "1"}, {"host_profile": "vscode"}, VSCODE_META),
    ],
    ids=["vs-code", "unknown-host", "cursor", "older-revision", "forced-generic", "forced-vscode"],
)
def test_the_profile_decides_which_meta_keys_of_the_host_go_upstream(
    upstream: RecordingServer,
    pairs: list[FrontendPair],
    version: str,
    info: dict[str, Any],
    options: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    pairs.append(pair := open_pair(upstream, version, info, **options))
    # The upstream client writes its own progress token in the place of the host's.
    sent = passed_meta(pair, upstream)
    assert {key: value for key, value in sent.items() if key != "progressToken"} == expected


def test_the_generic_profile_leaves_out_a_structured_content_that_is_not_an_object(
    upstream: RecordingServer, pairs: list[FrontendPair]
) -> None:
    pairs.append(vscode := open_pair(upstream, "2025-11-25", VSCODE_INFO))
    vscode.request(1, "tools/call", {"name": "array_output", "arguments": {}})
    assert vscode.response(1)["result"]["structuredContent"] == [1, 2, 3]  # MCP Apps read it
    pairs.append(generic := open_pair(upstream, "2025-11-25", VSCODE_INFO, host_profile="generic"))
    generic.request(1, "tools/call", {"name": "array_output", "arguments": {}})
    response = generic.response(1)
    assert "structuredContent" not in response["result"] and text_of(response) == "[1,2,3]"
    validate_frame("2025-11-25", response, request_method="tools/call")
