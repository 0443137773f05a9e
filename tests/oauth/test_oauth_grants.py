"""The pure rules of the device and client-credentials sign-ins: flow choice, requests, answers."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from mcpbridge.oauth import config, flow, grants, stored, tokens
from mcpbridge.oauth.config import SignInFlow
from mcpbridge.oauth.flow import ServerMetadata
from mcpbridge.oauth.tokens import TokenProblem
from tests.oauth_peers import HOSTILE_NUMBERS, json_with_raw

ISSUER = "https://auth.example.com"
METADATA: dict[str, Any] = {
    "issuer": ISSUER,
    "authorization_endpoint": ISSUER + "/authorize",
    "token_endpoint": ISSUER + "/token",
    "code_challenge_methods_supported": ["S256"],
    "device_authorization_endpoint": ISSUER + "/device",
    "grant_types_supported": ["authorization_code", "refresh_token", tokens.DEVICE_CODE_GRANT],
}


def server(**changes: Any) -> ServerMetadata:
    doc = {**METADATA, **changes}
    return flow.check_server_metadata({k: v for k, v in doc.items() if v is not None}, ISSUER)


# ---------------------------------------------------------------------------------- metadata


def test_the_metadata_keeps_the_device_endpoint_and_the_grant_types():
    found = server()
    assert found.device_authorization_endpoint == ISSUER + "/device"
    assert found.grant_types_supported == ("authorization_code", "refresh_token", tokens.DEVICE_CODE_GRANT)
    bare = server(device_authorization_endpoint=None, grant_types_supported=None)
    assert bare.device_authorization_endpoint is None and bare.grant_types_supported is None
    # A device endpoint that is not a text is no device endpoint; the rest of the metadata stays usable.
    assert server(device_authorization_endpoint=42).device_authorization_endpoint is None


@pytest.mark.parametrize(
    ("endpoint", "problem"),
    [
        (ISSUER + "/device", None),
        (None, "NoDeviceEndpoint"),
        ("http://auth.example.com/device", "InsecureEndpoint"),
        # As every other endpoint: http on loopback only when the upstream server is on loopback too.
        ("http://127.0.0.1:8080/device", "InsecureEndpoint"),
        ("https://auth.example.com/device#x", "InsecureEndpoint"),
        ("https://user@auth.example.com/device", "InsecureEndpoint"),
    ],
)
def test_the_device_endpoint_must_be_https_as_the_other_endpoints(endpoint, problem):
    assert grants.device_endpoint_problem(server(device_authorization_endpoint=endpoint)) == problem


def test_offered_flows():
    assert grants.offered_flows(server()) == {"browser": True, "device": True, "client-credentials": False}
    assert grants.offered_flows(server(device_authorization_endpoint=None, grant_types_supported=None)) == {
        "browser": True,
        "device": False,
        "client-credentials": None,
    }
    cc = server(grant_types_supported=["client_credentials"])
    assert grants.offered_flows(cc)["client-credentials"] is True


# ---------------------------------------------------------------------------- the environment

LINUX_DESKTOP = {"DISPLAY": ":0"}


@pytest.mark.parametrize(
    ("env", "platform", "forwarding", "reason"),
    [
        (LINUX_DESKTOP, "linux", True, None),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", True, None),
        ({}, "linux", True, "no DISPLAY or WAYLAND_DISPLAY"),
        ({"DISPLAY": "  "}, "linux", True, "no DISPLAY or WAYLAND_DISPLAY"),
        ({}, "darwin", True, None),
        ({}, "win32", True, None),
        (
            {**LINUX_DESKTOP, "SSH_CONNECTION": "10.0.0.2 5022 10.0.0.1 22"},
            "linux",
            True,
            "SSH_CONNECTION is set",
        ),
        ({"SSH_TTY": "/dev/pts/3"}, "darwin", True, "SSH_TTY is set"),
        ({**LINUX_DESKTOP, "SSH_CONNECTION": ""}, "linux", True, None),
        ({**LINUX_DESKTOP, "REMOTE_CONTAINERS": "true"}, "linux", True, "REMOTE_CONTAINERS is set"),
        ({**LINUX_DESKTOP, "CODESPACES": "true"}, "linux", True, "CODESPACES is set"),
        ({"WSL_DISTRO_NAME": "Ubuntu"}, "linux", True, None),
        (
            {"WSL_DISTRO_NAME": "Ubuntu", "DISPLAY": ":0"},
            "linux",
            False,
            "a WSL session without localhost forwarding",
        ),
    ],
)
def test_remote_session(env, platform, forwarding, reason):
    assert config.remote_session(env, platform=platform, wsl_localhost_forwarding=forwarding) == reason


def test_the_reason_never_holds_a_value_of_the_environment():
    reason = config.remote_session({"SSH_CONNECTION": "10.9.8.7 1 2 3"}, platform="linux")
    assert reason is not None and "10.9.8.7" not in reason


# ------------------------------------------------------------------------------ the flow choice

NO_DEVICE = server(device_authorization_endpoint=None)
HTTP_DEVICE = server(device_authorization_endpoint="http://auth.example.com/device")


@pytest.mark.parametrize(
    ("requested", "remote", "metadata", "chosen", "in_reason"),
    [
        (SignInFlow.AUTO, None, server(), "browser", "machine of the browser"),
        (SignInFlow.AUTO, "SSH_CONNECTION is set", server(), "device", "SSH_CONNECTION is set"),
        (SignInFlow.AUTO, "SSH_TTY is set", NO_DEVICE, "browser", "offers no device sign-in"),
        (SignInFlow.AUTO, "CODESPACES is set", HTTP_DEVICE, "browser", "not https"),
        (SignInFlow.BROWSER, "SSH_TTY is set", server(), "browser", "--sign-in browser"),
        (SignInFlow.DEVICE, None, server(), "device", "--sign-in device"),
        (
            SignInFlow.CLIENT_CREDENTIALS,
            None,
            NO_DEVICE,
            "client-credentials",
            "--sign-in client-credentials",
        ),
    ],
)
def test_choose_flow(requested, remote, metadata, chosen, in_reason):
    choice = grants.choose_flow(requested, remote=remote, server=metadata)
    assert choice.flow == chosen
    assert in_reason in choice.reason


@pytest.mark.parametrize(
    ("metadata", "problem"), [(NO_DEVICE, "NoDeviceEndpoint"), (HTTP_DEVICE, "InsecureEndpoint")]
)
def test_device_without_a_usable_endpoint_is_refused(metadata, problem):
    with pytest.raises(grants.DeviceUnavailable, match=f"^{problem}$"):
        grants.choose_flow(SignInFlow.DEVICE, remote=None, server=metadata)


# ------------------------------------------------------------------------ device authorization

DEVICE_ANSWER = {
    "device_code": "dc-secret-value",
    "user_code": "WDJB-MJHT",
    "verification_uri": ISSUER + "/device/verify",
    "verification_uri_complete": ISSUER + "/device/verify?user_code=WDJB-MJHT",
    "expires_in": 900,
    "interval": 7,
}


def test_the_device_request_carries_the_resource_and_the_scopes_and_the_client_id():
    form = grants.device_authorization_form(resource="https://mcp.example.com/mcp", scopes=("a", "b"))
    assert form == {"resource": "https://mcp.example.com/mcp", "scope": "a b"}
    assert grants.device_authorization_form(resource="r", scopes=()) == {"resource": "r"}
    body, headers = tokens.client_authentication(stored.ClientRegistration("cid"), form)
    assert body["client_id"] == "cid" and headers == {}


def test_a_device_answer_is_read_and_the_device_code_stays_out_of_its_repr():
    found = grants.parse_device_authorization(200, DEVICE_ANSWER)
    assert (found.device_code, found.user_code, found.expires_in, found.interval) == (
        "dc-secret-value",
        "WDJB-MJHT",
        900.0,
        7,
    )
    assert found.page == DEVICE_ANSWER["verification_uri_complete"]
    assert "dc-secret-value" not in repr(found)
    line = grants.device_sign_in_line(found)
    assert line == f"mcp-bridge-vscode: sign in at {ISSUER}/device/verify with the code WDJB-MJHT\n"
    assert "dc-secret-value" not in line
    assert "WDJB-MJHT" in grants.device_message(found) and "dc-secret" not in grants.device_message(found)


@pytest.mark.parametrize(
    ("changes", "interval", "complete", "dropped"),
    [
        ({"interval": None}, 5, True, False),
        ({"interval": 0}, 5, True, False),
        ({"interval": "7"}, 7, True, False),
        ({"interval": 0.5}, 5, True, False),
        ({"interval": 600}, grants.MAX_INTERVAL, True, False),
        ({"interval": 2.7}, 2, True, False),
        ({"verification_uri_complete": None}, 7, False, False),
        ({"verification_uri_complete": "http://auth.example.com/v?c=1"}, 7, False, True),
        ({"verification_uri_complete": 5}, 7, False, True),
    ],
)
def test_device_answer_defaults(changes, interval, complete, dropped):
    doc = {k: v for k, v in {**DEVICE_ANSWER, **changes}.items() if v is not None}
    found = grants.parse_device_authorization(200, doc)
    assert found.interval == interval
    assert (found.verification_uri_complete is not None) == complete
    assert found.dropped_complete == dropped
    if not complete:
        assert found.page == DEVICE_ANSWER["verification_uri"]


@pytest.mark.parametrize(
    ("status", "changes", "text"),
    [
        (400, {"error": "invalid_client"}, "HTTP status 400, error invalid_client"),
        (400, {"error": "Not A Code!"}, "HTTP status 400"),
        (200, {"device_code": None}, "no valid device_code"),
        (200, {"device_code": "a b"}, "no valid device_code"),
        (200, {"user_code": ""}, "no valid user_code"),
        (200, {"user_code": "AB\nCD"}, "no valid user_code"),
        (200, {"user_code": "X" * 65}, "no valid user_code"),
        (200, {"verification_uri": None}, "no verification_uri"),
        (200, {"expires_in": None}, "no valid expires_in"),
        (200, {"expires_in": 0}, "expires_in is not a number from 1 to 315360000"),
        (200, {"expires_in": True}, "expires_in is not a number from 1 to 315360000"),
    ],
)
def test_device_answers_that_cannot_be_used(status, changes, text):
    doc = {k: v for k, v in {**DEVICE_ANSWER, **changes}.items() if v is not None}
    with pytest.raises(TokenProblem) as caught:
        grants.parse_device_authorization(status, doc)
    assert str(caught.value) == text if status != 200 else str(caught.value).endswith(text)
    assert "dc-secret-value" not in str(caught.value)


@pytest.mark.parametrize(
    ("member", "raw", "text"),
    [("expires_in", raw, "expires_in is not a number from 1 to 315360000") for raw in HOSTILE_NUMBERS]
    + [("expires_in", raw, "expires_in is not a number from 1 to 315360000") for raw in ("0.5", "315360001")]
    + [("interval", raw, "interval is not a number from 0 to 86400") for raw in HOSTILE_NUMBERS]
    + [("interval", "86401", "interval is not a number from 0 to 86400")],
)
def test_a_device_answer_with_a_number_out_of_its_range_is_refused_by_name(member, raw, text):
    doc = json.loads(json_with_raw(DEVICE_ANSWER, {member: raw}))
    with pytest.raises(TokenProblem) as caught:
        grants.parse_device_authorization(200, doc)
    assert str(caught.value) == f"HTTP status 200, {text}"
    assert "dc-secret-value" not in str(caught.value)


@pytest.mark.parametrize(("raw", "interval"), [("86400", grants.MAX_INTERVAL), ("1", 1), ("null", 5)])
def test_a_device_interval_in_range_is_cut_to_the_longest_wait(raw, interval):
    doc = json.loads(json_with_raw(DEVICE_ANSWER, {"interval": raw}))
    assert grants.parse_device_authorization(200, doc).interval == interval


@pytest.mark.parametrize("raw", HOSTILE_NUMBERS)
def test_a_poll_answer_with_tokens_whose_expires_in_is_out_of_range_is_refused(raw):
    doc = json.loads(json_with_raw(TOKENS, {"expires_in": raw}))
    text = r"^HTTP status 200, expires_in is not a number from 0 to 315360000$"
    with pytest.raises(TokenProblem, match=text):
        grants.poll_answer(200, doc, interval=5, now=0.0)


@pytest.mark.parametrize(
    "uri", ["http://auth.example.com/device", "https://auth.example.com/d\u00e9vice", "javascript:alert(1)"]
)
def test_a_verification_uri_that_is_not_a_safe_https_url_is_refused(uri):
    with pytest.raises(grants.InvalidVerificationUri):
        grants.parse_device_authorization(200, {**DEVICE_ANSWER, "verification_uri": uri})


def test_a_device_answer_that_is_not_an_object():
    with pytest.raises(TokenProblem, match="HTTP status 200"):
        grants.parse_device_authorization(200, ["device_code"])


# ------------------------------------------------------------------------------------ polling

AUTH = grants.parse_device_authorization(200, DEVICE_ANSWER)
TOKENS = {"access_token": "at-1", "token_type": "Bearer", "expires_in": 60, "refresh_token": "rt-1"}


def test_the_token_request_of_the_device_flow():
    assert grants.device_token_form(AUTH, resource="https://mcp.example.com/mcp") == {
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        "device_code": "dc-secret-value",
        "resource": "https://mcp.example.com/mcp",
    }


@pytest.mark.parametrize(
    ("status", "doc", "interval", "next_interval", "tokens"),
    [
        (400, {"error": "authorization_pending"}, 5, 5, False),
        (400, {"error": "slow_down"}, 5, 10, False),
        (400, {"error": "slow_down"}, 58, grants.MAX_INTERVAL, False),
        (200, TOKENS, 5, 5, True),
    ],
)
def test_poll_answers_that_go_on_or_end_with_tokens(status, doc, interval, next_interval, tokens):
    poll = grants.poll_answer(status, doc, interval=interval, now=1000.0)
    assert poll.interval == next_interval
    assert (poll.tokens is not None) == tokens
    if poll.tokens is not None:
        assert (poll.tokens.access_token, poll.tokens.expires_at, poll.tokens.refresh_token) == (
            "at-1",
            1060,
            "rt-1",
        )


@pytest.mark.parametrize(
    ("status", "doc", "raised"),
    [
        (400, {"error": "access_denied"}, grants.DeviceDenied),
        (400, {"error": "expired_token"}, grants.DeviceExpired),
        (400, {"error": "invalid_grant"}, TokenProblem),
        (401, {"error": "invalid_client"}, TokenProblem),
        (500, None, TokenProblem),
        (200, {"access_token": "at", "token_type": "mac"}, TokenProblem),
    ],
)
def test_poll_answers_that_end_the_sign_in(status, doc, raised):
    with pytest.raises(raised):
        grants.poll_answer(status, doc, interval=5, now=0.0)


# ---------------------------------------------------------------------------- client credentials


@pytest.mark.parametrize(
    ("methods", "chosen"),
    [
        (None, "client_secret_basic"),
        (["client_secret_basic", "client_secret_post"], "client_secret_basic"),
        (["client_secret_post"], "client_secret_post"),
        (["none", "client_secret_post"], "client_secret_post"),
        (["private_key_jwt"], "client_secret_basic"),
    ],
)
def test_client_credentials_authenticate_with_basic_unless_only_post_is_listed(methods, chosen):
    metadata = server(token_endpoint_auth_methods_supported=methods)
    registration = grants.client_credentials_registration("svc", "s3cret", metadata)
    assert registration.auth_method == chosen
    form = grants.client_credentials_form(resource="https://mcp.example.com/mcp", scopes=("mcp:read",))
    body, headers = tokens.client_authentication(registration, form)
    assert body["grant_type"] == "client_credentials" and body["scope"] == "mcp:read"
    assert body["resource"] == "https://mcp.example.com/mcp"
    if chosen == "client_secret_basic":
        assert "client_secret" not in body and headers["Authorization"].startswith("Basic ")
    else:
        assert body["client_secret"] == "s3cret" and headers == {}
    assert "s3cret" not in repr(registration)


def test_client_credentials_without_scopes_send_no_scope():
    assert "scope" not in grants.client_credentials_form(resource="r", scopes=())


def test_the_device_grant_joins_the_registration_only_for_the_device_flow():
    metadata = replace(server(), token_endpoint_auth_methods=("none",))
    plain = tokens.registration_body("http://127.0.0.1:1/callback", metadata)
    device = tokens.registration_body("http://127.0.0.1:1/callback", metadata, device=True)
    assert tokens.DEVICE_CODE_GRANT not in plain["grant_types"]
    assert device["grant_types"] == ["authorization_code", "refresh_token", tokens.DEVICE_CODE_GRANT]
