"""The lifecycle table of the front end against the table of the page "How it works"."""

from __future__ import annotations

import re

from conftest import REPO_ROOT
from mcpbridge.bridge.front.lifecycle import KINDS, LABELS, LIFECYCLE, Action, State, action
from mcpbridge.bridge.rules.legacy import MethodClass, NotificationClass

PAGE = REPO_ROOT / "docs" / "how-it-works.rst"
_TITLE = ".. list-table:: What each state does with each kind of message of the client"
_ROW = re.compile(r"^   \* - (.*)$")
_CELL = re.compile(r"^     - (.*)$")


def page_table() -> list[list[str]]:
    """The rows of the lifecycle table of the page, the header row first."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    assert _TITLE in lines, "the page has no lifecycle table"
    rows: list[list[str]] = []
    for line in lines[lines.index(_TITLE) + 1 :]:
        if line.startswith("   :") or not line.strip() and not rows:
            continue
        if (row := _ROW.match(line)) is not None:
            rows.append([row.group(1)])
        elif (cell := _CELL.match(line)) is not None and rows:
            rows[-1].append(cell.group(1))
        else:
            break
    assert rows, "the lifecycle table of the page has no rows"
    return rows


def page_lifecycle() -> dict[tuple[State, str], str]:
    """(state, label of the kind) -> the text of the cell, from the page."""
    header, *body = page_table()
    states = [State(value) for value in header[1:]]
    cells: dict[tuple[State, str], str] = {}
    for label, *texts in body:
        assert len(texts) == len(states), f"the row {label!r} has {len(texts)} cells, not {len(states)}"
        for state, text in zip(states, texts, strict=True):
            assert (state, label) not in cells, f"the page has the row {label!r} twice"
            cells[state, label] = text
    return cells


def test_the_page_shows_every_state_and_kind_of_the_table_and_no_other() -> None:
    header, *body = page_table()
    assert header[1:] == [state.value for state in State]
    assert [row[0] for row in body] == [LABELS[kind] for kind in KINDS]


def test_each_cell_of_the_page_is_the_action_of_the_table() -> None:
    on_page = page_lifecycle()
    in_module = {(state, LABELS[kind]): act.value for (state, kind), act in LIFECYCLE.items()}
    assert on_page == in_module


def test_the_table_has_one_action_for_each_state_and_kind_of_message() -> None:
    assert set(LIFECYCLE) == {(state, kind) for state in State for kind in KINDS}
    assert set(KINDS) == set(MethodClass) | set(NotificationClass)
    assert set(LIFECYCLE.values()) == set(Action), "an action that no state takes"


def test_only_awaiting_starts_the_upstream_and_ping_is_answered_until_the_end() -> None:
    starts = [state for state in State if action(state, MethodClass.INITIALIZE) is Action.START]
    assert starts == [State.AWAITING, State.FAILED]
    assert action(State.INITIALIZING, MethodClass.PING) is Action.PONG
    assert action(State.LOST, MethodClass.PING) is Action.PONG
    assert action(State.READY_2025, MethodClass.PING) is Action.PASS
    for kind in MethodClass:
        assert action(State.CLOSING, kind) is Action.NO_RESPONSE
