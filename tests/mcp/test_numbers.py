"""The one reader of a peer's numbers: every value in its range or a named error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpbridge.mcp.errorbase import PeerFault
from mcpbridge.mcp.numbers import MAX_DIGITS, OutOfRange, peer_int, peer_seconds


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0.0), (3600, 3600.0), (1.5, 1.5), ("42", 42.0), (" 7\t", 7.0), ("007", 7.0)],
)
def test_a_number_in_range_is_read(value: object, expected: float) -> None:
    assert peer_seconds(value, name="expires_in", low=0, high=10**9) == expected


@pytest.mark.parametrize(
    "value",
    [
        json.loads("1e400"),  # infinity
        -json.loads("1e400"),
        float("nan"),
        int("9" * 400),
        "9" * 400,
        "9" * (MAX_DIGITS + 1),
        -1,
        10**9 + 1,
        True,
        None,
        "²",
        "1.5",
        "-3",
        "",
        [],
        {},
    ],
)
def test_every_other_value_is_out_of_range_by_name(value: object) -> None:
    with pytest.raises(OutOfRange) as caught:
        peer_seconds(value, name="expires_in", low=0, high=10**9)
    assert caught.value.name == "expires_in"
    assert str(caught.value) == "expires_in is not a number from 0 to 1000000000"
    assert isinstance(caught.value, PeerFault)


def test_a_whole_number_cuts_a_float_and_keeps_the_bounds() -> None:
    assert peer_int(2.9, name="interval", low=1, high=300) == 2
    assert peer_int("300", name="interval", low=1, high=300) == 300
    with pytest.raises(OutOfRange, match="^interval is not a number from 1 to 300$"):
        peer_int(json.loads("1e400"), name="interval", low=1, high=300)
    with pytest.raises(OutOfRange):
        peer_int(0, name="interval", low=1, high=300)


@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(), st.booleans()))
def test_the_result_is_in_range_or_the_error_is_named(value: object) -> None:
    try:
        seconds = peer_seconds(value, name="n", low=0, high=86400)
    except OutOfRange as exc:
        assert exc.name == "n"
    else:
        assert 0 <= seconds <= 86400
