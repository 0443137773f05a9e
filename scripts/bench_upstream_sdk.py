"""The second upstream server of the benchmark, written with the official Python SDK (``mcp==2.3.0``).

Usage::

    python scripts/bench_upstream_sdk.py            # stdio
    python scripts/bench_upstream_sdk.py --http     # Streamable HTTP on 127.0.0.1 (uvicorn)

It offers the same things as ``bench_upstream.py``: the tools ``echo {text}`` and
``big {bytes}``, and the resource template ``file:///bench/blob/{bytes}``. The SDK
answers both revisions (2025-11-25 and 2026-07-28), so the benchmark can talk to it
directly and through the bridge.

With ``--http`` it writes ``port=<n>`` as its first stdout line, serves ``/mcp`` with
the SDK's defaults and stops at the end of its stdin.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading

from mcp.server.mcpserver import MCPServer

MAX_BYTES = 256 * 1024 * 1024

server = MCPServer("bench-upstream-sdk", version="2.3.0")


@server.tool()
def echo(text: str) -> str:
    """Send the text back."""
    return text


@server.tool()
def big(bytes: int) -> str:
    """Send a text of the given size in bytes."""
    return "x" * max(0, min(bytes, MAX_BYTES))


@server.resource("file:///bench/blob/{size}", name="blob", mime_type="application/octet-stream")
def blob(size: str) -> bytes:
    count = min(int(size), MAX_BYTES)
    return (bytes(range(256)) * (count // 256 + 1))[:count]


def serve_http() -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    app = server.streamable_http_app(streamable_http_path="/mcp")
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    runner = uvicorn.Server(config)

    def stop_at_eof() -> None:
        sys.stdin.read()
        runner.should_exit = True

    threading.Thread(target=stop_at_eof, name="bench-sdk-stdin", daemon=True).start()
    sys.stdout.write(f"port={listener.getsockname()[1]}\n")
    sys.stdout.flush()
    runner.run(sockets=[listener])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP on 127.0.0.1")
    if parser.parse_args().http:
        serve_http()
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
