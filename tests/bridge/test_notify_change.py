"""A subscription change that the listen owner does not finish in time is answered once."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from mcpbridge.bridge.front.output import Output, Slot
from mcpbridge.bridge.rules import errortable
from mcpbridge.bridge.rules.translate import Declared
from mcpbridge.bridge.sessions import notify


class Unused:
    """The upstream client of a listener whose owner never runs: nothing may call it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the listener used the client ({name}) without its owner")


def frames(buffer: io.BytesIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_a_change_that_the_owner_never_finishes_times_out_and_a_late_answer_writes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(notify, "ACK_TIMEOUT", 0.05)
    monkeypatch.setattr(notify, "CHANGE_MARGIN", 0.05)
    buffer = io.BytesIO()
    output = Output(buffer)
    listener = notify.Listener(
        output,
        Unused(),  # type: ignore[arg-type]
        Declared(resources=True, subscribe=True),
        capabilities={},
        log_level=lambda: None,
        shutdown_grace=0.5,
    )
    slot = Slot(7, "resources/subscribe")
    # The owner thread is not started: the change stays queued, as behind a slow one.
    listener.change(slot, "file:///a", subscribe=True)
    assert frames(buffer) == [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {
                "code": -32603,
                "message": errortable.ERRORS["timeout"][1],
                "data": {"cause": "timeout", "detail": "subscriptions/listen"},
            },
        }
    ]
    # The owner's answer after the slot gave up is not a second response.
    assert output.respond(slot, {}) is False
    assert len(frames(buffer)) == 1
