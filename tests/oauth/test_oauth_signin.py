"""The sign-in in process: the authorizer, the HTTP transport and a test authorization server over TLS.

Each test runs a real :class:`~mcpbridge.mcp.transports.http.HttpTransport` with the
:class:`~mcpbridge.oauth.authorizer.OAuthAuthorizer` against :class:`AuthServer`
(127.0.0.1, certificates from trustme). The browser is a program in ``BROWSER``
that follows the start URL and every redirect, as a browser does.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import WAIT, bounded
from mcpbridge.bridge.rules import errortable
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.client import Client
from mcpbridge.mcp.errors import Cancelled, McpError
from mcpbridge.mcp.transports.http import HttpTransport
from mcpbridge.oauth import flow
from mcpbridge.oauth.attempt import start_attempt
from mcpbridge.oauth.authorizer import OAuthAuthorizer, OAuthConfig
from mcpbridge.oauth.config import ClientMetadataDocument, DynamicRegistration, PreRegistered, Registration
from mcpbridge.oauth.errors import (
    AccessRefused,
    IssuerNotRegistered,
    ReauthorizationRequired,
    RedirectPortUnavailable,
    RegistrationUnavailable,
    Sandbox,
    SignInAuthorizationError,
    SignInDenied,
    SignInError,
    SignInFailed,
    SignInInvalidUrl,
    SignInTimeout,
)
from mcpbridge.oauth.filestore import EncryptedFileStore
from mcpbridge.oauth.keychain import KeyringStore
from mcpbridge.oauth.session import SignInHook
from mcpbridge.oauth.signin import ConsentEnd, ConsentEnded, Gate, Opener, SignIn, SignInSettings
from mcpbridge.oauth.store import IndexedStore
from mcpbridge.oauth.tokenstore import MemoryStore, TokenStore
from tests.oauth_keyring import FileKeyring
from tests.oauth_peers import (
    AuthServer,
    TestCA,
    browser_calls,
    browser_script,
    free_port,
    query_of,
    visit,
)

CLIENT_SECRET = "client-secret-5d2f7e"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def auth(ca: TestCA) -> Iterator[AuthServer]:
    server = AuthServer(ca)
    yield server
    server.close()


class FakeConsent:
    """The client after notifications/initialized: answers URL elicitations as told."""

    def __init__(self, ca: TestCA, answer: str = "accept", url_elicitation: bool = True) -> None:
        self.ca = ca
        self.answer = answer
        self.url_elicitation_declared = url_elicitation
        self.asked: list[tuple[str, str]] = []
        self.completed: list[str] = []
        self.asking = threading.Event()
        self._n = 0

    def url_elicitation(self) -> bool:
        return self.url_elicitation_declared

    def new_elicitation_id(self) -> str:
        self._n += 1
        return f"elicitation-{self._n}"

    def ask(
        self, url: str, message: str, elicitation_id: str, *, timeout: float, cancel: CancelToken
    ) -> bool:
        self.asked.append((url, elicitation_id))
        self.asking.set()
        if self.answer == "wait":
            if cancel.wait(timeout):
                raise ConsentEnded(ConsentEnd.CANCELED)
            raise ConsentEnded(ConsentEnd.TIMEOUT)
        if self.answer == "accept":
            threading.Thread(target=visit, args=(url, self.ca), name="test-consent-browser").start()
            return True
        return False

    def complete(self, elicitation_id: str) -> None:
        self.completed.append(elicitation_id)


class Harness:
    """An authorizer and a client of the protected endpoint, as the URL form makes them."""

    def __init__(
        self,
        auth: AuthServer,
        ca: TestCA,
        tmp_path: Path,
        *,
        registration: Registration | None = None,
        store: TokenStore | None = None,
        port: int | None = None,
        timeout: float = WAIT,
        no_browser: bool = False,
        sandbox: bool = False,
        browser_mode: str = "",
        account: str = "default",
        resource_indicator: str = "auto",
    ) -> None:
        self.auth = auth
        self.ca = ca
        self.port = port or free_port()
        self.browser_log = tmp_path / f"browser-{self.port}.log"
        self.env = {
            "BROWSER": str(browser_script(tmp_path)),
            "TEST_BROWSER_LOG": str(self.browser_log),
            "TEST_BROWSER_CA": str(ca.ca_file),
            "TEST_BROWSER_MODE": browser_mode,
            "MCP_BRIDGE_TOKEN_KEY": "ab" * 32,
            "MCP_BRIDGE_CLIENT_SECRET": CLIENT_SECRET,
            "TEST_SECRET_HEADER": "x",
        }
        self.lines: list[str] = []
        self.gate = Gate()
        self.sign_in = SignIn(
            SignInSettings(port=self.port, timeout=timeout, no_browser=no_browser, sandbox=sandbox),
            self.gate,
            Opener(self.env, {"MCP_BRIDGE_TOKEN_KEY", "MCP_BRIDGE_CLIENT_SECRET", "TEST_SECRET_HEADER"}),
            write_line=self.lines.append,
        )
        from mcpbridge.oauth.web import WebClient

        self.store = store if store is not None else MemoryStore()
        self.config = OAuthConfig(
            auth.url,
            account,
            self.port,
            registration or DynamicRegistration(),
            resource_indicator=resource_indicator,
        )
        self.web = WebClient(ca.client_context(), {})
        self.authorizer = OAuthAuthorizer(self.config, IndexedStore(self.store), self.web, self.sign_in)
        self.transport = HttpTransport(
            auth.url, ssl_context=ca.client_context(), authorizer=self.authorizer, env={}
        )
        self.client = Client(
            self.transport, client_info={"name": "test", "version": "1"}, hook=SignInHook(self.authorizer)
        )
        self.client.start()

    def discover(self, timeout: float = WAIT, cancel: CancelToken | None = None) -> dict[str, Any]:
        return self.client.discover(timeout=timeout, cancel=cancel)

    def call(self, name: str, timeout: float = WAIT, cancel: CancelToken | None = None) -> str:
        result = self.client.request(
            "tools/call", {"name": name, "arguments": {}}, timeout=timeout, cancel=cancel
        )
        return str(result["content"][0]["text"])

    @property
    def browser(self) -> list[dict[str, Any]]:
        return browser_calls(self.browser_log)

    def close(self) -> None:
        self.client.close(1.0)
        self.web.close()


@pytest.fixture
def harness(auth: AuthServer, ca: TestCA, tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def make(**options: Any) -> Harness:
        made.append(Harness(auth, ca, tmp_path, **options))
        return made[-1]

    yield make
    for h in made:
        h.close()


def assert_no_secret(text: str, auth: AuthServer) -> None:
    for secret in auth.secrets_seen() + [CLIENT_SECRET]:
        assert secret not in text


@pytest.fixture(autouse=True)
def every_log_is_scanned(caplog: pytest.LogCaptureFixture, auth: AuthServer) -> Iterator[None]:
    """Each test: no token, code or secret in any log record of the bridge, at every level."""
    caplog.set_level(logging.DEBUG, logger="mcpbridge")
    yield
    assert_no_secret(caplog.text, auth)


# ----------------------------------------------------------------------------- the flow


def test_the_first_request_signs_in_with_dynamic_registration_and_the_browser(harness, auth, caplog):
    h = harness()
    with caplog.at_level(logging.DEBUG, logger="mcpbridge"):
        result = h.discover()
    assert result["supportedVersions"] == ["2026-07-28"]
    assert len(auth.registrations) == 1
    registration = auth.registrations[0]
    assert registration["client_name"] == "mcp-bridge-vscode (mcpbridge)"
    assert registration["redirect_uris"] == [f"http://127.0.0.1:{h.port}/callback"]
    assert registration["application_type"] == "native"
    # One sign-in line with the authorization URL; the browser got only the one-time start URL.
    assert len(h.lines) == 1
    line_query = query_of(h.lines[0])
    assert line_query["resource"] == auth.url and line_query["code_challenge_method"] == "S256"
    assert line_query["redirect_uri"] == f"http://127.0.0.1:{h.port}/callback"
    assert len(h.browser) == 1
    argv = h.browser[0]["argv"]
    assert len(argv) == 1 and re.fullmatch(
        rf"http://127\.0\.0\.1:{h.port}/start/[A-Za-z0-9_-]{{43}}", argv[0]
    )
    assert h.browser[0]["secrets"] == []
    # The token request carried the verifier and the resource.
    (token_request,) = auth.token_requests
    assert token_request["grant_type"] == "authorization_code" and token_request["resource"] == auth.url
    assert flow.code_challenge(token_request["code_verifier"]) == line_query["code_challenge"]
    assert h.call("whoami") == "scopes: mcp:read"
    assert_no_secret(caplog.text, auth)
    # Metadata, registration and token requests ask for no compression, and never carry a cookie.
    oauth_requests = [r for r in auth.server.received if not r.target.startswith("/mcp")]
    assert oauth_requests and all(r.header("Accept-Encoding") == "identity" for r in oauth_requests)
    assert all(r.header("Cookie") is None for r in auth.server.received)


def test_the_sign_in_is_stored_under_the_identity_of_the_account_and_a_new_process_reuses_it(
    harness, auth, tmp_path
):
    keyring_file = tmp_path / "keyring.json"
    first = harness(store=KeyringStore(FileKeyring(keyring_file)))
    first.discover()
    entries = IndexedStore(first.store).entries()
    assert [(e.url, e.client) for e in entries] == [
        (auth.url, f"mcp-bridge-vscode|default|http://127.0.0.1:{first.port}/callback")
    ]
    second = harness(store=KeyringStore(FileKeyring(keyring_file)), port=first.port)
    assert not second.authorizer.interactive()
    assert second.call("whoami") == "scopes: mcp:read"
    assert len(auth.authorizations) == 1 and len(second.browser) == 1
    other_account = harness(store=KeyringStore(FileKeyring(keyring_file)), port=first.port, account="work")
    assert other_account.authorizer.interactive()


def test_another_redirect_port_registers_another_client_instead_of_reusing_one_with_another_uri(
    harness, auth, tmp_path
):
    keyring_file = tmp_path / "keyring.json"
    harness(store=KeyringStore(FileKeyring(keyring_file))).discover()
    other = harness(store=KeyringStore(FileKeyring(keyring_file)))
    assert other.authorizer.interactive()
    other.discover()
    assert len(auth.registrations) == 2
    assert auth.registrations[1]["redirect_uris"] == [f"http://127.0.0.1:{other.port}/callback"]
    assert len(IndexedStore(other.store).entries()) == 2


def test_two_requests_refused_at_the_same_moment_start_one_sign_in(harness, auth):
    h = harness()
    h.discover()
    auth.revoke_all()
    auth.switches.refresh_error = "invalid_grant"
    results: list[Any] = []
    start = threading.Barrier(3)

    def call() -> None:
        start.wait(WAIT)
        try:
            results.append(h.call("whoami"))
        except McpError as exc:
            results.append(exc)

    threads = [threading.Thread(target=call, name="test-call") for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
    assert results == ["scopes: mcp:read"] * 3
    assert len(auth.authorizations) == 2 and len(h.browser) == 2


def test_a_token_that_expires_within_sixty_seconds_is_refreshed_before_the_request(harness, auth):
    auth.switches.token_lifetime = 30
    h = harness()
    h.discover()
    assert h.call("whoami") == "scopes: mcp:read"
    grants = [r["grant_type"] for r in auth.token_requests]
    assert grants[0] == "authorization_code" and "refresh_token" in grants
    assert len(auth.authorizations) == 1


def test_a_401_refreshes_the_token_without_a_new_sign_in(harness, auth):
    h = harness()
    h.discover()
    auth.revoke_all()
    assert h.call("whoami") == "scopes: mcp:read"
    assert [r["grant_type"] for r in auth.token_requests] == ["authorization_code", "refresh_token"]
    refresh = auth.token_requests[1]
    assert refresh["resource"] == auth.url
    assert len(auth.authorizations) == 1


def test_a_refresh_refused_with_invalid_grant_drops_the_tokens_and_signs_in_once(harness, auth):
    h = harness()
    h.discover()
    auth.revoke_all()
    auth.switches.refresh_error = "invalid_grant"
    assert h.call("whoami") == "scopes: mcp:read"
    assert len(auth.authorizations) == 2 and len(h.browser) == 2
    assert len(auth.registrations) == 1  # the client stays


def test_a_refresh_refused_with_invalid_client_registers_again(harness, auth):
    h = harness()
    h.discover()
    auth.revoke_all()
    auth.forget_clients()
    auth.switches.refresh_error = "invalid_client"
    assert h.call("whoami") == "scopes: mcp:read"
    assert len(auth.registrations) == 2 and len(auth.authorizations) == 2


@pytest.mark.parametrize("raw", ["1e400", "-1e400", "9" * 400, "NaN", "-1", "true", '"soon"'])
def test_a_token_answer_whose_expires_in_is_out_of_range_fails_the_sign_in_by_name_and_the_next_works(
    harness, auth, raw
):
    auth.switches.token_raw = {"expires_in": raw}
    h = harness()
    with pytest.raises(SignInFailed) as caught:
        h.discover()
    detail = "token request: HTTP status 200, expires_in is not a number from 0 to 315360000"
    data = errortable.error_from_sign_in(caught.value)["data"]
    assert data == {"cause": "sign_in_failed", "detail": detail}
    assert raw not in str(caught.value)
    auth.switches.token_raw = {}
    assert h.call("whoami") == "scopes: mcp:read"
    assert len(auth.authorizations) == 2


def test_a_refresh_answer_whose_expires_in_is_out_of_range_fails_the_request_by_name(harness, auth):
    h = harness()
    h.discover()
    auth.revoke_all()
    auth.switches.token_raw = {"expires_in": "1e400"}
    with pytest.raises(SignInFailed) as caught:
        h.call("whoami")
    assert caught.value.detail == "refresh: HTTP status 200, expires_in is not a number from 0 to 315360000"
    auth.switches.token_raw = {}
    # The server spent the refresh token on the refused answer: the next request signs in again.
    assert h.call("whoami") == "scopes: mcp:read"
    assert [r["grant_type"] for r in auth.token_requests] == [
        "authorization_code",
        "refresh_token",
        "refresh_token",
        "authorization_code",
    ]


def test_an_upstream_that_refuses_every_token_never_starts_a_sign_in_loop(harness, auth):
    h = harness()
    h.discover()
    auth.switches.refuse_all = True
    for _ in range(3):
        with pytest.raises(AccessRefused) as caught:
            h.call("whoami")
        assert caught.value.detail == "HTTP status 401"
    # Each request gets at most one refresh and never a new browser.
    assert len(auth.authorizations) == 1 and len(h.browser) == 1
    assert len(auth.mcp_calls) <= 2 + 2 * 3


def test_insufficient_scope_steps_up_once_with_the_union_of_the_scopes(harness, auth):
    h = harness()
    h.discover()
    assert h.call("guarded") == "guarded: allowed"
    assert len(auth.authorizations) == 2
    assert auth.authorizations[1]["scope"] == "mcp:read mcp:write"
    assert h.call("guarded") == "guarded: allowed"
    assert len(auth.authorizations) == 2


def test_a_step_up_that_gets_no_new_scope_fails_with_access_refused_after_one_attempt(harness, auth):
    auth.switches.grant_only = {"mcp:read"}
    h = harness()
    h.discover()
    with pytest.raises(AccessRefused) as caught:
        h.call("guarded")
    assert caught.value.detail == "HTTP status 403"
    assert len(auth.authorizations) == 2
    error = errortable.error_from_sign_in(caught.value)
    assert error["data"] == {"cause": "access_refused", "detail": "HTTP status 403"}


# ----------------------------------------------------------------------------- clients


def test_a_client_id_metadata_document_needs_no_registration(harness, auth):
    auth.switches.cimd = True
    url = "https://clients.example/vscode/client.json"
    h = harness(registration=ClientMetadataDocument(url, explicit=True))
    h.discover()
    assert auth.registrations == []
    assert auth.authorizations[0]["client_id"] == url
    assert h.config.identity.endswith("|cimd=" + url)


def test_the_default_document_falls_back_to_dynamic_registration_without_cimd_support(harness, auth):
    h = harness(
        registration=ClientMetadataDocument("https://clients.example/vscode/client.json", explicit=False)
    )
    h.discover()
    assert len(auth.registrations) == 1
    assert h.config.identity == f"mcp-bridge-vscode|default|http://127.0.0.1:{h.port}/callback"


def test_no_registration_at_all_names_the_options_and_the_redirect_uri_and_opens_nothing(harness, auth):
    auth.switches.registration = False
    h = harness()
    with pytest.raises(RegistrationUnavailable) as caught:
        h.discover()
    message = errortable.error_from_sign_in(caught.value)["message"]
    assert f"the redirect URI http://127.0.0.1:{h.port}/callback " in message
    assert "--client-id" in message and "--client-issuer" in message
    assert h.browser == [] and h.lines == []


def test_a_confidential_pre_registered_client_sends_its_secret_only_to_its_issuer_and_never_stores_it(
    harness, auth, tmp_path
):
    port = free_port()
    auth.add_client("pre-1", f"http://127.0.0.1:{port}/callback", secret=CLIENT_SECRET)
    store = EncryptedFileStore.open(tmp_path / "tokens", bytes(32))
    h = harness(registration=PreRegistered("pre-1", auth.issuer, CLIENT_SECRET), store=store, port=port)
    h.discover()
    assert auth.registrations == []
    assert auth.token_headers[0] is not None and auth.token_headers[0].startswith("Basic ")
    assert "client_secret" not in auth.token_requests[0]
    (entry,) = IndexedStore(store).entries()
    assert entry.client.endswith("|client=pre-1")
    data = store.get(entry.key)
    assert data is not None and CLIENT_SECRET.encode() not in data
    auth.revoke_all()
    assert h.call("whoami") == "scopes: mcp:read"  # the refresh authenticates with the secret again
    assert auth.token_headers[1] is not None and auth.token_headers[1].startswith("Basic ")


def test_a_pre_registered_client_of_another_issuer_is_refused(harness, auth):
    h = harness(registration=PreRegistered("pre-1", "https://other-issuer.example", None))
    with pytest.raises(IssuerNotRegistered):
        h.discover()
    assert h.browser == []


# ------------------------------------------------------------------- misbehaving servers


@pytest.mark.parametrize(
    ("switch", "detail"),
    [("wrong_issuer", "IssuerMismatch"), ("no_s256", "NoS256")],
)
def test_authorization_server_metadata_that_fails_a_check_stops_before_the_browser(
    harness, auth, switch, detail
):
    setattr(auth.switches, switch, True)
    h = harness()
    with pytest.raises(SignInFailed) as caught:
        h.discover()
    assert caught.value.detail == detail
    assert h.browser == [] and h.lines == [] and auth.authorizations == []


def test_metadata_whose_resource_does_not_cover_the_url_is_refused(harness, auth):
    auth.switches.prm_resource = auth.origin + "/other"
    h = harness()
    with pytest.raises(SignInFailed) as caught:
        h.discover()
    assert caught.value.detail == "ResourceMismatch"


def test_a_redirect_with_another_state_is_ignored_and_the_sign_in_times_out(harness, auth):
    auth.switches.bad_state = True
    h = harness(timeout=1)
    with pytest.raises(SignInTimeout) as caught:
        h.discover()
    message = errortable.error_from_sign_in(caught.value)["message"]
    assert message.startswith("The sign-in did not complete in 1 s.")
    assert "--sign-in-timeout" in message and 'run "mcp-bridge-vscode logout <url>"' in message
    assert auth.token_requests == []


@pytest.mark.parametrize(
    ("switches", "detail"), [({"wrong_iss": True}, "IssuerMismatch"), ({"send_iss": False}, "MissingIssuer")]
)
def test_the_iss_of_the_redirect_must_be_the_issuer(harness, auth, switches, detail):
    for name, value in switches.items():
        setattr(auth.switches, name, value)
    h = harness()
    with pytest.raises(SignInFailed) as caught:
        h.discover()
    assert caught.value.detail == detail
    assert auth.token_requests == []


def test_a_denied_access_and_another_error_of_the_authorization_server(harness, auth):
    auth.switches.deny = True
    with pytest.raises(SignInDenied):
        harness().discover()
    auth.switches.deny = False
    auth.switches.authorize_error = "temporarily_unavailable"
    with pytest.raises(SignInAuthorizationError) as caught:
        harness().discover()
    assert caught.value.detail == "error temporarily_unavailable"


def test_discover_waits_for_the_discover_and_the_sign_in_limits_together(harness, auth):
    auth.switches.slow_authorize = 1.5
    h = harness(timeout=5)
    assert h.authorizer.interactive()
    assert h.discover(timeout=1)["supportedVersions"] == ["2026-07-28"]
    assert not h.authorizer.interactive()


def test_a_sign_in_that_outlasts_a_shorter_discover_limit_reports_the_sign_in_time_limit(harness, auth):
    auth.switches.bad_state = True
    h = harness(timeout=2)
    with pytest.raises(SignInTimeout) as caught:
        h.discover(timeout=1)
    message = errortable.error_from_sign_in(caught.value)["message"]
    assert message.startswith("The sign-in did not complete in 2 s.")


def test_twenty_sign_ins_in_a_row_on_the_same_port(harness, auth):
    port = free_port()
    for n in range(20):
        h = harness(port=port)
        assert h.call("whoami") == "scopes: mcp:read", n
    assert len(auth.authorizations) == 20


def test_a_slow_authorization_server_ends_in_the_sign_in_time_limit(harness, auth):
    auth.switches.slow_authorize = 3.0
    h = harness(timeout=1)
    with pytest.raises(SignInTimeout):
        h.discover()


@pytest.mark.parametrize(
    ("endpoint", "what"),
    [
        ("prm", "resource metadata"),
        ("server", "authorization server metadata"),
        ("register", "registration"),
        ("token", "token request"),
    ],
)
def test_a_sign_in_answer_that_dribbles_ends_in_the_sign_in_time_limit_and_the_next_works(
    harness, auth, endpoint, what
):
    auth.switches.dribble = {endpoint: "body"}
    h = harness(timeout=2)
    with pytest.raises(SignInTimeout) as caught:
        # A hang detector, not a measure: each request of the sign-in has 2 s.
        bounded(lambda: h.discover(timeout=WAIT), "the sign-in", timeout=3 * 2.0 + 2.0)
    error = errortable.error_from_sign_in(caught.value)
    assert error["data"] == {"cause": "sign_in_timeout", "detail": f"{what}: no complete answer in 2 s"}
    assert error["message"].startswith("The sign-in did not complete in 2 s.")
    assert auth.origin not in str(error)
    # The bridge closed the connection: the server stopped long before the end of the answer.
    (sent,) = auth.wait_dribbles(1, WAIT)
    assert sent < 10
    auth.switches.dribble = {}
    assert h.call("whoami") == "scopes: mcp:read"


def test_a_dribbled_answer_of_the_head_ends_in_the_deadline_of_the_request(harness, auth):
    auth.switches.dribble = {"prm": "head"}
    h = harness(timeout=WAIT)
    with pytest.raises(SignInTimeout) as caught:
        bounded(lambda: h.call("whoami", timeout=2.0), "the request", timeout=3 * 2.0)
    assert caught.value.detail == "resource metadata: no complete answer in 2 s"
    assert auth.wait_dribbles(1, WAIT)[0] < 10


def test_a_cancel_stops_a_token_request_whose_answer_dribbles(harness, auth):
    auth.switches.dribble = {"token": "body"}
    h = harness()
    cancel = CancelToken()
    threading.Thread(
        target=lambda: auth.dribble_started.wait(WAIT) and cancel.cancel("the user canceled"),
        name="test-cancel",
    ).start()
    with pytest.raises(Cancelled):
        bounded(lambda: h.discover(cancel=cancel), "the sign-in")
    assert auth.token_requests and auth.wait_dribbles(1, WAIT)[0] < 10
    auth.switches.dribble = {}
    assert h.call("whoami") == "scopes: mcp:read"


def test_a_browser_that_does_not_open_is_reported_and_the_sign_in_still_waits(harness, auth, caplog):
    h = harness(timeout=1, browser_mode="fail")
    with caplog.at_level(logging.INFO, logger="mcpbridge"), pytest.raises(SignInTimeout):
        h.discover()
    assert "the browser did not open: open the URL of the sign-in line in a browser" in caplog.text
    assert "The browser did not open. Open the URL of the sign-in line in a browser." in caplog.text


def test_no_browser_only_writes_the_line_and_the_user_can_sign_in_with_it(harness, auth, ca):
    h = harness(no_browser=True)
    done = threading.Event()
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(h.discover())
        except BaseException as exc:  # noqa: BLE001
            results.append(exc)
        done.set()

    worker = threading.Thread(target=run, name="test-discover")
    worker.start()
    deadline_lines = threading.Event()
    for _ in range(100):
        if h.lines:
            break
        deadline_lines.wait(0.05)
    assert h.lines, "no sign-in line"
    assert visit(h.lines[0], ca) == 200
    assert done.wait(WAIT)
    worker.join(WAIT)
    assert isinstance(results[0], dict) and h.browser == []


# ------------------------------------------------------------------------- the gate


def test_after_initialized_the_bridge_asks_the_client_and_completes_the_elicitation(harness, auth, ca):
    h = harness()
    h.discover()
    consent = FakeConsent(ca)
    h.gate.consent = consent
    h.gate.client_initialized()
    assert h.call("guarded") == "guarded: allowed"
    assert len(consent.asked) == 1 and consent.asked[0][0] == h.lines[-1]
    assert consent.completed == [consent.asked[0][1]]
    assert len(h.browser) == 1  # only the first sign-in opened a browser


def test_a_declined_consent_starts_a_cooldown(harness, auth, ca):
    h = harness()
    h.discover()
    consent = FakeConsent(ca, answer="decline")
    h.gate.consent = consent
    h.gate.client_initialized()
    with pytest.raises(ReauthorizationRequired) as caught:
        h.call("guarded")
    assert caught.value.detail == "declined"
    with pytest.raises(ReauthorizationRequired) as caught:
        h.call("guarded")
    assert caught.value.detail == "cooldown"
    assert len(consent.asked) == 1 and h.call("whoami") == "scopes: mcp:read"


def test_a_client_without_url_elicitation_gets_no_consent_and_nothing_opens(harness, auth, ca, caplog):
    h = harness()
    h.discover()
    h.gate.consent = FakeConsent(ca, url_elicitation=False)
    with caplog.at_level(logging.INFO, logger="mcpbridge"):
        h.gate.client_initialized()
        assert "URL elicitation" not in caplog.text  # said when a sign-in needs it, not before
        lines = len(h.lines)
        with pytest.raises(ReauthorizationRequired) as caught:
            h.call("guarded")
    assert "the client did not declare URL elicitation" in caplog.text
    assert caught.value.detail == "no_consent"
    assert len(h.lines) == lines and len(h.browser) == 1
    assert "restart" in errortable.error_from_sign_in(caught.value)["message"].lower()


def test_canceling_the_call_cancels_the_elicitation_without_a_cooldown(harness, auth, ca):
    h = harness()
    h.discover()
    consent = FakeConsent(ca, answer="wait")
    h.gate.consent = consent
    h.gate.client_initialized()
    cancel = CancelToken()

    def cancel_when_asked() -> None:
        if consent.asking.wait(WAIT):
            cancel.cancel("the client canceled the request")

    canceler = threading.Thread(target=cancel_when_asked, name="test-cancel")
    canceler.start()
    with pytest.raises(Cancelled):
        h.call("guarded", cancel=cancel)
    canceler.join(WAIT)
    assert not h.gate.in_cooldown()
    consent.answer = "accept"
    assert h.call("guarded") == "guarded: allowed"


def test_the_sandbox_fails_every_sign_in_at_once(harness, auth):
    h = harness(sandbox=True)
    with pytest.raises(Sandbox) as caught:
        h.discover()
    assert "sandbox" in errortable.error_from_sign_in(caught.value)["message"]
    assert h.lines == [] and h.browser == [] and auth.authorizations == []


def test_an_authorization_url_that_fails_the_checks_is_never_written_elicited_or_opened(tmp_path, ca):
    lines: list[str] = []
    port = free_port()
    consent = FakeConsent(ca)
    log = tmp_path / "browser.log"
    env = {
        "BROWSER": str(browser_script(tmp_path)),
        "TEST_BROWSER_LOG": str(log),
        "TEST_BROWSER_CA": str(ca.ca_file),
    }
    gate = Gate()
    sign_in = SignIn(SignInSettings(port=port, timeout=1), gate, Opener(env, ()), write_line=lines.append)
    redirect = f"redirect_uri=http%3A%2F%2F127.0.0.1%3A{port}%2Fcallback"
    bad = [
        "https://as.example.com/authorize?state=s&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcallback",
        f"https://as.example.com/a b?state=s&{redirect}",
        f"http://as.example.com/authorize?state=s&{redirect}",
        f"https://as.example.com/authorize?{redirect}",
        f"https://as.example.com/authorize?state=s&{redirect}#x",
    ]
    for initialized in (False, True):
        if initialized:
            gate.consent = consent
            gate.client_initialized()
        for url in bad:
            with start_attempt(sign_in, state="s", probe=None, cancel=None, deadline=None) as attempt:
                with pytest.raises(SignInInvalidUrl):
                    attempt.wait(url)
    assert lines == [] and consent.asked == [] and browser_calls(log) == []


def test_a_busy_redirect_port_names_the_port_and_the_option(harness, auth):
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        port = squatter.getsockname()[1]
        h = harness(port=port)
        with pytest.raises(RedirectPortUnavailable) as caught:
            h.discover()
    error = errortable.error_from_sign_in(caught.value)
    assert error["data"] == {"cause": "redirect_port_unavailable", "detail": "address_in_use"}
    assert f"port {port}." in error["message"] and "--redirect-port" in error["message"]


# -------------------------------------------------------------------- two processes


def test_two_bridges_of_the_same_account_at_once_sign_in_once(harness, auth, tmp_path):
    keyring_file = tmp_path / "shared-keyring.json"
    port = free_port()
    first = harness(store=KeyringStore(FileKeyring(keyring_file)), port=port)
    second = harness(store=KeyringStore(FileKeyring(keyring_file)), port=port)
    results: dict[str, Any] = {}

    def run(name: str, h: Harness) -> None:
        try:
            results[name] = h.call("whoami", timeout=30)
        except McpError as exc:
            results[name] = exc

    threads = [
        threading.Thread(target=run, args=(n, h), name=f"test-{n}") for n, h in (("a", first), ("b", second))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {"a": "scopes: mcp:read", "b": "scopes: mcp:read"}
    assert len(auth.authorizations) == 1
    assert len(first.browser) == 1  # both share the log of the port: one browser tab in all
    assert len(auth.registrations) == 1


def test_every_log_line_of_a_full_sign_in_is_free_of_tokens_codes_and_secrets(harness, auth, caplog):
    port = free_port()
    auth.add_client("pre-2", f"http://127.0.0.1:{port}/callback", secret=CLIENT_SECRET)
    h = harness(registration=PreRegistered("pre-2", auth.issuer, CLIENT_SECRET), port=port)
    with caplog.at_level(logging.DEBUG):
        h.discover()
        h.call("guarded")
        auth.revoke_all()
        h.call("whoami")
    text = caplog.text
    assert_no_secret(text, auth)
    assert "?" not in "".join(r.getMessage() for r in caplog.records if "http" in r.getMessage())


def test_errors_of_the_sign_in_name_no_url_and_no_secret(harness, auth):
    auth.switches.deny = True
    h = harness()
    with pytest.raises(SignInError) as caught:
        h.discover()
    text = repr(errortable.error_from_sign_in(caught.value))
    assert auth.url not in text and "127.0.0.1" not in text
    assert_no_secret(text, auth)


# ------------------------------------------------------------------ the resource indicator

REFUSALS = ["invalid_target", "described"]


def resource_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused the resource indicator" in r.getMessage()]


@pytest.mark.parametrize("refusal", REFUSALS)
def test_an_authorization_endpoint_that_refuses_resource_sends_the_same_browser_on_without_it(
    harness, auth, refusal, caplog
):
    auth.switches.refuse_resource = refusal
    auth.switches.refuse_resource_at = ("authorize",)
    h = harness()
    assert h.discover()["supportedVersions"] == ["2026-07-28"]
    # One sign-in line and one browser: the receiver sent the browser on to the second request.
    assert len(h.lines) == 1 and len(h.browser) == 1
    assert [("resource" in q) for q in auth.authorizations] == [True, False]
    assert auth.authorizations[0]["state"] != auth.authorizations[1]["state"]
    assert auth.resource_refusals == [("authorize", True)]
    (exchange,) = auth.token_requests
    assert "resource" not in exchange
    assert flow.code_challenge(exchange["code_verifier"]) == auth.authorizations[1]["code_challenge"]
    (line,) = resource_lines(caplog)
    expected = "error invalid_target" if refusal == "invalid_target" else "error invalid_request"
    assert "at its authorization endpoint (" + expected + ")" in line and "AADSTS" not in caplog.text
    # The refreshes of this sign-in go without it from the start.
    auth.revoke_all()
    assert h.call("whoami") == "scopes: mcp:read"
    assert auth.token_requests[-1]["grant_type"] == "refresh_token"
    assert "resource" not in auth.token_requests[-1]
    assert len(auth.resource_refusals) == 1


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_token_endpoint_that_refuses_resource_gets_the_code_once_more_without_it_and_a_restart_remembers(
    harness, auth, refusal, caplog, tmp_path
):
    auth.switches.refuse_resource = refusal
    auth.switches.refuse_resource_at = ("token",)
    keyring_file = tmp_path / "keyring.json"
    first = harness(store=KeyringStore(FileKeyring(keyring_file)))
    first.discover()
    assert [("resource" in r) for r in auth.token_requests] == [True, False]
    assert len(auth.authorizations) == 1 and len(first.browser) == 1
    assert len(resource_lines(caplog)) == 1
    (entry,) = IndexedStore(first.store).entries()
    stored = IndexedStore(first.store).load(entry.key)
    assert stored is not None and stored.without_resource
    # A new process refreshes from the stored sign-in without resource: no refusal, no second line.
    second = harness(store=KeyringStore(FileKeyring(keyring_file)), port=first.port)
    auth.revoke_all()
    assert second.call("whoami") == "scopes: mcp:read"
    refresh = auth.token_requests[-1]
    assert refresh["grant_type"] == "refresh_token" and "resource" not in refresh
    assert auth.resource_refusals == [("token", True)] and len(resource_lines(caplog)) == 1


def test_a_refresh_refused_for_its_resource_goes_once_more_without_it_and_so_do_the_next(harness, auth):
    h = harness()
    h.discover()
    auth.switches.refuse_resource = "invalid_target"
    auth.switches.refuse_resource_at = ("token",)
    for _ in range(2):
        auth.revoke_all()
        assert h.call("whoami") == "scopes: mcp:read"
    refreshes = [r for r in auth.token_requests if r["grant_type"] == "refresh_token"]
    assert [("resource" in r) for r in refreshes] == [True, False, False]
    assert auth.resource_refusals == [("token", True)] and len(auth.authorizations) == 1


@pytest.mark.parametrize("endpoint", ["authorize", "token"])
def test_a_server_that_still_refuses_without_resource_fails_after_one_more_request(harness, auth, endpoint):
    auth.switches.refuse_resource = "described"
    auth.switches.refuse_resource_at = (endpoint,)
    auth.switches.refuse_resource_always = True
    h = harness()
    with pytest.raises(SignInError) as caught:
        h.discover()
    assert auth.resource_refusals == [(endpoint, True), (endpoint, False)]
    assert len(h.browser) == 1
    if endpoint == "authorize":
        assert isinstance(caught.value, SignInAuthorizationError) and auth.token_requests == []
    else:
        assert isinstance(caught.value, SignInFailed) and len(auth.token_requests) == 2
        assert caught.value.detail == "token request: HTTP status 400, error invalid_request"


def test_resource_indicator_off_never_sends_it_and_a_uri_is_sent_instead_without_a_fallback(harness, auth):
    off = harness(resource_indicator="off")
    off.discover()
    assert "resource" not in auth.authorizations[0] and "resource" not in auth.token_requests[0]
    uri = harness(resource_indicator="api://mcp-test")
    uri.discover()
    assert auth.authorizations[1]["resource"] == "api://mcp-test"
    assert auth.token_requests[1]["resource"] == "api://mcp-test"
    auth.switches.refuse_resource = "invalid_target"
    refused = harness(resource_indicator="api://mcp-test")
    with pytest.raises(SignInAuthorizationError):
        refused.discover()
    assert auth.resource_refusals == [("authorize", True)] and len(auth.authorizations) == 3
