"""The sign-in of the real executable: ``python -m mcpbridge <url>`` over pipes, as VS Code runs it.

The upstream server and its authorization server are :class:`AuthServer` on 127.0.0.1
over TLS (``--ca-file`` trusts the test CA); the browser is a program in ``BROWSER``.
No test touches the keychain of the host: each bridge gets the ``fail`` backend of
keyring or the file-based test backend.
"""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from conftest import WAIT
from mcpbridge.oauth.receiver import MAX_CONNECTIONS
from tests.harness import ROOT, Bridge, bridge_command, text_of
from tests.oauth_peers import (
    AuthServer,
    Switches,
    TestCA,
    browser_calls,
    browser_script,
    free_port,
    query_of,
    visit,
)
from tests.peers.scripted_http import ScriptedServer

TOKEN_KEY = "5e" * 32
CLIENT_SECRET = "client-secret-93ab1c"
HEADER_SECRET = "header-secret-77f0e2"
NO_URL_ELICITATION = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}}
INSECURE_METADATA = (
    "the protected resource metadata is at an http address, which the bridge refuses: it allows http only "
    "when the address and the upstream server are both on loopback; serve the metadata over https, or run "
    "the upstream server and its authorization server both on loopback (127.0.0.1, ::1 or localhost) for a "
    "local test"
)
SIGN_IN_LINE = re.compile(r"mcp-bridge-vscode: sign in at (https://\S+)\n")


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def auth(ca: TestCA) -> Iterator[AuthServer]:
    server = AuthServer(ca)
    yield server
    server.close()


class Setup:
    """The environment and the options of the bridges of one test."""

    def __init__(self, auth: AuthServer, ca: TestCA, tmp_path: Path) -> None:
        self.auth = auth
        self.ca = ca
        self.tmp_path = tmp_path
        self.port = free_port()
        self.state = tmp_path / "state"
        self.browser_log = tmp_path / "browser.log"
        self.env = {
            "BROWSER": str(browser_script(tmp_path)),
            "TEST_BROWSER_LOG": str(self.browser_log),
            "TEST_BROWSER_CA": str(ca.ca_file),
            "XDG_STATE_HOME": str(self.state),
            "HOME": str(tmp_path / "home"),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            "MCP_BRIDGE_CLIENT_SECRET": "",
            "MCP_BRIDGE_TOKEN_KEY": "",
            "TEST_SECRET_HEADER": HEADER_SECRET,
            "SANDBOX_RUNTIME": "",
        }
        self.bridges: list[Bridge] = []

    @property
    def token_dir(self) -> Path:
        return self.state / "mcpbridge" / "vscode" / "tokens"

    def options(self, *extra: str) -> list[str]:
        return [
            "--ca-file",
            str(self.ca.ca_file),
            "--redirect-port",
            str(self.port),
            "--log-level",
            "debug",
            *extra,
        ]

    def bridge(self, *extra: str, url: str | None = None, env: dict[str, str] | None = None) -> Bridge:
        command = bridge_command(
            *self.options("--header-env", "X-Tenant=TEST_SECRET_HEADER", *extra), url or self.auth.url
        )
        bridge = Bridge(command, env={**self.env, **(env or {})})
        self.bridges.append(bridge)
        return bridge

    def run(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mcpbridge", *argv],
            cwd=ROOT,
            env={**_base_env(), **self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    @property
    def browser(self) -> list[dict[str, Any]]:
        return browser_calls(self.browser_log)

    def secrets(self) -> list[str]:
        return self.auth.secrets_seen() + [CLIENT_SECRET, HEADER_SECRET, TOKEN_KEY]


def _base_env() -> dict[str, str]:
    import os

    return dict(os.environ)


@pytest.fixture
def setup(auth: AuthServer, ca: TestCA, tmp_path: Path) -> Iterator[Setup]:
    made = Setup(auth, ca, tmp_path)
    yield made
    texts = []
    for bridge in made.bridges:
        bridge.stop()
        texts.append(bridge.stderr_text)
        texts.append(b"".join(bridge.raw_lines).decode("utf-8", "replace"))
    for text in texts:
        for secret in made.secrets():
            assert secret not in text, "a secret reached stderr or stdout"


def wait_for(check: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Poll ``check`` until it gives a true value (bounded)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError("the condition did not come true")
        pause.wait(0.02)


def sign_in_lines(bridge: Bridge) -> list[str]:
    return [m.group(1) for line in list(bridge.stderr_lines) if (m := SIGN_IN_LINE.fullmatch(line))]


# ---------------------------------------------------------------------------------- sign-in


def test_the_url_form_signs_in_during_initialize_and_the_browser_gets_only_the_start_url(setup):
    bridge = setup.bridge()
    init = bridge.initialize()
    assert init["result"]["serverInfo"]["name"] == "oauth-peer"
    assert text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
    lines = sign_in_lines(bridge)
    assert len(lines) == 1
    # One sign-in, in the first request: the client's initialize, refused with a 401 and sent
    # again with the token; the server of 2026-07-28 only refuses it, and server/discover
    # goes with the same token.
    assert setup.auth.mcp_calls[:4] == ["initialize", "initialize", "server/discover", "tools/call"]
    assert query_of(lines[0])["redirect_uri"] == f"http://127.0.0.1:{setup.port}/callback"
    (call,) = setup.browser
    assert len(call["argv"]) == 1
    assert re.fullmatch(rf"http://127\.0\.0\.1:{setup.port}/start/[A-Za-z0-9_-]{{43}}", call["argv"][0])
    assert call["secrets"] == []
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    stderr = bridge.stderr_text
    assert (
        "mcp-bridge-vscode: oauth: info: the tokens stay in memory: the keychain is not available" in stderr
    )
    assert "no token key is set" in stderr
    for line in bridge.stderr_lines:
        assert line.startswith("mcp-bridge-vscode: ")


def test_no_browser_writes_the_line_and_a_step_up_asks_vscode_with_a_url_elicitation(setup):
    bridge = setup.bridge("--no-browser")
    request_id = bridge.request_async(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
        },
    )
    (first,) = wait_for(lambda: sign_in_lines(bridge))
    assert visit(first, setup.ca) == 200
    assert "result" in bridge.wait_response(request_id)
    bridge.notify("notifications/initialized")
    call = bridge.request_async("tools/call", {"name": "guarded", "arguments": {}})
    elicit = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    assert elicit["id"] == "b-1"
    params = elicit["params"]
    assert params["mode"] == "url" and params["elicitationId"]
    assert query_of(params["url"])["scope"] == "mcp:read mcp:write"
    assert wait_for(lambda: len(sign_in_lines(bridge)) == 2) and sign_in_lines(bridge)[1] == params["url"]
    assert visit(params["url"], setup.ca) == 200
    bridge.send({"jsonrpc": "2.0", "id": "b-1", "result": {"action": "accept"}})
    response = bridge.wait_response(call)
    assert text_of(response) == "guarded: allowed"
    complete = next(f for f in bridge.seen if f.get("method") == "notifications/elicitation/complete")
    assert complete["params"] == {"elicitationId": params["elicitationId"]}
    assert bridge.seen.index(complete) < bridge.seen.index(response)
    assert setup.browser == []


def test_a_client_without_url_elicitation_gets_no_consent_and_the_other_tools_work(setup):
    bridge = setup.bridge()
    assert "result" in bridge.initialize(capabilities=NO_URL_ELICITATION)
    error = bridge.request("tools/call", {"name": "guarded", "arguments": {}})["error"]
    assert error["data"] == {"cause": "reauthorization_required", "detail": "no_consent"}
    # Said when the sign-in is needed, not at the start.
    wait_for(lambda: "the client did not declare URL elicitation" in bridge.stderr_text)
    assert text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
    assert len(sign_in_lines(bridge)) == 1 and len(setup.browser) == 1


def test_a_declined_elicitation_fails_the_call_and_starts_the_cooldown(setup):
    bridge = setup.bridge()
    bridge.initialize()
    call = bridge.request_async("tools/call", {"name": "guarded", "arguments": {}})
    elicit = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    bridge.send({"jsonrpc": "2.0", "id": elicit["id"], "result": {"action": "decline"}})
    assert bridge.wait_response(call)["error"]["data"] == {
        "cause": "reauthorization_required",
        "detail": "declined",
    }
    again = bridge.request("tools/call", {"name": "guarded", "arguments": {}})["error"]
    assert again["data"] == {"cause": "reauthorization_required", "detail": "cooldown"}


def test_canceling_the_call_withdraws_the_elicitation(setup):
    bridge = setup.bridge()
    bridge.initialize()
    call = bridge.request_async("tools/call", {"name": "guarded", "arguments": {}})
    elicit = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    bridge.notify("notifications/cancelled", {"requestId": call, "reason": "the user canceled"})
    withdrawn = bridge.wait_frame(lambda f: f.get("method") == "notifications/cancelled")
    assert withdrawn["params"]["requestId"] == elicit["id"]
    # No cooldown: the next call asks again.
    bridge.request_async("tools/call", {"name": "guarded", "arguments": {}})
    second = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    assert second["id"] != elicit["id"]
    assert all(f.get("id") != call for f in bridge.seen)


def test_a_second_get_of_the_start_url_stops_the_sign_in(setup):
    bridge = setup.bridge(env={"TEST_BROWSER_MODE": "reuse"})
    init = bridge.request_async(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
    )
    error = bridge.wait_response(init, 5 + 5)["error"]
    assert error["data"] == {"cause": "sign_in_start_reused"}
    assert "--no-browser" in error["message"]
    statuses = Path(str(setup.browser_log) + ".statuses").read_text().splitlines()
    assert statuses[0].startswith("303 https://") and statuses[0][4:] == sign_in_lines(bridge)[0]
    assert statuses[1].startswith("410")


def test_a_request_for_another_host_and_idle_connections_do_not_disturb_the_sign_in(setup):
    bridge = setup.bridge(env={"TEST_BROWSER_MODE": "ignore"})
    init = bridge.request_async(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
    )
    (call,) = wait_for(lambda: setup.browser)
    start = call["argv"][0]
    idle = [
        socket.create_connection(("127.0.0.1", setup.port), timeout=WAIT) for _ in range(2 * MAX_CONNECTIONS)
    ]
    try:
        # A web page of attacker.example after its name was rebound to 127.0.0.1.
        rebound = http.client.HTTPConnection("127.0.0.1", setup.port, timeout=WAIT)
        rebound.request("GET", urlsplit(start).path, headers={"Host": f"attacker.example:{setup.port}"})
        answer = rebound.getresponse()
        body = answer.read()
        rebound.close()
        assert answer.status == 421 and answer.getheader("Location") is None
        assert b"https://" not in body and urlsplit(start).path.encode() not in body
        assert visit(start, setup.ca) == 200
    finally:
        for sock in idle:
            sock.close()
    assert "result" in bridge.wait_response(init)
    assert "the sign-in receiver refused a request for another host name" in bridge.stderr_text
    assert "attacker.example" not in bridge.stderr_text


def test_the_sandbox_fails_the_sign_in_at_once(setup):
    bridge = setup.bridge(env={"SANDBOX_RUNTIME": " 1 "})
    error = bridge.initialize()["error"]
    assert error["data"]["cause"] == "sandbox"
    assert sign_in_lines(bridge) == [] and setup.browser == []


def test_an_upstream_and_an_authorization_server_both_on_loopback_sign_in_over_http(ca, tmp_path):
    plain = AuthServer(ca, Switches(device=True), tls=False)
    setup = Setup(plain, ca, tmp_path)
    try:
        bridge = setup.bridge("--sign-in", "browser")
        assert bridge.initialize()["result"]["serverInfo"]["name"] == "oauth-peer"
        assert (
            text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
        )
        # The browser sign-in: the authorization endpoint over http, then the token endpoint.
        assert [a["response_type"] for a in plain.authorizations] == ["code"] and len(setup.browser) == 1
        assert plain.registrations and plain.token_requests
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert "InsecureEndpoint" not in bridge.stderr_text
        # check finds the flows of the local authorization server, the device sign-in too.
        out = setup.run("check", *setup.options(), plain.url)
        assert "the server needs a sign-in (HTTP status 401)" in out.stdout, out.stdout
        assert "sign-in flows: the server offers browser, device;" in out.stdout, out.stdout
    finally:
        for made in setup.bridges:
            made.stop()
        plain.close()


def test_an_http_loopback_upstream_whose_metadata_is_at_an_http_address_off_loopback_fails_in_words(setup):
    def challenge(ex: Any) -> None:
        ex.close()
        ex.body(
            401,
            b"",
            "text/plain",
            [("WWW-Authenticate", 'Bearer resource_metadata="http://auth.example.invalid/x"')],
        )

    with ScriptedServer(challenge) as plain:
        bridge = setup.bridge(url=plain.url())
        error = bridge.initialize()["error"]
        assert error["data"] == {"cause": "sign_in_failed", "detail": INSECURE_METADATA}
        assert "result" not in bridge.initialize()
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        # Only the first line names the port of the URL, with the host: the rest of the URL nowhere.
        [first] = [line for line in bridge.stderr_lines if str(plain.port) in line]
        assert f"upstream: Streamable HTTP (http) to the host 127.0.0.1, port {plain.port};" in first
        assert_check_says_the_metadata_is_refused(setup.run("check", *setup.options(), plain.url()))


def assert_check_says_the_metadata_is_refused(out: subprocess.CompletedProcess[str]) -> None:
    """check names the refused address of the metadata, and gives its fix, not a sign-in to start."""
    assert out.returncode == 1, out.stderr
    words, fix = INSECURE_METADATA.split("; ")
    assert f"sign-in flows: not checked ({words})" in out.stdout, out.stdout
    assert (
        f"  - the server needs a sign-in (HTTP status 401), and the sign-in cannot work: {words}\n"
        f"    fix: {fix[0].upper()}{fix[1:]}.\n"
    ) in out.stdout, out.stdout
    assert "publishes no protected resource metadata" not in out.stdout
    assert "opens the sign-in in a browser" not in out.stdout


def test_an_https_upstream_whose_metadata_is_only_at_an_http_address_is_told_so(setup, ca):
    def challenge(ex: Any) -> None:
        ex.close()
        ex.body(
            401,
            b"",
            "text/plain",
            [("WWW-Authenticate", 'Bearer resource_metadata="http://auth.example.invalid/prm"')],
        )

    with ScriptedServer(challenge, ssl_context=ca.server_context) as server:
        url = f"https://127.0.0.1:{server.port}/mcp"
        bridge = setup.bridge(url=url)
        error = bridge.initialize()["error"]
        assert error["data"] == {"cause": "sign_in_failed", "detail": INSECURE_METADATA}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert f"bridge: error: initialize failed: {INSECURE_METADATA}" in bridge.stderr_text
        assert_check_says_the_metadata_is_refused(setup.run("check", *setup.options(), url))


def test_the_end_of_stdin_while_the_browser_is_out_stops_the_bridge_quickly_twenty_times_on_one_port(setup):
    for _ in range(20):
        bridge = setup.bridge(env={"TEST_BROWSER_MODE": "ignore"})
        bridge.request_async(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        )
        wait_for(partial(sign_in_lines, bridge))
        bridge.close_stdin()
        assert bridge.wait_exit(5) == 0
        # Asked before the end: after the grace the initialize gets the error of the end of input.
        frames = bridge.drain()
        assert [frame["error"]["data"]["cause"] for frame in frames] == ["input_ended"], frames
        bridge.stop()


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_a_2025_era_server_at_a_url_signs_in_during_initialize_and_again_when_its_grant_ends(setup, protocol):
    setup.auth.switches.legacy = True
    bridge = setup.bridge("--protocol", protocol)
    init = bridge.initialize()
    assert init["result"]["serverInfo"]["name"] == "oauth-legacy-peer"
    assert text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
    assert len(sign_in_lines(bridge)) == 1
    # The grant ends and cannot be refreshed: the next call asks VS Code, which opens the page.
    setup.auth.switches.refresh_error = "invalid_grant"
    setup.auth.revoke_all()
    call = bridge.request_async("tools/call", {"name": "whoami", "arguments": {}})
    elicit = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    assert elicit["id"].startswith("b-") and elicit["params"]["mode"] == "url"
    assert visit(elicit["params"]["url"], setup.ca) == 200
    bridge.send({"jsonrpc": "2.0", "id": elicit["id"], "result": {"action": "accept"}})
    assert text_of(bridge.wait_response(call)) == "scopes: mcp:read"
    assert len(sign_in_lines(bridge)) == 2
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    assert "the upstream server speaks MCP 2025-11-25" in bridge.stderr_text
    # The client's initialize goes first under either option: a 401, then again with the token.
    assert setup.auth.mcp_calls[:3] == ["initialize", "initialize", "notifications/initialized"]
    assert "server/discover" not in setup.auth.mcp_calls


# ---------------------------------------------------------------------- stores and logout


def test_the_file_store_keeps_the_sign_in_and_logout_deletes_it(setup):
    env = {"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY}
    first = setup.bridge("--token-store", "file", env=env)
    assert "result" in first.initialize()
    first.close_stdin()
    assert first.wait_exit() == 0
    assert f"the tokens are in encrypted files in {setup.token_dir}" in first.stderr_text
    second = setup.bridge("--token-store", "file", env=env)
    assert "result" in second.initialize()
    assert sign_in_lines(second) == []
    second.close_stdin()
    second.wait_exit()

    requests = len(setup.auth.server.received)
    out = setup.run("logout", *setup.options("--token-store", "file"), setup.auth.url, env=env)
    assert out.returncode == 0, out.stderr
    assert (
        'mcp-bridge-vscode: vscode: info: logout deleted the stored sign-in of the account "default". '
        "Restart the server in VS Code to sign in again.\n"
    ) in out.stderr
    assert len(setup.auth.server.received) == requests  # the index knew the URL: no network at all
    calls = list(setup.auth.mcp_calls)
    out = setup.run("logout", *setup.options("--token-store", "file"), setup.auth.url, env=env)
    assert 'logout found no stored sign-in of the account "default" for the URL' in out.stderr
    assert out.returncode == 0
    assert setup.auth.mcp_calls == calls  # logout never calls the upstream server

    third = setup.bridge("--token-store", "file", env=env)
    assert "result" in third.initialize()
    assert len(sign_in_lines(third)) == 1
    third.close_stdin()
    third.wait_exit()
    assert len(setup.auth.registrations) == 2  # a new sign-in registers again


def test_accounts_are_separate_and_logout_all_deletes_every_sign_in_and_the_token_directory(setup):
    env = {"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY}
    for account in ("default", "work"):
        bridge = setup.bridge("--token-store", "file", "--account", account, env=env)
        assert "result" in bridge.initialize()
        assert len(sign_in_lines(bridge)) == 1
        bridge.close_stdin()
        bridge.wait_exit()
    assert len(list(setup.token_dir.glob("*.token"))) == 3  # two sign-ins and the index
    out = setup.run("logout", "--all", "--token-store", "file", "--log-level", "info", env=env)
    assert out.returncode == 0, out.stderr
    assert f"mcp-bridge-vscode: vscode: info: deleted the token directory {setup.token_dir}\n" in out.stderr
    assert "mcp-bridge-vscode: vscode: info: logout deleted 2 stored sign-ins\n" in out.stderr
    assert not setup.token_dir.exists()


def test_logout_of_an_empty_file_store_and_of_the_memory_store(setup):
    out = setup.run("logout", "--all", "--token-store", "file", env={"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY})
    assert out.returncode == 0 and "logout deleted 0 stored sign-ins" in out.stderr
    out = setup.run("logout", "--token-store", "memory", setup.auth.url)
    assert out.returncode == 0
    assert out.stderr == (
        "mcp-bridge-vscode: vscode: info: the memory store keeps no sign-in after the end of the process: "
        "logout has nothing to delete\n"
    )


def test_logout_with_auto_skips_a_store_that_does_not_open_and_asks_the_metadata_when_the_index_is_empty(
    setup,
):
    out = setup.run("logout", *setup.options(), setup.auth.url)
    assert out.returncode == 0, out.stderr
    assert "logout skips the keychain store:" in out.stderr
    assert "logout skips the file store:" in out.stderr
    out = setup.run("logout", *setup.options(), setup.auth.url, env={"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY})
    assert 'logout found no stored sign-in of the account "default" for the URL' in out.stderr
    assert setup.auth.url not in out.stderr


def test_the_keychain_keeps_the_sign_in_between_starts(setup, tmp_path):
    keychain = {
        "PYTHON_KEYRING_BACKEND": "tests.oauth_keyring.FileKeyring",
        "MCPBRIDGE_TEST_KEYRING": str(tmp_path / "keychain.json"),
    }
    first = setup.bridge(env=keychain)
    assert "result" in first.initialize()
    assert (
        'the tokens are in the keychain of the host (service "mcpbridge/mcp-bridge-vscode")'
        in first.stderr_text
    )
    first.close_stdin()
    first.wait_exit()
    second = setup.bridge(env=keychain)
    assert "result" in second.initialize() and sign_in_lines(second) == []
    second.close_stdin()
    second.wait_exit()
    out = setup.run("logout", *setup.options("--token-store", "keychain"), setup.auth.url, env=keychain)
    assert out.returncode == 0 and "logout deleted the stored sign-in" in out.stderr


def test_a_token_store_that_does_not_open_fails_each_request_that_needs_a_token(setup):
    bridge = setup.bridge("--token-store", "keychain")
    assert bridge.request("ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert "the token store did not open" not in bridge.stderr_text  # nothing opens before a request
    for _ in range(2):
        error = bridge.initialize()["error"]
        assert error["data"]["cause"] == "sign_in_failed"
        assert error["data"]["detail"].startswith("the token store did not open: ")
    assert setup.auth.mcp_calls == []  # no request went out without the stored sign-in
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    opened = [line for line in bridge.stderr_lines if "the token store did not open: " in line]
    assert opened[0].startswith("mcp-bridge-vscode: oauth: error: the token store did not open: ")
    assert len([line for line in opened if ": oauth: error: " in line]) == 1  # logged once


def test_token_store_options_that_cannot_work_stop_the_bridge_with_exit_2(setup, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(TOKEN_KEY)
    key_file.chmod(0o644)
    bridge = setup.bridge("--token-store", "file", "--token-key-file", str(key_file))
    assert bridge.wait_exit() == 2
    assert bridge.stderr_lines[-1].startswith(
        "mcp-bridge-vscode: vscode: error: the token store did not open: "
    )
    assert "is not private" in bridge.stderr_text and TOKEN_KEY not in bridge.stderr_text
    bridge = setup.bridge("--token-key-file", str(key_file))  # auto: the key file counts as well
    assert bridge.wait_exit() == 2
    assert "is not private" in bridge.stderr_text


def test_the_token_store_opens_at_the_first_initialize_not_at_the_start(setup):
    bridge = setup.bridge("--token-store", "file", env={"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY})
    assert bridge.request("ping")["result"] == {}
    assert not setup.token_dir.exists()
    assert "the tokens are in encrypted files" not in bridge.stderr_text
    assert "result" in bridge.initialize()
    assert setup.token_dir.is_dir()
    assert f"the tokens are in encrypted files in {setup.token_dir}" in bridge.stderr_text
    bridge.close_stdin()
    assert bridge.wait_exit() == 0


def test_two_bridges_started_at_once_sign_in_once(setup):
    env = {"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY}
    bridges = [setup.bridge("--token-store", "file", env=env) for _ in range(2)]
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
    }
    ids = [bridge.request_async("initialize", params) for bridge in bridges]
    for bridge, request_id in zip(bridges, ids, strict=True):
        assert "result" in bridge.wait_response(request_id, timeout=60)
    assert len(setup.auth.authorizations) == 1
    assert len(setup.browser) == 1
    assert len(setup.auth.registrations) == 1
    assert sum(len(sign_in_lines(b)) for b in bridges) == 1
    for bridge in bridges:
        assert (
            text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
        )


def test_a_pre_registered_client_with_a_secret_never_shows_it(setup, auth):
    auth.add_client("pre-7", f"http://127.0.0.1:{setup.port}/callback", secret=CLIENT_SECRET)
    bridge = setup.bridge(
        "--client-id",
        "pre-7",
        "--client-issuer",
        auth.issuer,
        env={"MCP_BRIDGE_CLIENT_SECRET": CLIENT_SECRET},
    )
    assert "result" in bridge.initialize()
    assert auth.registrations == [] and auth.authorizations[0]["client_id"] == "pre-7"
    assert setup.browser[0]["secrets"] == []


def test_an_authorization_server_that_refuses_resource_gets_one_more_round_in_the_same_browser(setup):
    setup.auth.switches.refuse_resource = "described"
    env = {"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY}
    bridge = setup.bridge("--token-store", "file", env=env)
    assert "result" in bridge.initialize()
    assert text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
    # One sign-in line, one browser: the receiver sent it on to the request without resource.
    assert len(sign_in_lines(bridge)) == 1 and len(setup.browser) == 1
    assert [("resource" in q) for q in setup.auth.authorizations] == [True, False]
    assert all("resource" not in r for r in setup.auth.token_requests)
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    refused = [line for line in bridge.stderr_lines if "refused the resource indicator" in line]
    assert refused == [
        "mcp-bridge-vscode: oauth: info: the authorization server refused the resource indicator at its "
        "authorization endpoint (error invalid_request): the bridge tries once more without it, and "
        "remembers that for the sign-in of this server\n"
    ]
    assert "AADSTS" not in bridge.stderr_text
    out = setup.run("check", "--json", *setup.options("--token-store", "file"), setup.auth.url, env=env)
    assert out.returncode == 0, out.stderr
    assert '"resourceIndicator": {"sends": "none"' in out.stdout


@pytest.mark.parametrize("refuse_resource", [None, "invalid_target"])
def test_a_token_refused_after_a_sign_in_without_resource_names_the_resource_not_the_permissions(
    setup, refuse_resource
):
    setup.auth.switches.refuse_resource = refuse_resource
    setup.auth.switches.refuse_all = True  # the server refuses the token the sign-in got
    bridge = setup.bridge()
    error = bridge.initialize()["error"]
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    assert len(setup.browser) == 1
    stderr = bridge.stderr_text
    if refuse_resource is None:
        # The sign-in sent the resource: the account is what the server refuses.
        assert error["data"] == {"cause": "access_refused", "detail": "HTTP status 401"}
        assert "resource indicator" not in stderr
        return
    assert [("resource" in q) for q in setup.auth.authorizations] == [True, False]
    assert error["message"] == (
        "The upstream server refused the token of the sign-in: the authorization server does not know the "
        "upstream server's address as a resource, so the sign-in went without it and the token is not for "
        "this server. Register the upstream server's address as a resource (an API or audience) at the "
        "authorization server, or give the resource it knows with --resource-indicator <uri>. See the "
        "Output channel of the server."
    )
    assert error["data"] == {"cause": "resource_unknown", "detail": "HTTP status 401"}
    assert "permissions" not in error["message"]
    assert (
        "mcp-bridge-vscode: oauth: warning: the upstream server refused the token (HTTP status 401) of a "
        "sign-in without the resource indicator, which the authorization server refused: it does not know "
        "the upstream server's address as a resource. Register it there as a resource (an API or audience), "
        "or give the resource it knows with --resource-indicator <uri>\n"
    ) in stderr
    assert setup.auth.url not in stderr
