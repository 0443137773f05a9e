"""Which refusal of the client's ``initialize`` shows a server of revision 2026-07-28 only."""

from __future__ import annotations

from typing import Any

import pytest

from mcpbridge.bridge.era import refuses_as_modern
from mcpbridge.mcp.jsonrpc import NO_DATA, ErrorObject


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
