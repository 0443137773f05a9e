"""CPU per call of the HTTP transport on loopback: the client's cost of one tools/call.

A small keep-alive server runs in a child process (so its CPU is not counted) and
answers every POST with the same JSON result. This process sends ``--calls`` calls
through :class:`mcpbridge.mcp.transports.http.HttpTransport` on ``--threads`` threads and
prints the CPU time of this process (``time.process_time``) per call, and the wall
time per call. Run it with ``PYTHONPATH`` at the tree to measure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

SERVER = r"""
import socket, sys, threading
body = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"ok"}]}}'
head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
answer = (head % len(body)) + body
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
def serve(sock):
    buffer = b""
    with sock:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = sock.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            while len(buffer) < length:
                buffer += sock.recv(65536)
            buffer = buffer[length:]
            sock.sendall(answer)
def stop():
    sys.stdin.read()
    import os
    os._exit(0)
threading.Thread(target=stop, daemon=True).start()
while True:
    sock, _ = listener.accept()
    threading.Thread(target=serve, args=(sock,), daemon=True).start()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from mcpbridge.mcp.jsonrpc import Request
    from mcpbridge.mcp.transports.http import HttpTransport

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    transport = HttpTransport(f"http://127.0.0.1:{port}/mcp")
    transport.start(lambda _m: None, lambda _e: None, lambda _e: None)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    request = Request(1, "tools/call", {"name": "ok", "arguments": {}, "_meta": meta})
    for _ in range(200):  # warm up: imports, connections
        transport.send(request)
    per_thread = args.calls // args.threads

    def run() -> None:
        for _ in range(per_thread):
            transport.send(request)

    cpu, wall = time.process_time(), time.perf_counter()
    threads = [threading.Thread(target=run, name=f"bench-{n}") for n in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    calls = per_thread * args.threads
    transport.close()
    assert server.stdin is not None
    server.stdin.close()
    server.wait(10)
    print(
        f"calls={calls} threads={args.threads} "
        f"cpu/call={cpu / calls * 1e6:.0f} us wall/call={wall / calls * 1e6:.0f} us"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
