"""The sign-in of the URL form: the hook that every request of the client passes through, and the setup.

:func:`start_oauth` makes the :class:`~.authorizer.OAuthAuthorizer` of an upstream URL
and its :class:`OAuthSession`; :class:`SignInHook`, the
:class:`~mcpbridge.mcp.client.RequestHook` of the client, opens the scope of each request
(:meth:`~.authorizer.OAuthAuthorizer.guard`) around it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..mcp.cancel import CancelToken
from ..mcp.client import DEFAULT_MAX_DEPTH, Client, Connect
from ..mcp.jsonrpc import Notification
from ..mcp.transports import Transport
from .authorizer import OAuthAuthorizer
from .config import OAuthConfig, SignInOptions, in_sandbox
from .signin import Consent, Gate, Opener, SignIn, SignInSettings

if TYPE_CHECKING:
    import ssl

    from .store import IndexedStore, OpenedStore
    from .web import WebClient

__all__ = ["Connect", "OAuthSession", "SignInHook", "start_oauth"]


class SignInHook:
    """The sign-in as the :class:`~mcpbridge.mcp.client.RequestHook` of a client.

    Each request runs in the scope of the authorizer, so that a 401 may start a
    sign-in bounded by the request's own time limit and cancel. ``server/discover``
    waits for the discover and the sign-in limits together when a sign-in can start. A
    request refused again after its sign-in or step-up fails with ``access_refused``; a
    sign-in stopped by the time limit of its request fails with ``sign_in_timeout``.
    """

    def __init__(self, authorizer: OAuthAuthorizer) -> None:
        self.authorizer = authorizer

    def scope(self, *, cancel: CancelToken | None, timeout: float) -> AbstractContextManager[object]:
        return self.authorizer.guard(cancel=cancel, timeout=timeout)

    def discover_time(self) -> float:
        return self.authorizer.sign_in_timeout if self.authorizer.interactive() else 0.0


class OAuthSession:
    """The sign-in of the URL form: the authorizer, its gate, and what the front end needs."""

    def __init__(self, authorizer: OAuthAuthorizer) -> None:
        self.authorizer = authorizer

    def connector(
        self, make_transport: Callable[[], Transport], *, max_depth: int = DEFAULT_MAX_DEPTH
    ) -> Connect:
        """A ``connect`` for the front end: a client over a new transport, with the :class:`SignInHook`.

        ``make_transport`` makes the HTTP transport with :attr:`authorizer` as its authorizer.
        """

        def connect(client_info: dict[str, Any], on_notification: Callable[[Notification], None]) -> Client:
            # The token store opens on its own thread while the transport is made.
            self.authorizer.store.open_early()
            client = Client(
                make_transport(),
                client_info=client_info,
                max_depth=max_depth,
                on_notification=on_notification,
                hook=SignInHook(self.authorizer),
            )
            client.start()
            return client

        return connect

    def attach(self, consent: Consent) -> Callable[[], None]:
        """Let the sign-ins after ``notifications/initialized`` ask the client through ``consent``.

        Returns the hook of ``notifications/initialized`` of that client.
        """
        gate = self.authorizer.sign_in.gate
        gate.consent = consent
        return gate.client_initialized


def start_oauth(
    options: SignInOptions,
    *,
    ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
    env: Mapping[str, str],
) -> OAuthSession:
    """Make the authorizer of the URL form; the token store opens at the first need of a token.

    Only the checks that need no keychain run now (:func:`~.store.check_options`), and only
    when the options name files: the token stores load at the first request, and
    ``keyring``, ``cryptography`` and ``requests`` when a request needs them.

    :param ssl_context: the trust of the sign-in requests, or a function that makes it.

    Raises:
        StoreOpenError: the options of the token store cannot work (the executable exits with 2).
    """
    if options.names_files:
        # Only a file store or a key file has something to check now; else the token stores
        # load at the first request, not at each start (start-up cost).
        from .store import check_options

        check_options(options.token_store, key=options.token_key, key_file=options.token_key_file, env=env)

    def make_store() -> IndexedStore:
        from .store import DeferredStore, IndexedStore, open_store

        def open_token_store() -> OpenedStore:
            key, key_file = options.token_key, options.token_key_file
            return open_store(options.token_store, key=key, key_file=key_file, env=env)

        return IndexedStore(DeferredStore(open_token_store))

    def make_web() -> WebClient:
        from .web import WebClient

        context = ssl_context() if callable(ssl_context) else ssl_context
        return WebClient(context, env)

    sign_in = SignIn(
        SignInSettings(
            port=options.redirect_port,
            timeout=options.sign_in_timeout,
            no_browser=options.no_browser,
            sandbox=in_sandbox(env),
        ),
        Gate(),
        Opener(env, options.secret_variables),
    )
    config = OAuthConfig.of(options, env)
    authorizer = OAuthAuthorizer(config, make_store, make_web, sign_in)
    return OAuthSession(authorizer)
