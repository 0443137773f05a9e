"""One attempt of a person's sign-in: the checks, the receiver, the sign-in line and the wait.

It loads at the first sign-in, with the receiver, not at each start of the bridge; what
the attempts share (the settings, the gate, the opener) is the :class:`~.signin.SignIn`.

Theory of operation
-------------------

:func:`start_attempt` returns an :class:`Attempt`, a context manager that
owns the receiver of one sign-in:

1. A sign-in in the sandbox of VS Code (``SANDBOX_RUNTIME=1``, or a redirect port that
   the bridge may not listen on) fails with ``sandbox``; the authorizer then takes the
   device flow when it may.
2. The authorization URL is checked (:func:`.urls.authorization_url_problem`)
   before anything writes, elicits or opens it.
3. The **gate** decides how the URL reaches the user. Before
   ``notifications/initialized`` the bridge opens a browser itself (unless
   ``--no-browser``), and the browser gets only the one-time start URL. After
   it the bridge never opens a browser: it asks the client with a URL
   elicitation, when the client declared them, and not during the cooldown
   that follows a declined or failed consented sign-in.
4. The receiver listens on the redirect port before anything is written.
5. :meth:`Attempt.wait` writes the one sign-in line, opens the browser or asks
   the client, and waits for the redirect until the sign-in time limit.

Leaving the ``with`` block stops the receiver. Only one attempt runs at a
time: the caller (:class:`~.authorizer.OAuthAuthorizer`) holds its sign-in lock.
"""

from __future__ import annotations

import enum
import errno
import logging
import math
from types import TracebackType

from ..mcp.cancel import CancelToken
from ..mcp.deadline import Deadline
from ..mcp.errors import Cancelled
from . import identity, urls
from .errors import (
    ReauthorizationRequired,
    RedirectPortUnavailable,
    Sandbox,
    SignInClosed,
    SignInInvalidUrl,
    SignInStartReused,
    SignInTimeout,
)
from .flow import Redirect
from .receiver import ListenFailed, Receiver, StartReused, WaitEnd, WaitEnded
from .signin import CONSENT_MESSAGE, SignIn, ask_consent

__all__ = ["Attempt", "hold_port", "start_attempt"]

log = logging.getLogger("mcpbridge.oauth")


class _Delivery(enum.Enum):
    BROWSER = "browser"
    ELICITATION = "elicitation"


def start_attempt(
    sign_in: SignIn,
    *,
    state: str,
    probe: str | None,
    cancel: CancelToken | None,
    deadline: float | None,
) -> Attempt:
    """Pass the gate and listen on the redirect port.

    The port is taken before the client of the sign-in is chosen, so that a
    second process that finds it busy waits for this sign-in and registers
    no client of its own.

    :param deadline: the end of the request that needs the sign-in (``time.monotonic``).

    Raises:
        PortBusy: another program listens on the redirect port.
        SignInError: ``sandbox``, ``reauthorization_required`` (``cooldown`` or
            ``no_consent``) or ``redirect_port_unavailable``.
    """
    settings = sign_in.settings
    delivery = _Delivery.ELICITATION if sign_in.asks_client() else _Delivery.BROWSER
    receiver = Receiver(
        settings.port,
        state=state,
        start=delivery is _Delivery.BROWSER and not settings.no_browser,
        probe=probe,
    )
    try:
        receiver.listen()
    except ListenFailed as exc:
        if _refused_by_sandbox(exc, settings.port):
            log.warning(
                "the bridge may not listen on the redirect port %d (%s): it runs in a sandbox",
                settings.port,
                exc,
            )
            raise Sandbox() from exc
        log.warning("the bridge cannot listen on the redirect port %d: %s", settings.port, exc)
        raise RedirectPortUnavailable("listen_failed", port=settings.port) from exc
    return Attempt(sign_in, receiver, delivery, cancel, deadline)


def hold_port(sign_in: SignIn, *, state: str, probe: str) -> Receiver | None:
    """Listen on the redirect port for a sign-in without a browser (the device flow).

    The receiver answers the probes of another bridge process, so that it waits
    for this sign-in; it makes no start URL. ``None`` when the port cannot be
    listened on for another reason than a busy port: the sign-in runs without it.

    Raises:
        PortBusy: another program listens on the redirect port.
    """
    receiver = Receiver(sign_in.settings.port, state=state, start=False, probe=probe)
    try:
        receiver.listen()
    except ListenFailed as exc:
        log.info("the device sign-in runs without the redirect port %d: %s", sign_in.settings.port, exc)
        return None
    return receiver


def _refused_by_sandbox(exc: ListenFailed, port: int) -> bool:
    """Whether a port that a user may bind (from 1024) was refused with EACCES or EPERM: a
    sandbox (VS Code's, where the server has no ``SANDBOX_RUNTIME``) forbids listening."""
    cause = exc.__cause__
    return port >= 1024 and isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM)


class Attempt:
    """One sign-in that listens on the redirect port; leave its ``with`` block to stop it."""

    def __init__(
        self,
        sign_in: SignIn,
        receiver: Receiver,
        delivery: _Delivery,
        cancel: CancelToken | None,
        deadline: float | None,
    ) -> None:
        self._sign_in = sign_in
        self.receiver = receiver
        self._delivery = delivery
        self._cancel = cancel
        self._request_deadline = deadline
        self._asked = False
        self._succeeded = False

    def __enter__(self) -> Attempt:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        gate = self._sign_in.gate
        if self._succeeded:
            gate.clear_cooldown()
        elif (
            self._asked
            and not isinstance(exc, Cancelled)
            and not isinstance(exc, SignInClosed)
        ):
            gate.start_cooldown()
        self.receiver.finish(self._succeeded)
        self.receiver.stop()

    def succeeded(self) -> None:
        """The tokens are stored: a waiting process may read them now."""
        self._succeeded = True
        self.receiver.finish(True)

    def wait(
        self, authorization_url: str, *, fallback: tuple[str, str] | None = None, local: bool = False
    ) -> Redirect:
        """Check the URL, write the sign-in line, deliver the URL and wait for the redirect.

        The URL is checked before anything writes, elicits or opens it; it must
        have a ``state`` and the redirect URI of the receiver.

        :param local: the upstream server is on loopback: an authorization URL on loopback may
            be http (:func:`.urls.local_upstream`).
        :param fallback: the ``state`` and the URL of the same authorization request without
            ``resource``, checked as well: the receiver sends the browser there when the
            server refuses ``resource`` (:meth:`.receiver.Receiver.set_fallback`).

        Raises:
            SignInError: ``sign_in_invalid_url``, ``sign_in_timeout``, ``sign_in_start_reused``,
                ``reauthorization_required`` (``declined``), ``sign_in_failed`` (``closed``).
            Cancelled: the request was canceled.
        """
        settings = self._sign_in.settings
        for url in [authorization_url] + ([fallback[1]] if fallback is not None else []):
            problem = urls.authorization_url_problem(
                url, expected_redirect_uri=settings.redirect_uri, local=local
            )
            if problem is not None:
                log.warning(
                    "the authorization URL is not valid (%s), thus the bridge does not open it", problem
                )
                raise SignInInvalidUrl(problem)
        self.receiver.set_authorization_url(authorization_url)
        if fallback is not None:
            self.receiver.set_fallback(*fallback)
        self._sign_in.write_line(authorization_url)
        deadline = Deadline(settings.timeout, until=self._request_deadline)
        seconds = max(1, math.ceil(deadline.span - 1e-6))
        opened = True
        if self._delivery is _Delivery.BROWSER:
            if not settings.no_browser:
                start_url = self.receiver.start_url
                assert start_url is not None
                opened = self._sign_in.opener.open(start_url)
                if not opened:
                    log.warning("the browser did not open: open the URL of the sign-in line in a browser")
            return self._wait_redirect(deadline, seconds, opened)
        consent = self._sign_in.gate.consent
        assert consent is not None
        elicitation_id = consent.new_elicitation_id()
        cancel = self._cancel if self._cancel is not None else CancelToken()
        self._asked = True
        accepted = ask_consent(
            consent,
            authorization_url,
            CONSENT_MESSAGE,
            elicitation_id,
            timeout=deadline.remaining,
            cancel=cancel,
        )
        if not accepted:
            log.info("the client did not open the URL of the sign-in")
            raise ReauthorizationRequired("declined")
        try:
            return self._wait_redirect(deadline, seconds, True)
        finally:
            consent.complete(elicitation_id)

    def _wait_redirect(self, deadline: Deadline, seconds: int, opened: bool) -> Redirect:
        try:
            return self.receiver.wait(deadline, self._cancel)
        except StartReused as exc:
            log.warning(
                "the start URL of the sign-in received a second request, thus the bridge stopped the sign-in"
            )
            raise SignInStartReused() from exc
        except WaitEnded as ended:
            if ended.reason is WaitEnd.CANCELED:
                reason = self._cancel.reason if self._cancel is not None else ""
                log.info("the sign-in stopped: %s", reason or "the request was canceled")
                raise Cancelled(reason or None) from ended
            if ended.reason is WaitEnd.STOPPED:
                log.info("the sign-in stopped: the connection closed")
                raise SignInClosed() from ended
            text = f"The sign-in did not complete in {seconds} s."
            if not opened:
                text += " The browser did not open. Open the URL of the sign-in line in a browser."
            log.warning("%s", text)
            raise SignInTimeout(seconds=seconds, name=identity.PROGRAM) from ended
