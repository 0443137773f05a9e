"""The consent of the client to a sign-in: :class:`mcpbridge.oauth.signin.Consent` through the front end.

The sign-in (``mcpbridge.oauth``) asks the client only through the
:class:`~mcpbridge.oauth.signin.Consent` protocol; this module fills it with
the front end: a URL elicitation (``elicitation/create`` in URL mode) and its
``notifications/elicitation/complete``. :func:`attach` gives one front end to
the sign-in of the URL form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ...mcp.cancel import CancelToken
from ...mcp.protocol import ELICITATION_COMPLETE
from ...oauth.signin import ConsentEnd, ConsentEnded
from .pending import WaitEnded, WaitReason

if TYPE_CHECKING:
    from ...oauth.session import OAuthSession
    from .frontend import Frontend

__all__ = ["FrontendConsent", "attach"]

#: The end of the wait for the client's answer, as the sign-in knows it. Any other end
#: (the client's answer no longer wanted) is no answer in time to the sign-in.
_CONSENT_ENDS: Final = {WaitReason.CANCELED: ConsentEnd.CANCELED, WaitReason.CLOSED: ConsentEnd.CLOSED}


class FrontendConsent:
    """:class:`~mcpbridge.oauth.signin.Consent` through the front end: ``elicitation/create`` in URL mode."""

    def __init__(self, frontend: Frontend) -> None:
        self._frontend = frontend

    def url_elicitation(self) -> bool:
        from ..rules.input import ClientKinds

        return ClientKinds.from_capabilities(self._frontend.client_capabilities).url

    def new_elicitation_id(self) -> str:
        return self._frontend.next_elicitation_id()

    def ask(
        self, url: str, message: str, elicitation_id: str, *, timeout: float, cancel: CancelToken
    ) -> bool:
        try:
            return self._frontend.ask_url_consent(
                url, message, elicitation_id, timeout=timeout, cancel=cancel
            )
        except WaitEnded as ended:
            raise ConsentEnded(_CONSENT_ENDS.get(ended.reason, ConsentEnd.TIMEOUT)) from ended

    def complete(self, elicitation_id: str) -> None:
        self._frontend.write_notification(ELICITATION_COMPLETE, {"elicitationId": elicitation_id})


def attach(session: OAuthSession, frontend: Frontend) -> None:
    """Let the sign-ins after ``notifications/initialized`` ask the client of ``frontend``."""
    frontend.on_initialized = session.attach(FrontendConsent(frontend))
