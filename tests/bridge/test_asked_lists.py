"""A list change reaches the client only once it asked for a list that the change concerns."""

from __future__ import annotations

import logging

import pytest

from mcpbridge.bridge.front.listrules import AskedLists
from mcpbridge.mcp.droplog import DropLog


def test_a_change_of_a_list_not_asked_for_is_dropped_with_one_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked = AskedLists(DropLog(logging.getLogger("mcpbridge.bridge")))
    with caplog.at_level(logging.DEBUG, logger="mcpbridge.bridge"):
        assert not asked.tells("notifications/tools/list_changed")
        assert not asked.tells("notifications/tools/list_changed")
    drops = [r.getMessage() for r in caplog.records if "has not asked for" in r.getMessage()]
    assert drops == ["dropped a notifications/tools/list_changed: the client has not asked for that list yet"]
    # Other notifications always pass; a request that is no list marks nothing.
    assert asked.tells("notifications/message")
    assert asked.tells("notifications/resources/updated")
    asked.sent("tools/call")
    assert not asked.tells("notifications/tools/list_changed")


def test_a_list_counts_from_its_first_request_and_the_resource_change_covers_both_resource_lists() -> None:
    asked = AskedLists(DropLog(logging.getLogger("mcpbridge.bridge")))
    asked.sent("tools/list")
    assert asked.tells("notifications/tools/list_changed")
    assert not asked.tells("notifications/prompts/list_changed")
    assert not asked.tells("notifications/resources/list_changed")
    asked.sent("resources/templates/list")
    assert asked.tells("notifications/resources/list_changed")
