"""The memory of an answer follows its bytes, however the server frames them.

A server may send one body in chunks of two bytes (``Transfer-Encoding: chunked``),
or one SSE event as many ``data`` lines of two bytes each: both are legal, and a
reader that kept an object per piece would hold some twenty times the bytes. A real
loopback server frames the same bytes so; the real HTTP transport reads them in a
child process (:mod:`tests.mcp.memory_child`), which reports the growth of its peak
memory (``VmHWM`` in ``/proc``) over its memory before the call. The growth must stay
under a few times the limit, for a body or an event just under the limit (delivered)
and for one over it (refused with its named error).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import WAIT
from tests.peers.scripted_http import Exchange, ScriptedServer

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the peak memory of the process in /proc"
)

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("memory_child.py")
#: The longest run of the child: a hang detector.
CHILD_WAIT = WAIT * 6
#: The limit of one body and of one event in these tests.
LIMIT = 1024 * 1024
#: The most that the peak memory may grow by for one answer: four times the limit (its
#: buffer, the room a buffer grows by, its copy at the end) and 4 MiB for the allocator.
ALLOWED = 4 * LIMIT + 4 * 1024 * 1024


def _lines(size: int) -> list[bytes]:
    """The lines of a JSON-RPC result of ``size`` bytes (with the newlines between them).

    Most lines are two tabs: joined with newlines they are white space between the
    tokens of one message (which costs nothing once parsed), so each line can be an
    HTTP chunk or the value of a ``data`` line (SSE drops a space after the colon, not
    a tab).
    """
    head = b'{"jsonrpc":"2.0","id":2,"result":'
    tail = b'{"resultType":"complete","content":[{"type":"text","text":"ok"}]}}'
    count = (size - len(head) - len(tail) - 1) // 3
    return [head, *([b"\t\t"] * count), tail]


def _handler(ex: Exchange) -> None:
    tool = ex.request.params.get("name")
    arguments = ex.request.params.get("arguments", {})
    if tool != "framed":
        ex.text_result("ok")
        return
    size = int(arguments["size"])
    lines = _lines(size)
    # The client reads two bytes at a time: as long to send as the child may take.
    ex.sock.settimeout(CHILD_WAIT)
    try:
        if arguments["form"] == "chunks":
            body = b"\n".join(lines)
            ex.head(200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])
            pieces = (body[start : start + 2] for start in range(0, len(body), 2))
            ex.send(b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n")
        else:
            ex.start_sse()
            ex.send(b"".join(b"data:" + line + b"\n" for line in lines) + b"\n")
    except OSError:  # the client refused the answer and closed the connection
        ex.keep_alive = False


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(_handler) as scripted:
        yield scripted


def _peak_growth(url: str, form: str, size: int) -> dict[str, object]:
    """One call in a child process (:mod:`tests.mcp.memory_child`); what it reports."""
    done = subprocess.run(
        [sys.executable, str(CHILD), url, form, str(size), str(LIMIT)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=CHILD_WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report: dict[str, object] = json.loads(done.stdout.decode().splitlines()[-1])
    return report


@pytest.mark.parametrize("form", ["chunks", "data_lines"])
def test_an_answer_over_the_limit_in_two_byte_pieces_is_refused_within_a_few_times_the_limit(
    server: ScriptedServer, form: str
) -> None:
    report = _peak_growth(server.url(), form, LIMIT + 64 * 1024)
    what = "a response" if form == "chunks" else "an event"
    assert report["outcome"] == f"{what} longer than {LIMIT} bytes"
    assert report["growth"] < ALLOWED, report


@pytest.mark.parametrize("form", ["chunks", "data_lines"])
def test_an_answer_just_under_the_limit_in_two_byte_pieces_is_read_within_a_few_times_the_limit(
    server: ScriptedServer, form: str
) -> None:
    report = _peak_growth(server.url(), form, LIMIT - 64)
    assert report["outcome"] == "delivered"
    assert report["messages"] == 2
    assert report["growth"] < ALLOWED, report
