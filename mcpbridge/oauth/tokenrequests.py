"""The token requests that need no person, and the storing of every new token.

:meth:`TokenRequests.refresh` renews a stored sign-in; a refresh refused with
``invalid_grant`` (or a like error) drops the tokens, ``invalid_client`` drops the
client. :meth:`TokenRequests.client_credentials` gets a token of the client of
``--client-id`` with its secret. Each request sends ``resource`` as
``--resource-indicator`` says (:meth:`TokenRequests.resource_parameter`), and the
stored record remembers an authorization server that refused it.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

from .clients import Clients, not_registered
from .config import PreRegistered
from .context import SignInContext
from .errors import ClientCredentialsRefused, SignInFailed
from .flow import ResourceMetadata, ServerMetadata
from .stored import ClientRegistration, Record, RecordKey
from .tokens import TokenProblem, TokenResponse

if TYPE_CHECKING:
    from .discovery import ResourceParameter

__all__ = ["TokenRequests"]

log = logging.getLogger("mcpbridge.oauth")


class TokenRequests:
    """The token requests of the sign-ins of one upstream URL and the records they store.

    :param clients: the client registrations, which give each request its client.
    """

    def __init__(self, context: SignInContext, clients: Clients) -> None:
        self._context = context
        self._clients = clients

    def resource_parameter(self, resource: str, stored: Record | None) -> ResourceParameter:
        """The ``resource`` of a sign-in or refresh at the resource ``resource`` (``--resource-indicator``).

        ``auto`` sends it, with one fallback without it, unless the stored sign-in
        remembers that the authorization server refused it.
        """
        from .discovery import ResourceParameter

        setting = self._context.config.resource_indicator
        if setting == "off" or (setting == "auto" and stored is not None and stored.without_resource):
            return ResourceParameter(None, fallback=False)
        if setting == "auto":
            return ResourceParameter(resource, fallback=True)
        return ResourceParameter(setting, fallback=False)

    @staticmethod
    def refuses(resource: ResourceParameter, stored: Record | None) -> bool:
        """Whether the authorization server refuses ``resource``: now, or as the stored sign-in remembers."""
        return resource.dropped or (stored is not None and stored.without_resource)

    def refused(self, key: RecordKey, problem: TokenProblem, what: str) -> SignInFailed:
        """The error of a sign-in whose token request the server refused; it forgets an unknown client."""
        if problem.drops_client:
            self._context.records.delete(key)
        return SignInFailed(f"{what}: {problem}")

    def save(
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
        (:attr:`.stored.Record.without_resource`).
        """
        record = Record(
            key,
            self._clients.stored(registration),
            tokens.access_token,
            tokens.expires_at,
            tokens.refresh_token if refresh else None,
            tokens.scopes if tokens.scopes is not None else scopes,
            without_resource,
        )
        self._context.records.save(record)
        return record

    def refresh(self, stored: Record, server: ServerMetadata, resource: ResourceMetadata) -> Record | None:
        """Refresh ``stored``; the new record, or the record that is left after a refused refresh."""
        from . import discovery

        assert stored.refresh_token is not None
        registration = self._clients.with_secret(stored.registration, server)
        client = discovery.TokenClient(self._context.web(), server, registration)
        parameter = self.resource_parameter(resource.resource, stored)
        try:
            request = partial(
                client.refresh, refresh_token=stored.refresh_token, scopes=(), now=self._context.clock()
            )
            tokens = parameter.send(request, "token endpoint")
        except TokenProblem as problem:
            return self._refresh_refused(stored, problem)
        record = Record(
            stored.key,
            stored.registration,
            tokens.access_token,
            tokens.expires_at,
            tokens.refresh_token or stored.refresh_token,
            tokens.scopes if tokens.scopes is not None else stored.scopes,
            self.refuses(parameter, stored),
        )
        self._context.records.save(record)
        log.debug("refreshed the access token")
        return record

    def _refresh_refused(self, stored: Record, problem: TokenProblem) -> Record | None:
        """What is left of ``stored`` after the server refused its refresh, or the error of the refresh."""
        if problem.drops_client:
            log.info("the authorization server does not know the stored client: the bridge registers again")
            self._context.records.delete(stored.key)
            self._context.records.set(None)
            return None
        if problem.drops_tokens:
            log.info("the authorization server refused the refresh (%s): a new sign-in follows", problem)
            left = stored.without_tokens()
            self._context.records.save(left)
            return left
        raise SignInFailed(f"refresh: {problem}") from problem

    def client_credentials(
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

        choice = self._context.config.registration
        if not isinstance(choice, PreRegistered) or not choice.client_secret:
            raise ClientCredentialsRefused("no client secret")
        if choice.issuer is not None and choice.issuer != server.issuer:
            raise not_registered()
        registration = grants.client_credentials_registration(choice.client_id, choice.client_secret, server)
        client = discovery.TokenClient(self._context.web(), server, registration)
        parameter = self.resource_parameter(resource, stored)
        try:
            request = partial(client.client_credentials, scopes=scopes, now=self._context.clock())
            tokens = parameter.send(request, "token endpoint")
        except TokenProblem as problem:
            log.warning("the authorization server refused the client credentials: %s", problem)
            if problem.status in (400, 401, 403):
                raise ClientCredentialsRefused(str(problem)) from problem
            raise SignInFailed(f"client credentials: {problem}") from problem
        record = self.save(key, registration, tokens, scopes, self.refuses(parameter, stored), refresh=False)
        log.info("the bridge got a token with the client credentials")
        return record
