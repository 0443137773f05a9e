"""The POSIX platform layer on real processes: the guardian of a process group, the lock file."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import WAIT, read_line
from mcpbridge import platform
from mcpbridge.platform.posix import Guardian

REPO = Path(__file__).resolve().parents[2]

#: A process group of two sleeping processes: a leader and a child it leaves behind.
GROUP_SCRIPT = textwrap.dedent(
    """
    import subprocess, sys, threading
    child = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait(600)"])
    print(child.pid, flush=True)
    threading.Event().wait(600)
    """
)

#: A stand-in for the bridge: it starts a guardian of the group in argv[2] and waits to be killed.
BRIDGE_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    sys.path.insert(0, sys.argv[1])
    from mcpbridge.platform.posix import Guardian
    guardian = Guardian.start(int(sys.argv[2]))
    print(guardian.pid, flush=True)
    threading.Event().wait(600)
    """
)


def pidfd_gone(fd: int, timeout: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


@pytest.fixture
def group() -> Iterator[tuple[subprocess.Popen[bytes], list[int]]]:
    """A process group (its leader, and pidfds of the leader and of its child)."""
    leader = subprocess.Popen(
        [sys.executable, "-c", GROUP_SCRIPT], stdout=subprocess.PIPE, start_new_session=True
    )
    assert leader.stdout is not None
    child = int(read_line(leader.stdout, "the pid of the group leader's child"))
    fds = [os.pidfd_open(leader.pid), os.pidfd_open(child)]
    yield leader, fds
    try:
        os.killpg(leader.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    leader.wait(WAIT)
    leader.stdout.close()
    for fd in fds:
        os.close(fd)


def test_the_guardian_kills_the_group_when_its_bridge_is_killed(
    group: tuple[subprocess.Popen[bytes], list[int]],
) -> None:
    leader, fds = group
    bridge = subprocess.Popen(
        [sys.executable, "-c", BRIDGE_SCRIPT, str(REPO), str(leader.pid)], stdout=subprocess.PIPE
    )
    assert bridge.stdout is not None
    guardian = os.pidfd_open(int(read_line(bridge.stdout, "the pid of the guardian")))
    try:
        assert not pidfd_gone(fds[1], 0)
        bridge.kill()
        assert bridge.wait(WAIT) == -signal.SIGKILL
        assert all(pidfd_gone(fd, WAIT) for fd in fds), "a process of the group outlived the bridge"
        assert pidfd_gone(guardian, WAIT), "the guardian did not exit after its work"
    finally:
        os.close(guardian)
        bridge.stdout.close()


def test_a_released_guardian_exits_without_a_signal(group: tuple[subprocess.Popen[bytes], list[int]]) -> None:
    leader, fds = group
    guardian = Guardian.start(leader.pid)
    assert guardian is not None
    guardian.release()
    assert guardian.proc.returncode == 0
    assert not any(pidfd_gone(fd, 0) for fd in fds), "the released guardian signalled the group"
    guardian.release()  # a second release does nothing


def test_the_tree_of_spawn_has_a_guardian_that_its_release_reaps() -> None:
    tree = platform.spawn(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], env=None, cwd=None, bufsize=0
    )
    guardian = getattr(tree, "guardian", None)
    assert isinstance(guardian, Guardian)
    assert os.getpgid(tree.pid) == tree.pid
    assert os.getpgid(guardian.pid) == guardian.pid  # a session of its own: not in the bridge's group
    assert tree.proc.stdin is not None
    tree.proc.stdin.close()
    assert tree.proc.wait(WAIT) == 0
    tree.kill()
    tree.release()
    assert guardian.proc.returncode == 0
    for stream in (tree.proc.stdout, tree.proc.stderr):
        assert stream is not None
        stream.close()


# --------------------------------------------------------------------------- the thread dump


class Dumps:
    """The callback of a dump trigger: records the thread of each call, and wakes the test."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.called = threading.Semaphore(0)

    def __call__(self) -> None:
        self.threads.append(threading.current_thread().name)
        self.called.release()


def test_sigusr1_runs_the_dump_on_the_dump_thread_and_the_close_puts_the_former_handler_back() -> None:
    former_ran = threading.Event()

    def former(signum: int, _frame: object) -> None:
        former_ran.set()

    previous = signal.signal(signal.SIGUSR1, former)
    try:
        dumps = Dumps()
        trigger = platform.on_dump(dumps)
        assert trigger is not None and trigger.how == "SIGUSR1"
        try:
            for _ in range(2):
                os.kill(os.getpid(), signal.SIGUSR1)
                assert dumps.called.acquire(timeout=WAIT)
        finally:
            trigger.close()
        assert dumps.threads == ["mcpbridge-dump", "mcpbridge-dump"]
        assert signal.getsignal(signal.SIGUSR1) is former
        os.kill(os.getpid(), signal.SIGUSR1)
        assert former_ran.wait(WAIT)
        assert dumps.threads == ["mcpbridge-dump", "mcpbridge-dump"]
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_dump_trigger_is_installed_on_the_main_thread_only() -> None:
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(platform.on_dump(Dumps())), name="test-not-main")
    thread.start()
    thread.join(WAIT)
    assert found == [None]
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


def test_without_take_over_a_handler_of_the_program_keeps_sigusr1() -> None:
    def own(signum: int, _frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGUSR1, own)
    try:
        assert platform.on_dump(Dumps(), take_over=False) is None
        assert signal.getsignal(signal.SIGUSR1) is own
    finally:
        signal.signal(signal.SIGUSR1, previous)
