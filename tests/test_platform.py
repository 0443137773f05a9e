"""The portable parts of the platform layer: the browser command of each system, the lock file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcpbridge import platform

URL = "http://127.0.0.1:33418/start?a=1&b=two words&c=%26"
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("system", "env", "expected"),
    [
        ("win32", {}, [platform.SHELL_EXECUTE, URL]),
        ("win32", {"BROWSER": "firefox"}, [platform.SHELL_EXECUTE, URL]),
        ("darwin", {}, ["open", URL]),
        ("darwin", {"BROWSER": "  "}, ["open", URL]),
        ("darwin", {"BROWSER": "/opt/firefox"}, ["/opt/firefox", URL]),
        ("linux", {}, ["xdg-open", URL]),
        ("linux", {"BROWSER": ""}, ["xdg-open", URL]),
        ("linux", {"BROWSER": "w3m"}, ["w3m", URL]),
        ("freebsd14", {}, ["xdg-open", URL]),
    ],
)
def test_the_browser_command_of_each_system_takes_the_url_as_one_argument(
    system: str, env: dict[str, str], expected: list[str]
) -> None:
    assert platform.browser_command(URL, env, system) == expected


def test_shell_open_is_refused_off_windows() -> None:
    if sys.platform == "win32":
        pytest.fail("this test checks the refusal of the other systems")
    with pytest.raises(OSError):
        platform.shell_open(URL)
