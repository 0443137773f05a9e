"""The 2025-era peer server (``py_legacy_server.py``, ``mcp==1.30.0``) in its own venv.

``make legacy-venv`` (a part of ``make test``) makes ``.venv-legacy``. Without it
the tests that need the peer skip, except under CI, where they fail.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from peers import running_http_peer

PEERS = Path(__file__).resolve().parent
ROOT = PEERS.parents[1]
LEGACY_PYTHON = ROOT / ".venv-legacy" / "bin" / "python"
LEGACY_SERVER = PEERS / "py_legacy_server.py"


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
    with running_http_peer([legacy_python(), str(LEGACY_SERVER), "--http"], "2025-era peer server") as url:
        yield url
