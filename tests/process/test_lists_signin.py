"""A new sign-in drops the list cache: the hook of the authorizer, against a real authorization server.

The authorizer and the HTTP transport run in this process against :class:`AuthServer`
(127.0.0.1 over TLS); the browser is a program in ``BROWSER`` that follows every redirect.
The hook is the one the URL form sets: it drops the cache of the front end's list rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpbridge.bridge.front.listrules import ListRules
from mcpbridge.mcp.client import Client
from mcpbridge.mcp.transports.http import HttpTransport
from mcpbridge.oauth.authorizer import OAuthAuthorizer, OAuthConfig
from mcpbridge.oauth.config import DynamicRegistration
from mcpbridge.oauth.session import SignInHook
from mcpbridge.oauth.signin import Gate, Opener, SignIn, SignInSettings
from mcpbridge.oauth.store import IndexedStore
from mcpbridge.oauth.tokenstore import MemoryStore
from tests.oauth_peers import AuthServer, TestCA, browser_script, free_port

WAIT = 10.0


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def auth(ca: TestCA) -> Iterator[AuthServer]:
    server = AuthServer(ca)
    yield server
    server.close()


class Signed:
    """An authorized client whose authorizer drops the cache of ``lists`` at each new sign-in."""

    def __init__(self, auth: AuthServer, ca: TestCA, tmp_path: Path) -> None:
        from mcpbridge.oauth.web import WebClient

        port = free_port()
        env = {
            "BROWSER": str(browser_script(tmp_path)),
            "TEST_BROWSER_LOG": str(tmp_path / "browser.log"),
            "TEST_BROWSER_CA": str(ca.ca_file),
            "TEST_BROWSER_MODE": "",
        }
        sign_in = SignIn(
            SignInSettings(port=port, timeout=WAIT), Gate(), Opener(env, set()), write_line=print
        )
        self.web = WebClient(ca.client_context(), {})
        config = OAuthConfig(auth.url, "default", port, DynamicRegistration())
        self.authorizer = OAuthAuthorizer(config, IndexedStore(MemoryStore()), self.web, sign_in)
        self.lists = ListRules()
        self.sign_ins = 0
        self.authorizer.on_signed_in = self._signed_in
        transport = HttpTransport(
            auth.url, ssl_context=ca.client_context(), authorizer=self.authorizer, env={}
        )
        self.client = Client(
            transport, client_info={"name": "test", "version": "1"}, hook=SignInHook(self.authorizer)
        )
        self.client.start()

    def _signed_in(self) -> None:
        self.sign_ins += 1
        self.lists.clear("a new sign-in")

    def cache_a_page(self) -> None:
        assert self.lists.lookup("tools/list", None) is None
        self.lists.page("tools/list", None, {"tools": [], "ttlMs": 600000}, cache=True)
        assert self.lists.lookup("tools/list", None) == {"tools": [], "ttlMs": 600000}

    def call(self) -> Any:
        return self.client.request("tools/call", {"name": "whoami", "arguments": {}}, timeout=WAIT)

    def close(self) -> None:
        self.client.close(1.0)
        self.web.close()


@pytest.fixture
def signed(auth: AuthServer, ca: TestCA, tmp_path: Path) -> Iterator[Signed]:
    made = Signed(auth, ca, tmp_path)
    yield made
    made.close()


def test_a_new_sign_in_drops_the_cached_lists_and_a_refresh_does_not(
    signed: Signed, auth: AuthServer
) -> None:
    signed.cache_a_page()
    signed.client.discover(timeout=WAIT)  # the first request signs in
    assert signed.sign_ins == 1
    assert signed.lists.lookup("tools/list", None) is None
    signed.cache_a_page()
    auth.revoke_all()  # the next request gets a 401: a refresh, the same sign-in
    signed.call()
    assert [r["grant_type"] for r in auth.token_requests] == ["authorization_code", "refresh_token"]
    assert signed.sign_ins == 1
    assert signed.lists.lookup("tools/list", None) == {"tools": [], "ttlMs": 600000}  # kept
    auth.revoke_all()
    auth.switches.refresh_error = "invalid_grant"  # the refresh fails: a new sign-in
    signed.call()
    assert len(auth.authorizations) == 2
    assert signed.sign_ins == 2
    assert signed.lists.lookup("tools/list", None) is None
