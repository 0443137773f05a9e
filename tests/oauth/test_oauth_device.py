"""The device and client-credentials sign-ins in process: the authorizer and the test authorization server.

Each test runs a real :class:`~mcpbridge.mcp.transports.http.HttpTransport` with the
:class:`~mcpbridge.oauth.authorizer.OAuthAuthorizer` against :class:`AuthServer`
(127.0.0.1 over TLS). The person is a thread that reads the user code from the
sign-in line or from the URL elicitation and enters it at the test-only approval
endpoint of the server. No browser is ever started.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcpbridge.bridge.rules import errortable
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.client import Client
from mcpbridge.mcp.errors import Cancelled
from mcpbridge.mcp.transports.http import HttpTransport
from mcpbridge.oauth import tokens
from mcpbridge.oauth.authorizer import OAuthAuthorizer, OAuthConfig
from mcpbridge.oauth.config import DynamicRegistration, PreRegistered, Registration, SignInFlow
from mcpbridge.oauth.device import DeviceFlow
from mcpbridge.oauth.errors import (
    ClientCredentialsRefused,
    DeviceSignInUnavailable,
    ReauthorizationRequired,
    SignInDenied,
    SignInError,
    SignInFailed,
    SignInTimeout,
    problem_text,
)
from mcpbridge.oauth.keychain import KeyringStore
from mcpbridge.oauth.session import SignInHook
from mcpbridge.oauth.signin import Gate, Opener, SignIn, SignInSettings
from mcpbridge.oauth.store import IndexedStore
from mcpbridge.oauth.tokenstore import MemoryStore, TokenStore
from tests.oauth_keyring import FileKeyring
from tests.oauth_peers import AuthServer, TestCA, approve, free_port, query_of

WAIT = 20.0
ISSUER_OF_TESTS = "https://as.example"
CLIENT_SECRET = "client-secret-0c4e19"
DEVICE_LINE = re.compile(r"mcp-bridge-vscode: sign in at (https://\S+) with the code ([A-Z-]+)\n")


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def auth(ca: TestCA) -> Iterator[AuthServer]:
    server = AuthServer(ca)
    server.switches.device = True
    yield server
    server.close()


class Person:
    """Enters the user code at the authorization server when the bridge shows it (unless told not to)."""

    def __init__(self, auth: AuthServer, ca: TestCA, *, enters: bool = True) -> None:
        self.auth = auth
        self.ca = ca
        self.enters = enters
        self.codes: list[str] = []
        #: Set when the bridge showed a code.
        self.shown = threading.Event()
        self.statuses: list[int] = []
        self.threads: list[threading.Thread] = []

    def saw(self, user_code: str) -> None:
        self.codes.append(user_code)
        self.shown.set()
        if self.enters:
            thread = threading.Thread(target=self._enter, args=(user_code,), name="test-person")
            thread.start()
            self.threads.append(thread)

    def _enter(self, user_code: str) -> None:
        self.statuses.append(approve(self.auth.origin, user_code, self.ca))

    def join(self) -> None:
        for thread in self.threads:
            thread.join(WAIT)
            assert not thread.is_alive(), f"the person did not finish entering a code in {WAIT} s"


class Consent:
    """The client after notifications/initialized: answers URL elicitations as told."""

    def __init__(self, person: Person, answer: str = "accept", url_elicitation: bool = True) -> None:
        self.person = person
        self.answer = answer
        self.url_elicitation_declared = url_elicitation
        self.asked: list[tuple[str, str, str]] = []
        self.completed: list[str] = []

    def url_elicitation(self) -> bool:
        return self.url_elicitation_declared

    def new_elicitation_id(self) -> str:
        return f"elicitation-{len(self.asked) + 1}"

    def ask(
        self, url: str, message: str, elicitation_id: str, *, timeout: float, cancel: CancelToken
    ) -> bool:
        self.asked.append((url, message, elicitation_id))
        if self.answer != "accept":
            return False
        self.person.saw(query_of(url)["user_code"])
        return True

    def complete(self, elicitation_id: str) -> None:
        self.completed.append(elicitation_id)


class Harness:
    """An authorizer with ``--sign-in`` and a client of the protected endpoint."""

    def __init__(
        self,
        auth: AuthServer,
        ca: TestCA,
        *,
        sign_in: SignInFlow = SignInFlow.DEVICE,
        remote: str | None = None,
        registration: Registration | None = None,
        store: TokenStore | None = None,
        port: int | None = None,
        timeout: float = WAIT,
        enters: bool = True,
        sandbox: bool = False,
    ) -> None:
        from mcpbridge.oauth.web import WebClient

        self.auth = auth
        self.port = port or free_port()
        self.lines: list[str] = []
        #: Set when the sign-in line is written: the polling starts.
        self.line_written = threading.Event()
        self.person = Person(auth, ca, enters=enters)
        self.gate = Gate()
        self.sign_in = SignIn(
            SignInSettings(port=self.port, timeout=timeout, sandbox=sandbox),
            self.gate,
            Opener({"BROWSER": "/nonexistent/browser"}, set()),
            write_line=self.lines.append,
        )
        self.store = store if store is not None else MemoryStore()
        self.config = OAuthConfig(
            auth.url,
            "default",
            self.port,
            registration or DynamicRegistration(),
            sign_in=sign_in,
            remote=remote,
        )
        self.web = WebClient(ca.client_context(), {})
        self.authorizer = OAuthAuthorizer(
            self.config,
            IndexedStore(self.store),
            self.web,
            self.sign_in,
            device=DeviceFlow(self.sign_in, write=self._write),
        )
        self.transport = HttpTransport(
            auth.url, ssl_context=ca.client_context(), authorizer=self.authorizer, env={}
        )
        self.client = Client(
            self.transport, client_info={"name": "test", "version": "1"}, hook=SignInHook(self.authorizer)
        )
        self.client.start()

    def _write(self, line: str) -> None:
        self.lines.append(line)
        self.line_written.set()
        match = DEVICE_LINE.fullmatch(line)
        assert match is not None, "the sign-in line of the device flow has another form"
        if not self.gate.initialized:
            self.person.saw(match.group(2))

    def discover(self, timeout: float = WAIT, cancel: CancelToken | None = None) -> dict[str, Any]:
        return self.client.discover(timeout=timeout, cancel=cancel)

    def call(self, name: str, timeout: float = WAIT, cancel: CancelToken | None = None) -> str:
        result = self.client.request(
            "tools/call", {"name": name, "arguments": {}}, timeout=timeout, cancel=cancel
        )
        return str(result["content"][0]["text"])

    def initialized(self, consent: Consent) -> None:
        self.gate.consent = consent
        self.gate.client_initialized()

    def close(self) -> None:
        self.person.join()
        self.client.close(1.0)
        self.web.close()


@pytest.fixture
def harness(auth: AuthServer, ca: TestCA) -> Iterator[Any]:
    made: list[Harness] = []

    def make(**options: Any) -> Harness:
        made.append(Harness(auth, ca, **options))
        return made[-1]

    yield make
    for h in made:
        h.close()


@pytest.fixture(autouse=True)
def every_log_is_scanned(caplog: pytest.LogCaptureFixture, auth: AuthServer) -> Iterator[None]:
    """Each test: no token, device code or secret in any log record of the bridge, at every level."""
    caplog.set_level(logging.DEBUG, logger="mcpbridge")
    yield
    text = caplog.text
    seen = auth.secrets_seen()
    for secret in seen + [CLIENT_SECRET]:
        assert secret not in text
    assert all(not s.startswith("dc-") or s not in text for s in seen)


def error_texts(exc: SignInError) -> str:
    obj = errortable.error_from_sign_in(exc)
    return f"{exc} {obj}"


# ------------------------------------------------------------------------------ the device flow


def test_a_device_sign_in_before_initialized_shows_the_line_and_polls_until_the_person_enters_the_code(
    harness, auth
):
    h = harness()
    assert h.discover()["supportedVersions"] == ["2026-07-28"]
    (line,) = h.lines
    match = DEVICE_LINE.fullmatch(line)
    assert match is not None and match.group(1) == auth.origin + "/device/verify"
    assert h.person.codes == [match.group(2)] and h.person.statuses == [200]
    # The registration asked for the device grant; the request carried the client, resource and scope.
    assert tokens.DEVICE_CODE_GRANT in auth.registrations[0]["grant_types"]
    (request,) = auth.device_requests
    assert request["client_id"] == auth.registrations[0].get("client_id", request["client_id"])
    assert request["client_id"].startswith("dyn-")
    assert request["resource"] == auth.url and request["scope"] == "mcp:read"
    polls = [r for r in auth.token_requests if r["grant_type"] == tokens.DEVICE_CODE_GRANT]
    assert polls and all(r["resource"] == auth.url and r["client_id"] == request["client_id"] for r in polls)
    assert auth.device_polls[-1][1] == "tokens"
    # No browser flow at all, and the device code is nowhere in the line.
    assert auth.authorizations == []
    device_code = polls[0]["device_code"]
    assert device_code not in line
    assert h.call("whoami") == "scopes: mcp:read"


def test_pending_answers_keep_the_interval(harness, auth):
    auth.switches.device_pending = 3
    h = harness()
    h.discover()
    answers = [answer for _, answer in auth.device_polls]
    assert answers[:3] == ["authorization_pending"] * 3 and answers[-1] == "tokens"
    times = [t for t, _ in auth.device_polls]
    # Interval 1 s: never two polls closer than the interval (a little slack for the clocks).
    assert all(b - a >= 0.9 for a, b in zip(times, times[1:], strict=False))


def test_slow_down_adds_five_seconds_to_the_interval(harness, auth):
    auth.switches.device_slow_down = 1
    h = harness()
    h.discover()
    answers = [answer for _, answer in auth.device_polls]
    assert answers[0] == "slow_down" and answers[-1] == "tokens"
    (first, _), (second, _) = auth.device_polls[:2]
    assert second - first >= 6 - 0.1  # 1 s + 5 s


def test_access_denied_is_sign_in_denied(harness, auth):
    auth.switches.device_deny = True
    h = harness()
    with pytest.raises(SignInDenied) as caught:
        h.discover()
    assert errortable.error_from_sign_in(caught.value)["data"] == {"cause": "sign_in_denied"}


def test_expired_token_is_sign_in_timeout(harness, auth):
    auth.switches.device_expired = True
    h = harness(timeout=30)
    with pytest.raises(SignInTimeout) as caught:
        h.discover()
    assert "--sign-in-timeout" in errortable.error_from_sign_in(caught.value)["message"]
    assert len(auth.device_polls) == 1


@pytest.mark.parametrize(
    ("member", "raw", "range_text"),
    [
        ("interval", "1e400", "0 to 86400"),
        ("interval", "9" * 400, "0 to 86400"),
        ("interval", "-1", "0 to 86400"),
        ("interval", "NaN", "0 to 86400"),
        ("expires_in", "1e400", "1 to 315360000"),
        ("expires_in", "-" + "9" * 400, "1 to 315360000"),
        ("expires_in", "true", "1 to 315360000"),
    ],
)
def test_a_device_answer_with_a_number_out_of_range_fails_the_sign_in_by_name_and_the_next_works(
    harness, auth, member, raw, range_text
):
    auth.switches.device_raw = {member: raw}
    h = harness()
    with pytest.raises(SignInFailed) as caught:
        h.discover()
    detail = f"device sign-in: HTTP status 200, {member} is not a number from {range_text}"
    data = errortable.error_from_sign_in(caught.value)["data"]
    assert data == {"cause": "sign_in_failed", "detail": detail}
    assert h.lines == [] and auth.device_polls == []
    auth.switches.device_raw = {}
    assert h.discover()["supportedVersions"] == ["2026-07-28"]
    assert h.call("whoami") == "scopes: mcp:read"


def test_a_poll_answer_whose_expires_in_is_out_of_range_fails_the_sign_in_by_name(harness, auth):
    auth.switches.token_raw = {"expires_in": "1e400"}
    h = harness()
    with pytest.raises(SignInFailed) as caught:
        h.discover()
    assert caught.value.detail == (
        "device sign-in: HTTP status 200, expires_in is not a number from 0 to 315360000"
    )
    assert auth.device_polls[-1][1] == "tokens"


def test_the_sign_in_time_limit_ends_the_polling(harness, auth):
    h = harness(timeout=3, enters=False)
    with pytest.raises(SignInTimeout) as caught:
        h.discover(timeout=30)
    assert caught.value.placeholders["seconds"] == 3
    assert 1 <= len(auth.device_polls) <= 3
    assert all(answer == "authorization_pending" for _, answer in auth.device_polls)


def test_a_cancel_stops_the_polling(harness, auth):
    h = harness(enters=False)
    cancel = CancelToken()
    threading.Thread(
        target=lambda: h.line_written.wait(WAIT) and cancel.cancel("stop"), name="test-cancel"
    ).start()
    with pytest.raises(Cancelled):
        h.discover(cancel=cancel)
    assert len(h.lines) == 1


@pytest.mark.parametrize(
    ("switch", "detail"),
    [
        ({"device": False}, "NoDeviceEndpoint"),
        ({"device_endpoint": "http://auth.example.invalid/device"}, "InsecureEndpoint"),
    ],
)
def test_device_without_a_usable_endpoint_fails_with_a_message_that_names_the_option(
    harness, auth, switch, detail
):
    for name, value in switch.items():
        setattr(auth.switches, name, value)
    h = harness()
    with pytest.raises(DeviceSignInUnavailable) as caught:
        h.discover()
    assert caught.value.detail == detail
    error = errortable.error_from_sign_in(caught.value)
    assert error["data"] == {"cause": "device_sign_in_unavailable", "detail": problem_text(detail)}
    assert "--sign-in browser" in error["message"]
    assert auth.device_requests == [] and h.lines == []
    assert all(not r.target.startswith("/device") for r in auth.server.received)


def test_auto_in_a_remote_session_without_a_usable_device_endpoint_takes_the_browser(harness, auth, caplog):
    auth.switches.device_endpoint = "http://auth.example.invalid/device"
    h = harness(sign_in=SignInFlow.AUTO, remote="SSH_CONNECTION is set", timeout=2)
    with pytest.raises(SignInTimeout):  # the browser program does not exist: nobody comes back
        h.discover()
    assert auth.device_requests == []
    assert "the sign-in uses the browser flow: a remote session (SSH_CONNECTION is set)" in caplog.text
    assert len(h.lines) == 1 and query_of(h.lines[0])["response_type"] == "code"


def test_auto_in_a_remote_session_takes_the_device_flow(harness, auth, caplog):
    h = harness(sign_in=SignInFlow.AUTO, remote="CODESPACES is set")
    h.discover()
    assert len(auth.device_requests) == 1 and auth.authorizations == []
    assert "the sign-in uses the device flow: a remote session (CODESPACES is set)" in caplog.text


def test_a_step_up_after_initialized_asks_the_client_with_a_url_elicitation(harness, auth):
    h = harness()
    h.discover()
    consent = Consent(h.person)
    h.initialized(consent)
    assert h.call("guarded") == "guarded: allowed"
    ((url, message, elicitation_id),) = consent.asked
    code = h.person.codes[-1]
    assert url == f"{auth.origin}/device/verify?user_code={code}"
    assert code in message and "dc-" not in message
    assert consent.completed == [elicitation_id]
    assert auth.device_requests[-1]["scope"] == "mcp:read mcp:write"
    assert len(h.lines) == 2  # the sign-in line is written as well


def test_without_a_complete_uri_the_client_opens_the_verification_uri_and_the_message_has_the_code(
    harness, auth
):
    auth.switches.device_no_complete = True
    h = harness()
    h.discover()
    person = h.person

    class Entering(Consent):
        def ask(self, url: str, message: str, elicitation_id: str, **kw: Any) -> bool:
            self.asked.append((url, message, elicitation_id))
            found = re.search(r"enter the code ([A-Z-]+)\.", message)
            assert found is not None
            person.saw(found.group(1))
            return True

    consent = Entering(person)
    h.initialized(consent)
    assert h.call("guarded") == "guarded: allowed"
    assert consent.asked[0][0] == auth.origin + "/device/verify"


def test_a_declined_elicitation_and_a_client_without_url_elicitation(harness, auth):
    h = harness()
    h.discover()
    h.initialized(Consent(h.person, answer="decline"))
    with pytest.raises(ReauthorizationRequired) as caught:
        h.call("guarded")
    assert caught.value.detail == "declined"
    with pytest.raises(ReauthorizationRequired) as caught:
        h.call("guarded")
    assert caught.value.detail == "cooldown"
    other = harness()
    other.discover()
    other.initialized(Consent(other.person, url_elicitation=False))
    with pytest.raises(ReauthorizationRequired) as caught:
        other.call("guarded")
    assert caught.value.detail == "no_consent"


def test_a_restart_reuses_the_stored_tokens_and_a_refresh_needs_no_person(harness, auth, tmp_path):
    keyring_file = tmp_path / "keyring.json"
    first = harness(store=KeyringStore(FileKeyring(keyring_file)))
    first.discover()
    second = harness(store=KeyringStore(FileKeyring(keyring_file)), port=first.port)
    assert not second.authorizer.interactive()
    assert second.call("whoami") == "scopes: mcp:read"
    assert len(auth.device_requests) == 1
    auth.expire_all()
    assert second.call("whoami") == "scopes: mcp:read"
    assert [r["grant_type"] for r in auth.token_requests].count("refresh_token") == 1
    assert len(auth.device_requests) == 1 and len(second.lines) == 0


def test_two_authorizers_on_one_port_run_one_device_flow(harness, auth, tmp_path):
    keyring_file = tmp_path / "keyring.json"
    first = harness(store=KeyringStore(FileKeyring(keyring_file)), enters=False)
    second = harness(store=KeyringStore(FileKeyring(keyring_file)), port=first.port)
    results: dict[str, Any] = {}

    def run(name: str, h: Harness) -> None:
        try:
            results[name] = h.discover()
        except Exception as exc:  # noqa: BLE001 - the test reads it below
            results[name] = exc

    one = threading.Thread(target=run, args=("first", first), name="test-first")
    one.start()
    assert first.person.shown.wait(WAIT)
    two = threading.Thread(target=run, args=("second", second), name="test-second")
    two.start()
    first.person.enters = True
    first.person.saw(first.person.codes[0])
    one.join(WAIT * 2)
    two.join(WAIT * 2)
    assert isinstance(results["first"], dict) and isinstance(results["second"], dict)
    assert len(auth.device_requests) == 1 and second.lines == []


# ------------------------------------------------------------------------- client credentials


def client_credentials(auth: AuthServer, secret: str = CLIENT_SECRET) -> PreRegistered:
    auth.add_client("svc-1", "http://127.0.0.1:1/callback", secret=CLIENT_SECRET)
    return PreRegistered("svc-1", auth.issuer, secret)


@pytest.mark.parametrize("methods", [["client_secret_basic"], ["client_secret_post"]])
def test_client_credentials_get_a_token_without_a_person(harness, auth, methods):
    auth.switches.auth_methods = methods
    h = harness(sign_in=SignInFlow.CLIENT_CREDENTIALS, registration=client_credentials(auth))
    assert h.call("whoami") == "scopes: mcp:read"
    (request,) = auth.token_requests
    assert request["grant_type"] == "client_credentials" and request["resource"] == auth.url
    assert request["scope"] == "mcp:read"
    header = auth.token_headers[0]
    if methods == ["client_secret_post"]:
        assert request["client_secret"] == CLIENT_SECRET and header is None
    else:
        assert "client_secret" not in request and header is not None and header.startswith("Basic ")
    assert h.lines == [] and auth.registrations == [] and auth.device_requests == []


def test_client_credentials_get_a_new_token_before_the_old_one_expires(harness, auth):
    auth.switches.token_lifetime = 30  # within the margin of 60 s: each request renews it first
    h = harness(sign_in=SignInFlow.CLIENT_CREDENTIALS, registration=client_credentials(auth))
    assert h.call("whoami") == "scopes: mcp:read"
    assert h.call("whoami") == "scopes: mcp:read"
    grants = [r["grant_type"] for r in auth.token_requests]
    assert grants.count("client_credentials") >= 2 and "refresh_token" not in grants
    assert h.lines == []


def test_a_wrong_client_secret_is_refused_with_a_message_that_names_the_options(harness, auth):
    registration = client_credentials(auth, "wrong-secret-71")
    h = harness(sign_in=SignInFlow.CLIENT_CREDENTIALS, registration=registration)
    with pytest.raises(ClientCredentialsRefused) as caught:
        h.discover()
    error = errortable.error_from_sign_in(caught.value)
    assert error["data"] == {
        "cause": "client_credentials_refused",
        "detail": "HTTP status 401, error invalid_client",
    }
    assert "--client-id" in error["message"] and "MCP_BRIDGE_CLIENT_SECRET" in error["message"]
    assert "wrong-secret-71" not in error_texts(caught.value)


def test_the_tokens_of_client_credentials_are_kept_apart_from_a_sign_in_of_the_same_client():
    client = PreRegistered("svc-1", ISSUER_OF_TESTS, None)
    person = OAuthConfig("https://mcp.example/mcp", "default", 41894, client)
    service = OAuthConfig(
        "https://mcp.example/mcp", "default", 41894, client, sign_in=SignInFlow.CLIENT_CREDENTIALS
    )
    assert person.identity == "mcp-bridge-vscode|default|http://127.0.0.1:41894/callback|client=svc-1"
    assert service.identity == person.identity + "|grant=client_credentials"
    device = OAuthConfig("https://mcp.example/mcp", "default", 41894, client, sign_in=SignInFlow.DEVICE)
    assert device.identity == person.identity  # a person's tokens, whichever way the person signed in


def test_the_sandbox_of_vscode_does_not_stop_a_device_sign_in(harness, auth):
    h = harness(sandbox=True)
    assert h.discover()["supportedVersions"] == ["2026-07-28"]
    assert len(auth.device_requests) == 1 and len(h.lines) == 1


def test_a_device_sign_in_runs_when_another_program_holds_the_redirect_port(harness, auth):
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        h = harness(port=other.getsockname()[1])
        assert h.discover()["supportedVersions"] == ["2026-07-28"]
    assert len(auth.device_requests) == 1


# --------------------------------------------------------------------- the resource indicator


@pytest.mark.parametrize("refusal", ["invalid_target", "described"])
@pytest.mark.parametrize("endpoint", ["device", "token"])
def test_a_device_sign_in_refused_for_its_resource_goes_on_without_it_once(harness, auth, refusal, endpoint):
    auth.switches.refuse_resource = refusal
    auth.switches.refuse_resource_at = (endpoint,)
    h = harness()
    assert h.discover()["supportedVersions"] == ["2026-07-28"]
    polls = [r for r in auth.token_requests if r["grant_type"] == tokens.DEVICE_CODE_GRANT]
    if endpoint == "device":
        assert [("resource" in r) for r in auth.device_requests] == [True, False]
        assert not any("resource" in r for r in polls)
    else:
        # The person's code stays valid: the polling goes on without resource.
        assert len(auth.device_requests) == 1 and "resource" in polls[0]
        assert not any("resource" in r for r in polls[1:])
    assert auth.resource_refusals == [(endpoint, True)] and len(h.person.codes) == 1
    auth.expire_all()
    assert h.call("whoami") == "scopes: mcp:read"
    refresh = auth.token_requests[-1]
    assert refresh["grant_type"] == "refresh_token" and "resource" not in refresh


@pytest.mark.parametrize("refusal", ["invalid_target", "described"])
def test_client_credentials_refused_for_their_resource_are_asked_once_more_without_it(harness, auth, refusal):
    auth.switches.refuse_resource = refusal
    h = harness(sign_in=SignInFlow.CLIENT_CREDENTIALS, registration=client_credentials(auth))
    assert h.call("whoami") == "scopes: mcp:read"
    auth.expire_all()
    assert h.call("whoami") == "scopes: mcp:read"
    requests = [("resource" in r) for r in auth.token_requests]
    assert requests[:2] == [True, False] and not any(requests[2:])
    assert auth.resource_refusals == [("token", True)]


def test_client_credentials_refused_also_without_resource_fail_after_one_more_request(harness, auth):
    auth.switches.refuse_resource = "invalid_target"
    auth.switches.refuse_resource_always = True
    h = harness(sign_in=SignInFlow.CLIENT_CREDENTIALS, registration=client_credentials(auth))
    with pytest.raises(SignInError) as caught:
        h.call("whoami")
    assert caught.value.cause == "client_credentials_refused"
    assert auth.resource_refusals == [("token", True), ("token", False)]
