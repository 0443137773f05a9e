"""``check`` tells whether the server offers tasks, which tools need them, and what ``--tasks`` does."""

from __future__ import annotations

from test_check import check_json, run_check

from harness import fixture_command
from peers import task_server_command

#: The tools of the tasks peer that only run as tasks, in the order of its tool list.
REQUIRED = ["report", "failing_job", "test_tool_with_task"]


def test_check_finds_the_tasks_extension_and_the_tools_that_need_it() -> None:
    code, report = check_json("--", *task_server_command())
    assert code == 0 and report["era"] == "2026-07-28"
    assert report["tasks"] == {"mode": "auto", "offered": True, "required": REQUIRED}
    assert report["notes"] == []
    code, out, _err = run_check("--", *task_server_command())
    assert code == 0
    assert (
        "Tasks:      the server offers the Tasks extension; the bridge carries its tasks; "
        "tools that need them: report, failing_job, test_tool_with_task"
    ) in out.splitlines()


def test_check_with_tasks_off_says_that_the_tools_that_need_tasks_fail() -> None:
    code, report = check_json("--tasks", "off", "--", *task_server_command())
    assert code == 0
    assert report["tasks"] == {"mode": "off", "offered": True, "required": REQUIRED}
    [note] = report["notes"]
    assert "--tasks off declares none" in note["note"] and "-32021" in note["note"]
    assert note["fix"].startswith("Remove --tasks off")
    code, out, _err = run_check("--tasks", "off", "--", *task_server_command())
    assert code == 0
    assert (
        "Tasks:      off: the bridge declares no tasks (the server offers the Tasks extension); "
        "tools that need them: report, failing_job, test_tool_with_task"
    ) in out.splitlines()


def test_check_of_a_server_without_tasks_says_so_and_notes_nothing() -> None:
    code, report = check_json("--", *fixture_command())
    assert code == 0
    assert report["tasks"] == {"mode": "auto", "offered": False, "required": []}
    code, report = check_json("--tasks", "off", "--", *fixture_command())
    assert code == 0
    assert report["tasks"]["mode"] == "off" and report["notes"] == []
    code, out, _err = run_check("--", *fixture_command())
    assert code == 0
    assert "Tasks:      the server does not offer the Tasks extension" in out.splitlines()
