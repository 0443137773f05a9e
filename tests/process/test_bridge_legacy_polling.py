"""A 2025-era server that ends the event stream of a call early (the polling of 2025-11-25).

The server, ``py_legacy_server.py --http --polling`` on the Python SDK ``mcp==1.30.0``,
sends the priming event (an id and a ``retry`` of 100 ms), ends the stream of the call
``poll``, and sends the progress and the result later, to a client that resumes the
stream with ``GET`` and ``Last-Event-ID``. The SDK's own client gets the result directly;
through the bridge, VS Code's side must get the same result and every progress step.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from harness import WAIT, Bridge, bridge_command
from peers.legacy import legacy_python, running_legacy_http_server

DIRECT_CLIENT = """
import sys, anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def main():
    with anyio.fail_after(60):
        async with streamablehttp_client(sys.argv[1]) as (read, write, _), ClientSession(read, write) as s:
            await s.initialize()
            result = await s.call_tool("poll", {"steps": 3})
            print(result.content[0].text)

anyio.run(main)
"""


@pytest.fixture(scope="module")
def polling_url() -> Iterator[str]:
    with running_legacy_http_server(polling=True) as url:
        yield url


def test_the_sdk_client_directly_gets_the_result_of_a_call_whose_stream_ended_early(polling_url: str) -> None:
    done = subprocess.run(
        [legacy_python(), "-c", DIRECT_CLIENT, polling_url], capture_output=True, text=True, timeout=WAIT * 4
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "polled 3"


def test_the_bridge_resumes_the_stream_and_answers_with_the_result_and_each_step(polling_url: str) -> None:
    with Bridge(bridge_command(polling_url)) as bridge:
        assert "result" in bridge.initialize()
        answer = bridge.request(
            "tools/call", {"name": "poll", "arguments": {"steps": 3}, "_meta": {"progressToken": "p"}}
        )
        assert answer["result"]["content"] == [{"type": "text", "text": "polled 3"}], json.dumps(answer)
        # The progress shares the stream of the call: every step came before the result.
        steps = [frame for frame in bridge.seen if frame.get("method") == "notifications/progress"]
        progress = [frame["params"]["progress"] for frame in steps]
        assert progress == [1, 2, 3]
        # A second call on the same session resumes too.
        again = bridge.request("tools/call", {"name": "poll", "arguments": {"steps": 1}})
        assert again["result"]["content"] == [{"type": "text", "text": "polled 1"}]
