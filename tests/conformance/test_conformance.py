"""The MCP conformance suite, through the bridge and directly (scripts/conformance.sh).

The runs: a 2026-07-28 upstream through the bridge, embedded and directly, and a
2025-era upstream (``mcp==1.30.0``, in ``.venv-legacy``) through the bridge and
directly. It runs in the ordinary test run so that CI counts it; ``make
conformance`` runs it alone with its full output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.conformance
@pytest.mark.timeout(900)
def test_the_conformance_suites_have_no_failure_outside_the_baseline() -> None:
    if not (ROOT / "node_modules" / "@modelcontextprotocol" / "conformance").is_dir():
        if os.environ.get("CI"):
            pytest.fail("node_modules is missing: run `make node`")
        pytest.skip("node_modules is missing: run `make node`")
    legacy_python = os.environ.get("LEGACY_PYTHON") or str(ROOT / ".venv-legacy" / "bin" / "python")
    if not os.access(legacy_python, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(".venv-legacy is missing: run `make legacy-venv`")
        pytest.skip(".venv-legacy is missing: run `make legacy-venv`")
    done = subprocess.run(
        ["bash", "scripts/conformance.sh"],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=880,
    )
    summary = [line for line in done.stdout.splitlines() if line.startswith("conformance:")]
    assert done.returncode == 0, "\n".join(summary) + "\n" + done.stdout[-4000:] + done.stderr[-2000:]
    assert any("0 unexpected failures" in line for line in summary), summary
