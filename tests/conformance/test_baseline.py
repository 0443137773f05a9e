"""The conformance runner reads its baseline and the suite's results as intended (no suite runs here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _load_runner() -> ModuleType:
    path = Path(__file__).resolve().parent / "run.py"
    spec = importlib.util.spec_from_file_location("conformance_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


run = _load_runner()


def test_every_line_of_the_baseline_names_a_run_a_scenario_a_check_and_a_reason() -> None:
    expected = run.read_baseline(run.BASELINE)
    assert expected
    for failure, reason in expected.items():
        assert failure.run in run.RUNS
        assert len(reason.split()) >= 3, f"{failure}: give the reason"


def test_a_baseline_line_without_a_reason_is_refused(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.txt"
    baseline.write_text("# a comment\n\nbridge ping ping\n", encoding="utf-8")
    with pytest.raises(run.ConformanceError, match="baseline.txt:3"):
        run.read_baseline(baseline)


def test_the_results_of_the_suite_are_counted_by_scenario(tmp_path: Path) -> None:
    checks = [
        {"id": "a", "status": "SUCCESS"},
        {"id": "b", "status": "FAILURE"},
        {"id": "c", "status": "WARNING"},
    ]
    for name in ("tools-call-simple-text", "server-stateless"):
        folder = tmp_path / f"server-{name}-2026-12-02T13-32-43-688Z"
        folder.mkdir()
        (folder / "checks.json").write_text(json.dumps(checks), encoding="utf-8")
    (tmp_path / "not-a-result").mkdir()
    scenarios = run.read_results(tmp_path)
    assert sorted(scenarios) == ["server-stateless", "tools-call-simple-text"]
    assert scenarios["server-stateless"].passed == 1
    assert scenarios["server-stateless"].failed == ["b"]
    assert scenarios["server-stateless"].other == 1


def test_a_star_in_the_baseline_stands_for_every_check_of_the_scenario() -> None:
    expected = {run.Failure("direct", "tasks-lifecycle", "*"): "extension"}
    assert run._expected(run.Failure("direct", "tasks-lifecycle", "any-check"), expected)
    assert not run._expected(run.Failure("bridge", "tasks-lifecycle", "any-check"), expected)


def _tools(**changes: str) -> object:
    fields = {
        "node": "node",
        "conformance": "conformance.js",
        "conformance_next": "conformance-next.js",
        "supergateway": "supergateway.js",
        "python": "python",
        "legacy_python": "legacy-python",
    }
    return run.Tools(**{**fields, **changes})


def test_the_legacy_runs_start_the_2025_era_server_with_the_legacy_python() -> None:
    tools = _tools()
    server = str(run.LEGACY_SERVER)
    assert run.upstream_command(tools, "legacy-direct") == ["legacy-python", server]
    assert run.upstream_command(tools, "legacy-bridge") == [
        "python",
        "-m",
        "mcpbridge",
        "--",
        "legacy-python",
        server,
    ]
    bridge = ["python", "-m", "mcpbridge", "--", "python", str(run.SERVER)]
    assert run.upstream_command(tools, "bridge") == bridge


def test_the_legacy_runs_use_the_2025_suite_with_the_schema_scenario() -> None:
    tools = _tools()
    for name in run.LEGACY_RUNS:
        assert run.suite_commands(tools, name, "URL", Path("out")) == run.suite_commands(
            tools, "bridge", "URL", Path("out")
        )


def test_a_missing_legacy_python_is_reported_with_the_make_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = tmp_path / "node"
    node.write_text("#!/bin/sh\n", encoding="utf-8")
    node.chmod(0o755)
    script = tmp_path / "index.js"
    script.write_text("", encoding="utf-8")
    for name, value in (
        ("NODE22", node),
        ("CONFORMANCE", script),
        ("CONFORMANCE_NEXT", script),
        ("SUPERGATEWAY", script),
        ("LEGACY_PYTHON", tmp_path / "no-such-python"),
    ):
        monkeypatch.setenv(name, str(value))
    with pytest.raises(run.ConformanceError, match="make legacy-venv"):
        run.Tools.from_environment()
    assert run.Tools.from_environment(legacy=False).legacy_python == str(tmp_path / "no-such-python")


def test_a_check_that_fails_only_through_the_bridge_is_lost_by_the_bridge() -> None:
    failures = {
        run.Failure("legacy-direct", "dns-rebinding-protection", "rejected"),
        run.Failure("legacy-bridge", "dns-rebinding-protection", "rejected"),
        run.Failure("legacy-bridge", "tools-call-sampling", "tools-call-sampling"),
        run.Failure("bridge", "ping", "ping"),
    }
    lost = run.Failure("legacy-bridge", "tools-call-sampling", "tools-call-sampling")
    assert run.lost_by_bridge(failures) == [lost]
