"""The answers of the client to the bridge's own requests (ids ``b-1``, ``b-2``, ...).

An answer is the ``result`` value of the client (any JSON), a :class:`ClientError`, or
:data:`BAD_LINE`. The front end makes them from the lines of the client, the pending table
(:mod:`.front.pending`) hands them to the request that waits, and the input rules
(:mod:`.input`) read them. This module is pure: it holds the two types only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["BAD_LINE", "BadLine", "ClientError"]


class BadLine(enum.Enum):
    """The type of :data:`BAD_LINE`."""

    BAD_LINE = "bad_line"

    def __repr__(self) -> str:
        return "BAD_LINE"


#: The answer of a client line that had the id of a pending request of the bridge but
#: was not a valid message (a lone surrogate, invalid UTF-8, too deep, too long).
BAD_LINE: Final = BadLine.BAD_LINE


@dataclass(frozen=True, slots=True)
class ClientError:
    """The client answered a request of the bridge with a JSON-RPC error object."""

    error: dict[str, Any]
