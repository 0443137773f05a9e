"""Diagnostics on stderr.

Each line has the form ``mcp-bridge-vscode: <scope>: <level>: <message>``. VS Code
shows these lines in the Output channel of the server, beside the stderr lines
of the upstream child. A line is written with one ``write`` under a lock,
control characters become spaces, and a line is at most :data:`MAX_LINE_BYTES`.

The library logs through :mod:`logging` under the ``mcpbridge`` name and adds a
``NullHandler``; only the executable calls :func:`configure`.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from typing import TextIO

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

logging.getLogger("mcpbridge").addHandler(logging.NullHandler())


def clean(text: str) -> str:
    """Replace control characters with spaces, so a message stays on one line."""
    return _CONTROL.sub(" ", text)


def format_line(scope: str, level: str, message: str) -> bytes:
    """One stderr line, at most :data:`MAX_LINE_BYTES` bytes with its newline."""
    line = f"{TAG}: {scope}: {level}: {clean(message)}".encode("utf-8", "replace")
    if len(line) >= MAX_LINE_BYTES:
        line = line[: MAX_LINE_BYTES - 4].decode("utf-8", "ignore").encode("utf-8") + b"..."
    return line + b"\n"


class StderrHandler(logging.Handler):
    """Write each record as one tagged line, with one write under a lock.

    The scope is the last part of the logger name (``mcpbridge.bridge`` gives
    ``bridge``).
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self._stream = stream
        self._write_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            scope = record.name.rsplit(".", 1)[-1] if "." in record.name else "vscode"
            level = _LEVEL_NAMES.get(record.levelno, "info")
            line = format_line(scope, level, record.getMessage())
            stream = self._stream or sys.stderr
            with self._write_lock:
                stream.buffer.write(line) if hasattr(stream, "buffer") else stream.write(line.decode())
                stream.flush()
        except Exception:  # noqa: BLE001 - a log line must never stop the bridge
            pass


def configure(level: str = "info", stream: TextIO | None = None) -> None:
    """Send the ``mcpbridge`` logs to stderr at ``level`` (``err``, ``warn``, ``info``, ``debug``)."""
    root = logging.getLogger("mcpbridge")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(StderrHandler(stream))
    root.setLevel(LEVELS[level])
    root.propagate = False


def write_line(scope: str, level: str, message: str) -> None:
    """Write one line at once, without the logging machinery (used before configure)."""
    try:
        sys.stderr.buffer.write(format_line(scope, level, message))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
