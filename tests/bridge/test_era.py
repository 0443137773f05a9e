"""Which refusal of the client's ``initialize`` shows a server of revision 2026-07-28 only."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcpbridge.bridge.rules.errortable import BACK_CHANNEL_FIX, no_back_channel
from mcpbridge.bridge.sessions.era import refuses_as_modern, translated_error
from mcpbridge.mcp.jsonrpc import NO_DATA, ErrorObject
from mcpbridge.mcp.text import printable


@pytest.mark.parametrize(
    ("code", "data", "modern"),
    [
        # Our server core and the spec's modern-only server: -32022 naming its revisions.
        (-32022, {"supported": ["2026-07-28"], "requested": "2025-11-25"}, True),
        (-32022, NO_DATA, True),
        # A server that knows no initialize at all.
        (-32601, NO_DATA, True),
        # The 2025 way of a bad version, but naming only modern revisions.
        (-32602, {"supported": ["2026-07-28", "2027-01-01"]}, True),
        # A server of the 2025 era that refuses the client: its error reaches the client.
        (-32602, {"supported": ["2025-06-18", "2026-07-28"]}, False),
        (-32602, {"supported": []}, False),
        (-32602, {"supported": [7]}, False),
        (-32602, NO_DATA, False),
        (-32603, "internal", False),
    ],
)
def test_a_refusal_is_modern_only_when_it_names_no_revision_of_the_2025_era(
    code: int, data: Any, modern: bool
) -> None:
    assert refuses_as_modern(ErrorObject(code, "refused", data)) is modern


BACK_CHANNEL = (
    "Cannot send 'elicitation/create': this transport context has no back-channel for "
    "server-initiated requests."
)


def test_a_forced_translation_names_the_option_to_drop_in_the_error_of_a_server_without_a_back_channel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = {"code": -32600, "message": BACK_CHANNEL, "data": {"method": "elicitation/create"}}
    with caplog.at_level(logging.WARNING, logger="mcpbridge.bridge"):
        told = translated_error("tools/call", error, protocol="2026-07-28")
    assert told == {
        "code": -32600,
        "message": f"{BACK_CHANNEL} {BACK_CHANNEL_FIX}",
        "data": {"method": "elicitation/create"},
    }
    assert "remove --protocol 2026-07-28 from the arguments of the server" in told["message"]
    assert [r.getMessage() for r in caplog.records] == [
        "tools/call: the upstream server answered that it cannot send its request in the middle of the "
        f"call ({printable(BACK_CHANNEL)}). {BACK_CHANNEL_FIX}"
    ]


@pytest.mark.parametrize(
    ("protocol", "message"),
    [("auto", BACK_CHANNEL), ("legacy", BACK_CHANNEL), ("2026-07-28", "Unknown tool: x")],
)
def test_every_other_upstream_error_of_the_translation_passes_unchanged(
    protocol: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that refused initialize speaks 2026-07-28 only: no option to drop would help it."""
    error = {"code": -32600, "message": message}
    with caplog.at_level(logging.DEBUG, logger="mcpbridge.bridge"):
        assert translated_error("tools/call", error, protocol=protocol) == error
    assert caplog.records == []


@pytest.mark.parametrize(
    "message",
    [
        "Cannot send 'elicitation/create': this transport context has no back-channel for "
        "server-initiated requests",
        "ctx.elicit() is unavailable on 2026-07-28 connections",
    ],
)
def test_the_bridge_and_check_read_the_same_words_of_a_server_without_a_back_channel(message: str) -> None:
    assert no_back_channel({"code": -32600, "message": message})
    assert not no_back_channel({"code": -32600, "message": "Unknown tool: x"})
