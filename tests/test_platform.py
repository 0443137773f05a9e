"""The portable parts of the platform layer: the browser command of each system, the lock file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import WAIT
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


OTHER_SYSTEM = Path(__file__).resolve().parent / "peers" / "other_system.py"


@pytest.mark.parametrize("system", ["win32", "darwin"])
@pytest.mark.parametrize("args", [["import"], ["--help"], ["check", "--help"]], ids=" ".join)
def test_the_entry_points_load_on_windows_and_macos(system: str, args: list[str]) -> None:
    """``--help``, ``check`` and the embedded mode import nothing of Linux on other systems."""
    result = subprocess.run(
        [sys.executable, str(OTHER_SYSTEM), system, *args],
        capture_output=True,
        text=True,
        timeout=WAIT * 6,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = "imported" if args == ["import"] else "Usage: mcp-bridge-vscode"
    assert expected in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("system", ["win32", "darwin"])
def test_mypy_strict_is_clean_for_windows_and_macos(system: str) -> None:
    """The same check as ``make lint``: every module type-checks as that system sees it."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--platform",
            system,
            "--cache-dir",
            str(REPO / ".mypy_cache" / f"platform-{system}"),
            "mcpbridge",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout
