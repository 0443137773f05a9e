"""The 2025-era peers, each in a virtual environment of its own.

* The server ``py_legacy_server.py`` (``mcp==1.30.0``): ``make legacy-venv`` makes
  ``.venv-legacy``.
* The client of MCP 2025-06-18 ``tests/interop/old_py_client.py`` (``mcp==1.23.0``, the
  newest release of the Python SDK whose latest revision is 2025-06-18): ``make old-venv``
  makes ``.venv-old``.

``make test`` makes both. Without one, the tests that need it skip, except under CI,
where they fail.
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
OLD_PYTHON = ROOT / ".venv-old" / "bin" / "python"


def _venv_python(python: Path, target: str) -> str:
    """The interpreter of a peer's venv; skips (fails under CI) when it is missing."""
    if not os.access(python, os.X_OK):
        message = f"{python.parent.parent.name} is missing: run `make {target}` (or `make test`)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return str(python)


def legacy_python() -> str:
    """The interpreter of ``.venv-legacy`` (``mcp==1.30.0``)."""
    return _venv_python(LEGACY_PYTHON, "legacy-venv")


def old_python() -> str:
    """The interpreter of ``.venv-old`` (``mcp==1.23.0``)."""
    return _venv_python(OLD_PYTHON, "old-venv")


def legacy_command() -> list[str]:
    """The command of the peer on stdio."""
    return [legacy_python(), str(LEGACY_SERVER)]


@contextlib.contextmanager
def running_legacy_http_server(*, polling: bool = False) -> Iterator[str]:
    """Start the peer on Streamable HTTP (2025-11-25); yield the URL of its endpoint.

    ``polling``: the peer ends the event stream of its tool ``poll`` early (``--polling``).
    """
    options = ["--http", "--polling"] if polling else ["--http"]
    with running_http_peer([legacy_python(), str(LEGACY_SERVER), *options], "2025-era peer server") as url:
        yield url


@contextlib.contextmanager
def running_legacy_sse_server() -> Iterator[str]:
    """Start the peer on HTTP+SSE (2024-11-05, ``run("sse")``); yield the URL of its stream."""
    with running_http_peer([legacy_python(), str(LEGACY_SERVER), "--sse"], "2024-11-05 peer server") as url:
        yield url.removesuffix("/mcp") + "/sse"
