"""Soak the URL form: many tools/call at a fixed concurrency with cancellations mixed in.

The upstream is the scripted loopback server of the tests (``tests/peers/scripted_http.py``
run as a program): ``ok`` answers at once, ``stall_head`` answers nothing, so each such
call is canceled by the driver (``notifications/cancelled``) and must get no response.
Every other call must get exactly one response. The calls go in five waves: after the
first wave the bridge's open file descriptors must not grow (the pool keeps idle
connections), and its RSS may have grown by less than ``--max-rss-growth`` since the
warm-up. At rest after the waves the slot threads end and the idle connections close: the
bridge must be back to the threads and descriptors it had at the start. Exit status 0
when all of it holds.

    PYTHONPATH=. python scripts/soak_url.py --calls 50000 --concurrency 32
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WAIT = 60.0

from mcpbridge.bridge.front.slots import RETIRE_AFTER  # noqa: E402 - after the path of the checkout

#: How much longer than RETIRE_AFTER the soak waits at rest for the slot threads to end.
REST_MARGIN = 20.0
#: The reads of the driver's stdout reader: small ones when it is paced, large ones when not.
SLOW_READ_BYTES = 1024
FAST_READ_BYTES = 1024 * 1024


def proc_status(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("Threads", "VmRSS"):
                fields[name] = int(value.split()[0])
    fields["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return fields


class Driver:
    """VS Code's side of the bridge: JSON lines on the bridge's stdin and stdout.

    ``read_rate`` (bytes per second, ``None``: as fast as the bridge writes) paces the
    reader of stdout; it may change while the driver runs. ``lock`` guards the answers;
    the writes to stdin have a lock of their own, so a write that waits for a bridge that
    stopped reading never stops the reader.
    """

    def __init__(self, command: list[str], read_rate: float | None = None) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.read_rate = read_rate
        self.lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.waiting: dict[int, threading.Event] = {}
        self.answers: dict[int, int] = {}
        self.ids = itertools.count(1)
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, name="soak-stdout", daemon=True).start()
        threading.Thread(target=self._read_stderr, name="soak-stderr", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        rest = b""
        while True:
            rate = self.read_rate
            chunk = os.read(fd, SLOW_READ_BYTES if rate else FAST_READ_BYTES)
            if not chunk:
                return
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                self._answer(json.loads(line))
            if rate:
                time.sleep(len(chunk) / rate)

    def _answer(self, obj: dict[str, Any]) -> None:
        request_id = obj.get("id")
        if "method" in obj or not isinstance(request_id, int):
            return
        with self.lock:
            self.answers[request_id] = self.answers.get(request_id, 0) + 1
            event = self.waiting.get(request_id)
        if event is not None:
            event.set()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode() + b"\n"
        with self._write_lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], *, wait: bool = True) -> int:
        request_id = next(self.ids)
        event = threading.Event()
        with self.lock:
            self.waiting[request_id] = event
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if wait and not event.wait(WAIT):
            raise TimeoutError(f"no answer to {method} {request_id}")
        return request_id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--cancel-every", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--max-rss-growth", type=float, default=0.10)
    args = parser.parse_args()

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "peers" / "scripted_http.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline().strip().split("=", 1)[1])
    url = f"http://127.0.0.1:{port}/mcp"
    driver = Driver([sys.executable, "-m", "mcpbridge", "--token-store", "memory", url])
    failures: list[str] = []
    try:
        driver.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "soak", "version": "1"},
            },
        )
        driver.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        start = proc_status(driver.proc.pid)
        canceled: set[int] = set()
        plain: list[int] = []
        record = threading.Lock()

        def run(count: int) -> None:
            for n in range(count):
                if args.cancel_every and n % args.cancel_every == args.cancel_every - 1:
                    request_id = driver.request(
                        "tools/call", {"name": "stall_head", "arguments": {}}, wait=False
                    )
                    driver.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": request_id, "reason": "soak"},
                        }
                    )
                    with record:
                        canceled.add(request_id)
                    continue
                request_id = driver.request("tools/call", {"name": "ok", "arguments": {}})
                with record:
                    plain.append(request_id)

        def wave(total: int) -> float:
            started = time.perf_counter()
            per = total // args.concurrency
            threads = [
                threading.Thread(target=run, args=(per,), name=f"soak-{n}") for n in range(args.concurrency)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return time.perf_counter() - started

        wave(args.warmup)
        pid = driver.proc.pid
        before = proc_status(pid)
        # The pool keeps idle connections and the bridge its slot threads up to their high
        # mark, so the check is a plateau: after the first of five waves, nothing grows.
        marks: list[dict[str, int]] = []
        seconds = 0.0
        for _ in range(5):
            seconds += wave(args.calls // 5)
            marks.append(proc_status(pid))
        first, after = marks[0], marks[-1]
        # At rest (RETIRE_AFTER s without a request in flight) the slot threads end and the
        # idle connections close.
        rest = proc_status(pid)
        deadline = time.monotonic() + RETIRE_AFTER + REST_MARGIN
        while (
            rest["Threads"] > start["Threads"] or rest["fds"] > start["fds"]
        ) and time.monotonic() < deadline:
            time.sleep(1.0)
            rest = proc_status(pid)
        with driver.lock:
            answers = dict(driver.answers)
        lost = [i for i in plain if answers.get(i, 0) == 0]
        duplicated = [i for i, count in answers.items() if count > 1]
        answered_canceled = [i for i in canceled if answers.get(i, 0) > 0]
        growth = (after["VmRSS"] - before["VmRSS"]) / before["VmRSS"]
        print(
            f"calls={len(plain) + len(canceled)} (with the warm-up) canceled={len(canceled)} "
            f"concurrency={args.concurrency} "
            f"seconds={seconds:.1f} calls/s={args.calls / seconds:.0f}"
        )
        print(f"lost={len(lost)} duplicated={len(duplicated)} canceled-but-answered={len(answered_canceled)}")
        print("after warm-up and each wave: fds " + " ".join(str(m["fds"]) for m in [before, *marks]))
        print("after warm-up and each wave: threads " + " ".join(str(m["Threads"]) for m in [before, *marks]))
        print(f"at the start: fds {start['fds']} threads {start['Threads']}")
        print(f"at rest after the waves: fds {rest['fds']} threads {rest['Threads']}")
        print(f"rss {before['VmRSS']}->{after['VmRSS']} kB ({growth * 100:+.1f} %)")
        if lost or duplicated or answered_canceled:
            failures.append("lost, duplicated or canceled-but-answered calls")
        if after["fds"] > max(before["fds"], first["fds"]):
            failures.append("file descriptors grew after the first wave")
        if rest["Threads"] > start["Threads"] or rest["fds"] > start["fds"]:
            failures.append("the threads or file descriptors did not come back to their start at rest")
        if growth >= args.max_rss_growth:
            failures.append(f"RSS grew by {growth * 100:.1f} %")
    finally:
        assert driver.proc.stdin is not None
        driver.proc.stdin.close()
        driver.proc.wait(WAIT)
        assert server.stdin is not None
        server.stdin.close()
        server.wait(WAIT)
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
