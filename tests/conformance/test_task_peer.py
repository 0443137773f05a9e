"""The tasks peer (tests/peers/task_server.py) against the tasks scenarios of the conformance suite.

The tests of the bridge's tasks rest on that peer; run here, a third party's reading of the extension
holds it, so a misreading that the bridge and its peer share does not pass unseen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The scenarios the run must report, all passed (tests/conformance/run.py, TASK_SCENARIOS).
SCENARIOS = (
    "tasks-capability-negotiation",
    "tasks-dispatch-and-envelope",
    "tasks-lifecycle",
    "tasks-mrtr-composition",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-request-state-removal",
    "tasks-required-task-error",
    "tasks-wire-fields",
)


@pytest.mark.conformance
@pytest.mark.timeout(300)
def test_the_tasks_peer_passes_the_tasks_scenarios_of_the_conformance_suite(tmp_path: Path) -> None:
    if not (ROOT / "node_modules" / "conformance-next").is_dir():
        if os.environ.get("CI"):
            pytest.fail("node_modules is missing: run `make node`")
        pytest.skip("node_modules is missing: run `make node`")
    done = subprocess.run(
        [sys.executable, "tests/conformance/run.py", "--only", "task-peer", "--results", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=280,
    )
    summary = [line for line in done.stdout.splitlines() if line.startswith("conformance:")]
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert f"conformance: task-peer: scenarios: {len(SCENARIOS)} passed, 0 failed" in summary, summary
    lines = done.stdout.splitlines()
    for scenario in SCENARIOS:
        ok = [line for line in lines if line.startswith(f"  ok   {scenario}: ")]
        assert len(ok) == 1 and not ok[0].endswith(": 0 passed, 0 failed"), (scenario, done.stdout)
    assert "conformance: 0 unexpected failures, 0 unexpected passes, 0 expected failures" in summary, summary
