"""The command line of the Python client scripts in this folder, which the tests run as subprocesses.

A script (``sse_py_client.py``, ``elicit_py_client.py``) is run as
``<python> <script> '<plan as JSON>'``; its own directory is then the first entry of
``sys.path``, so it imports this module beside it, whichever environment runs it. It hands
its steps to ``main``, which prints the summary that they filled as one JSON object on
stdout: ``{"ok": true, ...}``, or ``{"ok": false, "error": "..."}`` (exit code 1).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

#: The whole run of a client, in seconds.
WHOLE_RUN = 60.0


def main(run: Callable[[dict[str, Any], dict[str, Any]], Awaitable[None]]) -> int:
    """Run ``run(plan, summary)`` with the plan of the command line; print the summary; the exit code."""
    plan = json.loads(sys.argv[1])
    summary: dict[str, Any] = {"ok": False}
    try:
        anyio.run(run, plan, summary)
        summary["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - the summary carries every failure
        summary["error"] = f"{type(exc).__name__}: {exc}"
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0 if summary["ok"] else 1
