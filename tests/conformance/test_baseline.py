"""The conformance runner reads its baseline and the suite's results as intended (no suite runs here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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
        assert run.suites(tools, name, "URL") == run.suites(tools, "bridge", "URL")
    stable, schema = run.suites(tools, "bridge", "URL")
    assert stable.scenarios == run.STABLE_SCENARIOS and "json-schema-2020-12" not in stable.scenarios
    assert schema.command[-2:] == ("--scenario", "json-schema-2020-12")
    assert schema.scenarios == {"json-schema-2020-12"}
    (direct,) = run.suites(tools, "direct", "URL")
    assert direct.command[1] == "conformance-next.js" and direct.scenarios == run.NEXT_SCENARIOS


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


# A stand-in for the suite: it writes the results its argument names into the folder after
# ``-o``, as the suite does, and exits with the code its argument names (a negative one: by that
# signal).
FAKE_SUITE = """
import json, os, pathlib, sys

plan = json.loads(sys.argv[1])
results = pathlib.Path(sys.argv[sys.argv.index("-o") + 1])
for name, statuses in plan["scenarios"].items():
    folder = results / f"server-{name}-2026-12-02T13-32-43-688Z"
    folder.mkdir()
    checks = [{"id": f"{name}-{n}", "status": status} for n, status in enumerate(statuses)]
    (folder / "checks.json").write_text(json.dumps(checks))
if plan["exit"] < 0:
    os.kill(os.getpid(), -plan["exit"])
sys.exit(plan["exit"])
"""

EXPECTED = frozenset({"ping", "tools-list"})


def run_fake_suite(tmp_path: Path, scenarios: dict[str, list[str]], code: int) -> dict[str, Any]:
    """Run the stand-in as the runner runs a command of the suite that must run :data:`EXPECTED`."""
    script = tmp_path / "fake_suite.py"
    script.write_text(FAKE_SUITE, encoding="utf-8")
    plan = json.dumps({"scenarios": scenarios, "exit": code})
    suite = run.Suite((sys.executable, str(script), plan), EXPECTED)
    results: dict[str, Any] = run.run_suite(suite, tmp_path / "suite-1", 60.0)
    return results


def test_a_suite_that_runs_every_expected_scenario_gives_its_results(tmp_path: Path) -> None:
    scenarios = run_fake_suite(tmp_path, {"ping": ["SUCCESS"], "tools-list": ["SUCCESS"]}, 0)
    assert sorted(scenarios) == ["ping", "tools-list"]


def test_a_suite_that_exits_1_with_a_failed_check_gives_its_results_for_the_baseline(tmp_path: Path) -> None:
    scenarios = run_fake_suite(tmp_path, {"ping": ["SUCCESS"], "tools-list": ["FAILURE"]}, 1)
    assert scenarios["tools-list"].failed == ["tools-list-0"]


def test_a_suite_that_runs_nothing_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(
        run.ConformanceError, match="ran 0 of its 2 scenarios .exit code 0.; missing: ping, tools-list"
    ):
        run_fake_suite(tmp_path, {}, 0)


def test_a_missing_scenario_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(
        run.ConformanceError, match="ran 1 of its 2 scenarios .exit code 1.; missing: tools-list;"
    ):
        run_fake_suite(tmp_path, {"ping": ["FAILURE"]}, 1)


def test_a_scenario_the_runner_does_not_expect_fails_the_run(tmp_path: Path) -> None:
    scenarios = {"ping": ["SUCCESS"], "tools-list": ["SUCCESS"], "caching": ["SUCCESS"]}
    with pytest.raises(run.ConformanceError, match="does not expect: caching;"):
        run_fake_suite(tmp_path, scenarios, 0)


@pytest.mark.parametrize(
    ("statuses", "code"), [(["SUCCESS"], 1), (["WARNING"], 1), (["FAILURE"], 2), (["SUCCESS"], -9)]
)
def test_an_exit_that_no_failed_check_explains_fails_the_run(
    tmp_path: Path, statuses: list[str], code: int
) -> None:
    with pytest.raises(run.ConformanceError, match=f"exited with code {code} without a failed check"):
        run_fake_suite(tmp_path, {"ping": ["SUCCESS"], "tools-list": statuses}, code)


def test_a_listed_failure_that_passes_now_fails_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    expected = {
        run.Failure("bridge", "ping", "ping"): "a reason for the test",
        run.Failure("direct", "tasks-lifecycle", "*"): "a reason for the test",
    }
    still_failing = {run.Failure("bridge", "ping", "ping"), run.Failure("direct", "tasks-lifecycle", "a")}
    assert run.verdict(still_failing, expected, ["bridge", "direct"], "baseline.txt") == 0
    assert "0 unexpected failures, 0 unexpected passes, 2 expected failures" in capsys.readouterr().out
    assert (
        run.verdict({run.Failure("bridge", "ping", "ping")}, expected, ["bridge", "direct"], "baseline.txt")
        == 1
    )
    assert capsys.readouterr().out.splitlines() == [
        "conformance: error: passes now, remove it from baseline.txt: direct tasks-lifecycle *",
        "conformance: 0 unexpected failures, 1 unexpected passes, 1 expected failures",
    ]
    # A run that did not run says nothing of its lines.
    assert run.verdict(set(), expected, ["embedded"], "baseline.txt") == 0


def test_a_failure_that_the_baseline_does_not_list_fails_the_script(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run.verdict({run.Failure("bridge", "ping", "ping")}, {}, ["bridge"], "baseline.txt") == 1
    assert "error: a failure that is not in baseline.txt: bridge ping ping" in capsys.readouterr().out
