"""The benchmark script runs: ``scripts/bench.py --quick --form stdio`` prints its table.

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
