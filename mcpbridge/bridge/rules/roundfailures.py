"""How a round of input requests fails the request that made it: the errors of the rounds.

This module is pure. The rounds (:mod:`.input`) raise these errors; the request run and
the tasks catch them, without loading the rules of the rounds before a round asks.
"""

from __future__ import annotations

from typing import Any

from ...mcp.errorbase import BridgeError

__all__ = ["ClientFailed", "InputError", "RoundFailed"]


class RoundFailed(BridgeError):
    """A round of input requests fails the original request. Not raised itself."""


class InputError(RoundFailed):
    """A check failed: the original request gets the bridge error of ``cause``.

    ``cause`` is one of ``invalid_input_request``, ``too_many_input_requests``,
    ``undeclared_input_request``, ``invalid_client_answer``, ``too_many_rounds`` and
    ``input_ended`` (the end of the input while a round waits for the client);
    ``detail`` goes to ``data.detail`` (``None`` for ``too_many_rounds``).
    """

    def __init__(self, cause: str, detail: str | None = None) -> None:
        super().__init__(detail or cause)
        self.cause = cause
        self.detail = detail


class ClientFailed(RoundFailed):
    """The client answered a sampling or roots request with an error.

    The original request fails with ``error`` unchanged (code, message, data; no
    ``cause``), for example the -32000 of VS Code when the user refuses a sampling.
    """

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "")) if isinstance(error, dict) else "")
        self.error = error
