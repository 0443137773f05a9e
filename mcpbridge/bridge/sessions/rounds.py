"""What a forwarded request does beside the upstream exchange: the input rounds and the progress.

Theory of operation
-------------------

A request of the client that the upstream server answers with input requests
gets a :class:`Rounds`: each round's input requests go to the client as the
bridge's own ``b-`` requests (the rules of :mod:`.rules.input` check and plan them),
the answers are checked, and the next upstream request carries them. A
:class:`ProgressForwarder` gives the upstream progress of the request to the
client's progress token, rate limited.

Both speak to the client only through a :class:`RoundsHost`: the output, the
``b-`` pending table, the client's capabilities and the time limit of the
client's answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...mcp.droplog import DropLog
from ...mcp.errorbase import BridgeError
from ...mcp.errors import Cancelled
from ...mcp.protocol import ELICITATION_COMPLETE
from ...mcp.rate import RateWindow
from ...mcp.text import format_duration
from ..front.options import Options
from ..front.output import Host, Slot, Waiting
from ..front.pending import PendingAnswers, WaitEnded, WaitReason
from ..rules import revisions, translate
from ..rules.roundfailures import InputError

if TYPE_CHECKING:
    from ..rules.input import Outgoing, Session

__all__ = ["Obsolete", "ProgressForwarder", "Rounds", "RoundsHost", "Silent"]

log = logging.getLogger("mcpbridge.bridge")
#: The lines of the rounds that a peer can make repeat: dropped progress, refused input requests.
_drops = DropLog(log)


class RoundsHost(Protocol):
    """What the input rounds need of the front end."""

    @property
    def options(self) -> Options: ...

    @property
    def output(self) -> Host: ...

    @property
    def pending(self) -> PendingAnswers: ...

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities of the client, in the terms of its revision."""
        ...

    @property
    def client_revision(self) -> revisions.Revision:
        """The revision that the client speaks: every frame for it is shaped for it."""
        ...

    @property
    def upstream_lost(self) -> bool:
        """True once the connection closes because the upstream server stopped."""
        ...

    def next_elicitation_id(self) -> str: ...


class Silent(BridgeError):
    """The request ends without a response (the connection is closing)."""


class Obsolete(BridgeError):
    """The upstream server no longer needs the answers of the round (its task moved on)."""


class Rounds:
    """The input rounds of one forwarded request: ask the client, check, retry upstream.

    A task of the upstream server reuses them for the input requests it has while it
    runs (module ``taskdriver``): ``max_rounds`` is then its own bound, and
    ``related_task`` names the task in the ``_meta`` of each request to the client.
    """

    def __init__(
        self,
        host: RoundsHost,
        slot: Slot,
        params: dict[str, Any],
        *,
        max_rounds: int | None = None,
        related_task: str | None = None,
    ) -> None:
        self.host = host
        self.slot = slot
        self.original = params
        self.params = params
        self.sent_state = False
        self.related_task = related_task
        self._max_rounds = max_rounds
        self._session: Session | None = None

    @property
    def session(self) -> Session:
        """The plan of the rounds (:mod:`~.rules.input`), made with its rules at the first
        round that asks: most requests ask nothing and never load them."""
        if self._session is None:
            from ..rules.input import MAX_ROUNDS, ClientKinds, Session

            host = self.host
            self._session = Session(
                ClientKinds.from_capabilities(host.client_capabilities),
                host.next_elicitation_id,
                host.client_revision,
                max_rounds=MAX_ROUNDS if self._max_rounds is None else self._max_rounds,
            )
        return self._session

    @property
    def count(self) -> int:
        """The rounds that asked the client so far."""
        return 0 if self._session is None else self._session.rounds

    def after_result(self, result: dict[str, Any]) -> None:
        """Complete the URL elicitations that the new result no longer asks for."""
        if self._session is None:  # no round asked: no URL to complete
            return
        for elicitation_id in self._session.completions_after_round(result):
            self.host.output.write_notification(ELICITATION_COMPLETE, {"elicitationId": elicitation_id})

    def failed(self) -> None:
        if self._session is None:
            return
        for elicitation_id in self._session.completions_on_failure():
            self.host.output.write_notification(ELICITATION_COMPLETE, {"elicitationId": elicitation_id})

    def next_round(self, result: dict[str, Any]) -> None:
        """Run one round: raises InputError, ClientFailed, Cancelled or Silent on failure."""
        from ..rules.input import retry_params

        responses, request_state = self.answer(result)
        self.params = retry_params(self.original, responses, request_state)
        self.sent_state = request_state is not None

    def answer(
        self, result: dict[str, Any], *, still: tuple[float, Callable[[], bool]] | None = None
    ) -> tuple[dict[str, Any] | None, str | None]:
        """Ask the client the input requests of ``result``; give the ``inputResponses`` and the
        ``requestState`` to send back. Raises as :meth:`next_round`, and :class:`Obsolete`
        when ``still`` (seconds, check) finds the answers no longer wanted while they wait."""
        planned = self.session.plan_round(result)
        for warning in planned.warnings:
            _drops(logging.WARNING, "refused input requests of the upstream server", "%s", warning)
        answers: dict[str, Any] = {}
        if planned.outgoing:
            answers = self._ask(planned.outgoing, still)
        return self.session.input_responses(answers), planned.request_state

    def _ask(
        self, outgoing: tuple[Outgoing, ...], still: tuple[float, Callable[[], bool]] | None = None
    ) -> dict[str, Any]:
        host = self.host
        self.slot.waiting_for = Waiting.CLIENT
        self.slot.next_report = time.monotonic() - self.slot.started + 10.0
        timeout = host.options.timeouts.input
        try:
            got = host.pending.ask(
                host.output,
                [(request.method, self._tagged(request.params)) for request in outgoing],
                timeout=timeout,
                cancel=self.slot.cancel,
                closed_reason=self._closed_reason,
                still=still,
            )
        except WaitEnded as ended:
            if ended.reason is WaitReason.TIMEOUT:
                raise InputError(
                    "input_timeout",
                    f"no answers in {format_duration(timeout)} "
                    f"(input requests of the round: {len(outgoing)})",
                ) from ended
            if ended.reason is WaitReason.CANCELED:
                raise Cancelled() from ended
            if ended.reason is WaitReason.OBSOLETE:
                raise Obsolete() from ended
            if not host.upstream_lost:
                # The end of the input: the client can answer no more, and the request that
                # waited for it is answered now, as every request asked before the end.
                raise InputError("input_ended", "the client can answer the input requests no more") from ended
            raise Silent() from ended
        finally:
            self.slot.waiting_for = Waiting.UPSTREAM
        return {request.key: answer for request, answer in zip(outgoing, got, strict=True)}

    def _tagged(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """The params of a request to the client, with the task it serves in ``_meta``."""
        if self.related_task is None:
            return params
        from ..rules.tasks import related

        return related(params, self.related_task)

    def _closed_reason(self) -> str:
        if self.host.upstream_lost:
            return "the upstream server stopped"
        return "the client closed the connection"


class ProgressForwarder:
    """Give the upstream progress of a request to the client's progress token, rate limited."""

    def __init__(
        self, host: Host, token: Any, rate: int, revision: revisions.Revision = revisions.LATEST
    ) -> None:
        self._host = host
        #: The revision of the client, whose terms each notification follows.
        self._revision = revision
        self._token = token
        self._window = RateWindow(rate)
        self._rate = rate
        #: The highest progress that went to the client, so that a step goes on from it.
        self._last: float = 0
        self._status: str | None = None

    def status(self, message: str | None) -> None:
        """The status message of a task: a new one is one more step of progress, with the message."""
        if message is not None and message != self._status:
            self._status = message
            self({"progress": self._last + 1, "message": message})

    def __call__(self, params: dict[str, Any]) -> None:
        translated = translate.progress_params(self._token, params)
        if translated is None:
            _drops(
                logging.WARNING,
                "dropped progress notifications that are not valid",
                "dropped a progress notification of the upstream server that is not valid "
                "(a finite progress number is needed)",
            )
            return
        self._last = max(self._last, translated["progress"])
        if self._window.admit():
            method = "notifications/progress"
            shaped = revisions.shape_notification(self._revision, method, translated)
            self._host.write_notification(method, shaped)
        else:
            _drops(
                logging.DEBUG,
                "dropped progress notifications over the rate",
                "dropped a progress notification over the rate of %d a second",
                self._rate,
            )
