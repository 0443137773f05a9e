"""One interactive sign-in: the checks, the receiver, the sign-in line, the gate and the wait.

Theory of operation
-------------------

:meth:`SignIn.attempt` returns an :class:`Attempt`, a context manager that
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
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Protocol

from ..mcp.cancel import CancelToken
from ..mcp.deadline import Deadline
from ..mcp.droplog import DropLog
from ..mcp.errors import Cancelled
from . import flow, urls
from .errors import (
    OAuthError,
    ReauthorizationRequired,
    RedirectPortUnavailable,
    Sandbox,
    SignInFailed,
    SignInInvalidUrl,
    SignInStartReused,
    SignInTimeout,
)
from .flow import Redirect
from .receiver import ListenFailed, Receiver, StartReused, WaitEnd, WaitEnded

if TYPE_CHECKING:
    import subprocess

__all__ = [
    "Attempt",
    "Consent",
    "ConsentEnd",
    "ConsentEnded",
    "Gate",
    "Opener",
    "SignIn",
    "SignInSettings",
    "write_sign_in_line",
]

log = logging.getLogger("mcpbridge.oauth")

#: The cooldown after a declined or failed sign-in that the user was asked for.
COOLDOWN_SECONDS: Final = 60.0
#: The opener waits this long for the exit status of the browser program.
OPENER_WAIT: Final = 3.0
CONSENT_MESSAGE: Final = (
    "The upstream server needs a new sign-in. Open the page of its authorization server to sign in."
)


def write_sign_in_line(url: str) -> None:
    """Write ``mcp-bridge-vscode: sign in at <url>`` to stderr with one write."""
    line = f"{flow.PROGRAM}: sign in at {url}\n".encode("ascii")
    try:
        sys.stderr.buffer.write(line)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


# ---------------------------------------------------------------------------------------------
# The opener
# ---------------------------------------------------------------------------------------------


class Opener:
    """Open a URL in the browser of the user.

    It starts ``$BROWSER`` (when set and not empty), else ``open`` on macOS or
    ``xdg-open``, with the URL as the only argument, without a shell, with
    stdin and stdout on the null device, and without the secret variables in
    its environment. A program that exits with a status other than 0 within
    :data:`OPENER_WAIT` seconds failed; one that still runs succeeded. On
    Windows it calls ``ShellExecuteW`` with the URL as one argument (never
    ``cmd /c start``), after it removed the secret variables from the
    environment of the bridge, which the browser inherits.

    :param env: the environment of the bridge.
    :param secret_names: the variables that the program must not get.
    """

    def __init__(
        self, env: Mapping[str, str], secret_names: Collection[str], *, wait: float = OPENER_WAIT
    ) -> None:
        self._env = {k: v for k, v in env.items() if k not in secret_names}
        self._secret_names = frozenset(secret_names)
        self._wait = wait

    def open(self, url: str) -> bool:
        """Open ``url``; tell whether that worked."""
        from .. import platform  # the command of each system: see platform.browser_command

        command = platform.browser_command(url, self._env, sys.platform)
        if command[0] == platform.SHELL_EXECUTE:
            try:
                platform.shell_open(url, forget=self._secret_names)
            except OSError:
                return False
            return True
        import subprocess  # loaded at the first browser, not by every start of the bridge

        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=self._env,
                close_fds=True,
                start_new_session=True,
            )
        except OSError:
            return False
        try:
            status = child.wait(self._wait)
        except subprocess.TimeoutExpired:
            # A browser that keeps running (the program is the browser itself). It is
            # reaped by a later call; it is never stopped.
            with _RUNNING_LOCK:
                _RUNNING.append(child)
            return True
        finally:
            _reap()
        return status == 0


#: Browser programs that still ran after the wait of the opener.
_RUNNING: list[subprocess.Popen[bytes]] = []
_RUNNING_LOCK = threading.Lock()


def _reap() -> None:
    with _RUNNING_LOCK:
        _RUNNING[:] = [child for child in _RUNNING if child.poll() is None]


# ---------------------------------------------------------------------------------------------
# The consent of the client and the gate
# ---------------------------------------------------------------------------------------------


class ConsentEnd(str, enum.Enum):
    """Why the question to the client ended without an answer."""

    CANCELED = "canceled"
    #: No answer in time.
    TIMEOUT = "timeout"
    #: The connection to the client closed.
    CLOSED = "closed"


class ConsentEnded(OAuthError):
    """The question to the client ended without an answer; ``reason`` says why."""

    def __init__(self, reason: ConsentEnd) -> None:
        super().__init__(reason.value)
        self.reason = reason


def ask_consent(
    consent: Consent, url: str, message: str, elicitation_id: str, *, timeout: float, cancel: CancelToken
) -> bool:
    """Ask the client to open ``url``; True when it accepted.

    Raises:
        Cancelled: the client canceled the request.
        SignInFailed: the connection closed while the client was asked.
    """
    try:
        return consent.ask(url, message, elicitation_id, timeout=timeout, cancel=cancel)
    except ConsentEnded as ended:
        if ended.reason is ConsentEnd.CANCELED:
            log.info("the sign-in stopped: the client canceled the request")
            raise Cancelled(cancel.reason or None) from ended
        if ended.reason is ConsentEnd.CLOSED:
            log.info("the sign-in stopped: the connection closed")
            raise SignInFailed("closed") from ended
        return False


class Consent(Protocol):
    """How a sign-in after start-up asks the client (a URL elicitation)."""

    def url_elicitation(self) -> bool:
        """Whether the client declared URL elicitations."""
        ...

    def new_elicitation_id(self) -> str: ...

    def ask(
        self, url: str, message: str, elicitation_id: str, *, timeout: float, cancel: CancelToken
    ) -> bool:
        """Ask the client to open ``url``; True when it accepted.

        Raises:
            ConsentEnded: canceled, no answer in time, or the connection closed.
        """
        ...

    def complete(self, elicitation_id: str) -> None:
        """Tell the client that the elicitation is over."""
        ...


class Gate:
    """Before ``notifications/initialized`` the bridge may open a browser; after it only the client may.

    :param clock: ``time.monotonic`` (tests give another clock).
    """

    def __init__(
        self, consent: Consent | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.consent = consent
        self._clock = clock
        self._lock = threading.Lock()
        self._initialized = False
        self._cooldown_until: float | None = None

    def client_initialized(self) -> None:
        """The hook of ``notifications/initialized``: from now on, only with consent.

        A client without URL elicitation is told of at the sign-in that needs it
        (:meth:`SignIn.needs_consent`), not here: most servers never need one.
        """
        with self._lock:
            self._initialized = True

    @property
    def initialized(self) -> bool:
        with self._lock:
            return self._initialized

    def in_cooldown(self) -> bool:
        with self._lock:
            return self._cooldown_until is not None and self._clock() < self._cooldown_until

    def start_cooldown(self) -> None:
        with self._lock:
            self._cooldown_until = self._clock() + COOLDOWN_SECONDS

    def clear_cooldown(self) -> None:
        with self._lock:
            self._cooldown_until = None


# ---------------------------------------------------------------------------------------------
# The sign-in
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignInSettings:
    """The options of the sign-in."""

    port: int
    #: ``--sign-in-timeout`` in seconds.
    timeout: float
    no_browser: bool = False
    #: ``SANDBOX_RUNTIME=1``.
    sandbox: bool = False

    @property
    def redirect_uri(self) -> str:
        return flow.redirect_uri(self.port)


class _Delivery(enum.Enum):
    BROWSER = "browser"
    ELICITATION = "elicitation"


class SignIn:
    """Makes the attempts of the sign-in; see the module docstring."""

    def __init__(
        self,
        settings: SignInSettings,
        gate: Gate,
        opener: Opener,
        *,
        write_line: Callable[[str], None] = write_sign_in_line,
    ) -> None:
        self.settings = settings
        self.gate = gate
        self.opener = opener
        self.write_line = write_line
        #: The sign-ins that did not start: each request that needs one can make another.
        self._drops = DropLog(log)

    def _not_started(self, why: str) -> None:
        self._drops(logging.INFO, "sign-ins that did not start", "the sign-in did not start: %s", why)

    def needs_consent(self) -> bool:
        """Whether a sign-in now must ask the client (after ``notifications/initialized``).

        Raises:
            ReauthorizationRequired: ``cooldown`` or ``no_consent``: the client cannot be asked.
        """
        if not self.gate.initialized:
            return False
        consent = self.gate.consent
        if self.gate.in_cooldown():
            self._not_started("a sign-in was declined or failed less than 60 s ago")
            raise ReauthorizationRequired("cooldown")
        if consent is None or not consent.url_elicitation():
            self._not_started(
                "the client did not declare URL elicitation, thus it cannot be asked; a restart of the "
                "server signs in again"
            )
            raise ReauthorizationRequired("no_consent")
        return True

    def attempt(
        self,
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
        settings = self.settings
        if settings.sandbox:
            self._drops(
                logging.WARNING,
                "sign-ins that the sandbox blocks",
                "the sign-in cannot start: the bridge runs in the sandbox of VS Code",
            )
            raise Sandbox()
        delivery = _Delivery.ELICITATION if self.needs_consent() else _Delivery.BROWSER
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
        return Attempt(self, receiver, delivery, cancel, deadline)

    def hold(self, *, state: str, probe: str) -> Receiver | None:
        """Listen on the redirect port for a sign-in without a browser (the device flow).

        The receiver answers the probes of another bridge process, so that it waits
        for this sign-in; it makes no start URL. ``None`` when the port cannot be
        listened on for another reason than a busy port: the sign-in runs without it.

        Raises:
            PortBusy: another program listens on the redirect port.
        """
        receiver = Receiver(self.settings.port, state=state, start=False, probe=probe)
        try:
            receiver.listen()
        except ListenFailed as exc:
            log.info("the device sign-in runs without the redirect port %d: %s", self.settings.port, exc)
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
            and not (isinstance(exc, SignInFailed) and exc.detail == "closed")
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
                raise SignInFailed("closed") from ended
            text = f"The sign-in did not complete in {seconds} s."
            if not opened:
                text += " The browser did not open. Open the URL of the sign-in line in a browser."
            log.warning("%s", text)
            raise SignInTimeout(seconds=seconds, name=flow.PROGRAM) from ended
