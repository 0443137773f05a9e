"""A person's sign-in: in the browser with PKCE, or with the device flow.

:meth:`InteractiveSignIn.run` takes the redirect port (or, when another bridge process
signs in to the same record on it, waits for that sign-in and uses its tokens), chooses
the client, and runs the flow of :meth:`.metadata.Metadata.flow_choice`:

* the browser: the authorization URL with PKCE, ``state`` and ``resource``, the
  :class:`~.signin.SignIn`, the redirect, the token request. When the authorization
  server may refuse ``resource``, the receiver holds the same request without it and
  sends the browser on to it: no second click;
* the device flow (:class:`~.device.DeviceFlow`), while the redirect port, when it is
  free, answers the probes of other processes.

A browser sign-in that the sandbox of VS Code blocks goes on with the device flow when
``--sign-in auto`` and the authorization server offers it.
"""

from __future__ import annotations

import logging
import math
import secrets
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ..mcp.deadline import Deadline
from ..mcp.errors import Cancelled
from . import flow, identity
from .attempt import Attempt, hold_port, start_attempt
from .clients import Clients
from .context import SignInContext
from .errors import (
    RedirectPortUnavailable,
    Sandbox,
    SignInAuthorizationError,
    SignInDenied,
    SignInError,
    SignInFailed,
    SignInTimeout,
)
from .flow import ResourceMetadata, ServerMetadata
from .metadata import Metadata
from .receiver import PortBusy, Receiver, probe
from .requestscope import RequestScope
from .stored import ClientRegistration, Record, RecordKey
from .tokenrequests import TokenRequests
from .tokens import TokenProblem

if TYPE_CHECKING:
    from .device import DeviceFlow
    from .discovery import ResourceParameter

__all__ = ["InteractiveSignIn", "Need"]

log = logging.getLogger("mcpbridge.oauth")

#: How much longer than the sign-in time limit a process waits for the sign-in of another one.
FOLLOW_GRACE = 10.0


@dataclass(frozen=True)
class Need:
    """One interactive sign-in that a request needs."""

    key: RecordKey
    server: ServerMetadata
    resource: ResourceMetadata
    #: The stored record of ``key`` before the sign-in (its client is reused).
    stored: Record | None
    scopes: tuple[str, ...]
    scope: RequestScope
    #: The access token that the refused request carried.
    used: str | None


class InteractiveSignIn:
    """The sign-ins of a person at one upstream URL; one runs at a time (the caller's turn).

    :param metadata: the discovered servers and the flow chosen for each.
    :param clients: the client registrations.
    :param tokens: the token requests, which store the tokens of a sign-in.
    :param device: the device sign-in; by default one is made at its first use.
    """

    def __init__(
        self,
        context: SignInContext,
        *,
        metadata: Metadata,
        clients: Clients,
        tokens: TokenRequests,
        device: DeviceFlow | None = None,
    ) -> None:
        self._context = context
        self._metadata = metadata
        self._clients = clients
        self._tokens = tokens
        self._device_flow = device

    @property
    def device(self) -> DeviceFlow:
        """The device sign-in (made at its first use; one sign-in runs at a time)."""
        if self._device_flow is None:
            from .device import DeviceFlow

            self._device_flow = DeviceFlow(self._context.sign_in)
        return self._device_flow

    def adopted(self, found: Record | None, used: str | None) -> bool:
        """Use ``found`` when it holds a usable token other than the refused ``used``.

        Another process signed in meanwhile: its tokens take effect here.
        """
        if found is not None and found.usable(self._context.clock()) and found.access_token != used:
            self._context.records.set(found)
            return True
        return False

    def run(self, need: Need) -> None:
        """Sign in with the browser, the consent of the client or the device flow; store the tokens."""
        state = flow.b64url(secrets.token_bytes(32))
        digest = need.key.digest().hex()
        device = self._metadata.flow_choice(need.server).flow == "device"
        followed = False
        while True:
            try:
                if device:
                    holder = hold_port(self._context.sign_in, state=state, probe=digest)
                else:
                    attempt = start_attempt(
                        self._context.sign_in,
                        state=state,
                        probe=digest,
                        cancel=need.scope.cancel,
                        deadline=need.scope.deadline,
                    )
            except Sandbox:
                if not self._metadata.device_after_sandbox(need.server):
                    raise
                device = True
                continue
            except PortBusy as exc:
                if followed or not self._follow(digest, need.scope):
                    if device:
                        # The device flow needs the port only to let other processes wait for it.
                        log.info(
                            "the redirect port %d is in use: the device sign-in runs without it",
                            self._context.config.port,
                        )
                        holder = None
                        break
                    log.warning(
                        "the bridge cannot listen on the redirect port %d: it is in use",
                        self._context.config.port,
                    )
                    raise RedirectPortUnavailable("address_in_use", port=self._context.config.port) from exc
                followed = True
                if self.adopted(self._context.records.load(need.key), need.used):
                    log.info("uses the sign-in of the other bridge process")
                    return
                continue
            break
        if device:
            self._device(holder, need)
        else:
            self._browser(attempt, state, need)

    def _browser(self, attempt: Attempt, state: str, need: Need) -> None:
        """Sign in with the browser on ``attempt`` and store the tokens."""
        from . import discovery

        with attempt:
            registration = self._client(need)
            if registration is None:
                return
            resource = self._tokens.resource_parameter(need.resource.resource, need.stored)
            code, verifier = self._authorize(attempt, need, registration, state, resource)
            client = discovery.TokenClient(self._context.web(), need.server, registration)
            try:
                exchange = partial(
                    client.exchange_code,
                    code=code,
                    verifier=verifier,
                    redirect=self._context.config.redirect_uri,
                    now=self._context.clock(),
                )
                tokens = resource.send(exchange, "token endpoint")
            except TokenProblem as problem:
                log.warning("the token request of the sign-in failed: %s", problem)
                raise self._tokens.refused(need.key, problem, "token request") from problem
            self._tokens.save(
                need.key, registration, tokens, need.scopes, self._tokens.refuses(resource, need.stored)
            )
            attempt.succeeded()
        log.info("the sign-in succeeded")

    def _authorize(
        self,
        attempt: Attempt,
        need: Need,
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
        return _code(redirect, need.server), verifier

    def _authorization_url(
        self, need: Need, registration: ClientRegistration, state: str, verifier: str, resource: str | None
    ) -> str:
        return flow.build_authorization_url(
            need.server,
            client_id=registration.client_id,
            redirect=self._context.config.redirect_uri,
            state=state,
            challenge=flow.code_challenge(verifier),
            resource=resource,
            scopes=need.scopes,
        )

    def _device(self, holder: Receiver | None, need: Need) -> None:
        """Sign in with the device flow while ``holder`` answers the probes of other processes."""
        from . import discovery

        succeeded = False
        try:
            registration = self._client(need, device=True)
            if registration is None:
                return
            resource = self._tokens.resource_parameter(need.resource.resource, need.stored)
            try:
                tokens = self.device.run(
                    discovery.TokenClient(self._context.web(), need.server, registration),
                    resource=resource,
                    scopes=need.scopes,
                    cancel=need.scope.cancel,
                    deadline=need.scope.deadline,
                    now=self._context.clock,
                )
            except TokenProblem as problem:
                log.warning("the device sign-in failed at the authorization server: %s", problem)
                raise self._tokens.refused(need.key, problem, "device sign-in") from problem
            self._tokens.save(
                need.key, registration, tokens, need.scopes, self._tokens.refuses(resource, need.stored)
            )
            succeeded = True
        finally:
            if holder is not None:
                holder.finish(succeeded)
                holder.stop()
        log.info("the sign-in succeeded")

    def _client(self, need: Need, *, device: bool = False) -> ClientRegistration | None:
        """The client of the sign-in, or None when another process signed in before this one got the port."""
        found = self._context.records.load(need.key)
        if self.adopted(found, need.used):
            return None
        try:
            return self._clients.registration(
                need.server, found if found is not None else need.stored, device=device
            )
        except SignInError as exc:
            log.warning("the sign-in cannot start: no client registration (%s)", exc.detail or exc.cause)
            raise

    def _follow(self, digest: str, scope: RequestScope) -> bool:
        """Wait for the sign-in of another process on the redirect port; False when there is none."""
        answer = probe(self._context.config.port, digest)
        if answer is None:
            return False
        log.info("another bridge process signs in to the same account: this process waits for it")
        limit = Deadline(self._context.sign_in.settings.timeout + FOLLOW_GRACE, until=scope.deadline)
        while answer == "pending":
            if scope.cancel is not None and scope.cancel.cancelled:
                raise Cancelled(scope.cancel.reason or None)
            if limit.expired:
                seconds = max(1, math.ceil(self._context.sign_in.settings.timeout))
                raise SignInTimeout(seconds=seconds, name=identity.PROGRAM)
            answer = probe(self._context.config.port, digest)
        return True


def _code(redirect: flow.Redirect, server: ServerMetadata) -> str:
    """The authorization code of ``redirect``, checked; the error of a redirect that brings none."""
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
