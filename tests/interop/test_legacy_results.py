"""A 2025-era result reaches the client as the server wrote it (the passthrough passes through).

The peer is the 2025-era server of the Python SDK ``mcp==1.30.0``
(``tests/peers/py_legacy_server.py``); its tool ``image`` answers as
``server-filesystem``'s ``read_media_file`` does: an image block, the same data in
``structuredContent``, and no text block. The result that the client of the bridge
gets must equal the result that a client talking to the server directly gets.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any

from conftest import REPO_ROOT, WAIT
from harness import Bridge, bridge_command
from mcpbridge.bridge.rules import translate
from peers.legacy import legacy_command

#: The size of the image: large enough that a second copy of its base64 would show.
IMAGE_BYTES = 300_000
INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "direct", "version": "1"},
}


def direct_call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Call a tool of the peer directly over its stdio; the result and the length of its line."""
    process = subprocess.Popen(
        legacy_command(),
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    lines: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    reader = threading.Thread(target=read, name="test-direct-stdout", daemon=True)
    reader.start()

    def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        process.stdin.flush()

    def answer(request_id: int) -> bytes:
        while True:
            line = lines.get(timeout=WAIT * 3)
            if json.loads(line).get("id") == request_id:
                return line

    try:
        send({"id": 1, "method": "initialize", "params": INITIALIZE})
        answer(1)
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        line = answer(2)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(WAIT)
        reader.join(WAIT)
        assert process.stdout is not None
        process.stdout.close()
    result: dict[str, Any] = json.loads(line)["result"]
    return result, len(line)


def test_a_result_with_structured_content_and_no_text_passes_as_the_server_wrote_it() -> None:
    direct, direct_length = direct_call("image", {"size": IMAGE_BYTES})
    # The premise: structured content, an image block and no text block.
    assert [block["type"] for block in direct["content"]] == ["image"]
    assert direct["structuredContent"]["content"][0]["data"] == direct["content"][0]["data"]

    with Bridge(bridge_command(upstream=legacy_command())) as bridge:
        assert "result" in bridge.initialize()
        request_id = bridge.request_async("tools/call", {"name": "image", "arguments": {"size": IMAGE_BYTES}})
        response = bridge.wait_response(request_id, timeout=WAIT * 3)
        line = next(raw for raw in bridge.raw_lines if len(raw) > IMAGE_BYTES)
    assert response["result"] == direct
    # No second copy of the base64 as text: the line is as long as the server's, give or take its framing.
    assert abs(len(line) - direct_length) < 200


def test_the_rules_of_every_era_still_apply_to_a_2025_era_result() -> None:
    # The schema repairs and the cursor rule; a result without a change is the same object.
    listing = {
        "tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {"v": {"type": "array"}}}}],
        "nextCursor": None,
    }
    shaped, notes = translate.shape_legacy_result("tools/list", listing, icon_rule=translate.IconRule.ALL)
    assert "nextCursor" not in shaped and shaped["tools"][0]["inputSchema"]["properties"]["v"]["items"] == {}
    assert notes == ["tool 't': added an items schema at '/properties/v' of the input schema"]
    call = {"content": [], "structuredContent": {"n": 1}, "resultType": "complete"}
    same, _ = translate.shape_legacy_result("tools/call", call, icon_rule=translate.IconRule.DATA_ONLY)
    assert same is call
    # The translation of a 2026-07-28 result adds the text copy and drops resultType.
    modern, _ = translate.shape_result("tools/call", call, icon_rule=translate.IconRule.ALL)
    assert modern == {"content": [{"type": "text", "text": '{"n":1}'}], "structuredContent": {"n": 1}}
