"""Soak a client that reads slowly: requests as fast as the bridge takes them, stdout read at 1 KiB/s.

The bridge serves the fixture server of the tests on stdio (``mcp-bridge-vscode -- <command>``).
For ``--seconds`` (and at most ``--requests`` requests) the driver sends pings and calls of
the ``echo`` tool as fast as the bridge reads them, and reads the bridge's stdout at
``--read-rate`` bytes per second: the answers wait in the bridge's output up to its bound,
and then the bridge stops reading the driver.
The RSS of the bridge, sampled every half second, must stay within its RSS after
``initialize`` plus that bound (``MAX_QUEUED_BYTES`` of ``mcpbridge.bridge.front.output``). Then
the driver stops sending and reads at full speed: every request must get exactly one
response (a result, or an error such as ``too_many_requests`` at the limit of requests in
flight), and the bridge must exit 0 at the end of stdin. Exit status 0 when all of it holds.

    PYTHONPATH=. python scripts/soak_slow_reader.py --seconds 60 --read-rate 1024
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from soak_url import ROOT, WAIT, Driver, proc_status  # beside this script; puts the checkout on the path

from mcpbridge.bridge.front.output import MAX_QUEUED_BYTES

FIXTURE = ROOT / "tests" / "fixtures" / "fixture_server.py"
#: The time between two samples of the bridge's RSS.
SAMPLE_EVERY = 0.5


def flood(driver: Driver, stop: threading.Event, sent: list[int], most: int | None = None) -> None:
    """Send pings and calls until ``stop`` (or ``most`` requests); a write waits while the bridge
    does not read."""
    call = {"name": "echo", "arguments": {"text": "slow reader"}}
    try:
        while not stop.is_set() and (most is None or len(sent) < most):
            sent.append(driver.request("ping", {}, wait=False))
            sent.append(driver.request("tools/call", call, wait=False))
    except (OSError, ValueError):  # the bridge ended: the check below tells it
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--read-rate", type=float, default=1024.0, help="bytes per second")
    parser.add_argument("--requests", type=int, default=None, help="send at most this many requests")
    args = parser.parse_args()

    driver = Driver([sys.executable, "-m", "mcpbridge", "--", sys.executable, str(FIXTURE)])
    failures: list[str] = []
    try:
        client = {"name": "soak", "version": "1"}
        initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        driver.request("initialize", initialize)
        driver.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        pid = driver.proc.pid
        idle = proc_status(pid)["VmRSS"]
        driver.read_rate = args.read_rate
        stop = threading.Event()
        sent: list[int] = []
        sender = threading.Thread(target=flood, args=(driver, stop, sent, args.requests), name="soak-flood")
        sender.start()
        peak = idle
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline and driver.proc.poll() is None:
            time.sleep(SAMPLE_EVERY)
            peak = max(peak, proc_status(pid)["VmRSS"])
        slow_sent = len(sent)
        stop.set()
        driver.read_rate = None
        sender.join(WAIT)
        if sender.is_alive():
            failures.append("the bridge did not read on when the driver read at full speed")
        deadline = time.monotonic() + WAIT
        for request_id in list(sent):
            driver.waiting[request_id].wait(max(0.0, deadline - time.monotonic()))
        with driver.lock:
            answers = dict(driver.answers)
        lost = [i for i in sent if answers.get(i, 0) == 0]
        duplicated = [i for i, count in answers.items() if count > 1]
        bound = MAX_QUEUED_BYTES // 1024
        print(
            f"seconds={args.seconds:g} read-rate={args.read_rate:g} B/s requests={len(sent)} "
            f"(while slow: {slow_sent})"
        )
        print(f"lost={len(lost)} duplicated={len(duplicated)}")
        print(f"rss idle={idle} kB peak={peak} kB growth={peak - idle} kB bound={bound} kB")
        if lost or duplicated:
            failures.append("lost or duplicated responses")
        if peak > idle + bound:
            failures.append("the RSS grew past the bound of the output")
        if driver.proc.poll() is not None:
            failures.append(f"the bridge ended early with {driver.proc.returncode}")
    finally:
        assert driver.proc.stdin is not None
        driver.proc.stdin.close()
        code = driver.proc.wait(WAIT)
    if code != 0 and not failures:
        failures.append(f"the bridge exited with {code} at the end of stdin")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
