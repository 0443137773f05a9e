"""The sign-in of the real executable against an authorization server that misbehaves on purpose.

``python -m mcpbridge <url>`` over pipes, as VS Code runs it; the upstream server and its
authorization server are :class:`AuthServer` on 127.0.0.1 over TLS. Its answers come one
byte at a time, or carry numbers that are no numbers of seconds: each sign-in fails with
its named error in its time limits, and the bridge keeps running.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import WAIT
from tests.harness import VSCODE_CAPABILITIES, VSCODE_INFO
from tests.oauth_peers import AuthServer, TestCA
from tests.process.test_oauth_process import Setup


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def auth(ca: TestCA) -> Iterator[AuthServer]:
    server = AuthServer(ca)
    yield server
    server.close()


@pytest.fixture
def setup(auth: AuthServer, ca: TestCA, tmp_path: Path) -> Iterator[Setup]:
    made = Setup(auth, ca, tmp_path)
    yield made
    for bridge in made.bridges:
        bridge.stop()
        text = bridge.stderr_text + b"".join(bridge.raw_lines).decode("utf-8", "replace")
        for secret in made.secrets():
            assert secret not in text, "a secret reached stderr or stdout"
        # No URL of a document of the sign-in in any line.
        assert auth.prm_url not in text and "/.well-known/" not in text


INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": VSCODE_CAPABILITIES, "clientInfo": VSCODE_INFO}


def test_protected_resource_metadata_that_dribbles_fails_initialize_in_the_time_limits(setup, auth):
    auth.switches.dribble = {"prm": "body"}
    bridge = setup.bridge("--discover-timeout", "2", "--sign-in-timeout", "2")
    request_id = bridge.request_async("initialize", INITIALIZE)
    # A hang detector, not a measure: initialize has 2 s + 2 s, the request of the metadata 2 s.
    error = bridge.wait_response(request_id, timeout=3 * 4.0)["error"]
    detail = "resource metadata: no complete answer in 2 s"
    assert error["data"] == {"cause": "sign_in_timeout", "detail": detail}
    assert error["message"].startswith("The sign-in did not complete in 2 s.")
    assert auth.wait_dribbles(1, WAIT)[0] < 10
    auth.switches.dribble = {}
    # The bridge keeps running: the next initialize signs in.
    assert bridge.request("initialize", INITIALIZE)["result"]["serverInfo"]["name"] == "oauth-peer"
    bridge.close_stdin()
    assert bridge.wait_exit() == 0


@pytest.mark.parametrize("raw", ["1e400", "9" * 400])
def test_a_token_answer_with_an_expires_in_out_of_range_fails_initialize_by_name(setup, auth, raw):
    auth.switches.token_raw = {"expires_in": raw}
    bridge = setup.bridge()
    error = bridge.request("initialize", INITIALIZE)["error"]
    assert error["data"] == {
        "cause": "sign_in_failed",
        "detail": "token request: HTTP status 200, expires_in is not a number from 0 to 315360000",
    }
    assert raw not in bridge.stderr_text
    auth.switches.token_raw = {}
    assert bridge.request("initialize", INITIALIZE)["result"]["serverInfo"]["name"] == "oauth-peer"
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
