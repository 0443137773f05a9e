"""The steps of the sign-ins of one upstream URL: the answer to a challenge, and a due refresh.

:class:`~.authorizer.OAuthAuthorizer` makes one :class:`SignInSteps` at the first
challenge or the first refresh of a stored token that expires soon, and runs it while it
holds its turn. It builds one :class:`~.context.SignInContext` (the options, the
records, the requests on each thread, the clock) and hands it to each step, each in a
module of its own: :mod:`.metadata` (the discovered servers and the chosen flow),
:mod:`.clients` (the client registration), :mod:`.tokenrequests` (the refresh, the
client credentials, the stored tokens) and :mod:`.interactive` (a person's sign-in).

Thus a server that never asks for a sign-in never loads these modules, nor the
receiver, the device flow or the HTTP client of the sign-in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..mcp.droplog import DropLog
from . import flow, urls
from .challenge import Challenge, parse_challenge
from .clients import Clients
from .config import OAuthConfig
from .context import SignInContext
from .errors import SignInError, SignInFailed, problem_words
from .flow import ResourceMetadata
from .interactive import InteractiveSignIn, Need
from .metadata import Metadata
from .records import SignInRecords
from .requestscope import RequestScope, RequestScopes
from .signin import SignIn
from .stored import Record, RecordKey
from .tokenrequests import TokenRequests

if TYPE_CHECKING:
    from .device import DeviceFlow

__all__ = ["SignInSteps"]


class SignInSteps:
    """What the authorizer does at a challenge or a due refresh; see the module docstring.

    :param clock: Unix seconds; the expiry of the tokens uses it.
    :param device: the device sign-in, or None: one is made at its first use.
    :param drops: the log lines of the authorizer that a server answering each request
        with 401 would repeat.
    :param signed_in: called after a new sign-in took effect (not after a refresh).
    """

    def __init__(
        self,
        config: OAuthConfig,
        sign_in: SignIn,
        records: SignInRecords,
        scopes: RequestScopes,
        *,
        clock: Callable[[], float],
        device: DeviceFlow | None = None,
        drops: DropLog,
        signed_in: Callable[[], None],
    ) -> None:
        self._context = SignInContext(config, sign_in, records, scopes, clock)
        self._metadata = Metadata(self._context)
        clients = Clients(self._context)
        self._tokens = TokenRequests(self._context, clients)
        self._people = InteractiveSignIn(
            self._context, metadata=self._metadata, clients=clients, tokens=self._tokens, device=device
        )
        self._drops = drops
        self._signed_in = signed_in

    @staticmethod
    def challenge(www_authenticate: str | None) -> Challenge | None:
        """The challenge of a ``WWW-Authenticate`` header (:func:`.challenge.parse_challenge`)."""
        return parse_challenge(www_authenticate)

    def answer(
        self, challenge: Challenge | None, step_up: bool, used: str | None, scope: RequestScope | None
    ) -> bool:
        """Answer a challenge while the authorizer holds the turn; True: send the request again.

        Raises:
            SignInError: the sign-in failed (the cause names the failure).
            Cancelled: the request was canceled during the sign-in.
        """
        config = self._context.config
        now = self._context.clock()
        current = self._context.records.current()
        if current is not None and current.usable(now) and current.access_token != used:
            return True
        if urlsplit(config.url).scheme.lower() != "https" and not urls.local_upstream(config.url):
            raise SignInFailed("InsecureUpstream")
        try:
            resource, server = self._metadata.discover(challenge)
        except SignInError as exc:
            self._drops(
                logging.WARNING,
                "sign-ins that could not start",
                "the sign-in cannot start: the discovery of the authorization server failed (%s)",
                problem_words(exc.detail) if exc.detail else exc.detail,
            )
            raise
        key = RecordKey(server.issuer, resource.resource, config.identity)
        stored = self._context.records.load(key)
        if stored is not None and stored.usable(now) and stored.access_token != used:
            self._context.records.set(stored)
            self._signed_in()
            return True
        if not step_up and stored is not None and stored.refresh_token:
            stored = self._tokens.refresh(stored, server, resource)
            if stored is not None and stored.usable(self._context.clock()):
                return True
        grant = config.client_credentials
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
            self._tokens.client_credentials(key, server, resource.resource, scopes, stored)
        else:
            assert scope is not None
            self._people.run(Need(key, server, resource, stored, scopes, scope, used))
        self._signed_in()
        return True

    def refresh_due(self, record: Record) -> Record:
        """Refresh a token that expires soon, while the authorizer holds the turn; on any failure
        keep the old one.

        A token of the client credentials grant is replaced by a new one of the grant.
        """
        try:
            current = self._context.records.current()
            if current is not None and current is not record and current.usable(self._context.clock()):
                return current
            server = self._metadata.server(record.key.issuer)
            if self._context.config.client_credentials:
                return self._tokens.client_credentials(
                    record.key, server, record.key.resource, record.scopes, record
                )
            resource = ResourceMetadata(record.key.resource, (record.key.issuer,), None)
            refreshed = self._tokens.refresh(record, server, resource)
            return refreshed if refreshed is not None else record
        except SignInError as exc:
            self._drops(
                logging.INFO,
                "failed refreshes of the access token",
                "the refresh of the access token failed: %s",
                exc.detail or exc.cause,
            )
            return record
