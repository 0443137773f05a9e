"""A person's sign-in: its settings, the gate, the browser opener and the consent of the client.

:class:`SignIn` holds what every attempt of a sign-in shares; one attempt (the receiver on
the redirect port, the sign-in line, the wait) is in :mod:`.attempt`, which loads at the
first sign-in: this module loads at each start of the URL form, for the gate.

The **gate** decides how the URL reaches the user. Before ``notifications/initialized``
the bridge opens a browser itself (unless ``--no-browser``). After it the bridge never
opens a browser: it asks the client with a URL elicitation, when the client declared
them, and not during the cooldown that follows a declined or failed consented sign-in.
"""

from __future__ import annotations

import enum
import logging
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from ..mcp.cancel import CancelToken
from ..mcp.droplog import DropLog
from ..mcp.errors import Cancelled
from .errors import OAuthError, ReauthorizationRequired, Sandbox, SignInClosed
from .identity import PROGRAM, redirect_uri

if TYPE_CHECKING:
    import subprocess

__all__ = [
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
    line = f"{PROGRAM}: sign in at {url}\n".encode("ascii")
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
        SignInClosed: the connection closed while the client was asked.
    """
    try:
        return consent.ask(url, message, elicitation_id, timeout=timeout, cancel=cancel)
    except ConsentEnded as ended:
        if ended.reason is ConsentEnd.CANCELED:
            log.info("the sign-in stopped: the client canceled the request")
            raise Cancelled(cancel.reason or None) from ended
        if ended.reason is ConsentEnd.CLOSED:
            log.info("the sign-in stopped: the connection closed")
            raise SignInClosed() from ended
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
        return redirect_uri(self.port)


class SignIn:
    """What every attempt of a sign-in shares (:func:`.attempt.start_attempt`); see the module docstring."""

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

    def asks_client(self) -> bool:
        """Pass the gate of an attempt: True when the client must be asked (a URL elicitation),
        False when the browser gets the URL.

        Raises:
            SignInError: ``sandbox`` or ``reauthorization_required`` (``cooldown`` or ``no_consent``).
        """
        if self.settings.sandbox:
            self._drops(
                logging.WARNING,
                "sign-ins that the sandbox blocks",
                "the sign-in cannot start: the bridge runs in the sandbox of VS Code",
            )
            raise Sandbox()
        return self.needs_consent()
