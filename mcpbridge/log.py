"""Diagnostics on stderr.

Each line has the form ``mcp-bridge-vscode: <scope>: <level>: <message>``. VS Code
shows these lines in the Output channel of the server, beside the stderr lines
of the upstream child. A line is written with one ``write`` under a lock,
control characters become spaces, and a line is at most :data:`MAX_LINE_BYTES`.

Secrets: :func:`add_secret` registers a value (a header value, a token, the upstream
URL); every line written here has each registered value, and its percent-encoded
form, replaced by :data:`REDACTED`. The command line registers what it knows to be
secret as soon as it has parsed it, so the messages of errors from other libraries
(a URL in a urllib3 error, for example) can go to the log with their causes.

Causes: at ``--log-level debug``, a line about an exception (``exc_info``, or an
exception among the arguments of the message) ends with the chain of its causes,
each as ``<type>: <message>`` without a traceback, for example
``...; caused by: MaxRetryError: ...; SSLCertVerificationError: ...``. At the other
levels a line stays short: VS Code shows each line in the Output channel as a
warning, whatever its level.

The library logs through :mod:`logging` under the ``mcpbridge`` name and adds a
``NullHandler``; only the executable calls :func:`configure`.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterator
from typing import TextIO
from urllib.parse import SplitResult, parse_qsl, quote, quote_plus, unquote, urlsplit

TAG = "mcp-bridge-vscode"
MAX_LINE_BYTES = 4096

#: The levels of ``--log-level`` and the logging levels they admit.
LEVELS = {
    "err": logging.ERROR,
    "warn": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}
_LEVEL_NAMES = {
    logging.CRITICAL: "error",
    logging.ERROR: "error",
    logging.WARNING: "warning",
    logging.INFO: "info",
    logging.DEBUG: "debug",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: What a secret becomes in a line.
REDACTED = "[secret]"
#: A shorter value is not registered: it would blank out common text, and protect nothing.
MIN_SECRET_CHARS = 4
#: The chain of causes of a line: at most this many exceptions, each message cut at
#: :data:`MAX_CAUSE_CHARS`.
MAX_CAUSES = 6
MAX_CAUSE_CHARS = 300
#: A path, or a query value, shorter than this is common text (``/mcp``, ``true``), not a secret.
_MIN_URL_PART_CHARS = 8
_PERCENT = re.compile(r"%([0-9A-F]{2})")

_secrets_lock = threading.Lock()
_secrets: set[str] = set()
#: One pattern of every form of every secret, longest first; ``None`` after a registration,
#: until the next line needs it (:func:`_pattern`).
_secret_pattern: re.Pattern[str] | None = None

logging.getLogger("mcpbridge").addHandler(logging.NullHandler())


def clean(text: str) -> str:
    """Replace control characters with spaces, so a message stays on one line."""
    return _CONTROL.sub(" ", text)


def _forms(value: str) -> Iterator[str]:
    """``value`` and its percent-encoded forms, as a pattern each (``%2f`` matches ``%2F`` too)."""
    yield re.escape(value)
    for encoded in {quote(value, safe=""), quote_plus(value, safe=""), quote(value, safe="/:@")}:
        if encoded != value:
            yield _PERCENT.sub(lambda m: f"%(?i:{m.group(1)})", re.escape(encoded))


def add_secret(value: str | None) -> None:
    """Replace ``value`` (and its percent-encoded forms) with :data:`REDACTED` in every line.

    ``None``, and a value of fewer than :data:`MIN_SECRET_CHARS` characters, is ignored.
    Safe to call from any thread; a value registered twice costs nothing.
    """
    global _secret_pattern
    if value is None or len(value) < MIN_SECRET_CHARS:
        return
    with _secrets_lock:
        if value in _secrets:
            return
        _secrets.add(value)
        _secret_pattern = None


def _pattern() -> re.Pattern[str] | None:
    """The pattern of every registered secret, built once after the registrations that preceded it."""
    global _secret_pattern
    with _secrets_lock:
        if _secret_pattern is None and _secrets:
            forms = {form for secret in _secrets for form in _forms(secret)}
            # Longest first: the whole URL wins over its query.
            _secret_pattern = re.compile("|".join(sorted(forms, key=len, reverse=True)))
        return _secret_pattern


def add_url_secrets(url: str, *, whole: bool = True) -> None:
    """Register the parts of ``url`` that can carry a secret, as written and decoded.

    The user and the password; with ``whole``, also the URL itself, its query, its host
    with its port, and its path with its query (as urllib3 names them in an error); its
    path and each query value only from 8 characters: a shorter one (``/mcp``, ``true``)
    would blank out common text.
    A proxy URL takes ``whole=False``: only its credentials are secret.
    """
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:  # not a URL that urllib reads: the text is all there is
        add_secret(url)
        return
    found: list[str | None] = [username, password, parts.netloc.rpartition("@")[0]]
    if whole:
        target = f"{parts.path}?{parts.query}" if parts.query else parts.path
        found += [url, parts.query]
        found += [part for part in (target, parts.path) if len(part) >= _MIN_URL_PART_CHARS]
        port = _port_of(parts)
        host = parts.hostname
        if host and port is not None:  # the host alone is no secret: it names the server in VS Code
            found.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
            found.append(f"host={host!r}, port={port}")  # as urllib3 names a connection and its pool
        values = parse_qsl(parts.query, keep_blank_values=True)
        found += [value for _name, value in values if len(value) >= _MIN_URL_PART_CHARS]
    for value in found:
        if value:
            add_secret(value)
            add_secret(unquote(value))


def _port_of(parts: SplitResult) -> int | None:
    """The port of a split URL, also the default one of http and https; ``None`` if unknown."""
    try:
        port = parts.port
    except ValueError:
        return None
    return port if port is not None else {"https": 443, "http": 80}.get(parts.scheme)


def redact(text: str) -> str:
    """``text`` with each registered secret replaced by :data:`REDACTED`."""
    pattern = _secret_pattern
    if pattern is None and _secrets:
        pattern = _pattern()
    return text if pattern is None else pattern.sub(REDACTED, text)


def _one_cause(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the line
        message = ""
    text = type(exc).__name__
    if message:
        message = clean(redact(message))
        if len(message) > MAX_CAUSE_CHARS:
            message = message[: MAX_CAUSE_CHARS - 3] + "..."
        text = f"{text}: {message}"
    return text


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__`` unless suppressed)."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < MAX_CAUSES:
        seen.add(id(current))
        chain.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__suppress_context__:
            current = None
        else:
            current = current.__context__
    return chain


def describe_causes(exc: BaseException, *, include_self: bool = True) -> str:
    """The chain of ``exc`` in one short text: ``Type: message; caused by: Type: message; ...``.

    Without ``include_self``, only the causes (the message already shows ``exc``);
    ``""`` when there are none. Never a traceback; secrets are replaced.
    """
    chain = _chain(exc)
    head, causes = (chain[0], chain[1:]) if include_self else (None, chain[1:])
    parts = [_one_cause(cause) for cause in causes]
    text = f"caused by: {'; '.join(parts)}" if parts else ""
    if head is not None:
        text = f"{_one_cause(head)}; {text}" if text else _one_cause(head)
    return text


def _record_causes(record: logging.LogRecord) -> str:
    """The causes of the exception of ``record``: its ``exc_info``, else an exception argument."""
    if record.exc_info and record.exc_info[1] is not None:
        return describe_causes(record.exc_info[1])
    args = record.args if isinstance(record.args, tuple) else ()
    for arg in reversed(args):
        if isinstance(arg, BaseException):
            return describe_causes(arg, include_self=False)
    return ""


def format_line(scope: str, level: str, message: str) -> bytes:
    """One stderr line, at most :data:`MAX_LINE_BYTES` bytes with its newline.

    The secrets are replaced before the line is cut, so no cut leaves part of one.
    """
    line = f"{TAG}: {scope}: {level}: {clean(redact(message))}".encode("utf-8", "replace")
    if len(line) >= MAX_LINE_BYTES:
        line = line[: MAX_LINE_BYTES - 4].decode("utf-8", "ignore").encode("utf-8") + b"..."
    return line + b"\n"


class StderrHandler(logging.Handler):
    """Write each record as one tagged line, with one write under a lock.

    The scope is the last part of the logger name (``mcpbridge.bridge`` gives
    ``bridge``). With ``causes``, a record with an exception ends with its chain of
    causes (:func:`describe_causes`).
    """

    def __init__(self, stream: TextIO | None = None, *, causes: bool = False) -> None:
        super().__init__()
        self._stream = stream
        self._causes = causes
        self._write_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            scope = record.name.rsplit(".", 1)[-1] if "." in record.name else "vscode"
            level = _LEVEL_NAMES.get(record.levelno, "info")
            message = record.getMessage()
            causes = _record_causes(record) if self._causes else ""
            line = format_line(scope, level, f"{message} - {causes}" if causes else message)
            stream = self._stream or sys.stderr
            with self._write_lock:
                stream.buffer.write(line) if hasattr(stream, "buffer") else stream.write(line.decode())
                stream.flush()
        except Exception:  # noqa: BLE001 - a log line must never stop the bridge
            pass


def configure(level: str = "info", stream: TextIO | None = None) -> None:
    """Send the ``mcpbridge`` logs to stderr at ``level`` (``err``, ``warn``, ``info``, ``debug``).

    At ``debug``, a line about an exception also shows the chain of its causes.
    """
    root = logging.getLogger("mcpbridge")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(StderrHandler(stream, causes=level == "debug"))
    root.setLevel(LEVELS[level])
    root.propagate = False


def write_line(scope: str, level: str, message: str) -> None:
    """Write one line at once, without the logging machinery (used before configure)."""
    try:
        sys.stderr.buffer.write(format_line(scope, level, message))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
