"""The real ``@modelcontextprotocol/server-everything``, started for the tests that run it.

server-everything (the 2025-era TypeScript SDK) comes from the Node.js packages of the
project (``make node``). Over stdio a test runs it as the bridge's upstream command
(``everything_entry``); over Streamable HTTP ``serve_everything`` starts it on a port of
its own choice and ends it afterwards.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import WAIT, NodePeers, read_line


def everything_entry(node: NodePeers) -> Path:
    """The script of server-everything, which ``node`` runs; fails when it is not installed."""
    entry = node.node_modules / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    assert entry.is_file(), "server-everything is not installed: run `make node`"
    return entry


def listening_port(pid: int) -> int | None:
    """The TCP port that process ``pid`` listens on, from /proc (Linux); ``None`` while it listens on none."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                return int(fields[1].rsplit(":", 1)[1], 16)
    return None


@contextmanager
def serve_everything(node: NodePeers) -> Iterator[str]:
    """server-everything over Streamable HTTP: the URL of its endpoint, until the block ends."""
    # Port 0: the server binds a free port itself (no other process can take it in between); it
    # names the port it was given, so the port it listens on comes from /proc.
    proc = subprocess.Popen(
        [str(node.node22), str(everything_entry(node)), "streamableHttp"],
        env={"PATH": "/usr/bin:/bin", "PORT": "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + WAIT * 3
        while True:  # the server says when it listens
            left = deadline - time.monotonic()
            assert left > 0, "server-everything did not start"
            line = read_line(proc.stderr, "a line of server-everything", left)
            assert line, "server-everything ended before it listened"
            if b"listening on port" in line:
                break
        port = listening_port(proc.pid)
        assert port is not None, "server-everything listens on no TCP port"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        # The end first: a read of stderr that timed out still holds the pipe until the server ends.
        proc.terminate()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
        if proc.stderr is not None:
            proc.stderr.close()
