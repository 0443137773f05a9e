"""Test peers: upstream servers that the tests start on loopback."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from conftest import WAIT, read_line

PEERS = Path(__file__).resolve().parent
START_WAIT = 3 * WAIT
"""The Python SDK takes a few seconds to import on a slow machine."""
STOP_WAIT = WAIT


@contextlib.contextmanager
def running_http_peer(command: list[str], name: str) -> Iterator[str]:
    """Start a peer server that prints ``port=<n>`` first; yield the URL of its endpoint.

    The server stops at the end of its stdin, which this closes on the way out.
    """
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    try:
        first = read_line(stdout, f"the port line of the {name}", START_WAIT).decode()
        if not first.startswith("port="):
            raise RuntimeError(f"the {name} did not start")
        yield f"http://127.0.0.1:{int(first[5:])}/mcp"
    finally:
        proc.stdin.close()
        try:
            proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_WAIT)
        stdout.close()


@contextlib.contextmanager
def running_py_http_server() -> Iterator[str]:
    """Start ``py_http_server.py`` (the Python SDK under uvicorn); yield the URL of its endpoint."""
    with running_http_peer([sys.executable, str(PEERS / "py_http_server.py")], "Python SDK server") as url:
        yield url


TASK_SERVER = PEERS / "task_server.py"


def task_server_command(*options: str) -> list[str]:
    """The command of ``task_server.py`` (a server of the Tasks extension) on stdio."""
    return [sys.executable, str(TASK_SERVER), *options]


@contextlib.contextmanager
def running_task_http_server(*options: str) -> Iterator[str]:
    """Start ``task_server.py`` on Streamable HTTP; yield the URL of its endpoint."""
    with running_http_peer([*task_server_command(*options), "--http"], "task server") as url:
        yield url
