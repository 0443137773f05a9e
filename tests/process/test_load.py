"""Load: a long soak through one bridge, and the limit of requests in flight.

The soak drives the real executable with a raw JSON-lines driver: 32 threads, each with
one request in flight at a time, mixing ``ping`` (answered by the reader), ``tools/call
echo`` (through a slot and the upstream), canceled slow calls (which must never get a
response) and echo calls whose cancellation races their answer (in the same write, or
after a ping's round trip: they get at most one response, and then the right one). No
response may be lost or written twice.

Threads: the pool of slots keeps a thread for each slot that was ever busy at the same
time, up to the limit of 256, so its size follows the highest concurrency seen, not a
leak. The test therefore fills all 256 slots at once (and cancels them) in the warm-up
and again after the soak: with the pool whole both times, the two counts of
``/proc/<pid>/task`` must be equal. Memory: ``VmRSS`` after the soak must be less than
10 % above its value after the warm-up.

:data:`SOAK_REQUESTS` is 100,000; the soak runs at about 3,000 requests per second on a
2-core machine, and the whole test takes well under a minute. The test prints the figures.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from harness import CAPTURED, ROOT, WAIT, bridge_command, fixture_command
from mcpbridge.mcp.droplog import DROP_LOG_INTERVAL

CONCURRENCY = 32
WARM_UP_REQUESTS = 30_000
SOAK_REQUESTS = 100_000
#: The soak runs in parts; the threads and the memory are measured after each.
PARTS = 5
#: One request in this many is a slow call that the driver cancels at once.
CANCEL_EVERY = 25
#: One request in this many is an echo that the driver cancels right after it is sent.
RACE_EVERY = 40
IN_FLIGHT_LIMIT = 256
RSS_GROWTH_LIMIT = 0.10
#: The repeats of each kind of log line in the test of the flood.
FLOOD = 3000


class Driver:
    """A raw JSON-lines client: one writer lock, one reader thread, responses counted by id."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._write_lock = threading.Lock()
        self._cond = threading.Condition()
        self.responses: dict[Any, list[dict[str, Any]]] = {}
        self.notifications = 0
        self.invalid: list[bytes] = []
        self._reader = threading.Thread(target=self._read, name="test-load-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._stdout:
            try:
                frame = json.loads(line)
            except ValueError:
                self.invalid.append(line)
                continue
            with self._cond:
                if "method" in frame:
                    self.notifications += 1
                elif "id" in frame:
                    self.responses.setdefault(frame["id"], []).append(frame)
                    self._cond.notify_all()
                else:
                    self.invalid.append(line)
        with self._cond:
            self._cond.notify_all()

    def send(self, frame: dict[str, Any]) -> None:
        data = json.dumps(frame, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            self._stdin.write(data)
            self._stdin.flush()

    def send_lines(self, frames: list[dict[str, Any]]) -> None:
        data = b"".join(json.dumps(f, separators=(",", ":")).encode() + b"\n" for f in frames)
        with self._write_lock:
            self._stdin.write(data)
            self._stdin.flush()

    def wait(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: request_id in self.responses, timeout):
                raise TimeoutError(f"no response to {request_id!r}")
            return self.responses[request_id][0]

    def wait_count(self, count: int, timeout: float = WAIT) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.responses) >= count, timeout):
                raise TimeoutError(f"{len(self.responses)} of {count} responses")

    def join(self) -> None:
        self._reader.join(WAIT)
        assert not self._reader.is_alive(), f"the bridge's stdout did not end in {WAIT} s"


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Soak:
    """The mix of the soak, spread over the worker threads."""

    def __init__(self, driver: Driver, prefix: str) -> None:
        self.driver = driver
        self.prefix = prefix
        self.canceled_slow: list[str] = []
        self.raced: list[str] = []
        self.expected: dict[str, Any] = {}
        self.errors: list[str] = []
        self.part = 0
        self._lock = threading.Lock()

    def run(self, requests: int) -> float:
        per_worker = requests // CONCURRENCY
        self.part += 1
        workers = [
            threading.Thread(target=self._work, args=(w, per_worker), name=f"test-load-{w}")
            for w in range(CONCURRENCY)
        ]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=600)
            assert not worker.is_alive(), "a worker of the soak did not finish"
        return time.monotonic() - started

    def _work(self, worker: int, count: int) -> None:
        rng = random.Random(worker)
        driver = self.driver
        try:
            for n in range(count):
                request_id = f"{self.prefix}{self.part}-{worker}-{n}"
                if n % CANCEL_EVERY == CANCEL_EVERY - 1:
                    params = {"name": "slow", "arguments": {"ms": 60_000}}
                    driver.send(
                        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
                    )
                    driver.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": request_id},
                        }
                    )
                    with self._lock:
                        self.canceled_slow.append(request_id)
                    continue
                if n % RACE_EVERY == RACE_EVERY - 2:
                    # The cancellation races the answer: in the same write, or after a ping's round trip.
                    text = f"race {request_id}"
                    params = {"name": "echo", "arguments": {"text": text}}
                    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
                    cancel = {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": request_id},
                    }
                    with self._lock:
                        self.raced.append(request_id)
                        self.expected[request_id] = text
                    if rng.random() < 0.5:
                        driver.send_lines([call, cancel])
                        continue
                    ping_id = f"{request_id}-ping"
                    with self._lock:
                        self.expected[ping_id] = {}
                    driver.send_lines([call, {"jsonrpc": "2.0", "id": ping_id, "method": "ping"}])
                    driver.wait(ping_id, 6 * WAIT)
                    driver.send(cancel)
                    continue
                if rng.random() < 0.5:
                    driver.send({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
                    expected: Any = {}
                else:
                    expected = f"echo {request_id} \u00e9\U0001f600"
                    params = {"name": "echo", "arguments": {"text": expected}}
                    driver.send(
                        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
                    )
                with self._lock:
                    self.expected[request_id] = expected
                frame = driver.wait(request_id, 6 * WAIT)
                if not _answers(frame, expected):
                    with self._lock:
                        self.errors.append(f"{request_id}: {frame}")
        except Exception as exc:  # noqa: BLE001 - reported by the test
            with self._lock:
                self.errors.append(f"worker {worker}: {type(exc).__name__}: {exc}")


def _answers(frame: dict[str, Any], expected: Any) -> bool:
    if "result" not in frame:
        return False
    if expected == {}:
        return bool(frame["result"] == {})
    return bool(frame["result"].get("content") == [{"type": "text", "text": expected}])


def settle(driver: Driver, prefix: str) -> None:
    """A ping round trip after the end of a phase: everything before it was read by then."""
    request_id = f"{prefix}-settle"
    driver.send({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    driver.wait(request_id)


def saturate(driver: Driver, prefix: str) -> None:
    """Fill every slot of the bridge at once, then cancel the calls.

    The pool of slots keeps one thread for each slot that was ever busy at the same
    time, up to the limit. Once all 256 were busy together the pool has all its threads,
    so two counts taken after this differ only by a leak. The calls are in flight
    together when none of them has a response at the time of a ping's round trip.
    """
    slow = {"name": "slow", "arguments": {"ms": 60_000}}
    for attempt in range(10):
        ids = [f"{prefix}-fill{attempt}-{n}" for n in range(IN_FLIGHT_LIMIT)]
        driver.send_lines([{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": slow} for i in ids])
        settle(driver, f"{prefix}-fill{attempt}")
        answered = [i for i in ids if i in driver.responses]
        cancels = [
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": i}}
            for i in ids
            if i not in answered
        ]
        driver.send_lines(cancels)
        settle(driver, f"{prefix}-unfill{attempt}")
        if not answered:
            drain(driver, prefix)
            return
    raise AssertionError("the slots never were all busy at once")


def drain(driver: Driver, prefix: str, batch: int = 2 * CONCURRENCY) -> None:
    """Wait until the canceled calls have left their slots, here and upstream.

    A slot ends a moment after its cancellation is read. A batch of echo calls sent at
    once succeeds whole only when that many slots are free on both sides.
    """
    params = {"name": "echo", "arguments": {"text": "free"}}
    for attempt in range(100):
        ids = [f"{prefix}-drain{attempt}-{n}" for n in range(batch)]
        driver.send_lines(
            [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params} for i in ids]
        )
        if all("result" in driver.wait(i) for i in ids):
            return
    raise AssertionError("the slots of the canceled calls never became free")


def check_phase(driver: Driver, soak: Soak) -> None:
    assert not soak.errors, soak.errors[:5]
    raced = set(soak.raced)
    for request_id, expected in soak.expected.items():
        frames = driver.responses.get(request_id, [])
        if request_id in raced:
            assert len(frames) <= 1, (request_id, frames)
            assert all(_answers(f, expected) for f in frames), (request_id, frames)
        else:
            assert len(frames) == 1, (request_id, frames)
    for request_id in soak.canceled_slow:
        assert request_id not in driver.responses, driver.responses[request_id]


@contextmanager
def raw_bridge(*options: str) -> Iterator[tuple[subprocess.Popen[bytes], Driver, list[str]]]:
    """The executable in front of the fixture, initialized, with a :class:`Driver` on its stdout.

    Its stderr lines go to ``harness.CAPTURED`` too, for the secret scans.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        bridge_command(*options, upstream=fixture_command()),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    stderr: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            text = line.decode("utf-8", "replace")
            stderr.append(text)
            CAPTURED.append(text)

    stderr_thread = threading.Thread(target=read_stderr, name="test-load-stderr", daemon=True)
    stderr_thread.start()
    driver = Driver(proc)
    try:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
        }
        driver.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params})
        assert "result" in driver.wait("init", 3 * WAIT)
        # No notifications/initialized: no listen stream takes a place of the upstream's limit.
        yield proc, driver, stderr
    finally:
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(WAIT)
        driver.join()
        stderr_thread.join(WAIT)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.slow
def test_a_soak_with_cancellations_loses_no_response_and_leaks_no_thread_or_memory() -> None:
    with raw_bridge() as (proc, driver, stderr):
        # The warm-up uses every slot once in its middle, so that the pool of slots is whole
        # and every thread of it has taken work before the first measurement.
        warm = Soak(driver, "w")
        warm.run(WARM_UP_REQUESTS // 3)
        saturate(driver, "before")
        warm.run(WARM_UP_REQUESTS - WARM_UP_REQUESTS // 3)
        settle(driver, "w")
        check_phase(driver, warm)
        threads_before, rss_before = threads_of(proc.pid), rss_kib(proc.pid)

        soak = Soak(driver, "s")
        seconds = 0.0
        counts = []
        for part in range(PARTS):
            seconds += soak.run(SOAK_REQUESTS // PARTS)
            settle(driver, f"s{part}")
            counts.append((threads_of(proc.pid), rss_kib(proc.pid)))
        check_phase(driver, soak)
        rss_after = rss_kib(proc.pid)  # before the second saturate(), as the first was before
        saturate(driver, "after")
        threads_after = threads_of(proc.pid)

        known = set(warm.expected) | set(soak.expected) | {"init"}
        extra = ("before-", "after-")  # the calls of saturate(); and each settle's ping
        unknown = [i for i in set(driver.responses) - known if not str(i).startswith(extra)]
        assert not [i for i in unknown if not str(i).endswith("settle")], unknown[:5]
        assert not driver.invalid, driver.invalid[:3]
        duplicated = [i for i, frames in driver.responses.items() if len(frames) > 1]
        assert not duplicated, duplicated[:5]
        assert threads_after == threads_before, (threads_before, threads_after, counts)
        assert rss_after <= rss_before * (1 + RSS_GROWTH_LIMIT), (rss_before, rss_after)

        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(WAIT) == 0
    assert not [line for line in stderr if "Traceback" in line or ": error: " in line], stderr[:5]
    sent = len(soak.expected) + len(soak.canceled_slow)
    answered = sum(1 for i in soak.raced if i in driver.responses)
    print(
        f"\nsoak: {sent} requests in {seconds:.1f} s ({sent / seconds:.0f}/s) at concurrency {CONCURRENCY}, "
        f"{len(soak.canceled_slow)} canceled slow calls (0 answered), {len(soak.raced)} raced cancellations "
        f"({answered} answered before the cancellation); threads with every slot used once: "
        f"{threads_before} -> {threads_after}; VmRSS {rss_before} -> {rss_after} KiB; "
        f"threads and VmRSS after each part: {counts}"
    )


def test_300_slow_calls_at_once_give_exactly_44_too_many_requests_and_ping_still_answers() -> None:
    with raw_bridge() as (proc, driver, stderr):
        calls = [
            {
                "jsonrpc": "2.0",
                "id": f"slow-{n}",
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"ms": 60_000}},
            }
            for n in range(300)
        ]
        driver.send_lines(calls)  # one write: the reader sees all 300 before any can end
        driver.send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        assert driver.wait("ping-1")["result"] == {}
        driver.wait_count(1 + 300 - IN_FLIGHT_LIMIT + 1)  # init, the refusals, the ping
        refused = {i: f for i, f in driver.responses.items() if str(i).startswith("slow-")}
        assert len(refused) == 300 - IN_FLIGHT_LIMIT == 44
        for frame in refused.values():
            assert frame[0]["error"]["code"] == -32603
            assert frame[0]["error"]["data"]["cause"] == "too_many_requests"
            assert frame[0]["error"]["message"] == "The connection has too many requests in flight"
        admitted = [c["id"] for c in calls if c["id"] not in refused]
        driver.send_lines(
            [
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": i}}
                for i in admitted
            ]
        )
        # The slots free up: an echo goes through (the upstream may still count a few canceled calls).
        for attempt in range(50):
            request_id = f"echo-{attempt}"
            params = {"name": "echo", "arguments": {"text": "free"}}
            driver.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
            if "result" in driver.wait(request_id):
                break
        else:
            raise AssertionError("no slot became free after the cancellations")
        settle(driver, "end")
        assert not [i for i in admitted if i in driver.responses]
    lines, told = told_repeats(stderr, "too many requests in flight")
    assert told == 44 and 1 <= len(lines) <= 2


def test_requests_that_reuse_the_id_of_a_request_in_flight_are_refused_and_do_not_pass_the_limit() -> None:
    with raw_bridge() as (proc, driver, stderr):
        slow = {"name": "slow", "arguments": {"ms": 60_000}}
        same = [{"jsonrpc": "2.0", "id": "same", "method": "tools/call", "params": slow} for _ in range(300)]
        driver.send_lines(same)
        settle(driver, "same")
        refusals = driver.responses.get("same", [])
        assert len(refusals) == 299
        assert all(f["error"]["data"]["cause"] == "invalid_request_shape" for f in refusals)
        # The limit still counts: 255 more calls fit beside the first, the next one does not.
        more = [
            {"jsonrpc": "2.0", "id": f"more-{n}", "method": "tools/call", "params": slow}
            for n in range(IN_FLIGHT_LIMIT)
        ]
        driver.send_lines(more)
        settle(driver, "more")
        refused = [f"more-{n}" for n in range(IN_FLIGHT_LIMIT) if f"more-{n}" in driver.responses]
        assert refused == [f"more-{IN_FLIGHT_LIMIT - 1}"]
        assert driver.responses[refused[0]][0]["error"]["data"]["cause"] == "too_many_requests"
        ids = ["same", *(f"more-{n}" for n in range(IN_FLIGHT_LIMIT - 1))]
        driver.send_lines(
            [{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": i}} for i in ids]
        )
        settle(driver, "end")
        assert len(driver.responses["same"]) == 299
        assert not [i for i in ids[1:] if i in driver.responses]
    lines, told = told_repeats(stderr, "its id is in use by a request in flight")
    assert told == 299 and 1 <= len(lines) <= 2


#: How a line of a kind that repeats tells of the repeats it stands for (see ``mcp.droplog``).
_AND_MORE = re.compile(r" \(and (\d+) more of these in the [^)]* before\)$")
_SINCE = re.compile(r" since the last such line: (\d+) more$")


def told_repeats(stderr: list[str], text: str) -> tuple[list[str], int]:
    """The stderr lines about ``text``, and the number of repeats that they tell of together."""
    lines = [line.rstrip("\n") for line in stderr if text in line]
    told = 0
    for line in lines:
        since = _SINCE.search(line)
        if since is not None:
            told += int(since.group(1))
            continue
        more = _AND_MORE.search(line)
        told += 1 + (int(more.group(1)) if more is not None else 0)
    return lines, told


def test_thousands_of_refused_requests_and_stray_answers_give_a_few_log_lines_that_count_them() -> None:
    started = time.monotonic()
    with raw_bridge("--log-level", "debug") as (proc, driver, stderr):
        slow = {"name": "slow", "arguments": {"ms": 60_000}}
        held = [
            {"jsonrpc": "2.0", "id": f"held-{n}", "method": "tools/call", "params": slow}
            for n in range(IN_FLIGHT_LIMIT)
        ]
        over = [
            {"jsonrpc": "2.0", "id": f"over-{n}", "method": "tools/call", "params": slow}
            for n in range(FLOOD)
        ]
        stray = [{"jsonrpc": "2.0", "id": f"b-{10**6 + n}", "result": {}} for n in range(FLOOD)]
        driver.send_lines(held)
        driver.send_lines(over)
        driver.send_lines(stray)
        settle(driver, "flood")
        refused = [i for i in driver.responses if str(i).startswith("over-")]
        assert len(refused) == FLOOD
        assert not [i for i in driver.responses if str(i).startswith("held-")]
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(WAIT) == 0
    # The end of the connection tells the counts that no line told yet; a line of a kind
    # comes at most once every DROP_LOG_INTERVAL seconds before it.
    bound = 2 + int((time.monotonic() - started) // DROP_LOG_INTERVAL)
    for text in ("too many requests in flight", "of the client that no request waits for"):
        lines, told = told_repeats(stderr, text)
        assert told == FLOOD, lines
        assert 1 <= len(lines) <= bound, lines
    assert not [line for line in stderr if ": error: " in line or "Traceback" in line]
