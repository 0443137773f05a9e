"""The sign-in of the real executable against a certified OpenID provider: refresh tokens.

The provider is the npm package ``oidc-provider`` with its stock policy and its stock
development interactions (``tests/peers/oidc_provider.mjs``), on 127.0.0.1 over TLS,
with an MCP endpoint beside it. Such a provider grants ``offline_access``, and with it a
refresh token, only to an authorization request with ``prompt=consent`` (OpenID Connect
Core §11). The browser is the program in ``BROWSER`` acting as a person: it sends the
login form and the consent form of the provider.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import WAIT, NodePeers
from tests.harness import ROOT, Bridge, bridge_command, text_of
from tests.oauth_peers import TestCA, browser_calls, browser_script, free_port, query_of
from tests.process.test_oauth_process import SIGN_IN_LINE, wait_for

#: The lifetime of the provider's access tokens, in seconds: the test waits for their end.
ACCESS_TTL = 4
CLIENT_ID = "mcp-bridge-test"
TOKEN_KEY = "7c" * 32
#: A client that declared no URL elicitation: after ``notifications/initialized`` no sign-in
#: can reach the person, so only a silent refresh keeps the server working.
NO_URL_ELICITATION = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}}


class OidcProvider:
    """The provider process; see the module docstring."""

    def __init__(self, node: NodePeers, ca: TestCA, directory: Path, redirect_port: int) -> None:
        script = ROOT / "tests" / "peers" / "oidc_provider.mjs"
        if not (node.node_modules / "oidc-provider" / "package.json").is_file():
            pytest.fail("oidc-provider is not installed: run `make node`", pytrace=False)
        cert = ca.ca.issue_cert("127.0.0.1")
        cert.private_key_pem.write_to_path(str(directory / "oidc-key.pem"))
        cert.cert_chain_pems[0].write_to_path(str(directory / "oidc-cert.pem"))
        self.ca = ca
        self.process = subprocess.Popen(
            node.command(script),
            env={
                "PATH": "/usr/bin:/bin",
                "OIDC_CERT": str(directory / "oidc-cert.pem"),
                "OIDC_KEY": str(directory / "oidc-key.pem"),
                "OIDC_REDIRECT_URI": f"http://127.0.0.1:{redirect_port}/callback",
                "OIDC_ACCESS_TTL": str(ACCESS_TTL),
            },
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.origin = f"https://127.0.0.1:{self._port()}"

    def _port(self) -> int:
        """The port of the first stdout line, read within a bounded time."""
        assert self.process.stdout is not None
        line = b""
        deadline = time.monotonic() + 3 * WAIT
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    raise TimeoutError("the OpenID provider did not start")
                chunk = self.process.stdout.read1(4096)  # type: ignore[attr-defined]
                if not chunk:
                    raise RuntimeError("the OpenID provider ended before it listened")
                line += chunk
        return int(json.loads(line)["port"])

    @property
    def url(self) -> str:
        return self.origin + "/mcp"

    def state(self) -> dict[str, Any]:
        """The live access tokens, the grants of the token endpoint and every token issued."""
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self.ca.client_context())
        )
        with opener.open(self.origin + "/test/state", timeout=WAIT) as answer:
            state: dict[str, Any] = json.loads(answer.read())
            return state

    def wait_until_every_access_token_expired(self) -> None:
        wait_for(lambda: self.state()["live"] == 0, timeout=ACCESS_TTL + WAIT)

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(WAIT)
        self.process.stdout.close()


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA(tmp_path)


@pytest.fixture
def redirect_port() -> int:
    return free_port()


@pytest.fixture
def provider(node: NodePeers, ca: TestCA, tmp_path: Path, redirect_port: int) -> Iterator[OidcProvider]:
    made = OidcProvider(node, ca, tmp_path, redirect_port)
    yield made
    made.close()


def options(ca: TestCA, redirect_port: int) -> list[str]:
    return [
        "--ca-file",
        str(ca.ca_file),
        "--redirect-port",
        str(redirect_port),
        "--client-id",
        CLIENT_ID,
        "--token-store",
        "file",
        "--log-level",
        "debug",
    ]


def test_an_openid_provider_grants_a_refresh_token_and_the_bridge_renews_silently_across_a_restart(
    provider, ca, redirect_port, tmp_path
):
    env = {
        "BROWSER": str(browser_script(tmp_path)),
        "TEST_BROWSER_MODE": "person",
        "TEST_BROWSER_LOG": str(tmp_path / "browser.log"),
        "TEST_BROWSER_CA": str(ca.ca_file),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "HOME": str(tmp_path / "home"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        "MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY,
        "SANDBOX_RUNTIME": "",
    }
    command = bridge_command(*options(ca, redirect_port), provider.url)
    bridges = [Bridge(command, env=env)]
    try:
        first = bridges[0]
        assert "result" in first.initialize(capabilities=NO_URL_ELICITATION)
        assert text_of(first.request("tools/call", {"name": "whoami", "arguments": {}})) == "account: alice"
        # The access token ends; the next call gets a new one with the refresh token, no person.
        provider.wait_until_every_access_token_expired()
        assert text_of(first.request("tools/call", {"name": "whoami", "arguments": {}})) == "account: alice"
        assert "refresh_token" in provider.state()["grants"]
        first.close_stdin()
        assert first.wait_exit() == 0
        (line,) = [m.group(1) for line in first.stderr_lines if (m := SIGN_IN_LINE.fullmatch(line))]
        query = query_of(line)
        assert query["scope"] == "mcp offline_access" and query["prompt"] == "consent"
        # A restart reads the stored sign-in, whose access token has ended: it refreshes it.
        provider.wait_until_every_access_token_expired()
        refreshes = provider.state()["grants"].count("refresh_token")
        bridges.append(Bridge(command, env=env))
        second = bridges[1]
        assert "result" in second.initialize(capabilities=NO_URL_ELICITATION)
        assert text_of(second.request("tools/call", {"name": "whoami", "arguments": {}})) == "account: alice"
        assert provider.state()["grants"].count("refresh_token") > refreshes
        assert provider.state()["grants"].count("authorization_code") == 1
        assert not any(SIGN_IN_LINE.fullmatch(line) for line in second.stderr_lines)
        assert len(browser_calls(tmp_path / "browser.log")) == 1
        # The person sent the login and consent forms, and the browser reached the bridge.
        pages = (tmp_path / "browser.log.pages").read_text()
        assert pages == f"200 http://127.0.0.1:{redirect_port}/callback\n"
        second.close_stdin()
        assert second.wait_exit() == 0
        check = subprocess.run(
            [sys.executable, "-m", "mcpbridge", "check", "--json", *options(ca, redirect_port), provider.url],
            cwd=ROOT,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=6 * WAIT,
            stdin=subprocess.DEVNULL,
        )
        renewal = json.loads(check.stdout)["signIn"]["renewal"]
        assert renewal["silent"] is True and "refresh token" in renewal["why"]
    finally:
        for bridge in bridges:
            bridge.stop()
    issued = provider.state()["issued"]
    assert issued
    for bridge in bridges:
        text = bridge.stderr_text + b"".join(bridge.raw_lines).decode("utf-8", "replace")
        assert not any(token in text for token in issued), "a token reached stderr or stdout"
