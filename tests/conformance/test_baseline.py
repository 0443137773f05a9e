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
