"""Numbers that come from a peer, read into a bounded range.

A peer can send any JSON number or header text: ``1e400`` (which :mod:`json`
reads as infinity), an integer of 400 digits, ``NaN``, ``true``, ``"²"``.
Arithmetic on such a value raises far from where it came in (``int(inf)``
raises :class:`OverflowError`, ``int("9" * 5000)`` :class:`ValueError`), or
silently makes a deadline years away. Every number of a peer that the bridge
uses (``expires_in``, ``interval``, ``Retry-After``, sizes, counts) is read
once, here, into ``[low, high]``; outside that range the reader gets
:class:`OutOfRange`, which names the field and the range, never the value.

This module is pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from typing import Final

from .errorbase import PeerFault

__all__ = ["MAX_DIGITS", "OutOfRange", "peer_int", "peer_seconds"]

#: The most digits of a number in text that are read at all: more is out of range before
#: :func:`int` runs (whose cost grows with the digits, and which refuses past 4,300).
MAX_DIGITS: Final = 30


class OutOfRange(PeerFault, ValueError):
    """A peer's number that is not a number, or not in the range of its field.

    ``name`` is the field (``expires_in``, ``Retry-After``); the message names the field
    and the range, never the value, which may be a secret's neighbour or a flood of digits.
    """

    def __init__(self, name: str, low: float, high: float) -> None:
        super().__init__(f"{name} is not a number from {_text(low)} to {_text(high)}")
        self.name = name
        self.low = low
        self.high = high


def _text(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def _as_number(value: object) -> float | int | None:
    """A finite int or float of JSON or ASCII digits; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip(" \t")
        if not (text.isascii() and text.isdigit()):
            return None
        digits = text.lstrip("0")
        return int(digits or "0") if len(digits) <= MAX_DIGITS else None
    return None


def peer_seconds(value: object, *, name: str, low: float, high: float) -> float:
    """``value`` as a number of seconds in ``[low, high]``.

    ``value`` is a JSON number (an int or a finite float, not a bool) or ASCII digits.

    Raises:
        OutOfRange: anything else, or a number outside the range.
    """
    number = _as_number(value)
    if number is None or not low <= number <= high:
        raise OutOfRange(name, low, high)
    return float(number)


def peer_int(value: object, *, name: str, low: int, high: int) -> int:
    """``value`` as a whole number in ``[low, high]``; a float is cut to its whole part.

    Raises:
        OutOfRange: not a number, or a number outside the range.
    """
    number = _as_number(value)
    if number is None or not low <= number <= high:
        raise OutOfRange(name, low, high)
    return int(number)
