"""Where the cold start of the URL form goes: the imports and the data classes on the way.

Usage::

    python scripts/bench_startup.py [--starts N] [--python PATH] [--top N]

``scripts/bench.py`` measures *how long* the bridge takes from its spawn to its first
answers; this script shows *what* that time is spent on, so that a change to the start-up
can be aimed and checked. It starts the project's own upstream server on 127.0.0.1
(``bench_upstream.py --http``), then starts the bridge ``N`` times as the benchmark does
(``python -m mcpbridge --protocol 2026-07-28 <url>``, the code of this checkout) under
``python -X importtime``. Each start gets ``initialize``, ``notifications/initialized``
and ``tools/list`` and ends at the answer of ``tools/list``, when its input closes. One
start before them writes the bytecode caches and is not counted.

It prints the medians over the starts:

* the wall time from the spawn to the ``initialize`` answer and to the ``tools/list``
  answer, beside ``python -c pass`` of the same interpreter;
* the import time by owner: the bridge's modules (``mcpbridge``), ``urllib3``, and the
  rest (the standard library and the other dependencies); each module's own time, not
  the time of what it imports;
* the data classes defined on the way: how many, the time their decorator took (a part
  of their modules' own import time), and the modules that define the most;
* the modules with the most time of their own.

The times under ``-X importtime`` are a little longer than without it; compare runs of
this script with each other, not with ``bench.py``. ``--python`` names the interpreter (by
default ``scripts/.bench/bridge-venv``, the plain install that ``bench.py`` makes, when it
is there; else this one).
"""

from __future__ import annotations

import sys

CHILD = "--child"


def _child(argv: list[str]) -> None:
    """Run the bridge with ``argv``, writing a line to stderr for each data class it defines."""
    import dataclasses
    import runpy
    import time

    process_class = dataclasses._process_class  # type: ignore[attr-defined]

    def timed(cls: type, *args: object, **kwargs: object) -> object:
        started = time.perf_counter_ns()
        try:
            return process_class(cls, *args, **kwargs)
        finally:
            took = (time.perf_counter_ns() - started) // 1000
            sys.stderr.write(f"dataclass time: {took} | {cls.__module__}.{cls.__qualname__}\n")

    dataclasses._process_class = timed  # type: ignore[attr-defined]
    sys.argv = ["mcpbridge", *argv]
    runpy.run_module("mcpbridge", run_name="__main__", alter_sys=True)


if __name__ == "__main__" and sys.argv[1:2] == [CHILD]:
    _child(sys.argv[2:])
    raise SystemExit(0)

import argparse  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import selectors  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import IO  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCH_PYTHON = ROOT / "scripts" / ".bench" / "bridge-venv" / "bin" / "python"
#: The longest wait for one answer of a start, or for the upstream's port.
ANSWER_WAIT = 60.0

INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"bench-startup","version":"1"}}}\n'
)
TOOLS_LIST = (
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
)
_IMPORT = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")
_DATACLASS = re.compile(r"dataclass time: (\d+) \| (\S+)")


class StartFailed(Exception):
    """A start of the bridge did not answer as expected (the message says how)."""


@dataclass
class Start:
    """The figures of one start (times in milliseconds)."""

    initialize: float
    tools_list: float
    #: Each module's own import time.
    imports: dict[str, float] = field(default_factory=dict)
    #: Each data class's decorator time.
    dataclasses: dict[str, float] = field(default_factory=dict)


def owner(module: str) -> str:
    """The owner of ``module`` in the report: ``mcpbridge``, ``urllib3`` or ``the rest``."""
    top = module.split(".", 1)[0]
    return top if top in ("mcpbridge", "urllib3") else "the rest"


def read_line(stream: IO[bytes], what: str) -> bytes:
    """One line of ``stream`` within :data:`ANSWER_WAIT`, or :class:`StartFailed`."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(ANSWER_WAIT):
            raise StartFailed(f"no {what} in {ANSWER_WAIT:.0f} s")
    return stream.readline()


def _answer(process: subprocess.Popen[bytes], what: str) -> None:
    """Read the answer of the bridge to ``what``, or raise :class:`StartFailed`."""
    assert process.stdout is not None
    if not read_line(process.stdout, f"{what} answer").startswith(b"{"):
        raise StartFailed(f"the bridge gave no {what} answer (exit code {process.poll()})")


def one_start(python: Path, url: str, env: dict[str, str]) -> Start:
    """Start the bridge once under ``-X importtime``; its figures."""
    argv = [str(python), "-X", "importtime", __file__, CHILD, "--protocol", "2026-07-28", url]
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=ROOT
        )
        assert process.stdin is not None
        try:
            process.stdin.write(INITIALIZE)
            process.stdin.flush()
            _answer(process, "initialize")
            initialized = time.perf_counter()
            process.stdin.write(TOOLS_LIST)
            process.stdin.flush()
            _answer(process, "tools/list")
            listed = time.perf_counter()
            process.stdin.close()
            process.wait(ANSWER_WAIT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(ANSWER_WAIT)
        stderr.seek(0)
        err = stderr.read()
    start = Start((initialized - started) * 1000, (listed - started) * 1000)
    for line in err.decode(errors="replace").splitlines():
        if found := _IMPORT.match(line):
            start.imports[found[2]] = int(found[1]) / 1000
        elif found := _DATACLASS.match(line):
            start.dataclasses[found[2]] = int(found[1]) / 1000
    return start


def bare_start(python: Path) -> float:
    """Milliseconds from the spawn of ``python -c pass`` to its end."""
    started = time.perf_counter()
    subprocess.run([str(python), "-c", "pass"], check=True, timeout=ANSWER_WAIT)
    return (time.perf_counter() - started) * 1000


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def report(starts: list[Start], bare: list[float], top: int) -> str:
    """The Markdown report of ``starts``."""
    lines = [
        f"Medians of {len(starts)} starts (milliseconds; under -X importtime).",
        "",
        "| figure | ms |",
        "|---|---:|",
        f"| spawn → `initialize` answer | {_median([s.initialize for s in starts]):.1f} |",
        f"| spawn → first `tools/list` answer | {_median([s.tools_list for s in starts]):.1f} |",
        f"| `python -c pass` | {_median(bare):.1f} |",
    ]
    by_owner: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, list[float]] = defaultdict(list)
    for start in starts:
        sums: dict[str, float] = defaultdict(float)
        for module, ms in start.imports.items():
            sums[owner(module)] += ms
        for name in ("mcpbridge", "urllib3", "the rest"):
            by_owner[name].append(sums[name])
            counts[name].append(sum(1 for module in start.imports if owner(module) == name))
    lines += ["", "| imports of | modules | ms of their own |", "|---|---:|---:|"]
    for name in ("mcpbridge", "urllib3", "the rest"):
        lines.append(f"| {name} | {_median(counts[name]):.0f} | {_median(by_owner[name]):.1f} |")

    per_class = [sum(s.dataclasses.values()) for s in starts]
    lines += [
        "",
        f"Data classes defined: {_median([len(s.dataclasses) for s in starts]):.0f}, "
        f"{_median(per_class):.1f} ms in their decorator (part of their modules' own time).",
        "",
        "| module | data classes | ms |",
        "|---|---:|---:|",
    ]
    by_module: dict[str, list[float]] = defaultdict(list)
    classes: dict[str, int] = defaultdict(int)
    for start in starts:
        sums = defaultdict(float)
        for name, ms in start.dataclasses.items():
            sums[name.rsplit(".", 1)[0]] += ms
        for module, ms in sums.items():
            by_module[module].append(ms)
    for name in starts[0].dataclasses:
        classes[name.rsplit(".", 1)[0]] += 1
    ranked = sorted(by_module, key=lambda module: -_median(by_module[module]))
    lines += [f"| {m} | {classes[m]} | {_median(by_module[m]):.2f} |" for m in ranked[:top]]

    own: dict[str, list[float]] = defaultdict(list)
    for start in starts:
        for module, ms in start.imports.items():
            own[module].append(ms)
    ranked = sorted(own, key=lambda module: -_median(own[module]))
    lines += ["", "| module | ms of its own |", "|---|---:|"]
    lines += [f"| {m} | {_median(own[m]):.2f} |" for m in ranked[:top]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--starts", type=int, default=9, help="how many starts to count (default 9)")
    parser.add_argument("--python", type=Path, help="the interpreter of the bridge")
    parser.add_argument("--top", type=int, default=15, help="rows of the module tables (default 15)")
    options = parser.parse_args()
    python = options.python or (BENCH_PYTHON if BENCH_PYTHON.exists() else Path(sys.executable))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's install: the caches are written once
    upstream = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "bench_upstream.py"), "--http"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert upstream.stdin is not None and upstream.stdout is not None
    try:
        first = read_line(upstream.stdout, "port of the upstream server").decode().strip()
        if not first.startswith("port="):
            raise StartFailed(f"the upstream server did not start: {first!r}")
        url = f"http://127.0.0.1:{first.removeprefix('port=')}/mcp"
        one_start(python, url, env)  # writes the bytecode caches; not counted
        starts = [one_start(python, url, env) for _ in range(options.starts)]
        bare = [bare_start(python) for _ in range(options.starts)]
    except StartFailed as exc:
        print(f"bench_startup: {exc}", file=sys.stderr)
        return 1
    finally:
        upstream.stdin.close()
        try:
            upstream.wait(ANSWER_WAIT)
        except subprocess.TimeoutExpired:
            upstream.kill()
            upstream.wait(ANSWER_WAIT)
    print(f"bridge: {python} with the code of {ROOT.name}; Python {sys.version.split()[0]}")
    print(report(starts, bare, options.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
