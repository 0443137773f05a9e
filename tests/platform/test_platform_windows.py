"""The Windows platform layer on Linux: its Win32 calls go to a fake that records them.

What runs here is the logic around the calls (the order of the job object's
calls, the fall-backs, the console event handler, the structure given to
``SetInformationJobObject``); the calls themselves run on Windows only.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import WAIT
from mcpbridge.platform import windows
from mcpbridge.platform.windows import (
    CREATE_NEW_PROCESS_GROUP,
    CTRL_BREAK_EVENT,
    CTRL_C_EVENT,
    CTRL_CLOSE_EVENT,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    ExtendedLimits,
)


class FakeWin32:
    """The :class:`~mcpbridge.platform.windows.Win32` seam: records each call; can fail one."""

    def __init__(self, fail: set[str] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail or set()
        self.handlers: list[Callable[[int], bool]] = []
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.events: dict[int, threading.Event] = {}
        self._next = 100

    def _record(self, *call: Any) -> None:
        self.calls.append(call)
        if call[0] in self.fail:
            raise OSError(5, f"{call[0]} failed (error 5)")

    def create_kill_on_close_job(self) -> int:
        self._record("create_kill_on_close_job")
        self._next += 4
        return self._next

    def assign_process(self, job: int, pid: int) -> None:
        self._record("assign_process", job, pid)

    def terminate_job(self, job: int, exit_code: int) -> None:
        self._record("terminate_job", job, exit_code)
        for proc in self.procs.values():  # what the system does: every process of the job ends
            proc.kill()

    def close_handle(self, handle: int) -> None:
        self._record("close_handle", handle)

    def send_ctrl_break(self, process_group: int) -> None:
        self._record("send_ctrl_break", process_group)

    def set_ctrl_handler(self, handler: Callable[[int], bool]) -> None:
        self._record("set_ctrl_handler")
        self.handlers.append(handler)

    def set_binary(self, fd: int) -> None:
        self._record("set_binary", fd)

    def shell_open(self, url: str) -> None:
        self._record("shell_open", url)

    def try_lock(self, fd: int) -> bool:
        self._record("try_lock", fd)
        return True

    def unlock(self, fd: int) -> None:
        self._record("unlock", fd)

    def protect(self, path: Path) -> None:
        self._record("protect", path)

    def create_event(self, name: str) -> int:
        self._record("create_event", name)
        self._next += 4
        self.events[self._next] = threading.Event()
        return self._next

    def wait_event(self, handle: int, timeout: float) -> bool:
        event = self.events[handle]
        signaled = event.wait(timeout)
        event.clear()  # an auto-reset event
        return signaled

    def set_event(self, handle: int) -> None:
        self.events[handle].set()


class Popen:
    """``subprocess.Popen`` that takes Windows' ``creationflags`` and starts the command here."""

    def __init__(self, api: FakeWin32) -> None:
        self.api = api
        self.flags: list[int] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        self.flags.append(kwargs.pop("creationflags"))
        proc = subprocess.Popen(argv, **kwargs)
        self.api.procs[proc.pid] = proc
        return proc


@pytest.fixture
def trees() -> Iterator[list[windows.WindowsTree]]:
    made: list[windows.WindowsTree] = []
    yield made
    for tree in made:
        tree.proc.kill()
        tree.proc.wait(WAIT)
        for stream in (tree.proc.stdin, tree.proc.stdout, tree.proc.stderr):
            if stream is not None:
                stream.close()


def spawn(api: FakeWin32, trees: list[windows.WindowsTree]) -> tuple[windows.WindowsTree, Popen]:
    popen = Popen(api)
    tree = windows.spawn(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        env=None,
        cwd=None,
        bufsize=0,
        api=api,
        popen=popen,
    )
    trees.append(tree)
    return tree, popen


def test_the_command_starts_in_a_new_process_group_inside_a_kill_on_close_job(
    trees: list[windows.WindowsTree],
) -> None:
    api = FakeWin32()
    tree, popen = spawn(api, trees)
    assert popen.flags == [CREATE_NEW_PROCESS_GROUP]
    job = tree.job
    assert api.calls == [("create_kill_on_close_job",), ("assign_process", job, tree.pid)]
    tree.terminate()
    assert api.calls[-1] == ("send_ctrl_break", tree.pid)
    tree.kill()
    assert api.calls[-1] == ("terminate_job", job, windows.KILLED_EXIT_CODE)
    assert tree.proc.wait(WAIT) != 0
    tree.release()
    tree.release()
    assert [c for c in api.calls if c[0] == "close_handle"] == [("close_handle", job)]


def test_without_a_job_the_command_still_starts_and_its_kill_ends_the_process(
    trees: list[windows.WindowsTree],
) -> None:
    api = FakeWin32(fail={"create_kill_on_close_job"})
    tree, _ = spawn(api, trees)
    assert tree.job is None
    tree.kill()
    assert tree.proc.wait(WAIT) != 0
    tree.release()
    assert [c[0] for c in api.calls] == ["create_kill_on_close_job"]


def test_a_job_that_cannot_be_joined_is_closed_and_the_kill_ends_the_process(
    trees: list[windows.WindowsTree],
) -> None:
    api = FakeWin32(fail={"assign_process"})
    tree, _ = spawn(api, trees)
    job = api.calls[1][1]  # the job that assign_process was given
    assert tree.job is None
    assert api.calls[-1] == ("close_handle", job)
    tree.kill()
    assert tree.proc.wait(WAIT) != 0


def test_a_command_that_does_not_start_closes_its_job() -> None:
    api = FakeWin32()
    with pytest.raises(OSError):
        windows.spawn(
            ["/nonexistent/mcpbridge-no-such-command"],
            env=None,
            cwd=None,
            bufsize=0,
            api=api,
            popen=Popen(api),
        )
    assert [c[0] for c in api.calls] == ["create_kill_on_close_job", "close_handle"]


def test_the_job_limits_ask_for_kill_on_close_in_the_layout_of_windows() -> None:
    limits = windows.kill_on_close_limits()
    assert limits.BasicLimitInformation.LimitFlags == JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE == 0x2000
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        # JOBOBJECT_EXTENDED_LIMIT_INFORMATION of 64-bit Windows: 144 bytes, the flags at 16.
        assert ctypes.sizeof(ExtendedLimits) == 144
        assert ExtendedLimits.BasicLimitInformation.offset == 0
        assert windows._BasicLimits.LimitFlags.offset == 16
        assert ExtendedLimits.IoInfo.offset == 64


def test_ctrl_break_and_the_close_of_the_console_stop_the_bridge_and_ctrl_c_does_not() -> None:
    api = FakeWin32()
    stops: list[str] = []
    stopped = threading.Event()

    def stop() -> None:
        stops.append(threading.current_thread().name)
        stopped.set()

    assert windows.on_terminate(stop, api=api)
    (handler,) = api.handlers
    assert handler(CTRL_C_EVENT) is False
    assert stops == []
    assert handler(CTRL_BREAK_EVENT) is True
    assert stopped.wait(WAIT)
    stopped.clear()
    # At the close of the console the handler returns only after the stop (or its bound).
    assert handler(CTRL_CLOSE_EVENT) is True
    assert stopped.is_set()
    assert stops == ["mcpbridge-ctrl-event", "mcpbridge-ctrl-event"]


def test_a_handler_that_cannot_be_installed_is_reported_as_such() -> None:
    assert windows.on_terminate(lambda: None, api=FakeWin32(fail={"set_ctrl_handler"})) is False


def test_stdin_and_stdout_are_set_to_binary_mode() -> None:
    api = FakeWin32()
    windows.binary_stdio(api=api)
    assert api.calls == [("set_binary", 0), ("set_binary", 1)]


def test_the_token_folder_acl_allows_the_user_only_and_inherits_nothing() -> None:
    assert windows.owner_only_sddl("S-1-5-21-1-2-3-1001") == "D:P(A;OICI;FA;;;S-1-5-21-1-2-3-1001)"


@pytest.mark.skipif(sys.platform == "win32", reason="checks the refusal off Windows")
def test_the_real_win32_calls_are_refused_off_windows() -> None:
    with pytest.raises(OSError):
        windows.default_api()


def test_the_browser_gets_the_url_as_one_argument_and_no_secret_variable() -> None:
    api = FakeWin32()
    environ = {"PATH": "C:\\Windows", "MCP_BRIDGE_TOKEN_KEY": "k" * 64, "TEST_SECRET_HEADER": "s"}
    url = "http://127.0.0.1:33418/start?a=1&b=2&state=x%26y"
    windows.shell_open(url, forget={"MCP_BRIDGE_TOKEN_KEY", "TEST_SECRET_HEADER"}, api=api, environ=environ)
    assert api.calls == [("shell_open", url)]
    assert environ == {"PATH": "C:\\Windows"}


def test_the_token_folder_is_protected_through_the_win32_seam(tmp_path: Path) -> None:
    api = FakeWin32()
    windows.protect_directory(tmp_path, api=api)
    assert api.calls == [("protect", tmp_path)]


def test_the_named_event_of_the_process_runs_the_dump_and_the_close_frees_it() -> None:
    api = FakeWin32()
    dumped = threading.Semaphore(0)
    threads: list[str] = []

    def dump() -> None:
        threads.append(threading.current_thread().name)
        dumped.release()

    trigger = windows.on_dump(dump, api=api)
    assert trigger is not None
    name = f"Local\\mcpbridge-dump-{os.getpid()}"
    assert trigger.how == f"the event {name}"
    ((call, made_name),) = api.calls
    assert (call, made_name) == ("create_event", name)
    (handle,) = api.events
    try:
        for _ in range(2):
            api.set_event(handle)  # what another process of the user does to ask for a dump
            assert dumped.acquire(timeout=WAIT)
    finally:
        trigger.close()
    assert threads == ["mcpbridge-dump", "mcpbridge-dump"]
    assert api.calls[-1] == ("close_handle", handle)
    assert not [thread for thread in threading.enumerate() if thread.name == "mcpbridge-dump"]


def test_no_dump_trigger_off_the_main_thread_or_without_its_event() -> None:
    assert windows.on_dump(lambda: None, api=FakeWin32(fail={"create_event"})) is None
    found: list[object] = []
    api = FakeWin32()
    thread = threading.Thread(target=lambda: found.append(windows.on_dump(lambda: None, api=api)))
    thread.start()
    thread.join(WAIT)
    assert found == [None] and api.calls == []
