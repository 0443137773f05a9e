"""The benchmark scripts run: ``scripts/bench.py --quick --form stdio`` prints its table, and
``scripts/bench_startup.py`` its profile of the start-up.

It asserts nothing about time: the quick run only shows that the benchmark still
works with the code as it is (the driver, the upstream servers, the bridge).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_WAIT = 240.0

pytestmark = pytest.mark.slow


def test_the_quick_benchmark_of_the_stdio_form_runs_and_prints_a_table(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench.py"),
            "--quick",
            "--form",
            "stdio",
            "--no-install",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_WAIT,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith("| figure | direct | bridge |")
    figures = [line.split("|")[1].strip() for line in table[2:]]
    assert any(figure.startswith("spawn → first `ping` answer") for figure in figures)
    assert any(figure.startswith("`tools/call` p99, concurrency 32") for figure in figures)
    assert any(figure.startswith("peak RSS") for figure in figures)
    assert "fails (" not in done.stdout
    assert (tmp_path / "bench.json").is_file()


def test_the_start_up_profile_runs_and_finds_the_imports_and_data_classes_of_the_url_form():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_startup.py"), "--starts", "1", "--top", "40"],
        capture_output=True,
        text=True,
        timeout=RUN_WAIT,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("| ")}
    assert "spawn → first `tools/list` answer" in rows
    # The bridge's own modules and urllib3 are on the way to the first tools/list answer.
    assert int(rows["mcpbridge"].split("|")[2]) > 20
    assert int(rows["urllib3"].split("|")[2]) > 0
    classes = next(line for line in done.stdout.splitlines() if line.startswith("Data classes defined:"))
    assert int(classes.split(":")[1].split(",")[0]) > 10
    assert "mcpbridge.mcp.jsonrpc" in rows  # Request, Response and the rest are data classes
