"""The shared rule of loopback hosts."""

from __future__ import annotations

import pytest

from mcpbridge.mcp.netloc import is_loopback


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST", "app.localhost", "127.0.0.1", "127.255.0.9", "::1", "[::1]"],
)
def test_a_loopback_host_is_loopback(host: str) -> None:
    assert is_loopback(host) is True


@pytest.mark.parametrize(
    "host",
    ["example.com", "localhost.example.com", "128.0.0.1", "10.0.0.1", "[::2]", "", "127.0.0.1.example.com"],
)
def test_another_host_is_not_loopback(host: str) -> None:
    assert is_loopback(host) is False
