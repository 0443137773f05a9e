"""The platform layer on Windows: a job object, console control events, binary stdio.

The upstream command starts with ``CREATE_NEW_PROCESS_GROUP`` and joins a job
object that has ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``. Only the bridge holds the
handle of the job, so when the bridge ends, killed or not, the system closes the
handle and ends every process of the job: the command and all that it started
(a process started between the start of the command and its joining of the job
is not in the job; the window is a few system calls). Stopping the command
sends it Ctrl-Break (its own process group gets it, the bridge does not), then
ends the job.

The bridge stops at Ctrl-Break and at the close of its console (and at logoff
and shutdown) through ``SetConsoleCtrlHandler``. Its stdin and stdout are set
to binary mode, so no ``\\r`` is added or taken away.

A thread dump is asked for through a named event of the session,
``Local\\mcpbridge-dump-<pid>`` (:func:`on_dump`): Ctrl-Break already stops the
bridge, Ctrl-C reaches every process of the console, and VS Code starts the
bridge without a console that a user could type into. Only the user's own
processes can open the event (the default security of a named object).

Every Win32 call goes through :class:`Win32`, which :class:`Kernel32` fills
with :mod:`ctypes` on Windows; the tests give a fake. This module imports on
every system: the real calls exist only on Windows.
"""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from .common import DumpTrigger, DumpWaiter, ProcessTree, ThreadPipeWriter, start_piped

log = logging.getLogger("mcpbridge.upstream")

CREATE_NEW_PROCESS_GROUP: Final = 0x00000200
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: Final = 0x00002000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS: Final = 9
PROCESS_SET_QUOTA: Final = 0x0100
PROCESS_TERMINATE: Final = 0x0001
CTRL_C_EVENT: Final = 0
CTRL_BREAK_EVENT: Final = 1
CTRL_CLOSE_EVENT: Final = 2
CTRL_LOGOFF_EVENT: Final = 5
CTRL_SHUTDOWN_EVENT: Final = 6
#: The events after which Windows ends the process once the handler returns.
_ENDING_EVENTS: Final = frozenset({CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT})
#: The events that stop the bridge.
STOP_EVENTS: Final = frozenset({CTRL_BREAK_EVENT}) | _ENDING_EVENTS
#: How long the handler of an ending event lets the stop run (Windows allows 5 s).
ENDING_WAIT: Final = 4.5
#: The exit code of the processes of a job that the bridge ends.
KILLED_EXIT_CODE: Final = 1
#: What ``WaitForSingleObject`` returns when the object is signaled, and when the time passed.
WAIT_OBJECT_0: Final = 0x00000000
WAIT_TIMEOUT: Final = 0x00000102


class Win32(Protocol):
    """The Win32 calls of the platform layer (the seam that a fake fills in the tests)."""

    def create_kill_on_close_job(self) -> int:
        """A new job object with ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``; its handle."""

    def assign_process(self, job: int, pid: int) -> None:
        """Put the process ``pid`` into ``job``."""

    def terminate_job(self, job: int, exit_code: int) -> None:
        """End every process of ``job``."""

    def close_handle(self, handle: int) -> None: ...

    def send_ctrl_break(self, process_group: int) -> None:
        """Send Ctrl-Break to a process group (``GenerateConsoleCtrlEvent``)."""

    def set_ctrl_handler(self, handler: Callable[[int], bool]) -> None:
        """Install ``handler`` for the console control events (``SetConsoleCtrlHandler``)."""

    def set_binary(self, fd: int) -> None:
        """``msvcrt.setmode(fd, O_BINARY)``."""

    def shell_open(self, url: str) -> None:
        """``ShellExecuteW(NULL, "open", url, ...)`` (``os.startfile``)."""

    def try_lock(self, fd: int) -> bool:
        """Lock the first byte of ``fd`` without waiting; False when another process holds it."""

    def unlock(self, fd: int) -> None: ...

    def protect(self, path: Path) -> None:
        """Give ``path`` a protected ACL that allows the current user only."""

    def create_event(self, name: str) -> int:
        """A named auto-reset event, not signaled (``CreateEventW``); its handle."""

    def wait_event(self, handle: int, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the event (``WaitForSingleObject``); True when signaled."""

    def set_event(self, handle: int) -> None:
        """Signal the event (``SetEvent``)."""


class _IoCounters(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_ulonglong)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class _BasicLimits(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class ExtendedLimits(ctypes.Structure):
    """``JOBOBJECT_EXTENDED_LIMIT_INFORMATION``."""

    _fields_ = [
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


def kill_on_close_limits() -> ExtendedLimits:
    """The limits of the job of an upstream command."""
    limits = ExtendedLimits()
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    return limits


def owner_only_sddl(user_sid: str) -> str:
    """A protected DACL (no inherited entry) with full access for ``user_sid``, inherited by the files."""
    return f"D:P(A;OICI;FA;;;{user_sid})"


if sys.platform == "win32":
    import msvcrt
    from ctypes import wintypes

    class Kernel32:
        """:class:`Win32` through :mod:`ctypes` (Windows only)."""

        def __init__(self) -> None:
            self._k = ctypes.WinDLL("kernel32", use_last_error=True)
            self._a = ctypes.WinDLL("advapi32", use_last_error=True)
            self._k.CreateJobObjectW.restype = wintypes.HANDLE
            self._k.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
            self._k.SetInformationJobObject.restype = wintypes.BOOL
            self._k.SetInformationJobObject.argtypes = [
                wintypes.HANDLE,
                ctypes.c_int,
                ctypes.c_void_p,
                wintypes.DWORD,
            ]
            self._k.OpenProcess.restype = wintypes.HANDLE
            self._k.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
            self._k.AssignProcessToJobObject.restype = wintypes.BOOL
            self._k.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
            self._k.TerminateJobObject.restype = wintypes.BOOL
            self._k.TerminateJobObject.argtypes = [wintypes.HANDLE, wintypes.UINT]
            self._k.CloseHandle.restype = wintypes.BOOL
            self._k.CloseHandle.argtypes = [wintypes.HANDLE]
            self._k.GenerateConsoleCtrlEvent.restype = wintypes.BOOL
            self._k.GenerateConsoleCtrlEvent.argtypes = [wintypes.DWORD, wintypes.DWORD]
            self._k.GetCurrentProcess.restype = wintypes.HANDLE
            self._k.LocalFree.argtypes = [ctypes.c_void_p]
            self._a.OpenProcessToken.argtypes = [
                wintypes.HANDLE,
                wintypes.DWORD,
                ctypes.POINTER(wintypes.HANDLE),
            ]
            self._a.GetTokenInformation.argtypes = [
                wintypes.HANDLE,
                ctypes.c_int,
                ctypes.c_void_p,
                wintypes.DWORD,
                ctypes.POINTER(wintypes.DWORD),
            ]
            self._a.ConvertSidToStringSidW.argtypes = [ctypes.c_void_p, ctypes.POINTER(wintypes.LPWSTR)]
            self._a.ConvertStringSecurityDescriptorToSecurityDescriptorW.argtypes = [
                wintypes.LPCWSTR,
                wintypes.DWORD,
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.c_void_p,
            ]
            self._a.SetFileSecurityW.argtypes = [wintypes.LPCWSTR, wintypes.DWORD, ctypes.c_void_p]
            self._handler_type = ctypes.WINFUNCTYPE(wintypes.BOOL, wintypes.DWORD)
            self._k.SetConsoleCtrlHandler.restype = wintypes.BOOL
            self._k.SetConsoleCtrlHandler.argtypes = [self._handler_type, wintypes.BOOL]
            self._handlers: list[Any] = []  # kept alive while installed
            self._k.CreateEventW.restype = wintypes.HANDLE
            self._k.CreateEventW.argtypes = [ctypes.c_void_p, wintypes.BOOL, wintypes.BOOL, wintypes.LPCWSTR]
            self._k.WaitForSingleObject.restype = wintypes.DWORD
            self._k.WaitForSingleObject.argtypes = [wintypes.HANDLE, wintypes.DWORD]
            self._k.SetEvent.restype = wintypes.BOOL
            self._k.SetEvent.argtypes = [wintypes.HANDLE]

        def _check(self, ok: object, what: str) -> None:
            if not ok:
                code = ctypes.get_last_error()
                raise OSError(code, f"{what} failed (error {code})")

        def create_kill_on_close_job(self) -> int:
            job = self._k.CreateJobObjectW(None, None)
            self._check(job, "CreateJobObjectW")
            limits = kill_on_close_limits()
            ok = self._k.SetInformationJobObject(
                job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, ctypes.byref(limits), ctypes.sizeof(limits)
            )
            if not ok:
                code = ctypes.get_last_error()
                self._k.CloseHandle(job)
                raise OSError(code, f"SetInformationJobObject failed (error {code})")
            return int(job)

        def assign_process(self, job: int, pid: int) -> None:
            process = self._k.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
            self._check(process, "OpenProcess")
            try:
                self._check(self._k.AssignProcessToJobObject(job, process), "AssignProcessToJobObject")
            finally:
                self._k.CloseHandle(process)

        def terminate_job(self, job: int, exit_code: int) -> None:
            self._check(self._k.TerminateJobObject(job, exit_code), "TerminateJobObject")

        def close_handle(self, handle: int) -> None:
            self._k.CloseHandle(handle)

        def send_ctrl_break(self, process_group: int) -> None:
            self._check(
                self._k.GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, process_group), "GenerateConsoleCtrlEvent"
            )

        def set_ctrl_handler(self, handler: Callable[[int], bool]) -> None:
            routine = self._handler_type(lambda event: 1 if handler(int(event)) else 0)
            self._check(self._k.SetConsoleCtrlHandler(routine, True), "SetConsoleCtrlHandler")
            self._handlers.append(routine)

        def set_binary(self, fd: int) -> None:
            msvcrt.setmode(fd, os.O_BINARY)

        def shell_open(self, url: str) -> None:
            os.startfile(url)  # ShellExecuteW(NULL, "open", url): the URL is one argument

        def try_lock(self, fd: int) -> bool:
            os.lseek(fd, 0, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            except OSError:
                return False
            return True

        def unlock(self, fd: int) -> None:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

        def _user_sid(self) -> str:
            token = wintypes.HANDLE()
            self._check(
                self._a.OpenProcessToken(self._k.GetCurrentProcess(), 0x0008, ctypes.byref(token)),
                "OpenProcessToken",
            )
            try:
                size = wintypes.DWORD()
                self._a.GetTokenInformation(token, 1, None, 0, ctypes.byref(size))  # TokenUser
                buffer = ctypes.create_string_buffer(size.value)
                self._check(
                    self._a.GetTokenInformation(token, 1, buffer, size, ctypes.byref(size)),
                    "GetTokenInformation",
                )
                sid = ctypes.cast(buffer, ctypes.POINTER(ctypes.c_void_p))[0]  # TOKEN_USER.User.Sid
                text = wintypes.LPWSTR()
                self._check(
                    self._a.ConvertSidToStringSidW(ctypes.c_void_p(sid), ctypes.byref(text)),
                    "ConvertSidToStringSidW",
                )
                try:
                    return str(text.value)
                finally:
                    self._k.LocalFree(text)
            finally:
                self._k.CloseHandle(token)

        def protect(self, path: Path) -> None:
            descriptor = ctypes.c_void_p()
            self._check(
                self._a.ConvertStringSecurityDescriptorToSecurityDescriptorW(
                    owner_only_sddl(self._user_sid()), 1, ctypes.byref(descriptor), None
                ),
                "ConvertStringSecurityDescriptorToSecurityDescriptorW",
            )
            try:
                # DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION
                self._check(
                    self._a.SetFileSecurityW(str(path), 0x00000004 | 0x80000000, descriptor),
                    "SetFileSecurityW",
                )
            finally:
                self._k.LocalFree(descriptor)

        def create_event(self, name: str) -> int:
            event = self._k.CreateEventW(None, False, False, name)
            self._check(event, "CreateEventW")
            return int(event)

        def wait_event(self, handle: int, timeout: float) -> bool:
            result = self._k.WaitForSingleObject(handle, max(0, int(timeout * 1000)))
            if result not in (WAIT_OBJECT_0, WAIT_TIMEOUT):
                self._check(False, "WaitForSingleObject")
            return bool(result == WAIT_OBJECT_0)

        def set_event(self, handle: int) -> None:
            self._check(self._k.SetEvent(handle), "SetEvent")

    def default_api() -> Win32:
        global _API
        with _API_LOCK:
            if _API is None:
                _API = Kernel32()
            return _API

else:

    def default_api() -> Win32:
        raise OSError("the Win32 calls exist on Windows only")


_API: Win32 | None = None
_API_LOCK = threading.Lock()


class WindowsTree(ProcessTree):
    """The upstream command in its own process group and in a job that ends with the bridge."""

    def __init__(self, proc: subprocess.Popen[bytes], job: int | None, api: Win32) -> None:
        super().__init__(proc)
        self.job = job
        self._api = api
        self._lock = threading.Lock()

    def terminate(self) -> None:
        try:
            self._api.send_ctrl_break(self.proc.pid)
        except OSError as exc:
            log.debug("Ctrl-Break to the upstream process group failed: %s", exc.strerror)

    def kill(self) -> None:
        with self._lock:
            job = self.job
        if job is None:
            self._kill_process()
            return
        try:
            self._api.terminate_job(job, KILLED_EXIT_CODE)
        except OSError as exc:
            log.debug("ending the job of the upstream server failed: %s", exc.strerror)
            self._kill_process()

    def _kill_process(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass

    def release(self) -> None:
        with self._lock:
            job, self.job = self.job, None
        if job is not None:
            self._api.close_handle(job)  # kill-on-close: whatever is left of the tree ends


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | None,
    bufsize: int,
    api: Win32 | None = None,
    popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
) -> WindowsTree:
    """Start ``argv`` with pipes on its stdio, in a new process group, inside a kill-on-close job.

    A job that cannot be made or joined leaves the command without it (a debug
    line says so): the close still ends the command itself.

    Raises:
        OSError, ValueError, TypeError, subprocess.SubprocessError: as ``subprocess.Popen``.
    """
    api = api if api is not None else default_api()
    job: int | None
    try:
        job = api.create_kill_on_close_job()
    except OSError as exc:
        log.debug("no job object for the upstream server: %s", exc.strerror)
        job = None
    try:
        proc = start_piped(
            argv, env=env, cwd=cwd, bufsize=bufsize, popen=popen, creationflags=CREATE_NEW_PROCESS_GROUP
        )
    except BaseException:
        if job is not None:
            api.close_handle(job)
        raise
    if job is not None:
        try:
            api.assign_process(job, proc.pid)
        except OSError as exc:
            log.debug("the upstream server is not in its job object: %s", exc.strerror)
            api.close_handle(job)
            job = None
    return WindowsTree(proc, job, api)


def shell_open(
    url: str,
    *,
    forget: Collection[str] = (),
    api: Win32 | None = None,
    environ: MutableMapping[str, str] = os.environ,
) -> None:
    """Open ``url`` with ``ShellExecuteW``: the URL is one argument, no ``cmd /c start`` cuts it.

    The browser inherits the environment of this process: the names in
    ``forget`` (the secret variables, read at the start) are removed from it first.

    Raises:
        OSError: the shell did not open the URL.
    """
    api = api if api is not None else default_api()
    for name in forget:
        environ.pop(name, None)
    api.shell_open(url)


def protect_directory(path: Path, *, api: Win32 | None = None) -> None:
    """Give ``path`` a protected ACL that allows the current user only (``SetFileSecurityW``).

    The ACL is ``D:P(A;OICI;FA;;;<user SID>)``: no entry comes from the parent
    folders, and the files made inside inherit the same single entry.

    Raises:
        OSError: the ACL did not change.
    """
    (api if api is not None else default_api()).protect(path)


def widen_pipe(fd: int) -> None:
    """Windows pipes keep the size that ``subprocess`` gave them."""


def pipe_writer(fd: int, *, threaded: bool | None = None) -> ThreadPipeWriter:
    """Windows pipes have no ``poll``: the writer thread writes with blocking writes."""
    return ThreadPipeWriter(fd)


def on_terminate(callback: Callable[[], None], *, api: Win32 | None = None) -> bool:
    """Run ``callback`` on a new thread at Ctrl-Break or at the close of the console.

    At a close, logoff or shutdown Windows ends the process as soon as the
    handler returns: the handler waits for the stop, at most :data:`ENDING_WAIT`.
    """
    api = api if api is not None else default_api()

    def handler(event: int) -> bool:
        if event not in STOP_EVENTS:
            return False
        done = threading.Event()

        def run() -> None:
            try:
                callback()
            finally:
                done.set()

        threading.Thread(target=run, name="mcpbridge-ctrl-event", daemon=True).start()
        if event in _ENDING_EVENTS:
            # Windows ends the process when the handler returns: the wait only gives the
            # callback its time, and the handler returns the same either way.
            done.wait(ENDING_WAIT)
        return True

    try:
        api.set_ctrl_handler(handler)
    except OSError as exc:
        log.debug("no handler of console events: %s", exc.strerror)
        return False
    return True


def dump_event_name(pid: int) -> str:
    """The name of the event that asks the bridge with the process id ``pid`` for a thread dump."""
    return f"Local\\mcpbridge-dump-{pid}"


class EventWaiter(DumpWaiter):
    """The named event of :func:`dump_event_name` asks for a thread dump.

    Raises:
        OSError: the event was not made.
    """

    def __init__(self, api: Win32, name: str) -> None:
        self.how = f"the event {name}"
        self._api = api
        self._handle = api.create_event(name)

    def wait(self, timeout: float) -> bool:
        return self._api.wait_event(self._handle, timeout)

    def wake(self) -> None:
        try:
            self._api.set_event(self._handle)
        except OSError:
            pass

    def close(self) -> None:
        self._api.close_handle(self._handle)


def on_dump(
    callback: Callable[[], None], *, take_over: bool = True, api: Win32 | None = None
) -> DumpTrigger | None:
    """Run ``callback`` on the ``mcpbridge-dump`` thread each time the event of
    :func:`dump_event_name` is signaled; ``None`` when not on the main thread, or when
    the event was not made. The event is the process's own, so ``take_over`` changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    api = api if api is not None else default_api()
    try:
        waiter = EventWaiter(api, dump_event_name(os.getpid()))
    except OSError as exc:
        log.debug("no event for a thread dump: %s", exc.strerror)
        return None
    trigger = DumpTrigger(waiter, callback)
    trigger.start()
    return trigger


def binary_stdio(*, api: Win32 | None = None) -> None:
    """Set stdin and stdout to binary mode: no ``\\r`` is added or taken away."""
    api = api if api is not None else default_api()
    for fd in (0, 1):
        try:
            api.set_binary(fd)
        except OSError:
            pass  # not a file of the C runtime (no console, a closed stream)


def try_lock(fd: int) -> bool:
    return default_api().try_lock(fd)


def unlock(fd: int) -> None:
    default_api().unlock(fd)
