"""Soak the ids of the stdio form: a client that reuses the bridge's ids while its forms are open.

Each call of the fixture's ``ask_form`` makes the bridge ask the client with
``elicitation/create`` (an id ``b-<n>``). Before the client answers it, it sends a
``ping`` with that id and a request with that id whose method is not a string; then
it answers with the id itself as the name, answers a second time, and answers ids that
no request has (``b-`` and numeric). Every call must end with the answer to its own
form, each form must answer one call, each ``ping`` must get its result and each
invalid request its error, and no line may be an internal error. The log must stay
bounded: besides the trace of each request at ``--log-level debug``, each kind of
line comes at most once every 10 s (``mcpbridge.mcp.droplog``) and the end of the
connection tells the counts. Exit status 0 when all of it holds.

    PYTHONPATH=. python scripts/soak_ids.py --calls 20000 --concurrency 16
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WAIT = 60.0

from mcpbridge.mcp.droplog import DROP_LOG_INTERVAL  # noqa: E402 - after the path of the checkout

FIXTURE = ROOT / "tests" / "fixtures" / "fixture_server.py"
#: The debug lines that trace each request; every other line is one that the soak counts.
TRACE = ("upstream request ", "list cache ")
#: The kinds of line that the hostile ids make the bridge write (answers to no request).
HOSTILE_KINDS = 1


class Driver:
    """VS Code's side of the bridge, with the hostile ids: JSON lines on its stdin and stdout."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lock = threading.Lock()
        self.waiting: dict[Any, threading.Event] = {}
        self.answers: dict[Any, list[dict[str, Any]]] = {}
        self.forms: queue.Queue[str | None] = queue.Queue()
        #: The ids of the forms that the bridge sent, in order.
        self.seen_forms: list[str] = []
        self.stderr: list[str] = []
        self.stray = itertools.count(10**9)
        threading.Thread(target=self._read, name="soak-stdout", daemon=True).start()
        threading.Thread(target=self._read_stderr, name="soak-stderr", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            frame = json.loads(line)
            request_id = frame.get("id")
            if "method" in frame:
                if frame["method"] == "elicitation/create" and request_id is not None:
                    self.forms.put(request_id)
                continue
            with self.lock:
                self.answers.setdefault(request_id, []).append(frame)
                event = self.waiting.get(request_id)
            if event is not None:
                event.set()
        self.forms.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace").rstrip("\n"))

    def send(self, *frames: dict[str, Any]) -> None:
        data = b"".join(json.dumps(frame).encode() + b"\n" for frame in frames)
        with self.lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def request(self, request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        event = threading.Event()
        with self.lock:
            self.waiting[request_id] = event
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if not event.wait(WAIT):
            raise TimeoutError(f"no answer to {method} {request_id}")
        with self.lock:
            return self.answers[request_id][0]

    def answer_forms(self) -> None:
        """Answer each form of the bridge, with the hostile lines around the answer."""
        while (form := self.forms.get()) is not None:
            self.seen_forms.append(form)
            self.send(
                {"jsonrpc": "2.0", "id": form, "method": "ping"},
                {"jsonrpc": "2.0", "id": form, "method": 5},
                {"jsonrpc": "2.0", "id": form, "result": {"action": "accept", "content": {"name": form}}},
                {"jsonrpc": "2.0", "id": form, "result": {"action": "decline"}},
                {"jsonrpc": "2.0", "id": f"b-{next(self.stray)}", "result": {"action": "accept"}},
                {"jsonrpc": "2.0", "id": next(self.stray), "error": {"code": -1, "message": "stray"}},
            )


def check_forms(answers: dict[Any, list[dict[str, Any]]], forms: list[str]) -> list[str]:
    """The problems of the replies to the requests that reused the ids of the forms."""
    problems = []
    for form in forms:
        replies = answers.get(form, [])
        results = [r for r in replies if r.get("result") == {}]
        errors = [
            r for r in replies if r.get("error", {}).get("data", {}).get("cause") == "invalid_request_shape"
        ]
        if len(replies) != 2 or len(results) != 1 or len(errors) != 1:
            problems.append(f"{form}: {replies}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    driver = Driver(
        [sys.executable, "-m", "mcpbridge", "--log-level", "debug", "--", sys.executable, str(FIXTURE)]
    )
    responder = threading.Thread(target=driver.answer_forms, name="soak-forms", daemon=True)
    responder.start()
    failures: list[str] = []
    texts: dict[int, str] = {}
    ids = itertools.count(1)
    started = time.monotonic()
    try:
        init = driver.request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "soak", "version": "1"},
            },
        )
        assert "result" in init, init
        driver.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def run(count: int) -> None:
            for _ in range(count):
                request_id = next(ids)
                response = driver.request(request_id, "tools/call", {"name": "ask_form", "arguments": {}})
                content = response.get("result", {}).get("content") or [{}]
                texts[request_id] = str(content[0].get("text", response))

        per = args.calls // args.concurrency
        threads = [
            threading.Thread(target=run, args=(per,), name=f"soak-{n}") for n in range(args.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - started
    finally:
        assert driver.proc.stdin is not None
        driver.proc.stdin.close()
        code = driver.proc.wait(WAIT)
        responder.join(WAIT)
    ended = time.monotonic() - started
    with driver.lock:
        answers = {key: list(value) for key, value in driver.answers.items()}
    calls = list(texts)
    named = Counter(text.removeprefix('form: accept {"name":"').removesuffix('"}') for text in texts.values())
    forms = list(driver.seen_forms)
    wrong = [i for i, text in texts.items() if not text.startswith('form: accept {"name":"b-')]
    twice = [form for form, count in named.items() if count > 1]
    duplicated = [i for i in calls if len(answers.get(i, [])) != 1]
    internal = [
        i for i, replies in answers.items() for r in replies if r.get("error", {}).get("code") == -32603
    ]
    logged = [line for line in driver.stderr if not any(f": debug: {trace}" in line for trace in TRACE)]
    bad_lines = [line for line in driver.stderr if ": error: " in line or "Traceback" in line]
    # One line of each kind at once, one more each interval, and the count at the end.
    bound = 10 + HOSTILE_KINDS * (2 + math.ceil(ended / DROP_LOG_INTERVAL))
    rate = len(calls) / seconds
    print(f"calls={len(calls)} concurrency={args.concurrency} seconds={seconds:.1f} calls/s={rate:.0f}")
    print(
        f"forms={len(forms)} hostile lines={6 * len(forms)} wrong={len(wrong)} forms-twice={len(twice)} "
        f"not-one-response={len(duplicated)} internal-errors={len(internal)} exit={code}"
    )
    print(f"stderr lines={len(driver.stderr)} besides the trace={len(logged)} (bound {bound}):")
    for line in logged:
        print(f"  {line}")
    if len(calls) != per * args.concurrency or wrong or twice or duplicated:
        failures.append("a call lost, doubled or answered with another call's form")
    problems = check_forms(answers, forms)
    if len(forms) != len(calls) or len(set(forms)) != len(forms) or problems:
        failures.append(f"the requests that reused a form's id: {problems[:3]}")
    if internal or bad_lines or code != 0:
        failures.append("internal errors, error lines or a bad exit")
    if len(logged) > bound:
        failures.append("the log is not bounded")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
