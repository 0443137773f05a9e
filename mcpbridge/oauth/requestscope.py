"""The request that runs on each thread of the authorizer: its cancel token, its deadline, its token.

The transport calls the authorizer on the thread of the request, so what a sign-in
needs of that request lives in a thread-local :class:`RequestScope`, which
:meth:`RequestScopes.open` sets around the request. The sign-in's HTTP client,
:attr:`RequestScopes.web`, ends each of its requests by that deadline and stops when
the request is canceled.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..mcp.cancel import CancelToken
from .errors import SignInError
from .signin import SignIn

if TYPE_CHECKING:
    from .web import WebClient

__all__ = ["RequestScope", "RequestScopes"]


class RequestScope:
    """The request that runs on this thread: its cancel token and deadline."""

    def __init__(self, cancel: CancelToken | None, timeout: float) -> None:
        self.cancel = cancel
        #: The deadline on the monotonic clock.
        self.deadline = time.monotonic() + timeout
        #: The authorizer answered a challenge of this request.
        self.answered = False
        #: The sign-in that the deadline of the request stopped.
        self.stopped: SignInError | None = None


class RequestScopes:
    """The :class:`RequestScope` of the request on each thread, and the sign-in's HTTP client.

    :param web: the HTTP client of the sign-in, or a function that makes it at its first use.
    """

    def __init__(self, web: WebClient | Callable[[], WebClient], sign_in: SignIn) -> None:
        self._web = web
        self._web_lock = threading.Lock()
        self._sign_in = sign_in
        self._local = threading.local()

    @property
    def current(self) -> RequestScope | None:
        """The request on this thread, or None outside a request (a listen stream)."""
        scope: RequestScope | None = getattr(self._local, "scope", None)
        return scope

    @property
    def used(self) -> str | None:
        """The access token that the last request on this thread carried."""
        used: str | None = getattr(self._local, "used", None)
        return used

    @used.setter
    def used(self, token: str | None) -> None:
        self._local.used = token

    @contextlib.contextmanager
    def open(self, *, cancel: CancelToken | None, timeout: float) -> Iterator[RequestScope]:
        """Give the sign-ins of a request on this thread its cancel token and deadline."""
        scope = RequestScope(cancel, timeout)
        outer = self.current
        self._local.scope = scope
        try:
            yield scope
        finally:
            self._local.scope = outer

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
        scope = self.current
        return web.within(
            deadline=scope.deadline if scope is not None else None,
            cancel=scope.cancel if scope is not None else None,
            call_timeout=self._sign_in.settings.timeout,
        )
