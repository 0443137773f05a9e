"""The authorizer of the HTTP transport: tokens for each request, answers to each challenge.

Theory of operation
-------------------

:class:`OAuthAuthorizer` implements :class:`mcpbridge.mcp.http.Authorizer`.
:meth:`~OAuthAuthorizer.headers` gives the bearer token of the stored sign-in
(refreshed first when it expires within 60 s). When the upstream server
answers 401, or 403 with ``insufficient_scope``, the transport calls
:meth:`~OAuthAuthorizer.on_challenge` on the thread of the request, which:

1. retries at once when another thread or process already renewed the token;
2. finds the protected resource and the authorization server (cached);
3. on a 401, refreshes the token; a refresh refused with ``invalid_grant``
   (or a like error) drops the tokens, ``invalid_client`` drops the client;
4. signs in once: the client (``--client-id``, a client ID metadata document,
   or dynamic registration), the authorization URL with PKCE, ``state`` and
   ``resource``, the :class:`~.signin.SignIn`, the token request. A step-up asks
   for the union of the scopes. An authorization server that refuses ``resource``
   gets each request once more without it (:class:`~.discovery.ResourceParameter`;
   the receiver sends the browser on to the authorization without it), and the
   stored sign-in remembers that for its refreshes and later sign-ins
   (``--resource-indicator auto``, the default). ``--sign-in`` chooses the flow
   (:func:`.grants.choose_flow`): the browser, the device flow
   (:class:`~.device.DeviceFlow`), or the client credentials of ``--client-id``,
   which need no person and thus also renew a token before it expires.

Only one sign-in or refresh runs at a time (:class:`~.busy.OneAtATime`); other requests wait for it and
then use its token. A second bridge process that finds the redirect port busy
with a sign-in of the same record asks that receiver, waits for its end and
reuses the stored tokens.

The transport retries a request once after a challenge. The request's own
cancel token and deadline reach the sign-in through :meth:`request_scope`,
which :class:`~.session.SignInHook` opens around each request; a request whose
retry is refused again fails with ``access_refused``. A challenge outside a
request (a listen stream) never starts an interactive sign-in.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..mcp.cancel import CancelToken
from ..mcp.droplog import DropLog
from ..mcp.errors import Cancelled, RequestTimeout
from ..mcp.http import HttpStatusError
from . import flow, urls
from .busy import OneAtATime
from .challenge import Challenge, parse_challenge
from .config import ClientMetadataDocument, PreRegistered, Registration, SignInOptions, remote_session
from .errors import (
    AccessRefused,
    ClientCredentialsRefused,
    DeviceSignInUnavailable,
    InvalidClientMetadataUrl,
    IssuerNotRegistered,
    RedirectPortUnavailable,
    ResourceUnknown,
    Sandbox,
    SignInAuthorizationError,
    SignInDenied,
    SignInError,
    SignInFailed,
    SignInTimeout,
    problem_words,
)
from .flow import ClientRegistration, Record, RecordKey, ResourceMetadata, ServerMetadata
from .receiver import PortBusy, Receiver, probe
from .records import SignInRecords
from .signin import Attempt, SignIn
from .store import IndexedStore
from .tokens import TokenProblem, TokenResponse, choose_auth_method

if TYPE_CHECKING:
    from .device import DeviceFlow
    from .discovery import ResourceParameter
    from .grants import FlowChoice
    from .web import WebClient

__all__ = ["OAuthAuthorizer", "OAuthConfig"]

log = logging.getLogger("mcpbridge.oauth")


@dataclass(frozen=True)
class OAuthConfig:
    """The sign-in options of one upstream URL."""

    url: str
    account: str
    port: int
    registration: Registration
    #: ``--sign-in``: ``auto``, ``browser``, ``device`` or ``client-credentials``.
    sign_in: str = "auto"
    #: Why the bridge seems to run far from the browser (:func:`.config.remote_session`).
    remote: str | None = None
    #: ``--resource-indicator``: ``auto``, ``off`` or the URI to send as ``resource``.
    resource_indicator: str = "auto"

    @classmethod
    def of(cls, options: SignInOptions, env: Mapping[str, str]) -> OAuthConfig:
        """The config of the sign-in options of a command line, in the environment ``env``."""
        return cls(
            options.url,
            options.account,
            options.redirect_port,
            options.registration,
            sign_in=options.sign_in,
            remote=remote_session(env, platform=sys.platform),
            resource_indicator=options.resource_indicator,
        )

    @property
    def redirect_uri(self) -> str:
        return flow.redirect_uri(self.port)

    @property
    def client_credentials(self) -> bool:
        return self.sign_in == "client-credentials"

    @property
    def identity(self) -> str:
        """The ``client`` of the record keys of this account and client.

        The tokens of the client credentials grant are the client's own, not a
        person's: they are kept apart from the sign-ins of the same client ID.
        """
        choice = self.registration
        if isinstance(choice, PreRegistered):
            identity = flow.storage_identity(self.account, self.redirect_uri, client_id=choice.client_id)
            return identity + "|grant=client_credentials" if self.client_credentials else identity
        if isinstance(choice, ClientMetadataDocument) and choice.explicit:
            return flow.storage_identity(self.account, self.redirect_uri, metadata_url=choice.url)
        return flow.storage_identity(self.account, self.redirect_uri)


class _Scope:
    """The request that runs on this thread: its cancel token and deadline."""

    def __init__(self, cancel: CancelToken | None, deadline: float) -> None:
        self.cancel = cancel
        self.deadline = deadline
        #: The authorizer answered a challenge of this request.
        self.answered = False
        #: The sign-in that the deadline of the request stopped.
        self.stopped: SignInError | None = None


@dataclass(frozen=True)
class _Need:
    """One interactive sign-in that a request needs."""

    key: RecordKey
    server: ServerMetadata
    resource: ResourceMetadata
    #: The stored record of ``key`` before the sign-in (its client is reused).
    stored: Record | None
    scopes: tuple[str, ...]
    scope: _Scope
    #: The access token that the refused request carried.
    used: str | None


class OAuthAuthorizer:
    """The :class:`~mcpbridge.mcp.http.Authorizer` of one upstream URL; see the module docstring.

    :param store: the stored sign-ins; a :class:`~.store.DeferredStore` under it opens at the
        first need of a token, and a store that does not open fails that request (and each
        later one) with ``sign_in_failed``.
    :param web: the HTTP client of the sign-in, or a function that makes it at its first use.
    :param clock: Unix seconds (``time.time``); the expiry of the tokens uses it.
    :param device: the device sign-in; by default one is made at its first use.
    """

    def __init__(
        self,
        config: OAuthConfig,
        store: IndexedStore,
        web: WebClient | Callable[[], WebClient],
        sign_in: SignIn,
        *,
        clock: Callable[[], float] = time.time,
        device: DeviceFlow | None = None,
    ) -> None:
        self.config = config
        self.store = store
        choice = config.registration
        self._records = SignInRecords(
            store,
            url=config.url,
            identity=config.identity,
            client_id=choice.client_id if isinstance(choice, PreRegistered) else None,
        )
        self._web = web
        self._web_lock = threading.Lock()
        self.sign_in = sign_in
        self._clock = clock
        self._lock = threading.Lock()
        #: One sign-in or refresh runs at a time.
        self._turn = OneAtATime()
        self._local = threading.local()
        #: The lines that a server answering each request with 401 would repeat.
        self._drops = DropLog(log)
        # Guarded by _lock:
        self._resources: dict[str | None, ResourceMetadata] = {}
        self._servers: dict[str, ServerMetadata] = {}
        self._bound_issuer: str | None = None
        self._choices: dict[str, FlowChoice] = {}
        self._device_flow = device
        #: Called after a new sign-in took effect (this process's, or one of another process
        #: that it adopted), on the thread of the request; not after a refresh.
        self.on_signed_in: Callable[[], None] | None = None

    @property
    def web(self) -> WebClient:
        """The HTTP client of the sign-in for the request on this thread.

        Each of its requests ends by the deadline of that request and within the sign-in
        time limit, and stops when the request is canceled (:meth:`.web.WebClient.within`).
        The client is made at its first use: ``requests`` loads then.
        """
        web = self._web
        if callable(web):
            with self._web_lock:
                if callable(self._web):
                    self._web = self._web()
                web = self._web
        assert not callable(web)
        scope: _Scope | None = getattr(self._local, "scope", None)
        return web.within(
            deadline=scope.deadline if scope is not None else None,
            cancel=scope.cancel if scope is not None else None,
            call_timeout=self.sign_in.settings.timeout,
        )

    @property
    def device(self) -> DeviceFlow:
        """The device sign-in (made at its first use; one sign-in runs at a time)."""
        if self._device_flow is None:
            from .device import DeviceFlow

            self._device_flow = DeviceFlow(self.sign_in)
        return self._device_flow

    # ------------------------------------------------------------- the seam

    def headers(self) -> dict[str, str]:
        """``Authorization: Bearer <token>`` of the stored sign-in, refreshed first when due."""
        record = self._records.current()
        if record is not None and record.access_token and not record.usable(self._clock()):
            record = self._refresh_due(record)
        token = record.access_token if record is not None else None
        self._local.used = token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def on_challenge(self, status: int, www_authenticate: str | None) -> bool:
        """Answer a 401, or a 403 with ``insufficient_scope``; True: send the request again.

        Raises:
            SignInError: the sign-in failed (the cause names the failure).
            Cancelled: the request was canceled during the sign-in.
        """
        challenge = parse_challenge(www_authenticate)
        step_up = status == 403
        if step_up and (challenge is None or challenge.error != "insufficient_scope"):
            return False
        self.store.sign_in_needed()
        scope: _Scope | None = getattr(self._local, "scope", None)
        used: str | None = getattr(self._local, "used", None)
        if scope is not None:
            scope.answered = True
        if scope is None:
            taken = self._turn.acquire(None, None)
        else:
            taken = self._turn.acquire(scope.cancel, scope.deadline)
        if not taken:
            return False
        try:
            return self._answer(challenge, step_up, used, scope)
        except SignInTimeout as exc:
            if scope is not None:
                scope.stopped = exc
            raise
        finally:
            self._turn.release()

    # -------------------------------------------------------- for the bridge

    @contextlib.contextmanager
    def request_scope(self, *, cancel: CancelToken | None, timeout: float) -> Iterator[_Scope]:
        """Give the sign-ins of a request on this thread its cancel token and deadline."""
        scope = _Scope(cancel, time.monotonic() + timeout)
        outer = getattr(self._local, "scope", None)
        self._local.scope = scope
        try:
            yield scope
        finally:
            self._local.scope = outer

    @contextlib.contextmanager
    def guard(self, *, cancel: CancelToken | None, timeout: float) -> Iterator[_Scope]:
        """:meth:`request_scope`, and the errors of a request that its sign-in did not help.

        A request refused again after its sign-in or step-up fails with
        ``access_refused``; a sign-in stopped by the time limit of its request fails
        with ``sign_in_timeout``.
        """
        with self.request_scope(cancel=cancel, timeout=timeout) as scope:
            try:
                yield scope
            except HttpStatusError as exc:
                if exc.http_status in (401, 403) and scope.answered:
                    if self._after_fallback():
                        log.warning(
                            "the upstream server refused the token (HTTP status %d) of a sign-in without "
                            "the resource indicator, which the authorization server refused: it does not "
                            "know the upstream server's address as a resource. Register it there as a "
                            "resource (an API or audience), or give the resource it knows with "
                            "--resource-indicator <uri>",
                            exc.http_status,
                        )
                        raise ResourceUnknown(f"HTTP status {exc.http_status}") from exc
                    log.warning(
                        "the upstream server refused the request after the sign-in (HTTP status %d)",
                        exc.http_status,
                    )
                    raise AccessRefused(f"HTTP status {exc.http_status}") from exc
                raise
            except RequestTimeout:
                if scope.stopped is not None:
                    # The error of the stopped sign-in, already built, replaces the timeout of the
                    # request; it keeps its own cause.
                    raise scope.stopped from scope.stopped.__cause__
                raise

    def _after_fallback(self) -> bool:
        """Whether the stored sign-in went without ``resource`` because the authorization
        server refused it (``--resource-indicator auto``), not by ``--resource-indicator off``."""
        record = self._records.current()
        return self.config.resource_indicator == "auto" and record is not None and record.without_resource

    def interactive(self) -> bool:
        """Whether the next request can need a sign-in: no stored access token valid for 60 s more.

        A refresh token alone does not count.
        """
        record = self._records.current()
        return record is None or not record.usable(self._clock())

    @property
    def sign_in_timeout(self) -> float:
        return self.sign_in.settings.timeout

    # ---------------------------------------------------------- the answer

    def _answer(
        self, challenge: Challenge | None, step_up: bool, used: str | None, scope: _Scope | None
    ) -> bool:
        now = self._clock()
        current = self._records.current()
        if current is not None and current.usable(now) and current.access_token != used:
            return True
        if urlsplit(self.config.url).scheme.lower() != "https" and not urls.local_upstream(self.config.url):
            raise SignInFailed("InsecureEndpoint")
        try:
            resource, server = self._discover(challenge)
        except SignInError as exc:
            self._drops(
                logging.WARNING,
                "sign-ins that could not start",
                "the sign-in cannot start: the discovery of the authorization server failed (%s)",
                problem_words(exc.detail) if exc.detail else exc.detail,
            )
            raise
        key = RecordKey(server.issuer, resource.resource, self.config.identity)
        stored = self._records.load(key)
        if stored is not None and stored.usable(now) and stored.access_token != used:
            self._records.set(stored)
            self._signed_in()
            return True
        if not step_up and stored is not None and stored.refresh_token:
            stored = self._refresh(stored, server, resource)
            if stored is not None and stored.usable(self._clock()):
                return True
        grant = self.config.client_credentials
        if not grant and scope is None:
            self._drops(
                logging.INFO,
                "requests that need a new sign-in",
                "the upstream server needs a new sign-in: the next request of the client starts it",
            )
            return False
        # A person's sign-in keeps the scopes of the record in use when none is stored.
        earlier = stored if stored is not None or grant else current
        scopes = flow.choose_scopes(
            challenged=challenge.scopes if challenge is not None else (),
            resource=resource,
            server=server,
            previous=earlier.scopes if earlier is not None else (),
            step_up=step_up,
        )
        if grant:
            self._client_credentials(key, server, resource.resource, scopes, stored)
        else:
            assert scope is not None
            self._interactive(_Need(key, server, resource, stored, scopes, scope, used))
        self._signed_in()
        return True

    def _signed_in(self) -> None:
        hook = self.on_signed_in
        if hook is not None:
            try:
                hook()
            except Exception as exc:  # noqa: BLE001 - a hook must not fail the request
                log.debug("the hook of a new sign-in failed: %s", type(exc).__name__)

    def _discover(self, challenge: Challenge | None) -> tuple[ResourceMetadata, ServerMetadata]:
        from . import discovery

        source = challenge.resource_metadata if challenge is not None else None
        with self._lock:
            resource = self._resources.get(source)
        if resource is None:
            resource = discovery.discover_resource(self.web, self.config.url, source)
            with self._lock:
                self._resources[source] = resource
        return resource, self._server(resource.issuer)

    def _server(self, issuer: str) -> ServerMetadata:
        from . import discovery

        with self._lock:
            server = self._servers.get(issuer)
        if server is None:
            server = discovery.discover_server(self.web, issuer, local=urls.local_upstream(self.config.url))
            with self._lock:
                self._servers[issuer] = server
        return server

    def flow_choice(self, server: ServerMetadata) -> FlowChoice:
        """The flow of a sign-in at ``server`` and why; logged once per authorization server.

        Raises:
            DeviceSignInUnavailable: ``--sign-in device`` and ``server`` offers no device sign-in.
        """
        from . import grants

        with self._lock:
            known = self._choices.get(server.issuer)
        if known is not None:
            return known
        try:
            choice = grants.choose_flow(self.config.sign_in, remote=self.config.remote, server=server)
        except grants.DeviceUnavailable as exc:
            log.warning("the authorization server offers no device sign-in (%s): use --sign-in browser", exc)
            raise DeviceSignInUnavailable(str(exc)) from exc
        with self._lock:
            self._choices[server.issuer] = choice
        log.info("the sign-in uses the %s flow: %s", choice.flow, choice.reason)
        return choice

    def _device_after_sandbox(self, server: ServerMetadata) -> bool:
        """Whether a browser sign-in that the sandbox of VS Code blocks goes on with the device
        flow: with ``--sign-in auto``, when ``server`` offers it. Logs the hosts that the
        sandbox must allow either way."""
        from . import grants

        upstream = urlsplit(self.config.url).hostname or "?"
        issuer = urlsplit(server.issuer).hostname or "?"
        log.warning(
            "the sandbox of VS Code blocks the browser and the redirect port of the sign-in; the sandbox "
            "must allow the hosts %s (the upstream server) and %s (the authorization server)",
            upstream,
            issuer,
        )
        if self.config.sign_in != "auto" or grants.device_endpoint_problem(server) is not None:
            log.warning(
                "the sign-in needs --sign-in device, which the authorization server must offer, "
                "or a server entry without sandboxEnabled"
            )
            return False
        log.info("the sign-in uses the device flow: the sandbox of VS Code blocks the browser")
        with self._lock:
            self._choices[server.issuer] = grants.FlowChoice(
                "device", "the sandbox of VS Code blocks the browser"
            )
        return True

    def _registration(
        self, server: ServerMetadata, stored: Record | None, *, device: bool = False
    ) -> ClientRegistration:
        """The client for ``server``: pre-registered, stored, a metadata document, or a new registration."""
        from . import discovery

        choice = self.config.registration
        if isinstance(choice, PreRegistered):
            with self._lock:
                issuer = choice.issuer or self._bound_issuer
                if issuer is None:
                    self._bound_issuer = issuer = server.issuer
            if issuer != server.issuer:
                log.warning(
                    "the client ID of --client-id is not for the authorization server of the upstream server"
                )
                raise IssuerNotRegistered()
            # The secret goes only to the issuer of --client-issuer (the parser demands it with a secret).
            secret = choice.client_secret if choice.issuer == server.issuer else None
            return ClientRegistration(
                choice.client_id, secret, choose_auth_method(server, secret is not None)
            )
        if stored is not None:
            return stored.registration
        if isinstance(choice, ClientMetadataDocument) and server.client_id_metadata_document_supported:
            if not urls.https_endpoint(choice.url) or urlsplit(choice.url).path in ("", "/"):
                raise InvalidClientMetadataUrl()
            return ClientRegistration(choice.url, None, "none")
        return discovery.register(self.web, server, self.config.redirect_uri, device=device)

    def _save_tokens(
        self,
        key: RecordKey,
        registration: ClientRegistration,
        tokens: TokenResponse,
        scopes: tuple[str, ...],
        without_resource: bool,
        *,
        refresh: bool = True,
    ) -> Record:
        """Store the tokens of a new sign-in (``refresh``: with its refresh token) and return the record.

        ``without_resource``: the authorization server refuses ``resource``
        (:attr:`.flow.Record.without_resource`).
        """
        record = Record(
            key,
            self._stored_registration(registration),
            tokens.access_token,
            tokens.expires_at,
            tokens.refresh_token if refresh else None,
            tokens.scopes if tokens.scopes is not None else scopes,
            without_resource,
        )
        self._records.save(record)
        return record

    def _stored_registration(self, registration: ClientRegistration) -> ClientRegistration:
        """The registration as stored: never the secret of ``--client-id``."""
        if isinstance(self.config.registration, PreRegistered):
            return ClientRegistration(registration.client_id, None, registration.auth_method)
        return registration

    def _with_secret(self, registration: ClientRegistration, server: ServerMetadata) -> ClientRegistration:
        choice = self.config.registration
        if isinstance(choice, PreRegistered) and choice.issuer == server.issuer and choice.client_secret:
            return ClientRegistration(registration.client_id, choice.client_secret, registration.auth_method)
        return registration

    # ---------------------------------------------------------- the tokens

    def _refresh(self, stored: Record, server: ServerMetadata, resource: ResourceMetadata) -> Record | None:
        """Refresh ``stored``; the new record, or the record that is left after a refused refresh."""
        from . import discovery

        assert stored.refresh_token is not None
        client = discovery.TokenClient(self.web, server, self._with_secret(stored.registration, server))
        parameter = self._resource_parameter(resource.resource, stored)
        try:
            request = partial(
                client.refresh, refresh_token=stored.refresh_token, scopes=(), now=self._clock()
            )
            tokens = parameter.send(request, "token endpoint")
        except TokenProblem as problem:
            if problem.drops_client:
                log.info(
                    "the authorization server does not know the stored client: the bridge registers again"
                )
                self._records.delete(stored.key)
                self._records.set(None)
                return None
            if problem.drops_tokens:
                log.info("the authorization server refused the refresh (%s): a new sign-in follows", problem)
                left = stored.without_tokens()
                self._records.save(left)
                return left
            raise SignInFailed(f"refresh: {problem}") from problem
        record = Record(
            stored.key,
            stored.registration,
            tokens.access_token,
            tokens.expires_at,
            tokens.refresh_token or stored.refresh_token,
            tokens.scopes if tokens.scopes is not None else stored.scopes,
            self._refuses(parameter, stored),
        )
        self._records.save(record)
        log.debug("refreshed the access token")
        return record

    def _refresh_due(self, record: Record) -> Record:
        """Refresh a token that expires soon, before a request; on any failure keep the old one.

        A token of the client credentials grant is replaced by a new one of the grant.
        """
        if not record.refresh_token and not self.config.client_credentials:
            return record
        if not self._turn.try_acquire():
            return record
        try:
            current = self._records.current()
            if current is not None and current is not record and current.usable(self._clock()):
                return current
            server = self._server(record.key.issuer)
            if self.config.client_credentials:
                return self._client_credentials(
                    record.key, server, record.key.resource, record.scopes, record
                )
            resource = ResourceMetadata(record.key.resource, (record.key.issuer,), None)
            refreshed = self._refresh(record, server, resource)
            return refreshed if refreshed is not None else record
        except SignInError as exc:
            self._drops(
                logging.INFO,
                "failed refreshes of the access token",
                "the refresh of the access token failed: %s",
                exc.detail or exc.cause,
            )
            return record
        finally:
            self._turn.release()

    def _interactive(self, need: _Need) -> None:
        """Sign in with the browser, the consent of the client or the device flow; store the tokens."""
        from . import discovery

        state = flow.b64url(secrets.token_bytes(32))
        digest = need.key.digest().hex()
        device = self.flow_choice(need.server).flow == "device"
        followed = False
        while True:
            try:
                if device:
                    holder = self.sign_in.hold(state=state, probe=digest)
                else:
                    attempt = self.sign_in.attempt(
                        state=state, probe=digest, cancel=need.scope.cancel, deadline=need.scope.deadline
                    )
            except Sandbox:
                if not self._device_after_sandbox(need.server):
                    raise
                device = True
                continue
            except PortBusy as exc:
                if followed or not self._follow(digest, need.scope):
                    if device:
                        # The device flow needs the port only to let other processes wait for it.
                        log.info(
                            "the redirect port %d is in use: the device sign-in runs without it",
                            self.config.port,
                        )
                        holder = None
                        break
                    log.warning(
                        "the bridge cannot listen on the redirect port %d: it is in use", self.config.port
                    )
                    raise RedirectPortUnavailable("address_in_use", port=self.config.port) from exc
                followed = True
                if self._adopted(self._records.load(need.key), need.used):
                    log.info("uses the sign-in of the other bridge process")
                    return
                continue
            break
        if device:
            self._device(holder, need)
            return
        with attempt:
            registration = self._client(need)
            if registration is None:
                return
            resource = self._resource_parameter(need.resource.resource, need.stored)
            code, verifier = self._authorize(attempt, need, registration, state, resource)
            client = discovery.TokenClient(self.web, need.server, registration)
            try:
                exchange = partial(
                    client.exchange_code,
                    code=code,
                    verifier=verifier,
                    redirect=self.config.redirect_uri,
                    now=self._clock(),
                )
                tokens = resource.send(exchange, "token endpoint")
            except TokenProblem as problem:
                log.warning("the token request of the sign-in failed: %s", problem)
                raise self._refused(need.key, problem, "token request") from problem
            self._save_tokens(
                need.key, registration, tokens, need.scopes, self._refuses(resource, need.stored)
            )
            attempt.succeeded()
        log.info("the sign-in succeeded")

    def _authorize(
        self,
        attempt: Attempt,
        need: _Need,
        registration: ClientRegistration,
        state: str,
        resource: ResourceParameter,
    ) -> tuple[str, str]:
        """The code of the redirect and its PKCE verifier.

        When ``resource`` may fall back, the receiver holds the same request without
        ``resource`` (with its own ``state`` and verifier) and sends the browser on to
        it when the authorization server refuses ``resource``: no second click.
        """
        verifier = flow.b64url(secrets.token_bytes(32))
        url = self._authorization_url(need, registration, state, verifier, resource.value)
        fallback_verifier = flow.b64url(secrets.token_bytes(32))
        fallback = None
        if resource.can_drop:
            fallback_state = flow.b64url(secrets.token_bytes(32))
            fallback_url = self._authorization_url(
                need, registration, fallback_state, fallback_verifier, None
            )
            fallback = (fallback_state, fallback_url)
        redirect = attempt.wait(url, fallback=fallback, local=need.server.local)
        refusal = attempt.receiver.refusal
        if refusal is not None:
            resource.drop("authorization endpoint", f"error {flow.error_code(refusal.error) or 'unknown'}")
            verifier = fallback_verifier
        return self._code(redirect, need.server), verifier

    def _authorization_url(
        self, need: _Need, registration: ClientRegistration, state: str, verifier: str, resource: str | None
    ) -> str:
        return flow.build_authorization_url(
            need.server,
            client_id=registration.client_id,
            redirect=self.config.redirect_uri,
            state=state,
            challenge=flow.code_challenge(verifier),
            resource=resource,
            scopes=need.scopes,
        )

    def _resource_parameter(self, resource: str, stored: Record | None) -> ResourceParameter:
        """The ``resource`` of a sign-in or refresh at the resource ``resource`` (``--resource-indicator``).

        ``auto`` sends it, with one fallback without it, unless the stored sign-in
        remembers that the authorization server refused it.
        """
        from .discovery import ResourceParameter

        setting = self.config.resource_indicator
        if setting == "off" or (setting == "auto" and stored is not None and stored.without_resource):
            return ResourceParameter(None, fallback=False)
        if setting == "auto":
            return ResourceParameter(resource, fallback=True)
        return ResourceParameter(setting, fallback=False)

    @staticmethod
    def _refuses(resource: ResourceParameter, stored: Record | None) -> bool:
        """Whether the authorization server refuses ``resource``: now, or as the stored sign-in remembers."""
        return resource.dropped or (stored is not None and stored.without_resource)

    def _device(self, holder: Receiver | None, need: _Need) -> None:
        """Sign in with the device flow while ``holder`` answers the probes of other processes."""
        from . import discovery

        succeeded = False
        try:
            registration = self._client(need, device=True)
            if registration is None:
                return
            resource = self._resource_parameter(need.resource.resource, need.stored)
            try:
                tokens = self.device.run(
                    discovery.TokenClient(self.web, need.server, registration),
                    resource=resource,
                    scopes=need.scopes,
                    cancel=need.scope.cancel,
                    deadline=need.scope.deadline,
                    now=self._clock,
                )
            except TokenProblem as problem:
                log.warning("the device sign-in failed at the authorization server: %s", problem)
                raise self._refused(need.key, problem, "device sign-in") from problem
            self._save_tokens(
                need.key, registration, tokens, need.scopes, self._refuses(resource, need.stored)
            )
            succeeded = True
        finally:
            if holder is not None:
                holder.finish(succeeded)
                holder.stop()
        log.info("the sign-in succeeded")

    def _adopted(self, found: Record | None, used: str | None) -> bool:
        """Use ``found`` when it holds a usable token other than the refused ``used``.

        Another process signed in meanwhile: its tokens take effect here.
        """
        if found is not None and found.usable(self._clock()) and found.access_token != used:
            self._records.set(found)
            return True
        return False

    def _client(self, need: _Need, *, device: bool = False) -> ClientRegistration | None:
        """The client of the sign-in, or None when another process signed in before this one got the port."""
        found = self._records.load(need.key)
        if self._adopted(found, need.used):
            return None
        try:
            return self._registration(need.server, found if found is not None else need.stored, device=device)
        except SignInError as exc:
            log.warning("the sign-in cannot start: no client registration (%s)", exc.detail or exc.cause)
            raise

    def _refused(self, key: RecordKey, problem: TokenProblem, what: str) -> SignInFailed:
        """The error of a sign-in whose token request the server refused; it forgets an unknown client."""
        if problem.drops_client:
            self._records.delete(key)
        return SignInFailed(f"{what}: {problem}")

    def _client_credentials(
        self,
        key: RecordKey,
        server: ServerMetadata,
        resource: str,
        scopes: tuple[str, ...],
        stored: Record | None,
    ) -> Record:
        """A token of the client credentials grant for ``key``, stored; no person takes part.

        ``stored``: the stored record of ``key``, which may remember that the server refuses ``resource``.

        Raises:
            IssuerNotRegistered: ``--client-issuer`` names another authorization server.
            ClientCredentialsRefused: the authorization server refused the client.
            SignInFailed: the request failed.
        """
        from . import discovery, grants

        choice = self.config.registration
        if not isinstance(choice, PreRegistered) or not choice.client_secret:
            raise ClientCredentialsRefused("no client secret")
        if choice.issuer is not None and choice.issuer != server.issuer:
            log.warning(
                "the client ID of --client-id is not for the authorization server of the upstream server"
            )
            raise IssuerNotRegistered()
        registration = grants.client_credentials_registration(choice.client_id, choice.client_secret, server)
        client = discovery.TokenClient(self.web, server, registration)
        parameter = self._resource_parameter(resource, stored)
        try:
            request = partial(client.client_credentials, scopes=scopes, now=self._clock())
            tokens = parameter.send(request, "token endpoint")
        except TokenProblem as problem:
            log.warning("the authorization server refused the client credentials: %s", problem)
            if problem.status in (400, 401, 403):
                raise ClientCredentialsRefused(str(problem)) from problem
            raise SignInFailed(f"client credentials: {problem}") from problem
        record = self._save_tokens(
            key, registration, tokens, scopes, self._refuses(parameter, stored), refresh=False
        )
        log.info("the bridge got a token with the client credentials")
        return record

    def _code(self, redirect: flow.Redirect, server: ServerMetadata) -> str:
        try:
            return flow.check_redirect(
                redirect, issuer=server.issuer, iss_required=server.iss_parameter_supported
            )
        except flow.RedirectProblem as exc:
            log.warning("the redirect of the sign-in is not valid: %s", exc)
            raise SignInFailed(str(exc)) from exc
        except flow.AuthorizationDenied as exc:
            log.warning("the authorization server refused the access")
            raise SignInDenied() from exc
        except flow.AuthorizationError as exc:
            detail = f"error {exc.code}" if exc.code else None
            log.warning("the authorization server sent an error for the sign-in: %s", detail or "unknown")
            raise SignInAuthorizationError(detail) from exc

    def _follow(self, digest: str, scope: _Scope) -> bool:
        """Wait for the sign-in of another process on the redirect port; False when there is none."""
        answer = probe(self.config.port, digest)
        if answer is None:
            return False
        log.info("another bridge process signs in to the same account: this process waits for it")
        limit = min(scope.deadline, time.monotonic() + self.sign_in.settings.timeout + 10.0)
        while answer == "pending":
            if scope.cancel is not None and scope.cancel.cancelled:
                raise Cancelled(scope.cancel.reason or None)
            if time.monotonic() >= limit:
                seconds = max(1, math.ceil(self.sign_in.settings.timeout))
                raise SignInTimeout(seconds=seconds, name=flow.PROGRAM)
            answer = probe(self.config.port, digest)
        return True
