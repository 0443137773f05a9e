"""The MCP conformance suite, through the bridge and directly (scripts/conformance.sh).

It runs in the ordinary test run so that CI counts it; ``make conformance`` runs it
alone with its full output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.conformance
@pytest.mark.timeout(660)
def test_the_conformance_suites_have_no_failure_outside_the_baseline() -> None:
    if not (ROOT / "node_modules" / "@modelcontextprotocol" / "conformance").is_dir():
        if os.environ.get("CI"):
            pytest.fail("node_modules is missing: run `make node`")
        pytest.skip("node_modules is missing: run `make node`")
    done = subprocess.run(
        ["bash", "scripts/conformance.sh"],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=640,
    )
    summary = [line for line in done.stdout.splitlines() if line.startswith("conformance:")]
    assert done.returncode == 0, "\n".join(summary) + "\n" + done.stdout[-4000:] + done.stderr[-2000:]
    assert any("0 unexpected failures" in line for line in summary), summary
