"""The client of a sign-in at an authorization server, and its secret.

The client is the one of ``--client-id`` (bound to ``--client-issuer``, or else to the first
authorization server that the upstream server names), the stored one, a client ID metadata
document, or a new dynamic registration. The secret of ``--client-id`` goes only to the
issuer of ``--client-issuer`` and is never stored.
"""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlsplit

from . import urls
from .config import ClientMetadataDocument, PreRegistered
from .context import SignInContext
from .errors import InvalidClientMetadataUrl, IssuerNotRegistered
from .flow import ServerMetadata
from .stored import ClientRegistration, Record
from .tokens import choose_auth_method

__all__ = ["Clients", "not_registered"]

log = logging.getLogger("mcpbridge.oauth")


def not_registered() -> IssuerNotRegistered:
    """The error of a client of ``--client-id`` at another authorization server than its own; logged."""
    log.warning("the client ID of --client-id is not for the authorization server of the upstream server")
    return IssuerNotRegistered()


class Clients:
    """The client registrations of the sign-ins of one upstream URL."""

    def __init__(self, context: SignInContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        #: The authorization server that a client of ``--client-id`` without ``--client-issuer``
        #: bound to (guarded by ``_lock``).
        self._bound_issuer: str | None = None

    def registration(
        self, server: ServerMetadata, stored: Record | None, *, device: bool = False
    ) -> ClientRegistration:
        """The client for ``server``: pre-registered, stored, a metadata document, or a new registration."""
        from . import discovery

        choice = self._context.config.registration
        if isinstance(choice, PreRegistered):
            with self._lock:
                issuer = choice.issuer or self._bound_issuer
                if issuer is None:
                    self._bound_issuer = issuer = server.issuer
            if issuer != server.issuer:
                raise not_registered()
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
        return discovery.register(
            self._context.web(), server, self._context.config.redirect_uri, device=device
        )

    def stored(self, registration: ClientRegistration) -> ClientRegistration:
        """The registration as stored: never the secret of ``--client-id``."""
        if isinstance(self._context.config.registration, PreRegistered):
            return ClientRegistration(registration.client_id, None, registration.auth_method)
        return registration

    def with_secret(self, registration: ClientRegistration, server: ServerMetadata) -> ClientRegistration:
        """A stored registration with the secret of ``--client-id`` when ``server`` is its issuer."""
        choice = self._context.config.registration
        if isinstance(choice, PreRegistered) and choice.issuer == server.issuer and choice.client_secret:
            return ClientRegistration(registration.client_id, choice.client_secret, registration.auth_method)
        return registration
