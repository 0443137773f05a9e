"""Real clients of MCP 2025-06-18 in front of the real bridge, in both of its forms.

The clients are the newest releases of each SDK whose latest revision is 2025-06-18: the
TypeScript SDK 1.24.0 (``tests/interop/old_client.mjs``, the npm alias ``sdk-1-24``) and the
Python SDK ``mcp==1.23.0`` (``tests/interop/old_py_client.py``, in ``.venv-old``). Both
refuse a server that answers ``initialize`` with a revision they do not know, so each run
shows that the bridge negotiates 2025-06-18: it lists the tools and calls one.

The forms: the command form in front of the fixture server, and the URL form in front of
a server of the Python SDK on Streamable HTTP, which speaks both eras: ``--protocol
2026-07-28`` makes the bridge translate for it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import REPO_ROOT, NodePeers
from harness import bridge_command, fixture_command, run_client_script
from peers import running_py_http_server
from peers.legacy import old_python

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TS_CLIENT = REPO_ROOT / "tests" / "interop" / "old_client.mjs"
PY_CLIENT = REPO_ROOT / "tests" / "interop" / "old_py_client.py"
#: The clients stop themselves after 60 s; this bounds the wait for them.
RUN_TIMEOUT = 90.0
OLD_REVISION = "2025-06-18"
TEXT = "héllo ✓"
#: The name of the server that the client sees, in each form: the upstream's own.
SERVER_NAMES = {"command": "bridge-fixture-server", "url": "py-http-peer"}


@pytest.fixture(scope="module")
def http_upstream() -> Iterator[str]:
    with running_py_http_server() as url:
        yield url


@pytest.fixture(params=["command", "url"])
def form(request: pytest.FixtureRequest) -> str:
    """The form of the bridge: the command form or the URL form."""
    return str(request.param)


@pytest.fixture
def bridge(form: str, request: pytest.FixtureRequest) -> list[str]:
    """The command of the bridge in ``form`` (its own log lines at debug on its stderr)."""
    if form == "command":
        return bridge_command("--log-level", "debug", upstream=fixture_command())
    # The server speaks both eras: --protocol 2026-07-28 makes the bridge translate for it.
    url = request.getfixturevalue("http_upstream")
    return bridge_command("--protocol", "2026-07-28", "--log-level", "debug", url)


def client_command(client: str, node: NodePeers) -> list[str]:
    if client == "ts-1.24.0":
        return node.command(TS_CLIENT)
    return [old_python(), str(PY_CLIENT)]


def run_client(command: list[str], bridge: list[str]) -> dict[str, Any]:
    plan = {
        "command": bridge[0],
        "args": bridge[1:],
        "cwd": str(REPO_ROOT),
        "tool": "echo",
        "arguments": {"text": TEXT},
    }
    returncode, summary = run_client_script(command, plan, RUN_TIMEOUT)
    assert summary.get("ok") is True and returncode == 0, summary
    return summary


@pytest.mark.parametrize("client", ["ts-1.24.0", "py-1.23.0"])
def test_a_2025_06_18_client_lists_the_tools_and_calls_one_through_the_bridge(
    client: str, form: str, bridge: list[str], node: NodePeers
) -> None:
    summary = run_client(client_command(client, node), bridge)
    assert summary["latestProtocolVersion"] == OLD_REVISION
    assert summary["protocolVersion"] == OLD_REVISION
    assert "echo" in summary["tools"]
    assert summary["text"] == TEXT
    assert summary["serverInfo"]["name"] == SERVER_NAMES[form]


def test_each_client_reports_a_bridge_that_does_not_start(node: NodePeers) -> None:
    plan = {
        "command": sys.executable,
        "args": ["-c", "import sys; sys.exit(3)"],
        "cwd": str(REPO_ROOT),
        "tool": "echo",
        "arguments": {},
    }
    for client in ("ts-1.24.0", "py-1.23.0"):
        returncode, summary = run_client_script(client_command(client, node), plan, RUN_TIMEOUT)
        assert returncode == 1 and summary["ok"] is False and summary["error"], (client, summary)
