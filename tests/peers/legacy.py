"""The 2025-era peer server (``py_legacy_server.py``, ``mcp==1.30.0``) in its own venv.

``make legacy-venv`` (a part of ``make test``) makes ``.venv-legacy``. Without it
the tests that need the peer skip, except under CI, where they fail.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parent
ROOT = PEERS.parents[1]
LEGACY_PYTHON = ROOT / ".venv-legacy" / "bin" / "python"
LEGACY_SERVER = PEERS / "py_legacy_server.py"
START_WAIT = 30.0
STOP_WAIT = 10.0


def legacy_python() -> str:
    """The interpreter of ``.venv-legacy``; skips (fails under CI) when it is missing."""
    if not os.access(LEGACY_PYTHON, os.X_OK):
        message = ".venv-legacy is missing: run `make legacy-venv` (or `make test`)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return str(LEGACY_PYTHON)


def legacy_command() -> list[str]:
    """The command of the peer on stdio."""
    return [legacy_python(), str(LEGACY_SERVER)]


@contextlib.contextmanager
def running_legacy_http_server() -> Iterator[str]:
    """Start the peer on Streamable HTTP (2025-11-25); yield the URL of its endpoint."""
    proc = subprocess.Popen(
        [legacy_python(), str(LEGACY_SERVER), "--http"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    lines: queue.Queue[bytes] = queue.Queue()
    reader = threading.Thread(target=lambda: lines.put(stdout.readline()), name="peer-port", daemon=True)
    reader.start()
    try:
        first = lines.get(timeout=START_WAIT).decode()
        if not first.startswith("port="):
            raise RuntimeError("the 2025-era peer server did not start")
        yield f"http://127.0.0.1:{int(first[5:])}/mcp"
    finally:
        proc.stdin.close()
        try:
            proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_WAIT)
        reader.join(STOP_WAIT)
        stdout.close()
