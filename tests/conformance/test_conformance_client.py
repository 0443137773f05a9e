"""The 2026-07-28 client scenarios of the conformance suite, with the bridge as the client.

The suite's pre-release (``conformance-next``) starts a mock 2026-07-28 server per
scenario and runs ``tests/conformance/client_driver.py <url>``; the driver starts
the bridge on that URL and plays VS Code in front of it. A scenario passes when
the suite reports no failed check, no warning, and the driver exits with 0.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, NodePeers

DRIVER = REPO_ROOT / "tests" / "conformance" / "client_driver.py"

#: The suite's limit for the driver (milliseconds), and ours for the whole suite run (seconds).
SCENARIO_TIMEOUT_MS = 30000
RUN_TIMEOUT = 60.0

SCENARIOS = [
    "request-metadata",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    "sep-2322-client-request-state",
]


def read_checks(results: Path) -> list[dict[str, Any]]:
    """The checks the suite saved (``<results>/<scenario>-<time>/checks.json``)."""
    files = sorted(results.glob("*/checks.json"))
    assert files, f"the suite saved no checks.json under {results}"
    checks: list[dict[str, Any]] = json.loads(files[-1].read_text(encoding="utf-8"))
    return checks


@pytest.mark.conformance
@pytest.mark.timeout(RUN_TIMEOUT + 30)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_bridge_passes_the_client_scenario_of_the_2026_07_28_suite(
    scenario: str, node: NodePeers, tmp_path: Path
) -> None:
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(DRIVER))}"
    done = subprocess.run(
        node.command(
            node.conformance_next,
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--spec-version",
            "2026-07-28",
            "--timeout",
            str(SCENARIO_TIMEOUT_MS),
            "-o",
            str(tmp_path),
        ),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    checks = read_checks(tmp_path)
    bad = [
        f"{check['status']} {check['id']} {check.get('name', '')}: {check.get('errorMessage', '')}"
        for check in checks
        if check["status"] in ("FAILURE", "WARNING")
    ]
    assert done.returncode == 0 and not bad, "\n".join(bad) + "\n" + done.stderr[-4000:]
    assert any(check["status"] == "SUCCESS" for check in checks), checks
