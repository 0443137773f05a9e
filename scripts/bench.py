"""The benchmark of mcp-bridge-vscode: what the bridge costs the user, as ratios measured in one run.

Usage::

    python scripts/bench.py [--form stdio|url|both] [--upstream own|sdk|both] [--quick]
                            [--no-competitors] [--no-install] [--baseline REF] [--out FOLDER]

``make bench`` runs it with the defaults (both forms, both upstream servers). It prints a
Markdown table on stdout, writes the raw figures (``bench.json``) and a plot of the
latency distributions (``latency.png``) to ``--out`` (``scripts/.bench/results``).

What it measures
----------------

The client is a raw JSON-lines driver on threads (``bench_driver.py``); it speaks MCP
2025-11-25 as VS Code does. Each figure compares *targets* that run in the same process
of this script, alternating, because the machine is shared and noisy:

* ``direct``: the same client talking to the upstream server without the bridge (both
  upstream servers answer 2025-11-25 too);
* ``bridge``: ``python -m mcpbridge --protocol 2026-07-28`` (the translation) in front of
  the upstream server, started with the interpreter of a plain install of its
  dependencies (``scripts/.bench/bridge-venv``) and the code of this checkout, as a user
  runs it (a development environment's editable install costs every start more than 10 ms
  of its own);
* with ``--baseline REF``, ``bridge@<commit>``: the bridge of an earlier commit of this
  repository (its ``mcpbridge`` folder, taken with ``git archive`` into
  ``scripts/.bench/baseline``), with the same interpreter, so that a change is measured
  against what it replaces in the same run;
* for the URL form, the programs a user would pick instead, each in its stdio-to-HTTP
  mode: ``mcp-remote`` (npm), ``mcp-proxy`` and ``mcp-stdio`` (PyPI). They are installed
  at the first run into ``scripts/.bench`` (git-ignored), never by the tests.

The upstream server is the project's own (``bench_upstream.py``, the server core of
:mod:`mcpbridge.mcp.server`) or one written with ``mcp==2.3.0`` (``bench_upstream_sdk.py``).
In the stdio form each target starts its own copy; in the URL form one copy listens on
127.0.0.1 for all targets.

1. Start-up: from the spawn to the answer of the first ``ping``, and to the ``initialize``
   response, beside a bare ``python -c pass`` of the bridge's interpreter (15 starts each).
2. Latency of a small ``tools/call`` (``echo``): p50 and p99 at concurrency 1 (2,000
   calls) and 32 (10,000 calls), in rounds that alternate the targets; the bridge's
   added time is the bridge minus direct, round by round.
3. Large payloads: ``tools/call`` results of 1 MiB and 16 MiB, and ``resources/read`` of a
   16 MiB blob (base64 on the wire), in MB/s of the payload.
4. Memory: the resident set of the target's process when idle, and its peak during
   each 16 MiB case (the high-water mark is reset before each case).

Every cell is the median with its spread (the range of the middle half of the samples,
or of the rounds for the percentiles). A ratio is taken within each round and then the
median of those ratios is shown. ``--quick`` runs a few seconds with small counts and
sizes, for a smoke test: its figures mean nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_driver import HttpPeer, LinePeer, PeerError  # noqa: E402

BENCH_DIR = HERE / ".bench"
VENV = BENCH_DIR / "venv"
NODE_PREFIX = BENCH_DIR / "node"
#: A plain (not editable) install of the bridge's dependencies, as a user has it: the
#: bridge starts with its interpreter, the code of this checkout first on its path.
BRIDGE_VENV = BENCH_DIR / "bridge-venv"
MiB = 1024 * 1024
PY = sys.executable

#: The competitors of the URL form and the packages that bring them.
PYPI_PACKAGES = ["mcp-proxy", "mcp-stdio", "matplotlib"]
NPM_PACKAGES = ["mcp-remote"]


@dataclass(frozen=True)
class Sizes:
    starts: int
    c1_calls: int
    c32_calls: int
    rounds: int
    payload_small: int
    payload_large: int
    reps_small: int
    reps_large: int
    warmup: int


FULL = Sizes(
    starts=15,
    c1_calls=2000,
    c32_calls=10000,
    rounds=10,
    payload_small=1 * MiB,
    payload_large=16 * MiB,
    reps_small=15,
    reps_large=5,
    warmup=100,
)
QUICK = Sizes(
    starts=2,
    c1_calls=100,
    c32_calls=320,
    rounds=2,
    payload_small=256 * 1024,
    payload_large=1 * MiB,
    reps_small=2,
    reps_large=1,
    warmup=10,
)


# ----------------------------------------------------------------------------------- targets


@dataclass
class Target:
    """One way for the client to reach the upstream server."""

    name: str
    argv: list[str] | None = None  # a process on stdio
    url: str | None = None  # the direct target of the URL form
    env: dict[str, str] | None = None
    #: The working directory, first on the path of ``python -m``.
    cwd: Path = ROOT

    def open(self) -> LinePeer | HttpPeer:
        if self.argv is not None:
            return LinePeer(self.argv, env=self.env, cwd=str(self.cwd))
        assert self.url is not None
        return HttpPeer(self.url)

    @property
    def spawns(self) -> bool:
        return self.argv is not None


def child_env() -> dict[str, str]:
    """The environment of the processes the benchmark starts: byte code is cached, as after an install."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(ROOT)
    return env


def upstream_argv(kind: str, *, http: bool = False) -> list[str]:
    script = "bench_upstream.py" if kind == "own" else "bench_upstream_sdk.py"
    return [PY, str(HERE / script), *(["--http"] if http else [])]


def bridge_python() -> str:
    """The interpreter of the bridge: that of :data:`BRIDGE_VENV` once installed, else this one.

    A development environment starts slower than an install (its editable install adds
    an import hook to every start), so the bridge runs from a plain install, as the
    competitors do.
    """
    installed = BRIDGE_VENV / "bin" / "python"
    return str(installed) if installed.exists() else PY


def bridge_argv(*rest: str) -> list[str]:
    return [bridge_python(), "-m", "mcpbridge", *rest]


def install_bridge() -> None:
    """Install the bridge and its dependencies into scripts/.bench/bridge-venv, once."""
    BENCH_DIR.mkdir(exist_ok=True)
    python = BRIDGE_VENV / "bin" / "python"
    if not python.exists():
        log("creating the virtual environment of the bridge")
        subprocess.run([sys.executable, "-m", "venv", str(BRIDGE_VENV)], check=True)
    probe = [str(python), "-c", "import typer, urllib3, keyring, truststore, cryptography, requests"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        log(f"installing the bridge into {BRIDGE_VENV.relative_to(ROOT)}")
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
            check=True,
        )


def baseline_tree(ref: str) -> tuple[str, Path]:
    """The target name and the folder of the bridge of the commit ``ref`` (exported once)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    folder = BENCH_DIR / "baseline" / sha
    if not (folder / "mcpbridge").is_dir():
        log(f"exporting the bridge of {sha} into {folder.relative_to(ROOT)}")
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha, "mcpbridge"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
    subprocess.run([PY, "-m", "compileall", "-q", str(folder / "mcpbridge")], capture_output=True)
    return f"bridge@{sha}", folder


class UrlUpstream:
    """An upstream server on 127.0.0.1 for the URL form; it stops at the end of its stdin."""

    def __init__(self, kind: str) -> None:
        self.proc = subprocess.Popen(
            upstream_argv(kind, http=True),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_env(),
            cwd=str(ROOT),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("port="):
            self.close()
            raise RuntimeError(f"the {kind} upstream server did not start")
        self.url = f"http://127.0.0.1:{int(line[5:])}/mcp"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def competitor_targets(url: str) -> list[Target]:
    targets = []
    remote = NODE_PREFIX / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
    node = shutil.which("node")
    if remote.exists() and node is not None:
        targets.append(Target("mcp-remote", [node, str(remote), url, "--transport", "http-only"]))
    proxy = VENV / "bin" / "mcp-proxy"
    if proxy.exists():
        targets.append(Target("mcp-proxy", [str(proxy), "--transport", "streamablehttp", url]))
    stdio = VENV / "bin" / "mcp-stdio"
    if stdio.exists():
        targets.append(Target("mcp-stdio", [str(stdio), url]))
    return targets


def install_competitors() -> None:
    """Install the competitors and matplotlib into scripts/.bench, once."""
    BENCH_DIR.mkdir(exist_ok=True)
    if not (VENV / "bin" / "python").exists():
        log("creating the benchmark's virtual environment")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if (
        not all((VENV / "bin" / name).exists() for name in ("mcp-proxy", "mcp-stdio"))
        or not _has_matplotlib()
    ):
        log(f"installing {', '.join(PYPI_PACKAGES)} into {VENV.relative_to(ROOT)}")
        subprocess.run(
            [
                str(VENV / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *PYPI_PACKAGES,
            ],
            check=True,
        )
    if not (NODE_PREFIX / "node_modules" / "mcp-remote").exists():
        npm = shutil.which("npm")
        if npm is None:
            log("npm is not installed: mcp-remote is left out")
            return
        log(f"installing {', '.join(NPM_PACKAGES)} into {NODE_PREFIX.relative_to(ROOT)}")
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(NODE_PREFIX),
                "--no-audit",
                "--no-fund",
                "--silent",
                *NPM_PACKAGES,
            ],
            check=True,
        )


def _has_matplotlib() -> bool:
    python = VENV / "bin" / "python"
    if not python.exists():
        return False
    return subprocess.run([str(python), "-c", "import matplotlib"], capture_output=True).returncode == 0


def log(message: str) -> None:
    sys.stderr.write(f"bench: {message}\n")
    sys.stderr.flush()


# ------------------------------------------------------------------------------ statistics


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Figure:
    """Samples of one figure of one target; ``median`` and the middle half as the spread."""

    samples: list[float] = field(default_factory=list)
    failed: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def spread(self) -> tuple[float, float]:
        return quantile(self.samples, 0.25), quantile(self.samples, 0.75)


def fmt(figure: Figure | None, scale: float = 1.0, digits: int = 0) -> str:
    if figure is None:
        return "—"
    if figure.failed is not None:
        return f"fails ({figure.failed})"
    if not figure.samples:
        return "—"
    low, high = figure.spread
    m = figure.median * scale
    if len(figure.samples) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} [{low * scale:.{digits}f}–{high * scale:.{digits}f}]"


def fmt_ratio(figure: Figure | None) -> str:
    if figure is None or not figure.samples or figure.failed:
        return "—"
    low, high = figure.spread
    if len(figure.samples) == 1:
        return f"{figure.median:.2f}×"
    return f"{figure.median:.2f}× [{low:.2f}–{high:.2f}]"


# -------------------------------------------------------------------------------- measures


def rss(pid: int | None) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of a process in bytes, or None."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(value.split()[0]) * 1024
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


def reset_peak(pid: int | None) -> None:
    """Reset the high-water mark of the resident set (Linux: ``5`` into ``clear_refs``)."""
    if pid is None:
        return
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


ECHO = {"name": "echo", "arguments": {"text": "hello from the benchmark"}}


def measure_startup(targets: list[Target], sizes: Sizes, results: dict[str, Any]) -> None:
    bare: list[float] = []
    ping: dict[str, Figure] = {t.name: Figure() for t in targets}
    init: dict[str, Figure] = {t.name: Figure() for t in targets}
    env = child_env()
    for rep in range(sizes.starts):
        started = time.perf_counter()
        subprocess.run([bridge_python(), "-c", "pass"], env=env, check=True)
        bare.append(time.perf_counter() - started)
        order = targets[rep % len(targets) :] + targets[: rep % len(targets)]
        for target in order:
            if not target.spawns or ping[target.name].failed:
                continue
            peer = target.open()
            try:
                peer.call("ping", timeout=60.0, check=False)
                ping[target.name].samples.append(time.perf_counter() - peer.started)
                init[target.name].samples.append(peer.initialize(timeout=60.0))
            except PeerError as exc:
                ping[target.name].failed = init[target.name].failed = str(exc)[:60]
            finally:
                peer.close()
    results["bare"] = Figure(bare)
    results["ping"] = ping
    results["init"] = init


def _run_calls(peer: Any, total: int, concurrency: int, method: str, params: dict[str, Any]) -> list[float]:
    """``total`` calls on ``concurrency`` threads; the latency of each."""
    latencies: list[float] = []
    lock = threading.Lock()
    remaining = [total]
    errors: list[BaseException] = []
    go = threading.Event()

    def worker() -> None:
        mine: list[float] = []
        go.wait()
        try:
            while True:
                with lock:
                    if remaining[0] <= 0:
                        break
                    remaining[0] -= 1
                _, seconds = peer.call(method, params)
                mine.append(seconds)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, name=f"bench-worker-{i}") for i in range(concurrency)]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0] if isinstance(errors[0], PeerError) else PeerError(repr(errors[0]))
    return latencies


@dataclass
class LatencyRuns:
    """All latencies of one target at one concurrency, and the p50 and p99 of each round."""

    all: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    failed: str | None = None


def measure_latency(
    peers: dict[str, Any], sizes: Sizes, concurrency: int, total: int
) -> dict[str, LatencyRuns]:
    runs = {name: LatencyRuns() for name in peers}
    per_round = max(1, total // sizes.rounds)
    names = list(peers)
    for round_number in range(sizes.rounds):
        order = names[round_number % len(names) :] + names[: round_number % len(names)]
        for name in order:
            run = runs[name]
            if run.failed:
                continue
            try:
                latencies = _run_calls(peers[name], per_round, concurrency, "tools/call", ECHO)
            except PeerError as exc:
                run.failed = str(exc)[:60]
                continue
            run.all.extend(latencies)
            run.p50.append(quantile(latencies, 0.50))
            run.p99.append(quantile(latencies, 0.99))
    return runs


def measure_payloads(
    peers: dict[str, Any], sizes: Sizes
) -> tuple[dict[str, dict[str, Figure]], dict[str, dict[str, int]]]:
    cases = [
        (
            "call_small",
            "tools/call",
            {"name": "big", "arguments": {"bytes": sizes.payload_small}},
            sizes.payload_small,
            sizes.reps_small,
        ),
        (
            "call_large",
            "tools/call",
            {"name": "big", "arguments": {"bytes": sizes.payload_large}},
            sizes.payload_large,
            sizes.reps_large,
        ),
        (
            "read_large",
            "resources/read",
            {"uri": f"file:///bench/blob/{sizes.payload_large}"},
            sizes.payload_large,
            sizes.reps_large,
        ),
    ]
    figures: dict[str, dict[str, Figure]] = {name: {} for name in peers}
    peaks: dict[str, dict[str, int]] = {name: {} for name in peers}
    names = list(peers)
    for case, method, params, size, reps in cases:
        for name in names:
            figures[name][case] = Figure()
            reset_peak(peers[name].pid)
        for rep in range(reps):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for name in order:
                figure = figures[name][case]
                if figure.failed:
                    continue
                try:
                    line, seconds = peers[name].call(method, params)
                except PeerError as exc:
                    figure.failed = str(exc)[:60]
                    continue
                if len(line) < size:
                    figure.failed = f"short answer ({len(line)} bytes)"
                    continue
                figure.samples.append(size / seconds / 1e6)
        for name in names:
            memory = rss(peers[name].pid)
            if memory is not None:
                peaks[name][case] = memory[1]
    return figures, peaks


# ------------------------------------------------------------------------------------ a run


@dataclass
class CaseResult:
    form: str
    upstream: str
    targets: list[str]
    startup: dict[str, Any] = field(default_factory=dict)
    c1: dict[str, LatencyRuns] = field(default_factory=dict)
    c32: dict[str, LatencyRuns] = field(default_factory=dict)
    payloads: dict[str, dict[str, Figure]] = field(default_factory=dict)
    idle_rss: dict[str, int] = field(default_factory=dict)
    peaks: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run_case(
    form: str, upstream: str, sizes: Sizes, competitors: bool, baseline: tuple[str, Path] | None = None
) -> CaseResult:
    env = child_env()
    server: UrlUpstream | None = None
    # Both upstream servers answer 2025-11-25 too, and the bridge would pass a command of both
    # eras through: the benchmark measures the translation.
    protocol = ("--protocol", "2026-07-28")
    if form == "stdio":
        command = upstream_argv(upstream)
        bridge_args = bridge_argv(*protocol, "--", *command)
        targets = [Target("direct", command, env=env), Target("bridge", bridge_args, env=env)]
    else:
        server = UrlUpstream(upstream)
        bridge_args = bridge_argv(*protocol, server.url)
        targets = [Target("direct", url=server.url), Target("bridge", bridge_args, env=env)]
    if baseline is not None:
        name, folder = baseline
        targets.append(Target(name, bridge_args, env={**env, "PYTHONPATH": str(folder)}, cwd=folder))
    if server is not None and competitors:
        targets += competitor_targets(server.url)
    result = CaseResult(form, upstream, [t.name for t in targets])
    try:
        log(f"{form} form, {upstream} upstream: start-up")
        measure_startup(targets, sizes, result.startup)
        peers: dict[str, Any] = {}
        try:
            for target in targets:
                try:
                    peer = target.open()
                    peer.initialize()
                    for _ in range(sizes.warmup):
                        peer.call("tools/call", ECHO)
                except PeerError as exc:
                    result.notes.append(f"{target.name} did not start: {exc}")
                    continue
                peers[target.name] = peer
            time.sleep(0.5)  # let each process settle before the idle figure
            for name, peer in peers.items():
                memory = rss(peer.pid)
                if memory is not None:
                    result.idle_rss[name] = memory[0]
            log(f"{form} form, {upstream} upstream: latency at concurrency 1")
            result.c1 = measure_latency(peers, sizes, 1, sizes.c1_calls)
            log(f"{form} form, {upstream} upstream: latency at concurrency 32")
            result.c32 = measure_latency(peers, sizes, 32, sizes.c32_calls)
            log(f"{form} form, {upstream} upstream: large payloads")
            result.payloads, result.peaks = measure_payloads(peers, sizes)
        finally:
            for peer in peers.values():
                peer.close()
    finally:
        if server is not None:
            server.close()
    return result


# ----------------------------------------------------------------------------------- report


def round_ratios(a: list[float], b: list[float]) -> Figure:
    return Figure([x / y for x, y in zip(a, b, strict=False) if y > 0])


def round_diffs(a: list[float], b: list[float]) -> Figure:
    return Figure([x - y for x, y in zip(a, b, strict=False)])


def holds(ok: bool | None) -> str:
    return "—" if ok is None else ("yes" if ok else "**no**")


def table(result: CaseResult, sizes: Sizes) -> str:
    names = result.targets
    others = [n for n in names if n not in ("direct", "bridge")]
    header = ["figure", *names, "bridge vs direct", "target", "holds"]
    rows: list[list[str]] = []
    bridge_faster: dict[str, list[bool]] = {n: [] for n in others}

    def compare(values: dict[str, float], lower_is_better: bool) -> None:
        mine = values.get("bridge")
        for name in others:
            theirs = values.get(name)
            if mine is None or theirs is None:
                continue
            bridge_faster[name].append(mine < theirs if lower_is_better else mine > theirs)

    # 1. start-up
    bare = result.startup["bare"]
    ping = result.startup["ping"]
    init = result.startup["init"]
    ping_limit = 0.100 if result.form == "stdio" else 0.200
    bridge_ping = ping.get("bridge")
    ok = None
    if bridge_ping is not None and bridge_ping.samples:
        ok = bridge_ping.median <= ping_limit
        if result.form == "stdio":
            ok = ok and bridge_ping.median <= 3.5 * bare.median
    ping_ratio = (
        Figure([bridge_ping.median / bare.median])
        if bridge_ping is not None and bridge_ping.samples
        else None
    )
    rows.append(
        ["bare `python -c pass` (ms)", *[fmt(bare, 1e3) if n == "direct" else "" for n in names], "", "", ""]
    )
    rows.append(
        [
            "spawn → first `ping` answer (ms)",
            *[fmt(ping[n], 1e3) if result.form == "stdio" or n != "direct" else "—" for n in names],
            f"{fmt_ratio(ping_ratio)} of bare",
            f"≤ {ping_limit * 1000:.0f} ms" + (", ≤ 3.5× bare" if result.form == "stdio" else ""),
            holds(ok),
        ]
    )
    compare({n: ping[n].median for n in names if ping[n].samples}, True)
    rows.append(
        [
            "spawn → `initialize` response (ms)",
            *[fmt(init[n], 1e3) if result.form == "stdio" or n != "direct" else "—" for n in names],
            "",
            "",
            "",
        ]
    )
    compare({n: init[n].median for n in names if init[n].samples}, True)

    # 2. latency
    for label, runs, total in (("1", result.c1, sizes.c1_calls), ("32", result.c32, sizes.c32_calls)):
        for pct in ("p50", "p99"):
            cells = []
            values = {}
            for n in names:
                run = runs.get(n)
                if run is None:
                    cells.append("—")
                elif run.failed:
                    cells.append(f"fails ({run.failed})")
                else:
                    fig = Figure(getattr(run, pct))
                    cells.append(fmt(fig, 1e6))
                    values[n] = fig.median
            compare(values, True)
            bridge, direct = runs.get("bridge"), runs.get("direct")
            versus, target, ok = "", "", None
            if bridge and direct and not bridge.failed and not direct.failed:
                added = round_diffs(getattr(bridge, pct), getattr(direct, pct))
                ratio = round_ratios(getattr(bridge, pct), getattr(direct, pct))
                if label == "1":
                    limit = 150e-6 if pct == "p50" else 1e-3
                    versus = f"+{fmt(added, 1e6)} µs"
                    target = f"added ≤ {limit * 1e6:.0f} µs"
                    ok = added.median <= limit
                else:
                    versus = f"{fmt_ratio(ratio)} (+{fmt(added, 1e6)} µs)"
                    if pct == "p99":
                        target = "≤ 1.5× direct"
                        ok = ratio.median <= 1.5
            rows.append(
                [
                    f"`tools/call` {pct}, concurrency {label} ({total:,} calls) (µs)",
                    *cells,
                    versus,
                    target,
                    holds(ok),
                ]
            )

    # 3. payloads
    labels = {
        "call_small": f"`tools/call` result {sizes.payload_small // 1024} KiB (MB/s)",
        "call_large": f"`tools/call` result {sizes.payload_large // MiB} MiB (MB/s)",
        "read_large": f"`resources/read` blob {sizes.payload_large // MiB} MiB (MB/s)",
    }
    for case, label in labels.items():
        cells = []
        values = {}
        for n in names:
            fig = result.payloads.get(n, {}).get(case)
            cells.append(fmt(fig, 1, 0))
            if fig is not None and fig.samples and not fig.failed:
                values[n] = fig.median
        compare(values, False)
        bridge = result.payloads.get("bridge", {}).get(case)
        direct = result.payloads.get("direct", {}).get(case)
        versus, target, ok = "", "", None
        if bridge and direct and bridge.samples and direct.samples:
            ratio = round_ratios(bridge.samples, direct.samples)
            versus = fmt_ratio(ratio)
            if case != "call_small":
                target = "≥ 0.7× direct"
                ok = ratio.median >= 0.7
        rows.append([label, *cells, versus, target, holds(ok)])

    # 4. memory
    def mb(value: int | None) -> str:
        return "—" if value is None else f"{value / 1e6:.0f}"

    idle = result.idle_rss
    rows.append(
        [
            "idle RSS (MB)",
            *[mb(idle.get(n)) if n != "direct" or result.form == "stdio" else "—" for n in names],
            "",
            "≤ 40 MB",
            holds(idle["bridge"] <= 40e6 if "bridge" in idle else None),
        ]
    )
    compare({n: idle[n] for n in names if n in idle and n != "direct"}, True)
    for case in ("call_large", "read_large"):
        peaks = {n: result.peaks.get(n, {}).get(case) for n in names}
        limit = idle.get("bridge", 0) + 4 * sizes.payload_large
        peak = peaks.get("bridge")
        rows.append(
            [
                f"peak RSS, {labels[case].split(' (')[0]} (MB)",
                *[mb(peaks.get(n)) if n != "direct" or result.form == "stdio" else "—" for n in names],
                "",
                f"≤ idle + 4 × {sizes.payload_large // MiB} MiB ({limit / 1e6:.0f} MB)",
                holds(peak <= limit if peak is not None and "bridge" in idle else None),
            ]
        )
        compare({n: v for n, v in peaks.items() if v is not None and n != "direct"}, True)

    lines = [
        f"#### {result.form} form, upstream: {UPSTREAM_NAMES[result.upstream]}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    for name, wins in bridge_faster.items():
        if wins:
            verdict = "yes" if all(wins) else f"**no** ({wins.count(False)} of {len(wins)} figures)"
            lines.append(f"\nFaster than {name} on every figure: {verdict}.")
    for note in result.notes:
        lines.append(f"\nNote: {note}")
    return "\n".join(lines)


UPSTREAM_NAMES = {
    "own": "the project's own server (`mcpbridge.mcp.server`)",
    "sdk": "a server written with `mcp==2.3.0`",
}


def machine_line() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores ({cpu}), "
        f"load average {os.getloadavg()[0]:.1f} at the start"
    )


def to_json(results: list[CaseResult]) -> dict[str, Any]:
    def latency(runs: dict[str, LatencyRuns]) -> dict[str, Any]:
        return {n: {"p50": r.p50, "p99": r.p99, "all": r.all, "failed": r.failed} for n, r in runs.items()}

    out = []
    for r in results:
        out.append(
            {
                "form": r.form,
                "upstream": r.upstream,
                "targets": r.targets,
                "startup": {
                    "bare": r.startup["bare"].samples,
                    "ping": {n: f.samples for n, f in r.startup["ping"].items()},
                    "init": {n: f.samples for n, f in r.startup["init"].items()},
                },
                "c1": latency(r.c1),
                "c32": latency(r.c32),
                "payloads": {n: {c: f.samples for c, f in cases.items()} for n, cases in r.payloads.items()},
                "idle_rss": r.idle_rss,
                "peaks": r.peaks,
            }
        )
    return {"cases": out}


def plot(data_file: Path, png: Path) -> str | None:
    """Draw the latency distributions with the matplotlib of the benchmark's own environment."""
    python = VENV / "bin" / "python"
    candidates = [str(python)] if python.exists() else []
    candidates.append(PY)
    for interpreter in candidates:
        done = subprocess.run(
            [interpreter, str(HERE / "bench_plot.py"), str(data_file), str(png)],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return None
    return "matplotlib is not installed: no plot"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--form", choices=["stdio", "url", "both"], default="both")
    parser.add_argument(
        "--upstream",
        choices=["own", "sdk", "both"],
        default=None,
        help="the upstream server (default: both; own with --quick)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few seconds: checks that it runs, nothing more"
    )
    parser.add_argument(
        "--no-competitors", action="store_true", help="leave out mcp-remote, mcp-proxy, mcp-stdio"
    )
    parser.add_argument(
        "--no-install", action="store_true", help="install nothing (use what is in scripts/.bench)"
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also run the bridge of the commit REF (for example main or HEAD~3), as bridge@<commit>",
    )
    parser.add_argument(
        "--out", type=Path, default=BENCH_DIR / "results", help="folder of bench.json and latency.png"
    )
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else FULL
    upstream = options.upstream or ("own" if options.quick else "both")
    forms = ["stdio", "url"] if options.form == "both" else [options.form]
    upstreams = ["own", "sdk"] if upstream == "both" else [upstream]
    competitors = "url" in forms and not options.no_competitors
    if not options.no_install and not options.quick:
        install_bridge()
    if competitors and not options.no_install and not options.quick:
        install_competitors()
    # Compile the package once, as an install does: every start then reads cached byte code.
    subprocess.run(
        [PY, "-m", "compileall", "-q", str(ROOT / "mcpbridge"), str(HERE)],
        env=child_env(),
        capture_output=True,
    )
    started = time.perf_counter()
    header = machine_line()
    baseline = baseline_tree(options.baseline) if options.baseline else None
    results = [run_case(form, up, sizes, competitors, baseline) for form in forms for up in upstreams]
    print(f"### mcp-bridge-vscode benchmark{' (--quick: the figures mean nothing)' if options.quick else ''}")
    print()
    print(header + f"; the run took {time.perf_counter() - started:.0f} s.")
    print("Each cell: median [middle half of the samples or rounds]; ratios are taken round by round.")
    for result in results:
        print()
        print(table(result, sizes))
    options.out.mkdir(parents=True, exist_ok=True)
    data_file = options.out / "bench.json"
    data_file.write_text(json.dumps(to_json(results)))
    problem = plot(data_file, options.out / "latency.png")
    print()
    print(
        f"Raw figures: {data_file.relative_to(ROOT) if data_file.is_relative_to(ROOT) else data_file}"
        + ("" if problem else f"; plot: {(options.out / 'latency.png').name}")
    )
    if problem:
        log(problem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
