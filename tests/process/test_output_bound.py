"""The bound of the output (64 MiB) in the command the user runs, and a short soak of a slow reader.

The bridge runs as ``mcp-bridge-vscode --log-level debug -- <fixture server>``, with
its own wiring and its own bound, not one that the test builds. The client sends
pings of about 64 KiB (the bridge answers them itself), twice the bound of them:
while the client reads nothing, the bridge takes in the bound and stops reading;
then the client reads, and the bridge reads on until every ping has its one answer,
in order. The memory of the bridge meanwhile stays within its memory after
``initialize`` and the bound.

The soak is ``scripts/soak_slow_reader.py`` for a few seconds and at most a bounded count
of requests: requests as fast as the bridge takes them, answers read at 1 KiB/s, then
every request must have exactly one answer and the memory stay within the bound.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from test_faults_output import Lines, Pour, end_bridge, frame

from conftest import read_line
from harness import WAIT, bridge_command, fixture_command
from mcpbridge.bridge.front.output import MAX_QUEUED_BYTES

#: The bytes of a ping's id: each ping and each answer is about 64 KiB.
ID_BYTES = 64 * 1024
#: The pings of the run: twice what fills the bound, so the bridge stops reading more than once.
PINGS = 2 * MAX_QUEUED_BYTES // ID_BYTES
#: Room for what the memory of the bridge holds besides the output: a frame being read and
#: answered, the buffers of the pipes, the heap's slack.
MEMORY_SLACK = 16 * 1024 * 1024
#: The seconds of the soak (then it reads what waits at full speed), and its most requests.
SOAK_SECONDS = 3
SOAK_REQUESTS = 20_000
ROOT = Path(__file__).resolve().parents[2]
#: The stderr line of the reader when it stops at the bound, with the KiB that wait.
PAUSE = re.compile(r": (\d+) KiB wait for it, so the bridge stops reading the client until it reads$")


def ping_id(number: int) -> str:
    return f"{number:06d}-" + "p" * (ID_BYTES - 7)


def pings() -> Iterator[bytes]:
    return (frame(ping_id(n), "ping") for n in range(PINGS))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_the_command_takes_in_its_bound_of_output_then_answers_a_slow_client_every_ping_once() -> None:
    assert MAX_QUEUED_BYTES == 64 * 1024 * 1024  # the bound that docs/how-it-works.rst tells
    command = bridge_command("--log-level", "debug", upstream=fixture_command())
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    stderr = Lines(process.stderr, "test-stderr")
    try:
        client = {"name": "t", "version": "1"}
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        process.stdin.write(frame(1, "initialize", init) + frame(None, "notifications/initialized"))
        process.stdin.flush()
        assert json.loads(read_line(process.stdout, "the answer to initialize"))["id"] == 1
        idle = rss_kib(process.pid)

        writer = Pour(process.stdin, pings())
        # Nobody reads: the reader takes in the bound, then stops reading the client.
        pause = PAUSE.search(stderr.wait_for("so the bridge stops reading the client", timeout=6 * WAIT))
        assert pause is not None
        taken = writer.written
        queued = int(pause[1]) * 1024
        assert MAX_QUEUED_BYTES <= queued <= MAX_QUEUED_BYTES + 2 * ID_BYTES
        pipes = sum(fcntl.fcntl(s.fileno(), fcntl.F_GETPIPE_SZ) for s in (process.stdin, process.stdout))
        assert MAX_QUEUED_BYTES <= taken <= MAX_QUEUED_BYTES + pipes + 4 * ID_BYTES, taken

        # The client reads: each ping gets its one answer, in order, while the bridge reads on.
        peak = rss_kib(process.pid)
        stdout = Lines(process.stdout, "test-stdout")
        for number in range(PINGS):
            answer = json.loads(stdout.next(timeout=6 * WAIT) or "{}")
            assert answer == {"jsonrpc": "2.0", "id": ping_id(number), "result": {}}
            if number % 64 == 0:
                peak = max(peak, rss_kib(process.pid))
        writer.join()
        process.stdin.close()
        assert process.wait(WAIT) == 0
        assert stdout.next() is None, "an answer too many"
        assert (peak - idle) * 1024 <= MAX_QUEUED_BYTES + MEMORY_SLACK, (idle, peak)
    finally:
        end_bridge(process)
    assert not [text for text in stderr.lines if "Traceback" in text]


def test_a_short_soak_of_a_slow_reader_loses_no_answer_and_stays_within_the_bound() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "scripts/soak_slow_reader.py",
            "--seconds",
            str(SOAK_SECONDS),
            "--requests",
            str(SOAK_REQUESTS),
            "--read-rate",
            "1024",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=SOAK_SECONDS + 6 * WAIT,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert "lost=0 duplicated=0" in lines, lines
    requests = re.fullmatch(r"seconds=\S+ read-rate=\S+ B/s requests=(\d+) \(while slow: \d+\)", lines[0])
    assert requests is not None and 0 < int(requests[1]) <= SOAK_REQUESTS, lines
