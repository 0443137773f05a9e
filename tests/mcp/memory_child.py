"""A child process for the memory tests: one call whose answer is framed a given way, and its cost.

``python tests/mcp/memory_child.py URL FORM SIZE LIMIT`` opens the HTTP transport to
``URL`` with a limit of ``LIMIT`` bytes, makes one call (so that every module is loaded
and the connection is open), resets the peak of its memory, calls the tool ``framed``
(``form`` and ``size`` as its arguments), and prints one JSON line: the growth of its
peak memory over its memory before the call (``VmHWM`` and ``VmRSS`` of ``/proc``, Linux
only), the outcome (``delivered`` or the detail of the error) and the messages delivered.
It loads nothing but the bridge, so that its memory is the transport's.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Any

from mcpbridge.mcp.errors import InvalidResponse
from mcpbridge.mcp.jsonrpc import Message, Request
from mcpbridge.mcp.transports.http import HttpTransport

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1.0"},
}


def _call(request_id: int, tool: str, arguments: dict[str, Any]) -> Request:
    return Request(request_id, "tools/call", {"name": tool, "arguments": arguments, "_meta": META})


def _status_kib(name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {name} in /proc/self/status")


def main() -> None:
    url, form, size, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    delivered: list[Message] = []
    transport = HttpTransport(url, max_response_bytes=limit)
    transport.start(delivered.append, lambda error: None, lambda error: None)
    try:
        transport.send(_call(1, "ok", {}))
        gc.collect()
        # "5" resets the peak of the memory of the process to its memory now (Linux).
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_kib("VmRSS")
        outcome = "delivered"
        try:
            transport.send(_call(2, "framed", {"form": form, "size": size}))
        except InvalidResponse as exc:
            outcome = exc.detail or ""
        peak = _status_kib("VmHWM")
    finally:
        transport.close()
    print(json.dumps({"growth": (peak - before) * 1024, "outcome": outcome, "messages": len(delivered)}))


if __name__ == "__main__":
    main()
