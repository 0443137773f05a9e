"""The authorizer of the HTTP transport: tokens for each request, answers to each challenge.

Theory of operation
-------------------

:class:`OAuthAuthorizer` implements :class:`mcpbridge.mcp.transports.http.Authorizer`.
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

The authorizer itself holds only what each request needs: the record in use
(:mod:`.records`, made with the token store at the first request), the request on each
thread (:mod:`.requestscope`) and the turn. It decides which steps a challenge needs in
:class:`~.steps.SignInSteps`, made at the first challenge or due refresh, each step in a
module of its own (:mod:`.metadata`, :mod:`.clients`, :mod:`.tokenrequests`,
:mod:`.interactive`): a server that never asks for a sign-in does not load them.

The transport retries a request once after a challenge. The request's own
cancel token and deadline reach the sign-in through :meth:`request_scope`,
which :class:`~.session.SignInHook` opens around each request; a request whose
retry is refused again fails with ``access_refused``. A challenge outside a
request (a listen stream) never starts an interactive sign-in.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..mcp.cancel import CancelToken
from ..mcp.droplog import DropLog
from ..mcp.errors import RequestTimeout
from ..mcp.transports.http import HttpStatusError
from .busy import OneAtATime
from .config import OAuthConfig, PreRegistered
from .errors import AccessRefused, ResourceUnknown, SignInTimeout
from .requestscope import RequestScope, RequestScopes
from .signin import SignIn

if TYPE_CHECKING:
    from .device import DeviceFlow
    from .records import SignInRecords
    from .steps import SignInSteps
    from .store import IndexedStore
    from .stored import Record
    from .web import WebClient

#: ``OAuthConfig`` stays importable from here, where the authorizer's callers found it.
__all__ = ["OAuthAuthorizer", "OAuthConfig"]

log = logging.getLogger("mcpbridge.oauth")


class OAuthAuthorizer:
    """The :class:`~mcpbridge.mcp.transports.http.Authorizer` of one upstream URL; see the module docstring.

    :param store: the stored sign-ins, or a function that makes them at the first request; a
        :class:`~.store.DeferredStore` under it opens at the first need of a token, and a store
        that does not open fails that request (and each later one) with ``sign_in_failed``.
    :param web: the HTTP client of the sign-in, or a function that makes it at its first use.
    :param clock: Unix seconds (``time.time``); the expiry of the tokens uses it.
    :param device: the device sign-in; by default one is made at its first use.
    """

    def __init__(
        self,
        config: OAuthConfig,
        store: IndexedStore | Callable[[], IndexedStore],
        web: WebClient | Callable[[], WebClient],
        sign_in: SignIn,
        *,
        clock: Callable[[], float] = time.time,
        device: DeviceFlow | None = None,
    ) -> None:
        self.config = config
        self.sign_in = sign_in
        self._store = store
        self._scopes = RequestScopes(web, sign_in)
        self._clock = clock
        self._device = device
        self._make_lock = threading.Lock()
        # Made at the first need, under _make_lock (see _records and _steps):
        self._made_records: SignInRecords | None = None
        self._made_steps: SignInSteps | None = None
        #: One sign-in or refresh runs at a time.
        self._turn = OneAtATime()
        #: The lines that a server answering each request with 401 would repeat.
        self._drops = DropLog(log)
        #: Called after a new sign-in took effect (this process's, or one of another process
        #: that it adopted), on the thread of the request; not after a refresh.
        self.on_signed_in: Callable[[], None] | None = None

    # ------------------------------------------------------------- the seam

    @property
    def store(self) -> IndexedStore:
        """The stored sign-ins (made at the first use when a function makes them)."""
        return self._records().store

    def headers(self) -> dict[str, str]:
        """``Authorization: Bearer <token>`` of the stored sign-in, refreshed first when due."""
        record = self._records().current()
        if record is not None and record.access_token and not record.usable(self._clock()):
            record = self._refresh_due(record)
        token = record.access_token if record is not None else None
        self._scopes.used = token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def on_challenge(self, status: int, www_authenticate: str | None) -> bool:
        """Answer a 401, or a 403 with ``insufficient_scope``; True: send the request again.

        Raises:
            SignInError: the sign-in failed (the cause names the failure).
            Cancelled: the request was canceled during the sign-in.
        """
        steps = self._steps()
        challenge = steps.challenge(www_authenticate)
        step_up = status == 403
        if step_up and (challenge is None or challenge.error != "insufficient_scope"):
            return False
        self.store.sign_in_needed()
        scope = self._scopes.current
        used = self._scopes.used
        if scope is not None:
            scope.answered = True
        if scope is None:
            taken = self._turn.acquire(None, None)
        else:
            taken = self._turn.acquire(scope.cancel, scope.deadline)
        if not taken:
            return False
        try:
            return steps.answer(challenge, step_up, used, scope)
        except SignInTimeout as exc:
            if scope is not None:
                scope.stopped = exc
            raise
        finally:
            self._turn.release()

    # -------------------------------------------------------- for the bridge

    def request_scope(
        self, *, cancel: CancelToken | None, timeout: float
    ) -> contextlib.AbstractContextManager[RequestScope]:
        """Give the sign-ins of a request on this thread its cancel token and deadline."""
        return self._scopes.open(cancel=cancel, timeout=timeout)

    @contextlib.contextmanager
    def guard(self, *, cancel: CancelToken | None, timeout: float) -> Iterator[RequestScope]:
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
                        self._drops(
                            logging.WARNING,
                            "tokens refused for a resource the authorization server does not know",
                            "the upstream server refused the token (HTTP status %d) of a sign-in without "
                            "the resource indicator, which the authorization server refused: it does not "
                            "know the upstream server's address as a resource. Register it there as a "
                            "resource (an API or audience), or give the resource it knows with "
                            "--resource-indicator <uri>",
                            exc.http_status,
                        )
                        raise ResourceUnknown(f"HTTP status {exc.http_status}") from exc
                    self._drops(
                        logging.WARNING,
                        "requests refused after the sign-in",
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
        record = self._records().current()
        return self.config.resource_indicator == "auto" and record is not None and record.without_resource

    def interactive(self) -> bool:
        """Whether the next request can need a sign-in: no stored access token valid for 60 s more.

        A refresh token alone does not count.
        """
        record = self._records().current()
        return record is None or not record.usable(self._clock())

    @property
    def sign_in_timeout(self) -> float:
        return self.sign_in.settings.timeout

    def _signed_in(self) -> None:
        hook = self.on_signed_in
        if hook is not None:
            try:
                hook()
            except Exception as exc:  # noqa: BLE001 - a hook must not fail the request
                log.debug("the hook of a new sign-in failed: %s", type(exc).__name__)

    def _refresh_due(self, record: Record) -> Record:
        """Refresh a token that expires soon, before a request; on any failure keep the old one.

        A token of the client credentials grant is replaced by a new one of the grant.
        """
        if not record.refresh_token and not self.config.client_credentials:
            return record
        if not self._turn.try_acquire():
            return record
        try:
            return self._steps().refresh_due(record)
        finally:
            self._turn.release()

    # ------------------------------------------------- made at the first need

    def _records(self) -> SignInRecords:
        """The sign-in in use and its records: made at the first request."""
        records = self._made_records
        if records is None:
            # The records and the token stores load at the first request, not at each start
            # of the bridge (start-up cost: the rules of the flow, hashlib and the stores).
            from .records import SignInRecords

            with self._make_lock:
                records = self._made_records
                if records is None:
                    store = self._store() if callable(self._store) else self._store
                    choice = self.config.registration
                    records = SignInRecords(
                        store,
                        url=self.config.url,
                        identity=self.config.identity,
                        client_id=choice.client_id if isinstance(choice, PreRegistered) else None,
                    )
                    self._made_records = records
        return records

    def _steps(self) -> SignInSteps:
        """The steps of a challenge or a due refresh: made at the first one."""
        steps = self._made_steps
        if steps is None:
            # A server that never asks for a sign-in never loads them (start-up cost: the
            # metadata, the client registration, the token requests and a person's sign-in).
            from .steps import SignInSteps

            records = self._records()
            with self._make_lock:
                steps = self._made_steps
                if steps is None:
                    steps = SignInSteps(
                        self.config,
                        self.sign_in,
                        records,
                        self._scopes,
                        clock=self._clock,
                        device=self._device,
                        drops=self._drops,
                        signed_in=self._signed_in,
                    )
                    self._made_steps = steps
        return steps
