"""What every step of the sign-ins of one upstream URL shares, built once for the steps of the authorizer.

:class:`~.steps.SignInSteps` builds one :class:`SignInContext` and hands it to
each step: :class:`~.metadata.Metadata`, :class:`~.clients.Clients`,
:class:`~.tokenrequests.TokenRequests` and :class:`~.interactive.InteractiveSignIn`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import OAuthConfig
    from .records import SignInRecords
    from .requestscope import RequestScopes
    from .signin import SignIn
    from .web import WebClient

__all__ = ["SignInContext"]


@dataclass(frozen=True)
class SignInContext:
    """The options, the records, the requests on each thread and the clock of one upstream URL."""

    config: OAuthConfig
    #: The gate, the browser opener and the consent of a person's sign-in.
    sign_in: SignIn
    #: The sign-in in use and its records in the token store.
    records: SignInRecords
    #: The request on each thread, and the sign-in's HTTP client within it.
    scopes: RequestScopes
    #: Unix seconds (``time.time``); the expiry of the tokens uses it.
    clock: Callable[[], float]

    def web(self) -> WebClient:
        """The HTTP client of the sign-in for the request on this thread
        (:attr:`.requestscope.RequestScopes.web`)."""
        return self.scopes.web
