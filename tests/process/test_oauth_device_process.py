"""The device and client-credentials sign-ins of the real executable: ``python -m mcpbridge <url>``.

The upstream server and its authorization server are :class:`AuthServer` on 127.0.0.1
over TLS. The test "person" reads the user code from the sign-in line on stderr (before
``notifications/initialized``) or from the URL elicitation (after it) and enters it at
the test-only approval endpoint of the server. Every stderr line and stdout frame of every
bridge is scanned for the device codes, the tokens and the secrets (the ``setup`` fixture).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Bridge, text_of
from tests.oauth_peers import AuthServer, TestCA, approve, query_of
from tests.process.test_oauth_process import CLIENT_SECRET, TOKEN_KEY, Setup, sign_in_lines, wait_for

DEVICE_LINE = re.compile(r"mcp-bridge-vscode: sign in at (https://\S+) with the code ([A-Z-]+)\n")
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}},
    "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
}
#: The bridge runs on a desktop unless a test says otherwise.
LOCAL = {
    "DISPLAY": ":0",
    "SSH_CONNECTION": "",
    "SSH_TTY": "",
    "REMOTE_CONTAINERS": "",
    "CODESPACES": "",
    "WSL_DISTRO_NAME": "",
}
FILE_STORE = {"MCP_BRIDGE_TOKEN_KEY": TOKEN_KEY}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def auth(ca: TestCA) -> Iterator[AuthServer]:
    server = AuthServer(ca)
    server.switches.device = True
    yield server
    server.close()


@pytest.fixture
def setup(auth: AuthServer, ca: TestCA, tmp_path: Path) -> Iterator[Setup]:
    made = Setup(auth, ca, tmp_path)
    made.env.update(LOCAL)
    yield made
    for bridge in made.bridges:
        bridge.stop()
        texts = [bridge.stderr_text, b"".join(bridge.raw_lines).decode("utf-8", "replace")]
        for text in texts:
            for secret in made.secrets():
                assert secret not in text, "a secret reached stderr or stdout"
    device_codes = [s for s in auth.secrets_seen() if s.startswith("dc-")]
    assert len(device_codes) == len(auth.device_requests)  # the scan above covered each device code


def device_lines(bridge: Bridge) -> list[tuple[str, str]]:
    return [
        (m.group(1), m.group(2)) for line in list(bridge.stderr_lines) if (m := DEVICE_LINE.fullmatch(line))
    ]


def sign_in_by_device(setup: Setup, bridge: Bridge) -> dict[str, Any]:
    """Send initialize, enter the code of the sign-in line, and give the response."""
    request_id = bridge.request_async("initialize", INITIALIZE)
    ((page, code),) = wait_for(lambda: device_lines(bridge))
    assert page == setup.auth.origin + "/device/verify"
    assert approve(setup.auth.origin, code, setup.ca) == 200
    response = bridge.wait_response(request_id, timeout=30)
    bridge.notify("notifications/initialized")
    return response


def test_a_device_sign_in_during_initialize_with_the_code_of_the_sign_in_line(setup):
    bridge = setup.bridge("--sign-in", "device")
    started = time.monotonic()
    init = sign_in_by_device(setup, bridge)
    elapsed = time.monotonic() - started
    print(f"device sign-in during initialize: {elapsed:.2f} s")  # the figure of the report (pytest -s)
    assert init["result"]["serverInfo"]["name"] == "oauth-peer"
    assert text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
    (request,) = setup.auth.device_requests
    assert request["resource"] == setup.auth.url and request["scope"] == "mcp:read"
    assert setup.auth.authorizations == [] and setup.browser == [] and sign_in_lines(bridge) == []
    assert "the sign-in uses the device flow: --sign-in device" in bridge.stderr_text
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    for line in bridge.stderr_lines:
        assert line.startswith("mcp-bridge-vscode: ")


def test_auto_in_an_ssh_session_takes_the_device_flow_and_on_a_desktop_the_browser(setup):
    remote = setup.bridge(env={"SSH_CONNECTION": "192.0.2.7 50022 192.0.2.1 22"})
    assert "result" in sign_in_by_device(setup, remote)
    assert "a remote session (SSH_CONNECTION is set)" in remote.stderr_text
    assert "192.0.2.7" not in remote.stderr_text
    local = setup.bridge("--account", "desk")
    assert "result" in local.initialize()
    assert len(sign_in_lines(local)) == 1 and len(setup.browser) == 1 and device_lines(local) == []


def test_a_step_up_after_initialized_asks_vscode_to_open_the_complete_verification_uri(setup):
    bridge = setup.bridge("--sign-in", "device")
    assert "result" in sign_in_by_device(setup, bridge)
    call = bridge.request_async("tools/call", {"name": "guarded", "arguments": {}})
    elicit = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    params = elicit["params"]
    code = query_of(params["url"])["user_code"]
    assert params["mode"] == "url" and params["url"].startswith(setup.auth.origin + "/device/verify?")
    assert code in params["message"]
    assert wait_for(lambda: len(device_lines(bridge)) == 2) and device_lines(bridge)[1][1] == code
    assert approve(setup.auth.origin, code, setup.ca) == 200
    bridge.send({"jsonrpc": "2.0", "id": elicit["id"], "result": {"action": "accept"}})
    response = bridge.wait_response(call, timeout=30)
    assert text_of(response) == "guarded: allowed"
    complete = next(f for f in bridge.seen if f.get("method") == "notifications/elicitation/complete")
    assert complete["params"] == {"elicitationId": params["elicitationId"]}
    assert setup.auth.device_requests[-1]["scope"] == "mcp:read mcp:write"


def test_two_bridges_started_at_once_run_one_device_flow(setup):
    bridges = [setup.bridge("--sign-in", "device", "--token-store", "file", env=FILE_STORE) for _ in range(2)]
    ids = [bridge.request_async("initialize", INITIALIZE) for bridge in bridges]
    found = wait_for(lambda: [line for bridge in bridges for line in device_lines(bridge)])
    assert approve(setup.auth.origin, found[0][1], setup.ca) == 200
    for bridge, request_id in zip(bridges, ids, strict=True):
        assert "result" in bridge.wait_response(request_id, timeout=60)
    assert len(setup.auth.device_requests) == 1 and len(setup.auth.registrations) == 1
    assert sum(len(device_lines(b)) for b in bridges) == 1
    for bridge in bridges:
        assert (
            text_of(bridge.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
        )


def test_a_restart_reuses_the_stored_tokens_and_a_refresh_needs_no_new_code(setup):
    first = setup.bridge("--sign-in", "device", "--token-store", "file", env=FILE_STORE)
    assert "result" in sign_in_by_device(setup, first)
    first.close_stdin()
    assert first.wait_exit() == 0
    second = setup.bridge("--sign-in", "device", "--token-store", "file", env=FILE_STORE)
    assert "result" in second.initialize()
    assert device_lines(second) == [] and len(setup.auth.device_requests) == 1
    setup.auth.expire_all()
    assert text_of(second.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
    grants = [r["grant_type"] for r in setup.auth.token_requests]
    assert grants.count("refresh_token") == 1 and len(setup.auth.device_requests) == 1


def test_pending_and_slow_down_are_waited_out(setup):
    setup.auth.switches.device_pending = 2
    setup.auth.switches.device_slow_down = 1
    bridge = setup.bridge("--sign-in", "device")
    assert "result" in sign_in_by_device(setup, bridge)
    answers = [answer for _, answer in setup.auth.device_polls]
    assert answers[0] == "slow_down" and answers[1] == "authorization_pending"
    assert answers[-1] == "tokens"
    assert "the authorization server asked for slower polling: every 6 s" in bridge.stderr_text


@pytest.mark.parametrize(
    ("switch", "cause"),
    [("device_deny", "sign_in_denied"), ("device_expired", "sign_in_timeout")],
)
def test_a_refusal_and_an_expired_code_fail_initialize_with_their_cause(setup, switch, cause):
    setup.auth.switches.device_deny = switch == "device_deny"
    setup.auth.switches.device_expired = switch == "device_expired"
    bridge = setup.bridge("--sign-in", "device")
    response = sign_in_by_device(setup, bridge)
    assert response["error"]["data"]["cause"] == cause


@pytest.mark.parametrize(
    ("switches", "detail"),
    [
        ({"device": False}, "the authorization server offers no device sign-in; use --sign-in browser"),
        (
            {"device_endpoint": "http://auth.example.invalid/device"},
            "an address of the authorization server is not a safe https URL, which the bridge refuses: it "
            "allows http only when the address and the upstream server are both on loopback; serve the "
            "authorization server over https, or run it and the upstream server both on loopback "
            "(127.0.0.1, ::1 or localhost) for a local test",
        ),
    ],
)
def test_device_without_a_usable_device_endpoint_names_the_option(setup, switches, detail):
    for name, value in switches.items():
        setattr(setup.auth.switches, name, value)
    bridge = setup.bridge("--sign-in", "device")
    error = bridge.initialize()["error"]
    assert error["data"] == {"cause": "device_sign_in_unavailable", "detail": detail}
    assert "Use --sign-in browser" in error["message"]
    assert device_lines(bridge) == [] and setup.auth.device_requests == [] and setup.browser == []


def test_client_credentials_sign_in_without_a_person_and_a_wrong_secret_is_refused(setup):
    setup.auth.add_client("svc-9", "http://127.0.0.1:1/callback", secret=CLIENT_SECRET)
    options = (
        "--sign-in",
        "client-credentials",
        "--client-id",
        "svc-9",
        "--client-issuer",
        setup.auth.issuer,
    )
    good = setup.bridge(*options, env={"MCP_BRIDGE_CLIENT_SECRET": CLIENT_SECRET})
    assert "result" in good.initialize()
    assert text_of(good.request("tools/call", {"name": "whoami", "arguments": {}})) == "scopes: mcp:read"
    assert [r["grant_type"] for r in setup.auth.token_requests] == ["client_credentials"]
    assert setup.browser == [] and sign_in_lines(good) == [] and device_lines(good) == []
    wrong = setup.bridge(*options, "--account", "other", env={"MCP_BRIDGE_CLIENT_SECRET": "wrong-secret-3f"})
    error = wrong.initialize()["error"]
    assert error["data"] == {
        "cause": "client_credentials_refused",
        "detail": "HTTP status 401, error invalid_client",
    }
    assert "MCP_BRIDGE_CLIENT_SECRET" in error["message"]
    assert "wrong-secret-3f" not in wrong.stderr_text


def test_client_credentials_without_a_client_id_or_a_secret_is_an_argument_error(setup):
    out = setup.run("--sign-in", "client-credentials", setup.auth.url)
    assert out.returncode == 2
    assert "--sign-in client-credentials needs --client-id" in out.stderr
    out = setup.run(
        "--sign-in",
        "client-credentials",
        "--client-id",
        "svc-9",
        "--client-issuer",
        setup.auth.issuer,
        setup.auth.url,
    )
    assert out.returncode == 2
    assert "MCP_BRIDGE_CLIENT_SECRET" in out.stderr


def test_check_reports_the_flows_of_the_server_and_the_one_the_bridge_would_use(setup):
    import json

    out = setup.run("check", "--json", *setup.options(), setup.auth.url, env={"SSH_TTY": "/dev/pts/1"})
    flows = json.loads(out.stdout)["signIn"]["flows"]
    assert flows["offered"] == ["browser", "device"] and flows["unknown"] == []
    assert flows["uses"] == "device" and "SSH_TTY is set" in flows["why"]
    out = setup.run("check", *setup.options(), setup.auth.url)
    assert (
        "            sign-in flows: the server offers browser, device; the bridge uses browser: "
        "the bridge runs on the machine of the browser\n"
    ) in out.stdout
    setup.auth.switches.device = False
    setup.auth.switches.client_credentials = True
    out = setup.run("check", "--json", *setup.options("--sign-in", "device"), setup.auth.url)
    flows = json.loads(out.stdout)["signIn"]["flows"]
    assert flows["offered"] == ["browser", "client-credentials"] and flows["uses"] is None
    assert "use --sign-in browser" in flows["why"]
    assert setup.auth.device_requests == [] and setup.auth.token_requests == []


def test_the_end_of_input_stops_the_polling_quickly(setup):
    bridge = setup.bridge("--sign-in", "device")
    bridge.request_async("initialize", INITIALIZE)
    wait_for(lambda: device_lines(bridge))
    bridge.close_stdin()
    assert bridge.wait_exit(5) == 0
    assert all("result" not in f and "error" not in f for f in bridge.seen)
