"""One device sign-in (RFC 8628): the code, the person signs in elsewhere, the bridge polls.

Theory of operation
-------------------

:meth:`DeviceFlow.run`:

1. checks the gate as a browser sign-in does: after ``notifications/initialized``
   only a client that declared URL elicitations can be asked, and not during the
   cooldown after a declined or failed sign-in (:meth:`.signin.SignIn.needs_consent`);
2. asks the device authorization endpoint for a device code and a user code;
3. shows the person the verification URI and the user code: the sign-in line on
   stderr always, and after ``notifications/initialized`` a URL elicitation to the
   client with the complete verification URI when the server gave one (the code is
   in the message), so that the client opens the page on the machine of the person;
4. polls the token endpoint at the interval of the server until the tokens come,
   the person refuses, the code expires, the sign-in time limit or the end of the
   request passes, or the request is canceled (the end of the input cancels it).

The ``device_code`` never reaches stderr, a log line or an error. Two bridges
started at once run one device flow: the caller (:class:`~.authorizer.OAuthAuthorizer`)
holds the redirect port as it does for the browser flow, and a second process
that finds it busy waits for the first and reuses its stored tokens.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ..mcp.cancel import CancelToken
from ..mcp.deadline import Deadline
from ..mcp.errors import Cancelled
from . import grants, identity
from .errors import ReauthorizationRequired, SignInClosed, SignInDenied, SignInTimeout
from .grants import DeviceAuthorization
from .signin import SignIn, ask_consent
from .tokens import TokenResponse

if TYPE_CHECKING:
    from .discovery import ResourceParameter, TokenClient

__all__ = ["DeviceFlow", "write_line"]

log = logging.getLogger("mcpbridge.oauth")


def write_line(line: str) -> None:
    """Write one whole line to stderr with one write."""
    try:
        sys.stderr.buffer.write(line.encode("ascii", "replace"))
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


class DeviceFlow:
    """The device sign-ins of one authorizer; see the module docstring.

    :param sign_in: the settings (the sign-in time limit) and the gate of the sign-ins.
    :param write: writes the sign-in line (stderr).
    :param clock: ``time.monotonic`` (the waits); the token expiry uses ``now`` of :meth:`run`.
    """

    def __init__(
        self,
        sign_in: SignIn,
        *,
        write: Callable[[str], None] = write_line,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sign_in = sign_in
        self._write = write
        self._clock = clock

    def run(
        self,
        client: TokenClient,
        *,
        resource: ResourceParameter,
        scopes: Sequence[str],
        cancel: CancelToken | None,
        deadline: float | None,
        now: Callable[[], float],
    ) -> TokenResponse:
        """Sign in with a device code; the tokens.

        :param resource: the ``resource`` of the device authorization and token requests; a
            refusal of it at either leaves it out of the rest of the sign-in.
        :param deadline: the end of the request that needs the sign-in (``time.monotonic``).
        :param now: Unix seconds, for the expiry of the tokens.

        Raises:
            SignInError: ``reauthorization_required`` (``cooldown``, ``no_consent``,
                ``declined``), ``sign_in_denied``, ``sign_in_timeout``,
                ``sign_in_invalid_url`` or ``sign_in_failed``.
            tokens.TokenProblem: the token endpoint refused the client (the caller decides).
            Cancelled: the request was canceled (also by the end of the input).
        """
        gate = self._sign_in.gate
        ask = self._sign_in.needs_consent()
        started = self._clock()
        authorization = resource.send(partial(client.request_device_code, scopes=scopes), "device endpoint")
        # The time limit counts from before the answer of the device endpoint, which names the code's life.
        end = started + min(self._sign_in.settings.timeout, authorization.expires_in)
        if deadline is not None:
            end = min(end, deadline)
        seconds = max(1, math.ceil(end - started - 1e-6))
        limit = Deadline(None, until=end, clock=self._clock)
        self._write(grants.device_sign_in_line(authorization))
        log.info("the sign-in waits for the person to enter the code at the page of the authorization server")
        token = cancel if cancel is not None else CancelToken()
        if not ask:
            return self._poll(client, authorization, resource, token, limit, seconds, now)
        consent = gate.consent
        assert consent is not None
        elicitation_id = consent.new_elicitation_id()
        accepted = ask_consent(
            consent,
            authorization.page,
            grants.device_message(authorization),
            elicitation_id,
            timeout=limit.remaining,
            cancel=token,
        )
        if not accepted:
            log.info("the client did not open the page of the sign-in")
            gate.start_cooldown()
            raise ReauthorizationRequired("declined")
        try:
            tokens = self._poll(client, authorization, resource, token, limit, seconds, now)
        except (Cancelled, SignInClosed):
            raise
        except Exception:
            gate.start_cooldown()
            raise
        finally:
            consent.complete(elicitation_id)
        gate.clear_cooldown()
        return tokens

    def _poll(
        self,
        client: TokenClient,
        authorization: DeviceAuthorization,
        resource: ResourceParameter,
        cancel: CancelToken,
        limit: Deadline,
        seconds: int,
        now: Callable[[], float],
    ) -> TokenResponse:
        interval = authorization.interval
        polls = 0
        while True:
            if limit.remaining < interval:  # the next poll would come after the time limit
                log.warning("the sign-in did not complete in %d s", seconds)
                raise SignInTimeout(seconds=seconds, name=identity.PROGRAM)
            if cancel.wait(interval):
                log.info("the sign-in stopped: %s", cancel.reason or "the request was canceled")
                raise Cancelled(cancel.reason or None)
            polls += 1
            try:
                poll = resource.send(
                    partial(client.poll_device_token, authorization, interval=interval, now=now()),
                    "token endpoint",
                )
            except grants.DeviceDenied as exc:
                log.warning("the person refused the access at the authorization server")
                raise SignInDenied() from exc
            except grants.DeviceExpired as exc:
                log.warning("the code of the sign-in expired before the person signed in")
                raise SignInTimeout(seconds=seconds, name=identity.PROGRAM) from exc
            if poll.tokens is not None:
                log.debug("the device sign-in got its tokens after %d token requests", polls)
                return poll.tokens
            if poll.interval != interval:
                log.info("the authorization server asked for slower polling: every %d s", poll.interval)
            interval = poll.interval
