"""The id of a line that is too long to parse, from its first and last bytes.

Pure: no I/O. The front end, the passthrough and the upstream client keep the
first and the last bytes of an over-long line (:class:`~.transports.framing.TooLong`) and
find its id here, so a request gets its error (or its failure) instead of a
time-out. :func:`shows_response` tells whether such a line is a response: only
a response may stand for the lost answer to a request of the reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from .jsonrpc import RequestId

__all__ = ["recover_id", "shows_response"]

# JSON white space. A line never holds "\n", but the tail can end with "\r".
_SPACE = b" \t\r\n"
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)")
_DIGITS = b"0123456789"
#: A string id that ends the top-level object.
_TAIL_STRING_ID = re.compile(rb'[,{]\s*"id"\s*:\s*("(?:[^"\\]|\\.)*")\s*\}\s*$')


def recover_id(head: bytes, tail: bytes) -> RequestId | None:
    """The id of a line that is too long to parse, from its first and last bytes.

    VS Code writes ``"id"`` near the start of a message; the TypeScript SDK 1.x writes it
    as the last member (``...,"id":5}``). The function tries the head, then the tail,
    and never parses the whole line. It takes only a member of the top-level object:
    an ``"id"`` inside ``params`` does not count. The id is a string or an integer;
    any other value, or a value that the kept bytes cut, gives ``None``.
    """
    found = _head_id(head)
    if found is None:
        found = _tail_id(tail)
    return found


def _string_end(text: bytes, start: int) -> int | None:
    """The index after the closing quote of the string that opens at ``text[start]``."""
    k = start + 1
    while k < len(text):
        byte = text[k]
        if byte == 0x5C:  # a backslash escapes the next byte
            k += 2
        elif byte == 0x22:
            return k + 1
        else:
            k += 1
    return None


def _skip_space(text: bytes, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _skip_space_back(text: bytes, end: int) -> int:
    while end > 0 and text[end - 1] in _SPACE:
        end -= 1
    return end


def _decode_string(raw: bytes) -> str | None:
    """The text of the JSON string ``raw`` (with its quotes), if it can be written back.

    A lone surrogate escape decodes to a text that is not UTF-8; such an id could not go
    into the error response, so it is no id.
    """
    try:
        value = json.loads(raw)
        if isinstance(value, str):
            value.encode("utf-8")
            return value
    except (ValueError, UnicodeError):
        pass
    return None


def shows_response(head: bytes) -> bool:
    """Tell whether the top-level object that ``head`` starts is shaped as a response.

    It is when a ``result`` or an ``error`` member shows in ``head`` and no ``method``
    member does. VS Code and the SDKs write these members before the bulk of a message
    (``params``, the value of ``result``), so the first bytes of a line show them. A line
    whose first bytes show neither is not taken for a response.
    """
    seen = False
    for key, _end in _head_members(head):
        name = _decode_string(key)
        if name == "method":
            return False
        seen = seen or name in ("result", "error")
    return seen


def _head_members(text: bytes) -> Iterator[tuple[bytes, int]]:
    """Each member name (with its quotes) of the top-level object that ``text`` starts, and its end."""
    i = _skip_space(text, 0)
    if i >= len(text) or text[i] != 0x7B:  # "{"
        return
    i += 1
    depth = 1
    expect_key = True
    while i < len(text):
        byte = text[i]
        if byte == 0x22:  # a string: a key at depth 1, or a value to skip
            end = _string_end(text, i)
            if end is None:
                return
            if depth == 1 and expect_key:
                expect_key = False
                yield text[i:end], end
            i = end
            continue
        if byte in b"{[":
            depth += 1
        elif byte in b"}]":
            depth -= 1
            if depth == 0:
                return
        elif byte == 0x2C and depth == 1:  # ","
            expect_key = True
        i += 1


def _head_id(text: bytes) -> RequestId | None:
    """The ``id`` member of the top-level object that ``text`` starts."""
    for key, end in _head_members(text):
        if key == b'"id"':
            j = _skip_space(text, end)
            if j >= len(text) or text[j] != 0x3A:  # ":"
                return None
            return _id_value(text, _skip_space(text, j + 1))
    return None


def _id_value(text: bytes, start: int) -> RequestId | None:
    """The id that starts at ``text[start]``; ``None`` if the text cuts it."""
    if start >= len(text):
        return None
    if text[start] == 0x22:
        end = _string_end(text, start)
        return None if end is None else _decode_string(text[start:end])
    match = _INTEGER.match(text, start)
    if match is None:
        return None
    end = match.end()
    # The number must end inside the kept bytes, and must not go on as a fraction or an
    # exponent (or as digits after a leading zero, which JSON does not allow).
    if end >= len(text) or text[end] in b".eE" or text[end] in _DIGITS:
        return None
    return int(match.group())


def _tail_id(text: bytes) -> RequestId | None:
    """The ``id`` member that ends the top-level object: ``...,"id":<value>}``.

    The text must end with ``"id"``, a colon, the value, one ``}`` and optional white
    space, and a ``,`` or ``{`` must come before ``"id"``. An ``id`` in a nested object
    has more than one ``}`` after it and does not count. A string id is read forward
    from a ``"id":`` that a ``,`` or ``{`` opens: from the end, the quote before an
    escaped quote cannot be told apart.
    """
    end = _skip_space_back(text, len(text))
    if end == 0 or text[end - 1] != 0x7D:  # "}"
        return None
    end = _skip_space_back(text, end - 1)
    if end == 0:
        return None
    if text[end - 1] == 0x22:
        # Read forward from a ``"id":`` that a ``,`` or ``{`` opens: the escapes then read as written.
        match = _TAIL_STRING_ID.search(text)
        return None if match is None else _decode_string(match.group(1))
    start = end
    while start > 0 and text[start - 1] in _DIGITS:
        start -= 1
    if start > 0 and text[start - 1] == 0x2D:  # "-"
        start -= 1
    if _INTEGER.fullmatch(text, start, end) is None:
        return None
    value = int(text[start:end])
    # A colon and the key "id" come before the value, and a "," or "{" before the key.
    # A fraction or an exponent puts a different byte before the digits.
    i = _skip_space_back(text, start)
    if i == 0 or text[i - 1] != 0x3A:
        return None
    i = _skip_space_back(text, i - 1)
    if i < 4 or text[i - 4 : i] != b'"id"':
        return None
    i = _skip_space_back(text, i - 4)
    if i == 0 or text[i - 1] not in b",{":
        return None
    return value
