"""Text for log lines and error details: durations and values of the peer, kept short.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

__all__ = ["escaped", "format_duration", "printable"]

#: The longest text of a value of the peer in a log line.
LIMIT = 64


def format_duration(seconds: float) -> str:
    """A time limit as text for a detail or a log line: ``"60 s"``, else ``"300 ms"``.

    Whole seconds show as seconds; anything else shows as whole milliseconds, so that a
    short limit never shows as ``"0 s"``.
    """
    millis = round(seconds * 1000)
    if millis % 1000 == 0:
        return f"{millis // 1000} s"
    return f"{millis} ms"


def printable(value: Any) -> str:
    """``value`` as text of at most :data:`LIMIT` characters; a longer one ends with ``...``."""
    text = str(value)
    return text if len(text) <= LIMIT else text[: LIMIT - 3] + "..."


def escaped(text: str) -> str:
    """The first :data:`LIMIT` characters of ``text``, with everything but printable ASCII escaped."""
    return text[:LIMIT].encode("unicode_escape").decode("ascii")
