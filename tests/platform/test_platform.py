"""The portable parts of the platform layer: the browser command of each system, the lock file,
the age of the process."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import WAIT, read_line
from mcpbridge import platform

URL = "http://127.0.0.1:33418/start?a=1&b=two words&c=%26"
REPO = Path(__file__).resolve().parents[2]
#: A time after the start of this process: the import of this module.
IMPORTED = time.monotonic()


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


OTHER_SYSTEM = Path(__file__).resolve().parents[1] / "peers" / "other_system.py"


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


#: Holds the lock file argv[2] until its stdin ends, then exits (argv[1]: the repository).
LOCK_HOLDER = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from mcpbridge import platform
with platform.file_lock(Path(sys.argv[2]), 10.0):
    print("held", flush=True)
    sys.stdin.read()
"""


def hold_lock(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(REPO), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and read_line(holder.stdout, "the line 'held' of the holder") == "held\n"
    return holder


def end(holder: subprocess.Popen[str], *, kill: bool = False) -> None:
    assert holder.stdin is not None and holder.stdout is not None
    if kill:
        holder.kill()
    holder.stdin.close()
    holder.wait(WAIT)
    holder.stdout.close()


def test_a_lock_held_by_another_process_times_out_with_a_named_error(tmp_path: Path) -> None:
    path = tmp_path / "state" / "index.lock"
    holder = hold_lock(path)
    try:
        with pytest.raises(platform.LockTimeout):
            with platform.file_lock(path, 0.1):
                pytest.fail("the lock of another process was taken")
    finally:
        end(holder)
    with platform.file_lock(path, WAIT):
        pass  # free again once the holder let go
    assert oct(path.parent.stat().st_mode & 0o777) == oct(0o700)
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


def test_the_lock_of_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    path = tmp_path / "index.lock"
    holder = hold_lock(path)
    end(holder, kill=True)
    with platform.file_lock(path, 0):  # one try: the system freed it with the process
        pass


def test_two_threads_of_one_process_take_turns(tmp_path: Path) -> None:
    path = tmp_path / "index.lock"
    inside: list[int] = []
    overlaps: list[int] = []
    start = threading.Barrier(4)

    def work(n: int) -> None:
        start.wait(WAIT)
        for _ in range(20):
            with platform.file_lock(path, WAIT):
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(n)
                inside.remove(n)

    threads = [threading.Thread(target=work, args=(n,), name=f"test-lock-{n}") for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert not any(t.is_alive() for t in threads)
    assert overlaps == []


def test_the_age_of_the_process_counts_from_before_its_first_import() -> None:
    since_import = time.monotonic() - IMPORTED
    age = platform.process_age()
    if not sys.platform.startswith("linux"):
        assert age is None
        return
    assert age is not None and age >= since_import
