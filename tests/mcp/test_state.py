"""The signed requestState of multi round-trip requests."""

from __future__ import annotations

import base64
import json

import pytest

from mcpbridge.mcp import state
from mcpbridge.mcp.state import STATE_TTL, InvalidState, StateSigner, sign, verify

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
NOW = 1_800_000_000.0
VALUE = {"round": 2, "asked": ["auth"], "text": "é ✓"}


def test_a_signed_state_verifies_to_the_same_value() -> None:
    token = sign(KEY, VALUE, now=NOW, binding="tools/call\nask")
    assert verify(KEY, token, now=NOW + 1, binding="tools/call\nask") == VALUE


@pytest.mark.parametrize("value", [None, 0, 1.5, "", "text", [], [1, [2]], {}, True])
def test_every_json_value_can_be_a_state(value: object) -> None:
    assert verify(KEY, sign(KEY, value, now=NOW), now=NOW) == value


def test_a_token_is_url_safe_ascii_with_three_parts() -> None:
    token = sign(KEY, VALUE, now=NOW)
    assert token.isascii() and token.startswith("v1.")
    assert len(token.split(".")) == 3
    assert set(token) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def test_a_change_of_any_single_byte_is_refused() -> None:
    token = sign(KEY, VALUE, now=NOW)
    for position in range(len(token)):
        for replacement in {"A", "B", "-", "_", ".", "=", " ", "é"} - {token[position]}:
            tampered = token[:position] + replacement + token[position + 1 :]
            with pytest.raises(InvalidState):
                verify(KEY, tampered, now=NOW)


def test_a_shortened_or_extended_token_is_refused() -> None:
    token = sign(KEY, VALUE, now=NOW)
    for bad in (token[:-1], token[1:], token + "A", token + "=", "A" + token, token + "\n"):
        with pytest.raises(InvalidState):
            verify(KEY, bad, now=NOW)


def test_a_payload_changed_and_resigned_with_another_key_is_refused() -> None:
    forged = sign(OTHER_KEY, {"round": 99}, now=NOW)
    with pytest.raises(InvalidState, match="signature"):
        verify(KEY, forged, now=NOW)


def test_a_payload_swapped_in_from_another_token_is_refused() -> None:
    first = sign(KEY, {"round": 1}, now=NOW).split(".")
    second = sign(KEY, {"round": 2}, now=NOW).split(".")
    with pytest.raises(InvalidState):
        verify(KEY, ".".join([first[0], second[1], first[2]]), now=NOW)


def test_a_state_expires_after_its_lifetime() -> None:
    token = sign(KEY, VALUE, now=NOW)
    assert verify(KEY, token, now=NOW + STATE_TTL - 1) == VALUE
    with pytest.raises(InvalidState, match="expired"):
        verify(KEY, token, now=NOW + STATE_TTL)
    with pytest.raises(InvalidState, match="expired"):
        verify(KEY, token, now=NOW + 10 * STATE_TTL)


def test_a_custom_lifetime_is_honoured() -> None:
    token = sign(KEY, VALUE, now=NOW, ttl=5)
    assert verify(KEY, token, now=NOW + 4) == VALUE
    with pytest.raises(InvalidState):
        verify(KEY, token, now=NOW + 5)


def test_a_state_made_for_another_request_is_refused() -> None:
    token = sign(KEY, VALUE, now=NOW, binding="tools/call\nask_form")
    with pytest.raises(InvalidState, match="another request"):
        verify(KEY, token, now=NOW, binding="tools/call\nask_url")


@pytest.mark.parametrize(
    "bad", [None, 5, [], {}, b"v1.a.b", "", "v1", "v1..", "v2.a.b", "x" * (state.MAX_TOKEN_CHARS + 1)]
)
def test_malformed_tokens_are_refused(bad: object) -> None:
    with pytest.raises(InvalidState):
        verify(KEY, bad, now=NOW)


def test_a_validly_signed_payload_of_an_unknown_form_is_refused() -> None:
    payload = base64.urlsafe_b64encode(json.dumps(["not", "an", "object"]).encode()).rstrip(b"=").decode()
    signed = f"v1.{payload}"
    token = f"{signed}.{state._mac(KEY, signed)}"
    with pytest.raises(InvalidState, match="unknown form"):
        verify(KEY, token, now=NOW)


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError):
        sign(b"short", VALUE, now=NOW)
    with pytest.raises(ValueError):
        StateSigner(b"short")


def test_a_value_that_is_not_json_is_refused_when_signing() -> None:
    with pytest.raises(ValueError):
        sign(KEY, {"when": object()}, now=NOW)
    with pytest.raises(ValueError):
        sign(KEY, float("nan"), now=NOW)


def test_the_signer_reads_its_clock() -> None:
    clock = [NOW]
    signer = StateSigner(KEY, ttl=60, clock=lambda: clock[0])
    token = signer.sign(VALUE, binding="b")
    clock[0] = NOW + 59
    assert signer.verify(token, binding="b") == VALUE
    clock[0] = NOW + 60
    with pytest.raises(InvalidState):
        signer.verify(token, binding="b")


def test_two_signers_with_random_keys_do_not_accept_each_others_states() -> None:
    token = StateSigner().sign(VALUE)
    with pytest.raises(InvalidState):
        StateSigner().verify(token)
